/* blend.c — soft superposition of skills (spec §9, claim 14): a weight
 * the blend's members bind differently runs once per member and the
 * outputs are summed with the members' weights, y = sum_i w_i (x W_i^T +
 * b), so a blended matrix is never made. Only matrices may differ: a
 * member replacing a 1-D tensor, or a tensor read inside a fused operator
 * (MoE, DeltaNet, Gemma-4 per-layer blocks), is refused when set. */
#include "engine/archs_engine.h"
#include "engine/engine.h"
#include "model/ext.h"
#include "util/error.h"

#include <math.h>
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

/* The first 1-D tensor skill `id` of file f replaces, or NULL. */
static const cmf__tensor *vector_of(const cmf__file *f, const char *id)
{
    size_t len = strlen(id);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const cmf__tensor *t = &f->tensors[i];
        if (!strncmp(t->name, "skill.", 6) && !strncmp(t->name + 6, id, len) && t->name[6 + len] == '.' && t->ndim < 2)
            return t;
    }
    return NULL;
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

static cmf_status ensure_scratch(cmf__engine *e, bool head)
{
    if (e->blend_buf && (!head || e->blend_head.buf)) return CMF_OK;
    const int64_t B = e->n_batch, W = cmf__engine_widest(e->root), V = e->root->arch.vocab_size;
    size_t tmp_bytes = (size_t)B * (size_t)W * 4, head_bytes = head ? (size_t)CMF__ENGINE_OUT_MAX * (size_t)V * 4 : 0;
    cmf__buffer *buf = NULL;
    cmf_status st = e->be->ops->buffer_new(e->be, tmp_bytes + head_bytes, 0, "blend scratch", &buf);
    if (st) return st;
    cmf__engine_invalidate(e); /* graphs may point at the old scratch */
    if (e->blend_buf) e->be->ops->buffer_free(e->be, e->blend_buf);
    e->blend_buf = buf;
    e->blend_tmp = cmf__ten_make(buf, 0, CMF__E_F32, B, W);
    e->blend_head = head ? cmf__ten_make(buf, tmp_bytes, CMF__E_F32, CMF__ENGINE_OUT_MAX, V) : (cmf__ten){0};
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
        e->blend.n = 0;
        cmf__engine_invalidate(e);
        return st;
    }
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (!m[i] || (m[i]->base ? m[i]->base : m[i]) != root)
            return cmf__error(CMF_ERR_ARG, "blend: member %d is not a binding of %s", i, root->what);
        if (!isfinite(w[i]) || w[i] < 0)
            return cmf__error(CMF_ERR_ARG, "blend: weight %d is %g (expected finite and >= 0)", i, (double)w[i]);
        sum += w[i];
        const cmf__tensor *t = m[i]->skill ? vector_of(m[i]->file, m[i]->skill) : NULL;
        if (t)
            return cmf__error(CMF_ERR_UNSUPPORTED,
                              "%s: blend: skill '%s' replaces the 1-D tensor '%s'; a blend combines matrices only",
                              root->what, m[i]->skill, t->name);
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
    if (st || (st = reset_followers(e))) return st;
    e->model = m[0];
    e->blend = b;
    cmf__archs_rebind(e);
    cmf__engine_invalidate(e);
    return CMF_OK;
}
