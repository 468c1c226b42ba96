/* vk_be.h — the Vulkan backend's own state and what its Vulkan-facing
 * files share: vk_device.c (loader, device, probe), vk_pipeline.c (shaders
 * and pipelines), vk_memory.c (buffers, transfers, resident weights),
 * vk_record.c (one node as a dispatch) and vk_backend.c (the backend table:
 * graphs recorded, replayed and submitted). vk_fused.c and vk_graph.c see
 * none of it: they include vk_internal.h alone and name no Vulkan type.
 * Every function here taking a vk_be runs with be->mu held, or while the
 * backend is being made or freed (no other thread has it then). */
#ifndef CMF_COMPUTE_VULKAN_VK_BE_H
#define CMF_COMPUTE_VULKAN_VK_BE_H

#include "compute/vulkan/vk_backend.h"
#include "compute/vulkan/vk_internal.h"
#include "compute/vulkan/vk_loader.h"
#include "compute/vulkan/shaders/pc.h"

#include <pthread.h>
#include <stdbool.h>

/* Under LeakSanitizer, what the driver allocates while it loads and
 * compiles (Mesa's lavapipe keeps blocks from its JIT and unloads the
 * modules that would reach them) is not ours to free: leak tracking
 * pauses while a device is opened, probed and set up. */
#if defined(__SANITIZE_ADDRESS__)
#define CMF_VK_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CMF_VK_LSAN 1
#endif
#endif
#ifdef CMF_VK_LSAN
#include <sanitizer/lsan_interface.h>
#define LSAN_PAUSE() __lsan_disable()
#define LSAN_RESUME() __lsan_enable()
#else
#define LSAN_PAUSE() ((void)0)
#define LSAN_RESUME() ((void)0)
#endif

/* the shaders, one pipeline each (the embedded SPIR-V: vk_pipeline.c) */
#define SHADERS(X) X(add) X(scale) X(mul) X(sigmoid_mul) X(softcap) X(glu) X(mask) X(rows) X(get_rows) \
    X(rmsnorm) X(rope) X(matmul) X(kv_write) X(attn) X(zero) X(moe_route) X(moe_acc) X(gdn_conv) X(gdn_rec) X(ple_mix) \
    X(kv_write_q8) X(matmul_tiled) X(matmul_sg) X(matvec_f16) X(matvec_bf16) X(matvec_q8) X(matvec_q8_2f) X(matvec_q4) \
    X(matmul_coop) X(matmul_coop_t128)
#define ENUM(n) P_##n,
enum { SHADERS(ENUM) P_COUNT };
#undef ENUM

#define N_BIND 8
/* The tensor-core GEMMs and their tiles (tokens, rows), both from
 * matmul_coop.glsl: entry 0 is the default where the device has NV
 * cooperative matrices, CMF_VK_COOP=2 takes entry 1 (more tokens a tile:
 * faster on q8 / q4 weights at 512 tokens on an H100, slower on f16),
 * CMF_VK_COOP=0 the f32 tiled GEMM (comparisons). docs/GPU.md has the
 * figures that chose them among seven tilings. */
typedef struct vk_coop {
    int pipe;
    uint32_t tm, tn;
} vk_coop;
#define N_COOP 2
extern const vk_coop cmf__vk_coop[N_COOP]; /* vk_pipeline.c */
#define MATMUL_TB 4     /* tokens a matmul.comp workgroup takes (TB there) */
#define MATMUL_TILED 9  /* from this many tokens (no selection) matmul_tiled.comp (64 x 64 tiles) / matmul_coop.comp */
/* matvec_<dtype>.comp: 4 rows a workgroup, cmf__vk_mv_nt[i] tokens a block
 * (its specialization constant 0); below MATMUL_TILED tokens */
#define MV_ROWS 4
#define N_MV_NT 4
extern const uint32_t cmf__vk_mv_nt[N_MV_NT]; /* vk_pipeline.c */
#define N_MV_DT 5 /* the dtypes with a matvec shader, by cmf__vk_mv_index */

struct cmf__buffer {
    VkBuffer buf;
    VkDeviceMemory mem;
    uint8_t *map;
    size_t size;              /* bytes asked for */
    size_t alloc;             /* bytes of the VkBuffer (size rounded up) */
};

/* A weight's device copy, keyed by where it lives on the host, its size
 * and dtype (-1: a model f32 vector of a fused op): weights must stay put
 * while the backend lives (the model's file mapping does, and the backend
 * belongs to that model). dev_dtype: what the shaders read (the dtype, or
 * f16 for one dequantized at upload). */
typedef struct wmap {
    const void *host;
    uint64_t bytes;
    int dtype, dev_dtype;
    cmf__buffer *buf;
} wmap;

/* A host vector re-copied into a recorded graph's vector buffer before each replay. */
typedef struct vec_copy {
    size_t off, bytes;
    const void *host;
} vec_copy;

/* One recorded graph: its command buffer, replayed while the graph's
 * signature (its nodes and their descriptors, byte for byte) and the
 * backend's buffers (epoch) stay the same; only the small host vectors are
 * copied again, and the parameter rows are read by the shaders. */
typedef struct vk_graph {
    VkCommandBuffer cb;
    bool valid;
    uint64_t epoch, used;      /* be->epoch when recorded; last replay (eviction) */
    uint8_t *sig;              /* the signature it was recorded for */
    size_t sig_len;
    cmf__buffer *vec;          /* its small vectors (host-visible) */
    vec_copy *copies;
    int n_copies, cap_copies;
    VkQueryPool qpool;         /* CMF_VK_PROFILE: a timestamp after each dispatch */
    uint16_t *qpipe;           /* [N_QUERIES - 1] the pipeline of each timed dispatch (P_COUNT: a matvec) */
    int n_q;
} vk_graph;

#define N_GRAPHS 8 /* recorded graphs kept: decode, prompt chunks, batch shapes */
#define N_QUERIES 8192 /* CMF_VK_PROFILE: timestamps a graph may take (dispatches past it go untimed) */

typedef struct vk_be {
    cmf__backend base;
    VkInstance inst;
    VkPhysicalDevice pd;
    VkDevice dev;
    VkQueue queue;
    uint32_t qfam, mem_type, local_type; /* host-visible type; device-local type for weights */
    uint32_t stage_type; /* host-visible, cached system memory where there is some: set/get staging */
    VkCommandPool cpool;
    VkCommandBuffer upload_cb;
    VkFence fence, upload_fence;
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkPipeline pipe[P_COUNT];
    VkPipeline mv[N_MV_DT][N_MV_NT]; /* matvec pipelines by dtype and token block (with subgroups only) */
    char name[1024];
    uint64_t local_bytes;     /* the heap weights and activations live in */
    bool software;            /* a CPU device (lavapipe) */
    VkDeviceSize align, max_range; /* minStorageBufferOffsetAlignment, maxStorageBufferRange */
    bool subgroups;           /* compute has subgroup arithmetic: matmul_sg (CMF_VK_NO_SUBGROUP=1: never) */
    bool matvec;              /* ... in subgroups of 4 to 128 invocations: the matvec shaders (CMF_VK_NO_MATVEC=1: never) */
    int coop;                 /* NV cooperative matrices, f16 x f16 -> f32 16x16x16: 1 + the cmf__vk_coop entry, 0 none */
    pthread_mutex_t mu;
    wmap *w;                  /* uploaded weights, by mapping address */
    int n_w, cap_w;
    cmf__buffer *dummy, *staging; /* an unused binding, uploads */
    vk_graph graphs[N_GRAPHS];
    uint64_t epoch, tick;     /* epoch: bumped when a buffer a recording may name is freed */
    uint8_t *sig;             /* this compute's graph signature */
    size_t sig_cap;
    cmf__buffer *fused;       /* the fused ops' intermediates (vk_fused.c) */
    bool prof;                /* CMF_VK_PROFILE=1: GPU time per pipeline, printed when the backend is freed */
    float ts_period;          /* ns a timestamp tick */
    double prof_ms[P_COUNT + 1];
    uint64_t prof_calls[P_COUNT + 1];
} vk_be;

/* One recording in progress (vk_backend.c starts it, vk_record.c adds to it). */
struct vk_rec {
    vk_be *be;
    vk_graph *gr;             /* the graph being recorded */
    size_t vec_used;          /* bytes of gr->vec filled */
};

/* The push constants every dispatch gets (common.glsl's PC block), filled
 * slot by slot under shaders/pc.h's names. */
typedef struct pc {
    uint32_t u[PC_N_U];
    float f[PC_N_F];
} pc;

/* vk_device.c */
/* ERR_NOMEM for the out-of-memory results, else ERR_BACKEND, naming what failed. */
cmf_status cmf__vk_fail(VkResult r, const char *what);
/* A backend with the loader's instance and the chosen physical device,
 * no VkDevice yet (be->base.ops unset); NULL (message set) when there is
 * none. Takes no lock (the backend is not shared yet). */
vk_be *cmf__vk_open(void);

/* vk_pipeline.c */
/* The descriptor set and pipeline layouts and every pipeline the device
 * runs (be->pipe, be->mv); may turn be->subgroups and be->coop off where
 * the driver refuses their variants. */
cmf_status cmf__vk_make_pipelines(vk_be *be);
/* The matvec shader of a dtype (its index in be->mv, its pipeline id),
 * and the column multiple its 16-byte loads need; -1 for none. */
int cmf__vk_mv_index(int dtype, uint32_t *pipe, uint32_t *cols_mult);
/* A pipeline's shader name (P_COUNT: "matvec"). */
const char *cmf__vk_pipe_name(int pipe);

/* vk_memory.c: buffers (see there for the lock each table entry takes) */
/* A buffer of `bytes` in memory type `type`, mapped (and zeroed) when `map`
 * (type must then be host-visible); others are the caller's to zero. */
cmf_status cmf__vk_buffer_make(vk_be *be, size_t bytes, uint32_t type, bool map, VkBufferUsageFlags usage,
                               const char *what, cmf__buffer **out);
/* A zeroed storage buffer (host-visible with CMF__BUF_HOST, else device-local). */
cmf_status cmf__vk_buffer_new_locked(vk_be *be, size_t bytes, unsigned flags, const char *what, cmf__buffer **out);
/* Frees buf (NULL: nothing) without retiring the recordings: only for
 * buffers no recording that may replay names. */
void cmf__vk_buffer_destroy(vk_be *be, cmf__buffer *buf);
/* A scratch buffer of at least `bytes` (host-visible when `host`), grown by replacement. */
cmf_status cmf__vk_ensure(vk_be *be, cmf__buffer **buf, size_t bytes, bool host, const char *what);
/* The device copy of weight w (uploaded on first use) and the dtype the shaders read there. */
cmf_status cmf__vk_weight_buf(vk_be *be, const cmf__qmat *w, cmf__buffer **out, int *dev_dtype);
/* A model f32 vector of n values on the device. */
cmf_status cmf__vk_vec_buf(vk_be *be, const float *v, int64_t n, cmf__buffer **out);
/* the backend table's buffer entries */
cmf_status cmf__vk_buffer_new(cmf__backend *b, size_t bytes, unsigned flags, const char *what, cmf__buffer **out);
void cmf__vk_buffer_free(cmf__backend *b, cmf__buffer *buf);
cmf_status cmf__vk_set(cmf__backend *b, cmf__buffer *buf, size_t off, const void *src, size_t bytes);
cmf_status cmf__vk_get(cmf__backend *b, const cmf__buffer *buf, size_t off, void *dst, size_t bytes);
cmf_status cmf__vk_clear(cmf__backend *b, cmf__buffer *buf, size_t off, size_t bytes);

/* vk_backend.c */
/* Frees a backend (its device and everything on it); takes no lock. */
void cmf__vk_free(cmf__backend *b);

#endif
