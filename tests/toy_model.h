/* toy_model.h — a tiny valid .cmf written with the format writer, for tests
 * and fuzz targets that mutate the numbers of its `arch` block: 3 layers of
 * hidden 8 (FullAttention + MoE with a shared expert, LinearAttention (gated
 * DeltaNet) + dense FFN, SlidingAttention + dense FFN), vocab 16, f32
 * weights from a fixed generator. No tokenizer: callers feed token ids. */
#ifndef CMF_TESTS_TOY_MODEL_H
#define CMF_TESTS_TOY_MODEL_H

#include "format/format.h"
#include "quant/quant.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    TOY_H = 8, TOY_NH = 2, TOY_NKV = 1, TOY_HD = 4, TOY_V = 16, TOY_F = 12, TOY_L = 3,
    TOY_E = 4, TOY_EF = 6,                                   /* experts, expert ffn */
    TOY_NK = 1, TOY_NV = 2, TOY_DK = 4, TOY_DV = 4, TOY_CK = 2, /* DeltaNet */
    TOY_MAX_POS = 32, TOY_WINDOW = 4,
};

/* The valid arch block of the toy (new reference). */
static inline json_t *toy_arch(void)
{
    json_t *a = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:f, s:s, s:s, s:s, s:f, s:f}",
                          "arch_name", "toy", "hidden_size", TOY_H, "intermediate_size", TOY_F, "num_layers", TOY_L,
                          "num_attention_heads", TOY_NH, "num_kv_heads", TOY_NKV, "head_dim", TOY_HD, "vocab_size",
                          TOY_V, "max_position_embeddings", TOY_MAX_POS, "tie_word_embeddings", 1, "rms_norm_eps",
                          1e-6, "norm_style", "qwen", "norm_placement", "pre", "activation", "silu", "rope_theta",
                          10000.0, "partial_rotary_factor", 1.0);
    json_object_set_new(a, "layer_types",
                        json_pack("[s,s,s]", "FullAttention", "LinearAttention", "SlidingAttention"));
    json_object_set_new(a, "sliding_window", json_integer(TOY_WINDOW));
    json_object_set_new(a, "linear_num_key_heads", json_integer(TOY_NK));
    json_object_set_new(a, "linear_num_value_heads", json_integer(TOY_NV));
    json_object_set_new(a, "linear_key_head_dim", json_integer(TOY_DK));
    json_object_set_new(a, "linear_value_head_dim", json_integer(TOY_DV));
    json_object_set_new(a, "linear_conv_kernel_dim", json_integer(TOY_CK));
    json_object_set_new(a, "moe", json_pack("{s:i, s:i, s:i, s:i, s:b}", "num_experts", TOY_E, "top_k", 2,
                                            "moe_intermediate_size", TOY_EF, "shared_expert_intermediate_size", TOY_EF,
                                            "norm_topk_prob", 1));
    return a;
}

/* f32 tensor [rows, cols] (cols 0: 1-D [rows]; k > 0: 3-D [rows, 1, k]). */
static inline cmf_status toy_add(cmf__writer *w, uint64_t *rng, const char *name, int64_t rows, int64_t cols, int64_t k)
{
    size_t n = (size_t)(rows * (cols ? cols : 1) * (k ? k : 1));
    float *d = malloc(n * sizeof *d);
    if (!d) return CMF_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        *rng ^= *rng << 13, *rng ^= *rng >> 7, *rng ^= *rng << 17;
        float r = (float)((double)(*rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        d[i] = cols || k ? 0.4f * r : 1.0f + 0.1f * r; /* vectors: norms near 1 */
    }
    uint64_t shape[3] = {(uint64_t)rows, (uint64_t)(k ? 1 : cols), (uint64_t)k};
    int ndim = k ? 3 : cols ? 2 : 1;
    cmf_status st = cmf__writer_add_tensor(w, name, CMF_DTYPE_F32, ndim, shape, d, n * sizeof *d);
    free(d);
    return st;
}

/* Writes the toy with `arch` as its arch block (borrowed) and the other
 * header keys of `extra` (borrowed; NULL: none) to `path`. */
static inline cmf_status toy_write_with(const char *path, const json_t *arch, const json_t *extra)
{
    cmf__writer *w;
    cmf_status st = cmf__writer_open(path, &w);
    if (st) return st;
    json_t *hdr = json_pack("{s:O}", "arch", (json_t *)arch);
    if (hdr && extra) json_object_update_missing(hdr, (json_t *)extra);
    st = cmf__writer_set_header(w, hdr);
    json_decref(hdr);
    uint64_t rng = 99;
    char nm[160];
#define TOY(...) if (!st) st = toy_add(w, &rng, __VA_ARGS__)
#define N(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)
    TOY("model.embed_tokens.weight", TOY_V, TOY_H, 0);
    TOY("model.norm.weight", TOY_H, 0, 0);
    for (int l = 0; l < TOY_L; l++) {
        TOY(N("model.layers.%d.input_layernorm.weight", l), TOY_H, 0, 0);
        TOY(N("model.layers.%d.post_attention_layernorm.weight", l), TOY_H, 0, 0);
        if (l == 1) { /* gated DeltaNet: conv dim 2·nk·dk + nv·dv */
            const int C = 2 * TOY_NK * TOY_DK + TOY_NV * TOY_DV;
            TOY(N("model.layers.1.linear_attn.in_proj_qkvz.weight"), 2 * TOY_NK * TOY_DK + 2 * TOY_NV * TOY_DV, TOY_H, 0);
            TOY(N("model.layers.1.linear_attn.in_proj_ba.weight"), 2 * TOY_NV, TOY_H, 0);
            TOY(N("model.layers.1.linear_attn.out_proj.weight"), TOY_H, TOY_NV * TOY_DV, 0);
            TOY(N("model.layers.1.linear_attn.conv1d.weight"), C, 0, TOY_CK);
            TOY(N("model.layers.1.linear_attn.A_log"), TOY_NV, 0, 0);
            TOY(N("model.layers.1.linear_attn.dt_bias"), TOY_NV, 0, 0);
            TOY(N("model.layers.1.linear_attn.norm.weight"), TOY_DV, 0, 0);
        } else {
            TOY(N("model.layers.%d.self_attn.q_proj.weight", l), TOY_NH * TOY_HD, TOY_H, 0);
            TOY(N("model.layers.%d.self_attn.k_proj.weight", l), TOY_NKV * TOY_HD, TOY_H, 0);
            TOY(N("model.layers.%d.self_attn.v_proj.weight", l), TOY_NKV * TOY_HD, TOY_H, 0);
            TOY(N("model.layers.%d.self_attn.o_proj.weight", l), TOY_H, TOY_NH * TOY_HD, 0);
        }
        if (l == 0) { /* MoE with a gated shared expert */
            TOY("model.layers.0.mlp.gate.weight", TOY_E, TOY_H, 0);
            for (int e = 0; e < TOY_E; e++) {
                TOY(N("model.layers.0.mlp.experts.%d.gate_proj.weight", e), TOY_EF, TOY_H, 0);
                TOY(N("model.layers.0.mlp.experts.%d.up_proj.weight", e), TOY_EF, TOY_H, 0);
                TOY(N("model.layers.0.mlp.experts.%d.down_proj.weight", e), TOY_H, TOY_EF, 0);
            }
            TOY("model.layers.0.mlp.shared_expert.gate_proj.weight", TOY_EF, TOY_H, 0);
            TOY("model.layers.0.mlp.shared_expert.up_proj.weight", TOY_EF, TOY_H, 0);
            TOY("model.layers.0.mlp.shared_expert.down_proj.weight", TOY_H, TOY_EF, 0);
            TOY("model.layers.0.mlp.shared_expert_gate.weight", 1, TOY_H, 0);
        } else {
            TOY(N("model.layers.%d.mlp.gate_proj.weight", l), TOY_F, TOY_H, 0);
            TOY(N("model.layers.%d.mlp.up_proj.weight", l), TOY_F, TOY_H, 0);
            TOY(N("model.layers.%d.mlp.down_proj.weight", l), TOY_H, TOY_F, 0);
        }
    }
#undef TOY
#undef N
    if (st) {
        cmf__writer_abort(w);
        return st;
    }
    return cmf__writer_finish(w);
}

/* Writes the toy with `arch` as its arch block (borrowed) to `path`. */
static inline cmf_status toy_write(const char *path, const json_t *arch) { return toy_write_with(path, arch, NULL); }

/* Sets arch[path] = value (takes the reference; NULL deletes). A dotted
 * path ("moe.top_k", "rope_scaling.factor") goes one object down, creating
 * it when absent. */
static inline void toy_set(json_t *arch, const char *path, json_t *value)
{
    const char *dot = strchr(path, '.');
    if (dot) {
        char obj[64];
        snprintf(obj, sizeof obj, "%.*s", (int)(dot - path), path);
        json_t *o = json_object_get(arch, obj);
        if (!json_is_object(o)) {
            o = json_object();
            json_object_set_new(arch, obj, o);
        }
        arch = o;
        path = dot + 1;
    }
    if (value) json_object_set_new(arch, path, value);
    else json_object_del(arch, path);
}

#endif
