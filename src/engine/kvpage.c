/* kvpage.c — the paged KV cache's block pool (kvpage.h). A sequence holds
 * its blocks in table order; a block is free (on the free stack), held by
 * one or more sequences (ref > 0), or cached and held by none (on the LRU
 * list, still findable by its key). Taking a block prefers the free stack
 * (lowest blocks first, so memory is touched as it is used), then evicts
 * the least recently released cached block. */
#include "engine/kvpage.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

cmf_status cmf__kvpool_init(cmf__kvpool *kp, int64_t n_blocks, int64_t block, int64_t per_seq, int64_t n_seq)
{
    memset(kp, 0, sizeof *kp);
    if (n_blocks < 1 || n_blocks > INT32_MAX || block < 1 || per_seq < 1 || n_seq < 1 || per_seq > INT64_MAX / n_seq)
        return cmf__error(CMF_ERR_ARG, "KV cache: %lld blocks of %lld positions, %lld per sequence, %lld sequences",
                          (long long)n_blocks, (long long)block, (long long)per_seq, (long long)n_seq);
    kp->n_blocks = n_blocks, kp->block = block, kp->per_seq = per_seq, kp->n_seq = n_seq;
    kp->n_bucket = 16;
    while (kp->n_bucket < (uint64_t)n_blocks) kp->n_bucket <<= 1;
    const size_t nb = (size_t)n_blocks;
    kp->table = malloc((size_t)(per_seq * n_seq) * sizeof *kp->table);
    kp->held = calloc((size_t)n_seq, sizeof *kp->held);
    kp->ref = calloc(nb, sizeof *kp->ref);
    kp->hash = calloc(nb, sizeof *kp->hash);
    kp->next = malloc(nb * sizeof *kp->next);
    kp->prev_lru = malloc(nb * sizeof *kp->prev_lru);
    kp->next_lru = malloc(nb * sizeof *kp->next_lru);
    kp->free_stk = malloc(nb * sizeof *kp->free_stk);
    kp->bucket = malloc((size_t)kp->n_bucket * sizeof *kp->bucket);
    if (!kp->table || !kp->held || !kp->ref || !kp->hash || !kp->next || !kp->prev_lru || !kp->next_lru ||
        !kp->free_stk || !kp->bucket) {
        cmf__kvpool_free(kp);
        return cmf__error(CMF_ERR_NOMEM, "KV cache: out of memory for the table of %lld blocks", (long long)n_blocks);
    }
    memset(kp->table, 0xff, (size_t)(per_seq * n_seq) * sizeof *kp->table);
    memset(kp->bucket, 0xff, (size_t)kp->n_bucket * sizeof *kp->bucket);
    for (int64_t i = 0; i < n_blocks; i++) kp->free_stk[i] = (int32_t)(n_blocks - 1 - i); /* block 0 on top */
    kp->n_free = n_blocks;
    kp->lru_head = kp->lru_tail = -1;
    kp->dirty_lo = 0, kp->dirty_hi = per_seq * n_seq;
    return CMF_OK;
}

void cmf__kvpool_free(cmf__kvpool *kp)
{
    free(kp->table);
    free(kp->held);
    free(kp->ref);
    free(kp->hash);
    free(kp->next);
    free(kp->prev_lru);
    free(kp->next_lru);
    free(kp->free_stk);
    free(kp->bucket);
    memset(kp, 0, sizeof *kp);
}

static void dirty(cmf__kvpool *kp, int64_t entry)
{
    if (kp->dirty_lo >= kp->dirty_hi) kp->dirty_lo = entry, kp->dirty_hi = entry + 1;
    else if (entry < kp->dirty_lo) kp->dirty_lo = entry;
    else if (entry >= kp->dirty_hi) kp->dirty_hi = entry + 1;
}

static void lru_unlink(cmf__kvpool *kp, int32_t b)
{
    int32_t p = kp->prev_lru[b], n = kp->next_lru[b];
    if (p >= 0) kp->next_lru[p] = n;
    else kp->lru_head = n;
    if (n >= 0) kp->prev_lru[n] = p;
    else kp->lru_tail = p;
    kp->n_lru--;
}

static void lru_push(cmf__kvpool *kp, int32_t b)
{
    kp->prev_lru[b] = kp->lru_tail, kp->next_lru[b] = -1;
    if (kp->lru_tail >= 0) kp->next_lru[kp->lru_tail] = b;
    else kp->lru_head = b;
    kp->lru_tail = b;
    kp->n_lru++;
}

static int32_t *chain_of(cmf__kvpool *kp, uint64_t key) { return &kp->bucket[key & (kp->n_bucket - 1)]; }

static int32_t lookup(cmf__kvpool *kp, uint64_t key)
{
    for (int32_t b = *chain_of(kp, key); b >= 0; b = kp->next[b])
        if (kp->hash[b] == key) return b;
    return -1;
}

static void drop_key(cmf__kvpool *kp, int32_t b)
{
    for (int32_t *at = chain_of(kp, kp->hash[b]); *at >= 0; at = &kp->next[*at])
        if (*at == b) {
            *at = kp->next[b];
            break;
        }
    kp->hash[b] = 0;
}

static int32_t take(cmf__kvpool *kp)
{
    int32_t b;
    if (kp->n_free) {
        b = kp->free_stk[--kp->n_free];
    } else { /* the oldest cached block nobody holds */
        b = kp->lru_head;
        lru_unlink(kp, b);
        drop_key(kp, b);
    }
    kp->ref[b] = 1;
    return b;
}

static void release(cmf__kvpool *kp, int32_t b)
{
    if (--kp->ref[b] > 0) return;
    if (kp->hash[b]) lru_push(kp, b);
    else kp->free_stk[kp->n_free++] = b;
}

int64_t cmf__kvpool_need(const cmf__kvpool *kp, int64_t s, int64_t n_pos)
{
    int64_t want = (n_pos + kp->block - 1) / kp->block;
    return want > kp->held[s] ? want - kp->held[s] : 0;
}

void cmf__kvpool_grow(cmf__kvpool *kp, int64_t s, int64_t n_pos)
{
    int64_t want = (n_pos + kp->block - 1) / kp->block;
    for (int64_t j = kp->held[s]; j < want; j++) {
        kp->table[s * kp->per_seq + j] = take(kp);
        dirty(kp, s * kp->per_seq + j);
    }
    if (want > kp->held[s]) kp->held[s] = want;
}

void cmf__kvpool_shrink(cmf__kvpool *kp, int64_t s, int64_t n_pos)
{
    int64_t keep = (n_pos + kp->block - 1) / kp->block;
    for (int64_t j = keep; j < kp->held[s]; j++) {
        int32_t *e = &kp->table[s * kp->per_seq + j];
        release(kp, *e);
        *e = -1; /* never read: positions past n_past are not attended */
    }
    if (keep < kp->held[s]) kp->held[s] = keep;
}

bool cmf__kvpool_shared(const cmf__kvpool *kp, int64_t s, int64_t p)
{
    int64_t j = p / kp->block;
    return j < kp->held[s] && kp->ref[kp->table[s * kp->per_seq + j]] > 1;
}

void cmf__kvpool_unhash(cmf__kvpool *kp, int64_t s, int64_t p)
{
    int64_t j = p / kp->block;
    if (j < kp->held[s] && kp->hash[kp->table[s * kp->per_seq + j]]) drop_key(kp, kp->table[s * kp->per_seq + j]);
}

int64_t cmf__kvpool_attach(cmf__kvpool *kp, int64_t s, const uint64_t *key, int64_t n)
{
    int64_t k = 0;
    if (kp->held[s]) return 0;
    for (; k < n && k < kp->per_seq; k++) {
        int32_t b = key[k] ? lookup(kp, key[k]) : -1;
        if (b < 0) break;
        if (kp->ref[b]++ == 0) lru_unlink(kp, b);
        kp->table[s * kp->per_seq + k] = b;
        dirty(kp, s * kp->per_seq + k);
    }
    kp->held[s] = k;
    return k;
}

void cmf__kvpool_publish(cmf__kvpool *kp, int64_t s, const uint64_t *key, int64_t n)
{
    for (int64_t j = 0; j < n && j < kp->held[s]; j++) {
        int32_t b = kp->table[s * kp->per_seq + j];
        if (kp->hash[b] || !key[j] || lookup(kp, key[j]) >= 0) continue;
        kp->hash[b] = key[j];
        int32_t *head = chain_of(kp, key[j]);
        kp->next[b] = *head;
        *head = b;
    }
}
