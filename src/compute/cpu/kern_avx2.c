/* kern_avx2.c — AVX2+FMA+F16C row kernels for f32, f16, bf16, q8_row,
 * q4_block and q4_tiled (built with -mavx2 -mfma -mf16c by file name).
 * The table is offered only when the CPU reports all three features; other
 * dtypes and shapes come from the generic table. Tests compare each kernel
 * with the scalar reference on odd sizes. */
#include "compute/cpu/kernels.h"
#include "util/arith.h"
#include "util/half.h"

#include <immintrin.h>
#include <pthread.h>
#include <string.h>

static inline float hsum(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

static float a_dot_f32(const float *a, const float *b, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static void a_dot_f32_x4(const float *w, const float *x, int64_t xs, int64_t n, float out[4])
{
    const float *x0 = x, *x1 = x + xs, *x2 = x + 2 * xs, *x3 = x + 3 * xs;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 wv = _mm256_loadu_ps(w + i);
        s0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + i), s0);
        s1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x1 + i), s1);
        s2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x2 + i), s2);
        s3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x3 + i), s3);
    }
    out[0] = hsum(s0), out[1] = hsum(s1), out[2] = hsum(s2), out[3] = hsum(s3);
    for (; i < n; i++) {
        out[0] += w[i] * x0[i];
        out[1] += w[i] * x1[i];
        out[2] += w[i] * x2[i];
        out[3] += w[i] * x3[i];
    }
}

static void a_dot_f32_2x4(const float *w, const float *x, int64_t xs, int64_t n, float out[8])
{
    const float *w1 = w + n, *x0 = x, *x1 = x + xs, *x2 = x + 2 * xs, *x3 = x + 3 * xs;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 u = _mm256_loadu_ps(w + i), v = _mm256_loadu_ps(w1 + i), t;
        t = _mm256_loadu_ps(x0 + i), a0 = _mm256_fmadd_ps(u, t, a0), b0 = _mm256_fmadd_ps(v, t, b0);
        t = _mm256_loadu_ps(x1 + i), a1 = _mm256_fmadd_ps(u, t, a1), b1 = _mm256_fmadd_ps(v, t, b1);
        t = _mm256_loadu_ps(x2 + i), a2 = _mm256_fmadd_ps(u, t, a2), b2 = _mm256_fmadd_ps(v, t, b2);
        t = _mm256_loadu_ps(x3 + i), a3 = _mm256_fmadd_ps(u, t, a3), b3 = _mm256_fmadd_ps(v, t, b3);
    }
    out[0] = hsum(a0), out[1] = hsum(a1), out[2] = hsum(a2), out[3] = hsum(a3);
    out[4] = hsum(b0), out[5] = hsum(b1), out[6] = hsum(b2), out[7] = hsum(b3);
    for (; i < n; i++)
        for (int j = 0; j < 4; j++) {
            out[j] += w[i] * x[j * xs + i];
            out[4 + j] += w1[i] * x[j * xs + i];
        }
}

static void a_axpy(float *y, float a, const float *x, int64_t n)
{
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

static float a_f32_dot(const cmf__qmat *w, int64_t row, const float *x)
{
    return a_dot_f32((const float *)(const void *)(w->data + (uint64_t)row * (uint64_t)w->cols * 4), x, w->cols);
}
static void a_f32_decode(const cmf__qmat *w, int64_t row, float *out)
{
    memcpy(out, w->data + (uint64_t)row * (uint64_t)w->cols * 4, (size_t)w->cols * 4);
}

static inline __m256 ld_f16(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p)); }
static inline __m256 ld_bf16(const uint8_t *p)
{
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* f16 and bf16 rows: one loop, the load picked by a constant */
static inline __m256 ld_half(const uint8_t *p, bool bf) { return bf ? ld_bf16(p) : ld_f16(p); }
static inline float half_to_f32(const uint8_t *p, bool bf)
{
    return bf ? cmf__bf16_to_f32(cmf__rd16(p)) : cmf__f16_to_f32(cmf__rd16(p));
}
static inline float half_dot(const cmf__qmat *w, int64_t row, const float *x, bool bf)
{
    const uint8_t *r = w->data + (uint64_t)row * (uint64_t)w->cols * 2;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t i = 0, n = w->cols;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(ld_half(r + 2 * i, bf), _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(ld_half(r + 2 * i + 16, bf), _mm256_loadu_ps(x + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(ld_half(r + 2 * i, bf), _mm256_loadu_ps(x + i), s0);
    float s = hsum(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += half_to_f32(r + 2 * i, bf) * x[i];
    return s;
}
static inline void half_decode(const cmf__qmat *w, int64_t row, float *out, bool bf)
{
    const uint8_t *r = w->data + (uint64_t)row * (uint64_t)w->cols * 2;
    int64_t i = 0, n = w->cols;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, ld_half(r + 2 * i, bf));
    for (; i < n; i++) out[i] = half_to_f32(r + 2 * i, bf);
}
static float a_f16_dot(const cmf__qmat *w, int64_t row, const float *x) { return half_dot(w, row, x, false); }
static float a_bf16_dot(const cmf__qmat *w, int64_t row, const float *x) { return half_dot(w, row, x, true); }
static void a_f16_decode(const cmf__qmat *w, int64_t row, float *out) { half_decode(w, row, out, false); }
static void a_bf16_decode(const cmf__qmat *w, int64_t row, float *out) { half_decode(w, row, out, true); }

static inline __m256 ld_i8(const int8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)));
}

static float a_q8_dot(const cmf__qmat *w, int64_t row, const float *x)
{
    const int8_t *q = (const int8_t *)(w->data + (uint64_t)row * (uint64_t)w->cols);
    float scale = cmf__f16_to_f32(cmf__rd16(w->data + (uint64_t)w->rows * (uint64_t)w->cols + 2 * (uint64_t)row));
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0, n = w->cols;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(ld_i8(q + i), _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(ld_i8(q + i + 8), _mm256_loadu_ps(x + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(ld_i8(q + i), _mm256_loadu_ps(x + i), s0);
    float s = hsum(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += (float)q[i] * x[i];
    return s * scale;
}
static void a_q8_decode(const cmf__qmat *w, int64_t row, float *out)
{
    const int8_t *q = (const int8_t *)(w->data + (uint64_t)row * (uint64_t)w->cols);
    float scale = cmf__f16_to_f32(cmf__rd16(w->data + (uint64_t)w->rows * (uint64_t)w->cols + 2 * (uint64_t)row));
    __m256 vs = _mm256_set1_ps(scale);
    int64_t i = 0, n = w->cols;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(ld_i8(q + i), vs));
    for (; i < n; i++) out[i] = (float)q[i] * scale;
}

/* 16 nibble bytes -> 32 floats (q - 8) in element order, as 4 vectors. */
static inline void q4_unpack(const uint8_t *nib, __m256 out[4])
{
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)nib);
    __m128i m = _mm_set1_epi8(15);
    __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    /* interleave: element 2k = lo[k], 2k+1 = hi[k] */
    __m128i e0 = _mm_unpacklo_epi8(lo, hi), e1 = _mm_unpackhi_epi8(lo, hi);
    __m128i eight = _mm_set1_epi8(8);
    e0 = _mm_sub_epi8(e0, eight);
    e1 = _mm_sub_epi8(e1, eight);
    out[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(e0));
    out[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(e0, 8)));
    out[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(e1));
    out[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(e1, 8)));
}

static inline __m256 q4_group_fma(const uint8_t *nib, float scale, const float *x, __m256 acc)
{
    __m256 v[4];
    q4_unpack(nib, v);
    __m256 g = _mm256_mul_ps(v[0], _mm256_loadu_ps(x));
    g = _mm256_fmadd_ps(v[1], _mm256_loadu_ps(x + 8), g);
    g = _mm256_fmadd_ps(v[2], _mm256_loadu_ps(x + 16), g);
    g = _mm256_fmadd_ps(v[3], _mm256_loadu_ps(x + 24), g);
    return _mm256_fmadd_ps(g, _mm256_set1_ps(scale), acc);
}
static inline void q4_group_store(const uint8_t *nib, float scale, float *out)
{
    __m256 v[4], s = _mm256_set1_ps(scale);
    q4_unpack(nib, v);
    for (int j = 0; j < 4; j++) _mm256_storeu_ps(out + 8 * j, _mm256_mul_ps(v[j], s));
}

/* q4_block and q4_tiled rows (cmf__kern_q4_row walks either) */
static float a_q4_dot(const cmf__qmat *w, int64_t row, const float *x)
{
    if (!cmf__kern_q4_fast_ok(w)) return cmf__qmat_dot_row(w, row, x);
    const cmf__kq4_row r = cmf__kern_q4_row(w, row);
    __m256 acc = _mm256_setzero_ps();
    for (uint64_t g = 0; g < r.groups; g++) acc = q4_group_fma(cmf__kq4_nib(&r, g), cmf__kq4_scale(&r, g), x + 32 * g, acc);
    return hsum(acc);
}
static void a_q4_decode(const cmf__qmat *w, int64_t row, float *out)
{
    if (!cmf__kern_q4_fast_ok(w)) {
        cmf__qmat_decode_row(w, row, out);
        return;
    }
    const cmf__kq4_row r = cmf__kern_q4_row(w, row);
    for (uint64_t g = 0; g < r.groups; g++) q4_group_store(cmf__kq4_nib(&r, g), cmf__kq4_scale(&r, g), out + 32 * g);
}

/* f16 KV rows: F16C converts 8 values per instruction */
static float a_dot_f16(const float *a, const uint16_t *x, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), ld_f16((const uint8_t *)(x + i)), s0);
    float s = hsum(s0);
    for (; i < n; i++) s += a[i] * _cvtsh_ss(x[i]);
    return s;
}
static void a_axpy_f16(float *y, float a, const uint16_t *x, int64_t n)
{
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, ld_f16((const uint8_t *)(x + i)), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * _cvtsh_ss(x[i]);
}
static void a_store_f16(uint16_t *y, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

static void a_dot_f16_rows(const float *a, const uint16_t *k, size_t stride, int64_t n_rows, int64_t hd, float *out)
{
    for (int64_t r = 0; r < n_rows; r++) out[r] = a_dot_f16(a, k + (size_t)r * stride, hd);
}
static void a_axpy_f16_rows(float *y, const float *p, const uint16_t *v, size_t stride, int64_t n_rows, int64_t hd)
{
    for (int64_t r = 0; r < n_rows; r++) a_axpy_f16(y, p[r], v + (size_t)r * stride, hd);
}

static cmf__cpu_kernels g_avx2;
static const cmf__cpu_kernels *g_avx2_ptr;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_avx2(void)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
    unsigned a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
    if (!(c & (1u << 29))) return; /* F16C */
    cmf__cpu_kernels_fill_generic(&g_avx2);
    g_avx2.isa = "avx2";
    memset(g_avx2.mmq, 0, sizeof g_avx2.mmq); /* the f32 kernels below beat the generic integer loops */
    cmf__kern_avx2_fill_packed(&g_avx2);      /* ... but not the packed ones (kern_x86_pack_avx2.c) */
    g_avx2.dot[CMF_DTYPE_F32] = a_f32_dot;
    g_avx2.decode[CMF_DTYPE_F32] = a_f32_decode;
    g_avx2.dot[CMF_DTYPE_F16] = a_f16_dot;
    g_avx2.decode[CMF_DTYPE_F16] = a_f16_decode;
    g_avx2.dot[CMF_DTYPE_BF16] = a_bf16_dot;
    g_avx2.decode[CMF_DTYPE_BF16] = a_bf16_decode;
    g_avx2.dot[CMF_DTYPE_Q8_ROW] = a_q8_dot;
    g_avx2.decode[CMF_DTYPE_Q8_ROW] = a_q8_decode;
    g_avx2.dot[CMF_DTYPE_Q4_BLOCK] = a_q4_dot;
    g_avx2.decode[CMF_DTYPE_Q4_BLOCK] = a_q4_decode;
    g_avx2.dot[CMF_DTYPE_Q4_TILED] = a_q4_dot;
    g_avx2.decode[CMF_DTYPE_Q4_TILED] = a_q4_decode;
    g_avx2.dot_f32 = a_dot_f32;
    g_avx2.dot_f32_x4 = a_dot_f32_x4;
    g_avx2.dot_f32_2x4 = a_dot_f32_2x4;
    g_avx2.axpy = a_axpy;
    g_avx2.dot_f16 = a_dot_f16;
    g_avx2.axpy_f16 = a_axpy_f16;
    g_avx2.store_f16 = a_store_f16;
    g_avx2.dot_f16_rows = a_dot_f16_rows;
    g_avx2.axpy_f16_rows = a_axpy_f16_rows;
    g_avx2_ptr = &g_avx2;
}

const cmf__cpu_kernels *cmf__cpu_kernels_avx2(void)
{
    pthread_once(&g_once, init_avx2);
    return g_avx2_ptr;
}
