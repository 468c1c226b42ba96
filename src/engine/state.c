/* state.c — the engine's state that the files setting it share: the
 * graph cache's invalidation, a sequence's reset, the blend's binding
 * released, the widest activation a binding needs. It calls no other file
 * of the engine but the block pool, so the files that change a binding
 * (blend.c, lora.c, taskmask.c, archs_build.c) and the one that runs the
 * graphs (forward.c) all stand on it and none calls back up. */
#include "engine/engine.h"
#include "util/error.h"

#include <stdlib.h>

void cmf__engine_invalidate(cmf__engine *e)
{
    for (int i = 0; i < CMF__ENGINE_GRAPHS; i++) {
        cmf__graph_free(&e->graphs[i].g);
        free(e->graphs[i].attn);
        e->graphs[i].attn = NULL;
        e->graphs[i].n_tok = e->graphs[i].n_out = 0;
        e->graphs[i].n_grp = 0;
        e->graphs[i].used = 0;
    }
}

cmf_status cmf__engine_reset_seq(cmf__engine *e, int64_t seq)
{
    if (seq < -1 || seq >= e->n_seq)
        return cmf__error(CMF_ERR_ARG, "reset: sequence %lld outside [0, %lld)", (long long)seq, (long long)e->n_seq);
    int64_t s0 = seq < 0 ? 0 : seq, s1 = seq < 0 ? e->n_seq : seq + 1;
    for (int64_t s = s0; s < s1; s++) {
        e->n_past[s] = 0;
        if (e->kv_paged) cmf__kvpool_shrink(&e->kv, s, 0);
    }
    if (!e->state_buf) return CMF_OK;
    /* a sequence's recurrent state is one row of the state buffer */
    return e->be->ops->clear(e->be, e->state_buf, (size_t)s0 * e->state_row, (size_t)(s1 - s0) * e->state_row);
}

void cmf__engine_reset(cmf__engine *e) { (void)cmf__engine_reset_seq(e, -1); }

void cmf__engine_blend_release(cmf__engine *e)
{
    for (size_t i = 0; i < e->n_blend_vecs; i++) free(e->blend_vecs[i]);
    free(e->blend_vecs);
    e->blend_vecs = NULL;
    e->n_blend_vecs = 0;
    if (e->blend_bind) free(e->blend_bind->layers);
    free(e->blend_bind);
    e->blend_bind = NULL;
}

int64_t cmf__engine_widest(const cmf__model *m)
{
    int64_t c = m->arch.hidden_size;
    for (int64_t l = 0; l < m->arch.n_layer; l++) {
        const cmf__layer_weights *lw = &m->layers[l];
        int64_t p = lw->wqkv.present ? lw->q_dim + 2 * lw->kv_dim : lw->q_gated ? 2 * lw->q_dim : lw->q_dim;
        int64_t f = lw->w_gate_up.present ? 2 * lw->ffn_dim : lw->ffn_dim;
        c = p > c ? p : c;
        c = f > c ? f : c;
    }
    return c;
}
