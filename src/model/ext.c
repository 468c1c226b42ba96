/* ext.c — binds the extension operators' tensors through the skill overlay
 * into compute/ descriptors: MoE router and experts, gated DeltaNet
 * projections and state dims, Gemma-4 per-layer inputs and layer scalar.
 * Dimensions come from the parsed arch (never from raw JSON) and are
 * checked against every tensor before a descriptor is filled. */
#include "model/ext.h"

#include "util/arith.h"
#include "util/error.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)

static void model_ext_free(cmf__model_ext *M) {
    if (!M) return;
    cmf__wmat_release(&M->embed_pl);
    cmf__wmat_release(&M->model_proj);
    cmf__wvec_release(&M->proj_norm);
    free(M);
}

static void layer_ext_free(void *p) {
    cmf__layer_ext *A = p;
    if (!A) return;
    if (A->owns_mdl) model_ext_free(A->mdl);
    cmf__wmat *mats[] = {&A->router, &A->sh_gate, &A->sh_up, &A->sh_down, &A->sh_gate_w, &A->in_qkvz,
                         &A->in_ba, &A->out_proj, &A->pl_gate, &A->pl_proj};
    cmf__wvec *vecs[] = {&A->router_bias, &A->expert_bias, &A->conv_w, &A->A_log, &A->dt_bias, &A->norm_w, &A->pl_post};
    for (size_t i = 0; i < sizeof mats / sizeof *mats; i++) cmf__wmat_release(mats[i]);
    for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++) cmf__wvec_release(vecs[i]);
    if (A->ew)
        for (int i = 0; i < 3 * A->n_expert; i++) cmf__wmat_release(&A->ew[i]);
    if (A->eb)
        for (int i = 0; i < 3 * A->n_expert; i++) cmf__wvec_release(&A->eb[i]);
    free(A->ew);
    free(A->eb);
    free(A->experts);
    free(A);
}

/* A tensor of any shape decoded flat to f32 (conv1d [C,1,K], layer_scalar [1]). */
static cmf_status bind_flat(const cmf__model *m, const char *name, int64_t count, bool required, cmf__wvec *out) {
    memset(out, 0, sizeof *out);
    const cmf__tensor *t = cmf__model_tensor(m, name);
    if (!t) {
        if (!required) return CMF_OK;
        return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s' missing (the arch block needs it)", m->what, name);
    }
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        if (cmf__mul_overflow(n, t->shape[i], &n)) n = UINT64_MAX;
    if (n != (uint64_t)count)
        return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s' at 0x%llx: %llu elements, expected %lld", m->what, name,
                          (unsigned long long)t->record_off, (unsigned long long)n, (long long)count);
    char what[600];
    snprintf(what, sizeof what, "%s: tensor '%s'", m->what, name);
    cmf__qmat q;
    cmf_status st = cmf__qmat_init(&q, t->dtype, t->data, t->nbytes, t->ndim, t->shape, t->name);
    if (st) return cmf__error_prefix(st, "%s", m->what); /* quant names the tensor */
    out->v = malloc(sizeof(float) * (size_t)n + 1);
    if (!out->v) {
        cmf__qmat_free(&q);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", what);
    }
    for (int64_t r = 0; r < q.rows; r++) cmf__qmat_decode_row(&q, r, out->v + r * q.cols);
    cmf__qmat_free(&q);
    out->n = (int64_t)n;
    return CMF_OK;
}

static cmf_status bind_moe(const cmf__model *m, int64_t i, cmf__layer_ext *A) {
    char nm[256], what[320];
    cmf_status st;
    const cmf__arch *a = &m->arch;
    const int64_t H = a->hidden_size;
    const cmf__arch_moe *moe = &a->moe;
    if ((st = cmf__model_bind_mat(m, NAME("model.layers.%lld.mlp.gate.weight", (long long)i), 0, H, true, &A->router)))
        return st;
    int64_t E = A->router.q.rows;
    if (moe->num_experts && moe->num_experts != E)
        return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s': %lld experts, arch.moe.num_experts says %lld", m->what, nm,
                          (long long)E, (long long)moe->num_experts);
    if (E > CMF__ARCH_MAX_EXPERTS)
        return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s': %lld experts, more than %d", m->what, nm, (long long)E,
                          CMF__ARCH_MAX_EXPERTS);
    A->moe = true;
    A->n_expert = (int)E;
    A->ew = calloc((size_t)(3 * E), sizeof *A->ew);
    A->eb = calloc((size_t)(3 * E), sizeof *A->eb);
    A->experts = calloc((size_t)E, sizeof *A->experts);
    if (!A->ew || !A->eb || !A->experts) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", m->what);
    if ((st = cmf__model_bind_vec(m, NAME("model.layers.%lld.mlp.gate.bias", (long long)i), E, false, &A->router_bias)) ||
        (st = cmf__model_bind_vec(m, NAME("model.layers.%lld.mlp.expert_bias", (long long)i), E, false, &A->expert_bias)))
        return st;
    static const char *const roles[3] = {"gate_proj", "up_proj", "down_proj"};
    for (int64_t e = 0; e < E; e++) {
        for (int r = 0; r < 3; r++) {
            int64_t rows = r == 2 ? H : 0, cols = r == 2 ? 0 : H;
            if ((st = cmf__model_bind_mat(m, NAME("model.layers.%lld.mlp.experts.%lld.%s.weight", (long long)i,
                                                  (long long)e, roles[r]), rows, cols, true, &A->ew[3 * e + r])))
                return st;
            int64_t n = r == 2 ? H : A->ew[3 * e].q.rows;
            if ((st = cmf__model_bind_vec(m, NAME("model.layers.%lld.mlp.experts.%lld.%s.bias", (long long)i,
                                                  (long long)e, roles[r]), n, false, &A->eb[3 * e + r])))
                return st;
        }
        A->experts[e] = (cmf__moe_expert){&A->ew[3 * e].q, &A->ew[3 * e + 1].q, &A->ew[3 * e + 2].q,
                                          A->eb[3 * e].v, A->eb[3 * e + 1].v, A->eb[3 * e + 2].v};
    }
    if ((st = cmf__model_bind_mat(m, NAME("model.layers.%lld.mlp.shared_expert.gate_proj.weight", (long long)i), 0, H,
                                  false, &A->sh_gate)))
        return st;
    if (A->sh_gate.present) {
        if ((st = cmf__model_bind_mat(m, NAME("model.layers.%lld.mlp.shared_expert.up_proj.weight", (long long)i),
                                      A->sh_gate.q.rows, H, true, &A->sh_up)) ||
            (st = cmf__model_bind_mat(m, NAME("model.layers.%lld.mlp.shared_expert.down_proj.weight", (long long)i), H,
                                      A->sh_gate.q.rows, true, &A->sh_down)) ||
            (st = cmf__model_bind_mat(m, NAME("model.layers.%lld.mlp.shared_expert_gate.weight", (long long)i), 1, H,
                                      false, &A->sh_gate_w)))
            return st;
        A->shared = (cmf__moe_expert){&A->sh_gate.q, &A->sh_up.q, &A->sh_down.q, NULL, NULL, NULL};
    }
    cmf__moe_layer *L = &A->ml;
    L->hidden = (int)H;
    L->route.n_expert = (int)E;
    L->route.top_k = (int)moe->top_k; /* <= CMF__ARCH_MAX_EXPERTS; checked against E below */
    L->route.norm_topk = moe->norm_topk_prob;
    L->route.sigmoid = moe->router_sigmoid;
    L->route.routed_scaling = (float)moe->routed_scaling_factor;
    L->act = (cmf__act_params){(cmf__act)a->act, (float)a->swiglu_alpha, (float)a->swiglu_limit};
    L->router = &A->router.q;
    L->router_bias = A->router_bias.v;
    L->expert_bias = A->expert_bias.v;
    L->experts = A->experts;
    L->shared = A->sh_gate.present ? &A->shared : NULL;
    L->shared_gate = A->sh_gate_w.present ? &A->sh_gate_w.q : NULL;
    snprintf(what, sizeof what, "%s: layer %lld", m->what, (long long)i);
    return cmf__moe_layer_check(L, what);
}

static cmf_status bind_gdn(const cmf__model *m, int64_t i, cmf__layer_ext *A) {
    char nm[256], what[320];
    cmf_status st;
    const cmf__arch *a = &m->arch;
    const cmf__arch_linear *g = &a->linear; /* each <= CMF__ARCH_MAX_HEADS / _HEAD_DIM: fits int */
    A->gd = (cmf__gdn_dims){(int)a->hidden_size,         (int)g->num_key_heads,  (int)g->num_value_heads,
                            (int)g->key_head_dim,        (int)g->value_head_dim, (int)g->conv_kernel_dim,
                            (float)a->rms_norm_eps};
    snprintf(what, sizeof what, "%s: layer %lld", m->what, (long long)i);
    cmf__gdn_weights none = {0};
    if (A->gd.n_k_heads < 1 || A->gd.n_v_heads < 1 || A->gd.n_v_heads % A->gd.n_k_heads || A->gd.k_dim < 1 ||
        A->gd.v_dim < 1 || A->gd.conv_k < 1)
        return cmf__gdn_check(&A->gd, &none, what);
    int64_t H = a->hidden_size, nk = A->gd.n_k_heads, nv = A->gd.n_v_heads, dk = A->gd.k_dim, dv = A->gd.v_dim;
    int64_t C = (int64_t)cmf__gdn_conv_dim(&A->gd);
    if ((st = cmf__model_bind_mat(m, NAME("model.layers.%lld.linear_attn.in_proj_qkvz.weight", (long long)i),
                                  2 * nk * dk + 2 * nv * dv, H, true, &A->in_qkvz)) ||
        (st = cmf__model_bind_mat(m, NAME("model.layers.%lld.linear_attn.in_proj_ba.weight", (long long)i), 2 * nv, H,
                                  true, &A->in_ba)) ||
        (st = cmf__model_bind_mat(m, NAME("model.layers.%lld.linear_attn.out_proj.weight", (long long)i), H, nv * dv,
                                  true, &A->out_proj)) ||
        (st = bind_flat(m, NAME("model.layers.%lld.linear_attn.conv1d.weight", (long long)i), C * A->gd.conv_k, true,
                        &A->conv_w)) ||
        (st = bind_flat(m, NAME("model.layers.%lld.linear_attn.A_log", (long long)i), nv, true, &A->A_log)) ||
        (st = bind_flat(m, NAME("model.layers.%lld.linear_attn.dt_bias", (long long)i), nv, true, &A->dt_bias)) ||
        (st = bind_flat(m, NAME("model.layers.%lld.linear_attn.norm.weight", (long long)i), dv, true, &A->norm_w)))
        return st;
    if (cmf__model_tensor(m, NAME("model.layers.%lld.linear_attn.conv1d.bias", (long long)i)))
        return cmf__error(CMF_ERR_UNSUPPORTED, "%s: tensor '%s': a conv1d bias is not supported", what, nm);
    A->gdn = true;
    A->gw = (cmf__gdn_weights){&A->in_qkvz.q, &A->in_ba.q, &A->out_proj.q, A->conv_w.v, A->A_log.v, A->dt_bias.v,
                               A->norm_w.v};
    return cmf__gdn_check(&A->gd, &A->gw, what);
}

static cmf_status bind_model_level(const cmf__model *m, cmf__model_ext **out) {
    char what[320];
    cmf_status st;
    const cmf__arch *a = &m->arch;
    *out = NULL;
    int64_t P = a->per_layer_input; /* n_layer * P <= CMF__ARCH_MAX_DIM (arch.c) */
    bool v_norm = a->v_norm;
    if (!P && !v_norm) return CMF_OK;
    cmf__model_ext *M = calloc(1, sizeof *M);
    if (!M) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", m->what);
    M->v_norm = v_norm;
    if (P > 0) {
        const int64_t L = a->n_layer, H = a->hidden_size;
        if ((st = cmf__model_bind_mat(m, "model.embed_tokens_per_layer.weight", 0, L * P, true, &M->embed_pl)) ||
            (st = cmf__model_bind_mat(m, "model.per_layer_model_projection.weight", L * P, H, true, &M->model_proj)) ||
            (st = cmf__model_bind_vec(m, "model.per_layer_projection_norm.weight", P, true, &M->proj_norm))) {
            model_ext_free(M);
            return st;
        }
        M->has_ple = true;
        M->ple = (cmf__gemma4_ple){(int)L, (int)P, (int)H, (float)a->rms_norm_eps, a->norm_style == CMF__NORM_GEMMA,
                                   &M->embed_pl.q, &M->model_proj.q, M->proj_norm.v};
        snprintf(what, sizeof what, "%s", m->what);
        if ((st = cmf__gemma4_ple_check(&M->ple, what))) {
            model_ext_free(M);
            return st;
        }
    }
    *out = M;
    return CMF_OK;
}

static cmf__model_ext *model_ext(const cmf__model *m) {
    const cmf__layer_ext *A0 = m->layers ? m->layers[0].ext : NULL;
    return A0 ? A0->mdl : NULL;
}

const cmf__model_ext *cmf__model_ext_of(const cmf__model *m) { return model_ext(m); }

cmf_status cmf__model_ext_bind_layer(const cmf__model *m, int64_t i, cmf__layer_weights *L) {
    char nm[256];
    cmf_status st;
    const cmf__arch *a = &m->arch;
    cmf__layer_ext *A = calloc(1, sizeof *A);
    if (!A) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", m->what);
    A->g4.layer_scalar = 1.0f;
    bool any = false;
    if (i == 0) {
        if ((st = bind_model_level(m, &A->mdl))) goto fail;
        A->owns_mdl = true;
        any |= A->mdl != NULL;
    } else {
        A->mdl = model_ext(m);
    }
    if (L->has_router) {
        if ((st = bind_moe(m, i, A))) goto fail;
        any = true;
    }
    if (L->kind == CMF__LAYER_LINEAR) {
        if ((st = bind_gdn(m, i, A))) goto fail;
        any = true;
    }
    if (cmf__model_tensor(m, NAME("model.layers.%lld.per_layer_input_gate.weight", (long long)i))) {
        cmf__model_ext *M = A->mdl;
        if (!M || !M->has_ple) {
            st = cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s' present but arch.hidden_size_per_layer_input is not set",
                            m->what, nm);
            goto fail;
        }
        const int64_t H = a->hidden_size, P = M->ple.per_layer;
        if ((st = cmf__model_bind_mat(m, nm, P, H, true, &A->pl_gate)) ||
            (st = cmf__model_bind_mat(m, NAME("model.layers.%lld.per_layer_projection.weight", (long long)i), H, P, true,
                                      &A->pl_proj)) ||
            (st = cmf__model_bind_vec(m, NAME("model.layers.%lld.post_per_layer_input_norm.weight", (long long)i), H,
                                      true, &A->pl_post)))
            goto fail;
        A->g4.gate = &A->pl_gate.q;
        A->g4.projection = &A->pl_proj.q;
        A->g4.post_norm = A->pl_post.v;
        A->has_g4 = true;
        any = true;
    }
    cmf__wvec scalar;
    if ((st = bind_flat(m, NAME("model.layers.%lld.layer_scalar", (long long)i), 1, false, &scalar))) goto fail;
    if (scalar.v) {
        A->g4.layer_scalar = scalar.v[0];
        cmf__wvec_release(&scalar);
        A->has_g4 |= A->g4.layer_scalar != 1.0f;
        any = true;
    }
    if (!any) {
        layer_ext_free(A);
        return CMF_OK;
    }
    L->ext = A;
    L->ext_free = layer_ext_free;
    return CMF_OK;
fail:
    layer_ext_free(A);
    return st;
}

