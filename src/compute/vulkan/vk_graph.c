/* vk_graph.c — what the Vulkan backend checks of a graph, apart from
 * recording it: whether it has a shader for each node (refused by name
 * otherwise), the ids, positions and slots of a step against what they
 * index (before every replay, as the CPU checks them), and the sizes a
 * node's host vectors and descriptor take. No Vulkan call here. */
#include "compute/vulkan/vk_internal.h"
#include "util/error.h"

static bool words_ok(const cmf__ten *t) { return !t->buf || (t->off % 4 == 0 && t->nb % 4 == 0); }

int64_t cmf__vk_kv_group(const cmf__ten *t) { return t->group > 0 ? t->group : t->cols; }

/* A KV cache view the shaders read and write: f16 in whole words, q8 in
 * whole words per group. */
static bool kv_ok(const cmf__ten *t, int64_t head_dim)
{
    if (!words_ok(t)) return false;
    if (t->type == CMF__E_F16) return t->cols % 2 == 0 && head_dim % 2 == 0;
    if (t->type == CMF__E_Q8) return (t->cols + cmf__vk_kv_group(t) - 1) / cmf__vk_kv_group(t) <= 256; /* kv_write_q8.comp */
    return true;
}

/* The shaders read a paged cache's table through the slots' binding. */
static bool pages_ok(const cmf__node *nd)
{
    const cmf__kv_pages *pg = cmf__node_kv_pages(nd);
    return !pg || (pg->table.buf == nd->c.buf && pg->table.off >= nd->c.off && pg->table.off % 4 == 0);
}

/* ERR_UNSUPPORTED naming the node when this backend cannot run it. */
cmf_status cmf__vk_node_ok(const cmf__node *nd, int k)
{
    const char *nm = cmf__op_name(nd->op);
    if (!pages_ok(nd)) /* kv_write and attn of a paged cache */
        return cmf__error(CMF_ERR_UNSUPPORTED, "vulkan: graph node %d (%s): the KV block table is not in the slots' buffer after them",
                          k, nm);
    switch (nd->op) {
    case CMF__OP_MOE:
        if (((const cmf__moe_layer *)nd->ext)->route.n_expert > CMF__VK_MAX_EXPERTS)
            return cmf__error(CMF_ERR_UNSUPPORTED, "vulkan: graph node %d (%s): more than %d experts", k, nm, CMF__VK_MAX_EXPERTS);
        break;
    case CMF__OP_GDN: {
        const cmf__gdn_dims *d = &((const cmf__gdn_op *)nd->ext)->dims;
        if (d->k_dim > 256 || d->v_dim > 256 || !words_ok(&((const cmf__gdn_op *)nd->ext)->state))
            return cmf__error(CMF_ERR_UNSUPPORTED, "vulkan: graph node %d (%s): key dim %d / value dim %d past 256", k, nm,
                              d->k_dim, d->v_dim);
        break;
    }
    case CMF__OP_KV_WRITE:
        if (!kv_ok(&nd->dst, 2))
            return cmf__error(CMF_ERR_UNSUPPORTED, "vulkan: graph node %d (%s): a %s KV cache of %lld columns has no shader",
                              k, nm, cmf__etype_name(nd->dst.type), (long long)nd->dst.cols);
        break;
    case CMF__OP_ATTN: {
        const cmf__attn_params *p = nd->ext;
        if (p->head_dim > 256 || !kv_ok(&p->k_cache, p->head_dim) || !kv_ok(&p->v_cache, p->head_dim) || p->k_cache.type != p->v_cache.type ||
            (p->k_cache.type == CMF__E_Q8 && cmf__vk_kv_group(&p->k_cache) != cmf__vk_kv_group(&p->v_cache)))
            return cmf__error(CMF_ERR_UNSUPPORTED, "vulkan: graph node %d (%s): a %s KV cache of head dim %lld has no shader",
                              k, nm, cmf__etype_name(p->k_cache.type), (long long)p->head_dim);
        break;
    }
    default: break;
    }
    if (!words_ok(&nd->dst) || !words_ok(&nd->a) || !words_ok(&nd->b) || !words_ok(&nd->c))
        return cmf__error(CMF_ERR_UNSUPPORTED, "vulkan: graph node %d (%s): a view not on 4-byte boundaries", k, nm);
    return CMF_OK;
}

/* Token ids, positions and slots the host checks before a dispatch: they
 * must be in a CMF__BUF_HOST buffer (the engine's parameter rows are). */
static const int32_t *ints(const cmf__ten *t)
{
    return cmf__vk_buffer_map(t->buf) ? (const int32_t *)(const void *)(cmf__vk_buffer_map(t->buf) + t->off) : NULL;
}
#define NEED_HOST(p, what)                                                                                            \
    if (!(p)) return cmf__error(CMF_ERR_UNSUPPORTED, "vulkan: %s must be in a host-visible buffer (CMF__BUF_HOST)", what)

size_t cmf__vk_vec_bytes(const cmf__node *nd)
{
    switch (nd->op) {
    case CMF__OP_MATMUL: return nd->v ? (size_t)nd->w->rows * 4 : 0;
    case CMF__OP_RMSNORM: return nd->v ? (size_t)nd->i[0] * 4 : 0;
    case CMF__OP_ROPE: return (size_t)((const cmf__rope_table *)nd->ext)->rot_dims / 2 * 4;
    case CMF__OP_MASK: return ((size_t)(nd->dst.cols / nd->i[0]) + 31) / 32 * 4;
    case CMF__OP_ATTN: {
        const cmf__attn_params *p = nd->ext;
        return p->sinks ? (size_t)p->n_head * 4 : 0;
    }
    case CMF__OP_MOE: /* the routable bits, for the routing step */
        return nd->bits ? (size_t)(((const cmf__moe_layer *)nd->ext)->route.n_expert + 31) / 32 * 4 : 0;
    default: return 0;
    }
}

/* The ids, positions and slots of this step against what they index,
 * as the CPU checks them: before every replay (the recording trusts them). */
cmf_status cmf__vk_check_step(const cmf__node *nd)
{
    const int32_t *ids, *pos, *seq;
    switch (nd->op) {
    case CMF__OP_ROWS:
        NEED_HOST(ids = ints(&nd->b), "row indices");
        for (int64_t t = 0; t < nd->dst.rows; t++)
            if (ids[t] < 0 || ids[t] >= nd->a.rows)
                return cmf__error(CMF_ERR_BOUNDS, "rows: index %d outside [0, %lld)", ids[t], (long long)nd->a.rows);
        return CMF_OK;
    case CMF__OP_GET_ROWS:
    case CMF__OP_PLE: {
        const cmf__qmat *w = nd->op == CMF__OP_PLE ? ((const cmf__gemma4_ple *)nd->ext)->embed_per_layer : nd->w;
        NEED_HOST(ids = ints(&nd->a), "token ids");
        for (int64_t t = 0; t < nd->dst.rows; t++)
            if (ids[t] < 0 || ids[t] >= w->rows)
                return nd->op == CMF__OP_PLE ? cmf__error(CMF_ERR_BOUNDS, "token %d outside model.embed_tokens_per_layer.weight (%lld rows)",
                                                          ids[t], (long long)w->rows)
                                             : cmf__error(CMF_ERR_BOUNDS, "get_rows: id %d outside [0, %lld)", ids[t],
                                                          (long long)w->rows);
        return CMF_OK;
    }
    case CMF__OP_KV_WRITE:
    case CMF__OP_ATTN: {
        const cmf__kv_pages *pg = cmf__node_kv_pages(nd);
        const int32_t *table = NULL;
        NEED_HOST((pos = ints(&nd->b)) && (seq = ints(&nd->c)), "positions and slots");
        if (pg) NEED_HOST(table = ints(&pg->table), "the KV block table");
        cmf__kv_map m;
        return cmf__kv_check(nd, pos, seq, table, &m);
    }
    case CMF__OP_GDN: {
        const cmf__gdn_op *G = nd->ext;
        NEED_HOST(seq = ints(&nd->b), "sequence slots");
        for (int64_t t = 0; t < nd->a.rows; t++)
            if (seq[t] < 0 || seq[t] >= G->state.rows)
                return cmf__error(CMF_ERR_BOUNDS, "gdn: token %lld: sequence %d of %lld", (long long)t, seq[t],
                                  (long long)G->state.rows);
        return CMF_OK;
    }
    default: return CMF_OK;
    }
}

/* Bytes of a node's descriptor that a recording depends on (its ext). */
size_t cmf__vk_ext_bytes(const cmf__node *nd)
{
    switch (nd->op) {
    case CMF__OP_ROPE: return sizeof(cmf__rope_table);
    case CMF__OP_ATTN: return sizeof(cmf__attn_params);
    case CMF__OP_KV_WRITE: return nd->ext ? sizeof(cmf__kv_pages) : 0;
    case CMF__OP_MOE: return sizeof(cmf__moe_layer);
    case CMF__OP_GDN: return sizeof(cmf__gdn_op);
    case CMF__OP_PLE: return sizeof(cmf__gemma4_ple);
    case CMF__OP_PLE_TAIL: return sizeof(cmf__ple_tail_op);
    default: return 0;
    }
}

