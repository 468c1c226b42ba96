/* deltanet.c — gated DeltaNet (deltanet.h). The token step is the
 * reference recurrence: S ← S·e^g; S ← S + k ⊗ β(v − Sᵀk); o = Sᵀq. The
 * chunked core is the WY/UT form the reference prefill uses; both are kept
 * so tests can pin one to the other (they agree to f32 rounding). */
#include "compute/deltanet.h"

#include "util/error.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t cmf__gdn_conv_dim(const cmf__gdn_dims *d) {
    return 2 * (size_t)d->n_k_heads * d->k_dim + (size_t)d->n_v_heads * d->v_dim;
}
size_t cmf__gdn_conv_floats(const cmf__gdn_dims *d) {
    return (size_t)(d->conv_k - 1) * cmf__gdn_conv_dim(d);
}
size_t cmf__gdn_rec_floats(const cmf__gdn_dims *d) {
    return (size_t)d->n_v_heads * d->k_dim * d->v_dim;
}
size_t cmf__gdn_scratch_floats(const cmf__gdn_dims *d) {
    size_t C = cmf__gdn_conv_dim(d), nvdv = (size_t)d->n_v_heads * d->v_dim;
    /* qkvz + ba + mixed + conv out + o + per-head q,k */
    return (C + nvdv) + 2 * (size_t)d->n_v_heads + C + C + nvdv + 2 * (size_t)d->k_dim;
}

void cmf__gdn_state_reset(const cmf__gdn_dims *d, cmf__gdn_state *s) {
    if (s->conv) memset(s->conv, 0, sizeof(float) * cmf__gdn_conv_floats(d));
    if (s->S) memset(s->S, 0, sizeof(float) * cmf__gdn_rec_floats(d));
}

cmf_status cmf__gdn_check(const cmf__gdn_dims *d, const cmf__gdn_weights *w, const char *what) {
    if (d->n_k_heads < 1 || d->n_v_heads < 1 || d->n_v_heads % d->n_k_heads || d->k_dim < 1 || d->v_dim < 1 ||
        d->conv_k < 1)
        return cmf__error(CMF_ERR_CONFIG,
                          "%s: linear attention dims: key heads %d, value heads %d (a multiple), key dim %d, "
                          "value dim %d, conv kernel %d",
                          what, d->n_k_heads, d->n_v_heads, d->k_dim, d->v_dim, d->conv_k);
    int64_t nkdk = (int64_t)d->n_k_heads * d->k_dim, nvdv = (int64_t)d->n_v_heads * d->v_dim;
    if (!w->in_qkvz || w->in_qkvz->rows != 2 * nkdk + 2 * nvdv || w->in_qkvz->cols != d->hidden)
        return cmf__error(CMF_ERR_CONFIG, "%s: linear_attn.in_proj_qkvz.weight shape [%lld,%lld], expected [%lld,%d]",
                          what, w->in_qkvz ? (long long)w->in_qkvz->rows : 0LL,
                          w->in_qkvz ? (long long)w->in_qkvz->cols : 0LL, (long long)(2 * nkdk + 2 * nvdv), d->hidden);
    if (!w->in_ba || w->in_ba->rows != 2 * d->n_v_heads || w->in_ba->cols != d->hidden)
        return cmf__error(CMF_ERR_CONFIG, "%s: linear_attn.in_proj_ba.weight shape [%lld,%lld], expected [%d,%d]", what,
                          w->in_ba ? (long long)w->in_ba->rows : 0LL, w->in_ba ? (long long)w->in_ba->cols : 0LL,
                          2 * d->n_v_heads, d->hidden);
    if (!w->out || w->out->rows != d->hidden || w->out->cols != nvdv)
        return cmf__error(CMF_ERR_CONFIG, "%s: linear_attn.out_proj.weight shape [%lld,%lld], expected [%d,%lld]", what,
                          w->out ? (long long)w->out->rows : 0LL, w->out ? (long long)w->out->cols : 0LL, d->hidden,
                          (long long)nvdv);
    if (!w->conv_w || !w->A_log || !w->dt_bias || !w->norm_w)
        return cmf__error(CMF_ERR_CONFIG, "%s: linear_attn conv1d / A_log / dt_bias / norm missing", what);
    return CMF_OK;
}

static void l2norm(float *x, int n) {
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss + 1e-6));
    for (int i = 0; i < n; i++) x[i] *= inv;
}

/* One recurrence step of one head: S [dk][dv]. */
static void core_step(int dk, int dv, const float *q, const float *k, const float *v, float g, float beta,
                      float *S, float *o) {
    float decay = expf(g);
    for (int i = 0; i < dk * dv; i++) S[i] *= decay;
    for (int j = 0; j < dv; j++) {
        float mem = 0.0f;
        for (int i = 0; i < dk; i++) mem += S[i * dv + j] * k[i];
        float delta = (v[j] - mem) * beta;
        for (int i = 0; i < dk; i++) S[i * dv + j] += k[i] * delta;
    }
    for (int j = 0; j < dv; j++) {
        float acc = 0.0f;
        for (int i = 0; i < dk; i++) acc += S[i * dv + j] * q[i];
        o[j] = acc;
    }
}

void cmf__gdn_core_recurrent(int T, int dk, int dv, const float *q, const float *k, const float *v,
                             const float *g, const float *beta, float *S, float *o) {
    for (int t = 0; t < T; t++)
        core_step(dk, dv, q + (size_t)t * dk, k + (size_t)t * dk, v + (size_t)t * dv, g[t], beta[t], S,
                  o + (size_t)t * dv);
}

void cmf__gdn_core_chunked(int T, int dk, int dv, int chunk, const float *q, const float *k,
                           const float *v, const float *g, const float *beta, float *S, float *o,
                           float *scratch) {
    int C = chunk;
    float *gc = scratch, *A = gc + C, *A2 = A + (size_t)C * C, *U = A2 + (size_t)C * C, *Wk = U + (size_t)C * dv,
          *vn = Wk + (size_t)C * dk, *eg = vn + (size_t)C * dv;
    for (int t0 = 0; t0 < T; t0 += C) {
        int c = T - t0 < C ? T - t0 : C;
        const float *qc = q + (size_t)t0 * dk, *kc = k + (size_t)t0 * dk, *vc = v + (size_t)t0 * dv;
        float acc = 0.0f;
        for (int i = 0; i < c; i++) { acc += g[t0 + i]; gc[i] = acc; eg[i] = expf(acc); }
        /* A = -(β_i k_i · k_j) e^{gc_i − gc_j} strictly below the diagonal, then (I − A)^-1 by
         * forward substitution over rows, as the reference does. */
        for (int i = 0; i < c; i++)
            for (int j = 0; j < c; j++) {
                float val = 0.0f;
                if (j < i) {
                    float dot = 0.0f;
                    for (int m = 0; m < dk; m++) dot += kc[i * dk + m] * kc[j * dk + m];
                    val = -beta[t0 + i] * dot * expf(gc[i] - gc[j]);
                }
                A[i * C + j] = val;
            }
        /* row i uses its old values and the already-updated rows above it */
        for (int i = 1; i < c; i++) {
            for (int j = 0; j < i; j++) {
                float add = 0.0f;
                for (int m = 0; m < i; m++) add += A[i * C + m] * A[m * C + j];
                A2[j] = A[i * C + j] + add;
            }
            for (int j = 0; j < i; j++) A[i * C + j] = A2[j];
        }
        for (int i = 0; i < c; i++) A[i * C + i] = 1.0f;
        /* U = T·(β v), Wk = T·(β k e^{gc}) */
        for (int i = 0; i < c; i++) {
            for (int j = 0; j < dv; j++) {
                float s = 0.0f;
                for (int m = 0; m <= i; m++) s += A[i * C + m] * beta[t0 + m] * vc[m * dv + j];
                U[i * dv + j] = s;
            }
            for (int j = 0; j < dk; j++) {
                float s = 0.0f;
                for (int m = 0; m <= i; m++) s += A[i * C + m] * beta[t0 + m] * kc[m * dk + j] * eg[m];
                Wk[i * dk + j] = s;
            }
        }
        /* v_new = U − Wk·S */
        for (int i = 0; i < c; i++)
            for (int j = 0; j < dv; j++) {
                float s = 0.0f;
                for (int m = 0; m < dk; m++) s += Wk[i * dk + m] * S[m * dv + j];
                vn[i * dv + j] = U[i * dv + j] - s;
            }
        /* o_i = e^{gc_i} q_i·S + Σ_{j<=i} (q_i·k_j) e^{gc_i − gc_j} v_new_j */
        for (int i = 0; i < c; i++) {
            for (int j = 0; j <= i; j++) {
                float dot = 0.0f;
                for (int m = 0; m < dk; m++) dot += qc[i * dk + m] * kc[j * dk + m];
                A2[j] = dot * expf(gc[i] - gc[j]);
            }
            for (int jv = 0; jv < dv; jv++) {
                float s = 0.0f;
                for (int m = 0; m < dk; m++) s += qc[i * dk + m] * S[m * dv + jv];
                s *= eg[i];
                for (int j = 0; j <= i; j++) s += A2[j] * vn[j * dv + jv];
                o[(size_t)(t0 + i) * dv + jv] = s;
            }
        }
        /* S = S e^{gc_last} + Σ_i (k_i e^{gc_last − gc_i}) ⊗ v_new_i */
        float glast = gc[c - 1], elast = eg[c - 1];
        for (int m = 0; m < dk; m++)
            for (int jv = 0; jv < dv; jv++) {
                float s = S[m * dv + jv] * elast;
                for (int i = 0; i < c; i++) s += kc[i * dk + m] * expf(glast - gc[i]) * vn[i * dv + jv];
                S[m * dv + jv] = s;
            }
    }
}

void cmf__gdn_step(const cmf__gdn_dims *d, const cmf__gdn_weights *w, cmf__gdn_state *s,
                   const cmf__matvec *mv, const float *x, float *out, float *scratch) {
    int nk = d->n_k_heads, nv = d->n_v_heads, dk = d->k_dim, dv = d->v_dim, K = d->conv_k;
    int r = nv / nk;
    size_t C = cmf__gdn_conv_dim(d), nkdk = (size_t)nk * dk, nvdv = (size_t)nv * dv;
    float *qkvz = scratch, *ba = qkvz + C + nvdv, *mixed = ba + 2 * (size_t)nv, *conv = mixed + C,
          *o = conv + C, *qh = o + nvdv, *kh = qh + dk;
    cmf__archs_matvec(mv, w->in_qkvz, x, qkvz);
    cmf__archs_matvec(mv, w->in_ba, x, ba);

    /* ungroup: per key head g the rows are q[dk] k[dk] v[r·dv] z[r·dv]; ba rows b[r] a[r] */
    size_t grp = 2 * (size_t)dk + 2 * (size_t)r * dv;
    for (int gi = 0; gi < nk; gi++) {
        const float *src = qkvz + gi * grp;
        memcpy(mixed + (size_t)gi * dk, src, sizeof(float) * dk);
        memcpy(mixed + nkdk + (size_t)gi * dk, src + dk, sizeof(float) * dk);
        memcpy(mixed + 2 * nkdk + (size_t)gi * r * dv, src + 2 * dk, sizeof(float) * r * dv);
    }
    /* depthwise causal conv over [state (K-1 steps), current], then SiLU */
    for (size_t c = 0; c < C; c++) {
        const float *wc = w->conv_w + c * K;
        float acc = 0.0f;
        for (int i = 0; i < K - 1; i++) acc += s->conv[(size_t)i * C + c] * wc[i];
        acc += mixed[c] * wc[K - 1];
        conv[c] = cmf__act_silu(acc);
    }
    if (K > 1) {
        memmove(s->conv, s->conv + C, sizeof(float) * (size_t)(K - 2) * C);
        memcpy(s->conv + (size_t)(K - 2) * C, mixed, sizeof(float) * C);
    }
    float qscale = 1.0f / sqrtf((float)dk);
    for (int h = 0; h < nv; h++) {
        int gi = h / r, j = h % r;
        memcpy(qh, conv + (size_t)gi * dk, sizeof(float) * dk);
        memcpy(kh, conv + nkdk + (size_t)gi * dk, sizeof(float) * dk);
        l2norm(qh, dk);
        l2norm(kh, dk);
        for (int i = 0; i < dk; i++) qh[i] *= qscale;
        float b = ba[(size_t)gi * 2 * r + j], a = ba[(size_t)gi * 2 * r + r + j];
        float beta = cmf__act_sigmoid(b);
        float g = -expf(w->A_log[h]) * cmf__act_softplus(a + w->dt_bias[h]);
        float *oh = o + (size_t)h * dv;
        core_step(dk, dv, qh, kh, conv + 2 * nkdk + (size_t)h * dv, g, beta, s->S + (size_t)h * dk * dv, oh);
        /* gated RMSNorm: x̂·w · silu(z) */
        const float *z = qkvz + gi * grp + 2 * dk + (size_t)r * dv + (size_t)j * dv;
        cmf__archs_rmsnorm(oh, w->norm_w, false, d->eps, oh, dv);
        for (int i = 0; i < dv; i++) oh[i] *= cmf__act_silu(z[i]);
    }
    cmf__archs_matvec(mv, w->out, o, out);
}

cmf_status cmf__gdn_prefill(const cmf__gdn_dims *d, const cmf__gdn_weights *w, cmf__gdn_state *s,
                            const cmf__matvec *mv, int T, const float *x, float *out, int chunk) {
    int nk = d->n_k_heads, nv = d->n_v_heads, dk = d->k_dim, dv = d->v_dim, K = d->conv_k, H = d->hidden;
    int r = nv / nk;
    if (T <= 0) return CMF_OK;
    if (chunk < 1) chunk = 64;
    size_t C = cmf__gdn_conv_dim(d), nkdk = (size_t)nk * dk, nvdv = (size_t)nv * dv;
    size_t grp = 2 * (size_t)dk + 2 * (size_t)r * dv, qkvz_n = C + nvdv;
    size_t n_work = (size_t)T * (qkvz_n + 2 * (size_t)nv + C + C + nvdv) +
                    (size_t)T * (2 * (size_t)dk + (size_t)dv + (size_t)dv + 2) +
                    (size_t)chunk * (2 * (size_t)chunk + 2 * (size_t)dk + 2 * (size_t)dv + 2);
    float *work = malloc(sizeof(float) * n_work);
    if (!work) return cmf__error(CMF_ERR_NOMEM, "linear attention prefill: %zu floats", n_work);
    float *qkvz = work, *ba = qkvz + (size_t)T * qkvz_n, *mixed = ba + (size_t)T * 2 * nv,
          *conv = mixed + (size_t)T * C, *o = conv + (size_t)T * C, *qh = o + (size_t)T * nvdv,
          *kh = qh + (size_t)T * dk, *vh = kh + (size_t)T * dk, *oh = vh + (size_t)T * dv, *gh = oh + (size_t)T * dv,
          *bh = gh + T, *cs = bh + T;
    for (int t = 0; t < T; t++) {
        float *qz = qkvz + (size_t)t * qkvz_n, *mx = mixed + (size_t)t * C;
        cmf__archs_matvec(mv, w->in_qkvz, x + (size_t)t * H, qz);
        cmf__archs_matvec(mv, w->in_ba, x + (size_t)t * H, ba + (size_t)t * 2 * nv);
        for (int gi = 0; gi < nk; gi++) {
            const float *src = qz + gi * grp;
            memcpy(mx + (size_t)gi * dk, src, sizeof(float) * dk);
            memcpy(mx + nkdk + (size_t)gi * dk, src + dk, sizeof(float) * dk);
            memcpy(mx + 2 * nkdk + (size_t)gi * r * dv, src + 2 * dk, sizeof(float) * r * dv);
        }
    }
    /* causal conv over [state, prompt]; input at time τ < 0 comes from the state */
    for (int t = 0; t < T; t++)
        for (size_t c = 0; c < C; c++) {
            const float *wc = w->conv_w + c * K;
            float acc = 0.0f;
            for (int i = 0; i < K; i++) {
                int tau = t - (K - 1) + i;
                float in = tau >= 0 ? mixed[(size_t)tau * C + c] : s->conv[(size_t)(K - 1 + tau) * C + c];
                acc += in * wc[i];
            }
            conv[(size_t)t * C + c] = cmf__act_silu(acc);
        }
    for (int i = 0; i < K - 1; i++) { /* new state: the last K-1 inputs */
        int tau = T - (K - 1) + i;
        float *dst = s->conv + (size_t)i * C;
        if (tau >= 0) memcpy(dst, mixed + (size_t)tau * C, sizeof(float) * C);
        else memmove(dst, s->conv + (size_t)(K - 1 + tau) * C, sizeof(float) * C);
    }
    float qscale = 1.0f / sqrtf((float)dk);
    for (int h = 0; h < nv; h++) {
        int gi = h / r, j = h % r;
        for (int t = 0; t < T; t++) {
            const float *ct = conv + (size_t)t * C;
            float *qt = qh + (size_t)t * dk, *kt = kh + (size_t)t * dk;
            memcpy(qt, ct + (size_t)gi * dk, sizeof(float) * dk);
            memcpy(kt, ct + nkdk + (size_t)gi * dk, sizeof(float) * dk);
            memcpy(vh + (size_t)t * dv, ct + 2 * nkdk + (size_t)h * dv, sizeof(float) * dv);
            l2norm(qt, dk);
            l2norm(kt, dk);
            for (int i = 0; i < dk; i++) qt[i] *= qscale;
            const float *bat = ba + (size_t)t * 2 * nv;
            bh[t] = cmf__act_sigmoid(bat[(size_t)gi * 2 * r + j]);
            gh[t] = -expf(w->A_log[h]) * cmf__act_softplus(bat[(size_t)gi * 2 * r + r + j] + w->dt_bias[h]);
        }
        cmf__gdn_core_chunked(T, dk, dv, chunk, qh, kh, vh, gh, bh, s->S + (size_t)h * dk * dv, oh, cs);
        for (int t = 0; t < T; t++) {
            float *ot = o + (size_t)t * nvdv + (size_t)h * dv;
            const float *z = qkvz + (size_t)t * qkvz_n + gi * grp + 2 * dk + (size_t)r * dv + (size_t)j * dv;
            cmf__archs_rmsnorm(oh + (size_t)t * dv, w->norm_w, false, d->eps, ot, dv);
            for (int i = 0; i < dv; i++) ot[i] *= cmf__act_silu(z[i]);
        }
    }
    for (int t = 0; t < T; t++) cmf__archs_matvec(mv, w->out, o + (size_t)t * nvdv, out + (size_t)t * H);
    free(work);
    return CMF_OK;
}
