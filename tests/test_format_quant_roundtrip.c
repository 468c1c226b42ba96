/* test_format_quant_roundtrip.c — every writable dtype through the whole
 * path: quantize -> cmf__writer -> file on disk -> open -> qmat over the
 * mapped payload -> decode. The mapped payload must be byte-identical to
 * what the encoder produced (so decoding it gives bit-identical weights),
 * and the decoded weights must sit within each dtype's error bound of the
 * f32 source. */
#include "format/format.h"
#include "test_quant_common.h"

#include <stdio.h>

/* Per-dtype bound on RMSE relative to the source RMS, for N(0,1) data
 * (derivations in test_quant_error.c: uniform quantizer of step d has RMS
 * error d/sqrt(12); q1 is sqrt(1 - 2/pi) for Gaussian weights), with
 * headroom for the small 7 x 96 sample. */
static const struct { int dtype; int64_t rows, cols; double max_rel_rmse; } CASES[] = {
    {CMF_DTYPE_F32, 7, 96, 0},       {CMF_DTYPE_F16, 7, 96, 4e-4},     {CMF_DTYPE_BF16, 7, 96, 3e-3},
    {CMF_DTYPE_Q8_ROW, 7, 96, 0.012}, {CMF_DTYPE_Q8_2F, 7, 96, 0.012}, {CMF_DTYPE_Q4_BLOCK, 3, 33, 0.12},
    {CMF_DTYPE_Q4_BLOCK, 7, 96, 0.12}, {CMF_DTYPE_Q4_TILED, 7, 96, 0.12}, {CMF_DTYPE_Q4TP, 7, 96, 0.12},
    {CMF_DTYPE_Q2TP, 7, 96, 0.42},   {CMF_DTYPE_VBIT, 7, 96, 0.12},    {CMF_DTYPE_VBIT_RO, 7, 96, 0.12},
    {CMF_DTYPE_Q1, 7, 96, 0.65},     {CMF_DTYPE_Q1S, 7, 96, 0.65},     {CMF_DTYPE_Q1T, 7, 96, 0.48},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

TEST(quantized_tensors_survive_the_file)
{
    char path[512];
    snprintf(path, sizeof path, "%s/quant_rt.cmf", harness_tmpdir());
    float *src[N_CASES];
    cmf__buf enc[N_CASES];
    cmf__writer *w = NULL;
    CHECK_OK(cmf__writer_open(path, &w));
    if (!w) return;
    json_t *h = json_pack("{s:{s:s}}", "arch", "arch_name", "quant-test");
    CHECK_OK(cmf__writer_set_header(w, h));
    json_decref(h);
    cmf_status st = CMF_OK;
    for (size_t k = 0; k < N_CASES; k++) {
        char name[64];
        snprintf(name, sizeof name, "t.%zu.%s", k, cmf__dtype_get(CASES[k].dtype)->name);
        src[k] = tq_gauss_matrix(CASES[k].rows, CASES[k].cols, 500 + k);
        memset(&enc[k], 0, sizeof enc[k]);
        uint64_t shape[2] = {(uint64_t)CASES[k].rows, (uint64_t)CASES[k].cols};
        if (!st) st = cmf__quantize(CASES[k].dtype, src[k], CASES[k].rows, CASES[k].cols, NULL, &enc[k], name);
        if (!st) st = cmf__writer_add_tensor(w, name, CASES[k].dtype, 2, shape, enc[k].data, enc[k].len);
    }
    CHECK_OK(st);
    if (!st) CHECK_OK(cmf__writer_finish(w));
    else cmf__writer_abort(w);

    cmf__file *f = NULL;
    if (!st) CHECK_OK(cmf__file_open(path, NULL, &f));
    if (f) {
        CHECK_EQ_INT(f->n_tensors, N_CASES);
        CHECK(f->features & CMF_FEAT_QUANT_2F); /* q8_2f and vbit are present */
        for (size_t k = 0; k < N_CASES; k++) {
            char name[64];
            snprintf(name, sizeof name, "t.%zu.%s", k, cmf__dtype_get(CASES[k].dtype)->name);
            const cmf__tensor *t = cmf__file_find(f, name);
            CHECK(t != NULL);
            if (!t) continue;
            CHECK_EQ_INT(t->dtype, CASES[k].dtype);
            CHECK_EQ_U64(t->nbytes, enc[k].len);
            CHECK(memcmp(t->data, enc[k].data, enc[k].len) == 0);
            cmf__qmat m;
            cmf_status ist = cmf__qmat_init(&m, t->dtype, t->data, t->nbytes, t->ndim, t->shape, t->name);
            CHECK_OK(ist);
            if (ist) continue;
            float *wf = tq_decode_all(&m);
            double err = 0, ref = 0;
            for (int64_t i = 0; i < m.rows * m.cols; i++) {
                err += ((double)wf[i] - src[k][i]) * ((double)wf[i] - src[k][i]);
                ref += (double)src[k][i] * src[k][i];
            }
            double rel = sqrt(err / ref);
            if (!(rel <= CASES[k].max_rel_rmse))
                harness_fail(__FILE__, __LINE__, "%s: relative RMSE %.5f above %.5f", name, rel, CASES[k].max_rel_rmse);
            tq_check_dot(&m, 900 + k);
            free(wf);
            cmf__qmat_free(&m);
        }
        cmf__file_free(f);
    }
    for (size_t k = 0; k < N_CASES; k++) {
        free(src[k]);
        cmf__buf_free(&enc[k]);
    }
    remove(path);
}

int main(void)
{
    RUN(quantized_tensors_survive_the_file);
    return harness_done();
}
