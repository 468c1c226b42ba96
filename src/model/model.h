/* model.h — a model as the engine sees it: the opened container, the parsed
 * arch block, and per-layer weight bindings decided by tensor presence
 * (CMF v2 §2). Every weight goes through the skill overlay: the active
 * skill's `skill.<id>.<name>` when present, else the backbone `<name>`.
 * Matrices stay in the mapping (cmf__qmat views); only 1-D vectors (norms,
 * biases, sinks) are decoded to small f32 copies. Rebinding swaps views,
 * it never copies or merges matrices. */
#ifndef CMF_MODEL_MODEL_H
#define CMF_MODEL_MODEL_H

#include "cmf.h"
#include "format/format.h"
#include "model/arch.h"
#include "quant/quant.h"
#include <stdbool.h>
#include <stdint.h>

/* A matrix view [rows = out, cols = in]; present == false when absent. */
typedef struct cmf__wmat {
    bool present;
    const cmf__tensor *t;  /* the directory entry (backbone or skill) */
    cmf__qmat q;
} cmf__wmat;

/* A decoded 1-D vector; v == NULL when absent. */
typedef struct cmf__wvec {
    float *v;  /* [n], owned */
    int64_t n;
} cmf__wvec;

/* One decoder layer. Which of these are present decides the operators. */
typedef struct cmf__layer_weights {
    cmf__layer_kind kind;
    int64_t n_head, n_head_kv, head_dim; /* resolved from arch (per layer) */
    int64_t q_dim, kv_dim;               /* n_head*head_dim, n_head_kv*head_dim */
    /* norms, named by role (placement decides which tensor fills which) */
    cmf__wvec attn_in_norm;   /* input_layernorm (pre, sandwich) */
    cmf__wvec attn_out_norm;  /* post_attention_layernorm (sandwich, post) */
    cmf__wvec ffn_in_norm;    /* post_attention_layernorm (pre) / pre_feedforward_layernorm (sandwich) */
    cmf__wvec ffn_out_norm;   /* post_feedforward_layernorm (sandwich, post) */
    /* attention */
    cmf__wmat wq, wk, wv, wqkv, wo; /* wqkv: fused rows q, k, v (phi3) */
    cmf__wvec bq, bk, bv, bo;
    bool q_gated;             /* q_proj carries 2*q_dim rows: per head [query | gate] */
    cmf__wvec q_norm, k_norm; /* [head_dim] per head, or [q_dim]/[kv_dim] whole projection */
    bool qk_norm_whole;
    cmf__wvec sinks;          /* [n_head] or absent */
    /* dense FFN */
    cmf__wmat w_gate, w_up, w_down, w_gate_up; /* w_gate_up: fused rows gate, then up */
    cmf__wvec b_gate, b_up, b_down;
    int64_t ffn_dim;          /* from the tensors (0 when the layer has no dense FFN) */
    bool has_router;          /* mlp.gate.weight present: a MoE layer */
    /* extensions (MoE, linear attention, ...) hang their bound data here */
    void *ext;
    void (*ext_free)(void *ext);
} cmf__layer_weights;

typedef struct cmf__model cmf__model;
struct cmf__model {
    cmf__file *file;          /* owned */
    char *what;               /* path, for messages */
    cmf__arch arch;
    char *skill;              /* active skill id, NULL = backbone */
    bool *skill_layer;        /* [n_layer] the skill has a tensor of layer i (NULL without a skill) */
    bool skill_outer;         /* the skill has a tensor outside the layers (embedding, norm, head, ...) */
    const cmf__model *base;   /* a skill view: file and arch borrowed from base (NULL: owned here) */
    cmf__wmat embed;          /* model.embed_tokens.weight [vocab, hidden] */
    cmf__wmat lm_head;        /* lm_head.weight, or the embedding when tied */
    cmf__wvec final_norm;     /* model.norm.weight */
    cmf__layer_weights *layers; /* [n_layer] */
};

/* Opens `path` (format layer), parses the arch block and binds the
 * backbone. Errors name the file and the tensor or JSON path:
 * CMF_ERR_CONFIG (missing tensor, wrong shape, bad arch), the format
 * layer's statuses, CMF_ERR_UNSUPPORTED (an operator this build lacks). */
cmf_status cmf__model_open(const char *path, cmf__model **out);
/* Same over an already opened file (takes ownership of f, also on error). */
cmf_status cmf__model_from_file(cmf__file *f, const char *what, cmf__model **out);
void cmf__model_free(cmf__model *m);

/* Rebinds every weight with `skill` active (NULL = backbone). On failure the
 * previous binding stays. Not thread-safe against running sessions. */
cmf_status cmf__model_bind(cmf__model *m, const char *skill);
/* A second binding of m's file with `skill` active (NULL = backbone): a
 * skill view. It borrows the file and the arch of the model it was made
 * from (which must outlive it), owns only its views and small vectors, and
 * copies no matrix. Layer shapes must match m's (the engine sizes its
 * buffers once): CMF_ERR_CONFIG names the first layer and tensor that
 * differ. Errors as cmf__model_bind. Freed with cmf__model_free. */
cmf_status cmf__model_view_new(const cmf__model *m, const char *skill, cmf__model **out);
/* True when a and b bind the same tensors in layer `l` (l = -1: the
 * tensors outside the layers), judged from their skills. */
bool cmf__model_same_at(const cmf__model *a, const cmf__model *b, int64_t l);
/* The overlay lookup: `skill.<active>.<name>` when present, else `name`;
 * NULL when neither exists. */
const cmf__tensor *cmf__model_tensor(const cmf__model *m, const char *name);

/* Helpers extensions use to bind their own tensors through the overlay.
 * `required` false: an absent tensor leaves *out not present, CMF_OK.
 * Shapes are checked when rows/cols > 0. */
cmf_status cmf__model_bind_mat(const cmf__model *m, const char *name, int64_t rows, int64_t cols, bool required,
                               cmf__wmat *out);
cmf_status cmf__model_bind_vec(const cmf__model *m, const char *name, int64_t n, bool required, cmf__wvec *out);
void cmf__wmat_release(cmf__wmat *w);
void cmf__wvec_release(cmf__wvec *v);

#endif
