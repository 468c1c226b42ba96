/* quantize.c — the encoders: f32/f16/bf16 copies and the grouped integer
 * layouts. Every encoder rounds a scale to f16 FIRST and quantizes against
 * the reconstructed scale, so the codes it picks are the nearest ones for
 * what a reader will actually multiply by. Input must be finite. */
#include "quant/quant_internal.h"

#include "util/arith.h"
#include "util/error.h"
#include "util/half.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long ull;

cmf__quant_opts cmf__quant_opts_default(void)
{
    cmf__quant_opts o = {.vbit_mean_bits = 4.0, .q1t_outlier_frac = 0.005, .q1s_outlier_frac = 0.005};
    return o;
}

/* f16 round trip of a scale (what a reader will see). */
static inline float f16_round(float x) { return cmf__f16_to_f32(cmf__f32_to_f16(x)); }

/* Nearest integer of x clamped to [lo, hi]. */
static inline int qround(float x, int lo, int hi)
{
    float r = rintf(x);
    if (r < (float)lo) return lo;
    if (r > (float)hi) return hi;
    return (int)r;
}

static float absmax(const float *x, int64_t n)
{
    float a = 0.0f;
    for (int64_t i = 0; i < n; i++) a = fmaxf(a, fabsf(x[i]));
    return a;
}

/* Largest f16 scale s with s*lim >= amax, as close to amax/lim as f16
 * allows: rounding the scale down would clip the group's largest weight. */
static float scale_for(float amax, float lim)
{
    if (amax == 0.0f) return 0.0f;
    float s = f16_round(amax / lim);
    if (s * lim < amax) {
        uint16_t h = cmf__f32_to_f16(s);
        if ((h & 0x7fff) < 0x7bff) s = cmf__f16_to_f32((uint16_t)(h + 1));
    }
    return s;
}

/* Reciprocal for quantizing against s (0 for an all-zero group). */
static inline float inv_of(float s) { return s > 0.0f ? 1.0f / s : 0.0f; }

/* ---- f32 / f16 / bf16 --------------------------------------------------- */

static cmf_status enc_float(int dtype, const float *src, uint64_t n, uint8_t *o)
{
    for (uint64_t i = 0; i < n; i++) {
        if (dtype == CMF_DTYPE_F32) cmf__wr32(o + 4 * i, cmf__f32_bits(src[i]));
        else if (dtype == CMF_DTYPE_F16) cmf__wr16(o + 2 * i, cmf__f32_to_f16(src[i]));
        else cmf__wr16(o + 2 * i, cmf__f32_to_bf16(src[i]));
    }
    return CMF_OK;
}

/* ---- q8_row ------------------------------------------------------------- */

static void enc_q8_row(const float *src, int64_t rows, int64_t cols, uint8_t *o)
{
    uint8_t *sc = o + (uint64_t)rows * (uint64_t)cols;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = src + r * cols;
        float s = scale_for(absmax(x, cols), 127.0f), inv = inv_of(s);
        cmf__wr16(sc + 2 * r, cmf__f32_to_f16(s));
        for (int64_t i = 0; i < cols; i++) o[r * cols + i] = (uint8_t)(int8_t)qround(x[i] * inv, -127, 127);
    }
}

/* ---- q4_block / q4_tiled ------------------------------------------------ */

/* One 32-group of q4 (len <= 32 weights, the rest zero-padded): returns
 * the f16 scale bits and writes 16 nibble bytes. */
static uint16_t enc_q4_group(const float *x, int len, uint8_t nib[16])
{
    float s = scale_for(absmax(x, len), 7.0f), inv = inv_of(s);
    memset(nib, 0x88, 16);
    for (int k = 0; k < len; k++) {
        unsigned q = (unsigned)(qround(x[k] * inv, -8, 7) + 8);
        nib[k >> 1] = (uint8_t)((nib[k >> 1] & ~(15u << ((k & 1) * 4))) | q << ((k & 1) * 4));
    }
    return cmf__f32_to_f16(s);
}

static void enc_q4(int dtype, const float *src, uint64_t n, uint8_t *o)
{
    uint64_t groups = cmf__div_ceil(n, 32);
    for (uint64_t g = 0; g < groups; g++) {
        int len = (int)(n - 32 * g < 32 ? n - 32 * g : 32);
        uint8_t nib[16];
        uint16_t s = enc_q4_group(src + 32 * g, len, nib);
        if (dtype == CMF_DTYPE_Q4_BLOCK) {
            memcpy(o + 16 * g, nib, 16);
            cmf__wr16(o + 16 * groups + 2 * g, s);
        } else {
            cmf__wr16(o + 18 * g, s);
            memcpy(o + 18 * g + 2, nib, 16);
        }
    }
}

/* ---- entry point -------------------------------------------------------- */

cmf_status cmf__quantize(int dtype, const float *src, int64_t rows, int64_t cols,
                         const cmf__quant_opts *opts, cmf__buf *out, const char *what)
{
    if (!what) what = "?";
    cmf__quant_opts def = cmf__quant_opts_default();
    if (!opts) opts = &def;
    if (rows < 0 || cols < 0)
        return cmf__error(CMF_ERR_ARG, "tensor '%s': negative shape %lld x %lld", what, (long long)rows,
                          (long long)cols);
    uint64_t shape[2] = {(uint64_t)rows, (uint64_t)cols};
    int64_t r, c;
    cmf_status st = cmf__quant_check_shape(dtype, 2, shape, &r, &c);
    if (st) return cmf__error_prefix(st, "tensor '%s'", what);
    uint64_t n = (uint64_t)rows * (uint64_t)cols;
    if (dtype != CMF_DTYPE_F32 && dtype != CMF_DTYPE_F16 && dtype != CMF_DTYPE_BF16)
        for (uint64_t i = 0; i < n; i++)
            if (!isfinite(src[i]))
                return cmf__error(CMF_ERR_ARG, "tensor '%s': weight %llu (row %llu, col %llu) is not finite",
                                  what, (ull)i, (ull)(i / (uint64_t)cols), (ull)(i % (uint64_t)cols));
    uint64_t nbytes = 0;
    if (cmf__dtype_get(dtype)->fixed_size) {
        st = cmf__dtype_nbytes(dtype, 2, shape, &nbytes);
        if (st) return cmf__error_prefix(st, "tensor '%s'", what);
    } else {
        return cmf__error(CMF_ERR_UNSUPPORTED, "tensor '%s': encoder for %s not implemented yet", what,
                          cmf__dtype_get(dtype)->name);
    }
    size_t start = out->len;
    st = cmf__buf_reserve(out, nbytes);
    if (st) return st;
    uint8_t *o = out->data + start;
    memset(o, 0, nbytes);
    switch (dtype) {
    case CMF_DTYPE_F32:
    case CMF_DTYPE_F16:
    case CMF_DTYPE_BF16: enc_float(dtype, src, n, o); break;
    case CMF_DTYPE_Q8_ROW: enc_q8_row(src, rows, cols, o); break;
    case CMF_DTYPE_Q4_BLOCK:
    case CMF_DTYPE_Q4_TILED: enc_q4(dtype, src, n, o); break;
    default:
        return cmf__error(CMF_ERR_UNSUPPORTED, "tensor '%s': encoder for %s not implemented yet", what,
                          cmf__dtype_get(dtype)->name);
    }
    out->len = start + nbytes;
    out->data[out->len] = 0;
    return CMF_OK;
}
