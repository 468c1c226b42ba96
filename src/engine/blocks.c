/* blocks.c — picks each layer's operators from what was bound: the layer
 * kind chooses the token mixer, the presence of a router chooses the FFN.
 * This is the one place extensions plug in: a MoE FFN, a linear-attention
 * mixer, per-layer inputs each add a case here and their own file. A layer
 * whose operator this build lacks fails with the layer and the reason. */
#include "engine/archs_engine.h"
#include "engine/engine.h"
#include "util/error.h"

cmf_status cmf__blocks_resolve(cmf__engine *e, int64_t l)
{
    const cmf__model *m = e->model;
    const cmf__layer_weights *lw = &m->layers[l];
    cmf__layer_ops *op = &e->ops[l];
    switch (lw->kind) {
    case CMF__LAYER_FULL:
    case CMF__LAYER_SLIDING: op->mixer = cmf__block_attention; break;
    case CMF__LAYER_LINEAR: {
        cmf_status st = cmf__archs_resolve_mixer(e, l, op); /* gated DeltaNet (engine/archs_engine.c) */
        if (st) return st;
        break;
    }
    }
    if (lw->has_router) return cmf__archs_resolve_ffn(e, l, op); /* MoE (engine/archs_engine.c) */
    if (!lw->w_down.present)
        return cmf__error(CMF_ERR_CONFIG, "%s: layer %lld: no feed-forward weights", m->what, (long long)l);
    op->ffn = cmf__block_ffn_dense;
    return CMF_OK;
}
