/* hash.c — hash64 (CMF v2 §8), one-shot and incremental. */
#include "util/hash.h"
#include "util/arith.h"

#include <stdio.h>
#include <string.h>

#define SALT 0x9E3779B97F4A7C15ull

void cmf__hash64_init(cmf__hash64_state *s) { memset(s, 0, sizeof *s); }

void cmf__hash64_update(cmf__hash64_state *s, const void *data, size_t len)
{
    const uint8_t *p = data;
    s->len += len;
    while (len > 0 && s->n_pend > 0) {
        s->pend[s->n_pend++] = *p++;
        len--;
        if (s->n_pend == 8) {
            s->acc ^= cmf__fmix64(cmf__rd64(s->pend)) ^ (s->n_words * SALT);
            s->n_words++;
            s->n_pend = 0;
        }
    }
    uint64_t acc = s->acc, i = s->n_words;
    for (; len >= 8; len -= 8, p += 8, i++)
        acc ^= cmf__fmix64(cmf__rd64(p)) ^ (i * SALT);
    s->acc = acc;
    s->n_words = i;
    for (; len > 0; len--) s->pend[s->n_pend++] = *p++;
}

uint64_t cmf__hash64_final(cmf__hash64_state *s)
{
    uint64_t acc = s->acc;
    if (s->n_pend) {
        uint8_t w[8] = {0};
        memcpy(w, s->pend, s->n_pend);
        acc ^= cmf__fmix64(cmf__rd64(w)) ^ (s->n_words * SALT);
    }
    acc ^= s->len;
    return cmf__fmix64(acc);
}

uint64_t cmf__hash64(const void *data, size_t len)
{
    cmf__hash64_state s;
    cmf__hash64_init(&s);
    cmf__hash64_update(&s, data, len);
    return cmf__hash64_final(&s);
}

void cmf__hash64_hex(uint64_t h, char out[17]) { snprintf(out, 17, "%016llx", (unsigned long long)h); }

int cmf__hash64_parse_hex(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0 || n >= 16) return -1;
        v = v << 4 | (uint64_t)d;
    }
    if (n == 0) return -1;
    *out = v;
    return 0;
}
