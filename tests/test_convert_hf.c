/* test_convert_hf.c — every fixture checkpoint converts in process; with
 * f32 and bf16 each tensor of the .cmf decodes to the safetensors value bit
 * for bit (mixtral renames and gpt-oss expert-bank splits checked against
 * an independent index computation); the arch block carries the fields the
 * engine needs; the chat bundle resolves its ids. */
#include "harness.h"
#include "convert/convert.h"
#include "format/safetensors.h"
#include "format/format.h"
#include "quant/quant.h"
#include "util/half.h"

#include <stdlib.h>

static const char *const DENSE[] = {"llama", "llama3_rope", "qwen2", "qwen3", "mistral_swa", "gemma", "gemma2",
                                    "gemma3", "phi3", "olmo2", "granite", "smollm3"};
static const char *const MOE[] = {"qwen2_moe", "qwen3_moe", "mixtral", "gpt_oss", "gemma4", "qwen3_next"};

static char g_out[4096];

static const char *convert_one(const char *dir, int dtype, const char *tag)
{
    snprintf(g_out, sizeof g_out, "%s/%s.%s.cmf", harness_tmpdir(), tag, cmf__dtype_get(dtype)->name);
    cmf__convert_opts o = cmf__convert_opts_default();
    o.quant = dtype;
    cmf_status st = cmf__convert_hf(dir, g_out, &o, NULL);
    if (st) {
        harness_fail(__FILE__, __LINE__, "convert %s: %s", dir, cmf_last_error());
        return NULL;
    }
    return g_out;
}

/* Source of a converted tensor: the same name, or the mixtral / gpt-oss
 * mapping recomputed here independently of the converter. Returns the
 * source tensor and fills idx(i) parameters. */
typedef struct src_map {
    const cmf__st_tensor *t;
    int kind; /* 0 copy, 1 gate cols ::2, 2 up cols 1::2, 3 down transposed, 4 gate bias, 5 up bias, 6 down bias */
    uint64_t e;
} src_map;

static bool find_source(const cmf__st_set *s, const char *name, src_map *m)
{
    m->kind = 0;
    m->e = 0;
    if ((m->t = cmf__st_find(s, name))) return true;
    char buf[512];
    int layer, e;
    char role[64], kind[16];
    if (sscanf(name, "model.layers.%d.mlp.experts.%d.%63[a-z_].%15s", &layer, &e, role, kind) == 4) {
        /* mixtral */
        const char *w = !strcmp(role, "gate_proj") ? "w1" : !strcmp(role, "up_proj") ? "w3" : "w2";
        snprintf(buf, sizeof buf, "model.layers.%d.block_sparse_moe.experts.%d.%s.%s", layer, e, w, kind);
        if ((m->t = cmf__st_find(s, buf))) return true;
        /* gpt-oss */
        bool bias = !strcmp(kind, "bias");
        bool down = !strcmp(role, "down_proj");
        snprintf(buf, sizeof buf, "model.layers.%d.mlp.experts.%s%s", layer, down ? "down_proj" : "gate_up_proj",
                 bias ? "_bias" : "");
        m->e = (uint64_t)e;
        m->kind = down ? (bias ? 6 : 3) : !strcmp(role, "gate_proj") ? (bias ? 4 : 1) : (bias ? 5 : 2);
        return (m->t = cmf__st_find(s, buf)) != NULL;
    }
    if (sscanf(name, "model.layers.%d.mlp.gate.%15s", &layer, kind) == 2) {
        snprintf(buf, sizeof buf, "model.layers.%d.block_sparse_moe.gate.%s", layer, kind);
        if ((m->t = cmf__st_find(s, buf))) return true;
        snprintf(buf, sizeof buf, "model.layers.%d.mlp.router.%s", layer, kind);
        return (m->t = cmf__st_find(s, buf)) != NULL;
    }
    return false;
}

/* value of converted element (r, c) of the output [rows, cols] from the source */
static float source_value(const src_map *m, uint64_t r, uint64_t c, uint64_t cols)
{
    const cmf__st_tensor *t = m->t;
    switch (m->kind) {
    case 1: return cmf__st_get(t, m->e * t->shape[1] * t->shape[2] + c * t->shape[2] + 2 * r);     /* W[e][c][2r] */
    case 2: return cmf__st_get(t, m->e * t->shape[1] * t->shape[2] + c * t->shape[2] + 2 * r + 1); /* W[e][c][2r+1] */
    case 3: return cmf__st_get(t, m->e * t->shape[1] * t->shape[2] + c * t->shape[2] + r);         /* W[e][c][r] */
    case 4: return cmf__st_get(t, m->e * t->shape[1] + 2 * c);
    case 5: return cmf__st_get(t, m->e * t->shape[1] + 2 * c + 1);
    case 6: return cmf__st_get(t, m->e * t->shape[1] + c);
    default: return cmf__st_get(t, r * cols + c);
    }
}

/* Every tensor of `path` decodes to its safetensors source bit for bit (or,
 * for lossy dtypes, within tol relative to the row's absmax). */
static void compare_file(const char *dir, const char *path, double tol, const char *tag)
{
    cmf__st_set *s = NULL;
    cmf__file *f = NULL;
    CHECK_OK(cmf__st_open_dir(dir, &s));
    CHECK_OK(cmf__file_open(path, NULL, &f));
    if (!s || !f) goto out;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const cmf__tensor *t = &f->tensors[i];
        src_map m;
        if (!find_source(s, t->name, &m)) {
            harness_fail(__FILE__, __LINE__, "%s: tensor '%s' has no source", tag, t->name);
            continue;
        }
        cmf__qmat q;
        CHECK_OK(cmf__qmat_init(&q, t->dtype, t->data, t->nbytes, t->ndim, t->shape, t->name));
        float *row = malloc((size_t)q.cols * sizeof *row);
        uint64_t bad = 0;
        double worst = 0;
        for (int64_t r = 0; r < q.rows; r++) {
            cmf__qmat_decode_row(&q, r, row);
            double amax = 0;
            for (int64_t c = 0; c < q.cols; c++) {
                double v = fabs(source_value(&m, (uint64_t)r, (uint64_t)c, (uint64_t)q.cols));
                if (v > amax) amax = v;
            }
            for (int64_t c = 0; c < q.cols; c++) {
                float want = source_value(&m, (uint64_t)r, (uint64_t)c, (uint64_t)q.cols);
                if (tol == 0) {
                    if (cmf__f32_bits(want) != cmf__f32_bits(row[c])) bad++;
                } else {
                    double err = fabs((double)want - row[c]) / (amax > 0 ? amax : 1);
                    if (err > worst) worst = err;
                    if (err > tol) bad++;
                }
            }
        }
        if (bad)
            harness_fail(__FILE__, __LINE__, "%s: tensor '%s' (%s): %llu elements differ (worst %.3g, tol %.3g)", tag,
                         t->name, cmf__dtype_get(t->dtype)->name, (unsigned long long)bad, worst, tol);
        free(row);
        cmf__qmat_free(&q);
    }
out:
    cmf__file_free(f);
    cmf__st_free(s);
}

static void exact_for(const char *const *names, size_t n)
{
    if (!harness_fixtures()) SKIP("fixtures absent");
    for (size_t i = 0; i < n; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "hf-models/%s", names[i]);
        const char *dir = harness_fixture_path(rel);
        int dts[2] = {CMF_DTYPE_F32, CMF_DTYPE_BF16};
        for (int k = 0; k < 2; k++) {
            const char *out = convert_one(dir, dts[k], names[i]);
            if (out) compare_file(dir, out, 0, names[i]);
        }
    }
}

TEST(dense_exact) { exact_for(DENSE, sizeof DENSE / sizeof *DENSE); }
TEST(moe_exact) { exact_for(MOE, sizeof MOE / sizeof *MOE); }

TEST(shakespeare_exact)
{
    if (!harness_fixtures()) SKIP("fixtures absent");
    const char *dir = harness_fixture_path("shakespeare");
    const char *out = convert_one(dir, CMF_DTYPE_F32, "shakespeare");
    if (out) compare_file(dir, out, 0, "shakespeare");
    out = convert_one(dir, CMF_DTYPE_BF16, "shakespeare");
    if (out) compare_file(dir, out, 0, "shakespeare");
}

static cmf__file *open_converted(const char *model, int dtype)
{
    char rel[128];
    snprintf(rel, sizeof rel, "hf-models/%s", model);
    const char *out = convert_one(harness_fixture_path(rel), dtype, model);
    cmf__file *f = NULL;
    if (out) CHECK_OK(cmf__file_open(out, NULL, &f));
    return f;
}

static double num(const json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }
static const char *str(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

TEST(arch_fields)
{
    if (!harness_fixtures()) SKIP("fixtures absent");
    cmf__file *f = open_converted("gemma2", CMF_DTYPE_BF16);
    if (f) {
        const json_t *a = f->arch;
        CHECK_EQ_STR(str(a, "norm_style"), "gemma");
        CHECK_EQ_STR(str(a, "norm_placement"), "sandwich");
        CHECK_EQ_STR(str(a, "activation"), "gelu_tanh");
        CHECK_NEAR(num(a, "attention_scale"), 0.25, 0);
        CHECK_NEAR(num(a, "attn_logit_softcapping"), 50.0, 0);
        CHECK_NEAR(num(a, "final_logit_softcapping"), 30.0, 0);
        CHECK_NEAR(num(a, "embedding_multiplier"), sqrt(96.0), 0);
        CHECK_EQ_INT(num(a, "sliding_window"), 8);
        CHECK_EQ_STR(json_string_value(json_array_get(json_object_get(a, "layer_types"), 0)), "SlidingAttention");
        CHECK_EQ_STR(json_string_value(json_array_get(json_object_get(a, "layer_types"), 1)), "FullAttention");
        CHECK_EQ_STR(str(f->header, "quant_type"), "BF16");
        CHECK_EQ_STR(str(json_object_get(f->header, "provenance"), "source_model"), "gemma2");
        CHECK_CONTAINS(str(json_object_get(f->header, "provenance"), "tool"), "cmf ");
    }
    cmf__file_free(f);
    f = open_converted("granite", CMF_DTYPE_BF16);
    if (f) {
        CHECK_NEAR(num(f->arch, "attention_scale"), 0.0078125, 0);
        CHECK_NEAR(num(f->arch, "embedding_multiplier"), 12.0, 0);
        CHECK_NEAR(num(f->arch, "residual_multiplier"), 0.22, 0);
        CHECK_NEAR(num(f->arch, "logits_scaling"), 8.0, 0);
    }
    cmf__file_free(f);
    f = open_converted("llama3_rope", CMF_DTYPE_BF16);
    if (f) {
        const json_t *rs = json_object_get(f->arch, "rope_scaling");
        CHECK_EQ_STR(str(rs, "rope_type"), "llama3");
        CHECK_NEAR(num(rs, "factor"), 8.0, 0);
        CHECK_NEAR(num(rs, "low_freq_factor"), 1.0, 0);
        CHECK_NEAR(num(rs, "high_freq_factor"), 4.0, 0);
        CHECK_EQ_INT(num(rs, "original_max_position_embeddings"), 32);
        CHECK_NEAR(num(f->arch, "rope_theta"), 500000.0, 0);
        CHECK(json_is_true(json_object_get(f->arch, "tie_word_embeddings")));
        CHECK(cmf__file_find(f, "lm_head.weight") == NULL);
    }
    cmf__file_free(f);
    f = open_converted("mistral_swa", CMF_DTYPE_BF16);
    if (f) {
        const json_t *lt = json_object_get(f->arch, "layer_types");
        for (size_t i = 0; i < json_array_size(lt); i++)
            CHECK_EQ_STR(json_string_value(json_array_get(lt, i)), "SlidingAttention");
        CHECK_EQ_INT(num(f->arch, "sliding_window"), 8);
    }
    cmf__file_free(f);
    f = open_converted("qwen2_moe", CMF_DTYPE_BF16);
    if (f) {
        const json_t *lt = json_object_get(f->arch, "layer_types");
        for (size_t i = 0; i < json_array_size(lt); i++)
            CHECK_EQ_STR(json_string_value(json_array_get(lt, i)), "FullAttention");
        CHECK(!json_object_get(f->arch, "sliding_window"));
        const json_t *moe = json_object_get(f->arch, "moe");
        CHECK_EQ_INT(num(moe, "num_experts"), 8);
        CHECK_EQ_INT(num(moe, "top_k"), 2);
        CHECK_EQ_INT(num(moe, "moe_intermediate_size"), 32);
        CHECK_EQ_INT(num(moe, "shared_expert_intermediate_size"), 64);
        CHECK(json_is_false(json_object_get(moe, "norm_topk_prob")));
    }
    cmf__file_free(f);
    f = open_converted("smollm3", CMF_DTYPE_BF16);
    if (f) {
        const json_t *rl = json_object_get(f->arch, "rope_layers");
        CHECK_EQ_INT(json_array_size(rl), 3);
        CHECK_EQ_INT(json_integer_value(json_array_get(rl, 0)), 1);
        CHECK_EQ_INT(json_integer_value(json_array_get(rl, 1)), 0);
        CHECK_EQ_INT(json_integer_value(json_array_get(rl, 2)), 1);
    }
    cmf__file_free(f);
    f = open_converted("gemma3", CMF_DTYPE_BF16);
    if (f) {
        CHECK_NEAR(num(f->arch, "rope_theta"), 1e6, 0);
        CHECK_NEAR(num(f->arch, "rope_local_base_freq"), 1e4, 0);
        CHECK_NEAR(num(f->arch, "attention_scale"), 0.25, 0);
        CHECK(!json_object_get(f->arch, "attn_logit_softcapping"));
    }
    cmf__file_free(f);
    f = open_converted("olmo2", CMF_DTYPE_BF16);
    if (f) CHECK_EQ_STR(str(f->arch, "norm_placement"), "post");
    cmf__file_free(f);
    /* Gemma4RMSNorm is x*w; scaling 1.0; weightless value norm */
    f = open_converted("gemma4", CMF_DTYPE_BF16);
    if (f) {
        CHECK_EQ_STR(str(f->arch, "norm_style"), "qwen");
        CHECK_NEAR(num(f->arch, "attention_scale"), 1.0, 0);
        CHECK(json_is_true(json_object_get(f->arch, "v_norm")));
        CHECK_EQ_INT(json_integer_value(json_array_get(json_object_get(f->arch, "head_dim_per_layer"), 3)), 32);
        CHECK_NEAR(num(f->arch, "partial_rotary_factor"), 0.25, 0);
        CHECK_EQ_STR(str(json_object_get(f->arch, "rope_scaling"), "rope_type"), "proportional");
        CHECK_EQ_INT(num(f->arch, "hidden_size_per_layer_input"), 16);
    }
    cmf__file_free(f);
    /* Qwen3NextRMSNorm is x*(1+w) */
    f = open_converted("qwen3_next", CMF_DTYPE_BF16);
    if (f) {
        CHECK_EQ_STR(str(f->arch, "norm_style"), "gemma");
        CHECK_EQ_STR(json_string_value(json_array_get(json_object_get(f->arch, "layer_types"), 0)), "LinearAttention");
        CHECK_EQ_INT(num(f->arch, "linear_num_value_heads"), 4);
        CHECK_EQ_INT(num(json_object_get(f->arch, "moe"), "shared_expert_intermediate_size"), 32);
    }
    cmf__file_free(f);
    /* gpt-oss: yarn with the derived attention factor, swiglu_oss, softmax over top-k */
    f = open_converted("gpt_oss", CMF_DTYPE_BF16);
    if (f) {
        const json_t *rs = json_object_get(f->arch, "rope_scaling");
        CHECK_EQ_STR(str(rs, "rope_type"), "yarn");
        CHECK_NEAR(num(rs, "attention_factor"), 0.1 * log(32.0) + 1.0, 1e-15);
        CHECK(json_is_false(json_object_get(rs, "truncate")));
        CHECK_EQ_STR(str(f->arch, "activation"), "swiglu_oss");
        CHECK(json_is_true(json_object_get(json_object_get(f->arch, "moe"), "norm_topk_prob")));
        CHECK(cmf__file_find(f, "model.layers.0.mlp.gate.bias") != NULL);
        CHECK(cmf__file_find(f, "model.layers.0.mlp.experts.3.down_proj.bias") != NULL);
    }
    cmf__file_free(f);
}

TEST(chat_bundle)
{
    if (!harness_fixtures()) SKIP("fixtures absent");
    cmf__file *f = open_converted("llama", CMF_DTYPE_BF16);
    if (f) {
        const json_t *tc = json_object_get(f->header, "tokenizer_config");
        CHECK_CONTAINS(str(tc, "chat_template"), "<|im_start|>");
        /* generation_config eos 2, tokenizer_config eos "<|im_end|>" = 383 */
        const json_t *eos = json_object_get(tc, "eos_token_ids");
        CHECK_EQ_INT(json_array_size(eos), 2);
        CHECK_EQ_INT(json_integer_value(json_array_get(eos, 0)), 2);
        CHECK_EQ_INT(json_integer_value(json_array_get(eos, 1)), 383);
        /* tokenizer_config says bos_token null: no BOS */
        CHECK(json_is_null(json_object_get(tc, "bos_token_id")));
        const cmf__section *v = cmf__file_vocab(f);
        size_t len = 0;
        char *tok = harness_read_file(harness_fixture_path("hf-models/llama/tokenizer.json"), &len);
        CHECK(v && tok && v->len == len && memcmp(v->data, tok, len) == 0);
        free(tok);
    }
    cmf__file_free(f);
    if (!harness_fixtures()) return;
    const char *out = convert_one(harness_fixture_path("shakespeare"), CMF_DTYPE_BF16, "shakespeare");
    f = NULL;
    if (out) CHECK_OK(cmf__file_open(out, NULL, &f));
    if (f) {
        const json_t *tc = json_object_get(f->header, "tokenizer_config");
        CHECK(json_is_null(json_object_get(tc, "chat_template")));
        CHECK_EQ_INT(json_integer_value(json_array_get(json_object_get(tc, "eos_token_ids"), 0)), 0);
    }
    cmf__file_free(f);
}

int main(void)
{
    RUN(dense_exact);
    RUN(shakespeare_exact);
    RUN(moe_exact);
    RUN(arch_fields);
    RUN(chat_bundle);
    return harness_done();
}
