/* engine.h — the forward pass as a graph of backend ops over a batch of
 * tokens from up to n_seq sequences. The engine owns the per-sequence
 * state in backend buffers (KV cache, a ring for sliding layers, of f32,
 * f16 or q8 rows; DeltaNet states), the activation and parameter buffers,
 * and a small cache of graphs keyed by batch shape: a decode step writes
 * its ids, positions and sequence slots into the parameter buffer and
 * replays a graph built once. One cmf__engine is used by one thread at a
 * time; several engines may share one backend. */
#ifndef CMF_ENGINE_ENGINE_H
#define CMF_ENGINE_ENGINE_H

#include "cmf.h"
#include "compute/backend.h"
#include "engine/kvpage.h"
#include "engine/lora.h"
#include "model/model.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct cmf__engine cmf__engine;

/* The active task mask (spec §5), set by cmf__engine_set_mask. Rows are
 * borrowed from the file's parsed masks section; a row is NULL wherever the
 * mask restricts nothing, so an all-ones mask runs exactly the unmasked
 * graph. The arrays are one block (ffn is its base), allocated at the
 * first activation. */
typedef struct cmf__engine_task {
    const cmf__mask *mask;   /* NULL = no mask: the arrays are not read */
    const uint8_t **ffn;     /* [n_layer] FFN row of a dense layer it restricts (LSB first, set = active) */
    const uint8_t **heads;   /* [n_layer] head row of an attention layer it restricts */
    const uint8_t **experts; /* [n_layer] routable experts of a MoE layer it restricts */
    bool *skip;              /* [n_layer] layer gate clear: the layer is not run */
} cmf__engine_task;

typedef struct cmf__engine_params {
    int64_t n_ctx;           /* per sequence; 0 = the model's max_position_embeddings; capped by it */
    int64_t n_batch;         /* tokens per forward chunk, all sequences together (default 256) */
    int64_t n_seq;           /* sequence slots (default 1) */
    cmf__etype kv_type;      /* CMF__E_F32 (default here), CMF__E_F16 or CMF__E_Q8 */
    int n_threads;           /* <= 0: all cores (only for a backend the engine creates) */
    bool reference;          /* scalar reference kernels (tests) */
    cmf__backend *backend;   /* shared backend to run on, NULL = create one (owned) */
    int64_t kv_budget;       /* bytes for the KV cache of all sequences; 0 = every sequence can fill n_ctx. With
                              * a budget, n_ctx 0 = as many positions as the paged blocks hold (at most the model's) */
    int64_t kv_block;        /* positions per block of the paged cache (0 = CMF__KV_BLOCK) */
    int buckets;             /* chunk shapes rounded up to buckets (cmf__engine_bucket) with padding tokens:
                              * 1 on, -1 off, 0 = on where a graph miss costs a recording (a backend other
                              * than the CPU's); only for a paged cache without recurrent layers */
} cmf__engine_params;

#define CMF__KV_BLOCK 16 /* positions per KV block by default (docs/ENGINE.md has the measurement) */

/* One forward call: n tokens, token t of sequence seq[t] (NULL = all 0)
 * at the next position of that sequence; want[t] (NULL = only the last
 * token) asks for its logits, written in token order. */
typedef struct cmf__batch {
    int64_t n;
    const int32_t *tok;
    const int32_t *seq;
    const bool *want;
} cmf__batch;

/* Tokens of one binding (skill view) in a chunk: a chunk's tokens are
 * ordered by group, and so are its output rows. A blend group runs the
 * engine's blend (its m is the blend's first member). */
#define CMF__ENGINE_GROUPS 8
typedef struct cmf__engine_group {
    const cmf__model *m;
    bool blend;
    int64_t n_tok, n_out;
} cmf__engine_group;

#define CMF__ENGINE_OUT_MAX 64 /* logits rows per chunk at least (e->out_max: n_seq when larger, up to n_batch) */

/* Soft blend of skills (spec §9, claim 14): a weight where the members
 * bind different matrices runs once per member and the outputs are summed
 * with the weights, y = sum_i w_i (x W_i^T + b); no blended weight is made. */
#define CMF__BLEND_MAX 8
typedef struct cmf__engine_blend {
    int n;                              /* members; 0 = no blend */
    const cmf__model *m[CMF__BLEND_MAX]; /* skill views of one model */
    float w[CMF__BLEND_MAX];            /* >= 0, summing to 1 */
} cmf__engine_blend;

/* A graph built for one shape: token and output counts per group. */
typedef struct cmf__engine_graph {
    int64_t n_tok, n_out;    /* 0 = slot unused */
    int n_grp;
    cmf__engine_group grp[CMF__ENGINE_GROUPS];
    cmf__attn_params *attn;  /* [n_layer][CMF__ENGINE_GROUPS] the attention nodes' descriptors */
    uint64_t used;           /* the engine's graph_clock at its last use */
    cmf__graph g;
} cmf__engine_graph;

#define CMF__ENGINE_GRAPHS 8 /* the least recently used one is rebuilt on a miss */

/* Padding tokens: a chunk of n tokens of one group runs as a graph of
 * cmf__engine_bucket(n) rows, the extra rows being tokens of a hidden
 * sequence (slot n_seq) at positions 0..k-1, k <= CMF__ENGINE_PAD, whose
 * cache holds those positions for good and whose outputs are never read;
 * so a stream of changing batches replays a few graphs. */
#define CMF__ENGINE_PAD 64
int64_t cmf__engine_bucket(int64_t n);

struct cmf__engine {
    const cmf__model *model;      /* the binding of sequences without their own (cmf__engine_set_model) */
    const cmf__model **seq_model; /* [n_seq] a sequence's own binding, NULL = model */
    const cmf__model *root;       /* the model the engine was made with (buffers are sized from it) */
    cmf__backend *be;
    bool owns_be;
    cmf__rope_table *rope;   /* [n_layer]; rot_dims 0 = no rope in this layer */
    int64_t n_ctx, n_batch, n_seq;
    int64_t n_slot;          /* n_seq, + 1 with padding: the hidden sequence's slot n_seq */
    int64_t pad_blocks;      /* paged blocks the hidden sequence holds (0: no padding) */
    int64_t *n_past;         /* [n_slot] positions in each sequence's cache */
    cmf__etype kv_type;
    /* per-layer state and op descriptors (the graph points at these) */
    cmf__buffer *kv_buf, *state_buf, *act_buf, *par_buf, *out_buf;
    size_t state_row;             /* bytes of one sequence's recurrent state (all layers) */
    cmf__ten *k_cache, *v_cache;  /* [n_layer] [n_seq * cap][kv_dim], paged: [kv.n_blocks * block][kv_dim] */
    int64_t *cap;                 /* [n_layer] cache rows per sequence (0: no cache; paged: per_seq * block) */
    bool *paged;                  /* [n_layer] the layer's cache is in blocks (full attention), else a ring per sequence */
    bool kv_paged;                /* some layer is paged: kv is the block pool */
    bool kv_share;                /* every cached layer is paged and none keeps recurrent state: blocks may be shared */
    cmf__kvpool kv;               /* the block pool (kvpage.h) */
    cmf__kv_pages pages;          /* the table in par_buf, for the ops */
    cmf__attn_params *attn;       /* while building: the graph's [n_layer][CMF__ENGINE_GROUPS] */
    int64_t row0;                 /* while building: first chunk row of the group being built */
    int grp;                      /* while building: its group index */
    bool blending;                /* while building: the group runs the blend */
    cmf__engine_blend blend;      /* of the sequences without a binding of their own */
    cmf__model *blend_bind;       /* the blend's binding (e->model while a blend runs): blend.m[0]'s views,
                                   * with blended copies of the 1-D vectors the members differ in */
    float **blend_vecs;           /* [n_blend_vecs] those copies, owned */
    size_t n_blend_vecs;
    cmf__buffer *blend_buf;       /* scratch of the blend's per-member outputs, made by the first blend */
    cmf__ten blend_tmp;           /* [n_batch][widest layer output] */
    cmf__ten blend_head;          /* [out_max][vocab] when a member replaces a tensor outside the layers */
    /* LoRA adapters of every sequence (cmf__engine_set_loras), borrowed */
    int n_lora;
    struct cmf__engine_lora { const struct cmf__lora *lo; float scale; } lora[CMF__LORA_MAX];
    cmf__buffer *lora_buf;
    cmf__ten lora_rank, lora_out, lora_head; /* [n_batch][max rank], [n_batch][widest], [out_max][vocab] */
    void *ops;                    /* [n_layer] extension op descriptors (archs_engine.c) */
    /* activations for n_batch tokens, and the parameter rows */
    cmf__ten x, xn, br, proj, q, k, v, att, gate, f1, f2, ple;
    cmf__ten ids, pos, seq, out_idx; /* I32 [n_batch] each, in par_buf */
    cmf__ten hout, logits;           /* [out_cap] rows: final hidden / logits of the wanted tokens */
    int64_t out_cap;
    int64_t out_max;                 /* logits rows per chunk at most: a chunk ends early beyond it */
    cmf__engine_graph graphs[CMF__ENGINE_GRAPHS];
    uint64_t graph_clock;    /* stamps graphs[i].used */
    uint64_t graph_hits, graph_misses; /* chunks that replayed a cached graph / built one */
    int32_t *h_par;          /* host staging of the parameter rows [4][n_batch] */
    cmf__engine_task task;   /* active task mask (taskmask.c) */
};

cmf__engine_params cmf__engine_params_default(void);
/* Errors: CMF_ERR_UNSUPPORTED (a layer whose operator this build lacks,
 * naming the layer and tensor), CMF_ERR_CONFIG, CMF_ERR_NOMEM (naming
 * what was being allocated), CMF_ERR_BACKEND, CMF_ERR_ARG (bad params). */
cmf_status cmf__engine_new(const cmf__model *m, const cmf__engine_params *p, cmf__engine **out);
void cmf__engine_free(cmf__engine *e);
/* Forgets sequence `seq` (n_past 0, recurrent state zeroed); -1 = all.
 * These two, cmf__engine_invalidate, cmf__engine_blend_release and
 * cmf__engine_widest are state.c's: the state every setter shares, below
 * the files that set bindings and the one that runs the graphs. */
cmf_status cmf__engine_reset_seq(cmf__engine *e, int64_t seq);
void cmf__engine_reset(cmf__engine *e);
/* Drops positions >= n_keep of sequence `seq` (n_keep <= n_past). Only
 * allowed when every sliding ring still holds what the kept prefix needs
 * and no layer keeps recurrent state; CMF_ERR_UNSUPPORTED otherwise (then
 * reset and re-feed). When the paged block holding position n_keep is
 * shared with another sequence, the kept prefix ends at that block's start
 * instead (read n_past after). cmf__engine_truncate is sequence 0. */
cmf_status cmf__engine_truncate_seq(cmf__engine *e, int64_t seq, int64_t n_keep);
cmf_status cmf__engine_truncate(cmf__engine *e, int64_t n_keep);
/* Forgets every graph (after a rebinding of the model's weights). */
void cmf__engine_invalidate(cmf__engine *e);

/* Bindings (blend.c): the engine's, a blend, a sequence's own.
 * Binds the sequences that have no binding of their own to `m`, a skill
 * view of the engine's model (cmf__model_view_new; NULL = the model the
 * engine was made with). Those sequences are reset when the binding
 * changes (their caches were computed under other weights); the others
 * keep theirs. No weight is copied: the graphs are rebuilt over m's views.
 * CMF_ERR_ARG when m is a binding of another model. */
cmf_status cmf__engine_set_model(cmf__engine *e, const cmf__model *m);
/* Runs the sequences without a binding of their own under the blend of
 * n bindings m[i] (skill views of the engine's model) with weights w[i]
 * (>= 0, finite, not all 0; normalised to sum 1 here). n 0: no blend (m[0]
 * of the blend runs alone); n 1: m[0] alone. While a blend runs, e->model
 * is the blend's binding (e->blend_bind: m[0]'s views, the vectors the
 * members differ in blended). The blended sequences are reset when the
 * blend changes. Errors, changing nothing: CMF_ERR_ARG (n outside
 * 0..CMF__BLEND_MAX, a bad weight, another model's binding),
 * CMF_ERR_UNSUPPORTED (members differing in attention sinks, in a vector
 * one has and another lacks, or in a layer whose operator reads its
 * weights itself: MoE, DeltaNet, Gemma-4 per-layer blocks; the message
 * names the layer), CMF_ERR_NOMEM. cmf__engine_set_model ends a blend. */
cmf_status cmf__engine_set_blend(cmf__engine *e, int n, const cmf__model *const *m, const float *w);
/* Adds n LoRA adapters lo[i] (engine/lora.h, read against this engine's
 * model; borrowed, they must outlive their use) with user scales scale[i]
 * beside the projections they target, for every sequence: y = x W^T +
 * sum_i scale[i] * lo[i]->scale * (x A_i^T) B_i^T. n 0 removes them. Every
 * sequence is reset when the set changes. CMF_ERR_ARG (n outside
 * 0..CMF__LORA_MAX, a non-finite scale, a scale that takes a pair past
 * CMF__LORA_GAIN_MAX), CMF_ERR_NOMEM. */
struct cmf__lora;
cmf_status cmf__engine_set_loras(cmf__engine *e, int n, const struct cmf__lora *const *lo, const float *scale);
/* Frees the blend's binding (after e->model stopped pointing at it). */
void cmf__engine_blend_release(cmf__engine *e);
/* Graph building: node nd (a MATMUL or GET_ROWS whose w points into
 * e->model's layer l, or into e->model itself for l = -1) as it is, or,
 * while a blend is being built and its members bind different matrices
 * there, once per member and summed with the blend's weights into nd.dst;
 * then, for a MATMUL, the active LoRA adapters' terms for that weight. */
cmf_status cmf__build_weighted(cmf__engine *e, cmf__graph *g, int64_t l, cmf__node nd);

/* The LoRA terms of MATMUL node nd (engine/lora.c), for cmf__build_weighted. */
cmf_status cmf__build_lora(cmf__engine *e, cmf__graph *g, int64_t l, cmf__node nd);
/* The widest output of any layer matrix of m, in floats (scratch sizing). */
int64_t cmf__engine_widest(const cmf__model *m);

/* Gives sequence `seq` its own binding (NULL = follow cmf__engine_set_model);
 * the sequence is reset when its binding changes. A batch may mix
 * sequences of different bindings: each layer or head where their skills
 * differ runs once per group, the others once for all. CMF_ERR_ARG (slot
 * out of range, another model's binding). */
cmf_status cmf__engine_set_seq_model(cmf__engine *e, int64_t seq, const cmf__model *m);

/* Activates task mask `mask` of the parsed section `ms` (spec §5) for every
 * sequence of the engine; mask NULL = none (ms may then be NULL). Dense
 * FFN rows zero the inactive neurons' activations (as if those down_proj
 * columns were zero), head rows zero the inactive query heads' attention
 * outputs before o_proj, a clear layer gate skips the layer (hidden state
 * unchanged), expert rows narrow MoE routing. FFN rows are not applied to
 * MoE layers (their experts are not intermediate_size wide) nor head rows
 * to LinearAttention layers. Everything is checked before anything
 * changes; a different mask resets every sequence (the caches were
 * computed under the old one), the same mask keeps them. `ms` must outlive
 * the engine's use of the mask. Errors: CMF_ERR_CONFIG (the mask's layer,
 * FFN, head or expert counts disagree with the bound layers it restricts),
 * CMF_ERR_UNSUPPORTED (per-loop FFN rows: the engine runs no layer loops),
 * CMF_ERR_NOMEM. */
cmf_status cmf__engine_set_mask(cmf__engine *e, const cmf__masks *ms, const cmf__mask *mask);

/* Runs a batch (see cmf__batch) in chunks of n_batch tokens. logits: NULL,
 * or [n_wanted][vocab]. Errors, with nothing fed: CMF_ERR_CONTEXT (a
 * sequence would pass n_ctx), CMF_ERR_ARG (token id or sequence slot out
 * of range, empty batch); a backend failure mid-way leaves the sequences
 * with the chunks already fed. */
cmf_status cmf__engine_decode(cmf__engine *e, const cmf__batch *b, float *logits);
/* One sequence (slot 0): feeds n tokens; logits NULL, or [n][vocab] when
 * all_logits, else [vocab] for the last token. */
cmf_status cmf__engine_forward(cmf__engine *e, const int32_t *tokens, int64_t n, float *logits, bool all_logits);
/* KV cache bytes one position of one sequence takes, over all layers. */
int64_t cmf__engine_kv_bytes_per_token(const cmf__engine *e);
/* Bytes of the whole KV cache (blocks, rings). */
int64_t cmf__engine_kv_bytes(const cmf__engine *e);
/* The paged cache's blocks: positions a block holds, blocks in use, all
 * (0, 0, 0 when no layer is paged). */
void cmf__engine_kv_usage(const cmf__engine *e, int64_t *block, int64_t *used, int64_t *total);
/* Blocks that can be taken now (free or cached and unheld); blocks sequence
 * seq must take to hold n more positions. INT64_MAX / 0 when not paged. */
int64_t cmf__engine_kv_avail(const cmf__engine *e);
int64_t cmf__engine_kv_need(const cmf__engine *e, int64_t seq, int64_t n);
/* Prefix sharing (e->kv_share only): sequence seq, empty, takes the cached
 * blocks of keys key[0..n) while all are there; its n_past becomes their
 * positions, which it returns. Publishing registers seq's first n full
 * blocks under key[0..n) for later sequences. A key names what a block
 * holds: its tokens, those before it and the weights they ran under. */
int64_t cmf__engine_kv_attach(cmf__engine *e, int64_t seq, const uint64_t *key, int64_t n);
void cmf__engine_kv_publish(cmf__engine *e, int64_t seq, const uint64_t *key, int64_t n);

/* Graph building (forward.c calls the blocks; each returns a status). */
cmf_status cmf__build_attention(cmf__engine *e, cmf__graph *g, int64_t l, cmf__ten x, cmf__ten out);
cmf_status cmf__build_ffn_dense(cmf__engine *e, cmf__graph *g, int64_t l, cmf__ten x, cmf__ten out);

/* Rotary table of one layer from its config (engine/rope.c). */
cmf_status cmf__rope_build(const cmf__rope_cfg *cfg, int64_t head_dim, double max_pos, cmf__rope_table *out);

#endif
