/* The session transcripts of tests/session_transcripts.rs, driven through the C ABI by a tiny
 * host over in-memory streams: write-then-read with the exact W-4 wrapper, hidden results
 * swallowed, standard RFQs for the client, forwarded + discarded = fed. */
#include <stdlib.h>
#include <string.h>

#include "polarsplit.h"
#include "harness.h"

int ctest_transcript_write_then_read(void);
int ctest_session_misuse(void);

#define WRITER 100u
#define READER 201u

typedef struct {
    uint8_t data[8192];
    size_t len;
} buf_t;

static void buf_put(buf_t *b, const void *p, size_t n) {
    if (b->len + n <= sizeof b->data) {
        memcpy(b->data + b->len, p, n);
        b->len += n;
    }
}

/* Moves n bytes from the front of src to dst (dst may be NULL to drop them). */
static int buf_move(buf_t *src, buf_t *dst, size_t n) {
    if (n > src->len) return -1;
    if (dst) buf_put(dst, src->data, n);
    memmove(src->data, src->data + n, src->len - n);
    src->len -= n;
    return 0;
}

typedef struct {
    buf_t client_pending, to_client;
    buf_t writer_pending, writer_sent;
    buf_t reader_pending, reader_sent;
    uint32_t acquired_server;
    int acquired;
    polarsplit_decision last_decision;
    int released;
    uint8_t connect_startup[1024];
    size_t connect_startup_len;
} host_t;

static buf_t *pending_of(host_t *h, uint64_t conn) {
    return conn == WRITER ? &h->writer_pending : &h->reader_pending;
}

static buf_t *sent_of(host_t *h, uint64_t conn) {
    return conn == WRITER ? &h->writer_sent : &h->reader_sent;
}

/* Applies every pending action; returns 0 or the failing line. */
static int drain(polarsplit_session *s, host_t *h) {
    polarsplit_action a;
    int st;
    while ((st = polarsplit_session_poll_action(s, &a, sizeof a)) == POLARSPLIT_OK) {
        switch (a.kind) {
        case POLARSPLIT_ACTION_CONNECT_WRITER:
            CHECK(a.connect_writer.startup.len <= sizeof h->connect_startup);
            memcpy(h->connect_startup, a.connect_writer.startup.ptr, a.connect_writer.startup.len);
            h->connect_startup_len = a.connect_writer.startup.len;
            break;
        case POLARSPLIT_ACTION_DECISION: h->last_decision = a.decision; break;
        case POLARSPLIT_ACTION_ACQUIRE_READER:
            h->acquired = 1;
            h->acquired_server = a.acquire_reader.server;
            CHECK(a.acquire_reader.key.auth_hash != 0);
            break;
        case POLARSPLIT_ACTION_FORWARD_CLIENT:
            CHECK(buf_move(&h->client_pending, sent_of(h, a.forward_client.conn), a.forward_client.n) == 0);
            break;
        case POLARSPLIT_ACTION_DISCARD_CLIENT:
            CHECK(buf_move(&h->client_pending, NULL, a.discard_client.n) == 0);
            break;
        case POLARSPLIT_ACTION_SEND_BACKEND:
            buf_put(sent_of(h, a.send_backend.conn), a.send_backend.bytes.ptr, a.send_backend.bytes.len);
            break;
        case POLARSPLIT_ACTION_FORWARD_BACKEND:
            CHECK(buf_move(pending_of(h, a.forward_backend.conn), &h->to_client, a.forward_backend.n) == 0);
            break;
        case POLARSPLIT_ACTION_DISCARD_BACKEND:
            CHECK(buf_move(pending_of(h, a.discard_backend.conn), NULL, a.discard_backend.n) == 0);
            break;
        case POLARSPLIT_ACTION_SEND_CLIENT: buf_put(&h->to_client, a.send_client.bytes.ptr, a.send_client.bytes.len); break;
        case POLARSPLIT_ACTION_RELEASE_READER: h->released = 1; break;
        default: break;
        }
    }
    CHECK_STATUS(st, POLARSPLIT_DONE);
    return 0;
}

static int feed_client(polarsplit_session *s, host_t *h, const uint8_t *b, size_t n) {
    size_t consumed = 0;
    CHECK_STATUS(polarsplit_session_recv_client(s, b, n, 1000, &consumed), POLARSPLIT_OK);
    CHECK(consumed == n);
    buf_put(&h->client_pending, b, n);
    return drain(s, h);
}

static int feed_backend(polarsplit_session *s, host_t *h, uint64_t conn, const uint8_t *b, size_t n) {
    CHECK_STATUS(polarsplit_session_recv_backend(s, conn, b, n, 1000), POLARSPLIT_OK);
    buf_put(pending_of(h, conn), b, n);
    return drain(s, h);
}

/* The tags of the messages in a byte stream, as a string. */
static void tags(const buf_t *b, char *out, size_t cap) {
    size_t pos = 0, k = 0;
    while (pos + 5 <= b->len && k + 1 < cap) {
        uint32_t len = ((uint32_t)b->data[pos + 1] << 24) | ((uint32_t)b->data[pos + 2] << 16) |
                       ((uint32_t)b->data[pos + 3] << 8) | b->data[pos + 4];
        out[k++] = (char)b->data[pos];
        pos += 1 + len;
    }
    out[k] = '\0';
}

static int contains(const buf_t *b, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= b->len; i++)
        if (memcmp(b->data + i, s, n) == 0) return 1;
    return 0;
}

static polarsplit_engine *engine_with_readers(void) {
    polarsplit_config_builder *b = polarsplit_config_builder_new();
    polarsplit_config *c = NULL;
    polarsplit_engine *e = NULL;
    if (polarsplit_config_builder_build(b, &c, NULL, 0) != POLARSPLIT_OK) return NULL;
    if (polarsplit_engine_new(c, &e) != POLARSPLIT_OK) return NULL;
    polarsplit_config_free(c);
    polarsplit_engine_add_reader(e, 1, 1);
    polarsplit_engine_add_reader(e, 2, 1);
    return e;
}

int ctest_transcript_write_then_read(void) {
    static host_t h;
    memset(&h, 0, sizeof h);
    polarsplit_engine *e = engine_with_readers();
    CHECK(e != NULL);
    polarsplit_client_info info = {"10.0.0.7", 40000, "127.0.0.1", 6432, -1};
    polarsplit_session *s = NULL;
    CHECK_STATUS(polarsplit_session_new(e, &info, sizeof info, &s), POLARSPLIT_OK);

    /* Startup: user=app database=db. */
    static const uint8_t startup[] = {0, 0, 0, 33, 0, 3, 0, 0, 'u', 's', 'e', 'r', 0, 'a', 'p', 'p', 0,
                                      'd', 'a', 't', 'a', 'b', 'a', 's', 'e', 0, 'd', 'b', 0, 0};
    uint8_t st[64];
    memcpy(st, startup, sizeof startup);
    st[3] = (uint8_t)sizeof startup;
    CHECK(feed_client(s, &h, st, sizeof startup) == 0);
    CHECK(h.connect_startup_len > 0);
    buf_t cs = {{0}, 0};
    buf_put(&cs, h.connect_startup, h.connect_startup_len);
    CHECK(contains(&cs, "_polar_proxy_send_lsn"));
    CHECK(contains(&cs, "10.0.0.7"));
    CHECK_STATUS(polarsplit_session_on_backend_event(s, WRITER, POLARSPLIT_EVENT_WRITER_CONNECTED, 0, 0, 1000),
                 POLARSPLIT_OK);
    uint8_t b[512];
    size_t n = 0;
    int32_t zero = 0;
    n += wire_msg(b + n, 'R', &zero, 4);
    n += wire_rfq(b + n, 'I', 0x1000);
    CHECK(feed_backend(s, &h, WRITER, b, n) == 0);
    char t[32];
    tags(&h.to_client, t, sizeof t);
    CHECK(strcmp(t, "RZ") == 0);
    CHECK(h.to_client.len == 9 + 6); /* the extended RFQ became a standard one */
    h.to_client.len = 0;

    /* SPEC S-5: the capture of the writer session's state follows its startup RFQ at once; the
     * writer answers it (no login-time settings) and nothing of it reaches the client. */
    CHECK(contains(&h.writer_sent, "polarsplit_capture"));
    h.writer_sent.len = 0;
    n = wire_startup_capture_answer(b);
    CHECK(feed_backend(s, &h, WRITER, b, n) == 0);
    CHECK(h.to_client.len == 0);

    /* A write on the writer: forwarded untouched; its LSN is remembered. */
    n = wire_query(b, "INSERT INTO t VALUES (1)");
    CHECK(feed_client(s, &h, b, n) == 0);
    CHECK(h.writer_sent.len == n && memcmp(h.writer_sent.data, b, n) == 0);
    n = wire_command_complete(b, "INSERT 0 1");
    n += wire_rfq(b + n, 'I', 97500059720ull);
    CHECK(feed_backend(s, &h, WRITER, b, n) == 0);
    tags(&h.to_client, t, sizeof t);
    CHECK(strcmp(t, "CZ") == 0);
    h.to_client.len = 0;

    /* The read waits on a reader with the exact W-4 wrapper. */
    n = wire_query(b, "SELECT v FROM t WHERE k = 1");
    CHECK(feed_client(s, &h, b, n) == 0);
    CHECK(h.acquired);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, READER, POLARSPLIT_EVENT_READER_ATTACHED, h.acquired_server,
                                                     0, 1000),
                 POLARSPLIT_OK);
    CHECK(drain(s, &h) == 0);
    CHECK(contains(&h.reader_sent,
                   "SET polar_consistency_mode = 'strict'; SET polar_proxy_wait_timeout_ms = 1000; "
                   "SET polar_xact_split_wait_lsn = '97500059720'; SELECT v FROM t WHERE k = 1"));
    CHECK(h.last_decision.outcome == POLARSPLIT_OUTCOME_REPLICA_WITH_WAIT);
    CHECK(strcmp(polarsplit_reason_name(h.last_decision.reason), "READ_WAIT") == 0);
    CHECK(h.last_decision.wait && h.last_decision.target_lsn == 97500059720ull);
    CHECK(strcmp(polarsplit_outcome_name(h.last_decision.outcome), "REPLICA_WITH_WAIT") == 0);

    uint64_t exec = 0;
    CHECK_STATUS(polarsplit_session_executing_conn(s, &exec), POLARSPLIT_OK);
    CHECK(exec == READER);

    n = 0;
    for (int i = 0; i < 3; i++) n += wire_command_complete(b + n, "SET");
    uint8_t rd[] = {0, 1, 'v', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    n += wire_msg(b + n, 'T', rd, sizeof rd);
    uint8_t row[] = {0, 1, 0, 0, 0, 1, '7'};
    n += wire_msg(b + n, 'D', row, sizeof row);
    n += wire_command_complete(b + n, "SELECT 1");
    n += wire_rfq(b + n, 'I', 97500059800ull);
    CHECK(feed_backend(s, &h, READER, b, n) == 0);
    tags(&h.to_client, t, sizeof t);
    CHECK(strcmp(t, "TDCZ") == 0);
    CHECK(!contains(&h.to_client, "SET"));
    CHECK(h.released);
    /* forwarded + discarded = fed, on every stream. */
    CHECK(h.client_pending.len == 0 && h.writer_pending.len == 0 && h.reader_pending.len == 0);

    /* Counters by name. */
    uint32_t count = polarsplit_counter_count();
    CHECK(count > 10);
    int found = 0;
    for (uint32_t i = 0; i < count; i++) {
        const char *name = polarsplit_counter_name(i);
        CHECK(name != NULL);
        if (strcmp(name, "waits_sent") == 0) {
            uint64_t v = 0;
            CHECK_STATUS(polarsplit_engine_counter(e, i, &v), POLARSPLIT_OK);
            CHECK(v == 1);
            found = 1;
        }
    }
    CHECK(found);
    CHECK(polarsplit_counter_name(count) == NULL);
    uint64_t v = 0;
    CHECK_STATUS(polarsplit_engine_outcome_count(e, POLARSPLIT_OUTCOME_REPLICA_WITH_WAIT, &v), POLARSPLIT_OK);
    CHECK(v == 1);

    polarsplit_session_free(s);
    polarsplit_engine_free(e);
    return 0;
}

int ctest_session_misuse(void) {
    polarsplit_engine *e = engine_with_readers();
    CHECK(e != NULL);
    polarsplit_session *s = NULL;
    CHECK_STATUS(polarsplit_session_new(e, NULL, 0, &s), POLARSPLIT_OK);
    polarsplit_action a;
    uint8_t q[64];
    size_t n = wire_query(q, "SELECT 1");
    size_t consumed = 99;

    CHECK_STATUS(polarsplit_session_recv_client(NULL, q, n, 0, &consumed), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_recv_client(s, NULL, 5, 0, &consumed), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_recv_client(s, NULL, 0, 0, NULL), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_session_poll_action(s, NULL, sizeof(polarsplit_action)), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_poll_action(NULL, &a, sizeof a), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, 1, 99, 0, 0, 0), POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, 1, POLARSPLIT_EVENT_CONNECTION_LOST, 0, 1u << 20, 0),
                 POLARSPLIT_ERR_INVALID_ARGUMENT);
    /* Events out of order. */
    CHECK_STATUS(polarsplit_session_on_backend_event(s, 1, POLARSPLIT_EVENT_WRITER_CONNECTED, 0, 0, 0),
                 POLARSPLIT_ERR_BAD_STATE);
    /* Bytes from a connection the session does not use. */
    CHECK_STATUS(polarsplit_session_recv_backend(s, 12345, q, n, 0), POLARSPLIT_ERR_UNKNOWN_CONNECTION);
    char err[128];
    CHECK(polarsplit_session_last_error(s, err, sizeof err) > 0);
    CHECK(strstr(err, "12345") != NULL);

    /* An input while actions are pending is refused and changes nothing. */
    static const uint8_t startup[] = {0, 0, 0, 18, 0, 3, 0, 0, 'u', 's', 'e', 'r', 0, 'a', 'p', 'p', 0, 0};
    CHECK_STATUS(polarsplit_session_recv_client(s, startup, sizeof startup, 0, &consumed), POLARSPLIT_OK);
    CHECK(consumed == sizeof startup);
    CHECK_STATUS(polarsplit_session_recv_client(s, q, n, 0, &consumed), POLARSPLIT_ERR_BAD_STATE);
    CHECK(consumed == 0);
    while (polarsplit_session_poll_action(s, &a, sizeof a) == POLARSPLIT_OK) {
    }
    CHECK_STATUS(polarsplit_session_poll_action(s, &a, sizeof a), POLARSPLIT_DONE);
    CHECK(a.kind == POLARSPLIT_ACTION_NONE);

    /* A malformed client message: protocol error, then the session is closed. */
    static const uint8_t bad[] = {'Q', 0, 0, 0, 2};
    CHECK_STATUS(polarsplit_session_on_backend_event(s, WRITER, POLARSPLIT_EVENT_WRITER_CONNECTED, 0, 0, 0),
                 POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_session_recv_client(s, bad, sizeof bad, 0, &consumed), POLARSPLIT_ERR_PROTOCOL);
    int closed = 0;
    while (polarsplit_session_poll_action(s, &a, sizeof a) == POLARSPLIT_OK)
        if (a.kind == POLARSPLIT_ACTION_CLOSE_CLIENT) closed = 1;
    CHECK(closed);
    CHECK_STATUS(polarsplit_session_recv_client(s, q, n, 0, &consumed), POLARSPLIT_ERR_CLOSED);

    CHECK(polarsplit_reason_name(0) == NULL);
    CHECK(polarsplit_reason_name(100000) == NULL);
    CHECK(polarsplit_outcome_name(5) == NULL);
    CHECK_STATUS(polarsplit_engine_set_dialect(e, 0, 7), POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(polarsplit_engine_set_reader_hostgroup(e, 0, -2), POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(polarsplit_engine_add_reader(NULL, 1, 1), POLARSPLIT_ERR_NULL);
    polarsplit_session_free(s);
    polarsplit_engine_free(e);
    return 0;
}

int ctest_facts_input(void);

/* SPEC §0: a libpq-based host reports parsed facts; byte actions then count messages. */
int ctest_facts_input(void) {
    static host_t h;
    memset(&h, 0, sizeof h);
    polarsplit_engine *e = engine_with_readers();
    CHECK(e != NULL);
    polarsplit_client_info info = {"10.0.0.7", 40000, NULL, 0, -1};
    polarsplit_session *s = NULL;
    CHECK_STATUS(polarsplit_session_new(e, &info, sizeof info, &s), POLARSPLIT_OK);
    static const uint8_t startup[] = {0, 0, 0, 18, 0, 3, 0, 0, 'u', 's', 'e', 'r', 0, 'a', 'p', 'p', 0, 0};
    CHECK(feed_client(s, &h, startup, sizeof startup) == 0);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, WRITER, POLARSPLIT_EVENT_WRITER_CONNECTED, 0, 0, 1000),
                 POLARSPLIT_OK);
    polarsplit_backend_fact f;
    memset(&f, 0, sizeof f);
    f.kind = POLARSPLIT_FACT_READY_FOR_QUERY;
    f.status = 'I';
    f.lsn_state = POLARSPLIT_LSN_AT;
    f.lsn = 0x1000;
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 1000), POLARSPLIT_OK);
    polarsplit_action a;
    int saw_discard = 0;
    while (polarsplit_session_poll_action(s, &a, sizeof a) == POLARSPLIT_OK)
        if (a.kind == POLARSPLIT_ACTION_DISCARD_BACKEND) saw_discard = (a.discard_backend.n == 1);
    CHECK(saw_discard); /* the extended RFQ is replaced by a standard one */
    /* SPEC S-5: the writer answers the capture that follows its startup RFQ (CloseComplete,
     * ParseComplete, BindComplete, CloseComplete, CommandComplete, RFQ; rows a facts host does
     * not carry): all swallowed. */
    {
        const uint8_t other[4] = {'3', '1', '2', '3'};
        for (int i = 0; i < 4; i++) {
            memset(&f, 0, sizeof f);
            f.kind = POLARSPLIT_FACT_OTHER;
            f.tag = other[i];
            CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 1000), POLARSPLIT_OK);
            while (polarsplit_session_poll_action(s, &a, sizeof a) == POLARSPLIT_OK)
                CHECK(a.kind == POLARSPLIT_ACTION_DISCARD_BACKEND);
        }
        memset(&f, 0, sizeof f);
        f.kind = POLARSPLIT_FACT_COMMAND_COMPLETE;
        f.text = (const uint8_t *)"SELECT 2";
        f.text_len = 8;
        CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 1000), POLARSPLIT_OK);
        while (polarsplit_session_poll_action(s, &a, sizeof a) == POLARSPLIT_OK)
            CHECK(a.kind == POLARSPLIT_ACTION_DISCARD_BACKEND);
        memset(&f, 0, sizeof f);
        f.kind = POLARSPLIT_FACT_READY_FOR_QUERY;
        f.status = 'I';
        f.lsn_state = POLARSPLIT_LSN_AT;
        f.lsn = 0x1000;
        CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 1000), POLARSPLIT_OK);
        while (polarsplit_session_poll_action(s, &a, sizeof a) == POLARSPLIT_OK)
            CHECK(a.kind == POLARSPLIT_ACTION_DISCARD_BACKEND);
    }

    uint8_t q[64];
    size_t n = wire_query(q, "INSERT INTO t VALUES (1)");
    CHECK(feed_client(s, &h, q, n) == 0);
    memset(&f, 0, sizeof f);
    f.kind = POLARSPLIT_FACT_COMMAND_COMPLETE;
    f.text = (const uint8_t *)"INSERT 0 1";
    f.text_len = 10;
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 1000), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_session_poll_action(s, &a, sizeof a), POLARSPLIT_OK);
    CHECK(a.kind == POLARSPLIT_ACTION_FORWARD_BACKEND && a.forward_backend.n == 1);
    CHECK_STATUS(polarsplit_session_poll_action(s, &a, sizeof a), POLARSPLIT_DONE);
    /* Invalid facts are refused. */
    f.kind = 99;
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 1000), POLARSPLIT_ERR_INVALID_ARGUMENT);
    f.kind = POLARSPLIT_FACT_READY_FOR_QUERY;
    f.status = 'Q';
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 1000), POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, NULL, sizeof(polarsplit_backend_fact), 1000), POLARSPLIT_ERR_NULL);
    f.status = 'I';
    f.lsn_state = POLARSPLIT_LSN_AT;
    f.lsn = 0x5000;
    CHECK_STATUS(polarsplit_session_recv_backend_fact(s, WRITER, &f, sizeof f, 1000), POLARSPLIT_OK);
    while (polarsplit_session_poll_action(s, &a, sizeof a) == POLARSPLIT_OK) {
    }
    polarsplit_session_free(s);
    polarsplit_engine_free(e);
    return 0;
}
