/* --record DIR: each library session's inputs as a transcript that c-examples/replay replays. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>

#include "proxy.h"

void record_hex(FILE *f, const char *prefix, const uint8_t *b, size_t n) {
    if (!f || n == 0) return;
    fputs(prefix, f);
    for (size_t i = 0; i < n; i++) fprintf(f, "%02x", b[i]);
    fputc('\n', f);
    fflush(f);
}

static const char *event_name(uint32_t kind) {
    switch (kind) {
    case POLARSPLIT_EVENT_WRITER_CONNECTED: return "writer_connected";
    case POLARSPLIT_EVENT_WRITER_CONNECT_FAILED: return "writer_connect_failed";
    case POLARSPLIT_EVENT_READER_ATTACHED: return "reader_attached";
    case POLARSPLIT_EVENT_READER_UNAVAILABLE: return "reader_unavailable";
    case POLARSPLIT_EVENT_CONNECTION_LOST: return "connection_lost";
    default: return "unknown";
    }
}

void record_event(client_t *c, const event_t *e) {
    if (!c->record) return;
    fprintf(c->record, "event %s %llu %u %u\n", event_name(e->kind), (unsigned long long)e->conn, e->server, e->flags);
}

/* on_timeout: replay reports its own clock at the session's deadline. */
void record_timeout(client_t *c, uint64_t now) {
    (void)now;
    if (!c->record) return;
    fputs("timeout\n", c->record);
    fflush(c->record);
}

void record_cancel(client_t *c) {
    if (!c->record) return;
    fputs("cancel\n", c->record);
    fflush(c->record);
}

/* The cancel went to connection `conn` (polarsplit_session_cancel_forwarded): a 57014 there is the
 * client's cancel, which decides how the engine takes it, so replay must say so too. */
void record_cancel_forwarded(client_t *c, uint64_t conn) {
    if (!c->record) return;
    fprintf(c->record, "cancel_forwarded %llu\n", (unsigned long long)conn);
    fflush(c->record);
}

void record_open(client_t *c) {
    if (!g.o.record_dir || !c->router.is_library) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/client-%llu.transcript", g.o.record_dir, (unsigned long long)c->id);
    c->record = fopen(path, "w");
    if (!c->record) return;
    fprintf(c->record, "# recorded by polarsplit-proxy from a real session (client %s:%u)\n", c->host, c->port);
    for (int i = 0; i < g.o.nsettings; i++) fprintf(c->record, "set %s %s\n", g.o.settings[i][0], g.o.settings[i][1]);
    for (uint32_t i = 1; i < g.nservers; i++) fprintf(c->record, "reader %u %u\n", i, g.o.reader_hostgroup);
    fprintf(c->record, "info %s %u %s %s\n", c->host, c->port, g.o.listen_host, g.o.listen_port);
}
