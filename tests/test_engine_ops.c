/* test_engine_ops.c — the op suite: every op of the backend table, for
 * every element type it takes, at odd shapes, run as a one-node graph on
 * each backend present (the CPU with its best kernels and with the scalar
 * reference kernels), against naive loops written here in double. Also
 * the graph check's refusals and out-of-range slots as errors.
 * Tolerance: relative 1e-5 of the output's largest magnitude (f32 ops),
 * 2e-3 through an f16 cache, 2e-2 through a q8 cache (int8 with one scale
 * per head row: error <= scale/2 per value). Comparisons fail on NaN. */
#include "harness.h"
#include "compute/cpu/kernels.h"
#include "compute/backend.h"
#include "quant/quant.h"
#include "util/buf.h"
#ifdef CMF_HAVE_VULKAN
#include "compute/vulkan/vk_backend.h"
#endif
#include "vk_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 0x1234567;
static float frand(void)
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Each backend present: the fast CPU, the reference CPU and, when the build
 * and the machine have one, the Vulkan device (Mesa's lavapipe in CI),
 * twice: with the kernel variants it picks (subgroup reductions where the
 * device has them) and with the plain ones (CMF_VK_NO_SUBGROUP=1). */
#define N_BACKENDS 4
static cmf__backend *backend(int i)
{
    if (i < 2) return cmf__cpu_backend_new(i == 0 ? 3 : 1, i == 1);
#ifdef CMF_HAVE_VULKAN
    if (i == 3) setenv("CMF_VK_NO_SUBGROUP", "1", 1);
    cmf__backend *be = vk_test_backend_new();
    if (i == 3) unsetenv("CMF_VK_NO_SUBGROUP");
    static bool said;
    if (!be && !said) printf("*** no Vulkan device (%s): Vulkan op tests SKIPPED ***\n", cmf_last_error());
    if (be && !said) printf("%s\n", be->ops->device(be));
    said = true;
    return be;
#else
    static bool said;
    if (!said) printf("*** this build has no Vulkan backend: Vulkan op tests SKIPPED ***\n");
    said = true;
    return NULL;
#endif
}
/* Weight dtypes the Vulkan backend reads dequantized to f16 (uploaded so):
 * their results carry the f16 rounding of each weight (2^-11 relative), so
 * a matmul is held to 1e-3 instead of 1e-5 (measured on lavapipe: at most
 * 3.0e-4 over q4_tiled and q4tp), a get_rows to 2^-11. */
/* Whether backend bi is Vulkan with prompt chunks on NV cooperative
 * matrices (f16 operands): their matmuls are held to 3e-3. */
static bool vk_coop(int bi, const cmf__backend *be)
{
#ifdef CMF_HAVE_VULKAN
    return bi >= 2 && cmf__vk_backend_coop(be);
#else
    (void)bi, (void)be;
    return false;
#endif
}

static bool vk_f16_dtype(int bi, int dtype)
{
#ifdef CMF_HAVE_VULKAN
    return bi >= 2 && !cmf__vk_reads_dtype(dtype);
#else
    (void)bi, (void)dtype;
    return false;
#endif
}

/* A backend tensor of rows x cols filled from host floats (or ints). */
static cmf__ten upload(cmf__backend *be, cmf__etype t, int64_t rows, int64_t cols, const void *host)
{
    cmf__buffer *buf = NULL;
    size_t bytes = (size_t)rows * cmf__etype_row_bytes(t, cols, 0);
    CHECK_OK(be->ops->buffer_new(be, bytes, t == CMF__E_I32 ? CMF__BUF_HOST : 0, "test", &buf));
    if (host && buf) CHECK_OK(be->ops->set(be, buf, 0, host, bytes));
    return cmf__ten_make(buf, 0, t, rows, cols);
}

static void download(cmf__backend *be, cmf__ten t, float *host)
{
    CHECK_OK(be->ops->get(be, t.buf, t.off, host, (size_t)t.rows * t.nb));
}

static cmf_status run1(cmf__backend *be, const cmf__node *nd)
{
    cmf__graph g = {0};
    cmf_status st = cmf__graph_push(&g, nd);
    if (!st) st = cmf__graph_check(&g);
    if (!st) st = be->ops->prepare(be, &g);
    if (!st) st = be->ops->compute(be, &g);
    cmf__graph_free(&g);
    return st;
}

/* Worst |got - want| relative to max|want|; +inf on NaN or nothing. */
static double rel(const float *got, const double *want, size_t n)
{
    double mx = 0, err = 0;
    if (!n) return INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(want[i])) return INFINITY;
        mx = fabs(want[i]) > mx ? fabs(want[i]) : mx;
        err = fabs(got[i] - want[i]) > err ? fabs(got[i] - want[i]) : err;
    }
    return err / (mx > 0 ? mx : 1);
}

#define CHECK_REL(got, want, n, tol, what)                                                                          \
    do {                                                                                                           \
        double r_ = rel(got, want, n);                                                                             \
        if (!(r_ <= (tol))) harness_fail(__FILE__, __LINE__, "%s: rel %.3g > %.3g", what, r_, (double)(tol));    \
    } while (0)

/* A weight of `dtype` from f32 values; the view borrows qb's bytes. */
static void make_qmat(int dtype, const float *w, int64_t rows, int64_t cols, cmf__buf *qb, cmf__qmat *q)
{
    cmf__quant_opts o = cmf__quant_opts_default();
    uint64_t shape[2] = {(uint64_t)rows, (uint64_t)cols};
    memset(qb, 0, sizeof *qb);
    CHECK_OK(cmf__quantize(dtype, w, rows, cols, &o, qb, "test"));
    CHECK_OK(cmf__qmat_init(q, dtype, qb->data, qb->len, 2, shape, "test"));
}

static void drop(cmf__backend *be, cmf__ten *ts, int n)
{
    for (int i = 0; i < n; i++) be->ops->buffer_free(be, ts[i].buf);
}

/* A zeroed KV cache of `rows` rows of kvd values of type t (q8: a scale per
 * head of hd), in a buffer of its own (freed with drop). */
static cmf__ten kv_cache(cmf__backend *be, cmf__etype t, int64_t rows, int64_t kvd, int64_t hd, const char *what)
{
    size_t rb = cmf__etype_row_bytes(t, kvd, hd);
    cmf__buffer *buf = NULL;
    CHECK_OK(be->ops->buffer_new(be, rb * (size_t)rows, 0, what, &buf));
    return (cmf__ten){buf, 0, t, rows, kvd, rb, hd};
}

TEST(matmul_every_dtype_strided_bias)
{
    const int dtypes[] = {CMF_DTYPE_F32, CMF_DTYPE_F16, CMF_DTYPE_BF16, CMF_DTYPE_Q8_ROW, CMF_DTYPE_Q8_2F,
                          CMF_DTYPE_Q4_BLOCK, CMF_DTYPE_Q4_TILED, CMF_DTYPE_Q4TP};
    for (int bi = 0; bi < N_BACKENDS; bi++) {
        cmf__backend *be = backend(bi);
        CHECK(be != NULL || bi >= 2);
        if (!be) continue;
        const size_t n_dt = sizeof dtypes / sizeof *dtypes;
        if (bi >= 2) printf("  vulkan matmul: cooperative-matrix GEMM %s\n", vk_coop(bi, be) ? "on" : "off");
        for (size_t dk = 0; dk < 3 * n_dt; dk++) { /* every dtype at 256 and 1056 columns, then at 84 where it allows */
            const size_t di = dk % n_dt;
            if (dk >= 2 * n_dt && cmf__dtype_get(dtypes[di])->needs_cols32) continue;
            /* 301 rows: above the single-thread threshold, the pool runs, and not a whole number of the GPU
             * matvec's 4-row workgroups (an even count where q8_2f's matvec needs one); 84 columns: off the
             * GPU's 16-byte loads; 1056: several loads per matvec lane, and a partial last round */
            const int64_t cols = dk < n_dt ? 256 : dk < 2 * n_dt ? 1056 : 84;
            const int64_t rows = dtypes[di] == CMF_DTYPE_Q8_2F && dk < n_dt ? 302 : 301;
            float *w = malloc((size_t)(rows * cols) * 4), *bias = malloc((size_t)rows * 4), *dec = malloc((size_t)cols * 4);
            for (int64_t i = 0; i < rows * cols; i++) w[i] = frand() * (i % 13 == 0 ? 3.0f : 0.5f);
            for (int64_t i = 0; i < rows; i++) bias[i] = frand();
            cmf__buf qb;
            cmf__qmat q;
            make_qmat(dtypes[di], w, rows, cols, &qb, &q);
            /* one token, the GPU matvec's token blocks (1, 2, 4, 8; 3 in a block of 4), a prompt chunk (tiled on
             * the GPU; 150: several token tiles of every GEMM, a partial last one); activation rows padded by 4
             * (the matvec's vec4 loads) except at 7 (the plain matmul) */
            static const int64_t ns[] = {1, 2, 3, 4, 7, 8, 37, 150};
            for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
                const int64_t n = ns[ni], xc = cols + (n == 7 ? 3 : 4);
                float *x = malloc((size_t)(n * xc) * 4), *y = malloc((size_t)(n * (rows + 1)) * 4);
                double *want = malloc((size_t)(n * rows) * 8);
                for (int64_t i = 0; i < n * xc; i++) x[i] = frand();
                cmf__ten tx = upload(be, CMF__E_F32, n, xc, x), ty = upload(be, CMF__E_F32, n, rows + 1, NULL);
                cmf__node nd = {.op = CMF__OP_MATMUL, .dst = cmf__ten_cols(ty, 0, rows), .a = cmf__ten_cols(tx, 0, cols),
                                .w = &q, .v = n == 4 ? bias : NULL};
                CHECK_OK(run1(be, &nd));
                download(be, ty, y);
                for (int64_t r = 0; r < rows; r++) {
                    cmf__qmat_decode_row(&q, r, dec);
                    for (int64_t t = 0; t < n; t++) {
                        double s = n == 4 ? bias[r] : 0;
                        for (int64_t i = 0; i < cols; i++) s += (double)dec[i] * x[t * xc + i];
                        want[t * rows + r] = s;
                    }
                }
                float *yc = malloc((size_t)(n * rows) * 4);
                for (int64_t t = 0; t < n; t++) memcpy(yc + t * rows, y + t * (rows + 1), (size_t)rows * 4);
                char what_[64];
                snprintf(what_, sizeof what_, "matmul dtype %d on backend %d", dtypes[di], bi);
                /* the fast CPU backend's integer kernels quantize activations to int8
                 * per block (error <= max|x|/254 per value; measured rel <= 4.4e-3);
                 * Vulkan reads the dtypes it has no shader for from f16 copies */
                const cmf__kmmq *iq = &cmf__cpu_kernels_best()->mmq[dtypes[di]];
                bool int8 = bi == 0 && (iq->mm || iq->pmm) && iq->xblock > 0; /* f16 / bf16 packed: f32 */
                double tol = int8 ? 1e-2 : vk_f16_dtype(bi, dtypes[di]) ? 1e-3 : 1e-5;
                if (vk_coop(bi, be) && n >= 9 && dtypes[di] != CMF_DTYPE_F32)
                    tol = 3e-3; /* NV tensor cores: activations (and bf16 / q8 / q4 weights) rounded to f16 */
                CHECK_REL(yc, want, (size_t)(n * rows), tol, what_);
                cmf__ten ts[] = {tx, ty};
                drop(be, ts, 2);
                free(x), free(y), free(yc), free(want);
            }
            cmf__qmat_free(&q);
            cmf__buf_free(&qb);
            free(w), free(bias), free(dec);
        }
        cmf__backend_free(be);
    }
}

static double act_ref(int act, double x, double u)
{
    switch (act) {
    case 1: return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))) * u;
    case 2: return 0.5 * x * (1 + erf(x / sqrt(2.0))) * u;
    case 3:
        x = x < 7 ? x : 7;
        u = u < -7 ? -7 : u > 7 ? 7 : u;
        return (u + 1) * x / (1 + exp(-1.702 * x));
    default: return x / (1 + exp(-x)) * u;
    }
}

TEST(elementwise_norm_rope_mask_rows)
{
    const int64_t R = 5, C = 37;
    float a[5 * 37], b[5 * 37], y[5 * 37];
    double want[5 * 37];
    for (int i = 0; i < R * C; i++) a[i] = frand() * 4, b[i] = frand() * 4;
    for (int bi = 0; bi < N_BACKENDS; bi++) {
        cmf__backend *be = backend(bi);
        if (!be) continue;
        cmf__ten ta = upload(be, CMF__E_F32, R, C, a), tb = upload(be, CMF__E_F32, R, C, b),
                 ty = upload(be, CMF__E_F32, R, C, NULL);
        /* add, scale, mul, sigmoid_mul, softcap, glu (4 activations) */
        for (int k = 0; k < 9; k++) {
            cmf__node nd = {.dst = ty, .a = ta, .b = tb};
            for (int i = 0; i < R * C; i++) {
                double x = a[i], z = b[i];
                switch (k) {
                case 0: nd.op = CMF__OP_ADD, nd.f[0] = 0.5f, want[i] = x + 0.5 * z; break;
                case 1: nd.op = CMF__OP_SCALE, nd.f[0] = -1.5f, want[i] = -1.5 * x; break;
                case 2: nd.op = CMF__OP_MUL, want[i] = x * z; break;
                case 3: nd.op = CMF__OP_SIGMOID_MUL, want[i] = x / (1 + exp(-z)); break;
                case 4: nd.op = CMF__OP_SOFTCAP, nd.f[0] = 0.5f, nd.f[1] = 1.5f, want[i] = 1.5 * tanh(x * 0.5 / 1.5); break;
                default:
                    nd.op = CMF__OP_GLU, nd.i[0] = k - 5, nd.f[0] = 1.702f, nd.f[1] = 7.0f;
                    want[i] = act_ref(k - 5, x, z);
                    break;
                }
            }
            CHECK_OK(run1(be, &nd));
            download(be, ty, y);
            CHECK_REL(y, want, (size_t)(R * C), 1e-5, cmf__op_name(nd.op));
        }
        /* rmsnorm over groups of 37 and over the whole row with (1 + w) */
        float w[37];
        for (int i = 0; i < C; i++) w[i] = frand();
        for (int plus = 0; plus < 2; plus++) {
            cmf__node nd = {.op = CMF__OP_RMSNORM, .dst = ty, .a = ta, .v = w, .f = {1e-5f}, .i = {C, plus}};
            CHECK_OK(run1(be, &nd));
            download(be, ty, y);
            for (int r = 0; r < R; r++) {
                double ss = 0;
                for (int i = 0; i < C; i++) ss += (double)a[r * C + i] * a[r * C + i];
                for (int i = 0; i < C; i++)
                    want[r * C + i] = a[r * C + i] / sqrt(ss / C + 1e-5) * (plus ? 1 + w[i] : w[i]);
            }
            CHECK_REL(y, want, (size_t)(R * C), 1e-5, "rmsnorm");
        }
        /* mask: zero column blocks of 4 whose bit is clear (bits 1 and 5 clear) */
        static const uint8_t bits[2] = {0xdd, 0xff};
        CHECK_OK(be->ops->set(be, ty.buf, 0, a, sizeof a));
        cmf__node mk = {.op = CMF__OP_MASK, .dst = cmf__ten_cols(ty, 0, 36), .bits = bits, .i = {4}};
        CHECK_OK(run1(be, &mk));
        download(be, ty, y);
        for (int i = 0; i < R * C; i++) {
            int c = i % C;
            want[i] = (c < 36 && ((c / 4) == 1 || (c / 4) == 5)) ? 0 : a[i];
        }
        CHECK_REL(y, want, (size_t)(R * C), 0, "mask");
        /* rows: gather rows 4, 0, 4 */
        int32_t idx[3] = {4, 0, 4};
        cmf__ten ti = upload(be, CMF__E_I32, 3, 1, idx);
        cmf__node rw = {.op = CMF__OP_ROWS, .dst = cmf__ten_rows(ty, 0, 3), .a = ta, .b = ti};
        CHECK_OK(run1(be, &rw));
        download(be, ty, y);
        for (int t = 0; t < 3; t++)
            for (int i = 0; i < C; i++) want[t * C + i] = a[idx[t] * C + i];
        CHECK_REL(y, want, (size_t)(3 * C), 0, "rows");
        idx[1] = 5; /* out of range: an error, not a read */
        CHECK_OK(be->ops->set(be, ti.buf, 0, idx, sizeof idx));
        CHECK_ERR(run1(be, &rw), CMF_ERR_BOUNDS, "outside");
        /* rope: 2 heads of 12, 8 rotated, positions 3 and 17 (rows 0, 1) */
        float inv[4] = {1.0f, 0.1f, 0.01f, 0.001f};
        cmf__rope_table rt = {8, inv, 1.0f};
        int32_t pos[2] = {3, 17};
        cmf__ten tp = upload(be, CMF__E_I32, 2, 1, pos), tr = upload(be, CMF__E_F32, 2, 24, a);
        cmf__node rp = {.op = CMF__OP_ROPE, .dst = tr, .b = tp, .ext = &rt, .i = {2, 12}};
        CHECK_OK(run1(be, &rp));
        download(be, tr, y);
        for (int t = 0; t < 2; t++)
            for (int h = 0; h < 2; h++) {
                const float *x = a + t * 24 + h * 12;
                double *o = want + t * 24 + h * 12;
                for (int i = 0; i < 4; i++) {
                    double th = (double)(float)(pos[t] * inv[i]);
                    o[i] = x[i] * cos(th) - x[i + 4] * sin(th);
                    o[i + 4] = x[i + 4] * cos(th) + x[i] * sin(th);
                }
                for (int i = 8; i < 12; i++) o[i] = x[i];
            }
        CHECK_REL(y, want, 48, 1e-5, "rope");
        cmf__ten ts[] = {ta, tb, ty, ti, tp, tr};
        drop(be, ts, 6);
        cmf__backend_free(be);
    }
}

TEST(get_rows_every_dtype)
{
    const int dtypes[] = {CMF_DTYPE_F32, CMF_DTYPE_F16, CMF_DTYPE_BF16, CMF_DTYPE_Q8_ROW, CMF_DTYPE_Q4_BLOCK};
    const int64_t rows = 9, cols = 64;
    float w[9 * 64], y[3 * 64], dec[64];
    double want[3 * 64];
    for (int i = 0; i < rows * cols; i++) w[i] = frand();
    int32_t ids[3] = {8, 0, 3};
    for (int bi = 0; bi < N_BACKENDS; bi++) {
        cmf__backend *be = backend(bi);
        if (!be) continue;
        for (size_t di = 0; di < sizeof dtypes / sizeof *dtypes; di++) {
            cmf__buf qb;
            cmf__qmat q;
            make_qmat(dtypes[di], w, rows, cols, &qb, &q);
            cmf__ten ti = upload(be, CMF__E_I32, 3, 1, ids), ty = upload(be, CMF__E_F32, 3, cols, NULL);
            cmf__node nd = {.op = CMF__OP_GET_ROWS, .dst = ty, .a = ti, .w = &q, .f = {2.0f}};
            CHECK_OK(run1(be, &nd));
            download(be, ty, y);
            for (int t = 0; t < 3; t++) {
                cmf__qmat_decode_row(&q, ids[t], dec);
                for (int i = 0; i < cols; i++) want[t * cols + i] = 2.0 * dec[i];
            }
            char what_[64];
            snprintf(what_, sizeof what_, "get_rows dtype %d on backend %d", dtypes[di], bi);
            CHECK_REL(y, want, (size_t)(3 * cols), vk_f16_dtype(bi, dtypes[di]) ? 0x1p-11 : 0, what_); /* one f16 rounding */
            int32_t bad[3] = {0, 9, 1};
            CHECK_OK(be->ops->set(be, ti.buf, 0, bad, sizeof bad));
            CHECK_ERR(run1(be, &nd), CMF_ERR_BOUNDS, "outside");
            cmf__ten ts[] = {ti, ty};
            drop(be, ts, 2);
            cmf__qmat_free(&q);
            cmf__buf_free(&qb);
        }
        cmf__backend_free(be);
    }
}

/* Naive attention of query t, head h over sequence seq's cache (f32 host copy). */
static void naive_attn(const float *q, int64_t qs, const float *kc, const float *vc, int64_t kvs, int64_t cap,
                       int64_t seq, int64_t p, int64_t nh, int64_t nkv, int64_t hd, int64_t window, double scale,
                       double softcap, const float *sinks, int64_t h, double *out)
{
    int64_t kvh = h / (nh / nkv), lo = window ? p - window + 1 : 0;
    if (lo < 0) lo = 0;
    double sc[256], mx = sinks ? sinks[h] : -1e30, sum = 0;
    for (int64_t s = lo; s <= p; s++) {
        double v = 0;
        for (int64_t i = 0; i < hd; i++) v += (double)q[h * hd + i] * kc[(seq * cap + s % cap) * kvs + kvh * hd + i];
        v *= scale;
        if (softcap > 0) v = softcap * tanh(v / softcap);
        sc[s - lo] = v;
        mx = v > mx ? v : mx;
    }
    if (sinks) sum = exp(sinks[h] - mx);
    for (int64_t s = lo; s <= p; s++) sum += sc[s - lo] = exp(sc[s - lo] - mx);
    for (int64_t i = 0; i < hd; i++) {
        double o = 0;
        for (int64_t s = lo; s <= p; s++) o += sc[s - lo] / sum * vc[(seq * cap + s % cap) * kvs + kvh * hd + i];
        out[i] = o;
        (void)qs;
    }
}

TEST(kv_write_and_attention_every_cache_type)
{
    /* 2 sequences, ring of 13 rows each, GQA 4:2, head_dim 10; queries of both sequences in one call */
    const int64_t nh = 4, nkv = 2, hd = 10, cap = 13, n_seq = 2, n = 6, kvd = nkv * hd;
    float kc[2 * 13 * 20], vc[2 * 13 * 20], q[6 * 40], out[6 * 40], sinks[4] = {0.5f, -1, 2, 0};
    double want[6 * 40];
    int32_t pos[6] = {20, 21, 22, 5, 6, 24}, seq[6] = {0, 0, 0, 1, 1, 0};
    for (size_t i = 0; i < sizeof kc / 4; i++) kc[i] = frand() * 2, vc[i] = frand();
    for (size_t i = 0; i < sizeof q / 4; i++) q[i] = frand() * 2;
    static const cmf__etype types[] = {CMF__E_F32, CMF__E_F16, CMF__E_Q8};
    static const double tol[] = {1e-5, 2e-3, 2e-2};
    for (int bi = 0; bi < N_BACKENDS; bi++) {
        cmf__backend *be = backend(bi);
        if (!be) continue;
        for (int ti = 0; ti < 3; ti++) {
            /* fill the caches through kv_write: every row of both rings */
            cmf__ten K = kv_cache(be, types[ti], n_seq * cap, kvd, hd, "k");
            cmf__ten V = kv_cache(be, types[ti], n_seq * cap, kvd, hd, "v");
            int32_t wpos[26], wseq[26];
            for (int r = 0; r < 26; r++) wseq[r] = r / 13, wpos[r] = r % 13 + 13; /* positions 13..25 land on slots 0..12 */
            cmf__ten tk = upload(be, CMF__E_F32, 26, kvd, kc), tv = upload(be, CMF__E_F32, 26, kvd, vc),
                     twp = upload(be, CMF__E_I32, 26, 1, wpos), tws = upload(be, CMF__E_I32, 26, 1, wseq);
            cmf__node wk = {.op = CMF__OP_KV_WRITE, .dst = K, .a = tk, .b = twp, .c = tws, .i = {cap}};
            cmf__node wv = {.op = CMF__OP_KV_WRITE, .dst = V, .a = tv, .b = twp, .c = tws, .i = {cap}};
            CHECK_OK(run1(be, &wk));
            CHECK_OK(run1(be, &wv));
            cmf__ten tq = upload(be, CMF__E_F32, n, nh * hd, q), to = upload(be, CMF__E_F32, n, nh * hd, NULL),
                     tp = upload(be, CMF__E_I32, n, 1, pos), ts = upload(be, CMF__E_I32, n, 1, seq);
            for (int variant = 0; variant < 4; variant++) {
                cmf__attn_params p = {K, V, cap, nh, nkv, hd, variant & 1 ? 6 : 9, 0.3f, variant & 2 ? 5.0f : 0,
                                      variant == 3 ? sinks : NULL, NULL};
                cmf__node at = {.op = CMF__OP_ATTN, .dst = to, .a = tq, .b = tp, .c = ts, .ext = &p};
                CHECK_OK(run1(be, &at));
                download(be, to, out);
                for (int64_t t = 0; t < n; t++)
                    for (int64_t h = 0; h < nh; h++)
                        naive_attn(q + t * nh * hd, nh * hd, kc, vc, kvd, cap, seq[t], pos[t], nh, nkv, hd, p.window,
                                   0.3, p.softcap, p.sinks, h, want + t * nh * hd + h * hd);
                char what[64];
                snprintf(what, sizeof what, "attention %s variant %d", cmf__etype_name(types[ti]), variant);
                CHECK_REL(out, want, (size_t)(n * nh * hd), tol[ti], what);
            }
            int32_t bad[6] = {0, 0, 0, 2, 1, 0}; /* sequence 2 of 2: refused */
            CHECK_OK(be->ops->set(be, ts.buf, 0, bad, sizeof bad));
            cmf__attn_params p = {K, V, cap, nh, nkv, hd, 0, 0.3f, 0, NULL, NULL};
            cmf__node at = {.op = CMF__OP_ATTN, .dst = to, .a = tq, .b = tp, .c = ts, .ext = &p};
            CHECK_ERR(run1(be, &at), CMF_ERR_BOUNDS, "sequence 2");
            cmf__ten all[] = {K, V, tk, tv, twp, tws, tq, to, tp, ts};
            drop(be, all, 10);
        }
        cmf__backend_free(be);
    }
}

TEST(graph_check_refuses_bad_shapes)
{
    cmf__backend *be = backend(0);
    if (!be) return;
    cmf__ten a = upload(be, CMF__E_F32, 3, 8, NULL), b = upload(be, CMF__E_F32, 3, 7, NULL);
    cmf__node add = {.op = CMF__OP_ADD, .dst = a, .a = a, .b = b};
    CHECK_ERR(run1(be, &add), CMF_ERR_BACKEND, "add");
    cmf__node norm = {.op = CMF__OP_RMSNORM, .dst = a, .a = a, .i = {3}};
    CHECK_ERR(run1(be, &norm), CMF_ERR_BACKEND, "group 3");
    float x = 1;
    CHECK_ERR(be->ops->set(be, a.buf, 3 * 8 * 4, &x, 4), CMF_ERR_BOUNDS, "outside");
    cmf__ten ts[] = {a, b};
    drop(be, ts, 2);
    cmf__backend_free(be);
}

/* Attention over more keys than one block of the GPU's one-pass softmax
 * (64): 150 positions in one ring, queries near its end, full and
 * windowed, with sinks; the same naive loops, 1e-5 (f32 cache). */
TEST(attention_long_span)
{
    enum { CAP = 150, HD = 12, NH = 2, NKV = 1, NQ = 3 };
    static float kc[CAP * HD], vc[CAP * HD], q[NQ * NH * HD], out[NQ * NH * HD];
    double want[NQ * NH * HD];
    float sinks[NH] = {0.25f, -0.5f};
    int32_t wpos[CAP], wseq[CAP], pos[NQ] = {149, 100, 70}, seq[NQ] = {0, 0, 0};
    for (int i = 0; i < CAP * HD; i++) kc[i] = frand() * 2, vc[i] = frand();
    for (int i = 0; i < NQ * NH * HD; i++) q[i] = frand() * 2;
    for (int r = 0; r < CAP; r++) wpos[r] = r, wseq[r] = 0;
    for (int bi = 0; bi < N_BACKENDS; bi++) {
        cmf__backend *be = backend(bi);
        if (!be) continue;
        cmf__ten K = upload(be, CMF__E_F32, CAP, NKV * HD, NULL), V = upload(be, CMF__E_F32, CAP, NKV * HD, NULL);
        cmf__ten tk = upload(be, CMF__E_F32, CAP, NKV * HD, kc), tv = upload(be, CMF__E_F32, CAP, NKV * HD, vc),
                 twp = upload(be, CMF__E_I32, CAP, 1, wpos), tws = upload(be, CMF__E_I32, CAP, 1, wseq);
        cmf__node wk = {.op = CMF__OP_KV_WRITE, .dst = K, .a = tk, .b = twp, .c = tws, .i = {CAP}};
        cmf__node wv = {.op = CMF__OP_KV_WRITE, .dst = V, .a = tv, .b = twp, .c = tws, .i = {CAP}};
        CHECK_OK(run1(be, &wk));
        CHECK_OK(run1(be, &wv));
        cmf__ten tq = upload(be, CMF__E_F32, NQ, NH * HD, q), to = upload(be, CMF__E_F32, NQ, NH * HD, NULL),
                 tp = upload(be, CMF__E_I32, NQ, 1, pos), ts = upload(be, CMF__E_I32, NQ, 1, seq);
        for (int variant = 0; variant < 2; variant++) {
            cmf__attn_params p = {K, V, CAP, NH, NKV, HD, variant ? 90 : 0, 0.4f, 0, variant ? sinks : NULL, NULL};
            cmf__node at = {.op = CMF__OP_ATTN, .dst = to, .a = tq, .b = tp, .c = ts, .ext = &p};
            CHECK_OK(run1(be, &at));
            download(be, to, out);
            for (int t = 0; t < NQ; t++)
                for (int h = 0; h < NH; h++)
                    naive_attn(q + t * NH * HD, NH * HD, kc, vc, NKV * HD, CAP, 0, pos[t], NH, NKV, HD, p.window, 0.4, 0,
                               p.sinks, h, want + t * NH * HD + h * HD);
            char what[64];
            snprintf(what, sizeof what, "long attention variant %d on backend %d", variant, bi);
            CHECK_REL(out, want, (size_t)(NQ * NH * HD), 1e-5, what);
        }
        cmf__ten all[] = {K, V, tk, tv, twp, tws, tq, to, tp, ts};
        drop(be, all, 10);
        cmf__backend_free(be);
    }
}

/* A paged cache: blocks of 4 rows in an order unlike the sequences' (a
 * shuffled block table, one entry never used left at -1), written through
 * kv_write and read by attention for queries of two sequences (runs of
 * one sequence too: the CPU's blocked prefill path), full and windowed
 * with sinks; against the naive loops over the same keys laid out as
 * rings. Every cache type and backend; then a table entry outside the
 * cache is refused, as is a table whose blocks do not make the capacity. */
TEST(paged_kv_write_and_attention)
{
    enum { NH = 4, NKV = 2, HD = 10, KVD = NKV * HD, BLK = 4, PER = 5, CAP = PER * BLK, NB = 12, NSEQ = 2 };
    enum { NW = 18 + 14, NQ = 6 };
    static const int32_t table[NSEQ * PER] = {7, 2, 10, 0, 5, 3, 11, 1, 8, -1};
    float kc[NSEQ * CAP * KVD] = {0}, vc[NSEQ * CAP * KVD] = {0}, krows[NW * KVD], vrows[NW * KVD];
    float q[NQ * NH * HD], out[NQ * NH * HD], sinks[NH] = {0.5f, -1, 2, 0};
    double want[NQ * NH * HD];
    int32_t ints[NW + NQ + NSEQ * PER], wpos[NW];
    for (int r = 0; r < NW; r++) { /* sequence 0: positions 0..17, sequence 1: 0..13 */
        int32_t s = r < 18 ? 0 : 1, ps = r < 18 ? r : r - 18;
        ints[r] = s, wpos[r] = ps;
        for (int i = 0; i < KVD; i++) {
            krows[r * KVD + i] = kc[(s * CAP + ps) * KVD + i] = frand() * 2;
            vrows[r * KVD + i] = vc[(s * CAP + ps) * KVD + i] = frand();
        }
    }
    const int32_t qpos[NQ] = {14, 15, 16, 17, 12, 13}, qseq[NQ] = {0, 0, 0, 0, 1, 1};
    memcpy(ints + NW, qseq, sizeof qseq);
    memcpy(ints + NW + NQ, table, sizeof table);
    for (int i = 0; i < NQ * NH * HD; i++) q[i] = frand() * 2;
    static const cmf__etype types[] = {CMF__E_F32, CMF__E_F16, CMF__E_Q8};
    static const double tol[] = {1e-5, 2e-3, 2e-2};
    for (int bi = 0; bi < N_BACKENDS; bi++) {
        cmf__backend *be = backend(bi);
        if (!be) continue;
        for (int ti = 0; ti < 3; ti++) {
            cmf__ten K = kv_cache(be, types[ti], NB * BLK, KVD, HD, "k");
            cmf__ten V = kv_cache(be, types[ti], NB * BLK, KVD, HD, "v");
            cmf__ten ti32 = upload(be, CMF__E_I32, NW + NQ + NSEQ * PER, 1, ints);
            cmf__ten wseq = cmf__ten_make(ti32.buf, 0, CMF__E_I32, NW, 1);
            cmf__ten qs = cmf__ten_make(ti32.buf, NW * 4, CMF__E_I32, NQ, 1);
            cmf__kv_pages pages = {cmf__ten_make(ti32.buf, (NW + NQ) * 4, CMF__E_I32, NSEQ, PER), BLK};
            cmf__ten tk = upload(be, CMF__E_F32, NW, KVD, krows), tv = upload(be, CMF__E_F32, NW, KVD, vrows),
                     twp = upload(be, CMF__E_I32, NW, 1, wpos);
            cmf__node wk = {.op = CMF__OP_KV_WRITE, .dst = K, .a = tk, .b = twp, .c = wseq, .ext = &pages, .i = {CAP}};
            cmf__node wv = {.op = CMF__OP_KV_WRITE, .dst = V, .a = tv, .b = twp, .c = wseq, .ext = &pages, .i = {CAP}};
            CHECK_OK(run1(be, &wk));
            CHECK_OK(run1(be, &wv));
            if (types[ti] == CMF__E_F32) { /* each row where the table puts it */
                static float kall[NB * BLK * KVD];
                CHECK_OK(be->ops->get(be, K.buf, 0, kall, sizeof kall));
                for (int r = 0; r < NW; r++) {
                    int64_t row = (int64_t)table[ints[r] * PER + wpos[r] / BLK] * BLK + wpos[r] % BLK;
                    CHECK(memcmp(kall + row * KVD, krows + r * KVD, KVD * sizeof(float)) == 0);
                }
            }
            cmf__ten tq = upload(be, CMF__E_F32, NQ, NH * HD, q), to = upload(be, CMF__E_F32, NQ, NH * HD, NULL),
                     tp = upload(be, CMF__E_I32, NQ, 1, qpos);
            for (int variant = 0; variant < 2; variant++) {
                cmf__attn_params p = {K, V, CAP, NH, NKV, HD, variant ? 6 : 0, 0.3f, 0, variant ? sinks : NULL, &pages};
                cmf__node at = {.op = CMF__OP_ATTN, .dst = to, .a = tq, .b = tp, .c = qs, .ext = &p};
                CHECK_OK(run1(be, &at));
                download(be, to, out);
                for (int t = 0; t < NQ; t++)
                    for (int h = 0; h < NH; h++)
                        naive_attn(q + t * NH * HD, NH * HD, kc, vc, KVD, CAP, qseq[t], qpos[t], NH, NKV, HD, p.window,
                                   0.3, 0, p.sinks, h, want + t * NH * HD + h * HD);
                char what[80];
                snprintf(what, sizeof what, "paged attention %s variant %d backend %d", cmf__etype_name(types[ti]), variant, bi);
                CHECK_REL(out, want, (size_t)(NQ * NH * HD), tol[ti], what);
            }
            cmf__attn_params p = {K, V, CAP, NH, NKV, HD, 0, 0.3f, 0, NULL, &pages};
            cmf__node at = {.op = CMF__OP_ATTN, .dst = to, .a = tq, .b = tp, .c = qs, .ext = &p};
            int32_t bad = NB; /* sequence 0's block of positions 8..11 names a block past the cache */
            CHECK_OK(be->ops->set(be, ti32.buf, (NW + NQ + 2) * 4, &bad, 4));
            CHECK_ERR(run1(be, &at), CMF_ERR_BOUNDS, "block 12");
            CHECK_ERR(run1(be, &wk), CMF_ERR_BOUNDS, "block 12");
            cmf__attn_params p2 = p;
            p2.cap = CAP + BLK; /* five entries of four rows do not make 24 */
            at.ext = &p2;
            CHECK_ERR(run1(be, &at), CMF_ERR_BACKEND, "attn");
            cmf__ten all[] = {K, V, ti32, tk, tv, twp, tq, to, tp};
            drop(be, all, 9);
        }
        cmf__backend_free(be);
    }
}

/* More workgroups than one dispatch dimension holds (65535): rmsnorm over
 * groups of one value, 300 x 256 = 76800 groups; 1e-5. */
TEST(rmsnorm_past_65535_groups)
{
    enum { R = 300, C = 256 };
    static float x[R * C], y[R * C];
    static double want[R * C];
    for (int i = 0; i < R * C; i++) x[i] = frand() * 3;
    for (int i = 0; i < R * C; i++) want[i] = x[i] / sqrt((double)x[i] * x[i] + 1e-2);
    for (int bi = 0; bi < N_BACKENDS; bi++) {
        cmf__backend *be = backend(bi);
        if (!be) continue;
        cmf__ten tx = upload(be, CMF__E_F32, R, C, x), ty = upload(be, CMF__E_F32, R, C, NULL);
        cmf__node nd = {.op = CMF__OP_RMSNORM, .dst = ty, .a = tx, .f = {1e-2f}, .i = {1, 0}};
        CHECK_OK(run1(be, &nd));
        download(be, ty, y);
        CHECK_REL(y, want, (size_t)(R * C), 1e-5, "rmsnorm of 76800 groups");
        cmf__ten ts[] = {tx, ty};
        drop(be, ts, 2);
        cmf__backend_free(be);
    }
}

int main(void)
{
    RUN(matmul_every_dtype_strided_bias);
    RUN(elementwise_norm_rope_mask_rows);
    RUN(get_rows_every_dtype);
    RUN(kv_write_and_attention_every_cache_type);
    RUN(attention_long_span);
    RUN(paged_kv_write_and_attention);
    RUN(rmsnorm_past_65535_groups);
    RUN(graph_check_refuses_bad_shapes);
    return harness_done();
}
