/* Sockets: name resolution, non-blocking connects and writes, the listening socket. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proxy.h"

static uint64_t clock_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* While the loop runs, the time it read last (at most one wait or one iteration's handlers
 * old); before and after, the clock itself. */
static uint64_t loop_clock;
static int loop_clock_set;

uint64_t now_ms(void) { return loop_clock_set ? loop_clock : clock_ms(); }

void now_ms_refresh(void) {
    loop_clock = clock_ms();
    loop_clock_set = 1;
}

void now_ms_unset(void) { loop_clock_set = 0; }

int set_nonblocking(int fd) {
    int fl = fcntl(fd, F_GETFL, 0);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int resolve(const char *host, const char *port, struct sockaddr_storage *out, socklen_t *len) {
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

int split_hostport(const char *s, char *host, size_t hcap, char *port, size_t pcap) {
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
    memcpy(port, colon + 1, strlen(colon + 1) + 1);
    return 0;
}

int flush_fd(int fd, buf_t *b) {
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

int listen_on(const char *host, const char *port) {
    struct sockaddr_storage sa;
    socklen_t sl;
    if (resolve(host, port, &sa, &sl) != 0) return -1;
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
