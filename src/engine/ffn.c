/* ffn.c — the graph of the dense gated feed-forward operator:
 * out = down(act(gate·x + bg) * (up·x + bu)) + bd, with gate and up either
 * separate or fused (gate_up_proj: rows gate, then up, as phi3). The
 * activation comes from the arch block. An active task mask zeroes the
 * activations of its inactive neurons before down_proj. */
#include "engine/engine.h"

cmf_status cmf__build_ffn_dense(cmf__engine *e, cmf__graph *g, int64_t l, cmf__ten x, cmf__ten out)
{
    const cmf__model *m = e->model;
    const cmf__arch *a = &m->arch;
    const cmf__layer_weights *lw = &m->layers[l];
    const int64_t n = x.rows, F = lw->ffn_dim;
    const uint8_t *keep = e->task.mask ? e->task.ffn[l] : NULL; /* NULL: every neuron active */
    cmf__ten gate, up;
    cmf_status st;
    if (lw->w_gate_up.present) { /* one product [n][2F]: gate then up per token */
        cmf__ten gu = cmf__ten_make(e->f1.buf, e->f1.off, CMF__E_F32, n, 2 * F);
        if ((st = cmf__build_weighted(e, g, l, (cmf__node){.op = CMF__OP_MATMUL, .dst = gu, .a = x, .w = &lw->w_gate_up.q}))) return st;
        gate = cmf__ten_cols(gu, 0, F);
        up = cmf__ten_cols(gu, F, F);
    } else {
        gate = cmf__ten_make(e->f1.buf, e->f1.off, CMF__E_F32, n, F);
        up = cmf__ten_make(e->f2.buf, e->f2.off, CMF__E_F32, n, F);
        if ((st = cmf__build_weighted(e, g, l, (cmf__node){.op = CMF__OP_MATMUL, .dst = gate, .a = x, .w = &lw->w_gate.q, .v = lw->b_gate.v})) ||
            (st = cmf__build_weighted(e, g, l, (cmf__node){.op = CMF__OP_MATMUL, .dst = up, .a = x, .w = &lw->w_up.q, .v = lw->b_up.v})))
            return st;
    }
    if ((st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_GLU, .dst = gate, .a = gate, .b = up, .i = {(int64_t)a->act},
                                  .f = {(float)a->swiglu_alpha, (float)a->swiglu_limit}})) ||
        (keep && (st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_MASK, .dst = gate, .bits = keep, .i = {1}}))))
        return st;
    return cmf__build_weighted(e, g, l, (cmf__node){.op = CMF__OP_MATMUL, .dst = out, .a = gate, .w = &lw->w_down.q, .v = lw->b_down.v});
}
