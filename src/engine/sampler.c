/* sampler.c — penalties, greedy / temperature / top-k / top-p / min-p and
 * the seeded draw. Deterministic for a given seed, logits and history.
 * Penalty counts use a per-vocab array cleared after each call, so a call
 * costs O(window + n_vocab log n_vocab) at most. */
#include "engine/sampler.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t next_u64(uint64_t *s)
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

double cmf__sampler_uniform(cmf__sampler *s) { return (double)(next_u64(s->rng) >> 11) * (1.0 / 9007199254740992.0); }

cmf_status cmf__sampler_init(cmf__sampler *s, const cmf_sampling_params *p, int64_t n_vocab)
{
    memset(s, 0, sizeof *s);
    s->p = *p;
    s->n_vocab = n_vocab;
    s->work = malloc((size_t)n_vocab * sizeof(float));
    s->idx = malloc((size_t)n_vocab * sizeof(int32_t));
    s->count = calloc((size_t)n_vocab, sizeof(int32_t));
    if (!s->work || !s->idx || !s->count) {
        cmf__sampler_free(s);
        return cmf__error(CMF_ERR_NOMEM, "sampler: out of memory");
    }
    uint64_t seed = p->seed;
    if (seed == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)s;
    }
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix(&seed);
    return CMF_OK;
}

void cmf__sampler_free(cmf__sampler *s)
{
    free(s->work);
    free(s->idx);
    free(s->count);
    s->work = NULL;
    s->idx = NULL;
    s->count = NULL;
}

static _Thread_local const float *t_keys; /* qsort has no context argument */
static int by_value_desc(const void *a, const void *b)
{
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    float x = t_keys[i], y = t_keys[j];
    if (x > y) return -1;
    if (x < y) return 1;
    return i < j ? -1 : (i > j);
}

static void apply_penalties(cmf__sampler *s, float *w, const int32_t *hist, int64_t n_hist)
{
    const cmf_sampling_params *p = &s->p;
    if (p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f && p->frequency_penalty == 0.0f) return;
    int64_t from = p->repeat_last_n < 0 ? 0 : n_hist - p->repeat_last_n;
    if (from < 0) from = 0;
    for (int64_t i = from; i < n_hist; i++)
        if (hist[i] >= 0 && hist[i] < s->n_vocab) s->count[hist[i]]++;
    for (int64_t i = from; i < n_hist; i++) {
        int32_t t = hist[i];
        if (t < 0 || t >= s->n_vocab || s->count[t] == 0) continue;
        float v = w[t];
        if (p->repeat_penalty != 1.0f && p->repeat_penalty > 0) v = v > 0 ? v / p->repeat_penalty : v * p->repeat_penalty;
        v -= p->frequency_penalty * (float)s->count[t] + p->presence_penalty;
        w[t] = v;
        s->count[t] = 0; /* each token penalised once; also clears the array */
    }
}

int32_t cmf__sampler_sample(cmf__sampler *s, const float *logits, const int32_t *hist, int64_t n_hist)
{
    const cmf_sampling_params *p = &s->p;
    const int64_t V = s->n_vocab;
    float *w = s->work;
    memcpy(w, logits, (size_t)V * sizeof(float));
    apply_penalties(s, w, hist, n_hist);
    if (!(p->temperature > 0)) {
        int32_t best = 0;
        for (int64_t i = 1; i < V; i++)
            if (w[i] > w[best]) best = (int32_t)i;
        return best;
    }
    for (int64_t i = 0; i < V; i++) {
        w[i] /= p->temperature;
        s->idx[i] = (int32_t)i;
    }
    t_keys = w;
    qsort(s->idx, (size_t)V, sizeof(int32_t), by_value_desc);
    int64_t n = V;
    if (p->top_k > 0 && p->top_k < n) n = p->top_k;
    /* softmax over the candidates (sorted descending) */
    float mx = w[s->idx[0]];
    double sum = 0;
    float *prob = malloc((size_t)n * sizeof(float));
    if (!prob) return s->idx[0];
    for (int64_t i = 0; i < n; i++) {
        prob[i] = expf(w[s->idx[i]] - mx);
        sum += prob[i];
    }
    for (int64_t i = 0; i < n; i++) prob[i] = (float)(prob[i] / sum);
    if (p->top_p < 1.0f && p->top_p > 0) {
        double c = 0;
        int64_t keep = n;
        for (int64_t i = 0; i < n; i++) {
            c += prob[i];
            if (c >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (p->min_p > 0) {
        float lim = p->min_p * prob[0];
        int64_t keep = 1;
        while (keep < n && prob[keep] >= lim) keep++;
        n = keep;
    }
    double tot = 0;
    for (int64_t i = 0; i < n; i++) tot += prob[i];
    double r = cmf__sampler_uniform(s) * tot, c = 0;
    int32_t pick = s->idx[n - 1];
    for (int64_t i = 0; i < n; i++) {
        c += prob[i];
        if (r < c) {
            pick = s->idx[i];
            break;
        }
    }
    free(prob);
    return pick;
}

float cmf__logprobs(const float *logits, int64_t V, int32_t chosen, int n_top, int32_t *top_ids, float *top_lp)
{
    float mx = logits[0];
    for (int64_t i = 1; i < V; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int64_t i = 0; i < V; i++) sum += exp((double)(logits[i] - mx));
    float lse = mx + (float)log(sum);
    for (int k = 0; k < n_top; k++) {
        int32_t best = -1;
        for (int64_t i = 0; i < V; i++) {
            bool taken = false;
            for (int j = 0; j < k; j++) taken |= top_ids[j] == i;
            if (taken) continue;
            if (best < 0 || logits[i] > logits[best]) best = (int32_t)i;
        }
        top_ids[k] = best;
        top_lp[k] = best >= 0 ? logits[best] - lse : -INFINITY;
    }
    return chosen >= 0 && chosen < V ? logits[chosen] - lse : -INFINITY;
}
