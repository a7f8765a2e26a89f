/*
 * pool_polarsplit.h — Pgpool-II's session loop driven by libpolarsplit (configure
 * --with-polarsplit; pgpool.conf `polarsplit = on`). Part of polarsplit's Pgpool-II integration.
 */
#ifndef POOL_POLARSPLIT_H
#define POOL_POLARSPLIT_H

#ifdef USE_POLARSPLIT
#include "pool.h"

/* Whether this client session is routed by the library (config on, streaming-replication
 * mode, protocol 3, a primary connection). */
extern bool pool_polarsplit_wanted(POOL_CONNECTION_POOL * backend);

/* Set by get_backend_connection(): true when the connections were just opened, so each node's
 * ReadyForQuery of the handshake is still unread (pool_do_auth stops after BackendKeyData);
 * false for cached connections, where Pgpool already sent the client its own. */
extern bool pool_polarsplit_fresh_connection;

/*
 * Shared memory the children share DDL through (one count per database slot): the main process
 * adds pool_polarsplit_shmem_size() to its segment and hands the chunk to
 * pool_polarsplit_shmem_init() before it forks the children (polarsplit = on only).
 */
extern size_t pool_polarsplit_shmem_size(void);
extern void pool_polarsplit_shmem_init(void *chunk);

/*
 * Runs the client session to its end with every routing decision from libpolarsplit, in place
 * of pool_process_query(). Returns POOL_END when the client terminated and every backend
 * connection is idle (Pgpool then resets and caches them as usual); ends the child with FATAL
 * when a connection's state is uncertain (never cached).
 */
extern POOL_STATUS pool_polarsplit_process_query(POOL_CONNECTION * frontend,
												 POOL_CONNECTION_POOL * backend);
#endif

#endif							/* POOL_POLARSPLIT_H */
