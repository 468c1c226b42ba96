/* kern_neon_dotprod.c — the packed integer matmuls of the NEON table on
 * CPUs with the dot-product extension (Armv8.2 SDOT; built with
 * +dotprod, offered only when HWCAP_ASIMDDP is set). They read the packed
 * layouts of kern_pack.c: a 128-bit quarter of each 64-byte vector is 4 rows
 * x 4 columns, so `sdot` by a lane of the activations (4 bytes) adds four
 * columns to four rows at once, and 16 rows take four accumulators. Both
 * factors are signed: q8 codes as stored (the layout's -128 Σw is skipped),
 * nibbles 0..15, and `8 Σq` comes off per q4 block. Activations: the
 * signed layouts of kern_pack.c (cmf__kpack_xq8 / xq4, set as pquant).
 * Same rounding rule as every integer path (max|x| / 127, nearest even).
 * Each (row, token) lane runs the same instructions whatever the tile, so
 * a token gets the same bits alone as in a batch. */
#include "compute/cpu/kernels.h"
#include "util/arith.h"
#include "util/half.h"

#include <arm_neon.h>
#include <string.h>

#define PR CMF__KPACK_ROWS
#define XB 256

static int64_t groups_of(const cmf__qmat *w) { return (w->rows + PR - 1) / PR; }
static float ldf(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

/* A group's 16 rows of T tokens (times the row scales, if any); the first
 * `left` rows where fewer remain. */
static void store_tile(float32x4_t acc[2][4], const float *scales, int64_t left, float *y, int64_t ys, int T)
{
    for (int t = 0; t < T; t++)
        for (int q = 0; q < 4; q++) {
            float o[4];
            vst1q_f32(o, scales ? vmulq_f32(acc[t][q], vld1q_f32(scales + 4 * q)) : acc[t][q]);
            for (int r = 0; r < 4 && 4 * q + r < left; r++) y[t * ys + 4 * q + r] = o[r];
        }
}

/* ---- q8_row / q8_2f ------------------------------------------------------------ */
/* One group (16 rows) x T tokens (T <= 2). */
static inline __attribute__((always_inline)) void p8_tile(const cmf__qmat *w, const uint8_t *pk, int64_t g,
                                                          const uint8_t *x, size_t xs, float *y, int64_t ys, int T)
{
    const int64_t cols = w->cols, nb = (cols + XB - 1) / XB;
    const size_t gb = cmf__kpack_q8_group_bytes(cols);
    const float *scales = (const float *)(const void *)(pk + (size_t)groups_of(w) * gb) + g * PR;
    const int8_t *wp = (const int8_t *)(pk + (size_t)g * gb);
    float32x4_t acc[2][4];
    for (int t = 0; t < T; t++)
        for (int q = 0; q < 4; q++) acc[t][q] = vdupq_n_f32(0);
    for (int64_t b = 0; b < nb; b++) {
        const int64_t steps = cols - b * XB >= XB ? XB / 4 : (cols - b * XB + 3) / 4;
        wp += 64; /* the -128 Σw vector: not needed with signed activations */
        int32x4_t s[2][4];
        for (int t = 0; t < T; t++)
            for (int q = 0; q < 4; q++) s[t][q] = vdupq_n_s32(0);
        const int8_t *xb = (const int8_t *)(x + (size_t)b * (XB + 64));
        int64_t k = 0;
        for (; k + 4 <= steps; k += 4) { /* four steps a load of 16 activation bytes */
            int8x16_t xv[2];
            for (int t = 0; t < T; t++) xv[t] = vld1q_s8(xb + (size_t)t * xs + 4 * k);
#define P8_STEP(L)                                                                                   \
    do {                                                                                             \
        const int8_t *ws = wp + 64 * (k + L);                                                        \
        int8x16_t w0 = vld1q_s8(ws), w1 = vld1q_s8(ws + 16), w2 = vld1q_s8(ws + 32), w3 = vld1q_s8(ws + 48); \
        for (int t = 0; t < T; t++) {                                                                \
            s[t][0] = vdotq_laneq_s32(s[t][0], w0, xv[t], L);                                        \
            s[t][1] = vdotq_laneq_s32(s[t][1], w1, xv[t], L);                                        \
            s[t][2] = vdotq_laneq_s32(s[t][2], w2, xv[t], L);                                        \
            s[t][3] = vdotq_laneq_s32(s[t][3], w3, xv[t], L);                                        \
        }                                                                                            \
    } while (0)
            P8_STEP(0);
            P8_STEP(1);
            P8_STEP(2);
            P8_STEP(3);
        }
        for (; k < steps; k++) { /* the block's last columns (cols % 16) */
            const int8_t *ws = wp + 64 * k;
            for (int t = 0; t < T; t++) {
                int32_t xv4;
                memcpy(&xv4, xb + (size_t)t * xs + 4 * k, 4);
                int8x16_t xv = vreinterpretq_s8_s32(vdupq_n_s32(xv4));
                for (int q = 0; q < 4; q++) s[t][q] = vdotq_laneq_s32(s[t][q], vld1q_s8(ws + 16 * q), xv, 0);
            }
        }
        wp += 64 * steps;
        for (int t = 0; t < T; t++) {
            float32x4_t d = vdupq_n_f32(ldf((const uint8_t *)xb + (size_t)t * xs + XB));
            for (int q = 0; q < 4; q++) acc[t][q] = vfmaq_f32(acc[t][q], vcvtq_f32_s32(s[t][q]), d);
        }
    }
    store_tile(acc, scales, w->rows - g * PR, y + g * PR, ys, T);
}
#undef P8_STEP

CMF__KPACK_INT_PMM(p8_mm, p8_tile, cmf__kpack_xq8_bytes)

/* ---- q4_block, q4_tiled, q4tp ------------------------------------------------------ */
static inline __attribute__((always_inline)) void p4_tile(const cmf__qmat *w, const uint8_t *pk, int64_t g,
                                                          const uint8_t *x, size_t xs, float *y, int64_t ys, int T)
{
    const int lay = cmf__kpack_q4_layout(w);
    const int64_t gpr = w->cols / 32;
    const size_t bb = cmf__kpack_q4_block_bytes(lay), gb = cmf__kpack_q4_group_bytes(w);
    const uint8x16_t low = vdupq_n_u8(15);
    float32x4_t acc[2][4];
    for (int t = 0; t < T; t++)
        for (int q = 0; q < 4; q++) acc[t][q] = vdupq_n_f32(0);
    for (int64_t k = 0; k < gpr; k++) {
        const uint8_t *blk = pk + (size_t)g * gb + (size_t)k * bb;
        const uint8_t *xk = x + (size_t)(k / 4) * 256 + 16 * (size_t)(k % 4);
        int32x4_t s[2][4];
        int8x16_t xlo[2], xhi[2];
        for (int t = 0; t < T; t++) {
            for (int q = 0; q < 4; q++) s[t][q] = vdupq_n_s32(0);
            xlo[t] = vld1q_s8((const int8_t *)(xk + (size_t)t * xs));
            xhi[t] = vld1q_s8((const int8_t *)(xk + (size_t)t * xs + 64));
        }
#define P4_STEP(V)                                                                                   \
    do {                                                                                             \
        for (int q = 0; q < 4; q++) {                                                                \
            uint8x16_t nb = vld1q_u8(blk + 64 * (V) + 16 * q);                                       \
            int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(nb, low)), hi = vreinterpretq_s8_u8(vshrq_n_u8(nb, 4)); \
            for (int t = 0; t < T; t++) {                                                            \
                s[t][q] = vdotq_laneq_s32(s[t][q], lo, xlo[t], V);                                   \
                s[t][q] = vdotq_laneq_s32(s[t][q], hi, xhi[t], V);                                   \
            }                                                                                        \
        }                                                                                            \
    } while (0)
        P4_STEP(0);
        P4_STEP(1);
        P4_STEP(2);
        P4_STEP(3);
#undef P4_STEP
        for (int t = 0; t < T; t++) {
            /* Σ (n - 8) q d = d Σ n q - 8 d Σq; the activations store 2 d Σq */
            const uint8_t *xt = xk + (size_t)t * xs;
            float32x4_t xd = vdupq_n_f32(ldf(xt + 128)), xm = vdupq_n_f32(4.0f * ldf(xt + 192));
            for (int q = 0; q < 4; q++) {
                float32x4_t wd;
                if (lay == CMF__KPACK_Q4TP) {
                    wd = vld1q_f32((const float *)(const void *)(blk + 256) + 4 * q);
                } else {
                    float f[4];
                    for (int r = 0; r < 4; r++) f[r] = cmf__f16_to_f32(cmf__rd16(blk + 256 + 2 * (4 * q + r)));
                    wd = vld1q_f32(f);
                }
                float32x4_t v = vsubq_f32(vmulq_f32(vcvtq_f32_s32(s[t][q]), xd), xm);
                acc[t][q] = vfmaq_f32(acc[t][q], v, wd);
            }
        }
    }
    store_tile(acc, NULL, w->rows - g * PR, y + g * PR, ys, T);
}

CMF__KPACK_INT_PMM(p4_mm, p4_tile, cmf__kpack_xq4_bytes)

void cmf__kern_neon_fill_dotprod(cmf__cpu_kernels *k)
{
    const int q8[] = {CMF_DTYPE_Q8_ROW, CMF_DTYPE_Q8_2F};
    for (int i = 0; i < 2; i++) {
        cmf__kmmq *m = &k->mmq[q8[i]];
        if (q8[i] == CMF_DTYPE_Q8_2F) *m = (cmf__kmmq){.col_scaled = true}; /* packed only */
        m->pack_bytes = cmf__kpack_q8_bytes;
        m->pack = cmf__kpack_q8;
        m->pmm = p8_mm;
        m->pxbytes = cmf__kpack_xq8_bytes;
        m->pquant = cmf__kpack_xq8_quant;
        m->pxblock = XB;
        if (!m->mm) m->xbytes = cmf__kpack_xq8_bytes, m->quant = cmf__kpack_xq8_quant, m->xblock = XB;
    }
    const int q4[] = {CMF_DTYPE_Q4_BLOCK, CMF_DTYPE_Q4_TILED, CMF_DTYPE_Q4TP};
    for (int i = 0; i < 3; i++) {
        cmf__kmmq *m = &k->mmq[q4[i]];
        m->pack_bytes = cmf__kpack_q4_bytes;
        m->pack = cmf__kpack_q4;
        m->pmm = p4_mm;
        m->pxbytes = cmf__kpack_xq4_bytes;
        m->pquant = cmf__kpack_xq4_quant;
        m->pxblock = 32;
        if (!m->mm) m->xbytes = cmf__kpack_xq4_bytes, m->quant = cmf__kpack_xq4_quant, m->xblock = 32;
    }
}
