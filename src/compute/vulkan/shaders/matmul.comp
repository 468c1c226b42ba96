#version 450
// matmul.comp — one workgroup per (output row o, token t); o = x + 65535 z
// (row counts past the 65535 workgroup limit of one dimension):
// dst[t][o] = sum_i W[o][i] * a[t][i] (+ bias v[o] when has_bias).
// u: 0 d_off, 1 d_nb, 2 a_off, 3 a_nb, 6 n_tok, 8 dtype, 9 w_rows, 10 w_cols, 11 has_bias,
// 12 has_sel, 13 sel_off, 14 sel_nb: with has_sel only the tokens whose
// word c[sel_off + t * sel_nb] is nonzero are computed (MoE experts)
#include "common.glsl"
layout(local_size_x = 64) in;
shared float part[64];
void main()
{
    uint o = gl_WorkGroupID.x + gl_WorkGroupID.z * 65535u, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    if (o >= p.u[9]) return; /* uniform per workgroup: no barrier is skipped by part of it */
    if (p.u[12] != 0u && c[p.u[13] + t * p.u[14]] == 0u) return;
    float s = 0.0;
    for (uint i = tid; i < p.u[10]; i += 64u)
        s += weight_at(p.u[8], o, i, p.u[9], p.u[10]) * uintBitsToFloat(a[p.u[2] + t * p.u[3] + i]);
    part[tid] = s;
    barrier();
    for (uint k = 32u; k > 0u; k >>= 1) {
        if (tid < k) part[tid] += part[tid + k];
        barrier();
    }
    if (tid == 0u) d[p.u[0] + t * p.u[1] + o] = floatBitsToUint(part[0] + (p.u[11] != 0u ? uintBitsToFloat(v[o]) : 0.0));
}
