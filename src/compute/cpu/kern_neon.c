/* kern_neon.c — AArch64 Advanced SIMD (NEON) row kernels for f32, f16,
 * bf16, q8_row, q4_block and q4_tiled, plus the f32 and f16-KV helpers.
 * Built only for aarch64 (CMakeLists.txt), where NEON is always present;
 * other dtypes and shapes come from the generic table; packed f16 / bf16
 * FMA tiles; with the dot-product extension, packed integer matmuls
 * (kern_neon_dotprod.c). Tests compare
 * each kernel with the scalar reference on odd sizes, under qemu in CI. */
#include "compute/cpu/kernels.h"
#include "util/arith.h"
#include "util/half.h"

#include <arm_neon.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>
#include <pthread.h>
#include <string.h>

/* ---- f32 ---------------------------------------------------------------- */
static float n_dot_f32(const float *a, const float *b, int64_t n)
{
    float32x4_t s0 = vdupq_n_f32(0), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
    }
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static void n_dot_f32_x4(const float *w, const float *x, int64_t xs, int64_t n, float out[4])
{
    const float *x0 = x, *x1 = x + xs, *x2 = x + 2 * xs, *x3 = x + 3 * xs;
    float32x4_t s0 = vdupq_n_f32(0), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t wv = vld1q_f32(w + i);
        s0 = vfmaq_f32(s0, wv, vld1q_f32(x0 + i));
        s1 = vfmaq_f32(s1, wv, vld1q_f32(x1 + i));
        s2 = vfmaq_f32(s2, wv, vld1q_f32(x2 + i));
        s3 = vfmaq_f32(s3, wv, vld1q_f32(x3 + i));
    }
    out[0] = vaddvq_f32(s0), out[1] = vaddvq_f32(s1), out[2] = vaddvq_f32(s2), out[3] = vaddvq_f32(s3);
    for (; i < n; i++) {
        out[0] += w[i] * x0[i];
        out[1] += w[i] * x1[i];
        out[2] += w[i] * x2[i];
        out[3] += w[i] * x3[i];
    }
}

static void n_dot_f32_2x4(const float *w, const float *x, int64_t xs, int64_t n, float out[8])
{
    const float *w1 = w + n, *x0 = x, *x1 = x + xs, *x2 = x + 2 * xs, *x3 = x + 3 * xs;
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t u = vld1q_f32(w + i), v = vld1q_f32(w1 + i), t;
        t = vld1q_f32(x0 + i), a0 = vfmaq_f32(a0, u, t), b0 = vfmaq_f32(b0, v, t);
        t = vld1q_f32(x1 + i), a1 = vfmaq_f32(a1, u, t), b1 = vfmaq_f32(b1, v, t);
        t = vld1q_f32(x2 + i), a2 = vfmaq_f32(a2, u, t), b2 = vfmaq_f32(b2, v, t);
        t = vld1q_f32(x3 + i), a3 = vfmaq_f32(a3, u, t), b3 = vfmaq_f32(b3, v, t);
    }
    out[0] = vaddvq_f32(a0), out[1] = vaddvq_f32(a1), out[2] = vaddvq_f32(a2), out[3] = vaddvq_f32(a3);
    out[4] = vaddvq_f32(b0), out[5] = vaddvq_f32(b1), out[6] = vaddvq_f32(b2), out[7] = vaddvq_f32(b3);
    for (; i < n; i++)
        for (int j = 0; j < 4; j++) {
            out[j] += w[i] * x[j * xs + i];
            out[4 + j] += w1[i] * x[j * xs + i];
        }
}

static void n_axpy(float *y, float a, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
    for (; i < n; i++) y[i] += a * x[i];
}

static float n_f32_dot(const cmf__qmat *w, int64_t row, const float *x)
{
    return n_dot_f32((const float *)(const void *)(w->data + (uint64_t)row * (uint64_t)w->cols * 4), x, w->cols);
}
static void n_f32_decode(const cmf__qmat *w, int64_t row, float *out)
{
    memcpy(out, w->data + (uint64_t)row * (uint64_t)w->cols * 4, (size_t)w->cols * 4);
}

/* ---- f16 / bf16 --------------------------------------------------------- */
/* 4 halves at p (any alignment) -> f32; FCVTL is exact for every f16 value. */
static inline float32x4_t ld_f16(const void *p) { return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p))); }
static inline float32x4_t ld_bf16(const void *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vreinterpret_u16_u8(vld1_u8(p)), 16));
}

/* f16 and bf16 rows: one loop, the load picked by a constant */
static inline float32x4_t ld_half(const uint8_t *p, bool bf) { return bf ? ld_bf16(p) : ld_f16(p); }
static inline float half_to_f32(const uint8_t *p, bool bf)
{
    return bf ? cmf__bf16_to_f32(cmf__rd16(p)) : cmf__f16_to_f32(cmf__rd16(p));
}
static inline float half_dot(const cmf__qmat *w, int64_t row, const float *x, bool bf)
{
    const uint8_t *r = w->data + (uint64_t)row * (uint64_t)w->cols * 2;
    float32x4_t s0 = vdupq_n_f32(0), s1 = s0;
    int64_t i = 0, n = w->cols;
    for (; i + 8 <= n; i += 8) {
        s0 = vfmaq_f32(s0, ld_half(r + 2 * i, bf), vld1q_f32(x + i));
        s1 = vfmaq_f32(s1, ld_half(r + 2 * i + 8, bf), vld1q_f32(x + i + 4));
    }
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, ld_half(r + 2 * i, bf), vld1q_f32(x + i));
    float s = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++) s += half_to_f32(r + 2 * i, bf) * x[i];
    return s;
}
static inline void half_decode(const cmf__qmat *w, int64_t row, float *out, bool bf)
{
    const uint8_t *r = w->data + (uint64_t)row * (uint64_t)w->cols * 2;
    int64_t i = 0, n = w->cols;
    for (; i + 4 <= n; i += 4) vst1q_f32(out + i, ld_half(r + 2 * i, bf));
    for (; i < n; i++) out[i] = half_to_f32(r + 2 * i, bf);
}
static float n_f16_dot(const cmf__qmat *w, int64_t row, const float *x) { return half_dot(w, row, x, false); }
static float n_bf16_dot(const cmf__qmat *w, int64_t row, const float *x) { return half_dot(w, row, x, true); }
static void n_f16_decode(const cmf__qmat *w, int64_t row, float *out) { half_decode(w, row, out, false); }
static void n_bf16_decode(const cmf__qmat *w, int64_t row, float *out) { half_decode(w, row, out, true); }

/* ---- int8 and int4 ------------------------------------------------------ */
/* 16 int8 -> four f32x4, in order */
static inline void widen_s8(int8x16_t q, float32x4_t v[4])
{
    int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_s8(vget_high_s8(q));
    v[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
    v[1] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo)));
    v[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
    v[3] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi)));
}
static inline float32x4_t fma16(float32x4_t acc, const float32x4_t v[4], const float *x)
{
    acc = vfmaq_f32(acc, v[0], vld1q_f32(x));
    acc = vfmaq_f32(acc, v[1], vld1q_f32(x + 4));
    acc = vfmaq_f32(acc, v[2], vld1q_f32(x + 8));
    return vfmaq_f32(acc, v[3], vld1q_f32(x + 12));
}

static inline float q8_row_scale(const cmf__qmat *w, int64_t row)
{
    return cmf__f16_to_f32(cmf__rd16(w->data + (uint64_t)w->rows * (uint64_t)w->cols + 2 * (uint64_t)row));
}

static float n_q8_dot(const cmf__qmat *w, int64_t row, const float *x)
{
    const int8_t *q = (const int8_t *)(w->data + (uint64_t)row * (uint64_t)w->cols);
    float32x4_t s0 = vdupq_n_f32(0), s1 = s0, v[4];
    int64_t i = 0, n = w->cols;
    for (; i + 32 <= n; i += 32) {
        widen_s8(vld1q_s8(q + i), v);
        s0 = fma16(s0, v, x + i);
        widen_s8(vld1q_s8(q + i + 16), v);
        s1 = fma16(s1, v, x + i + 16);
    }
    for (; i + 16 <= n; i += 16) {
        widen_s8(vld1q_s8(q + i), v);
        s0 = fma16(s0, v, x + i);
    }
    float s = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++) s += (float)q[i] * x[i];
    return s * q8_row_scale(w, row);
}
static void n_q8_decode(const cmf__qmat *w, int64_t row, float *out)
{
    const int8_t *q = (const int8_t *)(w->data + (uint64_t)row * (uint64_t)w->cols);
    float scale = q8_row_scale(w, row);
    float32x4_t v[4];
    int64_t i = 0, n = w->cols;
    for (; i + 16 <= n; i += 16) {
        widen_s8(vld1q_s8(q + i), v);
        for (int j = 0; j < 4; j++) vst1q_f32(out + i + 4 * j, vmulq_n_f32(v[j], scale));
    }
    for (; i < n; i++) out[i] = (float)q[i] * scale;
}

/* One 32-group of 16 nibble bytes (byte k: element 2k low, 2k+1 high) as
 * two int8x16 of (q - 8) in element order. */
static inline void q4_unpack(const uint8_t *nib, int8x16_t e[2])
{
    uint8x16_t b = vld1q_u8(nib), m = vdupq_n_u8(15);
    uint8x16_t lo = vandq_u8(b, m), hi = vshrq_n_u8(b, 4);
    int8x16_t eight = vdupq_n_s8(8);
    e[0] = vsubq_s8(vreinterpretq_s8_u8(vzip1q_u8(lo, hi)), eight);
    e[1] = vsubq_s8(vreinterpretq_s8_u8(vzip2q_u8(lo, hi)), eight);
}
static inline float32x4_t q4_group_fma(const uint8_t *nib, float scale, const float *x, float32x4_t acc)
{
    int8x16_t e[2];
    float32x4_t v[4], g = vdupq_n_f32(0);
    q4_unpack(nib, e);
    widen_s8(e[0], v);
    g = fma16(g, v, x);
    widen_s8(e[1], v);
    g = fma16(g, v, x + 16);
    return vfmaq_n_f32(acc, g, scale);
}
static inline void q4_group_store(const uint8_t *nib, float scale, float *out)
{
    int8x16_t e[2];
    float32x4_t v[4];
    q4_unpack(nib, e);
    for (int h = 0; h < 2; h++) {
        widen_s8(e[h], v);
        for (int j = 0; j < 4; j++) vst1q_f32(out + 16 * h + 4 * j, vmulq_n_f32(v[j], scale));
    }
}

/* q4_block and q4_tiled rows (cmf__kern_q4_row walks either) */
static float n_q4_dot(const cmf__qmat *w, int64_t row, const float *x)
{
    if (!cmf__kern_q4_fast_ok(w)) return cmf__qmat_dot_row(w, row, x);
    const cmf__kq4_row r = cmf__kern_q4_row(w, row);
    float32x4_t acc = vdupq_n_f32(0);
    for (uint64_t g = 0; g < r.groups; g++) acc = q4_group_fma(cmf__kq4_nib(&r, g), cmf__kq4_scale(&r, g), x + 32 * g, acc);
    return vaddvq_f32(acc);
}
static void n_q4_decode(const cmf__qmat *w, int64_t row, float *out)
{
    if (!cmf__kern_q4_fast_ok(w)) {
        cmf__qmat_decode_row(w, row, out);
        return;
    }
    const cmf__kq4_row r = cmf__kern_q4_row(w, row);
    for (uint64_t g = 0; g < r.groups; g++) q4_group_store(cmf__kq4_nib(&r, g), cmf__kq4_scale(&r, g), out + 32 * g);
}

/* ---- f16 KV rows -------------------------------------------------------- */
static float n_dot_f16(const float *a, const uint16_t *x, int64_t n)
{
    float32x4_t s0 = vdupq_n_f32(0), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), ld_f16(x + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), ld_f16(x + i + 4));
    }
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + i), ld_f16(x + i));
    float s = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++) s += a[i] * cmf__f16_to_f32(x[i]);
    return s;
}
static void n_axpy_f16(float *y, float a, const uint16_t *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), ld_f16(x + i), a));
    for (; i < n; i++) y[i] += a * cmf__f16_to_f32(x[i]);
}
/* FCVTN rounds by FPCR (nearest even, no flush to zero under Linux), as
 * cmf__f32_to_f16 does, subnormals included */
static void n_store_f16(uint16_t *y, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) y[i] = cmf__f32_to_f16(x[i]);
}

/* ---- f16, bf16 packed: f32 activations, 4-lane FMAs --------------------------------
 * On kern_pack.c's half layout: a group's column is 16 rows, four 4-row
 * quarters of 8 bytes. A tile is RG groups (<= 2) x T tokens (<= 3): 4·RG·T
 * accumulators (24 of the 32 registers), T broadcast activations and one
 * weight vector. Each (row, token) lane sums the columns in order, f32, the
 * weights exact: the same bits whatever the tile. */
#define PR CMF__KPACK_ROWS
static inline __attribute__((always_inline)) void hf_tile(const cmf__qmat *w, const uint8_t *pk, bool bf, int64_t g,
                                                          const float *x, size_t xs, float *y, int64_t ys, int RG,
                                                          int T)
{
    const size_t gb = cmf__kpack_half_group_bytes(w->cols);
    float32x4_t acc[2][3][4];
#pragma GCC unroll 2
    for (int i = 0; i < RG; i++)
#pragma GCC unroll 3
        for (int t = 0; t < T; t++)
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) acc[i][t][q] = vdupq_n_f32(0);
    for (int64_t c = 0; c < w->cols; c++) {
        float32x4_t xv[3];
#pragma GCC unroll 3
        for (int t = 0; t < T; t++) xv[t] = vld1q_dup_f32(x + (size_t)t * xs + c);
#pragma GCC unroll 2
        for (int i = 0; i < RG; i++)
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                float32x4_t wv = ld_half(pk + (size_t)(g + i) * gb + (size_t)c * CMF__KPACK_HALF_COL + 8 * q, bf);
#pragma GCC unroll 3
                for (int t = 0; t < T; t++) acc[i][t][q] = vfmaq_f32(acc[i][t][q], wv, xv[t]);
            }
    }
#pragma GCC unroll 2
    for (int i = 0; i < RG; i++)
#pragma GCC unroll 3
        for (int t = 0; t < T; t++)
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                const int64_t r0 = (g + i) * PR + 4 * q;
                float o[4];
                vst1q_f32(o, acc[i][t][q]);
                for (int r = 0; r < 4 && r0 + r < w->rows; r++) y[t * ys + r0 + r] = o[r];
            }
}
CMF__KPACK_HALF_PMM(hf_pmm, hf_tile)

static cmf__cpu_kernels g_neon;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_neon(void)
{
    cmf__cpu_kernels_fill_generic(&g_neon);
    g_neon.isa = "neon";
    g_neon.dot[CMF_DTYPE_F32] = n_f32_dot;
    g_neon.decode[CMF_DTYPE_F32] = n_f32_decode;
    g_neon.dot[CMF_DTYPE_F16] = n_f16_dot;
    g_neon.decode[CMF_DTYPE_F16] = n_f16_decode;
    g_neon.dot[CMF_DTYPE_BF16] = n_bf16_dot;
    g_neon.decode[CMF_DTYPE_BF16] = n_bf16_decode;
    g_neon.dot[CMF_DTYPE_Q8_ROW] = n_q8_dot;
    g_neon.decode[CMF_DTYPE_Q8_ROW] = n_q8_decode;
    g_neon.dot[CMF_DTYPE_Q4_BLOCK] = n_q4_dot;
    g_neon.decode[CMF_DTYPE_Q4_BLOCK] = n_q4_decode;
    g_neon.dot[CMF_DTYPE_Q4_TILED] = n_q4_dot;
    g_neon.decode[CMF_DTYPE_Q4_TILED] = n_q4_decode;
    g_neon.dot_f32 = n_dot_f32;
    g_neon.dot_f32_x4 = n_dot_f32_x4;
    g_neon.dot_f32_2x4 = n_dot_f32_2x4;
    g_neon.axpy = n_axpy;
    g_neon.dot_f16 = n_dot_f16;
    g_neon.axpy_f16 = n_axpy_f16;
    g_neon.store_f16 = n_store_f16;
    for (int d = CMF_DTYPE_F16; d <= CMF_DTYPE_BF16; d++) /* packed f16 / bf16 (an unpacked one keeps the rows) */
        g_neon.mmq[d] = (cmf__kmmq){.xbytes = cmf__kpack_xf_bytes, .quant = cmf__kpack_xf_quant, .xblock = 0,
                                    .pack_bytes = cmf__kpack_half_bytes, .pack = cmf__kpack_half, .pmm = hf_pmm};
    if (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) { /* Armv8.2 SDOT: the packed integer matmuls */
        cmf__kern_neon_fill_dotprod(&g_neon);
        g_neon.isa = "neon, dotprod";
    }
}

const cmf__cpu_kernels *cmf__cpu_kernels_neon(void)
{
    pthread_once(&g_once, init_neon);
    return &g_neon;
}
