/* test_engine_api_args.c — the public API refuses NULL arrays that come
 * with a non-zero count (ERR_ARG, a message naming the argument) instead of
 * dereferencing them: tokenize, detokenize, render_chat, decode and
 * generate (its prompt and its stop strings), as decode_batch and route
 * already did. On the toy model of tests/toy_model.h. */
#include "harness.h"
#include "toy_model.h"

#include <stdlib.h>

TEST(null_arrays_with_counts_are_refused)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/api_args.cmf", harness_tmpdir());
    json_t *arch = toy_arch();
    cmf_status st = toy_write(path, arch);
    json_decref(arch);
    if (st) SKIP("cannot write the toy model");
    cmf_model *m = NULL;
    CHECK_OK(cmf_model_open(path, NULL, &m));
    if (!m) return;
    size_t n = 9;
    char buf[64];
    int32_t ids[4] = {1, 2, 3, 4};
    CHECK_STATUS(cmf_model_tokenize(m, NULL, 5, true, ids, 4, &n), CMF_ERR_ARG);
    CHECK_CONTAINS(cmf_model_errmsg(m), "text is NULL");
    CHECK_EQ_INT(n, 0);
    CHECK_STATUS(cmf_model_tokenize(m, "ab", 2, true, NULL, 4, &n), CMF_ERR_ARG);
    CHECK_STATUS(cmf_model_detokenize(m, NULL, 3, false, buf, sizeof buf, &n), CMF_ERR_ARG);
    CHECK_CONTAINS(cmf_model_errmsg(m), "ids is NULL");
    CHECK_STATUS(cmf_model_render_chat(m, NULL, 2, true, buf, sizeof buf, &n), CMF_ERR_ARG);
    CHECK_CONTAINS(cmf_model_errmsg(m), "messages NULL");
    cmf_session_params sp = cmf_session_params_default();
    sp.n_ctx = 16;
    sp.n_threads = 1;
    sp.device = CMF_DEVICE_CPU;
    cmf_session *s = NULL;
    CHECK_OK(cmf_session_new(m, &sp, &s));
    if (s) {
        float lg[TOY_V];
        CHECK_STATUS(cmf_session_decode(s, NULL, 3, lg, false), CMF_ERR_ARG);
        cmf_generate_params gp = cmf_generate_params_default();
        gp.max_tokens = 1;
        cmf_generate_result r;
        CHECK_STATUS(cmf_session_generate(s, NULL, 3, &gp, &r), CMF_ERR_ARG);
        gp.n_stop = 2; /* stop NULL */
        CHECK_STATUS(cmf_session_generate(s, ids, 2, &gp, &r), CMF_ERR_ARG);
        CHECK_CONTAINS(cmf_session_errmsg(s), "stop string 0 is NULL");
        const char *stops[2] = {"x", NULL};
        gp.stop = stops;
        CHECK_STATUS(cmf_session_generate(s, ids, 2, &gp, &r), CMF_ERR_ARG);
        CHECK_CONTAINS(cmf_session_errmsg(s), "stop string 1 is NULL");
        /* the same calls with real arrays still work */
        gp.n_stop = 1;
        CHECK_OK(cmf_session_generate(s, ids, 2, &gp, &r));
        CHECK_OK(cmf_session_decode(s, ids, 1, lg, false));
        cmf_session_free(s);
    }
    cmf_model_free(m);
}

int main(void)
{
    RUN(null_arrays_with_counts_are_refused);
    return harness_done();
}
