/* moe.h — mixture-of-experts FFN (spec §2.2): softmax or sigmoid router,
 * selection-only expert_bias, top-k with ties to the lower index, optional
 * renormalisation and routed scaling, shared expert with sigmoid gate, and a
 * task mask's routable set (§5: softmax and selection over it only). Only
 * the selected experts' weights are read. */
#ifndef CMF_COMPUTE_MOE_H
#define CMF_COMPUTE_MOE_H

#include "compute/archs.h"
#include <stddef.h>

typedef struct cmf__moe_route_params {
    int n_expert;         /* router rows */
    int top_k;            /* 1..n_expert */
    bool norm_topk;       /* renormalise the selected weights to sum 1 */
    bool sigmoid;         /* score = σ(logit) per expert instead of softmax */
    float routed_scaling; /* multiplies the final weights (1 = none) */
} cmf__moe_route_params;

/* Routes one token. logits[n_expert] already include the router bias.
 * expert_bias (NULL = none) is added to the scores for selection only.
 * routable (NULL = all) is a bitset over experts: softmax and selection run
 * over its set bits only. Writes idx[k], w[k] in selection order (highest
 * key first) and returns k = min(top_k, routable count); 0 when nothing is
 * routable. scores: scratch of n_expert floats. */
int cmf__moe_route(const cmf__moe_route_params *p, const float *logits, const float *expert_bias,
                   const uint8_t *routable, float *scores, int *idx, float *w);

/* One gated FFN: out = down · act(gate·x + gb, up·x + ub) + db. Biases may be
 * NULL. Intermediate width = gate->rows. */
typedef struct cmf__moe_expert {
    const cmf__qmat *gate, *up, *down;
    const float *gate_bias, *up_bias, *down_bias;
} cmf__moe_expert;

typedef struct cmf__moe_layer {
    int hidden;
    cmf__moe_route_params route;
    cmf__act_params act;
    const cmf__qmat *router;      /* [n_expert, hidden] (mlp.gate.weight) */
    const float *router_bias;     /* [n_expert] or NULL (mlp.gate.bias) */
    const float *expert_bias;     /* [n_expert] or NULL (mlp.expert_bias), selection only */
    const cmf__moe_expert *experts; /* [n_expert] */
    const cmf__moe_expert *shared;  /* NULL = no shared expert */
    const cmf__qmat *shared_gate;   /* [1, hidden] or NULL (weight 1) */
} cmf__moe_layer;

/* Checks every shape against hidden / n_expert / top_k; CMF_ERR_CONFIG
 * naming `what` (e.g. "layer 3") and the offending expert and projection. */
cmf_status cmf__moe_layer_check(const cmf__moe_layer *L, const char *what);

/* Floats of scratch cmf__moe_forward needs. */
size_t cmf__moe_scratch_floats(const cmf__moe_layer *L);

/* out[hidden] = Σ_selected w_e · FFN_e(x) + g · FFN_shared(x). used (NULL or
 * at least top_k ints) receives the selected expert ids; returns their
 * count. out must not alias x. */
int cmf__moe_forward(const cmf__moe_layer *L, const uint8_t *routable, const cmf__matvec *mv,
                     const float *x, float *out, float *scratch, int *used);

/* The same for n tokens at once, expert by expert: each selected expert's
 * weights are read once for all the tokens routed to it (one batched
 * matmul per projection), the shared expert once for all tokens. Per token
 * the experts are summed in ascending expert index, whatever n is, so a
 * prompt fed at once or token by token gives identical outputs (given a
 * matmul whose rows do not depend on n). x, out [n][hidden]; routable as
 * above; scratch: cmf__moe_batch_scratch_floats(L, n). */
size_t cmf__moe_batch_scratch_floats(const cmf__moe_layer *L, int64_t n);
void cmf__moe_forward_batch(const cmf__moe_layer *L, const uint8_t *routable, const cmf__matmul *mm, const float *x,
                            int64_t n, float *out, float *scratch);

/* One gated FFN (also usable for a dense MLP); scratch: 3·gate->rows floats. */
void cmf__moe_ffn(const cmf__moe_expert *e, const cmf__act_params *act, const cmf__matvec *mv,
                  const float *x, float *out, float *scratch);

#endif
