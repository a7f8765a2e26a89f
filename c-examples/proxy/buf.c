#include "buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_append(buf_t *b, const void *data, size_t n) {
    if (n == 0) return;
    if (b->len + n > b->cap) {
        size_t live = b->len - b->off;
        if (b->off > 0 && live + n <= b->cap) {
            memmove(b->p, b->p + b->off, live);
        } else {
            size_t cap = b->cap ? b->cap : 4096;
            while (cap < live + n) cap *= 2;
            uint8_t *p = malloc(cap);
            if (!p) {
                fprintf(stderr, "polarsplit-proxy: out of memory\n");
                abort();
            }
            if (live) memcpy(p, b->p + b->off, live);
            free(b->p);
            b->p = p;
            b->cap = cap;
        }
        b->off = 0;
        b->len = live;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

void buf_consume(buf_t *b, size_t n) {
    if (n > b->len - b->off) n = b->len - b->off;
    b->off += n;
    if (b->off == b->len) b->off = b->len = 0;
}

void buf_free(buf_t *b) {
    free(b->p);
    b->p = NULL;
    b->off = b->len = b->cap = 0;
}

void buf_put32(buf_t *b, uint32_t v) {
    uint8_t x[4];
    wr32(x, v);
    buf_append(b, x, 4);
}

void buf_msg(buf_t *b, char tag, const void *body, size_t n) {
    uint8_t t = (uint8_t)tag;
    buf_append(b, &t, 1);
    buf_put32(b, (uint32_t)(n + 4));
    buf_append(b, body, n);
}
