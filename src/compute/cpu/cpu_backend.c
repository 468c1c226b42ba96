/* cpu_backend.c — the CPU implementation of the backend operations table.
 * Matmul splits output rows over the thread pool: a single token takes the
 * per-dtype dot kernel straight on the quantized rows; a batch decodes a
 * block of rows once to f32 and reuses it for every token. Attention splits
 * (token, head) pairs. Scratch grows on demand and is per thread. */
#include "compute/backend.h"
#include "compute/cpu/kernels.h"
#include "util/error.h"
#include "util/pool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MM_BLOCK 16 /* rows decoded at once per task in the batched path */
#define SMALL_WORK 65536 /* multiply-adds below which an op runs on the calling thread */

typedef struct cpu_be {
    cmf__backend base;
    const cmf__cpu_kernels *k;
    bool reference;
    cmf__pool *pool;
    int n_threads;
    float *scratch;      /* [n_threads][scratch_per] */
    size_t scratch_per;  /* floats per thread */
} cpu_be;

static bool ensure_scratch(cpu_be *be, size_t per_thread)
{
    if (per_thread <= be->scratch_per) return true;
    size_t want = per_thread + per_thread / 2;
    float *p = realloc(be->scratch, want * sizeof(float) * (size_t)be->n_threads);
    if (!p) return false;
    be->scratch = p;
    be->scratch_per = want;
    return true;
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

static void cpu_matmul(cmf__backend *b, const cmf__qmat *w, const float *x, int64_t xs, int64_t n, float *y, int64_t ys)
{
    cpu_be *be = (cpu_be *)b;
    if (n <= 0 || w->rows <= 0) return;
    mm_job j = {be, w, x, xs, n, y, ys, 0};
    bool batched = n >= 3 && !be->reference;
    if (batched && !ensure_scratch(be, (size_t)MM_BLOCK * (size_t)w->cols)) batched = false;
    if (!batched && n >= 3 && !be->reference) {
        /* no scratch: fall back to the direct dot per token (still exact) */
        j.rpt = w->rows;
        for (int64_t t = 0; t < n; t++) {
            mm_job jt = {be, w, x + t * xs, xs, 1, y + t * ys, ys, (w->rows + be->n_threads * 4 - 1) / (be->n_threads * 4)};
            cmf__pool_run(be->pool, (int)((w->rows + jt.rpt - 1) / jt.rpt), mm_task, &jt);
        }
        return;
    }
    int64_t target = (int64_t)be->n_threads * 4;
    int64_t rpt = (w->rows + target - 1) / target;
    if (batched) rpt = (rpt + MM_BLOCK - 1) / MM_BLOCK * MM_BLOCK;
    if (rpt < 1) rpt = 1;
    j.rpt = rpt;
    int n_tasks = (int)((w->rows + rpt - 1) / rpt);
    /* below ~64k multiply-adds waking the pool costs more than it saves */
    if (be->n_threads == 1 || n_tasks == 1 || w->rows * w->cols * n < SMALL_WORK) {
        for (int t = 0; t < n_tasks; t++) mm_task(&j, t, 0);
        return;
    }
    cmf__pool_run(be->pool, n_tasks, mm_task, &j);
}

/* ---- rmsnorm -------------------------------------------------------------- */
static void cpu_rmsnorm(cmf__backend *b, const float *x, float *y, int64_t n_rows, int64_t dim, int64_t stride,
                        const float *w, float eps, bool plus_one)
{
    (void)b;
    for (int64_t r = 0; r < n_rows; r++) {
        const float *xr = x + r * stride;
        float *yr = y + r * stride;
        double ss = 0;
        for (int64_t i = 0; i < dim; i++) ss += (double)xr[i] * xr[i];
        float inv = (float)(1.0 / sqrt(ss / (double)dim + (double)eps));
        if (!w)
            for (int64_t i = 0; i < dim; i++) yr[i] = xr[i] * inv;
        else if (plus_one)
            for (int64_t i = 0; i < dim; i++) yr[i] = (xr[i] * inv) * (1.0f + w[i]);
        else
            for (int64_t i = 0; i < dim; i++) yr[i] = (xr[i] * inv) * w[i];
    }
}

/* ---- rope ----------------------------------------------------------------- */
static void cpu_rope(cmf__backend *b, float *x, int64_t n_tok, int64_t stride, int64_t n_heads, int64_t head_dim,
                     const int32_t *pos, const cmf__rope_table *rt)
{
    (void)b;
    int64_t half = rt->rot_dims / 2;
    float cs[2048], sn[2048];
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t base = 0; base < half; base += 2048) {
            int64_t m = half - base < 2048 ? half - base : 2048;
            for (int64_t i = 0; i < m; i++) {
                float th = (float)pos[t] * rt->inv_freq[base + i]; /* one f32 rounding, as HF */
                cs[i] = (float)cos((double)th) * rt->attn_factor;
                sn[i] = (float)sin((double)th) * rt->attn_factor;
            }
            for (int64_t h = 0; h < n_heads; h++) {
                float *v = x + t * stride + h * head_dim;
                for (int64_t i = 0; i < m; i++) {
                    float x0 = v[base + i], x1 = v[base + i + half];
                    v[base + i] = x0 * cs[i] - x1 * sn[i];
                    v[base + i + half] = x1 * cs[i] + x0 * sn[i];
                }
            }
        }
    }
}

/* ---- attention ------------------------------------------------------------ */
typedef struct at_job {
    cpu_be *be;
    const cmf__attn_desc *d;
} at_job;

static void at_task(void *ctx, int task, int thread)
{
    at_job *j = ctx;
    const cmf__attn_desc *d = j->d;
    const cmf__cpu_kernels *k = j->be->k;
    int64_t t = task / d->n_head, h = task % d->n_head;
    int64_t group = d->n_head / d->n_head_kv, kvh = h / group, hd = d->head_dim;
    int64_t p = d->pos[t];
    int64_t lo = d->window > 0 ? p - d->window + 1 : 0;
    if (lo < 0) lo = 0;
    float *sc = j->be->scratch + (size_t)thread * j->be->scratch_per;
    const float *q = d->q + t * d->q_stride + h * hd;
    float mx = -INFINITY;
    for (int64_t s = lo; s <= p; s++) {
        const float *kr = d->k_cache + (s % d->cap) * d->kv_stride + kvh * hd;
        float v = k->dot_f32(q, kr, hd) * d->scale;
        if (d->softcap > 0) v = d->softcap * tanhf(v / d->softcap);
        sc[s - lo] = v;
        if (v > mx) mx = v;
    }
    float sink = d->sinks ? d->sinks[h] : -INFINITY;
    if (sink > mx) mx = sink;
    double sum = d->sinks ? exp((double)(sink - mx)) : 0.0;
    for (int64_t s = lo; s <= p; s++) {
        float e = expf(sc[s - lo] - mx);
        sc[s - lo] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    float *out = d->out + t * d->out_stride + h * hd;
    memset(out, 0, (size_t)hd * sizeof(float));
    for (int64_t s = lo; s <= p; s++)
        k->axpy(out, sc[s - lo] * inv, d->v_cache + (s % d->cap) * d->kv_stride + kvh * hd, hd);
}

static void cpu_attention(cmf__backend *b, const cmf__attn_desc *d)
{
    cpu_be *be = (cpu_be *)b;
    int64_t span = 0;
    for (int64_t t = 0; t < d->n_tok; t++) {
        int64_t lo = d->window > 0 ? d->pos[t] - d->window + 1 : 0;
        if (lo < 0) lo = 0;
        if (d->pos[t] - lo + 1 > span) span = d->pos[t] - lo + 1;
    }
    if (!ensure_scratch(be, (size_t)span)) {
        /* unreachable when the caller reserved max_span (sessions do): the
         * output is zeroed rather than left undefined */
        memset(d->out, 0, (size_t)(d->n_tok * d->out_stride) * sizeof(float));
        return;
    }
    at_job j = {be, d};
    int n_tasks = (int)(d->n_tok * d->n_head);
    if (be->n_threads == 1 || d->n_tok * d->n_head * span * d->head_dim < SMALL_WORK) {
        for (int t = 0; t < n_tasks; t++) at_task(&j, t, 0);
        return;
    }
    cmf__pool_run(be->pool, n_tasks, at_task, &j);
}

/* ---- gated activation ----------------------------------------------------- */
static void cpu_glu(cmf__backend *b, float *gate, int64_t gs, const float *up, int64_t us, int64_t n, int64_t dim,
                    const cmf__glu_desc *g)
{
    (void)b;
    for (int64_t t = 0; t < n; t++) {
        float *gr = gate + t * gs;
        const float *ur = up + t * us;
        for (int64_t i = 0; i < dim; i++) {
            float x = gr[i], u = ur[i], r;
            switch (g->act) {
            case 1: r = 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x))) * u; break;
            case 2: r = 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)) * u; break;
            case 3:
                x = x < g->limit ? x : g->limit;
                u = u < -g->limit ? -g->limit : (u > g->limit ? g->limit : u);
                r = (u + 1.0f) * x * (1.0f / (1.0f + expf(-g->alpha * x)));
                break;
            default: r = x / (1.0f + expf(-x)) * u; break;
            }
            gr[i] = r;
        }
    }
}

static void cpu_free(cmf__backend *b)
{
    cpu_be *be = (cpu_be *)b;
    cmf__pool_free(be->pool);
    free(be->scratch);
    free(be);
}

static cmf_status cpu_reserve(cmf__backend *b, int64_t max_cols, int64_t max_span)
{
    size_t need = (size_t)MM_BLOCK * (size_t)max_cols;
    if ((size_t)max_span > need) need = (size_t)max_span;
    if (!ensure_scratch((cpu_be *)b, need)) return cmf__error(CMF_ERR_NOMEM, "cpu backend: out of memory");
    return CMF_OK;
}

static const cmf__backend_ops cpu_ops = {
    .name = "cpu",
    .free = cpu_free,
    .reserve = cpu_reserve,
    .matmul = cpu_matmul,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .attention = cpu_attention,
    .glu = cpu_glu,
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
    if (n_threads <= 0) n_threads = cmf__cpu_count();
    be->n_threads = n_threads;
    if (n_threads > 1) {
        be->pool = cmf__pool_new(n_threads);
        if (!be->pool) {
            free(be);
            cmf__error(CMF_ERR_BACKEND, "cpu backend: cannot start %d threads", n_threads);
            return NULL;
        }
    }
    if (!ensure_scratch(be, 4096)) {
        cpu_free(&be->base);
        cmf__error(CMF_ERR_NOMEM, "cpu backend: out of memory");
        return NULL;
    }
    return &be->base;
}

const char *cmf__cpu_backend_isa(const cmf__backend *b) { return ((const cpu_be *)b)->k->isa; }
int cmf__cpu_backend_threads(const cmf__backend *b) { return ((const cpu_be *)b)->n_threads; }

