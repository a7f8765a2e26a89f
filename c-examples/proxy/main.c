/* polarsplit-proxy: a real PostgreSQL proxy that takes every routing decision from libpolarsplit.
 *
 * One thread, non-blocking sockets, epoll(7). Per client: a session (router.h) is fed the client's
 * bytes and the bytes of its backend connections, and the proxy executes the actions it polls
 * after each input, in order (the drain rule): forward/discard by count from the bytes it kept,
 * send engine-built bytes, open the writer, acquire/release reader connections, close.
 *
 * The proxy logs in on its own reader and monitor connections (the client is not there): trust,
 * or cleartext/md5/SCRAM-SHA-256 with a password from the credential map (--credentials). A user
 * who cannot log in on a reader gets READER_UNAVAILABLE with NO_CREDENTIALS: the library keeps
 * that session on the writer (reason READER_NO_CREDENTIALS).
 *
 * A monitor connection per server feeds the engine the standbys' replay LSNs and the primary's
 * WAL position (SPEC R-1), and reader health; every reader fault the proxy sees itself goes to the
 * engine too, and new reader connections follow the engine's back-off (R-1a, R-1b). The writer's
 * user functions are loaded per database and refreshed (SPEC §7 F-policy, catalog.c). Clients are bounded in number (--max-clients) and
 * in the time they may take to log in (--auth-timeout-ms). SIGUSR1 prints the counters;
 * SIGTERM/SIGINT shut down cleanly (counters printed at exit too). See `--help` and proxy.h for
 * the files. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy.h"

const char *const MODE_NAMES[] = {"library", "naive", "primary-only"};

proxy_t g = {.o = {.mode = MODE_LIBRARY,
                   .listen_host = "127.0.0.1",
                   .listen_port = "6432",
                   .reader_hostgroup = 1,
                   .monitor_interval_ms = 10,
                   .reader_connect_timeout_ms = 2000,
                   .pool_idle_ms = 60000,
                   .auth_timeout_ms = 10000,
                   .client_gone_timeout_ms = 60000,
                   .monitor_timeout_ms = 2000,
                   .monitor_down_after = 1,
                   .identity_interval_ms = 1000,
                   .catalog_refresh_ms = 10000,
                   .max_clients = 1000,
                   .monitor_user = "postgres",
                   .monitor_db = "postgres"},
             .listen_fd = -1,
             .reserve_fd = -1,
             .sigpipe = {-1, -1},
             .next_id = 1};

void logf_(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("polarsplit-proxy: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void on_signal(int sig) {
    char ch = sig == SIGUSR1 ? 'U' : 'T';
    ssize_t r = write(g.sigpipe[1], &ch, 1);
    (void)r;
}

static int install_signals(void) {
    if (pipe(g.sigpipe) != 0) return -1;
    set_nonblocking(g.sigpipe[0]);
    set_nonblocking(g.sigpipe[1]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

/* The library: ABI check, configuration, engine, pool index, readers. Returns 0 or the exit
 * status. Consumes `builder`. */
static int start_library(polarsplit_config_builder *builder) {
    char err[512];
    if (polarsplit_abi_version() != POLARSPLIT_ABI_VERSION) {
        fprintf(stderr, "polarsplit-proxy: libpolarsplit ABI %u, built for %u\n", polarsplit_abi_version(),
                POLARSPLIT_ABI_VERSION);
        polarsplit_config_builder_free(builder);
        return 1;
    }
    polarsplit_config *config = NULL;
    if (polarsplit_config_builder_build(builder, &config, err, sizeof err) != POLARSPLIT_OK) {
        fprintf(stderr, "polarsplit-proxy: configuration: %s\n", err);
        return 2;
    }
    int ok = pool_init(config) == 0 && polarsplit_engine_new(config, &g.engine) == POLARSPLIT_OK;
    polarsplit_config_free(config);
    if (!ok) {
        fprintf(stderr, "polarsplit-proxy: engine_new failed\n");
        return 1;
    }
    for (uint32_t i = 1; i < g.nservers; i++) polarsplit_engine_add_reader(g.engine, i, g.o.reader_hostgroup);
    /* F-policy: these databases' user functions are loaded before their first client. */
    for (int i = 0; i < g.o.ncatalog_dbs; i++) catalog_want(g.o.catalog_dbs[i], strlen(g.o.catalog_dbs[i]));
    return 0;
}

static void stop_library(void) {
    pool_shutdown();
    polarsplit_engine_free(g.engine);
    g.engine = NULL;
}

int main(int argc, char **argv) {
    polarsplit_config_builder *builder = polarsplit_config_builder_new();
    int rc = options_parse(argc, argv, builder);
    char err[512];
    if (rc < 0 && g.o.creds_path && creds_load(g.o.creds_path, err, sizeof err) != 0) {
        fprintf(stderr, "polarsplit-proxy: %s\n", err);
        rc = 2;
    }
    if (rc >= 0) {
        polarsplit_config_builder_free(builder);
        creds_free();
        return rc;
    }
    rc = start_library(builder);
    if (rc == 0 && install_signals() != 0) rc = 1;
    if (rc == 0 && listener_open() != 0) {
        fprintf(stderr, "polarsplit-proxy: cannot listen on %s:%s: %s\n", g.o.listen_host, g.o.listen_port,
                strerror(errno));
        rc = 1;
    }
    if (rc == 0) {
        logf_("listening on %s:%s, mode %s, primary %s:%s, %u reader(s), libpolarsplit %s", g.o.listen_host,
              g.o.listen_port, MODE_NAMES[g.o.mode], g.servers[0].host, g.servers[0].port, g.nservers - 1,
              polarsplit_version());
        loop_run();
        logf_("shutting down");
        dump_stats();
        shutdown_all();
    }
    listener_close();
    if (g.sigpipe[0] >= 0) close(g.sigpipe[0]);
    if (g.sigpipe[1] >= 0) close(g.sigpipe[1]);
    stop_library();
    creds_free();
    for (int i = 0; i < g.o.nsettings; i++) free((void *)g.o.settings[i][0]);
    return rc;
}
