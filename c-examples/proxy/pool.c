#include "pool.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t server;
    reader_key_t key;
    void *conn;
    uint64_t since;
} entry_t;

static entry_t *entries;
static size_t n, cap;

static int key_eq(const reader_key_t *a, const reader_key_t *b) {
    return a->profile_generation == b->profile_generation && a->auth_hash == b->auth_hash &&
           a->startup_identity_hash == b->startup_identity_hash && a->startup_options_hash == b->startup_options_hash;
}

static void remove_at(size_t i) {
    memmove(entries + i, entries + i + 1, (n - i - 1) * sizeof *entries);
    n--;
    if (n == 0) {
        free(entries);
        entries = NULL;
        cap = 0;
    }
}

void pool_put(uint32_t server, const reader_key_t *key, void *conn, uint64_t now_ms) {
    if (n == cap) {
        cap = cap ? cap * 2 : 16;
        entry_t *e = realloc(entries, cap * sizeof *entries);
        if (!e) abort();
        entries = e;
    }
    entries[n++] = (entry_t){server, *key, conn, now_ms};
}

void *pool_take(uint32_t server, const reader_key_t *key) {
    for (size_t i = n; i-- > 0;) {
        if (entries[i].server == server && key_eq(&entries[i].key, key)) {
            void *c = entries[i].conn;
            remove_at(i);
            return c;
        }
    }
    return NULL;
}

int pool_remove(void *conn) {
    for (size_t i = 0; i < n; i++) {
        if (entries[i].conn == conn) {
            remove_at(i);
            return 1;
        }
    }
    return 0;
}

void *pool_expired(uint64_t older_than_ms) {
    for (size_t i = 0; i < n; i++) {
        if (entries[i].since < older_than_ms) {
            void *c = entries[i].conn;
            remove_at(i);
            return c;
        }
    }
    return NULL;
}

void *pool_pop_any(void) {
    if (n == 0) return NULL;
    void *c = entries[n - 1].conn;
    remove_at(n - 1);
    return c;
}

size_t pool_size(void) { return n; }
