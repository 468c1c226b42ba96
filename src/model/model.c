/* model.c — binds a container's tensors to the engine's per-layer roles by
 * presence, through the skill overlay, and checks every shape against the
 * arch block before anything runs. Matrices are views into the mapping;
 * vectors are decoded once to f32. A failed bind leaves the old binding. */
#include "model/model.h"
#include "model/ext.h"
#include "util/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const cmf__tensor *cmf__model_tensor(const cmf__model *m, const char *name)
{
    if (m->skill) {
        char buf[512];
        int k = snprintf(buf, sizeof buf, "skill.%s.%s", m->skill, name);
        if (k > 0 && (size_t)k < sizeof buf) {
            const cmf__tensor *t = cmf__file_find(m->file, buf);
            if (t) return t;
        }
    }
    return cmf__file_find(m->file, name);
}

void cmf__wmat_release(cmf__wmat *w)
{
    if (w->present) cmf__qmat_free(&w->q);
    memset(w, 0, sizeof *w);
}

void cmf__wvec_release(cmf__wvec *v)
{
    free(v->v);
    v->v = NULL;
    v->n = 0;
}

static void shape_str(const cmf__tensor *t, char *buf, size_t cap)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, cap - k, "[");
    for (int i = 0; i < t->ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%llu", i ? ", " : "", (unsigned long long)t->shape[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

cmf_status cmf__model_bind_mat(const cmf__model *m, const char *name, int64_t rows, int64_t cols, bool required,
                               cmf__wmat *out)
{
    memset(out, 0, sizeof *out);
    const cmf__tensor *t = cmf__model_tensor(m, name);
    if (!t) {
        if (!required) return CMF_OK;
        return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s' missing (the arch block needs it)", m->what, name);
    }
    if (t->ndim != 2) {
        char s[96];
        shape_str(t, s, sizeof s);
        return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s' at 0x%llx: shape %s, expected a 2-D matrix", m->what,
                          t->name, (unsigned long long)t->record_off, s);
    }
    if ((rows > 0 && (int64_t)t->shape[0] != rows) || (cols > 0 && (int64_t)t->shape[1] != cols)) {
        char s[96];
        shape_str(t, s, sizeof s);
        return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s' at 0x%llx: shape %s, expected [%lld, %lld]", m->what,
                          t->name, (unsigned long long)t->record_off, s, (long long)rows, (long long)cols);
    }
    char what[600];
    snprintf(what, sizeof what, "%s: tensor '%s'", m->what, t->name);
    cmf_status st = cmf__qmat_init(&out->q, t->dtype, t->data, t->nbytes, t->ndim, t->shape, t->name);
    if (st) return cmf__error_prefix(st, "%s", m->what); /* quant names the tensor */
    out->present = true;
    out->t = t;
    return CMF_OK;
}

cmf_status cmf__model_bind_vec(const cmf__model *m, const char *name, int64_t n, bool required, cmf__wvec *out)
{
    memset(out, 0, sizeof *out);
    const cmf__tensor *t = cmf__model_tensor(m, name);
    if (!t) {
        if (!required) return CMF_OK;
        return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s' missing (the arch block needs it)", m->what, name);
    }
    uint64_t count = t->ndim == 1 ? t->shape[0] : 0;
    if (t->ndim != 1 || count > (uint64_t)INT64_MAX || (n > 0 && (int64_t)count != n)) {
        char s[96];
        shape_str(t, s, sizeof s);
        return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s' at 0x%llx: shape %s, expected [%lld]", m->what, t->name,
                          (unsigned long long)t->record_off, s, (long long)(n > 0 ? n : (int64_t)count));
    }
    char what[600];
    snprintf(what, sizeof what, "%s: tensor '%s'", m->what, t->name);
    cmf__qmat q;
    cmf_status st = cmf__qmat_init(&q, t->dtype, t->data, t->nbytes, t->ndim, t->shape, t->name);
    if (st) return cmf__error_prefix(st, "%s", m->what); /* quant names the tensor */
    out->v = malloc((size_t)count * sizeof(float) + 1);
    if (!out->v) {
        cmf__qmat_free(&q);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", what);
    }
    cmf__qmat_decode_row(&q, 0, out->v);
    cmf__qmat_free(&q);
    out->n = (int64_t)count;
    return CMF_OK;
}

static void layer_release(cmf__layer_weights *L)
{
    cmf__wvec *vecs[] = {&L->attn_in_norm, &L->attn_out_norm, &L->ffn_in_norm, &L->ffn_out_norm, &L->bq, &L->bk,
                         &L->bv, &L->bo, &L->q_norm, &L->k_norm, &L->sinks, &L->b_gate, &L->b_up, &L->b_down};
    cmf__wmat *mats[] = {&L->wq, &L->wk, &L->wv, &L->wqkv, &L->wo, &L->w_gate, &L->w_up, &L->w_down, &L->w_gate_up};
    for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++) cmf__wvec_release(vecs[i]);
    for (size_t i = 0; i < sizeof mats / sizeof *mats; i++) cmf__wmat_release(mats[i]);
    if (L->ext && L->ext_free) L->ext_free(L->ext);
    L->ext = NULL;
}

#define NAME(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)

static cmf_status bind_attention(const cmf__model *m, int64_t i, cmf__layer_weights *L)
{
    char nm[256];
    cmf_status st;
    const int64_t H = m->arch.hidden_size;
    const char *p = "model.layers";
    if ((st = cmf__model_bind_mat(m, NAME("%s.%lld.self_attn.qkv_proj.weight", p, (long long)i), 0, H, false, &L->wqkv)))
        return st;
    if (L->wqkv.present) {
        if (L->wqkv.q.rows != L->q_dim + 2 * L->kv_dim)
            return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s': %lld rows, expected q+k+v = %lld", m->what, nm,
                              (long long)L->wqkv.q.rows, (long long)(L->q_dim + 2 * L->kv_dim));
    } else {
        if ((st = cmf__model_bind_mat(m, NAME("%s.%lld.self_attn.q_proj.weight", p, (long long)i), 0, H, true, &L->wq)))
            return st;
        if (L->wq.q.rows == 2 * L->q_dim) L->q_gated = true;
        else if (L->wq.q.rows != L->q_dim)
            return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s': %lld rows, expected %lld (or %lld with an output gate)",
                              m->what, nm, (long long)L->wq.q.rows, (long long)L->q_dim, (long long)(2 * L->q_dim));
        if ((st = cmf__model_bind_mat(m, NAME("%s.%lld.self_attn.k_proj.weight", p, (long long)i), L->kv_dim, H, true, &L->wk)))
            return st;
        if ((st = cmf__model_bind_mat(m, NAME("%s.%lld.self_attn.v_proj.weight", p, (long long)i), L->kv_dim, H, true, &L->wv)))
            return st;
    }
    if ((st = cmf__model_bind_mat(m, NAME("%s.%lld.self_attn.o_proj.weight", p, (long long)i), H, L->q_dim, true, &L->wo)))
        return st;
    if ((st = cmf__model_bind_vec(m, NAME("%s.%lld.self_attn.q_proj.bias", p, (long long)i),
                                  L->q_gated ? 2 * L->q_dim : L->q_dim, false, &L->bq)) ||
        (st = cmf__model_bind_vec(m, NAME("%s.%lld.self_attn.k_proj.bias", p, (long long)i), L->kv_dim, false, &L->bk)) ||
        (st = cmf__model_bind_vec(m, NAME("%s.%lld.self_attn.v_proj.bias", p, (long long)i), L->kv_dim, false, &L->bv)) ||
        (st = cmf__model_bind_vec(m, NAME("%s.%lld.self_attn.o_proj.bias", p, (long long)i), H, false, &L->bo)) ||
        (st = cmf__model_bind_vec(m, NAME("%s.%lld.self_attn.sinks", p, (long long)i), L->n_head, false, &L->sinks)))
        return st;
    if (L->wqkv.present && (L->bq.v || L->bk.v || L->bv.v))
        return cmf__error(CMF_ERR_UNSUPPORTED, "%s: layer %lld: separate q/k/v biases with a fused qkv_proj", m->what,
                          (long long)i);
    if ((st = cmf__model_bind_vec(m, NAME("%s.%lld.self_attn.q_norm.weight", p, (long long)i), 0, false, &L->q_norm)) ||
        (st = cmf__model_bind_vec(m, NAME("%s.%lld.self_attn.k_norm.weight", p, (long long)i), 0, false, &L->k_norm)))
        return st;
    if (!L->q_norm.v != !L->k_norm.v)
        return cmf__error(CMF_ERR_CONFIG, "%s: layer %lld: q_norm and k_norm must both be present or both absent",
                          m->what, (long long)i);
    if (L->q_norm.v) {
        if (L->q_norm.n == L->head_dim && L->k_norm.n == L->head_dim) L->qk_norm_whole = false;
        else if (L->q_norm.n == L->q_dim && L->k_norm.n == L->kv_dim) L->qk_norm_whole = true;
        else
            return cmf__error(CMF_ERR_CONFIG,
                              "%s: layer %lld: q_norm/k_norm have %lld/%lld entries, expected %lld/%lld (per head) "
                              "or %lld/%lld (whole projection)",
                              m->what, (long long)i, (long long)L->q_norm.n, (long long)L->k_norm.n,
                              (long long)L->head_dim, (long long)L->head_dim, (long long)L->q_dim,
                              (long long)L->kv_dim);
    }
    return CMF_OK;
}

static cmf_status bind_ffn(const cmf__model *m, int64_t i, cmf__layer_weights *L)
{
    char nm[256];
    cmf_status st;
    const int64_t H = m->arch.hidden_size;
    const char *p = "model.layers";
    L->has_router = cmf__model_tensor(m, NAME("%s.%lld.mlp.gate.weight", p, (long long)i)) != NULL;
    if ((st = cmf__model_bind_mat(m, NAME("%s.%lld.mlp.gate_up_proj.weight", p, (long long)i), 0, H, false, &L->w_gate_up)))
        return st;
    if (L->w_gate_up.present) {
        if (L->w_gate_up.q.rows % 2)
            return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s': %lld rows, expected an even count (gate, up)",
                              m->what, nm, (long long)L->w_gate_up.q.rows);
        L->ffn_dim = L->w_gate_up.q.rows / 2;
    } else {
        bool need = !L->has_router;
        if ((st = cmf__model_bind_mat(m, NAME("%s.%lld.mlp.gate_proj.weight", p, (long long)i), 0, H, need, &L->w_gate)))
            return st;
        if (!L->w_gate.present) return CMF_OK; /* a MoE layer without a dense part */
        L->ffn_dim = L->w_gate.q.rows;
        if ((st = cmf__model_bind_mat(m, NAME("%s.%lld.mlp.up_proj.weight", p, (long long)i), L->ffn_dim, H, true, &L->w_up)))
            return st;
        if ((st = cmf__model_bind_vec(m, NAME("%s.%lld.mlp.gate_proj.bias", p, (long long)i), L->ffn_dim, false, &L->b_gate)) ||
            (st = cmf__model_bind_vec(m, NAME("%s.%lld.mlp.up_proj.bias", p, (long long)i), L->ffn_dim, false, &L->b_up)))
            return st;
    }
    if ((st = cmf__model_bind_mat(m, NAME("%s.%lld.mlp.down_proj.weight", p, (long long)i), H, L->ffn_dim, true, &L->w_down)) ||
        (st = cmf__model_bind_vec(m, NAME("%s.%lld.mlp.down_proj.bias", p, (long long)i), H, false, &L->b_down)))
        return st;
    return CMF_OK;
}

static cmf_status bind_layer(const cmf__model *m, int64_t i, cmf__layer_weights *L)
{
    char nm[256];
    cmf_status st;
    const cmf__arch *a = &m->arch;
    const int64_t H = a->hidden_size;
    memset(L, 0, sizeof *L);
    L->kind = a->layer_kind[i];
    L->n_head = a->layer_n_head[i];
    L->n_head_kv = a->n_head_kv;
    L->head_dim = a->layer_head_dim[i];
    L->q_dim = L->n_head * L->head_dim;
    L->kv_dim = L->n_head_kv * L->head_dim;
    const char *p = "model.layers";
    const char *in = "input_layernorm", *pa = "post_attention_layernorm", *pf = "pre_feedforward_layernorm",
               *po = "post_feedforward_layernorm";
    switch (a->norm_place) {
    case CMF__PLACE_PRE:
        if ((st = cmf__model_bind_vec(m, NAME("%s.%lld.%s.weight", p, (long long)i, in), H, true, &L->attn_in_norm)) ||
            (st = cmf__model_bind_vec(m, NAME("%s.%lld.%s.weight", p, (long long)i, pa), H, true, &L->ffn_in_norm)))
            return st;
        break;
    case CMF__PLACE_SANDWICH:
        if ((st = cmf__model_bind_vec(m, NAME("%s.%lld.%s.weight", p, (long long)i, in), H, true, &L->attn_in_norm)) ||
            (st = cmf__model_bind_vec(m, NAME("%s.%lld.%s.weight", p, (long long)i, pa), H, true, &L->attn_out_norm)) ||
            (st = cmf__model_bind_vec(m, NAME("%s.%lld.%s.weight", p, (long long)i, pf), H, true, &L->ffn_in_norm)) ||
            (st = cmf__model_bind_vec(m, NAME("%s.%lld.%s.weight", p, (long long)i, po), H, true, &L->ffn_out_norm)))
            return st;
        break;
    case CMF__PLACE_POST:
        if ((st = cmf__model_bind_vec(m, NAME("%s.%lld.%s.weight", p, (long long)i, pa), H, true, &L->attn_out_norm)) ||
            (st = cmf__model_bind_vec(m, NAME("%s.%lld.%s.weight", p, (long long)i, po), H, true, &L->ffn_out_norm)))
            return st;
        break;
    }
    if (L->kind != CMF__LAYER_LINEAR) {
        if ((st = bind_attention(m, i, L))) return st;
    }
    if ((st = bind_ffn(m, i, L))) return st;
    if ((st = cmf__model_ext_bind_layer(m, i, L))) return st; /* MoE, linear attention, per-layer inputs */
    return CMF_OK;
}

/* Which layers (and whether anything outside them) the skill of nm, an id
 * of `len` bytes, has tensors for: `skill.<id>.model.layers.<i>.*` marks
 * layer i, any other `skill.<id>.*` the outer tensors. */
static void mark_skill_tensors(cmf__model *nm, size_t len)
{
    for (uint64_t i = 0; i < nm->file->n_tensors; i++) {
        const char *n = nm->file->tensors[i].name;
        if (strncmp(n, "skill.", 6) || strncmp(n + 6, nm->skill, len) || n[6 + len] != '.') continue;
        const char *rest = n + 7 + len, *pre = "model.layers.";
        char *end = NULL;
        long long l = -1;
        if (!strncmp(rest, pre, strlen(pre)) && rest[strlen(pre)] >= '0' && rest[strlen(pre)] <= '9')
            l = strtoll(rest + strlen(pre), &end, 10);
        if (l >= 0 && l < nm->arch.n_layer && end && *end == '.') nm->skill_layer[l] = true;
        else nm->skill_outer = true;
    }
}

static void release_all(cmf__model *m)
{
    if (m->layers)
        for (int64_t i = 0; i < m->arch.n_layer; i++) layer_release(&m->layers[i]);
    free(m->layers);
    m->layers = NULL;
    bool tied_alias = m->lm_head.present && m->embed.present && m->lm_head.t == m->embed.t;
    cmf__wmat_release(&m->embed);
    if (tied_alias) memset(&m->lm_head, 0, sizeof m->lm_head);
    else cmf__wmat_release(&m->lm_head);
    cmf__wvec_release(&m->final_norm);
}

cmf_status cmf__model_bind(cmf__model *m, const char *skill)
{
    /* bind into a scratch model sharing the file; swap on success */
    cmf__model nm = *m;
    nm.layers = NULL;
    memset(&nm.embed, 0, sizeof nm.embed);
    memset(&nm.lm_head, 0, sizeof nm.lm_head);
    memset(&nm.final_norm, 0, sizeof nm.final_norm);
    nm.skill = NULL;
    nm.skill_layer = NULL;
    nm.skill_outer = false;
    if (skill) {
        bool known = false;
        size_t len = strlen(skill);
        for (uint64_t i = 0; i < m->file->n_tensors && !known; i++) {
            const char *n = m->file->tensors[i].name;
            known = !strncmp(n, "skill.", 6) && !strncmp(n + 6, skill, len) && n[6 + len] == '.';
        }
        const json_t *skills = json_object_get(m->file->header, "skills");
        for (size_t i = 0; !known && json_is_array(skills) && i < json_array_size(skills); i++) {
            const char *id = json_string_value(json_object_get(json_array_get(skills, i), "id"));
            known = id && !strcmp(id, skill);
        }
        if (!known) return cmf__error(CMF_ERR_NOT_FOUND, "%s: skill '%s' not in this file", m->what, skill);
        nm.skill = strdup(skill);
        nm.skill_layer = calloc((size_t)m->arch.n_layer + 1, sizeof *nm.skill_layer);
        if (!nm.skill || !nm.skill_layer) {
            free(nm.skill);
            free(nm.skill_layer);
            return cmf__error(CMF_ERR_NOMEM, "out of memory");
        }
        mark_skill_tensors(&nm, len);
    }
    const cmf__arch *a = &m->arch;
    cmf_status st;
    const int64_t H = a->hidden_size;
    if ((st = cmf__model_bind_mat(&nm, "model.embed_tokens.weight", a->vocab_size, H, true, &nm.embed))) goto fail;
    if ((st = cmf__model_bind_vec(&nm, "model.norm.weight", H, true, &nm.final_norm))) goto fail;
    if ((st = cmf__model_bind_mat(&nm, "lm_head.weight", a->vocab_size, H, !a->tie_word_embeddings, &nm.lm_head)))
        goto fail;
    if (!nm.lm_head.present) nm.lm_head = nm.embed; /* tied: the same view */
    nm.layers = calloc((size_t)a->n_layer, sizeof *nm.layers);
    if (!nm.layers) {
        st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", m->what);
        goto fail;
    }
    for (int64_t i = 0; i < a->n_layer; i++)
        if ((st = bind_layer(&nm, i, &nm.layers[i]))) goto fail;
    /* swap in */
    release_all(m);
    free(m->skill);
    free(m->skill_layer);
    *m = nm;
    return CMF_OK;
fail:
    release_all(&nm);
    free(nm.skill);
    free(nm.skill_layer);
    return st;
}

/* The first difference of shape between two bindings of one layer, or NULL. */
static const char *layer_differs(const cmf__layer_weights *a, const cmf__layer_weights *b)
{
    if (a->q_dim != b->q_dim || a->kv_dim != b->kv_dim || a->q_gated != b->q_gated) return "q_proj";
    if (a->wqkv.present != b->wqkv.present) return "qkv_proj";
    if (a->ffn_dim != b->ffn_dim || a->w_gate_up.present != b->w_gate_up.present) return "mlp";
    if (a->has_router != b->has_router || !a->ext != !b->ext) return "mlp.gate";
    return NULL;
}

cmf_status cmf__model_view_new(const cmf__model *m, const char *skill, cmf__model **out)
{
    *out = NULL;
    const cmf__model *root = m->base ? m->base : m;
    cmf__model *v = calloc(1, sizeof *v);
    if (!v) return cmf__error(CMF_ERR_NOMEM, "out of memory");
    v->file = root->file;
    v->arch = root->arch; /* borrowed: never freed through the view */
    v->base = root;
    v->what = strdup(root->what);
    if (!v->what) {
        free(v);
        return cmf__error(CMF_ERR_NOMEM, "out of memory");
    }
    cmf_status st = cmf__model_bind(v, skill);
    for (int64_t i = 0; !st && i < root->arch.n_layer; i++) {
        const char *what = layer_differs(&root->layers[i], &v->layers[i]);
        if (what)
            st = cmf__error(CMF_ERR_CONFIG, "%s: skill '%s': layer %lld: the %s tensors' shapes differ from the model's",
                            root->what, skill ? skill : "(backbone)", (long long)i, what);
    }
    if (st) {
        cmf__model_free(v);
        return st;
    }
    *out = v;
    return CMF_OK;
}

bool cmf__model_same_at(const cmf__model *a, const cmf__model *b, int64_t l)
{
    const char *sa = a->skill && (l < 0 ? a->skill_outer : a->skill_layer[l]) ? a->skill : NULL;
    const char *sb = b->skill && (l < 0 ? b->skill_outer : b->skill_layer[l]) ? b->skill : NULL;
    return sa == sb || (sa && sb && !strcmp(sa, sb));
}

cmf_status cmf__model_from_file(cmf__file *f, const char *what, cmf__model **out)
{
    *out = NULL;
    cmf__model *m = calloc(1, sizeof *m);
    if (!m) {
        cmf__file_free(f);
        return cmf__error(CMF_ERR_NOMEM, "out of memory");
    }
    m->file = f;
    m->what = strdup(what ? what : f->path);
    if (!m->what) {
        cmf__model_free(m);
        return cmf__error(CMF_ERR_NOMEM, "out of memory");
    }
    cmf_status st = cmf__arch_parse(f->arch, m->what, &m->arch);
    if (st) {
        cmf__model_free(m);
        return st;
    }
    if ((st = cmf__model_bind(m, NULL))) {
        cmf__model_free(m);
        return st;
    }
    *out = m;
    return CMF_OK;
}

cmf_status cmf__model_open(const char *path, cmf__model **out)
{
    *out = NULL;
    cmf__file *f;
    cmf__open_opts o = cmf__open_opts_default();
    cmf_status st = cmf__file_open(path, &o, &f);
    if (st) return st;
    return cmf__model_from_file(f, path, out);
}

void cmf__model_free(cmf__model *m)
{
    if (!m) return;
    release_all(m);
    if (!m->base) { /* a view borrows these */
        cmf__arch_free(&m->arch);
        cmf__file_free(m->file);
    }
    free(m->skill);
    free(m->skill_layer);
    free(m->what);
    free(m);
}
