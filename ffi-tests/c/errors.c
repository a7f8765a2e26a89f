/* The error contract of polarsplit_session_recv_client (issue 17 point 8): on every error
 * status the consumed count and the queued actions agree and say what to do. On
 * POLARSPLIT_ERR_PROTOCOL every byte passed is consumed; the actions cover the messages before
 * the violation, then send the 08P01 FATAL, close the backends and close the client — and ask
 * for nothing (no ACQUIRE_READER for a session that is closing). */
#include <string.h>

#include "polarsplit.h"
#include "harness.h"

int ctest_recv_client_protocol_error_consumes_all_and_sends_the_fatal(void);
int ctest_recv_client_other_errors_consume_nothing(void);

#define WRITER 100u

static const uint8_t STARTUP[] = {0,   0,   0,   30,  0,   3,   0,   0,   'u', 's', 'e', 'r', 0,   'a', 'p',
                                  'p', 0,   'd', 'a', 't', 'a', 'b', 'a', 's', 'e', 0,   'd', 'b', 0,   0};

typedef struct {
    uint32_t kinds[32];
    int n;
    size_t client_covered; /* FORWARD_CLIENT + DISCARD_CLIENT */
    size_t forwarded_to_writer;
    int fatal_08p01;       /* a SEND_CLIENT carrying an ErrorResponse with S=FATAL, C=08P01 */
    int fatal_before_close;
} seen_t;

static int contains(const uint8_t *b, size_t n, const char *s) {
    size_t k = strlen(s) + 1; /* with its NUL: a whole field */
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(b + i, s, k) == 0) return 1;
    return 0;
}

static int drain(polarsplit_session *s, seen_t *seen) {
    polarsplit_action a;
    int st;
    memset(seen, 0, sizeof *seen);
    while ((st = polarsplit_session_poll_action(s, &a, sizeof a)) == POLARSPLIT_OK) {
        if (seen->n < 32) seen->kinds[seen->n++] = a.kind;
        switch (a.kind) {
        case POLARSPLIT_ACTION_FORWARD_CLIENT:
            seen->client_covered += a.forward_client.n;
            if (a.forward_client.conn == WRITER) seen->forwarded_to_writer += a.forward_client.n;
            break;
        case POLARSPLIT_ACTION_DISCARD_CLIENT: seen->client_covered += a.discard_client.n; break;
        case POLARSPLIT_ACTION_SEND_CLIENT: {
            const uint8_t *b = a.send_client.bytes.ptr;
            size_t n = a.send_client.bytes.len;
            if (n > 5 && b[0] == 'E' && contains(b, n, "VFATAL") && contains(b, n, "C08P01")) seen->fatal_08p01 = 1;
            break;
        }
        case POLARSPLIT_ACTION_CLOSE_CLIENT: seen->fatal_before_close = seen->fatal_08p01; break;
        default: break;
        }
    }
    CHECK_STATUS(st, POLARSPLIT_DONE);
    return 0;
}

static int count(const seen_t *seen, uint32_t kind) {
    int c = 0;
    for (int i = 0; i < seen->n; i++) c += seen->kinds[i] == kind;
    return c;
}

/* Startup, writer connected, trust auth, first RFQ. */
static int connect(polarsplit_session *s) {
    seen_t seen;
    size_t consumed = 0;
    CHECK_STATUS(polarsplit_session_recv_client(s, STARTUP, sizeof STARTUP, 0, &consumed), POLARSPLIT_OK);
    CHECK(drain(s, &seen) == 0);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, WRITER, POLARSPLIT_EVENT_WRITER_CONNECTED, 0, 0, 0),
                 POLARSPLIT_OK);
    CHECK(drain(s, &seen) == 0);
    uint8_t b[64];
    size_t n = 0;
    int32_t zero = 0;
    n += wire_msg(b + n, 'R', &zero, 4);
    n += wire_rfq(b + n, 'I', 0x1000);
    CHECK_STATUS(polarsplit_session_recv_backend(s, WRITER, b, n, 0), POLARSPLIT_OK);
    CHECK(drain(s, &seen) == 0);
    return 0;
}

int ctest_recv_client_protocol_error_consumes_all_and_sends_the_fatal(void) {
    polarsplit_engine *e = harness_engine(1);
    CHECK(e != NULL);
    static const uint8_t bad[] = {'Q', 0, 0, 0, 2}; /* a length below its own size */

    /* 1. Garbage in place of the startup packet. */
    polarsplit_session *s = NULL;
    CHECK_STATUS(polarsplit_session_new(e, NULL, 0, &s), POLARSPLIT_OK);
    static const uint8_t junk[] = {0, 0, 0, 3, 'x', 'y', 'z'};
    size_t consumed = 0;
    seen_t seen;
    CHECK_STATUS(polarsplit_session_recv_client(s, junk, sizeof junk, 0, &consumed), POLARSPLIT_ERR_PROTOCOL);
    CHECK(consumed == sizeof junk);
    CHECK(drain(s, &seen) == 0);
    CHECK(seen.fatal_08p01 && seen.fatal_before_close);
    CHECK(seen.n > 0 && seen.kinds[seen.n - 1] == POLARSPLIT_ACTION_CLOSE_CLIENT);
    CHECK(seen.client_covered <= consumed);
    consumed = 7;
    CHECK_STATUS(polarsplit_session_recv_client(s, junk, sizeof junk, 0, &consumed), POLARSPLIT_ERR_CLOSED);
    CHECK(consumed == 0);
    polarsplit_session_free(s);

    /* 2. A valid write, then a violation, in one read: the write is forwarded (as a server
     * would have run it), the rest consumed; FATAL, then the closes. */
    CHECK_STATUS(polarsplit_session_new(e, NULL, 0, &s), POLARSPLIT_OK);
    CHECK(connect(s) == 0);
    uint8_t b[256];
    size_t w = wire_query(b, "INSERT INTO t VALUES (1)");
    size_t n = w;
    memcpy(b + n, bad, sizeof bad);
    n += sizeof bad;
    n += wire_query(b + n, "SELECT 2"); /* after the violation: never looked at */
    CHECK_STATUS(polarsplit_session_recv_client(s, b, n, 0, &consumed), POLARSPLIT_ERR_PROTOCOL);
    CHECK(consumed == n);
    CHECK(drain(s, &seen) == 0);
    CHECK(seen.forwarded_to_writer == w);
    CHECK(seen.client_covered == w); /* the bad message and what follows: dropped with the client */
    CHECK(seen.fatal_08p01 && seen.fatal_before_close);
    CHECK(count(&seen, POLARSPLIT_ACTION_CLOSE_BACKEND) == 1);
    CHECK(seen.kinds[seen.n - 1] == POLARSPLIT_ACTION_CLOSE_CLIENT);
    CHECK(count(&seen, POLARSPLIT_ACTION_ACQUIRE_READER) == 0);
    polarsplit_session_free(s);

    /* 3. A read decided at once (it would go to a reader), then a violation: the session is
     * closing, so it asks for no reader connection. */
    CHECK_STATUS(polarsplit_session_new(e, NULL, 0, &s), POLARSPLIT_OK);
    CHECK(connect(s) == 0);
    n = wire_query(b, "SELECT 1");
    memcpy(b + n, bad, sizeof bad);
    n += sizeof bad;
    CHECK_STATUS(polarsplit_session_recv_client(s, b, n, 0, &consumed), POLARSPLIT_ERR_PROTOCOL);
    CHECK(consumed == n);
    CHECK(drain(s, &seen) == 0);
    CHECK(count(&seen, POLARSPLIT_ACTION_ACQUIRE_READER) == 0);
    CHECK(seen.client_covered <= n);
    CHECK(seen.fatal_08p01 && seen.fatal_before_close);
    CHECK(seen.kinds[seen.n - 1] == POLARSPLIT_ACTION_CLOSE_CLIENT);
    CHECK_STATUS(polarsplit_session_on_backend_event(s, 201, POLARSPLIT_EVENT_READER_ATTACHED, 1, 0, 0),
                 POLARSPLIT_ERR_CLOSED);
    polarsplit_session_free(s);
    polarsplit_engine_free(e);
    return 0;
}

int ctest_recv_client_other_errors_consume_nothing(void) {
    polarsplit_engine *e = harness_engine(1);
    CHECK(e != NULL);
    polarsplit_session *s = NULL;
    CHECK_STATUS(polarsplit_session_new(e, NULL, 0, &s), POLARSPLIT_OK);
    size_t consumed = 99;
    /* Actions pending: refused, nothing taken, the pending actions unchanged. */
    CHECK_STATUS(polarsplit_session_recv_client(s, STARTUP, sizeof STARTUP, 0, &consumed), POLARSPLIT_OK);
    consumed = 99;
    CHECK_STATUS(polarsplit_session_recv_client(s, STARTUP, sizeof STARTUP, 0, &consumed), POLARSPLIT_ERR_BAD_STATE);
    CHECK(consumed == 0);
    seen_t seen;
    CHECK(drain(s, &seen) == 0);
    CHECK(seen.n == 2 && seen.client_covered == sizeof STARTUP);
    /* Bad arguments: nothing taken. */
    consumed = 99;
    CHECK_STATUS(polarsplit_session_recv_client(s, NULL, 3, 0, &consumed), POLARSPLIT_ERR_NULL);
    CHECK(consumed == 0);
    consumed = 99;
    CHECK_STATUS(polarsplit_session_recv_client(s, STARTUP, SIZE_MAX, 0, &consumed), POLARSPLIT_ERR_INVALID_ARGUMENT);
    CHECK(consumed == 0);
    CHECK(drain(s, &seen) == 0 && seen.n == 0);
    polarsplit_session_free(s);
    polarsplit_engine_free(e);
    return 0;
}
