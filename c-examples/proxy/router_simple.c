#define _POSIX_C_SOURCE 200809L
/* Modes `naive` and `primary-only`, without libpolarsplit.
 *
 * primary-only: the client's startup goes to the primary and every byte after it is relayed
 * both ways untouched (the baseline of a proxy that does not split at all).
 *
 * naive: what a keyword-matching splitter does. Every simple-protocol Query whose first keyword
 * is SELECT, sent while the primary connection is idle outside a transaction, runs on the
 * replica — with no wait of any kind — over one reader connection per client. Everything else
 * goes to the primary. It exists to show what read-your-writes costs when nobody keeps it. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "router.h"

uint64_t naive_reads_to_replica, naive_statements_to_primary, naive_replica_unavailable;

enum { PH_STARTUP, PH_AWAIT_WRITER, PH_RELAY, PH_CLOSED };

/* Incremental framing of a backend stream (headers may arrive split anywhere). */
typedef struct {
    uint8_t hdr[5];
    int hdr_n;
    uint32_t body_left;
    int forward; /* disposition of the body in progress */
    int want_status;
} scan_t;

typedef struct {
    polarsplit_action a;
    size_t off, len; /* bytes in the arena */
} qitem_t;

typedef struct {
    int naive;
    uint32_t server;
    int phase;
    buf_t startup;
    uint64_t writer, reader;
    int acquiring;
    uint64_t reader_retry_at;
    int reader_busy;   /* a statement runs on the reader */
    int writer_queries; /* Query/Sync sent to the writer and not answered (RFQ) yet */
    char writer_status;
    int auth_done;
    /* client message being streamed */
    uint64_t c_dest; /* 0: discard */
    size_t c_left;
    scan_t ws, rs;
    qitem_t *q;
    size_t qn, qhead, qcap;
    buf_t arena;
    char err[160];
} simple_t;

static polarsplit_action *push(simple_t *r, uint32_t kind) {
    if (r->qn == r->qcap) {
        r->qcap = r->qcap ? r->qcap * 2 : 16;
        qitem_t *q = realloc(r->q, r->qcap * sizeof *q);
        if (!q) abort();
        r->q = q;
    }
    qitem_t *it = &r->q[r->qn++];
    memset(it, 0, sizeof *it);
    it->a.kind = kind;
    return &it->a;
}

/* The bytes member of the kinds that carry bytes (filled in at poll: the arena may move). */
static polarsplit_bytes *bytes_member(polarsplit_action *a) {
    switch (a->kind) {
    case POLARSPLIT_ACTION_CANCEL_REQUEST: return &a->cancel_request.secret;
    case POLARSPLIT_ACTION_CONNECT_WRITER: return &a->connect_writer.startup;
    case POLARSPLIT_ACTION_ACQUIRE_READER: return &a->acquire_reader.startup;
    case POLARSPLIT_ACTION_SEND_CLIENT: return &a->send_client.bytes;
    default: return NULL;
    }
}

static polarsplit_action *push_bytes(simple_t *r, uint32_t kind, const void *b, size_t n) {
    polarsplit_action *a = push(r, kind);
    qitem_t *it = &r->q[r->qn - 1];
    it->off = buf_size(&r->arena);
    it->len = n;
    buf_append(&r->arena, b, n);
    return a;
}

static void fwd_client(simple_t *r, uint64_t conn, size_t n) {
    if (!n) return;
    if (conn) {
        push(r, POLARSPLIT_ACTION_FORWARD_CLIENT)->forward_client = (polarsplit_action_forward_client){conn, n};
    } else {
        push(r, POLARSPLIT_ACTION_DISCARD_CLIENT)->discard_client.n = n;
    }
}

static void backend_bytes(simple_t *r, uint64_t conn, size_t n, int forward) {
    if (!n) return;
    uint32_t kind = forward ? POLARSPLIT_ACTION_FORWARD_BACKEND : POLARSPLIT_ACTION_DISCARD_BACKEND;
    if (r->qn > r->qhead) {
        polarsplit_action *last = &r->q[r->qn - 1].a;
        if (last->kind == kind && forward && last->forward_backend.conn == conn) {
            last->forward_backend.n += n;
            return;
        }
        if (last->kind == kind && !forward && last->discard_backend.conn == conn) {
            last->discard_backend.n += n;
            return;
        }
    }
    polarsplit_action *a = push(r, kind);
    if (forward)
        a->forward_backend = (polarsplit_action_forward_backend){conn, n};
    else
        a->discard_backend = (polarsplit_action_discard_backend){conn, n};
}

static void send_error(simple_t *r, const char *severity, const char *code, const char *msg, int rfq) {
    buf_t body = {0};
    buf_append(&body, "S", 1);
    buf_append(&body, severity, strlen(severity) + 1);
    buf_append(&body, "C", 1);
    buf_append(&body, code, strlen(code) + 1);
    buf_append(&body, "M", 1);
    buf_append(&body, msg, strlen(msg) + 1);
    buf_append(&body, "", 1);
    buf_t m = {0};
    buf_msg(&m, 'E', buf_data(&body), buf_size(&body));
    if (rfq) buf_msg(&m, 'Z', &r->writer_status, 1);
    push_bytes(r, POLARSPLIT_ACTION_SEND_CLIENT, buf_data(&m), buf_size(&m));
    buf_free(&body);
    buf_free(&m);
}

/* Whether a Query's text starts with the keyword SELECT (after blanks, comments, parentheses). */
static int starts_with_select(const uint8_t *sql, size_t n) {
    size_t i = 0;
    for (;;) {
        while (i < n && (isspace(sql[i]) || sql[i] == '(')) i++;
        if (i + 1 < n && sql[i] == '-' && sql[i + 1] == '-') {
            while (i < n && sql[i] != '\n') i++;
            continue;
        }
        if (i + 1 < n && sql[i] == '/' && sql[i + 1] == '*') {
            i += 2;
            while (i + 1 < n && !(sql[i] == '*' && sql[i + 1] == '/')) i++;
            i += 2;
            continue;
        }
        break;
    }
    if (i + 6 > n) return 0;
    for (int k = 0; k < 6; k++)
        if (toupper(sql[i + k]) != "SELECT"[k]) return 0;
    return i + 6 == n || !isalnum(sql[i + 6]);
}

static polarsplit_status s_recv_client(void *st, const uint8_t *b, size_t n, uint64_t now, size_t *consumed) {
    simple_t *r = st;
    size_t pos = 0;
    if (r->phase == PH_CLOSED) {
        if (consumed) *consumed = 0;
        return POLARSPLIT_ERR_CLOSED;
    }
    while (pos < n) {
        size_t avail = n - pos;
        if (r->phase == PH_STARTUP) {
            if (avail < 8) break;
            uint32_t len = rd32(b + pos), code = rd32(b + pos + 4);
            if (len < 8 || len > 10000) {
                send_error(r, "FATAL", "08P01", "invalid startup packet", 0);
                push(r, POLARSPLIT_ACTION_CLOSE_CLIENT);
                r->phase = PH_CLOSED;
                pos = n;
                break;
            }
            if (avail < len) break;
            if (code == 80877103 || code == 80877104) {
                push(r, POLARSPLIT_ACTION_CLIENT_ENCRYPTION_REQUEST)->client_encryption_request.gss = code == 80877104;
                fwd_client(r, 0, len);
            } else if (code == 80877102 && len == 16) {
                push_bytes(r, POLARSPLIT_ACTION_CANCEL_REQUEST, b + pos + 12, 4)->cancel_request.pid =
                    (int32_t)rd32(b + pos + 8);
                fwd_client(r, 0, len);
                push(r, POLARSPLIT_ACTION_CLOSE_CLIENT);
                r->phase = PH_CLOSED;
            } else {
                buf_append(&r->startup, b + pos, len);
                push_bytes(r, POLARSPLIT_ACTION_CONNECT_WRITER, b + pos, len);
                fwd_client(r, 0, len);
                r->phase = PH_AWAIT_WRITER;
            }
            pos += len;
            continue;
        }
        if (r->phase != PH_RELAY) break;
        if (r->c_left) {
            size_t k = avail < r->c_left ? avail : r->c_left;
            fwd_client(r, r->c_dest, k);
            r->c_left -= k;
            pos += k;
            continue;
        }
        if (!r->naive) {
            fwd_client(r, r->writer, avail);
            pos = n;
            break;
        }
        if (r->reader_busy || r->acquiring) break; /* one statement at a time on the reader */
        if (avail < 5) break;
        uint8_t tag = b[pos];
        uint32_t len = rd32(b + pos + 1);
        if (len < 4) {
            send_error(r, "FATAL", "08P01", "invalid message length", 0);
            push(r, POLARSPLIT_ACTION_CLOSE_CLIENT);
            r->phase = PH_CLOSED;
            pos = n;
            break;
        }
        uint64_t dest = r->writer;
        if (tag == 'Q' && r->auth_done) {
            size_t need = 5 + (len - 4 < 256 ? len - 4 : 256);
            if (avail < need) break;
            int eligible = r->writer_queries == 0 && r->writer_status == 'I' &&
                           starts_with_select(b + pos + 5, need - 5);
            if (eligible && !r->reader && now >= r->reader_retry_at) {
                polarsplit_action *a = push_bytes(r, POLARSPLIT_ACTION_ACQUIRE_READER, buf_data(&r->startup),
                                                  buf_size(&r->startup));
                a->acquire_reader.server = r->server;
                /* The key: this client's whole startup packet (a reader serves one client). */
                uint64_t h = 1469598103934665603ull;
                for (size_t i = 0; i < buf_size(&r->startup); i++) h = (h ^ buf_data(&r->startup)[i]) * 1099511628211ull;
                a->acquire_reader.key.auth_hash = h; /* shared by clients with the very same startup packet */
                r->acquiring = 1;
                break;
            }
            if (eligible && r->reader) {
                dest = r->reader;
                r->reader_busy = 1;
                naive_reads_to_replica++;
            } else {
                r->writer_queries++;
                naive_statements_to_primary++;
            }
        } else if (tag == 'S' || tag == 'Q') {
            r->writer_queries++;
            if (tag == 'Q') naive_statements_to_primary++;
        } else if (tag == 'X') {
            if (r->reader && !r->reader_busy) {
                push(r, POLARSPLIT_ACTION_RELEASE_READER)->release_reader.conn = r->reader; /* idle: back to the pool */
                r->reader = 0;
            }
            fwd_client(r, r->writer, avail < 5 + (size_t)len - 4 ? avail : 5 + (size_t)len - 4);
            push(r, POLARSPLIT_ACTION_CLOSE_CLIENT);
            r->phase = PH_CLOSED;
            pos = n;
            break;
        }
        r->c_dest = dest;
        r->c_left = 1 + (size_t)len;
    }
    if (consumed) *consumed = pos;
    return POLARSPLIT_OK;
}

/* Runs the scanner over n bytes of `conn`; reader messages 'S' and 'K' are dropped. Tracks RFQs. */
static void scan(simple_t *r, scan_t *s, uint64_t conn, const uint8_t *b, size_t n, int is_reader) {
    size_t pos = 0;
    while (pos < n) {
        if (s->hdr_n < 5) {
            size_t k = 5 - (size_t)s->hdr_n;
            if (k > n - pos) k = n - pos;
            memcpy(s->hdr + s->hdr_n, b + pos, k);
            s->hdr_n += (int)k;
            pos += k;
            if (s->hdr_n < 5) {
                /* The disposition is decided once the header is whole; hold these bytes. */
                return;
            }
            uint8_t tag = s->hdr[0];
            uint32_t len = rd32(s->hdr + 1);
            s->body_left = len >= 4 ? len - 4 : 0;
            s->forward = !(is_reader && (tag == 'S' || tag == 'K'));
            s->want_status = tag == 'Z';
            backend_bytes(r, conn, 5, s->forward);
            if (s->body_left == 0) s->hdr_n = 0;
            continue;
        }
        size_t k = s->body_left < n - pos ? s->body_left : n - pos;
        if (s->want_status && k > 0) {
            char status = (char)b[pos];
            s->want_status = 0;
            if (is_reader) {
                r->reader_busy = 0;
            } else {
                r->writer_status = status;
                r->auth_done = 1;
                if (r->writer_queries > 0) r->writer_queries--;
            }
        }
        backend_bytes(r, conn, k, s->forward);
        s->body_left -= (uint32_t)k;
        pos += k;
        if (s->body_left == 0) s->hdr_n = 0;
    }
}

static polarsplit_status s_recv_backend(void *st, uint64_t conn, const uint8_t *b, size_t n, uint64_t now) {
    simple_t *r = st;
    (void)now;
    if (conn != r->writer && conn != r->reader) {
        snprintf(r->err, sizeof r->err, "connection %llu is not used by this session", (unsigned long long)conn);
        return POLARSPLIT_ERR_UNKNOWN_CONNECTION;
    }
    if (!r->naive && r->auth_done && r->ws.hdr_n == 0) {
        /* A plain relay once the login is done (scanned until then, to see it end), switching
         * at a message boundary so no header byte is held by the scanner. */
        backend_bytes(r, conn, n, 1);
        return POLARSPLIT_OK;
    }
    /* Header bytes held by the scanner are acted on when the header completes: account for
     * them by acting on whole headers (5 bytes) at once, see scan(). */
    scan(r, conn == r->writer ? &r->ws : &r->rs, conn, b, n, conn == r->reader);
    return POLARSPLIT_OK;
}

static polarsplit_status s_event(void *st, uint64_t conn, uint32_t kind, uint32_t server, uint32_t flags,
                                 uint64_t now) {
    simple_t *r = st;
    (void)server;
    (void)flags;
    switch (kind) {
    case POLARSPLIT_EVENT_WRITER_CONNECTED:
        r->writer = conn;
        r->phase = PH_RELAY;
        r->writer_status = 'I';
        break;
    case POLARSPLIT_EVENT_WRITER_CONNECT_FAILED:
        send_error(r, "FATAL", "08006", "polarsplit-proxy: could not connect to the primary", 0);
        push(r, POLARSPLIT_ACTION_CLOSE_CLIENT);
        r->phase = PH_CLOSED;
        break;
    case POLARSPLIT_EVENT_READER_ATTACHED:
        r->reader = conn;
        r->acquiring = 0;
        memset(&r->rs, 0, sizeof r->rs);
        break;
    case POLARSPLIT_EVENT_READER_UNAVAILABLE:
    case POLARSPLIT_EVENT_READER_CONNECT_FAILED: /* the naive router keeps no reader health */
        r->acquiring = 0;
        r->reader_retry_at = now + 1000;
        naive_replica_unavailable++;
        break;
    case POLARSPLIT_EVENT_CONNECTION_LOST:
        if (conn == r->writer) {
            send_error(r, "FATAL", "08006", "polarsplit-proxy: the connection to the primary was lost", 0);
            push(r, POLARSPLIT_ACTION_CLOSE_CLIENT);
            r->phase = PH_CLOSED;
        } else if (conn == r->reader) {
            r->reader = 0;
            if (r->reader_busy) {
                r->reader_busy = 0;
                r->c_left = 0;
                send_error(r, "ERROR", "08006", "polarsplit-proxy (naive): the replica connection was lost", 1);
            }
        }
        break;
    default:
        return POLARSPLIT_ERR_INVALID_ARGUMENT;
    }
    return POLARSPLIT_OK;
}

/* The library's contract: `out_size` is the caller's sizeof(polarsplit_action). */
static polarsplit_status s_poll(void *st, polarsplit_action *out, size_t out_size) {
    simple_t *r = st;
    if (out_size < sizeof *out) return POLARSPLIT_ERR_ABI;
    if (r->qhead == r->qn) {
        r->qhead = r->qn = 0;
        buf_consume(&r->arena, buf_size(&r->arena));
        out->kind = POLARSPLIT_ACTION_NONE;
        return POLARSPLIT_DONE;
    }
    qitem_t *it = &r->q[r->qhead++];
    *out = it->a;
    polarsplit_bytes *bytes = bytes_member(out);
    if (bytes) *bytes = (polarsplit_bytes){buf_data(&r->arena) + it->off, it->len};
    return POLARSPLIT_OK;
}

static int s_authenticated(void *st) { return ((simple_t *)st)->auth_done; }

static size_t s_last_error(const void *st, char *buf, size_t len) {
    const simple_t *r = st;
    size_t n = strlen(r->err);
    if (len) snprintf(buf, len, "%s", r->err);
    return n;
}

static void s_free(void *st) {
    simple_t *r = st;
    if (!r) return;
    buf_free(&r->startup);
    buf_free(&r->arena);
    free(r->q);
    free(r);
}

/* The simple routers keep no deadlines (a reader that hangs hangs its client, as in a naive
 * splitter); their cancels go to the primary only (actions.c), never to a pooled reader. */
static polarsplit_status s_next_deadline(void *st, uint64_t *at) {
    (void)st;
    *at = UINT64_MAX;
    return POLARSPLIT_DONE;
}
static polarsplit_status s_on_timeout(void *st, uint64_t now) {
    (void)st;
    (void)now;
    return POLARSPLIT_OK;
}
static polarsplit_status s_cancel_forwarded(void *st, uint64_t conn) {
    (void)st;
    (void)conn;
    return POLARSPLIT_OK;
}
/* The simple routers keep nothing queued: every byte went where it goes as it arrived. */
static polarsplit_status s_client_eof(void *st, uint64_t now) {
    simple_t *r = st;
    (void)now;
    if (r->phase == PH_CLOSED) return POLARSPLIT_ERR_CLOSED;
    push(r, POLARSPLIT_ACTION_CLOSE_CLIENT);
    r->phase = PH_CLOSED;
    return POLARSPLIT_OK;
}

static const router_ops SIMPLE_OPS = {s_recv_client, s_recv_backend,     s_event, s_poll,
                                      s_last_error,  s_authenticated,    s_free,  s_next_deadline,
                                      s_on_timeout,  s_cancel_forwarded, s_client_eof};

void router_simple(int naive, uint32_t server, router_t *out) {
    simple_t *r = calloc(1, sizeof *r);
    if (!r) abort();
    r->naive = naive;
    r->server = server;
    r->writer_status = 'I';
    out->ops = &SIMPLE_OPS;
    out->st = r;
    out->is_library = 0;
}
