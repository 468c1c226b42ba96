/* archs.h — shared pieces of the non-dense operators (MoE, gated DeltaNet,
 * Gemma-4 per-layer inputs, extended rope): the matrix-vector callback they
 * compute through, the FFN activations and small f32 helpers. Pure f32 math
 * on caller buffers; nothing here allocates or knows the model file. */
#ifndef CMF_COMPUTE_ARCHS_H
#define CMF_COMPUTE_ARCHS_H

#include "quant/quant.h"
#include <stdbool.h>
#include <stdint.h>

/* y[w->rows] = W · x[w->cols]. The engine passes its own (threaded, SIMD)
 * kernel; NULL selects cmf__archs_matvec_ref (scalar qmat dot per row). */
typedef void (*cmf__matvec_fn)(void *ctx, const cmf__qmat *w, const float *x, float *y);

typedef struct cmf__matvec {
    cmf__matvec_fn fn; /* NULL = reference */
    void *ctx;
} cmf__matvec;

void cmf__archs_matvec_ref(void *ctx, const cmf__qmat *w, const float *x, float *y);
/* Calls mv->fn (or the reference when mv or mv->fn is NULL). */
void cmf__archs_matvec(const cmf__matvec *mv, const cmf__qmat *w, const float *x, float *y);

/* Batched form: y[t][o] = W·x[t] for t < n; rows x_stride / y_stride floats
 * apart. The engine passes its backend matmul; NULL = rows of the reference. */
typedef void (*cmf__matmul_fn)(void *ctx, const cmf__qmat *w, const float *x, int64_t x_stride, int64_t n, float *y,
                               int64_t y_stride);

typedef struct cmf__matmul {
    cmf__matmul_fn fn; /* NULL = reference */
    void *ctx;
} cmf__matmul;

void cmf__archs_matmul(const cmf__matmul *mm, const cmf__qmat *w, const float *x, int64_t x_stride, int64_t n, float *y,
                       int64_t y_stride);

/* Gated-FFN activations: out = act(gate) * up, except SWIGLU_OSS (gpt-oss):
 * g = min(gate, limit), u = clamp(up, -limit, limit), out = (u+1)·g·σ(alpha·g). */
typedef enum cmf__act {
    CMF__ACT_SILU = 0,
    CMF__ACT_GELU_TANH = 1,
    CMF__ACT_GELU = 2,
    CMF__ACT_SWIGLU_OSS = 3
} cmf__act;

typedef struct cmf__act_params {
    cmf__act kind;
    float alpha; /* SWIGLU_OSS: 1.702 */
    float limit; /* SWIGLU_OSS: 7.0 */
} cmf__act_params;

/* Maps an arch `activation` string ("silu", "gelu_tanh", "gelu",
 * "swiglu_oss"); -1 when unknown. */
int cmf__act_from_name(const char *name);
/* h[i] = act(gate[i], up[i]) for i < n (h may alias gate). */
void cmf__act_glu(const cmf__act_params *a, const float *gate, const float *up, float *h, int n);
float cmf__act_silu(float x);
float cmf__act_gelu_tanh(float x);
float cmf__act_sigmoid(float x);
float cmf__act_softplus(float x);

/* RMS norm over n: out = x / sqrt(mean(x²) + eps) · (w ? (plus_one ? 1+w : w) : 1).
 * out may alias x. */
void cmf__archs_rmsnorm(const float *x, const float *w, bool plus_one, float eps, float *out, int n);

/* Bit `i` of an LSB-first bitset (spec §5). */
static inline bool cmf__bit_get(const uint8_t *bits, int i) {
    return (bits[i >> 3] >> (i & 7)) & 1u;
}

#endif
