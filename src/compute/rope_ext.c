/* rope_ext.c — YaRN and proportional inverse-frequency tables and the
 * table-driven half-split rotation (rope_ext.h). The angle is formed in
 * f32 as pos·inv_freq, like the reference's f32 matmul of positions and
 * frequencies. */
#include "compute/rope_ext.h"

#include <math.h>
#include <stddef.h>

static double correction_dim(double rotations, int dim, double theta, double max_pos) {
    return (dim * log(max_pos / (rotations * 2.0 * M_PI))) / (2.0 * log(theta));
}

void cmf__rope_yarn_inv_freq(float theta, int dim, float factor, float original_max_pos, float beta_fast,
                             float beta_slow, bool truncate, float attention_factor, float *inv_freq,
                             float *scale) {
    double lo = correction_dim(beta_fast, dim, theta, original_max_pos);
    double hi = correction_dim(beta_slow, dim, theta, original_max_pos);
    if (truncate) { lo = floor(lo); hi = ceil(hi); }
    if (lo < 0) lo = 0;
    if (hi > dim - 1) hi = dim - 1;
    if (lo == hi) hi += 0.001;
    for (int i = 0; i < dim / 2; i++) {
        float pos_freq = powf(theta, (float)(2 * i) / (float)dim);
        float extrap = 1.0f / pos_freq, interp = 1.0f / (factor * pos_freq);
        float ramp = (float)((i - lo) / (hi - lo));
        ramp = ramp < 0.0f ? 0.0f : (ramp > 1.0f ? 1.0f : ramp);
        float extrap_w = 1.0f - ramp;
        inv_freq[i] = interp * (1.0f - extrap_w) + extrap * extrap_w;
    }
    if (attention_factor > 0.0f) *scale = attention_factor;
    else *scale = factor <= 1.0f ? 1.0f : (float)(0.1 * log(factor) + 1.0);
}

void cmf__rope_proportional_inv_freq(float theta, int head_dim, float partial, float factor, float *inv_freq) {
    int angles = (int)floor((double)partial * head_dim / 2.0);
    if (angles > head_dim / 2) angles = head_dim / 2;
    if (factor <= 0.0f) factor = 1.0f;
    for (int i = 0; i < head_dim / 2; i++)
        inv_freq[i] = i < angles ? 1.0f / powf(theta, (float)(2 * i) / (float)head_dim) / factor : 0.0f;
}

void cmf__rope_apply_freqs(float *x, int n_heads, int head_dim, int pos, const float *inv_freq, float scale) {
    int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        float ang = (float)pos * inv_freq[i];
        float c = cosf(ang) * scale, s = sinf(ang) * scale;
        for (int h = 0; h < n_heads; h++) {
            float *xh = x + (size_t)h * head_dim;
            float a = xh[i], b = xh[i + half];
            xh[i] = a * c - b * s;
            xh[i + half] = b * c + a * s;
        }
    }
}
