/* Mode `library`: the router is a libpolarsplit session, called directly. */
#include "router.h"

static polarsplit_status lib_recv_client(void *st, const uint8_t *b, size_t n, uint64_t now, size_t *consumed) {
    return polarsplit_session_recv_client(st, b, n, now, consumed);
}
static polarsplit_status lib_recv_backend(void *st, uint64_t conn, const uint8_t *b, size_t n, uint64_t now) {
    return polarsplit_session_recv_backend(st, conn, b, n, now);
}
static polarsplit_status lib_event(void *st, uint64_t conn, uint32_t kind, uint32_t server, uint32_t flags,
                                   uint64_t now) {
    return polarsplit_session_on_backend_event(st, conn, kind, server, flags, now);
}
static polarsplit_status lib_poll(void *st, polarsplit_action *out, size_t out_size) {
    return polarsplit_session_poll_action(st, out, out_size);
}
static size_t lib_last_error(const void *st, char *buf, size_t len) {
    return polarsplit_session_last_error(st, buf, len);
}
/* PostgreSQL sends BackendKeyData once authentication succeeded, before the first
 * ReadyForQuery; the session has it then. */
static int lib_authenticated(void *st) {
    int32_t pid = 0;
    size_t len = 0;
    return polarsplit_session_backend_key(st, &pid, NULL, 0, &len) == POLARSPLIT_OK;
}
static void lib_free(void *st) { polarsplit_session_free(st); }
static polarsplit_status lib_next_deadline(void *st, uint64_t *at) { return polarsplit_session_next_deadline(st, at); }
static polarsplit_status lib_on_timeout(void *st, uint64_t now) { return polarsplit_session_on_timeout(st, now); }
static polarsplit_status lib_cancel_forwarded(void *st, uint64_t conn) {
    return polarsplit_session_cancel_forwarded(st, conn);
}
static polarsplit_status lib_client_eof(void *st, uint64_t now) { return polarsplit_session_client_eof(st, now); }

static const router_ops LIB_OPS = {lib_recv_client,   lib_recv_backend,     lib_event,        lib_poll,
                                   lib_last_error,    lib_authenticated,    lib_free,         lib_next_deadline,
                                   lib_on_timeout,    lib_cancel_forwarded, lib_client_eof};

polarsplit_status router_library(const polarsplit_engine *e, const polarsplit_client_info *info, router_t *out) {
    polarsplit_session *s = NULL;
    polarsplit_status st = polarsplit_session_new(e, info, sizeof *info, &s);
    out->ops = &LIB_OPS;
    out->st = s;
    out->is_library = 1;
    return st;
}
