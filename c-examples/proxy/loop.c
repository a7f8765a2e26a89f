/* The poll(2) loop: timers and deadlines, opportunistic writes, then one poll and dispatch. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy.h"

enum { POLL_SIGNAL, POLL_LISTENER, POLL_REFUSAL, POLL_CLIENT, POLL_BACKEND };

typedef struct {
    struct pollfd *fds;
    void **objs;
    char *kinds;
    size_t n, cap;
} pollset_t;

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
        if (buf_size(&c->out) && flush_fd(c->fd, &c->out) != 0) {
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

static void pollset_add(pollset_t *ps, int fd, short events, char kind, void *obj) {
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? ps->cap * 2 : 64;
        ps->fds = realloc(ps->fds, ps->cap * sizeof *ps->fds);
        ps->objs = realloc(ps->objs, ps->cap * sizeof *ps->objs);
        ps->kinds = realloc(ps->kinds, ps->cap);
        if (!ps->fds || !ps->objs || !ps->kinds) abort();
    }
    ps->fds[ps->n] = (struct pollfd){fd, events, 0};
    ps->objs[ps->n] = obj;
    ps->kinds[ps->n++] = kind;
}

static void build_pollset(pollset_t *ps, uint64_t now) {
    ps->n = 0;
    pollset_add(ps, g.sigpipe[0], POLLIN, POLL_SIGNAL, NULL);
    if (listener_wants_poll(now)) pollset_add(ps, g.listen_fd, POLLIN, POLL_LISTENER, NULL);
    struct pollfd refusals[64];
    size_t nr = listener_pollfds(refusals, sizeof refusals / sizeof refusals[0]);
    for (size_t i = 0; i < nr; i++) pollset_add(ps, refusals[i].fd, refusals[i].events, POLL_REFUSAL, NULL);
    for (client_t *c = g.clients; c; c = c->next) {
        int blocked = (c->writer && buf_size(&c->writer->out) >= HIGH_WATER) || buf_size(&c->in) - c->fed >= HIGH_WATER;
        short ev = (!c->closing && !blocked) ? POLLIN : 0;
        if (buf_size(&c->out)) ev |= POLLOUT;
        pollset_add(ps, c->fd, ev, POLL_CLIENT, c);
    }
    for (backend_t *b = g.backends; b; b = b->next) {
        short ev = can_read_backend(b) ? POLLIN : 0;
        if (b->state == BS_CONNECTING || buf_size(&b->out)) ev |= POLLOUT;
        pollset_add(ps, b->fd, ev, POLL_BACKEND, b);
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

static void client_event(client_t *c, short re) {
    if (c->dead) return;
    if ((re & POLLOUT) && flush_fd(c->fd, &c->out) != 0) {
        client_teardown(c);
        return;
    }
    if (re & (POLLIN | POLLHUP | POLLERR)) client_readable(c);
}

static void backend_event(backend_t *b, short re) {
    if (b->dead) return;
    if (b->state == BS_CONNECTING) {
        if (re & (POLLOUT | POLLERR | POLLHUP)) backend_connected(b);
        return;
    }
    if ((re & POLLOUT) && buf_size(&b->out)) {
        if (flush_fd(b->fd, &b->out) != 0) re |= POLLERR;
        if (b->role == ROLE_CANCEL && buf_size(&b->out) == 0) {
            backend_close(b);
            return;
        }
    }
    if (re & (POLLIN | POLLHUP | POLLERR)) backend_readable(b);
}

static void dispatch(const pollset_t *ps, uint64_t now) {
    for (size_t i = 0; i < ps->n; i++) {
        short re = ps->fds[i].revents;
        if (!re) continue;
        switch (ps->kinds[i]) {
        case POLL_SIGNAL: handle_signals(); break;
        case POLL_LISTENER: listener_accept(now); break;
        case POLL_REFUSAL: listener_readable(ps->fds[i].fd); break;
        case POLL_CLIENT: client_event(ps->objs[i], re); break;
        case POLL_BACKEND: backend_event(ps->objs[i], re); break;
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
    pollset_t ps = {0};
    while (!g.stop) {
        uint64_t next = run_timers(now_ms());
        flush_all();
        reap();
        uint64_t now = now_ms();
        build_pollset(&ps, now);
        int r = poll(ps.fds, (nfds_t)ps.n, poll_timeout(next, now));
        if (r < 0 && errno != EINTR) {
            logf_("poll: %s", strerror(errno));
            break;
        }
        if (r > 0) dispatch(&ps, now_ms());
    }
    free(ps.fds);
    free(ps.objs);
    free(ps.kinds);
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
