/*
 * pool_polarsplit_glue.c — libpolarsplit's C ABI 3, seen from Pgpool-II.
 *
 * The ONLY file of the integration that includes <polarsplit.h>: every use of polarsplit_action,
 * of the action/event constants and of polarsplit_reader_key is here. ABI 3's action is
 * growth-safe: psg_poll() passes sizeof(polarsplit_action) and reads only the member named after
 * the kind. Moving to another ABI means rewriting psg_poll(), psg_event() and the key helpers
 * below and nothing else. See integrations/pgpool/README.md.
 */
#include "config.h"

#ifdef USE_POLARSPLIT

#include <string.h>
#include <stdio.h>
#include <stdlib.h>

#include <polarsplit.h>

#include "protocol/pool_polarsplit_glue.h"

_Static_assert(sizeof(polarsplit_reader_key) <= sizeof(((psg_key *) 0)->opaque),
			   "psg_key too small for polarsplit_reader_key");

struct psg_engine
{
	polarsplit_engine *engine;
};

static psg_status
map_status(polarsplit_status st)
{
	switch (st)
	{
		case POLARSPLIT_OK:
			return PSG_OK;
		case POLARSPLIT_DONE:
			return PSG_DONE;
		case POLARSPLIT_ERR_PROTOCOL:
			return PSG_ERR_PROTOCOL;
		case POLARSPLIT_ERR_CLOSED:
			return PSG_ERR_CLOSED;
		case POLARSPLIT_ERR_UNKNOWN_CONNECTION:
			return PSG_ERR_UNKNOWN_CONNECTION;
		case POLARSPLIT_ERR_POISONED:
		case POLARSPLIT_ERR_PANIC:
			return PSG_ERR_POISONED;
		case POLARSPLIT_ERR_BAD_STATE:
			return PSG_ERR_BAD_STATE;
		case POLARSPLIT_ERR_ABI:
			return PSG_ERR_ABI;
		default:
			return PSG_ERR;
	}
}

int
psg_abi_matches(void)
{
	return polarsplit_abi_version() == POLARSPLIT_ABI_VERSION;
}

const char *
psg_library_version(void)
{
	return polarsplit_version();
}

const char *
psg_catalog_query(void)
{
	return polarsplit_catalog_query();
}

psg_engine *
psg_engine_new(const char *settings, char *err, size_t errlen)
{
	polarsplit_config_builder *b = polarsplit_config_builder_new();
	polarsplit_config *cfg = NULL;
	psg_engine *e;
	char	   *copy,
			   *item,
			   *save = NULL;

	if (err && errlen)
		err[0] = '\0';
	if (!b)
		return NULL;
	copy = strdup(settings ? settings : "");
	if (!copy)
	{
		polarsplit_config_builder_free(b);
		return NULL;
	}
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save))
	{
		char	   *eq = strchr(item, '=');
		char	   *name = item;

		while (*name == ' ')
			name++;
		if (!eq || eq == name)
		{
			snprintf(err, errlen, "polarsplit_settings: \"%s\" is not name=value", item);
			free(copy);
			polarsplit_config_builder_free(b);
			return NULL;
		}
		*eq = '\0';
		for (char *t = eq - 1; t > name && *t == ' '; t--)
			*t = '\0';
		if (polarsplit_config_builder_set(b, name, eq + 1, err, errlen) != POLARSPLIT_OK)
		{
			free(copy);
			polarsplit_config_builder_free(b);
			return NULL;
		}
	}
	free(copy);
	if (polarsplit_config_builder_build(b, &cfg, err, errlen) != POLARSPLIT_OK)
		return NULL;
	e = calloc(1, sizeof *e);
	if (!e || polarsplit_engine_new(cfg, &e->engine) != POLARSPLIT_OK)
	{
		free(e);
		polarsplit_config_free(cfg);
		snprintf(err, errlen, "polarsplit_engine_new failed");
		return NULL;
	}
	polarsplit_config_free(cfg);
	return e;
}

void
psg_engine_free(psg_engine *e)
{
	if (!e)
		return;
	polarsplit_engine_free(e->engine);
	free(e);
}

void
psg_engine_add_reader(psg_engine *e, uint32_t server, uint32_t hostgroup)
{
	polarsplit_engine_add_reader(e->engine, server, hostgroup);
}

void
psg_engine_remove_reader(psg_engine *e, uint32_t server)
{
	polarsplit_engine_remove_reader(e->engine, server);
}

void
psg_engine_reader_health(psg_engine *e, uint32_t server, int healthy, uint64_t now_ms)
{
	polarsplit_engine_set_reader_health_at(e->engine, server, healthy != 0, now_ms);
}

void
psg_engine_reader_sample(psg_engine *e, uint32_t server, uint64_t lsn, uint64_t at_ms)
{
	polarsplit_engine_reader_sample(e->engine, server, lsn, at_ms);
}

void
psg_engine_reader_sample_failed(psg_engine *e, uint32_t server, uint64_t now_ms)
{
	polarsplit_engine_reader_monitor_failed(e->engine, server, now_ms);
}

void
psg_engine_reader_lost(psg_engine *e, uint32_t server, uint64_t now_ms)
{
	polarsplit_engine_reader_lost(e->engine, server, now_ms);
}

void
psg_engine_reader_connect_failed(psg_engine *e, uint32_t server, uint64_t now_ms)
{
	polarsplit_engine_reader_connect_failed(e->engine, server, now_ms, false);
}

void
psg_engine_connection_closed(psg_engine *e, uint64_t conn)
{
	polarsplit_engine_connection_closed(e->engine, conn);
}

void
psg_engine_writer_changed(psg_engine *e)
{
	polarsplit_engine_writer_changed(e->engine, 0, NULL);
}

void
psg_engine_writer_identity(psg_engine *e, uint64_t system_id, uint32_t timeline)
{
	polarsplit_engine_set_writer_identity(e->engine, 0, system_id, timeline, NULL);
}

void
psg_engine_writer_version(psg_engine *e, uint32_t version_num)
{
	polarsplit_engine_set_writer_server_version(e->engine, version_num);
}

/*
 * F-policy catalogue (SPEC section 7): the rows become polarsplit_function structs, passed with
 * this build's sizeof as the stride (the struct only grows at the end), and replace what the
 * engine knew of the database in one call (all or nothing).
 */
psg_status
psg_engine_set_functions(psg_engine *e, const char *database, const psg_function *fns, size_t n,
						 const char **why)
{
	polarsplit_function *rows = NULL;
	polarsplit_status st;

	if (!database)
	{
		if (why)
			*why = "no database";
		return PSG_ERR;
	}
	if (n > 0)
	{
		rows = calloc(n, sizeof *rows);
		if (!rows)
		{
			if (why)
				*why = "out of memory";
			return PSG_ERR;
		}
	}
	for (size_t i = 0; i < n; i++)
	{
		char		v = fns[i].volatility;

		rows[i].schema = fns[i].schema;
		rows[i].schema_len = fns[i].schema ? strlen(fns[i].schema) : 0;
		rows[i].name = fns[i].name;
		rows[i].name_len = fns[i].name ? strlen(fns[i].name) : 0;
		/* pg_proc.provolatile is 'i', 's' or 'v'; anything else is taken as volatile */
		rows[i].volatility = v == POLARSPLIT_VOLATILITY_IMMUTABLE || v == POLARSPLIT_VOLATILITY_STABLE ?
			(polarsplit_volatility) v : POLARSPLIT_VOLATILITY_VOLATILE;
	}
	st = polarsplit_engine_set_function_catalog(e->engine, database, strlen(database), rows, n, sizeof *rows);
	free(rows);
	if (why)
		*why = polarsplit_status_str(st);
	return map_status(st);
}

void
psg_engine_remove_functions(psg_engine *e, const char *database)
{
	if (database)
		polarsplit_engine_remove_function_catalog(e->engine, database, strlen(database));
}

int
psg_engine_catalog_changed(psg_engine *e, const char *database)
{
	return database &&
		polarsplit_engine_catalog_changed(e->engine, database, strlen(database)) == POLARSPLIT_OK;
}

void
psg_engine_catalog_load_started(psg_engine *e, const char *database)
{
	if (database)
		polarsplit_engine_catalog_load_started(e->engine, database, strlen(database));
}

void
psg_engine_catalog_changed_elsewhere(psg_engine *e, const char *database)
{
	if (database)
		polarsplit_engine_catalog_changed_elsewhere(e->engine, database, strlen(database));
}

uint64_t
psg_engine_sessions_ddl(psg_engine *e)
{
	uint64_t	n = 0;

	if (polarsplit_engine_sessions_ddl(e->engine, &n) != POLARSPLIT_OK)
		return 0;
	return n;
}

/*
 * S-7 sequences: the rows become polarsplit_sequence structs (this build's sizeof as the
 * stride) and replace the database's sequences in one call (all or nothing).
 */
psg_status
psg_engine_set_sequences(psg_engine *e, const char *database, const psg_sequence *seqs, size_t n,
						 const char **why)
{
	polarsplit_sequence *rows = NULL;
	polarsplit_status st;

	if (!database)
	{
		if (why)
			*why = "no database";
		return PSG_ERR;
	}
	if (n > 0)
	{
		rows = calloc(n, sizeof *rows);
		if (!rows)
		{
			if (why)
				*why = "out of memory";
			return PSG_ERR;
		}
	}
	for (size_t i = 0; i < n; i++)
	{
		rows[i].schema = seqs[i].schema;
		rows[i].schema_len = seqs[i].schema ? strlen(seqs[i].schema) : 0;
		rows[i].name = seqs[i].name;
		rows[i].name_len = seqs[i].name ? strlen(seqs[i].name) : 0;
	}
	st = polarsplit_engine_set_sequence_catalog(e->engine, database, strlen(database), rows, n, sizeof *rows);
	free(rows);
	if (why)
		*why = polarsplit_status_str(st);
	return map_status(st);
}

/*
 * S-6 objects that hide code: the rows become polarsplit_object structs (this build's sizeof as
 * the stride) and replace the database's objects in one call (all or nothing).
 */
psg_status
psg_engine_set_objects(psg_engine *e, const char *database, const psg_object *objs, size_t n,
					   const char **why)
{
	polarsplit_object *rows = NULL;
	polarsplit_status st;

	if (!database)
	{
		if (why)
			*why = "no database";
		return PSG_ERR;
	}
	if (n > 0)
	{
		rows = calloc(n, sizeof *rows);
		if (!rows)
		{
			if (why)
				*why = "out of memory";
			return PSG_ERR;
		}
	}
	for (size_t i = 0; i < n; i++)
	{
		rows[i].schema = objs[i].schema;
		rows[i].schema_len = objs[i].schema ? strlen(objs[i].schema) : 0;
		rows[i].name = objs[i].name;
		rows[i].name_len = objs[i].name ? strlen(objs[i].name) : 0;
		/* NULL or "": no definition, which the engine takes as not a query (off the readers) */
		rows[i].definition = objs[i].definition ? objs[i].definition : "";
		rows[i].definition_len = objs[i].definition ? strlen(objs[i].definition) : 0;
	}
	st = polarsplit_engine_set_object_catalog(e->engine, database, strlen(database), rows, n, sizeof *rows);
	free(rows);
	if (why)
		*why = polarsplit_status_str(st);
	return map_status(st);
}

psg_status
psg_session_new(psg_engine *e, const char *client_host, uint16_t client_port, psg_session **out)
{
	polarsplit_client_info info;

	memset(&info, 0, sizeof info);
	info.client_host = client_host;
	info.client_port = client_port;
	info.writer_hostgroup = -1;
	return map_status(polarsplit_session_new(e->engine, &info, sizeof info, (polarsplit_session **) out));
}

void
psg_session_free(psg_session *s)
{
	polarsplit_session_free((polarsplit_session *) s);
}

psg_status
psg_recv_client(psg_session *s, const uint8_t *p, size_t len, uint64_t now_ms, size_t *consumed)
{
	return map_status(polarsplit_session_recv_client((polarsplit_session *) s, p, len, now_ms, consumed));
}

psg_status
psg_recv_backend(psg_session *s, uint64_t conn, const uint8_t *p, size_t len, uint64_t now_ms)
{
	return map_status(polarsplit_session_recv_backend((polarsplit_session *) s, conn, p, len, now_ms));
}

psg_status
psg_event(psg_session *s, uint64_t conn, psg_event_kind kind, uint32_t server, uint32_t flags,
		  uint64_t now_ms)
{
	polarsplit_event_kind k;
	uint32_t	f = 0;

	switch (kind)
	{
		case PSG_EV_WRITER_CONNECTED:
			k = POLARSPLIT_EVENT_WRITER_CONNECTED;
			break;
		case PSG_EV_WRITER_CONNECT_FAILED:
			k = POLARSPLIT_EVENT_WRITER_CONNECT_FAILED;
			break;
		case PSG_EV_READER_ATTACHED:
			k = POLARSPLIT_EVENT_READER_ATTACHED;
			break;
		case PSG_EV_READER_UNAVAILABLE:
			k = POLARSPLIT_EVENT_READER_UNAVAILABLE;
			break;
		case PSG_EV_CONNECTION_LOST:
			k = POLARSPLIT_EVENT_CONNECTION_LOST;
			break;
		default:
			return PSG_ERR;
	}
	if (flags & PSG_FLAG_FRESH)
		f |= POLARSPLIT_EVENT_FLAG_FRESH;
	if (flags & PSG_FLAG_NEEDS_RESET)
		f |= POLARSPLIT_EVENT_FLAG_NEEDS_RESET;
	if (flags & PSG_FLAG_NO_CREDENTIALS)
		f |= POLARSPLIT_EVENT_FLAG_NO_CREDENTIALS;
	return map_status(polarsplit_session_on_backend_event((polarsplit_session *) s, conn, k, server, f, now_ms));
}

static psg_outcome
map_outcome(polarsplit_outcome o)
{
	switch (o)
	{
		case POLARSPLIT_OUTCOME_PASSTHROUGH:
			return PSG_OUT_PASSTHROUGH;
		case POLARSPLIT_OUTCOME_FORCE_PRIMARY:
			return PSG_OUT_PRIMARY;
		case POLARSPLIT_OUTCOME_REPLICA_WITH_WAIT:
			return PSG_OUT_REPLICA;
		case POLARSPLIT_OUTCOME_REPLICA_TXN_SPLIT:
			return PSG_OUT_SPLIT;
		case POLARSPLIT_OUTCOME_REJECT:
			return PSG_OUT_REJECT;
		default:
			return PSG_OUT_OTHER;
	}
}

psg_status
psg_poll(psg_session *s, psg_action *out)
{
	polarsplit_action a;
	polarsplit_status st = polarsplit_session_poll_action((polarsplit_session *) s, &a, sizeof a);

	memset(out, 0, sizeof *out);
	if (st != POLARSPLIT_OK)
		return map_status(st);
	/* Only `kind` and the kind's own member are written (ABI 3): read nothing else. */
	switch (a.kind)
	{
		case POLARSPLIT_ACTION_CLIENT_ENCRYPTION_REQUEST:
			out->kind = PSG_ENCRYPTION_REQUEST;
			out->flag = a.client_encryption_request.gss ? 1 : 0;
			break;
		case POLARSPLIT_ACTION_CANCEL_REQUEST:
			out->kind = PSG_CANCEL_REQUEST;
			break;
		case POLARSPLIT_ACTION_CONNECT_WRITER:
			out->kind = PSG_CONNECT_WRITER;
			out->bytes = a.connect_writer.startup.ptr;
			out->bytes_len = a.connect_writer.startup.len;
			break;
		case POLARSPLIT_ACTION_DECISION:
			out->kind = PSG_DECISION;
			out->outcome = map_outcome(a.decision.outcome);
			out->outcome_name = polarsplit_outcome_name(a.decision.outcome);
			out->reason_name = polarsplit_reason_name(a.decision.reason);
			out->server = a.decision.server;
			out->flag = a.decision.has_server ? 1 : 0;
			out->wait = a.decision.wait ? 1 : 0;
			out->reader_behind = a.decision.reason == POLARSPLIT_REASON_READ_NO_BOUNDED_WAIT ||
				a.decision.reason == POLARSPLIT_REASON_SPLIT_NO_CAUGHT_UP_READER;
			break;
		case POLARSPLIT_ACTION_ACQUIRE_READER:
			out->kind = PSG_ACQUIRE_READER;
			out->server = a.acquire_reader.server;
			memcpy(out->key.opaque, &a.acquire_reader.key, sizeof a.acquire_reader.key);
			out->bytes = a.acquire_reader.startup.ptr;
			out->bytes_len = a.acquire_reader.startup.len;
			break;
		case POLARSPLIT_ACTION_FORWARD_CLIENT:
			out->kind = PSG_FORWARD_CLIENT;
			out->conn = a.forward_client.conn;
			out->n = a.forward_client.n;
			break;
		case POLARSPLIT_ACTION_DISCARD_CLIENT:
			out->kind = PSG_DISCARD_CLIENT;
			out->n = a.discard_client.n;
			break;
		case POLARSPLIT_ACTION_SEND_BACKEND:
			out->kind = PSG_SEND_BACKEND;
			out->conn = a.send_backend.conn;
			out->bytes = a.send_backend.bytes.ptr;
			out->bytes_len = a.send_backend.bytes.len;
			break;
		case POLARSPLIT_ACTION_FORWARD_BACKEND:
			out->kind = PSG_FORWARD_BACKEND;
			out->conn = a.forward_backend.conn;
			out->n = a.forward_backend.n;
			break;
		case POLARSPLIT_ACTION_DISCARD_BACKEND:
			out->kind = PSG_DISCARD_BACKEND;
			out->conn = a.discard_backend.conn;
			out->n = a.discard_backend.n;
			break;
		case POLARSPLIT_ACTION_SEND_CLIENT:
			out->kind = PSG_SEND_CLIENT;
			out->bytes = a.send_client.bytes.ptr;
			out->bytes_len = a.send_client.bytes.len;
			break;
		case POLARSPLIT_ACTION_RELEASE_READER:
			out->kind = PSG_RELEASE_READER;
			out->conn = a.release_reader.conn;
			out->flag = a.release_reader.needs_reset ? 1 : 0;
			break;
		case POLARSPLIT_ACTION_PIN_WRITER:
			out->kind = PSG_PIN_WRITER;
			out->flag = a.pin_writer.pinned ? 1 : 0;
			break;
		case POLARSPLIT_ACTION_CLOSE_BACKEND:
			out->kind = PSG_CLOSE_BACKEND;
			out->conn = a.close_backend.conn;
			break;
		case POLARSPLIT_ACTION_CLOSE_CLIENT:
			out->kind = PSG_CLOSE_CLIENT;
			break;
		default:
			/* Cannot happen: a kind newer than this build is refused with ERR_ABI. */
			out->kind = PSG_UNKNOWN;
	}
	return PSG_OK;
}

int
psg_key_equal(const psg_key *a, const psg_key *b)
{
	polarsplit_reader_key ka,
				kb;

	memcpy(&ka, a->opaque, sizeof ka);
	memcpy(&kb, b->opaque, sizeof kb);
	return polarsplit_reader_key_compatible(&ka, &kb) ? 1 : 0;
}

size_t
psg_last_error(psg_session *s, char *buf, size_t len)
{
	return polarsplit_session_last_error((polarsplit_session *) s, buf, len);
}

/* Deadlines (R-1b). */
int
psg_next_deadline(psg_session *s, uint64_t *at_ms)
{
	uint64_t	at = UINT64_MAX;

	if (polarsplit_session_next_deadline((polarsplit_session *) s, &at) != POLARSPLIT_OK)
	{
		*at_ms = UINT64_MAX;
		return 0;
	}
	*at_ms = at;
	return 1;
}

psg_status
psg_on_timeout(psg_session *s, uint64_t now_ms)
{
	return map_status(polarsplit_session_on_timeout((polarsplit_session *) s, now_ms));
}

#else
typedef int pool_polarsplit_glue_unused;	/* built without --with-polarsplit */
#endif							/* USE_POLARSPLIT */
