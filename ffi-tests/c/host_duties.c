/* What a host tells the library besides bytes and events, from C: the passing of time (SPEC
 * R-1b: polarsplit_session_next_deadline / _on_timeout), a cancel it forwarded (F-1:
 * polarsplit_session_cancel_forwarded), a pooled connection it closed itself (E-2:
 * polarsplit_engine_connection_closed) and the writer's history (C-1/C-3:
 * polarsplit_engine_set_writer_identity). Each test has a control that shows what the call
 * changes, and the misuse test gives every new function its NULLs and wrong states (the
 * sanitizer and valgrind runs of scripts/test-sanitizers.sh execute these same functions). */
#include <stdint.h>
#include <string.h>

#include "polarsplit.h"
#include "harness.h"

int ctest_r1b_deadline_after_a_reader_statement_and_timeout_retries_on_the_writer(void);
int ctest_f1_cancel_forwarded_to_a_reader_closes_it_instead_of_pooling(void);
int ctest_e2_connection_closed_forgets_what_the_connection_had_prepared(void);
int ctest_c1_writer_identity_names_the_token_history_and_bumps_the_generation(void);
int ctest_host_duties_misuse(void);

#define WRITER 100u
#define READER 201u
#define TIMEOUT_MS 6000u /* above split_wait_timeout_ms, as the configuration requires */

/* StartupMessage user=app database=db (30 bytes). */
static const uint8_t STARTUP[] = {0,   0,   0,   30,  0,   3,   0,   0,   'u', 's', 'e', 'r', 0,   'a', 'p',
                                  'p', 0,   'd', 'a', 't', 'a', 'b', 'a', 's', 'e', 0,   'd', 'b', 0,   0};

typedef struct {
    uint8_t data[4096];
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

/* A read the session sends to a reader: asks for one, gets READER attached (fresh or pooled). */
static int read_to_reader(polarsplit_session *s, host_t *h, const uint8_t *msg, size_t n, int fresh, uint64_t now) {
    h->acquired = 0;
    CHECK(client(s, h, msg, n, now) == 0);
    CHECK(h->acquired);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, READER, POLARSPLIT_EVENT_READER_ATTACHED, h->server,
                                                     fresh ? POLARSPLIT_EVENT_FLAG_FRESH : 0, now),
                 POLARSPLIT_OK);
    CHECK(drain(s, h) == 0);
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
