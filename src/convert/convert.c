/* convert.c — HF checkpoint folder -> .cmf: plan (names, shapes, dtypes),
 * checks against config.json, then tensor-by-tensor streaming into the
 * writer. Peak memory is one tensor's f32 copy plus its encoded payload;
 * source pages are dropped from the resident set after each tensor. Names
 * and shapes are the source's, except mixtral's block_sparse_moe and
 * gpt-oss's fused expert banks (docs/CONVERT.md). */
#include "convert/convert.h"
#include "convert/convert_internal.h"
#include "format/safetensors.h"
#include "format/format.h"
#include "quant/quant.h"
#include "util/arith.h"
#include "util/buf.h"
#include "util/error.h"
#include "util/file.h"
#include "util/half.h"
#include "util/json.h"
#include "util/log.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

cmf__convert_opts cmf__convert_opts_default(void)
{
    cmf__convert_opts o;
    memset(&o, 0, sizeof o);
    o.quant = CMF_DTYPE_Q8_ROW;
    o.quant_attn = o.quant_ffn = o.quant_embed = -1;
    return o;
}

static const struct {
    const char *name;
    int dtype;
} QUANT_NAMES[] = {
    {"f32", CMF_DTYPE_F32},         {"f16", CMF_DTYPE_F16},           {"bf16", CMF_DTYPE_BF16},
    {"q8", CMF_DTYPE_Q8_ROW},       {"q8_row", CMF_DTYPE_Q8_ROW},     {"q8_2f", CMF_DTYPE_Q8_2F},
    {"q4", CMF_DTYPE_Q4_BLOCK},     {"q4_block", CMF_DTYPE_Q4_BLOCK}, {"q4t", CMF_DTYPE_Q4_TILED},
    {"q4_tiled", CMF_DTYPE_Q4_TILED}, {"q4tp", CMF_DTYPE_Q4TP},
};

int cmf__convert_quant_from_name(const char *name)
{
    for (size_t i = 0; name && i < sizeof QUANT_NAMES / sizeof *QUANT_NAMES; i++)
        if (!strcmp(QUANT_NAMES[i].name, name)) return QUANT_NAMES[i].dtype;
    return -1;
}

cmf_status cmf__convert_apply_flag(cmf__convert_opts *o, const char *flag, const char *value)
{
    int *slot = !strcmp(flag, "--quant") ? &o->quant : !strcmp(flag, "--quant-attn") ? &o->quant_attn
              : !strcmp(flag, "--quant-ffn") ? &o->quant_ffn : !strcmp(flag, "--quant-embed") ? &o->quant_embed : NULL;
    if (!slot) return CMF_ERR_NOT_FOUND;
    int d = cmf__convert_quant_from_name(value);
    if (d < 0)
        return cmf__error(CMF_ERR_ARG, "%s: '%s' is not a quantization the converter writes (f32, f16, bf16, q8, q8_2f, q4, q4t, q4tp)",
                          flag, value ? value : "");
    *slot = d;
    return CMF_OK;
}

static const char *dtype_name(int d)
{
    const cmf__dtype_info *i = cmf__dtype_get(d);
    return i ? i->name : "?";
}

void cmf__convert_quant_type_name(int dtype, char out[16])
{
    snprintf(out, 16, "%s", dtype_name(dtype));
    for (char *p = out; *p; p++) *p = (char)toupper((unsigned char)*p);
}

static bool is_float(int d) { return d == CMF_DTYPE_F32 || d == CMF_DTYPE_F16 || d == CMF_DTYPE_BF16; }

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

int cmf__convert_pick_dtype(const cmf__convert_opts *opts, const char *name, int ndim, const uint64_t *shape)
{
    uint64_t numel = 1, cols = 1;
    for (int i = 0; i < ndim; i++) {
        numel *= shape[i];
        if (i) cols *= shape[i];
    }
    int main_dt = opts->quant;
    int keep = (main_dt == CMF_DTYPE_F32 || main_dt == CMF_DTYPE_BF16) ? main_dt : CMF_DTYPE_F16;
    if (ndim <= 1 || numel < 32) return keep; /* spec §3.2: 1-D and tiny tensors are f16 */
    int d = main_dt;
    if (!strcmp(name, "model.embed_tokens.weight") || !strcmp(name, "lm_head.weight") ||
        !strcmp(name, "model.embed_tokens_per_layer.weight")) {
        if (opts->quant_embed >= 0) d = opts->quant_embed;
    } else if (strstr(name, ".self_attn.") || strstr(name, ".linear_attn.")) {
        if (opts->quant_attn >= 0) d = opts->quant_attn;
    } else if (strstr(name, ".mlp.") || strstr(name, ".block_sparse_moe.")) {
        if (opts->quant_ffn >= 0) d = opts->quant_ffn;
    }
    if (is_float(d)) return d;
    /* routers decide which experts run: quantization noise there flips
     * choices, so they keep a float dtype (as llama.cpp keeps ffn_gate_inp) */
    if (ends_with(name, "mlp.gate.weight") || ends_with(name, "mlp.router.weight") ||
        ends_with(name, "block_sparse_moe.gate.weight") || ends_with(name, "shared_expert_gate.weight"))
        return keep;
    const cmf__dtype_info *info = cmf__dtype_get(d);
    if (!info) return keep;
    if (info->matrix_only && ndim != 2) return keep;
    if (info->needs_cols32 && cols % 32) return CMF_DTYPE_Q8_ROW;
    return d;
}

/* ---- tensor order ------------------------------------------------------- */
static int natcmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            while (*a == '0' && isdigit((unsigned char)a[1])) a++;
            while (*b == '0' && isdigit((unsigned char)b[1])) b++;
            const char *a0 = a, *b0 = b;
            while (isdigit((unsigned char)*a)) a++;
            while (isdigit((unsigned char)*b)) b++;
            size_t la = (size_t)(a - a0), lb = (size_t)(b - b0);
            if (la != lb) return la < lb ? -1 : 1;
            int c = strncmp(a0, b0, la);
            if (c) return c;
            continue;
        }
        if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++, b++;
    }
    return (unsigned char)*a - (unsigned char)*b;
}

static int group_rank(const char *n)
{
    if (!strncmp(n, "model.embed_tokens", 18)) return 0;
    if (!strncmp(n, "model.layers.", 13)) return 1;
    if (!strncmp(n, "lm_head.", 8)) return 3;
    return 2;
}

/* "X.experts.E.ROLE..." -> "X.experts.<rank>ROLE...#E" so that a layer's
 * experts sort role-contiguously. */
static char *order_key(const char *n)
{
    const char *p = strstr(n, ".experts.");
    char *k = malloc(strlen(n) + 8);
    if (!k) return NULL;
    if (!p || !isdigit((unsigned char)p[9])) {
        strcpy(k, n);
        return k;
    }
    const char *e = p + 9, *r = e;
    while (isdigit((unsigned char)*r)) r++;
    if (*r != '.') {
        strcpy(k, n);
        return k;
    }
    r++;
    char rank = !strncmp(r, "gate_proj", 9) ? '0' : !strncmp(r, "up_proj", 7) ? '1' : !strncmp(r, "down_proj", 9) ? '2' : '3';
    int len = (int)(p + 9 - n);
    sprintf(k, "%.*s%c%s#%.*s", len, n, rank, r, (int)(r - 1 - e), e);
    return k;
}

int cmf__convert_name_order(const char *a, const char *b)
{
    int ga = group_rank(a), gb = group_rank(b);
    if (ga != gb) return ga < gb ? -1 : 1;
    char *ka = order_key(a), *kb = order_key(b);
    int c = (ka && kb) ? natcmp(ka, kb) : strcmp(a, b);
    free(ka);
    free(kb);
    return c ? c : strcmp(a, b);
}

/* ---- plan --------------------------------------------------------------- */
typedef enum { X_COPY, X_OSS_GATE, X_OSS_UP, X_OSS_DOWN, X_OSS_GATE_B, X_OSS_UP_B, X_OSS_DOWN_B } xform;

typedef struct plan_entry {
    char *name;
    const cmf__st_tensor *src;
    xform x;
    uint64_t expert;
    int ndim;
    uint64_t shape[CMF_MAX_NDIM];
    uint64_t numel;
    int dtype;
    uint64_t nbytes;    /* payload bytes */
    uint64_t src_bytes; /* source bytes this entry consumes (progress) */
} plan_entry;

typedef struct plan {
    plan_entry *e;
    size_t n, cap;
} plan;

static void plan_free(plan *p)
{
    for (size_t i = 0; i < p->n; i++) free(p->e[i].name);
    free(p->e);
    p->e = NULL;
    p->n = p->cap = 0;
}

static cmf_status plan_add(plan *p, const char *name, const cmf__st_tensor *src, xform x, uint64_t expert, int ndim,
                           const uint64_t *shape)
{
    if (p->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 256;
        plan_entry *ne = realloc(p->e, nc * sizeof *ne);
        if (!ne) return cmf__error(CMF_ERR_NOMEM, "out of memory");
        p->e = ne;
        p->cap = nc;
    }
    plan_entry *e = &p->e[p->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (!e->name) return cmf__error(CMF_ERR_NOMEM, "out of memory");
    e->src = src;
    e->x = x;
    e->expert = expert;
    e->ndim = ndim;
    e->numel = 1;
    for (int i = 0; i < ndim; i++) e->shape[i] = shape[i], e->numel *= shape[i];
    if (ndim == 0) e->ndim = 1, e->shape[0] = 1; /* a scalar is stored as [1] */
    e->src_bytes = e->numel * (uint64_t)cmf__st_dtype_size(src->dtype);
    p->n++;
    return CMF_OK;
}

/* Replaces the first `from` in `s` by `to` into out (cap bytes); false when absent. */
static bool replace1(const char *s, const char *from, const char *to, char *out, size_t cap)
{
    const char *p = strstr(s, from);
    if (!p) return false;
    snprintf(out, cap, "%.*s%s%s", (int)(p - s), s, to, p + strlen(from));
    return true;
}

/* gpt-oss fused expert banks: mlp.experts.{gate_up_proj,down_proj}[_bias]
 * ([E, hidden, 2*inter] interleaved gate/up columns, used as x @ W; [E,
 * inter, hidden]) -> per-expert [out, in] entries. */
static cmf_status plan_gpt_oss_bank(plan *p, const cmf__st_tensor *t, const char *prefix, const char *kind)
{
    char name[640];
    cmf_status st;
    uint64_t E = t->shape[0];
    if (!strcmp(kind, "gate_up_proj")) {
        if (t->ndim != 3 || t->shape[2] % 2)
            return cmf__error(CMF_ERR_CONFIG, "tensor '%s': expected [experts, hidden, 2*intermediate]", t->name);
        uint64_t H = t->shape[1], I = t->shape[2] / 2, sh[2] = {I, H};
        for (uint64_t e = 0; e < E; e++) {
            snprintf(name, sizeof name, "%sexperts.%" PRIu64 ".gate_proj.weight", prefix, e);
            if ((st = plan_add(p, name, t, X_OSS_GATE, e, 2, sh))) return st;
            snprintf(name, sizeof name, "%sexperts.%" PRIu64 ".up_proj.weight", prefix, e);
            if ((st = plan_add(p, name, t, X_OSS_UP, e, 2, sh))) return st;
        }
    } else if (!strcmp(kind, "gate_up_proj_bias")) {
        if (t->ndim != 2 || t->shape[1] % 2)
            return cmf__error(CMF_ERR_CONFIG, "tensor '%s': expected [experts, 2*intermediate]", t->name);
        uint64_t sh[1] = {t->shape[1] / 2};
        for (uint64_t e = 0; e < E; e++) {
            snprintf(name, sizeof name, "%sexperts.%" PRIu64 ".gate_proj.bias", prefix, e);
            if ((st = plan_add(p, name, t, X_OSS_GATE_B, e, 1, sh))) return st;
            snprintf(name, sizeof name, "%sexperts.%" PRIu64 ".up_proj.bias", prefix, e);
            if ((st = plan_add(p, name, t, X_OSS_UP_B, e, 1, sh))) return st;
        }
    } else if (!strcmp(kind, "down_proj")) {
        if (t->ndim != 3)
            return cmf__error(CMF_ERR_CONFIG, "tensor '%s': expected [experts, intermediate, hidden]", t->name);
        uint64_t sh[2] = {t->shape[2], t->shape[1]};
        for (uint64_t e = 0; e < E; e++) {
            snprintf(name, sizeof name, "%sexperts.%" PRIu64 ".down_proj.weight", prefix, e);
            if ((st = plan_add(p, name, t, X_OSS_DOWN, e, 2, sh))) return st;
        }
    } else if (!strcmp(kind, "down_proj_bias")) {
        if (t->ndim != 2) return cmf__error(CMF_ERR_CONFIG, "tensor '%s': expected [experts, hidden]", t->name);
        uint64_t sh[1] = {t->shape[1]};
        for (uint64_t e = 0; e < E; e++) {
            snprintf(name, sizeof name, "%sexperts.%" PRIu64 ".down_proj.bias", prefix, e);
            if ((st = plan_add(p, name, t, X_OSS_DOWN_B, e, 1, sh))) return st;
        }
    } else {
        return cmf__error(CMF_ERR_CONFIG, "tensor '%s': unknown fused expert bank", t->name);
    }
    return CMF_OK;
}

static cmf_status plan_build(const cmf__st_set *s, bool tied, plan *p)
{
    char name[512], tmp[512];
    cmf_status st;
    for (size_t i = 0; i < s->n_tensors; i++) {
        const cmf__st_tensor *t = &s->tensors[i];
        if (strlen(t->name) > 400) return cmf__error(CMF_ERR_CONFIG, "tensor name too long: '%.64s...'", t->name);
        if (tied && !strcmp(t->name, "lm_head.weight")) {
            CMF_INFO("tie_word_embeddings is true: lm_head.weight dropped (the embedding is used)");
            continue;
        }
        /* gpt-oss fused expert banks */
        const char *fx = strstr(t->name, ".mlp.experts.");
        if (fx && t->ndim >= 2) {
            const char *kind = fx + 13;
            if (!strcmp(kind, "gate_up_proj") || !strcmp(kind, "gate_up_proj_bias") || !strcmp(kind, "down_proj") ||
                !strcmp(kind, "down_proj_bias")) {
                snprintf(tmp, sizeof tmp, "%.*s.mlp.", (int)(fx - t->name), t->name);
                if ((st = plan_gpt_oss_bank(p, t, tmp, kind))) return st;
                continue;
            }
        }
        snprintf(name, sizeof name, "%s", t->name);
        /* mixtral: block_sparse_moe.{gate, experts.E.w1/w3/w2} */
        if (replace1(name, ".block_sparse_moe.", ".mlp.", tmp, sizeof tmp)) {
            snprintf(name, sizeof name, "%s", tmp);
            if (strstr(name, ".mlp.experts.")) {
                if (replace1(name, ".w1.", ".gate_proj.", tmp, sizeof tmp) ||
                    replace1(name, ".w3.", ".up_proj.", tmp, sizeof tmp) ||
                    replace1(name, ".w2.", ".down_proj.", tmp, sizeof tmp))
                    snprintf(name, sizeof name, "%s", tmp);
            }
        }
        /* gpt-oss: mlp.router.* -> mlp.gate.* */
        if (replace1(name, ".mlp.router.", ".mlp.gate.", tmp, sizeof tmp)) snprintf(name, sizeof name, "%s", tmp);
        if ((st = plan_add(p, name, t, X_COPY, 0, t->ndim, t->shape))) return st;
    }
    return CMF_OK;
}

static int cmp_entry_name(const void *a, const void *b)
{
    return strcmp(((const plan_entry *)a)->name, ((const plan_entry *)b)->name);
}
static int cmp_entry_order(const void *a, const void *b)
{
    return cmf__convert_name_order(((const plan_entry *)a)->name, ((const plan_entry *)b)->name);
}

static const plan_entry *plan_find(const plan *p, const char *name)
{
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(p->e[mid].name, name);
        if (!c) return &p->e[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* ---- checks against config.json ---------------------------------------- */
typedef struct checker {
    const plan *p;
    const char *what; /* config path */
} checker;

static int64_t aint(const json_t *o, const char *k, int64_t def)
{
    const json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? json_integer_value(v) : def;
}

static void fmt_shape(char *out, size_t cap, int ndim, const uint64_t *shape)
{
    size_t n = (size_t)snprintf(out, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%" PRIu64, i ? ", " : "", shape[i]);
    if (n < cap) snprintf(out + n, cap - n, "]");
}

/* Checks that `name` exists (when required) with shape [d0] or [d0, d1]
 * (d1 < 0: 1-D). Returns the entry or NULL. */
static cmf_status expect(const checker *c, const char *name, bool required, int64_t d0, int64_t d1,
                         const plan_entry **found)
{
    const plan_entry *e = plan_find(c->p, name);
    if (found) *found = e;
    if (!e) {
        if (required) return cmf__error(CMF_ERR_CONFIG, "missing tensor '%s' (required by %s)", name, c->what);
        return CMF_OK;
    }
    int nd = d1 < 0 ? 1 : 2;
    if (e->ndim != nd || (int64_t)e->shape[0] != d0 || (nd == 2 && (int64_t)e->shape[1] != d1)) {
        char got[96], want[96];
        uint64_t w[2] = {(uint64_t)d0, (uint64_t)d1};
        fmt_shape(got, sizeof got, e->ndim, e->shape);
        fmt_shape(want, sizeof want, nd, w);
        return cmf__error(CMF_ERR_CONFIG, "tensor '%s' (from %s) has shape %s, but %s implies %s", name,
                          e->src->name, got, c->what, want);
    }
    return CMF_OK;
}

static cmf_status check_tensors(const plan *p, const json_t *arch, const char *what)
{
    checker c = {p, what};
    char n[512];
    cmf_status st;
    int64_t hidden = aint(arch, "hidden_size", 0), vocab = aint(arch, "vocab_size", 0);
    int64_t layers = aint(arch, "num_layers", 0), heads = aint(arch, "num_attention_heads", 0);
    int64_t kv = aint(arch, "num_kv_heads", 0), inter = aint(arch, "intermediate_size", 0);
    const json_t *hdl = json_object_get(arch, "head_dim_per_layer");
    const json_t *types = json_object_get(arch, "layer_types");
    const json_t *moe = json_object_get(arch, "moe");
    const char *placement = json_string_value(json_object_get(arch, "norm_placement"));
    bool tied = json_is_true(json_object_get(arch, "tie_word_embeddings"));
    if ((st = expect(&c, "model.embed_tokens.weight", true, vocab, hidden, NULL))) return st;
    if ((st = expect(&c, "model.norm.weight", true, hidden, -1, NULL))) return st;
    if (!tied && (st = expect(&c, "lm_head.weight", true, vocab, hidden, NULL))) {
        if (!plan_find(p, "lm_head.weight"))
            return cmf__error(CMF_ERR_CONFIG, "missing tensor 'lm_head.weight' (%s sets tie_word_embeddings false)", what);
        return st;
    }
    for (int64_t l = 0; l < layers; l++) {
        int64_t hd = hdl ? json_integer_value(json_array_get(hdl, (size_t)l)) : aint(arch, "head_dim", 0);
        const char *type = json_string_value(json_array_get(types, (size_t)l));
        const plan_entry *e;
#define NAME(fmt) (snprintf(n, sizeof n, "model.layers.%lld." fmt, (long long)l), n)
        if (type && !strcmp(type, "LinearAttention")) {
            if ((st = expect(&c, NAME("linear_attn.out_proj.weight"), true, hidden,
                             aint(arch, "linear_num_value_heads", 0) * aint(arch, "linear_value_head_dim", 0), NULL)))
                return st;
        } else if (plan_find(p, NAME("self_attn.qkv_proj.weight"))) {
            if ((st = expect(&c, n, true, (heads + 2 * kv) * hd, hidden, NULL))) return st;
            if ((st = expect(&c, NAME("self_attn.o_proj.weight"), true, hidden, heads * hd, NULL))) return st;
        } else {
            e = plan_find(p, NAME("self_attn.q_proj.weight"));
            /* a q_proj twice as tall carries the per-head output gate */
            int64_t qrows = (e && (int64_t)e->shape[0] == 2 * heads * hd) ? 2 * heads * hd : heads * hd;
            if ((st = expect(&c, n, true, qrows, hidden, NULL))) return st;
            if ((st = expect(&c, NAME("self_attn.k_proj.weight"), true, kv * hd, hidden, NULL))) return st;
            if ((st = expect(&c, NAME("self_attn.v_proj.weight"), true, kv * hd, hidden, NULL))) return st;
            if ((st = expect(&c, NAME("self_attn.o_proj.weight"), true, hidden, heads * hd, NULL))) return st;
        }
        if (plan_find(p, NAME("mlp.gate.weight"))) {
            int64_t ne = aint(moe, "num_experts", 0), mi = aint(moe, "moe_intermediate_size", 0);
            if (!moe) return cmf__error(CMF_ERR_CONFIG, "tensor '%s' is an expert router, but %s declares no experts", n, what);
            if ((st = expect(&c, n, true, ne, hidden, NULL))) return st;
            for (int64_t x = 0; x < ne; x++) {
                snprintf(n, sizeof n, "model.layers.%lld.mlp.experts.%lld.gate_proj.weight", (long long)l, (long long)x);
                if ((st = expect(&c, n, true, mi, hidden, NULL))) return st;
                snprintf(n, sizeof n, "model.layers.%lld.mlp.experts.%lld.up_proj.weight", (long long)l, (long long)x);
                if ((st = expect(&c, n, true, mi, hidden, NULL))) return st;
                snprintf(n, sizeof n, "model.layers.%lld.mlp.experts.%lld.down_proj.weight", (long long)l, (long long)x);
                if ((st = expect(&c, n, true, hidden, mi, NULL))) return st;
            }
            int64_t si = aint(moe, "shared_expert_intermediate_size", 0);
            if (si > 0) {
                if ((st = expect(&c, NAME("mlp.shared_expert.gate_proj.weight"), true, si, hidden, NULL))) return st;
                if ((st = expect(&c, NAME("mlp.shared_expert.up_proj.weight"), true, si, hidden, NULL))) return st;
                if ((st = expect(&c, NAME("mlp.shared_expert.down_proj.weight"), true, hidden, si, NULL))) return st;
            }
        } else if (plan_find(p, NAME("mlp.gate_up_proj.weight"))) {
            if ((st = expect(&c, n, true, 2 * inter, hidden, NULL))) return st;
            if ((st = expect(&c, NAME("mlp.down_proj.weight"), true, hidden, inter, NULL))) return st;
        } else {
            if ((st = expect(&c, NAME("mlp.gate_proj.weight"), true, inter, hidden, NULL))) return st;
            if ((st = expect(&c, NAME("mlp.up_proj.weight"), true, inter, hidden, NULL))) return st;
            if ((st = expect(&c, NAME("mlp.down_proj.weight"), true, hidden, inter, NULL))) return st;
        }
        bool pre = placement && !strcmp(placement, "pre"), sand = placement && !strcmp(placement, "sandwich");
        if ((pre || sand) && (st = expect(&c, NAME("input_layernorm.weight"), true, hidden, -1, NULL))) return st;
        if ((st = expect(&c, NAME("post_attention_layernorm.weight"), true, hidden, -1, NULL))) return st;
        if (sand && (st = expect(&c, NAME("pre_feedforward_layernorm.weight"), true, hidden, -1, NULL))) return st;
        if (!pre && (st = expect(&c, NAME("post_feedforward_layernorm.weight"), true, hidden, -1, NULL))) return st;
#undef NAME
    }
    /* nothing may claim a layer the config does not have */
    for (size_t i = 0; i < p->n; i++) {
        const char *nm = p->e[i].name;
        if (!strncmp(nm, "model.layers.", 13)) {
            long long l = strtoll(nm + 13, NULL, 10);
            if (l < 0 || l >= layers)
                return cmf__error(CMF_ERR_CONFIG, "tensor '%s' is for layer %lld, but %s has %lld layers", nm, l, what,
                                  (long long)layers);
        }
    }
    return CMF_OK;
}

/* ---- payloads ----------------------------------------------------------- */
/* Source element index of output element i. */
static uint64_t src_index(const plan_entry *e, uint64_t i)
{
    const cmf__st_tensor *t = e->src;
    switch (e->x) {
    case X_COPY: return i;
    case X_OSS_GATE:
    case X_OSS_UP: { /* out [I, H] from [E, H, 2I] */
        uint64_t H = t->shape[1], I2 = t->shape[2], r = i / H, h = i % H;
        return e->expert * H * I2 + h * I2 + 2 * r + (e->x == X_OSS_UP);
    }
    case X_OSS_DOWN: { /* out [H, I] from [E, I, H] */
        uint64_t I = t->shape[1], H = t->shape[2], o = i / I, k = i % I;
        return e->expert * I * H + k * H + o;
    }
    case X_OSS_GATE_B:
    case X_OSS_UP_B: return e->expert * t->shape[1] + 2 * i + (e->x == X_OSS_UP_B);
    case X_OSS_DOWN_B: return e->expert * t->shape[1] + i;
    }
    return i;
}

/* Whole-tensor widening, the hot loop of a plain conversion. */
static void to_f32(const cmf__st_tensor *t, float *f, uint64_t n)
{
    const uint8_t *p = t->data;
    if (t->dtype == CMF_ST_BF16)
        for (uint64_t i = 0; i < n; i++) f[i] = cmf__bits_f32((uint32_t)cmf__rd16(p + 2 * i) << 16);
    else if (t->dtype == CMF_ST_F16)
        for (uint64_t i = 0; i < n; i++) f[i] = cmf__f16_to_f32(cmf__rd16(p + 2 * i));
    else
        for (uint64_t i = 0; i < n; i++) f[i] = cmf__bits_f32(cmf__rd32(p + 4 * i));
}

static bool raw_same(cmf__st_dtype s, int d)
{
    return (s == CMF_ST_F32 && d == CMF_DTYPE_F32) || (s == CMF_ST_F16 && d == CMF_DTYPE_F16) ||
           (s == CMF_ST_BF16 && d == CMF_DTYPE_BF16);
}

static cmf_status payload_size(plan_entry *e)
{
    if (is_float(e->dtype)) {
        e->nbytes = e->numel * (e->dtype == CMF_DTYPE_F32 ? 4 : 2);
        return CMF_OK;
    }
    cmf_status st = cmf__dtype_nbytes(e->dtype, e->ndim, e->shape, &e->nbytes);
    if (st) return cmf__error_prefix(st, "tensor '%s'", e->name);
    return CMF_OK;
}

/* Encodes entry e. *data points either into the source mapping (zero copy)
 * or into `scratch` (out). */
static cmf_status encode(const plan_entry *e, cmf__buf *scratch, float **f32buf, const void **data, uint64_t *nbytes)
{
    const cmf__st_tensor *t = e->src;
    scratch->len = 0;
    if (e->x == X_COPY && raw_same(t->dtype, e->dtype)) {
        *data = t->data;
        *nbytes = t->nbytes;
        return CMF_OK;
    }
    cmf_status st;
    if (is_float(e->dtype)) {
        int es = e->dtype == CMF_DTYPE_F32 ? 4 : 2, ss = cmf__st_dtype_size(t->dtype);
        if ((st = cmf__buf_reserve(scratch, e->numel * (uint64_t)es))) return st;
        uint8_t *o = scratch->data;
        bool raw = raw_same(t->dtype, e->dtype);
        for (uint64_t i = 0; i < e->numel; i++) {
            uint64_t si = src_index(e, i);
            if (raw) memcpy(o + i * (uint64_t)es, t->data + si * (uint64_t)ss, (size_t)es);
            else {
                float v = cmf__st_get(t, si);
                if (e->dtype == CMF_DTYPE_F32) cmf__wr32(o + 4 * i, cmf__f32_bits(v));
                else if (e->dtype == CMF_DTYPE_F16) cmf__wr16(o + 2 * i, cmf__f32_to_f16(v));
                else cmf__wr16(o + 2 * i, cmf__f32_to_bf16(v));
            }
        }
        scratch->len = e->numel * (uint64_t)es;
    } else {
        float *f = realloc(*f32buf, e->numel * sizeof *f);
        if (!f) return cmf__error(CMF_ERR_NOMEM, "tensor '%s': out of memory for %" PRIu64 " elements", e->name, e->numel);
        *f32buf = f;
        if (e->x == X_COPY) to_f32(t, f, e->numel);
        else
            for (uint64_t i = 0; i < e->numel; i++) f[i] = cmf__st_get(t, src_index(e, i));
        int64_t rows = (int64_t)e->shape[0], cols = rows ? (int64_t)(e->numel / e->shape[0]) : 0;
        if (e->ndim == 1) rows = 1, cols = (int64_t)e->numel;
        cmf__quant_opts qo = cmf__quant_opts_default();
        if ((st = cmf__quantize(e->dtype, f, rows, cols, &qo, scratch, e->name))) return st;
    }
    *data = scratch->data;
    *nbytes = scratch->len;
    return CMF_OK;
}

/* ---- driver ------------------------------------------------------------- */
static const char *base_name(const char *dir, char *buf, size_t cap)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/') b--;
    snprintf(buf, cap, "%.*s", (int)(n - b), dir + b);
    return buf;
}

static cmf_status read_json_file(const char *path, json_t **out, char **raw, size_t *raw_len)
{
    char *text;
    size_t len;
    cmf_status st = cmf__read_file(path, &text, &len);
    if (st) return st;
    st = cmf__json_parse(text, len, path, out);
    if (raw && !st) {
        *raw = text;
        *raw_len = len;
    } else {
        free(text);
    }
    return st;
}

static json_t *quant_json(const cmf__convert_opts *o)
{
    json_t *q = json_object();
    json_object_set_new(q, "default", json_string(dtype_name(o->quant)));
    if (o->quant_attn >= 0) json_object_set_new(q, "attn", json_string(dtype_name(o->quant_attn)));
    if (o->quant_ffn >= 0) json_object_set_new(q, "ffn", json_string(dtype_name(o->quant_ffn)));
    if (o->quant_embed >= 0) json_object_set_new(q, "embed", json_string(dtype_name(o->quant_embed)));
    return q;
}

cmf_status cmf__convert_check_opts(const cmf__convert_opts *o)
{
    int ds[4] = {o->quant, o->quant_attn, o->quant_ffn, o->quant_embed};
    for (int i = 0; i < 4; i++) {
        if (i && ds[i] < 0) continue;
        bool ok = false;
        for (size_t k = 0; k < sizeof QUANT_NAMES / sizeof *QUANT_NAMES; k++)
            if (QUANT_NAMES[k].dtype == ds[i]) ok = true;
        if (!ok) return cmf__error(CMF_ERR_ARG, "quantization dtype %d is not one the converter writes", ds[i]);
    }
    return CMF_OK;
}

static uint64_t estimate_file(const plan *p, size_t header_len, uint64_t vocab_len)
{
    uint64_t dir = 16 + 56 * (uint64_t)p->n, data = 0;
    for (size_t i = 0; i < p->n; i++) dir += strlen(p->e[i].name), data = cmf__align_up(data, 64) + p->e[i].nbytes;
    /* + ~160 bytes of section_hashes the writer adds to the header */
    uint64_t head = 128 + header_len + 160 + dir;
    return cmf__align_up(head, 4096) + cmf__align_up(data, 64) + vocab_len;
}

static void print_plan(FILE *out, const plan *p, uint64_t file_bytes)
{
    uint64_t total = 0;
    for (size_t i = 0; i < p->n; i++) {
        char sh[96];
        fmt_shape(sh, sizeof sh, p->e[i].ndim, p->e[i].shape);
        fprintf(out, "%-60s %-16s %-8s %12" PRIu64 "\n", p->e[i].name, sh, dtype_name(p->e[i].dtype), p->e[i].nbytes);
        total += p->e[i].nbytes;
    }
    fprintf(out, "total: %zu tensors, %" PRIu64 " payload bytes, file about %" PRIu64 " bytes (%.2f MiB)\n", p->n,
            total, file_bytes, (double)file_bytes / 1048576.0);
}

/* The output must not be one of the files this conversion reads (a
 * rename over it would destroy the checkpoint) nor a non-regular file. */
static cmf_status check_output(const char *dir, const cmf__st_set *set, const char *out_path)
{
    static const char *const META[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                       "generation_config.json", "chat_template.jinja", "chat_template.json",
                                       "model.safetensors.index.json"};
    cmf_status st = CMF_OK;
    for (size_t i = 0; st == CMF_OK && i < sizeof META / sizeof *META; i++) {
        char *p = cmf__path_join(dir, META[i]);
        if (!p) return cmf__error(CMF_ERR_NOMEM, "out of memory");
        const char *src = p;
        st = cmf__output_check(out_path, &src, 1);
        free(p);
    }
    if (st == CMF_OK) st = cmf__output_check(out_path, (const char *const *)set->paths, set->n_files);
    return st;
}

cmf_status cmf__convert_hf(const char *dir, const char *out_path, const cmf__convert_opts *opts_in,
                           cmf__convert_result *result)
{
    cmf__convert_opts opts = opts_in ? *opts_in : cmf__convert_opts_default();
    if (result) memset(result, 0, sizeof *result);
    cmf_status st = cmf__convert_check_opts(&opts);
    if (st) return st;
    char *cfg_path = cmf__path_join(dir, "config.json"), *tok_path = cmf__path_join(dir, "tokenizer.json");
    json_t *config = NULL, *arch = NULL, *tok = NULL, *bundle = NULL, *header = NULL;
    char *tok_raw = NULL;
    size_t tok_len = 0;
    cmf__st_set *set = NULL;
    plan p = {0};
    cmf__writer *w = NULL;
    cmf__buf scratch = {0};
    float *f32buf = NULL;
    if (!cfg_path || !tok_path) {
        st = cmf__error(CMF_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = read_json_file(cfg_path, &config, NULL, NULL))) goto done;
    if ((st = cmf__convert_arch(config, cfg_path, &arch))) goto done;
    if ((st = read_json_file(tok_path, &tok, &tok_raw, &tok_len))) {
        cmf__error_prefix(st, "%s: the tokenizer is required (it becomes the vocab section)", dir);
        goto done;
    }
    if ((st = cmf__convert_chat_bundle(dir, config, tok, json_integer_value(json_object_get(arch, "vocab_size")), &bundle)))
        goto done;
    if ((st = cmf__st_open_dir(dir, &set))) goto done;
    /* tie_word_embeddings: HF's default is true; a checkpoint with lm_head
     * and no explicit field is untied */
    if (!json_object_get(config, "tie_word_embeddings") && cmf__st_find(set, "lm_head.weight"))
        json_object_set_new(arch, "tie_word_embeddings", json_false());
    bool tied = json_is_true(json_object_get(arch, "tie_word_embeddings"));
    if ((st = plan_build(set, tied, &p))) goto done;
    qsort(p.e, p.n, sizeof *p.e, cmp_entry_name);
    for (size_t i = 1; i < p.n; i++)
        if (!strcmp(p.e[i].name, p.e[i - 1].name)) {
            st = cmf__error(CMF_ERR_DUPLICATE, "tensors '%s' and '%s' both map to '%s'", p.e[i - 1].src->name,
                            p.e[i].src->name, p.e[i].name);
            goto done;
        }
    if ((st = check_tensors(&p, arch, cfg_path))) goto done;
    qsort(p.e, p.n, sizeof *p.e, cmp_entry_order);
    uint64_t total_src = 0, payload = 0;
    for (size_t i = 0; i < p.n; i++) {
        plan_entry *e = &p.e[i];
        e->dtype = cmf__convert_pick_dtype(&opts, e->name, e->ndim, e->shape);
        if (opts.plan && (st = opts.plan(opts.hook_ctx, e->name, e->ndim, e->shape, &e->dtype))) goto done;
        if ((st = payload_size(e))) goto done;
        total_src += e->src_bytes;
        payload += e->nbytes;
    }
    /* header */
    char qt[16], prov_name[256];
    cmf__convert_quant_type_name(opts.quant, qt);
    header = json_object();
    json_object_set(header, "arch", arch);
    json_object_set_new(header, "quant_type", json_string(qt));
    json_t *prov = json_object();
    json_object_set_new(prov, "tool", json_string("cmf " CMF_VERSION_STRING));
    json_object_set_new(prov, "source_model", json_string(base_name(dir, prov_name, sizeof prov_name)));
    json_object_set_new(prov, "source_format", json_string("safetensors"));
    json_object_set_new(prov, "quant", quant_json(&opts));
    json_object_set_new(header, "provenance", prov);
    json_object_set(header, "tokenizer_config", bundle);
    char *hdump = cmf__json_dump(header);
    uint64_t est = estimate_file(&p, hdump ? strlen(hdump) : 0, tok_len);
    free(hdump);
    if (opts.plan_out) print_plan(opts.plan_out, &p, est);
    if (result) result->n_tensors = p.n, result->payload_bytes = payload, result->file_bytes = est;
    if (opts.dry_run) goto done;

    if (!opts.sink) {
        if ((st = check_output(dir, set, out_path))) goto done;
        if ((st = cmf__writer_open(out_path, &w))) goto done;
        if ((st = cmf__writer_set_header(w, header))) goto done;
        if ((st = cmf__writer_set_vocab(w, tok_raw, tok_len))) goto done;
    }
    uint64_t done_src = 0;
    for (size_t i = 0; i < p.n; i++) {
        const plan_entry *e = &p.e[i];
        const void *data = NULL;
        uint64_t nb = 0;
        if ((st = encode(e, &scratch, &f32buf, &data, &nb))) goto done;
        if (nb != e->nbytes) {
            st = cmf__error(CMF_ERR_INTERNAL, "tensor '%s': encoded %" PRIu64 " bytes, planned %" PRIu64, e->name, nb,
                            e->nbytes);
            goto done;
        }
        if (opts.sink) st = opts.sink(opts.hook_ctx, e->name, e->dtype, e->ndim, e->shape, data, nb);
        else st = cmf__writer_add_tensor(w, e->name, e->dtype, e->ndim, e->shape, data, nb);
        if (st) goto done;
        /* drop the source pages from RSS (a split bank refaults its next
         * expert's slice from the page cache) */
        cmf__st_release(set, e->src);
        done_src += e->src_bytes;
        if (opts.progress) opts.progress(opts.progress_ctx, done_src, total_src);
    }
    if (opts.sink) goto done;
    st = cmf__writer_finish(w);
    w = NULL;
    if (!st && result) {
        struct stat sb;
        if (stat(out_path, &sb) == 0) result->file_bytes = (uint64_t)sb.st_size;
    }
done:
    if (w) cmf__writer_abort(w);
    plan_free(&p);
    cmf__st_free(set);
    cmf__buf_free(&scratch);
    free(f32buf);
    free(tok_raw);
    free(cfg_path);
    free(tok_path);
    json_decref(config);
    json_decref(arch);
    json_decref(tok);
    json_decref(bundle);
    json_decref(header);
    return st;
}
