/* test_quant_lowbit.c — q8_2f, q4tp, q2tp, q1, q1s, q1t, vbit, vbit_ro:
 * hand-written known-answer payloads pin each layout to CMF v2 §3.2 and the
 * q4tp/q2tp facts; encoders are checked against per-dtype error bounds;
 * every variable-size layout gets corrupt payloads (truncated tables,
 * out-of-range indices and offsets) asserting status and message. */
#include "test_quant_common.h"

static void check_kat(int dtype, const uint8_t *bytes, uint64_t nbytes, int64_t rows, int64_t cols,
                      const float *want)
{
    cmf__qmat m;
    uint64_t shape[2] = {(uint64_t)rows, (uint64_t)cols};
    cmf_status st = cmf__qmat_init(&m, dtype, bytes, nbytes, 2, shape, "kat");
    if (st) { harness_fail(__FILE__, __LINE__, "init %s: %s", cmf__dtype_get(dtype)->name, cmf_last_error()); return; }
    float *w = tq_decode_all(&m);
    for (int64_t i = 0; i < rows * cols; i++)
        if (w[i] != want[i]) {
            harness_fail(__FILE__, __LINE__, "%s element %lld: %.9g != %.9g", cmf__dtype_get(dtype)->name,
                         (long long)i, w[i], want[i]);
            break;
        }
    tq_check_dot(&m, 77);
    free(w);
    cmf__qmat_free(&m);
}

TEST(kat_q8_2f)
{
    /* [int8: 2x2][f16 row scale: 0.5, 1.0][f16 col: 2.0, 0.25] */
    const uint8_t b[] = {0x01, 0xff, 0x02, 0x04, 0x00, 0x38, 0x00, 0x3c, 0x00, 0x40, 0x00, 0x34};
    const float w[] = {1.0f, -0.125f, 4.0f, 1.0f};
    check_kat(CMF_DTYPE_Q8_2F, b, sizeof b, 2, 2, w);
}

TEST(kat_q1)
{
    /* one 6-byte tile: f16 1.5, sign bits LSB-first */
    const uint8_t b[] = {0x00, 0x3e, 0x01, 0x80, 0xff, 0x00};
    float w[32];
    for (int k = 0; k < 32; k++) w[k] = -1.5f;
    w[0] = w[15] = 1.5f;
    for (int k = 16; k < 24; k++) w[k] = 1.5f;
    check_kat(CMF_DTYPE_Q1, b, sizeof b, 1, 32, w);
}

TEST(kat_q1s)
{
    /* two q1 tiles (scales 1.0, 0.5, all bits 1), count 2, then
     * (flat 3 -> 4.0) and (flat 40 -> -3.0) */
    const uint8_t b[] = {0x00, 0x3c, 0xff, 0xff, 0xff, 0xff, 0x00, 0x38, 0xff, 0xff, 0xff, 0xff,
                         0x02, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x44,
                         0x28, 0x00, 0x00, 0x00, 0x00, 0xc2};
    float w[64];
    for (int k = 0; k < 32; k++) { w[k] = 1.0f; w[32 + k] = 0.5f; }
    w[3] = 4.0f;
    w[40] = -3.0f;
    check_kat(CMF_DTYPE_Q1S, b, sizeof b, 2, 32, w);
}

TEST(kat_q1t)
{
    /* tile 0: scale 2.0, byte 0 = digits (1,2,0,1,2) = 1+6+0+27+162 = 196,
     * byte 6 = digits of k = 30, 31 (2, 1) = 2+3 = 5. tile 1: scale 0.5,
     * byte 0 = 242 (five 2s). row_ptr [0, 1, 3]; outliers (u16 col, f16):
     * row 0 (7, 5.0); row 1 (0, -1.0), (31, 0.25). */
    const uint8_t b[] = {0x00, 0x40, 196, 0, 0, 0, 0, 0, 5,
                         0x00, 0x38, 242, 0, 0, 0, 0, 0, 0,
                         0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0,
                         7, 0, 0x00, 0x45, 0, 0, 0x00, 0xbc, 31, 0, 0x00, 0x34};
    float w[64] = {0};
    w[0] = 2; w[1] = -2; w[3] = 2; w[4] = -2; w[7] = 5; w[30] = -2; w[31] = 2;
    w[32] = -1; w[33] = w[34] = w[35] = w[36] = -0.5f; w[63] = 0.25f;
    check_kat(CMF_DTYPE_Q1T, b, sizeof b, 2, 32, w);
}

TEST(kat_q4tp)
{
    /* [1, 64]: nibbles 2x16 B, params (lo 0, step 1.0) so t[c] = 2^c
     * exactly, codes 3 and 17 5-bit LSB-first: 0x23 0x02. */
    uint8_t b[32 + 4 + 2];
    memset(b, 0x88, 32);
    b[0] = 0x97;  /* e0 = 7 -> -1 * 8, e1 = 9 -> +1 * 8 */
    b[16] = 0x0f; /* e32 = 15 -> 7 * 2^17, e33 = 0 -> -8 * 2^17 */
    const uint8_t tail[6] = {0x00, 0x00, 0x00, 0x3c, 0x23, 0x02};
    memcpy(b + 32, tail, 6);
    float w[64] = {0};
    w[0] = -8; w[1] = 8; w[32] = 917504.0f; w[33] = -1048576.0f;
    check_kat(CMF_DTYPE_Q4TP, b, sizeof b, 1, 64, w);
}

TEST(kat_q4tp_ladder_and_codes)
{
    /* [2, 256]: 8 groups per row, 5 code bytes per row. Codes c_g = (7g +
     * 3 + 11r) % 32 packed LSB-first by hand here; every nibble 9 (+1), so
     * each weight equals its group's rung. Row params lo = -3.5, step =
     * 0.25 (row 0) and lo = 2.0, step = -0.125 (row 1): the ladder is
     * t[0] = exp2(lo), t[c] = t[c-1] * exp2(step). */
    enum { R = 2, C = 256, G = 8 };
    uint8_t b[R * G * 16 + R * 4 + R * 5];
    memset(b, 0x99, R * G * 16);
    uint8_t *params = b + R * G * 16, *codes = params + R * 4;
    const uint16_t lo[R] = {0xc300, 0x4000}, step[R] = {0x3400, 0xb000};
    memset(codes, 0, R * 5);
    for (int r = 0; r < R; r++) {
        cmf__wr16(params + 4 * r, lo[r]);
        cmf__wr16(params + 4 * r + 2, step[r]);
        for (int g = 0; g < G; g++) {
            unsigned c = (unsigned)(7 * g + 3 + 11 * r) % 32;
            for (int k = 0; k < 5; k++)
                if (c >> k & 1) codes[r * 5 + (g * 5 + k) / 8] |= (uint8_t)(1 << ((g * 5 + k) % 8));
        }
    }
    float w[R * C];
    for (int r = 0; r < R; r++) {
        float t[32], mul = exp2f(cmf__f16_to_f32(step[r]));
        t[0] = exp2f(cmf__f16_to_f32(lo[r]));
        for (int c = 1; c < 32; c++) t[c] = t[c - 1] * mul;
        for (int i = 0; i < C; i++) w[r * C + i] = t[(7 * (i / 32) + 3 + 11 * r) % 32];
    }
    check_kat(CMF_DTYPE_Q4TP, b, sizeof b, R, C, w);
    /* the kernel-facing accessors give the same ladder bits and rungs */
    cmf__qmat m;
    uint64_t shape[2] = {R, C};
    CHECK_OK(cmf__qmat_init(&m, CMF_DTYPE_Q4TP, b, sizeof b, 2, shape, "kat"));
    for (int r = 0; r < R; r++) {
        float lad[32];
        cmf__qmat_tp_ladder(&m, r, lad);
        for (int g = 0; g < G; g++) {
            unsigned c = cmf__qmat_tp_code(&m, r, g);
            CHECK_EQ_INT(c, (7 * g + 3 + 11 * r) % 32);
            CHECK(lad[c] == w[r * C + 32 * g]);
        }
    }
    cmf__qmat_free(&m);
}

TEST(kat_q2tp)
{
    /* [1, 64]: 2x8 B of 2-bit codes, params (0, 1.0), rungs 0 and 2:
     * rung 0 is an exactly-zero group whatever its bits; rung 2 is t[1] = 2.
     * Codes (c - 1.5) * s, LSB-first: 0xe4 = codes 0,1,2,3. */
    uint8_t b[16 + 4 + 2] = {0};
    b[0] = 0xe4; b[7] = 0xff;
    b[8] = 0xe4;
    const uint8_t tail[6] = {0x00, 0x00, 0x00, 0x3c, 0x40, 0x00};
    memcpy(b + 16, tail, 6);
    float w[64] = {0};
    for (int i = 32; i < 64; i++) w[i] = -3.0f;
    w[33] = -1; w[34] = 1; w[35] = 3;
    check_kat(CMF_DTYPE_Q2TP, b, sizeof b, 1, 64, w);
}

/* vbit [2, 32], widths 3 and 8; scales 1.0 and 0.5; row 0 MSB-first
 * packs u = 0..7 four times ([05 39 77] x 4), row 1 bytes 8k. */
static size_t vbit_kat_bytes(uint8_t *b, bool ro)
{
    size_t n = 0;
    b[n++] = 3; b[n++] = 8;
    b[n++] = 0x00; b[n++] = 0x3c; b[n++] = 0x00; b[n++] = 0x38;
    if (ro) {
        const uint8_t offs[12] = {0, 0, 0, 0, 12, 0, 0, 0, 44, 0, 0, 0};
        memcpy(b + n, offs, 12);
        n += 12;
    }
    for (int i = 0; i < 4; i++) { b[n++] = 0x05; b[n++] = 0x39; b[n++] = 0x77; }
    for (int k = 0; k < 32; k++) b[n++] = (uint8_t)(8 * k);
    return n;
}

TEST(kat_vbit)
{
    uint8_t b[80];
    float w[64];
    for (int k = 0; k < 32; k++) {
        w[k] = (float)(k % 8 - 3);
        w[32 + k] = (float)(8 * k - 127) * 0.5f;
    }
    size_t n = vbit_kat_bytes(b, false);
    CHECK_EQ_INT(n, 50);
    check_kat(CMF_DTYPE_VBIT, b, n, 2, 32, w);
    n = vbit_kat_bytes(b, true);
    CHECK_EQ_INT(n, 62);
    check_kat(CMF_DTYPE_VBIT_RO, b, n, 2, 32, w);
}

TEST(corrupt_vbit)
{
    uint8_t b[80], c[80];
    cmf__qmat m;
    uint64_t s[2] = {2, 32};
    size_t n = vbit_kat_bytes(b, false);
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT, b, 1, 2, s, "L.w"), CMF_ERR_BOUNDS, "bit-width table");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT, b, 1, 2, s, "L.w"), CMF_ERR_BOUNDS, "tensor 'L.w'");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT, b, 5, 2, s, "w"), CMF_ERR_BOUNDS, "scales table");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT, b, n - 1, 2, s, "w"), CMF_ERR_SIZE, "need 50");
    memcpy(c, b, n);
    c[n] = 0;
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT, c, n + 1, 2, s, "w"), CMF_ERR_SIZE, "need 50");
    c[1] = 7;
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT, c, n, 2, s, "w"), CMF_ERR_BOUNDS, "bit width 7 at payload byte 1");
    c[1] = 2;
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT, c, n, 2, s, "w"), CMF_ERR_BOUNDS, "not in {3,4,5,6,8}");
    uint64_t s33[2] = {2, 33}, s1[1] = {64};
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT, b, n, 2, s33, "w"), CMF_ERR_SIZE, "cols % 32");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT, b, n, 1, s1, "w"), CMF_ERR_SIZE, "2-D");

    n = vbit_kat_bytes(b, true);
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT_RO, b, 10, 2, s, "w"), CMF_ERR_BOUNDS, "row-offset table");
    memcpy(c, b, n);
    c[6] = 1; /* offsets[0] */
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT_RO, c, n, 2, s, "w"), CMF_ERR_BOUNDS, "row_offsets[0] at payload byte 6");
    memcpy(c, b, n);
    c[10] = 13; /* row 0 spans 13 bytes, 3-bit needs 12 */
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT_RO, c, n, 2, s, "w"), CMF_ERR_BOUNDS, "row_offsets[1] at payload byte 10");
    memcpy(c, b, n);
    c[10] = 0xff; c[11] = 0xff; c[12] = 0xff; c[13] = 0xff; /* huge offset */
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT_RO, c, n, 2, s, "w"), CMF_ERR_BOUNDS, "needs 12");
    memcpy(c, b, n);
    c[14] = 43; /* row 1 spans 31 bytes, 8-bit needs 32 */
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT_RO, c, n, 2, s, "w"), CMF_ERR_BOUNDS, "row_offsets[2]");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT_RO, b, n - 1, 2, s, "w"), CMF_ERR_SIZE, "offsets end at 62");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT_RO, b, n + 0, 2, s, NULL), CMF_OK, "");
    cmf__qmat_free(&m);
}

TEST(corrupt_q1s)
{
    uint8_t b[40] = {0};
    cmf__qmat m;
    uint64_t s[2] = {2, 32};
    /* base 12 B, count at byte 12 */
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q1S, b, 12, 2, s, "w"), CMF_ERR_BOUNDS, "outlier count at byte 12");
    b[12] = 2;
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q1S, b, 22, 2, s, "w"), CMF_ERR_SIZE, "count 2 at payload byte 12");
    b[12] = 0xff; b[13] = 0xff; b[14] = 0xff; b[15] = 0xff; /* 4G entries: 6*count must not wrap */
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q1S, b, 28, 2, s, "w"), CMF_ERR_SIZE, "count 4294967295");
    memset(b + 12, 0, 4);
    b[12] = 2;
    b[16] = 64; /* entry 0: flat index 64 of 64 weights */
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q1S, b, 28, 2, s, "w"), CMF_ERR_BOUNDS, "flat index 64 outside 64");
    b[16] = 9; b[22] = 9; /* duplicate index */
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q1S, b, 28, 2, s, "w"), CMF_ERR_BOUNDS, "outlier 1 at payload byte 22");
    b[22] = 40;
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q1S, b, 28, 2, s, "w"), CMF_OK, "");
    cmf__qmat_free(&m);
}

TEST(corrupt_q1t)
{
    uint8_t b[60] = {0};
    cmf__qmat m;
    uint64_t s[2] = {2, 32};
    /* base 18 B, row_ptr[3] at 18..30, entries from 30 */
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q1T, b, 29, 2, s, "w"), CMF_ERR_BOUNDS, "row_ptr table");
    b[18] = 1;
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q1T, b, 30, 2, s, "w"), CMF_ERR_BOUNDS, "row_ptr[0] at payload byte 18");
    b[18] = 0;
    b[22] = 2; b[26] = 1; /* row_ptr [0, 2, 1] */
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q1T, b, 38, 2, s, "w"), CMF_ERR_BOUNDS, "row_ptr[2] at payload byte 26 is 1: decreasing");
    b[26] = 3; /* row_ptr [0, 2, 3]: 3 entries need 12 bytes, give 8 */
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q1T, b, 38, 2, s, "w"), CMF_ERR_BOUNDS, "past the outlier entries");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q1T, b, 43, 2, s, "w"), CMF_ERR_SIZE, "need 42");
    b[30] = 32; /* entry 0 column 32 of 32 */
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q1T, b, 42, 2, s, "w"), CMF_ERR_BOUNDS, "column 32 outside 32");
    b[30] = 5; b[34] = 5; /* row 0: columns 5, 5 */
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q1T, b, 42, 2, s, "w"), CMF_ERR_BOUNDS, "outlier 1 (row 0) at payload byte 34");
    b[34] = 6;
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q1T, b, 42, 2, s, "w"), CMF_OK, "");
    cmf__qmat_free(&m);
    float *wide = calloc(65536 + 32, sizeof *wide);
    cmf__buf buf = {0};
    CHECK_ERR(cmf__quantize(CMF_DTYPE_Q1T, wide, 1, 65536 + 32, NULL, &buf, "wide"), CMF_ERR_SIZE, "fit u16");
    cmf__buf_free(&buf);
    free(wide);
}

/* ---- encoders ------------------------------------------------------------ */

/* q8_2f: |w - x| <= s_o * col_i / 2 (nearest code against the product the
 * reader forms) plus f32 slack. Input with one loud column. */
TEST(roundtrip_q8_2f)
{
    int64_t R = 7, C = 96;
    float *x = tq_gauss_matrix(R, C, 21);
    for (int64_t r = 0; r < R; r++) x[r * C + 5] *= 40.0f;
    cmf__buf buf = {0};
    cmf__qmat m;
    if (tq_encode(CMF_DTYPE_Q8_2F, x, R, C, &buf, &m)) {
        float *w = tq_decode_all(&m);
        for (int64_t r = 0; r < R; r++) {
            float s = cmf__f16_to_f32(cmf__rd16(buf.data + R * C + 2 * r));
            for (int64_t i = 0; i < C; i++) {
                float col = cmf__f16_to_f32(cmf__rd16(buf.data + R * C + 2 * R + 2 * i));
                CHECK_NEAR(w[r * C + i], x[r * C + i], 0.5 * s * col * (1 + 1e-5) + 1e-6 * fabsf(x[r * C + i]));
            }
        }
        tq_check_dot(&m, 22);
        free(w);
        cmf__qmat_free(&m);
    }
    /* the column field's purpose: with one input channel 40x louder, q8_row
     * spends its 8 bits on that channel, q8_2f normalizes it away */
    double e_row = 0, e_2f = 0;
    int dts[2] = {CMF_DTYPE_Q8_ROW, CMF_DTYPE_Q8_2F};
    for (int t = 0; t < 2; t++)
        if (tq_encode(dts[t], x, R, C, &buf, &m)) {
            float *w = tq_decode_all(&m);
            for (int64_t i = 0; i < R * C; i++) {
                double d = ((double)w[i] - x[i]) * ((double)w[i] - x[i]);
                if (t) e_2f += d; else e_row += d;
            }
            free(w);
            cmf__qmat_free(&m);
        }
    printf("  loud column: q8_row SSE %.4g, q8_2f SSE %.4g\n", e_row, e_2f);
    CHECK(e_2f * 10 < e_row); /* measured 23x */
    uint64_t shape[2] = {3, 33};
    float *y = tq_gauss_matrix(3, 33, 23);
    buf.len = 0;
    CHECK_OK(cmf__quantize(CMF_DTYPE_Q8_2F, y, 3, 33, NULL, &buf, "t"));
    CHECK_OK(cmf__qmat_init(&m, CMF_DTYPE_Q8_2F, buf.data, buf.len, 2, shape, "t"));
    tq_check_dot(&m, 24);
    cmf__qmat_free(&m);
    free(y);
    cmf__buf_free(&buf);
    free(x);
}

/* The ladder exactly as the spec README states it, built independently. */
static float tp_scale(const uint8_t *params_row, unsigned code)
{
    float t = exp2f(cmf__f16_to_f32(cmf__rd16(params_row))), mul = exp2f(cmf__f16_to_f32(cmf__rd16(params_row + 2)));
    for (unsigned c = 0; c < code; c++) t *= mul;
    return t;
}
static unsigned tp_code(const uint8_t *codes_row, int g)
{
    unsigned c = 0;
    for (int k = 0; k < 5; k++) c |= (unsigned)(codes_row[(g * 5 + k) / 8] >> ((g * 5 + k) % 8) & 1) << k;
    return c;
}

/* q4tp: a group's rung t; nibbles round to nearest in [-8, 7] against t,
 * so |w - x| <= max(t/2, amax - 7t) (the second term only if the chosen
 * rung sits below amax/7, which the encoder allows when it errs less).
 * The rung is within one ladder step of amax/7. */
static void rt_q4tp(int64_t R, int64_t C, uint64_t seed, bool spread)
{
    float *x = tq_gauss_matrix(R, C, seed);
    if (spread) /* within-row scale spread of ~4 octaves */
        for (int64_t i = 0; i < R * C; i++) x[i] *= exp2f((float)((i / 32) % 9) * 0.5f - 2.0f);
    for (int i = 0; i < 32; i++) x[32 + i] = 0; /* an all-zero group */
    cmf__buf buf = {0};
    cmf__qmat m;
    if (tq_encode(CMF_DTYPE_Q4TP, x, R, C, &buf, &m)) {
        float *w = tq_decode_all(&m);
        int64_t gpr = C / 32;
        uint64_t stride = (uint64_t)(gpr * 5 + 7) / 8;
        const uint8_t *params = buf.data + 16 * R * gpr, *codes = params + 4 * R;
        for (int64_t r = 0; r < R; r++)
            for (int64_t g = 0; g < gpr; g++) {
                float t = tp_scale(params + 4 * r, tp_code(codes + r * stride, (int)g)), amax = 0;
                const float *xg = x + r * C + 32 * g, *wg = w + r * C + 32 * g;
                for (int k = 0; k < 32; k++) amax = fmaxf(amax, fabsf(xg[k]));
                double tol = fmax(0.5 * t, amax - 7.0 * t) * (1 + 1e-5) + 1e-6 * amax;
                for (int k = 0; k < 32; k++) CHECK_NEAR(wg[k], xg[k], tol);
                if (amax > 0) CHECK(t <= amax / 7.0f * 1.3f && t >= amax / 7.0f / 1.3f);
            }
        for (int i = 0; i < 32; i++) CHECK(w[32 + i] == 0.0f);
        tq_check_dot(&m, seed + 1);
        free(w);
        cmf__qmat_free(&m);
    }
    cmf__buf_free(&buf);
    free(x);
}

TEST(roundtrip_q4tp)
{
    rt_q4tp(7, 96, 31, false);
    rt_q4tp(5, 256, 32, true);
    rt_q4tp(3, 64, 33, false);
}

/* q2tp: rung 0 decodes an exactly-zero group; otherwise the grid is
 * (c - 1.5) * t and codes are nearest, so |w - x| <= max(t/2, |x| - 1.5t). */
static void rt_q2tp(int64_t R, int64_t C, uint64_t seed)
{
    float *x = tq_gauss_matrix(R, C, seed);
    for (int i = 0; i < 32; i++) x[i] = 0;
    cmf__buf buf = {0};
    cmf__qmat m;
    if (tq_encode(CMF_DTYPE_Q2TP, x, R, C, &buf, &m)) {
        float *w = tq_decode_all(&m);
        int64_t gpr = C / 32;
        uint64_t stride = (uint64_t)(gpr * 5 + 7) / 8;
        const uint8_t *params = buf.data + 8 * R * gpr, *codes = params + 4 * R;
        CHECK_EQ_INT(tp_code(codes, 0), 0);
        for (int64_t r = 0; r < R; r++)
            for (int64_t g = 0; g < gpr; g++) {
                unsigned rung = tp_code(codes + r * stride, (int)g);
                float t = rung ? tp_scale(params + 4 * r, rung - 1) : 0.0f;
                for (int k = 0; k < 32; k++) {
                    float xv = x[r * C + 32 * g + k], wv = w[r * C + 32 * g + k];
                    if (!rung) { CHECK(wv == 0.0f); continue; }
                    CHECK_NEAR(wv, xv, fmax(0.5 * t, fabsf(xv) - 1.5 * t) * (1 + 1e-5) + 1e-6 * fabsf(xv));
                }
            }
        tq_check_dot(&m, seed + 1);
        free(w);
        cmf__qmat_free(&m);
    }
    cmf__buf_free(&buf);
    free(x);
}

TEST(roundtrip_q2tp)
{
    rt_q2tp(7, 96, 41);
    rt_q2tp(4, 320, 42);
}

/* q1: every weight decodes to sign(x) * s with s = f16(mean|group|). */
TEST(roundtrip_q1)
{
    int64_t R = 7, C = 96;
    float *x = tq_gauss_matrix(R, C, 51);
    cmf__buf buf = {0};
    cmf__qmat m;
    if (tq_encode(CMF_DTYPE_Q1, x, R, C, &buf, &m)) {
        float *w = tq_decode_all(&m);
        for (int64_t g = 0; g < R * C / 32; g++) {
            float sum = 0;
            for (int k = 0; k < 32; k++) sum += fabsf(x[32 * g + k]);
            float s = cmf__f16_to_f32(cmf__f32_to_f16(sum / 32));
            for (int k = 0; k < 32; k++) CHECK(w[32 * g + k] == (x[32 * g + k] >= 0 ? s : -s));
        }
        tq_check_dot(&m, 52);
        free(w);
        cmf__qmat_free(&m);
    }
    cmf__buf_free(&buf);
    free(x);
}

/* q1s: the k = round(frac*n) largest |x| come back as their f16 values;
 * the rest as sign(x) * f16(mean of the group's non-outlier |x|). */
TEST(roundtrip_q1s)
{
    int64_t R = 7, C = 96;
    float *x = tq_gauss_matrix(R, C, 61);
    cmf__buf buf = {0};
    cmf__qmat m;
    cmf__quant_opts o = cmf__quant_opts_default();
    o.q1s_outlier_frac = 0.02; /* 13 of 672 */
    CHECK_OK(cmf__quantize(CMF_DTYPE_Q1S, x, R, C, &o, &buf, "t"));
    uint64_t shape[2] = {7, 96};
    CHECK_OK(cmf__qmat_init(&m, CMF_DTYPE_Q1S, buf.data, buf.len, 2, shape, "t"));
    CHECK_EQ_INT(buf.len, 21 * 6 + 4 + 13 * 6);
    float *w = tq_decode_all(&m);
    float thr = INFINITY;
    uint8_t is_out[672] = {0};
    for (int e = 0; e < 13; e++) {
        uint32_t idx = cmf__rd32(buf.data + 130 + 6 * e);
        is_out[idx] = 1;
        thr = fminf(thr, fabsf(x[idx]));
        CHECK(w[idx] == cmf__f16_to_f32(cmf__f32_to_f16(x[idx])));
    }
    for (int64_t g = 0; g < R * C / 32; g++) {
        float sum = 0;
        int cnt = 0;
        for (int k = 0; k < 32; k++)
            if (!is_out[32 * g + k]) { sum += fabsf(x[32 * g + k]); cnt++; CHECK(fabsf(x[32 * g + k]) <= thr); }
        float s = cmf__f16_to_f32(cmf__f32_to_f16(cnt ? sum / (float)cnt : 0));
        for (int k = 0; k < 32; k++)
            if (!is_out[32 * g + k]) CHECK(w[32 * g + k] == (x[32 * g + k] >= 0 ? s : -s));
    }
    tq_check_dot(&m, 62);
    free(w);
    cmf__qmat_free(&m);
    cmf__buf_free(&buf);
    free(x);
}

/* Outlier selection with ties: all magnitudes equal, so the first k by
 * index are kept, and the k-th-largest search must not lose count. */
TEST(outlier_ties)
{
    float x[7 * 96];
    for (int i = 0; i < 7 * 96; i++) x[i] = (i % 3) ? 0.5f : -0.5f;
    x[500] = 3.0f;
    cmf__buf buf = {0};
    cmf__quant_opts o = cmf__quant_opts_default();
    o.q1s_outlier_frac = 0.02; /* 13 */
    CHECK_OK(cmf__quantize(CMF_DTYPE_Q1S, x, 7, 96, &o, &buf, "t"));
    CHECK_EQ_INT(cmf__rd32(buf.data + 126), 13);
    for (int e = 0; e < 12; e++) CHECK_EQ_INT(cmf__rd32(buf.data + 130 + 6 * e), e);
    CHECK_EQ_INT(cmf__rd32(buf.data + 130 + 6 * 12), 500);
    cmf__buf_free(&buf);
}

/* q1t: outliers come back as f16; every other weight decodes to the
 * nearest of {-s, 0, +s} for its tile's stored scale s. */
TEST(roundtrip_q1t)
{
    int64_t R = 7, C = 96;
    float *x = tq_gauss_matrix(R, C, 71);
    cmf__buf buf = {0};
    cmf__qmat m;
    cmf__quant_opts o = cmf__quant_opts_default();
    o.q1t_outlier_frac = 0.02;
    CHECK_OK(cmf__quantize(CMF_DTYPE_Q1T, x, R, C, &o, &buf, "t"));
    uint64_t shape[2] = {7, 96};
    CHECK_OK(cmf__qmat_init(&m, CMF_DTYPE_Q1T, buf.data, buf.len, 2, shape, "t"));
    CHECK_EQ_INT(buf.len, 21 * 9 + 8 * 4 + 13 * 4);
    float *w = tq_decode_all(&m);
    uint8_t is_out[672] = {0};
    const uint8_t *rp = buf.data + 21 * 9, *ent = rp + 32;
    for (int64_t r = 0; r < R; r++)
        for (uint32_t e = cmf__rd32(rp + 4 * r); e < cmf__rd32(rp + 4 * r + 4); e++) {
            int64_t i = r * C + cmf__rd16(ent + 4 * e);
            is_out[i] = 1;
            CHECK(w[i] == cmf__f16_to_f32(cmf__f32_to_f16(x[i])));
        }
    int zeros = 0;
    for (int64_t i = 0; i < R * C; i++) {
        if (is_out[i]) continue;
        float s = cmf__f16_to_f32(cmf__rd16(buf.data + 9 * (i / 32)));
        float want = fabsf(x[i]) > 0.5f * s ? (x[i] > 0 ? s : -s) : 0.0f;
        CHECK(w[i] == want);
        zeros += w[i] == 0.0f;
    }
    CHECK(zeros > R * C / 5); /* the zero level is used */
    tq_check_dot(&m, 72);
    free(w);
    cmf__qmat_free(&m);
    cmf__buf_free(&buf);
    free(x);
}

/* vbit / vbit_ro: per group s = f16(amax / L) nudged up (L = 2^(b-1)-1),
 * codes nearest in [0, 2^b - 1], so |w - x| <= s/2. Widths: only
 * {3,4,5,6,8}; the mean width stays within the budget; with rows of very
 * different amplitude the louder rows get more bits. */
static void rt_vbit(int dtype, int64_t R, int64_t C, uint64_t seed, double budget, bool graded)
{
    float *x = tq_gauss_matrix(R, C, seed);
    if (graded)
        for (int64_t r = 0; r < R; r++)
            for (int64_t i = 0; i < C; i++) x[r * C + i] *= exp2f((float)(r % 6) - 2.0f);
    cmf__buf buf = {0};
    cmf__qmat m;
    cmf__quant_opts o = cmf__quant_opts_default();
    o.vbit_mean_bits = budget;
    CHECK_OK(cmf__quantize(dtype, x, R, C, &o, &buf, "t"));
    uint64_t shape[2] = {(uint64_t)R, (uint64_t)C};
    if (cmf__qmat_init(&m, dtype, buf.data, buf.len, 2, shape, "t")) {
        harness_fail(__FILE__, __LINE__, "init: %s", cmf_last_error());
        cmf__buf_free(&buf);
        free(x);
        return;
    }
    float *w = tq_decode_all(&m);
    int64_t gpr = C / 32;
    double mean_bits = 0;
    for (int64_t r = 0; r < R; r++) {
        int b = buf.data[r];
        CHECK(b == 3 || b == 4 || b == 5 || b == 6 || b == 8);
        mean_bits += (double)b / (double)R;
        if (graded && r % 6 < 5) CHECK(buf.data[r + 1] >= b || r + 1 >= R);
        for (int64_t g = 0; g < gpr; g++) {
            float s = cmf__f16_to_f32(cmf__rd16(buf.data + R + 2 * (r * gpr + g)));
            for (int k = 0; k < 32; k++) {
                int64_t i = r * C + 32 * g + k;
                CHECK_NEAR(w[i], x[i], 0.5 * s * (1 + 1e-5) + 1e-6 * fabsf(x[i]));
            }
        }
    }
    CHECK(mean_bits <= budget + 1e-9);
    if (!graded && budget >= 3 && budget <= 8 && budget == floor(budget) && budget != 7)
        CHECK_NEAR(mean_bits, budget, 1e-9); /* equal rows: everyone gets the budget */
    if (graded) CHECK(mean_bits > budget - 1.0);
    tq_check_dot(&m, seed + 1);
    free(w);
    cmf__qmat_free(&m);
    cmf__buf_free(&buf);
    free(x);
}

TEST(roundtrip_vbit)
{
    rt_vbit(CMF_DTYPE_VBIT, 7, 96, 81, 4.0, false);
    rt_vbit(CMF_DTYPE_VBIT_RO, 7, 96, 82, 4.0, false);
    rt_vbit(CMF_DTYPE_VBIT_RO, 5, 64, 83, 8.0, false);
    rt_vbit(CMF_DTYPE_VBIT_RO, 5, 64, 84, 3.0, false);
    rt_vbit(CMF_DTYPE_VBIT_RO, 5, 64, 85, 5.0, false);
    rt_vbit(CMF_DTYPE_VBIT, 24, 64, 86, 4.5, true);
    rt_vbit(CMF_DTYPE_VBIT_RO, 24, 64, 87, 4.0, true);
}

TEST(empty_and_zero)
{
    /* zero rows, and an all-zero matrix, for every writable dtype */
    int dts[] = {0, 1, 2, 3, 4, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    float z[64] = {0};
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        cmf__buf buf = {0};
        cmf__qmat m;
        uint64_t s0[2] = {0, 32}, s2[2] = {2, 32};
        CHECK_OK(cmf__quantize(dts[t], z, 0, 32, NULL, &buf, "e"));
        CHECK_OK(cmf__qmat_init(&m, dts[t], buf.data, buf.len, 2, s0, "e"));
        cmf__qmat_free(&m);
        buf.len = 0;
        CHECK_OK(cmf__quantize(dts[t], z, 2, 32, NULL, &buf, "z"));
        if (cmf__qmat_init(&m, dts[t], buf.data, buf.len, 2, s2, "z") == CMF_OK) {
            float *w = tq_decode_all(&m);
            for (int i = 0; i < 64; i++)
                if (w[i] != 0.0f) { harness_fail(__FILE__, __LINE__, "%s: zero decodes to %g", cmf__dtype_get(dts[t])->name, w[i]); break; }
            free(w);
            cmf__qmat_free(&m);
        } else harness_fail(__FILE__, __LINE__, "%s", cmf_last_error());
        cmf__buf_free(&buf);
    }
}

/* Mutated and truncated payloads of every dtype: init either rejects them
 * or every decode and dot stays inside the payload. Each candidate lives in
 * an exact-size heap copy, so under ASan any read past it aborts. */
TEST(mutations_stay_in_bounds)
{
    int dts[] = {1, 3, 4, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    int64_t R = 3, C = 64;
    float *x = tq_gauss_matrix(R, C, 99);
    float *xin = tq_gauss_matrix(1, C, 98), w[64];
    uint64_t shape[2] = {(uint64_t)R, (uint64_t)C};
    cmf__quant_opts o = cmf__quant_opts_default();
    o.q1s_outlier_frac = o.q1t_outlier_frac = 0.05;
    int accepted = 0, rejected = 0;
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        cmf__buf buf = {0};
        CHECK_OK(cmf__quantize(dts[t], x, R, C, &o, &buf, "m"));
        for (int trial = 0; trial < 3000; trial++) {
            size_t len = buf.len;
            if (trial % 3 == 0) len = (size_t)(tq_next() % (buf.len + 1)); /* truncate */
            uint8_t *p = malloc(len ? len : 1);
            memcpy(p, buf.data, len);
            int flips = trial % 3 == 0 ? 0 : 1 + (int)(tq_next() % 4);
            for (int f = 0; f < flips && len; f++) p[tq_next() % len] = (uint8_t)tq_next();
            cmf__qmat m;
            if (cmf__qmat_init(&m, dts[t], p, len, 2, shape, "m") == CMF_OK) {
                accepted++;
                for (int64_t r = 0; r < R; r++) {
                    cmf__qmat_decode_row(&m, r, w);
                    (void)cmf__qmat_dot_row(&m, r, xin);
                }
                cmf__qmat_free(&m);
            } else rejected++;
            free(p);
        }
        cmf__buf_free(&buf);
    }
    CHECK(accepted > 0 && rejected > 0);
    free(x);
    free(xin);
}

/* Magnitudes an f16 scale cannot carry fail loudly instead of encoding
 * inf/NaN; the same values fit where the scale has room (q8_row: 127x). */
TEST(out_of_range_magnitude)
{
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)(i % 7) - 3.0f;
    x[10] = 1.0e6f; /* q4 needs scale 1e6/7 > 65504 */
    cmf__buf buf = {0};
    CHECK_ERR(cmf__quantize(CMF_DTYPE_Q4_TILED, x, 2, 32, NULL, &buf, "big"), CMF_ERR_ARG, "q4_tiled can carry");
    CHECK_EQ_INT(buf.len, 0);
    /* f16 itself: caught by decoding the result (65520 and up round to inf) */
    CHECK_ERR(cmf__quantize(CMF_DTYPE_F16, x, 2, 32, NULL, &buf, "big"), CMF_ERR_ARG, "beyond what f16");
    CHECK_ERR(cmf__quantize(CMF_DTYPE_F16, x, 2, 32, NULL, &buf, "big"), CMF_ERR_ARG, "row 0, col 10");
    CHECK_ERR(cmf__quantize(CMF_DTYPE_Q1T, x, 2, 32, NULL, &buf, "big"), CMF_ERR_ARG, "exceeds 65504");
    CHECK_EQ_INT(buf.len, 0);
    CHECK_OK(cmf__quantize(CMF_DTYPE_Q8_ROW, x, 2, 32, NULL, &buf, "big"));
    CHECK_OK(cmf__quantize(CMF_DTYPE_Q4TP, x, 2, 32, NULL, &buf, "big")); /* log-domain ladder: no f16 cap */
    cmf__buf_free(&buf);
}

/* Huge row counts with zero columns (the element count itself is 0): shapes
 * past 2^60 rows are refused, and below that no size rule or table size
 * wraps around 64 bits. */
TEST(huge_row_counts)
{
    uint8_t b[16] = {0};
    cmf__qmat m;
    uint64_t s[2] = {1ull << 60, 0}, past[2] = {(1ull << 60) + 1, 0};
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q2TP, b, 0, 2, past, "h"), CMF_ERR_BOUNDS, "too large");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q2TP, b, 0, 2, s, "h"), CMF_ERR_SIZE, "expected 4611686018427387904");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q8_ROW, b, 0, 2, s, "h"), CMF_ERR_SIZE, "expected 2305843009213693952");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_Q1T, b, 4, 2, s, "h"), CMF_ERR_BOUNDS, "row_ptr table");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT_RO, b, 16, 2, s, "h"), CMF_ERR_BOUNDS, "bit-width table");
    CHECK_ERR(cmf__qmat_init(&m, CMF_DTYPE_VBIT, b, 16, 2, s, "h"), CMF_ERR_BOUNDS, "bit-width table");
    /* q1s keeps no per-row table: no weights, no outliers, nothing to refuse */
    CHECK_OK(cmf__qmat_init(&m, CMF_DTYPE_Q1S, b, 4, 2, s, "h"));
    float w[1];
    cmf__qmat_decode_row(&m, (1ll << 60) - 1, w);
    cmf__qmat_free(&m);
}

/* MoE family budget (§3.2): two "experts", one 4x louder. Alone, each
 * meets the budget of 4 by itself; with one water level over both, the
 * loud expert gets more bits, the quiet one fewer, the pooled mean still
 * within 4. */
TEST(vbit_family_budget)
{
    int64_t R = 16, C = 64;
    float *a = tq_gauss_matrix(R, C, 301), *b = tq_gauss_matrix(R, C, 302);
    for (int64_t i = 0; i < R * C; i++) a[i] *= 4.0f;
    double amp[32];
    cmf__vbit_row_amplitudes(a, R, C, amp);
    cmf__vbit_row_amplitudes(b, R, C, amp + R);
    cmf__quant_opts o = cmf__quant_opts_default();
    o.vbit_theta = cmf__vbit_water_level(amp, 2 * R, 4.0);
    double mean[2] = {0, 0}, alone[2] = {0, 0};
    float *src[2] = {a, b};
    for (int e = 0; e < 2; e++) {
        cmf__buf buf = {0};
        CHECK_OK(cmf__quantize(CMF_DTYPE_VBIT_RO, src[e], R, C, &o, &buf, "expert"));
        for (int64_t r = 0; r < R && buf.len; r++) mean[e] += buf.data[r] / (double)R;
        buf.len = 0;
        CHECK_OK(cmf__quantize(CMF_DTYPE_VBIT_RO, src[e], R, C, NULL, &buf, "expert"));
        for (int64_t r = 0; r < R && buf.len; r++) alone[e] += buf.data[r] / (double)R;
        cmf__buf_free(&buf);
    }
    CHECK_NEAR(alone[0], 4.0, 1e-9);
    CHECK_NEAR(alone[1], 4.0, 1e-9);
    CHECK(mean[0] > 4.5 && mean[1] < 3.5);
    CHECK((mean[0] + mean[1]) / 2 <= 4.0 + 1e-9);
    free(a);
    free(b);
}

int main(void)
{
    RUN(vbit_family_budget);
    RUN(huge_row_counts);
    RUN(out_of_range_magnitude);
    RUN(mutations_stay_in_bounds);
    RUN(kat_q8_2f);
    RUN(kat_q1);
    RUN(kat_q1s);
    RUN(kat_q1t);
    RUN(kat_q4tp);
    RUN(kat_q4tp_ladder_and_codes);
    RUN(kat_q2tp);
    RUN(kat_vbit);
    RUN(corrupt_vbit);
    RUN(corrupt_q1s);
    RUN(corrupt_q1t);
    RUN(roundtrip_q8_2f);
    RUN(roundtrip_q4tp);
    RUN(roundtrip_q2tp);
    RUN(roundtrip_q1);
    RUN(roundtrip_q1s);
    RUN(roundtrip_q1t);
    RUN(outlier_ties);
    RUN(roundtrip_vbit);
    RUN(empty_and_zero);
    return harness_done();
}
