/* polarsplit-proxy: a real PostgreSQL proxy that takes every routing decision from libpolarsplit.
 *
 * One thread, non-blocking sockets, poll(2). Per client: a session (router.h) is fed the client's
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
 * WAL position (SPEC R-1), and reader health. SIGUSR1 prints the counters; SIGTERM/SIGINT shut
 * down cleanly (counters printed at exit too). See `--help`. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "auth.h"
#include "buf.h"
#include "polarsplit.h"
#include "pool.h"
#include "router.h"

#define HIGH_WATER (1u << 20)
#define MAX_SERVERS 16
#define READ_CHUNK 65536

enum mode { MODE_LIBRARY, MODE_NAIVE, MODE_PRIMARY_ONLY };
static const char *const MODE_NAMES[] = {"library", "naive", "primary-only"};

enum role { ROLE_WRITER, ROLE_READER, ROLE_MONITOR, ROLE_CANCEL };
enum bstate { BS_CONNECTING, BS_HANDSHAKE, BS_READY };

struct client;

typedef struct backend {
    uint64_t id;
    int fd;
    enum role role;
    enum bstate state;
    uint32_t server; /* 0: the primary; 1..n: readers */
    buf_t in;        /* received; for session backends: fed and not yet covered by an action */
    buf_t out;
    struct client *owner; /* writer: its client; reader: the client it is attached to / acquired for */
    int attached;         /* reader: the owner's session uses it */
    int waiting;          /* reader: handshake for the owner's ACQUIRE_READER */
    int dead;
    int nocreds;
    char *user;
    reader_key_t key;
    int32_t pid; /* BackendKeyData of our own handshake (readers), for cancels */
    uint8_t secret[4];
    scram_t *scram;
    uint64_t deadline;
    /* monitor */
    int mon_busy;
    uint64_t mon_sent_at;
    uint64_t mon_value;
    int mon_has_value;
    struct backend *next_attached; /* the owner's attached readers */
    struct backend *next, *prev;   /* all backends */
} backend_t;

typedef struct {
    uint64_t conn;
    uint32_t kind, server, flags;
} event_t;

typedef struct client {
    uint64_t id;
    int fd;
    router_t router;
    buf_t in; /* [0, fed): fed to the session, not yet covered by an action; then unfed bytes */
    size_t fed;
    buf_t out;
    backend_t *writer;
    backend_t *attached;
    backend_t *acquiring;
    int closing;
    int dead;
    event_t evq[8];
    int nev;
    uint64_t events_fed; /* feed_client re-offers its bytes after an event made progress possible */
    char host[INET6_ADDRSTRLEN];
    uint16_t port;
    FILE *record; /* --record: this session's inputs, in the transcript format of replay.c */
    struct client *next, *prev;
} client_t;

typedef struct {
    char host[256];
    char port[16];
    struct sockaddr_storage addr;
    socklen_t alen;
    backend_t *monitor;
    uint64_t monitor_next;
    int healthy;
    int warned;
} server_t;

static struct {
    enum mode mode;
    char listen_host[256], listen_port[16];
    server_t servers[MAX_SERVERS];
    uint32_t nservers; /* servers[0] is the primary */
    uint32_t reader_hostgroup;
    uint32_t monitor_interval_ms;
    uint32_t reader_connect_timeout_ms;
    uint32_t pool_idle_ms;
    const char *monitor_user, *monitor_db;
    const char *stats_file;
    const char *record_dir;
    const char *settings[64][2];
    int nsettings;
    int verbose;
    int no_writer_samples; /* --no-writer-samples: the writer monitor feeds nothing to the engine */
    polarsplit_engine *engine;
    int listen_fd;
    int sigpipe[2];
    uint64_t next_id;
    client_t *clients;
    backend_t *backends;
    /* the proxy's own numbers */
    uint64_t clients_total, reader_conns_opened, reader_handshake_failures, reader_nocreds, cancels_sent,
        monitor_errors;
    int stop;
} g = {.mode = MODE_LIBRARY,
       .listen_host = "127.0.0.1",
       .listen_port = "6432",
       .reader_hostgroup = 1,
       .monitor_interval_ms = 10,
       .reader_connect_timeout_ms = 2000,
       .pool_idle_ms = 60000,
       .monitor_user = "postgres",
       .monitor_db = "postgres",
       .listen_fd = -1,
       .sigpipe = {-1, -1},
       .next_id = 1};

static volatile sig_atomic_t got_signal;

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("polarsplit-proxy: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
#define VLOG(...)                      \
    do {                               \
        if (g.verbose) logf_(__VA_ARGS__); \
    } while (0)

/* ------------------------------------------------------------------------------------------ */
/* Sockets                                                                                     */

static int set_nonblocking(int fd) {
    int fl = fcntl(fd, F_GETFL, 0);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int resolve(const char *host, const char *port, struct sockaddr_storage *out, socklen_t *len) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0 || !res) return -1;
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static int split_hostport(const char *s, char *host, size_t hcap, char *port, size_t pcap) {
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || !colon[1]) return -1;
    size_t hl = (size_t)(colon - s);
    if (s[0] == '[' && colon[-1] == ']') {
        s++;
        hl -= 2;
    }
    if (hl + 1 > hcap || strlen(colon + 1) + 1 > pcap) return -1;
    memcpy(host, s, hl);
    host[hl] = '\0';
    snprintf(port, pcap, "%s", colon + 1);
    return 0;
}

/* Writes what it can of `b` to `fd`. Returns -1 on a broken connection. */
static int flush_fd(int fd, buf_t *b) {
    while (buf_size(b) > 0) {
        ssize_t n = send(fd, buf_data(b), buf_size(b), MSG_NOSIGNAL);
        if (n > 0) {
            buf_consume(b, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Backends                                                                                    */

static backend_t *backend_new(enum role role, uint32_t server) {
    backend_t *b = calloc(1, sizeof *b);
    if (!b) abort();
    b->id = g.next_id++;
    b->fd = -1;
    b->role = role;
    b->server = server;
    b->next = g.backends;
    if (g.backends) g.backends->prev = b;
    g.backends = b;
    return b;
}

/* Starts a non-blocking connect. Returns -1 when it failed at once. */
static int backend_connect(backend_t *b) {
    server_t *s = &g.servers[b->server];
    b->fd = socket(s->addr.ss_family, SOCK_STREAM, 0);
    if (b->fd < 0) return -1;
    set_nonblocking(b->fd);
    int one = 1;
    setsockopt(b->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    b->state = BS_CONNECTING;
    if (connect(b->fd, (struct sockaddr *)&s->addr, s->alen) == 0) return 0;
    return errno == EINPROGRESS ? 0 : -1;
}

static void detach(client_t *c, backend_t *b) {
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
static void backend_close(backend_t *b) {
    if (b->dead) return;
    b->dead = 1;
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

static void backend_free(backend_t *b) {
    if (b->prev)
        b->prev->next = b->next;
    else
        g.backends = b->next;
    if (b->next) b->next->prev = b->prev;
    buf_free(&b->in);
    buf_free(&b->out);
    auth_free(b->scram);
    free(b->user);
    free(b);
}

/* ------------------------------------------------------------------------------------------ */
/* Clients: feeding the router and executing its actions                                       */

static void client_teardown(client_t *c);
static void pump(client_t *c);

static void push_event(client_t *c, uint64_t conn, uint32_t kind, uint32_t server, uint32_t flags) {
    if (c->nev == (int)(sizeof c->evq / sizeof c->evq[0])) {
        logf_("client %llu: event queue full", (unsigned long long)c->id);
        client_teardown(c);
        return;
    }
    c->evq[c->nev++] = (event_t){conn, kind, server, flags};
}

static backend_t *find_conn(client_t *c, uint64_t id) {
    if (c->writer && c->writer->id == id) return c->writer;
    for (backend_t *b = c->attached; b; b = b->next_attached)
        if (b->id == id) return b;
    return NULL;
}

static void send_cancel(uint32_t server, int32_t pid, const uint8_t *secret, size_t len) {
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

/* CANCEL_REQUEST: find the session whose writer key the client quoted and cancel whatever its
 * current statement runs on (the writer, or a reader with our own handshake's key). */
static void do_cancel(int32_t pid, const uint8_t *secret, size_t len) {
    if (g.mode != MODE_LIBRARY) {
        send_cancel(0, pid, secret, len); /* the client saw the primary's own key */
        return;
    }
    for (client_t *c = g.clients; c; c = c->next) {
        if (c->dead || !c->router.is_library) continue;
        int32_t p = 0;
        uint8_t sec[64];
        size_t sl = 0;
        if (polarsplit_session_backend_key(c->router.st, &p, sec, sizeof sec, &sl) != POLARSPLIT_OK) continue;
        if (p != pid || sl != len || memcmp(sec, secret, len) != 0) continue;
        uint64_t conn = 0;
        if (polarsplit_session_executing_conn(c->router.st, &conn) != POLARSPLIT_OK) return;
        backend_t *b = find_conn(c, conn);
        if (!b) return;
        if (b->role == ROLE_WRITER)
            send_cancel(0, pid, secret, len);
        else
            send_cancel(b->server, b->pid, b->secret, 4);
        return;
    }
}

static void reader_fail_acquire(backend_t *b) {
    client_t *c = b->owner;
    g.reader_handshake_failures++;
    if (b->nocreds) g.reader_nocreds++;
    if (c && b->waiting) {
        detach(c, b);
        b->owner = NULL;
        b->waiting = 0;
        push_event(c, 0, POLARSPLIT_EVENT_READER_UNAVAILABLE, b->server,
                   b->nocreds ? POLARSPLIT_EVENT_FLAG_NO_CREDENTIALS : 0);
        backend_close(b);
        pump(c);
    } else {
        backend_close(b);
    }
}

static void acquire_reader(client_t *c, const polarsplit_action *a) {
    reader_key_t key = {a->key_profile_generation, a->key_auth_hash, a->key_startup_identity_hash,
                        a->key_startup_options_hash};
    bool needs_reset = false;
    if (a->server == 0 || a->server >= g.nservers) {
        push_event(c, 0, POLARSPLIT_EVENT_READER_UNAVAILABLE, a->server, 0);
        return;
    }
    backend_t *b = pool_take(a->server, &key, &needs_reset);
    if (b) {
        b->owner = c;
        b->attached = 1;
        b->next_attached = c->attached;
        c->attached = b;
        push_event(c, b->id, POLARSPLIT_EVENT_READER_ATTACHED, a->server,
                   needs_reset ? POLARSPLIT_EVENT_FLAG_NEEDS_RESET : 0);
        VLOG("client %llu: pooled reader %llu attached", (unsigned long long)c->id, (unsigned long long)b->id);
        return;
    }
    char user[256];
    if (startup_param(a->bytes, a->bytes_len, "user", user, sizeof user) != 0) {
        push_event(c, 0, POLARSPLIT_EVENT_READER_UNAVAILABLE, a->server, POLARSPLIT_EVENT_FLAG_NO_CREDENTIALS);
        return;
    }
    /* A new connection; the session waits for it without blocking anything else. */
    b = backend_new(ROLE_READER, a->server);
    b->user = strdup(user);
    if (!b->user) abort();
    b->key = key;
    b->owner = c;
    b->waiting = 1;
    b->deadline = now_ms() + g.reader_connect_timeout_ms;
    buf_append(&b->out, a->bytes, a->bytes_len);
    c->acquiring = b;
    g.reader_conns_opened++;
    if (backend_connect(b) != 0) {
        detach(c, b);
        b->owner = NULL;
        backend_close(b);
        g.reader_handshake_failures++;
        push_event(c, 0, POLARSPLIT_EVENT_READER_UNAVAILABLE, a->server, 0);
    }
}

static void release_reader(client_t *c, backend_t *b, int needs_reset) {
    detach(c, b);
    b->owner = NULL;
    if (b->dead || buf_size(&b->in) > 0 || buf_size(&b->out) > 0 || b->state != BS_READY) {
        backend_close(b);
        return;
    }
    if (!pool_put(b->server, &b->key, b, now_ms(), needs_reset)) backend_close(b);
}

static void log_decision(client_t *c, const polarsplit_action *a) {
    const char *o = polarsplit_outcome_name(a->outcome), *r = polarsplit_reason_name(a->reason);
    logf_("client %llu: decision %s reason %s server %u wait %d target %llu attempt %u", (unsigned long long)c->id,
          o ? o : "?", r ? r : "?", a->server, a->wait, (unsigned long long)a->target_lsn, a->attempt);
}

static void exec_action(client_t *c, const polarsplit_action *a) {
    backend_t *b;
    switch (a->kind) {
    case POLARSPLIT_ACTION_CLIENT_ENCRYPTION_REQUEST:
        buf_append(&c->out, "N", 1); /* no TLS in this example: the client goes on in clear */
        break;
    case POLARSPLIT_ACTION_CANCEL_REQUEST:
        do_cancel(a->pid, a->bytes, a->bytes_len);
        break;
    case POLARSPLIT_ACTION_CONNECT_WRITER:
        b = backend_new(ROLE_WRITER, 0);
        b->owner = c;
        c->writer = b;
        buf_append(&b->out, a->bytes, a->bytes_len);
        if (backend_connect(b) != 0) {
            detach(c, b);
            b->owner = NULL;
            backend_close(b);
            push_event(c, 0, POLARSPLIT_EVENT_WRITER_CONNECT_FAILED, 0, 0);
        }
        break;
    case POLARSPLIT_ACTION_DECISION:
        if (g.verbose) log_decision(c, a);
        break;
    case POLARSPLIT_ACTION_ACQUIRE_READER:
        acquire_reader(c, a);
        break;
    case POLARSPLIT_ACTION_FORWARD_CLIENT:
    case POLARSPLIT_ACTION_DISCARD_CLIENT: {
        size_t n = a->n;
        if (n > c->fed) {
            logf_("client %llu: action covers %zu client bytes, only %zu fed", (unsigned long long)c->id, n, c->fed);
            client_teardown(c);
            return;
        }
        if (a->kind == POLARSPLIT_ACTION_FORWARD_CLIENT && (b = find_conn(c, a->conn)) != NULL && !b->dead)
            buf_append(&b->out, buf_data(&c->in), n);
        buf_consume(&c->in, n);
        c->fed -= n;
        break;
    }
    case POLARSPLIT_ACTION_SEND_BACKEND:
        if ((b = find_conn(c, a->conn)) != NULL && !b->dead) buf_append(&b->out, a->bytes, a->bytes_len);
        break;
    case POLARSPLIT_ACTION_FORWARD_BACKEND:
    case POLARSPLIT_ACTION_DISCARD_BACKEND:
        if ((b = find_conn(c, a->conn)) == NULL) break;
        if (a->n > buf_size(&b->in)) {
            logf_("client %llu: action covers %zu bytes of connection %llu, only %zu fed", (unsigned long long)c->id,
                  a->n, (unsigned long long)a->conn, buf_size(&b->in));
            client_teardown(c);
            return;
        }
        if (a->kind == POLARSPLIT_ACTION_FORWARD_BACKEND) buf_append(&c->out, buf_data(&b->in), a->n);
        buf_consume(&b->in, a->n);
        break;
    case POLARSPLIT_ACTION_SEND_CLIENT:
        buf_append(&c->out, a->bytes, a->bytes_len);
        break;
    case POLARSPLIT_ACTION_RELEASE_READER:
        if ((b = find_conn(c, a->conn)) != NULL) release_reader(c, b, a->flag);
        break;
    case POLARSPLIT_ACTION_PIN_WRITER:
        VLOG("client %llu: writer %s", (unsigned long long)c->id, a->flag ? "pinned" : "unpinned");
        break; /* every client has its own writer connection here */
    case POLARSPLIT_ACTION_CLOSE_BACKEND:
        if ((b = find_conn(c, a->conn)) != NULL) backend_close(b);
        break;
    case POLARSPLIT_ACTION_CLOSE_CLIENT:
        c->closing = 1;
        break;
    default:
        logf_("client %llu: unknown action kind %u (ignored)", (unsigned long long)c->id, a->kind);
    }
}

static void drain(client_t *c) {
    polarsplit_action a;
    polarsplit_status st;
    while (!c->dead && (st = c->router.ops->poll(c->router.st, &a)) == POLARSPLIT_OK) exec_action(c, &a);
}

static void report_status(client_t *c, const char *what, polarsplit_status st) {
    char err[256];
    c->router.ops->last_error(c->router.st, err, sizeof err);
    logf_("client %llu: %s: %s (%s)", (unsigned long long)c->id, what, polarsplit_status_str(st), err);
}

/* --record: the inputs of a session as a transcript that c-examples/replay replays. */
static void record_hex(FILE *f, const char *prefix, const uint8_t *b, size_t n) {
    if (!f || n == 0) return;
    fputs(prefix, f);
    for (size_t i = 0; i < n; i++) fprintf(f, "%02x", b[i]);
    fputc('\n', f);
    fflush(f);
}

static const char *event_name(uint32_t kind) {
    switch (kind) {
    case POLARSPLIT_EVENT_WRITER_CONNECTED: return "writer_connected";
    case POLARSPLIT_EVENT_WRITER_CONNECT_FAILED: return "writer_connect_failed";
    case POLARSPLIT_EVENT_READER_ATTACHED: return "reader_attached";
    case POLARSPLIT_EVENT_READER_UNAVAILABLE: return "reader_unavailable";
    case POLARSPLIT_EVENT_CONNECTION_LOST: return "connection_lost";
    default: return "unknown";
    }
}

static void record_open(client_t *c) {
    if (!g.record_dir || !c->router.is_library) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/client-%llu.transcript", g.record_dir, (unsigned long long)c->id);
    c->record = fopen(path, "w");
    if (!c->record) return;
    fprintf(c->record, "# recorded by polarsplit-proxy from a real session (client %s:%u)\n", c->host, c->port);
    for (int i = 0; i < g.nsettings; i++) fprintf(c->record, "set %s %s\n", g.settings[i][0], g.settings[i][1]);
    for (uint32_t i = 1; i < g.nservers; i++) fprintf(c->record, "reader %u %u\n", i, g.reader_hostgroup);
    fprintf(c->record, "info %s %u %s %s\n", c->host, c->port, g.listen_host, g.listen_port);
}

/* Drains the actions, then feeds queued events one by one (each followed by a drain). */
static void pump(client_t *c) {
    for (;;) {
        if (c->dead) return;
        drain(c);
        if (c->dead || c->nev == 0) return;
        event_t e = c->evq[0];
        memmove(c->evq, c->evq + 1, (size_t)(c->nev - 1) * sizeof *c->evq);
        c->nev--;
        c->events_fed++;
        if (c->record)
            fprintf(c->record, "event %s %llu %u %u\n", event_name(e.kind), (unsigned long long)e.conn, e.server,
                    e.flags);
        polarsplit_status st = c->router.ops->event(c->router.st, e.conn, e.kind, e.server, e.flags, now_ms());
        if (st < 0 && st != POLARSPLIT_ERR_CLOSED) report_status(c, "event refused", st);
        if (st == POLARSPLIT_ERR_POISONED || st == POLARSPLIT_ERR_PANIC) {
            client_teardown(c);
            return;
        }
    }
}

/* Offers the client bytes the session has not taken yet. */
static void feed_client(client_t *c) {
    while (!c->dead && !c->closing && buf_size(&c->in) > c->fed) {
        size_t consumed = 0;
        uint64_t events = c->events_fed;
        polarsplit_status st = c->router.ops->recv_client(c->router.st, buf_data(&c->in) + c->fed,
                                                          buf_size(&c->in) - c->fed, now_ms(), &consumed);
        if (st == POLARSPLIT_OK) {
            record_hex(c->record, "client ", buf_data(&c->in) + c->fed, consumed);
            c->fed += consumed;
            pump(c);
            if (consumed == 0 && c->events_fed == events) return;
            continue;
        }
        if (st == POLARSPLIT_ERR_PROTOCOL) {
            report_status(c, "client protocol error", st);
            pump(c); /* the error for the client and the closes */
            c->closing = 1;
            return;
        }
        if (st != POLARSPLIT_ERR_CLOSED) report_status(c, "recv_client", st);
        pump(c);
        client_teardown(c);
        return;
    }
}

static void feed_backend(client_t *c, backend_t *b, size_t old) {
    size_t n = buf_size(&b->in) - old;
    if (n == 0) return;
    polarsplit_status st = c->router.ops->recv_backend(c->router.st, b->id, buf_data(&b->in) + old, n, now_ms());
    if (st == POLARSPLIT_OK) {
        if (c->record) {
            char prefix[40];
            snprintf(prefix, sizeof prefix, "backend %llu ", (unsigned long long)b->id);
            record_hex(c->record, prefix, buf_data(&b->in) + old, n);
        }
        pump(c);
        feed_client(c);
        return;
    }
    if (st == POLARSPLIT_ERR_UNKNOWN_CONNECTION) {
        report_status(c, "bytes from a connection the session does not use", st);
        b->in.len -= n; /* they were never fed */
        backend_close(b);
        return;
    }
    if (st == POLARSPLIT_ERR_PROTOCOL) {
        report_status(c, "backend protocol error", st);
        pump(c);
        return;
    }
    report_status(c, "recv_backend", st);
    pump(c);
    client_teardown(c);
}

/* A session backend broke: feed CONNECTION_LOST while it can still be found, then close it. */
static void session_backend_lost(backend_t *b) {
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

static void client_teardown(client_t *c) {
    if (c->dead) return;
    c->dead = 1;
    if (c->fd >= 0) {
        flush_fd(c->fd, &c->out);
        close(c->fd);
        c->fd = -1;
    }
    if (c->acquiring) {
        /* The handshake goes on; the connection is pooled when ready. */
        c->acquiring->owner = NULL;
        c->acquiring->waiting = 0;
        c->acquiring = NULL;
    }
    if (c->writer) {
        backend_t *w = c->writer;
        detach(c, w);
        w->owner = NULL;
        backend_close(w); /* flushes what the session sent last (e.g. Terminate) */
    }
    while (c->attached) {
        backend_t *b = c->attached;
        detach(c, b);
        b->owner = NULL;
        backend_close(b); /* mid-statement or pinned: its state is unknown, never pooled */
    }
}

static void client_free(client_t *c) {
    if (c->prev)
        c->prev->next = c->next;
    else
        g.clients = c->next;
    if (c->next) c->next->prev = c->prev;
    if (c->router.st) c->router.ops->free(c->router.st);
    if (c->record) fclose(c->record);
    buf_free(&c->in);
    buf_free(&c->out);
    free(c);
}

static void accept_clients(void) {
    for (;;) {
        struct sockaddr_storage sa;
        socklen_t sl = sizeof sa;
        int fd = accept(g.listen_fd, (struct sockaddr *)&sa, &sl);
        if (fd < 0) return;
        set_nonblocking(fd);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        client_t *c = calloc(1, sizeof *c);
        if (!c) abort();
        c->id = g.next_id++;
        c->fd = fd;
        if (sa.ss_family == AF_INET) {
            struct sockaddr_in *in = (struct sockaddr_in *)&sa;
            inet_ntop(AF_INET, &in->sin_addr, c->host, sizeof c->host);
            c->port = ntohs(in->sin_port);
        } else if (sa.ss_family == AF_INET6) {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&sa;
            inet_ntop(AF_INET6, &in6->sin6_addr, c->host, sizeof c->host);
            c->port = ntohs(in6->sin6_port);
        }
        if (g.mode == MODE_LIBRARY) {
            polarsplit_client_info info = {c->host[0] ? c->host : NULL, c->port, g.listen_host,
                                           (uint16_t)atoi(g.listen_port), -1};
            polarsplit_status st = router_library(g.engine, &info, &c->router);
            if (st != POLARSPLIT_OK) {
                logf_("session_new: %s", polarsplit_status_str(st));
                close(fd);
                free(c);
                continue;
            }
        } else {
            router_simple(g.mode == MODE_NAIVE, 1, &c->router);
        }
        c->next = g.clients;
        if (g.clients) g.clients->prev = c;
        g.clients = c;
        g.clients_total++;
        record_open(c);
        VLOG("client %llu from %s:%u", (unsigned long long)c->id, c->host, c->port);
    }
}

static void client_readable(client_t *c) {
    uint8_t tmp[READ_CHUNK];
    for (;;) {
        ssize_t n = recv(c->fd, tmp, sizeof tmp, 0);
        if (n > 0) {
            buf_append(&c->in, tmp, (size_t)n);
            if (buf_size(&c->in) - c->fed >= HIGH_WATER) break;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        /* EOF or error: the client is gone. Offer what it sent (e.g. Terminate) first. */
        feed_client(c);
        client_teardown(c);
        return;
    }
    feed_client(c);
}

/* ------------------------------------------------------------------------------------------ */
/* Reader and monitor handshakes (the proxy logs in itself)                                    */

static void monitor_startup(backend_t *b) {
    const char *kv[] = {"user", g.monitor_user, "database", g.monitor_db, "application_name", "polarsplit-monitor", NULL};
    startup_build(&b->out, kv);
    free(b->user);
    b->user = strdup(g.monitor_user);
    if (!b->user) abort();
}

static void server_health(uint32_t server, int healthy) {
    server_t *s = &g.servers[server];
    if (s->healthy == healthy) return;
    s->healthy = healthy;
    if (server > 0 && g.engine) polarsplit_engine_set_reader_health(g.engine, server, healthy != 0);
    logf_("server %u (%s:%s) is %s", server, s->host, s->port, healthy ? "up" : "down");
}

static void monitor_failed(backend_t *b, const char *why) {
    server_t *s = &g.servers[b->server];
    if (!s->warned || g.verbose) logf_("monitor of server %u: %s", b->server, why);
    s->warned = 1;
    server_health(b->server, 0);
    s->monitor_next = now_ms() + 200;
    backend_close(b);
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
        char tag = (char)m[0];
        int done = 0;
        if (tag == 'R') {
            char err[200] = "";
            const char *pw = b->user ? creds_lookup(b->user) : NULL;
            auth_result r = auth_step(body, blen, b->user ? b->user : "", pw, &b->scram, &b->out, err, sizeof err);
            if (r == AUTH_NO_CREDENTIALS) {
                b->nocreds = 1;
                VLOG("connection %llu: no credentials for user %s", (unsigned long long)b->id, b->user);
                return -1;
            }
            if (r == AUTH_FAILED) {
                logf_("connection %llu: authentication: %s", (unsigned long long)b->id, err);
                return -1;
            }
        } else if (tag == 'E') {
            char code[8], msg[200];
            error_fields(body, blen, code, sizeof code, msg, sizeof msg);
            /* 28P01 wrong password, 28000 no pg_hba entry / role: this user cannot log in. */
            if (strcmp(code, "28P01") == 0 || strcmp(code, "28000") == 0) b->nocreds = 1;
            VLOG("connection %llu: login refused: %s %s", (unsigned long long)b->id, code, msg);
            if (b->role == ROLE_MONITOR) logf_("monitor of server %u: login refused: %s %s", b->server, code, msg);
            return -1;
        } else if (tag == 'K' && blen >= 8) {
            b->pid = (int32_t)rd32(body);
            memcpy(b->secret, body + 4, 4);
        } else if (tag == 'Z') {
            done = 1;
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

/* ------------------------------------------------------------------------------------------ */
/* Monitors (SPEC R-1)                                                                         */

static void monitor_tick(uint64_t now) {
    for (uint32_t i = 0; i < g.nservers; i++) {
        server_t *s = &g.servers[i];
        if (!s->monitor) {
            if (now < s->monitor_next) continue;
            backend_t *b = backend_new(ROLE_MONITOR, i);
            monitor_startup(b);
            b->deadline = now + 2000;
            s->monitor = b;
            if (backend_connect(b) != 0) monitor_failed(b, "connect failed");
            continue;
        }
        backend_t *b = s->monitor;
        if (b->state == BS_READY && !b->mon_busy && now >= s->monitor_next) {
            const char *q = i == 0 ? "SELECT pg_current_wal_insert_lsn()" : "SELECT pg_last_wal_replay_lsn()";
            buf_msg(&b->out, 'Q', q, strlen(q) + 1);
            b->mon_busy = 1;
            b->mon_has_value = 0;
            b->mon_sent_at = now;
            s->monitor_next = now + g.monitor_interval_ms;
        } else if (b->state != BS_READY && now > b->deadline) {
            monitor_failed(b, "handshake timed out");
        }
    }
}

static void monitor_data(backend_t *b) {
    server_t *s = &g.servers[b->server];
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
        case 'D':
            if (blen >= 6 && rd32(body + 2) != 0xffffffffu && 6 + (size_t)rd32(body + 2) <= blen) {
                uint64_t lsn;
                if (parse_lsn((const char *)body + 6, rd32(body + 2), &lsn) == 0) {
                    b->mon_value = lsn;
                    b->mon_has_value = 1;
                }
            }
            break;
        case 'E': {
            char code[8], msg[200];
            error_fields(body, blen, code, sizeof code, msg, sizeof msg);
            g.monitor_errors++;
            if (!s->warned || g.verbose) logf_("monitor of server %u: %s %s", b->server, code, msg);
            s->warned = 1;
            if (len >= 5 && memcmp(body, "SFATAL", 6) == 0) {
                monitor_failed(b, "FATAL error");
                return;
            }
            break;
        }
        case 'Z':
            b->mon_busy = 0;
            if (b->mon_has_value) {
                s->warned = 0;
                if (b->server == 0) {
                    if (!g.no_writer_samples)
                        polarsplit_engine_writer_sample(g.engine, 0, b->mon_value, b->mon_sent_at);
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
            break;
        default:
            break;
        }
        buf_consume(&b->in, 1 + (size_t)len);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Backend I/O                                                                                 */

static int can_read_backend(const backend_t *b) {
    if (b->dead || b->fd < 0 || b->state == BS_CONNECTING) return 0;
    if ((b->role == ROLE_WRITER || (b->role == ROLE_READER && b->attached)) && b->owner)
        return buf_size(&b->owner->out) < HIGH_WATER;
    return 1;
}

static void backend_connected(backend_t *b) {
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(b->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
        switch (b->role) {
        case ROLE_WRITER: {
            client_t *c = b->owner;
            if (c) {
                detach(c, b);
                push_event(c, 0, POLARSPLIT_EVENT_WRITER_CONNECT_FAILED, 0, 0);
                b->owner = NULL;
                backend_close(b);
                pump(c);
            } else {
                backend_close(b);
            }
            return;
        }
        case ROLE_READER:
            reader_fail_acquire(b);
            return;
        case ROLE_MONITOR:
            monitor_failed(b, strerror(err));
            return;
        case ROLE_CANCEL:
            backend_close(b);
            return;
        }
    }
    b->state = b->role == ROLE_WRITER ? BS_READY : BS_HANDSHAKE;
    if (b->role == ROLE_WRITER && b->owner) {
        /* Its startup packet is queued in b->out and goes out with the next flush. */
        push_event(b->owner, b->id, POLARSPLIT_EVENT_WRITER_CONNECTED, 0, 0);
        pump(b->owner);
    }
}

/* Reads from a backend; dispatches by role and state. */
static void backend_readable(backend_t *b) {
    uint8_t tmp[READ_CHUNK];
    size_t old = buf_size(&b->in);
    int eof = 0;
    for (;;) {
        ssize_t n = recv(b->fd, tmp, sizeof tmp, 0);
        if (n > 0) {
            buf_append(&b->in, tmp, (size_t)n);
            if (buf_size(&b->in) - old >= HIGH_WATER) break;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        eof = 1;
        break;
    }
    switch (b->role) {
    case ROLE_CANCEL:
        backend_close(b);
        return;
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
        if (b->state == BS_READY) monitor_data(b);
        if (eof && !b->dead) monitor_failed(b, "connection lost");
        return;
    case ROLE_READER:
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
                    backend_close(b);
            }
            return;
        }
        if (!b->attached) {
            /* Idle in the pool: whatever it says (a FATAL on shutdown) ends it. */
            if (eof || buf_size(&b->in) > 0) backend_close(b);
            return;
        }
        break;
    case ROLE_WRITER:
        break;
    }
    client_t *c = b->owner;
    if (!c || c->dead) {
        backend_close(b);
        return;
    }
    feed_backend(c, b, old);
    if (eof && !b->dead) session_backend_lost(b);
}

/* ------------------------------------------------------------------------------------------ */
/* Counters                                                                                    */

static void print_stats(FILE *f) {
    fprintf(f, "polarsplit-proxy stats mode=%s\n", MODE_NAMES[g.mode]);
    if (g.mode == MODE_LIBRARY) {
        uint32_t n = polarsplit_counter_count();
        for (uint32_t i = 0; i < n; i++) {
            uint64_t v = 0;
            if (polarsplit_engine_counter(g.engine, i, &v) == POLARSPLIT_OK)
                fprintf(f, "counter %s %llu\n", polarsplit_counter_name(i), (unsigned long long)v);
        }
        for (uint32_t o = 0; polarsplit_outcome_name(o); o++) {
            uint64_t v = 0;
            if (polarsplit_engine_outcome_count(g.engine, o, &v) == POLARSPLIT_OK)
                fprintf(f, "outcome %s %llu\n", polarsplit_outcome_name(o), (unsigned long long)v);
        }
        for (uint32_t r = 0; r < 128; r++) {
            uint64_t v = 0;
            if (polarsplit_reason_name(r) && polarsplit_engine_reason_count(g.engine, r, &v) == POLARSPLIT_OK && v)
                fprintf(f, "reason %s %llu\n", polarsplit_reason_name(r), (unsigned long long)v);
        }
    } else if (g.mode == MODE_NAIVE) {
        fprintf(f, "proxy naive_reads_to_replica %llu\n", (unsigned long long)naive_reads_to_replica);
        fprintf(f, "proxy naive_statements_to_primary %llu\n", (unsigned long long)naive_statements_to_primary);
        fprintf(f, "proxy naive_replica_unavailable %llu\n", (unsigned long long)naive_replica_unavailable);
    }
    size_t active = 0;
    for (client_t *c = g.clients; c; c = c->next) active += !c->dead;
    fprintf(f, "proxy clients_total %llu\n", (unsigned long long)g.clients_total);
    fprintf(f, "proxy clients_active %zu\n", active);
    fprintf(f, "proxy reader_connections_opened %llu\n", (unsigned long long)g.reader_conns_opened);
    fprintf(f, "proxy reader_handshake_failures %llu\n", (unsigned long long)g.reader_handshake_failures);
    fprintf(f, "proxy reader_no_credentials %llu\n", (unsigned long long)g.reader_nocreds);
    fprintf(f, "proxy readers_pooled_idle %zu\n", pool_size());
    polarsplit_pool_stats ps;
    if (pool_stats(&ps) == 0) {
        fprintf(f, "proxy pool_checkouts_hit %llu\n", (unsigned long long)ps.hits);
        fprintf(f, "proxy pool_checkouts_missed %llu\n", (unsigned long long)ps.misses);
        fprintf(f, "proxy pool_resets_handed_out %llu\n", (unsigned long long)ps.reset_handouts);
    }
    fprintf(f, "proxy cancels_sent %llu\n", (unsigned long long)g.cancels_sent);
    fprintf(f, "proxy monitor_errors %llu\n", (unsigned long long)g.monitor_errors);
    fprintf(f, "polarsplit-proxy stats end\n");
    fflush(f);
}

static void dump_stats(void) {
    print_stats(stderr);
    if (g.stats_file) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", g.stats_file);
        FILE *f = fopen(tmp, "w");
        if (f) {
            print_stats(f);
            fclose(f);
            rename(tmp, g.stats_file);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Set-up, the loop, shutdown                                                                  */

static void on_signal(int sig) {
    got_signal = 1;
    char ch = sig == SIGUSR1 ? 'U' : 'T';
    ssize_t r = write(g.sigpipe[1], &ch, 1);
    (void)r;
}

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
            "  --monitor-interval-ms N     how often monitors sample LSNs (default 10)\n"
            "  --monitor-user NAME         monitor login (default postgres; password from --credentials)\n"
            "  --monitor-database NAME     (default postgres)\n"
            "  --reader-connect-timeout-ms N  reader handshake limit before READER_UNAVAILABLE (default 2000)\n"
            "  --pool-idle-ms N            close pooled readers idle this long (default 60000)\n"
            "  --stats-file PATH           also write the counters there on SIGUSR1 and at exit\n"
            "  --record DIR                write each session's inputs to DIR as a transcript for replay\n"
            "  --no-writer-samples         do not feed the writer's LSN samples to the engine (with\n"
            "                              --set lsn_probe=off: a session stays on the primary after\n"
            "                              its first write, the classic pinning the demo compares with)\n"
            "  --verbose                   log every decision\n"
            "Signals: SIGUSR1 prints the counters; SIGTERM/SIGINT stop.\n");
}

static int add_server(const char *spec) {
    char *copy = strdup(spec);
    if (!copy) abort();
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (g.nservers >= MAX_SERVERS) {
            free(copy);
            return -1;
        }
        server_t *s = &g.servers[g.nservers];
        if (split_hostport(tok, s->host, sizeof s->host, s->port, sizeof s->port) != 0 ||
            resolve(s->host, s->port, &s->addr, &s->alen) != 0) {
            fprintf(stderr, "polarsplit-proxy: bad or unresolvable address '%s'\n", tok);
            free(copy);
            return -1;
        }
        s->healthy = 1;
        g.nservers++;
    }
    free(copy);
    return 0;
}

static int listen_on(void) {
    struct sockaddr_storage sa;
    socklen_t sl;
    if (resolve(g.listen_host, g.listen_port, &sa, &sl) != 0) return -1;
    int fd = socket(sa.ss_family, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sl) != 0 || listen(fd, 128) != 0) {
        close(fd);
        return -1;
    }
    set_nonblocking(fd);
    return fd;
}

static void reap(void) {
    for (client_t *c = g.clients, *next; c; c = next) {
        next = c->next;
        if (c->dead) client_free(c);
    }
    for (backend_t *b = g.backends, *next; b; b = next) {
        next = b->next;
        if (b->dead) backend_free(b);
    }
}

static void shutdown_all(void) {
    for (client_t *c = g.clients; c; c = c->next) client_teardown(c);
    backend_t *b;
    while ((b = pool_pop_any()) != NULL) {
        buf_msg(&b->out, 'X', NULL, 0);
        backend_close(b);
    }
    for (b = g.backends; b; b = b->next) {
        if (!b->dead && b->state == BS_READY && b->role != ROLE_CANCEL) buf_msg(&b->out, 'X', NULL, 0);
        backend_close(b);
    }
    reap();
}

int main(int argc, char **argv) {
    const char *primary = NULL;
    polarsplit_config_builder *builder = polarsplit_config_builder_new();
    char err[512];
    int nreaders_specs = 0;
    const char *reader_specs[MAX_SERVERS];
    const char *creds_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE                                                          \
    do {                                                                    \
        if (!v) {                                                           \
            fprintf(stderr, "polarsplit-proxy: %s needs a value\n", a);     \
            return 2;                                                       \
        }                                                                   \
        i++;                                                                \
    } while (0)
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            polarsplit_config_builder_free(builder);
            return 0;
        } else if (strcmp(a, "--listen") == 0) {
            NEED_VALUE;
            if (split_hostport(v, g.listen_host, sizeof g.listen_host, g.listen_port, sizeof g.listen_port) != 0) {
                fprintf(stderr, "polarsplit-proxy: bad --listen '%s'\n", v);
                return 2;
            }
        } else if (strcmp(a, "--primary") == 0) {
            NEED_VALUE;
            primary = v;
        } else if (strcmp(a, "--reader") == 0) {
            NEED_VALUE;
            if (nreaders_specs < MAX_SERVERS) reader_specs[nreaders_specs++] = v;
        } else if (strcmp(a, "--mode") == 0) {
            NEED_VALUE;
            if (strcmp(v, "library") == 0)
                g.mode = MODE_LIBRARY;
            else if (strcmp(v, "naive") == 0)
                g.mode = MODE_NAIVE;
            else if (strcmp(v, "primary-only") == 0)
                g.mode = MODE_PRIMARY_ONLY;
            else {
                fprintf(stderr, "polarsplit-proxy: --mode is library, naive or primary-only\n");
                return 2;
            }
        } else if (strcmp(a, "--set") == 0) {
            NEED_VALUE;
            char name[128];
            const char *eq = strchr(v, '=');
            if (!eq || (size_t)(eq - v) >= sizeof name) {
                fprintf(stderr, "polarsplit-proxy: --set wants NAME=VALUE, got '%s'\n", v);
                return 2;
            }
            memcpy(name, v, (size_t)(eq - v));
            name[eq - v] = '\0';
            if (polarsplit_config_builder_set(builder, name, eq + 1, err, sizeof err) != POLARSPLIT_OK) {
                fprintf(stderr, "polarsplit-proxy: --set %s: %s\n", v, err);
                polarsplit_config_builder_free(builder);
                return 2;
            }
            if (strcmp(name, "reader_hostgroup") == 0) g.reader_hostgroup = (uint32_t)atoi(eq + 1);
            if (g.nsettings < 64) {
                g.settings[g.nsettings][0] = strdup(name);
                g.settings[g.nsettings][1] = eq + 1;
                if (!g.settings[g.nsettings][0]) abort();
                g.nsettings++;
            }
        } else if (strcmp(a, "--credentials") == 0) {
            NEED_VALUE;
            creds_path = v;
        } else if (strcmp(a, "--monitor-interval-ms") == 0) {
            NEED_VALUE;
            g.monitor_interval_ms = (uint32_t)atoi(v);
        } else if (strcmp(a, "--monitor-user") == 0) {
            NEED_VALUE;
            g.monitor_user = v;
        } else if (strcmp(a, "--monitor-database") == 0) {
            NEED_VALUE;
            g.monitor_db = v;
        } else if (strcmp(a, "--reader-connect-timeout-ms") == 0) {
            NEED_VALUE;
            g.reader_connect_timeout_ms = (uint32_t)atoi(v);
        } else if (strcmp(a, "--no-writer-samples") == 0) {
            g.no_writer_samples = 1;
        } else if (strcmp(a, "--pool-idle-ms") == 0) {
            NEED_VALUE;
            g.pool_idle_ms = (uint32_t)atoi(v);
        } else if (strcmp(a, "--stats-file") == 0) {
            NEED_VALUE;
            g.stats_file = v;
        } else if (strcmp(a, "--record") == 0) {
            NEED_VALUE;
            g.record_dir = v;
        } else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
            g.verbose = 1;
        } else {
            fprintf(stderr, "polarsplit-proxy: unknown argument '%s' (see --help)\n", a);
            polarsplit_config_builder_free(builder);
            return 2;
        }
    }
    if (!primary) {
        usage(stderr);
        polarsplit_config_builder_free(builder);
        return 2;
    }
    if (polarsplit_abi_version() != POLARSPLIT_ABI_VERSION) {
        fprintf(stderr, "polarsplit-proxy: libpolarsplit ABI %u, built for %u\n", polarsplit_abi_version(),
                POLARSPLIT_ABI_VERSION);
        polarsplit_config_builder_free(builder);
        return 1;
    }
    if (add_server(primary) != 0) {
        polarsplit_config_builder_free(builder);
        return 2;
    }
    for (int i = 0; i < nreaders_specs; i++) {
        if (add_server(reader_specs[i]) != 0) {
            polarsplit_config_builder_free(builder);
            return 2;
        }
    }
    if (creds_path && creds_load(creds_path, err, sizeof err) != 0) {
        fprintf(stderr, "polarsplit-proxy: %s\n", err);
        polarsplit_config_builder_free(builder);
        return 2;
    }
    polarsplit_config *config = NULL;
    if (polarsplit_config_builder_build(builder, &config, err, sizeof err) != POLARSPLIT_OK) {
        fprintf(stderr, "polarsplit-proxy: configuration: %s\n", err);
        creds_free();
        return 2;
    }
    if (pool_init(config) != 0 || polarsplit_engine_new(config, &g.engine) != POLARSPLIT_OK) {
        fprintf(stderr, "polarsplit-proxy: engine_new failed\n");
        polarsplit_config_free(config);
        creds_free();
        return 1;
    }
    polarsplit_config_free(config);
    for (uint32_t i = 1; i < g.nservers; i++) polarsplit_engine_add_reader(g.engine, i, g.reader_hostgroup);

    if (pipe(g.sigpipe) != 0) return 1;
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

    g.listen_fd = listen_on();
    if (g.listen_fd < 0) {
        fprintf(stderr, "polarsplit-proxy: cannot listen on %s:%s: %s\n", g.listen_host, g.listen_port,
                strerror(errno));
        polarsplit_engine_free(g.engine);
        creds_free();
        return 1;
    }
    logf_("listening on %s:%s, mode %s, primary %s:%s, %u reader(s), libpolarsplit %s", g.listen_host, g.listen_port,
          MODE_NAMES[g.mode], g.servers[0].host, g.servers[0].port, g.nservers - 1, polarsplit_version());

    struct pollfd *pfds = NULL;
    void **objs = NULL;
    char *kinds = NULL;
    size_t cap = 0;
    while (!g.stop) {
        uint64_t now = now_ms();
        if (g.mode == MODE_LIBRARY) monitor_tick(now);
        /* Handshake deadlines and idle pooled readers. */
        for (backend_t *b = g.backends; b; b = b->next) {
            if (!b->dead && b->role == ROLE_READER && b->state != BS_READY && now > b->deadline) {
                logf_("reader connection %llu to server %u: handshake timed out", (unsigned long long)b->id, b->server);
                reader_fail_acquire(b);
            }
        }
        backend_t *old;
        while (now > g.pool_idle_ms && (old = pool_expired(now - g.pool_idle_ms)) != NULL) {
            buf_msg(&old->out, 'X', NULL, 0);
            backend_close(old);
        }
        /* Opportunistic writes, then closes of finished clients. */
        for (client_t *c = g.clients; c; c = c->next) {
            if (c->dead) continue;
            if (buf_size(&c->out) && flush_fd(c->fd, &c->out) != 0) {
                client_teardown(c);
                continue;
            }
            if (c->closing && buf_size(&c->out) == 0) client_teardown(c);
        }
        for (backend_t *b = g.backends; b; b = b->next) {
            if (b->dead || b->fd < 0 || b->state == BS_CONNECTING || !buf_size(&b->out)) continue;
            if (flush_fd(b->fd, &b->out) != 0) {
                if (b->role == ROLE_WRITER || (b->role == ROLE_READER && b->attached))
                    session_backend_lost(b);
                else if (b->role == ROLE_READER)
                    reader_fail_acquire(b);
                else if (b->role == ROLE_MONITOR)
                    monitor_failed(b, "write failed");
                else
                    backend_close(b);
            } else if (b->role == ROLE_CANCEL && buf_size(&b->out) == 0) {
                backend_close(b);
            }
        }
        reap();

        size_t n = 0, want = 2;
        for (client_t *c = g.clients; c; c = c->next) want++;
        for (backend_t *b = g.backends; b; b = b->next) want++;
        if (want > cap) {
            cap = want * 2;
            pfds = realloc(pfds, cap * sizeof *pfds);
            objs = realloc(objs, cap * sizeof *objs);
            kinds = realloc(kinds, cap);
            if (!pfds || !objs || !kinds) abort();
        }
        pfds[n] = (struct pollfd){g.sigpipe[0], POLLIN, 0};
        objs[n] = NULL;
        kinds[n++] = 's';
        pfds[n] = (struct pollfd){g.listen_fd, POLLIN, 0};
        objs[n] = NULL;
        kinds[n++] = 'l';
        for (client_t *c = g.clients; c; c = c->next) {
            short ev = 0;
            int blocked = (c->writer && buf_size(&c->writer->out) >= HIGH_WATER) ||
                          buf_size(&c->in) - c->fed >= HIGH_WATER;
            if (!c->closing && !blocked) ev |= POLLIN;
            if (buf_size(&c->out)) ev |= POLLOUT;
            pfds[n] = (struct pollfd){c->fd, ev, 0};
            objs[n] = c;
            kinds[n++] = 'c';
        }
        for (backend_t *b = g.backends; b; b = b->next) {
            short ev = 0;
            if (can_read_backend(b)) ev |= POLLIN;
            if (b->state == BS_CONNECTING || buf_size(&b->out)) ev |= POLLOUT;
            pfds[n] = (struct pollfd){b->fd, ev, 0};
            objs[n] = b;
            kinds[n++] = 'b';
        }
        int timeout = 1000;
        if (g.mode == MODE_LIBRARY) {
            uint64_t next = UINT64_MAX;
            for (uint32_t i = 0; i < g.nservers; i++) {
                const server_t *s = &g.servers[i];
                int idle = !s->monitor || (s->monitor->state == BS_READY && !s->monitor->mon_busy);
                if (idle && s->monitor_next < next) next = s->monitor_next;
            }
            now = now_ms();
            timeout = next <= now ? 0 : (next - now > 1000 ? 1000 : (int)(next - now));
            if (timeout == 0) timeout = 1;
        }
        int r = poll(pfds, (nfds_t)n, timeout);
        if (r < 0 && errno != EINTR) {
            logf_("poll: %s", strerror(errno));
            break;
        }
        if (r <= 0) continue;
        for (size_t i = 0; i < n; i++) {
            short re = pfds[i].revents;
            if (!re) continue;
            if (kinds[i] == 's') {
                char chs[16];
                ssize_t k;
                while ((k = read(g.sigpipe[0], chs, sizeof chs)) > 0) {
                    for (ssize_t j = 0; j < k; j++) {
                        if (chs[j] == 'U')
                            dump_stats();
                        else
                            g.stop = 1;
                    }
                }
            } else if (kinds[i] == 'l') {
                accept_clients();
            } else if (kinds[i] == 'c') {
                client_t *c = objs[i];
                if (c->dead) continue;
                if (re & POLLOUT) {
                    if (flush_fd(c->fd, &c->out) != 0) {
                        client_teardown(c);
                        continue;
                    }
                }
                if (re & (POLLIN | POLLHUP | POLLERR)) client_readable(c);
            } else {
                backend_t *b = objs[i];
                if (b->dead) continue;
                if (b->state == BS_CONNECTING) {
                    if (re & (POLLOUT | POLLERR | POLLHUP)) backend_connected(b);
                    if (b->dead) continue;
                    re = 0;
                }
                if ((re & POLLOUT) && buf_size(&b->out)) {
                    if (flush_fd(b->fd, &b->out) != 0) re |= POLLERR;
                    if (b->role == ROLE_CANCEL && buf_size(&b->out) == 0) {
                        backend_close(b);
                        continue;
                    }
                }
                if (re & (POLLIN | POLLHUP | POLLERR)) backend_readable(b);
            }
        }
    }
    logf_("shutting down");
    dump_stats();
    shutdown_all();
    free(pfds);
    free(objs);
    free(kinds);
    close(g.listen_fd);
    close(g.sigpipe[0]);
    close(g.sigpipe[1]);
    pool_shutdown();
    polarsplit_engine_free(g.engine);
    creds_free();
    for (int i = 0; i < g.nsettings; i++) free((void *)g.settings[i][0]);
    return 0;
}
