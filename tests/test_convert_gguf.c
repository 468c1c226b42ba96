/* test_convert_gguf.c — the GGUF reader and the ggml dequantizers: known
 * answers for every quant type against gguf-py's dequantization
 * (fixtures/gguf/quants.gguf + quants_ref.f32, bit exact), hand-built BF16
 * and Q8_K blocks, and corrupt containers (every check asserts status and
 * message), plus every truncation of a valid file. */
#include "convert/gguf.h"
#include "harness.h"
#include "util/arith.h"
#include "util/half.h"

#include <stdlib.h>
#include <string.h>

/* ---- a tiny GGUF builder ------------------------------------------------ */
typedef struct gb {
    uint8_t d[4096];
    size_t n;
} gb;
static void put(gb *b, const void *p, size_t n) { memcpy(b->d + b->n, p, n), b->n += n; }
static void u32(gb *b, uint32_t v) { cmf__wr32(b->d + b->n, v), b->n += 4; }
static void u64(gb *b, uint64_t v) { cmf__wr64(b->d + b->n, v), b->n += 8; }
static void str(gb *b, const char *s) { u64(b, strlen(s)), put(b, s, strlen(s)); }

/* Offsets of the fields the corruption tests poke. */
typedef struct layout {
    size_t version, n_tensors, n_kv, key0_len, kv0_type, arr_type, arr_n, align_val, t0_ndim, t0_dim0, t0_type,
        t0_off, t1_off, t1_name, data;
} layout;

/* Valid v3 file: 4 kvs (arch string, alignment u32, a string array, an f32)
 * and two tensors: "a" f32 [8], "b" q8_0 [32]. */
static size_t build(gb *b, layout *L)
{
    memset(b, 0, sizeof *b);
    put(b, "GGUF", 4);
    L->version = b->n, u32(b, 3);
    L->n_tensors = b->n, u64(b, 2);
    L->n_kv = b->n, u64(b, 4);
    L->key0_len = b->n, str(b, "general.architecture");
    L->kv0_type = b->n, u32(b, CMF_GGUF_STRING), str(b, "llama");
    str(b, "general.alignment"), u32(b, CMF_GGUF_U32);
    L->align_val = b->n, u32(b, 32);
    str(b, "tokenizer.ggml.tokens"), u32(b, CMF_GGUF_ARRAY);
    L->arr_type = b->n, u32(b, CMF_GGUF_STRING);
    L->arr_n = b->n, u64(b, 3), str(b, "x"), str(b, "yy"), str(b, "zzz");
    str(b, "llama.rope.freq_base"), u32(b, CMF_GGUF_F32);
    float f = 500000.0f;
    put(b, &f, 4);
    str(b, "a");
    L->t0_ndim = b->n, u32(b, 1);
    L->t0_dim0 = b->n, u64(b, 8);
    L->t0_type = b->n, u32(b, CMF_GGML_F32);
    L->t0_off = b->n, u64(b, 0);
    L->t1_name = b->n, str(b, "b"), u32(b, 1), u64(b, 32), u32(b, CMF_GGML_Q8_0);
    L->t1_off = b->n, u64(b, 32);
    while (b->n % 32) b->d[b->n++] = 0;
    L->data = b->n;
    for (int i = 0; i < 8; i++) {
        float v = (float)i - 3.5f;
        put(b, &v, 4);
    }
    cmf__wr16(b->d + b->n, cmf__f32_to_f16(0.5f)), b->n += 2;
    for (int i = 0; i < 32; i++) b->d[b->n++] = (uint8_t)(int8_t)(i - 16);
    return b->n;
}

static cmf_status parse(const gb *b, size_t n)
{
    cmf__gguf *g = NULL;
    cmf_status st = cmf__gguf_parse(b->d, n, "t.gguf", &g);
    cmf__gguf_free(g);
    return st;
}

TEST(valid_file_parses)
{
    gb b;
    layout L;
    size_t n = build(&b, &L);
    cmf__gguf *g = NULL;
    CHECK_OK(cmf__gguf_parse(b.d, n, "t.gguf", &g));
    if (!g) return;
    CHECK_EQ_INT(g->version, 3);
    CHECK_EQ_INT(g->n_kv, 4);
    CHECK_EQ_INT(g->n_tensors, 2);
    CHECK_EQ_INT(g->data_off, L.data);
    const char *s;
    uint64_t sl;
    CHECK_OK(cmf__gguf_get_str(g, "general.architecture", &s, &sl));
    CHECK(sl == 5 && memcmp(s, "llama", 5) == 0);
    double theta = 0;
    CHECK_OK(cmf__gguf_get_num(g, "llama.rope.freq_base", &theta));
    CHECK_EQ_INT((long long)theta, 500000);
    uint64_t a = 0;
    CHECK_OK(cmf__gguf_get_uint(g, "general.alignment", &a));
    CHECK_EQ_INT(a, 32);
    CHECK_ERR(cmf__gguf_get_uint(g, "general.architecture", &a), CMF_ERR_PARSE, "expected an integer");
    CHECK_ERR(cmf__gguf_get_uint(g, "nope", &a), CMF_ERR_NOT_FOUND, "'nope' missing");
    const cmf__gguf_kv *kv = cmf__gguf_find_kv(g, "tokenizer.ggml.tokens");
    CHECK(kv && kv->arr_n == 3);
    if (kv) {
        cmf__gguf_arr_str(kv, 2, &s, &sl);
        CHECK(sl == 3 && memcmp(s, "zzz", 3) == 0);
    }
    const cmf__gguf_tensor *t = cmf__gguf_find_tensor(g, "b");
    CHECK(t && t->nbytes == 34 && t->data == b.d + L.data + 32);
    if (t) {
        float v[32];
        CHECK_OK(cmf__ggml_dequant(t->type, t->data, 32, v));
        CHECK(v[0] == -8.0f && v[31] == 7.5f);
    }
    cmf__gguf_free(g);
}

/* Each corruption: status and a message naming the object and offset. */
TEST(corrupt_inputs)
{
    gb b;
    layout L;
    size_t n = build(&b, &L);
    char want[64];

    build(&b, &L), b.d[0] = 'X';
    CHECK_ERR(parse(&b, n), CMF_ERR_MAGIC, "t.gguf: at 0x0: magic");
    build(&b, &L), cmf__wr32(b.d + L.version, 1);
    CHECK_ERR(parse(&b, n), CMF_ERR_VERSION, "GGUF version 1 unsupported");
    build(&b, &L), cmf__wr32(b.d + L.version, 0x03000000u);
    CHECK_ERR(parse(&b, n), CMF_ERR_VERSION, "big-endian");
    build(&b, &L), cmf__wr64(b.d + L.n_kv, 1ull << 40);
    CHECK_ERR(parse(&b, n), CMF_ERR_BOUNDS, "metadata count 1099511627776 cannot fit");
    build(&b, &L), cmf__wr64(b.d + L.n_tensors, ~0ull);
    CHECK_ERR(parse(&b, n), CMF_ERR_BOUNDS, "tensor count");
    build(&b, &L), cmf__wr64(b.d + L.key0_len, 1ull << 62);
    snprintf(want, sizeof want, "metadata key at 0x%zx: string length", L.key0_len);
    CHECK_ERR(parse(&b, n), CMF_ERR_BOUNDS, want);
    build(&b, &L), cmf__wr64(b.d + L.key0_len, 0);
    CHECK_ERR(parse(&b, n), CMF_ERR_PARSE, "length 0");
    build(&b, &L), cmf__wr32(b.d + L.kv0_type, 13);
    CHECK_ERR(parse(&b, n), CMF_ERR_PARSE, "key 'general.architecture'");
    CHECK_ERR(parse(&b, n), CMF_ERR_PARSE, "value type 13 unknown");
    build(&b, &L), cmf__wr32(b.d + L.arr_type, CMF_GGUF_ARRAY);
    CHECK_ERR(parse(&b, n), CMF_ERR_PARSE, "key 'tokenizer.ggml.tokens'");
    build(&b, &L), cmf__wr32(b.d + L.arr_type, 77);
    CHECK_ERR(parse(&b, n), CMF_ERR_PARSE, "array element type 77 not allowed");
    build(&b, &L), cmf__wr64(b.d + L.arr_n, 1ull << 61);
    CHECK_ERR(parse(&b, n), CMF_ERR_BOUNDS, "strings cannot fit");
    build(&b, &L), cmf__wr32(b.d + L.arr_type, CMF_GGUF_U64);
    CHECK(parse(&b, n) != CMF_OK); /* bytes reinterpreted: later fields no longer line up */
    build(&b, &L), cmf__wr32(b.d + L.align_val, 24);
    CHECK_ERR(parse(&b, n), CMF_ERR_ALIGN, "'general.alignment'");
    build(&b, &L), cmf__wr32(b.d + L.align_val, 0);
    CHECK_ERR(parse(&b, n), CMF_ERR_ALIGN, "0 is not a power of two");
    build(&b, &L), cmf__wr32(b.d + L.t0_ndim, 5);
    snprintf(want, sizeof want, "tensor 'a' at 0x%zx: 5 dims", L.t0_ndim);
    CHECK_ERR(parse(&b, n), CMF_ERR_PARSE, want);
    build(&b, &L), cmf__wr64(b.d + L.t0_dim0, 0);
    CHECK_ERR(parse(&b, n), CMF_ERR_PARSE, "tensor 'a'");
    build(&b, &L), cmf__wr64(b.d + L.t0_dim0, 1ull << 62);
    CHECK_ERR(parse(&b, n), CMF_ERR_BOUNDS, "tensor 'a'");
    build(&b, &L), cmf__wr32(b.d + L.t0_type, 99);
    CHECK_ERR(parse(&b, n), CMF_ERR_DTYPE, "ggml type 99 unknown");
    build(&b, &L), cmf__wr32(b.d + L.t0_type, CMF_GGML_Q4_0); /* 8 values: not a 32-block */
    CHECK_ERR(parse(&b, n), CMF_ERR_SIZE, "whole number of q4_0 blocks");
    build(&b, &L), cmf__wr64(b.d + L.t1_off, 40);
    CHECK_ERR(parse(&b, n), CMF_ERR_ALIGN, "tensor 'b'");
    build(&b, &L), cmf__wr64(b.d + L.t1_off, 64);
    CHECK_ERR(parse(&b, n), CMF_ERR_BOUNDS, "tensor 'b'");
    CHECK_ERR(parse(&b, n), CMF_ERR_BOUNDS, "past the end of the file");
    build(&b, &L), cmf__wr64(b.d + L.t1_off, ~0ull - 31);
    CHECK_ERR(parse(&b, n), CMF_ERR_BOUNDS, "tensor 'b'");
    build(&b, &L), b.d[L.t1_name + 8] = 'a';
    CHECK_ERR(parse(&b, n), CMF_ERR_DUPLICATE, "tensor 'a' appears twice");
    build(&b, &L);
    memcpy(b.d + L.key0_len + 8, "general.alignment\0\0\0", 20); /* now a second 'general.alignment' */
    CHECK_ERR(parse(&b, n), CMF_ERR_PARSE, "contains a NUL byte");
}

TEST(every_truncation_fails_cleanly)
{
    gb b;
    layout L;
    size_t n = build(&b, &L);
    for (size_t k = 0; k < n; k++) {
        cmf_status st = parse(&b, k);
        if (st == CMF_OK) harness_fail(__FILE__, __LINE__, "prefix of %zu bytes parsed", k);
        else if (k >= 4 && !strstr(cmf_last_error(), "t.gguf"))
            harness_fail(__FILE__, __LINE__, "prefix %zu: message lacks the file: %s", k, cmf_last_error());
    }
}

/* Known answers: every tensor of quants.gguf dequantized equals gguf-py's
 * values bit for bit (tolerance 0: same f32 operations, same order). */
TEST(quants_known_answers)
{
    if (!harness_fixtures()) SKIP("no fixtures (CMF_FIXTURES)");
    size_t ref_len = 0;
    char *ref = harness_read_file(harness_fixture_path("gguf/quants_ref.f32"), &ref_len);
    cmf__gguf *g = NULL;
    CHECK_OK(cmf__gguf_open(harness_fixture_path("gguf/quants.gguf"), &g));
    if (!ref || !g) {
        free(ref);
        cmf__gguf_free(g);
        SKIP("quants.gguf / quants_ref.f32 missing");
    }
    static const char *order[] = {"f32", "f16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k",
                                  "q5_k", "q6_k"};
    const size_t per = 4 * 512;
    CHECK_EQ_INT(ref_len, sizeof order / sizeof order[0] * per * 4);
    for (size_t k = 0; k < sizeof order / sizeof order[0] && (k + 1) * per * 4 <= ref_len; k++) {
        const cmf__gguf_tensor *t = cmf__gguf_find_tensor(g, order[k]);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK_EQ_INT(t->n_elems, per);
        float *v = malloc(per * sizeof *v);
        CHECK_OK(cmf__ggml_dequant(t->type, t->data, per, v));
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < per; i++) {
            uint32_t want = cmf__rd32((const uint8_t *)ref + (k * per + i) * 4);
            if (cmf__f32_bits(v[i]) != want && !bad++) first = i;
        }
        if (bad)
            harness_fail(__FILE__, __LINE__, "%s: %zu of %zu values differ, first at %zu: %.9g vs %.9g", order[k], bad,
                         per, first, (double)v[first],
                         (double)cmf__bits_f32(cmf__rd32((const uint8_t *)ref + (k * per + first) * 4)));
        free(v);
    }
    cmf__gguf_free(g);
    free(ref);
}

/* BF16, Q8_K, IQ4_NL and IQ4_XS are not in quants.gguf: hand-made blocks
 * whose values are exact by construction. */
TEST(bf16_q8k_iq4_known_answers)
{
    uint8_t bf[8];
    float vals[4] = {1.0f, -2.5f, 3.140625f, -0.0f};
    for (int i = 0; i < 4; i++) cmf__wr16(bf + 2 * i, (uint16_t)(cmf__f32_bits(vals[i]) >> 16));
    float out[4];
    CHECK_OK(cmf__ggml_dequant(CMF_GGML_BF16, bf, 4, out));
    for (int i = 0; i < 4; i++) CHECK_EQ_U64(cmf__f32_bits(out[i]), cmf__f32_bits(vals[i]));

    uint8_t q[292];
    memset(q, 0, sizeof q);
    cmf__wr32(q, cmf__f32_bits(0.25f));
    for (int i = 0; i < 256; i++) q[4 + i] = (uint8_t)(int8_t)(i - 128);
    float y[256];
    CHECK_OK(cmf__ggml_dequant(CMF_GGML_Q8_K, q, 256, y));
    for (int i = 0; i < 256; i++) CHECK(y[i] == 0.25f * (float)(i - 128));
    CHECK_ERR(cmf__ggml_dequant(CMF_GGML_Q8_K, q, 100, y), CMF_ERR_SIZE, "not a whole number");
    CHECK_ERR(cmf__ggml_dequant(16, q, 256, y), CMF_ERR_DTYPE, "iq2_xxs");

    /* IQ4_NL / IQ4_XS: layout (which nibble, which scale bits) against
     * values spelled out here: gguf-py's d * kvalues[q] and
     * (d * (scale - 32)) * kvalues[q] */
    static const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    uint8_t nl[18];
    cmf__wr16(nl, cmf__f32_to_f16(0.5f));
    for (int j = 0; j < 16; j++) nl[2 + j] = (uint8_t)(j | (15 - j) << 4);
    CHECK_OK(cmf__ggml_dequant(CMF_GGML_IQ4_NL, nl, 32, y));
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == 0.5f * (float)kv[j]);
        CHECK(y[16 + j] == 0.5f * (float)kv[15 - j]);
    }
    uint8_t xs[136];
    memset(xs, 0, sizeof xs);
    cmf__wr16(xs, cmf__f32_to_f16(0.25f));
    /* group ib's 6-bit scale = 33 + ib: low 4 bits in scales_l, high 2 in scales_h */
    uint16_t sh = 0;
    for (int ib = 0; ib < 8; ib++) {
        int ls = 33 + ib;
        xs[4 + ib / 2] |= (uint8_t)((ls & 0xf) << (4 * (ib % 2)));
        sh |= (uint16_t)((ls >> 4) << (2 * ib));
        for (int j = 0; j < 16; j++) xs[8 + ib * 16 + j] = (uint8_t)((j + ib) % 16 | ((j * 3) % 16) << 4);
    }
    cmf__wr16(xs + 2, sh);
    CHECK_OK(cmf__ggml_dequant(CMF_GGML_IQ4_XS, xs, 256, y));
    for (int ib = 0; ib < 8; ib++)
        for (int j = 0; j < 16; j++) {
            float dl = 0.25f * (float)(1 + ib);
            CHECK(y[ib * 32 + j] == dl * (float)kv[(j + ib) % 16]);
            CHECK(y[ib * 32 + 16 + j] == dl * (float)kv[(j * 3) % 16]);
        }
}

/* ---- metadata-level checks: a flexible builder -------------------------- */
typedef struct mk {
    uint8_t kv[16384];
    size_t kn;
    uint64_t nkv;
    struct {
        char name[64];
        uint32_t ndim;
        uint64_t ne[3];
    } t[16];
    int nt;
    uint8_t out[1 << 16];
    size_t on;
} mk;

static void mk_raw(mk *m, const void *p, size_t n) { memcpy(m->kv + m->kn, p, n), m->kn += n; }
static void mk_u64(mk *m, uint64_t v) { cmf__wr64(m->kv + m->kn, v), m->kn += 8; }
static void mk_u32r(mk *m, uint32_t v) { cmf__wr32(m->kv + m->kn, v), m->kn += 4; }
static void mk_s(mk *m, const char *s) { mk_u64(m, strlen(s)), mk_raw(m, s, strlen(s)); }
static void mk_key(mk *m, const char *k, uint32_t type) { mk_s(m, k), mk_u32r(m, type), m->nkv++; }
static void kv_str(mk *m, const char *k, const char *v) { mk_key(m, k, CMF_GGUF_STRING), mk_s(m, v); }
static void kv_u32(mk *m, const char *k, uint32_t v) { mk_key(m, k, CMF_GGUF_U32), mk_u32r(m, v); }
static void kv_strs(mk *m, const char *k, const char *const *v, int n)
{
    mk_key(m, k, CMF_GGUF_ARRAY), mk_u32r(m, CMF_GGUF_STRING), mk_u64(m, (uint64_t)n);
    for (int i = 0; i < n; i++) mk_s(m, v[i]);
}
static void kv_i32s(mk *m, const char *k, const int *v, int n)
{
    mk_key(m, k, CMF_GGUF_ARRAY), mk_u32r(m, CMF_GGUF_I32), mk_u64(m, (uint64_t)n);
    for (int i = 0; i < n; i++) mk_u32r(m, (uint32_t)v[i]);
}
static void mk_t(mk *m, const char *name, uint32_t ndim, uint64_t e0, uint64_t e1, uint64_t e2)
{
    snprintf(m->t[m->nt].name, sizeof m->t[m->nt].name, "%s", name);
    m->t[m->nt].ndim = ndim;
    m->t[m->nt].ne[0] = e0, m->t[m->nt].ne[1] = e1, m->t[m->nt].ne[2] = e2;
    m->nt++;
}

/* A llama-like model: 1 layer, hidden 32, 2 heads (1 kv), all f32 zeros. */
static void mk_llama(mk *m, bool with_meta)
{
    memset(m, 0, sizeof *m);
    kv_str(m, "general.architecture", "llama");
    if (with_meta) {
        kv_u32(m, "llama.block_count", 1), kv_u32(m, "llama.embedding_length", 32);
        kv_u32(m, "llama.attention.head_count", 2), kv_u32(m, "llama.attention.head_count_kv", 1);
        kv_u32(m, "llama.feed_forward_length", 32);
    }
    mk_t(m, "token_embd.weight", 2, 32, 8, 1);
    mk_t(m, "blk.0.attn_q.weight", 2, 32, 32, 1);
}

static cmf__gguf *mk_open(mk *m)
{
    uint8_t *o = m->out;
    size_t n = 0;
    memcpy(o, "GGUF", 4), n = 4;
    cmf__wr32(o + n, 3), n += 4;
    cmf__wr64(o + n, (uint64_t)m->nt), n += 8;
    cmf__wr64(o + n, m->nkv), n += 8;
    memcpy(o + n, m->kv, m->kn), n += m->kn;
    uint64_t off = 0;
    for (int i = 0; i < m->nt; i++) {
        cmf__wr64(o + n, strlen(m->t[i].name)), n += 8;
        memcpy(o + n, m->t[i].name, strlen(m->t[i].name)), n += strlen(m->t[i].name);
        cmf__wr32(o + n, m->t[i].ndim), n += 4;
        uint64_t cnt = 1;
        for (uint32_t d = 0; d < m->t[i].ndim; d++) cmf__wr64(o + n, m->t[i].ne[d]), n += 8, cnt *= m->t[i].ne[d];
        cmf__wr32(o + n, CMF_GGML_F32), n += 4;
        cmf__wr64(o + n, off), n += 8;
        off = cmf__align_up(off + cnt * 4, 32);
    }
    n = cmf__align_up(n, 32);
    memset(o + n, 0, off), n += off;
    m->on = n;
    cmf__gguf *g = NULL;
    CHECK_OK(cmf__gguf_parse(o, n, "m.gguf", &g));
    return g;
}

TEST(corrupt_metadata_and_names)
{
    static mk m;
    json_t *arch = NULL;
    cmf__gguf_plan plan;
    char *js = NULL;
    size_t jl = 0;
    cmf__gguf *g;

    mk_llama(&m, false);
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_arch(g, &arch), CMF_ERR_CONFIG, "m.gguf: metadata key 'llama.block_count' missing");
        CHECK_ERR(cmf__gguf_plan_make(g, &plan), CMF_ERR_CONFIG, "'llama.attention.head_count' missing");
        CHECK_ERR(cmf__gguf_tokenizer_json(g, &js, &jl), CMF_ERR_NOT_FOUND, "no tokenizer.ggml.model");
        cmf__gguf_free(g);
    }
    mk_llama(&m, true);
    mk_t(&m, "blk.0.attn_k.weight", 2, 32, 15, 1); /* 15 rows: not 1 head of even width */
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_plan_make(g, &plan), CMF_ERR_CONFIG, "tensor 'blk.0.attn_k.weight' at 0x");
        CHECK_ERR(cmf__gguf_plan_make(g, &plan), CMF_ERR_CONFIG, "even-width heads");
        cmf__gguf_free(g);
    }
    mk_llama(&m, true);
    mk_t(&m, "blk.0.ffn_gate_exps.weight", 2, 32, 32, 1);
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_plan_make(g, &plan), CMF_ERR_CONFIG, "expert bank is not 3-D");
        cmf__gguf_free(g);
    }
    mk_llama(&m, true);
    mk_t(&m, "blk.0.attn_q.scale", 1, 32, 1, 1);
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_plan_make(g, &plan), CMF_ERR_CONFIG, "tensor 'blk.0.attn_q.scale' at 0x");
        cmf__gguf_free(g);
    }
    mk_llama(&m, true);
    mk_t(&m, "rope_freqs.weight", 1, 7, 1, 1); /* head_dim 16: 8 factors expected */
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_arch(g, &arch), CMF_ERR_CONFIG, "'rope_freqs.weight' at 0x");
        cmf__gguf_free(g);
    }
    mk_llama(&m, true);
    mk_t(&m, "rope_freqs.weight", 1, 8, 1, 1); /* zeros: not llama3 factors */
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_arch(g, &arch), CMF_ERR_CONFIG, "factor 0 not allowed");
        cmf__gguf_free(g);
    }
    mk_llama(&m, true);
    kv_str(&m, "llama.rope.scaling.type", "longrope");
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_arch(g, &arch), CMF_ERR_UNSUPPORTED, "key 'llama.rope.scaling.type'");
        cmf__gguf_free(g);
    }
    mk_llama(&m, true);
    kv_u32(&m, "llama.attention.sliding_window", 8);
    mk_key(&m, "llama.attention.sliding_window_pattern", CMF_GGUF_ARRAY), mk_u32r(&m, CMF_GGUF_BOOL), mk_u64(&m, 2);
    mk_raw(&m, "\1\0", 2); /* 2 bools for 1 layer */
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_arch(g, &arch), CMF_ERR_CONFIG, "expected 1 bools");
        cmf__gguf_free(g);
    }
    mk_llama(&m, true);
    kv_u32(&m, "llama.embedding_length_x", 1);
    kv_str(&m, "llama.context_length", "long"); /* wrong type */
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_arch(g, &arch), CMF_ERR_PARSE, "key 'llama.context_length' at 0x");
        cmf__gguf_free(g);
    }

    /* vocabularies */
    static const char *const toks[] = {"a", "b", "ab", "<s>"};
    static const int types[] = {1, 1, 1, 3};
    mk_llama(&m, true);
    kv_str(&m, "tokenizer.ggml.model", "rwkv");
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_tokenizer_json(g, &js, &jl), CMF_ERR_UNSUPPORTED, "tokenizer.ggml.model 'rwkv'");
        cmf__gguf_free(g);
    }
    mk_llama(&m, true);
    kv_str(&m, "tokenizer.ggml.model", "gpt2");
    kv_strs(&m, "tokenizer.ggml.tokens", toks, 4);
    kv_i32s(&m, "tokenizer.ggml.token_type", types, 3);
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_tokenizer_json(g, &js, &jl), CMF_ERR_PARSE, "'tokenizer.ggml.token_type' at 0x");
        CHECK_ERR(cmf__gguf_tokenizer_json(g, &js, &jl), CMF_ERR_PARSE, "3 entries, tokens has 4");
        cmf__gguf_free(g);
    }
    static const char *const bad_merge[] = {"ab"};
    mk_llama(&m, true);
    kv_str(&m, "tokenizer.ggml.model", "gpt2");
    kv_strs(&m, "tokenizer.ggml.tokens", toks, 4);
    kv_strs(&m, "tokenizer.ggml.merges", bad_merge, 1);
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_tokenizer_json(g, &js, &jl), CMF_ERR_PARSE, "merge 0 is not 'a b'");
        cmf__gguf_free(g);
    }
    mk_llama(&m, true);
    kv_str(&m, "tokenizer.ggml.model", "gpt2");
    kv_str(&m, "tokenizer.ggml.pre", "chatglm-bpe");
    kv_strs(&m, "tokenizer.ggml.tokens", toks, 4);
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_tokenizer_json(g, &js, &jl), CMF_ERR_UNSUPPORTED, "tokenizer.ggml.pre 'chatglm-bpe'");
        cmf__gguf_free(g);
    }
    static const char *const bad_utf8[] = {"a", "\xff\xfe"};
    mk_llama(&m, true);
    kv_str(&m, "tokenizer.ggml.model", "llama");
    kv_strs(&m, "tokenizer.ggml.tokens", bad_utf8, 2);
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_tokenizer_json(g, &js, &jl), CMF_ERR_PARSE, "token 1 is not valid UTF-8");
        cmf__gguf_free(g);
    }
    /* a valid SentencePiece vocab: merges rebuilt from the scores */
    mk_llama(&m, true);
    kv_str(&m, "tokenizer.ggml.model", "llama");
    kv_strs(&m, "tokenizer.ggml.tokens", toks, 4);
    kv_i32s(&m, "tokenizer.ggml.token_type", types, 4);
    if ((g = mk_open(&m))) {
        CHECK_OK(cmf__gguf_tokenizer_json(g, &js, &jl));
        CHECK_CONTAINS(js, "\"merges\":[[\"a\",\"b\"]]");
        CHECK_CONTAINS(js, "\"byte_fallback\":true");
        free(js);
        js = NULL;
        cmf__gguf_free(g);
    }
}

/* Numbers the header cannot hold or the runtime refuses are refused before
 * anything is written, naming the key or field and the value (context_length
 * is a u64 in GGUF; block_count sizes per-layer arrays). */
TEST(metadata_numbers_validated)
{
    static mk m;
    json_t *arch = NULL;
    cmf__gguf *g;
    mk_llama(&m, true);
    kv_u32(&m, "llama.context_length", 64);
    if ((g = mk_open(&m))) {
        CHECK_OK(cmf__gguf_arch(g, &arch));
        json_decref(arch);
        arch = NULL;
        cmf__gguf_free(g);
    }
    mk_llama(&m, true);
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_arch(g, &arch), CMF_ERR_CONFIG, "m.gguf: metadata key 'llama.context_length' missing or 0");
        cmf__gguf_free(g);
    }
    mk_llama(&m, true);
    mk_key(&m, "llama.context_length", CMF_GGUF_U64), mk_u64(&m, UINT64_MAX);
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_arch(g, &arch), CMF_ERR_CONFIG, "key 'llama.context_length' at 0x");
        CHECK_ERR(cmf__gguf_arch(g, &arch), CMF_ERR_CONFIG, ": 18446744073709551615 out of range");
        cmf__gguf_free(g);
    }
    mk_llama(&m, true);
    mk_key(&m, "llama.context_length", CMF_GGUF_U64), mk_u64(&m, ((uint64_t)1 << 62) + 1);
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_arch(g, &arch), CMF_ERR_CONFIG,
                  "m.gguf: the arch block made from it: header arch.max_position_embeddings: 4611686018427387905 out of range");
        cmf__gguf_free(g);
    }
    memset(&m, 0, sizeof m);
    kv_str(&m, "general.architecture", "llama");
    mk_key(&m, "llama.block_count", CMF_GGUF_U64), mk_u64(&m, (uint64_t)1 << 62);
    kv_u32(&m, "llama.embedding_length", 32), kv_u32(&m, "llama.attention.head_count", 2);
    kv_u32(&m, "llama.context_length", 64);
    mk_t(&m, "token_embd.weight", 2, 32, 8, 1);
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_arch(g, &arch), CMF_ERR_CONFIG, "llama.block_count: 4611686018427387904 layers, more than the 4096");
        cmf__gguf_free(g);
    }
    mk_llama(&m, true);
    kv_u32(&m, "llama.context_length", 64);
    mk_key(&m, "llama.attention.layer_norm_rms_epsilon", CMF_GGUF_F32), mk_u32r(&m, 0xbf800000u); /* -1.0f */
    if ((g = mk_open(&m))) {
        CHECK_ERR(cmf__gguf_arch(g, &arch), CMF_ERR_CONFIG, "header arch.rms_norm_eps: -1 must be > 0");
        cmf__gguf_free(g);
    }
    /* --set goes through the same validation */
    mk_llama(&m, true);
    kv_u32(&m, "llama.context_length", 64);
    if ((g = mk_open(&m))) {
        CHECK_OK(cmf__gguf_arch(g, &arch));
        json_t *over = json_pack("{s:f}", "rope_theta", -5.0);
        if (arch) CHECK_ERR(cmf__gguf_arch_override(arch, over), CMF_ERR_CONFIG, "--set: the arch block it makes: header arch.rope_theta: -5 must be > 0");
        json_decref(over);
        json_decref(arch);
        cmf__gguf_free(g);
    }
}

int main(void)
{
    RUN(valid_file_parses);
    RUN(corrupt_inputs);
    RUN(every_truncation_fails_cleanly);
    RUN(quants_known_answers);
    RUN(bf16_q8k_iq4_known_answers);
    RUN(corrupt_metadata_and_names);
    RUN(metadata_numbers_validated);
    return harness_done();
}
