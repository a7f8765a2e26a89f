/* The command line (see usage()). */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "proxy.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: polarsplit-proxy --primary HOST:PORT [--reader HOST:PORT]... [options]\n"
            "  --listen HOST:PORT          where clients connect (default 127.0.0.1:6432)\n"
            "  --primary HOST:PORT         the primary (writer)\n"
            "  --reader HOST:PORT[,...]    a hot standby (repeatable); server ids 1, 2, ... in order\n"
            "  --mode library|naive|primary-only\n"
            "                              library: every decision from libpolarsplit (default);\n"
            "                              naive: every SELECT outside a transaction to the first reader,\n"
            "                              no waits; primary-only: relay everything to the primary\n"
            "  --set NAME=VALUE            a libpolarsplit setting (repeatable), e.g.\n"
            "                              --set server_dialect=stock --set startup_profile=off\n"
            "  --credentials FILE          user:password lines for reader logins (cleartext, md5, SCRAM)\n"
            "  --max-clients N             client connections at once; more are refused with 53300\n"
            "                              (default 1000)\n"
            "  --auth-timeout-ms N         a client that has not logged in this long after connecting\n"
            "                              is closed (default 10000; 0: never)\n"
            "  --client-gone-timeout-ms N  after a client closed (or half-closed) its connection, the\n"
            "                              statements it sent still run and their answers go out while\n"
            "                              it reads; its session is closed this long after at the\n"
            "                              latest (default 60000; 0: never)\n"
            "  --monitor-interval-ms N     how often monitors sample LSNs (default 10)\n"
            "  --monitor-timeout-ms N      a monitor query unanswered this long is a failed sample: the\n"
            "                              server is marked down and its monitor reconnects (default 2000)\n"
            "  --monitor-down-after N      consecutive failed samples that mark a server down (default 1);\n"
            "                              until then only the engine's hold-out and back-off keep\n"
            "                              sessions off a failing reader (SPEC R-1b)\n"
            "  --identity-interval-ms N    how often the writer monitor reads the writer's system\n"
            "                              identifier and timeline for causal tokens (default 1000;\n"
            "                              0: never, tokens then hold only in this process)\n"
            "  --monitor-user NAME         monitor login (default postgres; password from --credentials)\n"
            "  --monitor-database NAME     (default postgres)\n"
            "  --reader-connect-timeout-ms N  reader (and monitor) handshake limit; a reader connect that\n"
            "                              fails or times out is a reader fault (default 2000)\n"
            "  --catalog-refresh-ms N      reload each database's user functions this often (F-policy;\n"
            "                              default 10000; 0: load once)\n"
            "  --catalog-database NAME     load this database's user functions at start (repeatable;\n"
            "                              others load when their first client connects)\n"
            "  --no-function-catalog       never load them: every user function call goes to the primary\n"
            "  --pool-idle-ms N            close pooled readers idle this long (default 60000)\n"
            "  --stats-file PATH           also write the counters there on SIGUSR1 and at exit\n"
            "  --prometheus-file PATH      and the library's counters and reader gauges there, in the\n"
            "                              Prometheus text format\n"
            "  --record DIR                write each session's inputs to DIR as a transcript for replay\n"
            "  --no-writer-samples         do not feed the writer's LSN samples to the engine (with\n"
            "                              --set lsn_probe=off: a session stays on the primary after\n"
            "                              its first write, the classic pinning the demo compares with)\n"
            "  --verbose                   log every decision\n"
            "Signals: SIGUSR1 prints the counters; SIGTERM/SIGINT stop.\n");
}

static int add_servers(const char *spec) {
    char *copy = strdup(spec);
    if (!copy) abort();
    char *save = NULL;
    int rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && rc == 0; tok = strtok_r(NULL, ",", &save)) {
        server_t *s = &g.servers[g.nservers];
        if (g.nservers >= MAX_SERVERS || split_hostport(tok, s->host, sizeof s->host, s->port, sizeof s->port) != 0 ||
            resolve(s->host, s->port, &s->addr, &s->alen) != 0) {
            fprintf(stderr, "polarsplit-proxy: bad, unresolvable or one too many address '%s'\n", tok);
            rc = -1;
            continue;
        }
        s->healthy = 1;
        g.nservers++;
    }
    free(copy);
    return rc;
}

/* A non-negative decimal number that fits 32 bits. */
static int number(const char *flag, const char *v, uint32_t *out) {
    char *end = NULL;
    unsigned long long n = strtoull(v, &end, 10);
    if (!*v || *end || v[0] == '-' || n > UINT32_MAX) {
        fprintf(stderr, "polarsplit-proxy: %s wants a number, got '%s'\n", flag, v);
        return -1;
    }
    *out = (uint32_t)n;
    return 0;
}

/* --set NAME=VALUE: into the builder, and remembered for --record transcripts. */
static int set_option(polarsplit_config_builder *builder, const char *v) {
    char name[128], err[512];
    const char *eq = strchr(v, '=');
    if (!eq || (size_t)(eq - v) >= sizeof name) {
        fprintf(stderr, "polarsplit-proxy: --set wants NAME=VALUE, got '%s'\n", v);
        return -1;
    }
    memcpy(name, v, (size_t)(eq - v));
    name[eq - v] = '\0';
    if (polarsplit_config_builder_set(builder, name, eq + 1, err, sizeof err) != POLARSPLIT_OK) {
        fprintf(stderr, "polarsplit-proxy: --set %s: %s\n", v, err);
        return -1;
    }
    if (strcmp(name, "reader_hostgroup") == 0 && number("--set reader_hostgroup", eq + 1, &g.o.reader_hostgroup))
        return -1;
    if (g.o.nsettings < MAX_SETTINGS) {
        g.o.settings[g.o.nsettings][0] = strdup(name);
        g.o.settings[g.o.nsettings][1] = eq + 1;
        if (!g.o.settings[g.o.nsettings][0]) abort();
        g.o.nsettings++;
    }
    return 0;
}

static int set_mode(const char *v) {
    for (int m = MODE_LIBRARY; m <= MODE_PRIMARY_ONLY; m++) {
        if (strcmp(v, MODE_NAMES[m]) == 0) {
            g.o.mode = (enum mode)m;
            return 0;
        }
    }
    fprintf(stderr, "polarsplit-proxy: --mode is library, naive or primary-only\n");
    return -1;
}

/* One flag with its value `v`. Returns 0, or -1 for a bad value. */
static int option(polarsplit_config_builder *builder, const char *a, const char *v, const char **primary,
                  const char **readers, int *nreaders) {
    if (strcmp(a, "--listen") == 0) {
        if (split_hostport(v, g.o.listen_host, sizeof g.o.listen_host, g.o.listen_port, sizeof g.o.listen_port) == 0)
            return 0;
        fprintf(stderr, "polarsplit-proxy: bad --listen '%s'\n", v);
        return -1;
    }
    if (strcmp(a, "--primary") == 0) return (*primary = v), 0;
    if (strcmp(a, "--reader") == 0) {
        if (*nreaders < MAX_SERVERS) readers[(*nreaders)++] = v;
        return 0;
    }
    if (strcmp(a, "--mode") == 0) return set_mode(v);
    if (strcmp(a, "--set") == 0) return set_option(builder, v);
    if (strcmp(a, "--credentials") == 0) return (g.o.creds_path = v), 0;
    if (strcmp(a, "--max-clients") == 0) return number(a, v, &g.o.max_clients);
    if (strcmp(a, "--auth-timeout-ms") == 0) return number(a, v, &g.o.auth_timeout_ms);
    if (strcmp(a, "--client-gone-timeout-ms") == 0) return number(a, v, &g.o.client_gone_timeout_ms);
    if (strcmp(a, "--monitor-interval-ms") == 0) return number(a, v, &g.o.monitor_interval_ms);
    if (strcmp(a, "--monitor-timeout-ms") == 0) return number(a, v, &g.o.monitor_timeout_ms);
    if (strcmp(a, "--monitor-down-after") == 0) return number(a, v, &g.o.monitor_down_after);
    if (strcmp(a, "--identity-interval-ms") == 0) return number(a, v, &g.o.identity_interval_ms);
    if (strcmp(a, "--monitor-user") == 0) return (g.o.monitor_user = v), 0;
    if (strcmp(a, "--monitor-database") == 0) return (g.o.monitor_db = v), 0;
    if (strcmp(a, "--reader-connect-timeout-ms") == 0) return number(a, v, &g.o.reader_connect_timeout_ms);
    if (strcmp(a, "--pool-idle-ms") == 0) return number(a, v, &g.o.pool_idle_ms);
    if (strcmp(a, "--stats-file") == 0) return (g.o.stats_file = v), 0;
    if (strcmp(a, "--prometheus-file") == 0) return (g.o.prometheus_file = v), 0;
    if (strcmp(a, "--catalog-refresh-ms") == 0) return number(a, v, &g.o.catalog_refresh_ms);
    if (strcmp(a, "--catalog-database") == 0) {
        if (g.o.ncatalog_dbs < MAX_SETTINGS) g.o.catalog_dbs[g.o.ncatalog_dbs++] = v;
        return 0;
    }
    if (strcmp(a, "--record") == 0) return (g.o.record_dir = v), 0;
    fprintf(stderr, "polarsplit-proxy: unknown argument '%s' (see --help)\n", a);
    return -1;
}

static int takes_no_value(const char *a) {
    if (strcmp(a, "--no-writer-samples") == 0) return (g.o.no_writer_samples = 1);
    if (strcmp(a, "--no-function-catalog") == 0) return (g.o.no_function_catalog = 1);
    if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) return (g.o.verbose = 1);
    return 0;
}

int options_parse(int argc, char **argv, polarsplit_config_builder *builder) {
    const char *primary = NULL, *readers[MAX_SERVERS];
    int nreaders = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (takes_no_value(a)) continue;
        if (i + 1 >= argc) {
            fprintf(stderr, "polarsplit-proxy: %s needs a value\n", a);
            return 2;
        }
        if (option(builder, a, argv[++i], &primary, readers, &nreaders) != 0) return 2;
    }
    if (!primary) {
        usage(stderr);
        return 2;
    }
    if (add_servers(primary) != 0) return 2;
    for (int i = 0; i < nreaders; i++)
        if (add_servers(readers[i]) != 0) return 2;
    return -1;
}
