/* A monitor connection per server (SPEC R-1): standbys' replay LSN, the primary's WAL position
 * and — every --identity-interval-ms — the writer's identity for causal tokens (C-1: system
 * identifier and the timeline it writes now), reader health. A monitor query with no answer
 * within --monitor-timeout-ms is a failed sample: the server is marked down and its monitor
 * reconnects (R-1b: a hung standby must not look healthy).
 *
 * What the engine hears of a reader's monitor (R-1a, R-1b), with the host's time: a query that
 * failed (an error, no answer in time, the connection lost) is reader_monitor_failed; a monitor
 * connection that could not be opened (refused, the handshake timed out, an error to the startup
 * — 57P03 while the standby starts up) is reader_connect_failed — one report per failure; health
 * changes are set_reader_health_at. The monitor keeps reconnecting every MONITOR_RETRY_MS while a
 * reader is down or held out (it is the only way back in: a sample taken after the latest
 * failure), whatever the back-off of pooled connections says. */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "proxy.h"

/* The writer's LSN and, in the same statement, its history: the system identifier, and the
 * timeline of the WAL it inserts into now (pg_control_checkpoint() would lag a promotion). */
static const char IDENTITY_QUERY[] =
    "SELECT pg_current_wal_insert_lsn(), system_identifier, pg_walfile_name(pg_current_wal_insert_lsn()), "
    "(date_part('epoch', pg_conf_load_time()) * 1000000)::int8 FROM pg_catalog.pg_control_system()";
/* The writer's LSN and when it last loaded its configuration (a reload, SPEC S-5). */
static const char WRITER_QUERY[] =
    "SELECT pg_current_wal_insert_lsn(), (date_part('epoch', pg_conf_load_time()) * 1000000)::int8";
/* A standby's replay position, and when it last loaded its configuration (a reload changes the
 * settings of pooled connections to it, SPEC S-5); the position is NULL once it is not in recovery: a promoted standby keeps
 * answering its last replay position (PostgreSQL 15), and was kept as a reader (an examiner's
 * finding, 2026-12-05: stale reads without end, a write a reader took for a read kept there). */
static const char READER_QUERY[] =
    "SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn() END, "
    "(date_part('epoch', pg_catalog.pg_conf_load_time()) * 1000000)::int8";
/* After the identity query failed (e.g. a monitor role without the right to run it). */
#define IDENTITY_RETRY_MS 60000
/* How soon a failed monitor connects again. */
#define MONITOR_RETRY_MS 200

static void monitor_startup(backend_t *b) {
    const char *kv[] = {"user", g.o.monitor_user, "database", g.o.monitor_db, "application_name", "polarsplit-monitor",
                        NULL};
    startup_build(&b->out, kv);
    free(b->user);
    b->user = strdup(g.o.monitor_user);
    if (!b->user) abort();
}

static void server_health(uint32_t server, int healthy) {
    server_t *s = &g.servers[server];
    if (s->healthy == healthy) return;
    s->healthy = healthy;
    /* R-1a: either change is an outage at this moment: only samples sent later give the reader a
     * position again. */
    if (server > 0 && g.engine) polarsplit_engine_set_reader_health_at(g.engine, server, healthy != 0, now_ms());
    logf_("server %u (%s:%s) is %s", server, s->host, s->port, healthy ? "up" : "down");
}

/* R-1a/R-1b: a failed sample of reader `server` — an outage (its known position no longer
 * holds) and a failure toward its hold-out. */
static void report_monitor_failed(uint32_t server) {
    if (server == 0 || !g.engine) return;
    polarsplit_engine_reader_monitor_failed(g.engine, server, now_ms());
    g.monitor_failures_reported++;
}

/* One more failed sample of `server`: down after --monitor-down-after in a row. */
static void sample_failed(uint32_t server) {
    server_t *s = &g.servers[server];
    if (s->monitor_failures < UINT32_MAX) s->monitor_failures++;
    if (s->monitor_failures >= g.o.monitor_down_after) server_health(server, 0);
}

void monitor_failed(backend_t *b, const char *why) {
    server_t *s = &g.servers[b->server];
    if (!s->warned || g.o.verbose) logf_("monitor of server %u: %s", b->server, why);
    s->warned = 1;
    sample_failed(b->server);
    if (b->state == BS_READY)
        report_monitor_failed(b->server);
    else if (!b->nocreds)
        report_reader_connect_failed(b->server, b->starting_up); /* no-op for the primary */
    s->monitor_next = now_ms() + MONITOR_RETRY_MS;
    backend_close(b);
}

static void monitor_connect(uint32_t server, uint64_t now) {
    backend_t *b = backend_new(ROLE_MONITOR, server);
    monitor_startup(b);
    b->deadline = now + g.o.reader_connect_timeout_ms;
    g.servers[server].monitor = b;
    /* The primary may have been replaced while its monitor was away: read who it is first. */
    if (server == 0) g.servers[server].identity_next = 0;
    if (backend_connect(b) != 0) monitor_failed(b, "connect failed");
}

static void monitor_query(uint32_t i, backend_t *b, uint64_t now) {
    server_t *s = &g.servers[i];
    const char *q = i == 0 ? WRITER_QUERY : READER_QUERY;
    b->mon_identity = i == 0 && g.engine && g.o.identity_interval_ms > 0 && now >= s->identity_next;
    if (b->mon_identity) {
        q = IDENTITY_QUERY;
        s->identity_next = now + g.o.identity_interval_ms;
    }
    buf_msg(&b->out, 'Q', q, strlen(q) + 1);
    b->mon_busy = 1;
    b->mon_has_value = 0;
    b->mon_has_identity = 0;
    b->mon_has_conf = 0;
    b->mon_error = 0;
    b->mon_sent_at = now;
    s->monitor_next = now + g.o.monitor_interval_ms;
}

void monitor_tick(uint64_t now) {
    for (uint32_t i = 0; i < g.nservers; i++) {
        server_t *s = &g.servers[i];
        backend_t *b = s->monitor;
        if (!b) {
            if (now >= s->monitor_next) monitor_connect(i, now);
        } else if (b->state == BS_READY && !b->mon_busy && now >= s->monitor_next) {
            monitor_query(i, b, now);
        } else if (b->state == BS_READY && b->mon_busy && g.o.monitor_timeout_ms &&
                   now >= b->mon_sent_at + g.o.monitor_timeout_ms) {
            char why[96];
            snprintf(why, sizeof why, "no answer to its query within %u ms", g.o.monitor_timeout_ms);
            g.monitor_timeouts++;
            monitor_failed(b, why);
        } else if (b->state != BS_READY && now > b->deadline) {
            monitor_failed(b, "handshake timed out");
        }
    }
}

uint64_t monitor_next_due(void) {
    uint64_t next = UINT64_MAX;
    for (uint32_t i = 0; i < g.nservers; i++) {
        const server_t *s = &g.servers[i];
        const backend_t *b = s->monitor;
        uint64_t due = UINT64_MAX;
        if (!b || (b->state == BS_READY && !b->mon_busy))
            due = s->monitor_next;
        else if (b->state == BS_READY && g.o.monitor_timeout_ms)
            due = b->mon_sent_at + g.o.monitor_timeout_ms;
        else if (b->state != BS_READY)
            due = b->deadline + 1;
        if (due < next) next = due;
    }
    return next;
}

/* The writer's identity as the monitor read it (SPEC C-1, C-3): every proxy process serving this
 * primary reports the same, so they all format and accept the same causal tokens. A different
 * history than before (a promotion moved the timeline, another cluster) bumps the generation. */
static void report_identity(const backend_t *b) {
    uint64_t generation = 0;
    polarsplit_engine_set_writer_identity(g.engine, 0, b->mon_system_id, b->mon_timeline, &generation);
    g.writer_identities++;
    if (b->mon_system_id != g.writer_system_id || b->mon_timeline != g.writer_timeline)
        logf_("writer identity: system identifier %llu, timeline %u (generation %llu)",
              (unsigned long long)b->mon_system_id, b->mon_timeline, (unsigned long long)generation);
    g.writer_system_id = b->mon_system_id;
    g.writer_timeline = b->mon_timeline;
}

/* The sample is in: feed it to the engine (SPEC R-1). */
static void monitor_answered(backend_t *b) {
    server_t *s = &g.servers[b->server];
    b->mon_busy = 0;
    if (b->mon_has_value) {
        s->warned = 0;
        s->monitor_failures = 0;
        if (b->server == 0) {
            if (b->mon_has_identity) report_identity(b);
            if (b->mon_has_conf) polarsplit_engine_writer_config_loaded(g.engine, 0, b->mon_conf);
            if (!g.o.no_writer_samples) polarsplit_engine_writer_sample(g.engine, 0, b->mon_value, b->mon_sent_at);
        } else {
            /* Up again first (an outage now), then the sample: it was sent before this moment,
             * so it lifts the back-off but the position comes with the next one (R-1a). */
            server_health(b->server, 1);
            if (b->mon_has_conf) polarsplit_engine_reader_config_loaded(g.engine, b->server, b->mon_conf);
            /* Replay only moves forward: the position read is at least the one at send time. */
            polarsplit_engine_reader_sample(g.engine, b->server, b->mon_value, b->mon_sent_at);
        }
    } else if (b->server > 0 && b->mon_error) {
        /* The query failed (e.g. a recovery conflict cancelled it): a failed sample. */
        sample_failed(b->server);
        report_monitor_failed(b->server);
    } else if (b->server > 0) {
        /* NULL replay position: not a standby (any more). */
        if (!s->warned) logf_("server %u is not in recovery: not used as a reader", b->server);
        s->warned = 1;
        server_health(b->server, 0);
    }
}

/* An ErrorResponse on the monitor connection; returns 1 when it ended the connection. */
static int monitor_error(backend_t *b, const uint8_t *body, size_t blen) {
    server_t *s = &g.servers[b->server];
    char code[8], msg[200], why[240];
    error_fields(body, blen, code, sizeof code, msg, sizeof msg);
    g.monitor_errors++;
    if (!error_is_fatal(body, blen)) {
        if (b->mon_identity) {
            /* Tokens stay valid in this process only until the identity can be read. */
            logf_("monitor of server %u: cannot read the writer identity: %s %s (retrying in %d s)", b->server, code,
                  msg, IDENTITY_RETRY_MS / 1000);
            s->identity_next = now_ms() + IDENTITY_RETRY_MS;
            return 0;
        }
        if (!s->warned || g.o.verbose) logf_("monitor of server %u: %s %s", b->server, code, msg);
        s->warned = 1;
        b->mon_error = 1;
        return 0;
    }
    snprintf(why, sizeof why, "FATAL %s %s", code, msg);
    monitor_failed(b, why);
    return 1;
}

static void monitor_row(backend_t *b, const uint8_t *body, size_t blen) {
    const uint8_t *v;
    size_t n;
    uint64_t lsn, sys;
    uint32_t tli;
    if (row_field(body, blen, 0, &v, &n) == 0 && parse_lsn((const char *)v, n, &lsn) == 0) {
        b->mon_value = lsn;
        b->mon_has_value = 1;
    }
    if (b->mon_identity && row_field(body, blen, 1, &v, &n) == 0 && parse_system_id((const char *)v, n, &sys) == 0 &&
        row_field(body, blen, 2, &v, &n) == 0 && parse_walfile_timeline((const char *)v, n, &tli) == 0) {
        b->mon_system_id = sys;
        b->mon_timeline = tli;
        b->mon_has_identity = 1;
    }
    /* The configuration load time: the last column of either writer query and of the reader's. */
    if (row_field(body, blen, b->server == 0 && b->mon_identity ? 3 : 1, &v, &n) == 0 &&
        parse_system_id((const char *)v, n, &sys) == 0) {
        b->mon_conf = sys;
        b->mon_has_conf = 1;
    }
}

static void monitor_data(backend_t *b) {
    while (buf_size(&b->in) >= 5) {
        const uint8_t *m = buf_data(&b->in);
        uint32_t len = rd32(m + 1);
        if (len < 4 || len > (1u << 20)) {
            monitor_failed(b, "bad message");
            return;
        }
        if (buf_size(&b->in) < 1 + (size_t)len) return;
        const uint8_t *body = m + 5;
        size_t blen = len - 4;
        switch (m[0]) {
        case 'D': monitor_row(b, body, blen); break;
        case 'E':
            if (monitor_error(b, body, blen)) return;
            break;
        case 'Z': monitor_answered(b); break;
        default: break;
        }
        buf_consume(&b->in, 1 + (size_t)len);
    }
}

void monitor_readable(backend_t *b, int eof) {
    if (b->state == BS_READY) monitor_data(b);
    if (eof && !b->dead) monitor_failed(b, "connection lost");
}
