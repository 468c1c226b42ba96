/* cpu_ops.c — the CPU backend's ops other than matmul: element-wise ops,
 * RMS norm, rotary embedding, task-mask columns, row gathers, the KV cache
 * write (f32, f16 or q8 rows) and attention over it, and the fused MoE,
 * gated DeltaNet and Gemma-4 per-layer ops (their math is in compute/,
 * their matrix products go through the backend's matmul). Attention splits
 * (token, head) pairs over the pool; the rest runs on the calling thread. */
#include "compute/cpu/cpu_internal.h"
#include "util/error.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef cmf__cpu_be cpu_be;

/* ---- element-wise, norms, rope, masks ----------------------------------------- */
static float glu(int act, float x, float u, float alpha, float limit)
{
    switch (act) {
    case CMF__ACT_GELU_TANH: return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x))) * u;
    case CMF__ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)) * u;
    case CMF__ACT_SWIGLU_OSS:
        x = x < limit ? x : limit;
        u = u < -limit ? -limit : (u > limit ? limit : u);
        return (u + 1.0f) * x * (1.0f / (1.0f + expf(-alpha * x)));
    case CMF__ACT_SILU:
    default: return x / (1.0f + expf(-x)) * u;
    }
}

static void rmsnorm_row(const float *x, float *y, int64_t dim, const float *w, float eps, bool plus_one)
{
    double ss = 0;
    for (int64_t i = 0; i < dim; i++) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / (double)dim + (double)eps));
    if (!w)
        for (int64_t i = 0; i < dim; i++) y[i] = x[i] * inv;
    else if (plus_one)
        for (int64_t i = 0; i < dim; i++) y[i] = (x[i] * inv) * (1.0f + w[i]);
    else
        for (int64_t i = 0; i < dim; i++) y[i] = (x[i] * inv) * w[i];
}

static void rope_row(float *row, int64_t n_heads, int64_t head_dim, int32_t pos, const cmf__rope_table *rt)
{
    int64_t half = rt->rot_dims / 2;
    float cs[256], sn[256];
    for (int64_t base = 0; base < half; base += 256) {
        int64_t m = half - base < 256 ? half - base : 256;
        for (int64_t i = 0; i < m; i++) {
            float th = (float)pos * rt->inv_freq[base + i]; /* one f32 rounding, as HF */
            cs[i] = (float)cos((double)th) * rt->attn_factor;
            sn[i] = (float)sin((double)th) * rt->attn_factor;
        }
        for (int64_t h = 0; h < n_heads; h++) {
            float *v = row + h * head_dim;
            for (int64_t i = 0; i < m; i++) {
                float x0 = v[base + i], x1 = v[base + i + half];
                v[base + i] = x0 * cs[i] - x1 * sn[i];
                v[base + i + half] = x1 * cs[i] + x0 * sn[i];
            }
        }
    }
}

/* Element-wise ops, norms and rope on tokens [t0, t1): each token's row
 * is independent, so a batch splits over the pool. */
static void rows_op(const cmf__cpu_kernels *k, const cmf__node *nd, int64_t t0, int64_t t1)
{
    const cmf__ten *d = &nd->dst, *a = &nd->a, *b = &nd->b;
    const int64_t C = d->cols;
    switch (nd->op) {
    case CMF__OP_ADD:
    case CMF__OP_MUL:
    case CMF__OP_SIGMOID_MUL:
    case CMF__OP_GLU:
    case CMF__OP_SCALE:
    case CMF__OP_SOFTCAP:
        for (int64_t t = t0; t < t1; t++) {
            float *y = cmf__cpu_f32(d, t);
            const float *x = cmf__cpu_f32(a, t), *z = b->buf ? cmf__cpu_f32(b, t) : NULL;
            switch (nd->op) {
            case CMF__OP_ADD:
                if (nd->f[0] == 1.0f)
                    for (int64_t i = 0; i < C; i++) y[i] = x[i] + z[i];
                else
                    for (int64_t i = 0; i < C; i++) y[i] = x[i] + z[i] * nd->f[0];
                break;
            case CMF__OP_MUL:
                for (int64_t i = 0; i < C; i++) y[i] = x[i] * z[i];
                break;
            case CMF__OP_SIGMOID_MUL:
                for (int64_t i = 0; i < C; i++) y[i] = x[i] * (1.0f / (1.0f + expf(-z[i])));
                break;
            case CMF__OP_GLU:
                if (nd->i[0] == CMF__ACT_SILU) k->silu_mul(y, x, z, C);
                else
                    for (int64_t i = 0; i < C; i++) y[i] = glu((int)nd->i[0], x[i], z[i], nd->f[0], nd->f[1]);
                break;
            case CMF__OP_SCALE:
                for (int64_t i = 0; i < C; i++) y[i] = x[i] * nd->f[0];
                break;
            default: /* SOFTCAP */
                for (int64_t i = 0; i < C; i++) {
                    float v = x[i] * nd->f[0];
                    y[i] = nd->f[1] > 0 ? nd->f[1] * tanhf(v / nd->f[1]) : v;
                }
                break;
            }
        }
        return;
    case CMF__OP_RMSNORM: {
        const int64_t gsz = nd->i[0];
        for (int64_t t = t0; t < t1; t++)
            for (int64_t c0 = 0; c0 < C; c0 += gsz)
                rmsnorm_row(cmf__cpu_f32(a, t) + c0, cmf__cpu_f32(d, t) + c0, gsz, nd->v, nd->f[0], nd->i[1] != 0);
        return;
    }
    case CMF__OP_ROPE: {
        const int32_t *pos = cmf__cpu_i32(b);
        for (int64_t t = t0; t < t1; t++) rope_row(cmf__cpu_f32(d, t), nd->i[0], nd->i[1], pos[t], nd->ext);
        return;
    }
    default: return;
    }
}

typedef struct rows_job {
    const cmf__cpu_kernels *k;
    const cmf__node *nd;
    int64_t per;
} rows_job;

static void rows_task(void *ctx, int task, int thread)
{
    (void)thread;
    const rows_job *j = ctx;
    int64_t t0 = (int64_t)task * j->per, t1 = t0 + j->per < j->nd->dst.rows ? t0 + j->per : j->nd->dst.rows;
    rows_op(j->k, j->nd, t0, t1);
}

cmf_status cmf__cpu_op_simple(cpu_be *be, const cmf__node *nd)
{
    const cmf__ten *d = &nd->dst, *a = &nd->a, *b = &nd->b;
    const int64_t n = d->rows, C = d->cols;
    switch (nd->op) {
    case CMF__OP_GET_ROWS: {
        const int32_t *ids = cmf__cpu_i32(a);
        for (int64_t t = 0; t < n; t++) {
            if (ids[t] < 0 || ids[t] >= nd->w->rows)
                return cmf__error(CMF_ERR_BOUNDS, "get_rows: id %d outside [0, %lld)", ids[t], (long long)nd->w->rows);
            float *y = cmf__cpu_f32(d, t);
            cmf__qmat_decode_row(nd->w, ids[t], y);
            if (nd->f[0] != 1.0f)
                for (int64_t i = 0; i < C; i++) y[i] *= nd->f[0];
        }
        return CMF_OK;
    }
    case CMF__OP_ROWS: {
        const int32_t *idx = cmf__cpu_i32(b);
        for (int64_t t = 0; t < n; t++) {
            if (idx[t] < 0 || idx[t] >= a->rows)
                return cmf__error(CMF_ERR_BOUNDS, "rows: index %d outside [0, %lld)", idx[t], (long long)a->rows);
            memmove(cmf__cpu_f32(d, t), cmf__cpu_f32(a, idx[t]), (size_t)C * 4);
        }
        return CMF_OK;
    }
    case CMF__OP_ADD:
    case CMF__OP_MUL:
    case CMF__OP_SIGMOID_MUL:
    case CMF__OP_GLU:
    case CMF__OP_SCALE:
    case CMF__OP_SOFTCAP:
    case CMF__OP_RMSNORM:
    case CMF__OP_ROPE:
        if (be->n_threads > 1 && n >= 2 && n * C >= CMF__CPU_SMALL_WORK / 4) {
            rows_job j = {be->k, nd, (n + be->n_threads * 2 - 1) / (be->n_threads * 2)};
            cmf__pool_run(be->pool, (int)((n + j.per - 1) / j.per), rows_task, &j);
        } else {
            rows_op(be->k, nd, 0, n);
        }
        return CMF_OK;
    case CMF__OP_MASK: {
        const int64_t w = nd->i[0];
        for (int64_t k = 0; k * w < C; k++) {
            if (nd->bits[k / 8] >> (k % 8) & 1) continue;
            for (int64_t t = 0; t < n; t++) memset(cmf__cpu_f32(d, t) + k * w, 0, (size_t)w * 4);
        }
        return CMF_OK;
    }
    default: return cmf__error(CMF_ERR_BACKEND, "cpu backend: op %s has no kernel", cmf__op_name(nd->op));
    }
}

/* ---- KV cache -------------------------------------------------------------------- */
/* Stores values x[0..cols) into a cache row of type t. */
static void kv_store(const cmf__cpu_kernels *k, cmf__etype t, uint8_t *row, const float *x, int64_t cols,
                     int64_t group)
{
    if (t == CMF__E_F32) {
        memcpy(row, x, (size_t)cols * 4);
    } else if (t == CMF__E_F16) {
        k->store_f16((uint16_t *)(void *)row, x, cols);
    } else { /* Q8: absmax scale per group */
        int8_t *q = (int8_t *)row;
        float *sc = (float *)(void *)(row + ((size_t)cols + 3) / 4 * 4);
        for (int64_t g0 = 0, gi = 0; g0 < cols; g0 += group, gi++) {
            int64_t g1 = g0 + group < cols ? g0 + group : cols;
            float amax = 0;
            for (int64_t i = g0; i < g1; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
            float s = amax / 127.0f, inv = s > 0 ? 1.0f / s : 0.0f;
            sc[gi] = s;
            for (int64_t i = g0; i < g1; i++) q[i] = (int8_t)lrintf(x[i] * inv);
        }
    }
}

/* Values [c0, c0 + n) of an f32 or q8 cache row as f32 (q8 dequantized
 * into out); f16 rows go straight to the f16 kernels. */
static const float *kv_load(cmf__etype t, const uint8_t *row, int64_t cols, int64_t group, int64_t c0, int64_t n,
                            float *out)
{
    if (t == CMF__E_F32) return (const float *)(const void *)row + c0;
    const int8_t *q = (const int8_t *)row;
    const float *sc = (const float *)(const void *)(row + ((size_t)cols + 3) / 4 * 4);
    for (int64_t i = 0; i < n; i++) out[i] = (float)q[c0 + i] * sc[(c0 + i) / group];
    return out;
}

/* The block table of a KV node's paged cache (NULL: not paged). */
static const int32_t *kv_table(const cmf__node *nd)
{
    const cmf__kv_pages *pg = cmf__node_kv_pages(nd);
    return pg ? cmf__cpu_i32(&pg->table) : NULL;
}

cmf_status cmf__cpu_op_kv_write(cpu_be *be, const cmf__node *nd)
{
    const cmf__ten *c = &nd->dst;
    const int32_t *pos = cmf__cpu_i32(&nd->b), *seq = cmf__cpu_i32(&nd->c);
    cmf__kv_map m;
    cmf_status st = cmf__kv_check(nd, pos, seq, kv_table(nd), &m);
    if (st) return st;
    for (int64_t t = 0; t < nd->a.rows; t++)
        kv_store(be->k, c->type, cmf__cpu_row(c, cmf__kv_row(&m, seq[t], pos[t])), cmf__cpu_f32(&nd->a, t), c->cols,
                 c->group > 0 ? c->group : c->cols);
    return CMF_OK;
}

/* ---- attention ----------------------------------------------------------------- */
/* The first position a query at pos sees (its window's start, or 0). */
static int64_t first_key(const cmf__attn_params *p, int64_t pos) { return cmf__attn_first_key(p->window, pos); }

/* The n raw scores of query head h, in place: scaled (and soft-capped), then
 * softmax weights, the head's sink (if any) in the denominator. */
static void softmax_scores(const cmf__attn_params *p, const cmf__cpu_kernels *k, int64_t h, float *row, int64_t n)
{
    float mx = -INFINITY;
    for (int64_t s = 0; s < n; s++) {
        float v = row[s] * p->scale;
        if (p->softcap > 0) v = p->softcap * tanhf(v / p->softcap);
        row[s] = v;
        if (v > mx) mx = v;
    }
    float sink = p->sinks ? p->sinks[h] : -INFINITY;
    if (sink > mx) mx = sink;
    double sum = (p->sinks ? exp((double)(sink - mx)) : 0.0) + k->exp_sum(row, n, mx);
    float inv = (float)(1.0 / sum);
    for (int64_t s = 0; s < n; s++) row[s] *= inv;
}

typedef struct at_job {
    cpu_be *be;
    const cmf__node *nd;
    const cmf__kv_map *m;
    int64_t span;
} at_job;

static void at_task(void *ctx, int task, int thread)
{
    at_job *j = ctx;
    const cmf__node *nd = j->nd;
    const cmf__attn_params *p = nd->ext;
    const cmf__cpu_kernels *k = j->be->k;
    const int32_t *pos = cmf__cpu_i32(&nd->b), *seq = cmf__cpu_i32(&nd->c);
    int64_t t = task / p->n_head, h = task % p->n_head;
    int64_t group = p->n_head / p->n_head_kv, kvh = h / group, hd = p->head_dim;
    const cmf__kv_map *m = j->m;
    const int64_t pt = pos[t], st = seq[t], lo = first_key(p, pt);
    float *sc = j->be->scratch + (size_t)thread * j->be->scratch_per, *tmp = sc + j->span;
    const cmf__ten *K = &p->k_cache, *V = &p->v_cache;
    const int64_t kg = K->group > 0 ? K->group : K->cols, vg = V->group > 0 ? V->group : V->cols;
    const float *q = cmf__cpu_f32(&nd->a, t) + h * hd;
    if (K->type == CMF__E_F16) /* raw scores of each run of consecutive cache rows */
        for (int64_t s = lo, run; s <= pt; s += run) {
            run = cmf__kv_run(m, s, pt);
            k->dot_f16_rows(q, (const uint16_t *)(const void *)cmf__cpu_row(K, cmf__kv_row(m, st, s)) + kvh * hd,
                            K->nb / 2, run, hd, sc + (s - lo));
        }
    else
        for (int64_t s = lo; s <= pt; s++)
            sc[s - lo] = k->dot_f32(
                q, kv_load(K->type, cmf__cpu_row(K, cmf__kv_row(m, st, s)), K->cols, kg, kvh * hd, hd, tmp), hd);
    softmax_scores(p, k, h, sc, pt - lo + 1);
    float *out = cmf__cpu_f32(&nd->dst, t) + h * hd;
    memset(out, 0, (size_t)hd * sizeof(float));
    if (V->type == CMF__E_F16) {
        for (int64_t s = lo, run; s <= pt; s += run) {
            run = cmf__kv_run(m, s, pt);
            k->axpy_f16_rows(out, sc + (s - lo),
                             (const uint16_t *)(const void *)cmf__cpu_row(V, cmf__kv_row(m, st, s)) + kvh * hd,
                             V->nb / 2, run, hd);
        }
        return;
    }
    for (int64_t s = lo; s <= pt; s++) {
        const uint8_t *row = cmf__cpu_row(V, cmf__kv_row(m, st, s));
        k->axpy(out, sc[s - lo], kv_load(V->type, row, V->cols, vg, kvh * hd, hd, tmp), hd);
    }
}

/* Prefill with an f16 cache: a task is one KV head and a block of up to
 * ATB_TOKENS consecutive tokens of one sequence, so each K/V row is read
 * once for the block's tokens times the query heads sharing it. Scores of
 * keys a query may not see (past its position, before its window) are
 * computed with the rest and then zeroed. */
#define ATB_TOKENS 8

typedef struct atb_job {
    cpu_be *be;
    const cmf__node *nd;
    const cmf__kv_map *m;
    const int64_t *blk; /* block b: tokens [blk[b], blk[b + 1]) */
    int64_t span;       /* widest key range of a block */
} atb_job;

static void atb_task(void *ctx, int task, int thread)
{
    atb_job *j = ctx;
    const cmf__node *nd = j->nd;
    const cmf__attn_params *p = nd->ext;
    const cmf__cpu_kernels *k = j->be->k;
    const int32_t *pos = cmf__cpu_i32(&nd->b), *seq = cmf__cpu_i32(&nd->c);
    const int64_t n_kv = p->n_head_kv, G = p->n_head / n_kv, hd = p->head_dim, kvh = task % n_kv;
    const int64_t t0 = j->blk[task / n_kv], t1 = j->blk[task / n_kv + 1], nq = (t1 - t0) * G;
    int64_t lo = INT64_MAX, hi = 0;
    for (int64_t t = t0; t < t1; t++) {
        int64_t l = first_key(p, pos[t]);
        if (l < lo) lo = l;
        if (pos[t] > hi) hi = pos[t];
    }
    const int64_t span = hi - lo + 1, st = seq[t0];
    const cmf__kv_map *m = j->m;
    float *sc = j->be->scratch + (size_t)thread * j->be->scratch_per; /* [nq][span] */
    float *qb = sc + (size_t)nq * (size_t)span, *ob = qb + nq * hd;  /* [nq][hd] each */
    for (int64_t t = t0; t < t1; t++)
        memcpy(qb + (t - t0) * G * hd, cmf__cpu_f32(&nd->a, t) + kvh * G * hd, (size_t)(G * hd) * sizeof(float));
    const cmf__ten *K = &p->k_cache, *V = &p->v_cache;
    for (int64_t s = lo, run; s <= hi; s += run) { /* each run of consecutive cache rows */
        run = cmf__kv_run(m, s, hi);
        cmf__kern_qk_f16(k, qb, nq, (const uint16_t *)(const void *)cmf__cpu_row(K, cmf__kv_row(m, st, s)) + kvh * hd,
                         K->nb / 2, run, hd, sc + (s - lo), span);
    }
    for (int64_t i = 0; i < nq; i++) {
        const int64_t t = t0 + i / G, l = first_key(p, pos[t]);
        float *row = sc + i * span;
        softmax_scores(p, k, kvh * G + i % G, row + (l - lo), pos[t] - l + 1);
        for (int64_t s = lo; s < l; s++) row[s - lo] = 0.0f;
        for (int64_t s = pos[t] + 1; s <= hi; s++) row[s - lo] = 0.0f;
    }
    memset(ob, 0, (size_t)(nq * hd) * sizeof(float));
    for (int64_t s = lo, run; s <= hi; s += run) {
        run = cmf__kv_run(m, s, hi);
        cmf__kern_pv_f16(k, ob, sc + (s - lo), span, nq,
                         (const uint16_t *)(const void *)cmf__cpu_row(V, cmf__kv_row(m, st, s)) + kvh * hd, V->nb / 2,
                         run, hd);
    }
    for (int64_t t = t0; t < t1; t++)
        memcpy(cmf__cpu_f32(&nd->dst, t) + kvh * G * hd, ob + (t - t0) * G * hd, (size_t)(G * hd) * sizeof(float));
}

/* Splits tokens into blocks of one sequence (at most ATB_TOKENS each) and
 * runs atb_task over (block, KV head). false when the batch is too small
 * to gain, or memory is short: the caller takes the per-query path. */
static bool attn_blocks(cpu_be *be, const cmf__node *nd, const cmf__kv_map *m)
{
    const cmf__attn_params *p = nd->ext;
    const int32_t *pos = cmf__cpu_i32(&nd->b), *seq = cmf__cpu_i32(&nd->c);
    const int64_t n = nd->a.rows;
    if (n < 4 || p->k_cache.type != CMF__E_F16 || p->v_cache.type != CMF__E_F16 || p->n_head % p->n_head_kv)
        return false;
    int64_t *blk = malloc(((size_t)n + 1) * sizeof *blk);
    if (!blk) return false;
    int64_t nb = 0, span = 0;
    for (int64_t t = 0; t < n;) {
        int64_t e = t + 1, lo = INT64_MAX, hi = 0;
        while (e < n && e - t < ATB_TOKENS && seq[e] == seq[t]) e++;
        for (int64_t u = t; u < e; u++) {
            int64_t l = first_key(p, pos[u]);
            if (l < lo) lo = l;
            if (pos[u] > hi) hi = pos[u];
        }
        if (hi - lo + 1 > span) span = hi - lo + 1;
        blk[nb++] = t;
        t = e;
    }
    blk[nb] = n;
    const int64_t G = p->n_head / p->n_head_kv, nq = ATB_TOKENS * G;
    bool ok = !cmf__cpu_scratch(be, (size_t)nq * ((size_t)span + 2 * (size_t)p->head_dim));
    if (ok) {
        atb_job j = {be, nd, m, blk, span};
        cmf__pool_run(be->pool, (int)(nb * p->n_head_kv), atb_task, &j);
    }
    free(blk);
    return ok;
}

cmf_status cmf__cpu_op_attn(cpu_be *be, const cmf__node *nd)
{
    const cmf__attn_params *p = nd->ext;
    const int32_t *pos = cmf__cpu_i32(&nd->b), *seq = cmf__cpu_i32(&nd->c);
    const int64_t n = nd->a.rows;
    cmf__kv_map m;
    cmf_status st = cmf__kv_check(nd, pos, seq, kv_table(nd), &m);
    if (st) return st;
    int64_t span = 0;
    for (int64_t t = 0; t < n; t++) {
        int64_t lo = first_key(p, pos[t]);
        if (pos[t] - lo + 1 > span) span = pos[t] - lo + 1;
    }
    if (!be->reference && attn_blocks(be, nd, &m)) return CMF_OK;
    if ((st = cmf__cpu_scratch(be, (size_t)span + (size_t)p->head_dim))) return st;
    at_job j = {be, nd, &m, span};
    int n_tasks = (int)(n * p->n_head);
    if (be->n_threads == 1 || n * p->n_head * span * p->head_dim < CMF__CPU_SMALL_WORK) {
        for (int t = 0; t < n_tasks; t++) at_task(&j, t, 0);
        return CMF_OK;
    }
    cmf__pool_run(be->pool, n_tasks, at_task, &j);
    return CMF_OK;
}

/* ---- fused ops ------------------------------------------------------------------ */
static void be_matvec(void *ctx, const cmf__qmat *w, const float *x, float *y)
{
    (void)cmf__cpu_matmul(ctx, w, x, w->cols, 1, y, w->rows); /* n = 1 takes no scratch: cannot fail */
}

static void be_matmul(void *ctx, const cmf__qmat *w, const float *x, int64_t xs, int64_t n, float *y, int64_t ys)
{
    cpu_be *be = ctx;
    if (cmf__cpu_matmul(be, w, x, xs, n, y, ys)) /* scratch reserved by the caller; rows one by one otherwise */
        for (int64_t t = 0; t < n; t++) be_matvec(be, w, x + t * xs, y + t * ys);
}

static int64_t moe_max_cols(const cmf__moe_layer *L)
{
    int64_t m = 0;
    for (int e = 0; e < L->route.n_expert; e++)
        if (L->experts[e].down->cols > m) m = L->experts[e].down->cols;
    if (L->shared && L->shared->down->cols > m) m = L->shared->down->cols;
    return m > L->hidden ? m : L->hidden;
}

cmf_status cmf__cpu_op_fused(cpu_be *be, const cmf__node *nd)
{
    cmf_status st;
    const int64_t n = nd->dst.rows;
    cmf__matvec mv = {be_matvec, be};
    if (nd->op == CMF__OP_MOE) {
        const cmf__moe_layer *L = nd->ext;
        if ((st = cmf__cpu_work(be, cmf__moe_batch_scratch_floats(L, n))) ||
            (st = cmf__cpu_scratch(be, (size_t)CMF__CPU_MM_BLOCK * (size_t)moe_max_cols(L))))
            return st;
        cmf__matmul mm = {be_matmul, be};
        cmf__moe_forward_batch(L, nd->bits, &mm, cmf__cpu_f32(&nd->a, 0), n, cmf__cpu_f32(&nd->dst, 0), be->work);
        return CMF_OK;
    }
    if (nd->op == CMF__OP_GDN) {
        const cmf__gdn_op *G = nd->ext;
        const int32_t *seq = cmf__cpu_i32(&nd->b);
        if ((st = cmf__cpu_work(be, cmf__gdn_scratch_floats(&G->dims)))) return st;
        const size_t conv = cmf__gdn_conv_floats(&G->dims);
        bool one_seq = n > 1 && seq[0] >= 0 && seq[0] < G->state.rows;
        for (int64_t t = 1; t < n && one_seq; t++) one_seq = seq[t] == seq[0];
        if (one_seq && n <= INT32_MAX) { /* a prompt of one sequence: the chunked form, 64 steps a block */
            float *row = cmf__cpu_f32(&G->state, seq[0]);
            cmf__gdn_state s = {row, row + conv};
            return cmf__gdn_prefill(&G->dims, &G->w, &s, &mv, (int)n, cmf__cpu_f32(&nd->a, 0),
                                    cmf__cpu_f32(&nd->dst, 0), 64);
        }
        for (int64_t t = 0; t < n; t++) {
            if (seq[t] < 0 || seq[t] >= G->state.rows)
                return cmf__error(CMF_ERR_BOUNDS, "gdn: token %lld: sequence %d of %lld", (long long)t, seq[t],
                                  (long long)G->state.rows);
            float *row = cmf__cpu_f32(&G->state, seq[t]);
            cmf__gdn_state s = {row, row + conv};
            cmf__gdn_step(&G->dims, &G->w, &s, &mv, cmf__cpu_f32(&nd->a, t), cmf__cpu_f32(&nd->dst, t), be->work);
        }
        return CMF_OK;
    }
    if (nd->op == CMF__OP_PLE) {
        const cmf__gemma4_ple *P = nd->ext;
        const int32_t *ids = cmf__cpu_i32(&nd->a);
        if ((st = cmf__cpu_work(be, cmf__gemma4_scratch_floats(P)))) return st;
        for (int64_t t = 0; t < n; t++)
            if ((st = cmf__gemma4_ple_inputs(P, &mv, ids[t], cmf__cpu_f32(&nd->b, t), cmf__cpu_f32(&nd->dst, t),
                                             be->work)))
                return st;
        return CMF_OK;
    }
    /* PLE_TAIL */
    const cmf__ple_tail_op *T = nd->ext;
    if ((st = cmf__cpu_work(be, cmf__gemma4_scratch_floats(T->ple)))) return st;
    for (int64_t t = 0; t < n; t++)
        cmf__gemma4_layer_tail(T->ple, &T->layer, &T->act, &mv, cmf__cpu_f32(&nd->a, t) + nd->i[0] * T->ple->per_layer,
                               cmf__cpu_f32(&nd->dst, t), be->work);
    return CMF_OK;
}
