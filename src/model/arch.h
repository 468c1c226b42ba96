/* arch.h — the header `arch` block (docs/ARCH_HEADER.md) parsed once into a
 * plain struct that the engine, the extensions and `cmf info` read. Every
 * field any code reads is read here and only here: absent fields take the
 * documented defaults, a field of the wrong JSON type or out of its
 * documented limit fails with the JSON path ("arch.moe.top_k: expected an
 * integer"). The converters run the same parse before they write a header.
 * The model name (arch_name) is informational and never drives execution. */
#ifndef CMF_MODEL_ARCH_H
#define CMF_MODEL_ARCH_H

#include "cmf.h"
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum cmf__layer_kind {
    CMF__LAYER_FULL = 0,    /* FullAttention */
    CMF__LAYER_SLIDING = 1, /* SlidingAttention: window of sliding_window keys */
    CMF__LAYER_LINEAR = 2,  /* LinearAttention (gated DeltaNet): an extension binds it */
} cmf__layer_kind;

typedef enum cmf__norm_style { CMF__NORM_QWEN = 0, CMF__NORM_GEMMA = 1 } cmf__norm_style;
typedef enum cmf__norm_place { CMF__PLACE_PRE = 0, CMF__PLACE_SANDWICH = 1, CMF__PLACE_POST = 2 } cmf__norm_place;
typedef enum cmf__arch_act {
    CMF__ARCH_ACT_SILU = 0,
    CMF__ARCH_ACT_GELU_TANH = 1,
    CMF__ARCH_ACT_GELU = 2,
    CMF__ARCH_ACT_SWIGLU_OSS = 3,
} cmf__arch_act;
typedef enum cmf__rope_type {
    CMF__ROPE_DEFAULT = 0,
    CMF__ROPE_LINEAR = 1,
    CMF__ROPE_LLAMA3 = 2,
    CMF__ROPE_YARN = 3,
    CMF__ROPE_PROPORTIONAL = 4,
} cmf__rope_type;

/* One rotary configuration (full layers and sliding layers each have one). */
typedef struct cmf__rope_cfg {
    double theta;            /* base */
    double partial;          /* rotated fraction of the head (leading dims) */
    cmf__rope_type type;
    double factor;           /* linear / llama3 / yarn */
    double low_freq_factor, high_freq_factor;     /* llama3 */
    double orig_max_pos;     /* llama3 / yarn original_max_position_embeddings */
    double beta_fast, beta_slow;                  /* yarn */
    double attention_factor; /* yarn: cos/sin multiplier; < 0 = derive from factor */
    bool truncate;           /* yarn */
} cmf__rope_cfg;

/* Documented limits on the numbers an arch block may hold (ARCH_HEADER.md,
 * SECURITY.md). With them every size product the model and engine form
 * (heads x head_dim, positions x kv width, ...) stays far inside int64. */
#define CMF__ARCH_MAX_POS ((int64_t)1 << 24)      /* max_position_embeddings, sliding_window */
#define CMF__ARCH_MAX_DIM ((int64_t)1 << 24)      /* widths, and heads x head_dim products */
#define CMF__ARCH_MAX_VOCAB ((int64_t)1 << 24)    /* vocab_size, vocab_size_per_layer_input */
#define CMF__ARCH_MAX_LAYERS 4096                 /* num_layers */
#define CMF__ARCH_MAX_HEADS 4096                  /* query, key/value and linear-attention heads */
#define CMF__ARCH_MAX_HEAD_DIM 16384              /* head_dim and linear-attention head dims */
#define CMF__ARCH_MAX_EXPERTS 65536               /* moe.num_experts, moe.top_k */
#define CMF__ARCH_MAX_CONV_KERNEL 1024            /* linear_conv_kernel_dim */
#define CMF__ARCH_MAX_LINEAR_STATE ((int64_t)1 << 28) /* value heads x key dim x value dim (floats) */

/* The MoE block (arch.moe, spec §2.2). Which layers are MoE is decided by
 * tensor presence (mlp.gate.weight), not by this block. */
typedef struct cmf__arch_moe {
    bool present;                 /* arch.moe given */
    int64_t num_experts;          /* 0 = not stated (the router's rows rule) */
    int64_t top_k;                /* top_k, else num_experts_per_tok, else 1 */
    int64_t moe_intermediate_size;           /* informational: expert tensors rule (0 = absent) */
    int64_t shared_expert_intermediate_size; /* informational (0 = absent) */
    bool norm_topk_prob;          /* renormalise the selected weights (default false) */
    bool router_sigmoid;          /* σ(logit) per expert instead of softmax (default false) */
    double routed_scaling_factor; /* multiplies the routed weights (default 1, > 0) */
} cmf__arch_moe;

/* Gated DeltaNet dimensions (LinearAttention layers); 0 = absent. */
typedef struct cmf__arch_linear {
    int64_t num_key_heads, num_value_heads; /* linear_num_key_heads, linear_num_value_heads */
    int64_t key_head_dim, value_head_dim;   /* linear_key_head_dim, linear_value_head_dim */
    int64_t conv_kernel_dim;                /* linear_conv_kernel_dim */
} cmf__arch_linear;

typedef struct cmf__arch {
    char arch_name[64];      /* informational */
    int64_t hidden_size, intermediate_size, n_layer, n_head, n_head_kv, head_dim;
    int64_t vocab_size, max_pos;
    bool tie_word_embeddings;
    double rms_norm_eps;
    cmf__norm_style norm_style;
    cmf__norm_place norm_place;
    cmf__arch_act act; /* same values as compute/archs.h cmf__act */
    double swiglu_alpha, swiglu_limit;
    /* per layer, [n_layer] each */
    cmf__layer_kind *layer_kind;
    int64_t *layer_head_dim;
    int64_t *layer_n_head;
    uint8_t *layer_rope;     /* 0 = no rotary embedding in this layer */
    int64_t sliding_window;  /* 0 = none */
    double attention_scale;  /* 0 = 1/sqrt(head_dim of the layer) */
    double attn_softcap;     /* 0 = none */
    double final_softcap;    /* 0 = none */
    cmf__rope_cfg rope_full, rope_local;
    double embedding_multiplier, residual_multiplier, logits_scaling;
    cmf__arch_moe moe;
    cmf__arch_linear linear;
    /* gemma4 */
    int64_t per_layer_input;       /* hidden_size_per_layer_input (0 = no per-layer inputs) */
    int64_t vocab_per_layer_input; /* vocab_size_per_layer_input, informational (0 = absent) */
    bool v_norm;                   /* value heads RMS-normalised without a weight */
} cmf__arch;

/* Parses and validates `arch` (the header's arch object): JSON types, the
 * documented ranges and limits above, and the size products built from
 * them. `what` names the file in messages ("model.cmf: header
 * arch.rms_norm_eps: -1 must be > 0"). Errors: CMF_ERR_CONFIG (missing,
 * mistyped or out-of-range field, path and value named), CMF_ERR_NOMEM.
 * On failure nothing is left allocated. */
cmf_status cmf__arch_parse(const json_t *arch, const char *what, cmf__arch *out);
void cmf__arch_free(cmf__arch *a);

/* The same validation for a block about to be written (the converters call
 * it before any output exists): parses, frees, returns the status. */
cmf_status cmf__arch_check(const json_t *arch, const char *what);

/* "FullAttention", "SlidingAttention", "LinearAttention" / "default",
 * "linear", "llama3", "yarn", "proportional" (static strings). */
const char *cmf__layer_kind_name(cmf__layer_kind k);
const char *cmf__rope_type_name(cmf__rope_type t);

#endif
