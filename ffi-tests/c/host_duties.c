/* What a host tells the library besides bytes and events, from C: the passing of time (SPEC
 * R-1b: polarsplit_session_next_deadline / _on_timeout), a cancel it forwarded (F-1:
 * polarsplit_session_cancel_forwarded), a pooled connection it closed itself (E-2:
 * polarsplit_engine_connection_closed), the writer's history (C-1/C-3:
 * polarsplit_engine_set_writer_identity), the faults of readers it saw itself and their
 * back-off (R-1a/R-1b: polarsplit_engine_reader_*), the counters as Prometheus text (S9:
 * polarsplit_engine_prometheus) and the writer's user functions (F-policy:
 * polarsplit_engine_set_function_catalog). Each test has a control that shows what the call
 * changes, and the misuse test gives every new function its NULLs and wrong states (the
 * sanitizer and valgrind runs of scripts/test-sanitizers.sh execute these same functions). */
#include <stdint.h>
#include <string.h>

#include "polarsplit.h"
#include "harness.h"

int ctest_r1b_deadline_after_a_reader_statement_and_timeout_retries_on_the_writer(void);
int ctest_f1_cancel_forwarded_to_a_reader_closes_it_instead_of_pooling(void);
int ctest_f1_cancel_unplaced_answers_57014_and_closes_the_late_connection(void);
int ctest_e2_connection_closed_forgets_what_the_connection_had_prepared(void);
int ctest_c1_writer_identity_names_the_token_history_and_bumps_the_generation(void);
int ctest_host_duties_misuse(void);
int ctest_r1b_reader_failures_back_off_then_hold_out_until_a_later_sample(void);
int ctest_r1b_session_reader_connect_failed_counts_and_reader_unavailable_does_not(void);
int ctest_r1a_fault_reports_clear_the_known_position_until_a_later_sample(void);
int ctest_s9_prometheus_text_with_size_query_and_truncation(void);
int ctest_f_policy_function_catalogue_routes_user_function_reads_per_database(void);
int ctest_host_faults_and_catalogue_misuse(void);
int ctest_s7_sequence_catalogue_keeps_sequence_reads_on_the_writer_per_database(void);
int ctest_s7_sequence_catalogue_misuse(void);
int ctest_s6_object_catalogue_judges_hidden_code_per_database(void);
int ctest_s6_object_catalogue_misuse(void);

#define WRITER 100u
#define READER 201u
#define TIMEOUT_MS 6000u /* above split_wait_timeout_ms, as the configuration requires */

/* StartupMessage user=app database=db (30 bytes). */
static const uint8_t STARTUP[] = {0,   0,   0,   30,  0,   3,   0,   0,   'u', 's', 'e', 'r', 0,   'a', 'p',
                                  'p', 0,   'd', 'a', 't', 'a', 'b', 'a', 's', 'e', 0,   'd', 'b', 0,   0};

typedef struct {
    uint8_t data[8192];
    size_t len;
} bytes_t;

static void put(bytes_t *b, const void *p, size_t n) {
    if (b->len + n <= sizeof b->data) {
        memcpy(b->data + b->len, p, n);
        b->len += n;
    }
}

static int take(bytes_t *src, bytes_t *dst, size_t n) {
    if (n > src->len) return -1;
    if (dst) put(dst, src->data, n);
    memmove(src->data, src->data + n, src->len - n);
    src->len -= n;
    return 0;
}

static int has(const bytes_t *b, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= b->len; i++)
        if (memcmp(b->data + i, s, n) == 0) return 1;
    return 0;
}

/* Whether a stream of messages holds one with tag `t`. */
static int has_tag(const bytes_t *b, char t) {
    size_t pos = 0;
    while (pos + 5 <= b->len) {
        uint32_t len = ((uint32_t)b->data[pos + 1] << 24) | ((uint32_t)b->data[pos + 2] << 16) |
                       ((uint32_t)b->data[pos + 3] << 8) | b->data[pos + 4];
        if ((char)b->data[pos] == t) return 1;
        pos += 1 + len;
    }
    return 0;
}

/* A host over in-memory streams for one writer and one reader connection. */
typedef struct {
    bytes_t client_pending, to_client;
    bytes_t pending[2], sent[2]; /* [0] the writer, [1] the reader */
    int acquired, released, reader_closed;
    uint32_t server;
    polarsplit_reason reason; /* of the last DECISION */
} host_t;

static int idx(uint64_t conn) { return conn == WRITER ? 0 : 1; }

static int drain(polarsplit_session *s, host_t *h) {
    polarsplit_action a;
    int st;
    while ((st = polarsplit_session_poll_action(s, &a, sizeof a)) == POLARSPLIT_OK) {
        switch (a.kind) {
        case POLARSPLIT_ACTION_ACQUIRE_READER:
            h->acquired = 1;
            h->server = a.acquire_reader.server;
            break;
        case POLARSPLIT_ACTION_DECISION: h->reason = a.decision.reason; break;
        case POLARSPLIT_ACTION_FORWARD_CLIENT:
            CHECK(take(&h->client_pending, &h->sent[idx(a.forward_client.conn)], a.forward_client.n) == 0);
            break;
        case POLARSPLIT_ACTION_DISCARD_CLIENT: CHECK(take(&h->client_pending, NULL, a.discard_client.n) == 0); break;
        case POLARSPLIT_ACTION_SEND_BACKEND:
            put(&h->sent[idx(a.send_backend.conn)], a.send_backend.bytes.ptr, a.send_backend.bytes.len);
            break;
        case POLARSPLIT_ACTION_FORWARD_BACKEND:
            CHECK(take(&h->pending[idx(a.forward_backend.conn)], &h->to_client, a.forward_backend.n) == 0);
            break;
        case POLARSPLIT_ACTION_DISCARD_BACKEND:
            CHECK(take(&h->pending[idx(a.discard_backend.conn)], NULL, a.discard_backend.n) == 0);
            break;
        case POLARSPLIT_ACTION_SEND_CLIENT: put(&h->to_client, a.send_client.bytes.ptr, a.send_client.bytes.len); break;
        case POLARSPLIT_ACTION_RELEASE_READER:
            CHECK(a.release_reader.conn == READER);
            h->released = 1;
            break;
        case POLARSPLIT_ACTION_CLOSE_BACKEND:
            if (a.close_backend.conn == READER) h->reader_closed = 1;
            break;
        default: break;
        }
    }
    CHECK_STATUS(st, POLARSPLIT_DONE);
    return 0;
}

static int client(polarsplit_session *s, host_t *h, const uint8_t *b, size_t n, uint64_t now) {
    size_t consumed = 0;
    CHECK_STATUS(polarsplit_session_recv_client(s, b, n, now, &consumed), POLARSPLIT_OK);
    CHECK(consumed == n);
    put(&h->client_pending, b, n);
    return drain(s, h);
}

static int backend(polarsplit_session *s, host_t *h, uint64_t conn, const uint8_t *b, size_t n, uint64_t now) {
    CHECK_STATUS(polarsplit_session_recv_backend(s, conn, b, n, now), POLARSPLIT_OK);
    put(&h->pending[idx(conn)], b, n);
    return drain(s, h);
}

static polarsplit_engine *engine_with(const char *name, const char *value) {
    polarsplit_config_builder *b = polarsplit_config_builder_new();
    polarsplit_config *c = NULL;
    polarsplit_engine *e = NULL;
    if (b == NULL) return NULL;
    if (name && polarsplit_config_builder_set(b, name, value, NULL, 0) != POLARSPLIT_OK) {
        polarsplit_config_builder_free(b);
        return NULL;
    }
    if (polarsplit_config_builder_build(b, &c, NULL, 0) != POLARSPLIT_OK) return NULL;
    if (polarsplit_engine_new(c, &e) != POLARSPLIT_OK) e = NULL;
    polarsplit_config_free(c);
    if (e) polarsplit_engine_add_reader(e, 1, 1);
    return e;
}

static int new_session(polarsplit_engine *e, polarsplit_session **out) {
    polarsplit_client_info info = {"10.0.0.7", 40000, "127.0.0.1", 6432, -1};
    return polarsplit_session_new(e, &info, sizeof info, out);
}

/* Startup, writer connected, trust auth, BackendKeyData, first RFQ. */
static int login(polarsplit_session *s, host_t *h, uint64_t now) {
    CHECK(client(s, h, STARTUP, sizeof STARTUP, now) == 0);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, WRITER, POLARSPLIT_EVENT_WRITER_CONNECTED, 0, 0, now),
                 POLARSPLIT_OK);
    CHECK(drain(s, h) == 0);
    uint8_t b[64];
    size_t n = 0;
    int32_t zero = 0;
    uint8_t key[8] = {0, 0, 0, 7, 0, 0, 0, 8};
    n += wire_msg(b + n, 'R', &zero, 4);
    n += wire_msg(b + n, 'K', key, 8);
    n += wire_rfq(b + n, 'I', 0x1000);
    CHECK(backend(s, h, WRITER, b, n, now) == 0);
    /* SPEC S-5: the writer answers the capture that follows its startup RFQ; what the writer
     * was sent since the startup is that capture. */
    CHECK(has(&h->sent[0], "polarsplit_capture"));
    h->sent[0].len = 0;
    uint8_t cap[160];
    n = wire_startup_capture_answer(cap);
    CHECK(backend(s, h, WRITER, cap, n, now) == 0);
    h->to_client.len = 0;
    return 0;
}

/* A write acknowledged at `lsn` on the writer. */
static int write_at(polarsplit_session *s, host_t *h, uint64_t lsn, uint64_t now) {
    uint8_t b[128];
    size_t n = wire_query(b, "INSERT INTO t VALUES (1)");
    CHECK(client(s, h, b, n, now) == 0);
    n = wire_command_complete(b, "INSERT 0 1");
    n += wire_rfq(b + n, 'I', lsn);
    CHECK(backend(s, h, WRITER, b, n, now) == 0);
    h->to_client.len = 0;
    return 0;
}

/* SPEC S-5: a fresh reader connection is first sent the settings replay (the role, then the login
 * check): answered as a reader whose login matches the writer's, one completion per statement. */
static int answer_replay(polarsplit_session *s, host_t *h, uint64_t now) {
    CHECK(has(&h->sent[1], "polarsplit: the reader connection has"));
    const char *set = "SELECT pg_catalog.set_config(";
    size_t statements = 0, k = strlen(set);
    for (size_t i = 0; i + k <= h->sent[1].len; i++)
        if (memcmp(h->sent[1].data + i, set, k) == 0) statements++;
    CHECK(statements >= 1);
    h->sent[1].len = 0;
    uint8_t b[512];
    size_t n = 0;
    for (size_t i = 0; i < statements && n + 64 < sizeof b; i++) n += wire_command_complete(b + n, "SELECT 1");
    n += wire_command_complete(b + n, "SELECT 0");
    n += wire_rfq(b + n, 'I', 0x1000);
    return backend(s, h, READER, b, n, now);
}

/* A read the session sends to a reader: asks for one, gets READER attached (fresh or pooled). */
static int read_to_reader(polarsplit_session *s, host_t *h, const uint8_t *msg, size_t n, int fresh, uint64_t now) {
    h->acquired = 0;
    CHECK(client(s, h, msg, n, now) == 0);
    CHECK(h->acquired);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, READER, POLARSPLIT_EVENT_READER_ATTACHED, h->server,
                                                     fresh ? POLARSPLIT_EVENT_FLAG_FRESH : 0, now),
                 POLARSPLIT_OK);
    CHECK(drain(s, h) == 0);
    if (fresh) CHECK(answer_replay(s, h, now) == 0);
    CHECK(h->sent[1].len > 0);
    return 0;
}

/* A reader's answer to a simple Query with no hidden statements: one row, then RFQ. */
static int reader_answers(polarsplit_session *s, host_t *h, uint64_t now) {
    uint8_t b[128];
    size_t n = 0;
    uint8_t row[] = {0, 1, 0, 0, 0, 1, '1'};
    n += wire_msg(b + n, 'D', row, sizeof row);
    n += wire_command_complete(b + n, "SELECT 1");
    n += wire_rfq(b + n, 'I', 0x1000);
    return backend(s, h, READER, b, n, now);
}

static int counter(polarsplit_engine *e, const char *name, uint64_t *v) {
    for (uint32_t i = 0; i < polarsplit_counter_count(); i++)
        if (strcmp(polarsplit_counter_name(i), name) == 0) return polarsplit_engine_counter(e, i, v);
    return POLARSPLIT_ERR_INVALID_ARGUMENT;
}

int ctest_r1b_deadline_after_a_reader_statement_and_timeout_retries_on_the_writer(void) {
    static host_t h;
    memset(&h, 0, sizeof h);
    polarsplit_engine *e = engine_with("reader_response_timeout_ms", "6000");
    CHECK(e != NULL);
    polarsplit_session *s = NULL;
    CHECK_STATUS(new_session(e, &s), POLARSPLIT_OK);
    uint64_t at = 0;
    CHECK_STATUS(polarsplit_session_next_deadline(s, &at), POLARSPLIT_DONE);
    CHECK(at == UINT64_MAX);
    CHECK(login(s, &h, 1000) == 0);
    /* A statement on the writer has no deadline: the engine never times out the writer. */
    uint8_t q[64];
    size_t n = wire_query(q, "INSERT INTO t VALUES (1)");
    CHECK(client(s, &h, q, n, 1000) == 0);
    CHECK_STATUS(polarsplit_session_next_deadline(s, &at), POLARSPLIT_DONE);
    CHECK_STATUS(polarsplit_session_on_timeout(s, 1000 + 2 * TIMEOUT_MS), POLARSPLIT_OK);
    polarsplit_action a;
    CHECK_STATUS(polarsplit_session_poll_action(s, &a, sizeof a), POLARSPLIT_DONE);
    n = wire_command_complete(q, "INSERT 0 1");
    n += wire_rfq(q + n, 'I', 0x2000);
    CHECK(backend(s, &h, WRITER, q, n, 1000 + 2 * TIMEOUT_MS) == 0);
    CHECK(has_tag(&h.to_client, 'C') && has_tag(&h.to_client, 'Z'));
    h.to_client.len = 0;
    h.sent[0].len = 0;

    /* A read sent to the reader at 60000 (the monitor saw it replay the write: no wait): its
     * deadline is reader_response_timeout_ms later. */
    CHECK_STATUS(polarsplit_engine_reader_sample(e, 1, 0x3000, 60000), POLARSPLIT_OK);
    n = wire_query(q, "SELECT 1");
    CHECK(read_to_reader(s, &h, q, n, 1, 60000) == 0);
    CHECK_STATUS(polarsplit_session_next_deadline(s, &at), POLARSPLIT_OK);
    CHECK(at == 60000 + TIMEOUT_MS);
    /* Early: nothing is due, nothing happens, the deadline stands. */
    CHECK_STATUS(polarsplit_session_on_timeout(s, at - 1), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_session_poll_action(s, &a, sizeof a), POLARSPLIT_DONE);
    CHECK_STATUS(polarsplit_session_next_deadline(s, &at), POLARSPLIT_OK);
    CHECK(at == 60000 + TIMEOUT_MS);
    CHECK(!h.reader_closed && h.sent[0].len == 0);

    /* Due: the reader is treated as lost — closed — and the read re-runs on the writer. */
    CHECK_STATUS(polarsplit_session_on_timeout(s, at), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_session_on_timeout(s, at), POLARSPLIT_ERR_BAD_STATE); /* drain first */
    CHECK(drain(s, &h) == 0);
    CHECK(h.reader_closed);
    CHECK(has(&h.sent[0], "SELECT 1"));
    CHECK_STATUS(polarsplit_session_next_deadline(s, &at), POLARSPLIT_DONE);
    uint64_t v = 0;
    CHECK_STATUS(counter(e, "reader_deadlines", &v), POLARSPLIT_OK);
    CHECK(v == 1);
    uint8_t b[128];
    uint8_t row[] = {0, 1, 0, 0, 0, 1, '1'};
    n = wire_msg(b, 'D', row, sizeof row);
    n += wire_command_complete(b + n, "SELECT 1");
    n += wire_rfq(b + n, 'I', 0x2000);
    CHECK(backend(s, &h, WRITER, b, n, at + 1) == 0);
    CHECK(has_tag(&h.to_client, 'D') && has_tag(&h.to_client, 'Z'));
    CHECK(h.pending[0].len == 0 && h.client_pending.len == 0);

    /* A reader that answers in time: the deadline goes with its answer. */
    h.reader_closed = h.released = 0;
    h.sent[1].len = 0;
    CHECK_STATUS(polarsplit_engine_reader_sample(e, 1, 0x3000, 70000), POLARSPLIT_OK);
    CHECK(read_to_reader(s, &h, q, wire_query(q, "SELECT 1"), 1, 70000) == 0);
    CHECK_STATUS(polarsplit_session_next_deadline(s, &at), POLARSPLIT_OK);
    CHECK(at == 70000 + TIMEOUT_MS);
    CHECK(reader_answers(s, &h, 70000 + TIMEOUT_MS - 1) == 0);
    CHECK(h.released && !h.reader_closed);
    CHECK_STATUS(polarsplit_session_next_deadline(s, &at), POLARSPLIT_DONE);
    CHECK(at == UINT64_MAX);
    CHECK_STATUS(polarsplit_session_on_timeout(s, 70000 + 100 * TIMEOUT_MS), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_session_poll_action(s, &a, sizeof a), POLARSPLIT_DONE);
    CHECK_STATUS(counter(e, "reader_deadlines", &v), POLARSPLIT_OK);
    CHECK(v == 1);

    /* reader_response_timeout_ms = 0: no deadline at all. */
    polarsplit_engine *e0 = engine_with("reader_response_timeout_ms", "0");
    CHECK(e0 != NULL);
    polarsplit_session *s0 = NULL;
    static host_t h0;
    memset(&h0, 0, sizeof h0);
    CHECK_STATUS(new_session(e0, &s0), POLARSPLIT_OK);
    CHECK(login(s0, &h0, 1000) == 0);
    CHECK(read_to_reader(s0, &h0, q, wire_query(q, "SELECT 1"), 1, 1000) == 0);
    CHECK_STATUS(polarsplit_session_next_deadline(s0, &at), POLARSPLIT_DONE);
    polarsplit_session_free(s0);
    polarsplit_engine_free(e0);

    polarsplit_session_free(s);
    polarsplit_engine_free(e);
    return 0;
}

/* One client's read on the reader, with or without a cancel forwarded to it meanwhile. */
static int read_with_cancel(int cancel, int *closed, int *released, uint64_t *closed_count) {
    static host_t h;
    memset(&h, 0, sizeof h);
    polarsplit_engine *e = engine_with(NULL, NULL);
    CHECK(e != NULL);
    polarsplit_session *s = NULL;
    CHECK_STATUS(new_session(e, &s), POLARSPLIT_OK);
    CHECK(login(s, &h, 1000) == 0);
    uint8_t q[64];
    CHECK(read_to_reader(s, &h, q, wire_query(q, "SELECT 1"), 1, 1000) == 0);
    uint64_t conn = 0;
    CHECK_STATUS(polarsplit_session_executing_conn(s, &conn), POLARSPLIT_OK);
    CHECK(conn == READER);
    if (cancel) {
        /* The host sends the cancel to the reader's server, then says so. A cancel forwarded to
         * the writer or to a connection the session does not use changes nothing. */
        CHECK_STATUS(polarsplit_session_cancel_forwarded(s, WRITER), POLARSPLIT_OK);
        CHECK_STATUS(polarsplit_session_cancel_forwarded(s, 999), POLARSPLIT_OK);
        CHECK_STATUS(polarsplit_session_cancel_forwarded(s, conn), POLARSPLIT_OK);
        polarsplit_action a;
        CHECK_STATUS(polarsplit_session_poll_action(s, &a, sizeof a), POLARSPLIT_DONE); /* no action queued */
    }
    CHECK(reader_answers(s, &h, 1001) == 0);
    CHECK(has_tag(&h.to_client, 'D') && has_tag(&h.to_client, 'Z'));
    *closed = h.reader_closed;
    *released = h.released;
    CHECK_STATUS(counter(e, "cancelled_readers_closed", closed_count), POLARSPLIT_OK);
    polarsplit_session_free(s);
    polarsplit_engine_free(e);
    return 0;
}

int ctest_f1_cancel_forwarded_to_a_reader_closes_it_instead_of_pooling(void) {
    int closed = 0, released = 0;
    uint64_t n = 0;
    /* Control: without a cancel the reader goes back to the pool. */
    CHECK(read_with_cancel(0, &closed, &released, &n) == 0);
    CHECK(released && !closed && n == 0);
    /* With a cancel forwarded to it, it is closed: no other session may get it. */
    CHECK(read_with_cancel(1, &closed, &released, &n) == 0);
    CHECK(closed && !released && n == 1);
    return 0;
}

int ctest_f1_cancel_unplaced_answers_57014_and_closes_the_late_connection(void) {
    static host_t h;
    memset(&h, 0, sizeof h);
    polarsplit_engine *e = engine_with(NULL, NULL);
    CHECK(e != NULL);
    polarsplit_session *s = NULL;
    CHECK_STATUS(new_session(e, &s), POLARSPLIT_OK);
    CHECK(login(s, &h, 1000) == 0);
    CHECK_STATUS(polarsplit_session_cancel_unplaced(NULL, 1000), POLARSPLIT_ERR_NULL);
    /* Nothing waits for a reader connection: nothing to cancel this way. */
    CHECK_STATUS(polarsplit_session_cancel_unplaced(s, 1000), POLARSPLIT_DONE);
    uint8_t q[64];
    h.acquired = 0;
    CHECK(client(s, &h, q, wire_query(q, "SELECT pg_sleep(3)"), 1000) == 0);
    CHECK(h.acquired);
    uint64_t conn = 0;
    CHECK_STATUS(polarsplit_session_executing_conn(s, &conn), POLARSPLIT_DONE);
    /* The cancel: answered at once, as a server answers a cancelled statement. */
    CHECK_STATUS(polarsplit_session_cancel_unplaced(s, 1300), POLARSPLIT_OK);
    CHECK(drain(s, &h) == 0);
    CHECK(has(&h.to_client, "57014") && has_tag(&h.to_client, 'E') && has_tag(&h.to_client, 'Z'));
    /* The connection asked for arrives late: closed unused, nothing sent on it or the writer. */
    CHECK_STATUS(polarsplit_session_on_backend_event(s, READER, POLARSPLIT_EVENT_READER_ATTACHED, h.server, 0, 2000),
                 POLARSPLIT_OK);
    CHECK(drain(s, &h) == 0);
    CHECK(h.reader_closed && !h.released);
    CHECK(h.sent[1].len == 0 && h.sent[0].len == 0);
    polarsplit_session_free(s);
    polarsplit_engine_free(e);
    return 0;
}

/* An extended-protocol read of the unnamed statement: Parse, Bind, Execute, Sync. */
static size_t extended_read(uint8_t *out) {
    size_t n = 0;
    const char parse[] = "\0SELECT 1\0\0"; /* name "", text, 0 parameter types */
    n += wire_msg(out + n, 'P', parse, sizeof parse);
    const char bind[] = "\0\0\0\0\0\0\0"; /* portal "", statement "", no formats/params/results */
    n += wire_msg(out + n, 'B', bind, sizeof bind - 1);
    const char exec[] = "\0\0\0\0"; /* portal "", no row limit */
    n += wire_msg(out + n, 'E', exec, sizeof exec);
    n += wire_msg(out + n, 'S', NULL, 0);
    return n;
}

/* The reader's answer: CloseComplete when the engine closed its name first (a connection whose
 * statements it does not know), ParseComplete when it prepared the statement. */
static int extended_answer(polarsplit_session *s, host_t *h, int close_complete, int parse_complete) {
    uint8_t b[128];
    size_t n = 0;
    if (close_complete) n += wire_msg(b + n, '3', NULL, 0);
    if (parse_complete) n += wire_msg(b + n, '1', NULL, 0);
    n += wire_msg(b + n, '2', NULL, 0);
    uint8_t row[] = {0, 1, 0, 0, 0, 1, '1'};
    n += wire_msg(b + n, 'D', row, sizeof row);
    n += wire_command_complete(b + n, "SELECT 1");
    n += wire_rfq(b + n, 'I', 0x1000);
    return backend(s, h, READER, b, n, 1000);
}

/* A second session gets the pooled READER: returns whether the engine prepared the statement on
 * it again (a Parse sent to READER). */
static int second_session_parses(polarsplit_engine *e, int *parsed) {
    static host_t h;
    memset(&h, 0, sizeof h);
    polarsplit_session *s = NULL;
    CHECK_STATUS(new_session(e, &s), POLARSPLIT_OK);
    CHECK(login(s, &h, 1000) == 0);
    uint8_t b[128];
    CHECK(read_to_reader(s, &h, b, extended_read(b), 0, 1000) == 0);
    *parsed = has_tag(&h.sent[1], 'P');
    CHECK(extended_answer(s, &h, has_tag(&h.sent[1], 'C'), *parsed) == 0);
    CHECK(has_tag(&h.to_client, '1') && has_tag(&h.to_client, 'D') && has_tag(&h.to_client, 'Z'));
    CHECK(h.pending[1].len == 0 && h.client_pending.len == 0);
    polarsplit_session_free(s);
    return 0;
}

int ctest_e2_connection_closed_forgets_what_the_connection_had_prepared(void) {
    for (int report = 0; report < 2; report++) {
        static host_t h;
        memset(&h, 0, sizeof h);
        polarsplit_engine *e = engine_with(NULL, NULL);
        CHECK(e != NULL);
        polarsplit_session *s = NULL;
        CHECK_STATUS(new_session(e, &s), POLARSPLIT_OK);
        CHECK(login(s, &h, 1000) == 0);
        uint8_t b[128];
        CHECK(read_to_reader(s, &h, b, extended_read(b), 1, 1000) == 0);
        CHECK(has_tag(&h.sent[1], 'P')); /* prepared on the fresh connection under the engine's name */
        CHECK(extended_answer(s, &h, 0, 1) == 0);
        CHECK(h.released);
        polarsplit_session_free(s);
        /* The host closes the pooled connection itself and opens another under the same id. */
        if (report) CHECK_STATUS(polarsplit_engine_connection_closed(e, READER), POLARSPLIT_OK);
        int parsed = -1;
        CHECK(second_session_parses(e, &parsed) == 0);
        /* Unreported, the engine trusts the statement is still prepared there (control);
         * reported, it prepares it again. */
        CHECK(parsed == report);
        CHECK_STATUS(polarsplit_engine_connection_closed(e, 123456), POLARSPLIT_OK); /* unknown: harmless */
        polarsplit_engine_free(e);
    }
    return 0;
}

/* The token SHOW polarsplit.causal_token answers in a session after a write at 0/2000. */
static int token_after_write(polarsplit_engine *e, const char *want) {
    static host_t h;
    memset(&h, 0, sizeof h);
    polarsplit_session *s = NULL;
    CHECK_STATUS(new_session(e, &s), POLARSPLIT_OK);
    CHECK(login(s, &h, 1000) == 0);
    CHECK(write_at(s, &h, 0x2000, 1000) == 0);
    uint8_t q[64];
    CHECK(client(s, &h, q, wire_query(q, "SHOW polarsplit.causal_token"), 1000) == 0);
    CHECK(h.sent[0].len == wire_query(q, "INSERT INTO t VALUES (1)")); /* the SHOW reached no server */
    CHECK(has_tag(&h.to_client, 'T') && has_tag(&h.to_client, 'D') && has_tag(&h.to_client, 'Z'));
    CHECK(has(&h.to_client, want));
    polarsplit_session_free(s);
    return 0;
}

int ctest_c1_writer_identity_names_the_token_history_and_bumps_the_generation(void) {
    polarsplit_engine *e = engine_with(NULL, NULL);
    CHECK(e != NULL);
    /* No identity reported: history 0.0, valid only where the same writer is seen. */
    CHECK(token_after_write(e, "ps1:0.0:0/2000") == 0);
    uint64_t g = 0;
    CHECK_STATUS(polarsplit_engine_set_writer_identity(e, 0, 7301234567890123456ull, 1, &g), POLARSPLIT_OK);
    CHECK(g == 1); /* the first identity is not a change of history */
    CHECK(token_after_write(e, "ps1:7301234567890123456.1:0/2000") == 0);
    CHECK_STATUS(polarsplit_engine_set_writer_identity(e, 0, 7301234567890123456ull, 1, &g), POLARSPLIT_OK);
    CHECK(g == 1); /* the same again: no change */
    /* A promotion: the timeline moved on, a new history, a new generation. */
    CHECK_STATUS(polarsplit_engine_set_writer_identity(e, 0, 7301234567890123456ull, 2, &g), POLARSPLIT_OK);
    CHECK(g == 2);
    CHECK(token_after_write(e, "ps1:7301234567890123456.2:0/2000") == 0);
    /* Another cluster behind the same hostgroup: likewise. */
    CHECK_STATUS(polarsplit_engine_set_writer_identity(e, 0, 42, 2, NULL), POLARSPLIT_OK);
    uint64_t g2 = 0;
    CHECK_STATUS(polarsplit_engine_writer_changed(e, 0, &g2), POLARSPLIT_OK);
    CHECK(g2 == 4);
    /* Another writer hostgroup has its own identity and generation. */
    CHECK_STATUS(polarsplit_engine_set_writer_identity(e, 9, 42, 1, &g), POLARSPLIT_OK);
    CHECK(g == 1);
    CHECK_STATUS(polarsplit_engine_set_writer_identity(e, UINT32_MAX, UINT64_MAX, UINT32_MAX, &g), POLARSPLIT_OK);
    polarsplit_engine_free(e);
    return 0;
}

int ctest_host_duties_misuse(void) {
    uint64_t at = 7, g = 7;
    polarsplit_engine *e = engine_with(NULL, NULL);
    CHECK(e != NULL);
    polarsplit_session *s = NULL;
    CHECK_STATUS(new_session(e, &s), POLARSPLIT_OK);

    /* NULL handles and outputs. */
    CHECK_STATUS(polarsplit_session_next_deadline(NULL, &at), POLARSPLIT_ERR_NULL);
    CHECK(at == 7);
    CHECK_STATUS(polarsplit_session_next_deadline(s, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_next_deadline(NULL, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_on_timeout(NULL, 0), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_cancel_forwarded(NULL, WRITER), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_connection_closed(NULL, READER), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_writer_identity(NULL, 0, 1, 1, &g), POLARSPLIT_ERR_NULL);
    CHECK(g == 7);
    CHECK_STATUS(polarsplit_engine_set_writer_identity(NULL, 0, 1, 1, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_writer_identity(e, 0, 1, 1, NULL), POLARSPLIT_OK); /* NULL allowed */

    /* Any time, also extremes and before the startup: nothing due, no actions. */
    CHECK_STATUS(polarsplit_session_on_timeout(s, 0), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_session_on_timeout(s, UINT64_MAX), POLARSPLIT_OK);
    polarsplit_action a;
    CHECK_STATUS(polarsplit_session_poll_action(s, &a, sizeof a), POLARSPLIT_DONE);
    CHECK_STATUS(polarsplit_session_cancel_forwarded(s, UINT64_MAX), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_connection_closed(e, UINT64_MAX), POLARSPLIT_OK);

    /* Actions pending: on_timeout is an input (refused, changes nothing); the others are not. */
    size_t consumed = 0;
    CHECK_STATUS(polarsplit_session_recv_client(s, STARTUP, sizeof STARTUP, 1000, &consumed), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_session_on_timeout(s, 2000), POLARSPLIT_ERR_BAD_STATE);
    char err[128];
    CHECK(polarsplit_session_last_error(s, err, sizeof err) > 0 && strstr(err, "pending") != NULL);
    CHECK_STATUS(polarsplit_session_next_deadline(s, &at), POLARSPLIT_DONE);
    CHECK_STATUS(polarsplit_session_cancel_forwarded(s, WRITER), POLARSPLIT_OK);
    int n = 0, st;
    while ((st = polarsplit_session_poll_action(s, &a, sizeof a)) == POLARSPLIT_OK) n++;
    CHECK_STATUS(st, POLARSPLIT_DONE);
    CHECK(n >= 2); /* the startup's actions, none lost or added by the refused input */

    /* A closed session: on_timeout is CLOSED; the queries still answer. */
    uint8_t x[8];
    size_t xn = wire_msg(x, 'X', NULL, 0);
    polarsplit_session *c = NULL;
    static host_t h;
    memset(&h, 0, sizeof h);
    CHECK_STATUS(new_session(e, &c), POLARSPLIT_OK);
    CHECK(login(c, &h, 1000) == 0);
    CHECK(client(c, &h, x, xn, 1000) == 0);
    CHECK_STATUS(polarsplit_session_on_timeout(c, 5000), POLARSPLIT_ERR_CLOSED);
    CHECK_STATUS(polarsplit_session_next_deadline(c, &at), POLARSPLIT_DONE);
    CHECK_STATUS(polarsplit_session_cancel_forwarded(c, WRITER), POLARSPLIT_OK);
    polarsplit_session_free(c);

#if defined(POLARSPLIT_TEST_HOOKS)
    /* A panic in each new session call poisons that session; afterwards every one is POISONED. */
    polarsplit_session *v[3];
    for (int i = 0; i < 3; i++) {
        v[i] = NULL;
        CHECK_STATUS(new_session(e, &v[i]), POLARSPLIT_OK);
        CHECK_STATUS(polarsplit_session_test_panic_next(v[i]), POLARSPLIT_OK);
    }
    CHECK_STATUS(polarsplit_session_next_deadline(v[0], &at), POLARSPLIT_ERR_PANIC);
    CHECK_STATUS(polarsplit_session_on_timeout(v[1], 1), POLARSPLIT_ERR_PANIC);
    CHECK_STATUS(polarsplit_session_cancel_forwarded(v[2], WRITER), POLARSPLIT_ERR_PANIC);
    for (int i = 0; i < 3; i++) {
        CHECK(polarsplit_session_is_poisoned(v[i]));
        CHECK_STATUS(polarsplit_session_next_deadline(v[i], &at), POLARSPLIT_ERR_POISONED);
        CHECK_STATUS(polarsplit_session_next_deadline(v[i], NULL), POLARSPLIT_ERR_POISONED);
        CHECK_STATUS(polarsplit_session_on_timeout(v[i], 1), POLARSPLIT_ERR_POISONED);
        CHECK_STATUS(polarsplit_session_cancel_forwarded(v[i], WRITER), POLARSPLIT_ERR_POISONED);
        polarsplit_session_free(v[i]);
    }
#endif
    polarsplit_session_free(s);
    polarsplit_engine_free(e);
    return 0;
}

/* --- Reader faults the host saw itself, and their back-off (SPEC R-1a, R-1b) ----------------- */

static uint64_t count(polarsplit_engine *e, const char *name) {
    uint64_t v = UINT64_MAX;
    if (counter(e, name, &v) != POLARSPLIT_OK) return UINT64_MAX;
    return v;
}

int ctest_r1b_reader_failures_back_off_then_hold_out_until_a_later_sample(void) {
    polarsplit_engine *e = engine_with(NULL, NULL); /* reader_failure_threshold 3 (default) */
    CHECK(e != NULL);
    uint64_t at = 7;
    bool held = true;
    /* Control: a reader that never failed may be connected to any time and is not held out. */
    CHECK_STATUS(polarsplit_engine_reader_retry_after(e, 1, &at), POLARSPLIT_DONE);
    CHECK(at == 7);
    CHECK_STATUS(polarsplit_engine_reader_held_out(e, 1, &held), POLARSPLIT_OK);
    CHECK(!held);

    /* Each consecutive failure doubles the back-off from 200 ms; the third holds it out. */
    CHECK_STATUS(polarsplit_engine_reader_connect_failed(e, 1, 1000, false), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_reader_retry_after(e, 1, &at), POLARSPLIT_OK);
    CHECK(at == 1200);
    CHECK_STATUS(polarsplit_engine_reader_held_out(e, 1, &held), POLARSPLIT_OK);
    CHECK(!held);
    CHECK_STATUS(polarsplit_engine_reader_lost(e, 1, 1300), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_reader_retry_after(e, 1, &at), POLARSPLIT_OK);
    CHECK(at == 1700);
    CHECK_STATUS(polarsplit_engine_reader_monitor_failed(e, 1, 1800), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_reader_retry_after(e, 1, &at), POLARSPLIT_OK);
    CHECK(at == 2600);
    CHECK_STATUS(polarsplit_engine_reader_held_out(e, 1, &held), POLARSPLIT_OK);
    CHECK(held);
    CHECK(count(e, "reader_failures") == 3 && count(e, "readers_held_out") == 1);
    CHECK(count(e, "reader_connect_failures") == 1 && count(e, "monitor_failures") == 1);
    CHECK(count(e, "reader_starting_up") == 0);
    /* The back-off is capped at 3.2 s; a 57P03 refusal counts as one too. */
    for (uint64_t t = 2000; t < 2010; t++) CHECK_STATUS(polarsplit_engine_reader_connect_failed(e, 1, t, true), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_reader_retry_after(e, 1, &at), POLARSPLIT_OK);
    CHECK(at == 2009 + 3200);
    CHECK(count(e, "reader_starting_up") == 10);

    /* A sample whose query was sent before the latest failure proves nothing: still held out. */
    CHECK_STATUS(polarsplit_engine_reader_sample(e, 1, 0x5000, 2005), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_reader_held_out(e, 1, &held), POLARSPLIT_OK);
    CHECK(held);
    /* One sent after it lets the reader back in and lifts the back-off. */
    CHECK_STATUS(polarsplit_engine_reader_sample(e, 1, 0x5000, 2010), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_reader_held_out(e, 1, &held), POLARSPLIT_OK);
    CHECK(!held);
    at = 7;
    CHECK_STATUS(polarsplit_engine_reader_retry_after(e, 1, &at), POLARSPLIT_DONE);
    CHECK(at == 7);
    CHECK(count(e, "readers_back_in") == 1);

    /* reader_outage is an outage, not a failure: no back-off. */
    CHECK_STATUS(polarsplit_engine_reader_outage(e, 1, 3000), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_reader_retry_after(e, 1, &at), POLARSPLIT_DONE);
    CHECK(count(e, "reader_failures") == 13);
    polarsplit_engine_free(e);
    return 0;
}

/* A read the session sends for a reader connection, answered by `kind` with `flags`. */
static int acquire_answered(uint32_t kind, uint32_t flags, polarsplit_engine *e, host_t *h) {
    polarsplit_session *s = NULL;
    CHECK_STATUS(new_session(e, &s), POLARSPLIT_OK);
    CHECK(login(s, h, 1000) == 0);
    uint8_t q[64];
    h->acquired = 0;
    CHECK(client(s, h, q, wire_query(q, "SELECT 1"), 5000) == 0);
    CHECK(h->acquired && h->server == 1);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, 0, kind, h->server, flags, 5000), POLARSPLIT_OK);
    CHECK(drain(s, h) == 0);
    CHECK(has(&h->sent[0], "SELECT 1")); /* the writer answers the read */
    polarsplit_session_free(s);
    return 0;
}

int ctest_r1b_session_reader_connect_failed_counts_and_reader_unavailable_does_not(void) {
    static host_t h;
    uint64_t at = 0;
    /* Control: READER_UNAVAILABLE (no pooled connection, the back-off says not yet) is no fault. */
    memset(&h, 0, sizeof h);
    polarsplit_engine *e = engine_with(NULL, NULL);
    CHECK(e != NULL);
    CHECK(acquire_answered(POLARSPLIT_EVENT_READER_UNAVAILABLE, 0, e, &h) == 0);
    CHECK(h.reason == POLARSPLIT_REASON_NO_READER_CONNECTION);
    CHECK(count(e, "reader_connect_failures") == 0 && count(e, "reader_failures") == 0);
    CHECK_STATUS(polarsplit_engine_reader_retry_after(e, 1, &at), POLARSPLIT_DONE);
    polarsplit_engine_free(e);
    /* READER_CONNECT_FAILED with STARTING_UP (57P03): an outage and a failure, dated by the
     * event's time, and the writer answers. */
    memset(&h, 0, sizeof h);
    e = engine_with(NULL, NULL);
    CHECK(e != NULL);
    CHECK(acquire_answered(POLARSPLIT_EVENT_READER_CONNECT_FAILED, POLARSPLIT_EVENT_FLAG_STARTING_UP, e, &h) == 0);
    CHECK(h.reason == POLARSPLIT_REASON_NO_READER_CONNECTION);
    CHECK(count(e, "reader_connect_failures") == 1 && count(e, "reader_starting_up") == 1);
    CHECK(count(e, "reader_failures") == 1 && count(e, "reader_outages") == 1);
    CHECK_STATUS(polarsplit_engine_reader_retry_after(e, 1, &at), POLARSPLIT_OK);
    CHECK(at == 5200);
    polarsplit_engine_free(e);
    return 0;
}

/* The engine's Prometheus text, malloc-free: into `buf`, whole. */
static int prometheus(polarsplit_engine *e, char *buf, size_t cap) {
    size_t len = 0;
    CHECK_STATUS(polarsplit_engine_prometheus(e, buf, cap, &len), POLARSPLIT_OK);
    CHECK(len < cap && strlen(buf) == len);
    return 0;
}

static char text[1 << 16];

/* Whether reader 1's replay position is known, by its gauge (-1: no gauge). */
static int position_known(polarsplit_engine *e) {
    if (prometheus(e, text, sizeof text) != 0) return -1;
    if (strstr(text, "polarsplit_reader_position_known{server=\"1\",hostgroup=\"1\"} 1\n")) return 1;
    if (strstr(text, "polarsplit_reader_position_known{server=\"1\",hostgroup=\"1\"} 0\n")) return 0;
    return -1;
}

int ctest_r1a_fault_reports_clear_the_known_position_until_a_later_sample(void) {
    polarsplit_engine *e = engine_with(NULL, NULL);
    CHECK(e != NULL);
    CHECK(position_known(e) == 0);
    CHECK_STATUS(polarsplit_engine_reader_sample(e, 1, 0x4000, 1000), POLARSPLIT_OK);
    CHECK(position_known(e) == 1); /* control: a sample gives a position */
    CHECK(strstr(text, "polarsplit_reader_replay_lsn{server=\"1\",hostgroup=\"1\"} 16384\n") != NULL);
    /* Every fault report clears it; a sample taken at or before the fault does not restore it,
     * one taken after does. */
    for (int k = 0; k < 5; k++) {
        uint64_t t = 2000 + 1000 * (uint64_t)k;
        switch (k) {
        case 0: CHECK_STATUS(polarsplit_engine_reader_monitor_failed(e, 1, t), POLARSPLIT_OK); break;
        case 1: CHECK_STATUS(polarsplit_engine_reader_lost(e, 1, t), POLARSPLIT_OK); break;
        case 2: CHECK_STATUS(polarsplit_engine_reader_connect_failed(e, 1, t, true), POLARSPLIT_OK); break;
        case 3: CHECK_STATUS(polarsplit_engine_reader_outage(e, 1, t), POLARSPLIT_OK); break;
        case 4: CHECK_STATUS(polarsplit_engine_set_reader_health_at(e, 1, false, t), POLARSPLIT_OK); break;
        }
        CHECK(position_known(e) == 0);
        CHECK_STATUS(polarsplit_engine_reader_sample(e, 1, 0x4000 + (uint64_t)k, t), POLARSPLIT_OK);
        CHECK(position_known(e) == 0);
        CHECK_STATUS(polarsplit_engine_reader_sample(e, 1, 0x4000 + (uint64_t)k, t + 1), POLARSPLIT_OK);
        CHECK(position_known(e) == 1);
    }
    CHECK(count(e, "samples_before_outage") == 5);
    CHECK(strstr(text, "polarsplit_reader_healthy{server=\"1\",hostgroup=\"1\"} 0\n") != NULL);
    /* Healthy again at 9000: an outage too. */
    CHECK_STATUS(polarsplit_engine_set_reader_health_at(e, 1, true, 9000), POLARSPLIT_OK);
    CHECK(position_known(e) == 0);
    CHECK(strstr(text, "polarsplit_reader_healthy{server=\"1\",hostgroup=\"1\"} 1\n") != NULL);
    CHECK_STATUS(polarsplit_engine_reader_sample(e, 1, 0x4100, 9001), POLARSPLIT_OK);
    CHECK(position_known(e) == 1);
    /* The same verdict again is no change and no outage. */
    CHECK_STATUS(polarsplit_engine_set_reader_health_at(e, 1, true, 9500), POLARSPLIT_OK);
    CHECK(position_known(e) == 1);
    polarsplit_engine_free(e);
    return 0;
}

int ctest_s9_prometheus_text_with_size_query_and_truncation(void) {
    polarsplit_engine *e = engine_with(NULL, NULL);
    CHECK(e != NULL);
    size_t len = 0;
    CHECK_STATUS(polarsplit_engine_prometheus(e, NULL, 0, &len), POLARSPLIT_OK); /* size query */
    CHECK(len > 1000 && len < sizeof text);
    size_t want = len;
    memset(text, 'x', sizeof text);
    CHECK_STATUS(polarsplit_engine_prometheus(e, text, want + 1, &len), POLARSPLIT_OK);
    CHECK(len == want && text[len] == '\0' && text[len - 1] == '\n' && text[len + 1] == 'x');
    CHECK(strncmp(text, "# HELP polarsplit_", 18) == 0);
    CHECK(strstr(text, "\npolarsplit_reader_connect_failures_total 0\n") != NULL);
    CHECK(strstr(text, "polarsplit_decisions_total{outcome=\"FORCE_PRIMARY\"} 0\n") != NULL);
    /* Counters move with the engine. */
    CHECK_STATUS(polarsplit_engine_reader_connect_failed(e, 1, 1000, false), POLARSPLIT_OK);
    CHECK(prometheus(e, text, sizeof text) == 0);
    CHECK(strstr(text, "\npolarsplit_reader_connect_failures_total 1\n") != NULL);
    CHECK(strstr(text, "polarsplit_reader_consecutive_failures{server=\"1\",hostgroup=\"1\"} 1\n") != NULL);
    /* Too small: a NUL-terminated prefix, never a byte past `cap`, and the full length. */
    char small[17];
    memset(small, 'y', sizeof small);
    CHECK_STATUS(polarsplit_engine_prometheus(e, small, 16, &len), POLARSPLIT_OK);
    CHECK(len >= 16 && small[15] == '\0' && strlen(small) == 15 && small[16] == 'y');
    CHECK(strncmp(small, text, 15) == 0);
    CHECK_STATUS(polarsplit_engine_prometheus(e, small, 1, &len), POLARSPLIT_OK);
    CHECK(small[0] == '\0' && len > 1000);
    polarsplit_engine_free(e);
    return 0;
}

/* --- The writer's user functions (SPEC §7 F-policy) ---------------------------------------- */

static polarsplit_function fn(const char *schema, const char *name, polarsplit_volatility v) {
    polarsplit_function f;
    memset(&f, 0, sizeof f);
    f.schema = schema;
    f.schema_len = schema ? strlen(schema) : 0;
    f.name = name;
    f.name_len = strlen(name);
    f.volatility = v;
    return f;
}

/* Where `sql` goes in a new session of database "db": 1 a reader (asked for with
 * ACQUIRE_READER; its decision comes once one is attached), 0 the writer, with *reason the
 * decision's. */
static int routed_to_reader(polarsplit_engine *e, const char *sql, polarsplit_reason *reason) {
    static host_t h;
    memset(&h, 0, sizeof h);
    polarsplit_session *s = NULL;
    CHECK_STATUS(new_session(e, &s), POLARSPLIT_OK);
    CHECK(login(s, &h, 1000) == 0);
    uint8_t q[256];
    CHECK(client(s, &h, q, wire_query(q, sql), 1000) == 0);
    *reason = h.reason;
    int reader = h.acquired;
    CHECK(reader || has(&h.sent[0], sql));
    polarsplit_session_free(s);
    return reader ? 1 : 0;
}

#define TO_READER(e, sql)                               \
    do {                                                \
        polarsplit_reason r_ = 0;                       \
        CHECK(routed_to_reader((e), (sql), &r_) == 1);  \
    } while (0)

#define TO_WRITER(e, sql, want_reason)                                                            \
    do {                                                                                          \
        polarsplit_reason r_ = 0;                                                                 \
        CHECK(routed_to_reader((e), (sql), &r_) == 0);                                            \
        if (r_ != (want_reason)) fprintf(stderr, "%s: reason %s\n", (sql), polarsplit_reason_name(r_)); \
        CHECK(r_ == (want_reason));                                                               \
    } while (0)

int ctest_f_policy_function_catalogue_routes_user_function_reads_per_database(void) {
    polarsplit_engine *e = engine_with(NULL, NULL);
    CHECK(e != NULL);
    const char *q = "SELECT my_stable(1)";
    /* Control: without a catalogue a user function is unknown: the writer. */
    TO_WRITER(e, q, POLARSPLIT_REASON_UNKNOWN_FUNCTION);
    TO_READER(e, "SELECT 1");
    /* The writer's catalogue of "db" (the sessions' database) says it is stable: a reader. */
    polarsplit_function fns[3] = {fn("public", "my_stable", POLARSPLIT_VOLATILITY_STABLE),
                                  fn("app", "my_immutable", POLARSPLIT_VOLATILITY_IMMUTABLE),
                                  fn("public", "my_volatile", POLARSPLIT_VOLATILITY_VOLATILE)};
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, fns, 3, sizeof fns[0]), POLARSPLIT_OK);
    TO_READER(e, q);
    TO_READER(e, "SELECT app.my_immutable()");
    TO_WRITER(e, "SELECT my_volatile()", POLARSPLIT_REASON_USER_FUNCTION);
    TO_WRITER(e, "SELECT my_stable(1), nope()", POLARSPLIT_REASON_UNKNOWN_FUNCTION);
    /* A volatile overload of the same name, in another schema: no call of the name is safe. */
    polarsplit_function more[2] = {fns[0], fn("other", "my_stable", POLARSPLIT_VOLATILITY_VOLATILE)};
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, more, 2, sizeof more[0]), POLARSPLIT_OK);
    TO_WRITER(e, q, POLARSPLIT_REASON_USER_FUNCTION);
    /* A replaced catalogue replaces everything: my_immutable is unknown now. */
    TO_WRITER(e, "SELECT app.my_immutable()", POLARSPLIT_REASON_UNKNOWN_FUNCTION);
    /* Another database's catalogue changes nothing for "db". */
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, fns, 1, sizeof fns[0]), POLARSPLIT_OK);
    TO_READER(e, q);
    polarsplit_function vol = fn("public", "my_stable", POLARSPLIT_VOLATILITY_VOLATILE);
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "other_db", 8, &vol, 1, sizeof vol), POLARSPLIT_OK);
    TO_READER(e, q);
    /* A database name is bytes: "db" with a trailing NUL is another database. */
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 3, &vol, 1, sizeof vol), POLARSPLIT_OK);
    TO_READER(e, q);
    /* A refused catalogue changes nothing (a bad volatility in the last element). */
    polarsplit_function bad[2] = {vol, fn("public", "x", 'x')};
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, bad, 2, sizeof bad[0]),
                 POLARSPLIT_ERR_INVALID_ARGUMENT);
    TO_READER(e, q);
    /* Removed: unknown again. */
    CHECK_STATUS(polarsplit_engine_remove_function_catalog(e, "db", 2), POLARSPLIT_OK);
    TO_WRITER(e, q, POLARSPLIT_REASON_UNKNOWN_FUNCTION);
    CHECK_STATUS(polarsplit_engine_remove_function_catalog(e, "db", 2), POLARSPLIT_DONE);
    /* An empty catalogue is a catalogue: the database has no user functions. */
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, NULL, 0, sizeof vol), POLARSPLIT_OK);
    TO_WRITER(e, q, POLARSPLIT_REASON_UNKNOWN_FUNCTION);
    CHECK_STATUS(polarsplit_engine_remove_function_catalog(e, "db", 2), POLARSPLIT_OK);
    /* The writer's version picks the built-in table; any version is taken. */
    CHECK_STATUS(polarsplit_engine_set_writer_server_version(e, 150018), POLARSPLIT_OK);
    TO_READER(e, "SELECT 1");
    TO_WRITER(e, "SELECT nextval('s')", POLARSPLIT_REASON_WRITE_FUNCTION);
    CHECK_STATUS(polarsplit_engine_set_writer_server_version(e, 0), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_set_writer_server_version(e, UINT32_MAX), POLARSPLIT_OK);
    TO_READER(e, "SELECT 1");
    polarsplit_engine_free(e);
    return 0;
}

int ctest_host_faults_and_catalogue_misuse(void) {
    polarsplit_engine *e = engine_with(NULL, NULL);
    CHECK(e != NULL);
    uint64_t at = 7;
    bool held = true;
    size_t len = 7;
    char buf[32];
    polarsplit_function f = fn("public", "f", POLARSPLIT_VOLATILITY_STABLE);

    /* NULL engine: every call is ERR_NULL and writes nothing. */
    CHECK_STATUS(polarsplit_engine_set_reader_health_at(NULL, 1, true, 1), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_reader_monitor_failed(NULL, 1, 1), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_reader_lost(NULL, 1, 1), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_reader_connect_failed(NULL, 1, 1, false), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_reader_outage(NULL, 1, 1), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_reader_retry_after(NULL, 1, &at), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_reader_held_out(NULL, 1, &held), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_prometheus(NULL, buf, sizeof buf, &len), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_function_catalog(NULL, "db", 2, &f, 1, sizeof f), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_remove_function_catalog(NULL, "db", 2), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_writer_server_version(NULL, 150018), POLARSPLIT_ERR_NULL);
    CHECK(at == 7 && held && len == 7);

    /* NULL outputs. */
    CHECK_STATUS(polarsplit_engine_reader_retry_after(e, 1, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_reader_held_out(e, 1, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_prometheus(e, buf, sizeof buf, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_prometheus(e, NULL, 5, &len), POLARSPLIT_ERR_NULL);
    CHECK(len == 7);

    /* Unknown servers: DONE, nothing changes, nothing counted. */
    uint32_t unknown[] = {0, 2, 99, UINT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        uint32_t sv = unknown[i];
        CHECK_STATUS(polarsplit_engine_set_reader_health_at(e, sv, false, 1), POLARSPLIT_DONE);
        CHECK_STATUS(polarsplit_engine_reader_monitor_failed(e, sv, 1), POLARSPLIT_DONE);
        CHECK_STATUS(polarsplit_engine_reader_lost(e, sv, 1), POLARSPLIT_DONE);
        CHECK_STATUS(polarsplit_engine_reader_connect_failed(e, sv, 1, true), POLARSPLIT_DONE);
        CHECK_STATUS(polarsplit_engine_reader_outage(e, sv, 1), POLARSPLIT_DONE);
        CHECK_STATUS(polarsplit_engine_reader_retry_after(e, sv, &at), POLARSPLIT_DONE);
        CHECK_STATUS(polarsplit_engine_reader_held_out(e, sv, &held), POLARSPLIT_DONE);
    }
    CHECK(at == 7 && held);
    CHECK(count(e, "reader_connect_failures") == 0 && count(e, "monitor_failures") == 0);
    CHECK(count(e, "reader_failures") == 0 && count(e, "reader_outages") == 0);
    /* Extreme times are taken. */
    CHECK_STATUS(polarsplit_engine_reader_connect_failed(e, 1, UINT64_MAX, false), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_reader_retry_after(e, 1, &at), POLARSPLIT_OK);
    CHECK(at == UINT64_MAX); /* saturates */
    CHECK_STATUS(polarsplit_engine_reader_lost(e, 1, 0), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_set_reader_health_at(e, 1, true, 0), POLARSPLIT_OK);

    /* Catalogue: bad pointers and lengths are refused and change nothing. */
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, NULL, 2, &f, 1, sizeof f), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, NULL, 1, sizeof f), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &f, 1, sizeof f - 1), POLARSPLIT_ERR_ABI);
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &f, 1, 0), POLARSPLIT_ERR_ABI);
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &f, SIZE_MAX, sizeof f),
                 POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &f, SIZE_MAX / 2, 4 * sizeof f),
                 POLARSPLIT_ERR_INVALID_ARGUMENT);
    polarsplit_function g = f;
    g.name = NULL;
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_ERR_NULL);
    g.name_len = 0; /* empty name */
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_ERR_INVALID_ARGUMENT);
    static const char long_name[] = "a234567890123456789012345678901234567890123456789012345678901234"; /* 64 */
    g = fn("public", long_name, POLARSPLIT_VOLATILITY_STABLE);
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_ERR_INVALID_ARGUMENT);
    g.name_len = 63; /* the longest a name can be */
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_OK);
    g = fn("public", "\xff\xfe", POLARSPLIT_VOLATILITY_STABLE); /* not UTF-8 */
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_ERR_INVALID_ARGUMENT);
    g = fn("\xc3", "f", POLARSPLIT_VOLATILITY_STABLE); /* a schema cut inside a character */
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_ERR_INVALID_ARGUMENT);
    g = fn(NULL, "f", POLARSPLIT_VOLATILITY_STABLE); /* no schema: allowed */
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_OK);
    g.schema_len = 3; /* NULL with a length */
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_ERR_NULL);
    polarsplit_volatility vs[] = {0, 'I', 'S', 'V', 'x', 255};
    for (size_t i = 0; i < sizeof vs; i++) {
        g = fn("public", "f", vs[i]);
        CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &g, 1, sizeof g),
                     POLARSPLIT_ERR_INVALID_ARGUMENT);
    }
    /* What the refused calls left: the catalogue of the last accepted one (`f` stable). */
    polarsplit_reason r = 0;
    CHECK(routed_to_reader(e, "SELECT f()", &r) == 1);
    /* A newer host's larger struct: read with its stride. */
    struct {
        polarsplit_function f;
        uint64_t appended;
    } newer[2];
    memset(newer, 0xab, sizeof newer);
    newer[0].f = fn("public", "f", POLARSPLIT_VOLATILITY_STABLE);
    newer[1].f = fn("public", "f", POLARSPLIT_VOLATILITY_VOLATILE);
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &newer[0].f, 2, sizeof newer[0]), POLARSPLIT_OK);
    CHECK(routed_to_reader(e, "SELECT f()", &r) == 0 && r == POLARSPLIT_REASON_USER_FUNCTION);
    /* Removal: NULL database only with length 0 (the empty name, which has no catalogue). */
    CHECK_STATUS(polarsplit_engine_remove_function_catalog(e, NULL, 2), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_remove_function_catalog(e, NULL, 0), POLARSPLIT_DONE);
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, NULL, 0, &f, 1, sizeof f), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_remove_function_catalog(e, "", 0), POLARSPLIT_OK);
    polarsplit_engine_free(e);
    return 0;
}

static polarsplit_sequence seq(const char *schema, const char *name) {
    polarsplit_sequence q;
    memset(&q, 0, sizeof q);
    q.schema = schema;
    q.schema_len = schema ? strlen(schema) : 0;
    q.name = name;
    q.name_len = strlen(name);
    return q;
}

/* S-7: a standby holds a sequence WAL-logged ahead of the primary, so a read naming a sequence the
 * host reported for the session's database goes to the writer. */
int ctest_s7_sequence_catalogue_keeps_sequence_reads_on_the_writer_per_database(void) {
    polarsplit_engine *e = engine_with(NULL, NULL);
    CHECK(e != NULL);
    const char *q = "SELECT last_value, log_cnt, is_called FROM order_seq";
    /* Control: not reported, a plain relation name: a reader. */
    TO_READER(e, q);
    polarsplit_sequence seqs[2] = {seq("public", "order_seq"), seq("app", "Mixed")};
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, seqs, 2, sizeof seqs[0]), POLARSPLIT_OK);
    TO_WRITER(e, q, POLARSPLIT_REASON_SERVER_DEPENDENT);
    TO_WRITER(e, "SELECT * FROM public.ORDER_SEQ", POLARSPLIT_REASON_SERVER_DEPENDENT);
    TO_WRITER(e, "SELECT t.a FROM t JOIN (SELECT last_value FROM order_seq) s ON true",
              POLARSPLIT_REASON_SERVER_DEPENDENT);
    TO_WRITER(e, "SELECT * FROM app.\"Mixed\"", POLARSPLIT_REASON_SERVER_DEPENDENT);
    TO_READER(e, "SELECT * FROM mixed"); /* folded: another name */
    TO_READER(e, "SELECT a FROM t");
    /* The function catalogue is separate: replacing it keeps the sequences. */
    polarsplit_function f = fn("public", "f", POLARSPLIT_VOLATILITY_STABLE);
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &f, 1, sizeof f), POLARSPLIT_OK);
    TO_WRITER(e, q, POLARSPLIT_REASON_SERVER_DEPENDENT);
    TO_READER(e, "SELECT f()");
    /* Another database's report changes nothing for "db"; "db" with a NUL is another database. */
    polarsplit_sequence other = seq("public", "other_seq");
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "other_db", 8, &other, 1, sizeof other), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 3, &other, 1, sizeof other), POLARSPLIT_OK);
    TO_READER(e, "SELECT * FROM other_seq");
    TO_WRITER(e, q, POLARSPLIT_REASON_SERVER_DEPENDENT);
    /* A report replaces the earlier one whole. */
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, &other, 1, sizeof other), POLARSPLIT_OK);
    TO_READER(e, q);
    TO_WRITER(e, "SELECT * FROM other_seq", POLARSPLIT_REASON_SERVER_DEPENDENT);
    /* Removed: not recognised again; the functions stay. */
    CHECK_STATUS(polarsplit_engine_remove_sequence_catalog(e, "db", 2), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_remove_sequence_catalog(e, "db", 2), POLARSPLIT_DONE);
    TO_READER(e, "SELECT * FROM other_seq");
    TO_READER(e, "SELECT f()");
    /* An empty report is a report: no sequences. */
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, NULL, 0, sizeof other), POLARSPLIT_OK);
    TO_READER(e, q);
    CHECK_STATUS(polarsplit_engine_remove_sequence_catalog(e, "db", 2), POLARSPLIT_OK);
    polarsplit_engine_free(e);
    return 0;
}

int ctest_s7_sequence_catalogue_misuse(void) {
    polarsplit_engine *e = engine_with(NULL, NULL);
    CHECK(e != NULL);
    polarsplit_sequence s = seq("public", "s");
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(NULL, "db", 2, &s, 1, sizeof s), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_remove_sequence_catalog(NULL, "db", 2), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, &s, 1, sizeof s), POLARSPLIT_OK);
    /* Bad pointers and lengths are refused and change nothing. */
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, NULL, 2, &s, 1, sizeof s), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, NULL, 1, sizeof s), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, &s, 1, sizeof s - 1), POLARSPLIT_ERR_ABI);
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, &s, 1, 0), POLARSPLIT_ERR_ABI);
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, &s, SIZE_MAX, sizeof s),
                 POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, &s, SIZE_MAX / 2, 4 * sizeof s),
                 POLARSPLIT_ERR_INVALID_ARGUMENT);
    polarsplit_sequence g = s;
    g.name = NULL;
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_ERR_NULL);
    g.name_len = 0; /* empty name */
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_ERR_INVALID_ARGUMENT);
    static const char long_name[] = "a234567890123456789012345678901234567890123456789012345678901234"; /* 64 */
    g = seq("public", long_name);
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_ERR_INVALID_ARGUMENT);
    g = seq("public", "\xff\xfe"); /* not UTF-8 */
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_ERR_INVALID_ARGUMENT);
    g = seq("\xc3", "t"); /* a schema cut inside a character */
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_ERR_INVALID_ARGUMENT);
    g = seq(NULL, "t");
    g.schema_len = 3; /* NULL with a length */
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_ERR_NULL);
    /* A refused array is refused whole: one bad element after a good one. */
    polarsplit_sequence two[2] = {seq("public", "t"), seq("public", "")};
    two[1].name_len = 0;
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, two, 2, sizeof two[0]),
                 POLARSPLIT_ERR_INVALID_ARGUMENT);
    /* What the refused calls left: the last accepted report (`s`). */
    TO_WRITER(e, "SELECT * FROM s", POLARSPLIT_REASON_SERVER_DEPENDENT);
    TO_READER(e, "SELECT * FROM t");
    /* No schema: allowed; the longest name: allowed. */
    g = seq(NULL, "a23456789012345678901234567890123456789012345678901234567890123"); /* 63 */
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_OK);
    /* A newer host's larger struct: read with its stride. */
    struct {
        polarsplit_sequence s;
        uint64_t appended;
    } newer[2];
    memset(newer, 0xab, sizeof newer);
    newer[0].s = seq("public", "n0");
    newer[1].s = seq("public", "n1");
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "db", 2, &newer[0].s, 2, sizeof newer[0]), POLARSPLIT_OK);
    TO_WRITER(e, "SELECT * FROM n1", POLARSPLIT_REASON_SERVER_DEPENDENT);
    TO_READER(e, "SELECT * FROM s");
    /* Removal: NULL database only with length 0 (the empty name). */
    CHECK_STATUS(polarsplit_engine_remove_sequence_catalog(e, NULL, 2), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_remove_sequence_catalog(e, NULL, 0), POLARSPLIT_DONE);
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, NULL, 0, &s, 1, sizeof s), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_remove_sequence_catalog(e, "", 0), POLARSPLIT_OK);
    polarsplit_engine_free(e);
    return 0;
}

static polarsplit_object obj(const char *schema, const char *name, const char *definition) {
    polarsplit_object o;
    memset(&o, 0, sizeof o);
    o.schema = schema;
    o.schema_len = schema ? strlen(schema) : 0;
    o.name = name;
    o.name_len = strlen(name);
    o.definition = definition;
    o.definition_len = definition ? strlen(definition) : 0;
    return o;
}

/* S-6/S-5: a statement naming a reported object that hides code takes the verdict of the object's
 * definition: a view over set_config or a sequence stays on the writer; the report is per
 * database, replaces the earlier one whole, and is judged again when the functions are reported. */
int ctest_s6_object_catalogue_judges_hidden_code_per_database(void) {
    polarsplit_engine *e = engine_with(NULL, NULL);
    CHECK(e != NULL);
    const char *q = "SELECT r FROM v_role";
    TO_READER(e, q); /* control: nothing reported */
    polarsplit_object objs[3] = {
        obj("public", "v_role", " SELECT set_config('role'::text, 'x'::text, false) AS r;"),
        obj("public", "v_over", "SELECT * FROM v_role"),
        obj("public", "v_f", "SELECT public.f(1)"),
    };
    CHECK_STATUS(polarsplit_engine_set_object_catalog(e, "db", 2, objs, 3, sizeof objs[0]), POLARSPLIT_OK);
    TO_WRITER(e, q, POLARSPLIT_REASON_WRITE_FUNCTION);
    TO_WRITER(e, "SELECT * FROM public.V_ROLE", POLARSPLIT_REASON_WRITE_FUNCTION);
    TO_WRITER(e, "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM v_over)", POLARSPLIT_REASON_WRITE_FUNCTION);
    TO_READER(e, "SELECT 'v_role' FROM t");
    /* f is unknown until the function catalogue says stable; then a view over it is read-safe. */
    TO_WRITER(e, "SELECT * FROM v_f", POLARSPLIT_REASON_UNKNOWN_FUNCTION);
    polarsplit_function f = fn("public", "f", POLARSPLIT_VOLATILITY_STABLE);
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &f, 1, sizeof f), POLARSPLIT_OK);
    TO_READER(e, "SELECT * FROM v_f");
    TO_WRITER(e, q, POLARSPLIT_REASON_WRITE_FUNCTION);
    /* Another database is not touched; a report replaces the earlier one whole. */
    polarsplit_sequence s = seq("public", "s");
    CHECK_STATUS(polarsplit_engine_set_sequence_catalog(e, "other", 5, &s, 1, sizeof s), POLARSPLIT_OK);
    polarsplit_object seqv = obj("public", "v_seq", "SELECT last_value FROM s");
    CHECK_STATUS(polarsplit_engine_set_object_catalog(e, "other", 5, &seqv, 1, sizeof seqv), POLARSPLIT_OK);
    TO_WRITER(e, q, POLARSPLIT_REASON_WRITE_FUNCTION);
    CHECK_STATUS(polarsplit_engine_set_object_catalog(e, "db", 2, &objs[2], 1, sizeof objs[0]), POLARSPLIT_OK);
    TO_READER(e, q);
    TO_READER(e, "SELECT * FROM v_f");
    CHECK_STATUS(polarsplit_engine_remove_object_catalog(e, "db", 2), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_remove_object_catalog(e, "db", 2), POLARSPLIT_DONE);
    TO_READER(e, "SELECT f()"); /* the functions stay */
    /* No session ran DDL: not changed; the load hook is accepted; misuse is refused. */
    CHECK_STATUS(polarsplit_engine_catalog_changed(e, "db", 2), POLARSPLIT_DONE);
    CHECK_STATUS(polarsplit_engine_catalog_load_started(e, "db", 2), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_catalog_changed(NULL, "db", 2), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_catalog_changed(e, NULL, 2), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_catalog_load_started(NULL, "db", 2), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_catalog_load_started(e, NULL, 2), POLARSPLIT_ERR_NULL);
    /* DDL another engine's session ran (another Pgpool child): the database's reads wait for the
     * next load, and it is not counted as this engine's own. */
    uint64_t ddl = 99;
    CHECK_STATUS(polarsplit_engine_sessions_ddl(e, &ddl), POLARSPLIT_OK);
    CHECK(ddl == 0);
    CHECK_STATUS(polarsplit_engine_catalog_changed_elsewhere(e, "db", 2), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_catalog_changed(e, "db", 2), POLARSPLIT_OK);
    TO_WRITER(e, "SELECT 1", POLARSPLIT_REASON_CATALOG_CHANGED);
    CHECK_STATUS(polarsplit_engine_sessions_ddl(e, &ddl), POLARSPLIT_OK);
    CHECK(ddl == 0);
    CHECK_STATUS(polarsplit_engine_catalog_load_started(e, "db", 2), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_set_function_catalog(e, "db", 2, &f, 1, sizeof f), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_catalog_changed(e, "db", 2), POLARSPLIT_DONE);
    CHECK_STATUS(polarsplit_engine_catalog_changed_elsewhere(NULL, "db", 2), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_catalog_changed_elsewhere(e, NULL, 2), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_sessions_ddl(NULL, &ddl), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_sessions_ddl(e, NULL), POLARSPLIT_ERR_NULL);
    polarsplit_engine_free(e);
    return 0;
}

int ctest_s6_object_catalogue_misuse(void) {
    polarsplit_engine *e = engine_with(NULL, NULL);
    CHECK(e != NULL);
    polarsplit_object o = obj("public", "v", "SELECT set_config('a.b', 'c', false)");
    CHECK_STATUS(polarsplit_engine_set_object_catalog(NULL, "db", 2, &o, 1, sizeof o), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_remove_object_catalog(NULL, "db", 2), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_object_catalog(e, "db", 2, &o, 1, sizeof o), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_engine_set_object_catalog(e, NULL, 2, &o, 1, sizeof o), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_object_catalog(e, "db", 2, NULL, 1, sizeof o), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_set_object_catalog(e, "db", 2, &o, 1, sizeof o - 1), POLARSPLIT_ERR_ABI);
    CHECK_STATUS(polarsplit_engine_set_object_catalog(e, "db", 2, &o, SIZE_MAX, sizeof o),
                 POLARSPLIT_ERR_INVALID_ARGUMENT);
    polarsplit_object g = o;
    g.definition = NULL; /* NULL with a length */
    CHECK_STATUS(polarsplit_engine_set_object_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_ERR_NULL);
    g = obj("public", "v", "SELECT '\xff\xfe'");
    g.definition = "SELECT \xff";
    g.definition_len = 8; /* not UTF-8 */
    CHECK_STATUS(polarsplit_engine_set_object_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_ERR_INVALID_ARGUMENT);
    g = obj("public", "", "SELECT 1"); /* empty name */
    CHECK_STATUS(polarsplit_engine_set_object_catalog(e, "db", 2, &g, 1, sizeof g), POLARSPLIT_ERR_INVALID_ARGUMENT);
    /* What the refused calls left: the last accepted report. */
    TO_WRITER(e, "SELECT * FROM v", POLARSPLIT_REASON_WRITE_FUNCTION);
    /* A definition that is not a read, or none: statements naming the object stay on the writer. */
    polarsplit_object odd[2] = {obj("public", "w", "DELETE FROM t"), obj("public", "n", NULL)};
    CHECK_STATUS(polarsplit_engine_set_object_catalog(e, "db", 2, odd, 2, sizeof odd[0]), POLARSPLIT_OK);
    TO_WRITER(e, "SELECT * FROM w", POLARSPLIT_REASON_UNPARSEABLE);
    TO_WRITER(e, "SELECT * FROM n", POLARSPLIT_REASON_UNPARSEABLE);
    TO_READER(e, "SELECT * FROM v");
    /* A newer host's larger struct: read with its stride. */
    struct {
        polarsplit_object o;
        uint64_t appended;
    } newer[2];
    memset(newer, 0xab, sizeof newer);
    newer[0].o = obj("public", "n0", "SELECT 1");
    newer[1].o = obj("public", "n1", "SELECT pg_is_in_recovery()");
    CHECK_STATUS(polarsplit_engine_set_object_catalog(e, "db", 2, &newer[0].o, 2, sizeof newer[0]), POLARSPLIT_OK);
    TO_WRITER(e, "SELECT * FROM n1", POLARSPLIT_REASON_SERVER_DEPENDENT);
    TO_READER(e, "SELECT * FROM n0");
    polarsplit_engine_free(e);
    return 0;
}
