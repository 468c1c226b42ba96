/* arch.h — the header `arch` block (docs/ARCH_HEADER.md) parsed into a plain
 * struct the engine executes. Every field that changes the math is read here
 * and only here; absent fields take the documented defaults, malformed ones
 * fail with the JSON path ("arch.layer_types[2]: unknown 'Foo'").
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
    const json_t *json;      /* the arch object itself (borrowed from the file) for extensions */
} cmf__arch;

/* Parses `arch` (the header's arch object). `what` names the file in
 * messages. Errors: CMF_ERR_CONFIG (missing/invalid field, path named),
 * CMF_ERR_NOMEM. On failure nothing is left allocated. */
cmf_status cmf__arch_parse(const json_t *arch, const char *what, cmf__arch *out);
void cmf__arch_free(cmf__arch *a);

#endif
