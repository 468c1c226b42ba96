#version 450
// ple_mix.comp — Gemma-4 per-layer inputs, one workgroup per (token t,
// layer l), in place on dst = model_projection . x (already there):
// y = rms(y * pscale) * norm (v; 1 + norm when plus_one), then
// (y + E[id_t][l*P + i] * escale) * mix with E the per-layer embedding (w).
// Push constants: PC_PLE_* (pc.h), P = PC_PLE_PER_LAYER.
#include "common.glsl"
layout(local_size_x = 64) in;
shared float red[64];
void main()
{
    uint L = p.u[PC_PLE_N_LAYERS], P = p.u[PC_PLE_PER_LAYER];
    uint t = group_index() / L, l = group_index() % L, tid = gl_LocalInvocationID.x;
    if (t >= p.u[PC_N_TOK]) return; /* past the last token: the whole workgroup */
    uint o = p.u[PC_DST_OFF] + t * p.u[PC_DST_NB] + l * P;
    float ss = 0.0;
    for (uint i = tid; i < P; i += 64u) {
        float x = uintBitsToFloat(d[o + i]) * p.f[PC_PLE_PSCALE];
        ss += x * x;
    }
    red[tid] = ss;
    barrier();
    for (uint s = 32u; s > 0u; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        barrier();
    }
    float inv = 1.0 / sqrt(red[0] / float(P) + p.f[PC_PLE_EPS]);
    uint tok = uint(int(a[p.u[PC_A_OFF] + t * p.u[PC_A_NB]]));
    for (uint i = tid; i < P; i += 64u) {
        float g = uintBitsToFloat(v[i]), x = uintBitsToFloat(d[o + i]) * p.f[PC_PLE_PSCALE];
        float y = x * inv * (p.u[PC_PLE_PLUS_ONE] != 0u ? 1.0 + g : g);
        float e = weight_at(p.u[PC_PLE_DTYPE], tok, l * P + i, p.u[PC_PLE_W_ROWS], p.u[PC_PLE_W_COLS]) * p.f[PC_PLE_ESCALE];
        d[o + i] = floatBitsToUint((y + e) * p.f[PC_PLE_MIX]);
    }
}
