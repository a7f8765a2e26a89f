/*
 * pool_polarsplit_glue.h — the only door between Pgpool-II and libpolarsplit's C ABI.
 *
 * Part of polarsplit's Pgpool-II integration (integrations/pgpool in the polarsplit repository).
 * pool_polarsplit.c (the host loop) speaks only the psg_* names below; pool_polarsplit_glue.c is
 * the one file that includes <polarsplit.h> and touches polarsplit_action, its kinds, events and
 * reader keys. Porting to a new C ABI of the library is a change of pool_polarsplit_glue.c
 * alone (and of this header only if the library grows a capability the host must use).
 *
 * Lifetime: pointers inside a psg_action (bytes) are valid until the next call on the same
 * session, exactly as the library's own lifetime rule says. Fields a kind does not use are 0.
 */
#ifndef POOL_POLARSPLIT_GLUE_H
#define POOL_POLARSPLIT_GLUE_H


/* Booleans are int here: Pgpool defines its own bool (char), the library uses C99 _Bool. */
#include <stddef.h>
#include <stdint.h>

typedef struct psg_engine psg_engine;
typedef struct psg_session psg_session;

/* What the host must do; the values are the glue's own, independent of the library's. */
typedef enum
{
	PSG_NONE = 0,
	PSG_CONNECT_WRITER,			/* open the writer and send bytes (startup) */
	PSG_ACQUIRE_READER,			/* a reader connection to `server` under `key` */
	PSG_FORWARD_CLIENT,			/* next n client bytes -> conn */
	PSG_DISCARD_CLIENT,			/* drop next n client bytes */
	PSG_SEND_BACKEND,			/* bytes -> conn (hidden statements) */
	PSG_FORWARD_BACKEND,		/* next n bytes of conn -> client */
	PSG_DISCARD_BACKEND,		/* drop next n bytes of conn (swallowed results) */
	PSG_SEND_CLIENT,			/* bytes -> client */
	PSG_RELEASE_READER,			/* reader conn back; flag: needs a reset */
	PSG_PIN_WRITER,				/* flag: writer holds session state */
	PSG_CLOSE_BACKEND,			/* never reuse conn */
	PSG_CLOSE_CLIENT,			/* close the client after what was sent */
	PSG_DECISION,				/* informational: a routing decision */
	PSG_ENCRYPTION_REQUEST,		/* answer the client's SSL/GSS request with one byte */
	PSG_CANCEL_REQUEST,			/* a CancelRequest packet */
	PSG_UNKNOWN					/* a kind this glue does not know: ignore */
} psg_kind;

/* Decision outcomes, for logs and counters. */
typedef enum
{
	PSG_OUT_PASSTHROUGH = 0,
	PSG_OUT_PRIMARY,
	PSG_OUT_REPLICA,
	PSG_OUT_SPLIT,
	PSG_OUT_REJECT,
	PSG_OUT_OTHER
} psg_outcome;

/* An opaque reader key (SPEC P-9): compare with psg_key_equal only. */
typedef struct
{
	uint64_t	opaque[8];
} psg_key;

typedef struct
{
	psg_kind	kind;
	uint64_t	conn;
	uint32_t	server;
	size_t		n;
	const uint8_t *bytes;
	size_t		bytes_len;
	int		flag;
	psg_key		key;			/* ACQUIRE_READER */
	psg_outcome outcome;		/* DECISION */
	const char *outcome_name;	/* DECISION: static string */
	const char *reason_name;	/* DECISION: static string (stable names, SPEC P-1) */
	int			wait;			/* DECISION: LSN-wait statements go ahead of the statement */
	int			reader_behind;	/* DECISION: no reader was known to have replayed the target */
} psg_action;

typedef enum
{
	PSG_EV_WRITER_CONNECTED = 1,
	PSG_EV_WRITER_CONNECT_FAILED,
	PSG_EV_READER_ATTACHED,
	PSG_EV_READER_UNAVAILABLE,
	PSG_EV_CONNECTION_LOST
} psg_event_kind;

#define PSG_FLAG_FRESH			1	/* READER_ATTACHED: startup-default settings */
#define PSG_FLAG_NEEDS_RESET	2	/* READER_ATTACHED: carries an XID import */
#define PSG_FLAG_NO_CREDENTIALS	4	/* READER_UNAVAILABLE: never for this user */

/* Statuses the host distinguishes; everything else is PSG_ERR. */
typedef enum
{
	PSG_OK = 0,
	PSG_DONE,
	PSG_ERR_PROTOCOL,			/* the peer broke the protocol: poll, then close */
	PSG_ERR_CLOSED,				/* the session ended */
	PSG_ERR_UNKNOWN_CONNECTION, /* bytes of a connection the session does not use */
	PSG_ERR_POISONED,			/* a panic poisoned the session: close it */
	PSG_ERR_BAD_STATE,
	PSG_ERR_ABI,				/* library and header disagree: the session is unusable */
	PSG_ERR
} psg_status;

/* Engine: one per Pgpool child process. `settings` is "name=value,name=value" (library setting
 * names, SPEC §8). NULL on failure, with the reason in err. */
extern psg_engine *psg_engine_new(const char *settings, char *err, size_t errlen);
extern void psg_engine_free(psg_engine *e);
extern int psg_abi_matches(void);
extern const char *psg_library_version(void);
/* The library's catalogue query (polarsplit_catalog_query): one simple Query, four results. */
extern const char *psg_catalog_query(void);
extern void psg_engine_add_reader(psg_engine *e, uint32_t server, uint32_t hostgroup);
extern void psg_engine_remove_reader(psg_engine *e, uint32_t server);
/* Engine-wide facts, with the host's monotonic time (SPEC R-1, R-1a, R-1b): health as Pgpool sees
 * it at session start or after a loss; a replay sample (its send time); a failed sample (an error
 * answer or none: an outage and a failure); an idle connection no session held broke; a connection
 * Pgpool failed to open for this child. */
extern void psg_engine_reader_health(psg_engine *e, uint32_t server, int healthy, uint64_t now_ms);
extern void psg_engine_reader_sample(psg_engine *e, uint32_t server, uint64_t lsn, uint64_t at_ms);
extern void psg_engine_reader_sample_failed(psg_engine *e, uint32_t server, uint64_t now_ms);
extern void psg_engine_reader_lost(psg_engine *e, uint32_t server, uint64_t now_ms);
extern void psg_engine_reader_connect_failed(psg_engine *e, uint32_t server, uint64_t now_ms);
extern void psg_engine_writer_changed(psg_engine *e);
/* Connection `conn` is to be taken as a new one (reset before its next use): the engine forgets
 * what it knew of it (the statements prepared on it, SPEC E-2). */
extern void psg_engine_connection_closed(psg_engine *e, uint64_t conn);

/* The writer's history for causal tokens (SPEC C-1, C-3): its system identifier and the timeline
 * it writes now; an identity other than the one reported before bumps the writer generation. */
extern void psg_engine_writer_identity(psg_engine *e, uint64_t system_id, uint32_t timeline);
/* The writer's server_version_num: picks the library's table of built-in functions. */
extern void psg_engine_writer_version(psg_engine *e, uint32_t version_num);

/*
 * The writer's function catalogue for the F-policy (SPEC section 7): the user functions of one
 * database (schema and name NUL-terminated, pg_proc.provolatile 'i'/'s'/'v'; one row per
 * overload), replacing what the engine knew of that database, all or nothing. On an error *why
 * (may be NULL) names the library's status and nothing changed. psg_engine_remove_functions
 * forgets a database's catalogue (its user functions' calls go to the primary again).
 */
typedef struct
{
	const char *schema;
	const char *name;
	char		volatility;
} psg_function;

extern psg_status psg_engine_set_functions(psg_engine *e, const char *database, const psg_function *fns,
										   size_t n, const char **why);
extern void psg_engine_remove_functions(psg_engine *e, const char *database);
/*
 * Whether a session of this child ran DDL in the database since its catalogue was last reported
 * (the library keeps the database's reads on the primary until the next report), and the hook a
 * load calls before its query (DDL seen after it is not covered by that load).
 */
extern int psg_engine_catalog_changed(psg_engine *e, const char *database);
extern void psg_engine_catalog_load_started(psg_engine *e, const char *database);
/*
 * DDL shared between the children (one engine each): how many DDL statements this child's
 * sessions ran (any database; one atomic load), and DDL another child's session ran in the
 * database, reported to this child's engine (its reads stay on the primary, open sessions too,
 * until this child's next load; not counted as this child's own).
 */
extern uint64_t psg_engine_sessions_ddl(psg_engine *e);
extern void psg_engine_catalog_changed_elsewhere(psg_engine *e, const char *database);

/*
 * The writer's sequences of one database (SPEC S-7: a standby holds a sequence WAL-logged ahead
 * of the primary, so a read naming one stays on the primary): every pg_class row of relkind 'S',
 * schema and name NUL-terminated, replacing what the engine knew of that database's sequences,
 * all or nothing. On an error *why (may be NULL) names the library's status and nothing changed.
 */
typedef struct
{
	const char *schema;
	const char *name;
} psg_sequence;

extern psg_status psg_engine_set_sequences(psg_engine *e, const char *database, const psg_sequence *seqs,
										   size_t n, const char **why);

/*
 * The writer's objects of one database whose use runs code a statement's text does not show
 * (SPEC S-6, S-5: views, tables under row-level security, domains, user casts' types, user
 * operators): schema, the name a statement invokes the object by, and its definition (SQL the
 * engine classifies as if a statement naming the object ran it; "" for none, which the engine
 * takes as not a query and keeps such statements off the readers), all NUL-terminated, replacing
 * what the engine knew of that database's objects, all or nothing. On an error *why (may be
 * NULL) names the library's status and nothing changed.
 */
typedef struct
{
	const char *schema;
	const char *name;
	const char *definition;
} psg_object;

extern psg_status psg_engine_set_objects(psg_engine *e, const char *database, const psg_object *objs,
										 size_t n, const char **why);

/* Session: one per client. client_host may be NULL. */
extern psg_status psg_session_new(psg_engine *e, const char *client_host, uint16_t client_port,
								  psg_session **out);
extern void psg_session_free(psg_session *s);
extern psg_status psg_recv_client(psg_session *s, const uint8_t *p, size_t len, uint64_t now_ms,
								  size_t *consumed);
extern psg_status psg_recv_backend(psg_session *s, uint64_t conn, const uint8_t *p, size_t len,
								   uint64_t now_ms);
extern psg_status psg_event(psg_session *s, uint64_t conn, psg_event_kind kind, uint32_t server,
							uint32_t flags, uint64_t now_ms);
/* PSG_OK with *out filled, PSG_DONE when nothing is left, or an error. */
extern psg_status psg_poll(psg_session *s, psg_action *out);
extern int psg_key_equal(const psg_key *a, const psg_key *b);
extern size_t psg_last_error(psg_session *s, char *buf, size_t len);

/*
 * Deadlines (SPEC R-1b). psg_next_deadline: 1 with *at_ms set when the session needs
 * psg_on_timeout() at host time *at_ms (read it after every drain), 0 when it has none.
 * psg_on_timeout: an input like the others (drain afterwards).
 */
extern int psg_next_deadline(psg_session *s, uint64_t *at_ms);
extern psg_status psg_on_timeout(psg_session *s, uint64_t now_ms);

#endif							/* POOL_POLARSPLIT_GLUE_H */
