/* Issue 17.3: hidden statements must not disturb the client's unnamed prepared statement.
 *
 * Through libpq, as psql's \gdesc and any PQprepare("") user does: after a write (which makes the
 * stock dialect probe the writer's position), the unnamed statement the client prepared must still
 * exist for PQdescribePrepared("") and PQexecPrepared(""). Scenarios:
 *   after_write: UPDATE (simple Query); PQprepare(""); PQdescribePrepared(""); PQexecPrepared("") x3
 *   write_stmt:  PQprepare("", UPDATE ... RETURNING); PQexecPrepared("") x3 (each run is a write)
 *   read_after:  PQprepare("", SELECT); write through PQexec; PQprepare("") again; PQexecPrepared("")
 * Prints one line per step ("ok <step> <value>" or "fail <step> <SQLSTATE> <message>") and exits
 * 0 when every step succeeded, 1 otherwise. Usage: unnamed_prepared CONNINFO KEY */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void report(const char *step, PGresult *r, ExecStatusType want) {
    if (r && PQresultStatus(r) == want) {
        printf("ok %s %s\n", step, (want == PGRES_TUPLES_OK && PQntuples(r) > 0) ? PQgetvalue(r, 0, 0) : "-");
    } else {
        const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
        const char *msg = r ? PQresultErrorMessage(r) : "no result";
        char line[512];
        snprintf(line, sizeof line, "%s", msg ? msg : "");
        line[strcspn(line, "\n")] = 0;
        printf("fail %s %s %s\n", step, state ? state : "-", line);
        failures++;
    }
    fflush(stdout);
    PQclear(r);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s CONNINFO KEY\n", argv[0]);
        return 2;
    }
    PGconn *conn = PQconnectdb(argv[1]);
    if (PQstatus(conn) != CONNECTION_OK) {
        fprintf(stderr, "connect: %s", PQerrorMessage(conn));
        return 2;
    }
    const char *key = argv[2];
    const char *params[1] = {key};
    char sql[256];

    /* after_write: the write's probe runs before the client's Parse of the unnamed statement. */
    snprintf(sql, sizeof sql, "UPDATE kv SET v = v + 1 WHERE k = %s", key);
    report("after_write.update", PQexec(conn, sql), PGRES_COMMAND_OK);
    report("after_write.prepare", PQprepare(conn, "", "SELECT v, inet_server_port() FROM kv WHERE k = $1::int", 1, NULL),
           PGRES_COMMAND_OK);
    report("after_write.describe", PQdescribePrepared(conn, ""), PGRES_COMMAND_OK);
    for (int i = 0; i < 3; i++) {
        char step[64];
        snprintf(step, sizeof step, "after_write.exec%d", i);
        report(step, PQexecPrepared(conn, "", 1, params, NULL, NULL, 0), PGRES_TUPLES_OK);
    }

    /* write_stmt: the unnamed statement is itself the write; every execution is followed by a probe. */
    report("write_stmt.prepare",
           PQprepare(conn, "", "UPDATE kv SET v = v + 1 WHERE k = $1::int RETURNING v", 1, NULL), PGRES_COMMAND_OK);
    for (int i = 0; i < 3; i++) {
        char step[64];
        snprintf(step, sizeof step, "write_stmt.exec%d", i);
        report(step, PQexecPrepared(conn, "", 1, params, NULL, NULL, 0), PGRES_TUPLES_OK);
    }

    /* describe_after_write_exec: \gdesc right after an extended-protocol write. */
    report("gdesc.prepare", PQprepare(conn, "", "SELECT v FROM kv WHERE k = $1::int", 1, NULL), PGRES_COMMAND_OK);
    report("gdesc.describe", PQdescribePrepared(conn, ""), PGRES_COMMAND_OK);
    report("gdesc.exec", PQexecPrepared(conn, "", 1, params, NULL, NULL, 0), PGRES_TUPLES_OK);

    PQfinish(conn);
    printf("failures %d\n", failures);
    printf("{\"failures\": %d}\n", failures);
    return failures ? 1 : 0;
}
