/* archs_build.c — the graph nodes of the MoE FFN, the gated DeltaNet mixer
 * and Gemma-4's per-layer inputs, layer tail and V norm, and the
 * per-sequence DeltaNet state they run on. MoE runs expert by expert over
 * a chunk (a routed expert's weights read once per chunk, unrouted ones
 * never), DeltaNet and PLE token by token: chunking and batching never
 * change these operators' results. */
#include "engine/archs_engine.h"
#include "model/ext.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

/* Per-layer op descriptors the nodes point at (e->ops). */
typedef struct archs_ops {
    cmf__gdn_op gdn;
    cmf__ple_tail_op tail;
    size_t state_off;        /* floats into the state buffer (DeltaNet) */
} archs_ops;

static const cmf__layer_ext *ext_of(const cmf__model *m, int64_t l) { return cmf__model_layer_ext(m, l); }
static const cmf__model_ext *model_ext(const cmf__model *m) { return cmf__model_ext_of(m); }

bool cmf__archs_is_moe(const cmf__model *m, int64_t l)
{
    const cmf__layer_ext *A = ext_of(m, l);
    return A && A->moe;
}

cmf_status cmf__archs_engine_init(cmf__engine *e, size_t *state_floats, int64_t *ple_cols)
{
    const cmf__model *m = e->model;
    const int64_t L = m->arch.n_layer;
    *state_floats = 0;
    *ple_cols = 0;
    archs_ops *ops = calloc((size_t)L, sizeof *ops);
    if (!ops) return cmf__error(CMF_ERR_NOMEM, "engine: out of memory for %lld layers' op descriptors", (long long)L);
    e->ops = ops;
    const cmf__model_ext *M = model_ext(m);
    if (M && M->has_ple) *ple_cols = (int64_t)M->ple.n_layers * M->ple.per_layer;
    for (int64_t l = 0; l < L; l++) {
        const cmf__layer_weights *lw = &m->layers[l];
        const cmf__layer_ext *A = ext_of(m, l);
        if (lw->kind == CMF__LAYER_LINEAR) {
            if (!A || !A->gdn)
                return cmf__error(CMF_ERR_CONFIG, "%s: layer %lld: LinearAttention without linear_attn tensors", m->what,
                                  (long long)l);
            ops[l].gdn.dims = A->gd;
            ops[l].gdn.w = A->gw;
            ops[l].state_off = *state_floats;
            *state_floats += cmf__gdn_conv_floats(&A->gd) + cmf__gdn_rec_floats(&A->gd);
        }
        if (lw->has_router && (!A || !A->moe))
            return cmf__error(CMF_ERR_CONFIG, "%s: layer %lld: router present but no experts bound", m->what, (long long)l);
        if (!lw->has_router && !lw->w_down.present)
            return cmf__error(CMF_ERR_CONFIG, "%s: layer %lld: no feed-forward weights", m->what, (long long)l);
        if (A && A->has_g4) {
            ops[l].tail.ple = M ? &M->ple : NULL;
            ops[l].tail.layer = A->g4;
            ops[l].tail.act = (cmf__act_params){(cmf__act)m->arch.act, (float)m->arch.swiglu_alpha,
                                                (float)m->arch.swiglu_limit};
        }
    }
    return CMF_OK;
}

void cmf__archs_place_state(cmf__engine *e)
{
    archs_ops *ops = e->ops;
    for (int64_t l = 0; l < e->model->arch.n_layer; l++) {
        if (e->model->layers[l].kind != CMF__LAYER_LINEAR) continue;
        const cmf__gdn_dims *d = &ops[l].gdn.dims;
        int64_t per = (int64_t)(cmf__gdn_conv_floats(d) + cmf__gdn_rec_floats(d));
        /* row s = sequence s's state of every layer; this layer's part at state_off */
        ops[l].gdn.state = (cmf__ten){e->state_buf, ops[l].state_off * 4, CMF__E_F32, e->n_seq, per, e->state_row, 0};
    }
}

void cmf__archs_rebind(cmf__engine *e)
{
    archs_ops *ops = e->ops;
    for (int64_t l = 0; l < e->model->arch.n_layer; l++) {
        const cmf__layer_ext *A = ext_of(e->model, l);
        if (A && A->gdn) ops[l].gdn.w = A->gw;
        if (A && A->has_g4) ops[l].tail.layer = A->g4;
    }
}

void cmf__archs_engine_free(cmf__engine *e) { free(e->ops); }

cmf_status cmf__archs_build_embed(cmf__engine *e, cmf__graph *g, int64_t n)
{
    const cmf__model_ext *M = model_ext(e->model);
    if (!M || !M->has_ple) return CMF_OK;
    return cmf__graph_add(g, (cmf__node){.op = CMF__OP_PLE, .dst = cmf__ten_rows(e->ple, 0, n), .a = cmf__ten_rows(e->ids, 0, n),
                               .b = cmf__ten_rows(e->x, 0, n), .ext = &M->ple});
}

cmf_status cmf__archs_build_mixer(cmf__engine *e, cmf__graph *g, int64_t l, cmf__ten x, cmf__ten out)
{
    const archs_ops *ops = e->ops;
    return cmf__graph_add(g, (cmf__node){.op = CMF__OP_GDN, .dst = out, .a = x, .b = cmf__ten_rows(e->seq, e->row0, x.rows),
                               .ext = &ops[l].gdn});
}

cmf_status cmf__archs_build_ffn(cmf__engine *e, cmf__graph *g, int64_t l, cmf__ten x, cmf__ten out)
{
    const cmf__layer_ext *A = ext_of(e->model, l);
    return cmf__graph_add(g, (cmf__node){.op = CMF__OP_MOE, .dst = out, .a = x, .ext = &A->ml,
                               .bits = e->task.experts[l]});
}

cmf_status cmf__archs_build_layer_end(cmf__engine *e, cmf__graph *g, int64_t l, int64_t n)
{
    const cmf__layer_ext *A = ext_of(e->model, l);
    if (!A || !A->has_g4) return CMF_OK;
    const archs_ops *ops = e->ops;
    cmf__ten x = cmf__ten_rows(e->x, e->row0, n);
    if (!A->g4.gate) /* only a layer scalar */
        return cmf__graph_add(g, (cmf__node){.op = CMF__OP_SCALE, .dst = x, .a = x, .f = {A->g4.layer_scalar}});
    return cmf__graph_add(g, (cmf__node){.op = CMF__OP_PLE_TAIL, .dst = x, .a = cmf__ten_rows(e->ple, e->row0, n), .ext = &ops[l].tail,
                               .i = {l}});
}

cmf_status cmf__archs_build_vnorm(cmf__engine *e, cmf__graph *g, int64_t l, cmf__ten v)
{
    const cmf__model_ext *M = model_ext(e->model);
    if (!M || !M->v_norm) return CMF_OK;
    return cmf__graph_add(g, (cmf__node){.op = CMF__OP_RMSNORM, .dst = v, .a = v, .f = {(float)e->model->arch.rms_norm_eps},
                               .i = {e->model->layers[l].head_dim, 0}});
}

cmf_status cmf__archs_set_routable(cmf__engine *e, int64_t l, const uint8_t *bits)
{
    const cmf__model *m = e->model;
    if (l < 0 || l >= m->arch.n_layer || !cmf__archs_is_moe(m, l))
        return cmf__error(CMF_ERR_ARG, "%s: layer %lld is not a MoE layer", m->what, (long long)l);
    e->task.experts[l] = bits;
    cmf__engine_invalidate(e);
    return CMF_OK;
}

cmf_status cmf__archs_apply_mask(cmf__engine *e, const cmf__masks *ms, const cmf__mask *mask)
{
    const cmf__model *m = e->model;
    bool rows = mask && mask->experts;
    for (int64_t l = 0; rows && l < m->arch.n_layer; l++) { /* check all before changing any */
        const cmf__layer_ext *A = ext_of(m, l);
        if (A && A->moe && (ms->num_experts != (uint32_t)A->n_expert || (uint32_t)l >= ms->num_layers))
            return cmf__error(CMF_ERR_CONFIG, "%s: mask '%s': %u experts x %u layers, layer %lld has %d experts",
                              m->what, mask->name, ms->num_experts, ms->num_layers, (long long)l, A->n_expert);
    }
    for (int64_t l = 0; l < m->arch.n_layer; l++)
        if (cmf__archs_is_moe(m, l)) e->task.experts[l] = rows ? mask->experts + (uint64_t)l * ms->expert_bytes : NULL;
    cmf__engine_invalidate(e);
    return CMF_OK;
}
