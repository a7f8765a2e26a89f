/* Growable byte buffers: the proxy keeps every byte it fed to a session here until an action
 * covers it (forward or discard by count), and queues what it sends on each socket. */
#ifndef PROXY_BUF_H
#define PROXY_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t *p;
    size_t off; /* first valid byte */
    size_t len; /* end of valid bytes */
    size_t cap;
} buf_t;

static inline uint8_t *buf_data(const buf_t *b) { return b->p + b->off; }
static inline size_t buf_size(const buf_t *b) { return b->len - b->off; }

void buf_append(buf_t *b, const void *data, size_t n);
/* Drops the first n valid bytes (n <= buf_size). */
void buf_consume(buf_t *b, size_t n);
void buf_free(buf_t *b);

/* Big-endian helpers. */
static inline uint32_t rd32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline void wr32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
void buf_put32(buf_t *b, uint32_t v);
/* Appends a tagged message: tag, length, body. */
void buf_msg(buf_t *b, char tag, const void *body, size_t n);

#endif
