#version 450
// gdn_rec.comp — gated DeltaNet: the delta-rule recurrence, one workgroup
// per value head h, tokens in order (the step form), each invocation
// owning columns j of the head's state S [dk][dv] (x1, in the token's
// sequence row): S *= e^g; S += k (beta (v - S^T k))^T; o = S^T q; then the
// gated RMSNorm o/rms(o) * norm_w * silu(z). q, k, v from the conv output
// (a), z and b/a gates from the grouped projection rows (c), A_log in w,
// dt_bias in v, norm_w in x2. dk, dv <= 256.
// Push constants: PC_REC_* (pc.h); each token's sequence in b.
#include "common.glsl"
layout(local_size_x = 64) in;
shared float qs[256], ks[256], os[256], red[64];
float sum64(float x)
{
    uint tid = gl_LocalInvocationID.x;
    red[tid] = x;
    barrier();
    for (uint s = 32u; s > 0u; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}
float S_at(uint i) { return uintBitsToFloat(x1[i]); }
void main()
{
    uint h = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
    uint dk = p.u[PC_REC_DK], dv = p.u[PC_REC_DV], r = p.u[PC_REC_R], gi = h / r, jj = h % r, nkdk = p.u[PC_REC_NKDK];
    float A = -exp(wf(h)), dtb = uintBitsToFloat(v[h]), qscale = 1.0 / sqrt(float(dk));
    for (uint t = 0u; t < p.u[PC_N_TOK]; t++) {
        uint S0 = p.u[PC_REC_STATE_OFF] + uint(int(b[p.u[PC_B_OFF] + t])) * p.u[PC_REC_STATE_NB] +
                  p.u[PC_REC_CONV_FLOATS] + h * dk * dv;
        uint cr = p.u[PC_A_OFF] + t * p.u[PC_A_NB];
        float sq = 0.0, sk = 0.0;
        for (uint i = tid; i < dk; i += 64u) {
            float q = uintBitsToFloat(a[cr + gi * dk + i]), k = uintBitsToFloat(a[cr + nkdk + gi * dk + i]);
            qs[i] = q, ks[i] = k;
            sq += q * q, sk += k * k;
        }
        sq = sum64(sq);
        sk = sum64(sk);
        float iq = 1.0 / sqrt(sq + 1e-6), ik = 1.0 / sqrt(sk + 1e-6);
        for (uint i = tid; i < dk; i += 64u) qs[i] = qs[i] * iq * qscale, ks[i] = ks[i] * ik;
        barrier();
        uint cz = p.u[PC_REC_C_OFF] + t * p.u[PC_REC_C_NB], ba = cz + p.u[PC_REC_BA_OFF] + gi * 2u * r;
        float beta = 1.0 / (1.0 + exp(-uintBitsToFloat(c[ba + jj])));
        float sp = uintBitsToFloat(c[ba + r + jj]) + dtb;
        float decay = exp(A * (sp > 20.0 ? sp : log(1.0 + exp(sp))));
        float ss = 0.0;
        for (uint j = tid; j < dv; j += 64u) {
            float mem = 0.0;
            for (uint i = 0u; i < dk; i++) {
                float s = S_at(S0 + i * dv + j) * decay;
                x1[S0 + i * dv + j] = floatBitsToUint(s);
                mem += s * ks[i];
            }
            float delta = (uintBitsToFloat(a[cr + 2u * nkdk + h * dv + j]) - mem) * beta, o = 0.0;
            for (uint i = 0u; i < dk; i++) {
                float s = S_at(S0 + i * dv + j) + ks[i] * delta;
                x1[S0 + i * dv + j] = floatBitsToUint(s);
                o += s * qs[i];
            }
            os[j] = o;
            ss += o * o;
        }
        ss = sum64(ss);
        float inv = 1.0 / sqrt(ss / float(dv) + p.f[PC_REC_EPS]);
        uint zr = cz + gi * p.u[PC_REC_GROUP] + 2u * dk + r * dv + jj * dv;
        for (uint j = tid; j < dv; j += 64u) {
            float z = uintBitsToFloat(c[zr + j]);
            d[p.u[PC_DST_OFF] + t * p.u[PC_DST_NB] + h * dv + j] =
                floatBitsToUint(os[j] * inv * uintBitsToFloat(x2[j]) * (z / (1.0 + exp(-z))));
        }
        barrier();
    }
}
