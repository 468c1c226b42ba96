/* archs_engine.h — how the MoE, gated DeltaNet and Gemma-4 operators plug
 * into binding and forward: one hook each, called from model.c, blocks.c,
 * forward.c and attn.c, a no-op for a dense layer. Bound tensors live in
 * cmf__layer_weights.ext (layer 0's also holds the model-level ones),
 * recurrent state in cmf__kv_layer.ext. */
#ifndef CMF_ENGINE_ARCHS_ENGINE_H
#define CMF_ENGINE_ARCHS_ENGINE_H

#include "engine/engine.h"
#include "format/format.h"

/* model.c bind_layer: binds layer i's extension tensors (router and
 * experts when mlp.gate.weight exists, linear_attn.* for LinearAttention
 * layers, Gemma-4 per-layer input block and layer_scalar) and, for i == 0,
 * the model-level ones (per-layer embeddings, arch.v_norm). Errors name
 * the file, layer and tensor: CMF_ERR_CONFIG, CMF_ERR_NOMEM. */
cmf_status cmf__archs_bind_layer(const cmf__model *m, int64_t i, cmf__layer_weights *L);

/* blocks.c: the LinearAttention mixer and the MoE FFN of layer l. */
cmf_status cmf__archs_resolve_mixer(cmf__engine *e, int64_t l, cmf__layer_ops *op);
cmf_status cmf__archs_resolve_ffn(cmf__engine *e, int64_t l, cmf__layer_ops *op);

/* forward.c, after the (scaled) embeddings of n tokens are in e->x: the
 * per-layer inputs of those tokens. CMF_ERR_BOUNDS for a token outside the
 * per-layer embedding. */
cmf_status cmf__archs_embed(cmf__engine *e, const int32_t *tok, int64_t n);
/* forward.c, after layer l's FFN residual: per-layer input block and
 * layer_scalar on e->x. */
void cmf__archs_layer_end(cmf__engine *e, int64_t l, int64_t n);
/* attn.c, before the KV write: arch.v_norm (scale-less RMS norm of each
 * value head of e->v). */
void cmf__archs_attn_v(cmf__engine *e, int64_t l, int64_t n);

/* Task-mask routing (spec §5) for this sequence: restricts layer l's experts to the
 * LSB-first bitset `bits` (NULL = all). The bits are borrowed and must
 * outlive their use. CMF_ERR_ARG when layer l is not a MoE layer. */
cmf_status cmf__archs_set_routable(cmf__engine *e, int64_t l, const uint8_t *bits);

/* Activates a task mask's expert rows (spec §5) for this sequence: each MoE
 * layer l routes over mask->experts row l; a mask without the expert area
 * (or NULL) restricts nothing. The rows are borrowed from `ms` (the file's
 * parsed masks), which must outlive the engine's use of them.
 * CMF_ERR_CONFIG when the mask's expert count differs from a layer's. */
cmf_status cmf__archs_apply_mask(cmf__engine *e, const cmf__masks *ms, const cmf__mask *mask);

#endif
