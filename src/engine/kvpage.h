/* kvpage.h — the block pool of a paged KV cache: which cache block holds
 * each block of every sequence (the table the attention ops read), the
 * blocks' reference counts, the free list, and the prefix cache: full
 * blocks registered under a chained hash of what produced them, shared by
 * every sequence whose tokens start the same way, and kept after their
 * last user is gone until the space is needed (least recently released
 * first). Host-side bookkeeping only: the engine uploads the table. */
#ifndef CMF_ENGINE_KVPAGE_H
#define CMF_ENGINE_KVPAGE_H

#include "cmf.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct cmf__kvpool {
    int64_t n_blocks, block, per_seq, n_seq;
    int32_t *table;           /* [n_seq][per_seq] cache block, -1 = none */
    int64_t *held;            /* [n_seq] blocks a sequence holds (its first held entries) */
    int32_t *ref;             /* [n_blocks] sequences holding the block */
    uint64_t *hash;           /* [n_blocks] key in the prefix cache, 0 = none */
    int32_t *next;            /* [n_blocks] the hash bucket's chain */
    int32_t *prev_lru, *next_lru; /* [n_blocks] cached blocks nobody holds, oldest first */
    int32_t lru_head, lru_tail;
    int64_t n_lru;
    int32_t *free_stk;        /* [n_blocks] free blocks (never cached or evicted); top = next taken */
    int64_t n_free;
    int32_t *bucket;          /* [n_bucket] first block of each chain, -1 = none */
    uint64_t n_bucket;        /* a power of two */
    int64_t dirty_lo, dirty_hi; /* table entries changed since the last upload, [lo, hi) */
} cmf__kvpool;

cmf_status cmf__kvpool_init(cmf__kvpool *kp, int64_t n_blocks, int64_t block, int64_t per_seq, int64_t n_seq);
void cmf__kvpool_free(cmf__kvpool *kp);
/* Blocks that can be taken now: free ones and cached ones nobody holds. */
static inline int64_t cmf__kvpool_avail(const cmf__kvpool *kp) { return kp->n_free + kp->n_lru; }
/* Blocks in use by sequences (held by at least one). */
static inline int64_t cmf__kvpool_used(const cmf__kvpool *kp) { return kp->n_blocks - kp->n_free - kp->n_lru; }
/* Blocks sequence s must take to hold n_pos positions. */
int64_t cmf__kvpool_need(const cmf__kvpool *kp, int64_t s, int64_t n_pos);
/* Gives sequence s blocks up to n_pos positions (cmf__kvpool_need of them
 * must be available: the caller checks). */
void cmf__kvpool_grow(cmf__kvpool *kp, int64_t s, int64_t n_pos);
/* Drops sequence s's blocks past n_pos positions. A block nobody holds any
 * more goes to the free list, or, when cached, to the cache's LRU end. */
void cmf__kvpool_shrink(cmf__kvpool *kp, int64_t s, int64_t n_pos);
/* True when the block holding position p of s is held by another sequence too. */
bool cmf__kvpool_shared(const cmf__kvpool *kp, int64_t s, int64_t p);
/* The block at position p of s is about to be written: it leaves the
 * prefix cache (its content will no longer be what its key says). */
void cmf__kvpool_unhash(cmf__kvpool *kp, int64_t s, int64_t p);
/* For sequence s, which holds nothing: takes the cached blocks of keys
 * key[0..n) while they are all there, in order; returns how many. */
int64_t cmf__kvpool_attach(cmf__kvpool *kp, int64_t s, const uint64_t *key, int64_t n);
/* Registers s's first n blocks (all full) under key[0..n); a block already
 * cached keeps its key, a key another block has is left to that one. */
void cmf__kvpool_publish(cmf__kvpool *kp, int64_t s, const uint64_t *key, int64_t n);

#endif
