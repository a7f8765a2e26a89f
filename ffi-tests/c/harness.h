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
