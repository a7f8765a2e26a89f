/* A client's session: accepting it, feeding its bytes to the router, executing the actions
 * after every input (the drain rule), events queued while draining, and closing. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy.h"

void push_event(client_t *c, uint64_t conn, uint32_t kind, uint32_t server, uint32_t flags) {
    if (c->nev == (int)(sizeof c->evq / sizeof c->evq[0])) {
        logf_("client %llu: event queue full", (unsigned long long)c->id);
        client_teardown(c);
        return;
    }
    c->evq[c->nev++] = (event_t){conn, kind, server, flags};
}

backend_t *find_conn(client_t *c, uint64_t id) {
    if (c->writer && c->writer->id == id) return c->writer;
    for (backend_t *b = c->attached; b; b = b->next_attached)
        if (b->id == id) return b;
    return NULL;
}

static void report_status(client_t *c, const char *what, polarsplit_status st) {
    char err[256];
    c->router.ops->last_error(c->router.st, err, sizeof err);
    logf_("client %llu: %s: %s (%s)", (unsigned long long)c->id, what, polarsplit_status_str(st), err);
}

/* Executes every action, then takes the session's next deadline (any input may set, move or
 * clear it) into the loop's timers. */
static void drain(client_t *c) {
    polarsplit_action a;
    polarsplit_status st = POLARSPLIT_DONE;
    while (!c->dead && (st = c->router.ops->poll(c->router.st, &a, sizeof a)) == POLARSPLIT_OK) exec_action(c, &a);
    if (!c->dead && st != POLARSPLIT_DONE) {
        report_status(c, "poll_action", st);
        client_teardown(c);
        return;
    }
    if (!c->dead && c->router.ops->next_deadline(c->router.st, &c->deadline) < 0) c->deadline = UINT64_MAX;
}

/* Drains the actions, then feeds queued events one by one (each followed by a drain). */
void pump(client_t *c) {
    for (;;) {
        if (c->dead) return;
        drain(c);
        if (c->dead || c->nev == 0) return;
        event_t e = c->evq[0];
        memmove(c->evq, c->evq + 1, (size_t)(c->nev - 1) * sizeof *c->evq);
        c->nev--;
        c->events_fed++;
        record_event(c, &e);
        polarsplit_status st = c->router.ops->event(c->router.st, e.conn, e.kind, e.server, e.flags, now_ms());
        if (st < 0 && st != POLARSPLIT_ERR_CLOSED) report_status(c, "event refused", st);
        if (st == POLARSPLIT_ERR_POISONED || st == POLARSPLIT_ERR_PANIC) {
            client_teardown(c);
            return;
        }
    }
}

/* Offers the client bytes the session has not taken yet. */
void feed_client(client_t *c) {
    /* At most TURN_BYTES per call (the loop comes back for the rest, `clients_feed_more`):
     * offered in slices of that size, unless a slice is taken whole-message-wise as nothing
     * (a message longer than the slice the session holds whole): then all of it is offered. */
    size_t fed_now = 0;
    int whole = 0;
    c->feed_more = 0;
    while (!c->dead && !c->closing && buf_size(&c->in) > c->fed) {
        /* S-6: the first statements of a database's first clients wait for its first catalogue
         * load (bounded by its timeout), so no read of a view over set_config runs unjudged. */
        if (c->catdb >= 0 && catalog_first_load_pending(c->catdb) && c->router.ops->authenticated(c->router.st))
            return;
        if (fed_now >= TURN_BYTES) {
            c->feed_more = 1;
            return;
        }
        size_t avail = buf_size(&c->in) - c->fed;
        size_t offer = whole || avail <= TURN_BYTES ? avail : TURN_BYTES;
        size_t consumed = 0;
        uint64_t events = c->events_fed;
        polarsplit_status st =
            c->router.ops->recv_client(c->router.st, buf_data(&c->in) + c->fed, offer, now_ms(), &consumed);
        record_hex(c->record, "client ", buf_data(&c->in) + c->fed, consumed);
        c->fed += consumed;
        fed_now += consumed;
        if (st == POLARSPLIT_OK) {
            pump(c);
            if (consumed == 0 && c->events_fed == events) {
                if (offer == avail) return;
                whole = 1;
            }
            continue;
        }
        if (st == POLARSPLIT_ERR_PROTOCOL) {
            /* Every byte is consumed; the actions forward what came before the violation, send
             * the client the 08P01 FATAL and close. Bytes no action covers go with the client. */
            report_status(c, "client protocol error", st);
            pump(c);
            c->closing = 1;
            return;
        }
        if (st != POLARSPLIT_ERR_CLOSED) report_status(c, "recv_client", st);
        pump(c);
        client_teardown(c);
        return;
    }
    /* The client's input ended and every byte of it was taken: the session is told, and it runs
     * and answers what came before the end (as PostgreSQL does), then asks CLOSE_CLIENT. */
    if (!c->dead && !c->closing && c->eof && !c->eof_fed && buf_size(&c->in) == c->fed) {
        c->eof_fed = 1;
        polarsplit_status st = c->router.ops->client_eof(c->router.st, now_ms());
        if (st == POLARSPLIT_OK) {
            pump(c);
            return;
        }
        if (st != POLARSPLIT_ERR_CLOSED) report_status(c, "client_eof", st);
        pump(c);
        client_teardown(c);
    }
}

/* The client's input ended (its end, a half-close, or an error): nothing more is read. The
 * session is told once every byte is fed (feed_client); it still runs what the client sent and
 * its answers go out while the socket takes them (a half-closed client reads them all). As with
 * PostgreSQL, whose backend ends ("connection to client lost") at the first answer it cannot
 * send, the session ends at the first answer that cannot be sent — a failed write, or an answer
 * due after the client reset the connection (client_reset) — so what the client sent behind
 * that answer does not run. Bounded: the session is closed after --client-gone-timeout-ms at
 * the latest (clients_check_session_deadlines). */
static void client_input_ended(client_t *c) {
    if (c->eof) return;
    c->eof = 1;
    if (g.o.client_gone_timeout_ms) c->eof_deadline = now_ms() + g.o.client_gone_timeout_ms;
    VLOG("client %llu: end of its input", (unsigned long long)c->id);
}

void client_reset(client_t *c) {
    if (c->dead || c->fd < 0) return;
    VLOG("client %llu: connection reset", (unsigned long long)c->id);
    close(c->fd);
    c->fd = -1;
    if (buf_size(&c->out)) client_teardown(c);
}

void client_teardown(client_t *c) {
    if (c->dead) return;
    c->dead = 1;
    g.nclients--;
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

void client_free(client_t *c) {
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

static void peer_address(client_t *c, const struct sockaddr_storage *sa) {
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, c->host, sizeof c->host);
        c->port = ntohs(in->sin_port);
    } else if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, c->host, sizeof c->host);
        c->port = ntohs(in6->sin6_port);
    }
}

static polarsplit_status client_router(client_t *c) {
    if (g.o.mode != MODE_LIBRARY) {
        router_simple(g.o.mode == MODE_NAIVE, 1, &c->router);
        return POLARSPLIT_OK;
    }
    polarsplit_client_info info = {c->host[0] ? c->host : NULL, c->port, g.o.listen_host,
                                   (uint16_t)atoi(g.o.listen_port), -1};
    return router_library(g.engine, &info, &c->router);
}

void client_start(int fd, const struct sockaddr_storage *sa, uint64_t now) {
    set_nonblocking(fd);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    client_t *c = calloc(1, sizeof *c);
    if (!c) abort();
    c->id = g.next_id++;
    c->catdb = -1;
    c->fd = fd;
    c->watched_fd = -1;
    c->accepted_at = now;
    c->deadline = UINT64_MAX;
    c->eof_deadline = UINT64_MAX;
    peer_address(c, sa);
    polarsplit_status st = client_router(c);
    if (st != POLARSPLIT_OK) {
        logf_("session_new: %s", polarsplit_status_str(st));
        close(fd);
        free(c);
        return;
    }
    c->next = g.clients;
    if (g.clients) g.clients->prev = c;
    g.clients = c;
    g.clients_total++;
    g.nclients++;
    record_open(c);
    VLOG("client %llu from %s:%u", (unsigned long long)c->id, c->host, c->port);
}

void client_readable(client_t *c) {
    uint8_t tmp[READ_CHUNK];
    size_t got = 0;
    for (;;) {
        ssize_t n = recv(c->fd, tmp, sizeof tmp, 0);
        if (n > 0) {
            buf_append(&c->in, tmp, (size_t)n);
            /* A short read took what was there: the loop's wait reports the socket again when
             * more (or its end) arrives — no recv that can only say EAGAIN. */
            got += (size_t)n;
            if ((size_t)n < sizeof tmp || got >= TURN_BYTES || buf_size(&c->in) - c->fed >= HIGH_WATER) break;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        /* EOF or error: the client's input ended. What it sent still runs, in order (as PostgreSQL
         * runs what it read before the end), and a half-closed client still reads the answers:
         * the session closes once it answered everything (CLOSE_CLIENT), or at the latest after
         * --client-gone-timeout-ms. */
        client_input_ended(c);
        break;
    }
    feed_client(c);
}

/* Feeds the clients whose input feed_client left for a later turn; returns whether some still
 * have more (the loop then does not wait). */
int clients_feed_more(void) {
    int more = 0;
    for (client_t *c = g.clients; c; c = c->next) {
        if (c->dead || !c->feed_more) continue;
        feed_client(c);
        more |= !c->dead && c->feed_more;
    }
    return more;
}

uint64_t clients_check_auth_deadlines(uint64_t now) {
    uint64_t next = UINT64_MAX;
    if (g.o.auth_timeout_ms == 0) return next;
    for (client_t *c = g.clients; c; c = c->next) {
        if (c->dead || c->authenticated) continue;
        if (c->router.ops->authenticated(c->router.st)) {
            c->authenticated = 1;
            continue;
        }
        uint64_t deadline = c->accepted_at + g.o.auth_timeout_ms;
        if (now < deadline) {
            if (deadline < next) next = deadline;
            continue;
        }
        /* As PostgreSQL's authentication_timeout: the connection is closed (the session may be
         * in the middle of relaying the server's messages, so nothing is added to them). */
        logf_("client %llu from %s:%u: not logged in after %u ms: closed", (unsigned long long)c->id, c->host, c->port,
              g.o.auth_timeout_ms);
        g.clients_auth_timeouts++;
        client_teardown(c);
    }
    return next;
}

uint64_t clients_check_session_deadlines(uint64_t now) {
    uint64_t next = UINT64_MAX;
    for (client_t *c = g.clients; c; c = c->next) {
        if (c->dead) continue;
        if (c->eof_deadline != UINT64_MAX) {
            if (now >= c->eof_deadline) {
                /* The client is gone and its session still waits (a statement that runs on, an
                 * answer the client does not read): closed, as a client's end closed it before. */
                logf_("client %llu from %s:%u: its input ended %u ms ago and its session is not done: closed",
                      (unsigned long long)c->id, c->host, c->port, g.o.client_gone_timeout_ms);
                client_teardown(c);
                continue;
            }
            if (c->eof_deadline < next) next = c->eof_deadline;
        }
        if (c->deadline == UINT64_MAX) continue;
        if (now < c->deadline) {
            if (c->deadline < next) next = c->deadline;
            continue;
        }
        /* Due: an input like the others (then the drain rule). A reader that answered nothing
         * in time is closed by the actions and its statement retried or answered. */
        c->deadline = UINT64_MAX;
        record_timeout(c, now);
        g.session_timeouts++;
        polarsplit_status st = c->router.ops->on_timeout(c->router.st, now);
        if (st != POLARSPLIT_OK && st != POLARSPLIT_ERR_CLOSED) report_status(c, "on_timeout", st);
        if (st == POLARSPLIT_ERR_POISONED || st == POLARSPLIT_ERR_PANIC) {
            client_teardown(c);
            continue;
        }
        pump(c);
        if (!c->dead) feed_client(c);
        if (!c->dead && c->deadline < next) next = c->deadline;
    }
    return next;
}
