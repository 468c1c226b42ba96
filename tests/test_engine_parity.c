/* test_engine_parity.c — the dense architectures against transformers: each
 * fixture of hf-models is converted with the built `cmf convert` ($CMF_BIN)
 * to f32, bf16, q8 and q4, run through the public API, and its logits at
 * every position compared with ref_logits.f32; the 12-token greedy
 * continuation must be identical for f32/bf16. Also: one-batch prefill ==
 * chunked prefill == token-by-token decode, and the fast kernels == the
 * scalar reference kernels on whole models. Skips loudly without fixtures
 * or without CMF_BIN.
 *
 * Metric: rel = max_i |ours_i - ref_i| / max_i |ref_i| per row (position),
 * worst row reported. Tolerances:
 *  - f32 / bf16 (f32 KV cache): rel <= 1e-5. The weights are the same bf16
 *    values transformers ran in f32, so only summation order differs
 *    (measured <= 1.9e-6, phi3).
 *  - q8 / q8_2f / q4: mean KL(ref || ours) over positions <= 2e-3 (q8, q8_2f: measured
 *    <= 4.4e-5, phi3 q8_2f) and 3e-2 (q4), top-1 >= 65% for q8_2f (measured 18/24, phi3),
 *    and top-1 agreement >= 75% (q8) / 35% (q4) of positions. These models
 *    are random, their distributions nearly flat, so quantization flips
 *    near-ties (measured q8 >= 20/24, q4 >= 10/24; mean KL q8 <= 3e-5,
 *    q4 <= 5e-3).
 *  - prefill vs decode: rel <= 1e-4 (only the f32 summation order differs
 *    between the paths; the integer kernels give a token the same bits
 *    alone or in a batch).
 *  - fast vs reference kernels: rel <= 1e-4 for f32; for q8 / q4 the fast
 *    CPU kernels quantize activations to int8 per 32-block (as llama.cpp's
 *    Q8_0 activations), a perturbation of the order of the weights' own
 *    quantization: rel <= 0.15 (measured <= 7.9e-2, phi3 q8). */
#include "harness.h"
#include "compute/cpu/kernels.h"
#include "engine/engine.h"
#include "util/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *MODELS[] = {"llama", "llama3_rope", "qwen2",  "qwen3", "mistral_swa", "gemma",
                               "gemma2", "gemma3",     "phi3",   "olmo2", "granite",     "smollm3"};
static const char *QUANTS[] = {"f32", "bf16", "q8", "q8_2f", "q4"};

typedef struct ref_data {
    int32_t ids[64];
    size_t n_ids;
    int32_t greedy[64];
    size_t n_greedy;
    float *logits; /* [n_ids][vocab] */
    size_t vocab;
} ref_data;

static bool load_ref(const char *name, ref_data *r)
{
    char rel[256];
    snprintf(rel, sizeof rel, "hf-models/%s/ref.json", name);
    size_t len;
    char *txt = harness_read_file(harness_fixture_path(rel), &len);
    if (!txt) return false;
    json_t *j = json_loadb(txt, len, 0, NULL);
    free(txt);
    if (!j) return false;
    const json_t *in = json_object_get(j, "input_ids"), *gr = json_object_get(j, "greedy"),
                 *sh = json_object_get(j, "logits_shape");
    r->n_ids = json_array_size(in);
    r->n_greedy = json_array_size(gr);
    for (size_t i = 0; i < r->n_ids && i < 64; i++) r->ids[i] = (int32_t)json_integer_value(json_array_get(in, i));
    for (size_t i = 0; i < r->n_greedy && i < 64; i++) r->greedy[i] = (int32_t)json_integer_value(json_array_get(gr, i));
    r->vocab = (size_t)json_integer_value(json_array_get(sh, 1));
    json_decref(j);
    snprintf(rel, sizeof rel, "hf-models/%s/ref_logits.f32", name);
    r->logits = (float *)harness_read_file(harness_fixture_path(rel), &len);
    return r->logits && len == r->n_ids * r->vocab * 4 && r->n_ids <= 64 && r->n_greedy <= 64;
}

/* +Inf on NaN / Inf / empty rows: worst_rel keeps it and every tolerance fails. */
static double row_rel(const float *a, const float *ref, size_t v) { return harness_max_rel_err(a, ref, v); }

static double worst_rel(const float *a, const float *ref, size_t rows, size_t v)
{
    double w = 0;
    for (size_t r = 0; r < rows; r++) {
        double x = row_rel(a + r * v, ref + r * v, v);
        if (x > w) w = x;
    }
    return w;
}

static size_t argmax(const float *x, size_t v)
{
    size_t b = 0;
    for (size_t i = 1; i < v; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static double kl_row(const float *ref, const float *ours, size_t v)
{
    double mr = ref[argmax(ref, v)], mo = ours[argmax(ours, v)], sr = 0, so = 0;
    for (size_t i = 0; i < v; i++) {
        sr += exp(ref[i] - mr);
        so += exp(ours[i] - mo);
    }
    double lr = log(sr), lo = log(so), kl = 0;
    for (size_t i = 0; i < v; i++) {
        double pr = ref[i] - mr - lr, po = ours[i] - mo - lo;
        kl += exp(pr) * (pr - po);
    }
    return kl;
}

static bool convert(const char *name, const char *quant, char *out, size_t cap)
{
    const char *bin = getenv("CMF_BIN");
    snprintf(out, cap, "%s/%s.%s.cmf", harness_tmpdir(), name, quant);
    char src[512], cmd[2048];
    snprintf(src, sizeof src, "%s", harness_fixture_path("hf-models"));
    snprintf(cmd, sizeof cmd, "'%s' convert --model '%s/%s' --output '%s' --quant %s --quiet 2>/dev/null", bin, src,
             name, out, quant);
    return system(cmd) == 0;
}

static int on_tok(void *user, const cmf_token_info *t)
{
    int32_t **p = user;
    if (t->id >= 0) *(*p)++ = t->id;
    return 0;
}

/* Set by the opt-in test: f16 / bf16 matmuls run as bf16 dot products
 * (CMF_CPU_BF16_DOT=1), so those dtypes are no longer exact. */
static bool g_bf16dot;

static void parity_one(const char *name, const char *quant)
{
    ref_data r = {0};
    if (!load_ref(name, &r)) {
        harness_fail(__FILE__, __LINE__, "%s: cannot read ref.json / ref_logits.f32", name);
        free(r.logits);
        return;
    }
    char path[1024];
    if (!convert(name, quant, path, sizeof path)) {
        harness_fail(__FILE__, __LINE__, "%s: cmf convert --quant %s failed", name, quant);
        free(r.logits);
        return;
    }
    cmf_model *m = NULL;
    cmf_session *s = NULL;
    CHECK_OK(cmf_model_open(path, NULL, &m));
    if (!m) goto done;
    CHECK_EQ_INT(cmf_model_n_vocab(m), r.vocab);
    cmf_session_params sp = cmf_session_params_default();
    sp.kv_type = CMF_KV_F32; /* the exact path; the f16/q8 caches have their own bounds (test_engine_batch.c) */
    CHECK_OK(cmf_session_new(m, &sp, &s));
    if (!s) goto done;
    const size_t V = r.vocab, n = r.n_ids;
    float *lg = malloc(n * V * sizeof(float)), *lg2 = malloc(n * V * sizeof(float));
    CHECK_OK(cmf_session_decode(s, r.ids, n, lg, true));
    double rel = worst_rel(lg, r.logits, n, V), kl = 0;
    int top1 = 0;
    for (size_t i = 0; i < n; i++) {
        kl += kl_row(r.logits + i * V, lg + i * V, V);
        top1 += argmax(r.logits + i * V, V) == argmax(lg + i * V, V);
    }
    kl /= (double)n;
    bool exact = !strcmp(quant, "f32") || (!strcmp(quant, "bf16") && !g_bf16dot);
    bool half = g_bf16dot && (!strcmp(quant, "bf16") || !strcmp(quant, "f16"));
    int32_t gen[64], *gp = gen;
    cmf_generate_params g = cmf_generate_params_default();
    g.sampling.temperature = 0;
    g.max_tokens = (int32_t)r.n_greedy;
    g.ignore_eos = true; /* olmo2/phi3: transformers' eos ids lie outside this vocab */
    g.on_token = on_tok;
    g.user = &gp;
    cmf_generate_result res;
    CHECK_OK(cmf_session_generate(s, r.ids, n, &g, &res));
    size_t n_gen = (size_t)(gp - gen);
    bool greedy_ok = n_gen == r.n_greedy && !memcmp(gen, r.greedy, n_gen * sizeof(int32_t));
    printf("  %-12s %-5s rel %.2e  top1 %2d/%zu  meanKL %.2e  greedy %s\n", name, quant, rel, top1, n, kl,
           greedy_ok ? "identical" : "differs");
    if (exact) {
        /* measured <= 1.9e-6 (phi3) with the f32 cache: summation order only */
        if (!(rel <= 1e-5)) harness_fail(__FILE__, __LINE__, "%s %s: rel %.3g > 1e-5", name, quant, rel);
        if (!greedy_ok) harness_fail(__FILE__, __LINE__, "%s %s: greedy continuation differs", name, quant);
    } else if (half) {
        /* bf16 activations (and f16 weights rounded to bf16): measured over the
         * twelve models rel <= 1.2e-2 (phi3), mean KL <= 1.1e-6, top-1 >= 23/24,
         * greedy identical */
        if (!(rel <= 5e-2)) harness_fail(__FILE__, __LINE__, "%s %s bf16-dot: rel %.3g > 5e-2", name, quant, rel);
        if (!(kl <= 2e-5)) harness_fail(__FILE__, __LINE__, "%s %s bf16-dot: mean KL %.3g > 2e-5", name, quant, kl);
        if (!(top1 >= 0.9 * (double)n))
            harness_fail(__FILE__, __LINE__, "%s %s bf16-dot: top-1 agrees on %d of %zu", name, quant, top1, n);
    } else {
        bool q8 = !strcmp(quant, "q8") || !strcmp(quant, "q8_2f");
        double lim = q8 ? 2e-3 : 3e-2;
        if (!(kl <= lim)) harness_fail(__FILE__, __LINE__, "%s %s: mean KL %.3g > %.3g", name, quant, kl, lim);
        /* top-1 agreement: random-weight fixtures have near-tied logits, so
         * quantization flips some; measured minimum q8 20/24 (phi3), q4 10/24 (olmo2) */
        /* q8_2f: measured 18/24 (phi3; int8 activations of x times the column scales) */
        double min_top1 = !strcmp(quant, "q8_2f") ? 0.65 : q8 ? 0.75 : 0.35;
        if (!(top1 >= min_top1 * (double)n))
            harness_fail(__FILE__, __LINE__, "%s %s: top-1 agrees on %d of %zu (< %.0f%%)", name, quant, top1, n,
                         100 * min_top1);
    }
    /* token by token: same logits as the batch */
    cmf_session_reset(s);
    for (size_t i = 0; i < n; i++) CHECK_OK(cmf_session_decode(s, &r.ids[i], 1, lg2 + i * V, false));
    double rel_tt = worst_rel(lg2, lg, n, V);
    if (!(rel_tt <= 1e-4)) harness_fail(__FILE__, __LINE__, "%s %s: token-by-token vs batch rel %.3g", name, quant, rel_tt);
    free(lg);
    free(lg2);
done:
    cmf_session_free(s);
    cmf_model_free(m);
    free(r.logits);
}

static bool have_inputs(void)
{
    if (!harness_fixtures()) return false;
    const char *bin = getenv("CMF_BIN");
    if (!bin || !*bin) {
        fprintf(stderr, "*** CMF_BIN not set: parity tests SKIPPED ***\n");
        return false;
    }
    return true;
}

TEST(dense_parity_all_dtypes)
{
    if (!have_inputs()) SKIP("fixtures or CMF_BIN absent");
    for (size_t mi = 0; mi < sizeof MODELS / sizeof *MODELS; mi++)
        for (size_t q = 0; q < sizeof QUANTS / sizeof *QUANTS; q++) parity_one(MODELS[mi], QUANTS[q]);
}

/* The opt-in bf16 dot products for f16 / bf16 weights (CMF_CPU_BF16_DOT=1,
 * read when a model's CPU backend is made), where the CPU has them. */
TEST(bf16_dot_opt_in)
{
    if (!have_inputs()) SKIP("fixtures or CMF_BIN absent");
    if (!cmf__cpu_kernels_avx512_bf16dot()) SKIP("the CPU lacks AVX-512 BF16");
    setenv("CMF_CPU_BF16_DOT", "1", 1);
    g_bf16dot = true;
    for (size_t mi = 0; mi < sizeof MODELS / sizeof *MODELS; mi++) {
        parity_one(MODELS[mi], "bf16");
        parity_one(MODELS[mi], "f16");
    }
    g_bf16dot = false;
    unsetenv("CMF_CPU_BF16_DOT");
}

/* chunked prefill (n_batch 5, sliding window 8 rings included) and the
 * scalar reference kernels give the logits of one batch with fast kernels */
TEST(chunked_prefill_and_reference_kernels)
{
    if (!have_inputs()) SKIP("fixtures or CMF_BIN absent");
    const char *names[] = {"mistral_swa", "gemma2", "gemma3", "phi3"};
    const char *quants[] = {"f32", "q8", "q4"};
    for (size_t mi = 0; mi < 4; mi++)
        for (size_t qi = 0; qi < 3; qi++) {
            ref_data r = {0};
            char path[1024];
            if (!load_ref(names[mi], &r) || !convert(names[mi], quants[qi], path, sizeof path)) {
                harness_fail(__FILE__, __LINE__, "%s: fixture or convert failed", names[mi]);
                free(r.logits);
                continue;
            }
            cmf__model *m = NULL;
            CHECK_OK(cmf__model_open(path, &m));
            if (!m) {
                free(r.logits);
                continue;
            }
            const size_t V = r.vocab, n = r.n_ids;
            float *a = malloc(n * V * 4), *b = malloc(n * V * 4), *c = malloc(n * V * 4);
            cmf__engine_params p = cmf__engine_params_default();
            cmf__engine *e1 = NULL, *e2 = NULL, *e3 = NULL;
            CHECK_OK(cmf__engine_new(m, &p, &e1));
            p.n_batch = 5;
            CHECK_OK(cmf__engine_new(m, &p, &e2));
            p.n_batch = 256;
            p.reference = true;
            p.n_threads = 1;
            CHECK_OK(cmf__engine_new(m, &p, &e3));
            if (e1 && e2 && e3) {
                CHECK_OK(cmf__engine_forward(e1, r.ids, (int64_t)n, a, true));
                CHECK_OK(cmf__engine_forward(e2, r.ids, (int64_t)n, b, true));
                CHECK_OK(cmf__engine_forward(e3, r.ids, (int64_t)n, c, true));
                double r12 = worst_rel(b, a, n, V), r13 = worst_rel(c, a, n, V);
                printf("  %-12s %-4s chunked(5) vs batch rel %.2e, reference kernels vs fast rel %.2e\n", names[mi],
                       quants[qi], r12, r13);
                CHECK(r12 <= 1e-4);
                CHECK(r13 <= (qi == 0 ? 1e-4 : 0.15));
                /* context limit: nothing is fed past n_ctx */
                CHECK_ERR(cmf__engine_forward(e1, r.ids, (int64_t)e1->n_ctx, a, false), CMF_ERR_CONTEXT, "context full");
                int32_t bad = (int32_t)V;
                CHECK_ERR(cmf__engine_forward(e2, &bad, 1, a, false), CMF_ERR_ARG, "out of range");
            }
            cmf__engine_free(e1);
            cmf__engine_free(e2);
            cmf__engine_free(e3);
            cmf__model_free(m);
            free(a);
            free(b);
            free(c);
            free(r.logits);
        }
}

int main(void)
{
    RUN(dense_parity_all_dtypes);
    RUN(bf16_dot_opt_in);
    RUN(chunked_prefill_and_reference_kernels);
    return harness_done();
}
