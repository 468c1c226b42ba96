/* kern_avx512.c — AVX-512 (F/BW/VL/DQ + VNNI) kernels, built with those
 * flags by file name and offered only when cpuid reports every feature:
 * the integer matmul for q8_row (activation blocks of 256), q4_block,
 * q4_tiled and q4tp (blocks of 32) on vpdpbusd, tiles of up to 4 weight rows x 4
 * tokens, every (row, token) pair summed in the same order whatever the
 * tile, so a token gets the same bits alone or in a batch; and 16-lane
 * f32 / f16 / bf16 dot and decode. The rest of the table is avx2's. */
#include "compute/cpu/kernels.h"
#include "util/arith.h"
#include "util/half.h"

#include <immintrin.h>
#include <pthread.h>
#include <string.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* One 32-block of activations: the shared rule of kernels.h (amax / 127,
 * nearest-even of x * 127 / amax). n <= 32 values, the rest are zero. */
static ALWAYS_INLINE void quant_block(const float *x, int n, __m512i *q0, __m512i *q1, float *d, int *sum)
{
    __mmask16 m0 = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
    __mmask16 m1 = (__mmask16)(n >= 32 ? 0xffff : n <= 16 ? 0 : (1u << (n - 16)) - 1);
    __m512 a = _mm512_maskz_loadu_ps(m0, x), b = _mm512_maskz_loadu_ps(m1, x + 16);
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    *d = amax / 127.0f;
    __m512 vid = _mm512_set1_ps(id);
    *q0 = _mm512_cvtps_epi32(_mm512_mul_ps(a, vid));
    *q1 = _mm512_cvtps_epi32(_mm512_mul_ps(b, vid));
    *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(*q0, *q1));
}

/* ---- q8_row: blocks of 256 (the weight has one scale a row, so the
 * integer sums run a whole block before one float step):
 * [4 x 64: q + 128 as u8][d, padded to 64 bytes] */
#define X8_BLOCK 256
static int64_t x8_blocks(int64_t cols) { return (cols + X8_BLOCK - 1) / X8_BLOCK; }
static size_t x8_bytes(int64_t cols) { return (size_t)x8_blocks(cols) * (X8_BLOCK + 64); }

static void x8_quant(const float *x, int64_t cols, void *xq)
{
    uint8_t *p = xq;
    const __m128i bias = _mm_set1_epi8((char)0x80);
    for (int64_t b = 0; b < x8_blocks(cols); b++, p += X8_BLOCK + 64) {
        const float *xb = x + b * X8_BLOCK;
        int64_t n = cols - b * X8_BLOCK < X8_BLOCK ? cols - b * X8_BLOCK : X8_BLOCK;
        __m512 mx = _mm512_setzero_ps();
        for (int64_t i = 0; i < n; i += 16) {
            __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
            mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_maskz_loadu_ps(m, xb + i)));
        }
        float amax = _mm512_reduce_max_ps(mx), id = amax > 0 ? 127.0f / amax : 0.0f;
        __m512 vid = _mm512_set1_ps(id);
        for (int64_t i = 0; i < X8_BLOCK; i += 16) {
            __mmask16 m = n - i >= 16 ? 0xffff : n <= i ? 0 : (__mmask16)((1u << (n - i)) - 1);
            __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, xb + i), vid));
            _mm_storeu_si128((__m128i *)(void *)(p + i), _mm_xor_si128(_mm512_cvtepi32_epi8(q), bias));
        }
        float d[16] = {amax / 127.0f};
        memcpy(p + X8_BLOCK, d, sizeof d);
    }
}

/* 64 bytes, or the `left` < 64 that remain (zeros after). Masked loads
 * only for a tail: some cores run them far slower than plain loads. */
static ALWAYS_INLINE __m512i load_bytes(const void *p, int64_t left)
{
    if (__builtin_expect(left >= 64, 1)) return _mm512_loadu_si512(p);
    return _mm512_maskz_loadu_epi8(left > 0 ? ((__mmask64)1 << left) - 1 : 0, p);
}

/* One 256-block of R rows x T tokens: (q + 128) · w summed in int32, less
 * 128 Σw, times d into acc. `full`: all four chunks lie inside the row. */
static ALWAYS_INLINE void q8_block(const int8_t *wr, int64_t cols, const uint8_t *x, size_t xstride, int64_t b, int R,
                                   int T, bool full, __m512 acc[4][2])
{
    const __m512i u128 = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
    const int64_t c0 = b * X8_BLOCK;
    const int nch = full ? 4 : (int)((cols - c0 + 63) / 64);
    __m512i ia[4][2], wsum[4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        wsum[i] = zero;
#pragma GCC unroll 2
        for (int j = 0; j < T; j++) ia[i][j] = zero;
    }
#pragma GCC unroll 4
    for (int c = 0; c < nch; c++) {
        __m512i w[4];
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const int8_t *p = wr + (size_t)i * (size_t)cols + c0 + 64 * c;
            w[i] = full ? _mm512_loadu_si512(p) : load_bytes(p, cols - c0 - 64 * c);
            wsum[i] = _mm512_dpbusd_epi32(wsum[i], u128, w[i]);
        }
#pragma GCC unroll 2
        for (int j = 0; j < T; j++) {
            __m512i xu = _mm512_loadu_si512(x + (size_t)j * xstride + (size_t)b * (X8_BLOCK + 64) + 64 * c);
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) ia[i][j] = _mm512_dpbusd_epi32(ia[i][j], xu, w[i]);
        }
    }
#pragma GCC unroll 2
    for (int j = 0; j < T; j++) {
        float dj;
        memcpy(&dj, x + (size_t)j * xstride + (size_t)b * (X8_BLOCK + 64) + X8_BLOCK, sizeof dj);
        __m512 d = _mm512_set1_ps(dj);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++)
            acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(ia[i][j], wsum[i])), d, acc[i][j]);
    }
}

/* R rows x T tokens of q8_row; out[i*4 + j] before the row scale. */
static ALWAYS_INLINE void q8_tile(const int8_t *wr, int64_t cols, const uint8_t *x, size_t xstride, int R, int T,
                                  float out[16])
{
    const int64_t nb = x8_blocks(cols), nfull = cols / X8_BLOCK;
    __m512 acc[4][2];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
#pragma GCC unroll 2
        for (int j = 0; j < 2; j++) acc[i][j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nfull; b++) q8_block(wr, cols, x, xstride, b, R, T, true, acc);
    if (nfull < nb) q8_block(wr, cols, x, xstride, nfull, R, T, false, acc);
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 2
        for (int j = 0; j < T; j++) out[i * 4 + j] = _mm512_reduce_add_ps(acc[i][j]);
}

static void q8_mm(const cmf__qmat *w, int64_t r0, int64_t r1, const void *xq, int64_t n, float *y, int64_t ys)
{
    const int64_t cols = w->cols;
    const size_t xs = x8_bytes(cols);
    const uint8_t *scales = w->data + (uint64_t)w->rows * (uint64_t)cols;
    for (int64_t r = r0; r < r1; r += 4) {
        int R = r1 - r < 4 ? (int)(r1 - r) : 4;
        const int8_t *wr = (const int8_t *)(w->data + (uint64_t)r * (uint64_t)cols);
        for (int64_t t = 0; t < n; t += 2) {
            int T = n - t < 2 ? (int)(n - t) : 2;
            const uint8_t *x = (const uint8_t *)xq + (size_t)t * xs;
            float o[16];
            switch (R * 8 + T) {
#define Q8_CASE(r_, t_) \
    case r_ * 8 + t_: q8_tile(wr, cols, x, xs, r_, t_, o); break;
                Q8_CASE(1, 1) Q8_CASE(1, 2) Q8_CASE(2, 1) Q8_CASE(2, 2)
                Q8_CASE(3, 1) Q8_CASE(3, 2) Q8_CASE(4, 1) Q8_CASE(4, 2)
#undef Q8_CASE
            default: break;
            }
            for (int i = 0; i < R; i++) {
                float s = cmf__f16_to_f32(cmf__rd16(scales + 2 * (uint64_t)(r + i)));
                for (int j = 0; j < T; j++) y[(t + j) * ys + r + i] = o[i * 4 + j] * s;
            }
        }
    }
}

/* ---- q4 (block, tiled): quads of four blocks, [64: elements 0..15 of each block]
 * [64: elements 16..31][16 x f32: d per lane, 4 lanes a block][16 x f32: 2 d Σq per lane] */
static int64_t x4_quads(int64_t cols) { return (cols + 127) / 128; }
static size_t x4_bytes(int64_t cols) { return (size_t)x4_quads(cols) * 256; }

static void x4_quant(const float *x, int64_t cols, void *xq)
{
    uint8_t *p = xq;
    for (int64_t c = 0; c < x4_quads(cols); c++, p += 256) {
        float d[4] = {0}, m[4] = {0};
        for (int h = 0; h < 4; h++) {
            int64_t i0 = c * 128 + h * 32, left = cols - i0;
            __m512i q0 = _mm512_setzero_si512(), q1 = q0;
            int sum = 0;
            if (left > 0) quant_block(x + i0, left < 32 ? (int)left : 32, &q0, &q1, &d[h], &sum);
            /* the kernel subtracts 8 Σq d (the nibbles' offset) spread over a block's four lanes */
            m[h] = 2.0f * d[h] * (float)sum;
            _mm_storeu_si128((__m128i *)(void *)(p + 16 * h), _mm512_cvtepi32_epi8(q0));
            _mm_storeu_si128((__m128i *)(void *)(p + 64 + 16 * h), _mm512_cvtepi32_epi8(q1));
        }
        const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        _mm512_storeu_ps(p + 128, _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_loadu_ps(d))));
        _mm512_storeu_ps(p + 192, _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_loadu_ps(m))));
    }
}

/* Four groups of nibbles (16 bytes each, `ng` of them present) as element
 * order bytes: lanes of e0 = elements 0..15 of each group, e1 = 16..31. */
static ALWAYS_INLINE void q4_expand(__m512i nib, __m512i *e0, __m512i *e1)
{
    const __m512i low = _mm512_set1_epi8(15);
    __m512i lo = _mm512_and_si512(nib, low), hi = _mm512_and_si512(_mm512_srli_epi16(nib, 4), low);
    *e0 = _mm512_unpacklo_epi8(lo, hi);
    *e1 = _mm512_unpackhi_epi8(lo, hi);
}

enum { Q4_BLOCK, Q4_TILED, Q4_TP }; /* where a 4-bit layout keeps its group scales */

/* Loads groups g .. g+ng-1 (ng <= 4) of one row: nibbles and per-lane
 * scales (q4tp: from the row's scale ladder). */
static ALWAYS_INLINE void q4_load(const cmf__qmat *w, int lay, const float *ladder, int64_t row, int64_t g, int ng,
                                  __m512i *e0, __m512i *e1, __m512 *wd)
{
    const cmf__kq4_row r = cmf__kern_q4_row(w, row);
    __m512i nib;
    __m128i h = _mm_setzero_si128();
    __m128 sc;
    if (lay == Q4_TP) {
        float f[4] = {0, 0, 0, 0};
        for (int k = 0; k < ng; k++) f[k] = ladder[cmf__qmat_tp_code(w, row, g + k)];
        nib = load_bytes(cmf__kq4_nib(&r, (uint64_t)g), 16 * ng);
        sc = _mm_loadu_ps(f);
    } else if (lay == Q4_BLOCK) { /* nibbles and scales each in one run */
        const uint8_t *s = cmf__kq4_scale_bits(&r, (uint64_t)g);
        nib = load_bytes(cmf__kq4_nib(&r, (uint64_t)g), 16 * ng);
        h = ng == 4 ? _mm_loadl_epi64((const __m128i *)(const void *)s)
                    : _mm_maskz_loadu_epi16((__mmask8)((1u << ng) - 1), s);
    } else { /* Q4_TILED: group by group */
        uint16_t s[4] = {0, 0, 0, 0};
        nib = _mm512_setzero_si512();
        for (int k = 0; k < ng; k++) {
            const uint8_t *nk = cmf__kq4_nib(&r, (uint64_t)(g + k));
            nib = _mm512_mask_mov_epi32(nib, (__mmask16)(0xf << (4 * k)),
                                        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)nk)));
            s[k] = cmf__rd16(cmf__kq4_scale_bits(&r, (uint64_t)(g + k)));
        }
        h = _mm_loadl_epi64((const __m128i *)(const void *)s);
    }
    if (lay != Q4_TP) sc = _mm_cvtph_ps(h);
    q4_expand(nib, e0, e1);
    const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    *wd = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(sc));
}

static ALWAYS_INLINE void q4_tile(const cmf__qmat *w, int lay, const float (*ladders)[32], int64_t row,
                                  const uint8_t *x, size_t xstride, int R, int T, float out[16])
{
    const int64_t gpr = w->cols / 32, nq = (gpr + 3) / 4;
    const __m512i zero = _mm512_setzero_si512();
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_ps();
    for (int64_t c = 0; c < nq; c++) {
        int ng = gpr - 4 * c < 4 ? (int)(gpr - 4 * c) : 4;
        __m512i e0[4], e1[4];
        __m512 wd[4];
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) q4_load(w, lay, ladders[i], row + i, 4 * c, ng, &e0[i], &e1[i], &wd[i]);
#pragma GCC unroll 4
        for (int j = 0; j < T; j++) {
            const uint8_t *xc = x + (size_t)j * xstride + (size_t)c * 256;
            __m512i a = _mm512_loadu_si512(xc), b = _mm512_loadu_si512(xc + 64);
            __m512 xd = _mm512_loadu_ps(xc + 128), xm = _mm512_loadu_ps(xc + 192);
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) {
                __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, e0[i], a), e1[i], b);
                __m512 v = _mm512_fmsub_ps(_mm512_cvtepi32_ps(s), xd, xm);
                acc[i][j] = _mm512_fmadd_ps(v, wd[i], acc[i][j]);
            }
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int j = 0; j < T; j++) out[i * 4 + j] = _mm512_reduce_add_ps(acc[i][j]);
}

static ALWAYS_INLINE void q4_mm(const cmf__qmat *w, int lay, int64_t r0, int64_t r1, const void *xq, int64_t n,
                                float *y, int64_t ys)
{
    const size_t xs = x4_bytes(w->cols);
    float ladders[4][32];
    for (int64_t r = r0; r < r1; r += 4) {
        int R = r1 - r < 4 ? (int)(r1 - r) : 4;
        if (lay == Q4_TP)
            for (int i = 0; i < R; i++) cmf__qmat_tp_ladder(w, r + i, ladders[i]);
        for (int64_t t = 0; t < n; t += 4) {
            int T = n - t < 4 ? (int)(n - t) : 4;
            const uint8_t *x = (const uint8_t *)xq + (size_t)t * xs;
            float o[16];
            switch (R * 8 + T) {
#define Q4_CASE(r_, t_) \
    case r_ * 8 + t_: q4_tile(w, lay, (const float(*)[32])ladders, r, x, xs, r_, t_, o); break;
                Q4_CASE(1, 1) Q4_CASE(1, 2) Q4_CASE(1, 3) Q4_CASE(1, 4)
                Q4_CASE(2, 1) Q4_CASE(2, 2) Q4_CASE(2, 3) Q4_CASE(2, 4)
                Q4_CASE(3, 1) Q4_CASE(3, 2) Q4_CASE(3, 3) Q4_CASE(3, 4)
                Q4_CASE(4, 1) Q4_CASE(4, 2) Q4_CASE(4, 3) Q4_CASE(4, 4)
#undef Q4_CASE
            default: break;
            }
            for (int i = 0; i < R; i++)
                for (int j = 0; j < T; j++) y[(t + j) * ys + r + i] = o[i * 4 + j];
        }
    }
}

static void q4b_mm(const cmf__qmat *w, int64_t r0, int64_t r1, const void *xq, int64_t n, float *y, int64_t ys)
{
    q4_mm(w, Q4_BLOCK, r0, r1, xq, n, y, ys);
}
static void q4t_mm(const cmf__qmat *w, int64_t r0, int64_t r1, const void *xq, int64_t n, float *y, int64_t ys)
{
    q4_mm(w, Q4_TILED, r0, r1, xq, n, y, ys);
}
static void q4tp_mm(const cmf__qmat *w, int64_t r0, int64_t r1, const void *xq, int64_t n, float *y, int64_t ys)
{
    q4_mm(w, Q4_TP, r0, r1, xq, n, y, ys);
}

/* ---- f32 / f16 / bf16: 16 lanes per FMA ------------------------------------------ */
static ALWAYS_INLINE __m512 ld_f16x16(const void *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
static ALWAYS_INLINE __m512 ld_bf16x16(const void *p)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}
/* the last n < 16 values, zeros after */
static ALWAYS_INLINE __mmask16 tail16(int64_t n) { return (__mmask16)((1u << n) - 1); }

static float v_dot_f32(const float *a, const float *b, int64_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    if (i < n) s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail16(n - i), a + i), _mm512_maskz_loadu_ps(tail16(n - i), b + i), s1);
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

/* R weight rows (w, w + n, ...) by four tokens: out[r*4 + j] */
static ALWAYS_INLINE void v_dot_rx4(const float *w, const float *x, int64_t xs, int64_t n, int R, float *out)
{
    __m512 acc[2][4];
#pragma GCC unroll 2
    for (int r = 0; r < 2; r++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) acc[r][j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const bool full = n - i >= 16; /* plain loads but for the tail */
        const __mmask16 m = full ? 0xffff : tail16(n - i);
        __m512 u[2];
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) u[r] = full ? _mm512_loadu_ps(w + r * n + i) : _mm512_maskz_loadu_ps(m, w + r * n + i);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m512 t = full ? _mm512_loadu_ps(x + j * xs + i) : _mm512_maskz_loadu_ps(m, x + j * xs + i);
#pragma GCC unroll 2
            for (int r = 0; r < R; r++) acc[r][j] = _mm512_fmadd_ps(u[r], t, acc[r][j]);
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) out[r * 4 + j] = _mm512_reduce_add_ps(acc[r][j]);
}
static void v_dot_f32_x4(const float *w, const float *x, int64_t xs, int64_t n, float out[4]) { v_dot_rx4(w, x, xs, n, 1, out); }
static void v_dot_f32_2x4(const float *w, const float *x, int64_t xs, int64_t n, float out[8]) { v_dot_rx4(w, x, xs, n, 2, out); }

static float v_f32_dot(const cmf__qmat *w, int64_t row, const float *x)
{
    return v_dot_f32((const float *)(const void *)(w->data + (uint64_t)row * (uint64_t)w->cols * 4), x, w->cols);
}

/* f16 / bf16 rows: widen 16 at a time (F16C / a shift), FMA in f32 */
static ALWAYS_INLINE float v_half_dot(const uint8_t *r, const float *x, int64_t n, bool bf)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(bf ? ld_bf16x16(r + 2 * i) : ld_f16x16(r + 2 * i), _mm512_loadu_ps(x + i), s0);
        s1 = _mm512_fmadd_ps(bf ? ld_bf16x16(r + 2 * i + 32) : ld_f16x16(r + 2 * i + 32), _mm512_loadu_ps(x + i + 16), s1);
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    for (; i < n; i++) s += (bf ? cmf__bf16_to_f32(cmf__rd16(r + 2 * i)) : cmf__f16_to_f32(cmf__rd16(r + 2 * i))) * x[i];
    return s;
}
static ALWAYS_INLINE void v_half_decode(const uint8_t *r, float *out, int64_t n, bool bf)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, bf ? ld_bf16x16(r + 2 * i) : ld_f16x16(r + 2 * i));
    for (; i < n; i++) out[i] = bf ? cmf__bf16_to_f32(cmf__rd16(r + 2 * i)) : cmf__f16_to_f32(cmf__rd16(r + 2 * i));
}
static const uint8_t *half_row(const cmf__qmat *w, int64_t row) { return w->data + (uint64_t)row * (uint64_t)w->cols * 2; }
static float v_f16_dot(const cmf__qmat *w, int64_t row, const float *x) { return v_half_dot(half_row(w, row), x, w->cols, false); }
static float v_bf16_dot(const cmf__qmat *w, int64_t row, const float *x) { return v_half_dot(half_row(w, row), x, w->cols, true); }
static void v_f16_decode(const cmf__qmat *w, int64_t row, float *out) { v_half_decode(half_row(w, row), out, w->cols, false); }
static void v_bf16_decode(const cmf__qmat *w, int64_t row, float *out) { v_half_decode(half_row(w, row), out, w->cols, true); }

/* ---- attention over f16 KV rows: the query / the output row stay in
 * registers (head_dim 64, 128 or 256), else avx2's loops */
static ALWAYS_INLINE void attn_scores(const float *a, const uint16_t *k, size_t stride, int64_t n_rows, int nv,
                                      float *out)
{
    __m512 q[16];
#pragma GCC unroll 16
    for (int v = 0; v < nv; v++) q[v] = _mm512_loadu_ps(a + 16 * v);
    for (int64_t r = 0; r < n_rows; r++) {
        const uint16_t *row = k + (size_t)r * stride;
        __m512 s = _mm512_mul_ps(q[0], ld_f16x16(row));
#pragma GCC unroll 16
        for (int v = 1; v < nv; v++) s = _mm512_fmadd_ps(q[v], ld_f16x16(row + 16 * v), s);
        out[r] = _mm512_reduce_add_ps(s);
    }
}
static ALWAYS_INLINE void attn_values(float *y, const float *p, const uint16_t *v, size_t stride, int64_t n_rows, int nv)
{
    __m512 o[16];
#pragma GCC unroll 16
    for (int c = 0; c < nv; c++) o[c] = _mm512_loadu_ps(y + 16 * c);
    for (int64_t r = 0; r < n_rows; r++) {
        const uint16_t *row = v + (size_t)r * stride;
        __m512 pr = _mm512_set1_ps(p[r]);
#pragma GCC unroll 16
        for (int c = 0; c < nv; c++) o[c] = _mm512_fmadd_ps(pr, ld_f16x16(row + 16 * c), o[c]);
    }
#pragma GCC unroll 16
    for (int c = 0; c < nv; c++) _mm512_storeu_ps(y + 16 * c, o[c]);
}

static void v_dot_f16_rows(const float *a, const uint16_t *k, size_t stride, int64_t n_rows, int64_t hd, float *out)
{
    switch (hd) {
    case 64: attn_scores(a, k, stride, n_rows, 4, out); return;
    case 128: attn_scores(a, k, stride, n_rows, 8, out); return;
    case 256: attn_scores(a, k, stride, n_rows, 16, out); return;
    default: cmf__cpu_kernels_avx2()->dot_f16_rows(a, k, stride, n_rows, hd, out);
    }
}
static void v_axpy_f16_rows(float *y, const float *p, const uint16_t *v, size_t stride, int64_t n_rows, int64_t hd)
{
    switch (hd) {
    case 64: attn_values(y, p, v, stride, n_rows, 4); return;
    case 128: attn_values(y, p, v, stride, n_rows, 8); return;
    case 256: attn_values(y, p, v, stride, n_rows, 16); return;
    default: cmf__cpu_kernels_avx2()->axpy_f16_rows(y, p, v, stride, n_rows, hd);
    }
}

/* ---- prefill attention: a block of queries against runs of f16 KV rows ---------- */
/* r[c] = column c of the 16 x 16 block whose row i is r[i] (in place) */
static ALWAYS_INLINE void transpose16(__m512 r[16])
{
    __m512 a[16], b[16];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) { /* 32-bit pairs of rows 2k, 2k+1 */
        a[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        a[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) { /* b[4k+m], 128-bit lane L: column 4L+m of rows 4k..4k+3 */
        __m512d a0 = _mm512_castps_pd(a[4 * k]), a1 = _mm512_castps_pd(a[4 * k + 1]);
        __m512d a2 = _mm512_castps_pd(a[4 * k + 2]), a3 = _mm512_castps_pd(a[4 * k + 3]);
        b[4 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
        b[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
        b[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
        b[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
#pragma GCC unroll 4
    for (int m = 0; m < 4; m++) { /* column 4L+m gathers lane L of b[m], b[4+m], b[8+m], b[12+m] */
        __m512 u0 = _mm512_shuffle_f32x4(b[m], b[4 + m], 0x44), u1 = _mm512_shuffle_f32x4(b[m], b[4 + m], 0xEE);
        __m512 v0 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0x44), v1 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0xEE);
        r[m] = _mm512_shuffle_f32x4(u0, v0, 0x88);
        r[4 + m] = _mm512_shuffle_f32x4(u0, v0, 0xDD);
        r[8 + m] = _mm512_shuffle_f32x4(u1, v1, 0x88);
        r[12 + m] = _mm512_shuffle_f32x4(u1, v1, 0xDD);
    }
}

/* Keys sixteen at a time: the block is widened and transposed once (kt[d]
 * = dimension d of the 16 keys), then each query takes hd broadcast FMAs
 * for its 16 scores, four queries at once. */
static void v_qk_f16(const float *q, int64_t nq, const uint16_t *k, size_t stride, int64_t nk, int64_t hd, float *s,
                     int64_t ss)
{
    if (hd % 16 || hd > 256) {
        for (int64_t i = 0; i < nq; i++) cmf__cpu_kernels_avx2()->dot_f16_rows(q + i * hd, k, stride, nk, hd, s + i * ss);
        return;
    }
    __m512 kt[256];
    for (int64_t j0 = 0; j0 < nk; j0 += 16) {
        const int nr = nk - j0 < 16 ? (int)(nk - j0) : 16;
        for (int64_t c = 0; c < hd; c += 16) {
            __m512 r[16];
            for (int i = 0; i < 16; i++)
                r[i] = i < nr ? ld_f16x16(k + (size_t)(j0 + i) * stride + c) : _mm512_setzero_ps();
            transpose16(r);
            for (int i = 0; i < 16; i++) kt[c + i] = r[i];
        }
        const __mmask16 m = (__mmask16)(nr == 16 ? 0xffff : (1u << nr) - 1);
        int64_t i = 0;
        for (; i + 4 <= nq; i += 4) {
            const float *q0 = q + i * hd;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int64_t d = 0; d < hd; d++) {
                a0 = _mm512_fmadd_ps(_mm512_set1_ps(q0[d]), kt[d], a0);
                a1 = _mm512_fmadd_ps(_mm512_set1_ps(q0[hd + d]), kt[d], a1);
                a2 = _mm512_fmadd_ps(_mm512_set1_ps(q0[2 * hd + d]), kt[d], a2);
                a3 = _mm512_fmadd_ps(_mm512_set1_ps(q0[3 * hd + d]), kt[d], a3);
            }
            _mm512_mask_storeu_ps(s + i * ss + j0, m, a0);
            _mm512_mask_storeu_ps(s + (i + 1) * ss + j0, m, a1);
            _mm512_mask_storeu_ps(s + (i + 2) * ss + j0, m, a2);
            _mm512_mask_storeu_ps(s + (i + 3) * ss + j0, m, a3);
        }
        for (; i < nq; i++) {
            __m512 a0 = _mm512_setzero_ps();
            for (int64_t d = 0; d < hd; d++) a0 = _mm512_fmadd_ps(_mm512_set1_ps(q[i * hd + d]), kt[d], a0);
            _mm512_mask_storeu_ps(s + i * ss + j0, m, a0);
        }
    }
}

/* Output rows in registers, Q queries at a time (Q * hd / 16 <= 16 accumulators). */
static ALWAYS_INLINE void pv_rows(float *o, const float *p, int64_t ps, int Q, const uint16_t *v, size_t stride,
                                  int64_t nk, int nv)
{
    __m512 acc[16];
#pragma GCC unroll 16
    for (int a = 0; a < Q * nv; a++) acc[a] = _mm512_loadu_ps(o + (a / nv) * nv * 16 + (a % nv) * 16);
    for (int64_t j = 0; j < nk; j++) {
        const uint16_t *row = v + (size_t)j * stride;
#pragma GCC unroll 16
        for (int c = 0; c < nv; c++) {
            __m512 vr = ld_f16x16(row + 16 * c);
#pragma GCC unroll 4
            for (int i = 0; i < Q; i++) acc[i * nv + c] = _mm512_fmadd_ps(_mm512_set1_ps(p[i * ps + j]), vr, acc[i * nv + c]);
        }
    }
#pragma GCC unroll 16
    for (int a = 0; a < Q * nv; a++) _mm512_storeu_ps(o + (a / nv) * nv * 16 + (a % nv) * 16, acc[a]);
}

static void v_pv_f16(float *o, const float *p, int64_t ps, int64_t nq, const uint16_t *v, size_t stride, int64_t nk,
                     int64_t hd)
{
    int64_t i = 0;
    switch (hd) {
    case 64:
        for (; i + 4 <= nq; i += 4) pv_rows(o + i * hd, p + i * ps, ps, 4, v, stride, nk, 4);
        for (; i < nq; i++) pv_rows(o + i * hd, p + i * ps, ps, 1, v, stride, nk, 4);
        return;
    case 128:
        for (; i + 2 <= nq; i += 2) pv_rows(o + i * hd, p + i * ps, ps, 2, v, stride, nk, 8);
        for (; i < nq; i++) pv_rows(o + i * hd, p + i * ps, ps, 1, v, stride, nk, 8);
        return;
    case 256:
        for (; i < nq; i++) pv_rows(o + i * hd, p + i * ps, ps, 1, v, stride, nk, 16);
        return;
    default:
        for (; i < nq; i++) v_axpy_f16_rows(o + i * hd, p + i * ps, v, stride, nk, hd);
    }
}

/* exp on 16 lanes: n = round(x log2 e), r = x - n ln 2 (two-part ln 2), a
 * degree-6 polynomial for e^r, scaled by 2^n (vscalefps handles
 * underflow and overflow). Inputs are clamped to [-104, 100] so that -inf
 * gives 0 and +inf gives inf; a NaN stays NaN. Within 2 ulp of expf. */
static ALWAYS_INLINE __m512 exp16(__m512 x)
{
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), _mm512_min_ps(_mm512_set1_ps(100.0f), x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

static float v_exp_sum(float *s, int64_t n, float m)
{
    const __m512 vm = _mm512_set1_ps(m);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? 0xffff : tail16(n - i);
        __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + i), vm));
        _mm512_mask_storeu_ps(s + i, k, e);
        sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(k, e));
    }
    return _mm512_reduce_add_ps(sum);
}

static void v_silu_mul(float *y, const float *x, const float *u, int64_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? 0xffff : tail16(n - i);
        __m512 a = _mm512_maskz_loadu_ps(k, x + i), b = _mm512_maskz_loadu_ps(k, u + i);
        __m512 g = _mm512_div_ps(a, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), a))));
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(g, b));
    }
}

/* ---- the table ------------------------------------------------------------------- */
static cmf__cpu_kernels g_avx512;
static const cmf__cpu_kernels *g_avx512_ptr;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_avx512(void)
{
    const cmf__cpu_kernels *base = cmf__cpu_kernels_avx2();
    if (!base) return;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq") ||
        !__builtin_cpu_supports("avx512vnni"))
        return;
    g_avx512 = *base;
    g_avx512.isa = "avx512";
    g_avx512.dot_f32 = v_dot_f32;
    g_avx512.dot_f16_rows = v_dot_f16_rows;
    g_avx512.axpy_f16_rows = v_axpy_f16_rows;
    g_avx512.qk_f16 = v_qk_f16;
    g_avx512.pv_f16 = v_pv_f16;
    g_avx512.exp_sum = v_exp_sum;
    g_avx512.silu_mul = v_silu_mul;
    g_avx512.dot_f32_x4 = v_dot_f32_x4;
    g_avx512.dot_f32_2x4 = v_dot_f32_2x4;
    g_avx512.dot[CMF_DTYPE_F32] = v_f32_dot;
    g_avx512.dot[CMF_DTYPE_F16] = v_f16_dot;
    g_avx512.decode[CMF_DTYPE_F16] = v_f16_decode;
    g_avx512.dot[CMF_DTYPE_BF16] = v_bf16_dot;
    g_avx512.decode[CMF_DTYPE_BF16] = v_bf16_decode;
    g_avx512.mmq[CMF_DTYPE_Q8_ROW] = (cmf__kmmq){.xbytes = x8_bytes, .quant = x8_quant, .mm = q8_mm, .xblock = X8_BLOCK};
    g_avx512.mmq[CMF_DTYPE_Q4_BLOCK] = (cmf__kmmq){.xbytes = x4_bytes, .quant = x4_quant, .mm = q4b_mm, .xblock = 32};
    g_avx512.mmq[CMF_DTYPE_Q4_TILED] = (cmf__kmmq){.xbytes = x4_bytes, .quant = x4_quant, .mm = q4t_mm, .xblock = 32};
    g_avx512.mmq[CMF_DTYPE_Q4TP] = (cmf__kmmq){.xbytes = x4_bytes, .quant = x4_quant, .mm = q4tp_mm, .xblock = 32};
    cmf__kern_avx512_fill_packed(&g_avx512);
    g_avx512_ptr = &g_avx512;
}

const cmf__cpu_kernels *cmf__cpu_kernels_avx512(void)
{
    pthread_once(&g_once, init_avx512);
    return g_avx512_ptr;
}

static cmf__cpu_kernels g_bf16dot;
static const cmf__cpu_kernels *g_bf16dot_ptr;
static pthread_once_t g_once_bf16dot = PTHREAD_ONCE_INIT;

static void init_bf16dot(void)
{
    const cmf__cpu_kernels *base = cmf__cpu_kernels_avx512();
    if (!base || !__builtin_cpu_supports("avx512bf16")) return;
    g_bf16dot = *base;
    g_bf16dot.isa = "avx512, bf16 dot";
    cmf__kern_avx512_fill_bf16dot(&g_bf16dot);
    g_bf16dot_ptr = &g_bf16dot;
}

const cmf__cpu_kernels *cmf__cpu_kernels_avx512_bf16dot(void)
{
    pthread_once(&g_once_bf16dot, init_bf16dot);
    return g_bf16dot_ptr;
}
