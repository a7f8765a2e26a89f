/* The growth rule of ABI 3: a host built against an older (smaller) struct layout is never
 * written past, nor read past, and is refused with POLARSPLIT_ERR_ABI where the library cannot
 * serve it; a host built against a newer (larger) layout gets the library's fields and zeros.
 * Every host buffer here is malloc'ed at exactly the size the host claims, so AddressSanitizer
 * and valgrind (scripts/test-sanitizers.sh runs these functions) catch a single byte written or
 * read beyond it. */
#include <stdlib.h>
#include <string.h>

#include "polarsplit.h"
#include "harness.h"

int ctest_abi_older_action_layout_is_refused_and_never_overrun(void);
int ctest_abi_newer_action_layout_gets_the_known_members(void);
int ctest_abi_growable_inputs_and_pool_stats(void);

/* polarsplit_action as ABI 2 laid it out (include/polarsplit.h of libpolarsplit.so.2): a host
 * compiled then passes this size. */
typedef struct {
    uint32_t kind;
    uint64_t conn;
    uint32_t server;
    size_t n;
    const uint8_t *bytes;
    size_t bytes_len;
    uint32_t outcome;
    uint32_t reason;
    uint64_t target_lsn;
    bool wait;
    bool import_xids;
    uint32_t attempt;
    bool flag;
    int32_t pid;
    uint64_t key_profile_generation;
    uint64_t key_auth_hash;
    uint64_t key_startup_identity_hash;
    uint64_t key_startup_options_hash;
} abi2_action;

static const uint8_t STARTUP[] = {0,   0,   0,   30,  0,   3,   0,   0,   'u', 's', 'e', 'r', 0,   'a', 'p',
                                  'p', 0,   'd', 'a', 't', 'a', 'b', 'a', 's', 'e', 0,   'd', 'b', 0,   0};

/* A session with the startup's actions (DISCARD_CLIENT, CONNECT_WRITER) pending. */
static polarsplit_session *session_with_actions(polarsplit_engine *e) {
    polarsplit_session *s = NULL;
    size_t consumed = 0;
    if (polarsplit_session_new(e, NULL, 0, &s) != POLARSPLIT_OK) return NULL;
    if (polarsplit_session_recv_client(s, STARTUP, sizeof STARTUP, 0, &consumed) != POLARSPLIT_OK ||
        consumed != sizeof STARTUP) {
        polarsplit_session_free(s);
        return NULL;
    }
    return s;
}

/* Polls into a host buffer of exactly `size` bytes filled with 0xA5; returns the status and
 * whether any byte changed. */
static int poll_sized(polarsplit_session *s, size_t size, int *changed) {
    uint8_t *host = malloc(size);
    if (!host) return -1000;
    memset(host, 0xA5, size);
    int st = polarsplit_session_poll_action(s, (polarsplit_action *)(void *)host, size);
    *changed = 0;
    for (size_t i = 0; i < size; i++)
        if (host[i] != 0xA5) *changed = 1;
    free(host);
    return st;
}

int ctest_abi_older_action_layout_is_refused_and_never_overrun(void) {
    polarsplit_engine *e = harness_engine(0);
    CHECK(e != NULL);
    polarsplit_session *s = session_with_actions(e);
    CHECK(s != NULL);
    int changed = 1;

    /* A host built against ABI 2's layout (it could only have loaded libpolarsplit.so.2, but a
     * wrong SONAME link makes it happen): refused, not one byte written. */
    CHECK(sizeof(abi2_action) < sizeof(polarsplit_action));
    CHECK_STATUS(poll_sized(s, sizeof(abi2_action), &changed), POLARSPLIT_ERR_ABI);
    CHECK(!changed);
    /* An ABI 3 struct from before its last member existed (a host built for an older 3.x). */
    size_t older = sizeof(polarsplit_action) - sizeof(polarsplit_action_close_backend);
    CHECK_STATUS(poll_sized(s, older, &changed), POLARSPLIT_ERR_ABI);
    CHECK(!changed);
    CHECK_STATUS(poll_sized(s, 4, &changed), POLARSPLIT_ERR_ABI);
    CHECK(!changed);
    CHECK_STATUS(poll_sized(s, 0, &changed), POLARSPLIT_ERR_ABI);
    CHECK(!changed);
    CHECK(!polarsplit_session_is_poisoned(s));

    /* Nothing was lost: the same host, rebuilt against this header, gets every action. */
    polarsplit_action a;
    CHECK_STATUS(polarsplit_session_poll_action(s, &a, sizeof a), POLARSPLIT_OK);
    CHECK(a.kind == POLARSPLIT_ACTION_DISCARD_CLIENT && a.discard_client.n == sizeof STARTUP);
    CHECK_STATUS(polarsplit_session_poll_action(s, &a, sizeof a), POLARSPLIT_OK);
    CHECK(a.kind == POLARSPLIT_ACTION_CONNECT_WRITER && a.connect_writer.startup.len > 8);
    CHECK_STATUS(polarsplit_session_poll_action(s, &a, sizeof a), POLARSPLIT_DONE);
    CHECK(a.kind == POLARSPLIT_ACTION_NONE);
    /* Even with nothing to poll, a too-small struct is refused before anything is written. */
    CHECK_STATUS(poll_sized(s, sizeof(abi2_action), &changed), POLARSPLIT_ERR_ABI);
    CHECK(!changed);
    polarsplit_session_free(s);
    polarsplit_engine_free(e);
    return 0;
}

int ctest_abi_newer_action_layout_gets_the_known_members(void) {
    /* A host built against a later 3.x header, whose polarsplit_action has grown by 64 bytes:
     * the library writes `kind` and the kind's member only; the bytes it does not know stay as
     * the host left them. */
    enum { GROWN = sizeof(polarsplit_action) + 64 };
    polarsplit_engine *e = harness_engine(0);
    CHECK(e != NULL);
    polarsplit_session *s = session_with_actions(e);
    CHECK(s != NULL);
    uint8_t *host = malloc(GROWN);
    CHECK(host != NULL);
    memset(host, 0xEE, GROWN);
    CHECK_STATUS(polarsplit_session_poll_action(s, (polarsplit_action *)(void *)host, GROWN), POLARSPLIT_OK);
    polarsplit_action a;
    memcpy(&a, host, sizeof a);
    CHECK(a.kind == POLARSPLIT_ACTION_DISCARD_CLIENT && a.discard_client.n == sizeof STARTUP);
    for (size_t i = sizeof(polarsplit_action); i < GROWN; i++) CHECK(host[i] == 0xEE);
    /* Only the member of the kind: the forward_client member, say, was not touched. */
    const uint8_t *fc = host + offsetof(polarsplit_action, forward_client);
    for (size_t i = 0; i < sizeof(polarsplit_action_forward_client); i++) CHECK(fc[i] == 0xEE);
    free(host);
    polarsplit_session_free(s);
    polarsplit_engine_free(e);
    return 0;
}

int ctest_abi_growable_inputs_and_pool_stats(void) {
    polarsplit_engine *e = harness_engine(0);
    CHECK(e != NULL);
    polarsplit_session *s = NULL;

    /* Client info: a smaller struct is refused (nothing beyond it is read: ASan checks the
     * exact allocation); the full one works. */
    size_t small = offsetof(polarsplit_client_info, writer_hostgroup);
    /* Filled through a whole struct and copied: storing through a pointer to a struct larger
     * than its allocation is undefined (and an -Warray-bounds error at -O2). */
    polarsplit_client_info prefix = {"10.0.0.7", 40000, NULL, 0, -1};
    polarsplit_client_info *info = malloc(small);
    CHECK(info != NULL);
    memcpy(info, &prefix, small);
    polarsplit_session *marker = (polarsplit_session *)(void *)info;
    s = marker;
    CHECK_STATUS(polarsplit_session_new(e, info, small, &s), POLARSPLIT_ERR_ABI);
    CHECK(s == NULL);
    free(info);
    polarsplit_client_info full = {"10.0.0.7", 40000, NULL, 0, -1};
    CHECK_STATUS(polarsplit_session_new(e, &full, sizeof full, &s), POLARSPLIT_OK);

    /* Backend facts: likewise. */
    size_t fsmall = offsetof(polarsplit_backend_fact, tag);
    polarsplit_backend_fact fprefix;
    memset(&fprefix, 0, sizeof fprefix);
    fprefix.kind = POLARSPLIT_FACT_READY_FOR_QUERY;
    fprefix.status = 'I';
    polarsplit_backend_fact *f = malloc(fsmall);
    CHECK(f != NULL);
    memcpy(f, &fprefix, fsmall);
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, 1, f, fsmall, 0), POLARSPLIT_ERR_ABI);
    free(f);
    polarsplit_session_free(s);

    /* Pool stats: a smaller struct is refused untouched; a larger (newer) one gets the known
     * counters and zeros beyond them, never a byte past its size. */
    polarsplit_config_builder *b = polarsplit_config_builder_new();
    polarsplit_config *c = NULL;
    CHECK_STATUS(polarsplit_config_builder_build(b, &c, NULL, 0), POLARSPLIT_OK);
    polarsplit_pool *p = NULL;
    CHECK_STATUS(polarsplit_pool_new(c, 2, 2, &p), POLARSPLIT_OK);
    polarsplit_config_free(c);
    polarsplit_reader_key k = {1, 2, 3, 4};
    polarsplit_checkout co;
    CHECK_STATUS(polarsplit_pool_checkout(p, &k, NULL, 0, false, &co), POLARSPLIT_OK); /* a miss */
    size_t ssmall = offsetof(polarsplit_pool_stats, demands_disabled);
    uint8_t *st = malloc(ssmall);
    CHECK(st != NULL);
    memset(st, 0xA5, ssmall);
    CHECK_STATUS(polarsplit_pool_read_stats(p, (polarsplit_pool_stats *)(void *)st, ssmall), POLARSPLIT_ERR_ABI);
    for (size_t i = 0; i < ssmall; i++) CHECK(st[i] == 0xA5);
    free(st);
    size_t big = sizeof(polarsplit_pool_stats) + 16;
    st = malloc(big);
    CHECK(st != NULL);
    memset(st, 0xA5, big);
    CHECK_STATUS(polarsplit_pool_read_stats(p, (polarsplit_pool_stats *)(void *)st, big), POLARSPLIT_OK);
    polarsplit_pool_stats got;
    memcpy(&got, st, sizeof got);
    CHECK(got.misses == 1 && got.hits == 0);
    for (size_t i = sizeof got; i < big; i++) CHECK(st[i] == 0);
    free(st);
    polarsplit_pool_free(p);
    polarsplit_engine_free(e);
    return 0;
}
