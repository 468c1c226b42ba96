/* cpu_internal.h — what the CPU backend's files share: the backend struct
 * (kernel table, pool, per-thread and work scratch), host buffers, and
 * the per-op entry points of cpu_ops.c. Private to compute/cpu. */
#ifndef CMF_COMPUTE_CPU_INTERNAL_H
#define CMF_COMPUTE_CPU_INTERNAL_H

#include "compute/backend.h"
#include "compute/cpu/kernels.h"
#include "util/pool.h"

#include <pthread.h>

#define CMF__CPU_SMALL_WORK 65536 /* multiply-adds below which an op runs on the calling thread */
#define CMF__CPU_MM_BLOCK 16      /* weight rows decoded at once per task in the batched matmul */

struct cmf__buffer {
    size_t size;   /* bytes asked for (bounds of set/get/clear) */
    size_t alloc;  /* bytes allocated (a multiple of 64) */
    uint8_t *data; /* 64-byte aligned */
    bool mapped;   /* from mmap (large buffers), else the heap */
};

/* A weight's packed form (kernels.h, cmf__kmmq.pack), keyed by where the
 * weight lives and its shape. */
typedef struct cmf__cpu_pack {
    const uint8_t *key;
    int64_t rows, cols;
    int dtype;
    uint8_t *data; /* NULL: an empty slot */
    size_t bytes;
} cmf__cpu_pack;

/* A mapping packed weights are carved from. */
typedef struct cmf__cpu_arena {
    uint8_t *base;
    size_t size, used;
} cmf__cpu_arena;
#define CMF__CPU_ARENAS 256 /* 16 GiB of packed weights at the smallest arena size */

typedef struct cmf__cpu_be {
    cmf__backend base;
    const cmf__cpu_kernels *k;
    bool reference;
    cmf__pool *pool;
    int n_threads;
    char device[64];     /* "cpu (<isa>, <n> threads)" */
    pthread_mutex_t mu;  /* compute() holds it: one graph at a time */
    float *scratch;      /* [n_threads][scratch_per]: matmul blocks, attention scores */
    size_t scratch_per;  /* floats per thread */
    float *work;         /* fused ops' scratch (MoE, DeltaNet, PLE), calling thread only */
    size_t work_n;
    uint8_t *xq;         /* a matmul's activations quantized for the integer kernels */
    size_t xq_n;
    bool pack;             /* pack weights at prepare (CMF_CPU_PACK=0 turns it off) */
    cmf__cpu_pack *packs;  /* open addressing, n_slots a power of two */
    size_t n_slots, n_packs, packed_bytes;
    cmf__cpu_arena arenas[CMF__CPU_ARENAS];
    int n_arenas;
} cmf__cpu_be;

/* The packed form of w, or NULL (not packed: the unpacked kernels run). */
const uint8_t *cmf__cpu_packed(const cmf__cpu_be *be, const cmf__qmat *w);

static inline uint8_t *cmf__cpu_row(const cmf__ten *t, int64_t r) { return t->buf->data + t->off + (size_t)r * t->nb; }
static inline float *cmf__cpu_f32(const cmf__ten *t, int64_t r) { return (float *)(void *)cmf__cpu_row(t, r); }
static inline const int32_t *cmf__cpu_i32(const cmf__ten *t)
{
    return (const int32_t *)(const void *)(t->buf->data + t->off);
}

/* Grows the per-thread scratch to `per_thread` floats; CMF_ERR_NOMEM. */
cmf_status cmf__cpu_scratch(cmf__cpu_be *be, size_t per_thread);
/* Grows the work scratch to n floats; CMF_ERR_NOMEM. */
cmf_status cmf__cpu_work(cmf__cpu_be *be, size_t n);
/* y[t][o] = W[o] · x[t] over the pool (the matmul kernel). */
cmf_status cmf__cpu_matmul(cmf__cpu_be *be, const cmf__qmat *w, const float *x, int64_t xs, int64_t n, float *y,
                           int64_t ys);

/* One node of each kind (cpu_ops.c). */
cmf_status cmf__cpu_op_simple(cmf__cpu_be *be, const cmf__node *nd);   /* element-wise, norms, rope, mask, rows */
cmf_status cmf__cpu_op_kv_write(cmf__cpu_be *be, const cmf__node *nd);
cmf_status cmf__cpu_op_attn(cmf__cpu_be *be, const cmf__node *nd);
cmf_status cmf__cpu_op_fused(cmf__cpu_be *be, const cmf__node *nd);    /* MoE, DeltaNet, PLE */

#endif
