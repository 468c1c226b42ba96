/* cpu_backend.c — the CPU backend: host buffers, the matmul kernel and the
 * graph walk. Matmul splits output rows over the thread pool: with an
 * integer kernel for the weight's dtype the activations are quantized to
 * int8 once and the table's tile kernel runs on the quantized rows;
 * otherwise a single token takes the per-dtype dot kernel straight on the
 * stored rows and a batch decodes a block of rows once to f32 for every
 * token. Prepare packs each matmul weight that has a packed integer
 * kernel (16 rows interleaved, kernels.h) once, into memory of the
 * backend's own; the rest are read in place from the mapping. One graph
 * runs at a time per backend (sessions sharing it serialise). */
#include "compute/cpu/cpu_internal.h"
#include "util/arith.h"
#include "util/error.h"
#include "util/half.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MM_BLOCK CMF__CPU_MM_BLOCK

typedef cmf__cpu_be cpu_be;

cmf_status cmf__cpu_scratch(cpu_be *be, size_t per_thread)
{
    if (per_thread <= be->scratch_per) return CMF_OK;
    size_t want = per_thread + per_thread / 2;
    if (want > SIZE_MAX / sizeof(float) / (size_t)be->n_threads)
        return cmf__error(CMF_ERR_NOMEM, "cpu backend: scratch of %zu floats per thread is too large", per_thread);
    float *p = realloc(be->scratch, want * sizeof(float) * (size_t)be->n_threads);
    if (!p) return cmf__error(CMF_ERR_NOMEM, "cpu backend: out of memory for %zu floats of scratch", want);
    be->scratch = p;
    be->scratch_per = want;
    return CMF_OK;
}

cmf_status cmf__cpu_work(cpu_be *be, size_t n)
{
    if (n <= be->work_n) return CMF_OK;
    if (n > SIZE_MAX / sizeof(float))
        return cmf__error(CMF_ERR_NOMEM, "cpu backend: work scratch of %zu floats is too large", n);
    float *p = realloc(be->work, n * sizeof(float));
    if (!p) return cmf__error(CMF_ERR_NOMEM, "cpu backend: out of memory for %zu floats of work scratch", n);
    be->work = p;
    be->work_n = n;
    return CMF_OK;
}

/* ---- matmul --------------------------------------------------------------- */
typedef struct mm_job {
    cpu_be *be;
    const cmf__qmat *w;
    const float *x;
    int64_t xs, n;
    float *y;
    int64_t ys, rpt;
} mm_job;

static void mm_task(void *ctx, int task, int thread)
{
    mm_job *j = ctx;
    const cmf__qmat *w = j->w;
    int64_t r0 = (int64_t)task * j->rpt, r1 = r0 + j->rpt;
    if (r1 > w->rows) r1 = w->rows;
    const cmf__cpu_kernels *k = j->be->k;
    if (j->n < 3 || j->be->reference) {
        cmf__kdot_fn dot = k->dot[w->dtype];
        for (int64_t t = 0; t < j->n; t++) {
            const float *x = j->x + t * j->xs;
            float *y = j->y + t * j->ys;
            for (int64_t r = r0; r < r1; r++) y[r] = dot(w, r, x);
        }
        return;
    }
    float *buf = j->be->scratch + (size_t)thread * j->be->scratch_per;
    const int64_t cols = w->cols;
    for (int64_t rb = r0; rb < r1; rb += MM_BLOCK) {
        int64_t re = rb + MM_BLOCK < r1 ? rb + MM_BLOCK : r1;
        for (int64_t r = rb; r < re; r++) k->decode[w->dtype](w, r, buf + (r - rb) * cols);
        int64_t t = 0;
        for (; t + 4 <= j->n; t += 4) { /* each decoded row is read once per four tokens */
            const float *x = j->x + t * j->xs;
            float *y = j->y + t * j->ys;
            int64_t r = rb;
            for (; r + 2 <= re; r += 2) { /* 2 rows x 4 tokens: 6 loads per 8 multiply-adds */
                float o[8];
                k->dot_f32_2x4(buf + (r - rb) * cols, x, j->xs, cols, o);
                for (int q = 0; q < 4; q++) y[q * j->ys + r] = o[q], y[q * j->ys + r + 1] = o[4 + q];
            }
            for (; r < re; r++) {
                float o[4];
                k->dot_f32_x4(buf + (r - rb) * cols, x, j->xs, cols, o);
                y[r] = o[0], y[j->ys + r] = o[1], y[2 * j->ys + r] = o[2], y[3 * j->ys + r] = o[3];
            }
        }
        for (; t < j->n; t++) {
            const float *x = j->x + t * j->xs;
            float *y = j->y + t * j->ys;
            for (int64_t r = rb; r < re; r++) y[r] = k->dot_f32(buf + (r - rb) * cols, x, cols);
        }
    }
}

/* ---- integer matmul: activations quantized once, then the table's kernel.
 * Up to MMQ_MAX weights that read the same input (q, k, v; gate, up) share
 * one quantization and one pool job: fewer wake-ups per decode step. */
#define MMQ_MAX 4

typedef struct mmq_job {
    const cmf__kmmq *q;
    const cmf__qmat *w[MMQ_MAX];
    const uint8_t *pk[MMQ_MAX]; /* packed forms (all or none) */
    float *y[MMQ_MAX];
    int64_t ys[MMQ_MAX];
    int first[MMQ_MAX + 1]; /* tasks of weight i: [first[i], first[i+1]) */
    int64_t rpt[MMQ_MAX];
    int n_w;
    const float *x;
    int64_t xs, n, cols;
    uint8_t *xq;
    size_t xb;
    int64_t tpt;
    cpu_be *be; /* per-thread scratch for column-scaled activations */
    void (*quant)(const float *x, int64_t cols, void *xq); /* the chosen kernel's */
} mmq_job;

static void mmq_quant_task(void *ctx, int task, int thread)
{
    mmq_job *j = ctx;
    int64_t t0 = (int64_t)task * j->tpt, t1 = t0 + j->tpt < j->n ? t0 + j->tpt : j->n;
    void (*quant)(const float *, int64_t, void *) = j->quant;
    if (j->q->col_scaled) { /* x ⊙ column scales, then quantized (q8_2f) */
        float *tmp = j->be->scratch + (size_t)thread * j->be->scratch_per;
        const uint8_t *cs = j->w[0]->aux2;
        for (int64_t t = t0; t < t1; t++) {
            const float *x = j->x + t * j->xs;
            for (int64_t c = 0; c < j->cols; c++) tmp[c] = x[c] * cmf__f16_to_f32(cmf__rd16(cs + 2 * c));
            quant(tmp, j->cols, j->xq + (size_t)t * j->xb);
        }
        return;
    }
    for (int64_t t = t0; t < t1; t++) quant(j->x + t * j->xs, j->cols, j->xq + (size_t)t * j->xb);
}

static void mmq_task(void *ctx, int task, int thread)
{
    (void)thread;
    mmq_job *j = ctx;
    int i = 0;
    while (task >= j->first[i + 1]) i++;
    const cmf__qmat *w = j->w[i];
    int64_t r0 = (int64_t)(task - j->first[i]) * j->rpt[i], r1 = r0 + j->rpt[i] < w->rows ? r0 + j->rpt[i] : w->rows;
    if (j->pk[i]) j->q->pmm(w, j->pk[i], r0, r1, j->xq, j->n, j->y[i], j->ys[i]);
    else j->q->mm(w, r0, r1, j->xq, j->n, j->y[i], j->ys[i]);
}

/* Whether w takes the table's own matmul: unpacked where the table has
 * one, else only once packed. */
static bool own_path(const cpu_be *be, const cmf__qmat *w)
{
    return !be->reference && cmf__kern_mmq_ok(be->k, w) && (be->k->mmq[w->dtype].mm || cmf__cpu_packed(be, w));
}

/* Room for n quantized activation rows of w; false when out of memory
 * (the caller then takes the f32 kernels, which need no such buffer). */
static bool reserve_xq(cpu_be *be, const cmf__qmat *w, int64_t n)
{
    const cmf__kmmq *q = &be->k->mmq[w->dtype];
    if (q->col_scaled && cmf__cpu_scratch(be, (size_t)w->cols)) return false;
    size_t xb = q->xbytes(w->cols);
    if (q->pxbytes && q->pxbytes(w->cols) > xb) xb = q->pxbytes(w->cols);
    if ((size_t)n > SIZE_MAX / xb) return false;
    size_t want = (size_t)n * xb;
    if (want <= be->xq_n) return true;
    uint8_t *p = aligned_alloc(64, want);
    if (!p) return false;
    free(be->xq);
    be->xq = p;
    be->xq_n = want;
    return true;
}

/* y_i[t][o] = W_i[o] · x[t] for the n_w weights of one dtype and width. */
static void matmul_int(cpu_be *be, int n_w, const cmf__qmat *const *w, const float *x, int64_t xs, int64_t n,
                       float *const *y, const int64_t *ys)
{
    const cmf__kmmq *q = &be->k->mmq[w[0]->dtype];
    mmq_job j = {.q = q, .n_w = n_w, .x = x, .xs = xs, .n = n, .cols = w[0]->cols, .xq = be->xq, .be = be};
    j.w[0] = w[0]; /* the quantizer reads q8_2f's column scales from it */
    bool packed = true;
    for (int i = 0; i < n_w && packed; i++) packed = (j.pk[i] = cmf__cpu_packed(be, w[i])) != NULL;
    const bool alt = packed && q->pquant; /* the packed kernel's own activations */
    j.quant = alt ? q->pquant : q->quant;
    j.xb = alt ? q->pxbytes(w[0]->cols) : q->xbytes(w[0]->cols);
    int64_t work = 0;
    for (int i = 0; i < n_w; i++) work += w[i]->rows * w[i]->cols * n;
    bool pool = be->n_threads > 1 && work >= CMF__CPU_SMALL_WORK;
    /* quantizing is ~1/rows of the matmul's work: spread it only for a batch */
    int quant_tasks = pool && n >= 8 ? be->n_threads * 2 : 1;
    j.tpt = (n + quant_tasks - 1) / quant_tasks;
    quant_tasks = (int)((n + j.tpt - 1) / j.tpt);
    if (quant_tasks > 1) cmf__pool_run(be->pool, quant_tasks, mmq_quant_task, &j);
    else mmq_quant_task(&j, 0, 0);
    /* rows in multiples of the kernels' tile (4 rows; 16 packed); a few
     * tasks per thread balance uneven cores */
    const int64_t target = (int64_t)be->n_threads * 4;
    const int64_t tile = packed ? CMF__KPACK_ROWS : 4;
    j.first[0] = 0;
    for (int i = 0; i < n_w; i++) {
        if (!packed) j.pk[i] = NULL;
        j.w[i] = w[i], j.y[i] = y[i], j.ys[i] = ys[i];
        j.rpt[i] = ((w[i]->rows + target - 1) / target + tile - 1) / tile * tile;
        j.first[i + 1] = j.first[i] + (int)((w[i]->rows + j.rpt[i] - 1) / j.rpt[i]);
    }
    const int n_tasks = j.first[n_w];
    if (!pool || n_tasks == 1)
        for (int t = 0; t < n_tasks; t++) mmq_task(&j, t, 0);
    else
        cmf__pool_run(be->pool, n_tasks, mmq_task, &j);
}

cmf_status cmf__cpu_matmul(cpu_be *be, const cmf__qmat *w, const float *x, int64_t xs, int64_t n, float *y,
                           int64_t ys)
{
    if (n <= 0 || w->rows <= 0) return CMF_OK;
    if (own_path(be, w) && reserve_xq(be, w, n)) {
        matmul_int(be, 1, &w, x, xs, n, &y, &ys);
        return CMF_OK;
    }
    mm_job j = {be, w, x, xs, n, y, ys, 0};
    bool batched = n >= 3 && !be->reference;
    if (batched) {
        cmf_status st = cmf__cpu_scratch(be, (size_t)MM_BLOCK * (size_t)w->cols);
        if (st) return st;
    }
    int64_t target = (int64_t)be->n_threads * 4;
    int64_t rpt = (w->rows + target - 1) / target;
    if (batched) rpt = (rpt + MM_BLOCK - 1) / MM_BLOCK * MM_BLOCK;
    if (rpt < 1) rpt = 1;
    j.rpt = rpt;
    int n_tasks = (int)((w->rows + rpt - 1) / rpt);
    /* below ~64k multiply-adds waking the pool costs more than it saves */
    if (be->n_threads == 1 || n_tasks == 1 || w->rows * w->cols * n < CMF__CPU_SMALL_WORK) {
        for (int t = 0; t < n_tasks; t++) mm_task(&j, t, 0);
        return CMF_OK;
    }
    cmf__pool_run(be->pool, n_tasks, mm_task, &j);
    return CMF_OK;
}

/* ---- buffers --------------------------------------------------------------- */
/* Large buffers (the KV cache) come straight from mmap: zero pages the
 * kernel hands out only when first written, so an unused context costs
 * no memory. Small ones are aligned heap blocks. */
#define MMAP_MIN ((size_t)1 << 20)

static cmf_status cpu_buffer_new(cmf__backend *b, size_t bytes, unsigned flags, const char *what, cmf__buffer **out)
{
    (void)b;
    (void)flags; /* all of it is host memory */
    *out = NULL;
    size_t size = (bytes ? bytes : 1) + 63;
    if (size < bytes) return cmf__error(CMF_ERR_NOMEM, "%s: %zu bytes is too large", what, bytes);
    size = size / 64 * 64;
    cmf__buffer *buf = calloc(1, sizeof *buf);
    if (!buf) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", what);
    if (size >= MMAP_MIN) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        buf->data = p == MAP_FAILED ? NULL : p;
        buf->mapped = true;
    } else if ((buf->data = aligned_alloc(64, size))) {
        memset(buf->data, 0, size);
    }
    if (!buf->data) {
        free(buf);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory for %zu bytes", what, bytes);
    }
    buf->size = bytes;
    buf->alloc = size;
    *out = buf;
    return CMF_OK;
}

static void cpu_buffer_free(cmf__backend *b, cmf__buffer *buf)
{
    (void)b;
    if (!buf) return;
    if (buf->mapped) munmap(buf->data, buf->alloc);
    else free(buf->data);
    free(buf);
}

static cmf_status span_ok(const cmf__buffer *buf, size_t off, size_t bytes)
{
    return cmf__buffer_span_check(buf != NULL, buf ? buf->size : 0, off, bytes, "cpu backend");
}

static cmf_status cpu_set(cmf__backend *b, cmf__buffer *buf, size_t off, const void *src, size_t bytes)
{
    (void)b;
    cmf_status st = span_ok(buf, off, bytes);
    if (!st && bytes) memcpy(buf->data + off, src, bytes);
    return st;
}

static cmf_status cpu_get(cmf__backend *b, const cmf__buffer *buf, size_t off, void *dst, size_t bytes)
{
    (void)b;
    cmf_status st = span_ok(buf, off, bytes);
    if (!st && bytes) memcpy(dst, buf->data + off, bytes);
    return st;
}

static cmf_status cpu_clear(cmf__backend *b, cmf__buffer *buf, size_t off, size_t bytes)
{
    (void)b;
    cmf_status st = span_ok(buf, off, bytes);
    if (!st && bytes) memset(buf->data + off, 0, bytes);
    return st;
}

/* ---- packed weights ------------------------------------------------------------ */
static size_t pack_slot(const cpu_be *be, const cmf__qmat *w)
{
    uint64_t h = (uint64_t)(uintptr_t)w->data * 0x9e3779b97f4a7c15ull ^ (uint64_t)w->rows * 0xc2b2ae3d27d4eb4full;
    size_t i = (size_t)(h >> 17) & (be->n_slots - 1);
    for (;; i = (i + 1) & (be->n_slots - 1)) {
        const cmf__cpu_pack *p = &be->packs[i];
        if (!p->data || (p->key == w->data && p->rows == w->rows && p->cols == w->cols && p->dtype == w->dtype))
            return i;
    }
}

const uint8_t *cmf__cpu_packed(const cpu_be *be, const cmf__qmat *w)
{
    return be->n_packs ? be->packs[pack_slot(be, w)].data : NULL;
}

typedef struct pack_job {
    const cmf__kmmq *q;
    const cmf__qmat *w;
    uint8_t *dst;
    int64_t per, groups;
} pack_job;

static void pack_task(void *ctx, int task, int thread)
{
    (void)thread;
    const pack_job *j = ctx;
    int64_t g0 = (int64_t)task * j->per, g1 = g0 + j->per < j->groups ? g0 + j->per : j->groups;
    j->q->pack(j->w, g0, g1, j->dst);
}

/* Packed weights are carved from arenas: anonymous mappings of at least
 * 64 MiB (or one weight's size), with transparent huge pages asked for
 * (MADV_HUGEPAGE): decode streams them, and on 4 KiB pages the hardware
 * prefetchers stop at every page. Freed with the backend. */
#define ARENA_MIN ((size_t)64 << 20)
#define ARENA_PAGE ((size_t)2 << 20)
static uint8_t *pack_alloc(cpu_be *be, size_t bytes)
{
    bytes = (bytes + 63) / 64 * 64;
    cmf__cpu_arena *a = be->n_arenas ? &be->arenas[be->n_arenas - 1] : NULL;
    if (!a || a->size - a->used < bytes) {
        if (be->n_arenas == CMF__CPU_ARENAS) return NULL;
        size_t size = bytes > ARENA_MIN ? (bytes + ARENA_PAGE - 1) / ARENA_PAGE * ARENA_PAGE : ARENA_MIN;
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
        (void)madvise(p, size, MADV_HUGEPAGE); /* a hint: without THP the pages stay 4 KiB */
#endif
        a = &be->arenas[be->n_arenas++];
        *a = (cmf__cpu_arena){p, size, 0};
    }
    uint8_t *r = a->base + a->used;
    a->used += bytes;
    return r;
}

/* Packs w once (a second graph reading it finds it). Out of memory leaves
 * it unpacked: the unpacked kernels give the same products. */
static void pack_weight(cpu_be *be, const cmf__qmat *w)
{
    const cmf__kmmq *q = &be->k->mmq[w->dtype];
    if (!q->pack || !cmf__kern_mmq_ok(be->k, w)) return;
    size_t bytes = q->pack_bytes(w);
    if (!bytes) return;
    if (be->n_packs * 2 + 2 > be->n_slots) { /* grow the table, keeping it at most half full */
        size_t n = be->n_slots ? be->n_slots * 2 : 256;
        cmf__cpu_pack *t = calloc(n, sizeof *t), *old = be->packs;
        if (!t) return;
        size_t old_n = be->n_slots;
        be->packs = t, be->n_slots = n;
        for (size_t i = 0; i < old_n; i++)
            if (old[i].data) {
                cmf__qmat k = {.dtype = old[i].dtype, .data = old[i].key, .rows = old[i].rows, .cols = old[i].cols};
                be->packs[pack_slot(be, &k)] = old[i];
            }
        free(old);
    }
    cmf__cpu_pack *slot = &be->packs[pack_slot(be, w)];
    if (slot->data) return;
    uint8_t *dst = pack_alloc(be, bytes);
    if (!dst) {
        CMF_DEBUG("cpu backend: no memory to pack a %lldx%lld weight; it runs unpacked", (long long)w->rows,
                  (long long)w->cols);
        return;
    }
    int64_t groups = (w->rows + CMF__KPACK_ROWS - 1) / CMF__KPACK_ROWS;
    pack_job j = {q, w, dst, (groups + be->n_threads * 4 - 1) / (be->n_threads * 4), groups};
    cmf__pool_run(be->pool, (int)((groups + j.per - 1) / j.per), pack_task, &j);
    *slot = (cmf__cpu_pack){w->data, w->rows, w->cols, w->dtype, dst, bytes};
    be->n_packs++;
    be->packed_bytes += bytes;
}

/* ---- the graph walk ---------------------------------------------------------- */
/* Packs every matmul weight of g that has a packed kernel (once per weight);
 * other weights are read in place from the mapping. */
static cmf_status cpu_prepare(cmf__backend *b, const cmf__graph *g)
{
    cpu_be *be = (cpu_be *)b;
    if (be->reference || !be->pack) return CMF_OK;
    pthread_mutex_lock(&be->mu);
    size_t before = be->packed_bytes;
    for (int k = 0; k < g->n; k++)
        if (g->nodes[k].op == CMF__OP_MATMUL && g->nodes[k].w) pack_weight(be, g->nodes[k].w);
    if (be->packed_bytes > before)
        CMF_INFO("cpu backend: packed %zu weights, %.1f MiB in all", be->n_packs, (double)be->packed_bytes / 1048576.0);
    pthread_mutex_unlock(&be->mu);
    return CMF_OK;
}

static cmf_status run_node(cpu_be *be, const cmf__node *nd)
{
    switch (nd->op) {
    case CMF__OP_MATMUL: {
        const int64_t rs = (int64_t)(nd->a.nb / 4), ds = (int64_t)(nd->dst.nb / 4);
        float *y = cmf__cpu_f32(&nd->dst, 0);
        cmf_status st = cmf__cpu_matmul(be, nd->w, cmf__cpu_f32(&nd->a, 0), rs, nd->a.rows, y, ds);
        if (st || !nd->v) return st;
        for (int64_t t = 0; t < nd->dst.rows; t++)
            for (int64_t o = 0; o < nd->dst.cols; o++) y[t * ds + o] += nd->v[o];
        return CMF_OK;
    }
    case CMF__OP_KV_WRITE: return cmf__cpu_op_kv_write(be, nd);
    case CMF__OP_ATTN: return cmf__cpu_op_attn(be, nd);
    case CMF__OP_MOE:
    case CMF__OP_GDN:
    case CMF__OP_PLE:
    case CMF__OP_PLE_TAIL: return cmf__cpu_op_fused(be, nd);
    default: return cmf__cpu_op_simple(be, nd);
    }
}

static bool same_input(const cmf__ten *a, const cmf__ten *b)
{
    return a->buf == b->buf && a->off == b->off && a->nb == b->nb && a->rows == b->rows && a->cols == b->cols;
}

/* Whether the bytes of t and u overlap (different buffers never do). */
static bool overlaps(const cmf__ten *t, const cmf__ten *u)
{
    if (t->buf != u->buf || t->rows <= 0 || u->rows <= 0) return false;
    size_t t1 = t->off + (size_t)(t->rows - 1) * t->nb + (size_t)t->cols * 4;
    size_t u1 = u->off + (size_t)(u->rows - 1) * u->nb + (size_t)u->cols * 4;
    return t->off < u1 && u->off < t1;
}

/* Consecutive matmuls from node k on that read one f32 input and take the
 * same integer path (q, k, v; gate, up), none writing the input or an
 * earlier one's output: they run as one job. Returns how many (>= 1). */
static int matmul_group(cpu_be *be, const cmf__graph *g, int k)
{
    const cmf__node *n0 = &g->nodes[k];
    if (n0->op != CMF__OP_MATMUL || n0->a.type != CMF__E_F32 || !own_path(be, n0->w) ||
        be->k->mmq[n0->w->dtype].col_scaled) /* activations scaled per weight: nothing to share */
        return 1;
    int m = 1;
    while (m < MMQ_MAX && k + m < g->n) {
        const cmf__node *nd = &g->nodes[k + m];
        if (nd->op != CMF__OP_MATMUL || !same_input(&nd->a, &n0->a) || nd->w->dtype != n0->w->dtype ||
            nd->w->cols != n0->w->cols || !own_path(be, nd->w) || overlaps(&nd->dst, &n0->a))
            break;
        bool clash = false;
        for (int i = 0; i < m && !clash; i++) clash = overlaps(&nd->dst, &g->nodes[k + i].dst);
        if (clash) break;
        m++;
    }
    return overlaps(&n0->dst, &n0->a) ? 1 : m;
}

static cmf_status run_group(cpu_be *be, const cmf__node *nd, int m)
{
    const cmf__qmat *w[MMQ_MAX];
    float *y[MMQ_MAX];
    int64_t ys[MMQ_MAX];
    for (int i = 0; i < m; i++) w[i] = nd[i].w, y[i] = cmf__cpu_f32(&nd[i].dst, 0), ys[i] = (int64_t)(nd[i].dst.nb / 4);
    if (!reserve_xq(be, w[0], nd->a.rows)) { /* out of memory for the activations: one by one */
        for (int i = 0; i < m; i++) {
            cmf_status st = run_node(be, &nd[i]);
            if (st) return st;
        }
        return CMF_OK;
    }
    matmul_int(be, m, w, cmf__cpu_f32(&nd->a, 0), (int64_t)(nd->a.nb / 4), nd->a.rows, y, ys);
    for (int i = 0; i < m; i++)
        if (nd[i].v)
            for (int64_t t = 0; t < nd[i].dst.rows; t++)
                for (int64_t o = 0; o < nd[i].dst.cols; o++) y[i][t * ys[i] + o] += nd[i].v[o];
    return CMF_OK;
}

static cmf_status cpu_compute(cmf__backend *b, const cmf__graph *g)
{
    cpu_be *be = (cpu_be *)b;
    cmf_status st = CMF_OK;
    pthread_mutex_lock(&be->mu);
    for (int k = 0; k < g->n && !st;) {
        int m = matmul_group(be, g, k);
        st = m > 1 ? run_group(be, &g->nodes[k], m) : run_node(be, &g->nodes[k]);
        k += m;
    }
    pthread_mutex_unlock(&be->mu);
    return st;
}

static void cpu_free(cmf__backend *b)
{
    cpu_be *be = (cpu_be *)b;
    cmf__pool_free(be->pool);
    pthread_mutex_destroy(&be->mu);
    free(be->scratch);
    free(be->work);
    free(be->xq);
    for (int i = 0; i < be->n_arenas; i++) munmap(be->arenas[i].base, be->arenas[i].size);
    free(be->packs);
    free(be);
}

static const char *cpu_device(const cmf__backend *b) { return ((const cpu_be *)b)->device; }

static const cmf__backend_ops cpu_ops = {
    .name = "cpu",
    .free = cpu_free,
    .device = cpu_device,
    .buffer_new = cpu_buffer_new,
    .buffer_free = cpu_buffer_free,
    .set = cpu_set,
    .get = cpu_get,
    .clear = cpu_clear,
    .prepare = cpu_prepare,
    .compute = cpu_compute,
};

cmf__backend *cmf__cpu_backend_new(int n_threads, bool reference)
{
    cpu_be *be = calloc(1, sizeof *be);
    if (!be) {
        cmf__error(CMF_ERR_NOMEM, "cpu backend: out of memory");
        return NULL;
    }
    be->base.ops = &cpu_ops;
    be->reference = reference;
    be->k = reference ? cmf__cpu_kernels_ref() : cmf__cpu_kernels_best();
    const char *isa = getenv("CMF_CPU_ISA"); /* a slower table on purpose, to measure it */
    if (!reference && isa && *isa) {
        const cmf__cpu_kernels *t = !strcmp(isa, "generic") ? cmf__cpu_kernels_generic()
                                    : !strcmp(isa, "avx2")  ? cmf__cpu_kernels_avx2()
                                    : !strcmp(isa, "avx512") ? cmf__cpu_kernels_avx512()
                                    : !strcmp(isa, "neon")  ? cmf__cpu_kernels_neon()
                                                            : NULL;
        if (t) be->k = t;
        else CMF_WARN("cpu backend: CMF_CPU_ISA=%s: no such kernel table on this CPU; using %s", isa, be->k->isa);
    }
    const char *bd = getenv("CMF_CPU_BF16_DOT");
    if (!reference && bd && strcmp(bd, "1") == 0) {
        if (cmf__cpu_kernels_avx512_bf16dot()) be->k = cmf__cpu_kernels_avx512_bf16dot();
        else CMF_INFO("cpu backend: CMF_CPU_BF16_DOT=1 ignored: the CPU lacks AVX512_BF16");
    }
    if (n_threads <= 0) n_threads = cmf__cpu_count();
    be->n_threads = n_threads;
    const char *pk = getenv("CMF_CPU_PACK");
    be->pack = !(pk && strcmp(pk, "0") == 0);
    snprintf(be->device, sizeof be->device, "cpu (%s, %d thread%s)", be->k->isa, n_threads, n_threads == 1 ? "" : "s");
    pthread_mutex_init(&be->mu, NULL);
    if (n_threads > 1) {
        be->pool = cmf__pool_new(n_threads);
        if (!be->pool) {
            pthread_mutex_destroy(&be->mu);
            free(be);
            cmf__error(CMF_ERR_BACKEND, "cpu backend: cannot start %d threads", n_threads);
            return NULL;
        }
    }
    if (cmf__cpu_scratch(be, 4096)) {
        cpu_free(&be->base);
        return NULL;
    }
    return &be->base;
}

