/* Executing one action: each kind reads its own member of polarsplit_action. */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "proxy.h"

/* CANCEL_REQUEST: find the session whose writer key the client quoted and cancel whatever its
 * current statement runs on (the writer, or a reader with our own handshake's key), then tell
 * that session (SPEC F-1): a pooled reader a cancel was sent to is closed when the session is
 * done with it, never handed to another client — the cancel's signal may land after the
 * statement it was meant for has ended, on whatever that connection runs next. */
static void do_cancel(const polarsplit_action_cancel_request *r) {
    const uint8_t *secret = r->secret.ptr;
    size_t len = r->secret.len;
    if (g.o.mode != MODE_LIBRARY) {
        send_cancel(0, r->pid, secret, len); /* the client saw the primary's own key */
        return;
    }
    for (client_t *c = g.clients; c; c = c->next) {
        if (c->dead || !c->router.is_library) continue;
        int32_t p = 0;
        uint8_t sec[64];
        size_t sl = 0;
        if (polarsplit_session_backend_key(c->router.st, &p, sec, sizeof sec, &sl) != POLARSPLIT_OK) continue;
        if (p != r->pid || sl != len || memcmp(sec, secret, len) != 0) continue;
        uint64_t conn = 0;
        if (polarsplit_session_executing_conn(c->router.st, &conn) != POLARSPLIT_OK) {
            /* F-1: no server has the client's work yet. A Query waiting for its reader
             * connection the engine answers with 57014 now; work it holds (a batch without its
             * Sync, a read waiting for the probe or for its reader) it places as at a Flush, and
             * once that runs it emits CANCEL_REQUEST with its own key behind the bytes — handled
             * right here again, when executing_conn names the connection (an input: drain that
             * client's session). Not taken: nothing runs or is held, PostgreSQL too ignores it. */
            record_cancel(c);
            if (polarsplit_session_cancel_unplaced(c->router.st, now_ms()) == POLARSPLIT_OK) {
                g.cancels_reported++;
                pump(c);
            }
            return;
        }
        backend_t *b = find_conn(c, conn);
        if (!b) return;
        if (b->role == ROLE_WRITER)
            send_cancel(0, r->pid, secret, len);
        else
            send_cancel(b->server, b->pid, b->secret, 4);
        record_cancel_forwarded(c, conn);
        c->router.ops->cancel_forwarded(c->router.st, conn);
        g.cancels_reported++;
        return;
    }
}

/* The database a startup packet names (PostgreSQL: the user's name when it names none). */
static int want_catalog(const polarsplit_bytes *startup) {
    char db[256];
    if (startup_param(startup->ptr, startup->len, "database", db, sizeof db) == 0 ||
        startup_param(startup->ptr, startup->len, "user", db, sizeof db) == 0)
        return catalog_want(db, strlen(db));
    return -1;
}

static void connect_writer(client_t *c, const polarsplit_action_connect_writer *w) {
    /* F-policy: the first client of a database has its user functions loaded (catalog.c). */
    if (c->router.is_library) c->catdb = want_catalog(&w->startup);
    backend_t *b = backend_new(ROLE_WRITER, 0);
    b->owner = c;
    c->writer = b;
    buf_append(&b->out, w->startup.ptr, w->startup.len);
    if (backend_connect(b) != 0) {
        detach(c, b);
        b->owner = NULL;
        backend_close(b);
        push_event(c, 0, POLARSPLIT_EVENT_WRITER_CONNECT_FAILED, 0, 0);
    }
}

static void attach_pooled(client_t *c, backend_t *b, uint32_t server, bool needs_reset) {
    b->owner = c;
    b->attached = 1;
    b->next_attached = c->attached;
    c->attached = b;
    push_event(c, b->id, POLARSPLIT_EVENT_READER_ATTACHED, server, needs_reset ? POLARSPLIT_EVENT_FLAG_NEEDS_RESET : 0);
    VLOG("client %llu: pooled reader %llu attached", (unsigned long long)c->id, (unsigned long long)b->id);
}

/* R-1b: whether a new connection to `server` may be opened now. While the server is failing
 * (its back-off is set), not before the back-off's time, and one attempt at a time — so a hung
 * or stopped standby costs one connect per back-off period, not one per session. */
static int may_connect(uint32_t server, uint64_t now) {
    uint64_t at = 0;
    if (!g.engine || polarsplit_engine_reader_retry_after(g.engine, server, &at) != POLARSPLIT_OK) return 1;
    if (now < at) {
        g.reader_backoff_refusals++;
        return 0;
    }
    if (g.servers[server].connecting > 0) {
        g.reader_inflight_refusals++;
        return 0;
    }
    return 1;
}

static void acquire_reader(client_t *c, const polarsplit_action_acquire_reader *r) {
    bool needs_reset = false;
    if (r->server == 0 || r->server >= g.nservers) {
        push_event(c, 0, POLARSPLIT_EVENT_READER_UNAVAILABLE, r->server, 0);
        return;
    }
    backend_t *b = pool_take(r->server, &r->key, &needs_reset);
    if (b) {
        attach_pooled(c, b, r->server, needs_reset);
        return;
    }
    uint64_t now = now_ms();
    if (!may_connect(r->server, now)) {
        /* No connection now: the writer answers (not a fault of the reader). */
        push_event(c, 0, POLARSPLIT_EVENT_READER_UNAVAILABLE, r->server, 0);
        return;
    }
    /* The server logs the reader in as the startup packet's last `user` key (as the library and
     * PostgreSQL read it): its credentials are that user's. */
    char user[256];
    if (startup_param(r->startup.ptr, r->startup.len, "user", user, sizeof user) != 0) {
        push_event(c, 0, POLARSPLIT_EVENT_READER_UNAVAILABLE, r->server, POLARSPLIT_EVENT_FLAG_NO_CREDENTIALS);
        return;
    }
    /* A new connection; the session waits for it without blocking anything else. */
    b = backend_new(ROLE_READER, r->server);
    b->user = strdup(user);
    if (!b->user) abort();
    b->key = r->key;
    b->owner = c;
    b->waiting = 1;
    b->deadline = now + g.o.reader_connect_timeout_ms;
    buf_append(&b->out, r->startup.ptr, r->startup.len);
    c->acquiring = b;
    b->inflight = 1;
    g.servers[r->server].connecting++;
    g.reader_conns_opened++;
    if (backend_connect(b) != 0) {
        detach(c, b);
        b->owner = NULL;
        backend_close(b);
        g.reader_handshake_failures++;
        g.reader_connect_failures++;
        push_event(c, 0, POLARSPLIT_EVENT_READER_CONNECT_FAILED, r->server, 0);
    }
}

static void release_reader(client_t *c, const polarsplit_action_release_reader *r) {
    backend_t *b = find_conn(c, r->conn);
    if (!b) return;
    detach(c, b);
    b->owner = NULL;
    if (b->dead || buf_size(&b->in) > 0 || buf_size(&b->out) > 0 || b->state != BS_READY) {
        backend_close(b);
        return;
    }
    if (!pool_put(b->server, &b->key, b, now_ms(), r->needs_reset)) backend_close(b);
}

static void log_decision(client_t *c, const polarsplit_decision *d) {
    const char *o = polarsplit_outcome_name(d->outcome), *r = polarsplit_reason_name(d->reason);
    logf_("client %llu: decision %s reason %s server %u wait %d target %llu attempt %u", (unsigned long long)c->id,
          o ? o : "?", r ? r : "?", d->has_server ? d->server : 0, d->wait, (unsigned long long)d->target_lsn,
          d->attempt);
}

/* FORWARD_CLIENT / DISCARD_CLIENT: the next n client bytes the session took. */
static void cover_client(client_t *c, size_t n, backend_t *to) {
    if (n > c->fed) {
        logf_("client %llu: action covers %zu client bytes, only %zu fed", (unsigned long long)c->id, n, c->fed);
        client_teardown(c);
        return;
    }
    if (to && !to->dead) buf_append(&to->out, buf_data(&c->in), n);
    buf_consume(&c->in, n);
    c->fed -= n;
}

/* FORWARD_BACKEND / DISCARD_BACKEND: the next n bytes received from `conn`. */
static void cover_backend(client_t *c, uint64_t conn, size_t n, int forward) {
    backend_t *b = find_conn(c, conn);
    if (!b) return;
    if (n > buf_size(&b->in)) {
        logf_("client %llu: action covers %zu bytes of connection %llu, only %zu fed", (unsigned long long)c->id, n,
              (unsigned long long)conn, buf_size(&b->in));
        client_teardown(c);
        return;
    }
    if (forward) buf_append(&c->out, buf_data(&b->in), n);
    buf_consume(&b->in, n);
}

static void send_backend(client_t *c, const polarsplit_action_send_backend *s) {
    backend_t *b = find_conn(c, s->conn);
    if (b && !b->dead) buf_append(&b->out, s->bytes.ptr, s->bytes.len);
}

static void close_backend(client_t *c, uint64_t conn) {
    backend_t *b = find_conn(c, conn);
    if (b) backend_close(b);
}

void exec_action(client_t *c, const polarsplit_action *a) {
    switch (a->kind) {
    case POLARSPLIT_ACTION_CLIENT_ENCRYPTION_REQUEST:
        buf_append(&c->out, "N", 1); /* no TLS in this example: the client goes on in clear */
        break;
    case POLARSPLIT_ACTION_CANCEL_REQUEST: do_cancel(&a->cancel_request); break;
    case POLARSPLIT_ACTION_CONNECT_WRITER: connect_writer(c, &a->connect_writer); break;
    case POLARSPLIT_ACTION_DECISION:
        if (g.o.verbose) log_decision(c, &a->decision);
        break;
    case POLARSPLIT_ACTION_ACQUIRE_READER: acquire_reader(c, &a->acquire_reader); break;
    case POLARSPLIT_ACTION_FORWARD_CLIENT:
        cover_client(c, a->forward_client.n, find_conn(c, a->forward_client.conn));
        break;
    case POLARSPLIT_ACTION_DISCARD_CLIENT: cover_client(c, a->discard_client.n, NULL); break;
    case POLARSPLIT_ACTION_SEND_BACKEND: send_backend(c, &a->send_backend); break;
    case POLARSPLIT_ACTION_FORWARD_BACKEND:
        cover_backend(c, a->forward_backend.conn, a->forward_backend.n, 1);
        break;
    case POLARSPLIT_ACTION_DISCARD_BACKEND:
        cover_backend(c, a->discard_backend.conn, a->discard_backend.n, 0);
        break;
    case POLARSPLIT_ACTION_SEND_CLIENT: buf_append(&c->out, a->send_client.bytes.ptr, a->send_client.bytes.len); break;
    case POLARSPLIT_ACTION_RELEASE_READER: release_reader(c, &a->release_reader); break;
    case POLARSPLIT_ACTION_PIN_WRITER:
        VLOG("client %llu: writer %s", (unsigned long long)c->id, a->pin_writer.pinned ? "pinned" : "unpinned");
        break; /* every client has its own writer connection here */
    case POLARSPLIT_ACTION_CLOSE_BACKEND: close_backend(c, a->close_backend.conn); break;
    case POLARSPLIT_ACTION_CLOSE_CLIENT: c->closing = 1; break;
    default: logf_("client %llu: unknown action kind %u (ignored)", (unsigned long long)c->id, a->kind);
    }
}
