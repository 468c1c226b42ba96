/* test_engine_moe.c — MoE routing and expert sums (src/engine/moe.h) against
 * float64 numpy on the same deterministic weights (f32(sin(0.7·i + 1.3·seed)·s)):
 * softmax ± renorm, sigmoid + selection-only expert_bias + scaling, gpt-oss
 * router/expert biases and clamped SwiGLU, shared expert gate, routable
 * sets; the batched form against the per-token one. */
#include "harness.h"

#include "compute/backend.h"
#include "compute/moe.h"
#include "vk_test.h"
#include <stdlib.h>

#define H 8
#define E 5
#define I 4

static float *det(int n, int seed, double scale) {
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) v[i] = (float)(sin(i * 0.7 + seed * 1.3) * scale);
    return v;
}

typedef struct owned_mat { float *data; cmf__qmat q; } owned_mat;

static void mat_make(owned_mat *m, int rows, int cols, int seed, double scale) {
    m->data = det(rows * cols, seed, scale);
    uint64_t shape[2] = {(uint64_t)rows, (uint64_t)cols};
    cmf_status st = cmf__qmat_init(&m->q, CMF_DTYPE_F32, (const uint8_t *)m->data, sizeof(float) * (uint64_t)rows * cols,
                                   2, shape, "test");
    CHECK_EQ_INT(st, CMF_OK);
}
static void mat_free(owned_mat *m) { cmf__qmat_free(&m->q); free(m->data); }

/* The fixture of every case: router [E,H], experts [I,H]/[I,H]/[H,I], a
 * shared expert of width 6, its gate [1,H], per-expert biases. */
typedef struct bank {
    owned_mat router, gate[E], up[E], down[E], sg, su, sd, sgate;
    float *gb[E], *ub[E], *db[E], *rbias, *ebias, *x;
    cmf__moe_expert ex[E], shared;
} bank;

static void bank_make(bank *b, bool biases) {
    mat_make(&b->router, E, H, 1, 2.0);
    for (int e = 0; e < E; e++) {
        mat_make(&b->gate[e], I, H, 10 + 3 * e, 0.5);
        mat_make(&b->up[e], I, H, 11 + 3 * e, 0.5);
        mat_make(&b->down[e], H, I, 12 + 3 * e, 0.5);
        b->gb[e] = det(I, 50 + e, 0.5);
        b->ub[e] = det(I, 60 + e, 0.5);
        b->db[e] = det(H, 70 + e, 0.5);
        b->ex[e] = (cmf__moe_expert){&b->gate[e].q, &b->up[e].q, &b->down[e].q,
                                     biases ? b->gb[e] : NULL, biases ? b->ub[e] : NULL, biases ? b->db[e] : NULL};
    }
    mat_make(&b->sg, 6, H, 40, 0.5);
    mat_make(&b->su, 6, H, 41, 0.5);
    mat_make(&b->sd, H, 6, 42, 0.5);
    mat_make(&b->sgate, 1, H, 43, 0.5);
    b->shared = (cmf__moe_expert){&b->sg.q, &b->su.q, &b->sd.q, NULL, NULL, NULL};
    b->rbias = det(E, 80, 0.5);
    b->ebias = det(E, 81, 0.3);
    b->x = det(H, 2, 1.0);
}

static void bank_free(bank *b) {
    mat_free(&b->router);
    for (int e = 0; e < E; e++) {
        mat_free(&b->gate[e]); mat_free(&b->up[e]); mat_free(&b->down[e]);
        free(b->gb[e]); free(b->ub[e]); free(b->db[e]);
    }
    mat_free(&b->sg); mat_free(&b->su); mat_free(&b->sd); mat_free(&b->sgate);
    free(b->rbias); free(b->ebias); free(b->x);
}

static cmf__moe_layer layer_of(bank *b, int k, bool norm) {
    cmf__moe_layer L = {0};
    L.hidden = H;
    L.route = (cmf__moe_route_params){E, k, norm, false, 1.0f};
    L.act = (cmf__act_params){CMF__ACT_SILU, 1.702f, 7.0f};
    L.router = &b->router.q;
    L.experts = b->ex;
    return L;
}

/* Runs the layer, checks the selected ids and every output within 2e-6
 * relative to the largest |value| (f32 sums of ~20 products of O(1) terms
 * against float64: a few ulp). */
static void expect(const cmf__moe_layer *L, const uint8_t *routable, const float *x, const int *want_idx, int want_k,
                   const double *want) {
    float *scratch = malloc(sizeof(float) * cmf__moe_scratch_floats(L));
    float out[H];
    int used[E];
    int k = cmf__moe_forward(L, routable, NULL, x, out, scratch, used);
    CHECK_EQ_INT(k, want_k);
    for (int j = 0; j < k && j < want_k; j++) CHECK_EQ_INT(used[j], want_idx[j]);
    double mx = 0;
    for (int i = 0; i < H; i++) mx = fmax(mx, fabs(want[i]));
    for (int i = 0; i < H; i++) CHECK_NEAR(out[i], want[i], 2e-6 * mx);
    free(scratch);
}

TEST(moe_softmax_no_renorm_shared_gate) { /* qwen2_moe */
    bank b; bank_make(&b, false);
    cmf__moe_layer L = layer_of(&b, 2, false);
    L.shared = &b.shared;
    L.shared_gate = &b.sgate.q;
    CHECK_OK(cmf__moe_layer_check(&L, "layer 0"));
    static const int idx[] = {0, 1};
    static const double want[] = {-0.397953614, 0.447203638, -0.408322425, 0.309138568,
                                  -0.197823228, 0.0998988443, -0.00238385543, -0.119936692};
    expect(&L, NULL, b.x, idx, 2, want);
    bank_free(&b);
}

TEST(moe_softmax_renorm) { /* qwen3_moe, mixtral */
    bank b; bank_make(&b, false);
    cmf__moe_layer L = layer_of(&b, 2, true);
    static const int idx[] = {0, 1};
    static const double want[] = {-0.374776138, 0.408896076, -0.395765878, 0.336902854,
                                  -0.239108889, 0.113684629, 0.0248764858, -0.160563005};
    expect(&L, NULL, b.x, idx, 2, want);
    bank_free(&b);
}

TEST(moe_sigmoid_expert_bias_scaling) {
    bank b; bank_make(&b, false);
    cmf__moe_layer L = layer_of(&b, 3, true);
    L.route.sigmoid = true;
    L.route.routed_scaling = 2.5f;
    L.expert_bias = b.ebias;
    static const int idx[] = {0, 4, 3};
    static const double want[] = {-0.853914451, 0.947064907, -0.930776932, 0.806932794,
                                  -0.589843219, 0.304594146, 0.015852382, -0.334467117};
    expect(&L, NULL, b.x, idx, 3, want);
    bank_free(&b);
}

TEST(moe_gpt_oss) {
    bank b; bank_make(&b, true);
    cmf__moe_layer L = layer_of(&b, 2, true);
    L.router_bias = b.rbias;
    L.act.kind = CMF__ACT_SWIGLU_OSS;
    static const int idx[] = {0, 1};
    static const double want[] = {-0.050528312, -0.105848017, -0.709282202, -0.194862969,
                                  -0.468807805, 0.351800446, 0.239834643, 0.5865946};
    expect(&L, NULL, b.x, idx, 2, want);
    bank_free(&b);
}

TEST(moe_routable_sets) {
    bank b; bank_make(&b, false);
    cmf__moe_layer L = layer_of(&b, 2, false);
    /* all-ones row (tail bits zero) == no mask */
    uint8_t all = 0x1f;
    static const int idx_all[] = {0, 1};
    float out_none[H], out_all[H];
    float *scratch = malloc(sizeof(float) * cmf__moe_scratch_floats(&L));
    int used[E];
    CHECK_EQ_INT(cmf__moe_forward(&L, NULL, NULL, b.x, out_none, scratch, used), 2);
    CHECK_EQ_INT(cmf__moe_forward(&L, &all, NULL, b.x, out_all, scratch, used), 2);
    CHECK_EQ_INT(used[0], idx_all[0]);
    CHECK_EQ_INT(used[1], idx_all[1]);
    for (int i = 0; i < H; i++) CHECK(out_none[i] == out_all[i]);
    /* {0,2,4}: softmax renormalised over the routable experts only */
    uint8_t some = 0x15;
    static const int idx_some[] = {0, 4};
    static const double want_some[] = {-0.369462414, 0.406195456, -0.395990434, 0.340026638,
                                       -0.24477093, 0.121230648, 0.0163184713, -0.151981919};
    expect(&L, &some, b.x, idx_some, 2, want_some);
    /* {3}: fewer routable experts than top_k */
    uint8_t one = 0x08;
    static const int idx_one[] = {3};
    static const double want_one[] = {0.376152537, -0.421328171, 0.417817084, -0.366025023,
                                      0.271936824, -0.146424882, 0.00399277081, 0.138900741};
    expect(&L, &one, b.x, idx_one, 1, want_one);
    /* nothing routable: no expert runs, output zero */
    uint8_t none = 0;
    CHECK_EQ_INT(cmf__moe_forward(&L, &none, NULL, b.x, out_all, scratch, used), 0);
    for (int i = 0; i < H; i++) CHECK(out_all[i] == 0.0f);
    free(scratch);
    bank_free(&b);
}

TEST(route_ties_and_weights) {
    cmf__moe_route_params p = {4, 2, false, false, 1.0f};
    float logits[4] = {0.5f, 0.5f, 0.5f, 0.5f}, scores[4], w[4];
    int idx[4];
    /* equal keys: the lower indices win, in order */
    CHECK_EQ_INT(cmf__moe_route(&p, logits, NULL, NULL, scores, idx, w), 2);
    CHECK_EQ_INT(idx[0], 0);
    CHECK_EQ_INT(idx[1], 1);
    CHECK_NEAR(w[0], 0.25, 1e-7);
    uint8_t mask = 0x0c; /* {2,3} */
    CHECK_EQ_INT(cmf__moe_route(&p, logits, NULL, &mask, scores, idx, w), 2);
    CHECK_EQ_INT(idx[0], 2);
    CHECK_EQ_INT(idx[1], 3);
    CHECK_NEAR(w[0], 0.5, 1e-7);
    /* softmax by hand: logits 0, ln 3, 0, ln 2 -> probs 1/7, 3/7, 1/7, 2/7 */
    float l2[4] = {0.0f, logf(3.0f), 0.0f, logf(2.0f)};
    CHECK_EQ_INT(cmf__moe_route(&p, l2, NULL, NULL, scores, idx, w), 2);
    CHECK_EQ_INT(idx[0], 1);
    CHECK_EQ_INT(idx[1], 3);
    CHECK_NEAR(w[0], 3.0 / 7, 1e-7);
    CHECK_NEAR(w[1], 2.0 / 7, 1e-7);
    p.norm_topk = true;
    p.routed_scaling = 2.0f;
    cmf__moe_route(&p, l2, NULL, NULL, scores, idx, w);
    CHECK_NEAR(w[0], 2.0 * 0.6, 1e-6);
    CHECK_NEAR(w[1], 2.0 * 0.4, 1e-6);
    /* expert_bias changes the choice but not the weights */
    float bias[4] = {0.0f, 0.0f, 1.0f, 0.0f};
    p.norm_topk = false;
    p.routed_scaling = 1.0f;
    cmf__moe_route(&p, l2, bias, NULL, scores, idx, w);
    CHECK_EQ_INT(idx[0], 2);
    CHECK_EQ_INT(idx[1], 1);
    CHECK_NEAR(w[0], 1.0 / 7, 1e-7);
    CHECK_NEAR(w[1], 3.0 / 7, 1e-7);
}

TEST(moe_layer_check_errors) {
    bank b; bank_make(&b, false);
    cmf__moe_layer L = layer_of(&b, 2, false);
    L.route.top_k = 6;
    CHECK_ERR(cmf__moe_layer_check(&L, "layer 2"), CMF_ERR_CONFIG, "layer 2: moe top_k 6");
    L.route.top_k = 2;
    L.hidden = 7;
    CHECK_ERR(cmf__moe_layer_check(&L, "layer 2"), CMF_ERR_CONFIG, "router mlp.gate.weight shape [5,8], expected [5,7]");
    L.hidden = H;
    cmf__moe_expert bad[E];
    for (int e = 0; e < E; e++) bad[e] = b.ex[e];
    bad[3].down = &b.gate[3].q; /* [4,8] where [8,4] belongs */
    L.experts = bad;
    CHECK_ERR(cmf__moe_layer_check(&L, "layer 1"), CMF_ERR_CONFIG, "expert 3: down_proj [4,8], expected [8,4]");
    L.experts = b.ex;
    L.shared = &b.shared;
    L.shared_gate = &b.router.q;
    CHECK_ERR(cmf__moe_layer_check(&L, "layer 0"), CMF_ERR_CONFIG, "shared_expert_gate shape [5,8], expected [1,8]");
    bank_free(&b);
}

TEST(act_swiglu_oss_by_hand) {
    cmf__act_params a = {CMF__ACT_SWIGLU_OSS, 1.702f, 7.0f};
    float g[3] = {9.0f, -1.0f, 0.5f}, u[3] = {-9.0f, 2.0f, 8.0f}, h[3];
    cmf__act_glu(&a, g, u, h, 3);
    /* g clamps to 7 from above only; u clamps to [-7, 7] */
    CHECK_NEAR(h[0], (-7.0 + 1) * 7.0 / (1 + exp(-1.702 * 7.0)), 1e-5);
    CHECK_NEAR(h[1], (2.0 + 1) * -1.0 / (1 + exp(1.702)), 1e-6);
    CHECK_NEAR(h[2], (7.0 + 1) * 0.5 / (1 + exp(-1.702 * 0.5)), 1e-6);
}

/* The batched form against the per-token one: 7 tokens (distinct inputs),
 * every variant of the cases above. Per token the sums run in another
 * order (ascending expert vs selection order): 1e-6 relative. And rows of
 * a batch equal the same tokens fed one at a time, bit for bit. */
/* The four routing variants the batched tests run: shared expert + gate
 * (qwen2_moe), renormalised top-2 (qwen3_moe), sigmoid + expert bias +
 * scaling, top-3; router bias + clamped SwiGLU (gpt-oss). bank_make(b,
 * variant == 3) first. */
static cmf__moe_layer variant_layer(bank *b, int variant) {
    cmf__moe_layer L = layer_of(b, variant == 2 ? 3 : 2, variant != 0);
    if (variant == 0) { L.shared = &b->shared; L.shared_gate = &b->sgate.q; }
    if (variant == 2) { L.route.sigmoid = true; L.route.routed_scaling = 2.5f; L.expert_bias = b->ebias; }
    if (variant == 3) { L.router_bias = b->rbias; L.act.kind = CMF__ACT_SWIGLU_OSS; }
    return L;
}

TEST(moe_batch_equals_per_token) {
    for (int variant = 0; variant < 4; variant++) {
        bank b; bank_make(&b, variant == 3);
        cmf__moe_layer L = variant_layer(&b, variant);
        enum { N = 7 };
        float x[N * H], want[N * H], got[N * H], one[H];
        for (int t = 0; t < N; t++)
            for (int i = 0; i < H; i++) x[t * H + i] = (float)sin(0.37 * (t * H + i) + variant);
        float *s1 = malloc(sizeof(float) * cmf__moe_scratch_floats(&L));
        float *sb = malloc(sizeof(float) * cmf__moe_batch_scratch_floats(&L, N));
        uint8_t some = 0x1d; /* {0,2,3,4} */
        const uint8_t *mask = variant == 1 ? &some : NULL;
        for (int t = 0; t < N; t++) cmf__moe_forward(&L, mask, NULL, x + t * H, want + t * H, s1, NULL);
        cmf__moe_forward_batch(&L, mask, NULL, x, N, got, sb);
        double mx = 0;
        for (int i = 0; i < N * H; i++) mx = fmax(mx, fabs(want[i]));
        for (int i = 0; i < N * H; i++) CHECK_NEAR(got[i], want[i], 1e-6 * mx);
        for (int t = 0; t < N; t++) {
            cmf__moe_forward_batch(&L, mask, NULL, x + t * H, 1, one, sb);
            for (int i = 0; i < H; i++) CHECK(one[i] == got[t * H + i]);
        }
        free(s1);
        free(sb);
        bank_free(&b);
    }
}

/* The moe op of the CPU backend (fast and reference kernels) and of the
 * Vulkan device when there is one (one node for 7 tokens, the four
 * routing variants, a routable set) against the per-token form: 1e-5 of
 * the largest |value| (the backend's batched matmul sums in another order
 * than the reference matvec; the GPU's exp is another library's). */
TEST(moe_op_equals_per_token) {
    for (int bi = 0; bi < 3; bi++) {
        cmf__backend *be = bi < 2 ? cmf__cpu_backend_new(bi ? 1 : 2, bi == 1) : NULL;
        CHECK(be != NULL || bi == 2);
        if (!be && bi < 2) return;
        for (int variant = 0; variant < 4; variant++) {
            /* the GPU keeps device copies of weights by address, and each
             * variant's bank may reuse the last one's: a device per variant */
            if (bi == 2 && !(be = vk_test_backend_try())) break;
            bank b; bank_make(&b, variant == 3);
            cmf__moe_layer L = variant_layer(&b, variant);
            enum { N = 7 };
            float x[N * H], want[N * H], got[N * H];
            for (int t = 0; t < N; t++)
                for (int i = 0; i < H; i++) x[t * H + i] = (float)sin(0.41 * (t * H + i) + variant);
            float *s1 = malloc(sizeof(float) * cmf__moe_scratch_floats(&L));
            static const uint8_t some = 0x1d; /* {0,2,3,4} */
            const uint8_t *mask = variant == 1 ? &some : NULL;
            for (int t = 0; t < N; t++) cmf__moe_forward(&L, mask, NULL, x + t * H, want + t * H, s1, NULL);
            cmf__buffer *xb = NULL, *yb = NULL;
            CHECK_OK(be->ops->buffer_new(be, sizeof x, 0, "x", &xb));
            CHECK_OK(be->ops->buffer_new(be, sizeof got, 0, "y", &yb));
            CHECK_OK(be->ops->set(be, xb, 0, x, sizeof x));
            cmf__graph g = {0};
            cmf__node nd = {.op = CMF__OP_MOE, .dst = cmf__ten_make(yb, 0, CMF__E_F32, N, H),
                            .a = cmf__ten_make(xb, 0, CMF__E_F32, N, H), .ext = &L, .bits = mask};
            CHECK_OK(cmf__graph_push(&g, &nd));
            CHECK_OK(cmf__graph_check(&g));
            CHECK_OK(be->ops->compute(be, &g));
            CHECK_OK(be->ops->get(be, yb, 0, got, sizeof got));
            double mx = 0;
            for (int i = 0; i < N * H; i++) mx = fmax(mx, fabs(want[i]));
            for (int i = 0; i < N * H; i++) CHECK_NEAR(got[i], want[i], 1e-5 * mx);
            cmf__graph_free(&g);
            be->ops->buffer_free(be, xb);
            be->ops->buffer_free(be, yb);
            free(s1);
            bank_free(&b);
            if (bi == 2) cmf__backend_free(be), be = NULL;
        }
        cmf__backend_free(be);
    }
}

int main(void) {
    RUN(moe_batch_equals_per_token);
    RUN(moe_op_equals_per_token);
    RUN(moe_softmax_no_renorm_shared_gate);
    RUN(moe_softmax_renorm);
    RUN(moe_sigmoid_expert_bias_scaling);
    RUN(moe_gpt_oss);
    RUN(moe_routable_sets);
    RUN(route_ties_and_weights);
    RUN(moe_layer_check_errors);
    RUN(act_swiglu_oss_by_hand);
    return harness_done();
}
