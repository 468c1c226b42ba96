/* backend.h — the operations table every compute backend implements. The
 * engine's forward pass calls only these (plus trivial element-wise loops):
 * matmul of f32 activations against a quantized weight, RMS norm, rotary
 * embedding, causal (optionally windowed, soft-capped, sink-augmented)
 * attention over a KV cache, and the gated activation. Activations are f32
 * row-major; weights stay wherever the model mapping put them. */
#ifndef CMF_COMPUTE_BACKEND_H
#define CMF_COMPUTE_BACKEND_H

#include "cmf.h"
#include "quant/quant.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct cmf__backend cmf__backend;

/* Precomputed rotary frequencies of one layer kind. */
typedef struct cmf__rope_table {
    int64_t rot_dims;     /* leading dims rotated (rotate_half over these) */
    float *inv_freq;      /* [rot_dims/2], owned by whoever built it */
    float attn_factor;    /* cos/sin multiplier (yarn), 1 otherwise */
} cmf__rope_table;

/* One attention call: n_tok queries against a cache whose slot for absolute
 * position p is p % cap. Query t at position pos[t] sees keys at positions
 * max(0, pos[t]-window+1) .. pos[t] (window 0 = all from 0); the caller
 * guarantees those are in the cache. */
typedef struct cmf__attn_desc {
    int64_t n_tok;
    const int32_t *pos;        /* [n_tok] absolute positions */
    const float *q;            /* [n_tok][q_stride], heads contiguous */
    int64_t q_stride;
    const float *k_cache;      /* [cap][kv_stride] */
    const float *v_cache;      /* [cap][kv_stride] */
    int64_t kv_stride;
    int64_t cap;
    int64_t n_head, n_head_kv, head_dim;
    int64_t window;            /* 0 = full causal */
    float scale;               /* multiplies q·k */
    float softcap;             /* 0 = none: s = c·tanh(s/c) */
    const float *sinks;        /* [n_head] extra logits in the denominator, or NULL */
    float *out;                /* [n_tok][out_stride] */
    int64_t out_stride;
} cmf__attn_desc;

/* Gated activation kinds: the values of compute/archs.h cmf__act. */
typedef struct cmf__glu_desc {
    int act;                   /* 0 silu, 1 gelu_tanh, 2 gelu (erf), 3 swiglu_oss */
    float alpha, limit;        /* swiglu_oss */
} cmf__glu_desc;

typedef struct cmf__backend_ops {
    const char *name;
    void (*free)(cmf__backend *be);
    /* Reserves per-call scratch up front (largest matmul input width, longest
     * attention span) so that no later op allocates. */
    cmf_status (*reserve)(cmf__backend *be, int64_t max_cols, int64_t max_span);
    /* y[t][o] = sum_i W[o][i] * x[t][i] for t < n, o < w->rows.
     * x rows are x_stride floats apart, y rows y_stride apart. */
    void (*matmul)(cmf__backend *be, const cmf__qmat *w, const float *x, int64_t x_stride, int64_t n, float *y,
                   int64_t y_stride);
    /* y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * (w ? (plus_one ? 1 + w : w) : 1)
     * over n_rows rows of dim floats, rows `stride` apart (x, y may alias). */
    void (*rmsnorm)(cmf__backend *be, const float *x, float *y, int64_t n_rows, int64_t dim, int64_t stride,
                    const float *w, float eps, bool plus_one);
    /* Rotates n_heads heads of head_dim in each of n_tok rows (stride floats
     * apart) at positions pos[t]. */
    void (*rope)(cmf__backend *be, float *x, int64_t n_tok, int64_t stride, int64_t n_heads, int64_t head_dim,
                 const int32_t *pos, const cmf__rope_table *rt);
    void (*attention)(cmf__backend *be, const cmf__attn_desc *d);
    /* gate[t][i] = act(gate[t][i]) * up[t][i] for i < dim, over n rows. */
    void (*glu)(cmf__backend *be, float *gate, int64_t gate_stride, const float *up, int64_t up_stride, int64_t n,
                int64_t dim, const cmf__glu_desc *g);
} cmf__backend_ops;

struct cmf__backend {
    const cmf__backend_ops *ops;
};

/* The CPU backend with its own thread pool (n_threads <= 0: all cores).
 * `reference` = scalar kernels only (cmf__qmat_dot_row for every dtype):
 * the oracle tests compare the fast kernels against. NULL on failure
 * (message set). */
cmf__backend *cmf__cpu_backend_new(int n_threads, bool reference);
/* The ISA the CPU backend picked ("avx2", "generic", "reference"). */
const char *cmf__cpu_backend_isa(const cmf__backend *be);
int cmf__cpu_backend_threads(const cmf__backend *be);

static inline void cmf__backend_free(cmf__backend *be)
{
    if (be) be->ops->free(be);
}

#endif
