/* The event loop: timers and deadlines, opportunistic writes, then one epoll_wait(2) and dispatch.
 * Descriptors stay registered between waits; only a change of what one waits for costs a call. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy.h"

/* What an epoll event is for: the kind in the low bits of its tag, the object (8-aligned) or,
 * for a refusal, the descriptor above them. */
enum { EV_SIGNAL, EV_LISTENER, EV_REFUSAL, EV_CLIENT, EV_BACKEND, EV_KIND_MASK = 7 };
#define MAX_EVENTS 64

static int epfd = -1;
static int listener_watched_fd = -1; /* the listening socket as registered, and its events */
static uint32_t listener_watched_ev;

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Reader handshakes that took too long answer READER_UNAVAILABLE. */
static void reader_handshake_deadlines(uint64_t now) {
    for (backend_t *b = g.backends; b; b = b->next) {
        if (!b->dead && b->role == ROLE_READER && b->state != BS_READY && now > b->deadline) {
            logf_("reader connection %llu to server %u: handshake timed out", (unsigned long long)b->id, b->server);
            reader_fail_acquire(b);
        }
    }
}

static void close_idle_pooled(uint64_t now) {
    backend_t *old;
    while (now > g.o.pool_idle_ms && (old = pool_expired(now - g.o.pool_idle_ms)) != NULL) {
        buf_msg(&old->out, 'X', NULL, 0);
        backend_close(old);
    }
}

/* Runs everything that is due; returns the earliest time something else will be. */
static uint64_t run_timers(uint64_t now) {
    uint64_t next = UINT64_MAX;
    if (g.o.mode == MODE_LIBRARY) {
        monitor_tick(now);
        next = min_u64(next, monitor_next_due());
        catalog_tick(now);
        next = min_u64(next, catalog_next_due());
    }
    reader_handshake_deadlines(now);
    close_idle_pooled(now);
    listener_tick(now);
    next = min_u64(next, listener_next_deadline(now));
    next = min_u64(next, clients_check_auth_deadlines(now));
    next = min_u64(next, clients_check_session_deadlines(now));
    return next;
}

/* Opportunistic writes, then closes of clients whose last bytes are out. */
static void flush_all(void) {
    for (client_t *c = g.clients; c; c = c->next) {
        if (c->dead) continue;
        /* An answer that cannot be sent ends the session, as PostgreSQL's backend ends at a send
         * that fails ("connection to client lost"): what the client sent behind it never runs. */
        if (buf_size(&c->out) && (c->fd < 0 || flush_fd(c->fd, &c->out) != 0)) {
            client_teardown(c);
            continue;
        }
        if (c->closing && buf_size(&c->out) == 0) client_teardown(c);
    }
    for (backend_t *b = g.backends; b; b = b->next) {
        if (b->dead || b->fd < 0 || b->state == BS_CONNECTING || !buf_size(&b->out)) continue;
        if (flush_fd(b->fd, &b->out) != 0)
            backend_write_failed(b);
        else if (b->role == ROLE_CANCEL && buf_size(&b->out) == 0)
            backend_close(b);
    }
}

/* Frees what was closed during this iteration. */
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

/* Makes the epoll registration of `fd` ask for `ev`. `*watched_fd` is the descriptor registered
 * for this object (-1: none): whoever gives an object a new socket sets it to -1, and close(2)
 * takes a descriptor out of the set, so a different descriptor is added, the same one modified
 * only when what it waits for changed. Level-triggered, like poll(2): a readable or writable
 * descriptor is reported again at every wait until it is not. */
static void watch(int fd, uint32_t ev, uint64_t tag, int *watched_fd, uint32_t *watched_ev) {
    struct epoll_event e = {.events = ev, .data.u64 = tag};
    if (*watched_fd == fd) {
        if (*watched_ev == ev) return;
        if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &e) == 0) {
            *watched_ev = ev;
            return;
        }
        if (errno != ENOENT) {
            logf_("epoll_ctl(%d): %s", fd, strerror(errno));
            return;
        }
    }
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) != 0 && (errno != EEXIST || epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &e) != 0))
        logf_("epoll_ctl(%d): %s", fd, strerror(errno));
    *watched_fd = fd;
    *watched_ev = ev;
}

void loop_watch_refusal(int fd) {
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = ((uint64_t)(unsigned)fd << 3) | EV_REFUSAL};
    if (epfd >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) != 0) logf_("epoll_ctl(%d): %s", fd, strerror(errno));
}

/* What every descriptor waits for now (what the poll(2) set asked for, when it was rebuilt before
 * each wait): clients not blocked by a full writer or unfed input read, anything with bytes to
 * send writes. Closed descriptors left the set with close(2). */
static void sync_interest(uint64_t now) {
    if (g.listen_fd >= 0)
        watch(g.listen_fd, listener_wants_poll(now) ? EPOLLIN : 0, EV_LISTENER, &listener_watched_fd,
              &listener_watched_ev);
    for (client_t *c = g.clients; c; c = c->next) {
        if (c->dead || c->fd < 0) continue;
        int blocked = (c->writer && buf_size(&c->writer->out) >= HIGH_WATER) || buf_size(&c->in) - c->fed >= HIGH_WATER;
        uint32_t ev = (!c->closing && !c->eof && !blocked) ? EPOLLIN : 0;
        if (buf_size(&c->out)) ev |= EPOLLOUT;
        watch(c->fd, ev, (uint64_t)(uintptr_t)c | EV_CLIENT, &c->watched_fd, &c->watched_ev);
    }
    for (backend_t *b = g.backends; b; b = b->next) {
        if (b->dead || b->fd < 0) continue;
        uint32_t ev = can_read_backend(b) ? EPOLLIN : 0;
        if (b->state == BS_CONNECTING || buf_size(&b->out)) ev |= EPOLLOUT;
        watch(b->fd, ev, (uint64_t)(uintptr_t)b | EV_BACKEND, &b->watched_fd, &b->watched_ev);
    }
}

static void handle_signals(void) {
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
}

static void client_event(client_t *c, uint32_t re) {
    if (c->dead) return;
    if ((re & EPOLLOUT) && flush_fd(c->fd, &c->out) != 0) {
        client_teardown(c);
        return;
    }
    if (c->eof) {
        /* Read to its end: a hang-up or an error says it reset the connection. Noticed when an
         * answer is due, as PostgreSQL notices it at its next send. */
        if (re & (EPOLLHUP | EPOLLERR)) client_reset(c);
        return;
    }
    if (re & (EPOLLIN | EPOLLHUP | EPOLLERR)) client_readable(c);
}

static void backend_event(backend_t *b, uint32_t re) {
    if (b->dead) return;
    if (b->state == BS_CONNECTING) {
        if (re & (EPOLLOUT | EPOLLERR | EPOLLHUP)) backend_connected(b);
        return;
    }
    if ((re & EPOLLOUT) && buf_size(&b->out)) {
        if (flush_fd(b->fd, &b->out) != 0) re |= EPOLLERR;
        if (b->role == ROLE_CANCEL && buf_size(&b->out) == 0) {
            backend_close(b);
            return;
        }
    }
    if (re & (EPOLLIN | EPOLLHUP | EPOLLERR)) backend_readable(b);
}

static void dispatch(const struct epoll_event *evs, int n, uint64_t now) {
    for (int i = 0; i < n; i++) {
        uint32_t re = evs[i].events;
        uint64_t tag = evs[i].data.u64;
        void *obj = (void *)(uintptr_t)(tag & ~(uint64_t)EV_KIND_MASK);
        switch (tag & EV_KIND_MASK) {
        case EV_SIGNAL: handle_signals(); break;
        case EV_LISTENER:
            if (listener_wants_poll(now)) listener_accept(now);
            break;
        case EV_REFUSAL: listener_readable((int)(tag >> 3)); break;
        case EV_CLIENT: client_event(obj, re); break;
        case EV_BACKEND: backend_event(obj, re); break;
        default: break;
        }
    }
}

/* Milliseconds until `next` (at least 1 when it is due: the loop runs the timers first), at
 * most a second. */
static int poll_timeout(uint64_t next, uint64_t now) {
    if (next == UINT64_MAX || next - now > 1000) return next <= now ? 1 : 1000;
    return next <= now ? 1 : (int)(next - now);
}

void loop_run(void) {
    struct epoll_event evs[MAX_EVENTS];
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) {
        logf_("epoll_create1: %s", strerror(errno));
        return;
    }
    int sig_fd = -1;
    uint32_t sig_ev = 0;
    watch(g.sigpipe[0], EPOLLIN, EV_SIGNAL, &sig_fd, &sig_ev);
    while (!g.stop) {
        now_ms_refresh();
        uint64_t next = run_timers(now_ms());
        int more = clients_feed_more();
        flush_all();
        reap();
        now_ms_refresh();
        uint64_t now = now_ms();
        sync_interest(now);
        int r = epoll_wait(epfd, evs, MAX_EVENTS, more ? 0 : poll_timeout(next, now));
        if (r < 0 && errno != EINTR) {
            logf_("epoll_wait: %s", strerror(errno));
            break;
        }
        now_ms_refresh();
        if (r > 0) dispatch(evs, r, now_ms());
    }
    now_ms_unset();
    close(epfd);
    epfd = -1;
    listener_watched_fd = -1;
}

void shutdown_all(void) {
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
