/* forward.c — the engine: its backend buffers (KV cache, recurrent state,
 * activations, parameters, outputs), the forward graph of a chunk
 * (embedding, the per-layer residual wiring of the three norm placements
 * around each layer's mixer and FFN, the final norm and the output head
 * with scaling and soft-capping), and the batch loop. A chunk holds tokens
 * of several sequences; each token carries its slot and position, so one
 * pass over the weights serves all of them. Chunking and batching never
 * change a token's result. */
#include "engine/archs_engine.h"
#include "engine/engine.h"
#include "model/ext.h"
#include "util/arith.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

#define OUT_MAX CMF__ENGINE_OUT_MAX

cmf__engine_params cmf__engine_params_default(void)
{
    cmf__engine_params p = {0, 256, 1, CMF__E_F32, 0, false, NULL, 0, 0, 0};
    return p;
}

void cmf__engine_free(cmf__engine *e)
{
    if (!e) return;
    const cmf__arch *a = &e->model->arch;
    cmf__engine_invalidate(e);
    if (e->rope)
        for (int64_t i = 0; i < a->n_layer; i++) free(e->rope[i].inv_freq);
    free(e->rope);
    cmf__archs_engine_free(e);
    if (e->be) {
        cmf__buffer *bufs[] = {e->kv_buf, e->state_buf, e->act_buf, e->par_buf, e->out_buf, e->blend_buf, e->lora_buf};
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
            if (bufs[i]) e->be->ops->buffer_free(e->be, bufs[i]);
        if (e->owns_be) cmf__backend_free(e->be);
    }
    free(e->n_past);
    free(e->k_cache);
    free(e->v_cache);
    free(e->cap);
    free(e->paged);
    cmf__kvpool_free(&e->kv);
    free(e->seq_model);
    cmf__engine_blend_release(e);
    free(e->h_par);
    free(e->task.ffn); /* the task arrays' one block */
    free(e);
}

/* Byte offsets of consecutive tensors in one buffer, checked. */
typedef struct layout {
    uint64_t size;
    bool overflow;
} layout;

static size_t place(layout *ly, uint64_t rows, uint64_t row_bytes)
{
    uint64_t bytes, off = cmf__align_up(ly->size, 64);
    if (cmf__mul_overflow(rows, row_bytes, &bytes) || cmf__add_overflow(off, bytes, &ly->size)) ly->overflow = true;
    return (size_t)off;
}

static cmf_status alloc_buf(cmf__engine *e, layout *ly, unsigned flags, const char *what, cmf__buffer **out)
{
    if (ly->overflow || ly->size > SIZE_MAX)
        return cmf__error(CMF_ERR_NOMEM, "%s: %s: the size overflows", e->model->what, what);
    return e->be->ops->buffer_new(e->be, (size_t)ly->size, flags, what, out);
}

/* Activation tensors of the widest layer, n_batch rows each. */
static cmf_status alloc_activations(cmf__engine *e, int64_t ple_cols)
{
    const cmf__model *m = e->model;
    const int64_t B = e->n_batch, H = m->arch.hidden_size;
    int64_t qd = 1, kvd = 1, proj = 1, ffn = 1;
    for (int64_t l = 0; l < m->arch.n_layer; l++) {
        const cmf__layer_weights *lw = &m->layers[l];
        if (lw->q_dim > qd) qd = lw->q_dim;
        if (lw->kv_dim > kvd) kvd = lw->kv_dim;
        int64_t p = lw->wqkv.present ? lw->q_dim + 2 * lw->kv_dim : lw->q_gated ? 2 * lw->q_dim : 0;
        if (p > proj) proj = p;
        int64_t f = lw->w_gate_up.present ? 2 * lw->ffn_dim : lw->ffn_dim;
        if (f > ffn) ffn = f;
    }
    struct { cmf__ten *t; int64_t cols; } act[] = {
        {&e->x, H}, {&e->xn, H}, {&e->br, H}, {&e->proj, proj}, {&e->q, qd}, {&e->k, kvd}, {&e->v, kvd},
        {&e->att, qd}, {&e->gate, qd}, {&e->f1, ffn}, {&e->f2, ffn}, {&e->ple, ple_cols > 0 ? ple_cols : 1},
    };
    layout ly = {0, false};
    size_t off[sizeof act / sizeof *act];
    for (size_t i = 0; i < sizeof act / sizeof *act; i++) off[i] = place(&ly, (uint64_t)B, (uint64_t)act[i].cols * 4);
    cmf_status st = alloc_buf(e, &ly, 0, "activations", &e->act_buf);
    if (st) return st;
    for (size_t i = 0; i < sizeof act / sizeof *act; i++)
        *act[i].t = cmf__ten_make(e->act_buf, off[i], CMF__E_F32, B, act[i].cols);
    /* parameters: ids, positions, sequence slots, wanted rows (one set() per chunk), then the paged
     * cache's block table (its changed entries set before a chunk) */
    const uint64_t table = e->kv_paged ? (uint64_t)(e->kv.n_seq * e->kv.per_seq) * 4 : 0;
    ly = (layout){(uint64_t)B * 16 + table, false};
    if ((st = alloc_buf(e, &ly, CMF__BUF_HOST, "batch parameters", &e->par_buf))) return st;
    if (e->kv_paged)
        e->pages = (cmf__kv_pages){cmf__ten_make(e->par_buf, (size_t)B * 16, CMF__E_I32, e->kv.n_seq, e->kv.per_seq),
                                   e->kv.block};
    e->ids = cmf__ten_make(e->par_buf, 0, CMF__E_I32, B, 1);
    e->pos = cmf__ten_make(e->par_buf, (size_t)B * 4, CMF__E_I32, B, 1);
    e->seq = cmf__ten_make(e->par_buf, (size_t)B * 8, CMF__E_I32, B, 1);
    e->out_idx = cmf__ten_make(e->par_buf, (size_t)B * 12, CMF__E_I32, B, 1);
    e->h_par = malloc((size_t)B * 16);
    if (!e->h_par) return cmf__error(CMF_ERR_NOMEM, "engine: out of memory for the batch parameters");
    return CMF_OK;
}

/* The output rows (final hidden and logits of the wanted tokens); grown on
 * demand, which forgets the graphs that point at the old buffer. */
static cmf_status ensure_out(cmf__engine *e, int64_t rows)
{
    if (rows <= e->out_cap) return CMF_OK;
    const int64_t H = e->model->arch.hidden_size, V = e->model->arch.vocab_size;
    layout ly = {0, false};
    size_t oh = place(&ly, (uint64_t)rows, (uint64_t)H * 4), ol = place(&ly, (uint64_t)rows, (uint64_t)V * 4);
    cmf__buffer *buf = NULL;
    cmf_status st = alloc_buf(e, &ly, 0, "logits", &buf);
    if (st) return st;
    cmf__engine_invalidate(e);
    if (e->out_buf) e->be->ops->buffer_free(e->be, e->out_buf);
    e->out_buf = buf;
    e->hout = cmf__ten_make(buf, oh, CMF__E_F32, rows, H);
    e->logits = cmf__ten_make(buf, ol, CMF__E_F32, rows, V);
    e->out_cap = rows;
    return CMF_OK;
}

/* Which layers keep a ring per sequence (sliding ones whose window is well
 * inside the context) and which a paged cache; the block pool's size from
 * the budget (and n_ctx from it when asked). */
static cmf_status plan_kv(cmf__engine *e, const cmf__engine_params *p)
{
    const cmf__model *m = e->model;
    const cmf__arch *a = &m->arch;
    const int64_t block = p->kv_block > 0 ? p->kv_block : CMF__KV_BLOCK;
    uint64_t ring_per_seq = 0, paged_per_pos = 0;
    bool recurrent = false, ring = false;
    for (int64_t i = 0; i < a->n_layer; i++) {
        const cmf__layer_weights *lw = &m->layers[i];
        if (lw->kind == CMF__LAYER_LINEAR) {
            recurrent = true;
            continue;
        }
        uint64_t rb2 = 2 * (uint64_t)cmf__etype_row_bytes(e->kv_type, lw->kv_dim, lw->head_dim);
        if (lw->kind == CMF__LAYER_SLIDING && a->sliding_window > 0 && a->sliding_window < e->n_ctx - e->n_batch + 1) {
            e->cap[i] = a->sliding_window + e->n_batch - 1;
            ring_per_seq += rb2 * (uint64_t)e->cap[i];
            ring = true;
        } else {
            e->paged[i] = e->kv_paged = true;
            paged_per_pos += rb2;
        }
    }
    e->kv_share = e->kv_paged && !ring && !recurrent;
    /* padding (engine.h): the hidden sequence's slot, and blocks for its positions held for good */
    const int want = p->buckets ? p->buckets : strcmp(e->be->ops->name, "cpu") ? 1 : -1;
    const int64_t pad_pos = e->n_ctx < CMF__ENGINE_PAD ? e->n_ctx : CMF__ENGINE_PAD;
    const bool pad = want > 0 && e->kv_paged && !recurrent;
    e->n_slot = e->n_seq + (pad ? 1 : 0);
    const uint64_t ring_bytes = ring_per_seq * (uint64_t)e->n_slot;
    if (!e->kv_paged) return CMF_OK;
    int64_t n_blocks = 0;
    if (p->kv_budget > 0) {
        uint64_t per_block = paged_per_pos * (uint64_t)block;
        n_blocks = (uint64_t)p->kv_budget > ring_bytes ? (int64_t)(((uint64_t)p->kv_budget - ring_bytes) / per_block) : 0;
        if (n_blocks > INT32_MAX) n_blocks = INT32_MAX;
        if (n_blocks < 1)
            return cmf__error(CMF_ERR_ARG,
                              "%s: a KV budget of %lld bytes holds no block of %lld positions (%llu bytes a block, %llu "
                              "in sliding-window rings for %lld sequences)",
                              m->what, (long long)p->kv_budget, (long long)block, (unsigned long long)per_block,
                              (unsigned long long)ring_bytes, (long long)e->n_seq);
        if (p->n_ctx <= 0 && n_blocks * block < e->n_ctx) e->n_ctx = n_blocks * block;
        if (n_blocks * block < e->n_ctx)
            return cmf__error(CMF_ERR_ARG, "%s: a KV budget of %lld bytes holds %lld positions, fewer than the context of %lld",
                              m->what, (long long)p->kv_budget, (long long)(n_blocks * block), (long long)e->n_ctx);
    }
    const int64_t per_seq = (e->n_ctx + block - 1) / block;
    /* no more blocks than every sequence filling its context holds: a budget past that would sit unused */
    if (p->kv_budget <= 0 || n_blocks > per_seq * e->n_seq) n_blocks = per_seq * e->n_seq;
    e->pad_blocks = pad ? (pad_pos + block - 1) / block : 0;
    if (n_blocks > INT32_MAX - e->pad_blocks) n_blocks = INT32_MAX - e->pad_blocks;
    for (int64_t i = 0; i < a->n_layer; i++)
        if (e->paged[i]) e->cap[i] = per_seq * block;
    cmf_status st = cmf__kvpool_init(&e->kv, n_blocks + e->pad_blocks, block, per_seq, e->n_slot);
    if (!st && pad) cmf__kvpool_grow(&e->kv, e->n_seq, pad_pos);
    return st;
}

static cmf_status alloc_state(cmf__engine *e, size_t state_floats)
{
    const cmf__model *m = e->model;
    const int64_t L = m->arch.n_layer;
    layout ly = {0, false};
    for (int64_t i = 0; i < L; i++) {
        const cmf__layer_weights *lw = &m->layers[i];
        if (lw->kind == CMF__LAYER_LINEAR) continue;
        uint64_t rows;
        if (e->paged[i]) rows = (uint64_t)(e->kv.n_blocks * e->kv.block);
        else if (cmf__mul_overflow((uint64_t)e->n_slot, (uint64_t)e->cap[i], &rows)) ly.overflow = true;
        size_t rb = cmf__etype_row_bytes(e->kv_type, lw->kv_dim, lw->head_dim);
        size_t ko = place(&ly, rows, rb), vo = place(&ly, rows, rb);
        e->k_cache[i] = (cmf__ten){NULL, ko, e->kv_type, (int64_t)rows, lw->kv_dim, rb, lw->head_dim};
        e->v_cache[i] = (cmf__ten){NULL, vo, e->kv_type, (int64_t)rows, lw->kv_dim, rb, lw->head_dim};
    }
    cmf_status st = alloc_buf(e, &ly, 0, "KV cache", &e->kv_buf);
    if (st) return st;
    for (int64_t i = 0; i < L; i++) e->k_cache[i].buf = e->v_cache[i].buf = e->kv_buf;
    if (state_floats) {
        layout ls = {0, false};
        place(&ls, (uint64_t)e->n_slot, (uint64_t)state_floats * 4);
        e->state_row = state_floats * 4;
        if ((st = alloc_buf(e, &ls, 0, "linear-attention state", &e->state_buf))) return st;
        cmf__archs_place_state(e);
    }
    return CMF_OK;
}

static cmf_status graph_for(cmf__engine *e, int64_t n, int64_t n_out, int n_grp, const cmf__engine_group *grp,
                            const cmf__graph **out);

cmf_status cmf__engine_new(const cmf__model *m, const cmf__engine_params *pp, cmf__engine **out)
{
    *out = NULL;
    cmf__engine_params p = pp ? *pp : cmf__engine_params_default();
    const cmf__arch *a = &m->arch;
    if (p.n_seq < 0 || p.n_seq > 4096 || p.n_batch < 0 || p.n_ctx < 0)
        return cmf__error(CMF_ERR_ARG, "engine: n_seq %lld (1..4096), n_batch %lld, n_ctx %lld", (long long)p.n_seq,
                          (long long)p.n_batch, (long long)p.n_ctx);
    if (p.kv_type != CMF__E_F32 && p.kv_type != CMF__E_F16 && p.kv_type != CMF__E_Q8)
        return cmf__error(CMF_ERR_ARG, "engine: KV cache type %d is not f32, f16 or q8", (int)p.kv_type);
    cmf__engine *e = calloc(1, sizeof *e);
    if (!e) return cmf__error(CMF_ERR_NOMEM, "engine: out of memory");
    e->model = e->root = m;
    e->n_ctx = p.n_ctx > 0 && p.n_ctx < a->max_pos ? p.n_ctx : a->max_pos;
    e->n_batch = p.n_batch > 0 ? p.n_batch : 256;
    e->n_seq = e->n_slot = p.n_seq > 0 ? p.n_seq : 1;
    if (e->n_batch > e->n_ctx * e->n_seq) e->n_batch = e->n_ctx * e->n_seq;
    e->kv_type = p.kv_type;
    cmf_status st = CMF_OK;
    e->be = p.backend;
    if (!e->be) {
        e->be = cmf__cpu_backend_new(p.n_threads, p.reference);
        if (!e->be) {
            free(e);
            return CMF_ERR_BACKEND;
        }
        e->owns_be = true;
    }
    const int64_t L = a->n_layer;
    e->n_past = calloc((size_t)e->n_seq + 1, sizeof *e->n_past); /* + the hidden sequence's */
    e->rope = calloc((size_t)L, sizeof *e->rope);
    e->k_cache = calloc((size_t)L, sizeof *e->k_cache);
    e->v_cache = calloc((size_t)L, sizeof *e->v_cache);
    e->cap = calloc((size_t)L, sizeof *e->cap);
    e->paged = calloc((size_t)L, sizeof *e->paged);
    e->seq_model = calloc((size_t)e->n_seq + 1, sizeof *e->seq_model);
    e->task.ffn = calloc((size_t)L, 3 * sizeof(const uint8_t *) + sizeof(bool)); /* one block for the task arrays */
    if (!e->n_past || !e->rope || !e->k_cache || !e->v_cache || !e->cap || !e->paged || !e->seq_model || !e->task.ffn) {
        st = cmf__error(CMF_ERR_NOMEM, "engine: out of memory for %lld layers", (long long)L);
        goto fail;
    }
    e->task.heads = e->task.ffn + L;
    e->task.experts = e->task.heads + L;
    e->task.skip = (bool *)(e->task.experts + L);
    size_t state_floats = 0;
    int64_t ple_cols = 0;
    if ((st = cmf__archs_engine_init(e, &state_floats, &ple_cols))) goto fail;
    for (int64_t i = 0; i < L; i++) {
        const cmf__layer_weights *lw = &m->layers[i];
        if (lw->kind != CMF__LAYER_LINEAR && a->layer_rope[i]) {
            const cmf__rope_cfg *rc = lw->kind == CMF__LAYER_SLIDING ? &a->rope_local : &a->rope_full;
            if ((st = cmf__rope_build(rc, lw->head_dim, (double)a->max_pos, &e->rope[i]))) goto fail;
        }
    }
    const cmf__graph *decode_graph;
    /* a step of every sequence's next token wants n_seq rows: one chunk holds them */
    e->out_max = e->n_seq > OUT_MAX ? (e->n_seq < e->n_batch ? e->n_seq : e->n_batch) : OUT_MAX;
    if (p.kv_budget < 0 || p.kv_block < 0 || p.kv_block > 4096) {
        st = cmf__error(CMF_ERR_ARG, "engine: KV budget %lld, block %lld (1..4096)", (long long)p.kv_budget,
                        (long long)p.kv_block);
        goto fail;
    }
    if ((st = plan_kv(e, &p)) || (st = alloc_state(e, state_floats)) || (st = alloc_activations(e, ple_cols)) ||
        (st = ensure_out(e, e->n_seq < e->out_max ? e->n_seq : e->out_max)) ||
        /* the decode graph built now: a backend refuses what it cannot run here */
        (st = graph_for(e, 1, 1, 1, &(cmf__engine_group){m, false, 1, 1}, &decode_graph)))
        goto fail;
    *out = e;
    return CMF_OK;
fail:
    cmf__engine_free(e);
    return st;
}

int64_t cmf__engine_kv_bytes_per_token(const cmf__engine *e)
{
    int64_t bytes = 0;
    for (int64_t i = 0; i < e->model->arch.n_layer; i++)
        if (e->cap[i] > 0) bytes += 2 * (int64_t)e->k_cache[i].nb;
    return bytes;
}

int64_t cmf__engine_kv_bytes(const cmf__engine *e)
{
    int64_t bytes = 0;
    for (int64_t i = 0; i < e->model->arch.n_layer; i++)
        if (e->cap[i] > 0) bytes += 2 * (int64_t)e->k_cache[i].nb * e->k_cache[i].rows;
    return bytes;
}

void cmf__engine_kv_usage(const cmf__engine *e, int64_t *block, int64_t *used, int64_t *total)
{
    *block = e->kv_paged ? e->kv.block : 0;
    *used = e->kv_paged ? cmf__kvpool_used(&e->kv) - e->pad_blocks : 0; /* the sequences' own */
    *total = e->kv_paged ? e->kv.n_blocks - e->pad_blocks : 0;
}

int64_t cmf__engine_kv_avail(const cmf__engine *e) { return e->kv_paged ? cmf__kvpool_avail(&e->kv) : INT64_MAX; }

int64_t cmf__engine_kv_need(const cmf__engine *e, int64_t seq, int64_t n)
{
    return e->kv_paged ? cmf__kvpool_need(&e->kv, seq, e->n_past[seq] + n) : 0;
}

int64_t cmf__engine_kv_attach(cmf__engine *e, int64_t seq, const uint64_t *key, int64_t n)
{
    if (!e->kv_share || e->n_past[seq] != 0) return 0;
    e->n_past[seq] = cmf__kvpool_attach(&e->kv, seq, key, n) * e->kv.block;
    return e->n_past[seq];
}

void cmf__engine_kv_publish(cmf__engine *e, int64_t seq, const uint64_t *key, int64_t n)
{
    if (e->kv_share && n * e->kv.block <= e->n_past[seq]) cmf__kvpool_publish(&e->kv, seq, key, n);
}

cmf_status cmf__engine_truncate(cmf__engine *e, int64_t n_keep) { return cmf__engine_truncate_seq(e, 0, n_keep); }

cmf_status cmf__engine_truncate_seq(cmf__engine *e, int64_t seq, int64_t n_keep)
{
    if (seq < 0 || seq >= e->n_seq)
        return cmf__error(CMF_ERR_ARG, "truncate: sequence %lld outside [0, %lld)", (long long)seq, (long long)e->n_seq);
    const int64_t n_past = e->n_past[seq];
    if (n_keep < 0 || n_keep > n_past)
        return cmf__error(CMF_ERR_ARG, "truncate: %lld is outside [0, %lld]", (long long)n_keep, (long long)n_past);
    if (n_keep == n_past) return CMF_OK;
    /* a shared block is never written: the kept prefix ends where it starts */
    if (e->kv_paged && n_keep % e->kv.block && cmf__kvpool_shared(&e->kv, seq, n_keep))
        n_keep -= n_keep % e->kv.block;
    if (n_keep == 0) return cmf__engine_reset_seq(e, seq);
    const cmf__arch *a = &e->model->arch;
    for (int64_t i = 0; i < a->n_layer; i++) {
        if (e->model->layers[i].kind == CMF__LAYER_LINEAR)
            return cmf__error(CMF_ERR_UNSUPPORTED, "truncate: layer %lld keeps recurrent state", (long long)i);
        /* a ring has overwritten positions < n_past - cap; the kept prefix's
         * next query needs positions >= n_keep - window + 1 */
        if (e->cap[i] < e->n_ctx && n_past - e->cap[i] > n_keep - a->sliding_window)
            return cmf__error(CMF_ERR_UNSUPPORTED, "truncate: sliding layer %lld no longer holds the window",
                              (long long)i);
    }
    e->n_past[seq] = n_keep;
    if (e->kv_paged) {
        cmf__kvpool_shrink(&e->kv, seq, n_keep);
        cmf__kvpool_unhash(&e->kv, seq, n_keep); /* the partial block is written from n_keep on */
    }
    return CMF_OK;
}

/* ---- the graph ----------------------------------------------------------------- */
static cmf_status push_norm(cmf__engine *e, cmf__graph *g, cmf__ten x, cmf__ten y, const float *w)
{
    const cmf__arch *a = &e->model->arch;
    return cmf__graph_add(g, (cmf__node){.op = CMF__OP_RMSNORM, .dst = y, .a = x, .v = w, .f = {(float)a->rms_norm_eps},
                               .i = {x.cols, a->norm_style == CMF__NORM_GEMMA}});
}

/* Layer l's mixer and FFN with their residuals over chunk rows [r0, r0+c),
 * bound by e->model. */
static cmf_status build_layer(cmf__engine *e, cmf__graph *g, int64_t l, int64_t r0, int64_t c)
{
    const cmf__model *m = e->model;
    const cmf__layer_weights *lw = &m->layers[l];
    const float rm = (float)m->arch.residual_multiplier;
    cmf__ten x = cmf__ten_rows(e->x, r0, c), xn = cmf__ten_rows(e->xn, r0, c), br = cmf__ten_rows(e->br, r0, c);
    cmf_status st;
    e->row0 = r0;
    /* token mixer */
    cmf__ten in = x;
    if (lw->attn_in_norm.v) {
        if ((st = push_norm(e, g, x, xn, lw->attn_in_norm.v))) return st;
        in = xn;
    }
    st = lw->kind == CMF__LAYER_LINEAR ? cmf__archs_build_mixer(e, g, l, in, br) : cmf__build_attention(e, g, l, in, br);
    if (st || (lw->attn_out_norm.v && (st = push_norm(e, g, br, br, lw->attn_out_norm.v))) ||
        (st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_ADD, .dst = x, .a = x, .b = br, .f = {rm}})))
        return st;
    /* feed-forward */
    in = x;
    if (lw->ffn_in_norm.v) {
        if ((st = push_norm(e, g, x, xn, lw->ffn_in_norm.v))) return st;
        in = xn;
    }
    st = lw->has_router ? cmf__archs_build_ffn(e, g, l, in, br) : cmf__build_ffn_dense(e, g, l, in, br);
    if (st || (lw->ffn_out_norm.v && (st = push_norm(e, g, br, br, lw->ffn_out_norm.v))) ||
        (st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_ADD, .dst = x, .a = x, .b = br, .f = {rm}})) ||
        (st = cmf__archs_build_layer_end(e, g, l, c))) /* per-layer input block, layer_scalar (gemma4) */
        return st;
    return CMF_OK;
}

/* A binding other than the engine's may run layer l only where the op
 * descriptors built from the engine's binding (DeltaNet weights, Gemma-4
 * per-layer tail) are not part of what differs; l = -1: the embedding
 * side (Gemma-4 per-layer inputs). */
static cmf_status check_foreign(const cmf__engine *e, const cmf__model *v, int64_t l)
{
    if (cmf__model_same_at(v, e->model, l)) return CMF_OK;
    const cmf__model_ext *M = cmf__model_ext_of(e->model);
    const cmf__layer_ext *A = l >= 0 ? cmf__model_layer_ext(e->model, l) : NULL;
    if ((l < 0 && M && M->has_ple) || (A && (A->gdn || A->has_g4)))
        return cmf__error(CMF_ERR_UNSUPPORTED,
                          "%s: skill '%s' replaces tensors of %s%lld, which has per-session op state: give every "
                          "sequence of the session that skill (cmf_session_set_skill)",
                          e->model->what, v->skill, l < 0 ? "the embedding side" : "layer ", (long long)(l < 0 ? 0 : l));
    return CMF_OK;
}

/* True when groups a and b bind the same tensors at layer l (-1: outside
 * the layers); a blend group binds what all its members agree on. */
static bool grp_same(const cmf__engine *e, const cmf__engine_group *a, const cmf__engine_group *b, int64_t l)
{
    if (a->blend && b->blend) return true; /* one blend per engine */
    if (b->blend) {
        const cmf__engine_group *t = a;
        a = b;
        b = t;
    }
    if (!a->blend) return cmf__model_same_at(a->m, b->m, l);
    for (int i = 0; i < e->blend.n; i++)
        if (!cmf__model_same_at(e->blend.m[i], b->m, l)) return false;
    return true;
}

/* True when every group binds the same tensors at layer l (-1: outside the layers). */
static bool groups_agree(const cmf__engine *e, int n_grp, const cmf__engine_group *grp, int64_t l)
{
    for (int i = 1; i < n_grp; i++)
        if (!grp_same(e, &grp[0], &grp[i], l)) return false;
    return true;
}

/* The graph of a chunk of n tokens ordered by group (grp[i].n_tok tokens
 * of binding grp[i].m, their wanted rows likewise). A layer where the
 * groups' skills agree runs once over all rows, bound by the first group;
 * one where they differ runs once per group over that group's rows. */
static cmf_status build_groups(cmf__engine *e, int64_t n, int64_t n_out, int n_grp, const cmf__engine_group *grp,
                               cmf__graph *g)
{
    const cmf__arch *a = &e->model->arch;
    const cmf__model *m0 = e->model;
    cmf__ten x = cmf__ten_rows(e->x, 0, n);
    cmf__ten h = cmf__ten_rows(e->hout, 0, n_out), lg = cmf__ten_rows(e->logits, 0, n_out);
    cmf_status st = CMF_OK;
    bool outer_once = groups_agree(e, n_grp, grp, -1);
    for (int i = 0; i < (outer_once ? 1 : n_grp) && !st; i++)
        st = check_foreign(e, grp[i].m, -1);
    for (int i = 0, r = 0; i < (outer_once ? 1 : n_grp) && !st; r += (int)grp[i].n_tok, i++) {
        int64_t r0 = outer_once ? 0 : r, c = outer_once ? n : grp[i].n_tok;
        e->model = grp[i].m;
        e->blending = grp[i].blend;
        st = cmf__build_weighted(e, g, -1, (cmf__node){.op = CMF__OP_GET_ROWS, .dst = cmf__ten_rows(e->x, r0, c),
                                                       .a = cmf__ten_rows(e->ids, r0, c), .w = &grp[i].m->embed.q,
                                                       .f = {(float)a->embedding_multiplier}});
        e->model = m0;
    }
    if (st || (st = cmf__archs_build_embed(e, g, n))) goto done; /* per-layer inputs (gemma4) */
    for (int64_t l = 0; l < a->n_layer && !st; l++) {
        if (e->task.mask && e->task.skip[l]) continue; /* layer gate clear (spec §5): x passes unchanged */
        bool once = groups_agree(e, n_grp, grp, l);
        for (int i = 0, r = 0; i < (once ? 1 : n_grp) && !st; r += (int)grp[i].n_tok, i++) {
            if ((st = check_foreign(e, grp[i].m, l))) break;
            e->model = grp[i].m; /* every binding shares the arch and the layer shapes */
            e->blending = grp[i].blend;
            e->grp = i;
            st = build_layer(e, g, l, once ? 0 : r, once ? n : grp[i].n_tok);
            e->model = m0;
        }
    }
    e->row0 = 0;
    e->grp = 0;
    if (st || n_out == 0) goto done;
    if ((st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_ROWS, .dst = h, .a = x, .b = cmf__ten_rows(e->out_idx, 0, n_out)})))
        goto done;
    for (int i = 0, r = 0; i < (outer_once ? 1 : n_grp) && !st; r += (int)grp[i].n_out, i++) {
        int64_t r0 = outer_once ? 0 : r, c = outer_once ? n_out : grp[i].n_out;
        if (c == 0) continue;
        cmf__ten hr = cmf__ten_rows(h, r0, c), lr = cmf__ten_rows(lg, r0, c);
        e->model = grp[i].m;
        e->blending = grp[i].blend;
        if (!(st = push_norm(e, g, hr, hr, grp[i].m->final_norm.v)))
            st = cmf__build_weighted(e, g, -1,
                                     (cmf__node){.op = CMF__OP_MATMUL, .dst = lr, .a = hr, .w = &grp[i].m->lm_head.q});
        e->model = m0;
    }
done:
    e->blending = false;
    e->row0 = 0;
    e->grp = 0;
    if (st || n_out == 0) return st;
    if (a->logits_scaling != 1.0 || a->final_softcap > 0)
        return cmf__graph_add(g, (cmf__node){.op = CMF__OP_SOFTCAP, .dst = lg, .a = lg,
                                   .f = {(float)(1.0 / a->logits_scaling), (float)a->final_softcap}});
    return CMF_OK;
}

static bool same_key(const cmf__engine_graph *s, int64_t n, int64_t n_out, int n_grp, const cmf__engine_group *grp)
{
    if (s->n_tok != n || s->n_out != n_out || s->n_grp != n_grp) return false;
    for (int i = 0; i < n_grp; i++)
        if (s->grp[i].m != grp[i].m || s->grp[i].blend != grp[i].blend || s->grp[i].n_tok != grp[i].n_tok ||
            s->grp[i].n_out != grp[i].n_out)
            return false;
    return true;
}

/* The graph for (n, n_out, groups): cached, else built, checked and prepared. */
static cmf_status graph_for(cmf__engine *e, int64_t n, int64_t n_out, int n_grp, const cmf__engine_group *grp,
                            const cmf__graph **out)
{
    for (int i = 0; i < CMF__ENGINE_GRAPHS; i++)
        if (same_key(&e->graphs[i], n, n_out, n_grp, grp)) {
            e->graph_hits++;
            e->graphs[i].used = ++e->graph_clock;
            *out = &e->graphs[i].g;
            return CMF_OK;
        }
    e->graph_misses++;
    cmf__engine_graph *slot = &e->graphs[0]; /* an unused one (used 0), else the least recently used */
    for (int i = 1; i < CMF__ENGINE_GRAPHS; i++)
        if (e->graphs[i].used < slot->used) slot = &e->graphs[i];
    slot->used = 0;
    cmf__graph_free(&slot->g);
    free(slot->attn);
    slot->n_tok = slot->n_out = 0;
    slot->n_grp = 0;
    slot->attn = calloc((size_t)e->root->arch.n_layer * CMF__ENGINE_GROUPS, sizeof *slot->attn);
    if (!slot->attn) return cmf__error(CMF_ERR_NOMEM, "engine: out of memory for a graph's attention descriptors");
    e->attn = slot->attn;
    cmf_status st = build_groups(e, n, n_out, n_grp, grp, &slot->g);
    e->attn = NULL;
    if (!st) st = cmf__graph_check(&slot->g);
    if (!st) st = e->be->ops->prepare(e->be, &slot->g);
    if (st) {
        cmf__graph_free(&slot->g);
        return st;
    }
    slot->n_tok = n;
    slot->n_out = n_out;
    slot->n_grp = n_grp;
    slot->used = ++e->graph_clock;
    memcpy(slot->grp, grp, (size_t)n_grp * sizeof *grp);
    *out = &slot->g;
    return CMF_OK;
}

/* ---- running a batch -------------------------------------------------------------- */
/* The paged cache's blocks for need[s] more positions of every sequence,
 * all or none (CMF_ERR_CONTEXT when too few are left); the partial block a
 * sequence writes into leaves the prefix cache. */
static cmf_status take_blocks(cmf__engine *e, const int64_t *need)
{
    int64_t want = 0;
    for (int64_t s = 0; s < e->n_seq; s++)
        if (need[s]) want += cmf__kvpool_need(&e->kv, s, e->n_past[s] + need[s]);
    if (want > cmf__kvpool_avail(&e->kv))
        return cmf__error(CMF_ERR_CONTEXT, "KV cache full: the batch needs %lld blocks of %lld positions, %lld are free",
                          (long long)want, (long long)e->kv.block, (long long)cmf__kvpool_avail(&e->kv));
    for (int64_t s = 0; s < e->n_seq; s++)
        if (need[s]) {
            if (e->n_past[s] % e->kv.block) cmf__kvpool_unhash(&e->kv, s, e->n_past[s]);
            cmf__kvpool_grow(&e->kv, s, e->n_past[s] + need[s]);
        }
    return CMF_OK;
}

/* The block table's entries changed since the last chunk, to the device. */
static cmf_status upload_table(cmf__engine *e)
{
    cmf__kvpool *kp = &e->kv;
    if (!e->kv_paged || kp->dirty_lo >= kp->dirty_hi) return CMF_OK;
    cmf_status st = e->be->ops->set(e->be, e->par_buf, e->pages.table.off + (size_t)kp->dirty_lo * 4,
                                    kp->table + kp->dirty_lo, (size_t)(kp->dirty_hi - kp->dirty_lo) * 4);
    if (!st) kp->dirty_lo = kp->dirty_hi = 0;
    return st;
}

int64_t cmf__engine_bucket(int64_t n)
{
    static const int64_t small[] = {8, 12, 16, 24, 32, 48, 64, 96, 128};
    if (n <= 4) return n;
    for (size_t i = 0; i < sizeof small / sizeof *small; i++)
        if (n <= small[i]) return small[i];
    return (n + 63) / 64 * 64;
}

/* Rows c.. of a one-group chunk of c tokens (n_out wanted) up to its
 * bucket, as tokens of the hidden sequence (engine.h); the group's and
 * the chunk's counts grow to match. No padding where the bucket passes
 * the batch or the logits rows, or needs more positions than the hidden
 * sequence holds. */
static void pad_chunk(cmf__engine *e, int64_t *c, int64_t *n_out, cmf__engine_group *g)
{
    const int64_t B = e->n_batch, cb = cmf__engine_bucket(*c);
    int64_t ob = cmf__engine_bucket(*n_out);
    if (ob > cb) ob = cb;
    if (!e->pad_blocks || cb > B || cb - *c > e->pad_blocks * e->kv.block || ob > e->out_max) return;
    int32_t *ids = e->h_par, *pos = ids + B, *seq = pos + B, *oi = seq + B;
    for (int64_t r = *c; r < cb; r++) {
        ids[r] = 0;
        pos[r] = (int32_t)(r - *c);
        seq[r] = (int32_t)e->n_seq;
    }
    for (int64_t o = *n_out; o < ob; o++) oi[o] = 0; /* rows computed, never read */
    g->n_tok += cb - *c, g->n_out += ob - *n_out;
    *c = cb, *n_out = ob;
}

static bool wanted(const cmf__batch *b, int64_t t, const float *logits)
{
    return logits && (b->want ? b->want[t] : t == b->n - 1);
}

cmf_status cmf__engine_decode(cmf__engine *e, const cmf__batch *b, float *logits)
{
    const int64_t V = e->model->arch.vocab_size;
    if (!b || b->n <= 0 || !b->tok) return cmf__error(CMF_ERR_ARG, "forward: no tokens");
    int64_t *need = calloc((size_t)e->n_seq, sizeof *need);
    if (!need) return cmf__error(CMF_ERR_NOMEM, "forward: out of memory");
    cmf_status st = CMF_OK;
    for (int64_t t = 0; t < b->n && !st; t++) { /* slots and room first, then ids: nothing is fed on error */
        int32_t s = b->seq ? b->seq[t] : 0;
        if (s < 0 || s >= e->n_seq)
            st = cmf__error(CMF_ERR_ARG, "token %lld: sequence %d outside [0, %lld)", (long long)t, s,
                            (long long)e->n_seq);
        else if (e->n_past[s] + ++need[s] > e->n_ctx)
            st = cmf__error(CMF_ERR_CONTEXT, "context full: sequence %d has %lld tokens in the cache + %lld new > n_ctx %lld",
                            s, (long long)e->n_past[s], (long long)need[s], (long long)e->n_ctx);
    }
    for (int64_t t = 0; t < b->n && !st; t++)
        if (b->tok[t] < 0 || b->tok[t] >= V)
            st = cmf__error(CMF_ERR_ARG, "token %lld: id %d out of range [0, %lld)", (long long)t, b->tok[t],
                            (long long)V);
    if (!st && e->kv_paged) st = take_blocks(e, need);
    free(need);
    if (st) return st;
    const int64_t B = e->n_batch;
    int32_t *ids = e->h_par, *pos = ids + B, *seq = pos + B, *oi = seq + B;
    int64_t written = 0;
    /* per chunk row: its group and its wanted-row rank in token order (-1: not wanted) */
    int32_t *row_grp = malloc((size_t)B * 3 * sizeof(int32_t) + 4);
    if (!row_grp) return cmf__error(CMF_ERR_NOMEM, "forward: out of memory");
    int32_t *rank = row_grp + B, *out_rank = rank + B; /* out_rank: a wanted row's rank in token order */
    for (int64_t done = 0; done < b->n;) {
        int64_t c = 0, n_out = 0;
        int n_grp = 0;
        cmf__engine_group grp[CMF__ENGINE_GROUPS];
        /* a chunk ends at n_batch tokens, out_max wanted rows or a binding past the group limit */
        while (done + c < b->n && c < B && (n_out < e->out_max || !wanted(b, done + c, logits))) {
            int64_t t = done + c;
            int32_t s = b->seq ? b->seq[t] : 0;
            const cmf__model *v = e->seq_model[s] ? e->seq_model[s] : e->model;
            bool blend = !e->seq_model[s] && e->blend.n > 1;
            int k = 0;
            while (k < n_grp && (grp[k].m != v || grp[k].blend != blend)) k++;
            if (k == CMF__ENGINE_GROUPS) break;
            if (k == n_grp) grp[n_grp++] = (cmf__engine_group){v, blend, 0, 0};
            grp[k].n_tok++;
            row_grp[c] = k;
            rank[c] = wanted(b, t, logits) ? (int32_t)n_out++ : -1;
            if (rank[c] >= 0) grp[k].n_out++;
            c++;
        }
        /* rows in group order, stable: a sequence keeps its tokens' order (one sequence, one group) */
        int64_t at[CMF__ENGINE_GROUPS], out_at[CMF__ENGINE_GROUPS];
        for (int k = 0, r = 0, o = 0; k < n_grp; r += (int)grp[k].n_tok, o += (int)grp[k].n_out, k++) {
            at[k] = r;
            out_at[k] = o;
        }
        for (int64_t i = 0; i < c; i++) {
            int64_t t = done + i, row = at[row_grp[i]]++;
            int32_t s = b->seq ? b->seq[t] : 0;
            ids[row] = b->tok[t];
            seq[row] = s;
            pos[row] = (int32_t)e->n_past[s]++;
            if (rank[i] >= 0) {
                int64_t o = out_at[row_grp[i]]++;
                oi[o] = (int32_t)row;
                out_rank[o] = rank[i];
            }
        }
        const cmf__graph *g = NULL;
        int64_t rows = c, n_rows = n_out; /* the graph's, padded */
        if (n_grp == 1) pad_chunk(e, &rows, &n_rows, &grp[0]);
        if ((st = ensure_out(e, n_rows)) || (st = graph_for(e, rows, n_rows, n_grp, grp, &g)) ||
            (st = e->be->ops->set(e->be, e->par_buf, 0, e->h_par, (size_t)B * 16)) || (st = upload_table(e)) ||
            (st = e->be->ops->compute(e->be, g))) {
            for (int64_t k = 0; k < c; k++) e->n_past[seq[k]]--; /* the chunk did not go in */
            break;
        }
        if (n_out && logits && n_grp == 1)
            st = e->be->ops->get(e->be, e->out_buf, e->logits.off, logits + written * V, (size_t)(n_out * V) * 4);
        for (int64_t o = 0; n_out && logits && n_grp > 1 && o < n_out && !st; o++) /* rows back in token order */
            st = e->be->ops->get(e->be, e->out_buf, e->logits.off + (size_t)(o * V) * 4,
                                 logits + (written + out_rank[o]) * V, (size_t)V * 4);
        if (st) break;
        written += n_out;
        done += c;
    }
    free(row_grp);
    return st;
}

cmf_status cmf__engine_forward(cmf__engine *e, const int32_t *tokens, int64_t n, float *logits, bool all_logits)
{
    bool *want = NULL;
    if (all_logits && logits && n > 0) {
        want = malloc((size_t)n);
        if (!want) return cmf__error(CMF_ERR_NOMEM, "forward: out of memory");
        memset(want, 1, (size_t)n);
    }
    cmf__batch b = {n, tokens, NULL, want};
    cmf_status st = cmf__engine_decode(e, &b, logits);
    free(want);
    return st;
}
