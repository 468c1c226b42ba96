/* gemma4.h — the Gemma-4 text pieces the dense engine does not have:
 * per-layer inputs (PLE: a per-layer token embedding plus a projection of
 * the main embedding, prepared once per token, consumed by each layer's
 * gate/projection block), the per-layer scalar, and the scale-less V norm.
 * Norms here are x̂·w (Gemma-4's RMSNorm), unless plus_one says otherwise. */
#ifndef CMF_COMPUTE_GEMMA4_H
#define CMF_COMPUTE_GEMMA4_H

#include "compute/archs.h"
#include <stddef.h>

/* Model-level PLE tensors. */
typedef struct cmf__gemma4_ple {
    int n_layers, per_layer; /* num_layers, hidden_size_per_layer_input */
    int hidden;
    float eps;
    bool plus_one;                       /* norm style (false for gemma4) */
    const cmf__qmat *embed_per_layer;    /* [vocab_per_layer, n_layers·per_layer] */
    const cmf__qmat *model_projection;   /* [n_layers·per_layer, hidden] */
    const float *projection_norm;        /* [per_layer] */
} cmf__gemma4_ple;

/* Per-layer tensors; gate NULL = the layer has no PLE block. */
typedef struct cmf__gemma4_layer {
    const cmf__qmat *gate;       /* per_layer_input_gate.weight [per_layer, hidden] */
    const cmf__qmat *projection; /* per_layer_projection.weight [hidden, per_layer] */
    const float *post_norm;      /* post_per_layer_input_norm.weight [hidden] */
    float layer_scalar;          /* layer_scalar (1 when absent) */
} cmf__gemma4_layer;

cmf_status cmf__gemma4_ple_check(const cmf__gemma4_ple *p, const char *what);
size_t cmf__gemma4_scratch_floats(const cmf__gemma4_ple *p);

/* Per-layer inputs of one token: out[n_layers][per_layer] =
 * (rms(model_projection·x / sqrt(hidden)) ⊙ projection_norm
 *  + embed_per_layer[token]·sqrt(per_layer)) / sqrt(2),
 * where x is the token's scaled main embedding. CMF_ERR_BOUNDS when token
 * is outside embed_per_layer. */
cmf_status cmf__gemma4_ple_inputs(const cmf__gemma4_ple *p, const cmf__matvec *mv, int token, const float *x,
                                  float *out, float *scratch);

/* End of a decoder layer: with a PLE block, x += rms(projection·(act(gate·x)
 * ⊙ ple)) ⊙ post_norm; then x *= layer_scalar. ple = this layer's row of
 * cmf__gemma4_ple_inputs. */
void cmf__gemma4_layer_tail(const cmf__gemma4_ple *p, const cmf__gemma4_layer *l, const cmf__act_params *act,
                            const cmf__matvec *mv, const float *ple, float *x, float *scratch);

/* Scale-less RMS norm of each head of v[n_heads][head_dim] in place. */
void cmf__gemma4_vnorm(float *v, int n_heads, int head_dim, float eps);

#endif
