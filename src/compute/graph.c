/* graph.c — the backend-independent half of the compute core: element
 * types, the node list, and the shape/type rules of every op, checked once
 * per built graph so that no backend has to trust its caller. Backends do
 * not re-check what cmf__graph_check accepted. */
#include "compute/backend.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

size_t cmf__etype_row_bytes(cmf__etype t, int64_t cols, int64_t group)
{
    switch (t) {
    case CMF__E_F16: return (size_t)cols * 2;
    case CMF__E_Q8: {
        size_t data = ((size_t)cols + 3) / 4 * 4;
        int64_t g = group > 0 ? group : cols;
        return data + (size_t)((cols + g - 1) / g) * 4;
    }
    case CMF__E_F32:
    case CMF__E_I32:
    default: return (size_t)cols * 4;
    }
}

const char *cmf__etype_name(cmf__etype t)
{
    static const char *const names[CMF__E_COUNT] = {"f32", "i32", "f16", "q8"};
    return (unsigned)t < CMF__E_COUNT ? names[t] : "?";
}

const char *cmf__op_name(cmf__op op)
{
    static const char *const names[CMF__OP_COUNT] = {
        "get_rows", "rows", "matmul", "add", "scale", "mul", "rmsnorm", "rope", "glu", "sigmoid_mul",
        "mask", "softcap", "kv_write", "attn", "moe", "gdn", "ple", "ple_tail",
    };
    return (unsigned)op < CMF__OP_COUNT ? names[op] : "?";
}

cmf_status cmf__buffer_span_check(bool have, size_t size, size_t off, size_t bytes, const char *who)
{
    if (!have || off > size || bytes > size - off)
        return cmf__error(CMF_ERR_BOUNDS, "%s: %zu bytes at offset %zu outside a buffer of %zu", who, bytes, off,
                          have ? size : 0);
    return CMF_OK;
}

cmf_status cmf__graph_push(cmf__graph *g, const cmf__node *nd)
{
    if (g->n == g->cap) {
        int cap = g->cap ? g->cap * 2 : 64;
        cmf__node *p = realloc(g->nodes, (size_t)cap * sizeof *p);
        if (!p) return cmf__error(CMF_ERR_NOMEM, "graph: out of memory for %d nodes", cap);
        g->nodes = p;
        g->cap = cap;
    }
    g->nodes[g->n++] = *nd;
    return CMF_OK;
}

void cmf__graph_free(cmf__graph *g)
{
    if (!g) return;
    free(g->nodes);
    memset(g, 0, sizeof *g);
}

/* ---- checks --------------------------------------------------------------- */
#define BAD(...) return cmf__error(CMF_ERR_BACKEND, "graph node %d (%s): " __VA_ARGS__)

static bool is(const cmf__ten *t, cmf__etype type) { return t->buf && t->type == type && t->rows >= 0 && t->cols >= 0; }
static bool same(const cmf__ten *x, const cmf__ten *y) { return x->rows == y->rows && x->cols == y->cols; }

/* A cache of `rows` rows holding `cap` rows a sequence: a ring per
 * sequence, or (pages) blocks named by an I32 table of cap / block entries
 * a sequence. */
static bool cache_ok(const cmf__kv_pages *pg, int64_t cap, int64_t rows)
{
    if (cap < 1 || rows < 1) return false;
    if (!pg) return rows % cap == 0;
    return is(&pg->table, CMF__E_I32) && pg->block >= 1 && pg->table.rows >= 1 && pg->table.cols >= 1 &&
           pg->table.nb == (size_t)pg->table.cols * 4 && pg->table.cols * pg->block == cap && rows % pg->block == 0;
}

const cmf__kv_pages *cmf__node_kv_pages(const cmf__node *nd)
{
    if (nd->op == CMF__OP_KV_WRITE) return nd->ext;
    return nd->op == CMF__OP_ATTN ? ((const cmf__attn_params *)nd->ext)->pages : NULL;
}

cmf_status cmf__kv_check(const cmf__node *nd, const int32_t *pos, const int32_t *seq, const int32_t *table,
                         cmf__kv_map *m)
{
    const bool kv = nd->op == CMF__OP_KV_WRITE;
    const cmf__attn_params *p = kv ? NULL : nd->ext;
    const cmf__kv_pages *pg = cmf__node_kv_pages(nd);
    const int64_t cap = kv ? nd->i[0] : p->cap, rows = kv ? nd->dst.rows : p->k_cache.rows;
    const int64_t window = kv ? 0 : p->window, n = nd->a.rows;
    const char *nm = kv ? "kv_write" : "attn";
    *m = (cmf__kv_map){pg ? table : NULL, cap, pg ? pg->block : cap, pg ? pg->table.cols : 1,
                       pg ? pg->table.rows : rows / cap};
    if (pg && !table) return cmf__error(CMF_ERR_BACKEND, "%s: the block table is not mapped on the host", nm);
    for (int64_t t = 0; t < n; t++) {
        if (seq[t] < 0 || seq[t] >= m->n_seq || pos[t] < 0)
            return cmf__error(CMF_ERR_BOUNDS, "%s: token %lld: sequence %d of %lld, position %d", nm, (long long)t,
                              seq[t], (long long)m->n_seq, pos[t]);
        if (!pg) continue;
        /* the blocks its row (kv_write) or its keys (attn) lie in; a later token of the same sequence whose
         * keys cover these checks them */
        int64_t lo = kv ? pos[t] : cmf__attn_first_key(window, pos[t]);
        if (!kv && t + 1 < n && seq[t + 1] == seq[t] && pos[t + 1] >= pos[t] && window <= 0) continue;
        if (pos[t] - lo >= cap) lo = pos[t] - cap + 1;
        for (int64_t q = lo; q <= pos[t]; q += cmf__kv_run(m, q, pos[t])) {
            const int32_t blk = table[(int64_t)seq[t] * m->per_seq + q % cap / m->block];
            if (blk < 0 || blk >= rows / m->block)
                return cmf__error(CMF_ERR_BOUNDS, "%s: token %lld: sequence %d, position %lld in block %d of a cache of %lld",
                                  nm, (long long)t, seq[t], (long long)q, blk, (long long)(rows / m->block));
        }
    }
    return CMF_OK;
}

cmf_status cmf__graph_check(const cmf__graph *g)
{
    for (int k = 0; k < g->n; k++) {
        const cmf__node *nd = &g->nodes[k];
        const cmf__ten *d = &nd->dst, *a = &nd->a, *b = &nd->b, *c = &nd->c;
        const char *nm = cmf__op_name(nd->op);
        bool kv_ok = false;
        switch (nd->op) {
        case CMF__OP_GET_ROWS:
            if (!nd->w || !is(a, CMF__E_I32) || !is(d, CMF__E_F32) || a->rows * a->cols != d->rows ||
                d->cols != nd->w->cols)
                BAD("ids [%lld] -> [%lld x %lld] of a %lld-column weight", k, nm, (long long)(a->rows * a->cols),
                    (long long)d->rows, (long long)d->cols, (long long)(nd->w ? nd->w->cols : -1));
            break;
        case CMF__OP_ROWS:
            if (!is(a, CMF__E_F32) || !is(b, CMF__E_I32) || !is(d, CMF__E_F32) || b->rows * b->cols != d->rows ||
                a->cols != d->cols)
                BAD("shapes", k, nm);
            break;
        case CMF__OP_MATMUL:
            if (!nd->w || !is(a, CMF__E_F32) || !is(d, CMF__E_F32) || a->cols != nd->w->cols ||
                d->cols != nd->w->rows || d->rows != a->rows)
                BAD("[%lld x %lld] x W[%lld x %lld]^T -> [%lld x %lld]", k, nm, (long long)a->rows, (long long)a->cols,
                    (long long)(nd->w ? nd->w->rows : -1), (long long)(nd->w ? nd->w->cols : -1), (long long)d->rows,
                    (long long)d->cols);
            break;
        case CMF__OP_ADD:
        case CMF__OP_MUL:
        case CMF__OP_GLU:
        case CMF__OP_SIGMOID_MUL:
            if (!is(a, CMF__E_F32) || !is(b, CMF__E_F32) || !is(d, CMF__E_F32) || !same(a, d) || !same(b, d))
                BAD("shapes [%lld x %lld] [%lld x %lld] -> [%lld x %lld]", k, nm, (long long)a->rows, (long long)a->cols,
                    (long long)b->rows, (long long)b->cols, (long long)d->rows, (long long)d->cols);
            break;
        case CMF__OP_SCALE:
        case CMF__OP_SOFTCAP:
            if (!is(a, CMF__E_F32) || !is(d, CMF__E_F32) || !same(a, d)) BAD("shapes", k, nm);
            break;
        case CMF__OP_RMSNORM:
            if (!is(a, CMF__E_F32) || !is(d, CMF__E_F32) || !same(a, d) || nd->i[0] < 1 || d->cols % nd->i[0])
                BAD("group %lld does not divide %lld columns", k, nm, (long long)nd->i[0], (long long)d->cols);
            break;
        case CMF__OP_ROPE:
            if (!is(d, CMF__E_F32) || !is(b, CMF__E_I32) || b->rows * b->cols != d->rows || !nd->ext ||
                nd->i[0] * nd->i[1] > d->cols || nd->i[1] < ((const cmf__rope_table *)nd->ext)->rot_dims)
                BAD("shapes", k, nm);
            break;
        case CMF__OP_MASK:
            if (!is(d, CMF__E_F32) || !nd->bits || nd->i[0] < 1 || d->cols % nd->i[0]) BAD("shapes", k, nm);
            break;
        case CMF__OP_KV_WRITE:
            kv_ok = d->buf && (d->type == CMF__E_F32 || d->type == CMF__E_F16 || d->type == CMF__E_Q8);
            if (!kv_ok || !is(a, CMF__E_F32) || !is(b, CMF__E_I32) || !is(c, CMF__E_I32) || a->cols != d->cols ||
                b->rows * b->cols != a->rows || c->rows * c->cols != a->rows || !cache_ok(nd->ext, nd->i[0], d->rows))
                BAD("shapes", k, nm);
            break;
        case CMF__OP_ATTN: {
            const cmf__attn_params *p = nd->ext;
            if (!p || !is(a, CMF__E_F32) || !is(d, CMF__E_F32) || !is(b, CMF__E_I32) || !is(c, CMF__E_I32) ||
                a->rows != d->rows || a->cols < p->n_head * p->head_dim || d->cols < p->n_head * p->head_dim ||
                p->n_head_kv < 1 || p->n_head % p->n_head_kv || p->k_cache.cols != p->n_head_kv * p->head_dim ||
                p->v_cache.rows != p->k_cache.rows || !cache_ok(p->pages, p->cap, p->k_cache.rows))
                BAD("shapes", k, nm);
            break;
        }
        case CMF__OP_MOE: {
            const cmf__moe_layer *L = nd->ext;
            if (!L || !is(a, CMF__E_F32) || !is(d, CMF__E_F32) || !same(a, d) || a->cols != L->hidden)
                BAD("shapes", k, nm);
            break;
        }
        case CMF__OP_GDN: {
            const cmf__gdn_op *G = nd->ext;
            if (!G || !is(a, CMF__E_F32) || !is(d, CMF__E_F32) || !same(a, d) || a->cols != G->dims.hidden ||
                !is(b, CMF__E_I32) || b->rows * b->cols != a->rows || !is(&G->state, CMF__E_F32) ||
                (size_t)G->state.cols != cmf__gdn_conv_floats(&G->dims) + cmf__gdn_rec_floats(&G->dims))
                BAD("shapes", k, nm);
            break;
        }
        case CMF__OP_PLE: {
            const cmf__gemma4_ple *P = nd->ext;
            if (!P || !is(a, CMF__E_I32) || !is(b, CMF__E_F32) || !is(d, CMF__E_F32) || b->cols != P->hidden ||
                d->cols != (int64_t)P->n_layers * P->per_layer || a->rows * a->cols != d->rows || b->rows != d->rows)
                BAD("shapes", k, nm);
            break;
        }
        case CMF__OP_PLE_TAIL: {
            const cmf__ple_tail_op *T = nd->ext;
            if (!T || !is(d, CMF__E_F32) || !is(a, CMF__E_F32) || d->cols != T->ple->hidden || a->rows != d->rows ||
                (nd->i[0] + 1) * T->ple->per_layer > a->cols)
                BAD("shapes", k, nm);
            break;
        }
        default: BAD("unknown op %d", k, nm, (int)nd->op);
        }
    }
    return CMF_OK;
}
