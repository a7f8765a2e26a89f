/* Backend connections: the writer (its startup relayed from the client), readers (the proxy logs
 * in itself: trust, or a password from the credential map), monitors (monitor.c), catalogue
 * loads (catalog.c) and one-shot cancel connections.
 *
 * Reader faults (SPEC R-1a, R-1b): a reader connection that cannot be opened — TCP refused or
 * failed, the handshake timed out, an ErrorResponse to the startup (57P03: the standby is starting
 * up) — is READER_CONNECT_FAILED to the session that asked for it, or, when none waits for it
 * any more, the proxy's own polarsplit_engine_reader_connect_failed. A login this user cannot
 * make (28P01, 28000, no password in the map, an exchange that fails) is no fault of the reader:
 * READER_UNAVAILABLE with NO_CREDENTIALS. A pooled idle connection that breaks or says FATAL is
 * polarsplit_engine_reader_lost (and connection_closed, in backend_close). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <errno.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy.h"

backend_t *backend_new(enum role role, uint32_t server) {
    backend_t *b = calloc(1, sizeof *b);
    if (!b) abort();
    b->id = g.next_id++;
    b->fd = -1;
    b->watched_fd = -1;
    b->role = role;
    b->server = server;
    b->next = g.backends;
    if (g.backends) g.backends->prev = b;
    g.backends = b;
    return b;
}

int backend_connect(backend_t *b) {
    server_t *s = &g.servers[b->server];
    b->fd = socket(s->addr.ss_family, SOCK_STREAM, 0);
    if (b->fd < 0) return -1;
    b->watched_fd = -1; /* a new socket: the loop registers it */
    set_nonblocking(b->fd);
    int one = 1;
    setsockopt(b->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    b->state = BS_CONNECTING;
    if (connect(b->fd, (struct sockaddr *)&s->addr, s->alen) == 0) return 0;
    return errno == EINPROGRESS ? 0 : -1;
}

/* A reader connection left its handshake (ready, failed or closed): one fewer in flight. */
static void inflight_done(backend_t *b) {
    if (!b->inflight) return;
    b->inflight = 0;
    if (g.servers[b->server].connecting > 0) g.servers[b->server].connecting--;
}

void report_reader_connect_failed(uint32_t server, int starting_up) {
    g.reader_connect_failures++;
    if (!g.engine || server == 0) return;
    polarsplit_engine_reader_connect_failed(g.engine, server, now_ms(), starting_up != 0);
    g.reader_connect_failures_reported++;
}

/* An idle pooled reader broke (EOF, a write error, a FATAL while idle): the reader had an outage
 * and a failure (R-1a, R-1b). Closing it reports the connection id (connection_closed). */
static void pooled_reader_lost(backend_t *b, const char *why) {
    VLOG("pooled reader %llu to server %u: %s", (unsigned long long)b->id, b->server, why);
    if (g.engine && b->server > 0) {
        polarsplit_engine_reader_lost(g.engine, b->server, now_ms());
        g.reader_losses_reported++;
    }
    backend_close(b);
}

void detach(client_t *c, backend_t *b) {
    if (!c) return;
    if (c->writer == b) c->writer = NULL;
    if (c->acquiring == b) c->acquiring = NULL;
    for (backend_t **p = &c->attached; *p; p = &(*p)->next_attached) {
        if (*p == b) {
            *p = b->next_attached;
            break;
        }
    }
    b->next_attached = NULL;
    b->attached = 0;
}

/* Closes a backend (its memory is reclaimed at the end of the loop iteration). */
void backend_close(backend_t *b) {
    if (b->dead) return;
    b->dead = 1;
    inflight_done(b);
    /* A reader connection the proxy closes on its own — idle too long in the pool, broken or
     * talking while idle there, not poolable after a session released it, or at shutdown — and
     * not at its session's CLOSE_BACKEND (then it is still attached): the engine forgets what
     * it knew of it (SPEC E-2: the statements prepared on it travel with the connection id). */
    if (b->role == ROLE_READER && !b->attached && b->state == BS_READY && g.engine) {
        polarsplit_engine_connection_closed(g.engine, b->id);
        g.reader_closes_reported++;
    }
    if (b->owner) detach(b->owner, b);
    b->owner = NULL;
    pool_remove(b);
    if (b->role == ROLE_MONITOR && g.servers[b->server].monitor == b) g.servers[b->server].monitor = NULL;
    if (b->fd >= 0) {
        if (b->role != ROLE_CANCEL) flush_fd(b->fd, &b->out);
        close(b->fd);
        b->fd = -1;
    }
}

void backend_free(backend_t *b) {
    if (b->prev)
        b->prev->next = b->next;
    else
        g.backends = b->next;
    if (b->next) b->next->prev = b->prev;
    buf_free(&b->in);
    buf_free(&b->out);
    auth_free(b->scram);
    catalog_free_load(b->cat);
    free(b->user);
    free(b);
}

void send_cancel(uint32_t server, int32_t pid, const uint8_t *secret, size_t len) {
    backend_t *b = backend_new(ROLE_CANCEL, server);
    uint8_t pkt[16];
    wr32(pkt, 16);
    wr32(pkt + 4, 80877102);
    wr32(pkt + 8, (uint32_t)pid);
    memset(pkt + 12, 0, 4);
    memcpy(pkt + 12, secret, len < 4 ? len : 4);
    buf_append(&b->out, pkt, 16);
    if (backend_connect(b) != 0) backend_close(b);
    g.cancels_sent++;
}

void reader_fail_acquire(backend_t *b) {
    client_t *c = b->owner;
    g.reader_handshake_failures++;
    if (b->nocreds) g.reader_nocreds++;
    if (c && b->waiting) {
        detach(c, b);
        b->owner = NULL;
        b->waiting = 0;
        if (b->nocreds) {
            push_event(c, 0, POLARSPLIT_EVENT_READER_UNAVAILABLE, b->server, POLARSPLIT_EVENT_FLAG_NO_CREDENTIALS);
        } else {
            /* The session reports the fault to the engine (R-1a/R-1b) and the writer answers. */
            g.reader_connect_failures++;
            push_event(c, 0, POLARSPLIT_EVENT_READER_CONNECT_FAILED, b->server,
                       b->starting_up ? POLARSPLIT_EVENT_FLAG_STARTING_UP : 0);
        }
        backend_close(b);
        pump(c);
    } else {
        /* Nobody waits for it any more (its client left during the handshake): the proxy's own
         * attempt, reported by the proxy. */
        if (!b->nocreds) report_reader_connect_failed(b->server, b->starting_up);
        backend_close(b);
    }
}

/* One Authentication ('R') message of the proxy's own login. Returns 0 to go on, -1 on failure. */
static int handshake_auth(backend_t *b, const uint8_t *body, size_t blen) {
    char err[200] = "";
    const char *pw = b->user ? creds_lookup(b->user) : NULL;
    auth_result r = auth_step(body, blen, b->user ? b->user : "", pw, &b->scram, &b->out, err, sizeof err);
    if (r == AUTH_NO_CREDENTIALS) {
        b->nocreds = 1;
        VLOG("connection %llu: no credentials for user %s", (unsigned long long)b->id, b->user);
        return -1;
    }
    if (r == AUTH_FAILED) {
        /* This user's exchange cannot succeed here (unsupported method, a signature that does not
         * verify): like a refused login, not a fault of the server. */
        b->nocreds = 1;
        logf_("connection %llu: authentication: %s", (unsigned long long)b->id, err);
        return -1;
    }
    return 0;
}

static void handshake_refused(backend_t *b, const uint8_t *body, size_t blen) {
    char code[8], msg[200];
    error_fields(body, blen, code, sizeof code, msg, sizeof msg);
    /* 28P01 wrong password, 28000 no pg_hba entry / role: this user cannot log in. */
    if (strcmp(code, "28P01") == 0 || strcmp(code, "28000") == 0) b->nocreds = 1;
    /* 57P03: "the database system is starting up" (or in recovery and not yet consistent). */
    if (strcmp(code, "57P03") == 0) b->starting_up = 1;
    VLOG("connection %llu: login refused: %s %s", (unsigned long long)b->id, code, msg);
    if (b->role == ROLE_MONITOR && (!g.servers[b->server].warned || g.o.verbose))
        logf_("monitor of server %u: login refused: %s %s", b->server, code, msg);
}

/* Handles the handshake messages in b->in. Returns 1 when ready, 0 to go on, -1 on failure. */
static int handshake(backend_t *b) {
    while (buf_size(&b->in) >= 5) {
        const uint8_t *m = buf_data(&b->in);
        uint32_t len = rd32(m + 1);
        if (len < 4 || len > (1u << 20)) return -1;
        if (buf_size(&b->in) < 1 + (size_t)len) return 0;
        const uint8_t *body = m + 5;
        size_t blen = len - 4;
        int done = 0;
        switch (m[0]) {
        case 'R':
            if (handshake_auth(b, body, blen) != 0) return -1;
            break;
        case 'E': handshake_refused(b, body, blen); return -1;
        case 'K':
            if (blen >= 8) {
                b->pid = (int32_t)rd32(body);
                memcpy(b->secret, body + 4, 4);
            }
            break;
        case 'Z': done = 1; break;
        default: break;
        }
        buf_consume(&b->in, 1 + (size_t)len);
        if (done) {
            auth_free(b->scram);
            b->scram = NULL;
            return 1;
        }
    }
    return 0;
}

static void reader_ready(backend_t *b) {
    b->state = BS_READY;
    inflight_done(b);
    client_t *c = b->owner;
    if (c && b->waiting && !c->dead) {
        b->waiting = 0;
        c->acquiring = NULL;
        b->attached = 1;
        b->next_attached = c->attached;
        c->attached = b;
        push_event(c, b->id, POLARSPLIT_EVENT_READER_ATTACHED, b->server, POLARSPLIT_EVENT_FLAG_FRESH);
        pump(c);
        if (!c->dead) feed_client(c);
    } else {
        b->owner = NULL;
        b->waiting = 0;
        /* Warm for the next session of this key. */
        if (!pool_put(b->server, &b->key, b, now_ms(), false)) backend_close(b);
    }
}

/* Feeds the bytes received since `old` to the owner's session. */
static void feed_backend(client_t *c, backend_t *b, size_t old) {
    size_t n = buf_size(&b->in) - old;
    if (n == 0) return;
    polarsplit_status st = c->router.ops->recv_backend(c->router.st, b->id, buf_data(&b->in) + old, n, now_ms());
    if (c->record && (st == POLARSPLIT_OK || st == POLARSPLIT_ERR_PROTOCOL)) {
        char prefix[40];
        snprintf(prefix, sizeof prefix, "backend %llu ", (unsigned long long)b->id);
        record_hex(c->record, prefix, buf_data(&b->in) + old, n);
    }
    if (st == POLARSPLIT_ERR_UNKNOWN_CONNECTION) {
        logf_("client %llu: bytes from connection %llu the session does not use", (unsigned long long)c->id,
              (unsigned long long)b->id);
        b->in.len -= n; /* they were never fed */
        backend_close(b);
        return;
    }
    /* CLOSED: the client's Terminate ended the session while a hidden statement's answer (an
     * LSN probe's) was still on its way; the connection closes with the client, nothing is lost. */
    if (st != POLARSPLIT_OK && st != POLARSPLIT_ERR_CLOSED) {
        char err[256];
        c->router.ops->last_error(c->router.st, err, sizeof err);
        logf_("client %llu: recv_backend: %s (%s)", (unsigned long long)c->id, polarsplit_status_str(st), err);
    }
    pump(c);
    if (st == POLARSPLIT_OK || st == POLARSPLIT_ERR_PROTOCOL) {
        if (st == POLARSPLIT_OK) feed_client(c);
        return;
    }
    client_teardown(c);
}

/* A session backend broke: feed CONNECTION_LOST while it can still be found, then close it. */
void session_backend_lost(backend_t *b) {
    client_t *c = b->owner;
    if (!c || c->dead) {
        backend_close(b);
        return;
    }
    push_event(c, b->id, POLARSPLIT_EVENT_CONNECTION_LOST, b->server, 0);
    pump(c);
    backend_close(b);
    if (!c->dead) feed_client(c);
}

int can_read_backend(const backend_t *b) {
    if (b->dead || b->fd < 0 || b->state == BS_CONNECTING) return 0;
    if ((b->role == ROLE_WRITER || (b->role == ROLE_READER && b->attached)) && b->owner)
        return buf_size(&b->owner->out) < HIGH_WATER;
    return 1;
}

static void writer_connect_failed(backend_t *b) {
    client_t *c = b->owner;
    if (!c) {
        backend_close(b);
        return;
    }
    detach(c, b);
    push_event(c, 0, POLARSPLIT_EVENT_WRITER_CONNECT_FAILED, 0, 0);
    b->owner = NULL;
    backend_close(b);
    pump(c);
}

void backend_connected(backend_t *b) {
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(b->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
        switch (b->role) {
        case ROLE_WRITER: writer_connect_failed(b); return;
        case ROLE_READER: reader_fail_acquire(b); return;
        case ROLE_MONITOR: monitor_failed(b, strerror(err)); return;
        case ROLE_CATALOG: catalog_failed(b, strerror(err)); return;
        case ROLE_CANCEL: backend_close(b); return;
        }
    }
    b->state = b->role == ROLE_WRITER ? BS_READY : BS_HANDSHAKE;
    if (b->role == ROLE_WRITER && b->owner) {
        /* Its startup packet is queued in b->out and goes out with the next flush. */
        push_event(b->owner, b->id, POLARSPLIT_EVENT_WRITER_CONNECTED, 0, 0);
        pump(b->owner);
    }
}

/* The bytes of a connection a session uses (the writer, an attached reader) go to the session. */
static void session_readable(backend_t *b, size_t old, int eof) {
    client_t *c = b->owner;
    if (!c || c->dead) {
        backend_close(b);
        return;
    }
    feed_backend(c, b, old);
    if (eof && !b->dead) session_backend_lost(b);
}

/* A reader's bytes: its handshake, or (attached) the session's; idle in the pool, its end. */
static void reader_readable(backend_t *b, size_t old, int eof) {
    if (b->state == BS_HANDSHAKE) {
        int r = handshake(b);
        if (r < 0 || (eof && r == 0)) {
            reader_fail_acquire(b);
            return;
        }
        if (r == 1) {
            buf_consume(&b->in, buf_size(&b->in));
            reader_ready(b);
        }
        if (eof && !b->dead) {
            if (b->attached)
                session_backend_lost(b);
            else
                pooled_reader_lost(b, "connection lost");
        }
        return;
    }
    if (!b->attached) {
        /* Idle in the pool: whatever it says ends it. EOF or an ErrorResponse (a FATAL on
         * shutdown, 57P01) is a loss of the reader; anything else (a ParameterStatus) only
         * makes the connection unusable for the pool. */
        if (eof || (buf_size(&b->in) > 0 && buf_data(&b->in)[0] == 'E'))
            pooled_reader_lost(b, eof ? "connection lost" : "error while idle");
        else if (buf_size(&b->in) > 0)
            backend_close(b);
        return;
    }
    session_readable(b, old, eof);
}

/* Reads what the socket has (bounded), then dispatches by role. */
void backend_readable(backend_t *b) {
    uint8_t tmp[READ_CHUNK];
    size_t old = buf_size(&b->in);
    int eof = 0;
    for (;;) {
        ssize_t n = recv(b->fd, tmp, sizeof tmp, 0);
        if (n > 0) {
            buf_append(&b->in, tmp, (size_t)n);
            /* A short read took what was there (as client_readable's). */
            if ((size_t)n < sizeof tmp || buf_size(&b->in) - old >= TURN_BYTES) break;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        eof = 1;
        break;
    }
    switch (b->role) {
    case ROLE_CANCEL: backend_close(b); return;
    case ROLE_MONITOR:
        if (b->state == BS_HANDSHAKE) {
            int r = handshake(b);
            if (r < 0) {
                monitor_failed(b, "login failed");
                return;
            }
            if (r == 1) {
                b->state = BS_READY;
                g.servers[b->server].monitor_next = 0;
            }
        }
        monitor_readable(b, eof);
        return;
    case ROLE_READER: reader_readable(b, old, eof); return;
    case ROLE_WRITER: session_readable(b, old, eof); return;
    case ROLE_CATALOG:
        if (b->state == BS_HANDSHAKE) {
            int r = handshake(b);
            if (r < 0 || (eof && r == 0)) {
                catalog_failed(b, "login failed");
                return;
            }
            if (r == 1) b->state = BS_READY;
        }
        catalog_readable(b, eof);
        return;
    }
}

void backend_write_failed(backend_t *b) {
    if (b->role == ROLE_WRITER || (b->role == ROLE_READER && b->attached))
        session_backend_lost(b);
    else if (b->role == ROLE_READER && b->state == BS_READY)
        pooled_reader_lost(b, "write failed");
    else if (b->role == ROLE_READER)
        reader_fail_acquire(b);
    else if (b->role == ROLE_MONITOR)
        monitor_failed(b, "write failed");
    else if (b->role == ROLE_CATALOG)
        catalog_failed(b, "write failed");
    else
        backend_close(b);
}
