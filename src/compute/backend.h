/* backend.h — the compute core every backend implements. A backend belongs
 * to one (model, device) pair and owns its memory: buffers hold
 * activations, parameters and the KV cache; weights are prepared once
 * (cmf__backend_ops.prepare) and otherwise read where the model mapping put
 * them. A tensor is (buffer, offset, element type, rows x cols, row pitch).
 * The forward pass is a graph: a list of op nodes (the table below) built
 * once for a batch shape and replayed; per-step values (token ids,
 * positions, sequence slots) live in a parameter buffer the host writes
 * with set() before each replay. The host never touches activations
 * between ops: every op, norm to MoE dispatch, is a node, and every node
 * returns a status (out of memory is an error, never zeros). */
#ifndef CMF_COMPUTE_BACKEND_H
#define CMF_COMPUTE_BACKEND_H

#include "cmf.h"
#include "compute/deltanet.h"
#include "compute/gemma4.h"
#include "compute/moe.h"
#include "quant/quant.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cmf__backend cmf__backend;
typedef struct cmf__buffer cmf__buffer; /* backend-owned memory, opaque */

/* Element types of backend tensors. Q8 (KV cache only): each row holds
 * cols int8 values, padded to 4 bytes, then one f32 scale per `group`
 * values (group = head_dim): value = int8 * scale. */
typedef enum cmf__etype { CMF__E_F32 = 0, CMF__E_I32, CMF__E_F16, CMF__E_Q8, CMF__E_COUNT } cmf__etype;

/* A 2-D view into a buffer: row r starts at byte off + r * nb. */
typedef struct cmf__ten {
    cmf__buffer *buf;
    size_t off;
    cmf__etype type;
    int64_t rows, cols;
    size_t nb;      /* bytes between rows */
    int64_t group;  /* Q8: values per scale (head_dim); 0 otherwise */
} cmf__ten;

/* Bytes one row of `cols` values of type t takes (Q8 with its scales). */
size_t cmf__etype_row_bytes(cmf__etype t, int64_t cols, int64_t group);
const char *cmf__etype_name(cmf__etype t);

/* Precomputed rotary frequencies of one layer kind. */
typedef struct cmf__rope_table {
    int64_t rot_dims;     /* leading dims rotated (rotate_half over these) */
    float *inv_freq;      /* [rot_dims/2], owned by whoever built it */
    float attn_factor;    /* cos/sin multiplier (yarn), 1 otherwise */
} cmf__rope_table;

/* The operations. Sources are a, b, c; shapes are rows x cols of each
 * tensor; n = dst.rows (tokens) unless said otherwise. All f32 unless
 * said. dst may alias a where marked "in place ok". */
typedef enum cmf__op {
    CMF__OP_GET_ROWS,  /* dst[t] = W[a[t]] * f[0]; a: I32 ids [n]; W = w (any dtype). Id outside W: ERR_BOUNDS */
    CMF__OP_ROWS,      /* dst[i] = a[b[i]]; b: I32 row indices [dst.rows] into a */
    CMF__OP_MATMUL,    /* dst[t][o] = sum_i W[o][i] a[t][i] + (v ? v[o] : 0) */
    CMF__OP_ADD,       /* dst = a + f[0] * b (in place ok) */
    CMF__OP_SCALE,     /* dst = a * f[0] (in place ok) */
    CMF__OP_MUL,       /* dst = a * b element-wise (in place ok) */
    CMF__OP_RMSNORM,   /* each group of i[0] values of a row: x / sqrt(mean(x^2) + f[0]) * (v ? (i[1] ? 1 + v : v) : 1), v of
                          i[0] values (in place ok) */
    CMF__OP_ROPE,      /* rotates i[0] heads of i[1] dims of each row of dst in place at positions b (I32 [n]); ext = rope table */
    CMF__OP_GLU,       /* dst = act(a) * b, act = i[0] (cmf__act), f[0] alpha, f[1] limit (in place ok) */
    CMF__OP_SIGMOID_MUL, /* dst = a * sigmoid(b) (in place ok) */
    CMF__OP_MASK,      /* in place: for each bit k clear in bits[], zero dst columns [k*i[0], (k+1)*i[0]) */
    CMF__OP_SOFTCAP,   /* dst = a * f[0], then, when f[1] > 0, f[1] * tanh(dst / f[1]) (in place ok) */
    CMF__OP_KV_WRITE,  /* row t of a into the cache row of (seq, pos) in dst (any KV type): pos = b[t], seq = c[t];
                          i[0] = cap; ext = cmf__kv_pages of a paged cache, NULL = not paged (see cmf__kv_row) */
    CMF__OP_ATTN,      /* see cmf__attn_params; a = q [n][n_head*hd], b = pos, c = seq, dst = out; ext = params */
    CMF__OP_MOE,       /* dst = MoE FFN of a (ext = cmf__moe_layer, bits = routable experts or NULL) */
    CMF__OP_GDN,       /* dst = gated DeltaNet mixer of a; b = seq (I32 [n]); ext = cmf__gdn_op. Token by token, or
                          the chunked form when every token belongs to one sequence (equal to f32 rounding) */
    CMF__OP_PLE,       /* dst [n][L*P] = Gemma-4 per-layer inputs of ids a and scaled embeddings b; ext = cmf__gemma4_ple */
    CMF__OP_PLE_TAIL,  /* in place on dst = x: Gemma-4 per-layer block with ple rows a (row stride in a, offset by
                          i[0] * P floats); ext = cmf__ple_tail_op */
    CMF__OP_COUNT
} cmf__op;

/* A paged KV cache: the rows of a sequence come in blocks of `block`
 * cache rows, anywhere in the cache; row s of `table` (I32 [n_seq][per_seq],
 * per_seq * block = cap) names the cache block of each of its blocks. The
 * cache row of position p of sequence s is, with r = p % cap,
 *   paged:     table[s][r / block] * block + r % block
 *   not paged: s * cap + r
 * On Vulkan the table lies in the buffer of the node's c (the slots). */
typedef struct cmf__kv_pages {
    cmf__ten table;            /* I32 [n_seq][per_seq]; entries of blocks never read may be anything */
    int64_t block;             /* rows per block, >= 1 */
} cmf__kv_pages;

/* A KV cache as one step's kernels read it: the table mapped on the host
 * (NULL = not paged). Built by cmf__kv_check, which proves every row the
 * step reaches lies in the cache. */
typedef struct cmf__kv_map {
    const int32_t *table;      /* [n_seq][per_seq], NULL = not paged */
    int64_t cap, block, per_seq, n_seq;
} cmf__kv_map;

/* The cache row of position p of sequence s. */
static inline int64_t cmf__kv_row(const cmf__kv_map *m, int64_t s, int64_t p)
{
    const int64_t r = p % m->cap;
    return m->table ? (int64_t)m->table[s * m->per_seq + r / m->block] * m->block + r % m->block : s * m->cap + r;
}

/* How many positions from p on (to last) lie in consecutive cache rows. */
static inline int64_t cmf__kv_run(const cmf__kv_map *m, int64_t p, int64_t last)
{
    const int64_t r = p % m->cap, end = m->table ? m->block - r % m->block : m->cap - r;
    return end < last - p + 1 ? end : last - p + 1;
}

/* Attention: query t (position pos[t], sequence seq[t]) against keys of
 * its own sequence at positions max(0, pos[t] - window + 1) .. pos[t]
 * (window 0 = all from 0), read from the cache rows of (seq, p) (see
 * cmf__kv_pages); the engine guarantees those are there. */
typedef struct cmf__attn_params {
    cmf__ten k_cache, v_cache; /* [n_seq * cap][n_head_kv * head_dim], any KV type */
    int64_t cap;
    int64_t n_head, n_head_kv, head_dim;
    int64_t window;            /* 0 = full causal */
    float scale;               /* multiplies q·k */
    float softcap;             /* 0 = none: s = c·tanh(s/c) */
    const float *sinks;        /* [n_head] extra logits in the denominator, or NULL */
    const cmf__kv_pages *pages; /* a paged cache (cap = per_seq * block), NULL = not paged */
} cmf__attn_params;

/* The first position a query at pos sees: its window's start, or 0. */
static inline int64_t cmf__attn_first_key(int64_t window, int64_t pos)
{
    const int64_t l = window > 0 ? pos - window + 1 : 0;
    return l < 0 ? 0 : l;
}

/* Gated DeltaNet: one layer's weights and its per-sequence state buffer
 * (rows = n_seq; each row the conv window then the recurrent matrix). */
typedef struct cmf__gdn_op {
    cmf__gdn_dims dims;
    cmf__gdn_weights w;
    cmf__ten state;            /* F32 [n_seq][conv_floats + rec_floats] */
} cmf__gdn_op;

/* Gemma-4 per-layer tail of one layer. */
typedef struct cmf__ple_tail_op {
    const cmf__gemma4_ple *ple;
    cmf__gemma4_layer layer;
    cmf__act_params act;
} cmf__ple_tail_op;

typedef struct cmf__node {
    cmf__op op;
    cmf__ten dst, a, b, c;
    const cmf__qmat *w;        /* MATMUL, GET_ROWS */
    const float *v;            /* bias / norm weight, NULL = none */
    const uint8_t *bits;       /* MASK, MOE (LSB first, set = active) */
    const void *ext;           /* op-specific descriptor, see the table */
    float f[2];
    int64_t i[2];
} cmf__node;

/* A graph: nodes run in order. Built by the engine, replayed by compute. */
typedef struct cmf__graph {
    cmf__node *nodes;
    int n, cap;
} cmf__graph;

/* Appends a node (copied); CMF_ERR_NOMEM. */
cmf_status cmf__graph_push(cmf__graph *g, const cmf__node *nd);
/* The same for a node written in place: cmf__graph_add(g, (cmf__node){...}). */
static inline cmf_status cmf__graph_add(cmf__graph *g, cmf__node nd) { return cmf__graph_push(g, &nd); }
void cmf__graph_free(cmf__graph *g);
/* Checks every node's shapes and types against its op's rules (the
 * engine's builder and the op tests call it once per graph):
 * CMF_ERR_BACKEND naming the node and the mismatch. */
cmf_status cmf__graph_check(const cmf__graph *g);
const char *cmf__op_name(cmf__op op);
/* One step of a KV_WRITE or ATTN node (positions pos, slots seq, the
 * pages' table as the host sees it, NULL when not paged): every slot names
 * a sequence, every position is >= 0, and every block the step reaches is
 * one of the cache's (ERR_BOUNDS naming the token). Fills m for the
 * kernels. */
cmf_status cmf__kv_check(const cmf__node *nd, const int32_t *pos, const int32_t *seq, const int32_t *table,
                         cmf__kv_map *m);
/* The pages of a KV_WRITE or ATTN node; NULL when its cache is not paged
 * (or the node is another op). */
const cmf__kv_pages *cmf__node_kv_pages(const cmf__node *nd);
/* The bounds check of set/get/clear, shared by the backends: `bytes` at
 * `off` inside a buffer of `size` (have = false: no buffer). ERR_BOUNDS
 * naming `who`. */
cmf_status cmf__buffer_span_check(bool have, size_t size, size_t off, size_t bytes, const char *who);

#define CMF__BUF_HOST 1u

/* Threads: every entry point below may be called on one backend from
 * several threads at once, for several sessions (each buffer used by one
 * thread at a time): what the backend shares between them (the CPU's
 * thread pool and packed weights; Vulkan's queue, staging buffer, weight
 * copies and recordings) is taken under the backend's own lock, so
 * compute, prepare and staged set/get/clear of different sessions are
 * serialised, and buffer_new / buffer_free are safe beside them. free is
 * not: it is called once no other call is in flight. */
typedef struct cmf__backend_ops {
    const char *name;
    void (*free)(cmf__backend *be);
    /* What it runs on, for people: "cpu (avx2, 2 threads)",
     * "vulkan: NVIDIA H200 (Vulkan 1.3, driver ...)"; lives with the backend. */
    const char *(*device)(const cmf__backend *be);
    /* A zeroed buffer of `bytes`; CMF_ERR_NOMEM naming `what`. flags:
     * CMF__BUF_HOST for what the host writes or reads every step (the
     * parameter rows): a GPU keeps it in host-visible memory; other
     * buffers live where the device computes fastest. */
    cmf_status (*buffer_new)(cmf__backend *be, size_t bytes, unsigned flags, const char *what, cmf__buffer **out);
    void (*buffer_free)(cmf__backend *be, cmf__buffer *buf);
    /* Host <-> buffer copies, and zero-fill; bounds are checked (ERR_BOUNDS). */
    cmf_status (*set)(cmf__backend *be, cmf__buffer *buf, size_t off, const void *src, size_t bytes);
    cmf_status (*get)(cmf__backend *be, const cmf__buffer *buf, size_t off, void *dst, size_t bytes);
    cmf_status (*clear)(cmf__backend *be, cmf__buffer *buf, size_t off, size_t bytes);
    /* Makes every weight a graph reads usable by compute (a GPU uploads;
     * the CPU packs the weights that have a packed kernel, once per backend,
     * and reads the rest from the mapping). Called once per built graph. */
    cmf_status (*prepare)(cmf__backend *be, const cmf__graph *g);
    /* Runs the graph's nodes in order. */
    cmf_status (*compute)(cmf__backend *be, const cmf__graph *g);
} cmf__backend_ops;

struct cmf__backend {
    const cmf__backend_ops *ops;
};

/* A backend serves one model: it may keep device copies of the weights it
 * has seen, keyed by where they live, so weights must stay in place (the
 * model's mapping does) for the backend's life. */

/* The CPU backend with its own thread pool (n_threads <= 0: all cores).
 * `reference` = scalar kernels only (cmf__qmat_dot_row for every dtype):
 * the oracle tests compare the fast kernels against. NULL on failure
 * (message set). */
cmf__backend *cmf__cpu_backend_new(int n_threads, bool reference);

static inline void cmf__backend_free(cmf__backend *be)
{
    if (be) be->ops->free(be);
}

/* A tensor of rows x cols of type t at `off` in buf, rows packed. */
static inline cmf__ten cmf__ten_make(cmf__buffer *buf, size_t off, cmf__etype t, int64_t rows, int64_t cols)
{
    cmf__ten x = {buf, off, t, rows, cols, cmf__etype_row_bytes(t, cols, 0), 0};
    return x;
}
/* Columns [c0, c0 + cols) of every row of x (same rows, same pitch). */
static inline cmf__ten cmf__ten_cols(cmf__ten x, int64_t c0, int64_t cols)
{
    x.off += (size_t)c0 * (x.type == CMF__E_F16 ? 2 : 4);
    x.cols = cols;
    return x;
}
/* Rows [r0, r0 + rows) of x. */
static inline cmf__ten cmf__ten_rows(cmf__ten x, int64_t r0, int64_t rows)
{
    x.off += (size_t)r0 * x.nb;
    x.rows = rows;
    return x;
}

#endif
