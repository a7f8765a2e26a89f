/* Tiny helpers for the C tests: checks that print themselves and return their line, and builders
 * of the wire messages the tests feed. */
#ifndef POLARSPLIT_CTEST_HARNESS_H
#define POLARSPLIT_CTEST_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "polarsplit.h"

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            return __LINE__;                                                     \
        }                                                                        \
    } while (0)

#define CHECK_STATUS(expr, expected)                                             \
    do {                                                                         \
        int got_ = (int)(expr);                                                  \
        if (got_ != (int)(expected)) {                                           \
            fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d\n", __FILE__, \
                    __LINE__, #expr, got_, polarsplit_status_str(got_), (int)(expected)); \
            return __LINE__;                                                     \
        }                                                                        \
    } while (0)

/* Appends one tagged message (tag, length, body) at `out`; returns its size. */
static inline size_t wire_msg(uint8_t *out, char tag, const void *body, size_t n) {
    uint32_t len = (uint32_t)(n + 4);
    out[0] = (uint8_t)tag;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
    if (n > 0) memcpy(out + 5, body, n);
    return n + 5;
}

static inline size_t wire_query(uint8_t *out, const char *sql) { return wire_msg(out, 'Q', sql, strlen(sql) + 1); }

/* ReadyForQuery with the LSN extension (W-2) the session asks its backends for. */
static inline size_t wire_rfq(uint8_t *out, char status, uint64_t lsn) {
    uint8_t b[9];
    b[0] = (uint8_t)status;
    for (int i = 0; i < 8; i++) b[1 + i] = (uint8_t)(lsn >> (56 - 8 * i));
    return wire_msg(out, 'Z', b, 9);
}

static inline size_t wire_command_complete(uint8_t *out, const char *tag) {
    return wire_msg(out, 'C', tag, strlen(tag) + 1);
}

/* The writer's answer to the capture of its session's state that the library sends right behind
 * the writer's startup ReadyForQuery (SPEC S-5), for the session user `app` with no login-time
 * settings: CloseComplete, ParseComplete, BindComplete, CloseComplete (its statement closed
 * before its Parse and after its Bind: none stays prepared), the session authorization and role
 * rows (names and values hex-encoded), CommandComplete, ReadyForQuery (152 bytes). `out` needs 160 bytes. */
static inline size_t wire_startup_capture_answer(uint8_t *out) {
    static const char *const rows[2][3] = {
        {"2", "73657373696f6e5f617574686f72697a6174696f6e", "617070"}, /* session_authorization app */
        {"3", "726f6c65", "6e6f6e65"},                                 /* role none */
    };
    size_t n = 0;
    n += wire_msg(out + n, '3', NULL, 0);
    n += wire_msg(out + n, '1', NULL, 0);
    n += wire_msg(out + n, '2', NULL, 0);
    n += wire_msg(out + n, '3', NULL, 0);
    for (int r = 0; r < 2; r++) {
        uint8_t row[128];
        size_t m = 0;
        row[m++] = 0;
        row[m++] = 3;
        for (int c = 0; c < 3; c++) {
            uint32_t len = (uint32_t)strlen(rows[r][c]);
            row[m++] = (uint8_t)(len >> 24);
            row[m++] = (uint8_t)(len >> 16);
            row[m++] = (uint8_t)(len >> 8);
            row[m++] = (uint8_t)len;
            memcpy(row + m, rows[r][c], len);
            m += len;
        }
        n += wire_msg(out + n, 'D', row, m);
    }
    n += wire_command_complete(out + n, "SELECT 2");
    n += wire_rfq(out + n, 'I', 0x1000);
    return n;
}

/* An engine with the default configuration and `readers` reader servers 1.. in hostgroup 1. */
static inline polarsplit_engine *harness_engine(uint32_t readers) {
    polarsplit_config_builder *b = polarsplit_config_builder_new();
    polarsplit_config *c = NULL;
    polarsplit_engine *e = NULL;
    if (polarsplit_config_builder_build(b, &c, NULL, 0) != POLARSPLIT_OK) return NULL;
    if (polarsplit_engine_new(c, &e) != POLARSPLIT_OK) e = NULL;
    polarsplit_config_free(c);
    for (uint32_t i = 1; e && i <= readers; i++) polarsplit_engine_add_reader(e, i, 1);
    return e;
}

#endif
