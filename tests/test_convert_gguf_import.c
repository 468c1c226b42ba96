/* test_convert_gguf_import.c — GGUF -> HF mapping on the fixture GGUFs that
 * llama.cpp made from fixtures/hf-models/<arch>: every mapped tensor equals
 * the safetensors tensor of the same HF name (bit exact for the f32 files,
 * q/k rows un-permuted; within q8_0's rounding for the q8_0 files), the arch
 * header matches config.json, the vocab equals the checkpoint's
 * tokenizer.json, and a full import reopens as a valid CMF file. */
#include "convert/convert.h"
#include "convert/gguf.h"
#include "format/format.h"
#include "harness.h"
#include "util/arith.h"
#include "util/half.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- a minimal safetensors view (the fixtures are bf16) ---------------- */
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

static void st_close(st_file *f)
{
    json_decref(f->hdr);
    free(f->bytes);
}

/* Tensor values as f32 (malloc'd) with its shape; NULL when absent. */
static float *st_get(const st_file *f, const char *name, int *ndim, uint64_t shape[3], uint64_t *n)
{
    json_t *t = json_object_get(f->hdr, name);
    if (!t) return NULL;
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

/* HF name the checkpoint uses for an imported (canonical) name: mixtral
 * keeps its block_sparse_moe.* names on disk. */
static void hf_name(const char *arch, const char *canon, char *out, size_t cap)
{
    unsigned l, e;
    char part[32];
    int end = 0;
    if (!strcmp(arch, "mixtral") &&
        sscanf(canon, "model.layers.%u.mlp.experts.%u.%31[a-z_].weight%n", &l, &e, part, &end) == 3 && end) {
        const char *w = !strcmp(part, "gate_proj") ? "w1" : !strcmp(part, "up_proj") ? "w3" : "w2";
        snprintf(out, cap, "model.layers.%u.block_sparse_moe.experts.%u.%s.weight", l, e, w);
    } else if (!strcmp(arch, "mixtral") && sscanf(canon, "model.layers.%u.mlp.gate.weight%n", &l, &end) == 1 &&
               end && !canon[end]) {
        snprintf(out, cap, "model.layers.%u.block_sparse_moe.gate.weight", l);
    } else {
        snprintf(out, cap, "%s", canon);
    }
}

static const char *const ARCHS[] = {"llama", "qwen2", "mistral_swa", "mixtral"};

/* Compares every planned tensor with the checkpoint. q8: tolerance per
 * element = amax(32-block)/127 * 0.57: q8_0 rounds to half a step
 * (d/2 with d = amax/127), plus d's own f16 rounding (|q| <= 127 times a
 * relative 2^-11 of d, i.e. <= 0.062 d). */
static void compare_arch(const char *arch, bool q8)
{
    char rel[128];
    snprintf(rel, sizeof rel, "gguf/%s-%s.gguf", arch, q8 ? "q8_0" : "f32");
    cmf__gguf *g = NULL;
    CHECK_OK(cmf__gguf_open(harness_fixture_path(rel), &g));
    snprintf(rel, sizeof rel, "hf-models/%s/model.safetensors", arch);
    st_file sf;
    bool have_st = st_open(harness_fixture_path(rel), &sf);
    CHECK(have_st);
    if (!g || !have_st) {
        cmf__gguf_free(g);
        if (have_st) st_close(&sf);
        return;
    }
    cmf__gguf_plan plan;
    CHECK_OK(cmf__gguf_plan_make(g, &plan));
    size_t n_hf = json_object_size(sf.hdr) - (json_object_get(sf.hdr, "__metadata__") ? 1 : 0);
    CHECK_EQ_INT(plan.n, n_hf);
    size_t n_bad = 0;
    for (size_t i = 0; i < plan.n; i++) {
        const cmf__gguf_out *o = &plan.outs[i];
        char name[200];
        hf_name(arch, o->name, name, sizeof name);
        int nd;
        uint64_t shape[3] = {0}, n;
        float *want = st_get(&sf, name, &nd, shape, &n);
        if (!want) {
            harness_fail(__FILE__, __LINE__, "%s: '%s' (from '%s') not in the checkpoint", arch, name, o->src->name);
            continue;
        }
        CHECK_EQ_INT(nd, o->ndim);
        for (int d = 0; d < nd; d++) CHECK_EQ_INT(shape[d], o->shape[d]);
        float *got = NULL;
        uint64_t gn = 0;
        CHECK_OK(cmf__gguf_out_f32(g, o, &got, &gn));
        if (got && gn != n) {
            n_bad++;
            harness_fail(__FILE__, __LINE__, "%s %s: %s: %llu values from the GGUF, %llu in the checkpoint", arch,
                         q8 ? "q8_0" : "f32", name, (unsigned long long)gn, (unsigned long long)n);
        }
        if (got && gn == n) {
            size_t bad = 0, first = 0;
            for (uint64_t k = 0; k < n; k++) {
                bool ok;
                if (q8 && o->src->type == CMF_GGML_Q8_0) {
                    uint64_t b0 = k / 32 * 32;
                    float amax = 0;
                    for (uint64_t j = b0; j < b0 + 32 && j < n; j++) amax = fmaxf(amax, fabsf(want[j]));
                    ok = fabsf(got[k] - want[k]) <= amax / 127.0f * 0.57f;
                } else {
                    ok = cmf__f32_bits(got[k]) == cmf__f32_bits(want[k]);
                }
                if (!ok && !bad++) first = (size_t)k;
            }
            if (bad) {
                n_bad++;
                harness_fail(__FILE__, __LINE__, "%s %s: %s: %zu of %llu values differ, first [%zu] %.9g vs %.9g",
                             arch, q8 ? "q8_0" : "f32", name, bad, (unsigned long long)n, first, (double)got[first],
                             (double)want[first]);
            }
        }
        free(got);
        free(want);
    }
    if (!n_bad) printf("    %s %s: %zu tensors match the checkpoint\n", arch, q8 ? "q8_0" : "f32", plan.n);
    cmf__gguf_plan_free(&plan);
    st_close(&sf);
    cmf__gguf_free(g);
}

TEST(f32_tensors_bit_exact)
{
    if (!harness_fixtures()) SKIP("no fixtures (CMF_FIXTURES)");
    for (size_t a = 0; a < sizeof ARCHS / sizeof ARCHS[0]; a++) compare_arch(ARCHS[a], false);
}

TEST(q8_0_tensors_within_tolerance)
{
    if (!harness_fixtures()) SKIP("no fixtures (CMF_FIXTURES)");
    for (size_t a = 0; a < sizeof ARCHS / sizeof ARCHS[0]; a++) compare_arch(ARCHS[a], true);
}

static int64_t cfg_int(const json_t *c, const char *k) { return (int64_t)json_integer_value(json_object_get(c, k)); }

TEST(arch_header_matches_config)
{
    if (!harness_fixtures()) SKIP("no fixtures (CMF_FIXTURES)");
    for (size_t a = 0; a < sizeof ARCHS / sizeof ARCHS[0]; a++) {
        char rel[128];
        snprintf(rel, sizeof rel, "gguf/%s-f32.gguf", ARCHS[a]);
        cmf__gguf *g = NULL;
        CHECK_OK(cmf__gguf_open(harness_fixture_path(rel), &g));
        snprintf(rel, sizeof rel, "hf-models/%s/config.json", ARCHS[a]);
        json_t *cfg = json_load_file(harness_fixture_path(rel), 0, NULL);
        json_t *arch = NULL;
        if (g) CHECK_OK(cmf__gguf_arch(g, &arch));
        if (arch && cfg) {
            CHECK_EQ_INT(cfg_int(arch, "hidden_size"), cfg_int(cfg, "hidden_size"));
            CHECK_EQ_INT(cfg_int(arch, "intermediate_size"), cfg_int(cfg, "intermediate_size"));
            CHECK_EQ_INT(cfg_int(arch, "num_layers"), cfg_int(cfg, "num_hidden_layers"));
            CHECK_EQ_INT(cfg_int(arch, "num_attention_heads"), cfg_int(cfg, "num_attention_heads"));
            CHECK_EQ_INT(cfg_int(arch, "num_kv_heads"), cfg_int(cfg, "num_key_value_heads"));
            CHECK_EQ_INT(cfg_int(arch, "head_dim"), cfg_int(cfg, "head_dim") ? cfg_int(cfg, "head_dim") : 24);
            CHECK_EQ_INT(cfg_int(arch, "vocab_size"), cfg_int(cfg, "vocab_size"));
            CHECK_EQ_INT(cfg_int(arch, "max_position_embeddings"), cfg_int(cfg, "max_position_embeddings"));
            CHECK(json_equal(json_object_get(arch, "tie_word_embeddings"), json_object_get(cfg, "tie_word_embeddings")));
            /* f32 in the GGUF, shortened back to the decimal the config had */
            CHECK(json_real_value(json_object_get(arch, "rms_norm_eps")) ==
                  json_number_value(json_object_get(cfg, "rms_norm_eps")));
            CHECK_EQ_STR(json_string_value(json_object_get(arch, "norm_style")), "qwen");
            CHECK_EQ_STR(json_string_value(json_object_get(arch, "activation")), "silu");
            json_t *moe = json_object_get(arch, "moe");
            if (cfg_int(cfg, "num_local_experts")) {
                CHECK(moe != NULL);
                CHECK_EQ_STR(json_string_value(json_object_get(arch, "arch_name")), "mixtral");
                CHECK_EQ_INT(cfg_int(moe, "num_experts"), cfg_int(cfg, "num_local_experts"));
                CHECK_EQ_INT(cfg_int(moe, "top_k"), cfg_int(cfg, "num_experts_per_tok"));
                CHECK_EQ_INT(cfg_int(moe, "moe_intermediate_size"), cfg_int(cfg, "intermediate_size"));
                CHECK(json_is_true(json_object_get(moe, "norm_topk_prob")));
            } else {
                CHECK(moe == NULL);
            }
            /* The fixture GGUFs lack rope.freq_base and sliding_window (their
             * converter did not read transformers 5's rope_parameters): the
             * header gets llama.cpp's default 10000, right only for llama. */
            CHECK(json_real_value(json_object_get(arch, "rope_theta")) == 10000.0);
        }
        json_decref(arch);
        json_decref(cfg);
        cmf__gguf_free(g);
    }
}

/* Same numbers: integers and reals compared by value. */
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

/* With the fields the fixture GGUFs lost set back (--set), the imported
 * arch block equals what `cmf convert` writes for the checkpoint's
 * config.json, field for field (arch_name aside: informational). */
TEST(arch_equals_safetensors_route)
{
    if (!harness_fixtures()) SKIP("no fixtures (CMF_FIXTURES)");
    const char *over[] = {"{}", "{\"rope_theta\": 1000000.0}", "{\"sliding_window\": 8}",
                          "{\"rope_theta\": 1000000.0}"};
    for (size_t a = 0; a < sizeof ARCHS / sizeof ARCHS[0]; a++) {
        char rel[128];
        snprintf(rel, sizeof rel, "gguf/%s-f32.gguf", ARCHS[a]);
        cmf__gguf *g = NULL;
        CHECK_OK(cmf__gguf_open(harness_fixture_path(rel), &g));
        snprintf(rel, sizeof rel, "hf-models/%s/config.json", ARCHS[a]);
        json_t *cfg = json_load_file(harness_fixture_path(rel), 0, NULL), *want = NULL, *got = NULL;
        json_t *ov = json_loads(over[a], 0, NULL);
        if (cfg) CHECK_OK(cmf__convert_arch(cfg, rel, &want));
        if (g) CHECK_OK(cmf__gguf_arch(g, &got));
        if (got) CHECK_OK(cmf__gguf_arch_override(got, ov));
        if (want && got) {
            json_object_del(want, "arch_name");
            json_object_del(got, "arch_name");
            if (!json_same(want, got)) {
                char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS), *h = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
                harness_fail(__FILE__, __LINE__, "%s:\n  convert: %s\n  gguf:    %s", ARCHS[a], w, h);
                free(w);
                free(h);
            }
        }
        json_decref(ov);
        json_decref(want);
        json_decref(got);
        json_decref(cfg);
        cmf__gguf_free(g);
    }
}

/* The vocab rebuilt from tokenizer.ggml.* equals the checkpoint's
 * tokenizer.json: same vocab, merges, added tokens, pre-tokenizer. */
TEST(vocab_equals_checkpoint_tokenizer)
{
    if (!harness_fixtures()) SKIP("no fixtures (CMF_FIXTURES)");
    cmf__gguf *g = NULL;
    CHECK_OK(cmf__gguf_open(harness_fixture_path("gguf/llama-f32.gguf"), &g));
    json_t *want = json_load_file(harness_fixture_path("hf-models/llama/tokenizer.json"), 0, NULL);
    char *js = NULL;
    size_t len = 0;
    if (g) CHECK_OK(cmf__gguf_tokenizer_json(g, &js, &len));
    json_t *got = js ? json_loadb(js, len, 0, NULL) : NULL;
    CHECK(got && want);
    if (got && want) {
        json_t *gm = json_object_get(got, "model"), *wm = json_object_get(want, "model");
        CHECK(json_equal(json_object_get(gm, "vocab"), json_object_get(wm, "vocab")));
        json_t *gmerges = json_object_get(gm, "merges"), *wmerges = json_object_get(wm, "merges");
        CHECK_EQ_INT(json_array_size(gmerges), json_array_size(wmerges));
        for (size_t i = 0; i < json_array_size(gmerges) && i < json_array_size(wmerges); i++) {
            json_t *p = json_array_get(gmerges, i), *w = json_array_get(wmerges, i);
            char a[256];
            snprintf(a, sizeof a, "%s %s", json_string_value(json_array_get(p, 0)),
                     json_string_value(json_array_get(p, 1)));
            const char *b = json_is_string(w) ? json_string_value(w) : NULL;
            char bb[256];
            if (!b) {
                snprintf(bb, sizeof bb, "%s %s", json_string_value(json_array_get(w, 0)),
                         json_string_value(json_array_get(w, 1)));
                b = bb;
            }
            if (strcmp(a, b)) {
                harness_fail(__FILE__, __LINE__, "merge %zu: '%s' vs '%s'", i, a, b);
                break;
            }
        }
        CHECK(json_equal(json_object_get(got, "added_tokens"), json_object_get(want, "added_tokens")));
        CHECK(json_equal(json_object_get(got, "pre_tokenizer"), json_object_get(want, "pre_tokenizer")));
    }
    json_t *chat = NULL;
    if (g) CHECK_OK(cmf__gguf_chat_bundle(g, &chat));
    if (chat) {
        CHECK_EQ_INT(json_array_size(json_object_get(chat, "eos_token_ids")), 1);
        CHECK_EQ_INT(json_integer_value(json_array_get(json_object_get(chat, "eos_token_ids"), 0)), 383);
        CHECK_EQ_INT(json_integer_value(json_object_get(chat, "pad_token_id")), 381);
        CHECK_CONTAINS(json_string_value(json_object_get(chat, "chat_template")), "<|im_start|>");
    }
    json_decref(chat);
    json_decref(got);
    json_decref(want);
    free(js);
    cmf__gguf_free(g);
}

/* Full import: the file reopens, has every tensor, the vocab and header. */
TEST(import_writes_valid_cmf)
{
    if (!harness_fixtures()) SKIP("no fixtures (CMF_FIXTURES)");
    const char *srcs[] = {"gguf/llama-f32.gguf", "gguf/mixtral-q8_0.gguf"};
    for (int k = 0; k < 2; k++) {
        char out[512];
        snprintf(out, sizeof out, "%s/imp%d.cmf", harness_tmpdir(), k);
        uint64_t n = 0, bytes = 0;
        CHECK_OK(cmf__gguf_import(harness_fixture_path(srcs[k]), out, NULL, &n, &bytes));
        cmf__file *f = NULL;
        CHECK_OK(cmf__file_open(out, NULL, &f));
        if (!f) continue;
        CHECK_EQ_INT(f->n_tensors, n);
        CHECK_EQ_INT(f->n_tensors, k == 0 ? 30 : 60);
        const cmf__section *voc = cmf__file_vocab(f);
        CHECK(voc && voc->len > 1000);
        CHECK_EQ_INT(json_integer_value(json_object_get(f->arch, "hidden_size")), 96);
        const json_t *tc = json_object_get(f->header, "tokenizer_config");
        CHECK(json_is_object(tc));
        const cmf__tensor *q = cmf__file_find(f, "model.layers.1.self_attn.q_proj.weight");
        CHECK(q != NULL);
        if (q) CHECK_EQ_INT(q->dtype, k == 0 ? CMF_DTYPE_F32 : CMF_DTYPE_Q8_ROW);
        const cmf__tensor *nrm = cmf__file_find(f, "model.norm.weight");
        CHECK(nrm && nrm->dtype == CMF_DTYPE_F32);
        if (k == 1) {
            const cmf__tensor *r = cmf__file_find(f, "model.layers.2.mlp.gate.weight");
            CHECK(r && r->dtype == CMF_DTYPE_F32 && r->shape[0] == 4 && r->shape[1] == 96);
            CHECK(cmf__file_find(f, "model.layers.2.mlp.experts.3.down_proj.weight") != NULL);
        }
        cmf__file_free(f);
    }
}

/* The row permutation is real: llama's stored q rows differ from HF's until
 * undone (guards against a vacuous pass above). */
TEST(permutation_is_not_identity)
{
    if (!harness_fixtures()) SKIP("no fixtures (CMF_FIXTURES)");
    cmf__gguf *g = NULL;
    CHECK_OK(cmf__gguf_open(harness_fixture_path("gguf/llama-f32.gguf"), &g));
    cmf__gguf_plan plan;
    if (!g) return;
    CHECK_OK(cmf__gguf_plan_make(g, &plan));
    size_t n_perm = 0;
    for (size_t i = 0; i < plan.n; i++) {
        cmf__gguf_out o = plan.outs[i];
        if (!o.permute_heads) continue;
        n_perm++;
        CHECK(o.permute_heads == (strstr(o.name, "q_proj") ? 4u : 2u));
        float *a = NULL, *b = NULL;
        uint64_t na = 0, nb = 0;
        CHECK_OK(cmf__gguf_out_f32(g, &o, &a, &na));
        o.permute_heads = 0;
        CHECK_OK(cmf__gguf_out_f32(g, &o, &b, &nb));
        CHECK(a && b && na == nb && memcmp(a, b, na * sizeof *a) != 0);
        free(a);
        free(b);
    }
    CHECK_EQ_INT(n_perm, 6); /* q and k of 3 layers */
    cmf__gguf_plan_free(&plan);
    cmf__gguf_free(g);
}

/* ---- split sets --------------------------------------------------------- */
static void fput64(FILE *fp, uint64_t v) { uint8_t b[8]; cmf__wr64(b, v); fwrite(b, 1, 8, fp); }
static void fput32(FILE *fp, uint32_t v) { uint8_t b[4]; cmf__wr32(b, v); fwrite(b, 1, 4, fp); }
static void fputs64(FILE *fp, const char *s) { fput64(fp, strlen(s)); fwrite(s, 1, strlen(s), fp); }

/* Writes tensors [t0, t1) of g as part `no` of `count` (gguf-split's
 * layout: metadata in the first part only, split.* keys in all). */
static void write_part(const char *path, const cmf__gguf *g, uint16_t no, uint16_t count, uint64_t t0, uint64_t t1)
{
    FILE *fp = fopen(path, "wb");
    if (!fp) return;
    const cmf__gguf_kv *last = &g->kvs[g->n_kv - 1];
    size_t kv_end = (size_t)(last->val + last->val_len - g->data);
    fwrite("GGUF", 1, 4, fp);
    fput32(fp, 3), fput64(fp, t1 - t0), fput64(fp, (no == 0 ? g->n_kv : 0) + 3);
    if (no == 0) fwrite(g->data + 24, 1, kv_end - 24, fp);
    fputs64(fp, "split.no"), fput32(fp, CMF_GGUF_U16), fwrite((uint8_t[]){(uint8_t)no, 0}, 1, 2, fp);
    fputs64(fp, "split.count"), fput32(fp, CMF_GGUF_U16), fwrite((uint8_t[]){(uint8_t)count, 0}, 1, 2, fp);
    fputs64(fp, "split.tensors.count"), fput32(fp, CMF_GGUF_I32), fput32(fp, (uint32_t)g->n_tensors);
    uint64_t off = 0;
    for (uint64_t i = t0; i < t1; i++) {
        const cmf__gguf_tensor *t = &g->tensors[i];
        fputs64(fp, t->name), fput32(fp, t->ndim);
        for (uint32_t d = 0; d < t->ndim; d++) fput64(fp, t->ne[d]);
        fput32(fp, t->type), fput64(fp, off);
        off = cmf__align_up(off + t->nbytes, 32);
    }
    long pos = ftell(fp);
    while (pos % 32) fputc(0, fp), pos++;
    for (uint64_t i = t0; i < t1; i++) {
        fwrite(g->tensors[i].data, 1, g->tensors[i].nbytes, fp);
        pos = ftell(fp);
        while (pos % 32) fputc(0, fp), pos++;
    }
    fclose(fp);
}

/* A llama.cpp split set imports like the single file it was cut from. */
TEST(split_set_equals_single_file)
{
    if (!harness_fixtures()) SKIP("no fixtures (CMF_FIXTURES)");
    cmf__gguf *g = NULL, *set = NULL;
    CHECK_OK(cmf__gguf_open(harness_fixture_path("gguf/mixtral-q8_0.gguf"), &g));
    if (!g) return;
    char p1[512], p2[512], p3[512];
    snprintf(p1, sizeof p1, "%s/mx-00001-of-00003.gguf", harness_tmpdir());
    snprintf(p2, sizeof p2, "%s/mx-00002-of-00003.gguf", harness_tmpdir());
    snprintf(p3, sizeof p3, "%s/mx-00003-of-00003.gguf", harness_tmpdir());
    write_part(p1, g, 0, 3, 0, 10);
    write_part(p2, g, 1, 3, 10, 20);
    write_part(p3, g, 2, 3, 20, g->n_tensors);
    CHECK_OK(cmf__gguf_open_set(p1, &set));
    if (set) {
        CHECK_EQ_INT(set->n_tensors, g->n_tensors);
        cmf__gguf_plan a, b;
        CHECK_OK(cmf__gguf_plan_make(g, &a));
        CHECK_OK(cmf__gguf_plan_make(set, &b));
        CHECK_EQ_INT(a.n, b.n);
        for (size_t i = 0; i < a.n && i < b.n; i++) {
            float *x = NULL, *y = NULL;
            uint64_t nx = 0, ny = 0;
            CHECK_EQ_STR(a.outs[i].name, b.outs[i].name);
            CHECK_OK(cmf__gguf_out_f32(g, &a.outs[i], &x, &nx));
            CHECK_OK(cmf__gguf_out_f32(set, &b.outs[i], &y, &ny));
            CHECK(x && y && nx == ny && !memcmp(x, y, nx * sizeof *x));
            free(x);
            free(y);
        }
        cmf__gguf_plan_free(&a);
        cmf__gguf_plan_free(&b);
        cmf__gguf_free(set);
        set = NULL;
    }
    char out[512];
    snprintf(out, sizeof out, "%s/mx.cmf", harness_tmpdir());
    uint64_t n = 0;
    CHECK_OK(cmf__gguf_import(p1, out, NULL, &n, NULL));
    CHECK_EQ_INT(n, 60);
    /* refusals: a later part given first, a missing part, a foreign part */
    CHECK_ERR(cmf__gguf_open_set(p2, &set), CMF_ERR_SHARD, "open the first file");
    write_part(p3, g, 1, 3, 20, g->n_tensors);
    CHECK_ERR(cmf__gguf_open_set(p1, &set), CMF_ERR_SHARD, "not part 3 of 3");
    write_part(p3, g, 2, 3, 19, g->n_tensors);
    CHECK_ERR(cmf__gguf_open_set(p1, &set), CMF_ERR_DUPLICATE, "is also in");
    remove(p3);
    CHECK_ERR(cmf__gguf_open_set(p1, &set), CMF_ERR_SHARD, "split part 3 of 3");
    cmf__gguf_free(g);
}

/* An unknown architecture or an unmapped tensor name: ERR_CONFIG naming it. */
TEST(unmapped_inputs_refused)
{
    if (!harness_fixtures()) SKIP("no fixtures (CMF_FIXTURES)");
    size_t len = 0;
    char *bytes = harness_read_file(harness_fixture_path("gguf/llama-f32.gguf"), &len);
    if (!bytes) SKIP("llama-f32.gguf missing");
    char *arch = memmem(bytes, len, "general.architecture", 20);
    char *nrm = memmem(bytes, len, "output_norm.weight", 18);
    CHECK(arch && nrm);
    if (arch && nrm) {
        arch[20 + 4 + 8 + 3] = 'x'; /* "llama" -> "llaxa" */
        cmf__gguf *g = NULL;
        json_t *a = NULL;
        cmf__gguf_plan plan;
        CHECK_OK(cmf__gguf_parse((const uint8_t *)bytes, len, "bad.gguf", &g));
        if (g) {
            CHECK_ERR(cmf__gguf_arch(g, &a), CMF_ERR_CONFIG, "general.architecture 'llaxa' not supported");
            CHECK_ERR(cmf__gguf_plan_make(g, &plan), CMF_ERR_CONFIG, "'llaxa'");
            cmf__gguf_free(g);
        }
        arch[20 + 4 + 8 + 3] = 'm';
        nrm[7] = 'x';
        CHECK_OK(cmf__gguf_parse((const uint8_t *)bytes, len, "bad.gguf", &g));
        if (g) {
            CHECK_ERR(cmf__gguf_plan_make(g, &plan), CMF_ERR_CONFIG, "tensor 'output_xorm.weight' at 0x");
            cmf__gguf_free(g);
        }
    }
    free(bytes);
}

int main(void)
{
    RUN(f32_tensors_bit_exact);
    RUN(q8_0_tensors_within_tolerance);
    RUN(arch_header_matches_config);
    RUN(arch_equals_safetensors_route);
    RUN(vocab_equals_checkpoint_tokenizer);
    RUN(import_writes_valid_cmf);
    RUN(permutation_is_not_identity);
    RUN(split_set_equals_single_file);
    RUN(unmapped_inputs_refused);
    return harness_done();
}
