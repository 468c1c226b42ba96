/* deltanet.h — gated DeltaNet linear attention (qwen3_next `linear_attn.*`):
 * grouped in/out projections, causal depthwise conv1d + SiLU, L2-normed q/k,
 * the gated delta rule per value head, gated RMSNorm (plain x̂·w whatever
 * norm_style says). Per-sequence state: conv window and recurrent matrix;
 * the token step and the chunked prefill agree to f32 rounding. */
#ifndef CMF_COMPUTE_DELTANET_H
#define CMF_COMPUTE_DELTANET_H

#include "compute/archs.h"
#include <stddef.h>

typedef struct cmf__gdn_dims {
    int hidden;
    int n_k_heads, n_v_heads; /* n_v_heads % n_k_heads == 0 */
    int k_dim, v_dim;         /* linear_key_head_dim, linear_value_head_dim */
    int conv_k;               /* linear_conv_kernel_dim (>= 1) */
    float eps;                /* rms_norm_eps of the gated norm */
} cmf__gdn_dims;

typedef struct cmf__gdn_weights {
    const cmf__qmat *in_qkvz; /* [2·nk·dk + 2·nv·dv, hidden], grouped per key head */
    const cmf__qmat *in_ba;   /* [2·nv, hidden], grouped per key head */
    const cmf__qmat *out;     /* [hidden, nv·dv] */
    const float *conv_w;      /* [conv_dim][conv_k], conv_dim = 2·nk·dk + nv·dv */
    const float *A_log;       /* [nv] */
    const float *dt_bias;     /* [nv] */
    const float *norm_w;      /* [dv] */
} cmf__gdn_weights;

/* State of one layer for one sequence; zero it (cmf__gdn_state_reset) before
 * the first token. */
typedef struct cmf__gdn_state {
    float *conv; /* [conv_k-1][conv_dim], oldest first */
    float *S;    /* [nv][dk][dv] */
} cmf__gdn_state;

size_t cmf__gdn_conv_dim(const cmf__gdn_dims *d);
size_t cmf__gdn_conv_floats(const cmf__gdn_dims *d);  /* size of state.conv */
size_t cmf__gdn_rec_floats(const cmf__gdn_dims *d);   /* size of state.S */
size_t cmf__gdn_scratch_floats(const cmf__gdn_dims *d);
void cmf__gdn_state_reset(const cmf__gdn_dims *d, cmf__gdn_state *s);

/* Checks dims and tensor shapes; CMF_ERR_CONFIG naming `what` and the tensor. */
cmf_status cmf__gdn_check(const cmf__gdn_dims *d, const cmf__gdn_weights *w, const char *what);

/* One token: out[hidden] = linear_attn(x[hidden]), advancing the state.
 * out must not alias x. */
void cmf__gdn_step(const cmf__gdn_dims *d, const cmf__gdn_weights *w, cmf__gdn_state *s,
                   const cmf__matvec *mv, const float *x, float *out, float *scratch);

/* A whole prompt at once: the same result as T calls of cmf__gdn_step
 * (to f32 rounding), with the convolution run over the sequence and the
 * recurrence in chunked form (chunk steps per block; 64 in the reference).
 * x, out [T][hidden]. Allocates its working set: CMF_ERR_NOMEM. */
cmf_status cmf__gdn_prefill(const cmf__gdn_dims *d, const cmf__gdn_weights *w, cmf__gdn_state *s,
                            const cmf__matvec *mv, int T, const float *x, float *out, int chunk);

/* The delta-rule core alone, for one value head over T steps, two ways:
 * recurrent (what cmf__gdn_step runs) and chunked (WY form, chunk of `chunk`
 * steps, as the reference prefill computes it). q, k [T][dk] already
 * L2-normalised (q also scaled), v [T][dv], g (log decay) and beta [T].
 * S [dk][dv] is read as the initial state and left as the final one;
 * o [T][dv]. The chunked form needs chunk·(2·chunk + 2·dk + 2·dv + 2)
 * floats of scratch. */
void cmf__gdn_core_recurrent(int T, int dk, int dv, const float *q, const float *k, const float *v,
                             const float *g, const float *beta, float *S, float *o);
void cmf__gdn_core_chunked(int T, int dk, int dv, int chunk, const float *q, const float *k,
                           const float *v, const float *g, const float *beta, float *S, float *o,
                           float *scratch);

#endif
