/* The counters: the library's (by name, outcome and reason) and the proxy's own, printed on
 * SIGUSR1 and at exit (and written to --stats-file). */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>

#include "proxy.h"

static void print_library_stats(FILE *f) {
    uint32_t n = polarsplit_counter_count();
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v = 0;
        if (polarsplit_engine_counter(g.engine, i, &v) == POLARSPLIT_OK)
            fprintf(f, "counter %s %llu\n", polarsplit_counter_name(i), (unsigned long long)v);
    }
    for (polarsplit_outcome o = 0; polarsplit_outcome_name(o); o++) {
        uint64_t v = 0;
        if (polarsplit_engine_outcome_count(g.engine, o, &v) == POLARSPLIT_OK)
            fprintf(f, "outcome %s %llu\n", polarsplit_outcome_name(o), (unsigned long long)v);
    }
    for (polarsplit_reason r = 0; r < 1024; r++) { /* reason numbers are below 1024 */
        uint64_t v = 0;
        if (polarsplit_reason_name(r) && polarsplit_engine_reason_count(g.engine, r, &v) == POLARSPLIT_OK && v)
            fprintf(f, "reason %s %llu\n", polarsplit_reason_name(r), (unsigned long long)v);
    }
}

static void print_stats(FILE *f) {
    fprintf(f, "polarsplit-proxy stats mode=%s\n", MODE_NAMES[g.o.mode]);
    if (g.o.mode == MODE_LIBRARY) {
        print_library_stats(f);
    } else if (g.o.mode == MODE_NAIVE) {
        fprintf(f, "proxy naive_reads_to_replica %llu\n", (unsigned long long)naive_reads_to_replica);
        fprintf(f, "proxy naive_statements_to_primary %llu\n", (unsigned long long)naive_statements_to_primary);
        fprintf(f, "proxy naive_replica_unavailable %llu\n", (unsigned long long)naive_replica_unavailable);
    }
    const struct {
        const char *name;
        unsigned long long v;
    } own[] = {
        {"clients_total", g.clients_total},
        {"clients_active", g.nclients},
        {"clients_refused", g.clients_refused},
        {"clients_auth_timeouts", g.clients_auth_timeouts},
        {"accept_errors", g.accept_errors},
        {"reader_connections_opened", g.reader_conns_opened},
        {"reader_handshake_failures", g.reader_handshake_failures},
        {"reader_no_credentials", g.reader_nocreds},
        {"readers_pooled_idle", pool_size()},
        {"cancels_sent", g.cancels_sent},
        {"monitor_errors", g.monitor_errors},
        {"monitor_timeouts", g.monitor_timeouts},
        {"session_timeouts", g.session_timeouts},
        {"cancels_reported", g.cancels_reported},
        {"reader_closes_reported", g.reader_closes_reported},
        {"writer_identities", g.writer_identities},
        {"reader_connect_failures", g.reader_connect_failures},
        {"reader_connect_failures_reported", g.reader_connect_failures_reported},
        {"reader_backoff_refusals", g.reader_backoff_refusals},
        {"reader_inflight_refusals", g.reader_inflight_refusals},
        {"reader_losses_reported", g.reader_losses_reported},
        {"monitor_failures_reported", g.monitor_failures_reported},
        {"catalog_loads", g.catalog_loads},
        {"catalog_failures", g.catalog_failures},
        {"catalog_functions", g.catalog_functions},
        {"catalog_sequences", g.catalog_sequences},
        {"catalog_objects", g.catalog_objects},
        {"writer_timeline", g.writer_timeline},
    };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) fprintf(f, "proxy %s %llu\n", own[i].name, own[i].v);
    polarsplit_pool_stats ps;
    if (pool_stats(&ps) == 0) {
        fprintf(f, "proxy pool_checkouts_hit %llu\n", (unsigned long long)ps.hits);
        fprintf(f, "proxy pool_checkouts_missed %llu\n", (unsigned long long)ps.misses);
        fprintf(f, "proxy pool_resets_handed_out %llu\n", (unsigned long long)ps.reset_handouts);
    }
    fprintf(f, "polarsplit-proxy stats end\n");
    fflush(f);
}

/* The library's Prometheus text (SPEC §9): a size query, then the text, whole. */
static void write_prometheus(FILE *f) {
    size_t len = 0;
    if (!g.engine || polarsplit_engine_prometheus(g.engine, NULL, 0, &len) != POLARSPLIT_OK) return;
    for (int tries = 0; tries < 4; tries++) {
        size_t cap = len + 4096; /* counters may grow between the two calls */
        char *text = malloc(cap);
        if (!text) return;
        if (polarsplit_engine_prometheus(g.engine, text, cap, &len) == POLARSPLIT_OK && len < cap) {
            fwrite(text, 1, len, f);
            free(text);
            return;
        }
        free(text);
    }
}

/* Writes `path` whole or not at all (readers never see half a file). */
static void write_file(const char *path, void (*print)(FILE *)) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    print(f);
    if (fclose(f) == 0) rename(tmp, path);
}

void dump_stats(void) {
    print_stats(stderr);
    if (g.o.stats_file) write_file(g.o.stats_file, print_stats);
    if (g.o.prometheus_file) write_file(g.o.prometheus_file, write_prometheus);
}
