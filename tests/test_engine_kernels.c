/* test_engine_kernels.c — every CPU kernel table (generic, avx2 when the CPU
 * has it) against the scalar reference (the quant module's
 * cmf__qmat_dot_row / decode_row) on odd sizes, and the backend ops
 * (matmul one token and batched, attention with window / soft-cap / sinks,
 * rope, rmsnorm) against naive loops written here.
 * Tolerances: decode must be bit-exact (same f32 products); a dot product
 * may differ only by summation order: |fast - ref| <= 1e-5 * sum|w_i x_i|
 * + 1e-30. Ops: relative 1e-5 of the output's max magnitude. */
#include "harness.h"
#include "compute/backend.h"
#include "compute/cpu/kernels.h"
#include "quant/quant.h"

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

static void check_table(const cmf__cpu_kernels *k)
{
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

TEST(generic_kernels_match_reference) { check_table(cmf__cpu_kernels_generic()); }

TEST(avx2_kernels_match_reference)
{
    const cmf__cpu_kernels *k = cmf__cpu_kernels_avx2();
    if (!k) SKIP("CPU lacks AVX2/FMA/F16C");
    check_table(k);
    CHECK_EQ_STR(cmf__cpu_kernels_best()->isa, "avx2");
}

static double maxabs(const float *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

TEST(backend_matmul_one_and_batched)
{
    const int dtypes[] = {CMF_DTYPE_F32, CMF_DTYPE_BF16, CMF_DTYPE_Q8_ROW, CMF_DTYPE_Q4_BLOCK, CMF_DTYPE_Q4_TILED};
    for (int threads = 1; threads <= 3; threads += 2) {
        cmf__backend *be = cmf__cpu_backend_new(threads, false);
        CHECK(be != NULL);
        if (!be) return;
        CHECK_OK(be->ops->reserve(be, 4096, 64));
        for (size_t di = 0; di < 5; di++) {
            int64_t rows = 301, cols = 256; /* above SMALL_WORK: the pool runs */
            qm m;
            CHECK(make(dtypes[di], rows, cols, &m));
            for (int64_t n = 1; n <= 7; n += 3) {
                float *x = malloc((size_t)(n * (cols + 3)) * 4), *y = malloc((size_t)(n * (rows + 1)) * 4),
                      *w = malloc((size_t)cols * 4);
                for (int64_t i = 0; i < n * (cols + 3); i++) x[i] = frand();
                be->ops->matmul(be, &m.q, x, cols + 3, n, y, rows + 1); /* strided rows */
                double err = 0;
                for (int64_t t = 0; t < n; t++)
                    for (int64_t r = 0; r < rows; r++) {
                        cmf__qmat_decode_row(&m.q, r, w);
                        double s = 0;
                        for (int64_t i = 0; i < cols; i++) s += (double)w[i] * x[t * (cols + 3) + i];
                        double e = fabs(s - y[t * (rows + 1) + r]);
                        err = e > err ? e : err;
                    }
                CHECK(err <= 1e-5 * (maxabs(y, (size_t)(n * (rows + 1))) + 1));
                free(x);
                free(y);
                free(w);
            }
            release(&m);
        }
        cmf__backend_free(be);
    }
}

/* naive attention for one query row, one head */
static void naive_attn(const cmf__attn_desc *d, int64_t t, int64_t h, float *out)
{
    int64_t hd = d->head_dim, kvh = h / (d->n_head / d->n_head_kv), p = d->pos[t];
    int64_t lo = d->window ? p - d->window + 1 : 0;
    if (lo < 0) lo = 0;
    double sc[256], mx = d->sinks ? d->sinks[h] : -1e30, sum = 0;
    for (int64_t s = lo; s <= p; s++) {
        double v = 0;
        for (int64_t i = 0; i < hd; i++)
            v += (double)d->q[t * d->q_stride + h * hd + i] * d->k_cache[(s % d->cap) * d->kv_stride + kvh * hd + i];
        v *= d->scale;
        if (d->softcap > 0) v = d->softcap * tanh(v / d->softcap);
        sc[s - lo] = v;
        mx = v > mx ? v : mx;
    }
    if (d->sinks) sum = exp(d->sinks[h] - mx);
    for (int64_t s = lo; s <= p; s++) sum += sc[s - lo] = exp(sc[s - lo] - mx);
    for (int64_t i = 0; i < hd; i++) {
        double o = 0;
        for (int64_t s = lo; s <= p; s++) o += sc[s - lo] / sum * d->v_cache[(s % d->cap) * d->kv_stride + kvh * hd + i];
        out[i] = (float)o;
    }
}

TEST(backend_attention_window_softcap_sinks)
{
    cmf__backend *be = cmf__cpu_backend_new(2, false);
    CHECK(be != NULL);
    if (!be) return;
    CHECK_OK(be->ops->reserve(be, 64, 64));
    const int64_t nh = 4, nkv = 2, hd = 10, cap = 13, n = 5;
    float q[5 * 40], kc[13 * 20], vc[13 * 20], out[5 * 40], want[10], sinks[4] = {0.5f, -1, 2, 0};
    int32_t pos[5] = {20, 21, 22, 23, 24};
    for (size_t i = 0; i < sizeof q / 4; i++) q[i] = frand() * 2;
    for (size_t i = 0; i < sizeof kc / 4; i++) kc[i] = frand() * 2, vc[i] = frand();
    for (int variant = 0; variant < 4; variant++) {
        cmf__attn_desc d = {.n_tok = n, .pos = pos, .q = q, .q_stride = nh * hd, .k_cache = kc, .v_cache = vc,
                            .kv_stride = nkv * hd, .cap = cap, .n_head = nh, .n_head_kv = nkv, .head_dim = hd,
                            .window = variant & 1 ? 6 : 9, .scale = 0.3f, .softcap = variant & 2 ? 5.0f : 0,
                            .sinks = variant == 3 ? sinks : NULL, .out = out, .out_stride = nh * hd};
        be->ops->attention(be, &d);
        for (int64_t t = 0; t < n; t++)
            for (int64_t h = 0; h < nh; h++) {
                naive_attn(&d, t, h, want);
                for (int64_t i = 0; i < hd; i++) CHECK_NEAR(out[t * nh * hd + h * hd + i], want[i], 1e-5);
            }
    }
    cmf__backend_free(be);
}

TEST(backend_rope_and_rmsnorm)
{
    cmf__backend *be = cmf__cpu_backend_new(1, false);
    CHECK(be != NULL);
    if (!be) return;
    float inv[4] = {1.0f, 0.1f, 0.01f, 0.001f};
    cmf__rope_table rt = {8, inv, 1.0f};
    float x[2 * 24], y[2 * 24];
    int32_t pos[2] = {3, 17};
    for (int i = 0; i < 48; i++) x[i] = y[i] = frand();
    be->ops->rope(be, x, 2, 24, 2, 12, pos, &rt); /* head_dim 12, 8 rotated */
    for (int t = 0; t < 2; t++)
        for (int h = 0; h < 2; h++) {
            const float *a = y + t * 24 + h * 12;
            const float *b = x + t * 24 + h * 12;
            for (int i = 0; i < 4; i++) {
                double th = (double)(float)(pos[t] * inv[i]);
                CHECK_NEAR(b[i], a[i] * cos(th) - a[i + 4] * sin(th), 1e-5);
                CHECK_NEAR(b[i + 4], a[i + 4] * cos(th) + a[i] * sin(th), 1e-5);
            }
            for (int i = 8; i < 12; i++) CHECK(b[i] == a[i]); /* unrotated tail */
        }
    float w[12], o[24];
    for (int i = 0; i < 12; i++) w[i] = frand();
    be->ops->rmsnorm(be, y, o, 2, 12, 12, w, 1e-6f, true);
    double ss = 0;
    for (int i = 0; i < 12; i++) ss += (double)y[i] * y[i];
    for (int i = 0; i < 12; i++) CHECK_NEAR(o[i], y[i] / sqrt(ss / 12 + 1e-6) * (1 + w[i]), 1e-5);
    cmf__backend_free(be);
}

int main(void)
{
    RUN(generic_kernels_match_reference);
    RUN(avx2_kernels_match_reference);
    RUN(backend_matmul_one_and_batched);
    RUN(backend_attention_window_softcap_sinks);
    RUN(backend_rope_and_rmsnorm);
    return harness_done();
}
