/* A monitor connection per server (SPEC R-1): standbys' replay LSN, the primary's WAL position,
 * reader health. */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "proxy.h"

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
    if (server > 0 && g.engine) polarsplit_engine_set_reader_health(g.engine, server, healthy != 0);
    logf_("server %u (%s:%s) is %s", server, s->host, s->port, healthy ? "up" : "down");
}

void monitor_failed(backend_t *b, const char *why) {
    server_t *s = &g.servers[b->server];
    if (!s->warned || g.o.verbose) logf_("monitor of server %u: %s", b->server, why);
    s->warned = 1;
    server_health(b->server, 0);
    s->monitor_next = now_ms() + 200;
    backend_close(b);
}

static void monitor_connect(uint32_t server, uint64_t now) {
    backend_t *b = backend_new(ROLE_MONITOR, server);
    monitor_startup(b);
    b->deadline = now + 2000;
    g.servers[server].monitor = b;
    if (backend_connect(b) != 0) monitor_failed(b, "connect failed");
}

void monitor_tick(uint64_t now) {
    for (uint32_t i = 0; i < g.nservers; i++) {
        server_t *s = &g.servers[i];
        backend_t *b = s->monitor;
        if (!b) {
            if (now >= s->monitor_next) monitor_connect(i, now);
        } else if (b->state == BS_READY && !b->mon_busy && now >= s->monitor_next) {
            const char *q = i == 0 ? "SELECT pg_current_wal_insert_lsn()" : "SELECT pg_last_wal_replay_lsn()";
            buf_msg(&b->out, 'Q', q, strlen(q) + 1);
            b->mon_busy = 1;
            b->mon_has_value = 0;
            b->mon_sent_at = now;
            s->monitor_next = now + g.o.monitor_interval_ms;
        } else if (b->state != BS_READY && now > b->deadline) {
            monitor_failed(b, "handshake timed out");
        }
    }
}

uint64_t monitor_next_due(void) {
    uint64_t next = UINT64_MAX;
    for (uint32_t i = 0; i < g.nservers; i++) {
        const server_t *s = &g.servers[i];
        int idle = !s->monitor || (s->monitor->state == BS_READY && !s->monitor->mon_busy);
        if (idle && s->monitor_next < next) next = s->monitor_next;
    }
    return next;
}

/* The sample is in: feed it to the engine (SPEC R-1). */
static void monitor_answered(backend_t *b) {
    server_t *s = &g.servers[b->server];
    b->mon_busy = 0;
    if (b->mon_has_value) {
        s->warned = 0;
        if (b->server == 0) {
            if (!g.o.no_writer_samples) polarsplit_engine_writer_sample(g.engine, 0, b->mon_value, b->mon_sent_at);
        } else {
            /* Replay only moves forward: the position read is at least the one at send time. */
            polarsplit_engine_reader_sample(g.engine, b->server, b->mon_value, b->mon_sent_at);
            server_health(b->server, 1);
        }
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
        if (!s->warned || g.o.verbose) logf_("monitor of server %u: %s %s", b->server, code, msg);
        s->warned = 1;
        return 0;
    }
    snprintf(why, sizeof why, "FATAL %s %s", code, msg);
    monitor_failed(b, why);
    return 1;
}

static void monitor_row(backend_t *b, const uint8_t *body, size_t blen) {
    if (blen < 6 || rd32(body + 2) == 0xffffffffu || 6 + (size_t)rd32(body + 2) > blen) return;
    uint64_t lsn;
    if (parse_lsn((const char *)body + 6, rd32(body + 2), &lsn) == 0) {
        b->mon_value = lsn;
        b->mon_has_value = 1;
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
