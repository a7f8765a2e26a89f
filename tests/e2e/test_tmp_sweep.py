import os, time, json
import psycopg, pytest
import wire_difftest as wd
from e2e_support import start_proxy, stop_proxy

def _seeds(spec):
    out=[]
    for part in spec.split(","):
        a,_,b=part.partition("-"); out.extend(range(int(a), int(b or a)+1))
    return out

@pytest.mark.timeout(3000)
def test_sweep(pair, tmp_path_factory):
    settings = json.loads(os.environ.get("SW_SETTINGS", "{}"))
    su = pair.primary.dsn(dbname="app")
    with psycopg.connect(su, autocommit=True) as c:
        c.execute(wd.SETUP_SQL)
    pair.wait_replayed()
    proxy = start_proxy(pair, tmp_path_factory.mktemp("sw"), settings=settings)
    args = type("Args", (), {})()
    args.proxy_dsn = proxy.dsn(); args.primary_dsn = pair.primary.dsn(user="app_trust", dbname="app")
    args.standby_dsn = pair.standby.dsn(user="app_trust", dbname="app"); args.proxy_log = str(proxy.log); args.answer_s = 4.0
    h = wd.Harness(args)
    fails=[]; known={}
    try:
        for seed in _seeds(os.environ["SW_SEEDS"]):
            steps = wd.gen_session(seed, int(os.environ.get("SW_STEPS","18")), set(os.environ.get("SW_AVOID","prepstmts").split(",")),
                                   float(os.environ.get("SW_READ","0.85")), large=float(os.environ.get("SW_LARGE","0")),
                                   long_names=os.environ.get("SW_LONG")=="1")
            d = h.check(steps)
            if d is None: continue
            k = wd.known_finding(d)
            if k: known[k]=known.get(k,0)+1; continue
            fails.append(f"seed {seed}: {d['kind']} {d.get('detail','')} at step {d.get('step')}\n  primary: {d.get('ref_at')}\n  proxy:   {d.get('got_at')}")
    finally:
        h.su.close()
        stop_proxy(proxy)
    print("SWEEP", len(fails), known)
    for f in fails: print(f[:1500])
    assert not fails
