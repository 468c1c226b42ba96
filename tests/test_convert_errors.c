/* test_convert_errors.c — synthetic checkpoints (written here, no fixtures):
 * a valid tiny llama converts; sharded index sets convert to the same
 * tensors; every bad input is refused with its status and a message naming
 * the file / tensor / field, and leaves nothing at the output path. */
#include "harness.h"
#include "convert/convert.h"
#include "format/safetensors.h"
#include "format/format.h"
#include "quant/quant.h"
#include "util/half.h"

#include <jansson.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct spec {
    const char *name;
    const char *dtype; /* "F32", "BF16", ... */
    int ndim;
    uint64_t shape[3];
} spec;

/* tiny llama: hidden 32, 1 layer, heads 2, kv 1, head_dim 16, inter 64, vocab 64 */
static const spec LLAMA[] = {
    {"model.embed_tokens.weight", "F32", 2, {64, 32}},
    {"model.norm.weight", "F32", 1, {32}},
    {"model.layers.0.input_layernorm.weight", "BF16", 1, {32}},
    {"model.layers.0.post_attention_layernorm.weight", "BF16", 1, {32}},
    {"model.layers.0.self_attn.q_proj.weight", "F16", 2, {32, 32}},
    {"model.layers.0.self_attn.k_proj.weight", "BF16", 2, {16, 32}},
    {"model.layers.0.self_attn.v_proj.weight", "BF16", 2, {16, 32}},
    {"model.layers.0.self_attn.o_proj.weight", "BF16", 2, {32, 32}},
    {"model.layers.0.mlp.gate_proj.weight", "BF16", 2, {64, 32}},
    {"model.layers.0.mlp.up_proj.weight", "BF16", 2, {64, 32}},
    {"model.layers.0.mlp.down_proj.weight", "BF16", 2, {32, 64}},
};
#define N_LLAMA (sizeof LLAMA / sizeof *LLAMA)

static const char *CONFIG =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":32,"
    "\"intermediate_size\":64,\"num_hidden_layers\":1,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
    "\"head_dim\":16,\"vocab_size\":64,\"max_position_embeddings\":128,\"rms_norm_eps\":1e-5,"
    "\"rope_theta\":10000.0,\"tie_word_embeddings\":true,\"hidden_act\":\"silu\",\"eos_token_id\":2%s}";

static const char *TOKENIZER =
    "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":2,\"content\":\"</s>\",\"special\":true}],"
    "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"</s>\":2},\"merges\":[]}}";

static uint32_t g_rng = 12345;
static float rnd(void)
{
    g_rng = g_rng * 1664525u + 1013904223u;
    return ((float)(g_rng >> 8) / 16777216.0f - 0.5f) * 0.2f;
}

static int esize(const char *dt) { return !strcmp(dt, "F32") ? 4 : !strcmp(dt, "I64") ? 8 : 2; }

/* Writes `path` holding specs[0..n) (values from rnd). `mutate` may edit the
 * header JSON before it is written; the data always follow the specs. */
static void write_st(const char *path, const spec *specs, size_t n, void (*mutate)(json_t *h))
{
    json_t *h = json_object();
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t numel = 1;
        json_t *sh = json_array();
        for (int d = 0; d < specs[i].ndim; d++) numel *= specs[i].shape[d], json_array_append_new(sh, json_integer((json_int_t)specs[i].shape[d]));
        uint64_t nb = numel * (uint64_t)esize(specs[i].dtype);
        json_t *e = json_pack("{s:s,s:o,s:[I,I]}", "dtype", specs[i].dtype, "shape", sh, "data_offsets",
                              (json_int_t)off, (json_int_t)(off + nb));
        json_object_set_new(h, specs[i].name, e);
        off += nb;
    }
    json_object_set_new(h, "__metadata__", json_pack("{s:s}", "format", "pt"));
    if (mutate) mutate(h);
    char *txt = json_dumps(h, JSON_COMPACT);
    size_t hl = strlen(txt), pad = (8 - hl % 8) % 8;
    FILE *fp = fopen(path, "wb");
    uint8_t len8[8];
    uint64_t L = hl + pad;
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)(L >> (8 * i));
    fwrite(len8, 1, 8, fp);
    fwrite(txt, 1, hl, fp);
    for (size_t i = 0; i < pad; i++) fputc(' ', fp);
    for (size_t i = 0; i < n; i++) {
        uint64_t numel = 1;
        for (int d = 0; d < specs[i].ndim; d++) numel *= specs[i].shape[d];
        for (uint64_t k = 0; k < numel; k++) {
            float v = rnd();
            uint8_t b[8] = {0};
            if (!strcmp(specs[i].dtype, "F32")) memcpy(b, &v, 4);
            else if (!strcmp(specs[i].dtype, "F16")) { uint16_t x = cmf__f32_to_f16(v); memcpy(b, &x, 2); }
            else { uint16_t x = cmf__f32_to_bf16(v); memcpy(b, &x, 2); }
            fwrite(b, 1, (size_t)esize(specs[i].dtype), fp);
        }
    }
    fclose(fp);
    free(txt);
    json_decref(h);
}

static void write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    fputs(text, fp);
    fclose(fp);
}

static int g_n;
/* A fresh checkpoint folder with config (extra config fields appended). */
static const char *make_dir(const char *extra_cfg)
{
    static char dir[4][1024];
    char *d = dir[g_n % 4];
    snprintf(d, 1024, "%s/ck%d", harness_tmpdir(), g_n++);
    mkdir(d, 0755);
    char p[1200], cfg[4096];
    snprintf(cfg, sizeof cfg, CONFIG, extra_cfg ? extra_cfg : "");
    snprintf(p, sizeof p, "%s/config.json", d);
    write_text(p, cfg);
    snprintf(p, sizeof p, "%s/tokenizer.json", d);
    write_text(p, TOKENIZER);
    return d;
}

static const char *st_path(const char *dir)
{
    static char p[1200];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    return p;
}

static const char *out_path(void)
{
    static char p[1200];
    snprintf(p, sizeof p, "%s/out.cmf", harness_tmpdir());
    unlink(p);
    return p;
}

static bool exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

static cmf_status conv(const char *dir, const char *out, int quant)
{
    cmf__convert_opts o = cmf__convert_opts_default();
    o.quant = quant;
    return cmf__convert_hf(dir, out, &o, NULL);
}

TEST(valid_llama)
{
    const char *d = make_dir(NULL);
    write_st(st_path(d), LLAMA, N_LLAMA, NULL);
    const char *out = out_path();
    CHECK_OK(conv(d, out, CMF_DTYPE_F32));
    cmf__file *f = NULL;
    CHECK_OK(cmf__file_open(out, NULL, &f));
    if (!f) return;
    CHECK_EQ_INT(f->n_tensors, N_LLAMA);
    /* order: embeddings first, then the layer, norm last */
    CHECK_EQ_STR(f->tensors[0].name, "model.embed_tokens.weight");
    CHECK_EQ_STR(f->tensors[f->n_tensors - 1].name, "model.norm.weight");
    const cmf__tensor *q = cmf__file_find(f, "model.layers.0.self_attn.q_proj.weight");
    CHECK(q && q->dtype == CMF_DTYPE_F32 && q->shape[0] == 32 && q->shape[1] == 32);
    const json_t *tc = json_object_get(f->header, "tokenizer_config");
    CHECK_EQ_INT(json_integer_value(json_array_get(json_object_get(tc, "eos_token_ids"), 0)), 2);
    cmf__file_free(f);
}

/* The same tensors split over two shards with an index convert to the same
 * payloads as the single file. */
TEST(sharded_index)
{
    g_rng = 777;
    const char *d1 = make_dir(NULL);
    write_st(st_path(d1), LLAMA, N_LLAMA, NULL);
    g_rng = 777;
    const char *d2 = make_dir(NULL);
    char p[1200];
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", d2);
    write_st(p, LLAMA, 5, NULL);
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", d2);
    write_st(p, LLAMA + 5, N_LLAMA - 5, NULL);
    json_t *wm = json_object();
    for (size_t i = 0; i < N_LLAMA; i++)
        json_object_set_new(wm, LLAMA[i].name, json_string(i < 5 ? "model-00001-of-00002.safetensors"
                                                                  : "model-00002-of-00002.safetensors"));
    json_t *idx = json_pack("{s:{s:i},s:o}", "metadata", "total_size", 0, "weight_map", wm);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", d2);
    json_dump_file(idx, p, 0);
    char o1[1200], o2[1200];
    snprintf(o1, sizeof o1, "%s/single.cmf", harness_tmpdir());
    snprintf(o2, sizeof o2, "%s/sharded.cmf", harness_tmpdir());
    CHECK_OK(conv(d1, o1, CMF_DTYPE_BF16));
    CHECK_OK(conv(d2, o2, CMF_DTYPE_BF16));
    cmf__file *a = NULL, *b = NULL;
    CHECK_OK(cmf__file_open(o1, NULL, &a));
    CHECK_OK(cmf__file_open(o2, NULL, &b));
    if (a && b) {
        CHECK_EQ_INT(a->n_tensors, b->n_tensors);
        for (uint64_t i = 0; i < a->n_tensors && i < b->n_tensors; i++) {
            CHECK_EQ_STR(a->tensors[i].name, b->tensors[i].name);
            CHECK_EQ_U64(a->tensors[i].hash, b->tensors[i].hash);
        }
    }
    cmf__file_free(a);
    cmf__file_free(b);
    /* an index naming a tensor its shard lacks */
    json_object_set_new(wm, "model.extra.weight", json_string("model-00001-of-00002.safetensors"));
    json_dump_file(idx, p, 0);
    const char *out = out_path();
    CHECK_ERR(conv(d2, out, CMF_DTYPE_BF16), CMF_ERR_NOT_FOUND, "model.extra.weight");
    /* an index naming a path outside the folder */
    json_object_set_new(wm, "model.extra.weight", json_string("../x.safetensors"));
    json_dump_file(idx, p, 0);
    CHECK_ERR(conv(d2, out, CMF_DTYPE_BF16), CMF_ERR_PARSE, "not a plain file name");
    CHECK(!exists(out));
    json_decref(idx);
}

TEST(truncated_file)
{
    const char *d = make_dir(NULL);
    write_st(st_path(d), LLAMA, N_LLAMA, NULL);
    struct stat sb;
    stat(st_path(d), &sb);
    CHECK(truncate(st_path(d), sb.st_size - 100) == 0);
    const char *out = out_path();
    CHECK_ERR(conv(d, out, CMF_DTYPE_F32), CMF_ERR_BOUNDS, "run past the end of the file");
    CHECK_CONTAINS(cmf_last_error(), "model.layers.0.mlp.down_proj.weight");
    CHECK_CONTAINS(cmf_last_error(), "model.safetensors");
    CHECK(!exists(out));
    /* shorter than the length field */
    CHECK(truncate(st_path(d), 5) == 0);
    CHECK_ERR(conv(d, out, CMF_DTYPE_F32), CMF_ERR_PARSE, "too short for the 8-byte header length");
}

TEST(header_length_past_eof)
{
    const char *d = make_dir(NULL);
    write_st(st_path(d), LLAMA, N_LLAMA, NULL);
    FILE *fp = fopen(st_path(d), "r+b");
    uint8_t big[8] = {0, 0, 0, 0, 1, 0, 0, 0}; /* 2^32 */
    fwrite(big, 1, 8, fp);
    fclose(fp);
    CHECK_ERR(conv(d, out_path(), CMF_DTYPE_F32), CMF_ERR_BOUNDS, "header length 4294967296 at byte 0");
}

static void bad_json(json_t *h) { json_object_set_new(h, "model.norm.weight", json_string("oops")); }
static void off_range(json_t *h)
{
    json_t *e = json_object_get(h, "model.norm.weight");
    json_object_set_new(e, "data_offsets", json_pack("[I,I]", (json_int_t)1000000, (json_int_t)1000128));
}
static void off_span(json_t *h)
{
    json_t *e = json_object_get(h, "model.norm.weight");
    json_t *o = json_object_get(e, "data_offsets");
    json_array_set_new(o, 1, json_integer(json_integer_value(json_array_get(o, 0)) + 4));
}
static void off_neg(json_t *h)
{
    json_t *e = json_object_get(h, "model.norm.weight");
    json_object_set_new(e, "data_offsets", json_pack("[I,I]", (json_int_t)64, (json_int_t)0));
}
static void dt_i64(json_t *h) { json_object_set_new(json_object_get(h, "model.norm.weight"), "dtype", json_string("I64")); }
static void dt_weird(json_t *h) { json_object_set_new(json_object_get(h, "model.norm.weight"), "dtype", json_string("Q7")); }
static void ndim7(json_t *h)
{
    json_object_set_new(json_object_get(h, "model.norm.weight"), "shape", json_pack("[i,i,i,i,i,i,i]", 32, 1, 1, 1, 1, 1, 1));
}

TEST(bad_headers)
{
    struct {
        void (*mutate)(json_t *);
        cmf_status want;
        const char *msg;
    } cases[] = {
        {bad_json, CMF_ERR_PARSE, "'model.norm.weight': header entry is not an object"},
        {off_range, CMF_ERR_BOUNDS, "'model.norm.weight': data_offsets [1000000, 1000128]"},
        {off_span, CMF_ERR_SIZE, "span 4 bytes, but F32 of 32 elements needs 128"},
        {off_neg, CMF_ERR_BOUNDS, "are not 0 <= begin <= end"},
        {dt_i64, CMF_ERR_DTYPE, "unsupported dtype 'I64'"},
        {dt_weird, CMF_ERR_DTYPE, "unknown dtype 'Q7'"},
        {ndim7, CMF_ERR_PARSE, "7 dimensions"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *d = make_dir(NULL);
        write_st(st_path(d), LLAMA, N_LLAMA, cases[i].mutate);
        const char *out = out_path();
        CHECK_ERR(conv(d, out, CMF_DTYPE_F32), cases[i].want, cases[i].msg);
        CHECK(!exists(out));
    }
    /* header that is not JSON */
    const char *d = make_dir(NULL);
    FILE *fp = fopen(st_path(d), "wb");
    uint8_t len8[8] = {6, 0, 0, 0, 0, 0, 0, 0};
    fwrite(len8, 1, 8, fp);
    fwrite("{nope}", 1, 6, fp);
    fclose(fp);
    CHECK_ERR(conv(d, out_path(), CMF_DTYPE_F32), CMF_ERR_PARSE, "header JSON");
}

TEST(config_against_tensors)
{
    /* wrong shape */
    spec s[N_LLAMA];
    memcpy(s, LLAMA, sizeof s);
    s[4].shape[0] = 30; /* q_proj */
    const char *d = make_dir(NULL);
    write_st(st_path(d), s, N_LLAMA, NULL);
    CHECK_ERR(conv(d, out_path(), CMF_DTYPE_F32), CMF_ERR_CONFIG,
              "tensor 'model.layers.0.self_attn.q_proj.weight' (from model.layers.0.self_attn.q_proj.weight) has shape [30, 32]");
    CHECK_CONTAINS(cmf_last_error(), "implies [32, 32]");
    /* missing tensor */
    d = make_dir(NULL);
    memcpy(s, LLAMA, sizeof s);
    s[6] = s[N_LLAMA - 1]; /* v_proj replaced by a duplicate-free shorter list */
    write_st(st_path(d), s, N_LLAMA - 1, NULL);
    CHECK_ERR(conv(d, out_path(), CMF_DTYPE_F32), CMF_ERR_CONFIG,
              "missing tensor 'model.layers.0.self_attn.v_proj.weight'");
    /* a layer the config does not have */
    d = make_dir(NULL);
    spec s2[N_LLAMA + 1];
    memcpy(s2, LLAMA, sizeof LLAMA);
    s2[N_LLAMA] = (spec){"model.layers.7.input_layernorm.weight", "BF16", 1, {32}};
    write_st(st_path(d), s2, N_LLAMA + 1, NULL);
    CHECK_ERR(conv(d, out_path(), CMF_DTYPE_F32), CMF_ERR_CONFIG, "is for layer 7, but");
    /* untied without lm_head (a later key overrides an earlier one) */
    d = make_dir(",\"tie_word_embeddings\":false");
    write_st(st_path(d), LLAMA, N_LLAMA, NULL);
    CHECK_ERR(conv(d, out_path(), CMF_DTYPE_F32), CMF_ERR_CONFIG, "missing tensor 'lm_head.weight'");
}

TEST(config_fields)
{
    struct {
        const char *extra;
        const char *msg;
    } cases[] = {
        {",\"foo_multiplier\":2.0", "field 'foo_multiplier' (model_type llama) is not known"},
        {",\"rope_scaling\":{\"rope_type\":\"dynamic\",\"factor\":2.0}", "rope type 'dynamic' is not supported"},
        {",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":2.0,\"zeta\":1}", "field 'rope_scaling.zeta'"},
        {",\"hidden_act\":\"relu2\"", "field 'hidden_act'"},
        {",\"num_key_value_heads\":3", "must divide num_attention_heads"},
        {",\"layer_types\":[\"full_attention\",\"full_attention\"]", "field 'layer_types'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        /* later keys of a JSON object win in jansson: the extra overrides */
        const char *d = make_dir(cases[i].extra);
        write_st(st_path(d), LLAMA, N_LLAMA, NULL);
        CHECK_ERR(conv(d, out_path(), CMF_DTYPE_F32), CMF_ERR_CONFIG, cases[i].msg);
    }
    /* unknown model_type */
    const char *d = make_dir(",\"model_type\":\"llamb\"");
    write_st(st_path(d), LLAMA, N_LLAMA, NULL);
    CHECK_ERR(conv(d, out_path(), CMF_DTYPE_F32), CMF_ERR_CONFIG, "field 'model_type': 'llamb' is not supported");
    /* mapped fields are accepted: llama3 rope scaling, harmless extras */
    d = make_dir(",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0,\"low_freq_factor\":1.0,"
                 "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":64},\"pretraining_tp\":1,"
                 "\"attention_dropout\":0.0,\"cache_implementation\":\"hybrid\"");
    write_st(st_path(d), LLAMA, N_LLAMA, NULL);
    CHECK_OK(conv(d, out_path(), CMF_DTYPE_F32));
}

TEST(missing_files)
{
    const char *d = make_dir(NULL);
    write_st(st_path(d), LLAMA, N_LLAMA, NULL);
    char p[1200];
    snprintf(p, sizeof p, "%s/tokenizer.json", d);
    unlink(p);
    CHECK_ERR(conv(d, out_path(), CMF_DTYPE_F32), CMF_ERR_IO, "tokenizer.json");
    d = make_dir(NULL);
    CHECK_ERR(conv(d, out_path(), CMF_DTYPE_F32), CMF_ERR_NOT_FOUND, "no model.safetensors");
    snprintf(p, sizeof p, "%s/config.json", d);
    unlink(p);
    CHECK_ERR(conv(d, out_path(), CMF_DTYPE_F32), CMF_ERR_IO, "config.json");
    /* bad option */
    cmf__convert_opts o = cmf__convert_opts_default();
    CHECK_ERR(cmf__convert_apply_flag(&o, "--quant", "q3"), CMF_ERR_ARG, "'q3' is not a quantization");
    o.quant = CMF_DTYPE_Q1;
    CHECK_ERR(cmf__convert_hf(d, out_path(), &o, NULL), CMF_ERR_ARG, "not one the converter writes");
}

/* The header parser alone, on a buffer: every 1..n-byte prefix of a valid
 * file is refused or parsed, never read past. */
TEST(prefixes)
{
    const char *d = make_dir(NULL);
    write_st(st_path(d), LLAMA, 3, NULL);
    size_t len = 0;
    char *buf = harness_read_file(st_path(d), &len);
    if (!buf) return;
    for (size_t n = 0; n < len; n += 7) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, buf, n);
        cmf__st_tensor *t = NULL;
        size_t nt = 0;
        cmf_status st = cmf__st_parse(copy, n, "prefix", 0, &t, &nt);
        CHECK(st != CMF_OK);
        cmf__st_tensors_free(t, nt);
        free(copy);
    }
    cmf__st_tensor *t = NULL;
    size_t nt = 0;
    CHECK_OK(cmf__st_parse((const uint8_t *)buf, len, "whole", 0, &t, &nt));
    CHECK_EQ_INT(nt, 3);
    cmf__st_tensors_free(t, nt);
    free(buf);
}

int main(void)
{
    RUN(valid_llama);
    RUN(sharded_index);
    RUN(truncated_file);
    RUN(header_length_past_eof);
    RUN(bad_headers);
    RUN(config_against_tensors);
    RUN(config_fields);
    RUN(missing_files);
    RUN(prefixes);
    return harness_done();
}
