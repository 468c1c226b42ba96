#version 450
// matmul_coop.comp — the prompt-chunk GEMM on NVIDIA tensor cores
// (GL_NV_cooperative_matrix; chosen only where the device has it, with
// f16 x f16 -> f32 at 16 x 16 x 16 in subgroups of 32): dst[t][o] = sum_i
// W[o][i] * a[t][i] (+ bias v[o]) for weights stored at 16 bits or less.
// One workgroup (4 subgroups) per tile of 64 tokens x 128 output rows, 32
// columns a step. Each subgroup multiplies 32 tokens x 64 rows (2 x 4
// fragments, f32 accumulators: six fragment loads for eight products).
// The next step's weights (decoded by w_quad) and activations (16-byte
// loads where the offsets allow) are fetched into registers while the
// tensor cores work on the current step, then rounded to f16 into shared
// memory. Each 16 x 16 result goes out through a small per-subgroup
// staging area (the bias added, the edges cut). Needs cols % 4 (checked
// when recording). Same push constants as matmul_tiled.comp.
// u: 0 d_off, 1 d_nb, 2 a_off, 3 a_nb, 6 n_tok, 8 dtype, 9 w_rows, 10 w_cols, 11 has_bias
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#include "common.glsl"
#include "wquad.glsl"
layout(std430, binding = 1) readonly buffer BA4 { vec4 a4[]; };
layout(local_size_x = 128) in;
#define BK 32u
#define TM 64u  /* tokens a workgroup */
#define TN 128u /* output rows a workgroup */
#define SK 40u  /* row pitch of the f16 tiles (16-byte multiples, fewer bank conflicts) */
shared float16_t As[TM * SK], Ws[TN * SK];
shared float Cs[4u * 256u]; /* one 16 x 16 result per subgroup */
#define FRAG fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

vec4 wr[8], ar[4]; /* this invocation's share of the next step: 8 weight quads, 4 activation quads */

/* Quad e of this invocation in a tile row of BK columns: row q / 8, columns (q % 8) * 4.. */
void fetch(uint k0, uint l, uint o0, uint t0)
{
    const uint nr = p.u[9], nc = p.u[10], n = p.u[6], dt = p.u[8];
    const bool vec_a = (p.u[2] & 3u) == 0u && (p.u[3] & 3u) == 0u;
    [[unroll]] for (uint e = 0u; e < 8u; e++) {
        uint q = l + 128u * e, o = o0 + (q >> 3), col = k0 + ((q & 7u) << 2);
        wr[e] = o < nr && col < nc ? w_quad(dt, o, col, nr, nc) : vec4(0.0);
    }
    [[unroll]] for (uint e = 0u; e < 4u; e++) {
        uint q = l + 128u * e, t = t0 + (q >> 3), col = k0 + ((q & 7u) << 2);
        uint at = p.u[2] + t * p.u[3] + col;
        if (t >= n || col >= nc) ar[e] = vec4(0.0);
        else if (vec_a) ar[e] = a4[at >> 2];
        else ar[e] = vec4(uintBitsToFloat(a[at]), uintBitsToFloat(a[at + 1u]), uintBitsToFloat(a[at + 2u]),
                          uintBitsToFloat(a[at + 3u]));
    }
}

void main()
{
    const uint l = gl_LocalInvocationID.x, sg = l / 32u, lane = l % 32u, sm = sg / 2u, sn = sg % 2u;
    const uint o0 = gl_WorkGroupID.x * TN, t0 = gl_WorkGroupID.y * TM;
    const uint nr = p.u[9], nc = p.u[10], n = p.u[6];
    ACC acc[2][4];
    [[unroll]] for (uint i = 0u; i < 2u; i++)
        [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] = ACC(0.0);
    fetch(0u, l, o0, t0);
    for (uint k0 = 0u; k0 < nc; k0 += BK) {
        [[unroll]] for (uint e = 0u; e < 8u; e++) {
            uint q = l + 128u * e, s = (q >> 3) * SK + ((q & 7u) << 2);
            [[unroll]] for (uint f = 0u; f < 4u; f++) Ws[s + f] = float16_t(wr[e][f]);
        }
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            uint q = l + 128u * e, s = (q >> 3) * SK + ((q & 7u) << 2);
            [[unroll]] for (uint f = 0u; f < 4u; f++) As[s + f] = float16_t(ar[e][f]);
        }
        barrier();
        if (k0 + BK < nc) fetch(k0 + BK, l, o0, t0); /* in flight while the tensor cores run */
        [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
            FRAG fa[2], fb[4];
            [[unroll]] for (uint i = 0u; i < 2u; i++) coopMatLoadNV(fa[i], As, (32u * sm + 16u * i) * SK + kk, SK, false);
            [[unroll]] for (uint j = 0u; j < 4u; j++) coopMatLoadNV(fb[j], Ws, (64u * sn + 16u * j) * SK + kk, SK, true);
            [[unroll]] for (uint i = 0u; i < 2u; i++)
                [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
        }
        barrier();
    }
    const bool bias = p.u[11] != 0u;
    [[unroll]] for (uint i = 0u; i < 2u; i++)
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            coopMatStoreNV(acc[i][j], Cs, sg * 256u, 16u, false);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            [[unroll]] for (uint e = 0u; e < 8u; e++) {
                uint idx = lane + 32u * e, t = t0 + 32u * sm + 16u * i + (idx >> 4), o = o0 + 64u * sn + 16u * j + (idx & 15u);
                if (t < n && o < nr)
                    d[p.u[0] + t * p.u[1] + o] = floatBitsToUint(Cs[sg * 256u + idx] + (bias ? uintBitsToFloat(v[o]) : 0.0));
            }
            subgroupBarrier(); /* read before the next fragment overwrites it */
        }
}
