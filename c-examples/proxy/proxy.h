/* polarsplit-proxy's shared state and the seams between its files:
 *
 *   main.c      start-up and shutdown
 *   options.c   command line
 *   net.c       sockets: resolve, connect, listen, non-blocking writes
 *   listener.c  accepting clients: the connection bound, EMFILE without a busy loop
 *   client.c    a client's session: feeding it, draining its actions (the drain rule), closing
 *   actions.c   executing one action
 *   backend.c   backend connections: writer, readers (the proxy logs in itself), cancels
 *   monitor.c   a monitor connection per server (SPEC R-1)
 *   catalog.c   the writer's user functions per database (SPEC §7 F-policy)
 *   loop.c      the epoll(7) loop: timers, deadlines, flushing, dispatch
 *   stats.c     counters on SIGUSR1 and at exit
 *   record.c    --record: a session's inputs as a transcript for c-examples/replay
 * and the pieces it shares with nothing else: router_*.c (who decides), pool.c (the reader
 * pool), auth.c (credentials and wire helpers), buf.c (byte buffers). */
#ifndef PROXY_PROXY_H
#define PROXY_PROXY_H

#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "auth.h"
#include "buf.h"
#include "polarsplit.h"
#include "pool.h"
#include "router.h"

#define HIGH_WATER (1u << 20)
#define MAX_SERVERS 16
#define MAX_SETTINGS 64
#define READ_CHUNK 65536
/* Most bytes read from one descriptor, and most client bytes fed to one session, per turn of the
 * event loop: one client that pipelines megabytes (or a backend answering them) holds the single
 * loop for one bounded slice, and every other client and the monitors get their turn between
 * slices (a prober's finding, 2026-12-05: 80,000 pipelined statements stalled others 13 s). */
#define TURN_BYTES READ_CHUNK

enum mode { MODE_LIBRARY, MODE_NAIVE, MODE_PRIMARY_ONLY };
extern const char *const MODE_NAMES[];

enum role { ROLE_WRITER, ROLE_READER, ROLE_MONITOR, ROLE_CANCEL, ROLE_CATALOG };
enum bstate { BS_CONNECTING, BS_HANDSHAKE, BS_READY };

struct client;

typedef struct backend {
    uint64_t id;
    int fd;
    int watched_fd;       /* the descriptor registered with the loop's epoll set (-1: none) */
    uint32_t watched_ev;  /* and the events it waits for */
    enum role role;
    enum bstate state;
    uint32_t server; /* 0: the primary; 1..n: readers */
    buf_t in;        /* received; for session backends: fed and not yet covered by an action */
    buf_t out;
    struct client *owner; /* writer: its client; reader: the client it is attached to / acquired for */
    int attached;         /* reader: the owner's session uses it */
    int waiting;          /* reader: handshake for the owner's ACQUIRE_READER */
    int dead;
    int nocreds;
    int starting_up; /* the server refused the startup with 57P03 */
    int inflight;    /* reader: counted in its server's connects in flight (until ready or closed) */
    char *user;
    reader_key_t key;
    int32_t pid; /* BackendKeyData of our own handshake (readers), for cancels */
    uint8_t secret[4];
    scram_t *scram;
    uint64_t deadline;
    /* monitor */
    int mon_busy;
    uint64_t mon_sent_at;
    uint64_t mon_value;
    int mon_has_value;
    int mon_identity;       /* the query in flight also reads the writer's identity */
    uint64_t mon_system_id; /* its answer */
    uint32_t mon_timeline;
    int mon_has_identity;
    uint64_t mon_conf; /* the writer's pg_conf_load_time() in µs, read with the sample */
    int mon_has_conf;
    int mon_error;                  /* the query in flight got an ErrorResponse */
    struct catalog_load *cat;       /* ROLE_CATALOG: what the load read so far (catalog.c) */
    struct backend *next_attached; /* the owner's attached readers */
    struct backend *next, *prev;   /* all backends */
} backend_t;

typedef struct {
    uint64_t conn;
    uint32_t kind, server, flags;
} event_t;

typedef struct client {
    uint64_t id;
    int fd;
    int watched_fd; /* as the backend's */
    uint32_t watched_ev;
    router_t router;
    buf_t in; /* [0, fed): fed to the session, not yet covered by an action; then unfed bytes */
    size_t fed;
    buf_t out;
    backend_t *writer;
    backend_t *attached;
    backend_t *acquiring;
    int closing;
    int dead;
    int eof;            /* the client's input ended: no more reading; the session finishes what it has */
    int eof_fed;        /* ... and the session was told (client_eof), once every byte was fed */
    uint64_t eof_deadline; /* teardown then at the latest (UINT64_MAX: none) */
    uint64_t accepted_at;
    uint64_t deadline; /* the session's next deadline after the last drain (UINT64_MAX: none) */
    int authenticated; /* the writer accepted the login: no more authentication deadline */
    int catdb;         /* its database in catalog.c (-1: none): input waits for its first load */
    event_t evq[8];
    int nev;
    uint64_t events_fed; /* feed_client re-offers its bytes after an event made progress possible */
    int feed_more;       /* feed_client stopped at TURN_BYTES with input left: the loop comes back */
    char host[INET6_ADDRSTRLEN];
    uint16_t port;
    FILE *record; /* --record: this session's inputs, in the transcript format of replay.c */
    struct client *next, *prev;
} client_t;

typedef struct {
    char host[256];
    char port[16];
    struct sockaddr_storage addr;
    socklen_t alen;
    backend_t *monitor;
    uint64_t monitor_next;
    uint64_t identity_next; /* the primary: when its monitor reads the writer's identity again */
    int healthy;
    int warned;
    uint32_t connecting; /* reader connections in handshake (R-1b: one at a time while failing) */
    uint32_t monitor_failures; /* consecutive failed monitor samples */
} server_t;

/* What the command line sets (options.c). */
typedef struct {
    enum mode mode;
    char listen_host[256], listen_port[16];
    uint32_t reader_hostgroup;
    uint32_t monitor_interval_ms;
    uint32_t reader_connect_timeout_ms;
    uint32_t pool_idle_ms;
    uint32_t auth_timeout_ms; /* 0: none */
    uint32_t client_gone_timeout_ms; /* after a client's input ended, teardown at the latest (0: none) */
    uint32_t monitor_timeout_ms;  /* a monitor query unanswered this long is a failed sample */
    uint32_t monitor_down_after;  /* consecutive failed samples that mark a server down */
    uint32_t identity_interval_ms; /* how often the writer monitor reads the writer's identity */
    uint32_t catalog_refresh_ms;   /* how often each database's function catalogue is reloaded */
    int no_function_catalog;       /* never load one: user functions stay on the primary */
    const char *catalog_dbs[MAX_SETTINGS]; /* loaded at start (--catalog-database) */
    int ncatalog_dbs;
    const char *prometheus_file;
    uint32_t max_clients;
    const char *monitor_user, *monitor_db;
    const char *stats_file;
    const char *record_dir;
    const char *creds_path;
    const char *settings[MAX_SETTINGS][2];
    int nsettings;
    int verbose;
    int no_writer_samples; /* the writer monitor feeds nothing to the engine */
} options_t;

/* The proxy's state. */
typedef struct {
    options_t o;
    server_t servers[MAX_SERVERS];
    uint32_t nservers; /* servers[0] is the primary */
    polarsplit_engine *engine;
    int listen_fd;
    int reserve_fd;              /* held for EMFILE: closed to accept and refuse one client */
    uint64_t listen_paused_until; /* accept failing for want of memory or descriptors */
    int sigpipe[2];
    uint64_t next_id;
    client_t *clients;
    backend_t *backends;
    size_t nclients; /* live clients, for --max-clients */
    /* the proxy's own numbers */
    uint64_t clients_total, clients_refused, clients_auth_timeouts, accept_errors, reader_conns_opened,
        reader_handshake_failures, reader_nocreds, cancels_sent, monitor_errors;
    uint64_t session_timeouts;       /* on_timeout calls for a deadline that had come (R-1b) */
    uint64_t cancels_reported;       /* cancel_forwarded calls (F-1) */
    uint64_t reader_closes_reported; /* connection_closed calls for readers the proxy closed itself (E-2) */
    uint64_t monitor_timeouts;       /* monitor queries unanswered within --monitor-timeout-ms */
    uint64_t writer_identities;      /* writer identity reports (C-1) */
    uint64_t reader_connect_failures; /* reader connects that failed (refused, timed out, an error in the startup) */
    uint64_t reader_connect_failures_reported; /* of which the proxy reported itself (no session asked) */
    uint64_t reader_backoff_refusals; /* READER_UNAVAILABLE: the server's back-off said not yet (R-1b) */
    uint64_t reader_inflight_refusals; /* READER_UNAVAILABLE: a failing server had a connect in flight */
    uint64_t reader_losses_reported;  /* pooled idle readers that broke (reader_lost) */
    uint64_t monitor_failures_reported; /* reader monitor queries that failed (reader_monitor_failed) */
    uint64_t catalog_loads, catalog_failures, catalog_functions; /* F-policy loads; functions of the last */
    uint64_t catalog_sequences;                                  /* S-7: sequences of the last load */
    uint64_t catalog_objects;                                    /* S-6: objects that hide code, of the last load */
    uint64_t writer_system_id;       /* the last identity reported (0: none yet) */
    uint32_t writer_timeline;
    int stop;
} proxy_t;

extern proxy_t g;

void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define VLOG(...)                            \
    do {                                     \
        if (g.o.verbose) logf_(__VA_ARGS__); \
    } while (0)

/* options.c: parses the command line into g.o and the servers, and settings into `builder`.
 * Returns -1 to go on, else the exit status (0 after --help). */
int options_parse(int argc, char **argv, polarsplit_config_builder *builder);

/* net.c */
/* Milliseconds of CLOCK_MONOTONIC. The loop reads the clock once before its timers, once before
 * it waits and once after (now_ms_refresh); everything in between takes that time, as event
 * loops do: a clock read per use cost ~7 vDSO calls per relayed statement. */
uint64_t now_ms(void);
void now_ms_refresh(void);
void now_ms_unset(void);
int set_nonblocking(int fd);
int resolve(const char *host, const char *port, struct sockaddr_storage *out, socklen_t *len);
int split_hostport(const char *s, char *host, size_t hcap, char *port, size_t pcap);
int flush_fd(int fd, buf_t *b); /* writes what it can; -1 on a broken connection */
int listen_on(const char *host, const char *port);

/* listener.c */
int listener_open(void);
void listener_close(void);
int listener_wants_poll(uint64_t now);
void listener_accept(uint64_t now);
/* Connections being refused (see listener.c): readable, and their deadlines. */
void listener_readable(int fd);
void listener_tick(uint64_t now);
uint64_t listener_next_deadline(uint64_t now);

/* client.c */
void client_start(int fd, const struct sockaddr_storage *sa, uint64_t now);
void client_readable(client_t *c);
void feed_client(client_t *c);
int clients_feed_more(void);
void pump(client_t *c);
void push_event(client_t *c, uint64_t conn, uint32_t kind, uint32_t server, uint32_t flags);
void client_teardown(client_t *c);
/* A client whose input ended reset its connection: the descriptor is closed; the session goes
 * on until an answer is due (PostgreSQL's backend ends at its first send that fails). */
void client_reset(client_t *c);
void client_free(client_t *c);
backend_t *find_conn(client_t *c, uint64_t id);
/* Closes clients that have not authenticated within --auth-timeout-ms; returns the next such
 * deadline (UINT64_MAX when none). */
uint64_t clients_check_auth_deadlines(uint64_t now);
/* Reports the time to sessions whose deadline (SPEC R-1b) has come; returns the next one. */
uint64_t clients_check_session_deadlines(uint64_t now);

/* actions.c */
void exec_action(client_t *c, const polarsplit_action *a);

/* backend.c */
backend_t *backend_new(enum role role, uint32_t server);
int backend_connect(backend_t *b);
void detach(client_t *c, backend_t *b);
void backend_close(backend_t *b);
void backend_free(backend_t *b);
void backend_connected(backend_t *b);
void backend_readable(backend_t *b);
void backend_write_failed(backend_t *b);
int can_read_backend(const backend_t *b);
void reader_fail_acquire(backend_t *b);
/* A reader connection the proxy opened on its own (no session waits for it) failed to open
 * (R-1a/R-1b); `starting_up`: refused with 57P03. */
void report_reader_connect_failed(uint32_t server, int starting_up);
void session_backend_lost(backend_t *b);
void send_cancel(uint32_t server, int32_t pid, const uint8_t *secret, size_t len);

/* monitor.c */
void monitor_tick(uint64_t now);
void monitor_readable(backend_t *b, int eof);
void monitor_failed(backend_t *b, const char *why);
uint64_t monitor_next_due(void);

/* catalog.c: the writer's user functions per database (SPEC §7 F-policy) */
int catalog_want(const char *db, size_t len); /* a client of `db` connected: load it if new; its index or -1 */
int catalog_first_load_pending(int db);       /* the database's first load is due or in flight */
void catalog_tick(uint64_t now);
uint64_t catalog_next_due(void);
void catalog_readable(backend_t *b, int eof);
void catalog_failed(backend_t *b, const char *why);
void catalog_free_load(struct catalog_load *l);

/* loop.c */
void loop_run(void);
/* A connection being refused is watched for reading until it is closed (listener.c). */
void loop_watch_refusal(int fd);
void shutdown_all(void);

/* stats.c */
void dump_stats(void);

/* record.c */
void record_open(client_t *c);
void record_hex(FILE *f, const char *prefix, const uint8_t *b, size_t n);
void record_event(client_t *c, const event_t *e);
void record_timeout(client_t *c, uint64_t now);
void record_cancel(client_t *c);
void record_cancel_forwarded(client_t *c, uint64_t conn);

#endif
