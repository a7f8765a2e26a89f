/* Tiny assertion helpers for the C tests: a failed check prints itself and returns its line. */
#ifndef POLARSPLIT_CTEST_HARNESS_H
#define POLARSPLIT_CTEST_HARNESS_H

#include <stdio.h>

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

#endif
