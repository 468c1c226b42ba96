#version 450
// matmul_coop.comp — the prompt-chunk GEMM on NVIDIA tensor cores
// (GL_NV_cooperative_matrix; chosen only where the device has it, with
// f16 x f16 -> f32 at 16 x 16 x 16 in subgroups of 32): dst[t][o] = sum_i
// W[o][i] * a[t][i] (+ bias v[o]) for weights stored at 16 bits or less.
// One workgroup (4 subgroups) per tile of 64 tokens x 64 output rows, 32
// columns a step: the weight tile decoded by w_quad and the activation
// tile rounded to f16 into shared memory, each subgroup multiplying a
// 32 x 32 quarter (2 x 2 fragments, f32 accumulators); the tile goes out
// through shared memory (the bias added, the edges cut). Needs cols % 4
// (checked when recording). Same push constants as matmul_tiled.comp.
// u: 0 d_off, 1 d_nb, 2 a_off, 3 a_nb, 6 n_tok, 8 dtype, 9 w_rows, 10 w_cols, 11 has_bias
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"
#include "wquad.glsl"
layout(local_size_x = 128) in;
#define BK 32u
#define SK 40u /* row pitch of the f16 tiles (16-byte multiples, fewer bank conflicts) */
#define SC 68u /* row pitch of the f32 output tile */
shared float16_t As[64u * SK], Ws[64u * SK];
shared float Cs[64u * SC];
#define FRAG fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
void main()
{
    const uint l = gl_LocalInvocationID.x, sg = l / 32u, wm = sg / 2u, wn = sg % 2u;
    const uint o0 = gl_WorkGroupID.x * 64u, t0 = gl_WorkGroupID.y * 64u;
    const uint nr = p.u[9], nc = p.u[10], n = p.u[6], dt = p.u[8];
    const uint lr = l / 2u, lk = (l % 2u) * 16u; /* this invocation's loads: row / token lr, columns lk..lk+15 */
    ACC acc[2][2];
    [[unroll]] for (uint i = 0u; i < 2u; i++)
        [[unroll]] for (uint j = 0u; j < 2u; j++) acc[i][j] = ACC(0.0);
    for (uint k0 = 0u; k0 < nc; k0 += BK) {
        [[unroll]] for (uint e = 0u; e < 16u; e += 4u) {
            uint col = k0 + lk + e;
            vec4 q = o0 + lr < nr && col < nc ? w_quad(dt, o0 + lr, col, nr, nc) : vec4(0.0);
            [[unroll]] for (uint f = 0u; f < 4u; f++) Ws[lr * SK + lk + e + f] = float16_t(q[f]);
        }
        const bool tin = t0 + lr < n;
        const uint ab = p.u[2] + (t0 + lr) * p.u[3];
        [[unroll]] for (uint e = 0u; e < 16u; e++) {
            uint col = k0 + lk + e;
            As[lr * SK + lk + e] = float16_t(tin && col < nc ? uintBitsToFloat(a[ab + col]) : 0.0);
        }
        barrier();
        [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
            FRAG fa[2], fb[2];
            [[unroll]] for (uint i = 0u; i < 2u; i++) coopMatLoadNV(fa[i], As, (32u * wm + 16u * i) * SK + kk, SK, false);
            [[unroll]] for (uint j = 0u; j < 2u; j++) coopMatLoadNV(fb[j], Ws, (32u * wn + 16u * j) * SK + kk, SK, true);
            [[unroll]] for (uint i = 0u; i < 2u; i++)
                [[unroll]] for (uint j = 0u; j < 2u; j++) acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < 2u; i++)
        [[unroll]] for (uint j = 0u; j < 2u; j++)
            coopMatStoreNV(acc[i][j], Cs, (32u * wm + 16u * i) * SC + 32u * wn + 16u * j, SC, false);
    barrier();
    for (uint idx = l; idx < 64u * 64u; idx += 128u) {
        uint t = t0 + idx / 64u, o = o0 + idx % 64u;
        if (t < n && o < nr)
            d[p.u[0] + t * p.u[1] + o] = floatBitsToUint(Cs[(idx / 64u) * SC + idx % 64u] + (p.u[11] != 0u ? uintBitsToFloat(v[o]) : 0.0));
    }
}
