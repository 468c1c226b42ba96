/* kern_x86_pack_avx512.c — the packed integer matmuls of the AVX-512 table
 * (weights re-laid once at prepare). In a packed matrix 16 rows lie side by
 * side: each 64-byte vector holds four consecutive columns of 16 rows, so
 * one vpdpbusd lane is one row and a broadcast of four activation bytes
 * feeds all sixteen. The sums come out as a vector of rows: no horizontal
 * reductions, and the per-block float step is one multiply-add per 16 rows
 * per token, where the unpacked tiles pay one per row. The activations
 * are those of kern_avx512.c (same quant functions, same layouts):
 *   q8_row: blocks of 256, [256: q + 128 as u8][d: f32, padded to 64 bytes]
 *   q4:     quads of four 32-blocks, [64: elements 0..15 of each block]
 *           [64: elements 16..31][16 x f32: d per lane, 4 lanes a block]
 *           [16 x f32: 2 d Σq per lane]
 * The q8 and q4 packed layouts are kern_pack.c's (shared with the NEON
 * SDOT kernels); f16 / bf16 pack here (one column of 16 rows a vector, or
 * a column pair for the opt-in bf16 dot products).
 * Every (row, token) lane runs the same instruction sequence whatever the
 * tile shape, so a token gets the same bits alone as in a batch. */
#include "compute/cpu/kernels.h"
#include "util/arith.h"
#include "util/half.h"

#include <immintrin.h>
#include <string.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))
#define PR 16 /* rows a group */

static int64_t groups_of(const cmf__qmat *w) { return (w->rows + PR - 1) / PR; }
static ALWAYS_INLINE __m512i bcast4(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}
static ALWAYS_INLINE float ldf(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}
/* stores 16 rows' values, the first `left` of them when fewer remain */
static ALWAYS_INLINE void store_rows(float *y, __m512 v, int64_t left)
{
    if (left >= PR) _mm512_storeu_ps(y, v);
    else _mm512_mask_storeu_ps(y, (__mmask16)((1u << left) - 1), v);
}

/* A tile's float accumulators: zeroed, and stored as rows g*16 .. of T tokens. */
static ALWAYS_INLINE void tile_zero(__m512 acc[4][8], int RG, int T)
{
#pragma GCC unroll 8
    for (int i = 0; i < RG; i++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[i][t] = _mm512_setzero_ps();
}
static ALWAYS_INLINE void tile_store(__m512 acc[4][8], int64_t rows, int64_t g, float *y, int64_t ys, int RG, int T)
{
#pragma GCC unroll 8
    for (int i = 0; i < RG; i++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) store_rows(y + t * ys + (g + i) * PR, acc[i][t], rows - (g + i) * PR);
}

/* ---- q8_row -------------------------------------------------------------------- */
#define XB 256                       /* activation block */
#define XBYTES (XB + 64)             /* bytes of one activation block */
static int64_t p8_blocks(int64_t cols) { return (cols + XB - 1) / XB; }

/* RG groups (16 RG rows from group g) x T tokens. */
static ALWAYS_INLINE void p8_tile(const cmf__qmat *w, const uint8_t *pk, int64_t g, const uint8_t *x, size_t xs,
                                  float *y, int64_t ys, int RG, int T)
{
    const int64_t cols = w->cols, nb = p8_blocks(cols);
    const size_t gb = cmf__kpack_q8_group_bytes(cols);
    const float *scales = (const float *)(const void *)(pk + (size_t)groups_of(w) * gb);
    __m512 acc[4][8];
    tile_zero(acc, RG, T);
    const uint8_t *wp[4];
#pragma GCC unroll 8
    for (int i = 0; i < RG; i++) wp[i] = pk + (size_t)(g + i) * gb;
    for (int64_t b = 0; b < nb; b++) {
        const int64_t steps = cols - b * XB >= XB ? XB / 4 : (cols - b * XB + 3) / 4;
        __m512i s[4][8];
#pragma GCC unroll 8
        for (int i = 0; i < RG; i++) {
            __m512i c = _mm512_loadu_si512(wp[i]);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) s[i][t] = c;
            wp[i] += 64;
        }
        const uint8_t *xb = x + (size_t)b * XBYTES;
        for (int64_t k = 0; k < steps; k++) {
#pragma GCC unroll 8
            for (int i = 0; i < RG; i++) {
                __m512i wv = _mm512_loadu_si512(wp[i] + 64 * k);
#pragma GCC unroll 8
                for (int t = 0; t < T; t++) s[i][t] = _mm512_dpbusd_epi32(s[i][t], bcast4(xb + (size_t)t * xs + 4 * k), wv);
            }
        }
#pragma GCC unroll 8
        for (int i = 0; i < RG; i++) wp[i] += 64 * steps;
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            __m512 d = _mm512_set1_ps(ldf(xb + (size_t)t * xs + XB));
#pragma GCC unroll 8
            for (int i = 0; i < RG; i++) acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i][t]), d, acc[i][t]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < RG; i++) {
        __m512 sc = _mm512_loadu_ps(scales + (g + i) * PR);
        int64_t left = w->rows - (g + i) * PR;
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) store_rows(y + t * ys + (g + i) * PR, _mm512_mul_ps(acc[i][t], sc), left);
    }
}

/* Tiles over groups [g0, g1) and n tokens: for a batch P_RG groups x P_T
 * tokens (each weight vector feeds P_T tokens; 24 accumulators), for one
 * token four groups (four independent chains). 4 x 3 measured best among
 * 2x4, 3x3, 3x4, 4x2, 4x4, 2x8 and 1x8 on a 4864 x 896 matrix, 512 tokens
 * (AVX-512 VNNI, one core): q8_row 328, q4 331 GMAC/s, against 222 and
 * 315 for 2 x 4. */
#define P_RG 4
#define P_T 3
#define TILE_RG(TILE, RGN, TN, ...)                                                                               \
    switch (RGN) {                                                                                                \
    case 4: TILE(__VA_ARGS__, 4, TN); break;                                                                      \
    case 3: TILE(__VA_ARGS__, 3, TN); break;                                                                      \
    case 2: TILE(__VA_ARGS__, 2, TN); break;                                                                      \
    default: TILE(__VA_ARGS__, 1, TN); break;                                                                     \
    }
#define TILE_LOOP(TILE, ...) TILE_LOOP_AT(P_RG, P_T, TILE, __VA_ARGS__)
#define TILE_LOOP_AT(P_RG, P_T, TILE, ...)                                                                        \
    do {                                                                                                          \
        int64_t g = g0;                                                                                           \
        if (n == 1) {                                                                                             \
            for (; g + 4 <= g1; g += 4) TILE(__VA_ARGS__, g, xq, xs, y, ys, 4, 1);                                \
            for (; g < g1; g++) TILE(__VA_ARGS__, g, xq, xs, y, ys, 1, 1);                                        \
            break;                                                                                                \
        }                                                                                                         \
        for (; g < g1; g += P_RG) {                                                                               \
            const int RG = g1 - g >= P_RG ? P_RG : (int)(g1 - g);                                                 \
            int64_t t = 0;                                                                                        \
            for (; t + P_T <= n; t += P_T) {                                                                      \
                const uint8_t *xt = (const uint8_t *)xq + (size_t)t * xs;                                         \
                TILE_RG(TILE, RG, P_T, __VA_ARGS__, g, xt, xs, y + t * ys, ys)                                    \
            }                                                                                                     \
            for (; t < n; t++) {                                                                                  \
                const uint8_t *xt = (const uint8_t *)xq + (size_t)t * xs;                                         \
                TILE_RG(TILE, RG, 1, __VA_ARGS__, g, xt, xs, y + t * ys, ys)                                      \
            }                                                                                                     \
        }                                                                                                         \
    } while (0)

static void p8_mm(const cmf__qmat *w, const uint8_t *pk, int64_t r0, int64_t r1, const void *xq, int64_t n, float *y,
                  int64_t ys)
{
    const size_t xs = (size_t)p8_blocks(w->cols) * XBYTES;
    const int64_t g0 = r0 / PR, g1 = (r1 + PR - 1) / PR;
    TILE_LOOP(p8_tile, w, pk);
}

/* ---- q4_block, q4_tiled, q4tp ------------------------------------------------------ */
enum { L_BLOCK = CMF__KPACK_Q4_BLOCK, L_TILED = CMF__KPACK_Q4_TILED, L_TP = CMF__KPACK_Q4TP };
static int layout_of(const cmf__qmat *w) { return cmf__kpack_q4_layout(w); }
static size_t p4_block_bytes(int lay) { return cmf__kpack_q4_block_bytes(lay); }
static size_t p4_group_bytes(const cmf__qmat *w) { return cmf__kpack_q4_group_bytes(w); }

static ALWAYS_INLINE void p4_tile(const cmf__qmat *w, const uint8_t *pk, int lay, int64_t g, const uint8_t *x,
                                  size_t xs, float *y, int64_t ys, int RG, int T)
{
    const int64_t gpr = w->cols / 32;
    const size_t bb = p4_block_bytes(lay), gb = p4_group_bytes(w);
    const __m512i low = _mm512_set1_epi8(15);
    __m512 acc[4][8];
    tile_zero(acc, RG, T);
    for (int64_t k = 0; k < gpr; k++) {
        const uint8_t *xk = x + (size_t)(k / 4) * 256 + 16 * (size_t)(k % 4);
        __m512i s[4][8];
#pragma GCC unroll 8
        for (int i = 0; i < RG; i++)
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) s[i][t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int v = 0; v < 4; v++) {
#pragma GCC unroll 8
            for (int i = 0; i < RG; i++) {
                __m512i nb = _mm512_loadu_si512(pk + (size_t)(g + i) * gb + (size_t)k * bb + 64 * v);
                __m512i lo = _mm512_and_si512(nb, low), hi = _mm512_and_si512(_mm512_srli_epi16(nb, 4), low);
#pragma GCC unroll 8
                for (int t = 0; t < T; t++) {
                    s[i][t] = _mm512_dpbusd_epi32(s[i][t], lo, bcast4(xk + (size_t)t * xs + 4 * v));
                    s[i][t] = _mm512_dpbusd_epi32(s[i][t], hi, bcast4(xk + (size_t)t * xs + 64 + 4 * v));
                }
            }
        }
        __m512 wd[4];
#pragma GCC unroll 8
        for (int i = 0; i < RG; i++) {
            const uint8_t *sp = pk + (size_t)(g + i) * gb + (size_t)k * bb + 256;
            wd[i] = lay == L_TP ? _mm512_loadu_ps(sp) : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)sp));
        }
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            /* Σ (n - 8) q d = d Σ n q - 8 d Σq; the activations store 2 d Σq */
            const uint8_t *xt = xk + (size_t)t * xs;
            __m512 xd = _mm512_set1_ps(ldf(xt + 128)), xm = _mm512_set1_ps(4.0f * ldf(xt + 192));
#pragma GCC unroll 8
            for (int i = 0; i < RG; i++)
                acc[i][t] = _mm512_fmadd_ps(_mm512_fmsub_ps(_mm512_cvtepi32_ps(s[i][t]), xd, xm), wd[i], acc[i][t]);
        }
    }
    tile_store(acc, w->rows, g, y, ys, RG, T);
}

static ALWAYS_INLINE void p4_mm_lay(const cmf__qmat *w, const uint8_t *pk, int lay, int64_t r0, int64_t r1,
                                    const void *xq, int64_t n, float *y, int64_t ys)
{
    const size_t xs = (size_t)(w->cols + 127) / 128 * 256;
    const int64_t g0 = r0 / PR, g1 = (r1 + PR - 1) / PR;
    TILE_LOOP(p4_tile, w, pk, lay);
}

static void p4_mm(const cmf__qmat *w, const uint8_t *pk, int64_t r0, int64_t r1, const void *xq, int64_t n, float *y,
                  int64_t ys)
{
    if (layout_of(w) == L_TP) p4_mm_lay(w, pk, L_TP, r0, r1, xq, n, y, ys);
    else p4_mm_lay(w, pk, L_BLOCK, r0, r1, xq, n, y, ys); /* q4_block and q4_tiled pack alike */
}

/* ---- f16, bf16: f32 activations, 16-lane FMAs ------------------------------------
 * On kern_pack.c's half layout (a group's column is one vector of 16 rows);
 * a row's sum runs over the columns in order in its lane, f32 throughout,
 * the weights exact. The activation "quantization" is an f32 copy. */
static ALWAYS_INLINE __m512 ld_half16(const void *p, bool bf)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return bf ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
}

#ifndef HF_RG
#define HF_RG 4
#endif
#ifndef HF_T
#define HF_T 4
#endif
static ALWAYS_INLINE void hf_tile(const cmf__qmat *w, const uint8_t *pk, bool bf, int64_t g, const uint8_t *x,
                                  size_t xs, float *y, int64_t ys, int RG, int T)
{
    const int64_t cols = w->cols;
    const size_t gb = cmf__kpack_half_group_bytes(cols);
    const float *xf = (const float *)(const void *)x;
    const size_t xsf = xs / sizeof(float);
    __m512 acc[4][8];
    tile_zero(acc, RG, T);
    for (int64_t c = 0; c < cols; c++) {
#pragma GCC unroll 8
        for (int i = 0; i < RG; i++) {
            __m512 wv = ld_half16(pk + (size_t)(g + i) * gb + (size_t)c * CMF__KPACK_HALF_COL, bf);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) acc[i][t] = _mm512_fmadd_ps(wv, _mm512_set1_ps(xf[(size_t)t * xsf + c]), acc[i][t]);
        }
    }
    tile_store(acc, w->rows, g, y, ys, RG, T);
}

static ALWAYS_INLINE void hf_mm_bf(const cmf__qmat *w, const uint8_t *pk, bool bf, int64_t r0, int64_t r1,
                                   const void *xq, int64_t n, float *y, int64_t ys)
{
    const size_t xs = cmf__kpack_xf_bytes(w->cols);
    const int64_t g0 = r0 / PR, g1 = (r1 + PR - 1) / PR;
    TILE_LOOP_AT(HF_RG, HF_T, hf_tile, w, pk, bf);
}
static void hf_pmm(const cmf__qmat *w, const uint8_t *pk, int64_t r0, int64_t r1, const void *xq, int64_t n, float *y,
                   int64_t ys)
{
    if (w->dtype == CMF_DTYPE_BF16) hf_mm_bf(w, pk, true, r0, r1, xq, n, y, ys);
    else hf_mm_bf(w, pk, false, r0, r1, xq, n, y, ys);
}

/* ---- f16, bf16 as bf16 dot products (the opt-in table, vdpbf16ps) -------------------
 * Activations rounded to bf16 (nearest even), f16 weights rounded to bf16 at
 * packing: two columns a lane per instruction, twice the FMA path's rate,
 * at bf16's precision (8 significant bits) for both factors. Packed: per
 * group, per column pair, 16 rows x (bf16 w[c], bf16 w[c+1]) = 64 bytes. */
static size_t xb_bytes(int64_t cols) { return (size_t)(cols + 31) / 32 * 64; }
static void xb_quant(const float *x, int64_t cols, void *xq)
{
    uint8_t *p = xq;
    for (int64_t i = 0; i < cols; i += 32) {
        __mmask16 m0 = cols - i >= 16 ? 0xffff : (__mmask16)((1u << (cols - i)) - 1);
        __mmask16 m1 = cols - i >= 32 ? 0xffff : cols - i <= 16 ? 0 : (__mmask16)((1u << (cols - i - 16)) - 1);
        __m512bh b = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, x + i + 16), _mm512_maskz_loadu_ps(m0, x + i));
        _mm512_storeu_si512(p + 2 * i, (__m512i)b);
    }
}
static size_t hb_group_bytes(int64_t cols) { return (size_t)(cols + 1) / 2 * 64; }
static size_t hb_bytes(const cmf__qmat *w) { return (size_t)groups_of(w) * hb_group_bytes(w->cols); }

static void hb_pack(const cmf__qmat *w, int64_t g0, int64_t g1, uint8_t *dst)
{
    const int64_t cols = w->cols;
    const bool bf = w->dtype == CMF_DTYPE_BF16;
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *p = dst + (size_t)g * hb_group_bytes(cols);
        memset(p, 0, hb_group_bytes(cols));
        for (int r = 0; r < PR && g * PR + r < w->rows; r++) {
            const uint8_t *src = w->data + (uint64_t)(g * PR + r) * (uint64_t)cols * 2;
            for (int64_t c = 0; c < cols; c++) {
                uint16_t h = cmf__rd16(src + 2 * c);
                uint16_t b = bf ? h : cmf__f32_to_bf16(cmf__f16_to_f32(h));
                memcpy(p + (size_t)(c / 2) * 64 + 4 * r + 2 * (c % 2), &b, 2);
            }
        }
    }
}

static ALWAYS_INLINE void hb_tile(const cmf__qmat *w, const uint8_t *pk, int64_t g, const uint8_t *x, size_t xs,
                                  float *y, int64_t ys, int RG, int T)
{
    const int64_t steps = (w->cols + 1) / 2;
    const size_t gb = hb_group_bytes(w->cols);
    __m512 acc[4][8];
    tile_zero(acc, RG, T);
    for (int64_t k = 0; k < steps; k++) {
#pragma GCC unroll 8
        for (int i = 0; i < RG; i++) {
            __m512bh wv = (__m512bh)_mm512_loadu_si512(pk + (size_t)(g + i) * gb + (size_t)k * 64);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++)
                acc[i][t] = _mm512_dpbf16_ps(acc[i][t], wv, (__m512bh)bcast4(x + (size_t)t * xs + 4 * k));
        }
    }
    tile_store(acc, w->rows, g, y, ys, RG, T);
}

static void hb_pmm(const cmf__qmat *w, const uint8_t *pk, int64_t r0, int64_t r1, const void *xq, int64_t n, float *y,
                   int64_t ys)
{
    const size_t xs = xb_bytes(w->cols);
    const int64_t g0 = r0 / PR, g1 = (r1 + PR - 1) / PR;
    TILE_LOOP_AT(HF_RG, HF_T, hb_tile, w, pk);
}

void cmf__kern_avx512_fill_bf16dot(cmf__cpu_kernels *k)
{
    for (int d = CMF_DTYPE_F16; d <= CMF_DTYPE_BF16; d++)
        k->mmq[d] = (cmf__kmmq){.xbytes = xb_bytes, .quant = xb_quant, .xblock = 0, .bf16 = true,
                                .pack_bytes = hb_bytes, .pack = hb_pack, .pmm = hb_pmm};
}

void cmf__kern_avx512_fill_packed(cmf__cpu_kernels *k)
{
    for (int d = CMF_DTYPE_F16; d <= CMF_DTYPE_BF16; d++)
        k->mmq[d] = (cmf__kmmq){.xbytes = cmf__kpack_xf_bytes, .quant = cmf__kpack_xf_quant, .xblock = 0, /* packed only */
                                .pack_bytes = cmf__kpack_half_bytes, .pack = cmf__kpack_half, .pmm = hf_pmm};
    k->mmq[CMF_DTYPE_Q8_ROW].pack_bytes = cmf__kpack_q8_bytes;
    k->mmq[CMF_DTYPE_Q8_ROW].pack = cmf__kpack_q8;
    k->mmq[CMF_DTYPE_Q8_ROW].pmm = p8_mm;
    /* q8_2f: the codes and row scales of q8_row, the column scales folded
     * into the activations; packed only (the unpacked tile reads q8_row's planes) */
    k->mmq[CMF_DTYPE_Q8_2F] = k->mmq[CMF_DTYPE_Q8_ROW];
    k->mmq[CMF_DTYPE_Q8_2F].mm = NULL;
    k->mmq[CMF_DTYPE_Q8_2F].col_scaled = true;
    const int q4[] = {CMF_DTYPE_Q4_BLOCK, CMF_DTYPE_Q4_TILED, CMF_DTYPE_Q4TP};
    for (int i = 0; i < 3; i++) {
        k->mmq[q4[i]].pack_bytes = cmf__kpack_q4_bytes;
        k->mmq[q4[i]].pack = cmf__kpack_q4;
        k->mmq[q4[i]].pmm = p4_mm;
    }
}
