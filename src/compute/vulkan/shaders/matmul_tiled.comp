#version 450
// matmul_tiled.comp — the prompt-chunk GEMM: dst[t][o] = sum_i W[o][i] *
// a[t][i] (+ bias v[o]), one workgroup per tile of 64 output rows x 64
// tokens, 16 columns at a time through shared memory (the weight tile
// decoded once by weight_at and used by the 64 tokens, the activation
// tile by the 64 rows), each invocation accumulating 4 rows x 4 tokens in
// registers. Each invocation loads 4 consecutive values of one weight row
// per step: one 8-byte load for f16 / bf16, one word for q8_row / q8_2f,
// two bytes for q4_block, 16 bytes
// for f32 when cols % 4 == 0; weight_at otherwise. Same push constants as
// matmul.comp (no token selection).
// Push constants: PC_MM_* (pc.h) but the selection.
#include "common.glsl"
layout(local_size_x = 256) in;
#include "wquad.glsl"
shared float Ws[16][64], As[16][64];
void main()
{
    uint l = gl_LocalInvocationID.x, tx = l % 16u, ty = l / 16u;
    uint o0 = gl_WorkGroupID.x * 64u, t0 = gl_WorkGroupID.y * 64u;
    uint nr = p.u[PC_MM_W_ROWS], nc = p.u[PC_MM_W_COLS], n = p.u[PC_N_TOK], dt = p.u[PC_MM_DTYPE];
    uint lr = l / 4u, lk = (l % 4u) * 4u; /* this invocation's loads: row / token lr, columns lk..lk+3 */
    float acc[4][4];
    [[unroll]] for (uint i = 0u; i < 4u; i++)
        [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] = 0.0;
    bool quads = nc % 4u == 0u && (dt <= 4u || dt == 9u);
    for (uint k0 = 0u; k0 < nc; k0 += 16u) {
        if (quads) {
            vec4 q = o0 + lr < nr && k0 + lk < nc ? w_quad(dt, o0 + lr, k0 + lk, nr, nc) : vec4(0.0);
            [[unroll]] for (uint e = 0u; e < 4u; e++) Ws[lk + e][lr] = q[e];
        }
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            uint col = k0 + lk + e;
            if (!quads) Ws[lk + e][lr] = o0 + lr < nr && col < nc ? weight_at(dt, o0 + lr, col, nr, nc) : 0.0;
            As[lk + e][lr] = t0 + lr < n && col < nc ? uintBitsToFloat(a[p.u[PC_A_OFF] + (t0 + lr) * p.u[PC_A_NB] + col]) : 0.0;
        }
        barrier();
        [[unroll]] for (uint kk = 0u; kk < 16u; kk++) {
            float wr[4], ar[4];
            [[unroll]] for (uint i = 0u; i < 4u; i++) wr[i] = Ws[kk][tx + 16u * i];
            [[unroll]] for (uint j = 0u; j < 4u; j++) ar[j] = As[kk][ty + 16u * j];
            [[unroll]] for (uint i = 0u; i < 4u; i++)
                [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] += wr[i] * ar[j];
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint o = o0 + tx + 16u * i;
        if (o >= nr) continue;
        float bias = p.u[PC_MM_HAS_BIAS] != 0u ? uintBitsToFloat(v[o]) : 0.0;
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint t = t0 + ty + 16u * j;
            if (t < n) d[p.u[PC_DST_OFF] + t * p.u[PC_DST_NB] + o] = floatBitsToUint(acc[i][j] + bias);
        }
    }
}
