/* ffn.c — the dense gated feed-forward operator:
 * out = down(act(gate·x + bg) * (up·x + bu)) + bd, with gate and up either
 * separate or fused (gate_up_proj: rows gate, then up, as phi3). The
 * activation comes from the arch block. An active task mask zeroes the
 * activations of its inactive neurons before down_proj. */
#include "engine/engine.h"

#include <string.h>

/* Task mask (spec §5): zero the activations of the neurons whose bit is
 * clear in `keep` — what a zero down_proj column gives. h is [n][stride]. */
static void mask_neurons(float *h, int64_t stride, int64_t n, int64_t F, const uint8_t *keep)
{
    for (int64_t b = 0; b * 8 < F; b++) {
        if (keep[b] == 0xff) continue;
        for (int64_t i = b * 8; i < b * 8 + 8 && i < F; i++)
            if (!(keep[b] >> (i % 8) & 1))
                for (int64_t t = 0; t < n; t++) h[t * stride + i] = 0.0f;
    }
}

static void add_bias(float *y, int64_t stride, int64_t n, const float *b, int64_t dim)
{
    if (!b) return;
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < dim; i++) y[t * stride + i] += b[i];
}

cmf_status cmf__block_ffn_dense(cmf__engine *e, int64_t l, const float *x, float *out, int64_t n)
{
    const cmf__model *m = e->model;
    const cmf__arch *a = &m->arch;
    const cmf__layer_weights *lw = &m->layers[l];
    cmf__backend *be = e->be;
    const int64_t H = a->hidden_size, F = lw->ffn_dim;
    cmf__glu_desc g = {(int)a->act, (float)a->swiglu_alpha, (float)a->swiglu_limit};
    const uint8_t *keep = e->task.mask ? e->task.ffn[l] : NULL; /* NULL: every neuron active */
    if (lw->w_gate_up.present) {
        /* f1 holds [n][2F]: gate then up per token; f2 unused */
        be->ops->matmul(be, &lw->w_gate_up.q, x, H, n, e->f1, 2 * F);
        be->ops->glu(be, e->f1, 2 * F, e->f1 + F, 2 * F, n, F, &g);
        if (keep) mask_neurons(e->f1, 2 * F, n, F, keep);
        be->ops->matmul(be, &lw->w_down.q, e->f1, 2 * F, n, out, H);
    } else {
        be->ops->matmul(be, &lw->w_gate.q, x, H, n, e->f1, F);
        be->ops->matmul(be, &lw->w_up.q, x, H, n, e->f2, F);
        add_bias(e->f1, F, n, lw->b_gate.v, F);
        add_bias(e->f2, F, n, lw->b_up.v, F);
        be->ops->glu(be, e->f1, F, e->f2, F, n, F, &g);
        if (keep) mask_neurons(e->f1, F, n, F, keep);
        be->ops->matmul(be, &lw->w_down.q, e->f1, F, n, out, H);
    }
    add_bias(out, H, n, lw->b_down.v, H);
    return CMF_OK;
}
