/* kern_generic.c — the reference kernel table (the quant module's scalar
 * dot/decode for every dtype) and the portable fast table: plain C loops
 * with independent accumulators for f32, f16, bf16, q8_row, q4_block and
 * q4_tiled that compilers vectorise, and plain-C integer matmuls for q8_row
 * and the q4 layouts. Any dtype or shape without a fast path uses the
 * reference. Also the one-time choice of the best table. */
#include "compute/cpu/kernels.h"
#include "util/arith.h"
#include "util/half.h"

#include <math.h>
#include <string.h>

/* ---- reference ---------------------------------------------------------- */
static float ref_dot(const cmf__qmat *w, int64_t row, const float *x) { return cmf__qmat_dot_row(w, row, x); }
static void ref_decode(const cmf__qmat *w, int64_t row, float *out) { cmf__qmat_decode_row(w, row, out); }

static float ref_dot_f32(const float *a, const float *b, int64_t n)
{
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
static void ref_axpy(float *y, float a, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void ref_dot_f32_x4(const float *w, const float *x, int64_t xs, int64_t n, float out[4])
{
    for (int j = 0; j < 4; j++) out[j] = ref_dot_f32(w, x + j * xs, n);
}

static void ref_dot_f32_2x4(const float *w, const float *x, int64_t xs, int64_t n, float out[8])
{
    ref_dot_f32_x4(w, x, xs, n, out);
    ref_dot_f32_x4(w + n, x, xs, n, out + 4);
}

static float ref_dot_f16(const float *a, const uint16_t *x, int64_t n)
{
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * cmf__f16_to_f32(x[i]);
    return s;
}
static void ref_axpy_f16(float *y, float a, const uint16_t *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += a * cmf__f16_to_f32(x[i]);
}
static void ref_store_f16(uint16_t *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = cmf__f32_to_f16(x[i]);
}

static cmf__cpu_kernels g_ref;
static cmf__cpu_kernels g_generic;

static void ref_dot_f16_rows(const float *a, const uint16_t *x, size_t stride, int64_t n_rows, int64_t hd, float *out)
{
    for (int64_t r = 0; r < n_rows; r++) out[r] = ref_dot_f16(a, x + (size_t)r * stride, hd);
}
static void ref_axpy_f16_rows(float *y, const float *p, const uint16_t *v, size_t stride, int64_t n_rows, int64_t hd)
{
    for (int64_t r = 0; r < n_rows; r++) ref_axpy_f16(y, p[r], v + (size_t)r * stride, hd);
}

static float ref_exp_sum(float *s, int64_t n, float m)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += s[i] = expf(s[i] - m);
    return (float)sum;
}
static void ref_silu_mul(float *y, const float *x, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i])) * u[i];
}

static void fill_ref(cmf__cpu_kernels *k)
{
    k->isa = "reference";
    memset(k->mmq, 0, sizeof k->mmq);
    for (int d = 0; d < CMF_DTYPE_COUNT_; d++) {
        k->dot[d] = ref_dot;
        k->decode[d] = ref_decode;
    }
    k->dot_f32 = ref_dot_f32;
    k->dot_f32_x4 = ref_dot_f32_x4;
    k->dot_f32_2x4 = ref_dot_f32_2x4;
    k->axpy = ref_axpy;
    k->exp_sum = ref_exp_sum;
    k->silu_mul = ref_silu_mul;
    k->dot_f16 = ref_dot_f16;
    k->axpy_f16 = ref_axpy_f16;
    k->store_f16 = ref_store_f16;
    k->dot_f16_rows = ref_dot_f16_rows;
    k->axpy_f16_rows = ref_axpy_f16_rows;
}

/* ---- generic fast paths ------------------------------------------------- */
static float gen_dot_f32(const float *a, const float *b, int64_t n)
{
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
    float s = 0;
    for (; i < n; i++) s += a[i] * b[i];
    for (int j = 0; j < 8; j++) s += acc[j];
    return s;
}

static void gen_dot_f32_x4(const float *w, const float *x, int64_t xs, int64_t n, float out[4])
{
    for (int j = 0; j < 4; j++) out[j] = gen_dot_f32(w, x + j * xs, n);
}

static void gen_dot_f32_2x4(const float *w, const float *x, int64_t xs, int64_t n, float out[8])
{
    gen_dot_f32_x4(w, x, xs, n, out);
    gen_dot_f32_x4(w + n, x, xs, n, out + 4);
}

static float g_f32_dot(const cmf__qmat *w, int64_t row, const float *x)
{
    const float *r = (const float *)(const void *)(w->data + (uint64_t)row * (uint64_t)w->cols * 4);
    return gen_dot_f32(r, x, w->cols);
}
static void g_f32_decode(const cmf__qmat *w, int64_t row, float *out)
{
    memcpy(out, w->data + (uint64_t)row * (uint64_t)w->cols * 4, (size_t)w->cols * 4);
}

static float g_f16_dot(const cmf__qmat *w, int64_t row, const float *x)
{
    const uint8_t *r = w->data + (uint64_t)row * (uint64_t)w->cols * 2;
    float acc[8] = {0}, s = 0;
    int64_t i = 0, n = w->cols;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += cmf__f16_to_f32(cmf__rd16(r + 2 * (i + j))) * x[i + j];
    for (; i < n; i++) s += cmf__f16_to_f32(cmf__rd16(r + 2 * i)) * x[i];
    for (int j = 0; j < 8; j++) s += acc[j];
    return s;
}
static void g_f16_decode(const cmf__qmat *w, int64_t row, float *out)
{
    const uint8_t *r = w->data + (uint64_t)row * (uint64_t)w->cols * 2;
    for (int64_t i = 0; i < w->cols; i++) out[i] = cmf__f16_to_f32(cmf__rd16(r + 2 * i));
}

static float g_bf16_dot(const cmf__qmat *w, int64_t row, const float *x)
{
    const uint8_t *r = w->data + (uint64_t)row * (uint64_t)w->cols * 2;
    float acc[8] = {0}, s = 0;
    int64_t i = 0, n = w->cols;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += cmf__bf16_to_f32(cmf__rd16(r + 2 * (i + j))) * x[i + j];
    for (; i < n; i++) s += cmf__bf16_to_f32(cmf__rd16(r + 2 * i)) * x[i];
    for (int j = 0; j < 8; j++) s += acc[j];
    return s;
}
static void g_bf16_decode(const cmf__qmat *w, int64_t row, float *out)
{
    const uint8_t *r = w->data + (uint64_t)row * (uint64_t)w->cols * 2;
    for (int64_t i = 0; i < w->cols; i++) out[i] = cmf__bf16_to_f32(cmf__rd16(r + 2 * i));
}

static float g_q8_dot(const cmf__qmat *w, int64_t row, const float *x)
{
    const int8_t *q = (const int8_t *)(w->data + (uint64_t)row * (uint64_t)w->cols);
    float scale = cmf__f16_to_f32(cmf__rd16(w->data + (uint64_t)w->rows * (uint64_t)w->cols + 2 * (uint64_t)row));
    float acc[8] = {0}, s = 0;
    int64_t i = 0, n = w->cols;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += (float)q[i + j] * x[i + j];
    for (; i < n; i++) s += (float)q[i] * x[i];
    for (int j = 0; j < 8; j++) s += acc[j];
    return s * scale;
}
static void g_q8_decode(const cmf__qmat *w, int64_t row, float *out)
{
    const int8_t *q = (const int8_t *)(w->data + (uint64_t)row * (uint64_t)w->cols);
    float scale = cmf__f16_to_f32(cmf__rd16(w->data + (uint64_t)w->rows * (uint64_t)w->cols + 2 * (uint64_t)row));
    for (int64_t i = 0; i < w->cols; i++) out[i] = (float)q[i] * scale;
}

/* one 32-group: nibble byte k holds elements 2k (low) and 2k+1 (high) */
static inline float q4_group_dot(const uint8_t *nib, const float *x)
{
    float a0 = 0, a1 = 0;
    for (int k = 0; k < 16; k++) {
        a0 += (float)((int)(nib[k] & 15) - 8) * x[2 * k];
        a1 += (float)((int)(nib[k] >> 4) - 8) * x[2 * k + 1];
    }
    return a0 + a1;
}
static inline void q4_group_decode(const uint8_t *nib, float s, float *out)
{
    for (int k = 0; k < 16; k++) {
        out[2 * k] = (float)((int)(nib[k] & 15) - 8) * s;
        out[2 * k + 1] = (float)((int)(nib[k] >> 4) - 8) * s;
    }
}

/* q4_block and q4_tiled rows (cmf__kern_q4_row walks either) */
static float g_q4_dot(const cmf__qmat *w, int64_t row, const float *x)
{
    if (!cmf__kern_q4_fast_ok(w)) return cmf__qmat_dot_row(w, row, x);
    const cmf__kq4_row r = cmf__kern_q4_row(w, row);
    float s = 0;
    for (uint64_t g = 0; g < r.groups; g++) s += q4_group_dot(cmf__kq4_nib(&r, g), x + 32 * g) * cmf__kq4_scale(&r, g);
    return s;
}
static void g_q4_decode(const cmf__qmat *w, int64_t row, float *out)
{
    if (!cmf__kern_q4_fast_ok(w)) {
        cmf__qmat_decode_row(w, row, out);
        return;
    }
    const cmf__kq4_row r = cmf__kern_q4_row(w, row);
    for (uint64_t g = 0; g < r.groups; g++) q4_group_decode(cmf__kq4_nib(&r, g), cmf__kq4_scale(&r, g), out + 32 * g);
}

/* ---- integer matmul: plain C over the shared block rule ------------------------- */
/* Layout of one activation row: [f32 d per block][int8 q, 32 per block]. */
static int64_t gx_blocks(int64_t cols) { return (cols + 31) / 32; }
static size_t gx_bytes(int64_t cols) { return ((size_t)gx_blocks(cols) * 36 + 63) / 64 * 64; }

static void gx_quant(const float *x, int64_t cols, void *xq)
{
    const int64_t nb = gx_blocks(cols);
    float *d = xq;
    int8_t *q = (int8_t *)xq + 4 * nb;
    for (int64_t b = 0; b < nb; b++) {
        int64_t i0 = 32 * b, n = cols - i0 < 32 ? cols - i0 : 32;
        float amax = 0;
        for (int64_t i = 0; i < n; i++) amax = fabsf(x[i0 + i]) > amax ? fabsf(x[i0 + i]) : amax;
        float id = amax > 0 ? 127.0f / amax : 0.0f;
        d[b] = amax / 127.0f;
        for (int64_t i = 0; i < 32; i++) q[i0 + i] = i < n ? (int8_t)lrintf(x[i0 + i] * id) : 0;
    }
}

static void gq8_mm(const cmf__qmat *w, int64_t r0, int64_t r1, const void *xq, int64_t n, float *y, int64_t ys)
{
    const int64_t cols = w->cols, nb = gx_blocks(cols);
    const size_t xs = gx_bytes(cols);
    for (int64_t r = r0; r < r1; r++) {
        const int8_t *wq = (const int8_t *)(w->data + (uint64_t)r * (uint64_t)cols);
        float scale = cmf__f16_to_f32(cmf__rd16(w->data + (uint64_t)w->rows * (uint64_t)cols + 2 * (uint64_t)r));
        for (int64_t t = 0; t < n; t++) {
            const float *d = (const float *)(const void *)((const uint8_t *)xq + (size_t)t * xs);
            const int8_t *q = (const int8_t *)(d + nb);
            float acc = 0;
            for (int64_t b = 0; b < nb; b++) {
                int32_t s = 0;
                int64_t i1 = cols - 32 * b < 32 ? cols : 32 * b + 32;
                for (int64_t i = 32 * b; i < i1; i++) s += (int32_t)wq[i] * q[i];
                acc += (float)s * d[b];
            }
            y[t * ys + r] = acc * scale;
        }
    }
}

/* q4_block, q4_tiled and q4tp (nibbles as q4_block, scales from the row's
 * ladder): sum over groups of scale_g * d_g * Σ (nibble - 8) q */
static void gq4_mm(const cmf__qmat *w, int64_t r0, int64_t r1, const void *xq, int64_t n, float *y, int64_t ys)
{
    const int64_t gpr = w->cols / 32;
    const size_t xs = gx_bytes(w->cols);
    float ladder[32];
    for (int64_t r = r0; r < r1; r++) {
        const cmf__kq4_row row = cmf__kern_q4_row(w, r);
        if (w->dtype == CMF_DTYPE_Q4TP) cmf__qmat_tp_ladder(w, r, ladder);
        for (int64_t t = 0; t < n; t++) {
            const float *d = (const float *)(const void *)((const uint8_t *)xq + (size_t)t * xs);
            const int8_t *q = (const int8_t *)(d + gpr);
            float acc = 0;
            for (int64_t g = 0; g < gpr; g++) {
                const uint8_t *nib = cmf__kq4_nib(&row, (uint64_t)g);
                float sg = w->dtype == CMF_DTYPE_Q4TP ? ladder[cmf__qmat_tp_code(w, r, g)] : cmf__kq4_scale(&row, (uint64_t)g);
                int32_t s = 0;
                for (int k = 0; k < 16; k++)
                    s += ((int32_t)(nib[k] & 15) - 8) * q[32 * g + 2 * k] + ((int32_t)(nib[k] >> 4) - 8) * q[32 * g + 2 * k + 1];
                acc += sg * (d[g] * (float)s);
            }
            y[t * ys + r] = acc;
        }
    }
}

static void gen_axpy(float *y, float a, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

void cmf__cpu_kernels_fill_generic(cmf__cpu_kernels *k)
{
    fill_ref(k);
    k->isa = "generic";
    k->dot[CMF_DTYPE_F32] = g_f32_dot;
    k->decode[CMF_DTYPE_F32] = g_f32_decode;
    k->dot[CMF_DTYPE_F16] = g_f16_dot;
    k->decode[CMF_DTYPE_F16] = g_f16_decode;
    k->dot[CMF_DTYPE_BF16] = g_bf16_dot;
    k->decode[CMF_DTYPE_BF16] = g_bf16_decode;
    k->dot[CMF_DTYPE_Q8_ROW] = g_q8_dot;
    k->decode[CMF_DTYPE_Q8_ROW] = g_q8_decode;
    k->dot[CMF_DTYPE_Q4_BLOCK] = g_q4_dot;
    k->decode[CMF_DTYPE_Q4_BLOCK] = g_q4_decode;
    k->dot[CMF_DTYPE_Q4_TILED] = g_q4_dot;
    k->decode[CMF_DTYPE_Q4_TILED] = g_q4_decode;
    k->dot_f32 = gen_dot_f32;
    k->dot_f32_x4 = gen_dot_f32_x4;
    k->dot_f32_2x4 = gen_dot_f32_2x4;
    k->axpy = gen_axpy;
    k->dot_f16 = ref_dot_f16;
    k->axpy_f16 = ref_axpy_f16;
    k->store_f16 = ref_store_f16;
    k->mmq[CMF_DTYPE_Q8_ROW] = (cmf__kmmq){.xbytes = gx_bytes, .quant = gx_quant, .mm = gq8_mm, .xblock = 32};
    k->mmq[CMF_DTYPE_Q4_BLOCK] = (cmf__kmmq){.xbytes = gx_bytes, .quant = gx_quant, .mm = gq4_mm, .xblock = 32};
    k->mmq[CMF_DTYPE_Q4_TILED] = (cmf__kmmq){.xbytes = gx_bytes, .quant = gx_quant, .mm = gq4_mm, .xblock = 32};
    k->mmq[CMF_DTYPE_Q4TP] = (cmf__kmmq){.xbytes = gx_bytes, .quant = gx_quant, .mm = gq4_mm, .xblock = 32};
}

#include <pthread.h>
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static const cmf__cpu_kernels *g_best;

static void init_tables(void)
{
    fill_ref(&g_ref);
    cmf__cpu_kernels_fill_generic(&g_generic);
    /* each getter is NULL off its architecture or without its CPU features */
    const cmf__cpu_kernels *a = cmf__cpu_kernels_avx512();
    if (!a) a = cmf__cpu_kernels_avx2();
    if (!a) a = cmf__cpu_kernels_neon();
    g_best = a ? a : &g_generic;
}

const cmf__cpu_kernels *cmf__cpu_kernels_ref(void)
{
    pthread_once(&g_once, init_tables);
    return &g_ref;
}
const cmf__cpu_kernels *cmf__cpu_kernels_generic(void)
{
    pthread_once(&g_once, init_tables);
    return &g_generic;
}
const cmf__cpu_kernels *cmf__cpu_kernels_best(void)
{
    pthread_once(&g_once, init_tables);
    return g_best;
}
