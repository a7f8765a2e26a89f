/* Misuse of the C ABI (issue 10): every pointer argument NULL, out-of-range integers for every
 * enum-like parameter, inputs while actions are pending, handles freed while others still use
 * them, and a forced panic that must poison exactly one session. Each misuse must get its
 * documented status — never a crash, never undefined behaviour (the sanitizer and valgrind runs
 * of scripts/test-sanitizers.sh execute these same functions). */
#include <stdint.h>
#include <string.h>

#include "polarsplit.h"
#include "harness.h"

int ctest_misuse_null_every_pointer(void);
int ctest_misuse_out_of_range_integers(void);
int ctest_misuse_input_while_actions_pending(void);
int ctest_misuse_handles_freed_while_in_use(void);
int ctest_misuse_output_buffers(void);
int ctest_misuse_panic_poisons_one_session(void);
int ctest_misuse_facts_and_pool(void);

#define WRITER 100u
#define READER 201u

static polarsplit_config *make_config(void) {
    polarsplit_config_builder *b = polarsplit_config_builder_new();
    polarsplit_config *c = NULL;
    if (b == NULL) return NULL;
    if (polarsplit_config_builder_build(b, &c, NULL, 0) != POLARSPLIT_OK) return NULL;
    return c;
}

static polarsplit_engine *make_engine(void) {
    polarsplit_config *c = make_config();
    polarsplit_engine *e = NULL;
    if (c == NULL) return NULL;
    if (polarsplit_engine_new(c, &e) != POLARSPLIT_OK) e = NULL;
    polarsplit_config_free(c);
    if (e != NULL) {
        polarsplit_engine_add_reader(e, 1, 1);
        polarsplit_engine_add_reader(e, 2, 1);
    }
    return e;
}

/* A session for a client whose address is known (so backends report LSNs). */
static int new_session(polarsplit_engine *e, polarsplit_session **out) {
    polarsplit_client_info info = {"10.0.0.7", 40000, "127.0.0.1", 6432, -1};
    return polarsplit_session_new(e, &info, sizeof info, out);
}

/* StartupMessage user=app database=db (30 bytes). */
static const uint8_t STARTUP[] = {0,   0,   0,   30,  0,   3,   0,   0,   'u', 's', 'e', 'r', 0,   'a', 'p',
                                  'p', 0,   'd', 'a', 't', 'a', 'b', 'a', 's', 'e', 0,   'd', 'b', 0,   0};

/* Polls until DONE; returns the number of actions, or -1 on a bad status. Records the kinds. */
static int drain(polarsplit_session *s, uint32_t *kinds, int cap) {
    polarsplit_action a;
    int n = 0, st;
    while ((st = polarsplit_session_poll_action(s, &a, sizeof a)) == POLARSPLIT_OK) {
        if (kinds != NULL && n < cap) kinds[n] = a.kind;
        n++;
    }
    return st == POLARSPLIT_DONE ? n : -1;
}

/* Startup, writer connected, trust auth, first RFQ: the session is ready for statements. */
static int connect_session(polarsplit_session *s) {
    size_t consumed = 0;
    CHECK_STATUS(polarsplit_session_recv_client(s, STARTUP, sizeof STARTUP, 1000, &consumed), POLARSPLIT_OK);
    CHECK(consumed == sizeof STARTUP);
    CHECK(drain(s, NULL, 0) >= 2);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, WRITER, POLARSPLIT_EVENT_WRITER_CONNECTED, 0, 0, 1000),
                 POLARSPLIT_OK);
    CHECK(drain(s, NULL, 0) >= 0);
    uint8_t b[64];
    size_t n = 0;
    int32_t zero = 0;
    uint8_t key[8] = {0, 0, 0, 7, 0, 0, 0, 8};
    n += wire_msg(b + n, 'R', &zero, 4);
    n += wire_msg(b + n, 'K', key, 8);
    n += wire_rfq(b + n, 'I', 0x1000);
    CHECK_STATUS(polarsplit_session_recv_backend(s, WRITER, b, n, 1000), POLARSPLIT_OK);
    CHECK(drain(s, NULL, 0) >= 1);
    /* SPEC S-5: the writer answers the capture that follows its startup RFQ. */
    uint8_t cap[160];
    n = wire_startup_capture_answer(cap);
    CHECK_STATUS(polarsplit_session_recv_backend(s, WRITER, cap, n, 1000), POLARSPLIT_OK);
    CHECK(drain(s, NULL, 0) >= 1);
    return 0;
}

/* A write on the writer, then a read that goes to a reader and comes back: the session and the
 * engine behind it work end to end. */
static int write_then_read(polarsplit_session *s) {
    uint8_t b[256];
    size_t n = wire_query(b, "INSERT INTO t VALUES (1)"), consumed = 0;
    CHECK_STATUS(polarsplit_session_recv_client(s, b, n, 1000, &consumed), POLARSPLIT_OK);
    CHECK(consumed == n);
    CHECK(drain(s, NULL, 0) >= 1);
    n = wire_msg(b, 'C', "INSERT 0 1", 11);
    n += wire_rfq(b + n, 'I', 0x2000);
    CHECK_STATUS(polarsplit_session_recv_backend(s, WRITER, b, n, 1000), POLARSPLIT_OK);
    CHECK(drain(s, NULL, 0) >= 1);

    n = wire_query(b, "SELECT v FROM t WHERE k = 1");
    CHECK_STATUS(polarsplit_session_recv_client(s, b, n, 1000, &consumed), POLARSPLIT_OK);
    polarsplit_action a;
    uint32_t server = 0;
    int acquired = 0, st;
    while ((st = polarsplit_session_poll_action(s, &a, sizeof a)) == POLARSPLIT_OK)
        if (a.kind == POLARSPLIT_ACTION_ACQUIRE_READER) {
            acquired = 1;
            server = a.acquire_reader.server;
        }
    CHECK_STATUS(st, POLARSPLIT_DONE);
    CHECK(acquired);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, READER, POLARSPLIT_EVENT_READER_ATTACHED, server, 0, 1000),
                 POLARSPLIT_OK);
    int waits = 0, sent = 0;
    while ((st = polarsplit_session_poll_action(s, &a, sizeof a)) == POLARSPLIT_OK) {
        if (a.kind == POLARSPLIT_ACTION_DECISION) waits = a.decision.wait;
        if (a.kind == POLARSPLIT_ACTION_SEND_BACKEND && a.send_backend.conn == READER) sent = 1;
    }
    CHECK_STATUS(st, POLARSPLIT_DONE);
    CHECK(sent);
    n = 0;
    if (waits) /* the three hidden SETs of the W-4 wrapper */
        for (int i = 0; i < 3; i++) n += wire_msg(b + n, 'C', "SET", 4);
    uint8_t row[] = {0, 1, 0, 0, 0, 1, '7'};
    n += wire_msg(b + n, 'D', row, sizeof row);
    n += wire_msg(b + n, 'C', "SELECT 1", 9);
    n += wire_rfq(b + n, 'I', 0x3000);
    CHECK_STATUS(polarsplit_session_recv_backend(s, READER, b, n, 1000), POLARSPLIT_OK);
    int released = 0;
    while ((st = polarsplit_session_poll_action(s, &a, sizeof a)) == POLARSPLIT_OK)
        if (a.kind == POLARSPLIT_ACTION_RELEASE_READER) released = 1;
    CHECK_STATUS(st, POLARSPLIT_DONE);
    CHECK(released);
    return 0;
}

int ctest_misuse_null_every_pointer(void) {
    char err[64];
    uint64_t v = 0;
    size_t consumed = 0, len = 0;
    int32_t pid = 0;
    uint8_t secret[8];
    polarsplit_action a;
    polarsplit_config *c = make_config();
    CHECK(c != NULL);
    polarsplit_engine *e = make_engine();
    CHECK(e != NULL);
    polarsplit_session *s = NULL;
    CHECK_STATUS(new_session(e, &s), POLARSPLIT_OK);

    /* Configuration. */
    polarsplit_config_builder_free(NULL);
    polarsplit_config_free(NULL);
    polarsplit_config_builder *b = polarsplit_config_builder_new();
    CHECK(b != NULL);
    CHECK_STATUS(polarsplit_config_builder_set(NULL, "seed", "1", err, sizeof err), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_config_builder_set(b, NULL, "1", err, sizeof err), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_config_builder_set(b, "seed", NULL, err, sizeof err), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_config_builder_set(b, NULL, NULL, NULL, 0), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_config_builder_set(b, "seed", "1", NULL, 0), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_config_builder_set(b, "seed", "x", NULL, 0), POLARSPLIT_ERR_CONFIG);
    CHECK_STATUS(polarsplit_config_builder_set(b, "seed", "x", err, 0), POLARSPLIT_ERR_CONFIG);
    CHECK_STATUS(polarsplit_config_builder_build(NULL, NULL, NULL, 0), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_config_builder_build(b, NULL, NULL, 0), POLARSPLIT_ERR_NULL); /* consumed */

    /* Engine. */
    polarsplit_engine_free(NULL);
    CHECK_STATUS(polarsplit_engine_new(NULL, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_new(c, NULL), POLARSPLIT_ERR_NULL);
    polarsplit_engine *e2 = (polarsplit_engine *)&v;
    CHECK_STATUS(polarsplit_engine_new(NULL, &e2), POLARSPLIT_ERR_NULL);
    CHECK(e2 == NULL);
    CHECK_STATUS(polarsplit_engine_add_reader(NULL, 1, 1), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_remove_reader(NULL, 1), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_reader_health(NULL, 1, true), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_reader_sample(NULL, 1, 1, 1), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_writer_sample(NULL, 0, 1, 1), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_writer_config_loaded(NULL, 0, 1), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_server_version(NULL, 1, 150018), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_writer_changed(NULL, 0, &v), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_writer_changed(NULL, 0, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_writer_changed(e, 0, NULL), POLARSPLIT_OK); /* NULL allowed */
    CHECK_STATUS(polarsplit_engine_set_writer_identity(NULL, 0, 1, 1, &v), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_writer_identity(e, 0, 1, 1, NULL), POLARSPLIT_OK); /* NULL allowed */
    CHECK_STATUS(polarsplit_engine_connection_closed(NULL, 1), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_reader_hostgroup(NULL, 0, 1), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_dialect(NULL, 0, POLARSPLIT_DIALECT_DEFAULT), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_replace_config(NULL, c), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_replace_config(e, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_replace_config(NULL, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_counter(NULL, 0, &v), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_counter(e, 0, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_outcome_count(NULL, 0, &v), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_outcome_count(e, 0, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_reason_count(NULL, 1, &v), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_reason_count(e, 1, NULL), POLARSPLIT_ERR_NULL);

    /* Sessions. */
    polarsplit_session_free(NULL);
    polarsplit_session *s2 = (polarsplit_session *)&v;
    CHECK_STATUS(polarsplit_session_new(NULL, NULL, 0, &s2), POLARSPLIT_ERR_NULL);
    CHECK(s2 == NULL);
    CHECK_STATUS(polarsplit_session_new(NULL, NULL, 0, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_new(e, NULL, 0, NULL), POLARSPLIT_ERR_NULL);
    polarsplit_client_info info = {NULL, 0, NULL, 0, -1};
    CHECK_STATUS(polarsplit_session_new(e, &info, sizeof info, &s2), POLARSPLIT_OK); /* NULL strings allowed */
    polarsplit_session_free(s2);
    polarsplit_client_info bad_utf8 = {"\xff\xfe", 1, NULL, 0, -1};
    CHECK_STATUS(polarsplit_session_new(e, &bad_utf8, sizeof bad_utf8, &s2), POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK(s2 == NULL);

    consumed = 77;
    CHECK_STATUS(polarsplit_session_recv_client(NULL, STARTUP, sizeof STARTUP, 0, &consumed), POLARSPLIT_ERR_NULL);
    CHECK(consumed == 0);
    CHECK_STATUS(polarsplit_session_recv_client(NULL, NULL, 0, 0, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_recv_client(s, NULL, 1, 0, &consumed), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_recv_client(s, NULL, 0, 0, &consumed), POLARSPLIT_OK);
    CHECK(consumed == 0);
    CHECK_STATUS(polarsplit_session_recv_client(s, NULL, 0, 0, NULL), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_session_recv_backend(NULL, WRITER, STARTUP, 4, 0), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_recv_backend(s, WRITER, NULL, 4, 0), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_on_backend_event(NULL, WRITER, POLARSPLIT_EVENT_WRITER_CONNECTED, 0, 0, 0),
                 POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_poll_action(NULL, &a, sizeof a), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_poll_action(s, NULL, sizeof(polarsplit_action)), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_poll_action(NULL, NULL, sizeof(polarsplit_action)), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_executing_conn(NULL, &v), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_executing_conn(s, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_cancel_forwarded(NULL, WRITER), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_next_deadline(NULL, &v), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_next_deadline(s, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_on_timeout(NULL, 0), POLARSPLIT_ERR_NULL);
    polarsplit_backend_fact fact;
    memset(&fact, 0, sizeof fact);
    fact.kind = POLARSPLIT_FACT_OTHER;
    fact.tag = 'D';
    CHECK_STATUS(polarsplit_session_recv_backend_fact(NULL, WRITER, &fact, sizeof fact, 0), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, NULL, sizeof(polarsplit_backend_fact), 0), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_backend_key(NULL, &pid, secret, sizeof secret, &len), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_backend_key(s, NULL, secret, sizeof secret, &len), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_backend_key(s, &pid, NULL, 4, &len), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_backend_key(s, &pid, secret, sizeof secret, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_backend_key(s, &pid, NULL, 0, &len), POLARSPLIT_DONE); /* no key yet */
    CHECK(polarsplit_session_last_error(NULL, err, sizeof err) == 0);
    CHECK(polarsplit_session_last_error(NULL, NULL, 0) == 0);
    CHECK(polarsplit_session_last_error(s, NULL, 0) == 0);
    CHECK(polarsplit_session_last_error(s, NULL, 100) == 0);
    CHECK(!polarsplit_session_is_poisoned(NULL));
#if defined(POLARSPLIT_TEST_HOOKS)
    CHECK_STATUS(polarsplit_session_test_panic_next(NULL), POLARSPLIT_ERR_NULL);
#endif

    /* The session still works after all that. */
    CHECK(connect_session(s) == 0);
    CHECK(write_then_read(s) == 0);
    polarsplit_session_free(s);
    polarsplit_engine_free(e);
    polarsplit_config_free(c);
    return 0;
}

int ctest_misuse_out_of_range_integers(void) {
    char err[256];
    uint64_t v = 0;
    polarsplit_engine *e = make_engine();
    CHECK(e != NULL);
    polarsplit_session *s = NULL;
    CHECK_STATUS(new_session(e, &s), POLARSPLIT_OK);

    /* Event kinds and flag bits. */
    const uint32_t bad_kinds[] = {0, 7, 8, 1000, 0x80000000u, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad_kinds / sizeof bad_kinds[0]; i++)
        CHECK_STATUS(polarsplit_session_on_backend_event(s, WRITER, bad_kinds[i], 0, 0, 0),
                     POLARSPLIT_ERR_INVALID_ARGUMENT);
    const uint32_t bad_flags[] = {16, 32, 0x80000000u, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad_flags / sizeof bad_flags[0]; i++)
        for (uint32_t k = POLARSPLIT_EVENT_WRITER_CONNECTED; k <= POLARSPLIT_EVENT_READER_CONNECT_FAILED; k++)
            CHECK_STATUS(polarsplit_session_on_backend_event(s, WRITER, k, 0, bad_flags[i], 0),
                         POLARSPLIT_ERR_INVALID_ARGUMENT);

    /* Dialects. */
    const int32_t bad_dialects[] = {-2, 3, 100, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof bad_dialects / sizeof bad_dialects[0]; i++)
        CHECK_STATUS(polarsplit_engine_set_dialect(e, 0, bad_dialects[i]), POLARSPLIT_ERR_INVALID_ARGUMENT);
    for (int32_t d = POLARSPLIT_DIALECT_DEFAULT; d <= POLARSPLIT_DIALECT_STOCK; d++)
        CHECK_STATUS(polarsplit_engine_set_dialect(e, 0, d), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_set_dialect(e, UINT32_MAX, POLARSPLIT_DIALECT_STOCK), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_set_dialect(e, 0, POLARSPLIT_DIALECT_DEFAULT), POLARSPLIT_OK);

    /* Hostgroups: -1 is "none"/"configured"; anything else must fit in 32 bits. */
    const int64_t bad_groups[] = {-2, INT64_MIN, (int64_t)UINT32_MAX + 1, INT64_MAX};
    for (size_t i = 0; i < sizeof bad_groups / sizeof bad_groups[0]; i++) {
        CHECK_STATUS(polarsplit_engine_set_reader_hostgroup(e, 7, bad_groups[i]), POLARSPLIT_ERR_INVALID_ARGUMENT);
        polarsplit_client_info info = {NULL, 0, NULL, 0, bad_groups[i]};
        polarsplit_session *s2 = (polarsplit_session *)&v;
        CHECK_STATUS(polarsplit_session_new(e, &info, sizeof info, &s2), POLARSPLIT_ERR_INVALID_ARGUMENT);
        CHECK(s2 == NULL);
    }
    CHECK_STATUS(polarsplit_engine_set_reader_hostgroup(e, 7, -1), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_set_reader_hostgroup(e, 7, 0), POLARSPLIT_OK);

    /* Counter, outcome and reason indexes. */
    uint32_t count = polarsplit_counter_count();
    CHECK(polarsplit_counter_name(count) == NULL);
    CHECK(polarsplit_counter_name(UINT32_MAX) == NULL);
    CHECK_STATUS(polarsplit_engine_counter(e, count, &v), POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(polarsplit_engine_counter(e, UINT32_MAX, &v), POLARSPLIT_ERR_INVALID_ARGUMENT);
    for (uint32_t i = 0; i < count; i++) CHECK_STATUS(polarsplit_engine_counter(e, i, &v), POLARSPLIT_OK);
    const uint32_t bad_outcomes[] = {5, 255, 256, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad_outcomes / sizeof bad_outcomes[0]; i++) {
        CHECK(polarsplit_outcome_name(bad_outcomes[i]) == NULL);
        CHECK_STATUS(polarsplit_engine_outcome_count(e, bad_outcomes[i], &v), POLARSPLIT_ERR_INVALID_ARGUMENT);
    }
    for (uint32_t o = POLARSPLIT_OUTCOME_PASSTHROUGH; o <= POLARSPLIT_OUTCOME_REJECT; o++) {
        CHECK(polarsplit_outcome_name(o) != NULL);
        CHECK_STATUS(polarsplit_engine_outcome_count(e, o, &v), POLARSPLIT_OK);
    }
    /* Reason codes are below 1024; every code either has a name and a count, or neither. */
    for (uint32_t r = 0; r < 70000; r += (r < 300 ? 1 : 997)) {
        const char *name = polarsplit_reason_name(r);
        int st = polarsplit_engine_reason_count(e, r, &v);
        CHECK((name != NULL) == (st == POLARSPLIT_OK));
        CHECK(name != NULL || st == POLARSPLIT_ERR_INVALID_ARGUMENT);
        CHECK(name == NULL || r < 1024);
    }
    CHECK(polarsplit_reason_name(UINT32_MAX) == NULL);
    CHECK_STATUS(polarsplit_engine_reason_count(e, UINT32_MAX, &v), POLARSPLIT_ERR_INVALID_ARGUMENT);

    /* Statuses. */
    const int32_t odd[] = {2, 3, -12, -13, 1000, -1000, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        CHECK(strcmp(polarsplit_status_str(odd[i]), "unknown status") == 0);

    /* Configuration values out of range name the setting; the builder stays usable. */
    polarsplit_config_builder *b = polarsplit_config_builder_new();
    CHECK(b != NULL);
    const char *bad[][2] = {
        {"consistency", "strong"},        {"consistency", ""},
        {"wait_timeout_ms", "-1"},        {"wait_timeout_ms", "99999999999999999999"},
        {"wait_timeout_ms", "1e3"},       {"identity_port", "70000"},
        {"identity_port", "-1"},          {"reader_retry_limit", "4294967296"},
        {"seed", "18446744073709551616"}, {"max_inspected_message_bytes", "-5"},
        {"writer_hostgroup", "-2"},       {"reader_hostgroup", "4294967296"},
        {"server_dialect", "oracle"},     {"txn_split", "maybe"},
        {"", "1"},                        {"consistency\x01", "session"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        CHECK_STATUS(polarsplit_config_builder_set(b, bad[i][0], bad[i][1], err, sizeof err), POLARSPLIT_ERR_CONFIG);
        CHECK(err[0] != '\0');
    }
    CHECK_STATUS(polarsplit_config_builder_set(b, "consistency", "session", err, sizeof err), POLARSPLIT_OK);
    polarsplit_config *c = NULL;
    CHECK_STATUS(polarsplit_config_builder_build(b, &c, err, sizeof err), POLARSPLIT_OK);
    polarsplit_config_free(c);

    /* Engine inputs take any server/hostgroup number; unknown ones are DONE, not errors. */
    CHECK_STATUS(polarsplit_engine_add_reader(e, UINT32_MAX, UINT32_MAX), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_remove_reader(e, UINT32_MAX), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_remove_reader(e, UINT32_MAX), POLARSPLIT_DONE);
    CHECK_STATUS(polarsplit_engine_set_reader_health(e, 12345, false), POLARSPLIT_DONE);
    CHECK_STATUS(polarsplit_engine_reader_sample(e, 12345, UINT64_MAX, UINT64_MAX), POLARSPLIT_DONE);
    CHECK_STATUS(polarsplit_engine_reader_sample(e, 1, UINT64_MAX, UINT64_MAX), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_reader_sample(e, 1, 0, 0), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_writer_sample(e, UINT32_MAX, UINT64_MAX, UINT64_MAX), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_writer_config_loaded(e, UINT32_MAX, UINT64_MAX), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_writer_changed(e, UINT32_MAX, &v), POLARSPLIT_OK);

    /* Byte lengths beyond what any buffer can hold are refused before anything is read. */
    size_t consumed = 99;
    CHECK_STATUS(polarsplit_session_recv_client(s, STARTUP, SIZE_MAX, 0, &consumed),
                 POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK(consumed == 0);
    CHECK_STATUS(polarsplit_session_recv_client(s, STARTUP, (SIZE_MAX >> 1) + 1, 0, &consumed),
                 POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(polarsplit_session_recv_backend(s, WRITER, STARTUP, SIZE_MAX, 0), POLARSPLIT_ERR_INVALID_ARGUMENT);

    /* Times may be anything, also going backwards or at the extremes. */
    CHECK(connect_session(s) == 0);
    uint8_t q[64];
    size_t n = wire_query(q, "INSERT INTO t VALUES (1)");
    CHECK_STATUS(polarsplit_session_recv_client(s, q, n, UINT64_MAX, &consumed), POLARSPLIT_OK);
    CHECK(drain(s, NULL, 0) >= 1);
    n = wire_msg(q, 'C', "INSERT 0 1", 11);
    n += wire_rfq(q + n, 'I', 0x1800);
    CHECK_STATUS(polarsplit_session_recv_backend(s, WRITER, q, n, 0), POLARSPLIT_OK);
    CHECK(drain(s, NULL, 0) >= 1);
    /* A connection id the session never got is its own status, for bytes and for events. */
    CHECK_STATUS(polarsplit_session_recv_backend(s, UINT64_MAX, q, n, 0), POLARSPLIT_ERR_UNKNOWN_CONNECTION);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, UINT64_MAX, POLARSPLIT_EVENT_CONNECTION_LOST, 0, 0, 0),
                 POLARSPLIT_ERR_UNKNOWN_CONNECTION);
    /* Reader events that were not asked for. */
    CHECK_STATUS(polarsplit_session_on_backend_event(s, READER, POLARSPLIT_EVENT_READER_ATTACHED, UINT32_MAX,
                                                     POLARSPLIT_EVENT_FLAG_FRESH, 0),
                 POLARSPLIT_ERR_BAD_STATE);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, READER, POLARSPLIT_EVENT_READER_UNAVAILABLE, 0,
                                                     POLARSPLIT_EVENT_FLAG_NO_CREDENTIALS, 0),
                 POLARSPLIT_ERR_BAD_STATE);
    CHECK(drain(s, NULL, 0) == 0);
    CHECK(write_then_read(s) == 0);

    polarsplit_session_free(s);
    polarsplit_engine_free(e);
    return 0;
}

int ctest_misuse_input_while_actions_pending(void) {
    polarsplit_engine *e = make_engine();
    CHECK(e != NULL);
    polarsplit_session *s = NULL, *ref = NULL;
    CHECK_STATUS(new_session(e, &s), POLARSPLIT_OK);
    CHECK_STATUS(new_session(e, &ref), POLARSPLIT_OK);
    uint8_t q[64];
    size_t n = wire_query(q, "SELECT 1"), consumed = 0;
    polarsplit_action a;

    /* The startup queues actions; every input is refused until they are drained, and the refused
     * inputs change nothing: the actions equal those of a session that never saw them. */
    CHECK_STATUS(polarsplit_session_recv_client(s, STARTUP, sizeof STARTUP, 0, &consumed), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_session_recv_client(ref, STARTUP, sizeof STARTUP, 0, &consumed), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_session_poll_action(s, &a, sizeof a), POLARSPLIT_OK); /* one polled, more pending */
    consumed = 5;
    CHECK_STATUS(polarsplit_session_recv_client(s, q, n, 0, &consumed), POLARSPLIT_ERR_BAD_STATE);
    CHECK(consumed == 0);
    CHECK_STATUS(polarsplit_session_recv_client(s, NULL, 0, 0, &consumed), POLARSPLIT_ERR_BAD_STATE);
    CHECK_STATUS(polarsplit_session_recv_backend(s, WRITER, q, n, 0), POLARSPLIT_ERR_BAD_STATE);
    CHECK_STATUS(polarsplit_session_recv_backend(s, 12345, q, n, 0), POLARSPLIT_ERR_BAD_STATE);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, WRITER, POLARSPLIT_EVENT_WRITER_CONNECTED, 0, 0, 0),
                 POLARSPLIT_ERR_BAD_STATE);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, WRITER, POLARSPLIT_EVENT_CONNECTION_LOST, 0, 0, 0),
                 POLARSPLIT_ERR_BAD_STATE);
    polarsplit_backend_fact fact;
    memset(&fact, 0, sizeof fact);
    fact.kind = POLARSPLIT_FACT_OTHER;
    fact.tag = 'D';
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &fact, sizeof fact, 0), POLARSPLIT_ERR_BAD_STATE);
    char err[128];
    CHECK(polarsplit_session_last_error(s, err, sizeof err) > 0);
    CHECK(strstr(err, "pending") != NULL);
    /* Queries that change nothing are answered while actions are pending. */
    uint64_t conn = 0;
    int32_t pid = 0;
    size_t len = 0;
    CHECK_STATUS(polarsplit_session_executing_conn(s, &conn), POLARSPLIT_DONE);
    CHECK_STATUS(polarsplit_session_backend_key(s, &pid, NULL, 0, &len), POLARSPLIT_DONE);
    CHECK(!polarsplit_session_is_poisoned(s));
    uint32_t ks[16], kr[16];
    int ns = drain(s, ks, 16), nr = drain(ref, kr, 16);
    CHECK(ns >= 0 && nr == ns + 1);
    CHECK(memcmp(ks, kr + 1, (size_t)ns * sizeof ks[0]) == 0);
    CHECK_STATUS(polarsplit_session_recv_client(s, q, 0, 0, &consumed), POLARSPLIT_OK);

    /* After draining, the session goes on normally. */
    CHECK_STATUS(polarsplit_session_on_backend_event(s, WRITER, POLARSPLIT_EVENT_WRITER_CONNECTED, 0, 0, 0),
                 POLARSPLIT_OK);
    CHECK(drain(s, NULL, 0) >= 0);
    CHECK_STATUS(polarsplit_session_poll_action(s, &a, sizeof a), POLARSPLIT_DONE);
    CHECK_STATUS(polarsplit_session_poll_action(s, &a, sizeof a), POLARSPLIT_DONE);
    CHECK(a.kind == POLARSPLIT_ACTION_NONE);
    polarsplit_session_free(s);
    /* Freeing a session with actions still pending releases everything (valgrind/ASan check). */
    CHECK_STATUS(polarsplit_session_recv_client(ref, NULL, 0, 0, NULL), POLARSPLIT_OK);
    polarsplit_session *p = NULL;
    CHECK_STATUS(polarsplit_session_new(e, NULL, 0, &p), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_session_recv_client(p, STARTUP, sizeof STARTUP, 0, &consumed), POLARSPLIT_OK);
    polarsplit_session_free(p);
    polarsplit_session_free(ref);
    polarsplit_engine_free(e);
    return 0;
}

int ctest_misuse_handles_freed_while_in_use(void) {
    /* The config is freed right after the engine is made, the engine right after the sessions:
     * sessions keep what they need alive and work end to end. */
    polarsplit_config *c = make_config();
    CHECK(c != NULL);
    polarsplit_engine *e = NULL;
    CHECK_STATUS(polarsplit_engine_new(c, &e), POLARSPLIT_OK);
    polarsplit_config_free(c);
    CHECK_STATUS(polarsplit_engine_add_reader(e, 1, 1), POLARSPLIT_OK);
    polarsplit_session *s1 = NULL, *s2 = NULL;
    CHECK_STATUS(new_session(e, &s1), POLARSPLIT_OK);
    CHECK_STATUS(new_session(e, &s2), POLARSPLIT_OK);
    CHECK(connect_session(s1) == 0);

    /* A replacement config freed as soon as the engine took it. */
    polarsplit_config_builder *b = polarsplit_config_builder_new();
    CHECK_STATUS(polarsplit_config_builder_set(b, "wait_timeout_ms", "250", NULL, 0), POLARSPLIT_OK);
    polarsplit_config *c2 = NULL;
    CHECK_STATUS(polarsplit_config_builder_build(b, &c2, NULL, 0), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_replace_config(e, c2), POLARSPLIT_OK);
    polarsplit_config_free(c2);

    /* One config feeding two engines, freed in between. */
    polarsplit_config *c3 = make_config();
    polarsplit_engine *e2 = NULL, *e3 = NULL;
    CHECK_STATUS(polarsplit_engine_new(c3, &e2), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_new(c3, &e3), POLARSPLIT_OK);
    polarsplit_config_free(c3);
    polarsplit_engine_free(e3);

    polarsplit_engine_free(e);
    CHECK(write_then_read(s1) == 0);
    CHECK(connect_session(s2) == 0);
    CHECK(write_then_read(s2) == 0);
    polarsplit_session_free(s1);
    CHECK(write_then_read(s2) == 0);
    polarsplit_session_free(s2);

    /* A builder freed without building, and one built with a NULL out (consumed both times). */
    b = polarsplit_config_builder_new();
    CHECK_STATUS(polarsplit_config_builder_set(b, "consistency", "global", NULL, 0), POLARSPLIT_OK);
    polarsplit_config_builder_free(b);
    b = polarsplit_config_builder_new();
    CHECK_STATUS(polarsplit_config_builder_build(b, NULL, NULL, 0), POLARSPLIT_ERR_NULL);
    polarsplit_engine_free(e2);
    return 0;
}

int ctest_misuse_output_buffers(void) {
    /* Caller buffers are written within their stated length, always NUL-terminated, and the
     * bytes after them are untouched. */
    char buf[16];
    polarsplit_engine *e = make_engine();
    CHECK(e != NULL);
    polarsplit_session *s = NULL;
    CHECK_STATUS(new_session(e, &s), POLARSPLIT_OK);
    uint8_t q[16];
    CHECK_STATUS(polarsplit_session_recv_backend(s, 4242, q, 0, 0), POLARSPLIT_ERR_UNKNOWN_CONNECTION);
    memset(buf, 'x', sizeof buf);
    size_t full = polarsplit_session_last_error(s, buf, 1);
    CHECK(full > 4 && buf[0] == '\0' && buf[1] == 'x');
    memset(buf, 'x', sizeof buf);
    CHECK(polarsplit_session_last_error(s, buf, 5) == full);
    CHECK(strlen(buf) == 4 && buf[5] == 'x');

    polarsplit_config_builder *b = polarsplit_config_builder_new();
    memset(buf, 'x', sizeof buf);
    CHECK_STATUS(polarsplit_config_builder_set(b, "consistency", "strong", buf, 1), POLARSPLIT_ERR_CONFIG);
    CHECK(buf[0] == '\0' && buf[1] == 'x');
    memset(buf, 'x', sizeof buf);
    CHECK_STATUS(polarsplit_config_builder_set(b, "consistency", "strong", buf, 6), POLARSPLIT_ERR_CONFIG);
    CHECK(strlen(buf) == 5 && buf[6] == 'x');
    polarsplit_config_builder_free(b);

    /* The BackendKeyData secret is copied up to the capacity; its full length is reported. */
    CHECK(connect_session(s) == 0);
    int32_t pid = 0;
    size_t len = 0;
    uint8_t secret[8];
    memset(secret, 0xAA, sizeof secret);
    CHECK_STATUS(polarsplit_session_backend_key(s, &pid, secret, 2, &len), POLARSPLIT_OK);
    CHECK(pid == 7 && len == 4);
    CHECK(secret[0] == 0 && secret[1] == 0 && secret[2] == 0xAA);
    CHECK_STATUS(polarsplit_session_backend_key(s, &pid, NULL, 0, &len), POLARSPLIT_OK);
    CHECK(len == 4);
    polarsplit_session_free(s);
    polarsplit_engine_free(e);
    return 0;
}

int ctest_misuse_panic_poisons_one_session(void) {
#if defined(POLARSPLIT_TEST_HOOKS)
    char err[128];
    uint64_t v = 0;
    size_t consumed = 0, len = 0;
    int32_t pid = 0;
    uint8_t secret[8];
    polarsplit_action a;
    polarsplit_engine *e = make_engine();
    CHECK(e != NULL);
    polarsplit_session *bad = NULL, *good = NULL;
    CHECK_STATUS(new_session(e, &bad), POLARSPLIT_OK);
    CHECK_STATUS(new_session(e, &good), POLARSPLIT_OK);
    CHECK(connect_session(bad) == 0);
    CHECK(connect_session(good) == 0);

    /* A panic inside an exported call, with actions pending on that session. */
    uint8_t q[64];
    size_t n = wire_query(q, "INSERT INTO t VALUES (1)");
    CHECK_STATUS(polarsplit_session_recv_client(bad, q, n, 1000, &consumed), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_session_test_panic_next(bad), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_session_poll_action(bad, &a, sizeof a), POLARSPLIT_ERR_PANIC);
    CHECK(polarsplit_session_is_poisoned(bad));
    CHECK(!polarsplit_session_is_poisoned(good));
    CHECK(polarsplit_session_last_error(bad, err, sizeof err) > 0);
    CHECK(strstr(err, "panic") != NULL);

    /* Every other call on the poisoned session is refused with POISONED. */
    CHECK_STATUS(polarsplit_session_poll_action(bad, &a, sizeof a), POLARSPLIT_ERR_POISONED);
    CHECK_STATUS(polarsplit_session_poll_action(bad, NULL, sizeof(polarsplit_action)), POLARSPLIT_ERR_POISONED);
    CHECK_STATUS(polarsplit_session_recv_client(bad, q, n, 1000, &consumed), POLARSPLIT_ERR_POISONED);
    CHECK(consumed == 0);
    CHECK_STATUS(polarsplit_session_recv_client(bad, NULL, 0, 1000, NULL), POLARSPLIT_ERR_POISONED);
    CHECK_STATUS(polarsplit_session_recv_backend(bad, WRITER, q, n, 1000), POLARSPLIT_ERR_POISONED);
    polarsplit_backend_fact fact;
    memset(&fact, 0, sizeof fact);
    fact.kind = POLARSPLIT_FACT_OTHER;
    fact.tag = 'D';
    CHECK_STATUS(polarsplit_session_recv_backend_fact(bad, WRITER, &fact, sizeof fact, 1000), POLARSPLIT_ERR_POISONED);
    CHECK_STATUS(polarsplit_session_recv_backend_fact(bad, WRITER, NULL, sizeof(polarsplit_backend_fact), 1000), POLARSPLIT_ERR_POISONED);
    for (uint32_t k = 0; k <= POLARSPLIT_EVENT_CONNECTION_LOST + 1; k++)
        CHECK_STATUS(polarsplit_session_on_backend_event(bad, WRITER, k, 0, 0, 1000), POLARSPLIT_ERR_POISONED);
    CHECK_STATUS(polarsplit_session_executing_conn(bad, &v), POLARSPLIT_ERR_POISONED);
    CHECK_STATUS(polarsplit_session_executing_conn(bad, NULL), POLARSPLIT_ERR_POISONED);
    CHECK_STATUS(polarsplit_session_backend_key(bad, &pid, secret, sizeof secret, &len), POLARSPLIT_ERR_POISONED);
    CHECK_STATUS(polarsplit_session_cancel_forwarded(bad, WRITER), POLARSPLIT_ERR_POISONED);
    CHECK_STATUS(polarsplit_session_next_deadline(bad, &v), POLARSPLIT_ERR_POISONED);
    CHECK_STATUS(polarsplit_session_on_timeout(bad, 1000), POLARSPLIT_ERR_POISONED);
    CHECK(polarsplit_session_is_poisoned(bad));

    /* The other session, and the engine they share, keep working. */
    CHECK(write_then_read(good) == 0);
    CHECK(!polarsplit_session_is_poisoned(good));
    CHECK_STATUS(polarsplit_engine_counter(e, 0, &v), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_add_reader(e, 3, 1), POLARSPLIT_OK);
    polarsplit_session *late = NULL;
    CHECK_STATUS(new_session(e, &late), POLARSPLIT_OK);
    CHECK(connect_session(late) == 0);

    /* A panic in every kind of session call poisons just that session. */
    polarsplit_session *victims[6];
    for (int i = 0; i < 6; i++) {
        victims[i] = NULL;
        CHECK_STATUS(polarsplit_session_new(e, NULL, 0, &victims[i]), POLARSPLIT_OK);
        CHECK_STATUS(polarsplit_session_test_panic_next(victims[i]), POLARSPLIT_OK);
    }
    CHECK_STATUS(polarsplit_session_recv_client(victims[0], STARTUP, sizeof STARTUP, 0, &consumed),
                 POLARSPLIT_ERR_PANIC);
    CHECK(consumed == 0);
    CHECK_STATUS(polarsplit_session_recv_backend(victims[1], WRITER, q, 0, 0), POLARSPLIT_ERR_PANIC);
    CHECK_STATUS(polarsplit_session_on_backend_event(victims[2], WRITER, POLARSPLIT_EVENT_WRITER_CONNECTED, 0, 0, 0),
                 POLARSPLIT_ERR_PANIC);
    CHECK_STATUS(polarsplit_session_poll_action(victims[3], &a, sizeof a), POLARSPLIT_ERR_PANIC);
    CHECK_STATUS(polarsplit_session_executing_conn(victims[4], &v), POLARSPLIT_ERR_PANIC);
    CHECK_STATUS(polarsplit_session_backend_key(victims[5], &pid, secret, sizeof secret, &len), POLARSPLIT_ERR_PANIC);
    for (int i = 0; i < 6; i++) {
        CHECK(polarsplit_session_is_poisoned(victims[i]));
        CHECK_STATUS(polarsplit_session_recv_client(victims[i], NULL, 0, 0, NULL), POLARSPLIT_ERR_POISONED);
    }
    CHECK(write_then_read(late) == 0);

    /* _free works on poisoned sessions (and releases everything: valgrind/ASan check). */
    polarsplit_session_free(bad);
    for (int i = 0; i < 6; i++) polarsplit_session_free(victims[i]);
    CHECK(write_then_read(good) == 0);
    polarsplit_session_free(good);
    polarsplit_session_free(late);
    polarsplit_engine_free(e);
#endif
    return 0;
}

/* The libpq-host input (backend facts) and the pool index: NULL pointers inside structs,
 * out-of-range kinds and enum values, lengths no array can have. */
int ctest_misuse_facts_and_pool(void) {
    polarsplit_engine *e = make_engine();
    CHECK(e != NULL);
    polarsplit_session *s = NULL;
    CHECK_STATUS(new_session(e, &s), POLARSPLIT_OK);
    CHECK(connect_session(s) == 0);
    polarsplit_backend_fact f;
    polarsplit_error_field field = {'S', (const uint8_t *)"ERROR", 5};

#define FACT_RESET() memset(&f, 0, sizeof f)
    /* Kinds. */
    const uint32_t bad_kinds[] = {0, 7, 100, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad_kinds / sizeof bad_kinds[0]; i++) {
        FACT_RESET();
        f.kind = bad_kinds[i];
        CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 0), POLARSPLIT_ERR_INVALID_ARGUMENT);
    }
    /* ReadyForQuery: status, LSN state and marker. */
    FACT_RESET();
    f.kind = POLARSPLIT_FACT_READY_FOR_QUERY;
    f.status = 'Q';
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 0), POLARSPLIT_ERR_INVALID_ARGUMENT);
    f.status = 'I';
    f.lsn_state = 3;
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 0), POLARSPLIT_ERR_INVALID_ARGUMENT);
    f.lsn_state = UINT32_MAX;
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 0), POLARSPLIT_ERR_INVALID_ARGUMENT);
    f.lsn_state = POLARSPLIT_LSN_MISSING;
    f.marker = 'q';
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 0), POLARSPLIT_ERR_INVALID_ARGUMENT);
    f.marker = 'x';
    f.xids = NULL;
    f.xids_len = 3;
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 0), POLARSPLIT_ERR_NULL);
    f.xids = (const uint8_t *)"1,2";
    f.xids_len = SIZE_MAX;
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 0), POLARSPLIT_ERR_INVALID_ARGUMENT);
    /* Text, value and field pointers. */
    FACT_RESET();
    f.kind = POLARSPLIT_FACT_COMMAND_COMPLETE;
    f.text_len = 4;
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 0), POLARSPLIT_ERR_NULL);
    f.text = (const uint8_t *)"SET";
    f.text_len = SIZE_MAX;
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 0), POLARSPLIT_ERR_INVALID_ARGUMENT);
    FACT_RESET();
    f.kind = POLARSPLIT_FACT_PARAMETER_STATUS;
    f.text = (const uint8_t *)"x";
    f.text_len = 1;
    f.value_len = 2;
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 0), POLARSPLIT_ERR_NULL);
    for (uint32_t k = POLARSPLIT_FACT_ERROR; k <= POLARSPLIT_FACT_NOTICE; k++) {
        FACT_RESET();
        f.kind = k;
        f.fields_len = 1;
        CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 0), POLARSPLIT_ERR_NULL);
        f.fields = &field;
        f.fields_len = SIZE_MAX;
        CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 0), POLARSPLIT_ERR_INVALID_ARGUMENT);
        f.fields_len = SIZE_MAX / sizeof field + 1;
        CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 0), POLARSPLIT_ERR_INVALID_ARGUMENT);
        polarsplit_error_field nullv = {'M', NULL, 3};
        f.fields = &nullv;
        f.fields_len = 1;
        CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 0), POLARSPLIT_ERR_NULL);
    }
    /* A fact from a connection the session does not use. */
    FACT_RESET();
    f.kind = POLARSPLIT_FACT_OTHER;
    f.tag = 'D';
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, 4242, &f, sizeof f, 0), POLARSPLIT_ERR_UNKNOWN_CONNECTION);
#undef FACT_RESET
    /* None of the refused facts changed anything: the session works on. */
    CHECK(drain(s, NULL, 0) == 0);
    CHECK(write_then_read(s) == 0);
    polarsplit_session_free(s);

    /* Engine: server versions take any number. */
    CHECK_STATUS(polarsplit_engine_set_server_version(e, UINT32_MAX, UINT32_MAX), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_set_server_version(e, 1, 0), POLARSPLIT_OK);

    /* Pool: enum-like values and impossible lengths; a config freed while the pool lives. */
    polarsplit_config_builder *b = polarsplit_config_builder_new();
    CHECK_STATUS(polarsplit_config_builder_set(b, "warmup", "both", NULL, 0), POLARSPLIT_OK);
    polarsplit_config *c = NULL;
    CHECK_STATUS(polarsplit_config_builder_build(b, &c, NULL, 0), POLARSPLIT_OK);
    polarsplit_pool *p = NULL;
    CHECK_STATUS(polarsplit_pool_new(c, 2, 4, &p), POLARSPLIT_OK);
    polarsplit_config_free(c);
    polarsplit_reader_key k;
    CHECK_STATUS(polarsplit_reader_key_build(1, "alice", "db", NULL, 0, NULL, NULL, 0, NULL, NULL, 0, &k),
                 POLARSPLIT_OK);
    polarsplit_pool_outcome o = 99;
    const polarsplit_demand_reason bad_reasons[] = {0, 3, -1, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof bad_reasons / sizeof bad_reasons[0]; i++)
        CHECK_STATUS(polarsplit_pool_demand(p, 1, &k, bad_reasons[i], &o), POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(polarsplit_pool_demand(p, 1, &k, POLARSPLIT_DEMAND_MISS, &o), POLARSPLIT_OK);
    CHECK(o == POLARSPLIT_POOL_OK);
    uint32_t preferred[1] = {1};
    polarsplit_checkout co;
    CHECK_STATUS(polarsplit_pool_checkout(p, &k, preferred, SIZE_MAX, false, &co), POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(polarsplit_pool_checkout(p, &k, preferred, SIZE_MAX / sizeof preferred[0] + 1, false, &co),
                 POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(polarsplit_pool_checkout(p, &k, preferred, 1, false, &co), POLARSPLIT_OK);
    CHECK(!co.found);
    uint64_t ids[2];
    size_t n = 99;
    CHECK_STATUS(polarsplit_pool_drain_closed(p, ids, SIZE_MAX, &n), POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(polarsplit_pool_drain_closed(p, ids, 2, &n), POLARSPLIT_OK);
    CHECK(n == 0);
    polarsplit_demand d[2];
    CHECK_STATUS(polarsplit_pool_drain(p, d, SIZE_MAX, &n), POLARSPLIT_OK); /* writes only what it has */
    CHECK(n == 1);
    /* Connection ids and reservations it never handed out. */
    bool close = false;
    CHECK_STATUS(polarsplit_pool_checkin(p, UINT64_MAX, false, &close), POLARSPLIT_ERR_UNKNOWN_CONNECTION);
    CHECK_STATUS(polarsplit_pool_cancel(p, UINT64_MAX), POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(polarsplit_pool_publish(p, UINT64_MAX, 1, 0, 1, true, &o), POLARSPLIT_OK);
    CHECK(o == POLARSPLIT_POOL_UNKNOWN_RESERVATION);
    /* Pointers the other pool tests leave out; optional outputs may be NULL. */
    polarsplit_pool_counts counts;
    CHECK_STATUS(polarsplit_pool_key_counts(NULL, &k, &counts), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_key_counts(p, NULL, &counts), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_key_counts(p, &k, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_server_counts(NULL, 1, &counts), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_server_counts(p, 1, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_read_stats(NULL, NULL, sizeof(polarsplit_pool_stats)), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_read_stats(p, NULL, sizeof(polarsplit_pool_stats)), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_mark_dirty(NULL, 1), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_mark_dirty(p, UINT64_MAX), POLARSPLIT_ERR_UNKNOWN_CONNECTION);
    uint64_t token = 7;
    CHECK_STATUS(polarsplit_pool_reserve(NULL, 1, &k, 0, &token, &o), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_reserve(p, 1, NULL, 0, &token, &o), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_reserve(p, 1, &k, 0, NULL, &o), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_pool_reserve(p, 1, &k, 0, &token, NULL), POLARSPLIT_ERR_NULL);
    CHECK(!polarsplit_reader_key_compatible(NULL, &k));
    CHECK(!polarsplit_reader_key_compatible(&k, NULL));
    CHECK(!polarsplit_reader_key_compatible(NULL, NULL));
    CHECK(polarsplit_reader_key_compatible(&k, &k));
    CHECK_STATUS(polarsplit_pool_remove_server(p, 12345, NULL), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_pool_invalidate_before(p, 0, NULL), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_pool_demand(p, 2, &k, POLARSPLIT_DEMAND_BEGIN, NULL), POLARSPLIT_OK);
    polarsplit_pool_free(p);
    polarsplit_engine_free(e);
    return 0;
}
