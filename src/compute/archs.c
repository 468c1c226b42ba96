/* archs.c — the reference matvec, activations and RMS norm shared by the
 * MoE, gated DeltaNet and Gemma-4 operators. Scalar f32, accumulation in
 * index order; the engine's optimized kernels are passed in through
 * cmf__matvec and never replaced here. */
#include "compute/archs.h"

#include <math.h>
#include <string.h>

void cmf__archs_matvec_ref(void *ctx, const cmf__qmat *w, const float *x, float *y) {
    (void)ctx;
    for (int64_t r = 0; r < w->rows; r++) y[r] = cmf__qmat_dot_row(w, r, x);
}

void cmf__archs_matvec(const cmf__matvec *mv, const cmf__qmat *w, const float *x, float *y) {
    if (mv && mv->fn) mv->fn(mv->ctx, w, x, y);
    else cmf__archs_matvec_ref(NULL, w, x, y);
}

void cmf__archs_matmul(const cmf__matmul *mm, const cmf__qmat *w, const float *x, int64_t x_stride, int64_t n, float *y,
                       int64_t y_stride) {
    if (mm && mm->fn) {
        mm->fn(mm->ctx, w, x, x_stride, n, y, y_stride);
        return;
    }
    for (int64_t t = 0; t < n; t++) cmf__archs_matvec_ref(NULL, w, x + t * x_stride, y + t * y_stride);
}

int cmf__act_from_name(const char *name) {
    if (!name) return -1;
    if (!strcmp(name, "silu")) return CMF__ACT_SILU;
    if (!strcmp(name, "gelu_tanh")) return CMF__ACT_GELU_TANH;
    if (!strcmp(name, "gelu")) return CMF__ACT_GELU;
    if (!strcmp(name, "swiglu_oss")) return CMF__ACT_SWIGLU_OSS;
    return -1;
}

float cmf__act_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
float cmf__act_silu(float x) { return x / (1.0f + expf(-x)); }

float cmf__act_gelu_tanh(float x) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
}

/* torch softplus (beta 1, threshold 20): linear above 20 to avoid overflow. */
float cmf__act_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

void cmf__act_glu(const cmf__act_params *a, const float *gate, const float *up, float *h, int n) {
    for (int i = 0; i < n; i++) {
        float g = gate[i], u = up[i], r;
        switch (a->kind) {
        case CMF__ACT_GELU_TANH: r = cmf__act_gelu_tanh(g) * u; break;
        case CMF__ACT_GELU: r = 0.5f * g * (1.0f + erff(g * 0.70710678118654752f)) * u; break;
        case CMF__ACT_SWIGLU_OSS:
            g = g < a->limit ? g : a->limit;
            u = u < -a->limit ? -a->limit : (u > a->limit ? a->limit : u);
            r = (u + 1.0f) * g * cmf__act_sigmoid(a->alpha * g);
            break;
        case CMF__ACT_SILU:
        default: r = cmf__act_silu(g) * u; break;
        }
        h[i] = r;
    }
}

void cmf__archs_rmsnorm(const float *x, const float *w, bool plus_one, float eps, float *out, int n) {
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) {
        float s = w ? (plus_one ? 1.0f + w[i] : w[i]) : 1.0f;
        out[i] = x[i] * inv * s;
    }
}
