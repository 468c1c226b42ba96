/* gemma4.c — Gemma-4 per-layer inputs, layer tail and V norm (gemma4.h).
 * The per-layer embedding row is decoded on demand: only the pages of the
 * tokens seen are touched. */
#include "compute/gemma4.h"

#include "util/error.h"
#include <math.h>
#include <string.h>

cmf_status cmf__gemma4_ple_check(const cmf__gemma4_ple *p, const char *what) {
    int64_t lp = (int64_t)p->n_layers * p->per_layer;
    if (p->n_layers < 1 || p->per_layer < 1)
        return cmf__error(CMF_ERR_CONFIG, "%s: hidden_size_per_layer_input %d, layers %d", what, p->per_layer,
                          p->n_layers);
    if (!p->embed_per_layer || p->embed_per_layer->cols != lp)
        return cmf__error(CMF_ERR_CONFIG, "%s: model.embed_tokens_per_layer.weight has %lld columns, expected %lld",
                          what, p->embed_per_layer ? (long long)p->embed_per_layer->cols : 0LL, (long long)lp);
    if (!p->model_projection || p->model_projection->rows != lp || p->model_projection->cols != p->hidden)
        return cmf__error(CMF_ERR_CONFIG, "%s: model.per_layer_model_projection.weight shape [%lld,%lld], expected [%lld,%d]",
                          what, p->model_projection ? (long long)p->model_projection->rows : 0LL,
                          p->model_projection ? (long long)p->model_projection->cols : 0LL, (long long)lp, p->hidden);
    if (!p->projection_norm)
        return cmf__error(CMF_ERR_CONFIG, "%s: model.per_layer_projection_norm.weight missing", what);
    return CMF_OK;
}

size_t cmf__gemma4_scratch_floats(const cmf__gemma4_ple *p) {
    size_t lp = (size_t)p->n_layers * p->per_layer;
    return 2 * lp + (size_t)p->hidden + 2 * (size_t)p->per_layer;
}

cmf_status cmf__gemma4_ple_inputs(const cmf__gemma4_ple *p, const cmf__matvec *mv, int token, const float *x,
                                  float *out, float *scratch) {
    int L = p->n_layers, P = p->per_layer;
    if (token < 0 || token >= p->embed_per_layer->rows)
        return cmf__error(CMF_ERR_BOUNDS, "token %d outside model.embed_tokens_per_layer.weight (%lld rows)", token,
                          (long long)p->embed_per_layer->rows);
    float *tok = scratch;
    cmf__qmat_decode_row(p->embed_per_layer, token, tok);
    cmf__archs_matvec(mv, p->model_projection, x, out);
    float pscale = 1.0f / sqrtf((float)p->hidden), escale = sqrtf((float)P), mix = 1.0f / sqrtf(2.0f);
    for (int l = 0; l < L; l++) {
        float *o = out + (size_t)l * P;
        for (int i = 0; i < P; i++) o[i] *= pscale;
        cmf__archs_rmsnorm(o, p->projection_norm, p->plus_one, p->eps, o, P);
        for (int i = 0; i < P; i++) o[i] = (o[i] + tok[(size_t)l * P + i] * escale) * mix;
    }
    return CMF_OK;
}

void cmf__gemma4_layer_tail(const cmf__gemma4_ple *p, const cmf__gemma4_layer *l, const cmf__act_params *act,
                            const cmf__matvec *mv, const float *ple, float *x, float *scratch) {
    int H = p->hidden, P = p->per_layer;
    if (l->gate) {
        float *g = scratch, *y = scratch + P;
        cmf__archs_matvec(mv, l->gate, x, g);
        /* act(gate)·ple: a gated product with ple as the "up" half */
        cmf__act_glu(act, g, ple, g, P);
        cmf__archs_matvec(mv, l->projection, g, y);
        cmf__archs_rmsnorm(y, l->post_norm, p->plus_one, p->eps, y, H);
        for (int i = 0; i < H; i++) x[i] += y[i];
    }
    if (l->layer_scalar != 1.0f)
        for (int i = 0; i < H; i++) x[i] *= l->layer_scalar;
}

void cmf__gemma4_vnorm(float *v, int n_heads, int head_dim, float eps) {
    for (int h = 0; h < n_heads; h++) cmf__archs_rmsnorm(v + (size_t)h * head_dim, NULL, false, eps, v + (size_t)h * head_dim, head_dim);
}
