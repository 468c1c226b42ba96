/* test_quant_basic.c — the dtype table, aliases and size rules, and the
 * flat/grouped layouts (f32, f16, bf16, q8_row, q4_block, q4_tiled):
 * hand-written known-answer payloads pin the bytes to CMF v2 §3.2, round
 * trips check the stated error bounds, dot_row is checked against
 * decode_row on odd sizes, wrong sizes and shapes fail with a message. */
#include "test_quant_common.h"
#include "quant/quant_internal.h"

TEST(dtype_table)
{
    CHECK_EQ_STR(cmf__dtype_get(CMF_DTYPE_Q8_ROW)->name, "q8_row");
    CHECK_EQ_STR(cmf__dtype_get(CMF_DTYPE_Q4TP)->name, "q4tp");
    CHECK_EQ_STR(cmf__dtype_get(CMF_DTYPE_Q2TP)->name, "q2tp");
    CHECK(cmf__dtype_get(-1) == NULL);
    CHECK(cmf__dtype_get(17) == NULL);
    for (int d = 5; d <= 7; d++) CHECK(!cmf__dtype_get(d)->supported);
    for (int d = 0; d < CMF_DTYPE_COUNT_; d++)
        if (d < 5 || d > 7) {
            CHECK(cmf__dtype_get(d)->supported);
            /* "vbit" names the converter default vbit_ro (§3.1), so id 8 has no name lookup */
            if (d != CMF_DTYPE_VBIT) CHECK_EQ_INT(cmf__dtype_from_name(cmf__dtype_get(d)->name), d);
        }
    CHECK_EQ_INT(cmf__dtype_from_name("q8"), CMF_DTYPE_Q8_ROW);
    CHECK_EQ_INT(cmf__dtype_from_name("q4"), CMF_DTYPE_Q4_BLOCK);
    CHECK_EQ_INT(cmf__dtype_from_name("q4t"), CMF_DTYPE_Q4_TILED);
    CHECK_EQ_INT(cmf__dtype_from_name("vbit"), CMF_DTYPE_VBIT_RO); /* §3.1: converter default */
    CHECK_EQ_INT(cmf__dtype_from_name("vbit_ro"), CMF_DTYPE_VBIT_RO);
    CHECK_EQ_INT(cmf__dtype_from_name("q8_2f"), CMF_DTYPE_Q8_2F);
    CHECK_EQ_INT(cmf__dtype_from_name("q4tp"), CMF_DTYPE_Q4TP);
    CHECK_EQ_INT(cmf__dtype_from_name("f16"), CMF_DTYPE_F16);
    CHECK_EQ_INT(cmf__dtype_from_name("bf16"), CMF_DTYPE_BF16);
    CHECK_EQ_INT(cmf__dtype_from_name("f32"), CMF_DTYPE_F32);
    CHECK_EQ_INT(cmf__dtype_from_name("q5"), -1);
    CHECK_EQ_INT(cmf__dtype_from_name(NULL), -1);
    CHECK(cmf__dtype_get(CMF_DTYPE_Q8_2F)->feature_bits == 4u);
    CHECK(cmf__dtype_get(CMF_DTYPE_VBIT)->feature_bits == 4u);
    CHECK(cmf__dtype_get(CMF_DTYPE_Q4_TILED)->feature_bits == 0u);
}

TEST(nbytes_rules)
{
    uint64_t nb, s2[2] = {7, 96}, s1[1] = {45}, s3[3] = {2, 3, 5}, odd[2] = {3, 33};
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_F32, 2, s2, &nb)); CHECK_EQ_U64(nb, 7 * 96 * 4);
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_F16, 1, s1, &nb)); CHECK_EQ_U64(nb, 90);
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_BF16, 3, s3, &nb)); CHECK_EQ_U64(nb, 60);
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_F32, 0, s1, &nb)); CHECK_EQ_U64(nb, 4); /* scalar */
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_Q8_ROW, 2, odd, &nb)); CHECK_EQ_U64(nb, 99 + 6);
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_Q8_2F, 2, odd, &nb)); CHECK_EQ_U64(nb, 99 + 6 + 66);
    /* q4_block: ceil(n/32) groups of 16 nibble bytes + one f16 each */
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_Q4_BLOCK, 2, odd, &nb)); CHECK_EQ_U64(nb, 4 * 18);
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_Q4_BLOCK, 1, s1, &nb)); CHECK_EQ_U64(nb, 2 * 18);
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_Q4_BLOCK, 3, s3, &nb)); CHECK_EQ_U64(nb, 18);
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_Q4_TILED, 2, s2, &nb)); CHECK_EQ_U64(nb, 21 * 18);
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_Q1, 2, s2, &nb)); CHECK_EQ_U64(nb, 21 * 6);
    /* q4tp: 16 B per group + 4 B row params + ceil(3*5/8) = 2 B of codes per row */
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_Q4TP, 2, s2, &nb)); CHECK_EQ_U64(nb, 21 * 16 + 7 * 4 + 7 * 2);
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_Q2TP, 2, s2, &nb)); CHECK_EQ_U64(nb, 21 * 8 + 7 * 4 + 7 * 2);
    uint64_t wide[2] = {2, 256}; /* 8 groups: 40 bits = 5 bytes of codes per row */
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_Q4TP, 2, wide, &nb)); CHECK_EQ_U64(nb, 16 * 16 + 8 + 10);
    uint64_t empty[2] = {0, 64};
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_Q4TP, 2, empty, &nb)); CHECK_EQ_U64(nb, 0);

    CHECK_ERR(cmf__dtype_nbytes(CMF_DTYPE_Q8_ROW, 1, s1, &nb), CMF_ERR_SIZE, "2-D");
    CHECK_ERR(cmf__dtype_nbytes(CMF_DTYPE_Q4_TILED, 2, odd, &nb), CMF_ERR_SIZE, "cols % 32");
    CHECK_ERR(cmf__dtype_nbytes(CMF_DTYPE_Q4TP, 3, s3, &nb), CMF_ERR_SIZE, "2-D");
    CHECK_ERR(cmf__dtype_nbytes(5, 2, s2, &nb), CMF_ERR_DTYPE, "reserved");
    CHECK_ERR(cmf__dtype_nbytes(7, 2, s2, &nb), CMF_ERR_DTYPE, "q4_col");
    CHECK_ERR(cmf__dtype_nbytes(17, 2, s2, &nb), CMF_ERR_DTYPE, "unknown");
    CHECK_ERR(cmf__dtype_nbytes(CMF_DTYPE_VBIT, 2, s2, &nb), CMF_ERR_UNSUPPORTED, "variable-size");
    CHECK_ERR(cmf__dtype_nbytes(CMF_DTYPE_Q1T, 2, s2, &nb), CMF_ERR_UNSUPPORTED, "variable-size");
    uint64_t huge[2] = {1ull << 40, 1ull << 40};
    CHECK_ERR(cmf__dtype_nbytes(CMF_DTYPE_F32, 2, huge, &nb), CMF_ERR_BOUNDS, "too large");
}

/* Opens a hand-written payload and checks every decoded value exactly. */
static void check_kat(int dtype, const uint8_t *bytes, uint64_t nbytes, int ndim, const uint64_t *shape,
                      const float *want, int64_t n_want)
{
    cmf__qmat m;
    cmf_status st = cmf__qmat_init(&m, dtype, bytes, nbytes, ndim, shape, "kat");
    if (st) { harness_fail(__FILE__, __LINE__, "init: %s", cmf_last_error()); return; }
    CHECK_EQ_INT(m.rows * m.cols, n_want);
    float *w = tq_decode_all(&m);
    for (int64_t i = 0; i < n_want; i++)
        if (w[i] != want[i]) {
            harness_fail(__FILE__, __LINE__, "%s element %lld: %.9g != %.9g", cmf__dtype_get(dtype)->name,
                         (long long)i, w[i], want[i]);
            break;
        }
    free(w);
    cmf__qmat_free(&m);
}

TEST(known_answers_float)
{
    const uint8_t f32b[] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc1, 0x01, 0x00, 0x00, 0x00};
    const float f32w[] = {1.0f, -10.0f, 1.4e-45f};
    uint64_t s3[1] = {3};
    check_kat(CMF_DTYPE_F32, f32b, sizeof f32b, 1, s3, f32w, 3);
    const uint8_t f16b[] = {0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x01, 0x00};
    const float f16w[] = {1.0f, -2.0f, 65504.0f, 5.9604645e-8f};
    uint64_t s22[2] = {2, 2};
    check_kat(CMF_DTYPE_F16, f16b, sizeof f16b, 2, s22, f16w, 4);
    const uint8_t bf16b[] = {0x80, 0x3f, 0x49, 0x40, 0x80, 0xbf};
    const float bf16w[] = {1.0f, 3.140625f, -1.0f};
    check_kat(CMF_DTYPE_BF16, bf16b, sizeof bf16b, 1, s3, bf16w, 3);
}

TEST(known_answers_q8_row)
{
    /* [int8 q: 2x3][f16 scale: 2]: 0.5 and 2.0 */
    const uint8_t b[] = {0x01, 0xfe, 0x7f, 0x00, 0x05, 0x81, 0x00, 0x38, 0x00, 0x40};
    const float w[] = {0.5f, -1.0f, 63.5f, 0.0f, 10.0f, -254.0f};
    uint64_t s[2] = {2, 3};
    check_kat(CMF_DTYPE_Q8_ROW, b, sizeof b, 2, s, w, 6);
}

TEST(known_answers_q4_block)
{
    /* shape [2, 20]: 40 weights, 2 groups over the flat tensor; row 1
     * starts mid-group 0 (flat 20) and ends in group 1 (flat 39). Nibbles
     * low first; group 1 is zero-padded past flat 39. Scales 1.0, -0.5. */
    const uint8_t b[36] = {
        0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f,
        0x79, 0xa6, 0x88, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0x00, 0x3c, 0x00, 0xb8};
    const float w[40] = {
        -8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 7, -8, 7, -8,   /* row 0 */
        7, -8, 7, -8, 7, -8, 7, -8, 7, -8, 7, -8, -0.5f, 0.5f, 1, -1, 0, 0, -3.5f, 4}; /* row 1 */
    uint64_t s[2] = {2, 20};
    check_kat(CMF_DTYPE_Q4_BLOCK, b, sizeof b, 2, s, w, 40);
    uint64_t s1[1] = {40}; /* the same bytes as a 1-D tensor */
    check_kat(CMF_DTYPE_Q4_BLOCK, b, sizeof b, 1, s1, w, 40);
}

TEST(known_answers_q4_tiled)
{
    /* shape [2, 32]: tile = [f16 scale][16 nibble bytes]; scales 1.0, 2.0 */
    uint8_t b[36];
    const uint8_t t0[18] = {0x00, 0x3c, 0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe,
                            0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x8f};
    const uint8_t t1[18] = {0x00, 0x40, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                            0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x09};
    memcpy(b, t0, 18);
    memcpy(b + 18, t1, 18);
    float w[64];
    for (int i = 0; i < 16; i++) w[i] = (float)(i - 8);
    for (int i = 16; i < 31; i++) w[i] = 0;
    w[30] = 7; /* byte 0x8f: element 30 low = 15, element 31 high = 8 */
    w[31] = 0;
    for (int i = 0; i < 32; i++) w[32 + i] = (i & 1) ? 0.0f : -16.0f; /* 0x80: low 0 -> -8*2 */
    w[62] = 2;  /* byte 0x09: low 9 -> +1*2, high 0 -> -8*2 */
    w[63] = -16;
    uint64_t s[2] = {2, 32};
    check_kat(CMF_DTYPE_Q4_TILED, b, sizeof b, 2, s, w, 64);
}

TEST(roundtrip_float)
{
    float *x = tq_gauss_matrix(7, 96, 1);
    x[5] = 1e-6f; /* f16 subnormal range: absolute error <= 2^-25 */
    cmf__buf buf = {0};
    cmf__qmat m;
    int dts[3] = {CMF_DTYPE_F32, CMF_DTYPE_F16, CMF_DTYPE_BF16};
    /* round to nearest: relative error <= 2^-(p) with p = 24, 11, 8 mantissa bits
     * (plus 2^-25 absolute for f16 subnormals) */
    double rel[3] = {0, 1.0 / 2048, 1.0 / 256}, abs_[3] = {0, 2.98e-8, 0};
    for (int t = 0; t < 3; t++) {
        if (!tq_encode(dts[t], x, 7, 96, &buf, &m)) continue;
        float *w = tq_decode_all(&m);
        for (int i = 0; i < 7 * 96; i++) CHECK_NEAR(w[i], x[i], rel[t] * fabsf(x[i]) + abs_[t]);
        tq_check_dot(&m, 11);
        free(w);
        cmf__qmat_free(&m);
        float *y = tq_gauss_matrix(3, 33, 12); /* odd sizes: no whole 32-chunks per row */
        if (tq_encode(dts[t], y, 3, 33, &buf, &m)) {
            tq_check_dot(&m, 13);
            cmf__qmat_free(&m);
        }
        free(y);
    }
    cmf__buf_free(&buf);
    free(x);
}

/* q8_row: per row s = f16(absmax/127) nudged up so 127*s >= absmax (no
 * clipping); |w - x| <= s/2 per element (nearest code), plus f32 slack for
 * computing x/s and q*s (a few ulps of |x|). */
static void roundtrip_q8_row(int64_t rows, int64_t cols, uint64_t seed)
{
    float *x = tq_gauss_matrix(rows, cols, seed);
    cmf__buf buf = {0};
    cmf__qmat m;
    if (tq_encode(CMF_DTYPE_Q8_ROW, x, rows, cols, &buf, &m)) {
        float *w = tq_decode_all(&m);
        for (int64_t r = 0; r < rows; r++) {
            float s = cmf__f16_to_f32(cmf__rd16(buf.data + rows * cols + 2 * r)), amax = 0;
            for (int64_t i = 0; i < cols; i++) amax = fmaxf(amax, fabsf(x[r * cols + i]));
            CHECK(s * 127.0f >= amax);
            CHECK(s <= amax / 127.0f * (1.0f + 1.0f / 512));
            for (int64_t i = 0; i < cols; i++)
                CHECK_NEAR(w[r * cols + i], x[r * cols + i], 0.5 * s * (1 + 1e-5) + 1e-6 * fabsf(x[r * cols + i]));
        }
        tq_check_dot(&m, seed + 100);
        free(w);
        cmf__qmat_free(&m);
    }
    cmf__buf_free(&buf);
    free(x);
}

TEST(roundtrip_q8_row_odd)
{
    roundtrip_q8_row(7, 96, 2);
    roundtrip_q8_row(3, 33, 3);
    roundtrip_q8_row(1, 1, 4);
}

/* q4_block / q4_tiled: per 32-group s = f16(absmax/7) nudged up so 7*s >=
 * absmax; codes round to nearest in [-7, 7], so |w - x| <= s/2 (+ f32
 * slack). Groups run over the flat tensor for q4_block (rows of 33 start
 * mid-group) and per row for q4_tiled. */
static void roundtrip_q4(int dtype, int64_t rows, int64_t cols, uint64_t seed)
{
    float *x = tq_gauss_matrix(rows, cols, seed);
    x[0] = 0; /* a zero weight stays exactly zero */
    cmf__buf buf = {0};
    cmf__qmat m;
    if (tq_encode(dtype, x, rows, cols, &buf, &m)) {
        float *w = tq_decode_all(&m);
        int64_t n = rows * cols, groups = (n + 31) / 32;
        CHECK(w[0] == 0.0f);
        for (int64_t g = 0; g < groups; g++) {
            const uint8_t *sp = dtype == CMF_DTYPE_Q4_BLOCK ? buf.data + 16 * groups + 2 * g : buf.data + 18 * g;
            float s = cmf__f16_to_f32(cmf__rd16(sp)), amax = 0;
            for (int64_t i = 32 * g; i < n && i < 32 * g + 32; i++) amax = fmaxf(amax, fabsf(x[i]));
            CHECK(s * 7.0f >= amax);
            for (int64_t i = 32 * g; i < n && i < 32 * g + 32; i++)
                CHECK_NEAR(w[i], x[i], 0.5 * s * (1 + 1e-5) + 1e-6 * fabsf(x[i]));
        }
        if (dtype == CMF_DTYPE_Q4_BLOCK) /* padding nibbles of the last group encode zero */
            for (int64_t i = n; i < groups * 32; i++)
                CHECK_EQ_INT((buf.data[16 * (groups - 1) + (i % 32) / 2] >> ((i & 1) * 4)) & 15, 8);
        tq_check_dot(&m, seed + 100);
        free(w);
        cmf__qmat_free(&m);
    }
    cmf__buf_free(&buf);
    free(x);
}

TEST(roundtrip_q4_odd)
{
    roundtrip_q4(CMF_DTYPE_Q4_BLOCK, 7, 96, 5);
    roundtrip_q4(CMF_DTYPE_Q4_BLOCK, 3, 33, 6);
    roundtrip_q4(CMF_DTYPE_Q4_BLOCK, 5, 7, 7);
    roundtrip_q4(CMF_DTYPE_Q4_BLOCK, 1, 45, 8);
    roundtrip_q4(CMF_DTYPE_Q4_TILED, 7, 96, 9);
    roundtrip_q4(CMF_DTYPE_Q4_TILED, 3, 32, 10);
}

TEST(fixed_size_corrupt)
{
    uint8_t b[200] = {0};
    cmf__qmat m;
    uint64_t s[2] = {3, 33}, s1[1] = {45};
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q8_ROW, b, 104, 2, s, "blk.0"), CMF_ERR_SIZE, "expected 105");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q8_ROW, b, 104, 2, s, "blk.0"), CMF_ERR_SIZE, "tensor 'blk.0'");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q4_BLOCK, b, 73, 2, s, "w"), CMF_ERR_SIZE, "expected 72");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_F16, b, 91, 1, s1, "w"), CMF_ERR_SIZE, "expected 90");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q4_TILED, b, 72, 2, s, "w"), CMF_ERR_SIZE, "cols % 32");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q8_ROW, b, 90, 1, s1, "w"), CMF_ERR_SIZE, "2-D");
    CHECK_ERR(cmf__qmat_init(&m, 6, b, 90, 1, s1, "w"), CMF_ERR_DTYPE, "reserved");
    CHECK_ERR(cmf__qmat_init(&m, 99, b, 90, 1, s1, "w"), CMF_ERR_DTYPE, "unknown");
    cmf__buf buf = {0};
    float x[96] = {0};
    CHECK_ERR(cmf__quantize(CMF_DTYPE_Q4_TILED, x, 3, 33, NULL, &buf, "enc"), CMF_ERR_SIZE, "cols % 32");
    CHECK_ERR(cmf__quantize(5, x, 3, 32, NULL, &buf, "enc"), CMF_ERR_DTYPE, "reserved");
    x[4] = NAN;
    CHECK_ERR(cmf__quantize(CMF_DTYPE_Q8_ROW, x, 3, 32, NULL, &buf, "enc"), CMF_ERR_ARG, "not finite");
    CHECK_EQ_INT(buf.len, 0);
    cmf__buf_free(&buf);
}

/* The decoders' fast f16 widening must agree with util/half.h bit for bit. */
TEST(fast_f16_matches_reference)
{
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t a = cmf__f32_bits(cmf__quant_f16((uint16_t)h)), b = cmf__f32_bits(cmf__f16_to_f32((uint16_t)h));
        if (a != b) { CHECK_EQ_U64(a, b); break; }
    }
}

int main(void)
{
    RUN(fast_f16_matches_reference);
    RUN(dtype_table);
    RUN(nbytes_rules);
    RUN(known_answers_float);
    RUN(known_answers_q8_row);
    RUN(known_answers_q4_block);
    RUN(known_answers_q4_tiled);
    RUN(roundtrip_float);
    RUN(roundtrip_q8_row_odd);
    RUN(roundtrip_q4_odd);
    RUN(fixed_size_corrupt);
    return harness_done();
}
