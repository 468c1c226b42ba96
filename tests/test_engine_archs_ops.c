/* test_engine_archs_ops.c — the small operators of src/engine for the
 * MoE-era families: YaRN and proportional rope tables (against numpy and by
 * hand), the table-driven rotation, Gemma-4's per-layer-input checks and
 * bounds, its V norm, and the activation helpers. */
#include "harness.h"

#include "compute/backend.h"
#include "vk_test.h"
#include "compute/gemma4.h"
#include "compute/rope_ext.h"
#include <stdlib.h>
#include <string.h>

TEST(yarn_gpt_oss_table) {
    /* gpt-oss: theta 150000, head 24, factor 32, original 4096, beta 32/1.
     * Values from the reference formula in float64 (the same one reproduces
     * the gpt_oss fixture's logits); 2e-6 relative = f32 powf rounding. */
    static const double no_trunc[12] = {1, 0.370389837, 0.137188631, 0.0508132748, 0.0137774798, 0.00316774015,
                                        0.000456483919, 2.98857015e-05, 1.10693601e-05, 4.09997848e-06,
                                        1.51859036e-06, 5.62470437e-07};
    static const double trunc[12] = {1, 0.370389837, 0.137188631, 0.0508132748, 0.0142625773, 0.00359442375,
                                     0.000706012589, 2.98857015e-05, 1.10693601e-05, 4.09997848e-06,
                                     1.51859036e-06, 5.62470437e-07};
    float inv[12], scale = 0;
    cmf__rope_yarn_inv_freq(150000.0f, 24, 32.0f, 4096.0f, 32.0f, 1.0f, false, 0.0f, inv, &scale);
    for (int i = 0; i < 12; i++) CHECK_NEAR(inv[i], no_trunc[i], 2e-6 * no_trunc[i]);
    CHECK_NEAR(scale, 0.1 * log(32.0) + 1.0, 1e-6); /* default attention_factor */
    cmf__rope_yarn_inv_freq(150000.0f, 24, 32.0f, 4096.0f, 32.0f, 1.0f, true, 0.0f, inv, &scale);
    for (int i = 0; i < 12; i++) CHECK_NEAR(inv[i], trunc[i], 2e-6 * trunc[i]);
    cmf__rope_yarn_inv_freq(150000.0f, 24, 32.0f, 4096.0f, 32.0f, 1.0f, true, 1.25f, inv, &scale);
    CHECK_NEAR(scale, 1.25, 0);
    cmf__rope_yarn_inv_freq(10000.0f, 8, 1.0f, 4096.0f, 32.0f, 1.0f, true, 0.0f, inv, &scale);
    CHECK_NEAR(scale, 1.0, 0); /* factor 1: no attention scaling */
}

TEST(proportional_table) {
    /* gemma4 global layer: head 32, partial 0.25 -> 4 rotated pairs of 16,
     * frequencies over the full width: theta^(-2i/32) */
    float inv[16];
    cmf__rope_proportional_inv_freq(1e6f, 32, 0.25f, 1.0f, inv);
    for (int i = 0; i < 4; i++) CHECK_NEAR(inv[i], pow(1e6, -2.0 * i / 32), 1e-6 * pow(1e6, -2.0 * i / 32));
    for (int i = 4; i < 16; i++) CHECK(inv[i] == 0.0f);
    /* partial 1: the default table */
    cmf__rope_proportional_inv_freq(10000.0f, 24, 1.0f, 1.0f, inv);
    for (int i = 0; i < 12; i++) CHECK_NEAR(inv[i], pow(10000.0, -2.0 * i / 24), 1e-6 * pow(10000.0, -2.0 * i / 24));
}

TEST(rotation_by_hand) {
    /* head 4: pairs (0,2) at freq 1 and (1,3) at freq 0 (unrotated) */
    float inv[2] = {1.0f, 0.0f};
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    cmf__rope_apply_freqs(x, 2, 4, 3, inv, 1.0f);
    double c = cos(3.0), s = sin(3.0);
    CHECK_NEAR(x[0], 1 * c - 3 * s, 1e-6);
    CHECK_NEAR(x[2], 3 * c + 1 * s, 1e-6);
    CHECK_NEAR(x[1], 2, 0);
    CHECK_NEAR(x[3], 4, 0);
    CHECK_NEAR(x[4], 5 * c - 7 * s, 1e-5);
    CHECK_NEAR(x[6], 7 * c + 5 * s, 1e-5);
    /* scale multiplies cos and sin: position 0 scales every element */
    float y[4] = {1, 2, 3, 4};
    cmf__rope_apply_freqs(y, 1, 4, 0, inv, 2.0f);
    CHECK_NEAR(y[0], 2, 0);
    CHECK_NEAR(y[3], 8, 0);
}

static void qm(cmf__qmat *m, const float *d, int rows, int cols) {
    uint64_t shape[2] = {(uint64_t)rows, (uint64_t)cols};
    CHECK_OK(cmf__qmat_init(m, CMF_DTYPE_F32, (const uint8_t *)d, sizeof(float) * (uint64_t)rows * cols, 2, shape, "t"));
}

TEST(gemma4_ple_by_hand) {
    /* 2 layers x 2 per-layer dims, hidden 2, vocab 3 */
    float emb[3 * 4] = {0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0};
    float proj[4 * 2] = {1, 0, 0, 1, 1, 1, 2, 0};
    float pn[2] = {1, 1};
    cmf__qmat qe, qp;
    qm(&qe, emb, 3, 4);
    qm(&qp, proj, 4, 2);
    cmf__gemma4_ple p = {2, 2, 2, 0.0f, false, &qe, &qp, pn};
    CHECK_OK(cmf__gemma4_ple_check(&p, "m"));
    float x[2] = {3, 4}, out[4], scratch[64];
    CHECK_OK(cmf__gemma4_ple_inputs(&p, NULL, 1, x, out, scratch));
    /* layer 0: proj (3,4)/sqrt2 -> rms-normed (3,4)/sqrt(12.5); token row (1,2)·sqrt2 */
    double r0 = sqrt(12.5);
    CHECK_NEAR(out[0], (3 / r0 + 1 * sqrt(2.0)) / sqrt(2.0), 1e-6);
    CHECK_NEAR(out[1], (4 / r0 + 2 * sqrt(2.0)) / sqrt(2.0), 1e-6);
    /* layer 1: proj (7,6) -> normed (7,6)/sqrt(42.5); token (3,4)·sqrt2 */
    double r1 = sqrt(42.5);
    CHECK_NEAR(out[2], (7 / r1 + 3 * sqrt(2.0)) / sqrt(2.0), 1e-6);
    CHECK_NEAR(out[3], (6 / r1 + 4 * sqrt(2.0)) / sqrt(2.0), 1e-6);
    CHECK_ERR(cmf__gemma4_ple_inputs(&p, NULL, 3, x, out, scratch), CMF_ERR_BOUNDS,
              "token 3 outside model.embed_tokens_per_layer.weight (3 rows)");
    /* layer tail without a PLE block: only the scalar */
    cmf__gemma4_layer l = {NULL, NULL, NULL, 0.5f};
    cmf__act_params act = {CMF__ACT_GELU_TANH, 0, 0};
    cmf__gemma4_layer_tail(&p, &l, &act, NULL, out, x, scratch);
    CHECK_NEAR(x[0], 1.5, 0);
    CHECK_NEAR(x[1], 2.0, 0);
    p.per_layer = 3;
    CHECK_ERR(cmf__gemma4_ple_check(&p, "m.cmf"), CMF_ERR_CONFIG,
              "m.cmf: model.embed_tokens_per_layer.weight has 4 columns, expected 6");
    p.per_layer = 2;
    p.model_projection = &qe;
    CHECK_ERR(cmf__gemma4_ple_check(&p, "m.cmf"), CMF_ERR_CONFIG, "per_layer_model_projection.weight shape [3,4]");
    cmf__qmat_free(&qe);
    cmf__qmat_free(&qp);
}

/* The ple and ple_tail ops of the CPU backend (fast and reference kernels)
 * on the same small model, 3 tokens, against the per-token functions:
 * 1e-6 of the largest |value| (the backend's matvec sums in another order). */
TEST(ple_ops_equal_per_token) {
    float emb[3 * 4] = {0, 0, 0, 0, 1, 2, 3, 4, -1, 0.5f, 2, -2};
    float proj[4 * 2] = {1, 0, 0, 1, 1, 1, 2, 0};
    float pn[2] = {1, 0.5f}, gate[2 * 2] = {0.5f, -1, 1, 0.25f}, back[2 * 2] = {1, 2, -0.5f, 1}, post[2] = {1, 1.5f};
    cmf__qmat qe, qp, qg, qb;
    qm(&qe, emb, 3, 4);
    qm(&qp, proj, 4, 2);
    qm(&qg, gate, 2, 2);
    qm(&qb, back, 2, 2);
    cmf__gemma4_ple p = {2, 2, 2, 1e-6f, false, &qe, &qp, pn};
    cmf__ple_tail_op tail = {&p, {&qg, &qb, post, 0.75f}, {CMF__ACT_GELU_TANH, 0, 0}};
    int32_t ids[3] = {1, 2, 0};
    float x[3 * 2] = {3, 4, -1, 2, 0.5f, 0.25f}, want_ple[3 * 4], want_x[3 * 2], scratch[64];
    memcpy(want_x, x, sizeof x);
    for (int t = 0; t < 3; t++) {
        CHECK_OK(cmf__gemma4_ple_inputs(&p, NULL, ids[t], x + 2 * t, want_ple + 4 * t, scratch));
        cmf__gemma4_layer_tail(&p, &tail.layer, &tail.act, NULL, want_ple + 4 * t + 2, want_x + 2 * t, scratch);
    }
    for (int bi = 0; bi < 3; bi++) { /* fast CPU, reference CPU, the Vulkan device when there is one */
        cmf__backend *be = bi < 2 ? cmf__cpu_backend_new(1, bi == 1) : vk_test_backend_try();
        CHECK(be != NULL || bi == 2);
        if (!be) break;
        cmf__buffer *ib = NULL, *xb = NULL, *pb = NULL;
        CHECK_OK(be->ops->buffer_new(be, sizeof ids, CMF__BUF_HOST, "ids", &ib));
        CHECK_OK(be->ops->buffer_new(be, sizeof x, 0, "x", &xb));
        CHECK_OK(be->ops->buffer_new(be, sizeof want_ple, 0, "ple", &pb));
        CHECK_OK(be->ops->set(be, ib, 0, ids, sizeof ids));
        CHECK_OK(be->ops->set(be, xb, 0, x, sizeof x));
        cmf__ten tx = cmf__ten_make(xb, 0, CMF__E_F32, 3, 2), tp = cmf__ten_make(pb, 0, CMF__E_F32, 3, 4);
        cmf__graph g = {0};
        cmf__node n1 = {.op = CMF__OP_PLE, .dst = tp, .a = cmf__ten_make(ib, 0, CMF__E_I32, 3, 1), .b = tx, .ext = &p};
        cmf__node n2 = {.op = CMF__OP_PLE_TAIL, .dst = tx, .a = tp, .ext = &tail, .i = {1}}; /* layer 1's rows */
        CHECK_OK(cmf__graph_push(&g, &n1));
        CHECK_OK(cmf__graph_push(&g, &n2));
        CHECK_OK(cmf__graph_check(&g));
        CHECK_OK(be->ops->compute(be, &g));
        float got_ple[3 * 4], got_x[3 * 2];
        CHECK_OK(be->ops->get(be, pb, 0, got_ple, sizeof got_ple));
        CHECK_OK(be->ops->get(be, xb, 0, got_x, sizeof got_x));
        double mp = 0, mx = 0;
        for (int i = 0; i < 12; i++) mp = fmax(mp, fabs(want_ple[i]));
        for (int i = 0; i < 6; i++) mx = fmax(mx, fabs(want_x[i]));
        for (int i = 0; i < 12; i++) CHECK_NEAR(got_ple[i], want_ple[i], 1e-6 * mp);
        for (int i = 0; i < 6; i++) CHECK_NEAR(got_x[i], want_x[i], 1e-6 * mx);
        int32_t bad = 3; /* outside the per-layer embedding: an error */
        CHECK_OK(be->ops->set(be, ib, 0, &bad, sizeof bad));
        CHECK_ERR(be->ops->compute(be, &g), CMF_ERR_BOUNDS, "token 3");
        cmf__graph_free(&g);
        be->ops->buffer_free(be, ib);
        be->ops->buffer_free(be, xb);
        be->ops->buffer_free(be, pb);
        cmf__backend_free(be);
    }
    cmf__qmat_free(&qe);
    cmf__qmat_free(&qp);
    cmf__qmat_free(&qg);
    cmf__qmat_free(&qb);
}

TEST(vnorm_and_acts) {
    float v[4] = {3, 4, 1, 1};
    cmf__gemma4_vnorm(v, 2, 2, 0.0f);
    CHECK_NEAR(v[0], 3 / sqrt(12.5), 1e-6);
    CHECK_NEAR(v[1], 4 / sqrt(12.5), 1e-6);
    CHECK_NEAR(v[2], 1, 1e-6);
    CHECK_EQ_INT(cmf__act_from_name("swiglu_oss"), CMF__ACT_SWIGLU_OSS);
    CHECK_EQ_INT(cmf__act_from_name("gelu_tanh"), CMF__ACT_GELU_TANH);
    CHECK_EQ_INT(cmf__act_from_name("relu2"), -1);
    CHECK_NEAR(cmf__act_gelu_tanh(1.0f), 0.841191990, 1e-6);
    CHECK_NEAR(cmf__act_softplus(30.0f), 30.0, 0);
    CHECK_NEAR(cmf__act_softplus(0.0f), log(2.0), 1e-7);
    float x[3] = {1, 2, 2}, o[3], w[3] = {0.5f, 0, -1};
    cmf__archs_rmsnorm(x, w, true, 0.0f, o, 3); /* gemma style (1+w) */
    CHECK_NEAR(o[0], 1.5 / sqrt(3.0), 1e-6);
    CHECK_NEAR(o[2], 0, 0);
}

int main(void) {
    RUN(yarn_gpt_oss_table);
    RUN(proportional_table);
    RUN(rotation_by_hand);
    RUN(gemma4_ple_by_hand);
    RUN(ple_ops_equal_per_token);
    RUN(vnorm_and_acts);
    return harness_done();
}
