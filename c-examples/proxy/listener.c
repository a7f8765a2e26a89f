/* Accepting clients, with the two bounds a proxy needs.
 *
 * How many clients at once (--max-clients): one more is refused the way PostgreSQL refuses it,
 * with a FATAL 53300 "sorry, too many clients already". The refusal lingers: the error is sent,
 * our side shut down, and the connection kept (a bounded number of them, for at most a second)
 * until the client has read it and closed — closing at once while its startup packet is still
 * arriving would answer with a reset that can destroy the error before the client reads it.
 *
 * Running out of file descriptors: accept(2) failing with EMFILE leaves the connection in the
 * backlog and the listener readable, so the loop's wait returns at once, forever — a busy loop
 * (measured at 89% CPU) that refuses nobody. One descriptor is held in reserve: on EMFILE it is
 * closed, the waiting connection accepted, told 53300 and closed, and the reserve taken again.
 * When even that fails (ENFILE: the whole system is out; ENOBUFS, ENOMEM), the listener is not
 * watched for 100 ms. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "proxy.h"

#define ACCEPT_BATCH 64
#define MAX_REFUSING 64
#define REFUSAL_LINGER_MS 1000
#define PAUSE_MS 100

static struct {
    int fd;
    uint64_t until;
} refusing[MAX_REFUSING];
static int nrefusing;

static int take_reserve(void) { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

int listener_open(void) {
    g.listen_fd = listen_on(g.o.listen_host, g.o.listen_port);
    g.reserve_fd = take_reserve();
    return g.listen_fd < 0 ? -1 : 0;
}

void listener_close(void) {
    for (int i = 0; i < nrefusing; i++) close(refusing[i].fd);
    nrefusing = 0;
    if (g.reserve_fd >= 0) close(g.reserve_fd);
    if (g.listen_fd >= 0) close(g.listen_fd);
    g.reserve_fd = g.listen_fd = -1;
}

int listener_wants_poll(uint64_t now) { return now >= g.listen_paused_until; }

/* Sends a FatalResponse (what the client's driver shows) on a fresh connection. */
static void send_fatal(int fd, const char *sqlstate, const char *msg) {
    buf_t body = {0}, m = {0};
    const char *fields[][2] = {{"S", "FATAL"}, {"V", "FATAL"}, {"C", sqlstate}, {"M", msg}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        buf_append(&body, fields[i][0], 1);
        buf_append(&body, fields[i][1], strlen(fields[i][1]) + 1);
    }
    buf_append(&body, "", 1);
    buf_msg(&m, 'E', buf_data(&body), buf_size(&body));
    set_nonblocking(fd);
    flush_fd(fd, &m);
    buf_free(&body);
    buf_free(&m);
}

/* Refuses a client and keeps the connection until it has read the error (see the top). */
static void refuse_lingering(int fd, uint64_t now) {
    g.clients_refused++;
    send_fatal(fd, "53300", "sorry, too many clients already");
    shutdown(fd, SHUT_WR);
    if (nrefusing == MAX_REFUSING) {
        close(fd);
        return;
    }
    refusing[nrefusing].fd = fd;
    refusing[nrefusing].until = now + REFUSAL_LINGER_MS;
    nrefusing++;
    loop_watch_refusal(fd);
}

static void drop_refusal(int i) {
    close(refusing[i].fd);
    refusing[i] = refusing[--nrefusing];
}

/* EMFILE: the reserve descriptor pays for accepting and refusing one waiting connection.
 * Returns 1 when one was refused, 0 when none was waiting (accept(2) says EMFILE before it looks
 * at the backlog), -1 when even that failed. */
static int shed_one(void) {
    if (g.reserve_fd < 0) {
        g.reserve_fd = take_reserve();
        return -1;
    }
    close(g.reserve_fd);
    int fd = accept(g.listen_fd, NULL, NULL);
    int err = errno;
    if (fd >= 0) {
        g.clients_refused++;
        send_fatal(fd, "53300", "polarsplit-proxy: out of file descriptors");
        close(fd);
    }
    g.reserve_fd = take_reserve();
    if (fd >= 0) return 1;
    errno = err;
    return err == EAGAIN || err == EWOULDBLOCK ? 0 : -1;
}

static void pause_listener(uint64_t now, int err) {
    g.accept_errors++;
    if (now >= g.listen_paused_until + 1000) logf_("accept: %s: not accepting for %d ms", strerror(err), PAUSE_MS);
    g.listen_paused_until = now + PAUSE_MS;
}

void listener_accept(uint64_t now) {
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        struct sockaddr_storage sa;
        socklen_t sl = sizeof sa;
        int fd = accept(g.listen_fd, (struct sockaddr *)&sa, &sl);
        if (fd >= 0) {
            if (g.nclients >= g.o.max_clients)
                refuse_lingering(fd, now);
            else
                client_start(fd, &sa, now);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        int shed = errno == EMFILE ? shed_one() : -1;
        if (shed > 0) continue;
        if (shed < 0) pause_listener(now, errno);
        return;
    }
}

void listener_tick(uint64_t now) {
    for (int i = nrefusing - 1; i >= 0; i--)
        if (now >= refusing[i].until) drop_refusal(i);
}

void listener_readable(int fd) {
    for (int i = 0; i < nrefusing; i++) {
        if (refusing[i].fd != fd) continue;
        char sink[512];
        ssize_t n;
        while ((n = recv(fd, sink, sizeof sink, 0)) > 0) {
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) drop_refusal(i);
        return;
    }
}

uint64_t listener_next_deadline(uint64_t now) {
    uint64_t next = g.listen_paused_until > now ? g.listen_paused_until : UINT64_MAX;
    for (int i = 0; i < nrefusing; i++)
        if (refusing[i].until < next) next = refusing[i].until;
    return next;
}
