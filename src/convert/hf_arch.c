/* hf_arch.c — Hugging Face config.json -> the header `arch` block
 * (docs/ARCH_HEADER.md). Every config field is either read here (and so
 * mapped), on the explicit list of fields known not to change the math, or
 * an ERR_CONFIG naming it: a checkpoint is never converted on a guess. */
#include "convert/convert.h"
#include "convert/convert_internal.h"
#include "model/arch.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { SW_NONE, SW_ALL, SW_AFTER_MAX_WINDOW, SW_EVEN, SW_PATTERN };
enum { MOE_NONE, MOE_QWEN, MOE_MIXTRAL, MOE_GPT_OSS };

typedef struct family {
    const char *model_type;
    const char *norm_style;      /* "qwen" | "gemma" */
    const char *placement;       /* "pre" | "sandwich" | "post" */
    bool gemma_embed;            /* embeddings * sqrt(hidden_size) */
    int sliding;                 /* how layer_types follow when config has none */
    bool use_sliding_flag;       /* sliding only when use_sliding_window is true */
    int moe;
    const char *const *known;    /* fields read elsewhere or harmless, NULL-terminated */
} family;

/* Fields of every config that never change the forward pass: bookkeeping,
 * training-only (dropout, aux losses, init), generation defaults. */
static const char *const COMMON_HARMLESS[] = {
    "architectures", "model_type", "transformers_version", "dtype", "torch_dtype", "_name_or_path",
    "_from_model_config", "_attn_implementation_autoset", "initializer_range", "use_cache",
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "attention_dropout", "hidden_dropout", "embd_pdrop", "resid_pdrop", "attn_pdrop", "dropout",
    "output_attentions", "output_hidden_states", "return_dict", "output_router_logits",
    "router_aux_loss_coef", "router_jitter_noise", "router_z_loss_coef", "is_encoder_decoder",
    "add_cross_attention", "tie_encoder_decoder", "is_decoder", "chunk_size_feed_forward",
    "problem_type", "id2label", "label2id", "finetuning_task", "prefix", "task_specific_params",
    "tokenizer_class", "cross_attention_hidden_size", "pruned_heads", "torchscript",
    "use_bfloat16", "tf_legacy_loss", "temperature", "top_k", "top_p", "typical_p",
    "repetition_penalty", "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size",
    "bad_words_ids", "num_beams", "num_beam_groups", "diversity_penalty", "num_return_sequences",
    "max_length", "min_length", "do_sample", "early_stopping", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens", "output_scores", "return_dict_in_generate",
    "cache_implementation", /* which KV cache class transformers builds */
    /* tensor presence decides these (biases exist or not) */
    "attention_bias", "mlp_bias", "qkv_bias",
    /* tensor-parallel split used in pretraining: same math */
    "pretraining_tp",
    NULL};

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

static const family FAMILIES[] = {
    {"llama", "qwen", "pre", false, SW_NONE, false, MOE_NONE, L("head_dim")},
    {"mistral", "qwen", "pre", false, SW_ALL, false, MOE_NONE, L("head_dim")},
    {"mixtral", "qwen", "pre", false, SW_ALL, false, MOE_MIXTRAL, L("head_dim")},
    {"qwen2", "qwen", "pre", false, SW_AFTER_MAX_WINDOW, true, MOE_NONE, L("head_dim")},
    {"qwen2_moe", "qwen", "pre", false, SW_AFTER_MAX_WINDOW, true, MOE_QWEN, L("head_dim")},
    {"qwen3", "qwen", "pre", false, SW_AFTER_MAX_WINDOW, true, MOE_NONE, L("head_dim")},
    {"qwen3_moe", "qwen", "pre", false, SW_AFTER_MAX_WINDOW, true, MOE_QWEN, L("head_dim")},
    /* Qwen3NextRMSNorm is Gemma3RMSNorm, x̂·(1+w); the gated norm inside
     * linear_attn is x̂·w whatever norm_style says (docs/ARCH_HEADER.md) */
    {"qwen3_next", "gemma", "pre", false, SW_NONE, false, MOE_QWEN, L("head_dim")},
    {"phi3", "qwen", "pre", false, SW_ALL, false, MOE_NONE, L("head_dim")},
    {"olmo2", "qwen", "post", false, SW_NONE, false, MOE_NONE, L("head_dim")},
    {"granite", "qwen", "pre", false, SW_NONE, false, MOE_NONE, L("head_dim")},
    {"smollm3", "qwen", "pre", false, SW_AFTER_MAX_WINDOW, true, MOE_NONE,
     L("head_dim", "no_rope_layer_interval")},
    {"gemma", "gemma", "pre", true, SW_NONE, false, MOE_NONE, L("head_dim")},
    {"gemma2", "gemma", "sandwich", true, SW_EVEN, false, MOE_NONE, L("head_dim")},
    {"gemma3_text", "gemma", "sandwich", true, SW_PATTERN, false, MOE_NONE, L("head_dim")},
    /* Gemma4RMSNorm is x̂·w (weights start at one), unlike gemma 1-3 */
    {"gemma4_text", "qwen", "sandwich", true, SW_PATTERN, false, MOE_NONE, L("head_dim")},
    /* initial_context_length: informational (yarn reads original_max_position_embeddings) */
    {"gpt_oss", "qwen", "pre", false, SW_EVEN, false, MOE_GPT_OSS, L("head_dim", "initial_context_length")},
};

typedef struct actx {
    const json_t *cfg;
    const char *what;
    const family *fam;
    json_t *arch;
    json_t *used; /* object used as a set of consumed keys */
    int64_t n_layers;
} actx;

/* Marks `key` as read and returns its value, NULL when absent or null. */
static const json_t *take(actx *c, const char *key)
{
    json_object_set_new(c->used, key, json_true());
    const json_t *v = json_object_get(c->cfg, key);
    return json_is_null(v) ? NULL : v;
}

static cmf_status bad(actx *c, const char *key, const char *want)
{
    return cmf__error(CMF_ERR_CONFIG, "%s: field '%s' (model_type %s): %s", c->what, key, c->fam->model_type, want);
}

static cmf_status req_int(actx *c, const char *key, int64_t *out)
{
    const json_t *v = take(c, key);
    *out = 0;
    if (!v) return bad(c, key, "missing (required)");
    if (json_is_integer(v)) *out = json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v))) *out = (int64_t)json_real_value(v);
    else return bad(c, key, "expected an integer");
    if (*out < 0) return bad(c, key, "expected a non-negative integer");
    return CMF_OK;
}

static cmf_status opt_int(actx *c, const char *key, int64_t def, int64_t *out)
{
    if (!take(c, key)) {
        *out = def;
        return CMF_OK;
    }
    return req_int(c, key, out);
}

static cmf_status opt_num(actx *c, const char *key, double def, double *out, bool *present)
{
    const json_t *v = take(c, key);
    if (present) *present = v != NULL;
    *out = def; /* also on error: no caller reads an unset value */
    if (!v) return CMF_OK;
    if (!json_is_number(v)) return bad(c, key, "expected a number");
    *out = json_number_value(v);
    return CMF_OK;
}

static cmf_status opt_bool(actx *c, const char *key, bool def, bool *out)
{
    const json_t *v = take(c, key);
    if (!v) {
        *out = def;
        return CMF_OK;
    }
    if (!json_is_boolean(v)) return bad(c, key, "expected true or false");
    *out = json_is_true(v);
    return CMF_OK;
}

static void set_int(actx *c, const char *k, int64_t v) { json_object_set_new(c->arch, k, json_integer(v)); }
static void set_num(actx *c, const char *k, double v) { json_object_set_new(c->arch, k, json_real(v)); }
static void set_str(actx *c, const char *k, const char *v) { json_object_set_new(c->arch, k, json_string(v)); }

/* ---- activation --------------------------------------------------------- */
static cmf_status map_activation(actx *c)
{
    if (c->fam->moe == MOE_GPT_OSS) {
        double limit;
        take(c, "hidden_act");
        cmf_status st = opt_num(c, "swiglu_limit", 7.0, &limit, NULL);
        if (st) return st;
        set_str(c, "activation", "swiglu_oss");
        set_num(c, "swiglu_alpha", 1.702); /* GptOssExperts.alpha, fixed in the model code */
        set_num(c, "swiglu_limit", limit);
        return CMF_OK;
    }
    /* gemma reads hidden_activation first (hidden_act is its legacy name) */
    const char *key = "hidden_act";
    const json_t *v = take(c, "hidden_activation");
    if (v) key = "hidden_activation", take(c, "hidden_act");
    else v = take(c, "hidden_act");
    const char *act = "silu";
    if (v) {
        if (!json_is_string(v)) return bad(c, key, "expected a string");
        act = json_string_value(v);
    }
    if (!strcmp(act, "silu") || !strcmp(act, "swish")) set_str(c, "activation", "silu");
    else if (!strcmp(act, "gelu_pytorch_tanh") || !strcmp(act, "gelu_tanh") || !strcmp(act, "gelu_new") ||
             !strcmp(act, "gelu_fast"))
        set_str(c, "activation", "gelu_tanh");
    else if (!strcmp(act, "gelu")) set_str(c, "activation", "gelu");
    else return bad(c, key, "activation not supported (silu, gelu, gelu_pytorch_tanh)");
    return CMF_OK;
}

/* ---- rope --------------------------------------------------------------- */
static bool in_list(const char *k, const char *const *list)
{
    for (; list && *list; list++)
        if (!strcmp(k, *list)) return true;
    return false;
}

/* One rope parameter set (flat transformers 5 rope_parameters entry, or a
 * legacy rope_scaling object plus rope_theta). Writes theta, partial factor
 * and a scaling object (or NULL for the default type). `field` names the
 * source in messages. */
typedef struct rope_set {
    double theta;
    bool has_theta;
    double partial;
    bool has_partial;
    json_t *scaling; /* new reference or NULL */
} rope_set;

static cmf_status num_in(actx *c, const json_t *o, const char *field, const char *k, double def, double *out)
{
    const json_t *v = json_object_get(o, k);
    *out = def; /* also on error: no caller reads an unset value */
    if (!v || json_is_null(v)) {
        if (isnan(def))
            return cmf__error(CMF_ERR_CONFIG, "%s: field '%s.%s' (model_type %s): missing (required)", c->what,
                              field, k, c->fam->model_type);
        return CMF_OK;
    }
    if (!json_is_number(v))
        return cmf__error(CMF_ERR_CONFIG, "%s: field '%s.%s': expected a number", c->what, field, k);
    *out = json_number_value(v);
    return CMF_OK;
}

static double yarn_mscale(double scale, double mscale)
{
    return scale <= 1.0 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}

static cmf_status parse_rope(actx *c, const json_t *o, const char *field, int64_t max_pos, rope_set *r)
{
    r->scaling = NULL;
    r->has_theta = r->has_partial = false;
    const char *type = "default";
    const json_t *jt = json_object_get(o, "rope_type");
    if (!jt) jt = json_object_get(o, "type");
    if (jt && !json_is_null(jt)) {
        if (!json_is_string(jt))
            return cmf__error(CMF_ERR_CONFIG, "%s: field '%s.rope_type': expected a string", c->what, field);
        type = json_string_value(jt);
    }
    static const char *const base_keys[] = {"rope_type", "type", "rope_theta", "partial_rotary_factor", NULL};
    static const char *const linear_keys[] = {"factor", NULL};
    static const char *const llama3_keys[] = {"factor", "low_freq_factor", "high_freq_factor",
                                              "original_max_position_embeddings", NULL};
    static const char *const yarn_keys[] = {"factor", "original_max_position_embeddings", "beta_fast", "beta_slow",
                                            "attention_factor", "truncate", "mscale", "mscale_all_dim", NULL};
    const char *const *extra;
    if (!strcmp(type, "default") || !strcmp(type, "proportional")) extra = NULL;
    else if (!strcmp(type, "linear")) extra = linear_keys;
    else if (!strcmp(type, "llama3")) extra = llama3_keys;
    else if (!strcmp(type, "yarn")) extra = yarn_keys;
    else
        return cmf__error(CMF_ERR_CONFIG, "%s: field '%s.rope_type' (model_type %s): rope type '%s' is not supported (default, linear, llama3, yarn, proportional)",
                          c->what, field, c->fam->model_type, type);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        if (in_list(k, base_keys) || in_list(k, extra)) continue;
        if (json_is_null(v)) continue;
        return cmf__error(CMF_ERR_CONFIG, "%s: field '%s.%s' (model_type %s, rope type %s): not known to the converter and may change the math",
                          c->what, field, k, c->fam->model_type, type);
    }
    cmf_status st;
    if (json_object_get(o, "rope_theta") && !json_is_null(json_object_get(o, "rope_theta"))) {
        if ((st = num_in(c, o, field, "rope_theta", NAN, &r->theta))) return st;
        r->has_theta = true;
    }
    if (json_object_get(o, "partial_rotary_factor") && !json_is_null(json_object_get(o, "partial_rotary_factor"))) {
        if ((st = num_in(c, o, field, "partial_rotary_factor", NAN, &r->partial))) return st;
        r->has_partial = true;
    }
    if (!strcmp(type, "default")) return CMF_OK;
    json_t *s = json_object();
    json_object_set_new(s, "rope_type", json_string(type));
    double f = 0, a, b;
    if (!strcmp(type, "linear")) {
        if ((st = num_in(c, o, field, "factor", NAN, &f))) goto fail;
        json_object_set_new(s, "factor", json_real(f));
    } else if (!strcmp(type, "llama3")) {
        if ((st = num_in(c, o, field, "factor", NAN, &f))) goto fail;
        json_object_set_new(s, "factor", json_real(f));
        if ((st = num_in(c, o, field, "low_freq_factor", NAN, &a))) goto fail;
        json_object_set_new(s, "low_freq_factor", json_real(a));
        if ((st = num_in(c, o, field, "high_freq_factor", NAN, &a))) goto fail;
        json_object_set_new(s, "high_freq_factor", json_real(a));
        if ((st = num_in(c, o, field, "original_max_position_embeddings", NAN, &a))) goto fail;
        json_object_set_new(s, "original_max_position_embeddings", json_integer((json_int_t)a));
    } else if (!strcmp(type, "yarn")) {
        double orig;
        if ((st = num_in(c, o, field, "original_max_position_embeddings", (double)max_pos, &orig))) goto fail;
        /* no factor: transformers takes max_position_embeddings / original */
        if ((st = num_in(c, o, field, "factor", orig > 0 ? (double)max_pos / orig : NAN, &f))) goto fail;
        json_object_set_new(s, "factor", json_real(f));
        json_object_set_new(s, "original_max_position_embeddings", json_integer((json_int_t)orig));
        if ((st = num_in(c, o, field, "beta_fast", 32.0, &a))) goto fail;
        json_object_set_new(s, "beta_fast", json_real(a));
        if ((st = num_in(c, o, field, "beta_slow", 1.0, &a))) goto fail;
        json_object_set_new(s, "beta_slow", json_real(a));
        /* attention_factor as transformers' _compute_yarn_parameters: given,
         * else from mscale/mscale_all_dim, else 0.1*ln(factor)+1. */
        double ms = 0, msa = 0;
        if ((st = num_in(c, o, field, "mscale", 0.0, &ms))) goto fail;
        if ((st = num_in(c, o, field, "mscale_all_dim", 0.0, &msa))) goto fail;
        double att = (ms != 0 && msa != 0) ? yarn_mscale(f, ms) / yarn_mscale(f, msa) : yarn_mscale(f, 1.0);
        if ((st = num_in(c, o, field, "attention_factor", att, &a))) goto fail;
        json_object_set_new(s, "attention_factor", json_real(a));
        const json_t *tr = json_object_get(o, "truncate");
        b = 1;
        if (tr && !json_is_null(tr)) {
            if (!json_is_boolean(tr)) {
                st = cmf__error(CMF_ERR_CONFIG, "%s: field '%s.truncate': expected true or false", c->what, field);
                goto fail;
            }
            b = json_is_true(tr);
        }
        json_object_set_new(s, "truncate", json_boolean(b != 0));
    }
    r->scaling = s;
    return CMF_OK;
fail:
    json_decref(s);
    return st;
}

static cmf_status map_rope(actx *c, int64_t max_pos, bool any_sliding)
{
    cmf_status st;
    const json_t *rp = take(c, "rope_parameters");
    const json_t *legacy = take(c, "rope_scaling");
    double theta_top, partial_top, local_top;
    bool has_theta_top, has_partial_top, has_local_top;
    if ((st = opt_num(c, "rope_theta", 10000.0, &theta_top, &has_theta_top))) return st;
    if ((st = opt_num(c, "partial_rotary_factor", 1.0, &partial_top, &has_partial_top))) return st;
    if ((st = opt_num(c, "rope_local_base_freq", 0, &local_top, &has_local_top))) return st;
    rope_set full = {theta_top, has_theta_top, partial_top, has_partial_top, NULL};
    rope_set local = {0};
    bool has_local = false;
    if (rp && !json_is_object(rp)) return bad(c, "rope_parameters", "expected an object");
    if (rp && (json_object_get(rp, "full_attention") || json_object_get(rp, "sliding_attention"))) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)rp, k, v) {
            if (strcmp(k, "full_attention") && strcmp(k, "sliding_attention") && strcmp(k, "linear_attention"))
                return cmf__error(CMF_ERR_CONFIG, "%s: field 'rope_parameters.%s' (model_type %s): unknown layer type",
                                  c->what, k, c->fam->model_type);
            if (!json_is_object(v))
                return cmf__error(CMF_ERR_CONFIG, "%s: field 'rope_parameters.%s': expected an object", c->what, k);
        }
        const json_t *f = json_object_get(rp, "full_attention");
        const json_t *s = json_object_get(rp, "sliding_attention");
        if (f && (st = parse_rope(c, f, "rope_parameters.full_attention", max_pos, &full))) return st;
        if (s) {
            if ((st = parse_rope(c, s, "rope_parameters.sliding_attention", max_pos, &local))) {
                json_decref(full.scaling);
                return st;
            }
            has_local = true;
        }
    } else if (rp) {
        if ((st = parse_rope(c, rp, "rope_parameters", max_pos, &full))) return st;
    } else if (legacy) {
        if (!json_is_object(legacy)) return bad(c, "rope_scaling", "expected an object or null");
        if ((st = parse_rope(c, legacy, "rope_scaling", max_pos, &full))) return st;
    }
    if (!full.has_theta) full.theta = theta_top;
    if (!full.has_partial) full.partial = partial_top;
    set_num(c, "rope_theta", full.theta);
    set_num(c, "partial_rotary_factor", full.partial);
    if (full.scaling) {
        json_object_set(c->arch, "rope_scaling", full.scaling);
        const char *t = json_string_value(json_object_get(full.scaling, "rope_type"));
        if (t && !strcmp(t, "yarn")) { /* spec §2's global YaRN profile, informational */
            json_t *y = json_deep_copy(full.scaling);
            json_object_del(y, "rope_type");
            json_object_set_new(c->arch, "yarn", y);
        }
        json_decref(full.scaling);
    }
    if (has_local) {
        set_num(c, "rope_local_base_freq", local.has_theta ? local.theta : full.theta);
        set_num(c, "local_partial_rotary_factor", local.has_partial ? local.partial : 1.0);
        if (local.scaling) json_object_set_new(c->arch, "local_rope_scaling", local.scaling);
    } else if (has_local_top) {
        set_num(c, "rope_local_base_freq", local_top);
        set_num(c, "local_partial_rotary_factor", full.partial);
    } else if (any_sliding) {
        set_num(c, "rope_local_base_freq", full.theta);
        set_num(c, "local_partial_rotary_factor", full.partial);
        if (json_object_get(c->arch, "rope_scaling"))
            json_object_set(c->arch, "local_rope_scaling", json_object_get(c->arch, "rope_scaling"));
    }
    return CMF_OK;
}

/* ---- layer types -------------------------------------------------------- */
static cmf_status map_layers(actx *c, bool *any_sliding)
{
    cmf_status st;
    int64_t window = 0;
    const json_t *sw = take(c, "sliding_window");
    if (sw) {
        if (!json_is_integer(sw) || json_integer_value(sw) < 0) return bad(c, "sliding_window", "expected a non-negative integer or null");
        window = json_integer_value(sw);
    }
    if (c->fam->use_sliding_flag) {
        bool use = false;
        if ((st = opt_bool(c, "use_sliding_window", false, &use))) return st;
        if (!use) window = 0;
    }
    int64_t max_window_layers = 0, pattern = 6;
    if (c->fam->sliding == SW_AFTER_MAX_WINDOW && (st = opt_int(c, "max_window_layers", 0, &max_window_layers))) return st;
    if (c->fam->sliding == SW_PATTERN) {
        int64_t p1, p2;
        if ((st = opt_int(c, "sliding_window_pattern", 6, &p1))) return st;
        if ((st = opt_int(c, "_sliding_window_pattern", p1, &p2))) return st;
        pattern = p2 > 0 ? p2 : 6;
    }
    json_t *types = json_array();
    const json_t *lt = take(c, "layer_types");
    bool has_linear = false;
    *any_sliding = false;
    if (lt) {
        if (!json_is_array(lt) || (int64_t)json_array_size(lt) != c->n_layers) {
            json_decref(types);
            return bad(c, "layer_types", "expected an array with one entry per layer (num_hidden_layers)");
        }
        for (size_t i = 0; i < json_array_size(lt); i++) {
            const char *s = json_string_value(json_array_get(lt, i));
            const char *t = NULL;
            if (!s) t = NULL;
            else if (!strcmp(s, "full_attention")) t = "FullAttention";
            else if (!strcmp(s, "sliding_attention")) t = window > 0 ? "SlidingAttention" : "FullAttention";
            else if (!strcmp(s, "linear_attention")) t = "LinearAttention", has_linear = true;
            if (!t) {
                json_decref(types);
                return cmf__error(CMF_ERR_CONFIG, "%s: field 'layer_types[%zu]' (model_type %s): '%s' is not a known layer type (full_attention, sliding_attention, linear_attention)",
                                  c->what, i, c->fam->model_type, s ? s : "(not a string)");
            }
            json_array_append_new(types, json_string(t));
        }
    } else {
        for (int64_t i = 0; i < c->n_layers; i++) {
            bool sliding = false;
            if (window > 0) {
                switch (c->fam->sliding) {
                case SW_ALL: sliding = true; break;
                case SW_AFTER_MAX_WINDOW: sliding = i >= max_window_layers; break;
                case SW_EVEN: sliding = (i + 1) % 2 != 0; break;
                case SW_PATTERN: sliding = (i + 1) % pattern != 0; break;
                default: break;
                }
            }
            json_array_append_new(types, json_string(sliding ? "SlidingAttention" : "FullAttention"));
        }
    }
    for (size_t i = 0; i < json_array_size(types); i++)
        if (!strcmp(json_string_value(json_array_get(types, i)), "SlidingAttention")) *any_sliding = true;
    if (has_linear && strcmp(c->fam->model_type, "qwen3_next")) {
        json_decref(types);
        return bad(c, "layer_types", "linear_attention layers are only mapped for qwen3_next");
    }
    json_object_set_new(c->arch, "layer_types", types);
    if (*any_sliding) set_int(c, "sliding_window", window);
    return CMF_OK;
}

/* ---- MoE ---------------------------------------------------------------- */
static cmf_status map_moe(actx *c, int64_t intermediate)
{
    if (c->fam->moe == MOE_NONE) return CMF_OK;
    cmf_status st;
    int64_t ne, ne2, k, moe_inter, shared = 0, step = 1;
    bool norm = true;
    if ((st = opt_int(c, "num_local_experts", 0, &ne2))) return st;
    if ((st = opt_int(c, "num_experts", ne2, &ne))) return st;
    if (ne == 0) return bad(c, "num_experts", "missing (num_experts or num_local_experts is required for a mixture-of-experts model)");
    int64_t k2;
    if ((st = opt_int(c, "experts_per_token", 0, &k2))) return st; /* gpt-oss's older name */
    if ((st = opt_int(c, "num_experts_per_tok", k2, &k))) return st;
    if (k2 && k != k2) return bad(c, "experts_per_token", "differs from num_experts_per_tok");
    if (k <= 0 || k > ne) return bad(c, "num_experts_per_tok", "expected 1..num_experts");
    if (c->fam->moe == MOE_QWEN) {
        if ((st = req_int(c, "moe_intermediate_size", &moe_inter))) return st;
        if ((st = opt_int(c, "shared_expert_intermediate_size", 0, &shared))) return st;
        if ((st = opt_bool(c, "norm_topk_prob", false, &norm))) return st;
        if ((st = opt_int(c, "decoder_sparse_step", 1, &step))) return st;
        take(c, "mlp_only_layers"); /* checked against tensor presence by the converter */
    } else {
        /* mixtral and gpt-oss renormalise the top-k (softmax over the chosen
         * logits equals softmax over all, renormalised) */
        moe_inter = intermediate;
        norm = true;
    }
    json_t *m = json_object();
    json_object_set_new(m, "num_experts", json_integer(ne));
    json_object_set_new(m, "top_k", json_integer(k));
    json_object_set_new(m, "moe_intermediate_size", json_integer(moe_inter));
    json_object_set_new(m, "norm_topk_prob", json_boolean(norm));
    if (shared > 0) json_object_set_new(m, "shared_expert_intermediate_size", json_integer(shared));
    json_object_set_new(c->arch, "moe", m);
    return CMF_OK;
}

/* ---- family-specific ---------------------------------------------------- */
static cmf_status require_value(actx *c, const char *key, const char *allowed_json)
{
    const json_t *v = take(c, key);
    if (!v) return CMF_OK;
    json_t *want = json_loads(allowed_json, JSON_DECODE_ANY, NULL);
    bool ok = want && json_equal((json_t *)v, want);
    json_decref(want);
    if (!ok) {
        char msg[160];
        snprintf(msg, sizeof msg, "only %s is supported (the value changes the math)", allowed_json);
        return bad(c, key, msg);
    }
    return CMF_OK;
}

static cmf_status map_family(actx *c, int64_t hidden, int64_t head_dim, int64_t n_heads)
{
    cmf_status st;
    const char *mt = c->fam->model_type;
    double d;
    bool has;
    bool gemma = !strncmp(mt, "gemma", 5);
    /* attention scale */
    double scale = 1.0 / sqrt((double)head_dim);
    bool scale_fixed = true;
    if ((st = opt_num(c, "query_pre_attn_scalar", 0, &d, &has))) return st;
    if (has) scale = 1.0 / sqrt(d);
    if (!strcmp(mt, "granite")) {
        if ((st = opt_num(c, "attention_multiplier", scale, &scale, NULL))) return st;
    }
    if (!strcmp(mt, "gemma4_text")) scale = 1.0; /* Gemma4TextAttention.scaling: q/k are RMS-normed */
    else if (json_object_get(c->arch, "head_dim_per_layer") && !has && strcmp(mt, "granite")) scale_fixed = false;
    if (scale_fixed) set_num(c, "attention_scale", scale);
    /* softcaps */
    if ((st = opt_num(c, "attn_logit_softcapping", 0, &d, &has))) return st;
    if (has) set_num(c, "attn_logit_softcapping", d);
    if ((st = opt_num(c, "final_logit_softcapping", 0, &d, &has))) return st;
    if (has) set_num(c, "final_logit_softcapping", d);
    /* scalars */
    double emb = gemma ? sqrt((double)hidden) : 1.0, resid = 1.0, logits = 1.0;
    if (!strcmp(mt, "granite")) {
        if ((st = opt_num(c, "embedding_multiplier", 1.0, &emb, NULL))) return st;
        if ((st = opt_num(c, "residual_multiplier", 1.0, &resid, NULL))) return st;
        if ((st = opt_num(c, "logits_scaling", 1.0, &logits, NULL))) return st;
    }
    set_num(c, "embedding_multiplier", emb);
    set_num(c, "residual_multiplier", resid);
    set_num(c, "logits_scaling", logits);
    /* values that would change the math if set */
    const json_t *bidi = take(c, "use_bidirectional_attention");
    /* "vision" only opens the mask between image tokens: no effect on text */
    if (bidi && !json_is_false(bidi) && !(json_is_string(bidi) && !strcmp(json_string_value(bidi), "vision")))
        return bad(c, "use_bidirectional_attention", "only false or \"vision\" is supported (bidirectional text attention changes the math)");
    if (!strcmp(mt, "gemma4_text")) {
        /* the value norm has no weight, so no tensor says it is there */
        json_object_set_new(c->arch, "v_norm", json_true());
        take(c, "num_global_key_value_heads"); /* only used with attention_k_eq_v, refused below */
        if ((st = require_value(c, "attention_k_eq_v", "false"))) return st;
        if ((st = require_value(c, "enable_moe_block", "false"))) return st;
        if ((st = require_value(c, "num_kv_shared_layers", "0"))) return st;
        if ((st = require_value(c, "use_double_wide_mlp", "false"))) return st;
        take(c, "moe_intermediate_size"), take(c, "num_experts"), take(c, "top_k_experts");
        if (json_object_get(c->cfg, "moe_intermediate_size") && !json_is_null(json_object_get(c->cfg, "moe_intermediate_size")))
            return bad(c, "moe_intermediate_size", "gemma4 MoE blocks are not mapped");
        int64_t a, b;
        if ((st = opt_int(c, "hidden_size_per_layer_input", 0, &a))) return st;
        if ((st = opt_int(c, "vocab_size_per_layer_input", 0, &b))) return st;
        if (a) set_int(c, "hidden_size_per_layer_input", a);
        if (b) set_int(c, "vocab_size_per_layer_input", b);
    }
    if (!strcmp(mt, "smollm3")) {
        const json_t *nr = take(c, "no_rope_layers");
        if (nr) {
            if (!json_is_array(nr) || (int64_t)json_array_size(nr) != c->n_layers)
                return bad(c, "no_rope_layers", "expected one 0/1 entry per layer");
            json_t *a = json_array();
            for (size_t i = 0; i < json_array_size(nr); i++) {
                const json_t *e = json_array_get(nr, i);
                if (!json_is_integer(e) || (json_integer_value(e) != 0 && json_integer_value(e) != 1)) {
                    json_decref(a);
                    return bad(c, "no_rope_layers", "expected one 0/1 entry per layer");
                }
                /* SmolLM3: use_rope = no_rope_layers[i] (1 = rotary applied) */
                json_array_append_new(a, json_integer(json_integer_value(e)));
            }
            json_object_set_new(c->arch, "rope_layers", a);
        }
    }
    if (!strcmp(mt, "phi3")) take(c, "original_max_position_embeddings"); /* only read by longrope */
    if (!strcmp(mt, "qwen3_next")) {
        static const char *const lin[] = {"linear_conv_kernel_dim", "linear_key_head_dim", "linear_num_key_heads",
                                          "linear_value_head_dim", "linear_num_value_heads"};
        for (size_t i = 0; i < 5; i++) {
            int64_t v;
            if ((st = req_int(c, lin[i], &v))) return st;
            set_int(c, lin[i], v);
        }
    }
    (void)n_heads;
    return CMF_OK;
}

static cmf_status map_head_dims(actx *c, int64_t head_dim)
{
    if (strcmp(c->fam->model_type, "gemma4_text")) return CMF_OK;
    int64_t global_hd;
    cmf_status st = opt_int(c, "global_head_dim", 0, &global_hd);
    if (st) return st;
    const json_t *plc = take(c, "per_layer_config");
    if (plc && !json_is_object(plc)) return bad(c, "per_layer_config", "expected an object");
    json_t *hd = json_array();
    bool any = false;
    /* global_head_dim: the head width of full-attention layers */
    const json_t *lt = json_object_get(c->cfg, "layer_types");
    for (int64_t i = 0; i < c->n_layers; i++) {
        const char *t = json_string_value(json_array_get(lt, (size_t)i));
        bool full = t && !strcmp(t, "full_attention");
        json_array_append_new(hd, json_integer(full && global_hd > 0 ? global_hd : head_dim));
        if (full && global_hd > 0 && global_hd != head_dim) any = true;
    }
    if (global_hd > 0 && !lt) {
        json_decref(hd);
        return bad(c, "global_head_dim", "needs layer_types to say which layers are full attention");
    }
    const char *k;
    json_t *v;
    if (plc) json_object_foreach((json_t *)plc, k, v) {
        char *end;
        long idx = strtol(k, &end, 10);
        if (*end || end == k || idx < 0 || idx >= c->n_layers || !json_is_object(v)) {
            json_decref(hd);
            return cmf__error(CMF_ERR_CONFIG, "%s: field 'per_layer_config.%s': expected a layer index 0..%lld holding an object",
                              c->what, k, (long long)c->n_layers - 1);
        }
        const char *k2;
        json_t *v2;
        json_object_foreach(v, k2, v2) {
            if (strcmp(k2, "head_dim") || !json_is_integer(v2) || json_integer_value(v2) <= 0) {
                json_decref(hd);
                return cmf__error(CMF_ERR_CONFIG, "%s: field 'per_layer_config.%s.%s' (model_type %s): only a positive integer head_dim is mapped",
                                  c->what, k, k2, c->fam->model_type);
            }
            json_array_set_new(hd, (size_t)idx, json_integer(json_integer_value(v2)));
            any = true;
        }
    }
    if (any) json_object_set_new(c->arch, "head_dim_per_layer", hd);
    else json_decref(hd);
    return CMF_OK;
}

cmf_status cmf__convert_arch(const json_t *config, const char *what, json_t **out)
{
    *out = NULL;
    if (!json_is_object(config)) return cmf__error(CMF_ERR_CONFIG, "%s: not a JSON object", what);
    const json_t *jmt = json_object_get(config, "model_type");
    if (!json_is_string(jmt)) return cmf__error(CMF_ERR_CONFIG, "%s: field 'model_type' missing or not a string", what);
    const char *mt = json_string_value(jmt);
    const family *fam = NULL;
    for (size_t i = 0; i < sizeof FAMILIES / sizeof *FAMILIES; i++)
        if (!strcmp(FAMILIES[i].model_type, mt)) fam = &FAMILIES[i];
    if (!fam) {
        char known[512] = "";
        for (size_t i = 0; i < sizeof FAMILIES / sizeof *FAMILIES; i++) {
            strncat(known, FAMILIES[i].model_type, sizeof known - strlen(known) - 3);
            if (i + 1 < sizeof FAMILIES / sizeof *FAMILIES) strncat(known, ", ", sizeof known - strlen(known) - 1);
        }
        return cmf__error(CMF_ERR_CONFIG, "%s: field 'model_type': '%s' is not supported (known: %s)", what, mt, known);
    }
    actx c = {config, what, fam, json_object(), json_object(), 0};
    cmf_status st;
    int64_t hidden, inter, heads, kv, head_dim, vocab, max_pos;
    double eps;
    bool tie = true, any_sliding = false;
    set_str(&c, "arch_name", mt);
    take(&c, "model_type");
    if ((st = req_int(&c, "hidden_size", &hidden))) goto fail;
    if ((st = req_int(&c, "intermediate_size", &inter))) goto fail;
    if ((st = req_int(&c, "num_hidden_layers", &c.n_layers))) goto fail;
    if ((st = req_int(&c, "num_attention_heads", &heads))) goto fail;
    if (heads == 0 || c.n_layers == 0 || hidden == 0) {
        st = bad(&c, heads == 0 ? "num_attention_heads" : c.n_layers == 0 ? "num_hidden_layers" : "hidden_size",
                 "must be positive");
        goto fail;
    }
    /* before anything is sized by it (per-layer arrays below) */
    if (c.n_layers > CMF__ARCH_MAX_LAYERS) {
        char msg[96];
        snprintf(msg, sizeof msg, "%lld layers, more than the %d cmf supports", (long long)c.n_layers,
                 CMF__ARCH_MAX_LAYERS);
        st = bad(&c, "num_hidden_layers", msg);
        goto fail;
    }
    if ((st = opt_int(&c, "num_key_value_heads", heads, &kv))) goto fail;
    if (kv == 0 || heads % kv) {
        st = bad(&c, "num_key_value_heads", "must divide num_attention_heads");
        goto fail;
    }
    if ((st = opt_int(&c, "head_dim", hidden / heads, &head_dim))) goto fail;
    if ((st = req_int(&c, "vocab_size", &vocab))) goto fail;
    /* no guess: the context length differs per family and checkpoint */
    if ((st = req_int(&c, "max_position_embeddings", &max_pos))) goto fail;
    if ((st = opt_num(&c, "rms_norm_eps", 1e-6, &eps, NULL))) goto fail;
    /* HF default for tie_word_embeddings is true; the converter checks it
     * against lm_head.weight's presence. */
    if ((st = opt_bool(&c, "tie_word_embeddings", true, &tie))) goto fail;
    set_int(&c, "hidden_size", hidden);
    set_int(&c, "intermediate_size", inter);
    set_int(&c, "num_layers", c.n_layers);
    set_int(&c, "num_attention_heads", heads);
    set_int(&c, "num_kv_heads", kv);
    set_int(&c, "head_dim", head_dim);
    if ((st = map_head_dims(&c, head_dim))) goto fail;
    set_int(&c, "vocab_size", vocab);
    set_int(&c, "max_position_embeddings", max_pos);
    json_object_set_new(c.arch, "tie_word_embeddings", json_boolean(tie));
    set_num(&c, "rms_norm_eps", eps);
    set_str(&c, "norm_style", fam->norm_style);
    set_str(&c, "norm_placement", fam->placement);
    if ((st = map_activation(&c))) goto fail;
    if ((st = map_layers(&c, &any_sliding))) goto fail;
    if ((st = map_rope(&c, max_pos, any_sliding))) goto fail;
    if ((st = map_family(&c, hidden, head_dim, heads))) goto fail;
    if ((st = map_moe(&c, inter))) goto fail;
    /* Everything left must be known harmless. */
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)config, k, v) {
        if (json_object_get(c.used, k) || in_list(k, COMMON_HARMLESS) || in_list(k, fam->known)) continue;
        st = cmf__error(CMF_ERR_CONFIG, "%s: field '%s' (model_type %s) is not known to the converter and may change the math",
                        what, k, mt);
        goto fail;
    }
    /* the runtime's own validation (limits, types, products): a header the
     * runtime would refuse is never written */
    char label[600];
    snprintf(label, sizeof label, "%s: the arch block made from it", what);
    if ((st = cmf__arch_check(c.arch, label))) goto fail;
    json_decref(c.used);
    *out = c.arch;
    return CMF_OK;
fail:
    json_decref(c.used);
    json_decref(c.arch);
    return st;
}
