/* archs_engine.h — how the MoE, gated DeltaNet and Gemma-4 operators plug
 * into the graph: one hook each, a no-op for a dense layer. Bound tensors
 * live in cmf__layer_weights.ext (model/ext.h, bound by model/ext.c; layer
 * 0's also holds the model-level ones); per-sequence recurrent state lives
 * in the engine's state buffer. */
#ifndef CMF_ENGINE_ARCHS_ENGINE_H
#define CMF_ENGINE_ARCHS_ENGINE_H

#include "engine/engine.h"
#include "format/format.h"

/* engine_new: checks every layer's operator exists, sizes the extension
 * state (DeltaNet: floats per sequence per layer, summed into *state_floats)
 * and the PLE activation width (*ple_cols, 0 = none), and allocates the
 * op descriptors (e->ops). The state tensors are placed by
 * cmf__archs_place_state once the buffer exists. */
cmf_status cmf__archs_engine_init(cmf__engine *e, size_t *state_floats, int64_t *ple_cols);
void cmf__archs_place_state(cmf__engine *e);
/* After e->model changed: the op descriptors read the new binding's
 * DeltaNet and Gemma-4 layer weights (the state stays where it is). */
void cmf__archs_rebind(cmf__engine *e);
void cmf__archs_engine_free(cmf__engine *e);

/* Graph pieces; n = rows of the tensors given. */
/* After the scaled embeddings of the chunk are in e->x: the per-layer inputs (gemma4). */
cmf_status cmf__archs_build_embed(cmf__engine *e, cmf__graph *g, int64_t n);
/* The LinearAttention mixer (gated DeltaNet) of layer l. */
cmf_status cmf__archs_build_mixer(cmf__engine *e, cmf__graph *g, int64_t l, cmf__ten x, cmf__ten out);
/* The MoE FFN of layer l. */
cmf_status cmf__archs_build_ffn(cmf__engine *e, cmf__graph *g, int64_t l, cmf__ten x, cmf__ten out);
/* After layer l's FFN residual: per-layer input block and layer_scalar on e->x. */
cmf_status cmf__archs_build_layer_end(cmf__engine *e, cmf__graph *g, int64_t l, int64_t n);
/* Before the KV write: arch.v_norm (scale-less RMS norm of each value head of v). */
cmf_status cmf__archs_build_vnorm(cmf__engine *e, cmf__graph *g, int64_t l, cmf__ten v);
bool cmf__archs_is_moe(const cmf__model *m, int64_t l);

/* Task-mask routing (spec §5): restricts layer l's experts to the LSB-first
 * bitset `bits` (NULL = all) for every sequence of the engine. The bits
 * are borrowed and must outlive their use. CMF_ERR_ARG when layer l is not
 * a MoE layer. */
cmf_status cmf__archs_set_routable(cmf__engine *e, int64_t l, const uint8_t *bits);

/* Activates a task mask's expert rows (spec §5): each MoE layer l routes
 * over mask->experts row l; a mask without the expert area (or NULL)
 * restricts nothing. The rows are borrowed from `ms` (the file's parsed
 * masks), which must outlive the engine's use of them. CMF_ERR_CONFIG when
 * the mask's expert count differs from a layer's; nothing changes then. */
cmf_status cmf__archs_apply_mask(cmf__engine *e, const cmf__masks *ms, const cmf__mask *mask);

#endif
