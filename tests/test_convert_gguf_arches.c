/* test_convert_gguf_arches.c — the architectures without a llama.cpp-made
 * fixture GGUF (gemma2, gemma3, phi3, qwen3, qwen2moe, qwen3moe): a GGUF is
 * written here from fixtures/hf-models/<arch> the way llama.cpp's
 * convert_hf_to_gguf.py lays it out (its names, reversed dims, stacked
 * expert banks, gemma norms stored as 1 + w, llama's q/k row permutation,
 * rope_freqs.weight, f32 metadata), imported back,
 * and checked: every tensor equals the checkpoint's (bit exact; gemma norms
 * equal f32(1 + w)), and the arch block equals what `cmf convert` writes for
 * config.json once the fields such a GGUF cannot carry are set. */
#include "convert/convert.h"
#include "convert/gguf.h"
#include "harness.h"
#include "util/arith.h"
#include "util/half.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- safetensors (bf16 fixtures) ---------------------------------------- */
typedef struct st_file {
    char *bytes;
    size_t len;
    json_t *hdr;
    size_t data_off;
} st_file;

static bool st_open(const char *path, st_file *f)
{
    memset(f, 0, sizeof *f);
    f->bytes = harness_read_file(path, &f->len);
    if (!f->bytes || f->len < 8) return false;
    uint64_t n = cmf__rd64((const uint8_t *)f->bytes);
    if (n > f->len - 8) return false;
    f->hdr = json_loadb(f->bytes + 8, n, 0, NULL);
    f->data_off = 8 + n;
    return f->hdr != NULL;
}

static float *st_values(const st_file *f, const json_t *t, int *ndim, uint64_t shape[3], uint64_t *n)
{
    const char *dt = json_string_value(json_object_get(t, "dtype"));
    json_t *sh = json_object_get(t, "shape"), *off = json_object_get(t, "data_offsets");
    *ndim = (int)json_array_size(sh);
    *n = 1;
    for (int d = 0; d < *ndim && d < 3; d++) *n *= shape[d] = (uint64_t)json_integer_value(json_array_get(sh, (size_t)d));
    const uint8_t *p = (const uint8_t *)f->bytes + f->data_off + json_integer_value(json_array_get(off, 0));
    float *v = malloc(*n * sizeof *v);
    for (uint64_t i = 0; i < *n; i++) {
        if (!strcmp(dt, "BF16")) v[i] = cmf__bf16_to_f32(cmf__rd16(p + 2 * i));
        else if (!strcmp(dt, "F16")) v[i] = cmf__f16_to_f32(cmf__rd16(p + 2 * i));
        else v[i] = cmf__bits_f32(cmf__rd32(p + 4 * i));
    }
    return v;
}

/* ---- a GGUF writer ------------------------------------------------------- */
typedef struct wbuf {
    uint8_t *d;
    size_t n, cap;
} wbuf;
static void wput(wbuf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->d = realloc(b->d, b->cap);
    }
    memcpy(b->d + b->n, p, n);
    b->n += n;
}
static void w32(wbuf *b, uint32_t v) { uint8_t t[4]; cmf__wr32(t, v); wput(b, t, 4); }
static void w64(wbuf *b, uint64_t v) { uint8_t t[8]; cmf__wr64(t, v); wput(b, t, 8); }
static void wstr(wbuf *b, const char *s) { w64(b, strlen(s)); wput(b, s, strlen(s)); }

typedef struct gtensor {
    char name[160];
    uint32_t ndim;
    uint64_t ne[3];
    float *data; /* owned */
    uint64_t n;
} gtensor;

typedef struct gfile {
    wbuf kv;
    uint64_t n_kv;
    gtensor t[512];
    size_t n_t;
    char arch[32];
} gfile;

static void kv_u32(gfile *g, const char *key, uint32_t v)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", g->arch, key);
    wstr(&g->kv, k), w32(&g->kv, CMF_GGUF_U32), w32(&g->kv, v), g->n_kv++;
}
static void kv_f32(gfile *g, const char *key, double v)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", g->arch, key);
    wstr(&g->kv, k), w32(&g->kv, CMF_GGUF_F32), w32(&g->kv, cmf__f32_bits((float)v)), g->n_kv++;
}

static gtensor *add_tensor(gfile *g, const char *name, int hf_ndim, const uint64_t *hf_shape, uint64_t n)
{
    gtensor *t = &g->t[g->n_t++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = (uint32_t)hf_ndim;
    for (int d = 0; d < hf_ndim; d++) t->ne[d] = hf_shape[hf_ndim - 1 - d];
    t->data = calloc(n, sizeof(float));
    t->n = n;
    return t;
}

static void write_gguf(gfile *g, const char *path)
{
    wbuf b = {0};
    wput(&b, "GGUF", 4);
    w32(&b, 3), w64(&b, g->n_t), w64(&b, g->n_kv + 1);
    wstr(&b, "general.architecture"), w32(&b, CMF_GGUF_STRING), wstr(&b, g->arch);
    wput(&b, g->kv.d, g->kv.n);
    uint64_t off = 0;
    for (size_t i = 0; i < g->n_t; i++) {
        gtensor *t = &g->t[i];
        wstr(&b, t->name), w32(&b, t->ndim);
        for (uint32_t d = 0; d < t->ndim; d++) w64(&b, t->ne[d]);
        w32(&b, CMF_GGML_F32), w64(&b, off);
        off = cmf__align_up(off + t->n * 4, 32);
    }
    while (b.n % 32) wput(&b, "", 1);
    for (size_t i = 0; i < g->n_t; i++) {
        for (uint64_t k = 0; k < g->t[i].n; k++) w32(&b, cmf__f32_bits(g->t[i].data[k]));
        while (b.n % 32) wput(&b, "", 1);
    }
    FILE *fp = fopen(path, "wb");
    if (fp) {
        fwrite(b.d, 1, b.n, fp);
        fclose(fp);
    }
    free(b.d);
}

/* HF suffix (after model.layers.N.) -> llama.cpp base name. */
static const char *gguf_base(const char *hf, bool gemma)
{
    static const char *const map[][2] = {
        {"input_layernorm", "attn_norm"},          {"pre_feedforward_layernorm", "ffn_norm"},
        {"post_feedforward_layernorm", "post_ffw_norm"}, {"self_attn.q_proj", "attn_q"},
        {"self_attn.k_proj", "attn_k"},           {"self_attn.v_proj", "attn_v"},
        {"self_attn.o_proj", "attn_output"},      {"self_attn.qkv_proj", "attn_qkv"},
        {"self_attn.q_norm", "attn_q_norm"},      {"self_attn.k_norm", "attn_k_norm"},
        {"mlp.gate_proj", "ffn_gate"},            {"mlp.up_proj", "ffn_up"},
        {"mlp.down_proj", "ffn_down"},            {"mlp.gate_up_proj", "ffn_up"},
        {"mlp.gate", "ffn_gate_inp"},             {"mlp.shared_expert.gate_proj", "ffn_gate_shexp"},
        {"mlp.shared_expert.up_proj", "ffn_up_shexp"}, {"mlp.shared_expert.down_proj", "ffn_down_shexp"},
        {"mlp.shared_expert_gate", "ffn_gate_inp_shexp"},
    };
    if (!strcmp(hf, "post_attention_layernorm")) return gemma ? "post_attention_norm" : "ffn_norm";
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(hf, map[i][0])) return map[i][1];
    return NULL;
}

/* Builds the GGUF for hf-models/<dir> as arch <arch>; returns false when the
 * checkpoint holds a tensor this writer does not know. */
static bool make_gguf(const char *dir, const char *arch, const json_t *cfg, const st_file *sf, const char *path)
{
    gfile *g = calloc(1, sizeof *g);
    snprintf(g->arch, sizeof g->arch, "%s", arch);
    bool gemma = !strncmp(arch, "gemma", 5);
    int64_t hidden = json_integer_value(json_object_get(cfg, "hidden_size"));
    int64_t heads = json_integer_value(json_object_get(cfg, "num_attention_heads"));
    int64_t hd = json_integer_value(json_object_get(cfg, "head_dim"));
    int64_t layers = json_integer_value(json_object_get(cfg, "num_hidden_layers"));
    json_t *rp = json_object_get(cfg, "rope_parameters");
    json_t *full = json_object_get(rp, "full_attention");
    double theta = json_number_value(json_object_get(full ? full : rp, "rope_theta"));
    kv_u32(g, "block_count", (uint32_t)layers);
    kv_u32(g, "context_length", (uint32_t)json_integer_value(json_object_get(cfg, "max_position_embeddings")));
    kv_u32(g, "embedding_length", (uint32_t)hidden);
    kv_u32(g, "feed_forward_length", (uint32_t)json_integer_value(json_object_get(cfg, "intermediate_size")));
    kv_u32(g, "attention.head_count", (uint32_t)heads);
    kv_u32(g, "attention.head_count_kv", (uint32_t)json_integer_value(json_object_get(cfg, "num_key_value_heads")));
    kv_u32(g, "attention.key_length", (uint32_t)hd);
    kv_u32(g, "attention.value_length", (uint32_t)hd);
    kv_u32(g, "rope.dimension_count", (uint32_t)hd);
    kv_f32(g, "attention.layer_norm_rms_epsilon", json_number_value(json_object_get(cfg, "rms_norm_eps")));
    kv_f32(g, "rope.freq_base", theta);
    json_t *sw = json_object_get(cfg, "sliding_window");
    if (gemma && json_integer_value(sw) > 0) kv_u32(g, "attention.sliding_window", (uint32_t)json_integer_value(sw));
    json_t *v;
    if ((v = json_object_get(cfg, "attn_logit_softcapping")) && json_is_number(v))
        kv_f32(g, "attn_logit_softcapping", json_number_value(v));
    if ((v = json_object_get(cfg, "final_logit_softcapping")) && json_is_number(v))
        kv_f32(g, "final_logit_softcapping", json_number_value(v));
    int64_t n_exp = json_integer_value(json_object_get(cfg, "num_experts"));
    if (!n_exp) n_exp = json_integer_value(json_object_get(cfg, "num_local_experts"));
    if (n_exp) {
        kv_u32(g, "expert_count", (uint32_t)n_exp);
        kv_u32(g, "expert_used_count", (uint32_t)json_integer_value(json_object_get(cfg, "num_experts_per_tok")));
        kv_u32(g, "expert_feed_forward_length", (uint32_t)json_integer_value(json_object_get(cfg, "moe_intermediate_size")));
        if ((v = json_object_get(cfg, "shared_expert_intermediate_size")))
            kv_u32(g, "expert_shared_feed_forward_length", (uint32_t)json_integer_value(v));
    }
    bool ok = true;
    const char *key;
    json_t *t;
    json_object_foreach(sf->hdr, key, t)
    {
        if (!strcmp(key, "__metadata__")) continue;
        int nd;
        uint64_t shape[3] = {0}, n;
        float *vals = st_values(sf, t, &nd, shape, &n);
        char gname[128];
        unsigned l, e;
        int used = 0;
        char part[32];
        if (gemma && strstr(key, "norm.weight"))
            for (uint64_t i = 0; i < n; i++) vals[i] = vals[i] + 1.0f; /* llama.cpp stores gemma norms as 1 + w */
        if (!strcmp(key, "model.embed_tokens.weight")) snprintf(gname, sizeof gname, "token_embd.weight");
        else if (!strcmp(key, "lm_head.weight")) snprintf(gname, sizeof gname, "output.weight");
        else if (!strcmp(key, "model.norm.weight")) snprintf(gname, sizeof gname, "output_norm.weight");
        else if (sscanf(key, "model.layers.%u.mlp.experts.%u.%31[a-z_].weight", &l, &e, part) == 3) {
            /* stack into blk.L.ffn_<part>_exps [n_exp, out, in] */
            char bank[96];
            snprintf(bank, sizeof bank, "blk.%u.ffn_%.*s_exps.weight", l, (int)(strlen(part) - 5), part);
            gtensor *b = NULL;
            for (size_t i = 0; i < g->n_t; i++)
                if (!strcmp(g->t[i].name, bank)) b = &g->t[i];
            if (!b) {
                uint64_t bshape[3] = {(uint64_t)n_exp, shape[0], shape[1]};
                b = add_tensor(g, bank, 3, bshape, (uint64_t)n_exp * n);
            }
            memcpy(b->data + (uint64_t)e * n, vals, n * sizeof *vals);
            free(vals);
            continue;
        } else if (sscanf(key, "model.layers.%u.%n", &l, &used) == 1 && used) {
            char suffix[96];
            snprintf(suffix, sizeof suffix, "%s", key + used);
            char *dot = strrchr(suffix, '.');
            *dot = 0;
            const char *base = gguf_base(suffix, gemma);
            if (!base) {
                harness_fail(__FILE__, __LINE__, "%s: no GGUF name for '%s'", dir, key);
                ok = false;
                free(vals);
                continue;
            }
            snprintf(gname, sizeof gname, "blk.%u.%s.%s", l, base, dot + 1);
        } else {
            harness_fail(__FILE__, __LINE__, "%s: no GGUF name for '%s'", dir, key);
            ok = false;
            free(vals);
            continue;
        }
        gtensor *gt = add_tensor(g, gname, nd, shape, n);
        bool is_q = strstr(key, "self_attn.q_proj.weight") != NULL, is_k = strstr(key, "self_attn.k_proj.weight") != NULL;
        if (!strcmp(arch, "llama") && (is_q || is_k)) {
            /* convert_hf_to_gguf.py's permute for llama's interleaved rope:
             * HF row h*d + j*(d/2) + i is stored at h*d + 2i + j */
            uint64_t nh = (uint64_t)(is_q ? heads : json_integer_value(json_object_get(cfg, "num_key_value_heads")));
            uint64_t rows = shape[0], cols = shape[1], d = rows / nh;
            for (uint64_t h = 0; h < nh; h++)
                for (uint64_t i = 0; i < d / 2; i++)
                    for (uint64_t j = 0; j < 2; j++)
                        memcpy(gt->data + (h * d + 2 * i + j) * cols, vals + (h * d + j * (d / 2) + i) * cols,
                               cols * sizeof *vals);
        } else {
            memcpy(gt->data, vals, n * sizeof *vals);
        }
        free(vals);
    }
    const char *rope_type = json_string_value(json_object_get(rp, "rope_type"));
    if (rope_type && !strcmp(rope_type, "llama3")) {
        /* llama.cpp's rope_freqs.weight, computed in f32 as torch does */
        float factor = (float)json_number_value(json_object_get(rp, "factor"));
        float lo = (float)json_number_value(json_object_get(rp, "low_freq_factor"));
        float hi = (float)json_number_value(json_object_get(rp, "high_freq_factor"));
        float old = (float)json_number_value(json_object_get(rp, "original_max_position_embeddings"));
        uint64_t half = (uint64_t)hd / 2, fshape[1] = {half};
        gtensor *ft = add_tensor(g, "rope_freqs.weight", 1, fshape, half);
        for (uint64_t i = 0; i < half; i++) {
            float freq = 1.0f / powf((float)theta, (float)(2 * i) / (float)hd);
            float wavelen = (float)(2 * 3.141592653589793) / freq;
            if (wavelen < old / hi) ft->data[i] = 1.0f;
            else if (wavelen > old / lo) ft->data[i] = factor;
            else {
                float sm = (old / wavelen - lo) / (hi - lo);
                ft->data[i] = 1.0f / ((1 - sm) / factor + sm);
            }
        }
    }
    write_gguf(g, path);
    for (size_t i = 0; i < g->n_t; i++) free(g->t[i].data);
    free(g->kv.d);
    free(g);
    return ok;
}

static bool json_same(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b)) return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!json_same(json_array_get(a, i), json_array_get(b, i))) return false;
        return true;
    }
    if (json_is_object(a) && json_is_object(b)) {
        if (json_object_size(a) != json_object_size(b)) return false;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)a, k, v) if (!json_same(v, json_object_get(b, k))) return false;
        return true;
    }
    return json_equal(a, b);
}

typedef struct arch_case {
    const char *dir, *gguf_arch;
    const char *override; /* what such a GGUF cannot carry (see the comment per case) */
} arch_case;

static const arch_case CASES[] = {
    /* gemma2: llama.cpp has no key for query_pre_attn_scalar (16 here, not
     * head_dim) and assumes head_dim^-0.5 */
    {"gemma2", "gemma2", "{\"attention_scale\": 0.25}"},
    /* gemma3: this checkpoint's layer_types are not the 5-of-6 pattern a
     * c392e50-era file implies; query_pre_attn_scalar likewise */
    {"gemma3", "gemma3",
     "{\"attention_scale\": 0.25, \"layer_types\": [\"SlidingAttention\", \"SlidingAttention\", \"FullAttention\", "
     "\"SlidingAttention\"]}"},
    {"phi3", "phi3", "{}"},
    /* llama 3 rope scaling, carried only by rope_freqs.weight; q/k permuted */
    {"llama3_rope", "llama", "{}"},
    {"qwen3", "qwen3", "{}"},
    {"qwen2_moe", "qwen2moe", "{}"},
    {"qwen3_moe", "qwen3moe", "{}"},
};

TEST(synthetic_gguf_per_arch)
{
    if (!harness_fixtures()) SKIP("no fixtures (CMF_FIXTURES)");
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        const arch_case *ac = &CASES[c];
        char rel[160], path[512];
        snprintf(rel, sizeof rel, "hf-models/%s/config.json", ac->dir);
        json_t *cfg = json_load_file(harness_fixture_path(rel), 0, NULL);
        snprintf(rel, sizeof rel, "hf-models/%s/model.safetensors", ac->dir);
        st_file sf;
        if (!cfg || !st_open(harness_fixture_path(rel), &sf)) {
            harness_fail(__FILE__, __LINE__, "%s: fixture missing", ac->dir);
            json_decref(cfg);
            continue;
        }
        snprintf(path, sizeof path, "%s/%s.gguf", harness_tmpdir(), ac->dir);
        CHECK(make_gguf(ac->dir, ac->gguf_arch, cfg, &sf, path));
        cmf__gguf *g = NULL;
        CHECK_OK(cmf__gguf_open(path, &g));
        cmf__gguf_plan plan = {0};
        if (g) CHECK_OK(cmf__gguf_plan_make(g, &plan));
        size_t n_hf = json_object_size(sf.hdr) - (json_object_get(sf.hdr, "__metadata__") ? 1 : 0), n_ok = 0;
        CHECK_EQ_INT(plan.n, n_hf);
        bool gemma = !strncmp(ac->dir, "gemma", 5);
        for (size_t i = 0; i < plan.n; i++) {
            const cmf__gguf_out *o = &plan.outs[i];
            json_t *t = json_object_get(sf.hdr, o->name);
            if (!t) {
                harness_fail(__FILE__, __LINE__, "%s: '%s' not in the checkpoint", ac->dir, o->name);
                continue;
            }
            int nd;
            uint64_t shape[3] = {0}, n, gn = 0;
            float *want = st_values(&sf, t, &nd, shape, &n), *got = NULL;
            bool same = nd == o->ndim;
            for (int d = 0; d < nd && same; d++) same = shape[d] == o->shape[d];
            CHECK_OK(cmf__gguf_out_f32(g, o, &got, &gn));
            same = same && got && gn == n;
            for (uint64_t k = 0; same && k < n; k++) {
                float w = gemma && strstr(o->name, "norm.weight") ? want[k] + 1.0f : want[k];
                same = cmf__f32_bits(got[k]) == cmf__f32_bits(w);
            }
            if (same) n_ok++;
            else harness_fail(__FILE__, __LINE__, "%s: '%s' differs from the checkpoint", ac->dir, o->name);
            free(want);
            free(got);
        }
        json_t *want = NULL, *got = NULL, *ov = json_loads(ac->override, 0, NULL);
        CHECK_OK(cmf__convert_arch(cfg, rel, &want));
        if (g) CHECK_OK(cmf__gguf_arch(g, &got));
        if (got) CHECK_OK(cmf__gguf_arch_override(got, ov));
        if (want && got) {
            /* arch_name is informational; norm_style differs on purpose:
             * the imported gemma norms hold 1 + w, so they are plain x̂·w */
            json_object_del(want, "arch_name");
            json_object_del(got, "arch_name");
            if (gemma) {
                CHECK_EQ_STR(json_string_value(json_object_get(want, "norm_style")), "gemma");
                CHECK_EQ_STR(json_string_value(json_object_get(got, "norm_style")), "qwen");
                json_object_del(want, "norm_style");
                json_object_del(got, "norm_style");
            }
            if (!json_same(want, got)) {
                char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS), *h = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
                harness_fail(__FILE__, __LINE__, "%s arch:\n  convert: %s\n  gguf:    %s", ac->dir, w, h);
                free(w);
                free(h);
            }
        }
        printf("    %-10s %zu/%zu tensors equal, arch %s\n", ac->dir, n_ok, n_hf,
               want && got && json_same(want, got) ? "equal" : "DIFFERS");
        json_decref(ov);
        json_decref(want);
        json_decref(got);
        cmf__gguf_plan_free(&plan);
        cmf__gguf_free(g);
        json_decref(sf.hdr);
        free(sf.bytes);
        json_decref(cfg);
    }
}

int main(void)
{
    RUN(synthetic_gguf_per_arch);
    return harness_done();
}
