/* rope.c — rotary inverse frequencies per layer kind, computed the way
 * transformers computes them (f32 arithmetic for the default table, the
 * llama3 / yarn / linear adjustments of its rope init functions). Always
 * the half-split (rotate_half) form over the leading rot_dims. */
#include "engine/engine.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>

static double yarn_mscale(double scale) { return scale <= 1 ? 1.0 : 0.1 * log(scale) + 1.0; }

static double yarn_corr_dim(double n_rot, double dim, double base, double max_pos)
{
    return (dim * log(max_pos / (n_rot * 2 * M_PI))) / (2 * log(base));
}

cmf_status cmf__rope_build(const cmf__rope_cfg *c, int64_t head_dim, double max_pos, cmf__rope_table *out)
{
    int64_t dim = (int64_t)((double)head_dim * c->partial);
    dim &= ~(int64_t)1;
    /* proportional (gemma4): the whole head is rotated as pairs (i, i + head_dim/2);
     * only the first dim/2 pairs have a frequency, the rest get 0 (identity) */
    int64_t n_freq = dim / 2;
    if (c->type == CMF__ROPE_PROPORTIONAL) dim = head_dim & ~(int64_t)1;
    out->rot_dims = dim;
    out->attn_factor = 1.0f;
    out->inv_freq = calloc((size_t)(dim / 2 + 1), sizeof(float));
    if (!out->inv_freq) return cmf__error(CMF_ERR_NOMEM, "rope: out of memory");
    int64_t half = dim / 2;
    /* proportional: frequencies over the full head width */
    int64_t fdim = c->type == CMF__ROPE_PROPORTIONAL ? head_dim : dim;
    float base = (float)c->theta;
    for (int64_t i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)fdim;
        out->inv_freq[i] = i < n_freq ? 1.0f / powf(base, e) : 0.0f;
    }
    switch (c->type) {
    case CMF__ROPE_DEFAULT:
    case CMF__ROPE_PROPORTIONAL: break;
    case CMF__ROPE_LINEAR:
        for (int64_t i = 0; i < half; i++) out->inv_freq[i] = out->inv_freq[i] / (float)c->factor;
        break;
    case CMF__ROPE_LLAMA3: {
        double old = c->orig_max_pos;
        double lw = old / c->low_freq_factor, hw = old / c->high_freq_factor;
        for (int64_t i = 0; i < half; i++) {
            float f = out->inv_freq[i];
            float wl = 2.0f * (float)M_PI / f;
            float adj = wl > (float)lw ? f / (float)c->factor : f;
            if (!(wl < (float)hw) && !(wl > (float)lw)) {
                float smooth = ((float)old / wl - (float)c->low_freq_factor) /
                               ((float)c->high_freq_factor - (float)c->low_freq_factor);
                adj = (1 - smooth) * adj / (float)c->factor + smooth * adj;
            }
            out->inv_freq[i] = adj;
        }
        break;
    }
    case CMF__ROPE_YARN: {
        double orig = c->orig_max_pos > 0 ? c->orig_max_pos : max_pos;
        double af = c->attention_factor >= 0 ? c->attention_factor : yarn_mscale(c->factor);
        double lo = yarn_corr_dim(c->beta_fast, (double)dim, c->theta, orig);
        double hi = yarn_corr_dim(c->beta_slow, (double)dim, c->theta, orig);
        if (c->truncate) {
            lo = floor(lo);
            hi = ceil(hi);
        }
        if (lo < 0) lo = 0;
        if (hi > (double)dim - 1) hi = (double)dim - 1;
        if (lo == hi) hi += 0.001;
        for (int64_t i = 0; i < half; i++) {
            float pf = powf(base, (float)(2 * i) / (float)dim);
            float extra = 1.0f / pf, inter = 1.0f / ((float)c->factor * pf);
            float ramp = (float)(((double)i - lo) / (hi - lo));
            ramp = ramp < 0 ? 0 : (ramp > 1 ? 1 : ramp);
            float ef = 1.0f - ramp; /* extrapolation factor */
            out->inv_freq[i] = inter * (1 - ef) + extra * ef;
        }
        out->attn_factor = (float)af;
        break;
    }
    }
    return CMF_OK;
}
