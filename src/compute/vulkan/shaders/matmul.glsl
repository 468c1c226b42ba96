// matmul.glsl — the body of matmul.comp and matmul_sg.comp:
// dst[t][o] = sum_i W[o][i] * a[t][i] (+ bias v[o] when has_bias), for a few tokens: one workgroup per (output row o, block of
// TB tokens); o = x + 65535 z (row counts past the 65535 workgroup limit of
// one dimension). The weight row is read once per block, 16 bytes a load
// for f16 / bf16 (cols % 8 == 0) and q8_row (cols % 16 == 0), each value
// kept in registers for the block's tokens; other shapes and dtypes go
// through weight_at. The decode step (one token) and small batches; the
// tiled GEMM (matmul_tiled.comp) takes prompt chunks. With SUBGROUP the
// partial sums are reduced by subgroupAdd, then across subgroups; without,
// by a shared-memory tree. Include after #version (and the define).
// Push constants: PC_MM_* (pc.h); with a selection only the tokens whose
// word c[sel_off + t * sel_nb] is nonzero are computed (MoE experts).
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif
#include "common.glsl"
layout(std430, binding = 4) readonly buffer BW4 { uvec4 w4[]; };
#define TB 4
layout(local_size_x = 64) in;
shared float part[TB][64];
float A(uint t, uint i) { return uintBitsToFloat(a[p.u[PC_A_OFF] + t * p.u[PC_A_NB] + i]); }
void main()
{
    uint o = gl_WorkGroupID.x + gl_WorkGroupID.z * 65535u, t0 = gl_WorkGroupID.y * TB, tid = gl_LocalInvocationID.x;
    if (o >= p.u[PC_MM_W_ROWS]) return; /* uniform per workgroup: no barrier is skipped by part of it */
    uint nt = min(uint(TB), p.u[PC_N_TOK] - t0), nc = p.u[PC_MM_W_COLS], dt = p.u[PC_MM_DTYPE];
    bool on[TB];
    bool any_on = false;
    [[unroll]] for (uint k = 0u; k < TB; k++) {
        on[k] = k < nt && (p.u[PC_MM_HAS_SEL] == 0u || c[p.u[PC_MM_SEL_OFF] + (t0 + k) * p.u[PC_MM_SEL_NB]] != 0u);
        any_on = any_on || on[k];
    }
    if (!any_on) return;
    float acc[TB];
    [[unroll]] for (uint k = 0u; k < TB; k++) acc[k] = 0.0;
    if ((dt == 1u || dt == 2u) && nc % 8u == 0u) { /* 8 halves per 16 bytes */
        uint row = o * (nc / 8u);
        for (uint j = tid; j < nc / 8u; j += 64u) {
            uvec4 q = w4[row + j];
            float wv[8];
            if (dt == 1u) {
                vec2 h0 = unpackHalf2x16(q.x), h1 = unpackHalf2x16(q.y), h2 = unpackHalf2x16(q.z), h3 = unpackHalf2x16(q.w);
                wv = float[8](h0.x, h0.y, h1.x, h1.y, h2.x, h2.y, h3.x, h3.y);
            } else {
                wv = float[8](uintBitsToFloat(q.x << 16), uintBitsToFloat(q.x & 0xffff0000u), uintBitsToFloat(q.y << 16),
                              uintBitsToFloat(q.y & 0xffff0000u), uintBitsToFloat(q.z << 16),
                              uintBitsToFloat(q.z & 0xffff0000u), uintBitsToFloat(q.w << 16),
                              uintBitsToFloat(q.w & 0xffff0000u));
            }
            [[unroll]] for (uint k = 0u; k < TB; k++) {
                if (!on[k]) continue;
                float s = 0.0;
                [[unroll]] for (uint e = 0u; e < 8u; e++) s += wv[e] * A(t0 + k, 8u * j + e);
                acc[k] += s;
            }
        }
    } else if (dt == 3u && nc % 16u == 0u) { /* 16 int8 per 16 bytes, the row's f16 scale after */
        uint row = o * (nc / 16u);
        for (uint j = tid; j < nc / 16u; j += 64u) {
            uvec4 q = w4[row + j];
            float wv[16];
            [[unroll]] for (uint e = 0u; e < 4u; e++) {
                uint x = q[e];
                wv[4u * e] = float(bitfieldExtract(int(x), 0, 8));
                wv[4u * e + 1u] = float(bitfieldExtract(int(x), 8, 8));
                wv[4u * e + 2u] = float(bitfieldExtract(int(x), 16, 8));
                wv[4u * e + 3u] = float(bitfieldExtract(int(x), 24, 8));
            }
            [[unroll]] for (uint k = 0u; k < TB; k++) {
                if (!on[k]) continue;
                float s = 0.0;
                [[unroll]] for (uint e = 0u; e < 16u; e++) s += wv[e] * A(t0 + k, 16u * j + e);
                acc[k] += s;
            }
        }
        float sc = half_at(p.u[PC_MM_W_ROWS] * nc + 2u * o);
        [[unroll]] for (uint k = 0u; k < TB; k++) acc[k] *= sc;
    } else {
        for (uint i = tid; i < nc; i += 64u) {
            float wv = weight_at(dt, o, i, p.u[PC_MM_W_ROWS], nc);
            [[unroll]] for (uint k = 0u; k < TB; k++)
                if (on[k]) acc[k] += wv * A(t0 + k, i);
        }
    }
#ifdef SUBGROUP
    [[unroll]] for (uint k = 0u; k < TB; k++) {
        float s = subgroupAdd(acc[k]);
        if (subgroupElect()) part[k][gl_SubgroupID] = s;
    }
    barrier();
    if (tid < TB && on[tid]) {
        float s = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; i++) s += part[tid][i];
        d[p.u[PC_DST_OFF] + (t0 + tid) * p.u[PC_DST_NB] + o] =
            floatBitsToUint(s + (p.u[PC_MM_HAS_BIAS] != 0u ? uintBitsToFloat(v[o]) : 0.0));
    }
#else
    [[unroll]] for (uint k = 0u; k < TB; k++) part[k][tid] = acc[k];
    barrier();
    for (uint s = 32u; s > 0u; s >>= 1) {
        if (tid < s)
            [[unroll]] for (uint k = 0u; k < TB; k++) part[k][tid] += part[k][tid + s];
        barrier();
    }
    if (tid < TB && on[tid])
        d[p.u[PC_DST_OFF] + (t0 + tid) * p.u[PC_DST_NB] + o] =
            floatBitsToUint(part[tid][0] + (p.u[PC_MM_HAS_BIAS] != 0u ? uintBitsToFloat(v[o]) : 0.0));
#endif
}
