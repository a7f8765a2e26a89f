#include "pool.h"

#include <stdlib.h>
#include <string.h>

/* Idle connections (index: idle) and every connection the index knows (registered). */
typedef struct {
    void *conn;
    uint64_t since;
} idle_t;

static polarsplit_pool *index_;
static idle_t *idle;
static size_t n_idle, cap_idle;
static void **registered;
static size_t n_reg, cap_reg;

static uint64_t id_of(const void *conn) { return (uint64_t)(uintptr_t)conn; }

static int find_reg(const void *conn) {
    for (size_t i = 0; i < n_reg; i++)
        if (registered[i] == conn) return (int)i;
    return -1;
}

static void add_reg(void *conn) {
    if (n_reg == cap_reg) {
        cap_reg = cap_reg ? cap_reg * 2 : 16;
        void **r = realloc(registered, cap_reg * sizeof *registered);
        if (!r) abort();
        registered = r;
    }
    registered[n_reg++] = conn;
}

static void drop_reg(const void *conn) {
    int i = find_reg(conn);
    if (i >= 0) registered[i] = registered[--n_reg];
}

static int drop_idle(const void *conn) {
    for (size_t i = 0; i < n_idle; i++) {
        if (idle[i].conn == conn) {
            memmove(idle + i, idle + i + 1, (n_idle - i - 1) * sizeof *idle);
            n_idle--;
            return 1;
        }
    }
    return 0;
}

int pool_init(const polarsplit_config *config) {
    return polarsplit_pool_new(config, 64, 1024, &index_) == POLARSPLIT_OK ? 0 : -1;
}

void pool_shutdown(void) {
    polarsplit_pool_free(index_);
    index_ = NULL;
    free(idle);
    free(registered);
    idle = NULL;
    registered = NULL;
    n_idle = cap_idle = n_reg = cap_reg = 0;
}

int pool_put(uint32_t server, const reader_key_t *key, void *conn, uint64_t now_ms, bool dirty) {
    if (find_reg(conn) >= 0) {
        bool close = false;
        if (polarsplit_pool_checkin(index_, id_of(conn), dirty, &close) != POLARSPLIT_OK || close) {
            /* The index forgot it (server removed, key invalidated): the caller closes it. */
            drop_reg(conn);
            return 0;
        }
    } else {
        /* A connection opened for a session (the host did the handshake before attaching it):
         * it enters the index through a reservation, as warmup connections do. */
        uint64_t r = 0;
        polarsplit_pool_outcome outcome = 0;
        if (polarsplit_pool_reserve(index_, server, key, 0, &r, &outcome) != POLARSPLIT_OK) return 0;
        if (polarsplit_pool_publish(index_, r, id_of(conn), 0, key->profile_generation, true, &outcome) !=
            POLARSPLIT_OK) {
            polarsplit_pool_cancel(index_, r);
            return 0;
        }
        add_reg(conn);
        if (dirty) polarsplit_pool_mark_dirty(index_, id_of(conn));
    }
    if (n_idle == cap_idle) {
        cap_idle = cap_idle ? cap_idle * 2 : 16;
        idle_t *e = realloc(idle, cap_idle * sizeof *idle);
        if (!e) abort();
        idle = e;
    }
    idle[n_idle++] = (idle_t){conn, now_ms};
    return 1;
}

void *pool_take(uint32_t server, const reader_key_t *key, bool *needs_reset) {
    polarsplit_checkout out;
    *needs_reset = false;
    if (polarsplit_pool_checkout(index_, key, &server, 1, true, &out) != POLARSPLIT_OK || !out.found) return NULL;
    void *conn = (void *)(uintptr_t)out.conn;
    drop_idle(conn);
    *needs_reset = out.needs_reset;
    return conn;
}

int pool_remove(void *conn) {
    if (find_reg(conn) >= 0) {
        polarsplit_pool_remove(index_, id_of(conn));
        drop_reg(conn);
    }
    return drop_idle(conn);
}

void *pool_expired(uint64_t older_than_ms) {
    for (size_t i = 0; i < n_idle; i++) {
        if (idle[i].since < older_than_ms) {
            void *c = idle[i].conn;
            pool_remove(c);
            return c;
        }
    }
    return NULL;
}

void *pool_pop_any(void) {
    if (n_idle == 0) return NULL;
    void *c = idle[n_idle - 1].conn;
    pool_remove(c);
    return c;
}

size_t pool_size(void) { return n_idle; }

int pool_stats(polarsplit_pool_stats *out) {
    return polarsplit_pool_read_stats(index_, out, sizeof *out) == POLARSPLIT_OK ? 0 : -1;
}
