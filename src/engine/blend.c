/* blend.c — the bindings a chunk runs under: the engine's model
 * (cmf__engine_set_model), a sequence's own (cmf__engine_set_seq_model),
 * and the soft superposition of skills (spec §9, claim 14): a matrix
 * the blend's members bind differently runs once per member and the
 * outputs are summed with the members' weights, y = sum_i w_i (x W_i^T +
 * b), so a blended matrix is never made. A 1-D vector they differ in (a
 * norm weight, a bias: already small f32 copies, and the output is linear
 * in it) is blended as sum_i w_i v_i in the blend's binding. Refused when
 * set: members differing in attention sinks (inside a softmax) or in a
 * tensor read by a fused operator (MoE, DeltaNet, Gemma-4 per-layer). */
#include "engine/archs_engine.h"
#include "engine/engine.h"
#include "model/ext.h"
#include "util/error.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The member's matrix at the place nd.w takes in e->model (layer l, or the
 * model itself for l = -1): the same field of the member's binding. */
static const cmf__qmat *member_mat(const cmf__engine *e, int64_t l, const cmf__qmat *w, const cmf__model *mm)
{
    const char *base = l >= 0 ? (const char *)&e->model->layers[l] : (const char *)e->model;
    const char *mbase = l >= 0 ? (const char *)&mm->layers[l] : (const char *)mm;
    size_t off = (size_t)((const char *)w - base);
    return (const cmf__qmat *)(mbase + off);
}

static cmf_status build_blend(cmf__engine *e, cmf__graph *g, int64_t l, cmf__node nd)
{
    if (!e->blending || e->blend.n < 2) return cmf__graph_add(g, nd);
    const size_t span = l >= 0 ? sizeof e->model->layers[l] : sizeof *e->model;
    const char *base = l >= 0 ? (const char *)&e->model->layers[l] : (const char *)e->model;
    if ((const char *)nd.w < base || (const char *)nd.w >= base + span) /* not a field of the binding: as it is */
        return cmf__graph_add(g, nd);
    const cmf__qmat *w[CMF__BLEND_MAX];
    bool same = true;
    for (int i = 0; i < e->blend.n; i++) {
        w[i] = member_mat(e, l, nd.w, e->blend.m[i]);
        same = same && w[i]->data == nd.w->data;
    }
    if (same) return cmf__graph_add(g, nd);
    const cmf__ten scratch = l >= 0 ? e->blend_tmp : e->blend_head;
    if (!scratch.buf || nd.dst.rows > scratch.rows || nd.dst.cols > scratch.cols)
        return cmf__error(CMF_ERR_UNSUPPORTED, "%s: blend: no scratch for a [%lld x %lld] output", e->model->what,
                          (long long)nd.dst.rows, (long long)nd.dst.cols);
    cmf__ten tmp = cmf__ten_make(scratch.buf, scratch.off, CMF__E_F32, nd.dst.rows, nd.dst.cols);
    cmf_status st = CMF_OK;
    for (int i = 0; i < e->blend.n && !st; i++) {
        cmf__node one = nd;
        one.w = w[i];
        one.dst = i ? tmp : nd.dst;
        if ((st = cmf__graph_add(g, one))) break;
        st = i ? cmf__graph_add(g, (cmf__node){.op = CMF__OP_ADD, .dst = nd.dst, .a = nd.dst, .b = tmp, .f = {e->blend.w[i]}})
               : cmf__graph_add(g, (cmf__node){.op = CMF__OP_SCALE, .dst = nd.dst, .a = nd.dst, .f = {e->blend.w[0]}});
    }
    return st;
}

cmf_status cmf__build_weighted(cmf__engine *e, cmf__graph *g, int64_t l, cmf__node nd)
{
    cmf_status st = build_blend(e, g, l, nd);
    if (st || !e->n_lora || nd.op != CMF__OP_MATMUL) return st;
    return cmf__build_lora(e, g, l, nd);
}

/* The vectors of a layer, by place in cmf__layer_weights. */
static const size_t LAYER_VECS[] = {
    offsetof(cmf__layer_weights, attn_in_norm), offsetof(cmf__layer_weights, attn_out_norm),
    offsetof(cmf__layer_weights, ffn_in_norm),  offsetof(cmf__layer_weights, ffn_out_norm),
    offsetof(cmf__layer_weights, bq),           offsetof(cmf__layer_weights, bk),
    offsetof(cmf__layer_weights, bv),           offsetof(cmf__layer_weights, bo),
    offsetof(cmf__layer_weights, q_norm),       offsetof(cmf__layer_weights, k_norm),
    offsetof(cmf__layer_weights, b_gate),       offsetof(cmf__layer_weights, b_up),
    offsetof(cmf__layer_weights, b_down),
};

#define VEC_AT(base, off) ((cmf__wvec *)((char *)(base) + (off)))

/* Blends the vector at `off` of the n members' structs base[i] into
 * `dst` (bm's copy of it) when their values differ; `layer` (-1: the
 * final norm) names it in messages. */
static cmf_status blend_vec(cmf__engine *e, const void *const *base, size_t off, int n, const float *w, int64_t layer,
                            cmf__wvec *dst)
{
    const cmf__wvec *v0 = VEC_AT(base[0], off);
    bool differ = false;
    for (int i = 1; i < n; i++) {
        const cmf__wvec *vi = VEC_AT(base[i], off);
        if (!v0->v != !vi->v || v0->n != vi->n) {
            char where[48] = "the final norm";
            if (layer >= 0) snprintf(where, sizeof where, "layer %lld", (long long)layer);
            return cmf__error(CMF_ERR_UNSUPPORTED, "%s: blend: %s: a norm or bias one skill has and another lacks",
                              e->model->what, where);
        }
        differ = differ || (v0->v && memcmp(v0->v, vi->v, (size_t)v0->n * sizeof(float)));
    }
    if (!differ) return CMF_OK;
    float *b = malloc((size_t)v0->n * sizeof *b + 1), **grown = realloc(e->blend_vecs, (e->n_blend_vecs + 1) * sizeof *grown);
    if (grown) e->blend_vecs = grown;
    if (!b || !grown) {
        free(b);
        return cmf__error(CMF_ERR_NOMEM, "blend: out of memory");
    }
    e->blend_vecs[e->n_blend_vecs++] = b;
    for (int64_t k = 0; k < v0->n; k++) {
        double acc = 0;
        for (int i = 0; i < n; i++) acc += (double)w[i] * VEC_AT(base[i], off)->v[k];
        b[k] = (float)acc;
    }
    dst->v = b;
    return CMF_OK;
}

/* The blend's binding: m[0]'s (views shared, nothing owned but the
 * blended vectors, which the engine keeps in blend_vecs). */
static cmf_status blend_binding(cmf__engine *e, int n, const cmf__model *const *m, const float *w)
{
    const int64_t L = m[0]->arch.n_layer;
    cmf__model *bm = calloc(1, sizeof *bm);
    cmf__layer_weights *layers = malloc((size_t)L * sizeof *layers + 1);
    if (!bm || !layers) {
        free(bm);
        free(layers);
        return cmf__error(CMF_ERR_NOMEM, "blend: out of memory");
    }
    *bm = *m[0];
    memcpy(layers, m[0]->layers, (size_t)L * sizeof *layers);
    bm->layers = layers;
    bm->base = m[0]->base ? m[0]->base : m[0];
    e->blend_bind = bm;
    cmf_status st = CMF_OK;
    const void *base[CMF__BLEND_MAX];
    for (int64_t l = 0; l < L && !st; l++) {
        for (int i = 0; i < n; i++) base[i] = &m[i]->layers[l];
        for (size_t k = 0; k < sizeof LAYER_VECS / sizeof *LAYER_VECS && !st; k++)
            st = blend_vec(e, base, LAYER_VECS[k], n, w, l, VEC_AT(&layers[l], LAYER_VECS[k]));
        const cmf__wvec *s0 = &m[0]->layers[l].sinks;
        for (int i = 1; i < n && !st; i++) {
            const cmf__wvec *si = &m[i]->layers[l].sinks;
            if (!s0->v != !si->v || (s0->v && memcmp(s0->v, si->v, (size_t)s0->n * sizeof(float))))
                st = cmf__error(CMF_ERR_UNSUPPORTED, "%s: blend: skills '%s' and '%s' differ in layer %lld's attention "
                                                     "sinks (inside the softmax: not a weighted sum)",
                                m[0]->what, m[0]->skill ? m[0]->skill : "(backbone)",
                                m[i]->skill ? m[i]->skill : "(backbone)", (long long)l);
        }
    }
    for (int i = 0; i < n; i++) base[i] = m[i];
    if (!st) st = blend_vec(e, base, offsetof(cmf__model, final_norm), n, w, -1, &bm->final_norm);
    return st;
}

static cmf_status ensure_scratch(cmf__engine *e, bool head)
{
    if (e->blend_buf && (!head || e->blend_head.buf)) return CMF_OK;
    const int64_t B = e->n_batch, W = cmf__engine_widest(e->root), V = e->root->arch.vocab_size;
    size_t tmp_bytes = (size_t)B * (size_t)W * 4, head_bytes = head ? (size_t)e->out_max * (size_t)V * 4 : 0;
    cmf__buffer *buf = NULL;
    cmf_status st = e->be->ops->buffer_new(e->be, tmp_bytes + head_bytes, 0, "blend scratch", &buf);
    if (st) return st;
    cmf__engine_invalidate(e); /* graphs may point at the old scratch */
    if (e->blend_buf) e->be->ops->buffer_free(e->be, e->blend_buf);
    e->blend_buf = buf;
    e->blend_tmp = cmf__ten_make(buf, 0, CMF__E_F32, B, W);
    e->blend_head = head ? cmf__ten_make(buf, tmp_bytes, CMF__E_F32, e->out_max, V) : (cmf__ten){0};
    return CMF_OK;
}

/* Empties the sequences that follow the engine's binding (or blend). */
static cmf_status reset_followers(cmf__engine *e)
{
    cmf_status st = CMF_OK;
    for (int64_t s = 0; s < e->n_seq && !st; s++)
        if (!e->seq_model[s]) st = cmf__engine_reset_seq(e, s);
    return st;
}

static bool same_blend(const cmf__engine_blend *a, const cmf__engine_blend *b)
{
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
        if (a->m[i] != b->m[i] || a->w[i] != b->w[i]) return false;
    return true;
}

cmf_status cmf__engine_set_blend(cmf__engine *e, int n, const cmf__model *const *m, const float *w)
{
    const cmf__model *root = e->root->base ? e->root->base : e->root;
    if (n < 0 || n > CMF__BLEND_MAX || (n && (!m || !w)))
        return cmf__error(CMF_ERR_ARG, "blend: %d skills (0..%d)", n, CMF__BLEND_MAX);
    if (n == 0) {
        if (e->blend.n == 0) return CMF_OK;
        cmf_status st = reset_followers(e);
        e->model = e->blend.m[0]; /* the first member alone, as cmf_session_skill reports */
        e->blend.n = 0;
        cmf__archs_rebind(e);
        cmf__engine_invalidate(e);
        cmf__engine_blend_release(e);
        return st;
    }
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (!m[i] || (m[i]->base ? m[i]->base : m[i]) != root)
            return cmf__error(CMF_ERR_ARG, "blend: member %d is not a binding of %s", i, root->what);
        if (!isfinite(w[i]) || w[i] < 0)
            return cmf__error(CMF_ERR_ARG, "blend: weight %d is %g (expected finite and >= 0)", i, (double)w[i]);
        sum += w[i];
    }
    if (!(sum > 0)) return cmf__error(CMF_ERR_ARG, "blend: the weights sum to 0");
    if (n == 1) return cmf__engine_set_model(e, m[0]);
    bool outer = false;
    for (int i = 1; i < n; i++) {
        outer = outer || !cmf__model_same_at(m[0], m[i], -1);
        for (int64_t l = 0; l < root->arch.n_layer; l++) {
            const cmf__layer_weights *lw = &m[0]->layers[l];
            if (!cmf__model_same_at(m[0], m[i], l) && (lw->ext || lw->has_router || lw->kind == CMF__LAYER_LINEAR))
                return cmf__error(CMF_ERR_UNSUPPORTED,
                                  "%s: blend: skills '%s' and '%s' differ in layer %lld, whose operator (MoE, DeltaNet "
                                  "or a per-layer block) reads its weights itself; a blend combines plain projections only",
                                  root->what, m[0]->skill ? m[0]->skill : "(backbone)",
                                  m[i]->skill ? m[i]->skill : "(backbone)", (long long)l);
        }
    }
    if (outer && cmf__model_ext_of(m[0]) && cmf__model_ext_of(m[0])->has_ple)
        return cmf__error(CMF_ERR_UNSUPPORTED, "%s: blend: the skills differ outside the layers of a model with "
                                               "per-layer inputs", root->what);
    cmf__engine_blend b = {.n = n};
    for (int i = 0; i < n; i++) {
        b.m[i] = m[i];
        b.w[i] = (float)(w[i] / sum);
    }
    if (same_blend(&e->blend, &b)) return CMF_OK; /* the same blend: the caches stay */
    cmf_status st = ensure_scratch(e, outer);
    if (st) return st;
    /* the new binding is made aside; the old one goes once nothing points at it */
    cmf__model *old_bind = e->blend_bind;
    float **old_vecs = e->blend_vecs;
    size_t old_n = e->n_blend_vecs;
    e->blend_bind = NULL, e->blend_vecs = NULL, e->n_blend_vecs = 0;
    if ((st = blend_binding(e, n, b.m, b.w)) || (st = reset_followers(e))) {
        cmf__engine_blend_release(e);
        e->blend_bind = old_bind, e->blend_vecs = old_vecs, e->n_blend_vecs = old_n;
        return st;
    }
    e->model = e->blend_bind;
    e->blend = b;
    cmf__archs_rebind(e);
    cmf__engine_invalidate(e);
    for (size_t i = 0; i < old_n; i++) free(old_vecs[i]);
    free(old_vecs);
    if (old_bind) free(old_bind->layers);
    free(old_bind);
    return CMF_OK;
}

cmf_status cmf__engine_set_model(cmf__engine *e, const cmf__model *m)
{
    if (!m) m = e->root;
    if ((m->base ? m->base : m) != (e->root->base ? e->root->base : e->root))
        return cmf__error(CMF_ERR_ARG, "engine: %s: a binding of another model", m->what);
    if (m == e->model && e->blend.n == 0) return CMF_OK;
    for (int64_t s = 0; s < e->n_seq; s++)
        if (!e->seq_model[s]) {
            cmf_status st = cmf__engine_reset_seq(e, s);
            if (st) return st;
        }
    e->model = m;
    e->blend.n = 0;
    cmf__archs_rebind(e);
    cmf__engine_invalidate(e); /* graphs point at the op descriptors just rewritten */
    cmf__engine_blend_release(e);
    return CMF_OK;
}

cmf_status cmf__engine_set_seq_model(cmf__engine *e, int64_t seq, const cmf__model *m)
{
    if (seq < 0 || seq >= e->n_seq)
        return cmf__error(CMF_ERR_ARG, "engine: sequence %lld outside [0, %lld)", (long long)seq, (long long)e->n_seq);
    if (m && (m->base ? m->base : m) != (e->root->base ? e->root->base : e->root))
        return cmf__error(CMF_ERR_ARG, "engine: %s: a binding of another model", m->what);
    if (m == e->seq_model[seq]) return CMF_OK;
    const cmf__model *was = e->seq_model[seq] ? e->seq_model[seq] : e->model, *now = m ? m : e->model;
    bool blended = !e->seq_model[seq] && e->blend.n > 1, will = !m && e->blend.n > 1;
    cmf_status st = was == now && blended == will ? CMF_OK : cmf__engine_reset_seq(e, seq);
    if (!st) e->seq_model[seq] = m;
    return st;
}
