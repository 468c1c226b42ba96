/* archs_ext.h — the bound extension tensors of a layer (MoE router and
 * experts, gated DeltaNet projections, Gemma-4 per-layer block) and of the
 * model (per-layer embeddings, V norm), filled by cmf__archs_bind_layer and
 * read by the graph builder (archs_build.c). Layer 0's ext also owns the
 * model-level part. */
#ifndef CMF_ENGINE_ARCHS_EXT_H
#define CMF_ENGINE_ARCHS_EXT_H

#include "compute/deltanet.h"
#include "compute/gemma4.h"
#include "compute/moe.h"
#include "model/model.h"

/* Model-level extension data (held by layer 0's ext). */
typedef struct archs_model {
    bool v_norm;
    bool has_ple;
    cmf__wmat embed_pl, model_proj;
    cmf__wvec proj_norm;
    cmf__gemma4_ple ple;
} archs_model;

/* One layer's bound extension tensors. */
typedef struct archs_layer {
    archs_model *mdl; /* owned by layer 0 only (owns_mdl) */
    bool owns_mdl;
    /* MoE */
    bool moe;
    cmf__wmat router, sh_gate, sh_up, sh_down, sh_gate_w;
    cmf__wvec router_bias, expert_bias;
    int n_expert;
    cmf__wmat *ew;           /* [n_expert][3]: gate, up, down */
    cmf__wvec *eb;           /* [n_expert][3]: biases */
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
} archs_layer;

#endif
