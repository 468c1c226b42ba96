/* test_engine_features.c — the routing feature hook (engine/features.h) on
 * the llama fixture at f32: at layer 0 φ is the mean of final_norm over the
 * prompt's embedding rows (computed here from the weights); at n_layer the
 * output head applied to φ equals the mean of the engine's own logits over
 * the prompt (the head is linear); a middle layer differs from both;
 * bad layers and empty prompts are refused. */
#include "engine/engine.h"
#include "engine/features.h"
#include "fixture_model.h"
#include "harness.h"
#include "quant/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int32_t TOK[] = {1, 26, 147, 292, 286, 233, 112};
enum { NT = sizeof TOK / sizeof *TOK };

TEST(features)
{
    cmf__model *m = fixture_model_f32("llama");
    if (!m) SKIP("hf-models/llama fixture or CMF_BIN absent");
    const cmf__arch *a = &m->arch;
    const int64_t H = a->hidden_size, V = a->vocab_size, L = a->n_layer;
    float *phi = calloc((size_t)H, sizeof *phi), *ref = calloc((size_t)H, sizeof *ref);
    float *row = calloc((size_t)H, sizeof *row), *lg = calloc((size_t)(NT * V), sizeof *lg);
    float *mid = calloc((size_t)H, sizeof *mid);
    CHECK(phi && ref && row && lg && mid);
    if (!phi || !ref || !row || !lg || !mid) goto done;

    /* layer 0: mean over tokens of rmsnorm(embedding row) * w */
    CHECK_OK(cmf__engine_features(m, NULL, TOK, NT, 0, phi));
    for (int t = 0; t < NT; t++) {
        cmf__qmat_decode_row(&m->embed.q, TOK[t], row);
        double ss = 0;
        for (int64_t i = 0; i < H; i++) {
            row[i] *= (float)a->embedding_multiplier;
            ss += (double)row[i] * row[i];
        }
        double inv = 1.0 / sqrt(ss / (double)H + a->rms_norm_eps);
        for (int64_t i = 0; i < H; i++) ref[i] += (float)(row[i] * inv * m->final_norm.v[i] / NT);
    }
    double e0 = harness_max_rel_err(phi, ref, (size_t)H);
    printf("layer 0: max relative error against the embedding reference %.3g\n", e0);
    CHECK(e0 < 1e-5); /* measured 1.1e-7: f32 sums in two orders */

    /* layer n_layer: lm_head(φ) == mean of the logits over the prompt */
    CHECK_OK(cmf__engine_features(m, NULL, TOK, NT, L, phi));
    cmf__engine *e = NULL;
    cmf__engine_params p = cmf__engine_params_default();
    p.n_ctx = NT;
    CHECK_OK(cmf__engine_new(m, &p, &e));
    if (e) CHECK_OK(cmf__engine_forward(e, TOK, NT, lg, true));
    cmf__engine_free(e);
    float *mean = calloc((size_t)V, sizeof *mean), *head = calloc((size_t)V, sizeof *head);
    CHECK(mean && head);
    if (mean && head) {
        for (int t = 0; t < NT; t++)
            for (int64_t v = 0; v < V; v++) mean[v] += lg[t * V + v] / NT;
        for (int64_t v = 0; v < V; v++) head[v] = cmf__qmat_dot_row(&m->lm_head.q, v, phi);
        double el = harness_max_rel_err(head, mean, (size_t)V);
        printf("layer %lld: lm_head(phi) against the mean logits, max relative error %.3g\n", (long long)L, el);
        CHECK(el < 1e-5); /* measured 2e-7: the same products summed in another order */
    }
    free(mean);
    free(head);

    /* a middle layer is neither */
    CHECK_OK(cmf__engine_features(m, NULL, TOK, NT, 1, mid));
    CHECK(harness_max_rel_err(mid, ref, (size_t)H) > 1e-2);
    CHECK(harness_max_rel_err(mid, phi, (size_t)H) > 1e-2);

    CHECK_ERR(cmf__engine_features(m, NULL, TOK, NT, L + 1, phi), CMF_ERR_ARG, "feature layer");
    CHECK_ERR(cmf__engine_features(m, NULL, TOK, 0, 1, phi), CMF_ERR_ARG, "empty prompt");
    double E[1];
    CHECK_ERR(cmf__skill_route_scores(m, NULL, TOK, NT, E, 1, NULL), CMF_ERR_ARG, "0 skills in the registry");
done:
    free(phi);
    free(ref);
    free(row);
    free(lg);
    free(mid);
    cmf__model_free(m);
}

int main(void)
{
    RUN(features);
    return harness_done();
}
