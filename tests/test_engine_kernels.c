/* test_engine_kernels.c — every CPU kernel table (generic, avx2 when the CPU
 * has it, neon on aarch64) against the scalar reference (the quant module's
 * cmf__qmat_dot_row / decode_row) on odd sizes (the backend ops are
 * tested in test_engine_ops.c).
 * Tolerances: decode must be bit-exact (same f32 products); a dot product
 * may differ only by summation order: |fast - ref| <= 1e-5 * sum|w_i x_i|
 * + 1e-30. */
#include "harness.h"
#include "compute/cpu/kernels.h"
#include "quant/quant.h"
#include "util/arith.h"
#include "util/half.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 0x1234567;
static float frand(void)
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

typedef struct qm {
    cmf__buf buf;
    cmf__qmat q;
    float *w; /* source values */
} qm;

static bool make(int dtype, int64_t rows, int64_t cols, qm *m)
{
    memset(m, 0, sizeof *m);
    m->w = malloc((size_t)(rows * cols) * sizeof(float));
    for (int64_t i = 0; i < rows * cols; i++) m->w[i] = frand() * (i % 13 == 0 ? 3.0f : 0.5f);
    cmf__quant_opts o = cmf__quant_opts_default();
    if (cmf__quantize(dtype, m->w, rows, cols, &o, &m->buf, "test")) return false;
    uint64_t shape[2] = {(uint64_t)rows, (uint64_t)cols};
    return cmf__qmat_init(&m->q, dtype, m->buf.data, m->buf.len, 2, shape, "test") == CMF_OK;
}
static void release(qm *m)
{
    cmf__qmat_free(&m->q);
    cmf__buf_free(&m->buf);
    free(m->w);
}

/* The f16 KV-row kernels: store bit-exact, dot and axpy within summation order. */
static void check_f16_rows(const cmf__cpu_kernels *k)
{
    const cmf__cpu_kernels *ref = cmf__cpu_kernels_ref();
    for (int64_t n = 1; n <= 67; n += 11) {
        float a[67], x[67], y0[67], y1[67];
        uint16_t h0[67], h1[67];
        for (int64_t i = 0; i < n; i++) a[i] = frand(), x[i] = frand() * 3, y0[i] = y1[i] = frand();
        k->store_f16(h1, x, n);
        ref->store_f16(h0, x, n);
        if (memcmp(h0, h1, (size_t)n * 2)) harness_fail(__FILE__, __LINE__, "%s store_f16 n %lld differs", k->isa, (long long)n);
        double mag = 0;
        for (int64_t i = 0; i < n; i++) mag += fabs((double)a[i] * x[i]);
        float d1 = k->dot_f16(a, h0, n), d0 = ref->dot_f16(a, h0, n);
        if (!(fabs((double)d1 - d0) <= 1e-5 * mag + 1e-30))
            harness_fail(__FILE__, __LINE__, "%s dot_f16 n %lld: %.9g vs %.9g", k->isa, (long long)n, d1, d0);
        k->axpy_f16(y1, 0.7f, h0, n);
        ref->axpy_f16(y0, 0.7f, h0, n);
        for (int64_t i = 0; i < n; i++)
            if (!(fabs((double)y1[i] - y0[i]) <= 1e-6 * (fabs(y0[i]) + 1)))
                harness_fail(__FILE__, __LINE__, "%s axpy_f16 n %lld at %lld: %.9g vs %.9g", k->isa, (long long)n,
                             (long long)i, y1[i], y0[i]);
    }
}

/* The attention row kernels over strided f16 rows (head sizes with and
 * without a register-resident path), against the reference table. */
static void check_f16_row_runs(const cmf__cpu_kernels *k)
{
    const cmf__cpu_kernels *ref = cmf__cpu_kernels_ref();
    const int64_t hds[] = {40, 64, 128, 256}, stride = 300, n_rows = 13;
    uint16_t *kv = malloc(sizeof(uint16_t) * (size_t)(stride * n_rows));
    float a[256], p[13], o0[256], o1[256], s0[13], s1[13];
    for (int64_t i = 0; i < stride * n_rows; i++) kv[i] = cmf__f32_to_f16(frand() * 2);
    for (size_t hi = 0; hi < 4; hi++) {
        int64_t hd = hds[hi];
        double mag = 0;
        for (int64_t i = 0; i < hd; i++) a[i] = frand(), o0[i] = o1[i] = frand(), mag += fabs(a[i]) * 2;
        for (int64_t r = 0; r < n_rows; r++) p[r] = (float)(r + 1) / 91.0f;
        k->dot_f16_rows(a, kv + 3, (size_t)stride, n_rows, hd, s1);
        ref->dot_f16_rows(a, kv + 3, (size_t)stride, n_rows, hd, s0);
        for (int64_t r = 0; r < n_rows; r++)
            if (!(fabs((double)s1[r] - s0[r]) <= 1e-5 * mag + 1e-30))
                harness_fail(__FILE__, __LINE__, "%s dot_f16_rows hd %lld row %lld: %.9g vs %.9g", k->isa, (long long)hd,
                             (long long)r, s1[r], s0[r]);
        k->axpy_f16_rows(o1, p, kv + 3, (size_t)stride, n_rows, hd);
        ref->axpy_f16_rows(o0, p, kv + 3, (size_t)stride, n_rows, hd);
        for (int64_t i = 0; i < hd; i++)
            if (!(fabs((double)o1[i] - o0[i]) <= 1e-5 * (fabs(o0[i]) + 2)))
                harness_fail(__FILE__, __LINE__, "%s axpy_f16_rows hd %lld at %lld: %.9g vs %.9g", k->isa,
                             (long long)hd, (long long)i, o1[i], o0[i]);
    }
    free(kv);
}

/* Block attention (queries x a run of keys, scores and the weighted sum of
 * values) against the reference, at head sizes with and without a fast
 * path, key counts that leave a partial block of 16, and query counts
 * that leave a partial group of 4. */
static void check_attn_blocks(const cmf__cpu_kernels *k)
{
    const cmf__cpu_kernels *ref = cmf__cpu_kernels_ref();
    const int64_t hds[] = {40, 64, 128, 256}, nks[] = {1, 16, 37}, nq = 7, stride = 300, ss = 41;
    uint16_t *kv = malloc(sizeof(uint16_t) * (size_t)(stride * 37));
    float *q = malloc(sizeof(float) * (size_t)(nq * 256)), *s0 = malloc(sizeof(float) * (size_t)(nq * ss));
    float *s1 = malloc(sizeof(float) * (size_t)(nq * ss)), *o0 = malloc(sizeof(float) * (size_t)(nq * 256));
    float *o1 = malloc(sizeof(float) * (size_t)(nq * 256)), *pr = malloc(sizeof(float) * (size_t)(nq * ss));
    for (int64_t i = 0; i < stride * 37; i++) kv[i] = cmf__f32_to_f16(frand() * 2);
    for (int64_t i = 0; i < nq * ss; i++) pr[i] = frand() * 0.1f;
    for (size_t hi = 0; hi < 4; hi++)
        for (size_t ni = 0; ni < 3; ni++) {
            int64_t hd = hds[hi], nk = nks[ni];
            double mag = 0;
            for (int64_t i = 0; i < nq * hd; i++) q[i] = frand(), o0[i] = o1[i] = frand(), mag += fabs(q[i]) * 2 / (double)nq;
            for (int64_t i = 0; i < nq * ss; i++) s0[i] = s1[i] = -77.0f;
            cmf__kern_qk_f16(k, q, nq, kv + 5, (size_t)stride, nk, hd, s1, ss);
            cmf__kern_qk_f16(ref, q, nq, kv + 5, (size_t)stride, nk, hd, s0, ss);
            for (int64_t i = 0; i < nq; i++)
                for (int64_t j = 0; j < ss; j++)
                    if (j >= nk ? s1[i * ss + j] != -77.0f : !(fabs((double)s1[i * ss + j] - s0[i * ss + j]) <= 1e-5 * mag + 1e-30))
                        harness_fail(__FILE__, __LINE__, "%s qk_f16 hd %lld nk %lld at %lld,%lld: %.9g vs %.9g", k->isa,
                                     (long long)hd, (long long)nk, (long long)i, (long long)j, s1[i * ss + j], s0[i * ss + j]);
            cmf__kern_pv_f16(k, o1, pr, ss, nq, kv + 5, (size_t)stride, nk, hd);
            cmf__kern_pv_f16(ref, o0, pr, ss, nq, kv + 5, (size_t)stride, nk, hd);
            for (int64_t i = 0; i < nq * hd; i++)
                if (!(fabs((double)o1[i] - o0[i]) <= 1e-5 * (fabs(o0[i]) + 2)))
                    harness_fail(__FILE__, __LINE__, "%s pv_f16 hd %lld nk %lld at %lld: %.9g vs %.9g", k->isa,
                                 (long long)hd, (long long)nk, (long long)i, o1[i], o0[i]);
        }
    free(kv), free(q), free(s0), free(s1), free(o0), free(o1), free(pr);
}

/* exp_sum within 2 ulp of expf per value (0 for -inf, NaN kept), silu_mul
 * within 4 ulp of the formula on libm. */
static void check_exp(const cmf__cpu_kernels *k)
{
    float v[101], e[101];
    for (int i = 0; i < 101; i++) v[i] = (float)(i - 95) * 1.37f + frand(); /* -130 .. 8 */
    v[3] = -INFINITY;
    memcpy(e, v, sizeof v);
    double want = 0;
    float got = k->exp_sum(e, 101, 7.5f);
    for (int i = 0; i < 101; i++) {
        float x = expf(v[i] - 7.5f);
        want += x;
        if (!(fabsf(e[i] - x) <= 2.0f * (nextafterf(x, INFINITY) - x)))
            harness_fail(__FILE__, __LINE__, "%s exp_sum at %d: exp(%.9g) = %.9g, expf %.9g", k->isa, i, v[i] - 7.5f, e[i], x);
    }
    CHECK(fabs(got - want) <= 1e-6 * want);
    e[0] = NAN;
    k->exp_sum(e, 1, 0.0f);
    CHECK(isnan(e[0]));
    float x[37], u[37], y[37];
    for (int i = 0; i < 37; i++) x[i] = frand() * 12, u[i] = frand();
    x[5] = -100.0f, x[6] = 100.0f, x[7] = -95.0f; /* exp(-x) past the float range, and just inside */
    k->silu_mul(y, x, u, 37);
    for (int i = 0; i < 37; i++) {
        float w = x[i] / (1.0f + expf(-x[i])) * u[i];
        if (!(fabsf(y[i] - w) <= 4.0f * (nextafterf(fabsf(w), INFINITY) - fabsf(w)) + 1e-37f))
            harness_fail(__FILE__, __LINE__, "%s silu_mul at %d: x %.9g: %.9g vs %.9g", k->isa, i, x[i], y[i], w);
    }
}

static void check_table(const cmf__cpu_kernels *k)
{
    check_f16_rows(k);
    check_f16_row_runs(k);
    check_attn_blocks(k);
    check_exp(k);
    const int dtypes[] = {CMF_DTYPE_F32,    CMF_DTYPE_F16,      CMF_DTYPE_BF16, CMF_DTYPE_Q8_ROW,
                          CMF_DTYPE_Q4_BLOCK, CMF_DTYPE_Q4_TILED, CMF_DTYPE_Q8_2F, CMF_DTYPE_Q4TP};
    const int64_t cols_list[] = {1, 7, 31, 33, 64, 100, 160, 257, 1024};
    const cmf__cpu_kernels *ref = cmf__cpu_kernels_ref();
    int checked = 0;
    for (size_t di = 0; di < sizeof dtypes / sizeof *dtypes; di++)
        for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++) {
            int64_t rows = 5, cols = cols_list[ci];
            qm m;
            if (!make(dtypes[di], rows, cols, &m)) { /* shape not allowed for this dtype */
                release(&m);
                continue;
            }
            float *x = malloc((size_t)cols * 4), *a = malloc((size_t)cols * 4), *b = malloc((size_t)cols * 4);
            for (int64_t i = 0; i < cols; i++) x[i] = frand();
            for (int64_t r = 0; r < rows; r++) {
                k->decode[dtypes[di]](&m.q, r, a);
                ref->decode[dtypes[di]](&m.q, r, b);
                if (memcmp(a, b, (size_t)cols * 4))
                    harness_fail(__FILE__, __LINE__, "%s decode dtype %d cols %lld row %lld differs", k->isa,
                                 dtypes[di], (long long)cols, (long long)r);
                double mag = 0;
                for (int64_t i = 0; i < cols; i++) mag += fabs((double)b[i] * x[i]);
                float d1 = k->dot[dtypes[di]](&m.q, r, x), d0 = ref->dot[dtypes[di]](&m.q, r, x);
                if (!(fabs((double)d1 - d0) <= 1e-5 * mag + 1e-30))
                    harness_fail(__FILE__, __LINE__, "%s dot dtype %d cols %lld row %lld: %.9g vs %.9g", k->isa,
                                 dtypes[di], (long long)cols, (long long)r, d1, d0);
                checked++;
            }
            free(x);
            free(a);
            free(b);
            release(&m);
        }
    CHECK(checked > 100);
    /* f32 helpers */
    for (int64_t n = 1; n < 70; n += 3) {
        float a[80], b[80], y0[80], y1[80];
        double mag = 0, s = 0;
        for (int i = 0; i < n; i++) a[i] = frand(), b[i] = frand(), y0[i] = y1[i] = frand(), mag += fabs(a[i] * b[i]),
                                    s += (double)a[i] * b[i];
        CHECK(fabs(k->dot_f32(a, b, n) - s) <= 1e-5 * mag);
        float xs4[4 * 80], o4[4];
        for (int i = 0; i < 4 * 80; i++) xs4[i] = frand();
        float w2[2 * 80], o8[8];
        for (int i = 0; i < 2 * n; i++) w2[i] = frand();
        k->dot_f32_2x4(w2, xs4, 80, n, o8);
        for (int r2 = 0; r2 < 2; r2++)
            for (int j = 0; j < 4; j++) {
                double sj = 0, mj = 0;
                for (int i = 0; i < n; i++)
                    sj += (double)w2[r2 * n + i] * xs4[j * 80 + i], mj += fabs(w2[r2 * n + i] * xs4[j * 80 + i]);
                CHECK(fabs(o8[r2 * 4 + j] - sj) <= 1e-5 * mj + 1e-30);
            }
        k->dot_f32_x4(a, xs4, 80, n, o4);
        for (int j = 0; j < 4; j++) {
            double sj = 0, mj = 0;
            for (int i = 0; i < n; i++) sj += (double)a[i] * xs4[j * 80 + i], mj += fabs(a[i] * xs4[j * 80 + i]);
            CHECK(fabs(o4[j] - sj) <= 1e-5 * mj + 1e-30);
        }
        k->axpy(y0, 0.37f, a, n);
        ref->axpy(y1, 0.37f, a, n);
        for (int i = 0; i < n; i++) CHECK_NEAR(y0[i], y1[i], 1e-6);
    }
}

static int g_packed_checked; /* shapes the packed kernels ran on */

/* One kernel (pass 0: unpacked mm, 1: packed pmm) of q on m, with that
 * kernel's activations: see check_mmq_shape. */
static void check_mmq_pass(const cmf__cpu_kernels *k, const cmf__kmmq *q, qm *m, int dtype, const uint8_t *pk,
                           int pass, const float *x, int64_t rows, int64_t cols, int64_t n)
{
    const bool alt = pass && q->pquant; /* the packed kernel's own activation layout */
    void (*quant)(const float *, int64_t, void *) = alt ? q->pquant : q->quant;
    const size_t xb = alt ? q->pxbytes(cols) : q->xbytes(cols);
    const int blk = alt ? q->pxblock : q->xblock;
    /* B = 0: f32 activations (f16 / bf16 weights); checked as one block of scale 1 */
    const int64_t B = blk ? blk : cols, ys = rows + 3, nb = (cols + B - 1) / B;
    CHECK(blk == 0 || B == 32 || B == 256);
    CHECK(xb % 64 == 0);
    float *y = malloc((size_t)(n * ys) * 4), *y1 = malloc((size_t)ys * 4);
    float *dec = malloc((size_t)cols * 4), *d = malloc((size_t)nb * 4);
    float *xq8 = malloc((size_t)(nb * B) * sizeof(float)); /* the quantized values (integers but for f32) */
    uint8_t *xq = aligned_alloc(64, (size_t)n * xb);
    for (int64_t t = 0; t < n; t++) quant(x + t * cols, cols, xq + (size_t)t * xb);
    for (int64_t i = 0; i < n * ys; i++) y[i] = -1234.5f;
    if (pass) q->pmm(&m->q, pk, 0, rows, xq, n, y, ys);
    else q->mm(&m->q, 0, rows, xq, n, y, ys);
    for (int64_t t = 0; t < n; t++) {
        const float *xt = x + t * cols;
        for (int64_t b = 0; b < nb && !blk; b++) /* the f32 "quantization" is the identity */
            d[b] = 1.0f;
        for (int64_t i = 0; i < cols && !blk; i++) xq8[i] = q->bf16 ? cmf__bf16_to_f32(cmf__f32_to_bf16(xt[i])) : xt[i];
        for (int64_t b = 0; b < nb && blk; b++) {
            int64_t i1 = cols < B * b + B ? cols : B * b + B;
            float amax = 0;
            for (int64_t i = B * b; i < i1; i++) amax = fabsf(xt[i]) > amax ? fabsf(xt[i]) : amax;
            float id = amax > 0 ? 127.0f / amax : 0.0f;
            d[b] = amax / 127.0f;
            for (int64_t i = B * b; i < i1; i++) xq8[i] = (float)lrintf(xt[i] * id);
        }
        for (int64_t i = 0; i < ys; i++) y1[i] = -1234.5f;
        if (pass) q->pmm(&m->q, pk, 0, rows, xq + (size_t)t * xb, 1, y1, ys); /* the token alone */
        else q->mm(&m->q, 0, rows, xq + (size_t)t * xb, 1, y1, ys);
        for (int64_t r = 0; r < rows; r++) {
            cmf__qmat_decode_row(&m->q, r, dec);
            for (int64_t i = 0; i < cols && q->col_scaled; i++) /* its weights without the column scales */
                dec[i] = (float)(int8_t)m->q.data[r * cols + i] * cmf__f16_to_f32(cmf__rd16(m->q.aux + 2 * r));
            for (int64_t i = 0; i < cols && q->bf16; i++) dec[i] = cmf__bf16_to_f32(cmf__f32_to_bf16(dec[i])); /* as packed */
            double exact = 0, mag = 0, f32 = 0, bound = 0;
            for (int64_t b = 0; b < nb; b++) {
                int64_t i1 = cols < B * b + B ? cols : B * b + B;
                double s = 0, sa = 0, sw = 0;
                for (int64_t i = B * b; i < i1; i++) {
                    s += (double)dec[i] * xq8[i], sa += fabs((double)dec[i] * xq8[i]);
                    sw += fabs(dec[i]), f32 += (double)dec[i] * xt[i];
                }
                exact += s * d[b], mag += sa * d[b], bound += sw * d[b] * 0.5;
            }
            float got = y[t * ys + r];
            if (!(fabs(got - exact) <= 1e-5 * mag + 1e-30) || !(fabs(got - f32) <= bound * 1.0001 + 1e-6))
                harness_fail(__FILE__, __LINE__, "%s %s dtype %d %lldx%lld n %lld: token %lld row %lld: %.9g, exact %.9g, f32 %.9g",
                             k->isa, pass ? "packed" : "mmq", dtype, (long long)rows, (long long)cols, (long long)n,
                             (long long)t, (long long)r, got, exact, f32);
            if (memcmp(&got, &y1[r], 4))
                harness_fail(__FILE__, __LINE__, "%s %s dtype %d cols %lld: token %lld row %lld alone %.9g, in batch %.9g",
                             k->isa, pass ? "packed" : "mmq", dtype, (long long)cols, (long long)t, (long long)r, y1[r], got);
        }
        for (int64_t r = rows; r < ys; r++) CHECK(y[t * ys + r] == -1234.5f && y1[r] == -1234.5f);
    }
    free(y), free(y1), free(dec), free(d), free(xq8), free(xq);
}

/* The integer matmul paths of table k for one dtype at one shape (unpacked,
 * and packed where the table packs): against the exact sum over the same
 * quantized activations (the block rule of kernels.h with the kernel's
 * block length, recomputed here), and against the f32 product within the
 * activation quantization bound Σ_b d_b/2 · Σ_{i in b} |w_i|. A token
 * gives the same bits alone as in the batch. Returns false when no path
 * applies (no kernel, or a q4 row not made of whole groups). */
static bool check_mmq_shape(const cmf__cpu_kernels *k, int dtype, int64_t rows, int64_t cols, int64_t n)
{
    qm m;
    if (!make(dtype, rows, cols, &m)) {
        release(&m);
        return false;
    }
    if (!cmf__kern_mmq_ok(k, &m.q)) {
        CHECK((!k->mmq[dtype].mm && !k->mmq[dtype].pmm) || (dtype != CMF_DTYPE_Q8_ROW && cols % 32));
        release(&m);
        return false;
    }
    const cmf__kmmq *q = &k->mmq[dtype];
    float *x = malloc((size_t)(n * cols) * 4);
    for (int64_t i = 0; i < n * cols; i++) x[i] = frand() * (i % 17 == 0 ? 4.0f : 1.0f);
    if (q->col_scaled) /* q8_2f: the backend quantizes x ⊙ the column scales; so does the check */
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < cols; i++) x[t * cols + i] *= cmf__f16_to_f32(cmf__rd16(m.q.aux2 + 2 * i));
    size_t pbytes = q->pack ? q->pack_bytes(&m.q) : 0;
    uint8_t *pk = pbytes ? aligned_alloc(64, (pbytes + 63) / 64 * 64) : NULL;
    if (pk) {
        const int64_t groups = (rows + CMF__KPACK_ROWS - 1) / CMF__KPACK_ROWS;
        q->pack(&m.q, 0, groups / 2, pk); /* in two calls, as threads do */
        q->pack(&m.q, groups / 2, groups, pk);
    }
    g_packed_checked += pk != NULL;
    CHECK(q->mm || pk); /* a table without mm packs every shape */
    for (int pass = q->mm ? 0 : 1; pass < (pk ? 2 : 1); pass++) check_mmq_pass(k, q, &m, dtype, pk, pass, x, rows, cols, n);
    free(pk);
    free(x);
    release(&m);
    return true;
}

static int check_mmq(const cmf__cpu_kernels *k)
{
    const int dtypes[] = {CMF_DTYPE_Q8_ROW, CMF_DTYPE_Q4_BLOCK, CMF_DTYPE_Q4_TILED, CMF_DTYPE_Q4TP,
                          CMF_DTYPE_Q8_2F,  CMF_DTYPE_F16,      CMF_DTYPE_BF16};
    const int64_t cols_list[] = {7, 32, 33, 96, 100, 160, 224, 257, 480, 544, 896};
    const int64_t rows_list[] = {1, 6, 9, 16, 37, 70}; /* packed groups of 16: one, a partial, several, 4 + a partial */
    const int64_t n_list[] = {1, 3, 6, 9};
    int checked = 0;
    for (size_t di = 0; di < sizeof dtypes / sizeof *dtypes; di++)
        for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++)
            for (size_t ri = 0; ri < sizeof rows_list / sizeof *rows_list; ri++)
                checked += check_mmq_shape(k, dtypes[di], rows_list[ri], cols_list[ci], n_list[(ci + ri) % 4]);
    return checked;
}

TEST(generic_kernels_match_reference)
{
    check_table(cmf__cpu_kernels_generic());
    CHECK(check_mmq(cmf__cpu_kernels_generic()) > 40);
}

TEST(avx512_kernels_match_reference)
{
    const cmf__cpu_kernels *k = cmf__cpu_kernels_avx512();
    if (!k) SKIP("CPU lacks AVX-512 F/BW/VL/DQ/VNNI");
    check_table(k);
    g_packed_checked = 0;
    CHECK(check_mmq(k) > 40);
    CHECK(g_packed_checked > 40); /* q8_row at every width, q4 at whole groups */
    CHECK_EQ_STR(cmf__cpu_kernels_best()->isa, "avx512");
}

/* The opt-in table: f16 / bf16 matmuls as bf16 dot products, checked
 * against the exact sum of the bf16-rounded factors. */
TEST(avx512_bf16dot_kernels_match_reference)
{
    const cmf__cpu_kernels *k = cmf__cpu_kernels_avx512_bf16dot();
    if (!k) SKIP("CPU lacks AVX-512 BF16 (or the AVX-512 table)");
    CHECK(k->mmq[CMF_DTYPE_F16].bf16 && k->mmq[CMF_DTYPE_BF16].bf16);
    g_packed_checked = 0;
    CHECK(check_mmq(k) > 40);
    CHECK(g_packed_checked > 40);
}

TEST(avx2_kernels_match_reference)
{
    const cmf__cpu_kernels *k = cmf__cpu_kernels_avx2();
    if (!k) SKIP("CPU lacks AVX2/FMA/F16C");
    check_table(k);
    g_packed_checked = 0;
    check_mmq(k);
    CHECK(g_packed_checked > 40); /* the packed maddubs kernels: q8_row, q8_2f, q4 */
    /* and the packed f16 / bf16 FMA tiles, which check_mmq ran wherever a shape packs */
    CHECK(k->mmq[CMF_DTYPE_F16].pmm && k->mmq[CMF_DTYPE_BF16].pmm);
    if (!cmf__cpu_kernels_avx512()) CHECK_EQ_STR(cmf__cpu_kernels_best()->isa, "avx2");
}

TEST(neon_kernels_match_reference)
{
    const cmf__cpu_kernels *k = cmf__cpu_kernels_neon();
    if (!k) SKIP("not an aarch64 build");
    check_table(k);
    g_packed_checked = 0;
    CHECK(check_mmq(k) > 40);
    CHECK(cmf__cpu_kernels_best() == k);
    CHECK(k->mmq[CMF_DTYPE_F16].pmm && k->mmq[CMF_DTYPE_BF16].pmm); /* packed f16 / bf16 FMA tiles */
    /* with the dot-product extension the packed SDOT kernels are checked too */
    if (k->mmq[CMF_DTYPE_Q8_ROW].pmm) CHECK(g_packed_checked > 40);
    printf("  %s: packed shapes checked: %d\n", k->isa, g_packed_checked);
}

int main(void)
{
    RUN(generic_kernels_match_reference);
    RUN(avx2_kernels_match_reference);
    RUN(avx512_kernels_match_reference);
    RUN(avx512_bf16dot_kernels_match_reference);
    RUN(neon_kernels_match_reference);
    return harness_done();
}
