/* attn.c — the attention operator of Full and Sliding layers: q/k/v
 * projections (separate or fused, optional biases, optional per-head output
 * gate), q/k RMS norms (per head or over the whole projection), rotary
 * embedding, the KV cache write, causal (windowed) attention with optional
 * soft-capping and sinks, and o_proj (an active task mask zeroes its
 * inactive heads' outputs first). Which parts run is decided by the
 * bound tensors, never by the model name. */
#include "engine/archs_engine.h"
#include "engine/engine.h"
#include "util/error.h"

#include <math.h>
#include <string.h>

static void add_bias(float *y, int64_t stride, int64_t n, const float *b, int64_t dim)
{
    if (!b) return;
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < dim; i++) y[t * stride + i] += b[i];
}

cmf_status cmf__block_attention(cmf__engine *e, int64_t l, const float *x, float *out, int64_t n)
{
    const cmf__model *m = e->model;
    const cmf__arch *a = &m->arch;
    const cmf__layer_weights *lw = &m->layers[l];
    cmf__backend *be = e->be;
    cmf__kv_layer *kv = &e->kv[l];
    const int64_t H = a->hidden_size, hd = lw->head_dim, qd = lw->q_dim, kvd = lw->kv_dim;
    const float eps = (float)a->rms_norm_eps;
    const bool plus_one = a->norm_style == CMF__NORM_GEMMA;

    /* projections into q [n][qd], k/v [n][kvd] (contiguous) */
    if (lw->wqkv.present) {
        const int64_t w3 = qd + 2 * kvd;
        float *qkv = e->att; /* scratch of max_q_dim >= w3 per token (see model.c) */
        be->ops->matmul(be, &lw->wqkv.q, x, H, n, qkv, w3);
        for (int64_t t = 0; t < n; t++) {
            memcpy(e->q + t * qd, qkv + t * w3, (size_t)qd * sizeof(float));
            memcpy(e->k + t * kvd, qkv + t * w3 + qd, (size_t)kvd * sizeof(float));
            memcpy(e->v + t * kvd, qkv + t * w3 + qd + kvd, (size_t)kvd * sizeof(float));
        }
    } else if (lw->q_gated) {
        /* rows per head: [query head_dim | gate head_dim] */
        be->ops->matmul(be, &lw->wq.q, x, H, n, e->att, 2 * qd);
        add_bias(e->att, 2 * qd, n, lw->bq.v, 2 * qd);
        for (int64_t t = 0; t < n; t++)
            for (int64_t h = 0; h < lw->n_head; h++) {
                memcpy(e->q + t * qd + h * hd, e->att + t * 2 * qd + 2 * h * hd, (size_t)hd * sizeof(float));
                memcpy(e->gate + t * qd + h * hd, e->att + t * 2 * qd + 2 * h * hd + hd, (size_t)hd * sizeof(float));
            }
    } else {
        be->ops->matmul(be, &lw->wq.q, x, H, n, e->q, qd);
        add_bias(e->q, qd, n, lw->bq.v, qd);
    }
    if (!lw->wqkv.present) {
        be->ops->matmul(be, &lw->wk.q, x, H, n, e->k, kvd);
        be->ops->matmul(be, &lw->wv.q, x, H, n, e->v, kvd);
        add_bias(e->k, kvd, n, lw->bk.v, kvd);
        add_bias(e->v, kvd, n, lw->bv.v, kvd);
    }
    if (lw->q_norm.v) {
        if (lw->qk_norm_whole) {
            be->ops->rmsnorm(be, e->q, e->q, n, qd, qd, lw->q_norm.v, eps, plus_one);
            be->ops->rmsnorm(be, e->k, e->k, n, kvd, kvd, lw->k_norm.v, eps, plus_one);
        } else {
            be->ops->rmsnorm(be, e->q, e->q, n * lw->n_head, hd, hd, lw->q_norm.v, eps, plus_one);
            be->ops->rmsnorm(be, e->k, e->k, n * lw->n_head_kv, hd, hd, lw->k_norm.v, eps, plus_one);
        }
    }
    cmf__archs_attn_v(e, l, n); /* arch.v_norm (gemma4) */
    if (e->rope[l].rot_dims > 0) {
        be->ops->rope(be, e->q, n, qd, lw->n_head, hd, e->pos, &e->rope[l]);
        be->ops->rope(be, e->k, n, kvd, lw->n_head_kv, hd, e->pos, &e->rope[l]);
    }
    for (int64_t t = 0; t < n; t++) {
        int64_t slot = e->pos[t] % kv->cap;
        memcpy(kv->k + slot * kvd, e->k + t * kvd, (size_t)kvd * sizeof(float));
        memcpy(kv->v + slot * kvd, e->v + t * kvd, (size_t)kvd * sizeof(float));
    }
    cmf__attn_desc d = {
        .n_tok = n,
        .pos = e->pos,
        .q = e->q,
        .q_stride = qd,
        .k_cache = kv->k,
        .v_cache = kv->v,
        .kv_stride = kvd,
        .cap = kv->cap,
        .n_head = lw->n_head,
        .n_head_kv = lw->n_head_kv,
        .head_dim = hd,
        .window = lw->kind == CMF__LAYER_SLIDING ? a->sliding_window : 0,
        .scale = a->attention_scale > 0 ? (float)a->attention_scale : (float)(1.0 / sqrt((double)hd)),
        .softcap = (float)a->attn_softcap,
        .sinks = lw->sinks.v,
        .out = e->att,
        .out_stride = qd,
    };
    be->ops->attention(be, &d);
    if (lw->q_gated)
        for (int64_t i = 0; i < n * qd; i++) e->att[i] *= 1.0f / (1.0f + expf(-e->gate[i]));
    const uint8_t *heads = e->task.mask ? e->task.heads[l] : NULL; /* task mask (spec §5) */
    for (int64_t h = 0; heads && h < lw->n_head; h++)
        if (!(heads[h / 8] >> (h % 8) & 1))
            for (int64_t t = 0; t < n; t++) memset(e->att + t * qd + h * hd, 0, (size_t)hd * sizeof(float));
    be->ops->matmul(be, &lw->wo.q, e->att, qd, n, out, H);
    add_bias(out, H, n, lw->bo.v, H);
    return CMF_OK;
}
