/* replay: the smallest host of libpolarsplit — the five-minute introduction for integrators.
 *
 * It replays a byte transcript (the client's bytes, each backend connection's bytes, and the
 * host's events, in the order they happened) through one session and prints every action the
 * library asks for. A real host does the same, with sockets where this one has buffers:
 *
 *   1. feed one input (recv_client / recv_backend / on_backend_event / on_timeout);
 *   2. poll actions until POLARSPLIT_DONE and apply them in order (the drain rule), then ask
 *      polarsplit_session_next_deadline when the session wants on_timeout (a real host puts it
 *      into its poll timeout);
 *   3. keep every byte it fed until an action covers it: FORWARD_* moves the next n bytes on,
 *      DISCARD_* drops them — so at the end, forwarded + discarded = fed on every stream.
 *
 * Transcript format (c-examples/transcripts/, or recorded by `polarsplit-proxy --record DIR`):
 *   # comment
 *   set NAME VALUE                     a configuration setting (before any input)
 *   reader SERVER HOSTGROUP            a reader server
 *   info CLIENT_HOST CLIENT_PORT PROXY_HOST PROXY_PORT
 *   client HEX                         bytes the client sent
 *   backend CONN HEX                   bytes backend connection CONN sent
 *   event NAME CONN SERVER FLAGS       writer_connected | writer_connect_failed | reader_attached |
 *                                      reader_unavailable | connection_lost
 *   sample SERVER LSN                  a monitor sample of a reader's replay LSN
 *   timeout                            the session's deadline came: the clock jumps to it and
 *                                      on_timeout is called (the proxy records one per call)
 *   cancel                             the client's cancel came while its statement waited for
 *                                      a reader connection: cancel_unplaced (F-1)
 *   cancel_forwarded CONN              the host forwarded the client's cancel to connection CONN:
 *                                      cancel_forwarded (F-1: a 57014 there is the client's)
 *
 * Usage: replay FILE     (exit status 0 when every action could be applied and streams balance) */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "polarsplit.h"

typedef struct {
    uint64_t conn;
    unsigned char *p;
    size_t len, cap;
    unsigned long long fed, forwarded, discarded, dropped;
} stream_t;

static stream_t streams[32]; /* [0] is the client */
static size_t nstreams = 1;
static int failed;

static stream_t *stream_of(uint64_t conn) {
    for (size_t i = 1; i < nstreams; i++)
        if (streams[i].conn == conn) return &streams[i];
    if (nstreams == sizeof streams / sizeof streams[0]) {
        fprintf(stderr, "too many connections\n");
        exit(2);
    }
    streams[nstreams].conn = conn;
    return &streams[nstreams++];
}

static void keep(stream_t *s, const unsigned char *b, size_t n) {
    if (s->len + n > s->cap) {
        s->cap = (s->len + n) * 2;
        s->p = realloc(s->p, s->cap);
        if (!s->p) exit(2);
    }
    memcpy(s->p + s->len, b, n);
    s->len += n;
    s->fed += n;
}

/* Covers the next n kept bytes of a stream (forward or discard); returns them for printing. */
static const unsigned char *cover(stream_t *s, size_t n, int forward, const char *what) {
    static unsigned char last[1 << 16];
    if (n > s->len) {
        printf("  !! %s covers %zu bytes, only %zu kept\n", what, n, s->len);
        failed = 1;
        return NULL;
    }
    memcpy(last, s->p, n < sizeof last ? n : sizeof last);
    memmove(s->p, s->p + n, s->len - n);
    s->len -= n;
    if (forward)
        s->forwarded += n;
    else
        s->discarded += n;
    return last;
}

static uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Prints a short description of a byte run: message tags, and the SQL of a Query. */
static void describe(const unsigned char *b, size_t n, int untagged_first) {
    if (!b || n == 0) return;
    size_t pos = 0;
    printf(" [");
    if (untagged_first && n >= 8) {
        uint32_t len = be32(b), code = be32(b + 4);
        if (code == 80877103)
            printf("SSLRequest");
        else if (code == 80877102)
            printf("CancelRequest");
        else {
            printf("StartupMessage");
            for (size_t i = 8; i < len && i < n && b[i];) {
                const char *k = (const char *)b + i;
                const char *v = k + strlen(k) + 1;
                if (!strcmp(k, "user") || !strcmp(k, "database")) printf(" %s=%s", k, v);
                i = (size_t)(v - (const char *)b) + strlen(v) + 1;
            }
        }
        pos = len;
    }
    int count = 0;
    while (pos + 5 <= n && count < 24) {
        char tag = (char)b[pos];
        uint32_t len = be32(b + pos + 1);
        if (count++) printf(" ");
        if (tag == 'Q' && pos + 5 < n) {
            int sql_len = (int)(len > 4 ? len - 5 : 0);
            printf("Q \"%.*s%s\"", sql_len > 220 ? 220 : sql_len, (const char *)b + pos + 5, sql_len > 220 ? "…" : "");
        } else if (tag == 'Z' && pos + 5 < n) {
            printf("Z(%c)", b[pos + 5]);
        } else {
            printf("%c", isprint((unsigned char)tag) ? tag : '?');
        }
        pos += 1 + (size_t)len;
    }
    if (pos < n) printf("%s…", count ? " " : "");
    printf("]");
}

static const char *kind_name(uint32_t k) {
    static const char *const names[] = {"?", "CLIENT_ENCRYPTION_REQUEST", "CANCEL_REQUEST", "CONNECT_WRITER",
                                        "DECISION", "ACQUIRE_READER", "FORWARD_CLIENT", "DISCARD_CLIENT",
                                        "SEND_BACKEND", "FORWARD_BACKEND", "DISCARD_BACKEND", "SEND_CLIENT",
                                        "RELEASE_READER", "PIN_WRITER", "CLOSE_BACKEND", "CLOSE_CLIENT"};
    return k < sizeof names / sizeof names[0] ? names[k] : "UNKNOWN";
}

/* Covers the next n bytes of the client stream, or of backend `conn`, and prints them. */
static void cover_and_describe(stream_t *s, size_t n, int forward, uint32_t kind) {
    int first = s == &streams[0] && s->forwarded + s->discarded == 0;
    describe(cover(s, n, forward, kind_name(kind)), n, first);
}

/* Step 2: poll until DONE, apply each action in order. Each kind has its own member. */
static void drain(polarsplit_session *s) {
    polarsplit_action a;
    polarsplit_status st;
    while ((st = polarsplit_session_poll_action(s, &a, sizeof a)) == POLARSPLIT_OK) {
        printf("  %s", kind_name(a.kind));
        switch (a.kind) {
        case POLARSPLIT_ACTION_DECISION: {
            const polarsplit_decision *d = &a.decision;
            const char *o = polarsplit_outcome_name(d->outcome), *r = polarsplit_reason_name(d->reason);
            printf(" %s reason=%s", o ? o : "?", r ? r : "?");
            if (d->has_server) printf(" server=%u wait=%s", d->server, d->wait ? "yes" : "no");
            if (d->target_lsn) printf(" target=%llu", (unsigned long long)d->target_lsn);
            if (d->attempt) printf(" attempt=%u", d->attempt);
            break;
        }
        case POLARSPLIT_ACTION_CONNECT_WRITER:
            describe(a.connect_writer.startup.ptr, a.connect_writer.startup.len, 1);
            break;
        case POLARSPLIT_ACTION_ACQUIRE_READER:
            printf(" server=%u", a.acquire_reader.server);
            describe(a.acquire_reader.startup.ptr, a.acquire_reader.startup.len, 1);
            break;
        case POLARSPLIT_ACTION_FORWARD_CLIENT:
            printf(" conn=%llu n=%zu", (unsigned long long)a.forward_client.conn, a.forward_client.n);
            cover_and_describe(&streams[0], a.forward_client.n, 1, a.kind);
            break;
        case POLARSPLIT_ACTION_DISCARD_CLIENT:
            printf(" n=%zu", a.discard_client.n);
            cover_and_describe(&streams[0], a.discard_client.n, 0, a.kind);
            break;
        case POLARSPLIT_ACTION_FORWARD_BACKEND:
            printf(" conn=%llu n=%zu", (unsigned long long)a.forward_backend.conn, a.forward_backend.n);
            cover_and_describe(stream_of(a.forward_backend.conn), a.forward_backend.n, 1, a.kind);
            break;
        case POLARSPLIT_ACTION_DISCARD_BACKEND:
            printf(" conn=%llu n=%zu", (unsigned long long)a.discard_backend.conn, a.discard_backend.n);
            cover_and_describe(stream_of(a.discard_backend.conn), a.discard_backend.n, 0, a.kind);
            break;
        case POLARSPLIT_ACTION_SEND_BACKEND:
            printf(" conn=%llu", (unsigned long long)a.send_backend.conn);
            describe(a.send_backend.bytes.ptr, a.send_backend.bytes.len, 0);
            break;
        case POLARSPLIT_ACTION_SEND_CLIENT:
            describe(a.send_client.bytes.ptr, a.send_client.bytes.len, 0);
            break;
        case POLARSPLIT_ACTION_RELEASE_READER:
            printf(" conn=%llu%s", (unsigned long long)a.release_reader.conn,
                   a.release_reader.needs_reset ? " needs_reset" : "");
            break;
        case POLARSPLIT_ACTION_CLOSE_BACKEND:
            printf(" conn=%llu", (unsigned long long)a.close_backend.conn);
            break;
        case POLARSPLIT_ACTION_PIN_WRITER:
            printf(" %s", a.pin_writer.pinned ? "pinned" : "unpinned");
            break;
        case POLARSPLIT_ACTION_CLIENT_ENCRYPTION_REQUEST:
            printf(" (a host without TLS answers 'N')");
            break;
        case POLARSPLIT_ACTION_CANCEL_REQUEST:
            printf(" pid=%d", a.cancel_request.pid);
            break;
        case POLARSPLIT_ACTION_CLOSE_CLIENT:
            /* Client bytes no action covered go with the connection (a protocol error's rest). */
            streams[0].dropped += streams[0].len;
            streams[0].len = 0;
            break;
        default: /* a kind newer than this program: the library never sends one (ERR_ABI) */
            break;
        }
        printf("\n");
    }
    if (st != POLARSPLIT_DONE) {
        printf("  !! poll_action: %s\n", polarsplit_status_str(st));
        failed = 1;
    }
    uint64_t at;
    if (polarsplit_session_next_deadline(s, &at) == POLARSPLIT_OK) printf("  (deadline at %llu)\n", (unsigned long long)at);
}

static size_t unhex(const char *h, unsigned char **out) {
    size_t n = strlen(h) / 2;
    unsigned char *b = malloc(n ? n : 1);
    if (!b) exit(2);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1) {
            fprintf(stderr, "bad hex\n");
            exit(2);
        }
        b[i] = (unsigned char)v;
    }
    *out = b;
    return n;
}

static uint32_t event_kind(const char *name) {
    if (!strcmp(name, "writer_connected")) return POLARSPLIT_EVENT_WRITER_CONNECTED;
    if (!strcmp(name, "writer_connect_failed")) return POLARSPLIT_EVENT_WRITER_CONNECT_FAILED;
    if (!strcmp(name, "reader_attached")) return POLARSPLIT_EVENT_READER_ATTACHED;
    if (!strcmp(name, "reader_unavailable")) return POLARSPLIT_EVENT_READER_UNAVAILABLE;
    if (!strcmp(name, "connection_lost")) return POLARSPLIT_EVENT_CONNECTION_LOST;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: replay TRANSCRIPT\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    if (polarsplit_abi_version() != POLARSPLIT_ABI_VERSION) {
        fprintf(stderr, "library ABI %u, header %u\n", polarsplit_abi_version(), POLARSPLIT_ABI_VERSION);
        return 2;
    }
    polarsplit_config_builder *builder = polarsplit_config_builder_new();
    polarsplit_engine *engine = NULL;
    polarsplit_session *s = NULL;
    char chost[64] = "", phost[64] = "";
    unsigned cport = 0, pport = 0;
    unsigned readers[16][2];
    int nreaders = 0;
    char *line = NULL;
    size_t cap = 0;
    uint64_t now = 1000;
    char err[256];
    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0') continue;
        char word[32] = "";
        sscanf(line, "%31s", word);
        const char *rest = line + strlen(word);
        while (*rest == ' ') rest++;
        if (!strcmp(word, "set")) {
            char name[64], value[256] = "";
            if (sscanf(rest, "%63s %255[^\n]", name, value) < 1 || !builder ||
                polarsplit_config_builder_set(builder, name, value, err, sizeof err) != POLARSPLIT_OK) {
                fprintf(stderr, "bad setting: %s (%s)\n", rest, err);
                return 2;
            }
            printf("# set %s = %s\n", name, value);
            continue;
        }
        if (!strcmp(word, "reader")) {
            if (nreaders < 16 && sscanf(rest, "%u %u", &readers[nreaders][0], &readers[nreaders][1]) == 2) nreaders++;
            continue;
        }
        if (!strcmp(word, "info")) {
            sscanf(rest, "%63s %u %63s %u", chost, &cport, phost, &pport);
            continue;
        }
        if (!s) {
            /* The first input: build the engine and the session. */
            polarsplit_config *config = NULL;
            if (polarsplit_config_builder_build(builder, &config, err, sizeof err) != POLARSPLIT_OK) {
                fprintf(stderr, "configuration: %s\n", err);
                return 2;
            }
            builder = NULL;
            polarsplit_engine_new(config, &engine);
            polarsplit_config_free(config);
            for (int i = 0; i < nreaders; i++) polarsplit_engine_add_reader(engine, readers[i][0], readers[i][1]);
            polarsplit_client_info info = {chost[0] ? chost : NULL, (uint16_t)cport, phost[0] ? phost : NULL,
                                           (uint16_t)pport, -1};
            if (polarsplit_session_new(engine, &info, sizeof info, &s) != POLARSPLIT_OK) return 2;
        }
        now += 1;
        polarsplit_status st = POLARSPLIT_OK;
        if (!strcmp(word, "client")) {
            unsigned char *b;
            size_t n = unhex(rest, &b), consumed = 0;
            printf("> client %zu bytes", n);
            describe(b, n, streams[0].fed == 0);
            printf("\n");
            st = polarsplit_session_recv_client(s, b, n, now, &consumed);
            keep(&streams[0], b, consumed); /* step 3: keep what was fed (on ERR_PROTOCOL: all of it) */
            if (st == POLARSPLIT_OK && consumed < n) printf("  (consumed %zu of %zu: feed the rest later)\n", consumed, n);
            free(b);
        } else if (!strcmp(word, "backend")) {
            unsigned long long conn;
            char hexs[1 << 16];
            if (strlen(rest) >= sizeof hexs || sscanf(rest, "%llu %65535s", &conn, hexs) != 2) {
                fprintf(stderr, "bad backend line\n");
                return 2;
            }
            unsigned char *b;
            size_t n = unhex(hexs, &b);
            printf("> backend conn=%llu %zu bytes", conn, n);
            describe(b, n, 0);
            printf("\n");
            st = polarsplit_session_recv_backend(s, conn, b, n, now);
            if (st == POLARSPLIT_OK) keep(stream_of(conn), b, n);
            free(b);
        } else if (!strcmp(word, "event")) {
            char name[64];
            unsigned long long conn;
            unsigned server = 0, flags = 0;
            if (sscanf(rest, "%63s %llu %u %u", name, &conn, &server, &flags) < 2 || !event_kind(name)) {
                fprintf(stderr, "bad event line: %s\n", rest);
                return 2;
            }
            printf("> event %s conn=%llu server=%u flags=%u\n", name, conn, server, flags);
            st = polarsplit_session_on_backend_event(s, conn, event_kind(name), server, flags, now);
        } else if (!strcmp(word, "timeout")) {
            uint64_t at;
            if (polarsplit_session_next_deadline(s, &at) == POLARSPLIT_OK && at > now) now = at;
            printf("> timeout at %llu\n", (unsigned long long)now);
            st = polarsplit_session_on_timeout(s, now);
        } else if (!strcmp(word, "cancel")) {
            printf("> cancel (unplaced)\n");
            st = polarsplit_session_cancel_unplaced(s, now);
            if (st == POLARSPLIT_DONE) st = POLARSPLIT_OK; /* nothing waited: nothing to drain */
        } else if (!strcmp(word, "cancel_forwarded")) {
            unsigned long long conn;
            if (sscanf(rest, "%llu", &conn) != 1) {
                fprintf(stderr, "bad cancel_forwarded line: %s\n", rest);
                return 2;
            }
            printf("> cancel forwarded to conn=%llu\n", conn);
            st = polarsplit_session_cancel_forwarded(s, conn);
        } else if (!strcmp(word, "sample")) {
            unsigned server;
            unsigned long long lsn;
            if (sscanf(rest, "%u %llu", &server, &lsn) == 2) polarsplit_engine_reader_sample(engine, server, lsn, now);
            printf("> sample server=%u lsn=%llu\n", server, lsn);
            continue;
        } else {
            fprintf(stderr, "unknown line: %s\n", line);
            return 2;
        }
        if (st != POLARSPLIT_OK) {
            polarsplit_session_last_error(s, err, sizeof err);
            printf("  status %s: %s\n", polarsplit_status_str(st), err);
        }
        drain(s); /* step 2, also after an error: it may carry closes */
    }
    free(line);
    fclose(f);
    polarsplit_config_builder_free(builder);

    printf("\nstreams:\n");
    int balanced = 1;
    for (size_t i = 0; i < nstreams; i++) {
        stream_t *st = &streams[i];
        if (i == 0)
            printf("  client");
        else
            printf("  conn %llu", (unsigned long long)st->conn);
        printf(": fed %llu = forwarded %llu + discarded %llu + kept %zu", st->fed, st->forwarded, st->discarded,
               st->len);
        if (st->dropped) printf(" + dropped at close %llu", st->dropped);
        printf("\n");
        if (st->len) balanced = 0;
        free(st->p);
    }
    printf("balanced: %s\n", balanced ? "yes" : "no (bytes still kept for an unfinished message)");
    if (engine) {
        printf("decisions:");
        for (uint32_t r = 0; r < 1024; r++) { /* reason numbers are below 1024 */
            uint64_t v = 0;
            if (polarsplit_reason_name(r) && polarsplit_engine_reason_count(engine, r, &v) == POLARSPLIT_OK && v)
                printf(" %s=%llu", polarsplit_reason_name(r), (unsigned long long)v);
        }
        printf("\n");
    }
    polarsplit_session_free(s);
    polarsplit_engine_free(engine);
    return failed ? 1 : 0;
}
