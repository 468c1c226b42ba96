/* arch.c — parses the header `arch` block into cmf__arch. Field names and
 * defaults follow docs/ARCH_HEADER.md; every error names the file and the
 * JSON path. Values are range-checked here so the engine can trust them. */
#include "model/arch.h"
#include "util/error.h"
#include "util/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIM ((int64_t)1 << 24)

static cmf_status cfg(const char *what, cmf_status st)
{
    if (st == CMF_OK) return st;
    return cmf__error_prefix(CMF_ERR_CONFIG, "%s: header", what);
}

static cmf_status req_int(const json_t *a, const char *what, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    cmf_status st = cmf__json_get_int(a, key, "arch", out);
    if (st) return cfg(what, st);
    if (*out < lo || *out > hi)
        return cmf__error(CMF_ERR_CONFIG, "%s: header arch.%s: %lld out of range [%lld, %lld]", what, key,
                          (long long)*out, (long long)lo, (long long)hi);
    return CMF_OK;
}

static cmf_status opt_num(const json_t *a, const char *what, const char *path, const char *key, double def,
                          double *out)
{
    cmf_status st = cmf__json_opt_num(a, key, path, def, out);
    if (st) return cfg(what, st);
    if (!isfinite(*out)) return cmf__error(CMF_ERR_CONFIG, "%s: header %s.%s: not finite", what, path, key);
    return CMF_OK;
}

static cmf_status parse_enum(const json_t *a, const char *what, const char *key, const char *const *names,
                             int n, int def, int *out)
{
    const char *s;
    cmf_status st = cmf__json_opt_str(a, key, "arch", NULL, &s);
    if (st) return cfg(what, st);
    if (!s) {
        *out = def;
        return CMF_OK;
    }
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
    const json_t *v = json_object_get(a, key);
    if (!v || json_is_null(v)) return CMF_OK;
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

static cmf_status parse_scaling(const json_t *a, const char *what, const char *key, cmf__rope_cfg *r)
{
    const json_t *s = json_object_get(a, key);
    if (!s || json_is_null(s)) return CMF_OK;
    char path[64];
    snprintf(path, sizeof path, "arch.%s", key);
    if (!json_is_object(s)) return cmf__error(CMF_ERR_CONFIG, "%s: header %s: expected an object", what, path);
    const char *type;
    cmf_status st = cmf__json_get_str(s, "rope_type", path, &type);
    if (st) {
        /* older configs spell it "type" */
        if (cmf__json_get_str(s, "type", path, &type)) return cfg(what, st);
    }
    static const char *const names[] = {"default", "linear", "llama3", "yarn", "proportional"};
    int t = -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(type, names[i])) t = i;
    if (t < 0) return cmf__error(CMF_ERR_CONFIG, "%s: header %s.rope_type: unknown '%s'", what, path, type);
    r->type = (cmf__rope_type)t;
    if ((st = opt_num(s, what, path, "factor", 1.0, &r->factor))) return st;
    if (r->type != CMF__ROPE_DEFAULT && r->type != CMF__ROPE_PROPORTIONAL && !(r->factor > 0))
        return cmf__error(CMF_ERR_CONFIG, "%s: header %s.factor: must be > 0", what, path);
    if ((st = opt_num(s, what, path, "low_freq_factor", 1.0, &r->low_freq_factor))) return st;
    if ((st = opt_num(s, what, path, "high_freq_factor", 4.0, &r->high_freq_factor))) return st;
    if ((st = opt_num(s, what, path, "original_max_position_embeddings", 0.0, &r->orig_max_pos))) return st;
    if ((st = opt_num(s, what, path, "beta_fast", 32.0, &r->beta_fast))) return st;
    if ((st = opt_num(s, what, path, "beta_slow", 1.0, &r->beta_slow))) return st;
    if ((st = opt_num(s, what, path, "attention_factor", -1.0, &r->attention_factor))) return st;
    st = cmf__json_opt_bool(s, "truncate", path, true, &r->truncate);
    if (st) return cfg(what, st);
    if (r->type == CMF__ROPE_LLAMA3 && !(r->high_freq_factor > r->low_freq_factor && r->orig_max_pos > 0))
        return cmf__error(CMF_ERR_CONFIG,
                          "%s: header %s: llama3 needs high_freq_factor > low_freq_factor and "
                          "original_max_position_embeddings > 0",
                          what, path);
    return CMF_OK;
}

cmf_status cmf__arch_parse(const json_t *a, const char *what, cmf__arch *out)
{
    cmf_status st;
    memset(out, 0, sizeof *out);
    if (!a || !json_is_object(a)) return cmf__error(CMF_ERR_CONFIG, "%s: header: no 'arch' object", what);
    out->json = a;
    const char *name = NULL;
    if ((st = cmf__json_opt_str(a, "arch_name", "arch", "unknown", &name))) return cfg(what, st);
    snprintf(out->arch_name, sizeof out->arch_name, "%s", name);

    if ((st = req_int(a, what, "hidden_size", 1, MAX_DIM, &out->hidden_size))) goto fail;
    if ((st = req_int(a, what, "num_layers", 1, 100000, &out->n_layer))) goto fail;
    if ((st = req_int(a, what, "num_attention_heads", 1, 65536, &out->n_head))) goto fail;
    if ((st = req_int(a, what, "vocab_size", 1, (int64_t)1 << 31, &out->vocab_size))) goto fail;
    {
        int64_t v;
        if ((st = cmf__json_opt_int(a, "num_kv_heads", "arch", out->n_head, &v))) { st = cfg(what, st); goto fail; }
        out->n_head_kv = v;
        if (v < 1 || v > 65536)
            { st = cmf__error(CMF_ERR_CONFIG, "%s: header arch.num_kv_heads: %lld out of range", what, (long long)v); goto fail; }
        if ((st = cmf__json_opt_int(a, "head_dim", "arch", out->hidden_size / out->n_head, &v))) { st = cfg(what, st); goto fail; }
        out->head_dim = v;
        if (v < 2 || v > 65536 || (v & 1))
            { st = cmf__error(CMF_ERR_CONFIG, "%s: header arch.head_dim: %lld must be even and in [2, 65536]", what, (long long)v); goto fail; }
        if ((st = cmf__json_opt_int(a, "intermediate_size", "arch", 0, &out->intermediate_size))) { st = cfg(what, st); goto fail; }
        if ((st = cmf__json_opt_int(a, "max_position_embeddings", "arch", 4096, &out->max_pos))) { st = cfg(what, st); goto fail; }
        if (out->max_pos < 1) { st = cmf__error(CMF_ERR_CONFIG, "%s: header arch.max_position_embeddings: must be >= 1", what); goto fail; }
        if ((st = cmf__json_opt_int(a, "sliding_window", "arch", 0, &out->sliding_window))) { st = cfg(what, st); goto fail; }
        if (out->sliding_window < 0) { st = cmf__error(CMF_ERR_CONFIG, "%s: header arch.sliding_window: negative", what); goto fail; }
    }
    if ((st = cmf__json_opt_bool(a, "tie_word_embeddings", "arch", false, &out->tie_word_embeddings))) { st = cfg(what, st); goto fail; }
    if ((st = opt_num(a, what, "arch", "rms_norm_eps", 1e-6, &out->rms_norm_eps))) goto fail;
    {
        static const char *const ns[] = {"qwen", "gemma"};
        static const char *const np[] = {"pre", "sandwich", "post"};
        static const char *const na[] = {"silu", "gelu_tanh", "gelu", "swiglu_oss"};
        int v;
        if ((st = parse_enum(a, what, "norm_style", ns, 2, CMF__NORM_QWEN, &v))) goto fail;
        out->norm_style = (cmf__norm_style)v;
        if ((st = parse_enum(a, what, "norm_placement", np, 3, CMF__PLACE_PRE, &v))) goto fail;
        out->norm_place = (cmf__norm_place)v;
        if ((st = parse_enum(a, what, "activation", na, 4, CMF__ARCH_ACT_SILU, &v))) goto fail;
        out->act = (cmf__arch_act)v;
    }
    if ((st = opt_num(a, what, "arch", "swiglu_alpha", 1.702, &out->swiglu_alpha))) goto fail;
    if ((st = opt_num(a, what, "arch", "swiglu_limit", 7.0, &out->swiglu_limit))) goto fail;
    if ((st = opt_num(a, what, "arch", "attention_scale", 0.0, &out->attention_scale))) goto fail;
    if ((st = opt_num(a, what, "arch", "attn_logit_softcapping", 0.0, &out->attn_softcap))) goto fail;
    if ((st = opt_num(a, what, "arch", "final_logit_softcapping", 0.0, &out->final_softcap))) goto fail;
    if ((st = opt_num(a, what, "arch", "embedding_multiplier", 1.0, &out->embedding_multiplier))) goto fail;
    if ((st = opt_num(a, what, "arch", "residual_multiplier", 1.0, &out->residual_multiplier))) goto fail;
    if ((st = opt_num(a, what, "arch", "logits_scaling", 1.0, &out->logits_scaling))) goto fail;
    if (out->logits_scaling == 0) { st = cmf__error(CMF_ERR_CONFIG, "%s: header arch.logits_scaling: must not be 0", what); goto fail; }
    if (out->attn_softcap < 0 || out->final_softcap < 0) { st = cmf__error(CMF_ERR_CONFIG, "%s: header arch: softcapping must be >= 0", what); goto fail; }

    /* rotary: full layers, then sliding layers defaulting to the full ones */
    cmf__rope_cfg *rf = &out->rope_full, *rl = &out->rope_local;
    rf->type = CMF__ROPE_DEFAULT;
    rf->factor = 1.0;
    rf->truncate = true;
    rf->attention_factor = -1.0;
    if ((st = opt_num(a, what, "arch", "rope_theta", 10000.0, &rf->theta))) goto fail;
    if ((st = opt_num(a, what, "arch", "partial_rotary_factor", 1.0, &rf->partial))) goto fail;
    if ((st = parse_scaling(a, what, "rope_scaling", rf))) goto fail;
    *rl = *rf;
    rl->type = CMF__ROPE_DEFAULT;
    if ((st = opt_num(a, what, "arch", "rope_local_base_freq", rf->theta, &rl->theta))) goto fail;
    if ((st = opt_num(a, what, "arch", "local_partial_rotary_factor", rf->partial, &rl->partial))) goto fail;
    if ((st = parse_scaling(a, what, "local_rope_scaling", rl))) goto fail;
    if (!(rf->theta > 0) || !(rl->theta > 0) || !(rf->partial > 0 && rf->partial <= 1) ||
        !(rl->partial > 0 && rl->partial <= 1)) {
        st = cmf__error(CMF_ERR_CONFIG, "%s: header arch: rope_theta must be > 0 and partial rotary factors in (0, 1]", what);
        goto fail;
    }

    int64_t n = out->n_layer;
    out->layer_kind = calloc((size_t)n, sizeof *out->layer_kind);
    out->layer_head_dim = calloc((size_t)n, sizeof *out->layer_head_dim);
    out->layer_n_head = calloc((size_t)n, sizeof *out->layer_n_head);
    out->layer_rope = calloc((size_t)n, 1);
    int64_t *tmp = calloc((size_t)n, sizeof *tmp);
    if (!out->layer_kind || !out->layer_head_dim || !out->layer_n_head || !out->layer_rope || !tmp) {
        free(tmp);
        st = cmf__error(CMF_ERR_NOMEM, "%s: arch: out of memory", what);
        goto fail;
    }
    for (int64_t i = 0; i < n; i++) {
        out->layer_head_dim[i] = out->head_dim;
        out->layer_n_head[i] = out->n_head;
        tmp[i] = 1;
    }
    if ((st = layer_ints(a, what, "head_dim_per_layer", n, 2, 65536, out->layer_head_dim)) ||
        (st = layer_ints(a, what, "attention_heads_per_layer", n, 1, 65536, out->layer_n_head)) ||
        (st = layer_ints(a, what, "rope_layers", n, 0, 1, tmp))) {
        free(tmp);
        goto fail;
    }
    for (int64_t i = 0; i < n; i++) {
        out->layer_rope[i] = (uint8_t)tmp[i];
        if (out->layer_head_dim[i] & 1) {
            free(tmp);
            st = cmf__error(CMF_ERR_CONFIG, "%s: header arch.head_dim_per_layer[%lld]: must be even", what, (long long)i);
            goto fail;
        }
        if (out->layer_n_head[i] % out->n_head_kv) {
            free(tmp);
            st = cmf__error(CMF_ERR_CONFIG,
                            "%s: header arch: layer %lld has %lld query heads, not a multiple of num_kv_heads %lld",
                            what, (long long)i, (long long)out->layer_n_head[i], (long long)out->n_head_kv);
            goto fail;
        }
    }
    free(tmp);
    const json_t *lt = json_object_get(a, "layer_types");
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt) || (int64_t)json_array_size(lt) != n) {
            st = cmf__error(CMF_ERR_CONFIG, "%s: header arch.layer_types: expected an array of %lld strings", what,
                            (long long)n);
            goto fail;
        }
        for (int64_t i = 0; i < n; i++) {
            const char *s = json_string_value(json_array_get(lt, (size_t)i));
            if (s && (!strcmp(s, "FullAttention") || !strcmp(s, "full_attention")))
                out->layer_kind[i] = CMF__LAYER_FULL;
            else if (s && (!strcmp(s, "SlidingAttention") || !strcmp(s, "sliding_attention")))
                out->layer_kind[i] = CMF__LAYER_SLIDING;
            else if (s && (!strcmp(s, "LinearAttention") || !strcmp(s, "linear_attention")))
                out->layer_kind[i] = CMF__LAYER_LINEAR;
            else {
                st = cmf__error(CMF_ERR_CONFIG, "%s: header arch.layer_types[%lld]: unknown '%s'", what, (long long)i,
                                s ? s : "(not a string)");
                goto fail;
            }
            if (out->layer_kind[i] == CMF__LAYER_SLIDING && out->sliding_window <= 0) {
                st = cmf__error(CMF_ERR_CONFIG,
                                "%s: header arch.layer_types[%lld]: SlidingAttention needs sliding_window > 0", what,
                                (long long)i);
                goto fail;
            }
        }
    }
    return CMF_OK;
fail:
    cmf__arch_free(out);
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
