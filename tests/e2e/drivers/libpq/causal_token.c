/* Issue 19 (SPEC C-1, C-2): a causal token through libpq, across two proxy processes.
 *
 * Connection A (proxy A) asks for the token as a ParameterStatus at startup
 * (`-c polarsplit.report_token=on`), writes, and reads the token with PQparameterStatus — and
 * with `SHOW polarsplit.causal_token`. Connection B (proxy B) presents it in its startup options
 * (`-c polarsplit.causal_token=<token>`) and reads the row written: it must see the write, and
 * B's own SHOW must give back the same token (the same writer history in both processes, C-3).
 * Usage: causal_token CONNINFO_A CONNINFO_B KEY ROUNDS STANDBY_PORT. Prints one JSON line; exit 0
 * when every call succeeded (whatever the values: the test judges them), 1 otherwise. */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static PGconn *open_conn(const char *conninfo, const char *options) {
    const char *keys[] = {"dbname", "options", "connect_timeout", NULL};
    const char *vals[] = {conninfo, options, "5", NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1); /* dbname holds the whole conninfo (expand_dbname) */
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "connect: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    return c;
}

/* The first value of a one-row result into out; -1 on failure. */
static int one_value(PGconn *c, const char *sql, char *out, size_t cap) {
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    if (ok) snprintf(out, cap, "%s", PQgetvalue(r, 0, 0));
    else fprintf(stderr, "%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    return ok ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s CONNINFO_A CONNINFO_B KEY ROUNDS STANDBY_PORT\n", argv[0]);
        return 2;
    }
    const char *key = argv[3];
    int rounds = atoi(argv[4]);
    PGconn *a = open_conn(argv[1], "-c polarsplit.report_token=on");
    if (!a) return 1;
    const char *at_login = PQparameterStatus(a, "polarsplit.causal_token");
    char first[128] = "";
    snprintf(first, sizeof first, "%s", at_login ? at_login : "");
    int stale = 0, mismatched = 0, unchanged = 0, on_standby = 0, failures = 0;
    char last_param[128] = "", last_show[128] = "", last_b_show[128] = "";
    for (int i = 1; i <= rounds && failures == 0; i++) {
        char sql[256], v[32], port[32], show[128], b_show[128], opts[256];
        const char *before = PQparameterStatus(a, "polarsplit.causal_token");
        char prev[128];
        snprintf(prev, sizeof prev, "%s", before ? before : "");
        snprintf(sql, sizeof sql, "UPDATE kv SET v = %d WHERE k = %s", i, key);
        PGresult *r = PQexec(a, sql);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            fprintf(stderr, "update: %s", PQresultErrorMessage(r));
            failures++;
        }
        PQclear(r);
        const char *param = PQparameterStatus(a, "polarsplit.causal_token");
        if (!param) {
            fprintf(stderr, "no polarsplit.causal_token ParameterStatus after the write\n");
            failures++;
            break;
        }
        snprintf(last_param, sizeof last_param, "%s", param);
        unchanged += strcmp(prev, param) == 0;
        if (one_value(a, "SHOW polarsplit.causal_token", show, sizeof show) != 0) {
            failures++;
            break;
        }
        snprintf(last_show, sizeof last_show, "%s", show);
        mismatched += strcmp(show, param) != 0;

        snprintf(opts, sizeof opts, "-c polarsplit.causal_token=%s", param);
        PGconn *b = open_conn(argv[2], opts);
        if (!b) {
            failures++;
            break;
        }
        snprintf(sql, sizeof sql, "SELECT v, inet_server_port() FROM kv WHERE k = %s", key);
        r = PQexec(b, sql);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
            snprintf(v, sizeof v, "%s", PQgetvalue(r, 0, 0));
            snprintf(port, sizeof port, "%s", PQgetvalue(r, 0, 1));
            stale += atoi(v) != i;
            on_standby += strcmp(port, argv[5]) == 0;
        } else {
            fprintf(stderr, "read on B: %s", PQresultErrorMessage(r));
            failures++;
        }
        PQclear(r);
        if (one_value(b, "SHOW polarsplit.causal_token", b_show, sizeof b_show) != 0) failures++;
        snprintf(last_b_show, sizeof last_b_show, "%s", b_show);
        mismatched += strcmp(b_show, param) != 0;
        PQfinish(b);
    }
    PQfinish(a);
    printf("{\"rounds\": %d, \"at_login\": \"%s\", \"param\": \"%s\", \"show\": \"%s\", \"b_show\": \"%s\", "
           "\"stale\": %d, \"on_standby\": %d, \"mismatched\": %d, \"unchanged\": %d, \"failures\": %d}\n",
           rounds, first, last_param, last_show, last_b_show, stale, on_standby, mismatched, unchanged, failures);
    return failures ? 1 : 0;
}
