/* kern_pack.c — the packed weight layouts the ISA tables' packed kernels
 * read (kernels.h, cmf__kmmq.pack), in plain C for every architecture: 16
 * rows side by side, each 64 bytes holding four consecutive columns of the
 * 16 rows (byte 4r + j: row r, column j), so that a 32-bit lane of a wide
 * vector, or a quarter of a 128-bit one, is one row. Rows past the end are
 * zero. Per group of 16 rows:
 *   q8_row (and q8_2f): per 256-column block [16 x i32: -128 Σw of each row
 *           over the block, for kernels that feed activations as q + 128]
 *           [ceil(cols in block / 4) x 64 bytes: the int8 codes]; after every
 *           group, the row scales as f32, 16 a group.
 *   q4:     per 32-block [4 x 64 bytes: low nibble of byte 4r + j of vector v
 *           = row r, column 4v + j; high nibble = column 16 + 4v + j]
 *           [16 scales: the stored f16 bits (q4_block, q4_tiled) or f32
 *           (q4tp, from the row's ladder)].
 *   f16 / bf16: per column, the 16 rows' values as stored (32 bytes), so a
 *           row's sum runs over the columns in order in one lane; their
 *           activations are f32 (cmf__kpack_xf: a copy, zero-padded).
 * Packing reads only the weight; disjoint group ranges may run on several
 * threads at once. */
#include "compute/cpu/kernels.h"
#include "util/arith.h"
#include "util/half.h"

#include <math.h>
#include <string.h>

#define PR CMF__KPACK_ROWS
#define XB 256 /* q8_row activation block */

static int64_t groups_of(const cmf__qmat *w) { return (w->rows + PR - 1) / PR; }

static int64_t p8_blocks(int64_t cols) { return (cols + XB - 1) / XB; }
size_t cmf__kpack_q8_group_bytes(int64_t cols) { return (size_t)p8_blocks(cols) * 64 + (size_t)((cols + 3) / 4) * 64; }

size_t cmf__kpack_q8_bytes(const cmf__qmat *w)
{
    return (size_t)groups_of(w) * (cmf__kpack_q8_group_bytes(w->cols) + PR * sizeof(float));
}

void cmf__kpack_q8(const cmf__qmat *w, int64_t g0, int64_t g1, uint8_t *dst)
{
    const int64_t cols = w->cols, G = groups_of(w);
    const size_t gb = cmf__kpack_q8_group_bytes(cols);
    float *scales = (float *)(void *)(dst + (size_t)G * gb);
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *p = dst + (size_t)g * gb;
        for (int64_t b = 0; b < p8_blocks(cols); b++) {
            int64_t c0 = b * XB, c1 = c0 + XB < cols ? c0 + XB : cols, steps = (c1 - c0 + 3) / 4;
            int32_t corr[PR] = {0};
            uint8_t *v = p + 64;
            memset(v, 0, (size_t)steps * 64);
            for (int r = 0; r < PR; r++) {
                int64_t row = g * PR + r;
                if (row >= w->rows) break;
                const int8_t *src = (const int8_t *)w->data + (uint64_t)row * (uint64_t)cols;
                for (int64_t c = c0; c < c1; c++) {
                    corr[r] -= 128 * src[c];
                    v[((c - c0) / 4) * 64 + 4 * r + (c - c0) % 4] = (uint8_t)src[c];
                }
            }
            memcpy(p, corr, sizeof corr);
            p += 64 + (size_t)steps * 64;
        }
        for (int r = 0; r < PR; r++) {
            int64_t row = g * PR + r;
            scales[g * PR + r] = row < w->rows ? cmf__f16_to_f32(cmf__rd16(w->aux + 2 * (uint64_t)row)) : 0.0f;
        }
    }
}


enum { L_BLOCK = CMF__KPACK_Q4_BLOCK, L_TILED = CMF__KPACK_Q4_TILED, L_TP = CMF__KPACK_Q4TP };
int cmf__kpack_q4_layout(const cmf__qmat *w)
{
    return w->dtype == CMF_DTYPE_Q4_BLOCK ? L_BLOCK : w->dtype == CMF_DTYPE_Q4_TILED ? L_TILED : L_TP;
}
size_t cmf__kpack_q4_block_bytes(int lay) { return 256 + (lay == L_TP ? 64 : 32); }
size_t cmf__kpack_q4_group_bytes(const cmf__qmat *w)
{
    return (size_t)(w->cols / 32) * cmf__kpack_q4_block_bytes(cmf__kpack_q4_layout(w));
}

size_t cmf__kpack_q4_bytes(const cmf__qmat *w)
{
    return w->cols % 32 ? 0 : (size_t)groups_of(w) * cmf__kpack_q4_group_bytes(w);
}

void cmf__kpack_q4(const cmf__qmat *w, int64_t g0, int64_t g1, uint8_t *dst)
{
    const int lay = cmf__kpack_q4_layout(w);
    const int64_t gpr = w->cols / 32;
    const size_t bb = cmf__kpack_q4_block_bytes(lay), gb = cmf__kpack_q4_group_bytes(w);
    float ladder[32];
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *p = dst + (size_t)g * gb;
        memset(p, 0, gb);
        for (int r = 0; r < PR; r++) {
            int64_t row = g * PR + r;
            if (row >= w->rows) break;
            if (lay == L_TP) cmf__qmat_tp_ladder(w, row, ladder);
            const cmf__kq4_row rw = cmf__kern_q4_row(w, row);
            for (int64_t k = 0; k < gpr; k++) {
                const uint8_t *nib = cmf__kq4_nib(&rw, (uint64_t)k);
                uint8_t *blk = p + (size_t)k * bb;
                for (int e = 0; e < 16; e++) { /* elements e and 16 + e share a byte */
                    unsigned lo = (nib[e >> 1] >> ((e & 1) * 4)) & 15u, hi = (nib[(16 + e) >> 1] >> ((e & 1) * 4)) & 15u;
                    blk[(e / 4) * 64 + 4 * r + e % 4] = (uint8_t)(lo | hi << 4);
                }
                if (lay == L_TP) {
                    float s = ladder[cmf__qmat_tp_code(w, row, k)];
                    memcpy(blk + 256 + 4 * r, &s, 4);
                } else {
                    memcpy(blk + 256 + 2 * r, cmf__kq4_scale_bits(&rw, (uint64_t)k), 2);
                }
            }
        }
    }
}

size_t cmf__kpack_half_bytes(const cmf__qmat *w) { return (size_t)groups_of(w) * cmf__kpack_half_group_bytes(w->cols); }
void cmf__kpack_half(const cmf__qmat *w, int64_t g0, int64_t g1, uint8_t *dst)
{
    const int64_t cols = w->cols;
    const size_t gb = cmf__kpack_half_group_bytes(cols);
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *p = dst + (size_t)g * gb;
        memset(p, 0, gb);
        for (int r = 0; r < PR && g * PR + r < w->rows; r++) {
            const uint8_t *src = w->data + (uint64_t)(g * PR + r) * (uint64_t)cols * 2;
            for (int64_t c = 0; c < cols; c++) memcpy(p + (size_t)c * CMF__KPACK_HALF_COL + 2 * r, src + 2 * c, 2);
        }
    }
}
size_t cmf__kpack_xf_bytes(int64_t cols) { return (size_t)(cols + 15) / 16 * 64; }
void cmf__kpack_xf_quant(const float *x, int64_t cols, void *xq)
{
    memcpy(xq, x, (size_t)cols * sizeof(float));
    memset((float *)xq + cols, 0, cmf__kpack_xf_bytes(cols) - (size_t)cols * sizeof(float));
}

/* ---- signed activations for the packed kernels without vpdpbusd's
 * unsigned operand (NEON sdot, AVX2 maddubs): the shared rule, scalar. */
/* n <= len values to int8 (the rest zero); returns d, *sum = Σq */
static float quant_run(const float *x, int64_t n, int64_t len, int8_t *q, int32_t *sum)
{
    float amax = 0;
    for (int64_t i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    int32_t s = 0;
    for (int64_t i = 0; i < n; i++) s += q[i] = (int8_t)lrintf(x[i] * id); /* nearest, ties to even */
    memset(q + n, 0, (size_t)(len - n));
    *sum = s;
    return amax / 127.0f;
}

size_t cmf__kpack_xq8_bytes(int64_t cols) { return (size_t)((cols + XB - 1) / XB) * (XB + 64); }
void cmf__kpack_xq8_quant(const float *x, int64_t cols, void *xq)
{
    uint8_t *p = xq;
    for (int64_t c0 = 0; c0 < cols; c0 += XB, p += XB + 64) {
        int32_t sum;
        float d[16] = {quant_run(x + c0, cols - c0 < XB ? cols - c0 : XB, XB, (int8_t *)p, &sum)};
        memcpy(p + XB, d, sizeof d);
    }
}

size_t cmf__kpack_xq4_bytes(int64_t cols) { return (size_t)((cols + 127) / 128) * 256; }
void cmf__kpack_xq4_quant(const float *x, int64_t cols, void *xq)
{
    uint8_t *p = xq;
    for (int64_t c = 0; c < (cols + 127) / 128; c++, p += 256) {
        float d[16], m[16];
        for (int h = 0; h < 4; h++) {
            int64_t i0 = c * 128 + h * 32, left = cols - i0;
            int8_t q[32];
            int32_t sum = 0;
            float dh = 0.0f;
            if (left > 0) dh = quant_run(x + i0, left < 32 ? left : 32, 32, q, &sum);
            else memset(q, 0, sizeof q);
            memcpy(p + 16 * h, q, 16);
            memcpy(p + 64 + 16 * h, q + 16, 16);
            for (int l = 0; l < 4; l++) d[4 * h + l] = dh, m[4 * h + l] = 2.0f * dh * (float)sum;
        }
        memcpy(p + 128, d, sizeof d);
        memcpy(p + 192, m, sizeof m);
    }
}
