/* test_engine_deltanet.c — gated DeltaNet (src/engine/deltanet.h): the
 * recurrence against float64 numpy, the chunked core against the recurrent
 * one for several chunk sizes, a layer fed as one prompt / token by token /
 * split (outputs and states agree), shape checks. Fixture parity of the
 * layer is in test_engine_archs_ref.c. */
#include "harness.h"

#include "compute/backend.h"
#include "vk_test.h"
#include "compute/deltanet.h"
#include <stdlib.h>
#include <string.h>

static void det(float *v, int n, int seed, double scale) {
    for (int i = 0; i < n; i++) v[i] = (float)(sin(i * 0.7 + seed * 1.3) * scale);
}

enum { T = 11, DK = 5, DV = 3 };

static void core_inputs(float *q, float *k, float *v, float *g, float *beta) {
    det(q, T * DK, 1, 1.0);
    det(k, T * DK, 2, 1.0);
    det(v, T * DV, 3, 1.0);
    det(g, T, 4, 1.0);
    det(beta, T, 5, 2.0);
    for (int t = 0; t < T; t++) {
        double ss = 0;
        for (int i = 0; i < DK; i++) ss += (double)q[t * DK + i] * q[t * DK + i];
        for (int i = 0; i < DK; i++) q[t * DK + i] = (float)(q[t * DK + i] / sqrt(ss));
        g[t] = -fabsf(g[t]);
        beta[t] = 1.0f / (1.0f + expf(-beta[t]));
    }
}

TEST(core_recurrent_matches_numpy) {
    float q[T * DK], k[T * DK], v[T * DV], g[T], beta[T], S[DK * DV] = {0}, o[T * DV];
    core_inputs(q, k, v, g, beta);
    cmf__gdn_core_recurrent(T, DK, DV, q, k, v, g, beta, S, o);
    /* numpy float64 over the same f32 inputs; 1e-6 absolute = f32 rounding
     * of O(1) values over 11 steps */
    static const double last[] = {-0.00904126985, 0.251206291, 0.393307604};
    static const double o4[] = {0.0878169943, 0.188717915, 0.200861851};
    for (int j = 0; j < DV; j++) {
        CHECK_NEAR(o[(T - 1) * DV + j], last[j], 1e-6);
        CHECK_NEAR(o[4 * DV + j], o4[j], 1e-6);
    }
    double sum = 0;
    for (int i = 0; i < DK * DV; i++) sum += S[i];
    CHECK_NEAR(sum, -0.12807095059254492, 1e-5);
    CHECK_NEAR(S[2 * DV + 1], -0.01764248871234103, 1e-6);
}

TEST(core_chunked_equals_recurrent) {
    float q[T * DK], k[T * DK], v[T * DV], g[T], beta[T];
    core_inputs(q, k, v, g, beta);
    static const int chunks[] = {1, 3, 4, 11, 64};
    for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
        int C = chunks[c];
        float S1[DK * DV], S2[DK * DV], o1[T * DV], o2[T * DV];
        /* a non-zero initial state: the chunked form must carry it too */
        det(S1, DK * DV, 9, 0.3);
        memcpy(S2, S1, sizeof S1);
        float *scratch = malloc(sizeof(float) * (size_t)C * (2 * C + 2 * DK + 2 * DV + 2));
        cmf__gdn_core_recurrent(T, DK, DV, q, k, v, g, beta, S1, o1);
        cmf__gdn_core_chunked(T, DK, DV, C, q, k, v, g, beta, S2, o2, scratch);
        /* different association of the same sums: 2e-6 on O(1) values */
        for (int i = 0; i < T * DV; i++) CHECK_NEAR(o2[i], o1[i], 2e-6);
        for (int i = 0; i < DK * DV; i++) CHECK_NEAR(S2[i], S1[i], 2e-6);
        free(scratch);
    }
}

/* A small layer with deterministic weights: hidden 12, 2 key heads, 4
 * value heads, dk 4, dv 3, conv kernel 4. */
typedef struct layer {
    cmf__gdn_dims d;
    float wqkvz[(2 * 8 + 2 * 12) * 12], wba[8 * 12], wout[12 * 12], conv[28 * 4], alog[4], dtb[4], nw[3];
    cmf__qmat q_qkvz, q_ba, q_out;
    cmf__gdn_weights w;
} layer;

static void qm(cmf__qmat *m, const float *data, int rows, int cols) {
    uint64_t shape[2] = {(uint64_t)rows, (uint64_t)cols};
    CHECK_OK(cmf__qmat_init(m, CMF_DTYPE_F32, (const uint8_t *)data, sizeof(float) * (uint64_t)rows * cols, 2, shape, "t"));
}

static void layer_make(layer *L) {
    L->d = (cmf__gdn_dims){12, 2, 4, 4, 3, 4, 1e-6f};
    det(L->wqkvz, (int)(sizeof L->wqkvz / sizeof(float)), 20, 0.5);
    det(L->wba, 8 * 12, 21, 0.5);
    det(L->wout, 12 * 12, 22, 0.5);
    det(L->conv, 28 * 4, 23, 0.6);
    det(L->alog, 4, 24, 1.0);
    det(L->dtb, 4, 25, 1.0);
    det(L->nw, 3, 26, 1.0);
    qm(&L->q_qkvz, L->wqkvz, 40, 12);
    qm(&L->q_ba, L->wba, 8, 12);
    qm(&L->q_out, L->wout, 12, 12);
    L->w = (cmf__gdn_weights){&L->q_qkvz, &L->q_ba, &L->q_out, L->conv, L->alog, L->dtb, L->nw};
}

typedef struct state { float conv[3 * 28]; float S[4 * 4 * 3]; cmf__gdn_state s; } state;

static void state_new(layer *L, state *st) {
    st->s = (cmf__gdn_state){st->conv, st->S};
    cmf__gdn_state_reset(&L->d, &st->s);
}

TEST(layer_prefill_equals_steps) {
    layer L;
    layer_make(&L);
    CHECK_EQ_INT(cmf__gdn_conv_dim(&L.d), 28);
    CHECK_OK(cmf__gdn_check(&L.d, &L.w, "layer 0"));
    enum { N = 9 };
    float x[N * 12], want[N * 12], got[N * 12];
    det(x, N * 12, 30, 1.5);
    float *scratch = malloc(sizeof(float) * cmf__gdn_scratch_floats(&L.d));
    state a, b;
    state_new(&L, &a);
    for (int t = 0; t < N; t++) cmf__gdn_step(&L.d, &L.w, &a.s, NULL, x + t * 12, want + t * 12, scratch);
    /* the whole prompt at once, chunk 4 (so chunks of 4, 4, 1) */
    state_new(&L, &b);
    CHECK_OK(cmf__gdn_prefill(&L.d, &L.w, &b.s, NULL, N, x, got, 4));
    double mx = 0;
    for (int i = 0; i < N * 12; i++) mx = fmax(mx, fabs(want[i]));
    for (int i = 0; i < N * 12; i++) CHECK_NEAR(got[i], want[i], 1e-5 * mx);
    for (int i = 0; i < 3 * 28; i++) CHECK(b.conv[i] == a.conv[i]);
    for (int i = 0; i < 48; i++) CHECK_NEAR(b.S[i], a.S[i], 1e-5);
    /* split: 2 tokens of prefill (fewer than the conv window), 3 more, then steps */
    state_new(&L, &b);
    CHECK_OK(cmf__gdn_prefill(&L.d, &L.w, &b.s, NULL, 2, x, got, 64));
    CHECK_OK(cmf__gdn_prefill(&L.d, &L.w, &b.s, NULL, 3, x + 24, got + 24, 2));
    for (int t = 5; t < N; t++) cmf__gdn_step(&L.d, &L.w, &b.s, NULL, x + t * 12, got + t * 12, scratch);
    for (int i = 0; i < N * 12; i++) CHECK_NEAR(got[i], want[i], 1e-5 * mx);
    for (int i = 0; i < 3 * 28; i++) CHECK(b.conv[i] == a.conv[i]);
    free(scratch);
    cmf__qmat_free(&L.q_qkvz); cmf__qmat_free(&L.q_ba); cmf__qmat_free(&L.q_out);
}

TEST(layer_check_errors) {
    layer L;
    layer_make(&L);
    cmf__gdn_dims d = L.d;
    d.n_v_heads = 3;
    CHECK_ERR(cmf__gdn_check(&d, &L.w, "layer 2"), CMF_ERR_CONFIG, "layer 2: linear attention dims");
    d = L.d;
    d.v_dim = 4;
    CHECK_ERR(cmf__gdn_check(&d, &L.w, "layer 2"), CMF_ERR_CONFIG, "in_proj_qkvz.weight shape [40,12], expected [48,12]");
    cmf__gdn_weights w = L.w;
    w.in_ba = &L.q_out;
    CHECK_ERR(cmf__gdn_check(&L.d, &w, "layer 1"), CMF_ERR_CONFIG, "in_proj_ba.weight shape [12,12], expected [8,12]");
    w = L.w;
    w.A_log = NULL;
    CHECK_ERR(cmf__gdn_check(&L.d, &w, "layer 1"), CMF_ERR_CONFIG, "A_log");
    cmf__qmat_free(&L.q_qkvz); cmf__qmat_free(&L.q_ba); cmf__qmat_free(&L.q_out);
}

/* The gdn op of the CPU backend (fast and reference kernels): a prompt of
 * one sequence (the chunked form) and then two sequences interleaved
 * token by token (the step form, each its own state row) against
 * cmf__gdn_step per sequence. Bound 1e-5 of the output's magnitude, as the
 * prefill-vs-steps test above. */
TEST(gdn_op_one_and_two_sequences) {
    layer L;
    layer_make(&L);
    enum { N = 9 };
    const size_t per = cmf__gdn_conv_floats(&L.d) + cmf__gdn_rec_floats(&L.d);
    float x[N * 12], want[2][N * 12], got[N * 12];
    det(x, N * 12, 31, 1.5);
    float *scratch = malloc(sizeof(float) * cmf__gdn_scratch_floats(&L.d));
    state ref[2];
    for (int q = 0; q < 2; q++) {
        state_new(&L, &ref[q]);
        for (int t = 0; t < N; t++) /* sequence q sees x shifted by q tokens */
            cmf__gdn_step(&L.d, &L.w, &ref[q].s, NULL, x + ((t + q) % N) * 12, want[q] + t * 12, scratch);
    }
    double mx = 0;
    for (int i = 0; i < N * 12; i++) mx = fmax(mx, fmax(fabs(want[0][i]), fabs(want[1][i])));
    for (int bi = 0; bi < 3; bi++) { /* fast CPU, reference CPU, the Vulkan device when there is one */
        cmf__backend *be = bi < 2 ? cmf__cpu_backend_new(bi ? 1 : 2, bi == 1) : vk_test_backend_try();
        CHECK(be != NULL || bi == 2);
        if (!be) break;
        cmf__buffer *sb = NULL, *xb = NULL, *yb = NULL, *qb = NULL;
        CHECK_OK(be->ops->buffer_new(be, 2 * per * 4, 0, "state", &sb));
        CHECK_OK(be->ops->buffer_new(be, sizeof x, 0, "x", &xb));
        CHECK_OK(be->ops->buffer_new(be, sizeof got, 0, "y", &yb));
        CHECK_OK(be->ops->buffer_new(be, 2 * N * 4, CMF__BUF_HOST, "seq", &qb));
        cmf__gdn_op op = {L.d, L.w, cmf__ten_make(sb, 0, CMF__E_F32, 2, (int64_t)per)};
        /* one sequence (slot 1), the whole prompt in one node */
        int32_t seq[2 * N];
        for (int t = 0; t < N; t++) seq[t] = 1;
        float xs[N * 12];
        for (int t = 0; t < N; t++) memcpy(xs + t * 12, x + ((t + 1) % N) * 12, 12 * sizeof(float));
        CHECK_OK(be->ops->set(be, xb, 0, xs, sizeof xs));
        CHECK_OK(be->ops->set(be, qb, 0, seq, N * 4));
        cmf__graph g = {0};
        cmf__node nd = {.op = CMF__OP_GDN, .dst = cmf__ten_make(yb, 0, CMF__E_F32, N, 12),
                        .a = cmf__ten_make(xb, 0, CMF__E_F32, N, 12), .b = cmf__ten_make(qb, 0, CMF__E_I32, N, 1),
                        .ext = &op};
        CHECK_OK(cmf__graph_push(&g, &nd));
        CHECK_OK(cmf__graph_check(&g));
        CHECK_OK(be->ops->compute(be, &g));
        CHECK_OK(be->ops->get(be, yb, 0, got, sizeof got));
        for (int i = 0; i < N * 12; i++) CHECK_NEAR(got[i], want[1][i], 1e-5 * mx);
        /* two sequences, interleaved, one token each per node: slot 0 fresh, slot 1 reset */
        CHECK_OK(be->ops->clear(be, sb, 0, 2 * per * 4));
        for (int t = 0; t < N; t++) {
            float pair[2 * 12];
            memcpy(pair, x + t * 12, 12 * sizeof(float));
            memcpy(pair + 12, x + ((t + 1) % N) * 12, 12 * sizeof(float));
            int32_t s2[2] = {0, 1};
            CHECK_OK(be->ops->set(be, xb, 0, pair, sizeof pair));
            CHECK_OK(be->ops->set(be, qb, 0, s2, sizeof s2));
            g.nodes[0].dst.rows = g.nodes[0].a.rows = g.nodes[0].b.rows = 2;
            CHECK_OK(be->ops->compute(be, &g));
            float out[2 * 12];
            CHECK_OK(be->ops->get(be, yb, 0, out, sizeof out));
            for (int i = 0; i < 12; i++) {
                CHECK_NEAR(out[i], want[0][t * 12 + i], 1e-5 * mx);
                CHECK_NEAR(out[12 + i], want[1][t * 12 + i], 1e-5 * mx);
            }
        }
        int32_t bad[1] = {2}; /* a slot past the state rows: an error, not a write */
        CHECK_OK(be->ops->set(be, qb, 0, bad, sizeof bad));
        g.nodes[0].dst.rows = g.nodes[0].a.rows = g.nodes[0].b.rows = 1;
        CHECK_ERR(be->ops->compute(be, &g), CMF_ERR_BOUNDS, "sequence 2");
        cmf__graph_free(&g);
        be->ops->buffer_free(be, sb);
        be->ops->buffer_free(be, xb);
        be->ops->buffer_free(be, yb);
        be->ops->buffer_free(be, qb);
        cmf__backend_free(be);
    }
    free(scratch);
    cmf__qmat_free(&L.q_qkvz); cmf__qmat_free(&L.q_ba); cmf__qmat_free(&L.q_out);
}

int main(void) {
    RUN(core_recurrent_matches_numpy);
    RUN(core_chunked_equals_recurrent);
    RUN(layer_prefill_equals_steps);
    RUN(layer_check_errors);
    RUN(gdn_op_one_and_two_sequences);
    return harness_done();
}
