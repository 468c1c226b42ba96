/* vk_gemm_bench.c — the Vulkan backend's prompt-chunk GEMM alone: for each
 * weight dtype and shape, one graph of REPS identical matmul nodes
 * (dst[t][o] = sum_i W[o][i] x[t][i]) timed on the wall clock after a warm
 * replay, TFLOP/s printed, and the first node's output checked against a
 * double-precision product on sampled rows (relative error of the whole
 * sample; a NaN, an Inf or an error past 1e-2 fails the run). Which GEMM
 * runs is the backend's own choice (CMF_VK_COOP picks the tensor-core one).
 * Usage: cmf-vk-gemm-bench [TOKENS [ROWS COLS]...]; default 512 tokens over
 * the Llama-3.1-8B projections (4096x4096, 1024x4096, 14336x4096,
 * 4096x14336). Not a test: docs/GPU.md has its figures. */
#include "compute/backend.h"
#include "compute/vulkan/vk_backend.h"
#include "quant/quant.h"
#include "util/buf.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPS 16

/* The quantized weights stay allocated until the end: the backend keys its
 * device copies by host address, and a freed buffer's address handed to
 * the next weight of the same size would find the old copy. */
static cmf__buf g_kept[64];
static int g_n_kept;

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float frand(void)
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static cmf_status upload(cmf__backend *be, int64_t rows, int64_t cols, const float *host, cmf__ten *t)
{
    cmf__buffer *buf = NULL;
    size_t bytes = (size_t)rows * (size_t)cols * 4;
    cmf_status st = be->ops->buffer_new(be, bytes, 0, "bench", &buf);
    if (!st && host) st = be->ops->set(be, buf, 0, host, bytes);
    if (!st) *t = cmf__ten_make(buf, 0, CMF__E_F32, rows, cols);
    return st;
}

/* One dtype at one shape: TFLOP/s in *tflops, the sample's error in *err. */
static cmf_status one(cmf__backend *be, int dtype, int64_t n, int64_t rows, int64_t cols, double *tflops, double *err)
{
    float *w = malloc((size_t)(rows * cols) * 4), *x = malloc((size_t)(n * cols) * 4);
    float *y = malloc((size_t)(n * rows) * 4), *dec = malloc((size_t)cols * 4);
    cmf__buf qb = {0};
    cmf__qmat q;
    cmf__ten tx = {0}, ty = {0};
    cmf__graph g = {0};
    cmf_status st = w && x && y && dec ? CMF_OK : cmf__error(CMF_ERR_NOMEM, "bench: out of memory");
    for (int64_t i = 0; !st && i < rows * cols; i++) w[i] = frand() * 0.1f;
    for (int64_t i = 0; !st && i < n * cols; i++) x[i] = frand();
    cmf__quant_opts o = cmf__quant_opts_default();
    uint64_t shape[2] = {(uint64_t)rows, (uint64_t)cols};
    if (!st) st = cmf__quantize(dtype, w, rows, cols, &o, &qb, "bench");
    if (!st) st = cmf__qmat_init(&q, dtype, qb.data, qb.len, 2, shape, "bench");
    if (!st) st = upload(be, n, cols, x, &tx);
    if (!st) st = upload(be, n, rows, NULL, &ty);
    cmf__node nd = {.op = CMF__OP_MATMUL, .dst = ty, .a = tx, .w = &q};
    for (int r = 0; r < REPS && !st; r++) st = cmf__graph_push(&g, &nd);
    if (!st) st = cmf__graph_check(&g);
    if (!st) st = be->ops->prepare(be, &g);
    if (!st) st = be->ops->compute(be, &g); /* records, uploads the weight */
    if (!st) st = be->ops->compute(be, &g); /* a replay, warm */
    double t0 = now_s();
    if (!st) st = be->ops->compute(be, &g);
    double t1 = now_s();
    if (!st) st = be->ops->get(be, ty.buf, 0, y, (size_t)(n * rows) * 4);
    double mx = 0, e = 0;
    for (int64_t r = 0; !st && r < rows; r += rows / 61 + 1) {
        cmf__qmat_decode_row(&q, r, dec);
        for (int64_t t = 0; t < n; t += n / 7 + 1) {
            double s = 0;
            for (int64_t i = 0; i < cols; i++) s += (double)dec[i] * x[t * cols + i];
            float got = y[t * rows + r];
            if (!isfinite(got)) e = INFINITY;
            mx = fabs(s) > mx ? fabs(s) : mx;
            e = fabs(got - s) > e ? fabs(got - s) : e;
        }
    }
    *err = mx > 0 ? e / mx : INFINITY;
    *tflops = 2.0 * (double)n * (double)rows * (double)cols * REPS / (t1 - t0) * 1e-12;
    cmf__graph_free(&g);
    if (tx.buf) be->ops->buffer_free(be, tx.buf);
    if (ty.buf) be->ops->buffer_free(be, ty.buf);
    if (qb.data) cmf__qmat_free(&q);
    if (g_n_kept < 64) g_kept[g_n_kept++] = qb;
    else cmf__buf_free(&qb);
    free(w), free(x), free(y), free(dec);
    return st;
}

int main(int argc, char **argv)
{
    int64_t n = argc > 1 ? atoll(argv[1]) : 512;
    int64_t shapes[16][2] = {{4096, 4096}, {1024, 4096}, {14336, 4096}, {4096, 14336}};
    int ns = 4;
    if (argc > 3) {
        ns = 0;
        for (int i = 2; i + 1 < argc && ns < 16; i += 2, ns++) shapes[ns][0] = atoll(argv[i]), shapes[ns][1] = atoll(argv[i + 1]);
    }
    if (n < 1 || n > 8192) return fprintf(stderr, "cmf-vk-gemm-bench: TOKENS must be 1..8192\n"), 2;
    for (int s = 0; s < ns; s++)
        if (shapes[s][0] < 16 || shapes[s][1] < 16 || shapes[s][0] > 65536 || shapes[s][1] > 65536)
            return fprintf(stderr, "cmf-vk-gemm-bench: ROWS and COLS must be 16..65536\n"), 2;
    cmf__backend *be = cmf__vk_backend_new();
    if (!be) return fprintf(stderr, "cmf-vk-gemm-bench: no Vulkan device: %s\n", cmf_last_error()), 1;
    printf("%s; cooperative-matrix GEMM %s; %lld tokens, %d products a graph\n", be->ops->device(be),
           cmf__vk_backend_coop(be) ? "on" : "off", (long long)n, REPS);
    static const int dts[] = {CMF_DTYPE_F16, CMF_DTYPE_Q8_ROW, CMF_DTYPE_Q4_BLOCK};
    static const char *names[] = {"f16", "q8_row", "q4_block"};
    int rc = 0;
    double sum = 0;
    int cnt = 0;
    for (int s = 0; s < ns; s++)
        for (int d = 0; d < 3; d++) {
            double tf = 0, err = 0;
            cmf_status st = one(be, dts[d], n, shapes[s][0], shapes[s][1], &tf, &err);
            if (st) {
                printf("%-9s %6lld x %-6lld  failed: %s\n", names[d], (long long)shapes[s][0], (long long)shapes[s][1],
                       cmf_last_error());
                rc = 1;
                continue;
            }
            bool ok = err <= 1e-2;
            printf("%-9s %6lld x %-6lld %8.2f TFLOP/s  rel err %.2e%s\n", names[d], (long long)shapes[s][0],
                   (long long)shapes[s][1], tf, err, ok ? "" : "  WRONG");
            if (!ok) rc = 1;
            sum += tf, cnt++;
        }
    printf("mean %.2f TFLOP/s\n", cnt ? sum / cnt : 0.0);
    cmf__backend_free(be);
    for (int i = 0; i < g_n_kept; i++) cmf__buf_free(&g_kept[i]);
    return rc;
}
