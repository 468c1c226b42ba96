/* test_engine_batch.c — batches of several sequences and the KV cache
 * types, on fixture models converted at f32 (dense, sliding-window with
 * soft-caps, fused projections, sinks, MoE, gated DeltaNet, Gemma-4):
 * - 1, 3 and 8 sequences of different prompts and lengths, fed together
 *   (interleaved, then decoded one token of each per step) give the logits
 *   each gives alone. Bound: worst |diff| / max|logit| <= 1e-5 per row
 *   (measured: <= 1.2e-6, phi3 with 8 sequences; only f32 summation order
 *   differs: the batched matmul against the single-token dot);
 * - f16 and q8 KV caches against f32: worst relative error <= 5e-3 (f16,
 *   measured <= 1.1e-3) and <= 6e-2 (q8, measured <= 2.7e-2, both phi3),
 *   and the same top-1 token on >= 90% of positions (measured: all).
 * - shape buckets (padding rows) against none: the same logits, fewer
 *   graphs built (below, pad_compare);
 * - two sessions on one Vulkan backend, run from two threads at once,
 *   give the logits each gives alone on that backend, bit for bit.
 * Every comparison fails on NaN/Inf and on empty output. */
#include "harness.h"
#include "fixture_model.h"

#include "engine/engine.h"
#ifdef CMF_HAVE_VULKAN
#include "compute/vulkan/vk_backend.h"
#endif
#include "vk_test.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const FAMILIES[] = {"llama", "gemma2", "phi3", "gpt_oss", "qwen2_moe", "qwen3_next", "gemma4"};


/* Worst |a - b| / max|b| over one row; +inf on NaN/Inf or an empty row. */
static double row_rel(const float *a, const float *b, int64_t V)
{
    if (V <= 0) return INFINITY;
    double mx = 0, err = 0;
    for (int64_t i = 0; i < V; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
        mx = fabs(b[i]) > mx ? fabs(b[i]) : mx;
        err = fabs(a[i] - b[i]) > err ? fabs(a[i] - b[i]) : err;
    }
    return mx > 0 ? err / mx : INFINITY;
}

static int64_t argmax(const float *x, int64_t V)
{
    int64_t k = 0;
    for (int64_t i = 1; i < V; i++)
        if (x[i] > x[k]) k = i;
    return k;
}

#define MAX_SEQ 8
#define PROMPT_MAX 11
#define STEPS 4

/* Prompt of sequence s: 3 + s tokens (lengths 3..10), then STEPS decode tokens. */
static int prompt_len(int s) { return 3 + s; }
static int32_t tok_of(int s, int i, int64_t V) { return (int32_t)((7 + 31 * s + 13 * i + s * i) % V); }

/* Logits of sequence s run alone: [prompt_len + STEPS][V] (every position),
 * on `be` (NULL: a CPU backend of the engine's own). */
static void run_on(cmf__model *m, int s, cmf__etype kv, cmf__backend *be, float *out)
{
    const int64_t V = m->arch.vocab_size;
    cmf__engine_params p = cmf__engine_params_default();
    p.n_threads = 2;
    p.kv_type = kv;
    p.backend = be;
    cmf__engine *e = NULL;
    CHECK_OK(cmf__engine_new(m, &p, &e));
    if (!e) return;
    int32_t ids[PROMPT_MAX + STEPS];
    int n = prompt_len(s) + STEPS;
    for (int i = 0; i < n; i++) ids[i] = tok_of(s, i, V);
    CHECK_OK(cmf__engine_forward(e, ids, prompt_len(s), out, true));
    for (int i = prompt_len(s); i < n; i++) CHECK_OK(cmf__engine_forward(e, &ids[i], 1, out + (int64_t)i * V, false));
    cmf__engine_free(e);
}

static void run_alone(cmf__model *m, int s, cmf__etype kv, float *out) { run_on(m, s, kv, NULL, out); }

/* The same n_seq sequences together: prompts interleaved in one batch
 * (round robin), then STEPS batches of one token per sequence. */
static double run_together(cmf__model *m, int n_seq, float *const *alone)
{
    const int64_t V = m->arch.vocab_size;
    cmf__engine_params p = cmf__engine_params_default();
    p.n_threads = 2;
    p.n_seq = n_seq;
    p.n_batch = 16; /* smaller than the interleaved prompts: several chunks */
    cmf__engine *e = NULL;
    CHECK_OK(cmf__engine_new(m, &p, &e));
    if (!e) return INFINITY;
    int32_t tok[MAX_SEQ * PROMPT_MAX], seq[MAX_SEQ * PROMPT_MAX], pos[MAX_SEQ * PROMPT_MAX];
    bool want[MAX_SEQ * PROMPT_MAX];
    int n = 0;
    for (int i = 0; i < PROMPT_MAX; i++)
        for (int s = 0; s < n_seq; s++)
            if (i < prompt_len(s)) tok[n] = tok_of(s, i, V), seq[n] = s, pos[n] = i, want[n] = true, n++;
    float *lg = malloc(sizeof(float) * (size_t)(n * V));
    double worst = 0;
    cmf__batch b = {n, tok, seq, want};
    CHECK_OK(cmf__engine_decode(e, &b, lg));
    for (int t = 0; t < n; t++) {
        double r = row_rel(lg + (int64_t)t * V, alone[seq[t]] + (int64_t)pos[t] * V, V);
        worst = r > worst ? r : worst;
    }
    for (int k = 0; k < STEPS; k++) {
        for (int s = 0; s < n_seq; s++) tok[s] = tok_of(s, prompt_len(s) + k, V), seq[s] = s;
        cmf__batch d = {n_seq, tok, seq, want};
        CHECK_OK(cmf__engine_decode(e, &d, lg));
        for (int s = 0; s < n_seq; s++) {
            double r = row_rel(lg + (int64_t)s * V, alone[s] + (int64_t)(prompt_len(s) + k) * V, V);
            worst = r > worst ? r : worst;
        }
    }
    /* a wrong slot is refused before anything is fed */
    int32_t bad_seq = n_seq, one = 1;
    cmf__batch bad = {1, &one, &bad_seq, NULL};
    int64_t past = e->n_past[0];
    CHECK_ERR(cmf__engine_decode(e, &bad, lg), CMF_ERR_ARG, "sequence");
    CHECK(e->n_past[0] == past);
    free(lg);
    cmf__engine_free(e);
    return worst;
}

TEST(batched_sequences_match_alone)
{
    int ran = 0;
    for (size_t f = 0; f < sizeof FAMILIES / sizeof *FAMILIES; f++) {
        cmf__model *m = fixture_model_f32(FAMILIES[f]);
        if (!m) continue;
        ran++;
        const int64_t V = m->arch.vocab_size;
        float *alone[MAX_SEQ];
        for (int s = 0; s < MAX_SEQ; s++) {
            alone[s] = malloc(sizeof(float) * (size_t)((PROMPT_MAX + STEPS) * V));
            run_alone(m, s, CMF__E_F32, alone[s]);
        }
        static const int counts[] = {1, 3, 8};
        for (int c = 0; c < 3; c++) {
            double w = run_together(m, counts[c], alone);
            printf("  %-11s %d sequences together vs alone: worst rel %.2e\n", FAMILIES[f], counts[c], w);
            if (!(w <= 1e-5))
                harness_fail(__FILE__, __LINE__, "%s: %d sequences: rel %.3g > 1e-5", FAMILIES[f], counts[c], w);
        }
        for (int s = 0; s < MAX_SEQ; s++) free(alone[s]);
        cmf__model_free(m);
    }
    if (!ran) SKIP("CMF_BIN or the hf-models fixtures absent");
}

TEST(kv_cache_types_against_f32)
{
    int ran = 0;
    for (size_t f = 0; f < sizeof FAMILIES / sizeof *FAMILIES; f++) {
        cmf__model *m = fixture_model_f32(FAMILIES[f]);
        if (!m) continue;
        ran++;
        const int64_t V = m->arch.vocab_size, n = prompt_len(MAX_SEQ - 1) + STEPS;
        float *ref = malloc(sizeof(float) * (size_t)(n * V)), *got = malloc(sizeof(float) * (size_t)(n * V));
        run_alone(m, MAX_SEQ - 1, CMF__E_F32, ref);
        static const cmf__etype types[] = {CMF__E_F16, CMF__E_Q8};
        static const double bound[] = {5e-3, 6e-2};
        for (int k = 0; k < 2; k++) {
            memset(got, 0, sizeof(float) * (size_t)(n * V));
            run_alone(m, MAX_SEQ - 1, types[k], got);
            double worst = 0;
            int same = 0;
            for (int64_t t = 0; t < n; t++) {
                double r = row_rel(got + t * V, ref + t * V, V);
                worst = r > worst ? r : worst;
                same += argmax(got + t * V, V) == argmax(ref + t * V, V);
            }
            printf("  %-11s kv %s vs f32: worst rel %.2e, top-1 %d/%lld\n", FAMILIES[f], cmf__etype_name(types[k]),
                   worst, same, (long long)n);
            if (!(worst <= bound[k]))
                harness_fail(__FILE__, __LINE__, "%s kv %s: rel %.3g > %.3g", FAMILIES[f], cmf__etype_name(types[k]),
                             worst, bound[k]);
            if (same * 10 < n * 9)
                harness_fail(__FILE__, __LINE__, "%s kv %s: top-1 agrees on %d of %lld", FAMILIES[f],
                             cmf__etype_name(types[k]), same, (long long)n);
        }
        free(ref);
        free(got);
        cmf__model_free(m);
    }
    if (!ran) SKIP("CMF_BIN or the hf-models fixtures absent");
}

/* The GPU backend on every fixture family (dense, sliding window,
 * soft-caps, sinks, MoE, gated DeltaNet, Gemma-4 per-layer inputs): every
 * position's logits (a prompt fed at once, then decode steps) against the
 * CPU's with the same KV cache type. Bounds (worst |diff| / max|logit| of
 * a row): 1e-4 for f32 caches (f32 sums in another order, exp/tanh of
 * another library; measured on lavapipe <= 6.5e-6, gemma2), 1e-3 for f16
 * (a K/V value one f32 ulp apart may round to the neighbouring f16, 2^-11;
 * measured <= 6.0e-5, olmo2) and 5e-3 for q8 (one int8 step; measured
 * <= 5.6e-4, gemma3). */
#ifdef CMF_HAVE_VULKAN
static const char *const ALL_FAMILIES[] = {"llama",  "llama3_rope", "gemma",   "gemma2",  "gemma3",   "gemma4",
                                           "gpt_oss", "granite",    "mistral_swa", "mixtral", "olmo2",  "phi3",
                                           "qwen2",  "qwen2_moe",   "qwen3",   "qwen3_moe", "qwen3_next", "smollm3"};
#endif

TEST(gpu_matches_cpu)
{
#ifdef CMF_HAVE_VULKAN
    cmf__backend *probe = vk_test_backend_new();
    if (!probe) {
        printf("*** no Vulkan device (%s): GPU parity SKIPPED ***\n", cmf_last_error());
        SKIP("no Vulkan device");
    }
    printf("  %s\n", probe->ops->device(probe));
    cmf__backend_free(probe);
    int ran = 0;
    for (size_t f = 0; f < sizeof ALL_FAMILIES / sizeof *ALL_FAMILIES; f++) {
        cmf__model *m = fixture_model_f32(ALL_FAMILIES[f]);
        if (!m) {
            printf("  %-11s fixture absent: SKIPPED\n", ALL_FAMILIES[f]);
            continue;
        }
        cmf__backend *vk = vk_test_backend_new(); /* one per model, as sessions have it: it keeps the weights */
        CHECK(vk != NULL);
        if (!vk) {
            cmf__model_free(m);
            continue;
        }
        ran++;
        const int64_t V = m->arch.vocab_size, n = prompt_len(MAX_SEQ - 1) + STEPS;
        float *ref = malloc(sizeof(float) * (size_t)(n * V)), *got = malloc(sizeof(float) * (size_t)(n * V));
        static const cmf__etype kv[] = {CMF__E_F32, CMF__E_F16, CMF__E_Q8};
        static const double bound[] = {1e-4, 1e-3, 5e-3};
        for (int k = 0; k < 3; k++) {
            run_on(m, MAX_SEQ - 1, kv[k], NULL, ref);
            memset(got, 0, sizeof(float) * (size_t)(n * V));
            run_on(m, MAX_SEQ - 1, kv[k], vk, got);
            double worst = 0;
            for (int64_t t = 0; t < n; t++) {
                double r = row_rel(got + t * V, ref + t * V, V);
                worst = r > worst ? r : worst;
            }
            printf("  %-11s gpu vs cpu, kv %s: worst rel %.2e\n", ALL_FAMILIES[f], cmf__etype_name(kv[k]), worst);
            if (!(worst <= bound[k]))
                harness_fail(__FILE__, __LINE__, "%s gpu kv %s: rel %.3g > %.3g", ALL_FAMILIES[f], cmf__etype_name(kv[k]),
                             worst, bound[k]);
        }
        free(ref);
        free(got);
        cmf__backend_free(vk);
        cmf__model_free(m);
    }
    if (!ran) SKIP("CMF_BIN or the hf-models fixtures absent");
#else
    SKIP("this build has no Vulkan backend");
#endif
}

/* Steps whose batches change size as sequences join (with their prompt
 * in one piece), decode and leave: sequence s joins at step s and leaves
 * after step s + 5, so the steps run 4, 6, 8, ... tokens. Every token's
 * logits go to out in step order; returns how many rows. */
#define PAD_SEQ 8
#define PAD_STEPS 12
static int64_t pad_steps(cmf__model *m, cmf__backend *be, int buckets, float *out, cmf__engine **keep)
{
    const int64_t V = m->arch.vocab_size;
    cmf__engine_params p = cmf__engine_params_default();
    p.n_threads = 2;
    p.n_seq = PAD_SEQ;
    p.n_batch = 32;
    p.n_ctx = 64;
    p.backend = be;
    p.buckets = buckets;
    cmf__engine *e = NULL;
    CHECK_OK(cmf__engine_new(m, &p, &e));
    *keep = e;
    if (!e) return 0;
    int64_t rows = 0;
    for (int k = 0; k < PAD_STEPS; k++) {
        int32_t tok[PAD_SEQ * PROMPT_MAX], seq[PAD_SEQ * PROMPT_MAX];
        bool want[PAD_SEQ * PROMPT_MAX];
        int n = 0;
        for (int s = 0; s < PAD_SEQ; s++) {
            if (k < s || k > s + 5) continue;
            int from = k == s ? 0 : prompt_len(s) + k - s - 1, to = prompt_len(s) + k - s;
            for (int i = from; i < to; i++) tok[n] = tok_of(s, i, V), seq[n] = s, want[n] = true, n++;
        }
        cmf__batch b = {n, tok, seq, want};
        CHECK_OK(cmf__engine_decode(e, &b, out + rows * V));
        rows += n;
        if (k == PAD_STEPS - 1) break;
        for (int s = 0; s < PAD_SEQ; s++)
            if (k == s + 5) CHECK_OK(cmf__engine_reset_seq(e, s)); /* leaves */
    }
    return rows;
}

/* The same steps on an engine with shape buckets (padding rows of the
 * hidden sequence) and on one without: the same logits (on the GPU bit
 * for bit: a row's arithmetic is the same whatever rows run beside it; on
 * the CPU within 1e-5, measured <= 7.2e-7: its matmul sums a row in
 * another order when the rows come in other tile counts), fewer graphs
 * built, and the hidden sequence's blocks counted neither used nor free.
 * A model with recurrent layers gets no padding. On the CPU (every
 * family) and on the Vulkan device (four; buckets on there by default). */
static void pad_compare(const char *fam, cmf__model *m, cmf__backend *be, const char *where)
{
    const int64_t V = m->arch.vocab_size, max_rows = PAD_STEPS * PAD_SEQ * PROMPT_MAX;
    float *plain = malloc(sizeof(float) * (size_t)(max_rows * V)), *pad = malloc(sizeof(float) * (size_t)(max_rows * V));
    cmf__engine *ep = NULL, *eq = NULL;
    int64_t n_plain = pad_steps(m, be, -1, plain, &ep), n_pad = pad_steps(m, be, be ? 0 : 1, pad, &eq);
    CHECK(ep && eq && n_plain > 0 && n_plain == n_pad);
    if (ep && eq && n_plain > 0 && n_plain == n_pad) {
        double worst = 0;
        for (int64_t t = 0; t < n_plain; t++) {
            double r = row_rel(pad + t * V, plain + t * V, V);
            worst = r > worst ? r : worst;
        }
        bool recurrent = eq->state_buf != NULL;
        printf("  %-11s %s: %lld rows padded vs not: worst rel %.2e; graphs built %llu vs %llu%s\n", fam, where,
               (long long)n_plain, worst, (unsigned long long)eq->graph_misses, (unsigned long long)ep->graph_misses,
               recurrent ? " (recurrent: no padding)" : "");
        const double bound = be ? 0 : 1e-5;
        if (!(worst <= bound))
            harness_fail(__FILE__, __LINE__, "%s %s: padded rows differ: rel %.3g > %.3g", fam, where, worst, bound);
        CHECK(ep->n_slot == PAD_SEQ && ep->pad_blocks == 0);
        if (recurrent) CHECK(eq->n_slot == PAD_SEQ && eq->pad_blocks == 0 && eq->graph_misses == ep->graph_misses);
        else {
            CHECK(eq->n_slot == PAD_SEQ + 1 && eq->pad_blocks > 0 && eq->graph_misses < ep->graph_misses);
            cmf__engine_reset(eq);
            int64_t block, used, total;
            cmf__engine_kv_usage(eq, &block, &used, &total);
            CHECK(used == 0 && total == eq->kv.n_blocks - eq->pad_blocks && cmf__engine_kv_avail(eq) == total);
        }
    }
    cmf__engine_free(ep);
    cmf__engine_free(eq);
    free(plain);
    free(pad);
}

TEST(padded_shapes_match_unpadded)
{
    int ran = 0;
#ifdef CMF_HAVE_VULKAN
    cmf__backend *vk = vk_test_backend_new();
    if (!vk) printf("*** no Vulkan device (%s): padding on the GPU SKIPPED ***\n", cmf_last_error());
    else cmf__backend_free(vk);
#endif
    for (size_t f = 0; f < sizeof FAMILIES / sizeof *FAMILIES; f++) {
        cmf__model *m = fixture_model_f32(FAMILIES[f]);
        if (!m) continue;
        ran++;
        pad_compare(FAMILIES[f], m, NULL, "cpu");
#ifdef CMF_HAVE_VULKAN
        /* on the GPU (lavapipe in CI: slow) a dense family, one with rings and soft-caps, one with MoE and
         * sinks, and the recurrent one */
        bool on_gpu = !strcmp(FAMILIES[f], "llama") || !strcmp(FAMILIES[f], "gemma2") ||
                      !strcmp(FAMILIES[f], "gpt_oss") || !strcmp(FAMILIES[f], "qwen3_next");
        if (vk && on_gpu && (vk = vk_test_backend_new())) {
            pad_compare(FAMILIES[f], m, vk, "gpu");
            cmf__backend_free(vk);
        }
#endif
        cmf__model_free(m);
    }
    if (!ran) SKIP("CMF_BIN or the hf-models fixtures absent");
}

#ifdef CMF_HAVE_VULKAN /* (a build without the backend has no GPU tests to run) */
/* One session's whole run (prompt, then decode steps) on a shared
 * backend, from a thread of its own: no harness calls here (the checks
 * are made by the main thread). */
typedef struct vk_job {
    cmf__model *m;
    cmf__backend *be;
    int seq;
    float *out;
    cmf_status st;
} vk_job;

static void *vk_job_run(void *arg)
{
    vk_job *j = arg;
    const int64_t V = j->m->arch.vocab_size;
    cmf__engine_params p = cmf__engine_params_default();
    p.n_threads = 1;
    p.kv_type = CMF__E_F32;
    p.backend = j->be;
    cmf__engine *e = NULL;
    j->st = cmf__engine_new(j->m, &p, &e);
    if (j->st) return NULL;
    int32_t ids[PROMPT_MAX + STEPS];
    int n = prompt_len(j->seq) + STEPS;
    for (int i = 0; i < n; i++) ids[i] = tok_of(j->seq, i, V);
    j->st = cmf__engine_forward(e, ids, prompt_len(j->seq), j->out, true);
    for (int i = prompt_len(j->seq); i < n && !j->st; i++)
        j->st = cmf__engine_forward(e, &ids[i], 1, j->out + (int64_t)i * V, false);
    cmf__engine_free(e);
    return NULL;
}

#endif

/* Two sessions on one Vulkan backend from two threads at once (engine
 * creation, buffer clears, uploads, steps and readbacks interleaving) give
 * the logits each gives alone on that backend: the same kernels, so the
 * same bits. Several rounds, so that the threads meet at different points. */
TEST(gpu_sessions_in_threads)
{
#ifdef CMF_HAVE_VULKAN
    cmf__model *m = fixture_model_f32("llama");
    if (!m) SKIP("CMF_BIN or the hf-models fixtures absent");
    cmf__backend *vk = vk_test_backend_new();
    if (!vk) {
        printf("*** no Vulkan device (%s): threaded sessions SKIPPED ***\n", cmf_last_error());
        cmf__model_free(m);
        SKIP("no Vulkan device");
    }
    const int64_t V = m->arch.vocab_size;
    const int seqs[2] = {2, MAX_SEQ - 1};
    float *alone[2], *both[2];
    size_t bytes[2];
    for (int k = 0; k < 2; k++) {
        bytes[k] = sizeof(float) * (size_t)((prompt_len(seqs[k]) + STEPS) * V);
        alone[k] = malloc(bytes[k]), both[k] = malloc(bytes[k]);
        CHECK(alone[k] && both[k]);
        vk_job j = {m, vk, seqs[k], alone[k], CMF_OK};
        vk_job_run(&j);
        CHECK_OK(j.st);
    }
    int rounds = 0;
    for (int round = 0; round < 4; round++) {
        vk_job jobs[2];
        pthread_t th[2];
        for (int k = 0; k < 2; k++) {
            for (size_t i = 0; i < bytes[k] / sizeof(float); i++) both[k][i] = NAN; /* every logit must be written */
            jobs[k] = (vk_job){m, vk, seqs[k], both[k], CMF_OK};
        }
        for (int k = 0; k < 2; k++) CHECK(pthread_create(&th[k], NULL, vk_job_run, &jobs[k]) == 0);
        for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
        bool same = true;
        for (int k = 0; k < 2; k++) {
            CHECK_OK(jobs[k].st);
            const int64_t n = prompt_len(seqs[k]) + STEPS;
            double worst = 0;
            for (int64_t t = 0; t < n; t++) {
                double r = row_rel(both[k] + t * V, alone[k] + t * V, V);
                worst = r > worst ? r : worst;
            }
            same = same && worst == 0;
            if (!(worst == 0))
                harness_fail(__FILE__, __LINE__, "round %d, sequence %d: two threads vs alone, rel %.3g (want 0)", round,
                             seqs[k], worst);
        }
        rounds += same;
    }
    printf("  two sessions on one Vulkan backend from two threads: %d of 4 rounds equal to alone\n", rounds);
    for (int k = 0; k < 2; k++) free(alone[k]), free(both[k]);
    cmf__backend_free(vk);
    cmf__model_free(m);
#else
    SKIP("this build has no Vulkan backend");
#endif
}

int main(void)
{
    RUN(batched_sequences_match_alone);
    RUN(kv_cache_types_against_f32);
    RUN(padded_shapes_match_unpadded);
    RUN(gpu_matches_cpu);
    RUN(gpu_sessions_in_threads);
    return harness_done();
}
