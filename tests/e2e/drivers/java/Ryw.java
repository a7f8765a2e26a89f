// Issue 18: the read-your-writes workload through the PostgreSQL JDBC driver (Debian's
// libpostgresql-jdbc-java), with its defaults: PreparedStatement and prepareThreshold=5, so from the
// fifth execution on every statement is a named server-side prepared statement.
//
// Usage: java -cp build:/usr/share/java/postgresql.jar Ryw HOST PORT STANDBY_PORT RO_KEY RW_KEY READS ROUNDS [txn|txn-autosave]
// With `txn`, autocommit is off (Spring's and Hibernate's default): every read and every write is
// a transaction of its own, committed; pgjdbc sends BEGIN in the same batch as its first statement.
// `txn-autosave` adds autosave=always: a SAVEPOINT before every statement, in its batch.
// Phase ro: READS point reads of RO_KEY in a session that has written nothing.
// Phase rw: ROUNDS times UPDATE kv SET v = i WHERE k = RW_KEY, then read it back at once (stale if v != i).
// Every read selects inet_server_port(), which says which server answered. Prints one JSON line.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.Properties;

public final class Ryw {
    public static void main(String[] args) throws Exception {
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        int standbyPort = Integer.parseInt(args[2]);
        int roKey = Integer.parseInt(args[3]);
        int rwKey = Integer.parseInt(args[4]);
        int reads = Integer.parseInt(args[5]);
        int rounds = Integer.parseInt(args[6]);
        boolean txn = args.length > 7 && args[7].startsWith("txn");
        Properties props = new Properties();
        props.setProperty("user", "app_trust");
        props.setProperty("sslmode", "disable");
        props.setProperty("connectTimeout", "10");
        props.setProperty("socketTimeout", "20"); // a hang fails this program, not the test run
        if (args.length > 7 && args[7].equals("txn-autosave")) props.setProperty("autosave", "always");
        String url = "jdbc:postgresql://" + host + ":" + port + "/app";
        long roStandby = 0, pwStandby = 0, stale = 0;
        try (Connection c = DriverManager.getConnection(url, props)) {
            c.setAutoCommit(!txn);
            try (PreparedStatement read = c.prepareStatement("SELECT v, inet_server_port() FROM kv WHERE k = ?");
                 PreparedStatement write = c.prepareStatement("UPDATE kv SET v = ? WHERE k = ?")) {
                for (int i = 0; i < reads; i++) {
                    read.setInt(1, roKey);
                    try (ResultSet rs = read.executeQuery()) {
                        if (!rs.next()) throw new IllegalStateException("row " + roKey + " missing");
                        if (rs.getInt(2) == standbyPort) roStandby++;
                    }
                    if (txn) c.commit();
                }
                for (int i = 1; i <= rounds; i++) {
                    write.setInt(1, i);
                    write.setInt(2, rwKey);
                    if (write.executeUpdate() != 1) throw new IllegalStateException("row " + rwKey + " missing");
                    if (txn) c.commit();
                    read.setInt(1, rwKey);
                    try (ResultSet rs = read.executeQuery()) {
                        if (!rs.next()) throw new IllegalStateException("row " + rwKey + " missing");
                        if (rs.getInt(1) != i) stale++;
                        if (rs.getInt(2) == standbyPort) pwStandby++;
                    }
                    if (txn) c.commit();
                }
            }
        }
        System.out.printf("{\"ro_reads\": %d, \"ro_standby\": %d, \"pw_reads\": %d, \"pw_standby\": %d, \"stale\": %d}%n",
                reads, roStandby, rounds, pwStandby, stale);
    }
}
