/* The reader pool: idle reader connections, found by server and exact reader key (SPEC P-9).
 *
 * Kept behind this tiny interface on purpose: the library is growing its own pool index
 * (polarsplit_pool_*); switching to it means reimplementing these five functions only. */
#ifndef PROXY_POOL_H
#define PROXY_POOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t profile_generation, auth_hash, startup_identity_hash, startup_options_hash;
} reader_key_t;

/* Parks an idle connection `conn` (the host's own object) of `server` with `key`. */
void pool_put(uint32_t server, const reader_key_t *key, void *conn, uint64_t now_ms);
/* Takes the most recently parked connection of `server` whose key equals `key`, or NULL. */
void *pool_take(uint32_t server, const reader_key_t *key);
/* Forgets `conn` (it broke while idle). Returns 1 when it was pooled. */
int pool_remove(void *conn);
/* Removes and returns one connection idle since before `older_than_ms`, or NULL. */
void *pool_expired(uint64_t older_than_ms);
/* Removes and returns any pooled connection (shutdown), or NULL when empty. */
void *pool_pop_any(void);
size_t pool_size(void);

#endif
