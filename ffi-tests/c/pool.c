/* C ABI of the reader key and the pool index with warmup (issue 7: SPEC P-9, P-7, R-3). */
#include <string.h>

#include "polarsplit.h"
#include "harness.h"

int ctest_pool_reader_key(void);
int ctest_pool_checkout_checkin(void);
int ctest_pool_warmup_reserve_publish(void);
int ctest_pool_invalidation(void);
int ctest_pool_null_arguments(void);

static polarsplit_pool *new_pool(const char *warmup, uint32_t per_key, uint32_t per_server) {
    polarsplit_config_builder *b = polarsplit_config_builder_new();
    polarsplit_config *c = NULL;
    polarsplit_pool *p = NULL;
    if (b == NULL) return NULL;
    if (polarsplit_config_builder_set(b, "warmup", warmup, NULL, 0) != POLARSPLIT_OK ||
        polarsplit_config_builder_set(b, "warmup_queue_capacity", "2", NULL, 0) != POLARSPLIT_OK) {
        polarsplit_config_builder_free(b);
        return NULL;
    }
    if (polarsplit_config_builder_build(b, &c, NULL, 0) != POLARSPLIT_OK) return NULL;
    if (polarsplit_pool_new(c, per_key, per_server, &p) != POLARSPLIT_OK) p = NULL;
    polarsplit_config_free(c); /* the pool keeps what it needs */
    return p;
}

static polarsplit_reader_key simple_key(const char *user, uint64_t generation) {
    polarsplit_reader_key k;
    memset(&k, 0, sizeof k);
    polarsplit_reader_key_build(generation, user, "app", NULL, 0, NULL, NULL, 0, NULL, NULL, 0, &k);
    return k;
}

/* Reserves and publishes `conn`; returns the publish outcome (or -100 on a failed reserve). */
static int open_conn(polarsplit_pool *p, uint32_t server, const polarsplit_reader_key *k, uint64_t conn) {
    uint64_t r = 0;
    polarsplit_pool_outcome o = -1;
    if (polarsplit_pool_reserve(p, server, k, 7, &r, &o) != POLARSPLIT_OK || o != POLARSPLIT_POOL_OK)
        return -100;
    if (polarsplit_pool_publish(p, r, conn, 7, k->profile_generation, true, &o) != POLARSPLIT_OK)
        return -101;
    return o;
}

int ctest_pool_reader_key(void) {
    const char *n1[] = {"application_name", "DateStyle"};
    const char *v1[] = {"x", "ISO"};
    const char *n2[] = {"datestyle", "application_name"};
    const char *v2[] = {"ISO", "x"};
    const char *sn[] = {"search_path"};
    const char *sv[] = {"s1"};
    polarsplit_reader_key a, b, c;
    CHECK_STATUS(polarsplit_reader_key_build(3, "alice", "app", "10.0.0.1", 5432, n1, v1, 2, sn, sv, 1, &a),
                 POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_reader_key_build(3, "alice", "app", "10.0.0.1", 5432, n2, v2, 2, sn, sv, 1, &b),
                 POLARSPLIT_OK);
    CHECK(a.profile_generation == 3);
    CHECK(a.startup_identity_hash != 0);
    CHECK(polarsplit_reader_key_compatible(&a, &b)); /* order and name case do not matter */
    /* Another user, database, identity, setting or generation: incompatible. */
    CHECK_STATUS(polarsplit_reader_key_build(3, "bob", "app", "10.0.0.1", 5432, n1, v1, 2, sn, sv, 1, &c),
                 POLARSPLIT_OK);
    CHECK(!polarsplit_reader_key_compatible(&a, &c));
    CHECK_STATUS(polarsplit_reader_key_build(3, "alice", "db2", "10.0.0.1", 5432, n1, v1, 2, sn, sv, 1, &c),
                 POLARSPLIT_OK);
    CHECK(!polarsplit_reader_key_compatible(&a, &c));
    CHECK_STATUS(polarsplit_reader_key_build(3, "alice", "app", "10.0.0.1", 5433, n1, v1, 2, sn, sv, 1, &c),
                 POLARSPLIT_OK);
    CHECK(!polarsplit_reader_key_compatible(&a, &c));
    CHECK_STATUS(polarsplit_reader_key_build(3, "alice", "app", "10.0.0.1", 5432, n1, v1, 2, NULL, NULL, 0, &c),
                 POLARSPLIT_OK);
    CHECK(!polarsplit_reader_key_compatible(&a, &c));
    CHECK(a.auth_hash == c.auth_hash);
    CHECK_STATUS(polarsplit_reader_key_build(4, "alice", "app", "10.0.0.1", 5432, n1, v1, 2, sn, sv, 1, &c),
                 POLARSPLIT_OK);
    CHECK(!polarsplit_reader_key_compatible(&a, &c));
    /* No identity (profile without LSN): the hash is 0. */
    c = simple_key("alice", 1);
    CHECK(c.startup_identity_hash == 0);
    return 0;
}

int ctest_pool_checkout_checkin(void) {
    polarsplit_pool *p = new_pool("demand", 4, 16);
    CHECK(p != NULL);
    polarsplit_reader_key alice = simple_key("alice", 1), bob = simple_key("bob", 1);
    CHECK(open_conn(p, 1, &alice, 100) == POLARSPLIT_POOL_OK);
    CHECK(open_conn(p, 2, &alice, 200) == POLARSPLIT_POOL_OK);

    polarsplit_checkout co;
    uint32_t pref[] = {2};
    /* Another user never gets alice's connections. */
    CHECK_STATUS(polarsplit_pool_checkout(p, &bob, NULL, 0, false, &co), POLARSPLIT_OK);
    CHECK(!co.found);
    /* Preferred server first. */
    CHECK_STATUS(polarsplit_pool_checkout(p, &alice, pref, 1, true, &co), POLARSPLIT_OK);
    CHECK(co.found && co.conn == 200 && co.server == 2 && !co.needs_reset);
    CHECK_STATUS(polarsplit_pool_checkout(p, &alice, pref, 1, true, &co), POLARSPLIT_OK);
    CHECK(!co.found);
    /* A dirty checkin: handed out again only with needs_reset. */
    bool close = true;
    CHECK_STATUS(polarsplit_pool_checkin(p, 200, true, &close), POLARSPLIT_OK);
    CHECK(!close);
    CHECK_STATUS(polarsplit_pool_checkin(p, 200, false, &close), POLARSPLIT_ERR_BAD_STATE);
    CHECK_STATUS(polarsplit_pool_checkin(p, 999, false, &close), POLARSPLIT_ERR_UNKNOWN_CONNECTION);
    polarsplit_pool_counts counts;
    CHECK_STATUS(polarsplit_pool_server_counts(p, 2, &counts), POLARSPLIT_OK);
    CHECK(counts.idle == 0 && counts.dirty == 1 && counts.in_use == 0 && counts.reserved == 0);
    CHECK_STATUS(polarsplit_pool_checkout(p, &alice, pref, 1, false, &co), POLARSPLIT_OK);
    CHECK(co.found && co.conn == 200 && co.needs_reset);
    CHECK_STATUS(polarsplit_pool_checkin(p, 200, false, &close), POLARSPLIT_OK);
    /* mark_dirty on an idle connection. */
    CHECK_STATUS(polarsplit_pool_mark_dirty(p, 100), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_pool_mark_dirty(p, 12345), POLARSPLIT_ERR_UNKNOWN_CONNECTION);
    uint32_t one[] = {1};
    CHECK_STATUS(polarsplit_pool_checkout(p, &alice, one, 1, true, &co), POLARSPLIT_OK);
    CHECK(co.found && co.conn == 100 && co.needs_reset);
    CHECK_STATUS(polarsplit_pool_key_counts(p, &alice, &counts), POLARSPLIT_OK);
    CHECK(counts.idle == 1 && counts.in_use == 1);
    /* Remove forgets it (in use or not). */
    CHECK_STATUS(polarsplit_pool_remove(p, 100), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_pool_remove(p, 100), POLARSPLIT_ERR_UNKNOWN_CONNECTION);
    polarsplit_pool_stats st;
    CHECK_STATUS(polarsplit_pool_read_stats(p, &st, sizeof st), POLARSPLIT_OK);
    CHECK(st.hits == 3 && st.misses == 2 && st.reset_handouts == 2 && st.published == 2);
    polarsplit_pool_free(p);
    return 0;
}

int ctest_pool_warmup_reserve_publish(void) {
    polarsplit_pool *p = new_pool("both", 1, 16);
    CHECK(p != NULL);
    polarsplit_reader_key k = simple_key("alice", 1), k2 = simple_key("bob", 1), k3 = simple_key("carol", 1);
    polarsplit_pool_outcome o = -1;
    CHECK_STATUS(polarsplit_pool_demand(p, 1, &k, POLARSPLIT_DEMAND_MISS, &o), POLARSPLIT_OK);
    CHECK(o == POLARSPLIT_POOL_OK);
    CHECK_STATUS(polarsplit_pool_demand(p, 1, &k, POLARSPLIT_DEMAND_BEGIN, &o), POLARSPLIT_OK);
    CHECK(o == POLARSPLIT_POOL_DEMAND_DUPLICATE);
    CHECK_STATUS(polarsplit_pool_demand(p, 1, &k2, POLARSPLIT_DEMAND_BEGIN, NULL), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_pool_demand(p, 1, &k3, POLARSPLIT_DEMAND_MISS, &o), POLARSPLIT_OK);
    CHECK(o == POLARSPLIT_POOL_DEMAND_DROPPED); /* capacity 2 */
    CHECK_STATUS(polarsplit_pool_demand(p, 1, &k3, 77, &o), POLARSPLIT_ERR_INVALID_ARGUMENT);

    polarsplit_demand d[4];
    size_t n = 99;
    CHECK_STATUS(polarsplit_pool_drain(p, d, 1, &n), POLARSPLIT_OK);
    CHECK(n == 1 && d[0].server == 1 && d[0].reason == POLARSPLIT_DEMAND_MISS);
    CHECK(polarsplit_reader_key_compatible(&d[0].key, &k));
    CHECK_STATUS(polarsplit_pool_drain(p, d, 4, &n), POLARSPLIT_OK);
    CHECK(n == 1 && d[0].reason == POLARSPLIT_DEMAND_BEGIN);
    CHECK_STATUS(polarsplit_pool_drain(p, NULL, 0, &n), POLARSPLIT_OK);
    CHECK(n == 0);

    /* Reserve → (handshake) → publish; capacity 1 per (server, key). */
    uint64_t r = 0, r2 = 0;
    CHECK_STATUS(polarsplit_pool_reserve(p, 1, &k, 7, &r, &o), POLARSPLIT_OK);
    CHECK(o == POLARSPLIT_POOL_OK && r != 0);
    CHECK_STATUS(polarsplit_pool_reserve(p, 1, &k, 7, &r2, &o), POLARSPLIT_OK);
    CHECK(o == POLARSPLIT_POOL_KEY_FULL && r2 == 0);
    /* The writer generation moved during the handshake: discarded. */
    CHECK_STATUS(polarsplit_pool_publish(p, r, 10, 8, 1, true, &o), POLARSPLIT_OK);
    CHECK(o == POLARSPLIT_POOL_STALE_WRITER_GENERATION);
    CHECK_STATUS(polarsplit_pool_publish(p, r, 10, 7, 1, true, &o), POLARSPLIT_OK);
    CHECK(o == POLARSPLIT_POOL_UNKNOWN_RESERVATION);
    /* No longer a healthy member: discarded. */
    CHECK_STATUS(polarsplit_pool_reserve(p, 1, &k, 7, &r, &o), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_pool_publish(p, r, 11, 7, 1, false, &o), POLARSPLIT_OK);
    CHECK(o == POLARSPLIT_POOL_NOT_MEMBER);
    /* Server removed meanwhile: discarded. */
    CHECK_STATUS(polarsplit_pool_reserve(p, 1, &k, 7, &r, &o), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_pool_remove_server(p, 1, NULL), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_pool_publish(p, r, 12, 7, 1, true, &o), POLARSPLIT_OK);
    CHECK(o == POLARSPLIT_POOL_SERVER_REMOVED);
    /* Cancel an abandoned one. */
    CHECK_STATUS(polarsplit_pool_reserve(p, 1, &k, 7, &r, &o), POLARSPLIT_OK);
    CHECK(o == POLARSPLIT_POOL_OK);
    CHECK_STATUS(polarsplit_pool_cancel(p, r), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_pool_cancel(p, r), POLARSPLIT_ERR_INVALID_ARGUMENT);
    /* A good one. */
    CHECK(open_conn(p, 1, &k, 13) == POLARSPLIT_POOL_OK);
    polarsplit_pool_stats st;
    CHECK_STATUS(polarsplit_pool_read_stats(p, &st, sizeof st), POLARSPLIT_OK);
    CHECK(st.discarded == 3 && st.cancelled == 1 && st.published == 1 && st.reserve_refused == 1);
    CHECK(st.demands_queued == 2 && st.demands_duplicate == 1 && st.demands_dropped == 1);
    polarsplit_pool_free(p);

    /* warmup = off: signals are refused as disabled. */
    p = new_pool("off", 1, 1);
    CHECK(p != NULL);
    CHECK_STATUS(polarsplit_pool_demand(p, 1, &k, POLARSPLIT_DEMAND_MISS, &o), POLARSPLIT_OK);
    CHECK(o == POLARSPLIT_POOL_DEMAND_DISABLED);
    polarsplit_pool_free(p);
    return 0;
}

int ctest_pool_invalidation(void) {
    polarsplit_pool *p = new_pool("demand", 4, 16);
    CHECK(p != NULL);
    polarsplit_reader_key old = simple_key("alice", 1), fresh = simple_key("alice", 2);
    CHECK(open_conn(p, 1, &old, 1) == POLARSPLIT_POOL_OK);
    CHECK(open_conn(p, 1, &old, 2) == POLARSPLIT_POOL_OK);
    CHECK(open_conn(p, 2, &old, 3) == POLARSPLIT_POOL_OK);
    polarsplit_checkout held;
    uint32_t one[] = {1};
    CHECK_STATUS(polarsplit_pool_checkout(p, &old, one, 1, true, &held), POLARSPLIT_OK);
    CHECK(held.found);

    /* A profile change: old connections are never handed out again. */
    size_t queued = 0, n = 0;
    CHECK_STATUS(polarsplit_pool_invalidate_before(p, 2, &queued), POLARSPLIT_OK);
    CHECK(queued == 2);
    uint64_t ids[1];
    CHECK_STATUS(polarsplit_pool_drain_closed(p, ids, 1, &n), POLARSPLIT_OK);
    CHECK(n == 1);
    CHECK_STATUS(polarsplit_pool_drain_closed(p, ids, 1, &n), POLARSPLIT_OK);
    CHECK(n == 1);
    CHECK_STATUS(polarsplit_pool_drain_closed(p, ids, 1, &n), POLARSPLIT_OK);
    CHECK(n == 0);
    polarsplit_checkout co;
    CHECK_STATUS(polarsplit_pool_checkout(p, &old, NULL, 0, false, &co), POLARSPLIT_OK);
    CHECK(!co.found);
    bool close = false;
    CHECK_STATUS(polarsplit_pool_checkin(p, held.conn, false, &close), POLARSPLIT_OK);
    CHECK(close);
    polarsplit_pool_outcome o = -1;
    uint64_t r = 0;
    CHECK_STATUS(polarsplit_pool_reserve(p, 1, &old, 7, &r, &o), POLARSPLIT_OK);
    CHECK(o == POLARSPLIT_POOL_STALE_PROFILE);

    /* A server removal queues its idle connections. */
    CHECK(open_conn(p, 3, &fresh, 30) == POLARSPLIT_POOL_OK);
    CHECK(open_conn(p, 3, &fresh, 31) == POLARSPLIT_POOL_OK);
    CHECK_STATUS(polarsplit_pool_remove_server(p, 3, &queued), POLARSPLIT_OK);
    CHECK(queued == 2);
    uint64_t two[4] = {0, 0, 0, 0};
    CHECK_STATUS(polarsplit_pool_drain_closed(p, two, 4, &n), POLARSPLIT_OK);
    CHECK(n == 2 && two[0] == 30 && two[1] == 31);
    polarsplit_pool_counts c;
    CHECK_STATUS(polarsplit_pool_server_counts(p, 3, &c), POLARSPLIT_OK);
    CHECK(c.idle == 0 && c.dirty == 0 && c.in_use == 0 && c.reserved == 0);
    polarsplit_pool_free(p);
    return 0;
}

int ctest_pool_null_arguments(void) {
    polarsplit_pool_free(NULL);
    polarsplit_pool *p = new_pool("demand", 4, 16);
    CHECK(p != NULL);
    polarsplit_reader_key k = simple_key("alice", 1);
    const char *names[] = {"a"};
    const char *nullv[] = {NULL};

    CHECK(!polarsplit_reader_key_compatible(NULL, &k));
    CHECK(!polarsplit_reader_key_compatible(&k, NULL));
    CHECK_STATUS(polarsplit_reader_key_build(1, NULL, "d", NULL, 0, NULL, NULL, 0, NULL, NULL, 0, &k), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_reader_key_build(1, "u", NULL, NULL, 0, NULL, NULL, 0, NULL, NULL, 0, &k), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_reader_key_build(1, "u", "d", NULL, 0, NULL, NULL, 0, NULL, NULL, 0, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_reader_key_build(1, "u", "d", NULL, 0, NULL, NULL, 1, NULL, NULL, 0, &k), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_reader_key_build(1, "u", "d", NULL, 0, names, nullv, 1, NULL, NULL, 0, &k), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_reader_key_build(1, "u", "d", NULL, 0, NULL, NULL, 0, names, NULL, 1, &k), POLARSPLIT_ERR_NULL);

    polarsplit_pool *q = (polarsplit_pool *)&k; /* must be overwritten with NULL */
    CHECK_STATUS(polarsplit_pool_new(NULL, 1, 1, &q), POLARSPLIT_ERR_NULL);
    CHECK(q == NULL);
    CHECK_STATUS(polarsplit_pool_new(NULL, 1, 1, NULL), POLARSPLIT_ERR_NULL);

    polarsplit_checkout co;
    bool close;
    size_t n;
    uint64_t ids[2], r;
    polarsplit_pool_outcome o;
    polarsplit_pool_counts c;
    polarsplit_pool_stats st;
    polarsplit_demand d[2];
    CHECK_STATUS(polarsplit_pool_checkout(NULL, &k, NULL, 0, false, &co), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_checkout(p, NULL, NULL, 0, false, &co), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_checkout(p, &k, NULL, 1, false, &co), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_checkout(p, &k, NULL, 0, false, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_checkin(NULL, 1, false, &close), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_checkin(p, 1, false, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_remove(NULL, 1), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_mark_dirty(NULL, 1), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_remove_server(NULL, 1, &n), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_invalidate_before(NULL, 1, &n), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_drain_closed(NULL, ids, 2, &n), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_drain_closed(p, NULL, 2, &n), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_drain_closed(p, ids, 2, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_server_counts(NULL, 1, &c), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_server_counts(p, 1, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_key_counts(p, NULL, &c), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_key_counts(p, &k, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_read_stats(NULL, &st, sizeof st), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_read_stats(p, NULL, sizeof(polarsplit_pool_stats)), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_demand(NULL, 1, &k, POLARSPLIT_DEMAND_MISS, &o), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_demand(p, 1, NULL, POLARSPLIT_DEMAND_MISS, &o), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_drain(NULL, d, 2, &n), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_drain(p, NULL, 2, &n), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_drain(p, d, 2, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_reserve(NULL, 1, &k, 7, &r, &o), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_reserve(p, 1, NULL, 7, &r, &o), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_reserve(p, 1, &k, 7, NULL, &o), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_reserve(p, 1, &k, 7, &r, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_publish(NULL, 1, 1, 7, 1, true, &o), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_publish(p, 1, 1, 7, 1, true, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_cancel(NULL, 1), POLARSPLIT_ERR_NULL);
    /* Nothing above changed the pool. */
    CHECK_STATUS(polarsplit_pool_read_stats(p, &st, sizeof st), POLARSPLIT_OK);
    CHECK(st.reserved == 0 && st.hits == 0 && st.misses == 0 && st.demands_queued == 0);
    /* Zero limits are refused. */
    polarsplit_pool_free(p);
    polarsplit_config_builder *b = polarsplit_config_builder_new();
    polarsplit_config *cfg = NULL;
    CHECK_STATUS(polarsplit_config_builder_build(b, &cfg, NULL, 0), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_pool_new(cfg, 0, 1, &q), POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK(q == NULL);
    CHECK_STATUS(polarsplit_pool_new(cfg, 1, 0, &q), POLARSPLIT_ERR_INVALID_ARGUMENT);
    polarsplit_config_free(cfg);
    return 0;
}
