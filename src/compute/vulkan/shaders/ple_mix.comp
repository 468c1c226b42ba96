#version 450
// ple_mix.comp — Gemma-4 per-layer inputs, one workgroup per (token t,
// layer l), in place on dst = model_projection . x (already there):
// y = rms(y * pscale) * norm (v; 1 + norm when plus_one), then
// (y + E[id_t][l*P + i] * escale) * mix with E the per-layer embedding (w).
// u: 0 d_off, 1 d_nb, 2 a_off (ids), 3 a_nb, 6 n_tok, 7 n_layers, 8 P, 9 dtype,
// 10 w_rows, 11 w_cols, 12 plus_one; f0 eps, f1 pscale, f2 escale, f3 mix
#include "common.glsl"
layout(local_size_x = 64) in;
shared float red[64];
void main()
{
    uint L = p.u[7], P = p.u[8], t = group_index() / L, l = group_index() % L, tid = gl_LocalInvocationID.x;
    if (t >= p.u[6]) return; /* past the last token: the whole workgroup */
    uint o = p.u[0] + t * p.u[1] + l * P;
    float ss = 0.0;
    for (uint i = tid; i < P; i += 64u) {
        float x = uintBitsToFloat(d[o + i]) * p.f[1];
        ss += x * x;
    }
    red[tid] = ss;
    barrier();
    for (uint s = 32u; s > 0u; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        barrier();
    }
    float inv = 1.0 / sqrt(red[0] / float(P) + p.f[0]);
    uint tok = uint(int(a[p.u[2] + t * p.u[3]]));
    for (uint i = tid; i < P; i += 64u) {
        float g = uintBitsToFloat(v[i]), x = uintBitsToFloat(d[o + i]) * p.f[1];
        float y = x * inv * (p.u[12] != 0u ? 1.0 + g : g);
        float e = weight_at(p.u[9], tok, l * P + i, p.u[10], p.u[11]) * p.f[2];
        d[o + i] = floatBitsToUint((y + e) * p.f[3]);
    }
}
