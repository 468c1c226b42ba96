/* engine.h — the forward pass of one sequence: KV cache (a ring for sliding
 * layers), rotary tables, scratch, and a per-layer pair of operators
 * (token mixer: attention or an extension such as linear attention; FFN:
 * dense or an extension such as MoE) chosen once from the bound weights.
 * One cmf__engine is one sequence and is used by one thread at a time. */
#ifndef CMF_ENGINE_ENGINE_H
#define CMF_ENGINE_ENGINE_H

#include "cmf.h"
#include "compute/backend.h"
#include "model/model.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct cmf__engine cmf__engine;

/* A block operator: out[t] = op(x[t]) for n tokens at positions
 * e->pos[0..n). x and out are [n][hidden]; x is already normalised by the
 * caller (placement rules), out is the branch output before any post-norm
 * and residual. */
typedef cmf_status (*cmf__block_fn)(cmf__engine *e, int64_t layer, const float *x, float *out, int64_t n);

typedef struct cmf__layer_ops {
    cmf__block_fn mixer;     /* attention / linear attention */
    cmf__block_fn ffn;       /* dense gated FFN / MoE */
} cmf__layer_ops;

/* Per-layer, per-sequence state. Attention layers use k/v; extensions keep
 * their recurrent state in ext (freed with ext_free, reset with ext_reset). */
typedef struct cmf__kv_layer {
    float *k, *v;            /* [cap][kv_dim] f32; slot of position p = p % cap */
    int64_t cap, kv_dim;
    void *ext;
    void (*ext_free)(void *ext);
    void (*ext_reset)(void *ext);
} cmf__kv_layer;

/* The sequence's active task mask (spec §5), set by cmf__engine_set_mask.
 * Rows are borrowed from the file's parsed masks section; a row is NULL
 * wherever the mask restricts nothing, so an all-ones mask runs exactly the
 * unmasked code. The arrays are one block (ffn is its base), allocated at
 * the first activation. */
typedef struct cmf__engine_task {
    const cmf__mask *mask;   /* NULL = no mask: the arrays are not read */
    const uint8_t **ffn;     /* [n_layer] FFN row of a dense layer it restricts (LSB first, set = active) */
    const uint8_t **heads;   /* [n_layer] head row of an attention layer it restricts */
    bool *skip;              /* [n_layer] layer gate clear: the layer is not run */
} cmf__engine_task;

typedef struct cmf__engine_params {
    int64_t n_ctx;           /* 0 = the model's max_position_embeddings; capped by it */
    int64_t n_batch;         /* tokens per prefill chunk (default 256) */
    int n_threads;           /* <= 0: all cores */
    bool reference;          /* scalar reference kernels (tests) */
} cmf__engine_params;

struct cmf__engine {
    const cmf__model *model;
    cmf__backend *be;
    cmf__layer_ops *ops;     /* [n_layer] */
    cmf__kv_layer *kv;       /* [n_layer] */
    cmf__rope_table *rope;   /* [n_layer]; rot_dims 0 = no rope in this layer */
    int64_t n_ctx, n_batch, n_past;
    /* scratch for one chunk of up to n_batch tokens */
    int32_t *pos;            /* [n_batch] */
    float *x, *xn, *br;      /* [n_batch][hidden]: residual, normalised, branch out */
    float *q, *k, *v, *att, *gate; /* [n_batch][max_q_dim] / [max_kv_dim] */
    float *f1, *f2;          /* [n_batch][max_ffn_dim] */
    void *ext_scratch;       /* extensions' scratch, owned */
    cmf__engine_task task;   /* active task mask (taskmask.c) */
};

cmf__engine_params cmf__engine_params_default(void);
/* Errors: CMF_ERR_UNSUPPORTED (a layer whose operator this build lacks,
 * naming the layer and tensor), CMF_ERR_NOMEM, CMF_ERR_BACKEND. */
cmf_status cmf__engine_new(const cmf__model *m, const cmf__engine_params *p, cmf__engine **out);
void cmf__engine_free(cmf__engine *e);
/* Forgets the sequence (n_past = 0, extension state reset). */
void cmf__engine_reset(cmf__engine *e);
/* Drops positions >= n_keep (n_keep <= n_past). Only allowed when every
 * sliding ring still holds what the kept prefix needs and no layer keeps
 * recurrent state; CMF_ERR_UNSUPPORTED otherwise (then reset and re-feed). */
cmf_status cmf__engine_truncate(cmf__engine *e, int64_t n_keep);

/* Activates task mask `mask` of the parsed section `ms` (spec §5) for this
 * sequence; mask NULL = none (ms may then be NULL). Dense FFN rows zero
 * the inactive neurons' activations (as if those down_proj columns were
 * zero), head rows zero the inactive query heads' attention outputs before
 * o_proj, a clear layer gate skips the layer (hidden state unchanged),
 * expert rows narrow MoE routing (cmf__archs_apply_mask). FFN rows are not
 * applied to MoE layers (their experts are not intermediate_size wide) nor
 * head rows to LinearAttention layers. Everything is checked before
 * anything changes; a different mask resets the sequence (the cache was
 * computed under the old one), the same mask keeps it. `ms` must outlive
 * the engine's use of the mask. Errors: CMF_ERR_CONFIG (the mask's layer,
 * FFN, head or expert counts disagree with the bound layers it restricts),
 * CMF_ERR_UNSUPPORTED (per-loop FFN rows: the engine runs no layer loops),
 * CMF_ERR_NOMEM. */
cmf_status cmf__engine_set_mask(cmf__engine *e, const cmf__masks *ms, const cmf__mask *mask);

/* Feeds n tokens after the n_past already in the cache, in chunks of
 * n_batch. logits: NULL, or [n][vocab] when all_logits, else [vocab] for the
 * last token. Errors: CMF_ERR_CONTEXT (n_past + n > n_ctx, nothing fed),
 * CMF_ERR_ARG (token id out of range, nothing fed). */
cmf_status cmf__engine_forward(cmf__engine *e, const int32_t *tokens, int64_t n, float *logits, bool all_logits);

/* Operators (each in its own file; extensions add theirs in blocks.c). */
cmf_status cmf__block_attention(cmf__engine *e, int64_t layer, const float *x, float *out, int64_t n);
cmf_status cmf__block_ffn_dense(cmf__engine *e, int64_t layer, const float *x, float *out, int64_t n);
/* Chooses ops[layer] from the bound weights; may allocate kv[layer].ext. */
cmf_status cmf__blocks_resolve(cmf__engine *e, int64_t layer);

/* Rotary table of one layer from its config (engine/rope.c). */
cmf_status cmf__rope_build(const cmf__rope_cfg *cfg, int64_t head_dim, double max_pos, cmf__rope_table *out);

#endif
