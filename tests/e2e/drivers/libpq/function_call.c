/* SPEC S-5: a FunctionCall message (libpq's PQfn, the fast-path interface) runs a function the
 * engine cannot see into, so the session's state may change with it: here set_config() by its OID
 * (looked up first) sets TimeZone for the session, and the read after it must run with that time
 * zone wherever it runs. Prints "ok <step> <value> <port>" or "fail <step> <message>" per step
 * and exits 0 when every step succeeded. Usage: function_call CONNINFO ZONE */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static char zones[4][64];
static int ports[4];
static int reads;

static void read_zone(PGconn *conn, const char *step) {
    PGresult *r = PQexec(conn, "SELECT current_setting('TimeZone'), inet_server_port()");
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
        printf("ok %s %s %s\n", step, PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
        if (reads < 4) {
            snprintf(zones[reads], sizeof zones[reads], "%s", PQgetvalue(r, 0, 0));
            ports[reads++] = atoi(PQgetvalue(r, 0, 1));
        }
    } else {
        char line[512];
        snprintf(line, sizeof line, "%s", PQresultErrorMessage(r));
        line[strcspn(line, "\n")] = 0;
        printf("fail %s %s\n", step, line);
        failures++;
    }
    fflush(stdout);
    PQclear(r);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s CONNINFO ZONE\n", argv[0]);
        return 2;
    }
    PGconn *conn = PQconnectdb(argv[1]);
    if (PQstatus(conn) != CONNECTION_OK) {
        printf("fail connect %s", PQerrorMessage(conn));
        return 1;
    }
    read_zone(conn, "before");
    PGresult *r = PQexec(conn, "SELECT 'set_config(text,text,boolean)'::regprocedure::oid");
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        printf("fail oid %s", PQresultErrorMessage(r));
        return 1;
    }
    Oid fn = (Oid)strtoul(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    PQArgBlock args[3];
    args[0].len = (int)strlen("TimeZone");
    args[0].isint = 0;
    args[0].u.ptr = (int *)"TimeZone";
    args[1].len = (int)strlen(argv[2]);
    args[1].isint = 0;
    args[1].u.ptr = (int *)argv[2];
    static char is_local = 0; /* boolean false, in binary: one byte (libpq sends no 1-byte ints) */
    args[2].len = 1;
    args[2].isint = 0;
    args[2].u.ptr = (int *)&is_local;
    char out[256];
    int out_len = 0;
    r = PQfn(conn, (int)fn, (int *)out, &out_len, 0, args, 3);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        printf("fail fastpath %s", PQresultErrorMessage(r));
        failures++;
    } else {
        printf("ok fastpath %.*s -\n", out_len, out);
    }
    PQclear(r);
    for (int i = 0; i < 3; i++) read_zone(conn, "after");
    PQfinish(conn);
    printf("{\"failures\": %d, \"zones\": [", failures);
    for (int i = 0; i < reads; i++) printf("%s\"%s\"", i ? ", " : "", zones[i]);
    printf("], \"ports\": [");
    for (int i = 0; i < reads; i++) printf("%s%d", i ? ", " : "", ports[i]);
    printf("]}\n");
    return failures ? 1 : 0;
}
