/* hash.h — hash64 of CMF v2 §8 (murmur3 fmix64 over little-endian 64-bit
 * words, positional salt outside the mix, XOR fold, length, final mix).
 * Non-cryptographic: the XOR fold is order-blind for equal words swapped
 * (the salt cancels); the detached signature's SHA-256 covers that. */
#ifndef CMF_UTIL_HASH_H
#define CMF_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

/* murmur3's 64-bit finaliser: the word mix of hash64, and a good integer
 * hash for open-addressing tables. */
static inline uint64_t cmf__fmix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return x;
}

uint64_t cmf__hash64(const void *data, size_t len);

/* Incremental form for data streamed in pieces (a tensor written in
 * chunks): feed bytes in order, then finish. Gives cmf__hash64's value. */
typedef struct cmf__hash64_state {
    uint64_t acc;
    uint64_t n_words;   /* full words folded so far */
    uint64_t len;       /* bytes fed so far */
    uint8_t pend[8];
    unsigned n_pend;
} cmf__hash64_state;
void cmf__hash64_init(cmf__hash64_state *s);
void cmf__hash64_update(cmf__hash64_state *s, const void *data, size_t len);
uint64_t cmf__hash64_final(cmf__hash64_state *s);

/* 16 lower-case hex digits + NUL, the form section hashes take in JSON. */
void cmf__hash64_hex(uint64_t h, char out[17]);
/* Parses 1..16 hex digits; returns 0 on success, -1 on bad input. */
int cmf__hash64_parse_hex(const char *s, uint64_t *out);

#endif
