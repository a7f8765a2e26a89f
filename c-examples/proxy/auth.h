/* What the proxy needs to log in on its own connections (readers and monitors), where the client
 * is not there to answer: a per-user credential map, and the cleartext, md5 and SCRAM-SHA-256
 * exchanges (libcrypto). Plus small PostgreSQL wire helpers shared by the proxy. */
#ifndef PROXY_AUTH_H
#define PROXY_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* --- Credential map: one `user:password` per line; '#' starts a comment. --- */
int creds_load(const char *path, char *err, size_t err_len);
/* The password of `user`, or NULL when the map has none. */
const char *creds_lookup(const char *user);
void creds_free(void);

/* --- Startup packets --- */
/* Copies the value of parameter `name` of a StartupMessage (length word included) into out.
 * A name given twice counts by its last value, as PostgreSQL reads it. -1 when absent. */
int startup_param(const uint8_t *pkt, size_t len, const char *name, char *out, size_t cap);
/* Appends a StartupMessage (protocol 3.0) with NULL-terminated name/value pairs. */
void startup_build(buf_t *out, const char *const *kv);

/* --- LSN text "X/Y" --- */
int parse_lsn(const char *text, size_t len, uint64_t *out);

/* --- What the writer monitor reads for causal tokens (SPEC C-1) --- */
/* Column `i` of a DataRow body: 0 with *val and *len set, 1 when it is NULL, -1 when the row has
 * no such column or is cut short. */
int row_field(const uint8_t *body, size_t blen, unsigned i, const uint8_t **val, size_t *len);
/* pg_control_system().system_identifier as text (a bigint: decimal, maybe negative, its bits are
 * the identifier's). 0 or -1. */
int parse_system_id(const char *text, size_t len, uint64_t *out);
/* The timeline of a WAL file name (pg_walfile_name(): 24 hex digits, the first 8 the timeline;
 * timelines start at 1). 0 or -1. */
int parse_walfile_timeline(const char *text, size_t len, uint32_t *out);

/* --- Authentication exchange of one connection. --- */
typedef struct scram scram_t;

typedef enum {
    AUTH_CONTINUE = 0, /* answer appended to `out` (maybe nothing): keep going */
    AUTH_OK = 1,       /* AuthenticationOk */
    AUTH_NO_CREDENTIALS = -1, /* the server wants a password and the map has none */
    AUTH_FAILED = -2,  /* a protocol or verification failure */
} auth_result;

/* Handles one Authentication ('R') message body for `user` (password may be NULL) and appends
 * the reply to `out`. `*scram` holds the SCRAM state across messages (freed by auth_free). */
auth_result auth_step(const uint8_t *body, size_t len, const char *user, const char *password,
                      scram_t **scram, buf_t *out, char *err, size_t err_len);
void auth_free(scram_t *scram);

/* Whether an ErrorResponse body is FATAL or PANIC, by its non-localised severity ('V'). */
int error_is_fatal(const uint8_t *body, size_t len);
/* The SQLSTATE ('C') and message ('M') of an ErrorResponse body. */
void error_fields(const uint8_t *body, size_t len, char *code, size_t code_cap, char *msg, size_t msg_cap);

#endif
