/* Who decides where each client byte goes. In mode `library` that is libpolarsplit's session;
 * modes `naive` and `primary-only` use a tiny router of their own that speaks the same action
 * vocabulary (polarsplit_action), so the proxy executes every mode with the same code. */
#ifndef PROXY_ROUTER_H
#define PROXY_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include "polarsplit.h"

typedef struct {
    polarsplit_status (*recv_client)(void *st, const uint8_t *b, size_t n, uint64_t now, size_t *consumed);
    polarsplit_status (*recv_backend)(void *st, uint64_t conn, const uint8_t *b, size_t n, uint64_t now);
    polarsplit_status (*event)(void *st, uint64_t conn, uint32_t kind, uint32_t server, uint32_t flags, uint64_t now);
    polarsplit_status (*poll)(void *st, polarsplit_action *out, size_t out_size);
    size_t (*last_error)(const void *st, char *buf, size_t len);
    /* Whether the writer accepted the client's login (the end of the authentication phase). */
    int (*authenticated)(void *st);
    void (*free)(void *st);
    /* Time (SPEC R-1b): when the router needs on_timeout (UINT64_MAX: never), and that time
     * coming (an input: drain after it). */
    polarsplit_status (*next_deadline)(void *st, uint64_t *at);
    polarsplit_status (*on_timeout)(void *st, uint64_t now);
    /* A CancelRequest was forwarded to `conn` (SPEC F-1). Not an input. */
    polarsplit_status (*cancel_forwarded)(void *st, uint64_t conn);
    /* The client's input ended (closed, half-closed or failed) and every byte of it was fed: an
     * input. The router still runs and answers what came before it, then asks CLOSE_CLIENT. */
    polarsplit_status (*client_eof)(void *st, uint64_t now);
} router_ops;

typedef struct {
    const router_ops *ops;
    void *st;
    int is_library;
} router_t;

/* A libpolarsplit session. */
polarsplit_status router_library(const polarsplit_engine *e, const polarsplit_client_info *info, router_t *out);

/* The naive router (every simple-protocol SELECT outside a transaction to reader `server`, no
 * waits) when `naive`, else a plain relay to the primary. */
void router_simple(int naive, uint32_t server, router_t *out);

/* What the naive router did (for its report: the library's counters do not see it). */
extern uint64_t naive_reads_to_replica, naive_statements_to_primary, naive_replica_unavailable;

#endif
