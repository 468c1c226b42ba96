/* attn.c — the graph of the attention operator of Full and Sliding layers:
 * q/k/v projections (separate or fused, optional biases, optional per-head
 * output gate), q/k RMS norms (per head or over the whole projection),
 * rotary embedding, the KV cache write, causal (windowed) attention with
 * optional soft-capping and sinks, and o_proj (an active task mask zeroes
 * its inactive heads' outputs first). Which parts run is decided by the
 * bound tensors, never by the model name. */
#include "engine/archs_engine.h"
#include "engine/engine.h"
#include "util/error.h"

#include <math.h>

static cmf_status matmul(cmf__engine *e, cmf__graph *g, int64_t l, cmf__ten x, const cmf__wmat *w, const cmf__wvec *b,
                         cmf__ten y)
{
    return cmf__build_weighted(e, g, l, (cmf__node){.op = CMF__OP_MATMUL, .dst = y, .a = x, .w = &w->q, .v = b ? b->v : NULL});
}

static cmf_status norm(cmf__engine *e, cmf__graph *g, cmf__ten x, const float *w, int64_t group)
{
    const cmf__arch *a = &e->model->arch;
    return cmf__graph_add(g, (cmf__node){.op = CMF__OP_RMSNORM, .dst = x, .a = x, .v = w, .f = {(float)a->rms_norm_eps},
                               .i = {group, a->norm_style == CMF__NORM_GEMMA}});
}

/* Rows of `heads` heads of hd values inside x, one head per row. */
static cmf__ten per_head(cmf__ten x, int64_t heads, int64_t hd, int64_t pitch_floats)
{
    cmf__ten h = x;
    h.rows = x.rows * heads;
    h.cols = hd;
    h.nb = (size_t)pitch_floats * 4;
    return h;
}

cmf_status cmf__build_attention(cmf__engine *e, cmf__graph *g, int64_t l, cmf__ten x, cmf__ten out)
{
    const cmf__model *m = e->model;
    const cmf__arch *a = &m->arch;
    const cmf__layer_weights *lw = &m->layers[l];
    const int64_t n = x.rows, hd = lw->head_dim, qd = lw->q_dim, kvd = lw->kv_dim;
    cmf__ten q = cmf__ten_make(e->q.buf, e->q.off, CMF__E_F32, n, qd), k = cmf__ten_make(e->k.buf, e->k.off, CMF__E_F32, n, kvd),
             v = cmf__ten_make(e->v.buf, e->v.off, CMF__E_F32, n, kvd),
             att = cmf__ten_make(e->att.buf, e->att.off, CMF__E_F32, n, qd),
             gate = cmf__ten_make(e->gate.buf, e->gate.off, CMF__E_F32, n, qd);
    cmf_status st;
    /* projections */
    if (lw->wqkv.present) { /* fused rows q, k, v: views into one product */
        const int64_t w3 = qd + 2 * kvd;
        cmf__ten qkv = cmf__ten_make(e->proj.buf, e->proj.off, CMF__E_F32, n, w3);
        if ((st = matmul(e, g, l, x, &lw->wqkv, NULL, qkv))) return st;
        q = cmf__ten_cols(qkv, 0, qd);
        k = cmf__ten_cols(qkv, qd, kvd);
        v = cmf__ten_cols(qkv, qd + kvd, kvd);
    } else if (lw->q_gated) {
        /* rows per head: [query head_dim | gate head_dim], split by two strided copies */
        cmf__ten qg = cmf__ten_make(e->proj.buf, e->proj.off, CMF__E_F32, n, 2 * qd);
        if ((st = matmul(e, g, l, x, &lw->wq, &lw->bq, qg)) ||
            (st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_SCALE, .dst = per_head(q, lw->n_head, hd, hd),
                                      .a = per_head(qg, lw->n_head, hd, 2 * hd), .f = {1.0f}})) ||
            (st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_SCALE, .dst = per_head(gate, lw->n_head, hd, hd),
                                      .a = per_head(cmf__ten_cols(qg, hd, 2 * qd - hd), lw->n_head, hd, 2 * hd),
                                      .f = {1.0f}})))
            return st;
    } else if ((st = matmul(e, g, l, x, &lw->wq, &lw->bq, q))) {
        return st;
    }
    if (!lw->wqkv.present && ((st = matmul(e, g, l, x, &lw->wk, &lw->bk, k)) || (st = matmul(e, g, l, x, &lw->wv, &lw->bv, v))))
        return st;
    if (lw->q_norm.v && ((st = norm(e, g, q, lw->q_norm.v, lw->qk_norm_whole ? qd : hd)) ||
                         (st = norm(e, g, k, lw->k_norm.v, lw->qk_norm_whole ? kvd : hd))))
        return st;
    if ((st = cmf__archs_build_vnorm(e, g, l, v))) return st; /* arch.v_norm (gemma4) */
    cmf__ten pos = cmf__ten_rows(e->pos, e->row0, n), seq = cmf__ten_rows(e->seq, e->row0, n);
    if (e->rope[l].rot_dims > 0 &&
        ((st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_ROPE, .dst = q, .b = pos, .ext = &e->rope[l], .i = {lw->n_head, hd}})) ||
         (st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_ROPE, .dst = k, .b = pos, .ext = &e->rope[l], .i = {lw->n_head_kv, hd}}))))
        return st;
    const cmf__kv_pages *pages = e->paged[l] ? &e->pages : NULL;
    if ((st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_KV_WRITE, .dst = e->k_cache[l], .a = k, .b = pos, .c = seq,
                                  .ext = pages, .i = {e->cap[l]}})) ||
        (st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_KV_WRITE, .dst = e->v_cache[l], .a = v, .b = pos, .c = seq,
                                  .ext = pages, .i = {e->cap[l]}})))
        return st;
    cmf__attn_params *ap = &e->attn[l * CMF__ENGINE_GROUPS + e->grp]; /* the graph's, one per group */
    *ap = (cmf__attn_params){
        .k_cache = e->k_cache[l],
        .v_cache = e->v_cache[l],
        .cap = e->cap[l],
        .n_head = lw->n_head,
        .n_head_kv = lw->n_head_kv,
        .head_dim = hd,
        .window = lw->kind == CMF__LAYER_SLIDING ? a->sliding_window : 0,
        .scale = a->attention_scale > 0 ? (float)a->attention_scale : (float)(1.0 / sqrt((double)hd)),
        .softcap = (float)a->attn_softcap,
        .sinks = lw->sinks.v,
        .pages = pages,
    };
    if ((st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_ATTN, .dst = att, .a = q, .b = pos, .c = seq, .ext = ap})))
        return st;
    if (lw->q_gated && (st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_SIGMOID_MUL, .dst = att, .a = att, .b = gate})))
        return st;
    const uint8_t *heads = e->task.mask ? e->task.heads[l] : NULL; /* task mask (spec §5) */
    if (heads && (st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_MASK, .dst = att, .bits = heads, .i = {hd}}))) return st;
    return matmul(e, g, l, att, &lw->wo, &lw->bo, out);
}
