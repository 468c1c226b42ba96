/* sampler.h — token selection from one row of logits: repetition /
 * presence / frequency penalties over a window of past tokens, then greedy
 * argmax or temperature, top-k, top-p, min-p and a seeded draw (the order
 * transformers' logits processors use). Also log-probabilities of the raw
 * logits for the chosen token and the top N. One sampler per sequence
 * being generated (gen.h), with its own seeded generator. */
#ifndef CMF_ENGINE_SAMPLER_H
#define CMF_ENGINE_SAMPLER_H

#include "cmf.h"
#include <stdint.h>

typedef struct cmf__sampler {
    cmf_sampling_params p;
    int64_t n_vocab;
    uint64_t rng[4];       /* xoshiro256** state */
    float *work;           /* [n_vocab] */
    int32_t *idx;          /* [n_vocab] */
    int32_t *count;        /* [n_vocab] occurrences in the penalty window (kept zero between calls) */
} cmf__sampler;

cmf_status cmf__sampler_init(cmf__sampler *s, const cmf_sampling_params *p, int64_t n_vocab);
void cmf__sampler_free(cmf__sampler *s);
/* Picks a token from logits[n_vocab] given the sequence so far. */
int32_t cmf__sampler_sample(cmf__sampler *s, const float *logits, const int32_t *history, int64_t n_hist);
/* Uniform double in [0, 1) from the sampler's generator. */
double cmf__sampler_uniform(cmf__sampler *s);
/* log-softmax of logits at `chosen`; top_ids/top_lp get the n_top most likely
 * (descending, lower id first on ties). Returns the chosen logprob. */
float cmf__logprobs(const float *logits, int64_t n_vocab, int32_t chosen, int n_top, int32_t *top_ids, float *top_lp);

#endif
