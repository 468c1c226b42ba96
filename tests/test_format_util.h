/* test_format_util.h — shared by the tests/test_format_*.c programs: a small
 * sample model written with the format writer (f32/f16/bf16 payloads built
 * here, so the tests never depend on the quantizers), a valid masks section
 * and sparse index, and byte-patching helpers for corrupt-file tests. */
#ifndef CMF_TEST_FORMAT_UTIL_H
#define CMF_TEST_FORMAT_UTIL_H

#include "harness.h"
#include "format/format.h"
#include "quant/quant.h"
#include "util/arith.h"
#include "util/buf.h"
#include "util/half.h"
#include "util/hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sample arch: 2 layers, 20 FFN neurons, 3 heads. */
#define TF_LAYERS 2
#define TF_FFN 20
#define TF_HEADS 3

static inline const char *tf_path(const char *name)
{
    static char buf[8][512];
    static int slot;
    char *p = buf[slot++ % 8];
    snprintf(p, 512, "%s/%s", harness_tmpdir(), name);
    return p;
}

static inline json_t *tf_header(void)
{
    return json_pack("{s:{s:s, s:i, s:i, s:i, s:i, s:s}, s:s, s:{s:s}}", "arch", "arch_name", "test", "num_layers",
                     TF_LAYERS, "intermediate_size", TF_FFN, "num_attention_heads", TF_HEADS, "hidden_size", 8,
                     "norm_style", "qwen", "quant_type", "F32", "tokenizer_config", "chat_template", "{{x}}");
}

/* A masks section with `n` masks; mask k has FFN bit (k) set in every row,
 * head bit 1, gates all on. Each blob is 9 bytes. */
static inline void tf_masks(cmf__buf *out, int n)
{
    uint64_t blob_len = TF_LAYERS * 3 + TF_LAYERS * 1 + 1;
    size_t meta_len = 0;
    char *meta = NULL;
    for (int iter = 0; iter < 4; iter++) {
        cmf__buf m = {0};
        cmf__buf_printf(&m, "{\"default_task\":\"general\",\"masks\":[");
        uint64_t off = 8 + meta_len;
        for (int k = 0; k < n; k++) {
            off = cmf__align_up(off, 8);
            cmf__buf_printf(&m, "%s{\"task_id\":%d,\"name\":\"task%d\",\"sparsity\":0.5,\"quality\":null,"
                            "\"priority\":\"Fallback\",\"blob_off\":%llu,\"blob_len\":%llu}",
                            k ? "," : "", k, k, (unsigned long long)off, (unsigned long long)blob_len);
            off += blob_len;
        }
        cmf__buf_printf(&m, "]}");
        free(meta);
        meta = (char *)m.data;
        if (m.len == meta_len) break;
        meta_len = m.len;
    }
    out->len = 0;
    uint8_t hdr[8];
    cmf__wr32(hdr, (uint32_t)n);
    cmf__wr32(hdr + 4, (uint32_t)meta_len);
    cmf__buf_append(out, hdr, 8);
    cmf__buf_append(out, meta, meta_len);
    for (int k = 0; k < n; k++) {
        cmf__buf_append_zeros(out, cmf__align_up(out->len, 8) - out->len);
        uint8_t blob[9] = {0};
        for (int l = 0; l < TF_LAYERS; l++) blob[l * 3 + k / 8] |= (uint8_t)(1u << (k % 8));
        for (int l = 0; l < TF_LAYERS; l++) blob[6 + l] = 0x02;
        blob[8] = 0x03;
        cmf__buf_append(out, blob, 9);
    }
    free(meta);
}

/* A sparse index with one entry: task 0 layer 1, groups {0}, heads {1}. */
static inline void tf_index(cmf__buf *out)
{
    uint8_t b[8 + 16 + 4] = {0};
    cmf__wr32(b, 1);
    cmf__wr32(b + 8, 0);
    cmf__wr32(b + 12, 1);
    cmf__wr32(b + 16, 1);
    cmf__wr32(b + 20, 1);
    cmf__wr16(b + 24, 0);
    b[26] = 1;
    out->len = 0;
    cmf__buf_append(out, b, sizeof b);
}

/* Deterministic payload bytes of tensor `k` in a given dtype/shape. */
static inline void *tf_payload(int k, int dtype, int ndim, const uint64_t *shape, uint64_t *nbytes)
{
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    size_t es = dtype == CMF_DTYPE_F32 ? 4 : 2;
    uint8_t *p = malloc(n * es + 1);
    for (uint64_t i = 0; i < n; i++) {
        float v = (float)k + (float)i * 0.25f - 3.0f;
        if (dtype == CMF_DTYPE_F32) memcpy(p + i * 4, &v, 4);
        else if (dtype == CMF_DTYPE_F16) cmf__wr16(p + i * 2, cmf__f32_to_f16(v));
        else cmf__wr16(p + i * 2, cmf__f32_to_bf16(v));
    }
    *nbytes = n * es;
    return p;
}

typedef struct tf_spec {
    const char *name;
    int dtype, ndim;
    uint64_t shape[6];
} tf_spec;

static const tf_spec TF_TENSORS[] = {
    {"model.embed_tokens.weight", CMF_DTYPE_F32, 2, {5, 8}},
    {"model.layers.0.input_layernorm.weight", CMF_DTYPE_F16, 1, {8}},
    {"model.layers.0.mlp.up_proj.weight", CMF_DTYPE_BF16, 2, {20, 8}},
    {"model.layers.1.mlp.down_proj.weight", CMF_DTYPE_F32, 3, {2, 4, 3}},
    {"lm_head.weight", CMF_DTYPE_F16, 2, {5, 8}},
    {"model.norm.weight", CMF_DTYPE_F16, 1, {7}},
};
#define TF_N_TENSORS (sizeof TF_TENSORS / sizeof TF_TENSORS[0])

/* Writes the sample (masks and index optional). */
static inline cmf_status tf_write(const char *path, bool with_masks, bool with_index)
{
    cmf__writer *w = NULL;
    cmf_status st = cmf__writer_open(path, &w);
    if (st) return st;
    json_t *h = tf_header();
    cmf__buf m = {0}, ix = {0};
    tf_masks(&m, 2);
    tf_index(&ix);
    st = cmf__writer_set_header(w, h);
    if (!st) st = cmf__writer_set_vocab(w, "{\"model\":{}}", 12);
    if (!st && with_masks) st = cmf__writer_set_masks(w, m.data, m.len);
    if (!st && with_index) st = cmf__writer_set_index(w, ix.data, ix.len);
    for (size_t k = 0; !st && k < TF_N_TENSORS; k++) {
        uint64_t nb;
        void *p = tf_payload((int)k, TF_TENSORS[k].dtype, TF_TENSORS[k].ndim, TF_TENSORS[k].shape, &nb);
        st = cmf__writer_add_tensor(w, TF_TENSORS[k].name, TF_TENSORS[k].dtype, TF_TENSORS[k].ndim,
                                    TF_TENSORS[k].shape, p, nb);
        free(p);
    }
    if (!st) st = cmf__writer_finish(w);
    else cmf__writer_abort(w);
    json_decref(h);
    cmf__buf_free(&m);
    cmf__buf_free(&ix);
    return st;
}

static inline uint8_t *tf_read(const char *path, size_t *len) { return (uint8_t *)harness_read_file(path, len); }

static inline void tf_write_bytes(const char *path, const uint8_t *b, size_t n)
{
    FILE *fp = fopen(path, "wb");
    if (!fp) return;
    fwrite(b, 1, n, fp);
    fclose(fp);
}

#endif
