/* arch.c — parses and validates the header `arch` block into cmf__arch, the
 * one reading of it (engine, extensions, `cmf info`, and the converters
 * before they write). Field names, defaults and limits follow
 * docs/ARCH_HEADER.md; every error names the file, the JSON path and the
 * value. A field of the wrong JSON type is an error, never a default. */
#include "model/arch.h"
#include "util/error.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static cmf_status wrong_type(const char *what, const char *path, const char *key, const char *want, const json_t *v)
{
    return cmf__error(CMF_ERR_CONFIG, "%s: header %s.%s: expected %s, found %s", what, path, key, want, json_kind(v));
}

/* obj[key]; NULL when absent or JSON null (both mean "not given"). */
static const json_t *field(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v) ? v : NULL;
}

/* An integer field in [lo, hi]. 2.0 counts as an integer (Python's JSON
 * writes some that way); 2.5, a string or a boolean do not. */
static cmf_status get_int(const json_t *obj, const char *what, const char *path, const char *key, bool required,
                          int64_t def, int64_t lo, int64_t hi, int64_t *out)
{
    const json_t *v = field(obj, key);
    *out = def;
    if (!v) {
        if (required) return cmf__error(CMF_ERR_CONFIG, "%s: header %s.%s: missing", what, path, key);
        return CMF_OK;
    }
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) && fabs(json_real_value(v)) < 9.0e15) {
        *out = (int64_t)json_real_value(v);
    } else {
        return wrong_type(what, path, key, "an integer", v);
    }
    if (*out < lo || *out > hi)
        return cmf__error(CMF_ERR_CONFIG, "%s: header %s.%s: %lld out of range [%lld, %lld]", what, path, key,
                          (long long)*out, (long long)lo, (long long)hi);
    return CMF_OK;
}

/* A finite number field. */
static cmf_status get_num(const json_t *obj, const char *what, const char *path, const char *key, double def,
                          double *out)
{
    const json_t *v = field(obj, key);
    *out = def;
    if (!v) return CMF_OK;
    if (!json_is_number(v)) return wrong_type(what, path, key, "a number", v);
    *out = json_number_value(v);
    /* the kernels compute in f32: a value past its range would become inf */
    if (!isfinite(*out) || fabs(*out) > FLT_MAX)
        return cmf__error(CMF_ERR_CONFIG, "%s: header %s.%s: %g is not a finite 32-bit float", what, path, key, *out);
    return CMF_OK;
}

static cmf_status get_bool(const json_t *obj, const char *what, const char *path, const char *key, bool def,
                           bool *out)
{
    const json_t *v = field(obj, key);
    *out = def;
    if (!v) return CMF_OK;
    if (!json_is_boolean(v)) return wrong_type(what, path, key, "true or false", v);
    *out = json_is_true(v);
    return CMF_OK;
}

static cmf_status get_str(const json_t *obj, const char *what, const char *path, const char *key, const char **out)
{
    const json_t *v = field(obj, key);
    *out = NULL;
    if (!v) return CMF_OK;
    if (!json_is_string(v)) return wrong_type(what, path, key, "a string", v);
    *out = json_string_value(v);
    return CMF_OK;
}

/* A number that must be > 0 (rope bases, epsilon, factors). */
static cmf_status positive(const char *what, const char *path, const char *key, double v)
{
    if (v > 0) return CMF_OK;
    return cmf__error(CMF_ERR_CONFIG, "%s: header %s.%s: %g must be > 0", what, path, key, v);
}

static cmf_status parse_enum(const json_t *a, const char *what, const char *key, const char *const *names, int n,
                             int def, int *out)
{
    const char *s;
    cmf_status st = get_str(a, what, "arch", key, &s);
    if (st) return st;
    *out = def;
    if (!s) return CMF_OK;
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return CMF_OK;
        }
    return cmf__error(CMF_ERR_CONFIG, "%s: header arch.%s: unknown '%s'", what, key, s);
}

/* Reads an int array of n_layer entries into out (which holds defaults). */
static cmf_status layer_ints(const json_t *a, const char *what, const char *key, int64_t n, int64_t lo, int64_t hi,
                             int64_t *out)
{
    const json_t *v = field(a, key);
    if (!v) return CMF_OK;
    if (!json_is_array(v) || (int64_t)json_array_size(v) != n)
        return cmf__error(CMF_ERR_CONFIG, "%s: header arch.%s: expected an array of %lld integers", what, key,
                          (long long)n);
    for (int64_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, (size_t)i);
        if (!json_is_integer(e) || json_integer_value(e) < lo || json_integer_value(e) > hi)
            return cmf__error(CMF_ERR_CONFIG, "%s: header arch.%s[%lld]: expected an integer in [%lld, %lld]", what,
                              key, (long long)i, (long long)lo, (long long)hi);
        out[i] = json_integer_value(e);
    }
    return CMF_OK;
}

static const char *const ROPE_NAMES[] = {"default", "linear", "llama3", "yarn", "proportional"};

const char *cmf__rope_type_name(cmf__rope_type t)
{
    return (unsigned)t < sizeof ROPE_NAMES / sizeof *ROPE_NAMES ? ROPE_NAMES[t] : "?";
}

const char *cmf__layer_kind_name(cmf__layer_kind k)
{
    switch (k) {
    case CMF__LAYER_FULL: return "FullAttention";
    case CMF__LAYER_SLIDING: return "SlidingAttention";
    case CMF__LAYER_LINEAR: return "LinearAttention";
    }
    return "?";
}

static cmf_status parse_scaling(const json_t *a, const char *what, const char *key, cmf__rope_cfg *r)
{
    const json_t *s = field(a, key);
    if (!s) return CMF_OK;
    char path[64];
    snprintf(path, sizeof path, "arch.%s", key);
    if (!json_is_object(s)) return wrong_type(what, "arch", key, "an object", s);
    const char *type;
    cmf_status st;
    if ((st = get_str(s, what, path, "rope_type", &type))) return st;
    if (!type && (st = get_str(s, what, path, "type", &type))) return st; /* older configs spell it "type" */
    if (!type) return cmf__error(CMF_ERR_CONFIG, "%s: header %s.rope_type: missing", what, path);
    int t = -1;
    for (int i = 0; i < (int)(sizeof ROPE_NAMES / sizeof *ROPE_NAMES); i++)
        if (!strcmp(type, ROPE_NAMES[i])) t = i;
    if (t < 0) return cmf__error(CMF_ERR_CONFIG, "%s: header %s.rope_type: unknown '%s'", what, path, type);
    r->type = (cmf__rope_type)t;
    if ((st = get_num(s, what, path, "factor", 1.0, &r->factor))) return st;
    if (r->type != CMF__ROPE_DEFAULT && r->type != CMF__ROPE_PROPORTIONAL && (st = positive(what, path, "factor", r->factor)))
        return st;
    if ((st = get_num(s, what, path, "low_freq_factor", 1.0, &r->low_freq_factor))) return st;
    if ((st = get_num(s, what, path, "high_freq_factor", 4.0, &r->high_freq_factor))) return st;
    if ((st = get_num(s, what, path, "original_max_position_embeddings", 0.0, &r->orig_max_pos))) return st;
    if (r->orig_max_pos < 0 || r->orig_max_pos > (double)CMF__ARCH_MAX_POS)
        return cmf__error(CMF_ERR_CONFIG, "%s: header %s.original_max_position_embeddings: %g out of range [0, %lld]",
                          what, path, r->orig_max_pos, (long long)CMF__ARCH_MAX_POS);
    if ((st = get_num(s, what, path, "beta_fast", 32.0, &r->beta_fast))) return st;
    if ((st = get_num(s, what, path, "beta_slow", 1.0, &r->beta_slow))) return st;
    if ((st = get_num(s, what, path, "attention_factor", -1.0, &r->attention_factor))) return st;
    if ((st = get_bool(s, what, path, "truncate", true, &r->truncate))) return st;
    if (r->type == CMF__ROPE_LLAMA3 && !(r->high_freq_factor > r->low_freq_factor && r->low_freq_factor > 0 &&
                                         r->orig_max_pos > 0))
        return cmf__error(CMF_ERR_CONFIG,
                          "%s: header %s: llama3 needs high_freq_factor > low_freq_factor > 0 and "
                          "original_max_position_embeddings > 0",
                          what, path);
    return CMF_OK;
}

static cmf_status parse_rope(const json_t *a, const char *what, cmf__arch *out)
{
    cmf_status st;
    cmf__rope_cfg *rf = &out->rope_full, *rl = &out->rope_local;
    rf->type = CMF__ROPE_DEFAULT;
    rf->factor = 1.0;
    rf->truncate = true;
    rf->attention_factor = -1.0;
    if ((st = get_num(a, what, "arch", "rope_theta", 10000.0, &rf->theta)) ||
        (st = positive(what, "arch", "rope_theta", rf->theta)))
        return st;
    if ((st = get_num(a, what, "arch", "partial_rotary_factor", 1.0, &rf->partial))) return st;
    if ((st = parse_scaling(a, what, "rope_scaling", rf))) return st;
    /* sliding layers default to the full layers' base and fraction, unscaled */
    *rl = *rf;
    rl->type = CMF__ROPE_DEFAULT;
    if ((st = get_num(a, what, "arch", "rope_local_base_freq", rf->theta, &rl->theta)) ||
        (st = positive(what, "arch", "rope_local_base_freq", rl->theta)))
        return st;
    if ((st = get_num(a, what, "arch", "local_partial_rotary_factor", rf->partial, &rl->partial))) return st;
    if ((st = parse_scaling(a, what, "local_rope_scaling", rl))) return st;
    if (!(rf->partial > 0 && rf->partial <= 1))
        return cmf__error(CMF_ERR_CONFIG, "%s: header arch.partial_rotary_factor: %g not in (0, 1]", what, rf->partial);
    if (!(rl->partial > 0 && rl->partial <= 1))
        return cmf__error(CMF_ERR_CONFIG, "%s: header arch.local_partial_rotary_factor: %g not in (0, 1]", what,
                          rl->partial);
    return CMF_OK;
}

static cmf_status parse_moe(const json_t *a, const char *what, cmf__arch_moe *m)
{
    const json_t *o = field(a, "moe");
    cmf_status st;
    m->top_k = 1;
    m->routed_scaling_factor = 1.0;
    if (!o) return CMF_OK;
    if (!json_is_object(o)) return wrong_type(what, "arch", "moe", "an object", o);
    m->present = true;
    const char *p = "arch.moe";
    int64_t alt;
    if ((st = get_int(o, what, p, "num_experts", false, 0, 1, CMF__ARCH_MAX_EXPERTS, &m->num_experts)) ||
        (st = get_int(o, what, p, "num_experts_per_tok", false, 1, 1, CMF__ARCH_MAX_EXPERTS, &alt)) ||
        (st = get_int(o, what, p, "top_k", false, alt, 1, CMF__ARCH_MAX_EXPERTS, &m->top_k)))
        return st;
    if (field(o, "top_k") && field(o, "num_experts_per_tok") && alt != m->top_k)
        return cmf__error(CMF_ERR_CONFIG, "%s: header arch.moe.top_k: %lld differs from num_experts_per_tok %lld", what,
                          (long long)m->top_k, (long long)alt);
    if ((st = get_int(o, what, p, "moe_intermediate_size", false, 0, 0, CMF__ARCH_MAX_DIM, &m->moe_intermediate_size)) ||
        (st = get_int(o, what, p, "shared_expert_intermediate_size", false, 0, 0, CMF__ARCH_MAX_DIM,
                      &m->shared_expert_intermediate_size)) ||
        (st = get_bool(o, what, p, "norm_topk_prob", false, &m->norm_topk_prob)) ||
        (st = get_bool(o, what, p, "router_sigmoid", false, &m->router_sigmoid)) ||
        (st = get_num(o, what, p, "routed_scaling_factor", 1.0, &m->routed_scaling_factor)) ||
        (st = positive(what, p, "routed_scaling_factor", m->routed_scaling_factor)))
        return st;
    return CMF_OK;
}

/* Gated DeltaNet dims and gemma4 per-layer inputs, with the products the
 * binding and the recurrent state form from them. */
static cmf_status parse_extensions(const json_t *a, const char *what, cmf__arch *out)
{
    cmf_status st;
    cmf__arch_linear *g = &out->linear;
    if ((st = get_int(a, what, "arch", "linear_num_key_heads", false, 0, 0, CMF__ARCH_MAX_HEADS, &g->num_key_heads)) ||
        (st = get_int(a, what, "arch", "linear_num_value_heads", false, 0, 0, CMF__ARCH_MAX_HEADS, &g->num_value_heads)) ||
        (st = get_int(a, what, "arch", "linear_key_head_dim", false, 0, 0, CMF__ARCH_MAX_HEAD_DIM, &g->key_head_dim)) ||
        (st = get_int(a, what, "arch", "linear_value_head_dim", false, 0, 0, CMF__ARCH_MAX_HEAD_DIM, &g->value_head_dim)) ||
        (st = get_int(a, what, "arch", "linear_conv_kernel_dim", false, 0, 0, CMF__ARCH_MAX_CONV_KERNEL,
                      &g->conv_kernel_dim)))
        return st;
    /* each factor is <= 2^14, so these products fit int64 */
    if (g->num_key_heads * g->key_head_dim > CMF__ARCH_MAX_DIM || g->num_value_heads * g->value_head_dim > CMF__ARCH_MAX_DIM)
        return cmf__error(CMF_ERR_CONFIG,
                          "%s: header arch: linear attention widths %lld x %lld (keys) and %lld x %lld (values) must "
                          "each be <= %lld",
                          what, (long long)g->num_key_heads, (long long)g->key_head_dim, (long long)g->num_value_heads,
                          (long long)g->value_head_dim, (long long)CMF__ARCH_MAX_DIM);
    if (g->num_value_heads * g->key_head_dim * g->value_head_dim > CMF__ARCH_MAX_LINEAR_STATE)
        return cmf__error(CMF_ERR_CONFIG,
                          "%s: header arch: linear attention state %lld x %lld x %lld floats exceeds %lld", what,
                          (long long)g->num_value_heads, (long long)g->key_head_dim, (long long)g->value_head_dim,
                          (long long)CMF__ARCH_MAX_LINEAR_STATE);
    if ((st = get_int(a, what, "arch", "hidden_size_per_layer_input", false, 0, 0, CMF__ARCH_MAX_DIM,
                      &out->per_layer_input)) ||
        (st = get_int(a, what, "arch", "vocab_size_per_layer_input", false, 0, 0, CMF__ARCH_MAX_VOCAB,
                      &out->vocab_per_layer_input)) ||
        (st = get_bool(a, what, "arch", "v_norm", false, &out->v_norm)))
        return st;
    if (out->per_layer_input * out->n_layer > CMF__ARCH_MAX_DIM)
        return cmf__error(CMF_ERR_CONFIG, "%s: header arch.hidden_size_per_layer_input: %lld x %lld layers exceeds %lld",
                          what, (long long)out->per_layer_input, (long long)out->n_layer, (long long)CMF__ARCH_MAX_DIM);
    return CMF_OK;
}

static cmf_status parse_layers(const json_t *a, const char *what, cmf__arch *out)
{
    cmf_status st;
    int64_t n = out->n_layer; /* <= CMF__ARCH_MAX_LAYERS */
    out->layer_kind = calloc((size_t)n, sizeof *out->layer_kind);
    out->layer_head_dim = calloc((size_t)n, sizeof *out->layer_head_dim);
    out->layer_n_head = calloc((size_t)n, sizeof *out->layer_n_head);
    out->layer_rope = calloc((size_t)n, 1);
    int64_t *rope = calloc((size_t)n, sizeof *rope);
    if (!out->layer_kind || !out->layer_head_dim || !out->layer_n_head || !out->layer_rope || !rope) {
        free(rope);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory for %lld layers of the arch block", what, (long long)n);
    }
    for (int64_t i = 0; i < n; i++) {
        out->layer_head_dim[i] = out->head_dim;
        out->layer_n_head[i] = out->n_head;
        rope[i] = 1;
    }
    if ((st = layer_ints(a, what, "head_dim_per_layer", n, 2, CMF__ARCH_MAX_HEAD_DIM, out->layer_head_dim)) ||
        (st = layer_ints(a, what, "attention_heads_per_layer", n, 1, CMF__ARCH_MAX_HEADS, out->layer_n_head)) ||
        (st = layer_ints(a, what, "rope_layers", n, 0, 1, rope))) {
        free(rope);
        return st;
    }
    for (int64_t i = 0; i < n; i++) out->layer_rope[i] = (uint8_t)rope[i];
    free(rope);
    for (int64_t i = 0; i < n; i++) {
        int64_t hd = out->layer_head_dim[i], nh = out->layer_n_head[i];
        if (hd & 1)
            return cmf__error(CMF_ERR_CONFIG, "%s: header arch.head_dim_per_layer[%lld]: %lld must be even", what,
                              (long long)i, (long long)hd);
        if (nh % out->n_head_kv)
            return cmf__error(CMF_ERR_CONFIG,
                              "%s: header arch: layer %lld has %lld query heads, not a multiple of num_kv_heads %lld",
                              what, (long long)i, (long long)nh, (long long)out->n_head_kv);
        /* heads <= 2^12 and head_dim <= 2^14: the products fit int64 */
        if (nh * hd > CMF__ARCH_MAX_DIM)
            return cmf__error(CMF_ERR_CONFIG, "%s: header arch: layer %lld: %lld heads x head_dim %lld exceeds %lld", what,
                              (long long)i, (long long)nh, (long long)hd, (long long)CMF__ARCH_MAX_DIM);
    }
    const json_t *lt = field(a, "layer_types");
    if (!lt) return CMF_OK;
    if (!json_is_array(lt) || (int64_t)json_array_size(lt) != n)
        return cmf__error(CMF_ERR_CONFIG, "%s: header arch.layer_types: expected an array of %lld strings", what,
                          (long long)n);
    for (int64_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(lt, (size_t)i));
        if (s && (!strcmp(s, "FullAttention") || !strcmp(s, "full_attention")))
            out->layer_kind[i] = CMF__LAYER_FULL;
        else if (s && (!strcmp(s, "SlidingAttention") || !strcmp(s, "sliding_attention")))
            out->layer_kind[i] = CMF__LAYER_SLIDING;
        else if (s && (!strcmp(s, "LinearAttention") || !strcmp(s, "linear_attention")))
            out->layer_kind[i] = CMF__LAYER_LINEAR;
        else
            return cmf__error(CMF_ERR_CONFIG, "%s: header arch.layer_types[%lld]: unknown '%s'", what, (long long)i,
                              s ? s : "(not a string)");
        if (out->layer_kind[i] == CMF__LAYER_SLIDING && out->sliding_window <= 0)
            return cmf__error(CMF_ERR_CONFIG,
                              "%s: header arch.layer_types[%lld]: SlidingAttention needs sliding_window > 0", what,
                              (long long)i);
    }
    return CMF_OK;
}

static cmf_status parse_all(const json_t *a, const char *what, cmf__arch *out)
{
    cmf_status st;
    const char *A = "arch";
    if (!a || !json_is_object(a)) return cmf__error(CMF_ERR_CONFIG, "%s: header: no 'arch' object", what);
    const char *name;
    if ((st = get_str(a, what, A, "arch_name", &name))) return st;
    snprintf(out->arch_name, sizeof out->arch_name, "%s", name ? name : "unknown");

    if ((st = get_int(a, what, A, "hidden_size", true, 0, 1, CMF__ARCH_MAX_DIM, &out->hidden_size)) ||
        (st = get_int(a, what, A, "num_layers", true, 0, 1, CMF__ARCH_MAX_LAYERS, &out->n_layer)) ||
        (st = get_int(a, what, A, "num_attention_heads", true, 0, 1, CMF__ARCH_MAX_HEADS, &out->n_head)) ||
        (st = get_int(a, what, A, "vocab_size", true, 0, 1, CMF__ARCH_MAX_VOCAB, &out->vocab_size)) ||
        (st = get_int(a, what, A, "num_kv_heads", false, out->n_head, 1, CMF__ARCH_MAX_HEADS, &out->n_head_kv)) ||
        (st = get_int(a, what, A, "head_dim", false, out->hidden_size / out->n_head, 0, CMF__ARCH_MAX_HEAD_DIM,
                      &out->head_dim)))
        return st;
    if (out->head_dim < 2 || (out->head_dim & 1))
        return cmf__error(CMF_ERR_CONFIG, "%s: header arch.head_dim: %lld must be even and in [2, %d]", what,
                          (long long)out->head_dim, CMF__ARCH_MAX_HEAD_DIM);
    if (out->n_head_kv * out->head_dim > CMF__ARCH_MAX_DIM)
        return cmf__error(CMF_ERR_CONFIG, "%s: header arch: %lld kv heads x head_dim %lld exceeds %lld", what,
                          (long long)out->n_head_kv, (long long)out->head_dim, (long long)CMF__ARCH_MAX_DIM);
    if ((st = get_int(a, what, A, "intermediate_size", false, 0, 0, CMF__ARCH_MAX_DIM, &out->intermediate_size)) ||
        (st = get_int(a, what, A, "max_position_embeddings", false, 4096, 1, CMF__ARCH_MAX_POS, &out->max_pos)) ||
        (st = get_int(a, what, A, "sliding_window", false, 0, 0, CMF__ARCH_MAX_POS, &out->sliding_window)) ||
        (st = get_bool(a, what, A, "tie_word_embeddings", false, &out->tie_word_embeddings)) ||
        (st = get_num(a, what, A, "rms_norm_eps", 1e-6, &out->rms_norm_eps)) ||
        (st = positive(what, A, "rms_norm_eps", out->rms_norm_eps)))
        return st;
    {
        static const char *const ns[] = {"qwen", "gemma"};
        static const char *const np[] = {"pre", "sandwich", "post"};
        static const char *const na[] = {"silu", "gelu_tanh", "gelu", "swiglu_oss"};
        int v;
        if ((st = parse_enum(a, what, "norm_style", ns, 2, CMF__NORM_QWEN, &v))) return st;
        out->norm_style = (cmf__norm_style)v;
        if ((st = parse_enum(a, what, "norm_placement", np, 3, CMF__PLACE_PRE, &v))) return st;
        out->norm_place = (cmf__norm_place)v;
        if ((st = parse_enum(a, what, "activation", na, 4, CMF__ARCH_ACT_SILU, &v))) return st;
        out->act = (cmf__arch_act)v;
    }
    if ((st = get_num(a, what, A, "swiglu_alpha", 1.702, &out->swiglu_alpha)) ||
        (st = get_num(a, what, A, "swiglu_limit", 7.0, &out->swiglu_limit)) ||
        (st = get_num(a, what, A, "attention_scale", 0.0, &out->attention_scale)) ||
        (st = get_num(a, what, A, "attn_logit_softcapping", 0.0, &out->attn_softcap)) ||
        (st = get_num(a, what, A, "final_logit_softcapping", 0.0, &out->final_softcap)) ||
        (st = get_num(a, what, A, "embedding_multiplier", 1.0, &out->embedding_multiplier)) ||
        (st = get_num(a, what, A, "residual_multiplier", 1.0, &out->residual_multiplier)) ||
        (st = get_num(a, what, A, "logits_scaling", 1.0, &out->logits_scaling)))
        return st;
    if (out->logits_scaling == 0)
        return cmf__error(CMF_ERR_CONFIG, "%s: header arch.logits_scaling: must not be 0", what);
    if (out->attention_scale < 0)
        return cmf__error(CMF_ERR_CONFIG, "%s: header arch.attention_scale: %g must be >= 0 (0 = 1/sqrt(head_dim))",
                          what, out->attention_scale);
    if (out->attn_softcap < 0 || out->final_softcap < 0)
        return cmf__error(CMF_ERR_CONFIG, "%s: header arch: softcapping must be >= 0", what);
    if ((st = parse_rope(a, what, out)) || (st = parse_moe(a, what, &out->moe)) ||
        (st = parse_extensions(a, what, out)) || (st = parse_layers(a, what, out)))
        return st;
    return CMF_OK;
}

cmf_status cmf__arch_parse(const json_t *a, const char *what, cmf__arch *out)
{
    memset(out, 0, sizeof *out);
    cmf_status st = parse_all(a, what, out);
    if (st) cmf__arch_free(out);
    return st;
}

cmf_status cmf__arch_check(const json_t *arch, const char *what)
{
    cmf__arch a;
    cmf_status st = cmf__arch_parse(arch, what, &a);
    if (!st) cmf__arch_free(&a);
    return st;
}

void cmf__arch_free(cmf__arch *a)
{
    if (!a) return;
    free(a->layer_kind);
    free(a->layer_head_dim);
    free(a->layer_n_head);
    free(a->layer_rope);
    a->layer_kind = NULL;
    a->layer_head_dim = a->layer_n_head = NULL;
    a->layer_rope = NULL;
}
