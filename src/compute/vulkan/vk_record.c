/* vk_record.c — one primitive node recorded as one dispatch: its views
 * bound (push descriptors, each from its offset rounded down to the
 * device's alignment), its shapes and constants pushed, the pipeline that
 * serves its shape picked (for a matmul among matvec, matmul, matmul_sg,
 * matmul_tiled and the tensor-core GEMMs), then a barrier. The small host
 * vectors a node reads are placed in the graph's vector buffer and copied
 * again before every replay (vk_backend.c). Fused ops come here as their
 * steps (vk_fused.c). */
#include "compute/vulkan/vk_be.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct vk_rec rec;

cmf__buffer *cmf__vk_fused_scratch(vk_rec *r) { return r->be->fused; }

static uint32_t W(size_t bytes) { return (uint32_t)(bytes / 4); }

/* One dispatch as the op's helper builds it. Each view is bound from its
 * own offset rounded down to the device's alignment (base), so push
 * constants hold small word offsets and a binding stays inside
 * maxStorageBufferRange whatever the buffer's size (one KV cache buffer
 * for every layer). */
typedef struct dispatch {
    cmf__buffer *bind[N_BIND];
    size_t bind_off[N_BIND];  /* bytes past base: a vector placed in the graph's buffer */
    size_t base[N_BIND];      /* bytes: where binding i starts */
    pc k;
    uint32_t pipe, local;     /* local 0: `threads` counts workgroups */
    uint64_t threads;
    VkPipeline mv_pipe;       /* a matvec pipeline instead of pipe, for mv_nt tokens a block */
    uint32_t mv_nt;
} dispatch;

/* Binding i starts at off rounded down to the device's alignment. */
static void set_base(const vk_be *be, dispatch *x, int i, size_t off) { x->base[i] = off / be->align * be->align; }
/* A view's offset at binding i, in words. */
static uint32_t word_off(const dispatch *x, int i, size_t off) { return W(off - x->base[i]); }

/* Places `bytes` of a host vector in the graph's vector buffer at a
 * bindable offset (*off), `room` bytes reserved (whole words; the rest
 * stays zero), and notes it to be copied again before every replay. */
static cmf_status put_vec(rec *r, const void *host, size_t bytes, size_t room, size_t *off)
{
    vk_graph *gr = r->gr;
    if (gr->n_copies == gr->cap_copies) {
        int cap = gr->cap_copies ? 2 * gr->cap_copies : 64;
        vec_copy *nc = realloc(gr->copies, (size_t)cap * sizeof *nc);
        if (!nc) return cmf__error(CMF_ERR_NOMEM, "vulkan: out of memory recording a graph");
        gr->copies = nc, gr->cap_copies = cap;
    }
    *off = (r->vec_used + 255) / 256 * 256;
    memcpy(gr->vec->map + *off, host, bytes);
    gr->copies[gr->n_copies++] = (vec_copy){*off, bytes, host};
    r->vec_used = *off + (room ? room : 4);
    return CMF_OK;
}

/* What every op binds and pushes: dst, a, b, c and their views, the
 * node's shape and f, and the vector it reads (a model array resident on
 * the device, or a host vector placed in the graph's buffer). */
static cmf_status begin(rec *r, const cmf__node *nd, unsigned flags, dispatch *x)
{
    vk_be *be = r->be;
    const cmf__ten *d = &nd->dst, *a = &nd->a, *b = &nd->b, *c = &nd->c;
    memset(x, 0, sizeof *x);
    x->bind[0] = d->buf, x->bind[1] = a->buf, x->bind[2] = b->buf, x->bind[3] = c->buf;
    set_base(be, x, 0, d->off), set_base(be, x, 1, a->off), set_base(be, x, 2, b->off), set_base(be, x, 3, c->off);
    pc *k = &x->k;
    k->u[PC_DST_OFF] = word_off(x, 0, d->off), k->u[PC_DST_NB] = W(d->nb);
    k->u[PC_A_OFF] = word_off(x, 1, a->off), k->u[PC_A_NB] = W(a->nb);
    k->u[PC_B_OFF] = word_off(x, 2, b->off), k->u[PC_B_NB] = W(b->nb);
    k->u[PC_ROWS] = (uint32_t)d->rows, k->u[PC_COLS] = (uint32_t)d->cols;
    k->f[PC_F_NODE0] = nd->f[0], k->f[PC_F_NODE1] = nd->f[1];
    x->local = 256, x->threads = (uint64_t)d->rows * (uint64_t)d->cols;
    size_t vb = flags & CMF__VK_V_RESIDENT && nd->op != CMF__OP_MOE ? 0 : cmf__vk_vec_bytes(nd);
    cmf_status st;
    if (flags & CMF__VK_V_RESIDENT && nd->v && (nd->op == CMF__OP_MATMUL || nd->op == CMF__OP_RMSNORM) &&
        (st = cmf__vk_vec_buf(be, nd->v, nd->op == CMF__OP_MATMUL ? nd->w->rows : nd->i[0], &x->bind[5])))
        return st;
    const void *vhost = nd->op == CMF__OP_ROPE ? ((const cmf__rope_table *)nd->ext)->inv_freq
                        : nd->op == CMF__OP_MASK ? (const void *)nd->bits
                        : nd->op == CMF__OP_ATTN ? (const void *)((const cmf__attn_params *)nd->ext)->sinks
                                                 : (const void *)nd->v;
    if (vb) { /* a mask: whole words of bits, the bytes past the row stay zero and are never read */
        const int slot = nd->op == CMF__OP_ATTN ? 7 : 5;
        size_t bytes = nd->op == CMF__OP_MASK ? (size_t)(nd->dst.cols / nd->i[0] + 7) / 8 : vb;
        if ((st = put_vec(r, vhost, bytes, vb, &x->bind_off[slot]))) return st;
        x->bind[slot] = r->gr->vec;
    }
    return CMF_OK;
}

/* The matmul's pipeline: the dtype's matvec where its loads fit the
 * shapes (below MATMUL_TILED tokens), the tiled GEMM or a tensor-core one
 * from there, else matmul(_sg); only the marked tokens (c) keep matmul. */
static cmf_status record_matmul(rec *r, const cmf__node *nd, dispatch *x)
{
    vk_be *be = r->be;
    const cmf__ten *a = &nd->a, *c = &nd->c;
    pc *k = &x->k;
    int dev_dt = 0;
    cmf_status st;
    x->pipe = be->subgroups ? P_matmul_sg : P_matmul, x->local = 0, k->u[PC_N_TOK] = (uint32_t)a->rows;
    k->u[PC_MM_W_ROWS] = (uint32_t)nd->w->rows, k->u[PC_MM_W_COLS] = (uint32_t)nd->w->cols;
    k->u[PC_MM_HAS_BIAS] = nd->v != NULL;
    if (c->buf) /* only the marked tokens */
        k->u[PC_MM_HAS_SEL] = 1, k->u[PC_MM_SEL_OFF] = word_off(x, 3, c->off), k->u[PC_MM_SEL_NB] = W(c->nb);
    else if (a->rows >= MATMUL_TILED) x->pipe = P_matmul_tiled;
    if ((st = cmf__vk_weight_buf(be, nd->w, &x->bind[4], &dev_dt))) return st;
    k->u[PC_MM_DTYPE] = (uint32_t)dev_dt;
    if (x->pipe == P_matmul_tiled && be->coop && dev_dt != CMF_DTYPE_F32 && nd->w->cols % 4 == 0)
        x->pipe = cmf__vk_coop[be->coop - 1].pipe; /* weights of 16 bits or less: f16 tensor cores (f32 ones stay exact) */
    if (!c->buf && a->rows < MATMUL_TILED) { /* the dtype's matvec where its loads fit the shapes */
        uint32_t mp = 0, mult = 1;
        int mi = cmf__vk_mv_index(dev_dt, &mp, &mult);
        if (mi >= 0 && be->mv[mi][0] && nd->w->cols % mult == 0 && k->u[PC_A_OFF] % 4 == 0 && k->u[PC_A_NB] % 4 == 0 &&
            (dev_dt != CMF_DTYPE_Q8_2F || nd->w->rows % 2 == 0)) {
            int ni = 0;
            while (ni < N_MV_NT - 1 && cmf__vk_mv_nt[ni] < (uint32_t)a->rows) ni++;
            x->mv_pipe = be->mv[mi][ni], x->mv_nt = cmf__vk_mv_nt[ni];
        }
    }
    return CMF_OK;
}

/* KV writes and attention: the cache views, the slots (c) and, for a
 * paged cache, its block table (in c's buffer). */
static void record_kv_write(rec *r, const cmf__node *nd, dispatch *x)
{
    const cmf__ten *d = &nd->dst, *a = &nd->a, *c = &nd->c;
    const int64_t cap = nd->i[0];
    const cmf__kv_pages *pg = nd->ext;
    pc *k = &x->k;
    x->pipe = P_kv_write, k->u[PC_KVW_SEQ_OFF] = word_off(x, 3, c->off);
    k->u[PC_N_TOK] = (uint32_t)a->rows, k->u[PC_COLS] = (uint32_t)d->cols;
    k->u[PC_KVW_TYPE] = d->type == CMF__E_F16 ? 2 : 0, k->u[PC_KVW_CAP] = (uint32_t)cap;
    if (pg) {
        k->u[PC_KVW_BLOCK] = (uint32_t)pg->block, k->u[PC_KVW_TAB_OFF] = word_off(x, 3, pg->table.off);
        k->u[PC_KVW_TAB_COLS] = (uint32_t)pg->table.cols;
    }
    x->threads = (uint64_t)a->rows * (uint64_t)(d->type == CMF__E_F16 ? d->cols / 2 : d->cols);
    if (d->type == CMF__E_Q8) { /* a workgroup per token */
        x->pipe = P_kv_write_q8, x->local = 0, x->threads = (uint64_t)a->rows;
        k->u[PC_KVW_GROUP] = (uint32_t)cmf__vk_kv_group(d);
    }
}

static void record_attn(rec *r, const cmf__node *nd, dispatch *x)
{
    const cmf__attn_params *p = nd->ext;
    const cmf__ten *c = &nd->c;
    const int64_t n = nd->a.rows;
    pc *k = &x->k;
    x->pipe = P_attn, x->local = 0;
    x->bind[4] = p->k_cache.buf, x->bind[5] = p->v_cache.buf;
    x->bind_off[5] = 0;
    set_base(r->be, x, 4, p->k_cache.off), set_base(r->be, x, 5, p->v_cache.off);
    k->u[PC_ATTN_SEQ_OFF] = word_off(x, 3, c->off), k->u[PC_N_TOK] = (uint32_t)n;
    k->u[PC_ATTN_N_HEAD] = (uint32_t)p->n_head, k->u[PC_ATTN_N_HEAD_KV] = (uint32_t)p->n_head_kv;
    k->u[PC_ATTN_HEAD_DIM] = (uint32_t)p->head_dim, k->u[PC_ATTN_WINDOW] = (uint32_t)p->window;
    k->u[PC_ATTN_CAP] = (uint32_t)p->cap;
    k->u[PC_ATTN_K_OFF] = word_off(x, 4, p->k_cache.off), k->u[PC_ATTN_K_NB] = W(p->k_cache.nb);
    k->u[PC_ATTN_V_OFF] = word_off(x, 5, p->v_cache.off), k->u[PC_ATTN_V_NB] = W(p->v_cache.nb);
    k->u[PC_ATTN_KV_TYPE] = p->k_cache.type == CMF__E_F16 ? 2 : p->k_cache.type == CMF__E_Q8 ? 1 : 0;
    k->u[PC_ATTN_HAS_SINKS] = p->sinks != NULL, k->u[PC_ATTN_KV_COLS] = (uint32_t)p->k_cache.cols;
    k->u[PC_ATTN_KV_GROUP] = (uint32_t)cmf__vk_kv_group(&p->k_cache);
    k->f[PC_ATTN_SCALE] = p->scale, k->f[PC_ATTN_SOFTCAP] = p->softcap;
    if (p->pages) {
        k->u[PC_ATTN_BLOCK] = (uint32_t)p->pages->block, k->u[PC_ATTN_TAB_OFF] = word_off(x, 3, p->pages->table.off);
        k->u[PC_ATTN_TAB_COLS] = (uint32_t)p->pages->table.cols;
    }
    x->threads = (uint64_t)(n * p->n_head); /* workgroups */
}

/* The fused ops' own steps (vk_internal.h): MoE routing, the gated
 * DeltaNet conv and recurrence, Gemma-4's per-layer mix. */
static cmf_status record_moe_route(rec *r, const cmf__node *nd, dispatch *x)
{
    const cmf__moe_layer *L = nd->ext;
    const int64_t E = L->route.n_expert;
    const cmf__ten *a = &nd->a;
    pc *k = &x->k;
    cmf_status st;
    x->pipe = P_moe_route, x->local = 64, x->threads = (uint64_t)a->rows;
    k->u[PC_N_TOK] = (uint32_t)a->rows, k->u[PC_ROUTE_N_EXPERT] = (uint32_t)E;
    k->u[PC_ROUTE_TOP_K] = (uint32_t)L->route.top_k, k->u[PC_ROUTE_NORM_TOPK] = L->route.norm_topk;
    k->u[PC_ROUTE_SIGMOID] = L->route.sigmoid, k->u[PC_ROUTE_HAS_BIAS] = L->expert_bias != NULL;
    k->u[PC_ROUTE_HAS_MASK] = nd->bits != NULL, k->f[PC_ROUTE_SCALING] = L->route.routed_scaling;
    if (L->expert_bias && (st = cmf__vk_vec_buf(r->be, L->expert_bias, E, &x->bind[5]))) return st;
    if (nd->bits) { /* whole words of bits; the bytes past the experts stay zero, never read */
        if ((st = put_vec(r, nd->bits, (size_t)(E + 7) / 8, (size_t)(E + 31) / 32 * 4, &x->bind_off[7]))) return st;
        x->bind[7] = r->gr->vec;
    }
    return CMF_OK;
}

static cmf_status record_gdn(rec *r, const cmf__node *nd, dispatch *x)
{
    vk_be *be = r->be;
    const cmf__gdn_op *G = nd->ext;
    const cmf__gdn_dims *g = &G->dims;
    const cmf__ten *a = &nd->a, *c = &nd->c;
    const int64_t C = (int64_t)cmf__gdn_conv_dim(g), r_ = g->n_v_heads / g->n_k_heads, dk = g->k_dim, dv = g->v_dim;
    const int64_t nkdk = (int64_t)g->n_k_heads * dk, grp = 2 * dk + 2 * r_ * dv;
    pc *k = &x->k;
    cmf_status st;
    x->bind[6] = G->state.buf, set_base(be, x, 6, G->state.off);
    k->u[PC_N_TOK] = (uint32_t)a->rows;
    if ((int)nd->op == CMF__VK_GDN_CONV) {
        x->pipe = P_gdn_conv, x->threads = (uint64_t)C;
        k->u[PC_CONV_CH] = (uint32_t)C, k->u[PC_CONV_K] = (uint32_t)g->conv_k;
        k->u[PC_CONV_STATE_OFF] = word_off(x, 6, G->state.off), k->u[PC_CONV_STATE_NB] = W(G->state.nb);
        k->u[PC_CONV_DK] = (uint32_t)dk, k->u[PC_CONV_RDV] = (uint32_t)(r_ * dv), k->u[PC_CONV_GROUP] = (uint32_t)grp;
        k->u[PC_CONV_NKDK] = (uint32_t)nkdk;
        return cmf__vk_vec_buf(be, G->w.conv_w, C * g->conv_k, &x->bind[4]);
    }
    x->pipe = P_gdn_rec, x->local = 0, x->threads = (uint64_t)g->n_v_heads; /* workgroups */
    k->u[PC_REC_C_OFF] = word_off(x, 3, c->off), k->u[PC_REC_C_NB] = W(c->nb);
    k->u[PC_REC_N_V_HEADS] = (uint32_t)g->n_v_heads, k->u[PC_REC_DK] = (uint32_t)dk, k->u[PC_REC_DV] = (uint32_t)dv;
    k->u[PC_REC_R] = (uint32_t)r_, k->u[PC_REC_GROUP] = (uint32_t)grp;
    k->u[PC_REC_BA_OFF] = (uint32_t)(C + g->n_v_heads * dv);
    k->u[PC_REC_STATE_OFF] = word_off(x, 6, G->state.off), k->u[PC_REC_STATE_NB] = W(G->state.nb);
    k->u[PC_REC_CONV_FLOATS] = (uint32_t)cmf__gdn_conv_floats(g), k->u[PC_REC_NKDK] = (uint32_t)nkdk;
    k->f[PC_REC_EPS] = g->eps;
    if ((st = cmf__vk_vec_buf(be, G->w.A_log, g->n_v_heads, &x->bind[4])) ||
        (st = cmf__vk_vec_buf(be, G->w.dt_bias, g->n_v_heads, &x->bind[5])) ||
        (st = cmf__vk_vec_buf(be, G->w.norm_w, dv, &x->bind[7])))
        return st;
    return CMF_OK;
}

static cmf_status record_ple_mix(rec *r, const cmf__node *nd, dispatch *x)
{
    const cmf__gemma4_ple *P = nd->ext;
    pc *k = &x->k;
    int dev_dt = 0;
    cmf_status st;
    x->pipe = P_ple_mix, x->local = 0, x->threads = (uint64_t)nd->dst.rows * (uint64_t)P->n_layers; /* workgroups */
    if ((st = cmf__vk_weight_buf(r->be, P->embed_per_layer, &x->bind[4], &dev_dt)) ||
        (st = cmf__vk_vec_buf(r->be, P->projection_norm, P->per_layer, &x->bind[5])))
        return st;
    k->u[PC_PLE_N_LAYERS] = (uint32_t)P->n_layers, k->u[PC_PLE_PER_LAYER] = (uint32_t)P->per_layer;
    k->u[PC_PLE_DTYPE] = (uint32_t)dev_dt, k->u[PC_PLE_PLUS_ONE] = P->plus_one;
    k->u[PC_PLE_W_ROWS] = (uint32_t)P->embed_per_layer->rows, k->u[PC_PLE_W_COLS] = (uint32_t)P->embed_per_layer->cols;
    k->f[PC_PLE_EPS] = P->eps, k->f[PC_PLE_PSCALE] = 1.0f / sqrtf((float)P->hidden);
    k->f[PC_PLE_ESCALE] = sqrtf((float)P->per_layer), k->f[PC_PLE_MIX] = 1.0f / sqrtf(2.0f);
    return CMF_OK;
}

/* The ops whose rows are the dispatch's: elementwise, rows, norms, rope. */
static cmf_status record_rows(rec *r, const cmf__node *nd, dispatch *x)
{
    const cmf__ten *d = &nd->dst;
    pc *k = &x->k;
    int dev_dt = 0;
    cmf_status st;
    switch ((int)nd->op) {
    case CMF__OP_ADD: x->pipe = P_add; break;
    case CMF__OP_SCALE: x->pipe = P_scale; break;
    case CMF__OP_MUL: x->pipe = P_mul; break;
    case CMF__OP_SIGMOID_MUL: x->pipe = P_sigmoid_mul; break;
    case CMF__OP_SOFTCAP: x->pipe = P_softcap; break;
    case CMF__OP_GLU: x->pipe = P_glu, k->u[PC_GLU_ACT] = (uint32_t)nd->i[0]; break;
    case CMF__OP_MASK: x->pipe = P_mask, k->u[PC_MASK_WIDTH] = (uint32_t)nd->i[0]; break;
    case CMF__OP_ROWS: x->pipe = P_rows; break;
    case CMF__VK_ZERO: x->pipe = P_zero; break;
    case CMF__VK_MOE_ACC:
        x->pipe = P_moe_acc, k->u[PC_ACC_MODE] = (uint32_t)nd->i[0];
        k->u[PC_ACC_C_OFF] = word_off(x, 3, nd->c.off), k->u[PC_ACC_C_NB] = W(nd->c.nb);
        break;
    case CMF__OP_GET_ROWS:
        x->pipe = P_get_rows, k->u[PC_GET_DTYPE] = (uint32_t)nd->w->dtype, k->u[PC_GET_W_ROWS] = (uint32_t)nd->w->rows;
        if ((st = cmf__vk_weight_buf(r->be, nd->w, &x->bind[4], &dev_dt))) return st;
        k->u[PC_GET_DTYPE] = (uint32_t)dev_dt;
        break;
    case CMF__OP_RMSNORM:
        x->pipe = P_rmsnorm, x->local = 0, k->u[PC_NORM_GROUP] = (uint32_t)nd->i[0];
        k->u[PC_NORM_PLUS_ONE] = nd->i[1] != 0, k->u[PC_NORM_HAS_W] = nd->v != NULL;
        x->threads = (uint64_t)d->rows * (uint64_t)(d->cols / nd->i[0]); /* workgroups */
        break;
    case CMF__OP_ROPE: {
        const cmf__rope_table *rt = nd->ext;
        x->pipe = P_rope, k->u[PC_ROPE_N_HEAD] = (uint32_t)nd->i[0], k->u[PC_ROPE_HEAD_DIM] = (uint32_t)nd->i[1];
        k->u[PC_ROPE_ROT_DIMS] = (uint32_t)rt->rot_dims, k->f[PC_ROPE_FACTOR] = rt->attn_factor;
        x->threads = (uint64_t)d->rows * (uint64_t)nd->i[0] * (uint64_t)(rt->rot_dims / 2);
        break;
    }
    default: return cmf__error(CMF_ERR_UNSUPPORTED, "vulkan: op %s has no shader", cmf__op_name(nd->op));
    }
    return CMF_OK;
}

static void dispatch_flat(VkCommandBuffer cb, uint64_t threads, uint32_t local)
{
    uint64_t groups = (threads + local - 1) / local;
    if (!groups) groups = 1;
    uint32_t x = groups > 65535 ? 65535 : (uint32_t)groups, y = (uint32_t)((groups + 65534) / 65535);
    vkCmdDispatch(cb, x, y, 1);
}

/* The dispatch into the graph's command buffer: bindings, pipeline, push
 * constants, the workgroups the pipeline's shape takes, a barrier, and
 * under CMF_VK_PROFILE a timestamp. */
static void emit(rec *r, const cmf__node *nd, const dispatch *x)
{
    vk_be *be = r->be;
    VkCommandBuffer cb = r->gr->cb;
    const int64_t tokens = nd->a.rows;
    VkDescriptorBufferInfo bi[N_BIND];
    VkWriteDescriptorSet ws[N_BIND];
    for (int i = 0; i < N_BIND; i++) {
        cmf__buffer *buf = x->bind[i] ? x->bind[i] : be->dummy;
        VkDeviceSize off = x->bind[i] ? x->bind_off[i] + x->base[i] : 0, range = buf->alloc - off;
        bi[i] = (VkDescriptorBufferInfo){buf->buf, off, range < be->max_range ? range : be->max_range};
        ws[i] = (VkWriteDescriptorSet){VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, NULL, VK_NULL_HANDLE, (uint32_t)i, 0, 1,
                                       VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, NULL, &bi[i], NULL};
    }
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, x->mv_pipe ? x->mv_pipe : be->pipe[x->pipe]);
    vkCmdPushDescriptorSetKHR(cb, VK_PIPELINE_BIND_POINT_COMPUTE, be->layout, 0, N_BIND, ws);
    vkCmdPushConstants(cb, be->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof x->k, &x->k);
    if (x->mv_pipe) { /* (MV_ROWS rows, block of mv_nt tokens), rows over x and z */
        uint32_t groups = (uint32_t)((nd->w->rows + MV_ROWS - 1) / MV_ROWS);
        vkCmdDispatch(cb, groups > 65535 ? 65535 : groups, (uint32_t)((tokens + x->mv_nt - 1) / x->mv_nt),
                      (groups + 65534) / 65535);
    } else if (x->pipe == P_matmul_tiled) { /* (64 rows, 64 tokens) tiles */
        vkCmdDispatch(cb, (uint32_t)((nd->w->rows + 63) / 64), (uint32_t)((tokens + 63) / 64), 1);
    } else if (be->coop && x->pipe == (uint32_t)cmf__vk_coop[be->coop - 1].pipe) { /* (rows, tokens) tiles */
        const uint32_t tm = cmf__vk_coop[be->coop - 1].tm, tn = cmf__vk_coop[be->coop - 1].tn;
        vkCmdDispatch(cb, (uint32_t)((nd->w->rows + tn - 1) / tn), (uint32_t)((tokens + tm - 1) / tm), 1);
    } else if (nd->op == CMF__OP_MATMUL) { /* (row, block of MATMUL_TB tokens) */
        uint32_t rows = (uint32_t)nd->w->rows;
        vkCmdDispatch(cb, rows > 65535 ? 65535 : rows, (uint32_t)((tokens + MATMUL_TB - 1) / MATMUL_TB),
                      (rows + 65534) / 65535);
    } else if (x->local == 0) { /* `threads` workgroups, over y past 65535 (group_index in common.glsl) */
        dispatch_flat(cb, x->threads, 1);
    } else {
        dispatch_flat(cb, x->threads, x->local);
    }
    VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_SHADER_WRITE_BIT,
                          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                         NULL, 0, NULL);
    if (r->gr->qpool && r->gr->n_q < N_QUERIES - 1) {
        r->gr->qpipe[r->gr->n_q++] = (uint16_t)(x->mv_pipe ? P_COUNT : x->pipe);
        vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, r->gr->qpool, (uint32_t)r->gr->n_q);
    }
}

cmf_status cmf__vk_record(rec *r, const cmf__node *nd, unsigned flags)
{
    dispatch x;
    cmf_status st = begin(r, nd, flags, &x);
    if (st) return st;
    switch ((int)nd->op) {
    case CMF__OP_MATMUL: st = record_matmul(r, nd, &x); break;
    case CMF__OP_KV_WRITE: record_kv_write(r, nd, &x); break;
    case CMF__OP_ATTN: record_attn(r, nd, &x); break;
    case CMF__VK_MOE_ROUTE: st = record_moe_route(r, nd, &x); break;
    case CMF__VK_GDN_CONV:
    case CMF__VK_GDN_REC: st = record_gdn(r, nd, &x); break;
    case CMF__VK_PLE_MIX: st = record_ple_mix(r, nd, &x); break;
    default: st = record_rows(r, nd, &x); break;
    }
    if (st) return st;
    emit(r, nd, &x);
    return CMF_OK;
}
