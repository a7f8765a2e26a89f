/* The reader pool (SPEC P-9): the library's pool index (polarsplit_pool_*) decides which idle
 * connection may serve which key and tracks the XID-reset state (P-7); this file keeps what the
 * index does not need to know: the host's connection objects and how long they have been idle.
 * A connection's id in the index is its object's address. */
#ifndef PROXY_POOL_H
#define PROXY_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "polarsplit.h"

typedef polarsplit_reader_key reader_key_t;

/* Creates the index (from the proxy's configuration). Returns 0, or -1. */
int pool_init(const polarsplit_config *config);
void pool_shutdown(void);
/* Parks an idle connection `conn` (the host's own object) of `server` with `key`. `dirty`: it
 * still holds an XID import. Returns 1 when pooled, 0 when the index refused it (its server
 * left, its profile is stale): then the caller closes it. */
int pool_put(uint32_t server, const reader_key_t *key, void *conn, uint64_t now_ms, bool dirty);
/* Takes an idle connection of `server` whose key equals `key`, or NULL. `*needs_reset` says
 * whether it must be cleared of an XID import first. */
void *pool_take(uint32_t server, const reader_key_t *key, bool *needs_reset);
/* Forgets `conn` (it broke or is closed). Returns 1 when it was idle in the pool. */
int pool_remove(void *conn);
/* Removes and returns one connection idle since before `older_than_ms`, or NULL. */
void *pool_expired(uint64_t older_than_ms);
/* Removes and returns any pooled connection (shutdown), or NULL when empty. */
void *pool_pop_any(void);
size_t pool_size(void);
/* The index's counters (hits, misses, resets handed out…). */
int pool_stats(polarsplit_pool_stats *out);

#endif
