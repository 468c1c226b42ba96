/* ext.h — binding of the extension operators' tensors (MoE FFN, gated
 * DeltaNet mixer, Gemma-4 per-layer inputs / layer scalar / V norm) into the
 * descriptors of compute/{moe,deltanet,gemma4}.h. The model owns the result
 * (cmf__layer_weights.ext); the engine reads these structs and never binds.
 * Every dimension comes from the parsed arch (model/arch.h) and is checked
 * against the tensors before a descriptor is filled. */
#ifndef CMF_MODEL_EXT_H
#define CMF_MODEL_EXT_H

#include "compute/deltanet.h"
#include "compute/gemma4.h"
#include "compute/moe.h"
#include "model/model.h"

/* Model-level extension data (held by layer 0's ext, shared by the rest). */
typedef struct cmf__model_ext {
    bool v_norm;                 /* arch.v_norm */
    bool has_ple;                /* per-layer inputs bound (arch.hidden_size_per_layer_input > 0) */
    cmf__wmat embed_pl, model_proj;
    cmf__wvec proj_norm;
    cmf__gemma4_ple ple;
} cmf__model_ext;

/* One layer's bound extension tensors. */
typedef struct cmf__layer_ext {
    cmf__model_ext *mdl; /* owned by layer 0 only (owns_mdl) */
    bool owns_mdl;
    /* MoE */
    bool moe;
    cmf__wmat router, sh_gate, sh_up, sh_down, sh_gate_w;
    cmf__wvec router_bias, expert_bias;
    int n_expert;
    cmf__wmat *ew;            /* [n_expert][3]: gate, up, down */
    cmf__wvec *eb;            /* [n_expert][3]: biases */
    cmf__moe_expert *experts; /* [n_expert] */
    cmf__moe_expert shared;
    cmf__moe_layer ml;
    /* gated DeltaNet */
    bool gdn;
    cmf__gdn_dims gd;
    cmf__wmat in_qkvz, in_ba, out_proj;
    cmf__wvec conv_w, A_log, dt_bias, norm_w;
    cmf__gdn_weights gw;
    /* Gemma-4 per-layer block */
    bool has_g4;
    cmf__wmat pl_gate, pl_proj;
    cmf__wvec pl_post;
    cmf__gemma4_layer g4;
} cmf__layer_ext;

/* model.c bind_layer: binds layer i's extension tensors (router and
 * experts when L->has_router, linear_attn.* for LinearAttention layers,
 * Gemma-4 per-layer input block and layer_scalar) and, for i == 0, the
 * model-level ones (per-layer embeddings, arch.v_norm). Sets L->ext to a
 * cmf__layer_ext (and L->ext_free), or leaves it NULL for a plain layer.
 * Errors name the file, layer and tensor: CMF_ERR_CONFIG, CMF_ERR_NOMEM,
 * CMF_ERR_UNSUPPORTED. */
cmf_status cmf__model_ext_bind_layer(const cmf__model *m, int64_t i, cmf__layer_weights *L);

/* Layer i's extension data; NULL for a plain layer. */
static inline const cmf__layer_ext *cmf__model_layer_ext(const cmf__model *m, int64_t i)
{
    return m->layers ? (const cmf__layer_ext *)m->layers[i].ext : NULL;
}

/* The model-level extension data; NULL when the model has none. */
const cmf__model_ext *cmf__model_ext_of(const cmf__model *m);

#endif
