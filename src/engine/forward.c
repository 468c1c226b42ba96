/* forward.c — one sequence's forward pass: embedding, the per-layer
 * residual wiring of the three norm placements around the layer's mixer
 * and FFN operators, the final norm and the output head (scaling and
 * soft-capping). Prompts are fed in chunks of n_batch tokens; a chunk and
 * the same tokens one by one give the same cache and the same logits. */
#include "engine/archs_engine.h"
#include "engine/engine.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

cmf__engine_params cmf__engine_params_default(void)
{
    cmf__engine_params p = {0, 256, 0, false};
    return p;
}

static void *xalloc(size_t n_floats) { return calloc(n_floats ? n_floats : 1, sizeof(float)); }

void cmf__engine_free(cmf__engine *e)
{
    if (!e) return;
    const cmf__arch *a = &e->model->arch;
    if (e->kv)
        for (int64_t i = 0; i < a->n_layer; i++) {
            free(e->kv[i].k);
            free(e->kv[i].v);
            if (e->kv[i].ext && e->kv[i].ext_free) e->kv[i].ext_free(e->kv[i].ext);
        }
    if (e->rope)
        for (int64_t i = 0; i < a->n_layer; i++) free(e->rope[i].inv_freq);
    free(e->kv);
    free(e->rope);
    free(e->ops);
    free(e->pos);
    free(e->x);
    free(e->xn);
    free(e->br);
    free(e->q);
    free(e->k);
    free(e->v);
    free(e->att);
    free(e->gate);
    free(e->f1);
    free(e->f2);
    free(e->ext_scratch);
    free(e->task.ffn); /* the task mask's one block */
    cmf__backend_free(e->be);
    free(e);
}

cmf_status cmf__engine_new(const cmf__model *m, const cmf__engine_params *pp, cmf__engine **out)
{
    *out = NULL;
    cmf__engine_params p = pp ? *pp : cmf__engine_params_default();
    const cmf__arch *a = &m->arch;
    cmf__engine *e = calloc(1, sizeof *e);
    if (!e) return cmf__error(CMF_ERR_NOMEM, "engine: out of memory");
    e->model = m;
    e->n_ctx = p.n_ctx > 0 && p.n_ctx < a->max_pos ? p.n_ctx : a->max_pos;
    e->n_batch = p.n_batch > 0 ? p.n_batch : 256;
    if (e->n_batch > e->n_ctx) e->n_batch = e->n_ctx;
    cmf_status st = CMF_OK;
    e->be = cmf__cpu_backend_new(p.n_threads, p.reference);
    if (!e->be) {
        free(e);
        return CMF_ERR_BACKEND;
    }
    const int64_t L = a->n_layer, H = a->hidden_size, B = e->n_batch;
    e->ops = calloc((size_t)L, sizeof *e->ops);
    e->kv = calloc((size_t)L, sizeof *e->kv);
    e->rope = calloc((size_t)L, sizeof *e->rope);
    e->pos = calloc((size_t)B, sizeof *e->pos);
    e->x = xalloc((size_t)(B * H));
    e->xn = xalloc((size_t)(B * H));
    e->br = xalloc((size_t)(B * H));
    e->q = xalloc((size_t)(B * m->max_q_dim));
    e->k = xalloc((size_t)(B * m->max_kv_dim));
    e->v = xalloc((size_t)(B * m->max_kv_dim));
    e->att = xalloc((size_t)(B * m->max_q_dim));
    e->gate = xalloc((size_t)(B * m->max_q_dim));
    e->f1 = xalloc((size_t)(B * m->max_ffn_dim));
    e->f2 = xalloc((size_t)(B * m->max_ffn_dim));
    if (!e->ops || !e->kv || !e->rope || !e->pos || !e->x || !e->xn || !e->br || !e->q || !e->k || !e->v ||
        !e->att || !e->gate || !e->f1 || !e->f2) {
        st = cmf__error(CMF_ERR_NOMEM, "engine: out of memory");
        goto fail;
    }
    int64_t max_span = 1;
    for (int64_t i = 0; i < L; i++) {
        const cmf__layer_weights *lw = &m->layers[i];
        cmf__kv_layer *kv = &e->kv[i];
        if (lw->kind != CMF__LAYER_LINEAR) {
            kv->kv_dim = lw->kv_dim;
            kv->cap = e->n_ctx;
            if (lw->kind == CMF__LAYER_SLIDING && a->sliding_window + e->n_batch - 1 < kv->cap)
                kv->cap = a->sliding_window + e->n_batch - 1;
            if (kv->cap > max_span) max_span = kv->cap;
            kv->k = xalloc((size_t)(kv->cap * kv->kv_dim));
            kv->v = xalloc((size_t)(kv->cap * kv->kv_dim));
            if (!kv->k || !kv->v) {
                st = cmf__error(CMF_ERR_NOMEM, "engine: out of memory for the KV cache (%lld positions)",
                                (long long)kv->cap);
                goto fail;
            }
            if (a->layer_rope[i]) {
                const cmf__rope_cfg *rc = lw->kind == CMF__LAYER_SLIDING ? &a->rope_local : &a->rope_full;
                if ((st = cmf__rope_build(rc, lw->head_dim, (double)a->max_pos, &e->rope[i]))) goto fail;
            }
        }
        if ((st = cmf__blocks_resolve(e, i))) goto fail;
    }
    if ((st = e->be->ops->reserve(e->be, m->max_cols, max_span))) goto fail;
    *out = e;
    return CMF_OK;
fail:
    cmf__engine_free(e);
    return st;
}

void cmf__engine_reset(cmf__engine *e)
{
    e->n_past = 0;
    for (int64_t i = 0; i < e->model->arch.n_layer; i++)
        if (e->kv[i].ext && e->kv[i].ext_reset) e->kv[i].ext_reset(e->kv[i].ext);
}

cmf_status cmf__engine_truncate(cmf__engine *e, int64_t n_keep)
{
    if (n_keep < 0 || n_keep > e->n_past)
        return cmf__error(CMF_ERR_ARG, "truncate: %lld is outside [0, %lld]", (long long)n_keep, (long long)e->n_past);
    if (n_keep == e->n_past) return CMF_OK;
    if (n_keep == 0) {
        cmf__engine_reset(e);
        return CMF_OK;
    }
    const cmf__arch *a = &e->model->arch;
    for (int64_t i = 0; i < a->n_layer; i++) {
        const cmf__kv_layer *kv = &e->kv[i];
        if (kv->ext)
            return cmf__error(CMF_ERR_UNSUPPORTED, "truncate: layer %lld keeps recurrent state", (long long)i);
        /* a ring has overwritten positions < n_past - cap; the kept prefix's
         * next query needs positions >= n_keep - window + 1 */
        if (kv->k && kv->cap < e->n_ctx && e->n_past - kv->cap > n_keep - a->sliding_window)
            return cmf__error(CMF_ERR_UNSUPPORTED, "truncate: sliding layer %lld no longer holds the window",
                              (long long)i);
    }
    e->n_past = n_keep;
    return CMF_OK;
}

static void add_scaled(float *x, const float *b, int64_t n, float s)
{
    if (s == 1.0f)
        for (int64_t i = 0; i < n; i++) x[i] += b[i];
    else
        for (int64_t i = 0; i < n; i++) x[i] += b[i] * s;
}

static cmf_status forward_chunk(cmf__engine *e, const int32_t *tok, int64_t n, float *logits, bool all_logits)
{
    const cmf__model *m = e->model;
    const cmf__arch *a = &m->arch;
    const int64_t H = a->hidden_size;
    cmf__backend *be = e->be;
    const float eps = (float)a->rms_norm_eps;
    const bool plus_one = a->norm_style == CMF__NORM_GEMMA;
    const float emb = (float)a->embedding_multiplier, rm = (float)a->residual_multiplier;
    cmf_status st;

    for (int64_t t = 0; t < n; t++) {
        e->pos[t] = (int32_t)(e->n_past + t);
        cmf__qmat_decode_row(&m->embed.q, tok[t], e->x + t * H);
        if (emb != 1.0f)
            for (int64_t i = 0; i < H; i++) e->x[t * H + i] *= emb;
    }
    if ((st = cmf__archs_embed(e, tok, n))) return st; /* per-layer inputs (gemma4) */
    for (int64_t l = 0; l < a->n_layer; l++) {
        const cmf__layer_weights *lw = &m->layers[l];
        const cmf__layer_ops *op = &e->ops[l];
        if (e->task.mask && e->task.skip[l]) continue; /* layer gate clear (spec §5): x passes unchanged */
        /* token mixer */
        const float *in = e->x;
        if (lw->attn_in_norm.v) {
            be->ops->rmsnorm(be, e->x, e->xn, n, H, H, lw->attn_in_norm.v, eps, plus_one);
            in = e->xn;
        }
        if ((st = op->mixer(e, l, in, e->br, n))) return st;
        if (lw->attn_out_norm.v) be->ops->rmsnorm(be, e->br, e->br, n, H, H, lw->attn_out_norm.v, eps, plus_one);
        add_scaled(e->x, e->br, n * H, rm);
        /* feed-forward */
        in = e->x;
        if (lw->ffn_in_norm.v) {
            be->ops->rmsnorm(be, e->x, e->xn, n, H, H, lw->ffn_in_norm.v, eps, plus_one);
            in = e->xn;
        }
        if ((st = op->ffn(e, l, in, e->br, n))) return st;
        if (lw->ffn_out_norm.v) be->ops->rmsnorm(be, e->br, e->br, n, H, H, lw->ffn_out_norm.v, eps, plus_one);
        add_scaled(e->x, e->br, n * H, rm);
        cmf__archs_layer_end(e, l, n); /* per-layer input block, layer_scalar (gemma4) */
    }
    e->n_past += n;
    if (!logits) return CMF_OK;
    int64_t first = all_logits ? 0 : n - 1, cnt = n - first;
    be->ops->rmsnorm(be, e->x + first * H, e->xn, cnt, H, H, m->final_norm.v, eps, plus_one);
    const int64_t V = a->vocab_size;
    be->ops->matmul(be, &m->lm_head.q, e->xn, H, cnt, logits, V);
    float inv_scale = (float)(1.0 / a->logits_scaling), cap = (float)a->final_softcap;
    if (inv_scale != 1.0f || cap > 0)
        for (int64_t i = 0; i < cnt * V; i++) {
            float v = logits[i];
            if (a->logits_scaling != 1.0) v = v / (float)a->logits_scaling;
            if (cap > 0) v = cap * tanhf(v / cap);
            logits[i] = v;
        }
    return CMF_OK;
}

cmf_status cmf__engine_forward(cmf__engine *e, const int32_t *tokens, int64_t n, float *logits, bool all_logits)
{
    if (n <= 0) return cmf__error(CMF_ERR_ARG, "forward: no tokens");
    if (e->n_past + n > e->n_ctx)
        return cmf__error(CMF_ERR_CONTEXT, "context full: %lld tokens in the cache + %lld new > n_ctx %lld",
                          (long long)e->n_past, (long long)n, (long long)e->n_ctx);
    const int64_t V = e->model->arch.vocab_size;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return cmf__error(CMF_ERR_ARG, "token %lld: id %d out of range [0, %lld)", (long long)i, tokens[i],
                              (long long)V);
    for (int64_t done = 0; done < n;) {
        int64_t c = n - done < e->n_batch ? n - done : e->n_batch;
        bool last = done + c == n;
        float *lg = NULL;
        if (logits && all_logits) lg = logits + done * V;
        else if (logits && last) lg = logits;
        cmf_status st = forward_chunk(e, tokens + done, c, lg, all_logits);
        if (st) return st;
        done += c;
    }
    return CMF_OK;
}
