/* test_format_corrupt.c — every open-time check of spec §1.2/§3/§4/§5/§7:
 * a valid file is written, one field of a copy is corrupted, and open must
 * fail with the expected status and a message naming what broke. */
#include "test_format_util.h"

static uint8_t *g_raw;
static size_t g_len;
static const char *g_src;

static void load(void)
{
    if (g_raw) return;
    g_src = tf_path("valid.cmf");
    if (tf_write(g_src, true, true) != CMF_OK) return;
    g_raw = tf_read(g_src, &g_len);
}

static uint8_t *copy(void)
{
    load();
    uint8_t *b = malloc(g_len);
    memcpy(b, g_raw, g_len);
    return b;
}

/* Writes `b` (n bytes) to a scratch file, opens it, frees b. */
static cmf_status open_bytes(uint8_t *b, size_t n)
{
    const char *p = tf_path("corrupt.cmf");
    tf_write_bytes(p, b, n);
    free(b);
    cmf__file *f = NULL;
    cmf_status st = cmf__file_open(p, NULL, &f);
    cmf__file_free(f);
    return st;
}

static uint64_t env(const uint8_t *b, unsigned off) { return cmf__rd64(b + off); }
/* Absolute offset of directory record k. */
static uint64_t rec(const uint8_t *b, int k) { return env(b, 0x20) + 16 + (uint64_t)k * 56; }

TEST(valid_file_opens)
{
    load();
    CHECK(g_raw != NULL);
    CHECK_OK(open_bytes(copy(), g_len));
}

TEST(bad_magic)
{
    uint8_t *b = copy();
    b[3] = 2;
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_MAGIC, "magic at 0x0");
    CHECK_ERR(open_bytes(copy(), 2), CMF_ERR_MAGIC, "magic");
    CHECK_ERR(open_bytes(copy(), 0), CMF_ERR_MAGIC, "magic");
}

TEST(truncated_envelope)
{
    CHECK_ERR(open_bytes(copy(), 100), CMF_ERR_BOUNDS, "envelope needs 128");
}

TEST(bad_version)
{
    uint8_t *b = copy();
    cmf__wr32(b + 4, 1);
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_VERSION, "version at 0x4: 1");
}

TEST(unknown_feature_bits)
{
    static const unsigned bits[] = {3, 4, 7, 31};
    for (size_t i = 0; i < 4; i++) {
        uint8_t *b = copy();
        cmf__wr32(b + 12, cmf__rd32(b + 12) | 1u << bits[i]);
        CHECK_ERR(open_bytes(b, g_len), CMF_ERR_FEATURE, "unknown bit");
    }
}

TEST(section_past_eof)
{
    static const unsigned fields[] = {0x10, 0x20, 0x30, 0x40, 0x50, 0x60};
    static const char *names[] = {"header section", "directory section", "data section", "masks section",
                                  "vocab section", "index section"};
    for (int i = 0; i < 6; i++) {
        uint8_t *b = copy();
        cmf__wr64(b + fields[i] + 8, g_len); /* length = whole file: end passes EOF */
        CHECK_ERR(open_bytes(b, g_len), CMF_ERR_BOUNDS, names[i]);
    }
    /* Truncating the file cuts the last section (index). */
    CHECK_ERR(open_bytes(copy(), g_len - 1), CMF_ERR_BOUNDS, "past end of file");
    /* Overflowing offset + length. */
    uint8_t *b = copy();
    cmf__wr64(b + 0x50, UINT64_MAX - 4);
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_BOUNDS, "vocab section");
}

TEST(section_inside_envelope)
{
    uint8_t *b = copy();
    cmf__wr64(b + 0x50, 64);
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_BOUNDS, "starts inside the 128-byte envelope");
    b = copy();
    cmf__wr64(b + 0x10, 0x70);
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_BOUNDS, "header section at 0x70 starts inside");
}

TEST(required_section_missing)
{
    uint8_t *b = copy();
    cmf__wr64(b + 0x20, 0);
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_BOUNDS, "directory section is missing");
    b = copy();
    cmf__wr64(b + 0x58, 5); /* vocab absent with a length */
    cmf__wr64(b + 0x50, 0);
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_BOUNDS, "offset 0 (absent) but length 5");
}

TEST(data_not_page_aligned)
{
    uint8_t *b = copy();
    cmf__wr64(b + 0x30, env(b, 0x30) - 64);
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_ALIGN, "not a multiple of 4096");
}

TEST(tensor_past_data_len)
{
    uint8_t *b = copy();
    cmf__wr64(b + 0x38, 64); /* data_len smaller than the tensors */
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_BOUNDS, "exceed the data section");
    b = copy();
    cmf__wr64(b + rec(b, 2) + 32, UINT64_MAX - 63); /* off + nbytes overflows */
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_BOUNDS, "model.layers.0.mlp.up_proj.weight");
}

TEST(tensor_misaligned)
{
    uint8_t *b = copy();
    cmf__wr64(b + rec(b, 1) + 32, cmf__rd64(b + rec(b, 1) + 32) + 8);
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_ALIGN, "'model.layers.0.input_layernorm.weight'");
}

TEST(name_not_utf8)
{
    uint8_t *b = copy();
    uint64_t pool = env(b, 0x20) + cmf__rd64(b + env(b, 0x20) + 8);
    uint64_t name = pool + cmf__rd32(b + rec(b, 3));
    b[name + 2] = 0xC0; /* overlong lead byte */
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_PARSE, "tensor #3");
    b = copy();
    b[name] = 0;
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_PARSE, "not valid UTF-8");
    b = copy();
    cmf__wr16(b + rec(b, 0) + 4, 0);
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_PARSE, "empty name");
}

TEST(name_pool_out_of_bounds)
{
    uint8_t *b = copy();
    cmf__wr32(b + rec(b, 4), 0xFFFFFF00u);
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_BOUNDS, "tensor #4");
    b = copy();
    cmf__wr64(b + env(b, 0x20) + 8, env(b, 0x28) + 1);
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_BOUNDS, "name pool offset");
    b = copy();
    cmf__wr64(b + env(b, 0x20), 1000000); /* count */
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_BOUNDS, "records of 56 bytes");
    b = copy();
    cmf__wr64(b + env(b, 0x20), UINT64_MAX / 8); /* count * 56 overflows */
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_BOUNDS, "records of 56 bytes");
    b = copy();
    cmf__wr64(b + 0x28, 8); /* directory too small for its header */
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_BOUNDS, "need 16");
}

TEST(unknown_and_reserved_dtype)
{
    uint8_t *b = copy();
    b[rec(b, 0) + 6] = 42;
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_DTYPE, "dtype 42 unknown");
    for (int d = 5; d <= 7; d++) {
        b = copy();
        b[rec(b, 0) + 6] = (uint8_t)d;
        CHECK_ERR(open_bytes(b, g_len), CMF_ERR_DTYPE, "reserved");
    }
}

TEST(ndim_and_shape)
{
    uint8_t *b = copy();
    b[rec(b, 0) + 7] = 7;
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_PARSE, "ndim 7 exceeds 6");
    b = copy();
    cmf__wr32(b + rec(b, 1) + 8 + 4 * 3, 9); /* shape[3] of a 1-D tensor */
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_PARSE, "shape[3] = 9 past ndim 1");
}

TEST(payload_size_mismatch)
{
    uint8_t *b = copy();
    cmf__wr32(b + rec(b, 0) + 8, 4); /* [5, 8] f32 -> [4, 8]: 128 bytes, stored 160 */
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_SIZE, "needs 128");
    b = copy();
    cmf__wr64(b + rec(b, 1) + 40, 14); /* f16 [8] stored as 14 bytes */
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_SIZE, "'model.layers.0.input_layernorm.weight'");
}

TEST(duplicate_names)
{
    uint8_t *b = copy();
    /* Point record 4's name at record 0's. */
    memcpy(b + rec(b, 4), b + rec(b, 0), 6);
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_DUPLICATE, "'model.embed_tokens.weight' record at");
}

TEST(header_json_invalid)
{
    uint8_t *b = copy();
    b[env(b, 0x10) + 1] = '#';
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_PARSE, "header JSON at 0x80");
    b = copy();
    b[env(b, 0x10) + 3] = 0xFF;
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_PARSE, "UTF-8");
    /* A JSON value that is not an object. */
    b = copy();
    uint64_t hl = env(b, 0x18);
    memset(b + 128, ' ', hl);
    b[128] = '1';
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_PARSE, "header JSON at 0x80");
}

/* Masks section checks, on sections built here. */
static cmf_status parse_masks(const uint8_t *d, size_t n, const json_t *arch)
{
    cmf__masks *m = NULL;
    cmf_status st = cmf__masks_parse(d, n, 0x1000, arch, "m.cmf: masks section", &m);
    cmf__masks_free(m);
    return st;
}

TEST(masks_checks)
{
    json_t *h = tf_header();
    const json_t *arch = json_object_get(h, "arch");
    cmf__buf m = {0};
    tf_masks(&m, 3);
    CHECK_OK(parse_masks(m.data, m.len, arch));
    /* Truncated: last blob out of bounds. */
    CHECK_ERR(parse_masks(m.data, m.len - 1, arch), CMF_ERR_BOUNDS, "mask 'task2' blob");
    CHECK_ERR(parse_masks(m.data, 5, arch), CMF_ERR_BOUNDS, "need 8");
    /* n_masks disagrees with the meta. */
    uint8_t *b = malloc(m.len);
    memcpy(b, m.data, m.len);
    cmf__wr32(b, 2);
    CHECK_ERR(parse_masks(b, m.len, arch), CMF_ERR_PARSE, "n_masks 2 but the meta lists 3");
    cmf__wr32(b, 3);
    /* meta_len past the end. */
    cmf__wr32(b + 4, 100000);
    CHECK_ERR(parse_masks(b, m.len, arch), CMF_ERR_BOUNDS, "meta JSON of 100000 bytes");
    memcpy(b, m.data, m.len);
    /* Tail bits: FFN has 20 neurons in 3 bytes; set bit 23 of mask 0's row 1. */
    uint32_t meta_len = cmf__rd32(b + 4);
    uint64_t blob0 = cmf__align_up(8 + meta_len, 8);
    b[blob0 + 3 + 2] |= 0x80;
    CHECK_ERR(parse_masks(b, m.len, arch), CMF_ERR_PARSE, "mask 'task0' FFN row 1");
    memcpy(b, m.data, m.len);
    b[blob0 + 6] |= 0x08; /* head bit 3 of 3 heads */
    CHECK_ERR(parse_masks(b, m.len, arch), CMF_ERR_PARSE, "head row 0");
    memcpy(b, m.data, m.len);
    b[blob0 + 8] |= 0x04; /* gate bit 2 of 2 layers */
    CHECK_ERR(parse_masks(b, m.len, arch), CMF_ERR_PARSE, "tail bits must be zero");
    /* Meta JSON broken. */
    memcpy(b, m.data, m.len);
    b[9] = '#';
    CHECK_ERR(parse_masks(b, m.len, arch), CMF_ERR_PARSE, "meta JSON at 0x1008");
    free(b);
    /* An arch that does not match the blob sizes. */
    json_t *arch2 = json_deep_copy(arch);
    json_object_set_new(arch2, "intermediate_size", json_integer(100));
    CHECK_ERR(parse_masks(m.data, m.len, arch2), CMF_ERR_SIZE, "blob_len 9");
    json_object_del(arch2, "num_layers");
    CHECK_ERR(parse_masks(m.data, m.len, arch2), CMF_ERR_PARSE, "arch.num_layers");
    CHECK_ERR(parse_masks(m.data, m.len, NULL), CMF_ERR_PARSE, "arch.num_layers");
    json_decref(arch2);
    json_decref(h);
    cmf__buf_free(&m);
}

TEST(masks_loop_rows_and_experts)
{
    /* num_loops 2: FFN rows per visit (4 rows x 3 bytes) + heads 2 + gates 1 = 15
     * bytes; with 10 experts also 2 layers x 2 bytes = 19. */
    json_t *arch = json_pack("{s:i, s:i, s:i, s:i, s:{s:i}}", "num_layers", 2, "intermediate_size", 20,
                             "num_attention_heads", 3, "num_loops", 2, "moe", "num_experts", 10);
    char meta[256];
    int ml = snprintf(meta, sizeof meta,
                      "{\"masks\":[{\"task_id\":7,\"name\":\"loop\",\"blob_off\":%d,\"blob_len\":19,"
                      "\"has_expert_fields\":true}]}",
                      0);
    uint64_t off = cmf__align_up(8 + (uint64_t)ml, 8);
    ml = snprintf(meta, sizeof meta,
                  "{\"masks\":[{\"task_id\":7,\"name\":\"loop\",\"blob_off\":%d,\"blob_len\":19,"
                  "\"has_expert_fields\":true}]}",
                  (int)off);
    uint8_t sec[512] = {0};
    cmf__wr32(sec, 1);
    cmf__wr32(sec + 4, (uint32_t)ml);
    memcpy(sec + 8, meta, (size_t)ml);
    uint8_t *blob = sec + off;
    blob[3 * 3 + 2] = 0x08;  /* visit row 3, neuron 19 */
    blob[12 + 1] = 0x04;     /* layer 1, head 2 */
    blob[14] = 0x01;         /* gate of layer 0 */
    blob[15 + 2] = 0x00;     /* layer 1 experts: none routable */
    blob[15 + 0] = 0xFF;     /* layer 0 experts 0..7 */
    blob[15 + 1] = 0x03;     /* layer 0 experts 8, 9 */
    cmf__masks *ms = NULL;
    CHECK_OK(cmf__masks_parse(sec, off + 19, 0, arch, "loop", &ms));
    if (ms) {
        const cmf__mask *m = &ms->masks[0];
        CHECK_EQ_INT(m->ffn_rows, 4);
        CHECK(cmf__mask_ffn_bit(ms, m, 3, 19));
        CHECK(!cmf__mask_ffn_bit(ms, m, 1, 19));
        CHECK(cmf__mask_head_bit(ms, m, 1, 2));
        CHECK(cmf__mask_gate_bit(ms, m, 0) && !cmf__mask_gate_bit(ms, m, 1));
        CHECK(cmf__mask_expert_bit(ms, m, 0, 9) && !cmf__mask_expert_bit(ms, m, 1, 0));
    }
    cmf__masks_free(ms);
    blob[15 + 3] = 0x04; /* layer 1 expert bit 10 of 10: tail */
    CHECK_ERR(cmf__masks_parse(sec, off + 19, 0, arch, "loop", &ms), CMF_ERR_PARSE, "expert row 1");
    json_decref(arch);
}

TEST(masks_corrupt_in_file)
{
    /* A corrupt masks section fails open itself. */
    uint8_t *b = copy();
    uint64_t mo = env(b, 0x40);
    cmf__wr32(b + mo, 9);
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_PARSE, "masks section");
}

TEST(index_checks)
{
    cmf__buf ix = {0};
    tf_index(&ix);
    cmf__index_entry *e = NULL;
    uint32_t n = 0;
    CHECK_OK(cmf__index_parse(ix.data, ix.len, 0, "ix", &e, &n));
    free(e);
    CHECK_ERR(cmf__index_parse(ix.data, 4, 0, "ix", &e, &n), CMF_ERR_BOUNDS, "header needs 8");
    cmf__wr32(ix.data + 16, 1000); /* n_groups */
    CHECK_ERR(cmf__index_parse(ix.data, ix.len, 0x2000, "ix", &e, &n), CMF_ERR_BOUNDS, "entry 0 at 0x2008");
    cmf__wr32(ix.data, 0x7fffffff);
    CHECK_ERR(cmf__index_parse(ix.data, ix.len, 0, "ix", &e, &n), CMF_ERR_BOUNDS, "entries cannot fit");
    cmf__buf_free(&ix);
    uint8_t *b = copy();
    uint64_t io = env(b, 0x60);
    cmf__wr32(b + io + 8 + 8, 99);
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_BOUNDS, "sparse index");
}

TEST(skill_file_refused)
{
    uint8_t *b = copy();
    cmf__wr32(b + 12, cmf__rd32(b + 12) | CMF_FEAT_SKILL_FILE);
    CHECK_ERR(open_bytes(b, g_len), CMF_ERR_UNSUPPORTED, "cmf skill apply");
}

int main(void)
{
    RUN(valid_file_opens);
    RUN(bad_magic);
    RUN(truncated_envelope);
    RUN(bad_version);
    RUN(unknown_feature_bits);
    RUN(section_past_eof);
    RUN(section_inside_envelope);
    RUN(required_section_missing);
    RUN(data_not_page_aligned);
    RUN(tensor_past_data_len);
    RUN(tensor_misaligned);
    RUN(name_not_utf8);
    RUN(name_pool_out_of_bounds);
    RUN(unknown_and_reserved_dtype);
    RUN(ndim_and_shape);
    RUN(payload_size_mismatch);
    RUN(duplicate_names);
    RUN(header_json_invalid);
    RUN(masks_checks);
    RUN(masks_loop_rows_and_experts);
    RUN(masks_corrupt_in_file);
    RUN(index_checks);
    RUN(skill_file_refused);
    free(g_raw);
    return harness_done();
}
