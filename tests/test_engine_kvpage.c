/* test_engine_kvpage.c — the paged KV cache's block pool (engine/kvpage.c):
 * blocks taken lowest first and given back, sharing by key, eviction of
 * the least recently released cached block, a written block leaving the
 * cache; then 20,000 random operations with the pool's invariants checked
 * after each: every block is free, cached and unheld, or held by exactly
 * as many table entries as its count says; no table entry names a block
 * twice within one sequence; a key finds the one block registered under it. */
#include "harness.h"
#include "engine/kvpage.h"

#include <stdlib.h>

/* The pool's invariants; false (with a message) at the first broken one. */
static bool consistent(const cmf__kvpool *kp)
{
    int32_t *count = calloc((size_t)kp->n_blocks, sizeof *count);
    bool ok = count != NULL;
    for (int64_t s = 0; ok && s < kp->n_seq; s++)
        for (int64_t j = 0; j < kp->per_seq; j++) {
            int32_t b = kp->table[s * kp->per_seq + j];
            if (j < kp->held[s] && (b < 0 || b >= kp->n_blocks)) ok = false;
            else if (j < kp->held[s]) count[b]++;
        }
    int64_t free_n = 0, lru_n = 0, used = 0;
    for (int64_t b = 0; ok && b < kp->n_blocks; b++) {
        if (count[b] != kp->ref[b]) ok = false;
        if (kp->ref[b] > 0) used++;
    }
    for (int64_t i = 0; ok && i < kp->n_free; i++)
        if (kp->ref[kp->free_stk[i]] != 0 || kp->hash[kp->free_stk[i]] != 0) ok = false;
    free_n = kp->n_free;
    for (int32_t b = kp->lru_head; ok && b >= 0; b = kp->next_lru[b]) {
        if (kp->ref[b] != 0 || kp->hash[b] == 0) ok = false;
        lru_n++;
    }
    if (ok && (lru_n != kp->n_lru || free_n + lru_n + used != kp->n_blocks || used != cmf__kvpool_used(kp))) ok = false;
    free(count);
    if (!ok) fprintf(stderr, "kvpool: invariants broken (free %lld, cached %lld, used %lld of %lld)\n",
                     (long long)free_n, (long long)lru_n, (long long)used, (long long)kp->n_blocks);
    return ok;
}

TEST(take_give_share_evict)
{
    cmf__kvpool kp;
    CHECK_OK(cmf__kvpool_init(&kp, 8, 4, 4, 3));
    CHECK_EQ_INT(cmf__kvpool_avail(&kp), 8);
    CHECK_EQ_INT(cmf__kvpool_need(&kp, 0, 9), 3);
    cmf__kvpool_grow(&kp, 0, 9); /* positions 0..8: blocks 0, 1, 2 */
    CHECK_EQ_INT(kp.table[0], 0);
    CHECK_EQ_INT(kp.table[2], 2);
    CHECK_EQ_INT(cmf__kvpool_need(&kp, 0, 12), 0);
    CHECK_EQ_INT(cmf__kvpool_used(&kp), 3);
    const uint64_t key[3] = {11, 22, 33};
    cmf__kvpool_publish(&kp, 0, key, 2); /* its two full blocks */
    CHECK_EQ_INT(cmf__kvpool_attach(&kp, 1, key, 3), 2); /* the third key is not there */
    CHECK_EQ_INT(kp.table[1 * 4 + 1], 1);
    CHECK(cmf__kvpool_shared(&kp, 1, 5));
    CHECK(!cmf__kvpool_shared(&kp, 0, 9));
    cmf__kvpool_shrink(&kp, 0, 0); /* sequence 0 goes: its blocks stay held by 1, block 2 is free */
    CHECK_EQ_INT(cmf__kvpool_used(&kp), 2);
    cmf__kvpool_shrink(&kp, 1, 0); /* now cached, nobody holds them */
    CHECK_EQ_INT(cmf__kvpool_used(&kp), 0);
    CHECK_EQ_INT(kp.n_lru, 2);
    CHECK_EQ_INT(cmf__kvpool_avail(&kp), 8);
    /* a later sequence finds them */
    CHECK_EQ_INT(cmf__kvpool_attach(&kp, 2, key, 2), 2);
    CHECK_EQ_INT(kp.n_lru, 0);
    cmf__kvpool_shrink(&kp, 2, 0);
    /* taking every block evicts the cached ones last, oldest first */
    cmf__kvpool_grow(&kp, 0, 16);
    cmf__kvpool_grow(&kp, 1, 16);
    CHECK_EQ_INT(cmf__kvpool_avail(&kp), 0);
    CHECK_EQ_INT(cmf__kvpool_attach(&kp, 2, key, 2), 0); /* evicted: the keys find nothing */
    CHECK(consistent(&kp));
    /* a cached block about to be written leaves the cache */
    cmf__kvpool_shrink(&kp, 1, 0);
    cmf__kvpool_publish(&kp, 0, key, 1);
    cmf__kvpool_unhash(&kp, 0, 2);
    cmf__kvpool_shrink(&kp, 0, 0);
    CHECK_EQ_INT(kp.n_lru, 0);
    CHECK_EQ_INT(cmf__kvpool_attach(&kp, 2, key, 1), 0);
    CHECK(consistent(&kp));
    cmf__kvpool_free(&kp);
    cmf__kvpool kb;
    CHECK_STATUS(cmf__kvpool_init(&kb, 0, 16, 4, 1), CMF_ERR_ARG);
}

TEST(random_operations)
{
    enum { NB = 40, BLK = 4, PER = 12, NS = 6 };
    cmf__kvpool kp;
    CHECK_OK(cmf__kvpool_init(&kp, NB, BLK, PER, NS));
    int64_t n_pos[NS] = {0};
    /* tokens of a sequence: its keys are its block contents, so sequences with equal leading blocks share */
    int32_t tok[NS][PER * BLK];
    uint64_t keys[PER];
    srand(7);
    int bad = 0;
    for (int it = 0; it < 20000 && !bad; it++) {
        int s = rand() % NS, op = rand() % 5;
        if (op <= 1) { /* grow by 1..9 positions when the blocks are there */
            int64_t to = n_pos[s] + 1 + rand() % 9;
            if (to > PER * BLK || cmf__kvpool_need(&kp, s, to) > cmf__kvpool_avail(&kp)) continue;
            if (n_pos[s] % BLK) {
                if (cmf__kvpool_shared(&kp, s, n_pos[s])) continue; /* the engine never writes a shared block */
                cmf__kvpool_unhash(&kp, s, n_pos[s]);
            }
            cmf__kvpool_grow(&kp, s, to);
            for (int64_t p = n_pos[s]; p < to; p++) tok[s][p] = rand() % 3;
            n_pos[s] = to;
        } else if (op == 2) { /* shrink */
            int64_t to = n_pos[s] ? rand() % (n_pos[s] + 1) : 0;
            cmf__kvpool_shrink(&kp, s, to);
            n_pos[s] = to;
        } else if (op == 3) { /* publish the full blocks, keyed by their tokens (chained) */
            uint64_t h = 1469598103934665603ull;
            for (int64_t j = 0; j < n_pos[s] / BLK; j++) {
                for (int k = 0; k < BLK; k++) h = (h ^ (uint64_t)tok[s][j * BLK + k]) * 1099511628211ull;
                keys[j] = h | 1;
            }
            cmf__kvpool_publish(&kp, s, keys, n_pos[s] / BLK);
        } else if (n_pos[s] == 0) { /* attach: a prefix another sequence may have cached */
            int64_t nb = rand() % PER;
            uint64_t h = 1469598103934665603ull;
            for (int64_t j = 0; j < nb; j++) {
                for (int k = 0; k < BLK; k++) {
                    tok[s][j * BLK + k] = rand() % 3 == 0 ? 1 : 0;
                    h = (h ^ (uint64_t)tok[s][j * BLK + k]) * 1099511628211ull;
                }
                keys[j] = h | 1;
            }
            n_pos[s] = cmf__kvpool_attach(&kp, s, keys, nb) * BLK;
        }
        if (!consistent(&kp)) bad = it + 1;
    }
    CHECK_EQ_INT(bad, 0);
    for (int s = 0; s < NS; s++) cmf__kvpool_shrink(&kp, s, 0);
    CHECK_EQ_INT(cmf__kvpool_used(&kp), 0);
    CHECK_EQ_INT(cmf__kvpool_avail(&kp), NB);
    CHECK(consistent(&kp));
    cmf__kvpool_free(&kp);
}

int main(void)
{
    RUN(take_give_share_evict);
    RUN(random_operations);
    return harness_done();
}
