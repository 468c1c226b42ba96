/* vk_fused.c — the fused ops on the Vulkan backend, each recorded as a
 * run of primitive dispatches over the device scratch. MoE: router matmul,
 * routing, then expert by expert in ascending index the gate/up/glu/down
 * steps for the tokens routed to it and their weighted sum (the CPU's
 * summation order), the shared expert last. Gated DeltaNet: both input
 * projections for every token, the conv and the recurrence token by token
 * in one dispatch each (the step form), the out projection. Gemma-4: the
 * per-layer input projection and mix; the layer tail's gate, product,
 * projection, norm and residual add. */
#include "compute/vulkan/vk_internal.h"

static int64_t moe_inter(const cmf__moe_layer *L)
{
    int64_t m = 0;
    for (int e = 0; e < L->route.n_expert; e++)
        if (L->experts[e].gate->rows > m) m = L->experts[e].gate->rows;
    if (L->shared && L->shared->gate->rows > m) m = L->shared->gate->rows;
    return m;
}

size_t cmf__vk_fused_bytes(const cmf__node *nd)
{
    const size_t n = (size_t)nd->dst.rows;
    switch (nd->op) {
    case CMF__OP_MOE: {
        const cmf__moe_layer *L = nd->ext;
        size_t E = (size_t)L->route.n_expert, H = (size_t)L->hidden, I = (size_t)moe_inter(L);
        return 4 * n * (3 * E + 2 * I + H + 1); /* logits, weights|marks, gate, up, expert out, shared gate */
    }
    case CMF__OP_GDN: {
        const cmf__gdn_dims *d = &((const cmf__gdn_op *)nd->ext)->dims;
        size_t C = cmf__gdn_conv_dim(d), nvdv = (size_t)d->n_v_heads * d->v_dim;
        return 4 * n * ((C + nvdv + 2 * (size_t)d->n_v_heads) + C + nvdv); /* qkvz|ba, conv out, o */
    }
    case CMF__OP_PLE_TAIL: {
        const cmf__gemma4_ple *P = ((const cmf__ple_tail_op *)nd->ext)->ple;
        return 4 * n * ((size_t)P->per_layer + (size_t)P->hidden);
    }
    default: return 0;
    }
}

static cmf_status each_expert(const cmf__moe_expert *x, cmf_status (*fn)(void *, const cmf__qmat *), void *ctx)
{
    cmf_status st;
    if ((st = fn(ctx, x->gate)) || (st = fn(ctx, x->up))) return st;
    return fn(ctx, x->down);
}

cmf_status cmf__vk_each_weight(const cmf__node *nd, cmf_status (*fn)(void *ctx, const cmf__qmat *w), void *ctx)
{
    cmf_status st = CMF_OK;
    if (nd->w && (st = fn(ctx, nd->w))) return st;
    switch (nd->op) {
    case CMF__OP_MOE: {
        const cmf__moe_layer *L = nd->ext;
        if ((st = fn(ctx, L->router))) return st;
        for (int e = 0; e < L->route.n_expert && !st; e++) st = each_expert(&L->experts[e], fn, ctx);
        if (!st && L->shared) st = each_expert(L->shared, fn, ctx);
        if (!st && L->shared_gate) st = fn(ctx, L->shared_gate);
        return st;
    }
    case CMF__OP_GDN: {
        const cmf__gdn_weights *w = &((const cmf__gdn_op *)nd->ext)->w;
        if ((st = fn(ctx, w->in_qkvz)) || (st = fn(ctx, w->in_ba))) return st;
        return fn(ctx, w->out);
    }
    case CMF__OP_PLE: {
        const cmf__gemma4_ple *P = nd->ext;
        if ((st = fn(ctx, P->embed_per_layer))) return st;
        return fn(ctx, P->model_projection);
    }
    case CMF__OP_PLE_TAIL: {
        const cmf__gemma4_layer *l = &((const cmf__ple_tail_op *)nd->ext)->layer;
        if (!l->gate) return CMF_OK;
        if ((st = fn(ctx, l->gate))) return st;
        return fn(ctx, l->projection);
    }
    default: return CMF_OK;
    }
}

/* The next rows x cols f32 block of the scratch. */
static cmf__ten carve(cmf__buffer *s, size_t *used, int64_t rows, int64_t cols)
{
    cmf__ten t = cmf__ten_make(s, *used, CMF__E_F32, rows, cols);
    *used += (size_t)rows * t.nb;
    return t;
}

/* One column of a row-major block, as a rows x 1 view. */
static cmf__ten column(cmf__ten t, int64_t col, cmf__etype type)
{
    t.off += (size_t)col * 4;
    t.cols = 1;
    t.type = type;
    return t;
}

static cmf_status rec(vk_rec *r, cmf__node nd) { return cmf__vk_record(r, &nd, CMF__VK_V_RESIDENT); }

/* One expert's FFN of the tokens of x into y: only those marked in `mark`
 * (rows x 1 I32) when it has a buffer. */
static cmf_status expert(vk_rec *r, const cmf__moe_expert *x, const cmf__act_params *act, cmf__ten in, cmf__ten g,
                         cmf__ten u, cmf__ten y, cmf__ten mark)
{
    cmf_status st;
    g = cmf__ten_cols(g, 0, x->gate->rows);
    u = cmf__ten_cols(u, 0, x->up->rows);
    if ((st = rec(r, (cmf__node){.op = CMF__OP_MATMUL, .dst = g, .a = in, .c = mark, .w = x->gate, .v = x->gate_bias})) ||
        (st = rec(r, (cmf__node){.op = CMF__OP_MATMUL, .dst = u, .a = in, .c = mark, .w = x->up, .v = x->up_bias})) ||
        (st = rec(r, (cmf__node){.op = CMF__OP_GLU, .dst = g, .a = g, .b = u, .i = {act->kind}, .f = {act->alpha, act->limit}})))
        return st;
    return rec(r, (cmf__node){.op = CMF__OP_MATMUL, .dst = y, .a = g, .c = mark, .w = x->down, .v = x->down_bias});
}

static cmf_status moe(vk_rec *r, const cmf__node *nd)
{
    const cmf__moe_layer *L = nd->ext;
    const int64_t n = nd->a.rows, E = L->route.n_expert, H = L->hidden, I = moe_inter(L);
    cmf__buffer *s = cmf__vk_fused_scratch(r);
    size_t used = 0;
    cmf__ten logits = carve(s, &used, n, E), route = carve(s, &used, n, 2 * E), g = carve(s, &used, n, I),
             u = carve(s, &used, n, I), y = carve(s, &used, n, H), sg = carve(s, &used, n, 1);
    cmf_status st;
    if ((st = rec(r, (cmf__node){.op = CMF__OP_MATMUL, .dst = logits, .a = nd->a, .w = L->router, .v = L->router_bias})) ||
        (st = rec(r, (cmf__node){.op = CMF__VK_MOE_ROUTE, .dst = route, .a = logits, .ext = L, .bits = nd->bits})) ||
        (st = rec(r, (cmf__node){.op = CMF__VK_ZERO, .dst = nd->dst})))
        return st;
    for (int64_t e = 0; e < E && !st; e++) {
        cmf__ten mark = column(route, E + e, CMF__E_I32), weight = column(route, e, CMF__E_F32);
        if (!(st = expert(r, &L->experts[e], &L->act, nd->a, g, u, y, mark)))
            st = rec(r, (cmf__node){.op = CMF__VK_MOE_ACC, .dst = nd->dst, .a = y, .b = weight, .c = mark, .i = {0}});
    }
    if (st || !L->shared) return st;
    if (L->shared_gate && (st = rec(r, (cmf__node){.op = CMF__OP_MATMUL, .dst = sg, .a = nd->a, .w = L->shared_gate})))
        return st;
    if ((st = expert(r, L->shared, &L->act, nd->a, g, u, y, (cmf__ten){0}))) return st;
    return rec(r, (cmf__node){.op = CMF__VK_MOE_ACC, .dst = nd->dst, .a = y, .b = sg, .i = {L->shared_gate ? 1 : 2}});
}

static cmf_status gdn(vk_rec *r, const cmf__node *nd)
{
    const cmf__gdn_op *G = nd->ext;
    const cmf__gdn_dims *d = &G->dims;
    const int64_t n = nd->a.rows, C = (int64_t)cmf__gdn_conv_dim(d), nvdv = (int64_t)d->n_v_heads * d->v_dim;
    cmf__buffer *s = cmf__vk_fused_scratch(r);
    size_t used = 0;
    cmf__ten qb = carve(s, &used, n, C + nvdv + 2 * d->n_v_heads), conv = carve(s, &used, n, C),
             o = carve(s, &used, n, nvdv);
    cmf_status st;
    if ((st = rec(r, (cmf__node){.op = CMF__OP_MATMUL, .dst = cmf__ten_cols(qb, 0, C + nvdv), .a = nd->a, .w = G->w.in_qkvz})) ||
        (st = rec(r, (cmf__node){.op = CMF__OP_MATMUL, .dst = cmf__ten_cols(qb, C + nvdv, 2 * d->n_v_heads), .a = nd->a,
                                 .w = G->w.in_ba})) ||
        (st = rec(r, (cmf__node){.op = CMF__VK_GDN_CONV, .dst = conv, .a = qb, .b = nd->b, .ext = G})) ||
        (st = rec(r, (cmf__node){.op = CMF__VK_GDN_REC, .dst = o, .a = conv, .b = nd->b, .c = qb, .ext = G})))
        return st;
    return rec(r, (cmf__node){.op = CMF__OP_MATMUL, .dst = nd->dst, .a = o, .w = G->w.out});
}

static cmf_status ple(vk_rec *r, const cmf__node *nd)
{
    const cmf__gemma4_ple *P = nd->ext;
    cmf_status st = rec(r, (cmf__node){.op = CMF__OP_MATMUL, .dst = nd->dst, .a = nd->b, .w = P->model_projection});
    return st ? st : rec(r, (cmf__node){.op = CMF__VK_PLE_MIX, .dst = nd->dst, .a = nd->a, .ext = P});
}

static cmf_status ple_tail(vk_rec *r, const cmf__node *nd)
{
    const cmf__ple_tail_op *T = nd->ext;
    const cmf__gemma4_layer *l = &T->layer;
    const int64_t n = nd->dst.rows, P = T->ple->per_layer, H = T->ple->hidden;
    cmf__ten x = nd->dst;
    cmf_status st = CMF_OK;
    if (l->gate) {
        cmf__buffer *s = cmf__vk_fused_scratch(r);
        size_t used = 0;
        cmf__ten g = carve(s, &used, n, P), y = carve(s, &used, n, H);
        if ((st = rec(r, (cmf__node){.op = CMF__OP_MATMUL, .dst = g, .a = x, .w = l->gate})) ||
            (st = rec(r, (cmf__node){.op = CMF__OP_GLU, .dst = g, .a = g, .b = cmf__ten_cols(nd->a, nd->i[0] * P, P),
                                     .i = {T->act.kind}, .f = {T->act.alpha, T->act.limit}})) ||
            (st = rec(r, (cmf__node){.op = CMF__OP_MATMUL, .dst = y, .a = g, .w = l->projection})) ||
            (st = rec(r, (cmf__node){.op = CMF__OP_RMSNORM, .dst = y, .a = y, .v = l->post_norm,
                                     .i = {H, T->ple->plus_one}, .f = {T->ple->eps}})) ||
            (st = rec(r, (cmf__node){.op = CMF__OP_ADD, .dst = x, .a = x, .b = y, .f = {1.0f}})))
            return st;
    }
    if (l->layer_scalar != 1.0f) st = rec(r, (cmf__node){.op = CMF__OP_SCALE, .dst = x, .a = x, .f = {l->layer_scalar}});
    return st;
}

cmf_status cmf__vk_fused(vk_rec *r, const cmf__node *nd)
{
    switch (nd->op) {
    case CMF__OP_MOE: return moe(r, nd);
    case CMF__OP_GDN: return gdn(r, nd);
    case CMF__OP_PLE: return ple(r, nd);
    case CMF__OP_PLE_TAIL: return ple_tail(r, nd);
    default: return cmf__vk_record(r, nd, 0);
    }
}
