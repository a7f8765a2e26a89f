/* C ABI basics (issue 2): create/free, every NULL argument, status strings, version macros,
 * configuration errors, and handle lifetimes. */
#include <string.h>

#include "polarsplit.h"
#include "harness.h"

int ctest_create_free(void);
int ctest_null_arguments(void);
int ctest_status_strings(void);
int ctest_version_macros(void);
int ctest_config_errors(void);
int ctest_lifetimes(void);

static polarsplit_config *default_config(void) {
    polarsplit_config_builder *b = polarsplit_config_builder_new();
    polarsplit_config *c = NULL;
    if (b == NULL) return NULL;
    if (polarsplit_config_builder_build(b, &c, NULL, 0) != POLARSPLIT_OK) return NULL;
    return c;
}

int ctest_create_free(void) {
    char err[256];
    polarsplit_config_builder *b = polarsplit_config_builder_new();
    CHECK(b != NULL);
    CHECK_STATUS(polarsplit_config_builder_set(b, "consistency", "global", err, sizeof err), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_config_builder_set(b, "wait_timeout_ms", "250", err, sizeof err), POLARSPLIT_OK);
    polarsplit_config *c = NULL;
    CHECK_STATUS(polarsplit_config_builder_build(b, &c, err, sizeof err), POLARSPLIT_OK);
    CHECK(c != NULL);
    polarsplit_engine *e = NULL;
    CHECK_STATUS(polarsplit_engine_new(c, &e), POLARSPLIT_OK);
    CHECK(e != NULL);
    polarsplit_session *s = NULL;
    CHECK_STATUS(polarsplit_session_new(e, NULL, 0, &s), POLARSPLIT_OK);
    CHECK(s != NULL);
    CHECK(!polarsplit_session_is_poisoned(s));
    CHECK(polarsplit_session_last_error(s, err, sizeof err) == 0);
    CHECK(err[0] == '\0');
    polarsplit_session_free(s);
    polarsplit_engine_free(e);
    polarsplit_config_free(c);
    return 0;
}

int ctest_null_arguments(void) {
    char err[64];
    /* Frees of NULL are no-ops. */
    polarsplit_config_builder_free(NULL);
    polarsplit_config_free(NULL);
    polarsplit_engine_free(NULL);
    polarsplit_session_free(NULL);

    polarsplit_config_builder *b = polarsplit_config_builder_new();
    CHECK(b != NULL);
    CHECK_STATUS(polarsplit_config_builder_set(NULL, "consistency", "off", err, sizeof err), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_config_builder_set(b, NULL, "off", err, sizeof err), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_config_builder_set(b, "consistency", NULL, err, sizeof err), POLARSPLIT_ERR_NULL);
    /* A NULL error buffer is allowed. */
    CHECK_STATUS(polarsplit_config_builder_set(b, "consistency", "bogus", NULL, 0), POLARSPLIT_ERR_CONFIG);

    polarsplit_config *c = (polarsplit_config *)&err; /* must be overwritten with NULL */
    CHECK_STATUS(polarsplit_config_builder_build(NULL, &c, err, sizeof err), POLARSPLIT_ERR_NULL);
    CHECK(c == NULL);
    /* A NULL out consumes the builder anyway (no leak: valgrind and ASan check this later). */
    CHECK_STATUS(polarsplit_config_builder_build(b, NULL, err, sizeof err), POLARSPLIT_ERR_NULL);

    c = default_config();
    CHECK(c != NULL);
    polarsplit_engine *e = (polarsplit_engine *)&err;
    CHECK_STATUS(polarsplit_engine_new(NULL, &e), POLARSPLIT_ERR_NULL);
    CHECK(e == NULL);
    CHECK_STATUS(polarsplit_engine_new(c, NULL), POLARSPLIT_ERR_NULL);
    CHECK_STATUS(polarsplit_engine_new(c, &e), POLARSPLIT_OK);

    polarsplit_session *s = (polarsplit_session *)&err;
    CHECK_STATUS(polarsplit_session_new(NULL, NULL, 0, &s), POLARSPLIT_ERR_NULL);
    CHECK(s == NULL);
    CHECK_STATUS(polarsplit_session_new(e, NULL, 0, NULL), POLARSPLIT_ERR_NULL);

    CHECK(polarsplit_session_last_error(NULL, err, sizeof err) == 0);
    CHECK(!polarsplit_session_is_poisoned(NULL));

    polarsplit_engine_free(e);
    polarsplit_config_free(c);
    return 0;
}

int ctest_status_strings(void) {
    const int codes[] = {POLARSPLIT_OK, POLARSPLIT_DONE, POLARSPLIT_ERR_NULL,
                         POLARSPLIT_ERR_INVALID_ARGUMENT, POLARSPLIT_ERR_BAD_STATE,
                         POLARSPLIT_ERR_PROTOCOL, POLARSPLIT_ERR_CONFIG, POLARSPLIT_ERR_PANIC,
                         POLARSPLIT_ERR_POISONED, POLARSPLIT_ERR_UNKNOWN_CONNECTION,
                         POLARSPLIT_ERR_LIMIT, POLARSPLIT_ERR_CLOSED, POLARSPLIT_ERR_ABI};
    const size_t n = sizeof codes / sizeof codes[0];
    const char *unknown = polarsplit_status_str(12345);
    CHECK(unknown != NULL && strcmp(unknown, "unknown status") == 0);
    CHECK(strcmp(polarsplit_status_str(-12345), "unknown status") == 0);
    for (size_t i = 0; i < n; i++) {
        const char *s = polarsplit_status_str(codes[i]);
        CHECK(s != NULL && s[0] != '\0');
        CHECK(strcmp(s, unknown) != 0);
        for (size_t j = 0; j < i; j++) {
            CHECK(codes[i] != codes[j]);
            CHECK(strcmp(s, polarsplit_status_str(codes[j])) != 0);
        }
        /* 0 ok, positive informational, negative errors. */
        CHECK((codes[i] < 0) == (strncmp(s, "ok", 2) != 0 && strncmp(s, "done", 4) != 0));
    }
    return 0;
}

int ctest_version_macros(void) {
    char expect[64];
    CHECK(strcmp(polarsplit_version(), POLARSPLIT_VERSION) == 0);
    CHECK(polarsplit_abi_version() == POLARSPLIT_ABI_VERSION);
    snprintf(expect, sizeof expect, "%d.%d.%d", POLARSPLIT_VERSION_MAJOR, POLARSPLIT_VERSION_MINOR,
             POLARSPLIT_VERSION_PATCH);
    CHECK(strncmp(polarsplit_version(), expect, strlen(expect)) == 0);
    return 0;
}

/* F-policy: the catalogue query is the library's, one static string every host sends as it is. */
int ctest_catalog_query(void) {
    const char *q = polarsplit_catalog_query();
    CHECK(q != NULL);
    CHECK(q == polarsplit_catalog_query());
    CHECK(strncmp(q, "SET LOCAL lock_timeout = '100ms';", 33) == 0);
    CHECK(strstr(q, "pg_catalog.current_setting('server_version_num')") != NULL);
    CHECK(strstr(q, "WHERE c.relkind = 'S'") != NULL);
    CHECK(strlen(q) > 1000 && strlen(q) < 65536);
    return 0;
}

int ctest_config_errors(void) {
    char err[256];
    char tiny[8];
    polarsplit_config_builder *b = polarsplit_config_builder_new();
    CHECK(b != NULL);
    CHECK_STATUS(polarsplit_config_builder_set(b, "consistency", "strong", err, sizeof err), POLARSPLIT_ERR_CONFIG);
    CHECK(strstr(err, "consistency") != NULL);
    CHECK(strstr(err, "eventual") != NULL);
    CHECK_STATUS(polarsplit_config_builder_set(b, "no_such_setting", "1", err, sizeof err), POLARSPLIT_ERR_CONFIG);
    CHECK(strstr(err, "no_such_setting") != NULL);
    /* Truncation keeps a terminated string. */
    CHECK_STATUS(polarsplit_config_builder_set(b, "consistency", "strong", tiny, sizeof tiny), POLARSPLIT_ERR_CONFIG);
    CHECK(strlen(tiny) == sizeof tiny - 1);
    /* An invalid combination is refused at build, naming the setting, and consumes the builder. */
    CHECK_STATUS(polarsplit_config_builder_set(b, "server_dialect", "stock", err, sizeof err), POLARSPLIT_OK);
    polarsplit_config *c = NULL;
    CHECK_STATUS(polarsplit_config_builder_build(b, &c, err, sizeof err), POLARSPLIT_ERR_CONFIG);
    CHECK(c == NULL);
    CHECK(strstr(err, "server_dialect") != NULL);
    /* Invalid UTF-8 in a setting is an invalid argument. */
    b = polarsplit_config_builder_new();
    CHECK_STATUS(polarsplit_config_builder_set(b, "consistency", "\xff\xfe", err, sizeof err),
                 POLARSPLIT_ERR_INVALID_ARGUMENT);
    polarsplit_config_builder_free(b);
    return 0;
}

int ctest_lifetimes(void) {
    /* The config and the engine may be released while sessions still use them. */
    polarsplit_config *c = default_config();
    CHECK(c != NULL);
    polarsplit_engine *e = NULL;
    CHECK_STATUS(polarsplit_engine_new(c, &e), POLARSPLIT_OK);
    polarsplit_config_free(c);
    polarsplit_session *s1 = NULL, *s2 = NULL;
    CHECK_STATUS(polarsplit_session_new(e, NULL, 0, &s1), POLARSPLIT_OK);
    CHECK_STATUS(polarsplit_session_new(e, NULL, 0, &s2), POLARSPLIT_OK);
    polarsplit_engine_free(e);
    CHECK(!polarsplit_session_is_poisoned(s1));
    polarsplit_session_free(s1);
    polarsplit_session_free(s2);
    return 0;
}
