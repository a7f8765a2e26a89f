// Examiner round 4: JDBC behaviours through the proxy, each a named check printing one JSON line.
// The same check run against the primary alone is the oracle (the test compares the two lines).
//
// Usage: java -cp build:/usr/share/java/postgresql.jar Red4 CHECK HOST PORT PRIMARY_PORT
// Every read selects inet_server_port() where it matters; "standby" counts reads another port answered.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

public final class Red4 {
    static String host;
    static int port, primaryPort;

    static Connection connect(int p, String extra) throws SQLException {
        Properties props = new Properties();
        props.setProperty("user", "app_trust");
        props.setProperty("sslmode", "disable");
        props.setProperty("connectTimeout", "10");
        props.setProperty("socketTimeout", "20"); // a hang fails this program, not the test run
        if (extra != null)
            for (String kv : extra.split("&")) {
                String[] a = kv.split("=", 2);
                props.setProperty(a[0], a[1]);
            }
        return DriverManager.getConnection("jdbc:postgresql://" + host + ":" + p + "/app", props);
    }

    static long scalar(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    static String q(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    public static void main(String[] args) throws Exception {
        String check = args[0];
        host = args[1];
        port = Integer.parseInt(args[2]);
        primaryPort = Integer.parseInt(args[3]);
        String out;
        switch (check) {
            case "rr_snapshot": out = rrSnapshot(); break;
            case "fetch_size": out = fetchSize(); break;
            case "savepoint": out = savepoint(); break;
            case "discard_all": out = discardAll(args.length > 4 ? args[4] : "DISCARD ALL"); break;
            case "cancel": out = cancel(); break;
            case "listen": out = listen(); break;
            case "types": out = types(); break;
            default: throw new IllegalArgumentException(check);
        }
        System.out.println(out);
    }

    // setTransactionIsolation(REPEATABLE_READ) is sent as SET SESSION CHARACTERISTICS (extended
    // protocol); a transaction then keeps its first snapshot: another session's commit is not seen.
    static String rrSnapshot() throws Exception {
        try (Connection c = connect(port, null); Connection w = connect(primaryPort, null)) {
            try (Statement s = w.createStatement()) {
                s.execute("DELETE FROM kv WHERE k BETWEEN 4100 AND 4199");
            }
            Thread.sleep(600); // the standby replayed the delete (200 ms apply delay)
            c.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
            c.setAutoCommit(false);
            List<Long> seen = new ArrayList<>();
            try (PreparedStatement r = c.prepareStatement("SELECT count(*) FROM kv WHERE k BETWEEN 4100 AND 4199 AND inet_server_port() > 0")) {
                for (int i = 0; i < 8; i++) {
                    try (ResultSet rs = r.executeQuery()) { rs.next(); seen.add(rs.getLong(1)); }
                    try (Statement s = w.createStatement()) {
                        s.execute("INSERT INTO kv VALUES (" + (4100 + i) + ", 1)");
                    }
                    Thread.sleep(400); // the other session's commit reaches the standby
                }
            }
            c.commit();
            return "{\"seen\": " + seen + "}";
        }
    }

    // setFetchSize inside a transaction: a portal with a row limit, Execute after Execute.
    static String fetchSize() throws Exception {
        try (Connection c = connect(port, null)) {
            c.setAutoCommit(false);
            long n = 0, sum = 0;
            try (PreparedStatement r = c.prepareStatement("SELECT g, inet_server_port() FROM generate_series(1, ?) g")) {
                r.setFetchSize(7);
                for (int round = 0; round < 7; round++) {
                    r.setInt(1, 1000);
                    try (ResultSet rs = r.executeQuery()) {
                        while (rs.next()) { n++; sum += rs.getLong(1); }
                    }
                }
            }
            c.commit();
            return "{\"rows\": " + n + ", \"sum\": " + sum + "}";
        }
    }

    static String savepoint() throws Exception {
        try (Connection c = connect(port, null)) {
            try (Statement s = c.createStatement()) { s.execute("DELETE FROM kv WHERE k BETWEEN 4200 AND 4299"); }
            c.setAutoCommit(false);
            List<Long> seen = new ArrayList<>();
            try (PreparedStatement ins = c.prepareStatement("INSERT INTO kv VALUES (?, 1)");
                 PreparedStatement cnt = c.prepareStatement("SELECT count(*) FROM kv WHERE k BETWEEN 4200 AND 4299")) {
                for (int i = 0; i < 6; i++) {
                    Savepoint sp = c.setSavepoint();
                    ins.setInt(1, 4200 + 2 * i); ins.executeUpdate();
                    Savepoint sp2 = c.setSavepoint();
                    ins.setInt(1, 4201 + 2 * i); ins.executeUpdate();
                    c.rollback(sp2);
                    try (ResultSet rs = cnt.executeQuery()) { rs.next(); seen.add(rs.getLong(1)); }
                    c.releaseSavepoint(sp);
                }
                c.commit();
                c.setAutoCommit(true);
                for (int i = 0; i < 6; i++)
                    try (ResultSet rs = cnt.executeQuery()) { rs.next(); seen.add(rs.getLong(1)); }
            }
            return "{\"seen\": " + seen + "}";
        }
    }

    // A pool resetting the connection (DISCARD ALL / DEALLOCATE ALL) after server-side prepares:
    // the driver re-prepares; every read must answer as on the primary.
    static String discardAll(String reset) throws Exception {
        try (Connection c = connect(port, "prepareThreshold=2")) {
            List<String> got = new ArrayList<>();
            for (int round = 0; round < 3; round++) {
                try (PreparedStatement r = c.prepareStatement("SELECT ?::int + 1, inet_server_port() > 0")) {
                    for (int i = 0; i < 5; i++) {
                        r.setInt(1, i);
                        try (ResultSet rs = r.executeQuery()) { rs.next(); got.add(rs.getString(1)); }
                    }
                }
                try (Statement s = c.createStatement()) { s.execute(reset); }
            }
            return "{\"got\": " + q(String.join(",", got)) + "}";
        }
    }

    // Statement.cancel() of a long read: it must stop within a second or two, with 57014.
    static String cancel() throws Exception {
        try (Connection c = connect(port, null)) {
            String where;
            try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT inet_server_port()")) {
                rs.next(); where = rs.getInt(1) == primaryPort ? "primary" : "standby";
            }
            List<String> results = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                try (PreparedStatement s = c.prepareStatement("SELECT pg_sleep(?), inet_server_port()")) {
                    s.setInt(1, 8);
                    Thread t = new Thread(() -> { try { Thread.sleep(500); s.cancel(); } catch (Exception e) { } });
                    t.start();
                    long t0 = System.nanoTime();
                    String state;
                    try (ResultSet rs = s.executeQuery()) { rs.next(); state = "finished"; }
                    catch (SQLException e) { state = e.getSQLState(); }
                    long ms = (System.nanoTime() - t0) / 1000000;
                    t.join();
                    results.add(q(state + (ms < 3000 ? ":fast" : ":slow")));
                }
                try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT 41 + 1")) {
                    rs.next(); results.add(q("after:" + rs.getInt(1)));
                }
            }
            return "{\"first_read\": " + q(where) + ", \"results\": " + results + "}";
        }
    }

    // LISTEN, then reads on the listening connection while another session NOTIFYs: every
    // notification is delivered (JDBC collects them with the answers to the connection's queries).
    static String listen() throws Exception {
        try (Connection c = connect(port, null); Connection w = connect(primaryPort, null)) {
            org.postgresql.PGConnection pg = c.unwrap(org.postgresql.PGConnection.class);
            try (Statement s = c.createStatement()) { s.execute("LISTEN red4_chan"); }
            int got = 0, sent = 0;
            long standby = 0;
            for (int i = 0; i < 20; i++) {
                try (Statement s = w.createStatement()) { s.execute("NOTIFY red4_chan, '" + i + "'"); sent++; }
                Thread.sleep(30);
                try (PreparedStatement r = c.prepareStatement("SELECT inet_server_port() FROM kv WHERE k = ?")) {
                    r.setInt(1, 1); try (ResultSet rs = r.executeQuery()) { if (rs.next() && rs.getInt(1) != primaryPort) standby++; }
                }
                org.postgresql.PGNotification[] ns = pg.getNotifications(200);
                if (ns != null) got += ns.length;
            }
            for (int i = 0; i < 10 && got < sent; i++) {
                org.postgresql.PGNotification[] ns = pg.getNotifications(300);
                if (ns != null) got += ns.length;
            }
            return "{\"sent\": " + sent + ", \"got\": " + got + ", \"standby\": " + standby + "}";
        }
    }

    // Typed parameters, binary transfer after the threshold: values round-trip as on the primary.
    static String types() throws Exception {
        try (Connection c = connect(port, "prepareThreshold=1")) {
            List<String> got = new ArrayList<>();
            try (PreparedStatement r = c.prepareStatement(
                    "SELECT ?::numeric * 2, ?::timestamptz, ?::text || 'x', ?::bytea, ?::int8[], inet_server_port() > 0")) {
                for (int i = 0; i < 6; i++) {
                    r.setBigDecimal(1, new java.math.BigDecimal("12345678901234567890.12345"));
                    r.setTimestamp(2, java.sql.Timestamp.valueOf("2024-02-29 12:34:56.789"));
                    r.setString(3, "é€" + i);
                    r.setBytes(4, new byte[] {0, 1, (byte) 255});
                    r.setArray(5, c.createArrayOf("int8", new Long[] {1L, (long) i}));
                    try (ResultSet rs = r.executeQuery()) {
                        rs.next();
                        got.add(rs.getString(1) + "|" + rs.getString(2) + "|" + rs.getString(3) + "|" + java.util.Arrays.toString(rs.getBytes(4)) + "|" + rs.getString(5));
                    }
                }
            }
            return "{\"got\": " + q(String.join(";", got)) + "}";
        }
    }
}
