/* libpq pipeline mode, blocking connection: N parameterised reads queued before any result is
 * read, with one Sync at the end (mode "one") or a Sync after each (mode "each"); libpq reads
 * results into memory while its sends would block, so against a server this never deadlocks.
 * Each statement's text carries PAD bytes of comment (to reach a byte volume with fewer
 * statements). Prints one JSON line: results received, the sum of the values, the last port.
 *
 * Usage: pipeline_depth CONNINFO N one|each PAD */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s CONNINFO N one|each PAD\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[2]);
    int each = strcmp(argv[3], "each") == 0;
    int pad = atoi(argv[4]);
    PGconn *c = PQconnectdb(argv[1]);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "%s", PQerrorMessage(c));
        return 1;
    }
    char *sql = malloc((size_t)pad + 64);
    if (!sql) return 1;
    strcpy(sql, "SELECT $1::int, inet_server_port() /*");
    size_t at = strlen(sql);
    memset(sql + at, 'x', (size_t)pad);
    strcpy(sql + at + pad, "*/");
    if (!PQenterPipelineMode(c)) {
        fprintf(stderr, "pipeline mode: %s", PQerrorMessage(c));
        return 1;
    }
    char buf[32];
    const char *values[1] = {buf};
    for (int i = 0; i < n; i++) {
        snprintf(buf, sizeof buf, "%d", i);
        if (!PQsendQueryParams(c, sql, 1, NULL, values, NULL, NULL, 0) || (each && !PQpipelineSync(c))) {
            fprintf(stderr, "send %d: %s", i, PQerrorMessage(c));
            return 1;
        }
    }
    if (!each && !PQpipelineSync(c)) {
        fprintf(stderr, "sync: %s", PQerrorMessage(c));
        return 1;
    }
    long ok = 0, syncs = 0, errors = 0;
    long long sum = 0;
    int port = 0;
    long want = each ? n : 1;
    while (syncs < want) {
        PGresult *r = PQgetResult(c);
        if (!r) {
            if (PQstatus(c) != CONNECTION_OK) break;
            continue;
        }
        ExecStatusType s = PQresultStatus(r);
        if (s == PGRES_TUPLES_OK) {
            ok++;
            sum += atoll(PQgetvalue(r, 0, 0));
            port = atoi(PQgetvalue(r, 0, 1));
        } else if (s == PGRES_PIPELINE_SYNC) {
            syncs++;
        } else if (++errors <= 3) {
            fprintf(stderr, "%s %s", PQresStatus(s), PQresultErrorMessage(r));
        }
        PQclear(r);
    }
    printf("{\"ok\": %ld, \"sum\": %lld, \"errors\": %ld, \"port\": %d}\n", ok, sum, errors, port);
    free(sql);
    PQfinish(c);
    return 0;
}
