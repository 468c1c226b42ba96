/* kern_x86_pack_avx2.c — packed matmuls for the AVX2 table (CPUs without
 * AVX-512), on kern_pack.c's layouts; f16 / bf16 at the end. Integers: a
 * 256-bit half of each 64-byte vector is 8 rows x 4 columns, so a broadcast
 * of four activation bytes feeds 8 rows at once. AVX2 has no vpdpbusd:
 * `vpmaddubsw` (u8 x s8 pairs to s16) then `vpmaddwd` by ones sums four
 * products a lane. For q8
 * the unsigned factor is |w| and the activation takes w's sign (`vpsignb`;
 * activations are never -128), so no pair exceeds 2 * 128 * 127 and nothing
 * saturates; for q4 it is the nibble (<= 15). Activations: the signed
 * layouts of kern_pack.c (cmf__kpack_xq8 / xq4).
 * Same rounding rule as every integer path (max|x| / 127, nearest even).
 * Each (row, token) lane runs the same instructions whatever the tile. */
#include "compute/cpu/kernels.h"
#include "util/arith.h"
#include "util/half.h"

#include <immintrin.h>
#include <string.h>

#define PR CMF__KPACK_ROWS
#define XB 256
#define ALWAYS_INLINE inline __attribute__((always_inline))

static int64_t groups_of(const cmf__qmat *w) { return (w->rows + PR - 1) / PR; }
static float ldf(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}
static ALWAYS_INLINE __m256i bcast4(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* A group's 16 rows of T tokens (times the row scales, if any); the first
 * `left` rows where fewer remain. */
static ALWAYS_INLINE void store_tile(__m256 acc[][2], const float *scales, int64_t left, float *y, int64_t ys, int T)
{
#pragma GCC unroll 3
    for (int t = 0; t < T; t++)
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            float o[8];
            _mm256_storeu_ps(o, scales ? _mm256_mul_ps(acc[t][h], _mm256_loadu_ps(scales + 8 * h)) : acc[t][h]);
            for (int r = 0; r < 8 && 8 * h + r < left; r++) y[t * ys + 8 * h + r] = o[r];
        }
}

/* 8 rows x 4 columns of s8 weights (w_abs = |w| as u8, exact for -128 too)
 * times four activations (s8, broadcast, never -128): acc += the four
 * products per row, summed in int32. A pair is at most 2 * 128 * 127. */
static ALWAYS_INLINE __m256i dot8_q8(__m256i acc, __m256i w_abs, __m256i w, __m256i x)
{
    const __m256i ones = _mm256_set1_epi16(1);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(x, w)), ones));
}

/* ---- q8_row / q8_2f ------------------------------------------------------------ */
/* One group (16 rows: halves of 8) x T tokens (T <= 2). */
static ALWAYS_INLINE void p8_tile(const cmf__qmat *w, const uint8_t *pk, int64_t g, const uint8_t *x, size_t xs,
                                  float *y, int64_t ys, int T)
{
    const int64_t cols = w->cols, nb = (cols + XB - 1) / XB;
    const size_t gb = cmf__kpack_q8_group_bytes(cols);
    const float *scales = (const float *)(const void *)(pk + (size_t)groups_of(w) * gb) + g * PR;
    const uint8_t *wp = pk + (size_t)g * gb;
    __m256 acc[2][2];
    for (int t = 0; t < T; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const int64_t steps = cols - b * XB >= XB ? XB / 4 : (cols - b * XB + 3) / 4;
        wp += 64; /* the -128 Σw vector: not needed with signed activations */
        __m256i s[2][2];
        for (int t = 0; t < T; t++) s[t][0] = s[t][1] = _mm256_setzero_si256();
        const uint8_t *xb = x + (size_t)b * (XB + 64);
        for (int64_t k = 0; k < steps; k++) {
            __m256i w0 = _mm256_loadu_si256((const __m256i *)(const void *)(wp + 64 * k));
            __m256i w1 = _mm256_loadu_si256((const __m256i *)(const void *)(wp + 64 * k + 32));
            __m256i a0 = _mm256_abs_epi8(w0), a1 = _mm256_abs_epi8(w1);
            for (int t = 0; t < T; t++) {
                __m256i xv = bcast4(xb + (size_t)t * xs + 4 * k);
                s[t][0] = dot8_q8(s[t][0], a0, w0, xv);
                s[t][1] = dot8_q8(s[t][1], a1, w1, xv);
            }
        }
        wp += 64 * steps;
        for (int t = 0; t < T; t++) {
            __m256 d = _mm256_set1_ps(ldf(xb + (size_t)t * xs + XB));
            for (int h = 0; h < 2; h++) acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t][h]), d, acc[t][h]);
        }
    }
    store_tile(acc, scales, w->rows - g * PR, y + g * PR, ys, T);
}

CMF__KPACK_INT_PMM(p8_mm, p8_tile, cmf__kpack_xq8_bytes)

/* ---- q4_block, q4_tiled, q4tp ------------------------------------------------------ */
static ALWAYS_INLINE void p4_tile(const cmf__qmat *w, const uint8_t *pk, int lay, int64_t g, const uint8_t *x,
                                  size_t xs, float *y, int64_t ys, int T)
{
    const int64_t gpr = w->cols / 32;
    const size_t bb = cmf__kpack_q4_block_bytes(lay), gb = cmf__kpack_q4_group_bytes(w);
    const __m256i low = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    __m256 acc[2][2];
    for (int t = 0; t < T; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < gpr; k++) {
        const uint8_t *blk = pk + (size_t)g * gb + (size_t)k * bb;
        const uint8_t *xk = x + (size_t)(k / 4) * 256 + 16 * (size_t)(k % 4);
        __m256i s[2][2];
        for (int t = 0; t < T; t++) s[t][0] = s[t][1] = _mm256_setzero_si256();
        for (int v = 0; v < 4; v++)
            for (int h = 0; h < 2; h++) {
                __m256i nb = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 64 * v + 32 * h));
                __m256i lo = _mm256_and_si256(nb, low), hi = _mm256_and_si256(_mm256_srli_epi16(nb, 4), low);
                for (int t = 0; t < T; t++) {
                    const uint8_t *xt = xk + (size_t)t * xs;
                    /* nibble x activation pairs: at most 2 * 15 * 127 each, two summed: no saturation */
                    __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(xt + 4 * v)),
                                                 _mm256_maddubs_epi16(hi, bcast4(xt + 64 + 4 * v)));
                    s[t][h] = _mm256_add_epi32(s[t][h], _mm256_madd_epi16(p, ones));
                }
            }
        __m256 wd[2];
        for (int h = 0; h < 2; h++)
            wd[h] = lay == CMF__KPACK_Q4TP
                        ? _mm256_loadu_ps((const float *)(const void *)(blk + 256) + 8 * h)
                        : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(blk + 256 + 16 * h)));
        for (int t = 0; t < T; t++) {
            /* Σ (n - 8) q d = d Σ n q - 8 d Σq; the activations store 2 d Σq */
            const uint8_t *xt = xk + (size_t)t * xs;
            __m256 xd = _mm256_set1_ps(ldf(xt + 128)), xm = _mm256_set1_ps(4.0f * ldf(xt + 192));
            for (int h = 0; h < 2; h++)
                acc[t][h] = _mm256_fmadd_ps(_mm256_fmsub_ps(_mm256_cvtepi32_ps(s[t][h]), xd, xm), wd[h], acc[t][h]);
        }
    }
    store_tile(acc, NULL, w->rows - g * PR, y + g * PR, ys, T);
}

/* q4_block and q4_tiled pack alike; q4tp its own way: a driver for each layout */
static ALWAYS_INLINE void p4_tile_block(const cmf__qmat *w, const uint8_t *pk, int64_t g, const uint8_t *x, size_t xs,
                                        float *y, int64_t ys, int T)
{
    p4_tile(w, pk, CMF__KPACK_Q4_BLOCK, g, x, xs, y, ys, T);
}
static ALWAYS_INLINE void p4_tile_tp(const cmf__qmat *w, const uint8_t *pk, int64_t g, const uint8_t *x, size_t xs,
                                     float *y, int64_t ys, int T)
{
    p4_tile(w, pk, CMF__KPACK_Q4TP, g, x, xs, y, ys, T);
}
CMF__KPACK_INT_PMM(p4_mm_block, p4_tile_block, cmf__kpack_xq4_bytes)
CMF__KPACK_INT_PMM(p4_mm_tp, p4_tile_tp, cmf__kpack_xq4_bytes)
static void p4_mm(const cmf__qmat *w, const uint8_t *pk, int64_t r0, int64_t r1, const void *xq, int64_t n, float *y,
                  int64_t ys)
{
    if (cmf__kpack_q4_layout(w) == CMF__KPACK_Q4TP) p4_mm_tp(w, pk, r0, r1, xq, n, y, ys);
    else p4_mm_block(w, pk, r0, r1, xq, n, y, ys);
}

/* ---- f16, bf16: f32 activations, 8-lane FMAs -------------------------------------
 * On kern_pack.c's half layout: a group's column is two 8-row halves of 16
 * bytes. A tile is RG groups (<= 2) x T tokens (<= 3): 2·RG·T accumulators,
 * T broadcasts and one weight vector fill the 16 registers. Each (row,
 * token) lane sums the columns in order, f32, the weights exact: the same
 * bits whatever the tile. */
static ALWAYS_INLINE __m256 ld_half8(const uint8_t *p, bool bf)
{
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    return bf ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h);
}
static ALWAYS_INLINE void hf_tile(const cmf__qmat *w, const uint8_t *pk, bool bf, int64_t g, const float *x,
                                  size_t xs, float *y, int64_t ys, int RG, int T)
{
    const int64_t cols = w->cols;
    const size_t gb = cmf__kpack_half_group_bytes(cols);
    __m256 acc[2][3][2];
#pragma GCC unroll 2
    for (int i = 0; i < RG; i++)
#pragma GCC unroll 3
        for (int t = 0; t < T; t++) acc[i][t][0] = acc[i][t][1] = _mm256_setzero_ps();
    for (int64_t c = 0; c < cols; c++) {
        __m256 xv[3];
#pragma GCC unroll 3
        for (int t = 0; t < T; t++) xv[t] = _mm256_broadcast_ss(x + (size_t)t * xs + c);
#pragma GCC unroll 2
        for (int i = 0; i < RG; i++)
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m256 wv = ld_half8(pk + (size_t)(g + i) * gb + (size_t)c * CMF__KPACK_HALF_COL + 16 * h, bf);
#pragma GCC unroll 3
                for (int t = 0; t < T; t++) acc[i][t][h] = _mm256_fmadd_ps(wv, xv[t], acc[i][t][h]);
            }
    }
#pragma GCC unroll 2
    for (int i = 0; i < RG; i++) store_tile(acc[i], NULL, w->rows - (g + i) * PR, y + (g + i) * PR, ys, T);
}
CMF__KPACK_HALF_PMM(hf_pmm, hf_tile)

void cmf__kern_avx2_fill_packed(cmf__cpu_kernels *k)
{
    /* packed only: an unpacked weight keeps the table's f32 kernels */
    const int q8[] = {CMF_DTYPE_Q8_ROW, CMF_DTYPE_Q8_2F};
    for (int i = 0; i < 2; i++)
        k->mmq[q8[i]] = (cmf__kmmq){.xbytes = cmf__kpack_xq8_bytes, .quant = cmf__kpack_xq8_quant, .xblock = XB,
                                    .col_scaled = q8[i] == CMF_DTYPE_Q8_2F, .pack_bytes = cmf__kpack_q8_bytes,
                                    .pack = cmf__kpack_q8, .pmm = p8_mm};
    const int q4[] = {CMF_DTYPE_Q4_BLOCK, CMF_DTYPE_Q4_TILED, CMF_DTYPE_Q4TP};
    for (int i = 0; i < 3; i++)
        k->mmq[q4[i]] = (cmf__kmmq){.xbytes = cmf__kpack_xq4_bytes, .quant = cmf__kpack_xq4_quant, .xblock = 32,
                                    .pack_bytes = cmf__kpack_q4_bytes, .pack = cmf__kpack_q4, .pmm = p4_mm};
    for (int d = CMF_DTYPE_F16; d <= CMF_DTYPE_BF16; d++)
        k->mmq[d] = (cmf__kmmq){.xbytes = cmf__kpack_xf_bytes, .quant = cmf__kpack_xf_quant, .xblock = 0,
                                .pack_bytes = cmf__kpack_half_bytes, .pack = cmf__kpack_half, .pmm = hf_pmm};
}
