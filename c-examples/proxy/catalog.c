/* The writer's user functions, per database (SPEC §7 F-policy): a read that calls a function the
 * engine does not know goes to the primary, so the proxy tells the engine which functions of each
 * database are immutable or stable — the writer's pg_proc outside the built-in schemas (and
 * extension functions in pg_catalog), read on a short-lived connection to that database of the
 * primary as the monitor user — with polarsplit_engine_set_function_catalog, and the writer's
 * server_version_num (it picks the engine's table of built-ins). The same load reads the writer's
 * sequences (pg_class relkind 'S') and reports them with polarsplit_engine_set_sequence_catalog
 * (SPEC S-7: a standby holds a sequence WAL-logged ahead of the primary, so a read of one must stay
 * on the primary); until a database's first load, and for a sequence created since the last one,
 * such a read is not recognised. And it reads the writer's objects whose use runs code a statement's
 * text does not show — views, tables under row-level security, domains, user casts and operators,
 * user functions' bodies, with their definitions — and reports them with polarsplit_engine_set_object_catalog (SPEC S-6: a
 * view over set_config must not run on a pooled reader; the engine judges each definition as a
 * statement), kept like the sequences when a later load fails.
 *
 * When: for each --catalog-database at start, and for every other database the first time a
 * client of it connects (the statements of its clients wait for that first load — see feed_client —
 * so none is judged without the database's objects; a failed first load releases them, and its user
 * functions then go to the primary);
 * at once after a session ran DDL in it (polarsplit_engine_catalog_changed: the engine keeps that
 * database's reads on the primary until the next load that started after the DDL reports); and
 * then every --catalog-refresh-ms, so a function created, dropped or recreated with another
 * volatility by a client that bypasses this proxy is seen within that time. A load that fails
 * (the database refuses the login, the query fails or times out) removes the database's
 * catalogue — its user functions are unknown again and their calls go to the primary, which is
 * safe — is logged once, and is retried with a back-off up to the refresh period. Its sequences
 * are kept: a stale list only misses sequences created since, none would miss them all. At most
 * MAX_CATALOG_DBS databases are tracked; calls in any other database stay on the primary. */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "proxy.h"

#define MAX_CATALOG_DBS 64
#define MAX_DB_NAME 255
#define CATALOG_TIMEOUT_MS 10000 /* for one whole load: connect, login, query */
#define CATALOG_RETRY_MS 1000    /* the first retry after a failure; doubles up to the refresh period */
#define MAX_CATALOG_ROWS (1u << 20) /* the engine's bound per database, for functions and for sequences */

/* What a load sends: the writer's version, every user function, sequence and object that hides code —
 * the library's catalogue query (polarsplit_catalog_query documents it), one simple Query whose four
 * results come before one ReadyForQuery, told apart by their column counts (1, 3, 2, 4). It waits
 * for a lock at most 100 ms (pg_get_viewdef locks what it reads until the Query ends), so it fails
 * and is retried rather than deadlock with a client's DDL. */

typedef struct {
    uint32_t schema_off, schema_len, name_off, name_len;
    uint32_t def_off, def_len; /* an object's definition; 0 otherwise */
    uint8_t volatility;        /* a function's; 0 otherwise */
} row_t;

/* Rows of one kind: functions, sequences or objects. */
typedef struct {
    row_t *rows;
    size_t n, cap;
} rows_t;

/* One load in flight: its rows, as offsets into an arena (it moves as it grows). */
struct catalog_load {
    int db;
    backend_t *conn;
    buf_t arena;
    rows_t fns, seqs, objs;
    uint32_t version;
    int sent, failed;
    char why[240];
};

typedef struct {
    char name[MAX_DB_NAME + 1];
    size_t len;
    uint64_t next_at;  /* the next load (UINT64_MAX: none) */
    uint64_t retry_ms; /* the back-off after failures */
    backend_t *conn;   /* the load in flight */
    int loaded;        /* the engine has a catalogue of it */
    int warned;        /* a failure was logged since the last success */
} catdb_t;

static catdb_t dbs[MAX_CATALOG_DBS];
static int ndbs;
static int full_warned;

int catalog_want(const char *db, size_t len) {
    if (g.o.no_function_catalog || g.o.mode != MODE_LIBRARY || len == 0 || len > MAX_DB_NAME) return -1;
    for (int i = 0; i < ndbs; i++)
        if (dbs[i].len == len && memcmp(dbs[i].name, db, len) == 0) return i;
    if (ndbs == MAX_CATALOG_DBS) {
        if (!full_warned) logf_("function catalogues: more than %d databases; user functions of the others stay on the primary",
                                MAX_CATALOG_DBS);
        full_warned = 1;
        return -1;
    }
    catdb_t *d = &dbs[ndbs++];
    memset(d, 0, sizeof *d);
    memcpy(d->name, db, len);
    d->len = len;
    d->next_at = 0; /* now */
    return ndbs - 1;
}

int catalog_first_load_pending(int i) {
    /* Until the first load of the database succeeded or failed once (a failure is logged and
     * then the clients go on: their user functions go to the primary). */
    return i >= 0 && i < ndbs && !dbs[i].loaded && !dbs[i].warned;
}

/* The first load of database `i` ended: its clients' held input goes to their sessions. */
static void release_clients(int i) {
    for (client_t *c = g.clients; c; c = c->next)
        if (!c->dead && c->catdb == i) feed_client(c);
}

void catalog_free_load(struct catalog_load *l) {
    if (!l) return;
    if (l->db >= 0 && l->db < ndbs && dbs[l->db].conn == l->conn) dbs[l->db].conn = NULL;
    buf_free(&l->arena);
    free(l->fns.rows);
    free(l->seqs.rows);
    free(l->objs.rows);
    free(l);
}

static void start_load(int i, uint64_t now) {
    catdb_t *d = &dbs[i];
    backend_t *b = backend_new(ROLE_CATALOG, 0);
    const char *kv[] = {"user", g.o.monitor_user, "database", d->name, "application_name", "polarsplit-catalog", NULL};
    startup_build(&b->out, kv);
    b->user = strdup(g.o.monitor_user);
    b->cat = calloc(1, sizeof *b->cat);
    if (!b->user || !b->cat) abort();
    b->cat->db = i;
    b->cat->conn = b;
    /* DDL the engine sees from now on is not covered by this load (it stays stale after it). */
    polarsplit_engine_catalog_load_started(g.engine, d->name, d->len);
    b->deadline = now + CATALOG_TIMEOUT_MS;
    d->conn = b;
    if (backend_connect(b) != 0) catalog_failed(b, "connect failed");
}

void catalog_tick(uint64_t now) {
    for (int i = 0; i < ndbs; i++) {
        catdb_t *d = &dbs[i];
        if (d->conn) {
            if (now > d->conn->deadline) catalog_failed(d->conn, "no answer in time");
        } else if (now >= d->next_at ||
                   (d->loaded && d->retry_ms == 0 &&
                    polarsplit_engine_catalog_changed(g.engine, d->name, d->len) == POLARSPLIT_OK)) {
            /* Due, or a session ran DDL in it: its reads stay on the primary until this load. */
            start_load(i, now);
        }
    }
}

uint64_t catalog_next_due(void) {
    uint64_t next = UINT64_MAX;
    for (int i = 0; i < ndbs; i++) {
        uint64_t due = dbs[i].conn ? dbs[i].conn->deadline + 1 : dbs[i].next_at;
        if (due < next) next = due;
    }
    return next;
}

void catalog_failed(backend_t *b, const char *why) {
    struct catalog_load *l = b->cat;
    if (!l || b->dead) {
        backend_close(b);
        return;
    }
    catdb_t *d = &dbs[l->db];
    g.catalog_failures++;
    /* A catalogue that may be stale is worse than none: unknown functions go to the primary. */
    int removed = d->loaded && polarsplit_engine_remove_function_catalog(g.engine, d->name, d->len) == POLARSPLIT_OK;
    d->loaded = 0;
    uint64_t cap = g.o.catalog_refresh_ms > CATALOG_RETRY_MS ? g.o.catalog_refresh_ms : CATALOG_RETRY_MS;
    d->retry_ms = d->retry_ms ? (d->retry_ms * 2 > cap ? cap : d->retry_ms * 2) : CATALOG_RETRY_MS;
    d->next_at = now_ms() + d->retry_ms;
    if (!d->warned || g.o.verbose)
        logf_("function catalogue of database %s: %s%s; its user functions go to the primary (retrying in %llu ms)",
              d->name, why, removed ? " (the previous one is dropped)" : "", (unsigned long long)d->retry_ms);
    int first = !d->warned;
    d->warned = 1;
    d->conn = NULL;
    int i = l->db;
    backend_close(b);
    if (first) release_clients(i);
}

/* The rows are in: hand them to the engine. */
static void load_done(backend_t *b) {
    struct catalog_load *l = b->cat;
    catdb_t *d = &dbs[l->db];
    if (l->failed) {
        catalog_failed(b, l->why);
        return;
    }
    const char *base = (const char *)buf_data(&l->arena);
    /* The sequences first: once a function of this load is seen, its sequences are in too. */
    polarsplit_sequence *seqs = l->seqs.n ? calloc(l->seqs.n, sizeof *seqs) : NULL;
    if (l->seqs.n && !seqs) abort();
    for (size_t i = 0; i < l->seqs.n; i++) {
        const row_t *r = &l->seqs.rows[i];
        seqs[i].schema = base + r->schema_off;
        seqs[i].schema_len = r->schema_len;
        seqs[i].name = base + r->name_off;
        seqs[i].name_len = r->name_len;
    }
    polarsplit_status st =
        polarsplit_engine_set_sequence_catalog(g.engine, d->name, d->len, seqs, l->seqs.n, sizeof *seqs);
    free(seqs);
    if (st != POLARSPLIT_OK) {
        snprintf(l->why, sizeof l->why, "the engine refused its sequences: %s", polarsplit_status_str(st));
        catalog_failed(b, l->why);
        return;
    }
    /* The objects before the functions too: their verdicts are judged again when the functions
     * come, and until then a definition's unknown functions keep their readers on the primary. */
    polarsplit_object *objs = l->objs.n ? calloc(l->objs.n, sizeof *objs) : NULL;
    if (l->objs.n && !objs) abort();
    for (size_t i = 0; i < l->objs.n; i++) {
        const row_t *r = &l->objs.rows[i];
        objs[i].schema = base + r->schema_off;
        objs[i].schema_len = r->schema_len;
        objs[i].name = base + r->name_off;
        objs[i].name_len = r->name_len;
        objs[i].definition = base + r->def_off;
        objs[i].definition_len = r->def_len;
    }
    st = polarsplit_engine_set_object_catalog(g.engine, d->name, d->len, objs, l->objs.n, sizeof *objs);
    free(objs);
    if (st != POLARSPLIT_OK) {
        snprintf(l->why, sizeof l->why, "the engine refused its objects: %s", polarsplit_status_str(st));
        catalog_failed(b, l->why);
        return;
    }
    polarsplit_function *fns = l->fns.n ? calloc(l->fns.n, sizeof *fns) : NULL;
    if (l->fns.n && !fns) abort();
    for (size_t i = 0; i < l->fns.n; i++) {
        const row_t *r = &l->fns.rows[i];
        fns[i].schema = base + r->schema_off;
        fns[i].schema_len = r->schema_len;
        fns[i].name = base + r->name_off;
        fns[i].name_len = r->name_len;
        fns[i].volatility = r->volatility;
    }
    st = polarsplit_engine_set_function_catalog(g.engine, d->name, d->len, fns, l->fns.n, sizeof *fns);
    free(fns);
    if (st != POLARSPLIT_OK) {
        snprintf(l->why, sizeof l->why, "the engine refused it: %s", polarsplit_status_str(st));
        catalog_failed(b, l->why);
        return;
    }
    if (l->version) polarsplit_engine_set_writer_server_version(g.engine, l->version);
    if (!d->loaded || d->warned || g.o.verbose)
        logf_("function catalogue of database %s: %zu user functions, %zu sequences, %zu objects that hide code "
              "(server_version_num %u)",
              d->name, l->fns.n, l->seqs.n, l->objs.n, l->version);
    g.catalog_loads++;
    g.catalog_functions = l->fns.n;
    g.catalog_sequences = l->seqs.n;
    g.catalog_objects = l->objs.n;
    int first = !d->loaded;
    d->loaded = 1;
    d->warned = 0;
    d->retry_ms = 0;
    d->next_at = g.o.catalog_refresh_ms ? now_ms() + g.o.catalog_refresh_ms : UINT64_MAX;
    d->conn = NULL;
    buf_msg(&b->out, 'X', NULL, 0);
    int i = l->db;
    backend_close(b);
    if (first) release_clients(i);
}

static uint32_t arena_put(struct catalog_load *l, const uint8_t *v, size_t n) {
    uint32_t off = (uint32_t)buf_size(&l->arena);
    buf_append(&l->arena, v, n);
    return off;
}

static void fail_load(struct catalog_load *l, const char *why) {
    if (!l->failed) snprintf(l->why, sizeof l->why, "%s", why);
    l->failed = 1;
}

/* A new row of `rs` (NULL, and the load failed, past the engine's bound). */
static row_t *row_new(struct catalog_load *l, rows_t *rs, const char *too_many) {
    if (rs->n == MAX_CATALOG_ROWS) {
        fail_load(l, too_many);
        return NULL;
    }
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? rs->cap * 2 : 256;
        row_t *r = realloc(rs->rows, rs->cap * sizeof *r);
        if (!r) abort();
        rs->rows = r;
    }
    row_t *r = &rs->rows[rs->n++];
    memset(r, 0, sizeof *r);
    return r;
}

static void catalog_row(struct catalog_load *l, const uint8_t *body, size_t blen) {
    if (l->failed || blen < 2) return;
    unsigned cols = ((unsigned)body[0] << 8) | body[1];
    const uint8_t *v[4];
    size_t n[4];
    if (cols == 1) { /* server_version_num */
        char num[16];
        if (row_field(body, blen, 0, &v[0], &n[0]) == 0 && n[0] < sizeof num) {
            memcpy(num, v[0], n[0]);
            num[n[0]] = '\0';
            l->version = (uint32_t)strtoul(num, NULL, 10);
        }
        return;
    }
    if (cols < 2 || cols > 4) return;
    for (unsigned i = 0; i < cols; i++) {
        int rc = row_field(body, blen, i, &v[i], &n[i]);
        /* A NULL definition (a view dropped while the query ran) reads as empty: not a query, so
         * the engine keeps statements naming the object on the primary. */
        if (rc == 1 && cols == 4 && i == 2) {
            v[i] = (const uint8_t *)"";
            n[i] = 0;
        } else if (rc != 0) {
            fail_load(l, "a row the proxy cannot read");
            return;
        }
    }
    row_t *r = cols == 2   ? row_new(l, &l->seqs, "too many sequences")
               : cols == 4 ? row_new(l, &l->objs, "too many objects")
                           : row_new(l, &l->fns, "too many functions");
    if (!r) return;
    r->schema_off = arena_put(l, v[0], n[0]);
    r->schema_len = (uint32_t)n[0];
    r->name_off = arena_put(l, v[1], n[1]);
    r->name_len = (uint32_t)n[1];
    if (cols == 2) return; /* a sequence */
    if (cols == 4) {       /* an object */
        r->def_off = arena_put(l, v[2], n[2]);
        r->def_len = (uint32_t)n[2];
        return;
    }
    /* provolatile is 'i', 's' or 'v'; anything else is taken as volatile (never read-safe). */
    uint8_t c = n[2] == 1 ? v[2][0] : 'v';
    r->volatility = (c == POLARSPLIT_VOLATILITY_IMMUTABLE || c == POLARSPLIT_VOLATILITY_STABLE)
                        ? c
                        : POLARSPLIT_VOLATILITY_VOLATILE;
}

void catalog_readable(backend_t *b, int eof) {
    struct catalog_load *l = b->cat;
    if (b->dead || !l) return;
    if (b->state == BS_READY && !l->sent) {
        const char *query = polarsplit_catalog_query();
        buf_msg(&b->out, 'Q', query, strlen(query) + 1);
        l->sent = 1;
    }
    while (l->sent && buf_size(&b->in) >= 5) {
        const uint8_t *m = buf_data(&b->in);
        uint32_t len = rd32(m + 1);
        if (len < 4 || len > (1u << 20)) {
            catalog_failed(b, "bad message");
            return;
        }
        if (buf_size(&b->in) < 1 + (size_t)len) break;
        const uint8_t *body = m + 5;
        size_t blen = len - 4;
        switch (m[0]) {
        case 'D': catalog_row(l, body, blen); break;
        case 'E': {
            char code[8], msg[200], why[220];
            error_fields(body, blen, code, sizeof code, msg, sizeof msg);
            snprintf(why, sizeof why, "%s %s", code, msg);
            fail_load(l, why);
            if (error_is_fatal(body, blen)) {
                catalog_failed(b, l->why);
                return;
            }
            break;
        }
        case 'Z':
            buf_consume(&b->in, 1 + (size_t)len);
            load_done(b);
            return;
        default: break;
        }
        buf_consume(&b->in, 1 + (size_t)len);
    }
    if (eof && !b->dead) catalog_failed(b, "connection lost");
}
