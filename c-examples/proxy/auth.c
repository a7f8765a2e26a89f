#define _POSIX_C_SOURCE 200809L
#include "auth.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

/* ------------------------------------------------------------------------------------------ */
/* Credential map                                                                              */

typedef struct {
    char *user;
    char *password;
} cred_t;

static cred_t *creds;
static size_t ncreds;

void creds_free(void) {
    for (size_t i = 0; i < ncreds; i++) {
        OPENSSL_cleanse(creds[i].password, strlen(creds[i].password));
        free(creds[i].user);
        free(creds[i].password);
    }
    free(creds);
    creds = NULL;
    ncreds = 0;
}

int creds_load(const char *path, char *err, size_t err_len) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, err_len, "cannot open credentials file %s", path);
        return -1;
    }
    char line[1024];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (*s == '\0' || *s == '#') continue;
        char *colon = strchr(s, ':');
        if (!colon || colon == s) {
            snprintf(err, err_len, "%s:%d: expected user:password", path, lineno);
            fclose(f);
            return -1;
        }
        *colon = '\0';
        cred_t *c = realloc(creds, (ncreds + 1) * sizeof *creds);
        if (!c) abort();
        creds = c;
        creds[ncreds].user = strdup(s);
        creds[ncreds].password = strdup(colon + 1);
        if (!creds[ncreds].user || !creds[ncreds].password) abort();
        ncreds++;
    }
    OPENSSL_cleanse(line, sizeof line);
    fclose(f);
    return 0;
}

const char *creds_lookup(const char *user) {
    for (size_t i = 0; i < ncreds; i++)
        if (strcmp(creds[i].user, user) == 0) return creds[i].password;
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Startup packets, LSNs, errors                                                               */

int startup_param(const uint8_t *pkt, size_t len, const char *name, char *out, size_t cap) {
    const char *found = NULL;
    size_t found_len = 0;
    size_t pos = 8;
    while (pos < len && pkt[pos] != 0) {
        const char *k = (const char *)pkt + pos;
        size_t kl = strnlen(k, len - pos);
        if (pos + kl + 1 >= len) break;
        const char *v = k + kl + 1;
        size_t vl = strnlen(v, len - (pos + kl + 1));
        if (pos + kl + 1 + vl >= len) break; /* a value without its NUL */
        if (strcmp(k, name) == 0) {
            found = v; /* the last one wins, as in PostgreSQL */
            found_len = vl;
        }
        pos += kl + 1 + vl + 1;
    }
    if (!found || found_len + 1 > cap) return -1;
    memcpy(out, found, found_len);
    out[found_len] = '\0';
    return 0;
}

void startup_build(buf_t *out, const char *const *kv) {
    buf_t body = {0};
    buf_put32(&body, 196608); /* protocol 3.0 */
    for (size_t i = 0; kv[i]; i += 2) {
        buf_append(&body, kv[i], strlen(kv[i]) + 1);
        buf_append(&body, kv[i + 1], strlen(kv[i + 1]) + 1);
    }
    buf_append(&body, "", 1);
    buf_put32(out, (uint32_t)(buf_size(&body) + 4));
    buf_append(out, buf_data(&body), buf_size(&body));
    buf_free(&body);
}

int parse_lsn(const char *text, size_t len, uint64_t *out) {
    uint64_t hi = 0, lo = 0;
    size_t i = 0;
    int digits = 0;
    for (; i < len && text[i] != '/'; i++, digits++) {
        if (!isxdigit((unsigned char)text[i]) || digits >= 8) return -1;
        hi = hi * 16 + (uint64_t)(isdigit((unsigned char)text[i]) ? text[i] - '0' : (tolower((unsigned char)text[i]) - 'a' + 10));
    }
    if (i == len || digits == 0) return -1;
    i++;
    digits = 0;
    for (; i < len; i++, digits++) {
        if (!isxdigit((unsigned char)text[i]) || digits >= 8) return -1;
        lo = lo * 16 + (uint64_t)(isdigit((unsigned char)text[i]) ? text[i] - '0' : (tolower((unsigned char)text[i]) - 'a' + 10));
    }
    if (digits == 0) return -1;
    *out = (hi << 32) | lo;
    return 0;
}

int row_field(const uint8_t *body, size_t blen, unsigned i, const uint8_t **val, size_t *len) {
    if (blen < 2) return -1;
    unsigned n = ((unsigned)body[0] << 8) | body[1];
    size_t pos = 2;
    for (unsigned k = 0; k < n; k++) {
        if (blen - pos < 4) return -1;
        uint32_t l = rd32(body + pos);
        pos += 4;
        if (l == 0xffffffffu) {
            if (k == i) return 1;
            continue;
        }
        if (l > blen - pos) return -1;
        if (k == i) {
            *val = body + pos;
            *len = l;
            return 0;
        }
        pos += l;
    }
    return -1;
}

int parse_system_id(const char *text, size_t len, uint64_t *out) {
    size_t i = 0;
    int neg = len > 0 && text[0] == '-';
    if (neg) i++;
    if (i == len || len - i > 20) return -1;
    uint64_t v = 0;
    for (; i < len; i++) {
        if (!isdigit((unsigned char)text[i])) return -1;
        uint64_t d = (uint64_t)(text[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    if (v > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX)) return -1; /* not a bigint */
    *out = neg ? (uint64_t)0 - v : v;
    return 0;
}

int parse_walfile_timeline(const char *text, size_t len, uint32_t *out) {
    if (len != 24) return -1;
    uint32_t t = 0;
    for (size_t i = 0; i < 24; i++) {
        if (!isxdigit((unsigned char)text[i])) return -1;
        if (i < 8) t = t * 16 + (uint32_t)(isdigit((unsigned char)text[i]) ? text[i] - '0' : (tolower((unsigned char)text[i]) - 'a' + 10));
    }
    if (t == 0) return -1;
    *out = t;
    return 0;
}

int error_is_fatal(const uint8_t *body, size_t len) {
    char localized[32] = "", severity[32] = "";
    size_t pos = 0;
    while (pos < len && body[pos] != 0) {
        char f = (char)body[pos++];
        const char *v = (const char *)body + pos;
        size_t vl = strnlen(v, len - pos);
        if (f == 'V') snprintf(severity, sizeof severity, "%.*s", (int)vl, v);
        if (f == 'S') snprintf(localized, sizeof localized, "%.*s", (int)vl, v);
        pos += vl + 1;
    }
    /* 'V' is never translated (PostgreSQL 9.6+); 'S' is, by the server's lc_messages: only a
     * server that sends no 'V' is judged by it. */
    const char *s = severity[0] ? severity : localized;
    return strcmp(s, "FATAL") == 0 || strcmp(s, "PANIC") == 0;
}

void error_fields(const uint8_t *body, size_t len, char *code, size_t code_cap, char *msg, size_t msg_cap) {
    if (code_cap) code[0] = '\0';
    if (msg_cap) msg[0] = '\0';
    size_t pos = 0;
    while (pos < len && body[pos] != 0) {
        char f = (char)body[pos++];
        const char *v = (const char *)body + pos;
        size_t vl = strnlen(v, len - pos);
        if (f == 'C' && code_cap) snprintf(code, code_cap, "%.*s", (int)vl, v);
        if (f == 'M' && msg_cap) snprintf(msg, msg_cap, "%.*s", (int)vl, v);
        pos += vl + 1;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* md5 and SCRAM-SHA-256                                                                       */

static void hex(const unsigned char *in, size_t n, char *out) {
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[in[i] >> 4];
        out[2 * i + 1] = d[in[i] & 15];
    }
    out[2 * n] = '\0';
}

static int md5_hex(const void *a, size_t an, const void *b, size_t bn, char out[33]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx) return -1;
    int ok = EVP_DigestInit_ex(ctx, EVP_md5(), NULL) && EVP_DigestUpdate(ctx, a, an) &&
             EVP_DigestUpdate(ctx, b, bn) && EVP_DigestFinal_ex(ctx, md, &mdlen);
    EVP_MD_CTX_free(ctx);
    if (!ok || mdlen != 16) return -1;
    hex(md, 16, out);
    return 0;
}

struct scram {
    char client_first_bare[128];
    char nonce[64];
    unsigned char salted[32];
    char auth_message[1024];
};

void auth_free(scram_t *s) {
    if (s) {
        OPENSSL_cleanse(s, sizeof *s);
        free(s);
    }
}

static int hmac256(const unsigned char *key, size_t klen, const void *data, size_t n, unsigned char out[32]) {
    unsigned int len = 0;
    return HMAC(EVP_sha256(), key, (int)klen, data, n, out, &len) && len == 32 ? 0 : -1;
}

static int sha256(const void *data, size_t n, unsigned char out[32]) {
    unsigned int len = 0;
    return EVP_Digest(data, n, out, &len, EVP_sha256(), NULL) && len == 32 ? 0 : -1;
}

/* Finds "k=" in a SCRAM attribute list; copies its value. */
static int scram_attr(const char *msg, char k, char *out, size_t cap) {
    const char *p = msg;
    while (*p) {
        if (p[0] == k && p[1] == '=') {
            const char *v = p + 2;
            size_t n = strcspn(v, ",");
            if (n + 1 > cap) return -1;
            memcpy(out, v, n);
            out[n] = '\0';
            return 0;
        }
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    return -1;
}

static void put_password(buf_t *out, const char *pw) { buf_msg(out, 'p', pw, strlen(pw) + 1); }

auth_result auth_step(const uint8_t *body, size_t len, const char *user, const char *password,
                      scram_t **scram, buf_t *out, char *err, size_t err_len) {
    if (len < 4) {
        snprintf(err, err_len, "short authentication message");
        return AUTH_FAILED;
    }
    uint32_t code = rd32(body);
    switch (code) {
    case 0:
        return AUTH_OK;
    case 3: /* cleartext */
        if (!password) return AUTH_NO_CREDENTIALS;
        put_password(out, password);
        return AUTH_CONTINUE;
    case 5: { /* md5: "md5" + md5(md5(password + user) + salt) */
        if (!password) return AUTH_NO_CREDENTIALS;
        if (len < 8) {
            snprintf(err, err_len, "short md5 request");
            return AUTH_FAILED;
        }
        char inner[33], outer[36];
        if (md5_hex(password, strlen(password), user, strlen(user), inner) != 0 ||
            md5_hex(inner, 32, body + 4, 4, outer + 3) != 0) {
            snprintf(err, err_len, "md5 failed");
            return AUTH_FAILED;
        }
        memcpy(outer, "md5", 3);
        put_password(out, outer);
        return AUTH_CONTINUE;
    }
    case 10: { /* SASL: list of mechanisms */
        if (!password) return AUTH_NO_CREDENTIALS;
        int found = 0;
        size_t pos = 4;
        while (pos < len && body[pos]) {
            const char *m = (const char *)body + pos;
            size_t ml = strnlen(m, len - pos);
            if (strcmp(m, "SCRAM-SHA-256") == 0) found = 1;
            pos += ml + 1;
        }
        if (!found) {
            snprintf(err, err_len, "no supported SASL mechanism");
            return AUTH_FAILED;
        }
        scram_t *s = calloc(1, sizeof *s);
        if (!s) abort();
        unsigned char raw[18];
        if (RAND_bytes(raw, sizeof raw) != 1) {
            free(s);
            snprintf(err, err_len, "RAND_bytes failed");
            return AUTH_FAILED;
        }
        EVP_EncodeBlock((unsigned char *)s->nonce, raw, sizeof raw);
        snprintf(s->client_first_bare, sizeof s->client_first_bare, "n=,r=%s", s->nonce);
        auth_free(*scram);
        *scram = s;
        char first[160];
        int fl = snprintf(first, sizeof first, "n,,%s", s->client_first_bare);
        buf_t b = {0};
        buf_append(&b, "SCRAM-SHA-256", 14);
        buf_put32(&b, (uint32_t)fl);
        buf_append(&b, first, (size_t)fl);
        buf_msg(out, 'p', buf_data(&b), buf_size(&b));
        buf_free(&b);
        return AUTH_CONTINUE;
    }
    case 11: { /* SASLContinue: server-first-message */
        scram_t *s = *scram;
        if (!s || !password) {
            snprintf(err, err_len, "unexpected SASLContinue");
            return AUTH_FAILED;
        }
        char server_first[512], nonce[160], salt64[128], iter[16];
        if (len - 4 >= sizeof server_first) {
            snprintf(err, err_len, "server-first-message too long");
            return AUTH_FAILED;
        }
        memcpy(server_first, body + 4, len - 4);
        server_first[len - 4] = '\0';
        if (scram_attr(server_first, 'r', nonce, sizeof nonce) || scram_attr(server_first, 's', salt64, sizeof salt64) ||
            scram_attr(server_first, 'i', iter, sizeof iter) || strncmp(nonce, s->nonce, strlen(s->nonce)) != 0) {
            snprintf(err, err_len, "bad server-first-message");
            return AUTH_FAILED;
        }
        unsigned char salt[96];
        int saltlen = EVP_DecodeBlock(salt, (const unsigned char *)salt64, (int)strlen(salt64));
        size_t s64 = strlen(salt64);
        if (saltlen < 0) {
            snprintf(err, err_len, "bad salt");
            return AUTH_FAILED;
        }
        /* EVP_DecodeBlock counts padding bytes as data: remove them. */
        if (s64 >= 1 && salt64[s64 - 1] == '=') saltlen--;
        if (s64 >= 2 && salt64[s64 - 2] == '=') saltlen--;
        int iterations = atoi(iter);
        if (iterations <= 0 ||
            PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, saltlen, iterations, EVP_sha256(), 32, s->salted) != 1) {
            snprintf(err, err_len, "PBKDF2 failed");
            return AUTH_FAILED;
        }
        char final_wo_proof[256];
        snprintf(final_wo_proof, sizeof final_wo_proof, "c=biws,r=%s", nonce);
        int am = snprintf(s->auth_message, sizeof s->auth_message, "%s,%s,%s", s->client_first_bare, server_first,
                          final_wo_proof);
        if (am < 0 || (size_t)am >= sizeof s->auth_message) {
            snprintf(err, err_len, "SCRAM message too long");
            return AUTH_FAILED;
        }
        unsigned char client_key[32], stored_key[32], sig[32], proof[32];
        if (hmac256(s->salted, 32, "Client Key", 10, client_key) || sha256(client_key, 32, stored_key) ||
            hmac256(stored_key, 32, s->auth_message, (size_t)am, sig)) {
            snprintf(err, err_len, "SCRAM computation failed");
            return AUTH_FAILED;
        }
        for (int i = 0; i < 32; i++) proof[i] = client_key[i] ^ sig[i];
        char proof64[64];
        EVP_EncodeBlock((unsigned char *)proof64, proof, 32);
        char final[400];
        int fl = snprintf(final, sizeof final, "%s,p=%s", final_wo_proof, proof64);
        buf_msg(out, 'p', final, (size_t)fl);
        OPENSSL_cleanse(client_key, sizeof client_key);
        return AUTH_CONTINUE;
    }
    case 12: { /* SASLFinal: verify the server's signature */
        scram_t *s = *scram;
        if (!s) {
            snprintf(err, err_len, "unexpected SASLFinal");
            return AUTH_FAILED;
        }
        char final[256], v[128];
        if (len - 4 >= sizeof final) {
            snprintf(err, err_len, "server-final-message too long");
            return AUTH_FAILED;
        }
        memcpy(final, body + 4, len - 4);
        final[len - 4] = '\0';
        unsigned char server_key[32], sig[32];
        char sig64[64];
        if (scram_attr(final, 'v', v, sizeof v) || hmac256(s->salted, 32, "Server Key", 10, server_key) ||
            hmac256(server_key, 32, s->auth_message, strlen(s->auth_message), sig)) {
            snprintf(err, err_len, "bad server-final-message");
            return AUTH_FAILED;
        }
        EVP_EncodeBlock((unsigned char *)sig64, sig, 32);
        if (strcmp(sig64, v) != 0) {
            snprintf(err, err_len, "the server's SCRAM signature does not verify");
            return AUTH_FAILED;
        }
        return AUTH_CONTINUE;
    }
    default:
        snprintf(err, err_len, "unsupported authentication request %u", code);
        return AUTH_FAILED;
    }
}
