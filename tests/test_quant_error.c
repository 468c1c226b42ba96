/* test_quant_error.c — measured reconstruction error of every writable
 * dtype on a 256 x 1024 N(0,1) matrix: RMSE relative to the RMS of the
 * source, printed as a table, each checked against a ceiling derived from
 * the dtype's step size (comments below), and the q4tp-vs-q4_tiled claim
 * of §3.2 (a coarser scale barely matters). The same table over the real
 * trained weights of the shakespeare fixture (skipped when absent). */
#include "test_quant_common.h"
#include "util/json.h"

static double rel_rmse(int dtype, const float *x, int64_t R, int64_t C, size_t *nbytes)
{
    cmf__buf buf = {0};
    cmf__qmat m;
    double err = 0, ref = 0;
    if (!tq_encode(dtype, x, R, C, &buf, &m)) { cmf__buf_free(&buf); return INFINITY; }
    float *w = tq_decode_all(&m);
    for (int64_t i = 0; i < R * C; i++) {
        err += ((double)w[i] - x[i]) * ((double)w[i] - x[i]);
        ref += (double)x[i] * x[i];
    }
    *nbytes = buf.len;
    free(w);
    cmf__qmat_free(&m);
    cmf__buf_free(&buf);
    return sqrt(err / ref);
}

TEST(error_table)
{
    enum { R = 256, C = 1024 };
    float *x = tq_gauss_matrix(R, C, 2026);
    /* Ceilings: a uniform quantizer of step d has RMS error d/sqrt(12).
     * q8_row d = amax_row/127 ~ 3.4/127 -> 0.8%; q4 d = amax_32/7 ~ 2.1/7
     * -> 8.7%; f16 / bf16 relative rounding 2^-11 / 2^-8 over sqrt(3);
     * vbit at a 4-bit budget is q4's grid (L = 7); q2tp's 4-level grid
     * ~ 1/sqrt(12) of sigma plus clipping; q1 = sqrt(1 - 2/pi) = 60.3% for
     * Gaussian weights; ternary with optimal threshold ~ 40%. Each ceiling
     * allows ~15% over the estimate. */
    struct { int dtype; double ceil; } rows[] = {
        {CMF_DTYPE_F32, 0},       {CMF_DTYPE_F16, 3.0e-4},   {CMF_DTYPE_BF16, 2.5e-3},
        {CMF_DTYPE_Q8_ROW, 0.01}, {CMF_DTYPE_Q8_2F, 0.01},   {CMF_DTYPE_Q4_BLOCK, 0.10},
        {CMF_DTYPE_Q4_TILED, 0.10}, {CMF_DTYPE_Q4TP, 0.10},  {CMF_DTYPE_VBIT, 0.10},
        {CMF_DTYPE_VBIT_RO, 0.10}, {CMF_DTYPE_Q2TP, 0.40},   {CMF_DTYPE_Q1, 0.61},
        {CMF_DTYPE_Q1S, 0.61},    {CMF_DTYPE_Q1T, 0.45},
    };
    double q4t = 0, q4tp = 0;
    printf("  %-9s %12s %10s %9s\n", "dtype", "rel.RMSE", "bytes", "bits/w");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        size_t nb = 0;
        double e = rel_rmse(rows[i].dtype, x, R, C, &nb);
        printf("  %-9s %12.6f %10zu %9.3f\n", cmf__dtype_get(rows[i].dtype)->name, e, nb, 8.0 * (double)nb / (R * C));
        CHECK(e <= rows[i].ceil);
        if (rows[i].dtype == CMF_DTYPE_Q4_TILED) q4t = e;
        if (rows[i].dtype == CMF_DTYPE_Q4TP) q4tp = e;
    }
    CHECK(q4tp <= q4t * 1.02); /* §3.2: the ladder costs ~0.1% relative */
    free(x);
}

/* The 2-D bf16 tensors of a safetensors file, widened to f32, one by one. */
typedef struct st_iter {
    char *file;
    size_t len, base;
    json_t *hdr;
    void *it;
} st_iter;

static bool st_next(st_iter *s, int64_t *rows, int64_t *cols, float **x)
{
    for (; s->it; s->it = json_object_iter_next(s->hdr, s->it)) {
        json_t *v = json_object_iter_value(s->it), *shape = json_object_get(v, "shape");
        json_t *offs = json_object_get(v, "data_offsets");
        const char *dt = json_string_value(json_object_get(v, "dtype"));
        if (!dt || strcmp(dt, "BF16") != 0 || json_array_size(shape) != 2 || json_array_size(offs) != 2) continue;
        *rows = json_integer_value(json_array_get(shape, 0));
        *cols = json_integer_value(json_array_get(shape, 1));
        size_t a = (size_t)json_integer_value(json_array_get(offs, 0));
        if (s->base + a + (size_t)(*rows * *cols) * 2 > s->len) continue;
        const uint8_t *p = (const uint8_t *)s->file + s->base + a;
        *x = malloc((size_t)(*rows * *cols) * sizeof **x);
        for (int64_t i = 0; i < *rows * *cols; i++) (*x)[i] = cmf__bf16_to_f32(cmf__rd16(p + 2 * i));
        s->it = json_object_iter_next(s->hdr, s->it);
        return true;
    }
    return false;
}

/* Same table on trained weights (a 5M-parameter Llama, bf16): every 2-D
 * tensor, errors and bytes pooled. The ceilings are the N(0,1) ones:
 * trained weights are heavier-tailed per row but lighter per group. */
TEST(error_table_real_weights)
{
    if (!harness_fixtures()) SKIP("fixtures absent (CMF_FIXTURES)");
    st_iter s = {0};
    s.file = harness_read_file(harness_fixture_path("shakespeare/model.safetensors"), &s.len);
    if (!s.file || s.len < 8) { free(s.file); SKIP("shakespeare/model.safetensors absent"); }
    uint64_t hl = cmf__rd64((const uint8_t *)s.file);
    CHECK_OK(cmf__json_parse(s.file + 8, (size_t)hl, "model.safetensors", &s.hdr));
    if (!s.hdr) { free(s.file); return; }
    s.base = 8 + (size_t)hl;
    struct { int dtype; double ceil; } rows[] = {
        {CMF_DTYPE_Q8_ROW, 0.01}, {CMF_DTYPE_Q8_2F, 0.01}, {CMF_DTYPE_Q4_TILED, 0.10}, {CMF_DTYPE_Q4TP, 0.10},
        {CMF_DTYPE_VBIT_RO, 0.10}, {CMF_DTYPE_Q2TP, 0.40}, {CMF_DTYPE_Q1, 0.61}, {CMF_DTYPE_Q1S, 0.61},
        {CMF_DTYPE_Q1T, 0.45},
    };
    printf("  shakespeare weights:\n  %-9s %12s %9s\n", "dtype", "rel.RMSE", "bits/w");
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        double err = 0, ref = 0, bytes = 0, nw = 0;
        int64_t r, c;
        float *x;
        s.it = json_object_iter(s.hdr);
        while (st_next(&s, &r, &c, &x)) {
            cmf__buf buf = {0};
            cmf__qmat m;
            if (tq_encode(rows[k].dtype, x, r, c, &buf, &m)) {
                float *w = tq_decode_all(&m);
                for (int64_t i = 0; i < r * c; i++) {
                    err += ((double)w[i] - x[i]) * ((double)w[i] - x[i]);
                    ref += (double)x[i] * x[i];
                }
                bytes += (double)buf.len;
                nw += (double)(r * c);
                free(w);
                cmf__qmat_free(&m);
            }
            cmf__buf_free(&buf);
            free(x);
        }
        double e = ref > 0 ? sqrt(err / ref) : INFINITY;
        printf("  %-9s %12.6f %9.3f\n", cmf__dtype_get(rows[k].dtype)->name, e, nw > 0 ? 8 * bytes / nw : 0);
        CHECK(nw > 1e6);
        CHECK(e <= rows[k].ceil);
    }
    json_decref(s.hdr);
    free(s.file);
}

int main(void)
{
    RUN(error_table);
    RUN(error_table_real_weights);
    return harness_done();
}
