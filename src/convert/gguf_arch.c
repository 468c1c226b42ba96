/* gguf_arch.c — GGUF metadata (general.architecture and the <arch>.* keys)
 * onto the header `arch` block of docs/ARCH_HEADER.md, for llama (incl.
 * mistral- and mixtral-style files), qwen2, qwen3, qwen2moe, qwen3moe,
 * gemma2, gemma3 and phi3. Values llama.cpp keeps implicit (gemma's
 * embedding scale, sliding patterns, attention scale) are written out. */
#include "convert/gguf.h"
#include "model/arch.h"
#include "util/arith.h"
#include "util/error.h"
#include "util/half.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The decimal with the fewest digits that reads back as the same f32: GGUF
 * stores f32, so 1e-6 comes back as 9.99999997e-07 unless shortened. */
static double short_f32(double v)
{
    float f = (float)v;
    char buf[40];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f) return d;
    }
    return (double)f;
}

static bool has(const cmf__gguf *g, const char *arch, const char *key)
{
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return cmf__gguf_find_kv(g, k) != NULL;
}

/* <arch>.<key> as an unsigned integer; an array (per-layer values) gives
 * its largest element. */
/* The arch field a GGUF key's value lands in (what --set names), for the
 * keys whose absence gets a default value. */
static const char *set_key_of(const char *key)
{
    static const char *const map[][2] = {
        {"attention.head_count_kv", "num_kv_heads"},   {"attention.layer_norm_rms_epsilon", "rms_norm_eps"},
        {"rope.freq_base", "rope_theta"},              {"attention.key_length", "head_dim"},
        {"rope.dimension_count", "partial_rotary_factor"}, {"rope.freq_base_swa", "rope_local_base_freq"},
        {"rope.scaling.yarn_beta_fast", "rope_scaling"}, {"rope.scaling.yarn_beta_slow", "rope_scaling"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(map[i][0], key)) return map[i][1];
    return NULL;
}

/* Notes in `filled` (may be NULL) that GGUF key k was absent and `v` was
 * used: {k: {"value": v, "set": arch field}}. Only keys with a mapped field
 * (the others default to "absent": no softcapping, no experts). */
static void note_default(json_t *filled, const char *key, const char *k, json_t *v)
{
    const char *field = set_key_of(key);
    if (!filled || !field) return (void)json_decref(v);
    json_object_set_new(filled, k, json_pack("{s:o, s:s}", "value", v, "set", field));
}

static cmf_status get_u(json_t *filled, const cmf__gguf *g, const char *arch, const char *key, bool required,
                        uint64_t def, uint64_t *out)
{
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    const cmf__gguf_kv *kv = cmf__gguf_find_kv(g, k);
    if (!kv) {
        if (required)
            return cmf__error(CMF_ERR_CONFIG, "%s: metadata key '%s' missing (needed for the arch header)", g->path, k);
        *out = def;
        note_default(filled, key, k, json_integer((json_int_t)def));
        return CMF_OK;
    }
    if (kv->type == CMF_GGUF_ARRAY && kv->arr_type != CMF_GGUF_STRING && kv->arr_type != CMF_GGUF_F32 &&
        kv->arr_type != CMF_GGUF_F64 && kv->arr_n > 0) {
        int64_t m = 0;
        for (uint64_t i = 0; i < kv->arr_n; i++) {
            int64_t v = cmf__gguf_arr_int(kv, i);
            if (v > m) m = v;
        }
        *out = (uint64_t)m;
        return CMF_OK;
    }
    cmf_status st = cmf__gguf_get_uint(g, k, out);
    if (!st && *out > (uint64_t)INT64_MAX) /* the header holds signed 64-bit integers */
        return cmf__error(CMF_ERR_CONFIG, "%s: metadata key '%s' at 0x%llx: %llu out of range", g->path, k,
                          (unsigned long long)kv->off, (unsigned long long)*out);
    return st;
}

static cmf_status get_f(json_t *filled, const cmf__gguf *g, const char *arch, const char *key, double def,
                        double *out)
{
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    if (!cmf__gguf_find_kv(g, k)) {
        *out = def;
        note_default(filled, key, k, json_real(def));
        return CMF_OK;
    }
    cmf_status st = cmf__gguf_get_num(g, k, out);
    if (!st) *out = short_f32(*out);
    return st;
}

static bool str_is(const cmf__gguf *g, const char *key, const char *want)
{
    const char *s;
    uint64_t n;
    const cmf__gguf_kv *kv = cmf__gguf_find_kv(g, key);
    if (!kv || kv->type != CMF_GGUF_STRING) return false;
    cmf__gguf_get_str(g, key, &s, &n);
    return n == strlen(want) && memcmp(s, want, n) == 0;
}

static void set_int(json_t *o, const char *k, uint64_t v) { json_object_set_new(o, k, json_integer((json_int_t)v)); }
static void set_num(json_t *o, const char *k, double v) { json_object_set_new(o, k, json_real(v)); }
static void set_str(json_t *o, const char *k, const char *v) { json_object_set_new(o, k, json_string(v)); }

typedef struct arch_desc {
    const char *gguf;      /* general.architecture */
    const char *hf;        /* arch_name written */
    bool gemma;            /* sandwich norms, gelu_tanh, sqrt(hidden) embedding scale */
    int swa_pattern;       /* >0: layer il is sliding when il % pattern < pattern - 1 */
} arch_desc;

static const arch_desc archs[] = {
    {"llama", "llama", false, 0},    {"qwen2", "qwen2", false, 0},
    {"qwen3", "qwen3", false, 0},    {"qwen2moe", "qwen2_moe", false, 0},
    {"qwen3moe", "qwen3_moe", false, 0}, {"gemma2", "gemma2", true, 2},
    {"gemma3", "gemma3_text", true, 6},  {"phi3", "phi3", false, 0},
};

/* The supported architecture of the file, or ERR_CONFIG naming it. */
static cmf_status find_arch(const cmf__gguf *g, const arch_desc **out, char *name, size_t cap)
{
    const char *s;
    uint64_t n;
    cmf_status st = cmf__gguf_get_str(g, "general.architecture", &s, &n);
    if (st) return cmf__error_prefix(CMF_ERR_CONFIG, "architecture");
    snprintf(name, cap, "%.*s", (int)(n < cap ? n : cap - 1), s);
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(archs[i].gguf, name) == 0) {
            *out = &archs[i];
            return CMF_OK;
        }
    return cmf__error(CMF_ERR_CONFIG,
                      "%s: general.architecture '%s' not supported (llama, qwen2, qwen3, qwen2moe, qwen3moe, gemma2, gemma3, phi3)",
                      g->path, name);
}

cmf_status cmf__gguf_arch_name(const cmf__gguf *g, char *name, size_t cap, bool *undo_rope_permute)
{
    const arch_desc *a;
    cmf_status st = find_arch(g, &a, name, cap);
    /* llama.cpp permutes q/k rows only for rope "normal" (interleaved) arches
     * of this set: llama and its mistral/mixtral variants. */
    if (!st) *undo_rope_permute = strcmp(a->gguf, "llama") == 0;
    return st;
}

/* llama.cpp keeps llama 3.x rope scaling only as the per-frequency factor
 * tensor rope_freqs.weight (1 for high frequencies, `factor` for low ones,
 * 1 / ((1 - s) / factor + s) between, s = (L / wavelen - lo) / (hi - lo)).
 * The formula depends on L / lo and L / hi only, so with Meta's lo = 1,
 * hi = 4 the smooth entries give L (or the class boundaries bound it);
 * the result is accepted only when it reproduces every factor. */
static cmf_status llama3_rope(const cmf__gguf *g, const cmf__gguf_tensor *t, double theta, uint64_t rope_dim,
                              json_t **out)
{
    *out = NULL;
    uint64_t n = rope_dim / 2;
    if (t->type != CMF_GGML_F32 || t->ndim != 1 || t->ne[0] != n || n == 0 || n > 4096)
        return cmf__error(CMF_ERR_CONFIG, "%s: tensor 'rope_freqs.weight' at 0x%llx: expected %llu f32 values", g->path,
                          (unsigned long long)t->info_off, (unsigned long long)n);
    double f[4096], factor = 0;
    for (uint64_t i = 0; i < n; i++) {
        f[i] = cmf__bits_f32(cmf__rd32(t->data + 4 * i));
        if (!(f[i] > 0) || f[i] > 1e6)
            return cmf__error(CMF_ERR_CONFIG, "%s: tensor 'rope_freqs.weight': factor %g not allowed", g->path, f[i]);
        if (f[i] > factor) factor = f[i];
    }
    if (factor <= 1.0) return CMF_OK; /* no scaling */
    const double lo = 1.0, hi = 4.0, two_pi = 6.283185307179586;
    double ctx_sum = 0, ctx_min = 0, ctx_max = 1e30;
    int n_smooth = 0;
    for (uint64_t i = 0; i < n; i++) {
        double wavelen = two_pi * pow(theta, (double)(2 * i) / (double)rope_dim);
        if (f[i] <= 1.0 + 1e-6) { /* high frequency: wavelen < L / hi */
            if (wavelen * hi > ctx_min) ctx_min = wavelen * hi;
        } else if (f[i] >= factor * (1 - 1e-6)) { /* low frequency: wavelen > L / lo */
            if (wavelen * lo < ctx_max) ctx_max = wavelen * lo;
        } else {
            double sm = (1.0 / f[i] - 1.0 / factor) / (1.0 - 1.0 / factor);
            ctx_sum += (sm * (hi - lo) + lo) * wavelen;
            n_smooth++;
        }
    }
    double ctx = n_smooth ? ctx_sum / n_smooth : 0;
    if (!n_smooth) { /* any L between the bounds; prefer a power of two */
        if (!(ctx_min < ctx_max)) goto bad;
        ctx = 1;
        while (ctx <= ctx_min) ctx *= 2;
        if (ctx >= ctx_max) ctx = (ctx_min + ctx_max) / 2;
    }
    if (fabs(ctx - floor(ctx + 0.5)) < 1e-3 * ctx) ctx = floor(ctx + 0.5);
    for (uint64_t i = 0; i < n; i++) {
        double wavelen = two_pi * pow(theta, (double)(2 * i) / (double)rope_dim), want;
        if (wavelen < ctx / hi) want = 1.0;
        else if (wavelen > ctx / lo) want = factor;
        else {
            double sm = (ctx / wavelen - lo) / (hi - lo);
            want = 1.0 / ((1 - sm) / factor + sm);
        }
        if (fabs(want - f[i]) > 1e-4 * f[i]) goto bad;
    }
    *out = json_object();
    json_object_set_new(*out, "rope_type", json_string("llama3"));
    json_object_set_new(*out, "factor", json_real(short_f32(factor)));
    json_object_set_new(*out, "low_freq_factor", json_real(lo));
    json_object_set_new(*out, "high_freq_factor", json_real(hi));
    json_object_set_new(*out, "original_max_position_embeddings", json_integer((json_int_t)ctx));
    return CMF_OK;
bad:
    return cmf__error(CMF_ERR_UNSUPPORTED,
                      "%s: tensor 'rope_freqs.weight' at 0x%llx: factors do not follow llama3 rope scaling (low 1, high 4)",
                      g->path, (unsigned long long)t->info_off);
}

/* The runtime's validation of the block about to be written (limits,
 * types, size products): a header the runtime would refuse is never
 * written. */
static cmf_status check_arch(const cmf__gguf *g, const json_t *arch)
{
    char label[600];
    snprintf(label, sizeof label, "%s: the arch block made from it", g->path);
    return cmf__arch_check(arch, label);
}

cmf_status cmf__gguf_arch(const cmf__gguf *g, json_t **out) { return cmf__gguf_arch_filled(g, out, NULL); }

/* Inside: every metadata read notes a default it fills into `filled`. */
#define get_u(...) get_u(filled, __VA_ARGS__)
#define get_f(...) get_f(filled, __VA_ARGS__)
cmf_status cmf__gguf_arch_filled(const cmf__gguf *g, json_t **out, json_t *filled)
{
    *out = NULL;
    const arch_desc *a;
    char an[64];
    cmf_status st = find_arch(g, &a, an, sizeof an);
    if (st) return st;
    uint64_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, ctx, rope_dim, n_expert, n_expert_used;
    double eps, theta;
    if ((st = get_u(g, an, "block_count", true, 0, &n_layer)) ||
        (st = get_u(g, an, "embedding_length", true, 0, &n_embd)) ||
        (st = get_u(g, an, "feed_forward_length", false, 0, &n_ff)) ||
        (st = get_u(g, an, "attention.head_count", true, 0, &n_head)) ||
        (st = get_u(g, an, "attention.head_count_kv", false, n_head, &n_head_kv)) ||
        (st = get_u(g, an, "context_length", false, 0, &ctx)) ||
        (st = get_u(g, an, "expert_count", false, 0, &n_expert)) ||
        (st = get_u(g, an, "expert_used_count", false, 0, &n_expert_used)) ||
        (st = get_f(g, an, "attention.layer_norm_rms_epsilon", 1e-6, &eps)) ||
        (st = get_f(g, an, "rope.freq_base", 10000.0, &theta)))
        return st;
    if (n_layer == 0 || n_head == 0 || n_head_kv == 0 || n_embd == 0)
        return cmf__error(CMF_ERR_CONFIG, "%s: %s.block_count / embedding_length / attention.head_count must be positive",
                          g->path, an);
    if (n_layer > CMF__ARCH_MAX_LAYERS) /* before the per-layer arrays below */
        return cmf__error(CMF_ERR_CONFIG, "%s: %s.block_count: %llu layers, more than the %d cmf supports", g->path, an,
                          (unsigned long long)n_layer, CMF__ARCH_MAX_LAYERS);
    /* rope.dimension_count is a count of dimensions but lands in the header
     * as a factor (rope_dim / head_dim): its absence is noted as the factor
     * used, 1.0, so the printed --set partial_rotary_factor=VALUE advice is
     * a value that field accepts. (get_u) skips the macro's noting. */
    if ((st = get_u(g, an, "attention.key_length", false, n_embd / n_head, &head_dim)) ||
        (st = (get_u)(NULL, g, an, "rope.dimension_count", false, head_dim, &rope_dim)))
        return st;
    if (!has(g, an, "rope.dimension_count")) {
        char k[160];
        snprintf(k, sizeof k, "%s.rope.dimension_count", an);
        note_default(filled, "rope.dimension_count", k, json_real(1.0));
    }
    if (head_dim == 0) return cmf__error(CMF_ERR_CONFIG, "%s: %s head dim is 0", g->path, an);
    uint64_t vocab = 0;
    const cmf__gguf_tensor *emb = cmf__gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->ndim != 2)
        return cmf__error(CMF_ERR_CONFIG, "%s: tensor 'token_embd.weight' missing or not 2-D", g->path);
    vocab = emb->ne[1];

    json_t *o = json_object();
    if (!o) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", g->path);
    set_str(o, "arch_name", strcmp(a->gguf, "llama") == 0 && n_expert > 0 ? "mixtral" : a->hf);
    set_int(o, "hidden_size", n_embd);
    set_int(o, "intermediate_size", n_ff);
    set_int(o, "num_layers", n_layer);
    set_int(o, "num_attention_heads", n_head);
    set_int(o, "num_kv_heads", n_head_kv);
    set_int(o, "head_dim", head_dim);
    set_int(o, "vocab_size", vocab);
    set_int(o, "max_position_embeddings", ctx);
    json_object_set_new(o, "tie_word_embeddings", json_boolean(!cmf__gguf_find_tensor(g, "output.weight")));
    set_num(o, "rms_norm_eps", eps);
    /* llama.cpp folds gemma's (1 + w) into the stored norm weights, so every
     * imported norm is plain x̂·w. */
    set_str(o, "norm_style", "qwen");
    set_str(o, "norm_placement", a->gemma ? "sandwich" : "pre");
    set_str(o, "activation", a->gemma ? "gelu_tanh" : "silu");

    uint64_t swa = 0;
    if ((st = get_u(g, an, "attention.sliding_window", false, 0, &swa))) goto fail;
    if (strncmp(a->gguf, "qwen", 4) == 0) swa = 0; /* qwen's window is off unless config says so */
    {
        /* newer llama.cpp files state the pattern: one bool per layer (true =
         * sliding) or an integer n (every n-th layer full) */
        char k[160];
        snprintf(k, sizeof k, "%s.attention.sliding_window_pattern", an);
        const cmf__gguf_kv *pat = cmf__gguf_find_kv(g, k);
        int pattern = a->swa_pattern;
        if (pat && pat->type != CMF_GGUF_ARRAY) {
            uint64_t pv;
            if ((st = cmf__gguf_get_uint(g, k, &pv))) goto fail;
            pattern = pv > 1000000 ? 0 : (int)pv;
        } else if (pat && (pat->arr_type != CMF_GGUF_BOOL || pat->arr_n != n_layer)) {
            st = cmf__error(CMF_ERR_CONFIG, "%s: key '%s' at 0x%llx: expected %llu bools", g->path, k,
                            (unsigned long long)pat->off, (unsigned long long)n_layer);
            goto fail;
        }
        json_t *lt = json_array();
        for (uint64_t il = 0; il < n_layer; il++) {
            bool sliding;
            if (pat && pat->type == CMF_GGUF_ARRAY) sliding = pat->val[il] != 0;
            else sliding = pattern > 0 ? (int)(il % (uint64_t)pattern) < pattern - 1 : true;
            json_array_append_new(lt, json_string(swa > 0 && sliding ? "SlidingAttention" : "FullAttention"));
        }
        json_object_set_new(o, "layer_types", lt);
        if (swa > 0) set_int(o, "sliding_window", swa);
    }
    set_num(o, "rope_theta", theta);
    set_num(o, "partial_rotary_factor", (double)rope_dim / (double)head_dim);
    if (swa > 0) {
        double local;
        if ((st = get_f(g, an, "rope.freq_base_swa", strcmp(a->gguf, "gemma3") == 0 ? 10000.0 : theta, &local)))
            goto fail;
        set_num(o, "rope_local_base_freq", local);
        set_num(o, "local_partial_rotary_factor", (double)rope_dim / (double)head_dim);
    }
    set_num(o, "attention_scale", 1.0 / sqrt((double)head_dim));
    set_num(o, "embedding_multiplier", a->gemma ? sqrt((double)n_embd) : 1.0);
    set_num(o, "residual_multiplier", 1.0);
    set_num(o, "logits_scaling", 1.0);
    if (a->gemma) {
        double cap;
        if ((st = get_f(g, an, "attn_logit_softcapping", 0, &cap))) goto fail;
        if (cap > 0) set_num(o, "attn_logit_softcapping", cap);
        if ((st = get_f(g, an, "final_logit_softcapping", 0, &cap))) goto fail;
        if (cap > 0) set_num(o, "final_logit_softcapping", cap);
        /* llama.cpp: the 27B models scale by (n_embd / n_head)^-0.5, the
         * others by head_dim^-0.5 (their query_pre_attn_scalar). */
        bool big = (strcmp(a->gguf, "gemma2") == 0 && n_layer == 46) ||
                   (strcmp(a->gguf, "gemma3") == 0 && n_layer == 62);
        set_num(o, "attention_scale", 1.0 / sqrt(big ? (double)(n_embd / n_head) : (double)head_dim));
    }
    if (has(g, an, "attention.scale")) {
        double sc;
        if ((st = get_f(g, an, "attention.scale", 0, &sc))) goto fail;
        if (sc > 0) set_num(o, "attention_scale", sc);
    }
    if (a->gemma) {
    }
    /* rope scaling */
    {
        char k[160];
        snprintf(k, sizeof k, "%s.rope.scaling.type", an);
        double factor;
        uint64_t orig;
        if ((st = get_f(g, an, "rope.scaling.factor", 0, &factor)) ||
            (st = get_u(g, an, "rope.scaling.original_context_length", false, 0, &orig)))
            goto fail;
        if (str_is(g, k, "linear") && factor > 0 && factor != 1.0) {
            json_t *rs = json_object();
            set_str(rs, "rope_type", "linear");
            set_num(rs, "factor", factor);
            json_object_set_new(o, "rope_scaling", rs);
        } else if (str_is(g, k, "yarn") && factor > 0) {
            double bf, bs;
            if ((st = get_f(g, an, "rope.scaling.yarn_beta_fast", 32.0, &bf)) ||
                (st = get_f(g, an, "rope.scaling.yarn_beta_slow", 1.0, &bs)))
                goto fail;
            json_t *rs = json_object();
            set_str(rs, "rope_type", "yarn");
            set_num(rs, "factor", factor);
            set_int(rs, "original_max_position_embeddings", orig ? orig : ctx);
            set_num(rs, "beta_fast", bf);
            set_num(rs, "beta_slow", bs);
            json_object_set_new(o, "rope_scaling", rs);
        } else if (cmf__gguf_find_kv(g, k) && !str_is(g, k, "none") && !(str_is(g, k, "linear") && factor == 1.0)) {
            st = cmf__error(CMF_ERR_UNSUPPORTED, "%s: key '%s': rope scaling type not supported (linear, yarn)",
                            g->path, k);
            goto fail;
        }
    }
    const cmf__gguf_tensor *rf = cmf__gguf_find_tensor(g, "rope_freqs.weight");
    if (rf) {
        json_t *rs = NULL;
        if ((st = llama3_rope(g, rf, theta, rope_dim, &rs))) goto fail;
        if (rs) json_object_set_new(o, "rope_scaling", rs);
    }
    if (has(g, an, "rope.scaling.attn_factor") || cmf__gguf_find_tensor(g, "rope_factors_long.weight")) {
        st = cmf__error(CMF_ERR_UNSUPPORTED, "%s: LongRoPE / rope attention factor not supported", g->path);
        goto fail;
    }
    if (n_expert > 0) {
        json_t *moe = json_object();
        uint64_t moe_ff = 0, sh_ff = 0;
        const cmf__gguf_tensor *t = cmf__gguf_find_tensor(g, "blk.0.ffn_gate_exps.weight");
        if ((st = get_u(g, an, "expert_feed_forward_length", false, t ? t->ne[1] : n_ff, &moe_ff)) ||
            (st = get_u(g, an, "expert_shared_feed_forward_length", false, 0, &sh_ff))) {
            json_decref(moe);
            goto fail;
        }
        set_int(moe, "num_experts", n_expert);
        set_int(moe, "top_k", n_expert_used);
        set_int(moe, "moe_intermediate_size", moe_ff);
        /* mixtral and qwen3moe renormalise the top-k weights, qwen2moe not */
        bool norm = strcmp(a->gguf, "qwen2moe") != 0;
        if (has(g, an, "expert_weights_norm")) {
            char k[160];
            snprintf(k, sizeof k, "%s.expert_weights_norm", an);
            if ((st = cmf__gguf_get_bool(g, k, &norm))) {
                json_decref(moe);
                goto fail;
            }
        }
        json_object_set_new(moe, "norm_topk_prob", json_boolean(norm));
        if (sh_ff) set_int(moe, "shared_expert_intermediate_size", sh_ff);
        json_object_set_new(o, "moe", moe);
    }
    if (!ctx) { /* no guess: the context length differs per model */
        st = cmf__error(CMF_ERR_CONFIG, "%s: metadata key '%s.context_length' missing or 0 (needed for the arch header)",
                        g->path, an);
        goto fail;
    }
    if ((st = check_arch(g, o))) goto fail;
    *out = o;
    return CMF_OK;
fail:
    json_decref(o);
    return st;
}

#undef get_u
#undef get_f

cmf_status cmf__gguf_arch_override(json_t *arch, const json_t *over)
{
    if (!json_is_object(over)) return cmf__error(CMF_ERR_ARG, "arch override must be a JSON object");
    json_t *sw = json_object_get(over, "sliding_window");
    if (json_is_integer(sw) && json_integer_value(sw) > 0 && !json_object_get(over, "layer_types")) {
        /* a window the GGUF lacked: every full layer becomes sliding, unless
         * the file already has a sliding pattern */
        json_t *lt = json_object_get(arch, "layer_types");
        bool any_sliding = false;
        for (size_t i = 0; i < json_array_size(lt); i++)
            any_sliding |= !strcmp(json_string_value(json_array_get(lt, i)), "SlidingAttention");
        if (!any_sliding)
            for (size_t i = 0; i < json_array_size(lt); i++) json_array_set_new(lt, i, json_string("SlidingAttention"));
    }
    if (json_object_update(arch, (json_t *)over)) return cmf__error(CMF_ERR_NOMEM, "arch override: out of memory");
    json_t *theta = json_object_get(arch, "rope_theta");
    if (json_object_get(arch, "sliding_window") && !json_object_get(arch, "rope_local_base_freq") && theta)
        json_object_set(arch, "rope_local_base_freq", theta);
    if (json_object_get(arch, "sliding_window") && !json_object_get(arch, "local_partial_rotary_factor") &&
        json_object_get(arch, "partial_rotary_factor"))
        json_object_set(arch, "local_partial_rotary_factor", json_object_get(arch, "partial_rotary_factor"));
    /* a new global base also moves a local base that only copied it
     * (gemma3's fixed local 10000 stays) */
    const char *an = json_string_value(json_object_get(arch, "arch_name"));
    if (json_object_get(over, "rope_theta") && !json_object_get(over, "rope_local_base_freq") &&
        json_object_get(arch, "rope_local_base_freq") && !(an && !strcmp(an, "gemma3_text")))
        json_object_set(arch, "rope_local_base_freq", theta);
    return cmf__arch_check(arch, "--set: the arch block it makes");
}
