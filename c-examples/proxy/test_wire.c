/* The proxy's wire helpers on what real servers send (run by tests/e2e/test_proxy_limits.py, and
 * under ASan by `make -C c-examples asan`, which scripts/test-sanitizers.sh runs):
 *   - error_is_fatal judges by 'V', never translated, not by 'S', which a server with another
 *     lc_messages translates ("ВАЖНО" is a Russian server's FATAL); a body cut anywhere is read
 *     within its length (the old check compared 6 bytes of a body it knew to have 5);
 *   - startup_param takes the last of a key given twice, as PostgreSQL and the library do;
 *   - the writer monitor's identity answer (SPEC C-1): DataRow columns read within the row's
 *     length, a system identifier that is a bigint, a timeline from a WAL file name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"

static int failed;

#define EXPECT(cond)                                                        \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
            failed = 1;                                                     \
        }                                                                   \
    } while (0)

/* The body in a buffer of exactly its size (ASan sees a read past it). */
static int fatal_exact(const void *body, size_t len) {
    uint8_t *b = malloc(len ? len : 1);
    if (!b) abort();
    memcpy(b, body, len);
    int r = error_is_fatal(b, len);
    free(b);
    return r;
}

#define BODY(s) s, sizeof s - 1

int main(void) {
    EXPECT(fatal_exact(BODY("SFATAL\0VFATAL\0C57P01\0Mterminating connection\0\0")));
    EXPECT(fatal_exact(BODY("S\xd0\x92\xd0\x90\xd0\x96\xd0\x9d\xd0\x9e\0VFATAL\0C57P01\0\0")));
    EXPECT(fatal_exact(BODY("SPANIK\0VPANIC\0CXX000\0\0")));
    EXPECT(!fatal_exact(BODY("SFATAL\0VERROR\0C42P01\0\0")) && "V decides over S");
    EXPECT(!fatal_exact(BODY("SERROR\0VERROR\0C42P01\0\0")));
    EXPECT(fatal_exact(BODY("SFATAL\0C57P01\0\0")) && "no V (before 9.6): S decides");
    EXPECT(!fatal_exact(BODY("SFATA")));
    EXPECT(fatal_exact(BODY("VFATAL"))); /* an unterminated last field: read within its length */
    EXPECT(!fatal_exact(BODY("")));
    for (size_t cut = 0; cut < 30; cut++) (void)fatal_exact("SFATAL\0VFATAL\0C57P01\0Mterminating\0\0", cut);

    static const uint8_t pkt[] = "\0\0\0\0\0\x03\0\0user\0first\0database\0db\0user\0last\0\0";
    char out[32];
    EXPECT(startup_param(pkt, sizeof pkt - 1, "user", out, sizeof out) == 0 && strcmp(out, "last") == 0);
    EXPECT(startup_param(pkt, sizeof pkt - 1, "database", out, sizeof out) == 0 && strcmp(out, "db") == 0);
    EXPECT(startup_param(pkt, sizeof pkt - 1, "options", out, sizeof out) == -1);
    EXPECT(startup_param(pkt, sizeof pkt - 1, "user", out, 4) == -1); /* "last" needs 5 */
    for (size_t cut = 0; cut < sizeof pkt - 1; cut++) {
        uint8_t *b = malloc(cut ? cut : 1);
        if (!b) abort();
        memcpy(b, pkt, cut);
        (void)startup_param(b, cut, "user", out, sizeof out);
        free(b);
    }
    /* A DataRow: '0/3000060', NULL, '7301234567890123456', '000000020000000000000003'. */
    static const uint8_t row[] = "\0\x04"
                                 "\0\0\0\x09" "0/3000060"
                                 "\xff\xff\xff\xff"
                                 "\0\0\0\x13" "7301234567890123456"
                                 "\0\0\0\x18" "000000020000000000000003";
    const uint8_t *v = NULL;
    size_t vl = 0;
    EXPECT(row_field(row, sizeof row - 1, 0, &v, &vl) == 0 && vl == 9 && memcmp(v, "0/3000060", 9) == 0);
    EXPECT(row_field(row, sizeof row - 1, 1, &v, &vl) == 1);
    EXPECT(row_field(row, sizeof row - 1, 2, &v, &vl) == 0 && vl == 19);
    uint64_t sys = 0;
    EXPECT(parse_system_id((const char *)v, vl, &sys) == 0 && sys == 7301234567890123456ull);
    EXPECT(row_field(row, sizeof row - 1, 3, &v, &vl) == 0 && vl == 24);
    uint32_t tli = 0;
    EXPECT(parse_walfile_timeline((const char *)v, vl, &tli) == 0 && tli == 2);
    EXPECT(row_field(row, sizeof row - 1, 4, &v, &vl) == -1);
    for (size_t cut = 0; cut < sizeof row - 1; cut++) {
        uint8_t *b = malloc(cut ? cut : 1);
        if (!b) abort();
        memcpy(b, row, cut);
        EXPECT(row_field(b, cut, 3, &v, &vl) == -1); /* the last column is never whole in a cut row */
        free(b);
    }
    EXPECT(parse_system_id(BODY("-1"), &sys) == 0 && sys == UINT64_MAX);
    EXPECT(parse_system_id(BODY("9223372036854775807"), &sys) == 0 && sys == 9223372036854775807ull);
    EXPECT(parse_system_id(BODY("-9223372036854775808"), &sys) == 0 && sys == 9223372036854775808ull);
    EXPECT(parse_system_id(BODY("9223372036854775808"), &sys) == -1);
    EXPECT(parse_system_id(BODY("18446744073709551616"), &sys) == -1);
    EXPECT(parse_system_id(BODY(""), &sys) == -1 && parse_system_id(BODY("-"), &sys) == -1);
    EXPECT(parse_system_id(BODY("12a"), &sys) == -1);
    EXPECT(parse_walfile_timeline(BODY("0000000A0000000000000003"), &tli) == 0 && tli == 10);
    EXPECT(parse_walfile_timeline(BODY("FFFFFFFF0000000000000003"), &tli) == 0 && tli == UINT32_MAX);
    EXPECT(parse_walfile_timeline(BODY("000000000000000000000003"), &tli) == -1);
    EXPECT(parse_walfile_timeline(BODY("00000001000000000000003"), &tli) == -1);
    EXPECT(parse_walfile_timeline(BODY("0000000100000000000000G3"), &tli) == -1);

    if (failed) return 1;
    printf("wire helpers: ok\n");
    return 0;
}
