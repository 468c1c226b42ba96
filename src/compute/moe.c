/* moe.c — MoE routing and the expert FFN sum (moe.h). Routing is exact f32
 * with a max-shifted softmax; top-k is a k-pass argmax scan, so equal keys
 * resolve to the lower expert index. Experts that are not selected are
 * never read. */
#include "compute/moe.h"

#include "util/error.h"
#include <math.h>
#include <string.h>

int cmf__moe_route(const cmf__moe_route_params *p, const float *logits, const float *expert_bias,
                   const uint8_t *routable, float *scores, int *idx, float *w) {
    int n = p->n_expert, n_ok = 0;
    float mx = -INFINITY;
    for (int e = 0; e < n; e++) {
        if (routable && !cmf__bit_get(routable, e)) continue;
        n_ok++;
        if (logits[e] > mx) mx = logits[e];
    }
    if (n_ok == 0) return 0;
    double sum = 0.0;
    for (int e = 0; e < n; e++) {
        if (routable && !cmf__bit_get(routable, e)) { scores[e] = 0.0f; continue; }
        if (p->sigmoid) scores[e] = cmf__act_sigmoid(logits[e]);
        else { scores[e] = expf(logits[e] - mx); sum += scores[e]; }
    }
    if (!p->sigmoid)
        for (int e = 0; e < n; e++) scores[e] = (float)(scores[e] / sum);

    int k = p->top_k < n_ok ? p->top_k : n_ok;
    for (int j = 0; j < k; j++) {
        int best = -1;
        float best_key = 0.0f;
        for (int e = 0; e < n; e++) {
            if (routable && !cmf__bit_get(routable, e)) continue;
            bool taken = false;
            for (int i = 0; i < j; i++) taken |= idx[i] == e;
            if (taken) continue;
            float key = scores[e] + (expert_bias ? expert_bias[e] : 0.0f);
            if (best < 0 || key > best_key) { best = e; best_key = key; }
        }
        idx[j] = best;
        w[j] = scores[best];
    }
    if (p->norm_topk) {
        double s = 0.0;
        for (int j = 0; j < k; j++) s += w[j];
        if (s > 0.0)
            for (int j = 0; j < k; j++) w[j] = (float)(w[j] / s);
    }
    if (p->routed_scaling != 0.0f && p->routed_scaling != 1.0f)
        for (int j = 0; j < k; j++) w[j] *= p->routed_scaling;
    return k;
}

void cmf__moe_ffn(const cmf__moe_expert *e, const cmf__act_params *act, const cmf__matvec *mv,
                  const float *x, float *out, float *scratch) {
    int inter = (int)e->gate->rows;
    float *g = scratch, *u = scratch + inter, *h = scratch + 2 * inter;
    cmf__archs_matvec(mv, e->gate, x, g);
    cmf__archs_matvec(mv, e->up, x, u);
    if (e->gate_bias) for (int i = 0; i < inter; i++) g[i] += e->gate_bias[i];
    if (e->up_bias) for (int i = 0; i < inter; i++) u[i] += e->up_bias[i];
    cmf__act_glu(act, g, u, h, inter);
    cmf__archs_matvec(mv, e->down, h, out);
    if (e->down_bias)
        for (int64_t i = 0; i < e->down->rows; i++) out[i] += e->down_bias[i];
}

static cmf_status check_expert(const cmf__moe_expert *e, int hidden, const char *what, const char *name, int ei) {
    if (!e->gate || !e->up || !e->down)
        return cmf__error(CMF_ERR_CONFIG, "%s: %s %d: missing gate/up/down projection", what, name, ei);
    if (e->gate->cols != hidden || e->up->cols != hidden || e->up->rows != e->gate->rows)
        return cmf__error(CMF_ERR_CONFIG, "%s: %s %d: gate_proj [%lld,%lld] / up_proj [%lld,%lld] do not match hidden %d",
                          what, name, ei, (long long)e->gate->rows, (long long)e->gate->cols,
                          (long long)e->up->rows, (long long)e->up->cols, hidden);
    if (e->down->rows != hidden || e->down->cols != e->gate->rows)
        return cmf__error(CMF_ERR_CONFIG, "%s: %s %d: down_proj [%lld,%lld], expected [%d,%lld]", what, name, ei,
                          (long long)e->down->rows, (long long)e->down->cols, hidden, (long long)e->gate->rows);
    return CMF_OK;
}

cmf_status cmf__moe_layer_check(const cmf__moe_layer *L, const char *what) {
    const cmf__moe_route_params *p = &L->route;
    if (p->n_expert < 1 || p->top_k < 1 || p->top_k > p->n_expert)
        return cmf__error(CMF_ERR_CONFIG, "%s: moe top_k %d outside 1..num_experts (%d)", what, p->top_k, p->n_expert);
    if (!L->router || L->router->rows != p->n_expert || L->router->cols != L->hidden)
        return cmf__error(CMF_ERR_CONFIG, "%s: router mlp.gate.weight shape [%lld,%lld], expected [%d,%d]", what,
                          L->router ? (long long)L->router->rows : 0LL, L->router ? (long long)L->router->cols : 0LL,
                          p->n_expert, L->hidden);
    if (!L->experts) return cmf__error(CMF_ERR_CONFIG, "%s: no experts", what);
    for (int e = 0; e < p->n_expert; e++) {
        cmf_status st = check_expert(&L->experts[e], L->hidden, what, "expert", e);
        if (st) return st;
    }
    if (L->shared) {
        cmf_status st = check_expert(L->shared, L->hidden, what, "shared expert", 0);
        if (st) return st;
    }
    if (L->shared_gate && (L->shared_gate->rows != 1 || L->shared_gate->cols != L->hidden))
        return cmf__error(CMF_ERR_CONFIG, "%s: shared_expert_gate shape [%lld,%lld], expected [1,%d]", what,
                          (long long)L->shared_gate->rows, (long long)L->shared_gate->cols, L->hidden);
    return CMF_OK;
}

size_t cmf__moe_scratch_floats(const cmf__moe_layer *L) {
    size_t inter = 0;
    for (int e = 0; e < L->route.n_expert; e++)
        if ((size_t)L->experts[e].gate->rows > inter) inter = (size_t)L->experts[e].gate->rows;
    if (L->shared && (size_t)L->shared->gate->rows > inter) inter = (size_t)L->shared->gate->rows;
    /* scores + logits [n_expert], expert out [hidden], ffn 3·inter, top-k w */
    return 3 * (size_t)L->route.n_expert + (size_t)L->hidden + 3 * inter + 1;
}

int cmf__moe_forward(const cmf__moe_layer *L, const uint8_t *routable, const cmf__matvec *mv,
                     const float *x, float *out, float *scratch, int *used) {
    int n = L->route.n_expert, H = L->hidden;
    float *logits = scratch, *scores = logits + n, *w = scores + n, *y = w + n, *ffn = y + H;
    int idx_local[256];
    int *idx = used ? used : idx_local;
    if (!used && L->route.top_k > 256) return 0;

    cmf__archs_matvec(mv, L->router, x, logits);
    if (L->router_bias)
        for (int e = 0; e < n; e++) logits[e] += L->router_bias[e];
    int k = cmf__moe_route(&L->route, logits, L->expert_bias, routable, scores, idx, w);

    memset(out, 0, sizeof(float) * (size_t)H);
    for (int j = 0; j < k; j++) {
        cmf__moe_ffn(&L->experts[idx[j]], &L->act, mv, x, y, ffn);
        for (int i = 0; i < H; i++) out[i] += w[j] * y[i];
    }
    if (L->shared) {
        float g = 1.0f;
        if (L->shared_gate) {
            float s;
            cmf__archs_matvec(mv, L->shared_gate, x, &s);
            g = cmf__act_sigmoid(s);
        }
        /* the shared expert uses the layer activation (silu in every family with one) */
        cmf__moe_ffn(L->shared, &L->act, mv, x, y, ffn);
        for (int i = 0; i < H; i++) out[i] += g * y[i];
    }
    return k;
}

static size_t max_inter(const cmf__moe_layer *L) {
    size_t inter = 0;
    for (int e = 0; e < L->route.n_expert; e++)
        if ((size_t)L->experts[e].gate->rows > inter) inter = (size_t)L->experts[e].gate->rows;
    if (L->shared && (size_t)L->shared->gate->rows > inter) inter = (size_t)L->shared->gate->rows;
    return inter;
}

size_t cmf__moe_batch_scratch_floats(const cmf__moe_layer *L, int64_t n) {
    size_t E = (size_t)L->route.n_expert, H = (size_t)L->hidden, k = (size_t)L->route.top_k, N = (size_t)n;
    /* logits [n][E], scores [E], w [n][k], idx [n][k] (as floats' room), tok list [n],
     * gathered x [n][H], g/u [n][I] each, y [n][H], shared gate [n] */
    return N * E + E + 2 * N * k + N + N * H + 2 * N * max_inter(L) + N * H + N + 1;
}

/* Adds bias b[dim] to n rows of y (stride). */
static void add_rows(float *y, int64_t stride, int64_t n, const float *b, int64_t dim) {
    if (!b) return;
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < dim; i++) y[t * stride + i] += b[i];
}

/* y[cnt][H] = FFN_e(xs[cnt][H]) */
static void ffn_rows(const cmf__moe_expert *e, const cmf__act_params *act, const cmf__matmul *mm, const float *xs,
                     int64_t cnt, int64_t H, float *g, float *u, float *y) {
    int64_t I = e->gate->rows;
    cmf__archs_matmul(mm, e->gate, xs, H, cnt, g, I);
    cmf__archs_matmul(mm, e->up, xs, H, cnt, u, I);
    add_rows(g, I, cnt, e->gate_bias, I);
    add_rows(u, I, cnt, e->up_bias, I);
    cmf__act_glu(act, g, u, g, (int)(cnt * I));
    cmf__archs_matmul(mm, e->down, g, I, cnt, y, H);
    add_rows(y, H, cnt, e->down_bias, H);
}

void cmf__moe_forward_batch(const cmf__moe_layer *L, const uint8_t *routable, const cmf__matmul *mm, const float *x,
                            int64_t n, float *out, float *scratch) {
    const int64_t E = L->route.n_expert, H = L->hidden, k = L->route.top_k, I = (int64_t)max_inter(L);
    float *logits = scratch, *scores = logits + n * E, *w = scores + E, *idxf = w + n * k, *tokf = idxf + n * k,
          *xs = tokf + n, *g = xs + n * H, *u = g + n * I, *y = u + n * I, *sg = y + n * H;
    int *idx = (int *)(void *)idxf, *tok = (int *)(void *)tokf; /* int and float are both 4 bytes */
    cmf__archs_matmul(mm, L->router, x, H, n, logits, E);
    int *n_sel = (int *)(void *)sg; /* sg doubles as [n] selection counts until the shared gate */
    for (int64_t t = 0; t < n; t++) {
        float *lt = logits + t * E;
        if (L->router_bias)
            for (int64_t e = 0; e < E; e++) lt[e] += L->router_bias[e];
        n_sel[t] = cmf__moe_route(&L->route, lt, L->expert_bias, routable, scores, idx + t * k, w + t * k);
    }
    memset(out, 0, sizeof(float) * (size_t)(n * H));
    for (int64_t e = 0; e < E; e++) {
        int64_t cnt = 0;
        for (int64_t t = 0; t < n; t++)
            for (int j = 0; j < n_sel[t]; j++)
                if (idx[t * k + j] == e) tok[cnt++] = (int)(t * k + j);
        if (!cnt) continue; /* an expert nobody chose is never read */
        for (int64_t c = 0; c < cnt; c++) memcpy(xs + c * H, x + (tok[c] / k) * H, sizeof(float) * (size_t)H);
        ffn_rows(&L->experts[e], &L->act, mm, xs, cnt, H, g, u, y);
        for (int64_t c = 0; c < cnt; c++) {
            float *o = out + (tok[c] / k) * H, wt = w[tok[c]];
            for (int64_t i = 0; i < H; i++) o[i] += wt * y[c * H + i];
        }
    }
    if (L->shared) {
        if (L->shared_gate) cmf__archs_matmul(mm, L->shared_gate, x, H, n, sg, 1);
        /* g/u/y have room for n rows: the shared expert runs once over all tokens */
        ffn_rows(L->shared, &L->act, mm, x, n, H, g, u, y);
        for (int64_t t = 0; t < n; t++) {
            float gt = L->shared_gate ? cmf__act_sigmoid(sg[t]) : 1.0f;
            for (int64_t i = 0; i < H; i++) out[t * H + i] += gt * y[t * H + i];
        }
    }
}
