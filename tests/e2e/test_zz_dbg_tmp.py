import time, struct
from test_red2_findings import Client, query, parse, bind, execute, describe, FLUSH, SYNC
SQL = "SELECT v, inet_server_port() FROM kv WHERE k = $1"
def test_x(pair, proxy):
    c = Client(proxy.port)
    time.sleep(0.3)
    c.send(query("BEGIN"))
    print("DBG1", c.answers(1))
    c.send(parse("", SQL), describe(b"S", ""), FLUSH)
    print("DBG2", c.answers(0))
    c.send(parse("", SQL), bind("", "", ("1",)), execute("", 1), SYNC)
    print("DBG3", c.answers(1))
    c.send(query("COMMIT"))
    print("DBG4", c.answers(1))
    c.close()
    print("DBGLOG", proxy.log)
