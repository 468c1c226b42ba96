/* test_quant_common.h — helpers shared by the tests/test_quant_*.c
 * programs: a seeded N(0,1) generator, quantize+init in one call, and the
 * dot-vs-decode comparison every dtype runs on odd sizes. */
#ifndef CMF_TEST_QUANT_COMMON_H
#define CMF_TEST_QUANT_COMMON_H

#include "harness.h"
#include "quant/quant.h"
#include "util/arith.h"
#include "util/half.h"

#include <stdlib.h>

static uint64_t tq_rng = 0x9e3779b97f4a7c15ull;
static inline uint64_t tq_next(void)
{
    tq_rng ^= tq_rng << 13;
    tq_rng ^= tq_rng >> 7;
    tq_rng ^= tq_rng << 17;
    return tq_rng;
}
static inline float tq_uniform(void) { return (float)((tq_next() >> 11) * (1.0 / 9007199254740992.0)); }
static inline float tq_gauss(void)
{
    float u = tq_uniform(), v = tq_uniform();
    if (u < 1e-12f) u = 1e-12f;
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}
static inline float *tq_gauss_matrix(int64_t rows, int64_t cols, uint64_t seed)
{
    tq_rng = seed * 0x9e3779b97f4a7c15ull + 1;
    float *x = malloc((size_t)(rows * cols) * sizeof *x + 1);
    for (int64_t i = 0; i < rows * cols; i++) x[i] = tq_gauss();
    return x;
}

/* Quantizes src as dtype and opens the result as a qmat (CHECKs on failure). */
static inline bool tq_encode(int dtype, const float *src, int64_t rows, int64_t cols, cmf__buf *buf,
                             cmf__qmat *m)
{
    buf->len = 0;
    cmf_status st = cmf__quantize(dtype, src, rows, cols, NULL, buf, "t");
    if (st) {
        harness_fail(__FILE__, __LINE__, "quantize %s: %s", cmf__dtype_get(dtype)->name, cmf_last_error());
        return false;
    }
    uint64_t shape[2] = {(uint64_t)rows, (uint64_t)cols};
    st = cmf__qmat_init(m, dtype, buf->data, buf->len, 2, shape, "t");
    if (st) {
        harness_fail(__FILE__, __LINE__, "qmat_init %s: %s", cmf__dtype_get(dtype)->name, cmf_last_error());
        return false;
    }
    return true;
}

/* dot_row must equal sum(decode_row * x). Both sum the same f32 products;
 * the reference here accumulates in double, so the gap is f32 rounding of
 * the accumulation: at most ~cols * 2^-24 * sum|w*x| (a loose, standard
 * bound); we allow 4x that plus a tiny absolute floor. */
static inline void tq_check_dot(const cmf__qmat *m, uint64_t seed)
{
    float *x = tq_gauss_matrix(1, m->cols ? m->cols : 1, seed);
    float *w = malloc((size_t)(m->cols + 1) * sizeof *w);
    for (int64_t r = 0; r < m->rows; r++) {
        cmf__qmat_decode_row(m, r, w);
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < m->cols; i++) {
            ref += (double)w[i] * x[i];
            mag += fabs((double)w[i] * x[i]);
        }
        float got = cmf__qmat_dot_row(m, r, x);
        double tol = 4.0 * (double)m->cols * 5.96e-8 * mag + 1e-30;
        if (!(fabs(got - ref) <= tol)) {
            harness_fail(__FILE__, __LINE__, "%s row %lld: dot %.9g vs decode*x %.9g (tol %.3g)",
                         cmf__dtype_get(m->dtype)->name, (long long)r, got, ref, tol);
            break;
        }
    }
    free(x);
    free(w);
}

/* Decodes the whole matrix into a malloc'd array. */
static inline float *tq_decode_all(const cmf__qmat *m)
{
    float *w = malloc((size_t)(m->rows * m->cols + 1) * sizeof *w);
    for (int64_t r = 0; r < m->rows; r++) cmf__qmat_decode_row(m, r, w + r * m->cols);
    return w;
}

#endif
