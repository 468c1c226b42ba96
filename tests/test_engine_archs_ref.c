/* test_engine_archs_ref.c — the MoE / DeltaNet / Gemma-4 / YaRN operators in
 * context: a minimal token-by-token forward built from them (plus plain
 * attention written here) runs the six checkpoints from safetensors and
 * config.json against ref_logits.f32 and the greedy continuation, apart from
 * the engine (tests/cli/engine_archs.sh checks the engine itself). */
#include "harness.h"

#include "compute/deltanet.h"
#include "compute/gemma4.h"
#include "compute/moe.h"
#include "compute/rope_ext.h"
#include "util/half.h"
#include <jansson.h>
#include <stdlib.h>

#define MAX_T 40

/* ---- safetensors (bf16/f32) into f32 ---------------------------------- */
typedef struct st_tensor {
    char name[160];
    int ndim;
    int64_t shape[4];
    float *data;
} st_tensor;

typedef struct st_file { int n; st_tensor *t; } st_file;

static bool st_load(const char *path, st_file *f) {
    size_t len = 0;
    char *raw = harness_read_file(path, &len);
    if (!raw || len < 8) { free(raw); return false; }
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)(uint8_t)raw[i] << (8 * i);
    json_error_t jerr;
    json_t *hdr = json_loadb(raw + 8, (size_t)hlen, 0, &jerr);
    if (!hdr) { free(raw); return false; }
    const uint8_t *base = (const uint8_t *)raw + 8 + hlen;
    f->n = 0;
    f->t = calloc(json_object_size(hdr), sizeof(st_tensor));
    const char *key;
    json_t *v;
    json_object_foreach(hdr, key, v) {
        if (!strcmp(key, "__metadata__")) continue;
        st_tensor *t = &f->t[f->n++];
        snprintf(t->name, sizeof t->name, "%s", key);
        json_t *shape = json_object_get(v, "shape");
        t->ndim = (int)json_array_size(shape);
        int64_t n = 1;
        for (int i = 0; i < t->ndim; i++) { t->shape[i] = json_integer_value(json_array_get(shape, i)); n *= t->shape[i]; }
        size_t a = (size_t)json_integer_value(json_array_get(json_object_get(v, "data_offsets"), 0));
        const char *dt = json_string_value(json_object_get(v, "dtype"));
        t->data = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n; i++) {
            if (!strcmp(dt, "BF16")) t->data[i] = cmf__bf16_to_f32((uint16_t)(base[a + 2 * i] | base[a + 2 * i + 1] << 8));
            else memcpy(&t->data[i], base + a + 4 * i, 4);
        }
    }
    json_decref(hdr);
    free(raw);
    return true;
}

static void st_free(st_file *f) {
    for (int i = 0; i < f->n; i++) free(f->t[i].data);
    free(f->t);
}

static st_tensor *st_get(st_file *f, const char *fmt, ...) {
    char name[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

/* Owned f32 matrices as qmat views (kept in a list freed at the end). */
typedef struct mats { int n; float *data[4096]; cmf__qmat *q[4096]; } mats;

static const cmf__qmat *mat_view(mats *m, float *data, bool owned, int64_t rows, int64_t cols) {
    cmf__qmat *q = calloc(1, sizeof *q);
    uint64_t shape[2] = {(uint64_t)rows, (uint64_t)cols};
    cmf_status st = cmf__qmat_init(q, CMF_DTYPE_F32, (const uint8_t *)data, sizeof(float) * (uint64_t)(rows * cols), 2,
                                   shape, "ref");
    CHECK_EQ_INT(st, CMF_OK);
    m->q[m->n] = q;
    m->data[m->n++] = owned ? data : NULL;
    return q;
}

static const cmf__qmat *mat_of(mats *m, st_tensor *t) {
    if (!t) return NULL;
    int64_t cols = 1;
    for (int i = 1; i < t->ndim; i++) cols *= t->shape[i];
    return mat_view(m, t->data, false, t->shape[0], cols);
}

static void mats_free(mats *m) {
    for (int i = 0; i < m->n; i++) { cmf__qmat_free(m->q[i]); free(m->q[i]); free(m->data[i]); }
}

/* ---- the model ---------------------------------------------------------- */
typedef struct ref_layer {
    bool linear, sliding, moe;
    int hd, rot;           /* head dim; rotated dims (leading, half split) or hd for table-driven */
    float inv[64], rscale; /* rope table over rot/2 pairs, cos/sin scale */
    const cmf__qmat *wq, *wk, *wv, *wo;
    const float *bq, *bk, *bv, *bo, *qn, *kn, *sinks, *in_norm, *post_attn, *pre_ff, *post_ff;
    bool gated;
    cmf__moe_expert mlp;
    cmf__moe_expert experts[16], shared;
    cmf__moe_layer moel;
    cmf__gdn_weights gw;
    cmf__gdn_state gs;
    cmf__gemma4_layer g4;
    float *kc, *vc; /* [MAX_T][nkv·hd] */
} ref_layer;

typedef struct ref_model {
    int H, L, nh, nkv, V, window;
    float eps, embed_scale, attn_scale;
    bool plus1, gemma4;
    cmf__act_params act;
    const float *embed, *final_norm;
    const cmf__qmat *lm_head;
    ref_layer *ly;
    cmf__gdn_dims gd;
    cmf__gemma4_ple ple;
    st_file st;
    mats m;
} ref_model;

static double cfg_num(json_t *o, const char *k, double def) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : def;
}

static void norm(const ref_model *M, const float *x, const float *w, float *out, int n) {
    cmf__archs_rmsnorm(x, w, M->plus1, M->eps, out, n);
}

static bool model_load(ref_model *M, const char *fam) {
    char path[256];
    snprintf(path, sizeof path, "hf-models/%s/config.json", fam);
    json_error_t jerr;
    json_t *cfg = json_load_file(harness_fixture_path(path), 0, &jerr);
    snprintf(path, sizeof path, "hf-models/%s/model.safetensors", fam);
    if (!cfg || !st_load(harness_fixture_path(path), &M->st)) { json_decref(cfg); return false; }
    st_file *S = &M->st;
    M->H = (int)cfg_num(cfg, "hidden_size", 0);
    M->L = (int)cfg_num(cfg, "num_hidden_layers", 0);
    M->nh = (int)cfg_num(cfg, "num_attention_heads", 0);
    M->nkv = (int)cfg_num(cfg, "num_key_value_heads", 0);
    M->V = (int)cfg_num(cfg, "vocab_size", 0);
    M->eps = (float)cfg_num(cfg, "rms_norm_eps", 1e-6);
    M->window = (int)cfg_num(cfg, "sliding_window", 0);
    M->gemma4 = !strcmp(fam, "gemma4");
    M->plus1 = !strcmp(fam, "qwen3_next");
    M->embed_scale = M->gemma4 ? sqrtf((float)M->H) : 1.0f;
    M->act = (cmf__act_params){M->gemma4 ? CMF__ACT_GELU_TANH : CMF__ACT_SILU, 1.702f, 7.0f};
    M->embed = st_get(S, "model.embed_tokens.weight")->data;
    M->final_norm = st_get(S, "model.norm.weight")->data;
    M->lm_head = mat_of(&M->m, st_get(S, "lm_head.weight"));
    M->ly = calloc((size_t)M->L, sizeof(ref_layer));
    json_t *types = json_object_get(cfg, "layer_types"), *rp = json_object_get(cfg, "rope_parameters");
    int hd0 = (int)cfg_num(cfg, "head_dim", 0);
    M->gd = (cmf__gdn_dims){M->H, (int)cfg_num(cfg, "linear_num_key_heads", 1), (int)cfg_num(cfg, "linear_num_value_heads", 1),
                            (int)cfg_num(cfg, "linear_key_head_dim", 1), (int)cfg_num(cfg, "linear_value_head_dim", 1),
                            (int)cfg_num(cfg, "linear_conv_kernel_dim", 1), M->eps};
    if (M->gemma4) {
        int P = (int)cfg_num(cfg, "hidden_size_per_layer_input", 0);
        M->ple = (cmf__gemma4_ple){M->L, P, M->H, M->eps, false,
                                   mat_of(&M->m, st_get(S, "model.embed_tokens_per_layer.weight")),
                                   mat_of(&M->m, st_get(S, "model.per_layer_model_projection.weight")),
                                   st_get(S, "model.per_layer_projection_norm.weight")->data};
        CHECK_OK(cmf__gemma4_ple_check(&M->ple, fam));
    }
    for (int l = 0; l < M->L; l++) {
        ref_layer *y = &M->ly[l];
        const char *lt = types ? json_string_value(json_array_get(types, (size_t)l)) : "full_attention";
        y->linear = !strcmp(lt, "linear_attention");
        y->sliding = !strcmp(lt, "sliding_attention");
#define T_(...) st_get(S, __VA_ARGS__)
#define V_(...) (T_(__VA_ARGS__) ? T_(__VA_ARGS__)->data : NULL)
        y->in_norm = V_("model.layers.%d.input_layernorm.weight", l);
        y->post_attn = V_("model.layers.%d.post_attention_layernorm.weight", l);
        y->pre_ff = V_("model.layers.%d.pre_feedforward_layernorm.weight", l);
        y->post_ff = V_("model.layers.%d.post_feedforward_layernorm.weight", l);
        y->hd = hd0;
        char key[16];
        snprintf(key, sizeof key, "%d", l);
        json_t *plc = json_object_get(json_object_get(cfg, "per_layer_config"), key);
        if (plc) y->hd = (int)cfg_num(plc, "head_dim", hd0);
        if (y->linear) {
            y->gw = (cmf__gdn_weights){mat_of(&M->m, T_("model.layers.%d.linear_attn.in_proj_qkvz.weight", l)),
                                       mat_of(&M->m, T_("model.layers.%d.linear_attn.in_proj_ba.weight", l)),
                                       mat_of(&M->m, T_("model.layers.%d.linear_attn.out_proj.weight", l)),
                                       V_("model.layers.%d.linear_attn.conv1d.weight", l),
                                       V_("model.layers.%d.linear_attn.A_log", l),
                                       V_("model.layers.%d.linear_attn.dt_bias", l),
                                       V_("model.layers.%d.linear_attn.norm.weight", l)};
            CHECK_OK(cmf__gdn_check(&M->gd, &y->gw, fam));
            y->gs.conv = calloc(cmf__gdn_conv_floats(&M->gd) + 1, sizeof(float));
            y->gs.S = calloc(cmf__gdn_rec_floats(&M->gd), sizeof(float));
        } else {
            y->wq = mat_of(&M->m, T_("model.layers.%d.self_attn.q_proj.weight", l));
            y->wk = mat_of(&M->m, T_("model.layers.%d.self_attn.k_proj.weight", l));
            y->wv = mat_of(&M->m, T_("model.layers.%d.self_attn.v_proj.weight", l));
            y->wo = mat_of(&M->m, T_("model.layers.%d.self_attn.o_proj.weight", l));
            y->bq = V_("model.layers.%d.self_attn.q_proj.bias", l);
            y->bk = V_("model.layers.%d.self_attn.k_proj.bias", l);
            y->bv = V_("model.layers.%d.self_attn.v_proj.bias", l);
            y->bo = V_("model.layers.%d.self_attn.o_proj.bias", l);
            y->qn = V_("model.layers.%d.self_attn.q_norm.weight", l);
            y->kn = V_("model.layers.%d.self_attn.k_norm.weight", l);
            y->sinks = V_("model.layers.%d.self_attn.sinks", l);
            y->gated = y->wq->rows == 2 * M->nh * y->hd;
            y->kc = calloc((size_t)MAX_T * M->nkv * y->hd, sizeof(float));
            y->vc = calloc((size_t)MAX_T * M->nkv * y->hd, sizeof(float));
            /* rope table */
            y->rscale = 1.0f;
            if (M->gemma4) {
                json_t *r = json_object_get(rp, lt);
                double theta = cfg_num(r, "rope_theta", 10000);
                y->rot = y->hd;
                const char *rt = json_string_value(json_object_get(r, "rope_type"));
                if (!strcmp(rt, "proportional"))
                    cmf__rope_proportional_inv_freq((float)theta, y->hd, (float)cfg_num(r, "partial_rotary_factor", 1.0), 1.0f, y->inv);
                else
                    cmf__rope_proportional_inv_freq((float)theta, y->hd, 1.0f, 1.0f, y->inv);
            } else if (!strcmp(json_string_value(json_object_get(rp, "rope_type")), "yarn")) {
                y->rot = y->hd;
                json_t *tr = json_object_get(rp, "truncate");
                cmf__rope_yarn_inv_freq((float)cfg_num(rp, "rope_theta", 10000), y->hd, (float)cfg_num(rp, "factor", 1),
                                        (float)cfg_num(rp, "original_max_position_embeddings", 4096),
                                        (float)cfg_num(rp, "beta_fast", 32), (float)cfg_num(rp, "beta_slow", 1),
                                        tr ? json_is_true(tr) : true, (float)cfg_num(rp, "attention_factor", 0), y->inv,
                                        &y->rscale);
            } else {
                y->rot = (int)(y->hd * cfg_num(rp, "partial_rotary_factor", 1.0));
                /* default rope over the leading rot dims == proportional with factor 1 at width rot */
                cmf__rope_proportional_inv_freq((float)cfg_num(rp, "rope_theta", 10000), y->rot, 1.0f, 1.0f, y->inv);
            }
        }
        /* FFN */
        st_tensor *router = T_("model.layers.%d.mlp.gate.weight", l);
        if (!router) router = T_("model.layers.%d.block_sparse_moe.gate.weight", l);
        if (!router) router = T_("model.layers.%d.mlp.router.weight", l);
        if (router) {
            int E = (int)router->shape[0];
            y->moe = true;
            cmf__moe_layer *ml = &y->moel;
            ml->hidden = M->H;
            json_t *ntp = json_object_get(cfg, "norm_topk_prob");
            bool renorm = ntp ? json_is_true(ntp) : true; /* mixtral, gpt-oss: always renormalised */
            ml->route = (cmf__moe_route_params){E, (int)cfg_num(cfg, "num_experts_per_tok", 1), renorm, false, 1.0f};
            ml->act = M->act;
            ml->router = mat_of(&M->m, router);
            ml->router_bias = V_("model.layers.%d.mlp.router.bias", l);
            st_tensor *gu = T_("model.layers.%d.mlp.experts.gate_up_proj", l);
            for (int e = 0; e < E; e++) {
                cmf__moe_expert *x = &y->experts[e];
                if (gu) { /* gpt-oss banks: [E, H, 2I] interleaved gate/up, down [E, I, H] (in, out) */
                    ml->act.kind = CMF__ACT_SWIGLU_OSS;
                    int I2 = (int)gu->shape[2], I = I2 / 2, H = M->H;
                    float *g = malloc(sizeof(float) * (size_t)I * H), *u = malloc(sizeof(float) * (size_t)I * H);
                    float *d = malloc(sizeof(float) * (size_t)I * H);
                    const float *src = gu->data + (size_t)e * H * I2;
                    const float *dn = T_("model.layers.%d.mlp.experts.down_proj", l)->data + (size_t)e * I * H;
                    for (int i = 0; i < I; i++)
                        for (int h = 0; h < H; h++) {
                            g[i * H + h] = src[h * I2 + 2 * i];
                            u[i * H + h] = src[h * I2 + 2 * i + 1];
                            d[h * I + i] = dn[i * H + h];
                        }
                    x->gate = mat_view(&M->m, g, true, I, H);
                    x->up = mat_view(&M->m, u, true, I, H);
                    x->down = mat_view(&M->m, d, true, H, I);
                    x->gate_bias = V_("model.layers.%d.mlp.experts.gate_up_proj_bias", l);
                    /* biases interleave too: split into owned copies */
                    float *gb = malloc(sizeof(float) * (size_t)I), *ub = malloc(sizeof(float) * (size_t)I);
                    for (int i = 0; i < I; i++) { gb[i] = x->gate_bias[(size_t)e * I2 + 2 * i]; ub[i] = x->gate_bias[(size_t)e * I2 + 2 * i + 1]; }
                    mat_view(&M->m, gb, true, 1, I);
                    mat_view(&M->m, ub, true, 1, I);
                    x->gate_bias = gb;
                    x->up_bias = ub;
                    x->down_bias = V_("model.layers.%d.mlp.experts.down_proj_bias", l) + (size_t)e * H;
                } else if (T_("model.layers.%d.block_sparse_moe.experts.%d.w1.weight", l, e)) {
                    x->gate = mat_of(&M->m, T_("model.layers.%d.block_sparse_moe.experts.%d.w1.weight", l, e));
                    x->up = mat_of(&M->m, T_("model.layers.%d.block_sparse_moe.experts.%d.w3.weight", l, e));
                    x->down = mat_of(&M->m, T_("model.layers.%d.block_sparse_moe.experts.%d.w2.weight", l, e));
                } else {
                    x->gate = mat_of(&M->m, T_("model.layers.%d.mlp.experts.%d.gate_proj.weight", l, e));
                    x->up = mat_of(&M->m, T_("model.layers.%d.mlp.experts.%d.up_proj.weight", l, e));
                    x->down = mat_of(&M->m, T_("model.layers.%d.mlp.experts.%d.down_proj.weight", l, e));
                }
            }
            ml->experts = y->experts;
            if (T_("model.layers.%d.mlp.shared_expert.gate_proj.weight", l)) {
                y->shared = (cmf__moe_expert){mat_of(&M->m, T_("model.layers.%d.mlp.shared_expert.gate_proj.weight", l)),
                                              mat_of(&M->m, T_("model.layers.%d.mlp.shared_expert.up_proj.weight", l)),
                                              mat_of(&M->m, T_("model.layers.%d.mlp.shared_expert.down_proj.weight", l)),
                                              NULL, NULL, NULL};
                ml->shared = &y->shared;
                ml->shared_gate = mat_of(&M->m, T_("model.layers.%d.mlp.shared_expert_gate.weight", l));
            }
            CHECK_OK(cmf__moe_layer_check(ml, fam));
        } else {
            y->mlp = (cmf__moe_expert){mat_of(&M->m, T_("model.layers.%d.mlp.gate_proj.weight", l)),
                                       mat_of(&M->m, T_("model.layers.%d.mlp.up_proj.weight", l)),
                                       mat_of(&M->m, T_("model.layers.%d.mlp.down_proj.weight", l)), NULL, NULL, NULL};
        }
        if (M->gemma4) {
            y->g4 = (cmf__gemma4_layer){mat_of(&M->m, T_("model.layers.%d.per_layer_input_gate.weight", l)),
                                        mat_of(&M->m, T_("model.layers.%d.per_layer_projection.weight", l)),
                                        V_("model.layers.%d.post_per_layer_input_norm.weight", l),
                                        T_("model.layers.%d.layer_scalar", l) ? V_("model.layers.%d.layer_scalar", l)[0] : 1.0f};
        }
#undef T_
#undef V_
    }
    M->attn_scale = M->gemma4 ? 1.0f : 0.0f; /* 0: 1/sqrt(hd) */
    json_decref(cfg);
    return true;
}

static void model_free(ref_model *M) {
    for (int l = 0; l < M->L; l++) {
        free(M->ly[l].kc); free(M->ly[l].vc); free(M->ly[l].gs.conv); free(M->ly[l].gs.S);
    }
    free(M->ly);
    mats_free(&M->m);
    st_free(&M->st);
}

static void matvec_b(const cmf__qmat *w, const float *b, const float *x, float *y) {
    cmf__archs_matvec(NULL, w, x, y);
    if (b) for (int64_t i = 0; i < w->rows; i++) y[i] += b[i];
}

/* One token at `pos`; logits[V]. */
static void forward(ref_model *M, int token, int pos, float *logits) {
    int H = M->H;
    static float x[512], h[512], a[512], q[1024], k[512], v[512], o[512], sc[MAX_T + 1], ple[1024], scratch[65536];
    for (int i = 0; i < H; i++) x[i] = M->embed[(size_t)token * H + i] * M->embed_scale;
    if (M->gemma4) CHECK_OK(cmf__gemma4_ple_inputs(&M->ple, NULL, token, x, ple, scratch));
    for (int l = 0; l < M->L; l++) {
        ref_layer *y = &M->ly[l];
        norm(M, x, y->in_norm, h, H);
        if (y->linear) {
            cmf__gdn_step(&M->gd, &y->gw, &y->gs, NULL, h, a, scratch);
        } else {
            int hd = y->hd, nh = M->nh, nkv = M->nkv;
            float gate[1024];
            matvec_b(y->wq, y->bq, h, q);
            if (y->gated) /* per head [query | gate] */
                for (int hh = 0; hh < nh; hh++) {
                    memcpy(gate + hh * hd, q + (2 * hh + 1) * hd, sizeof(float) * hd);
                    memmove(q + hh * hd, q + 2 * hh * hd, sizeof(float) * hd);
                }
            matvec_b(y->wk, y->bk, h, k);
            matvec_b(y->wv, y->bv, h, v);
            if (y->qn) {
                for (int hh = 0; hh < nh; hh++) norm(M, q + hh * hd, y->qn, q + hh * hd, hd);
                for (int hh = 0; hh < nkv; hh++) norm(M, k + hh * hd, y->kn, k + hh * hd, hd);
            }
            if (M->gemma4) cmf__gemma4_vnorm(v, nkv, hd, M->eps);
            for (int hh = 0; hh < nh; hh++) cmf__rope_apply_freqs(q + hh * hd, 1, y->rot, pos, y->inv, y->rscale);
            for (int hh = 0; hh < nkv; hh++) cmf__rope_apply_freqs(k + hh * hd, 1, y->rot, pos, y->inv, y->rscale);
            memcpy(y->kc + (size_t)pos * nkv * hd, k, sizeof(float) * nkv * hd);
            memcpy(y->vc + (size_t)pos * nkv * hd, v, sizeof(float) * nkv * hd);
            float scale = M->attn_scale > 0 ? M->attn_scale : 1.0f / sqrtf((float)hd);
            int lo = y->sliding && M->window > 0 && pos - M->window + 1 > 0 ? pos - M->window + 1 : 0;
            for (int hh = 0; hh < nh; hh++) {
                int kh = hh / (nh / nkv);
                float mx = -INFINITY;
                for (int t = lo; t <= pos; t++) {
                    float s = 0;
                    for (int i = 0; i < hd; i++) s += q[hh * hd + i] * y->kc[((size_t)t * nkv + kh) * hd + i];
                    sc[t] = s * scale;
                    if (sc[t] > mx) mx = sc[t];
                }
                if (y->sinks && y->sinks[hh] > mx) mx = y->sinks[hh];
                double sum = y->sinks ? exp(y->sinks[hh] - mx) : 0.0;
                for (int t = lo; t <= pos; t++) { sc[t] = expf(sc[t] - mx); sum += sc[t]; }
                for (int i = 0; i < hd; i++) {
                    double acc = 0;
                    for (int t = lo; t <= pos; t++) acc += sc[t] * y->vc[((size_t)t * nkv + kh) * hd + i];
                    o[hh * hd + i] = (float)(acc / sum);
                }
            }
            if (y->gated)
                for (int i = 0; i < nh * hd; i++) o[i] *= cmf__act_sigmoid(gate[i]);
            matvec_b(y->wo, y->bo, o, a);
        }
        if (M->gemma4) {
            norm(M, a, y->post_attn, a, H);
            for (int i = 0; i < H; i++) x[i] += a[i];
            norm(M, x, y->pre_ff, h, H);
            cmf__moe_ffn(&y->mlp, &M->act, NULL, h, a, scratch);
            norm(M, a, y->post_ff, a, H);
            for (int i = 0; i < H; i++) x[i] += a[i];
            cmf__gemma4_layer_tail(&M->ple, &y->g4, &M->act, NULL, ple + (size_t)l * M->ple.per_layer, x, scratch);
        } else {
            for (int i = 0; i < H; i++) x[i] += a[i];
            norm(M, x, y->post_attn, h, H);
            if (y->moe) cmf__moe_forward(&y->moel, NULL, NULL, h, a, scratch, NULL);
            else cmf__moe_ffn(&y->mlp, &M->act, NULL, h, a, scratch);
            for (int i = 0; i < H; i++) x[i] += a[i];
        }
    }
    norm(M, x, M->final_norm, h, H);
    cmf__archs_matvec(NULL, M->lm_head, h, logits);
}

static void parity(const char *fam) {
    if (!harness_fixtures()) SKIP("fixtures absent (CMF_FIXTURES)");
    char path[256];
    snprintf(path, sizeof path, "hf-models/%s/ref.json", fam);
    json_error_t jerr;
    json_t *ref = json_load_file(harness_fixture_path(path), 0, &jerr);
    if (!ref) SKIP("hf-models fixture absent");
    ref_model M;
    memset(&M, 0, sizeof M);
    if (!model_load(&M, fam)) { json_decref(ref); SKIP("hf-models checkpoint unreadable"); }
    snprintf(path, sizeof path, "hf-models/%s/ref_logits.f32", fam);
    size_t len = 0;
    float *want = (float *)harness_read_file(harness_fixture_path(path), &len);
    json_t *ids = json_object_get(ref, "input_ids"), *greedy = json_object_get(ref, "greedy");
    int T = (int)json_array_size(ids);
    CHECK_EQ_INT(len, sizeof(float) * (size_t)T * M.V);
    float *logits = malloc(sizeof(float) * (size_t)M.V);
    double worst = 0;
    int next = 0;
    for (int t = 0; t < T; t++) {
        forward(&M, (int)json_integer_value(json_array_get(ids, (size_t)t)), t, logits);
        double mx = 0, err = 0;
        for (int i = 0; i < M.V; i++) {
            mx = fmax(mx, fabs(want[(size_t)t * M.V + i]));
            err = fmax(err, fabs(logits[i] - want[(size_t)t * M.V + i]));
        }
        worst = fmax(worst, err / mx);
    }
    /* f32 against transformers' f32 on the same bf16 weights: ~1e-6 is
     * rounding; 1e-4 leaves room for summation order yet catches any wrong
     * variant (those move logits by percents, see the fixture README). */
    CHECK(worst <= 1e-4);
    printf("  %s: max relative logit error %.3g\n", fam, worst);
    /* greedy continuation, token by token through the same caches */
    for (int j = 0; j < (int)json_array_size(greedy); j++) {
        next = 0;
        for (int i = 1; i < M.V; i++)
            if (logits[i] > logits[next]) next = i;
        CHECK_EQ_INT(next, json_integer_value(json_array_get(greedy, (size_t)j)));
        if (T + j + 1 >= MAX_T) break;
        forward(&M, next, T + j, logits);
    }
    free(logits);
    free(want);
    json_decref(ref);
    model_free(&M);
}

TEST(parity_qwen2_moe) { parity("qwen2_moe"); }
TEST(parity_qwen3_moe) { parity("qwen3_moe"); }
TEST(parity_mixtral) { parity("mixtral"); }
TEST(parity_gpt_oss) { parity("gpt_oss"); }
TEST(parity_gemma4) { parity("gemma4"); }
TEST(parity_qwen3_next) { parity("qwen3_next"); }

int main(void) {
    RUN(parity_qwen2_moe);
    RUN(parity_qwen3_moe);
    RUN(parity_mixtral);
    RUN(parity_gpt_oss);
    RUN(parity_gemma4);
    RUN(parity_qwen3_next);
    return harness_done();
}
