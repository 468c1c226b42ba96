// matmul_coop.glsl — the prompt-chunk GEMM on NVIDIA tensor cores
// (GL_NV_cooperative_matrix, f16 x f16 -> f32 at 16 x 16 x 16 in subgroups
// of 32): dst[t][o] = sum_i W[o][i] * a[t][i] (+ bias v[o]) for weights
// stored at 16 bits or less. Included by matmul_coop*.comp after they set
// the tile: SGM x SGN subgroups over (tokens, rows), each multiplying FM x
// FN fragments of 16 x 16, BK columns a step (a multiple of 16). Operands
// go to shared memory as f16, eight values (16 bytes) a store: activations
// converted from f32; with cols % 8, f16 weights copied as they are and
// q8_row / q4_block weights decoded eight at a time from one 8- or 4-byte
// load (the CPU decoder's products, rounded to f16); other dtypes four at
// a time by w_quad. The next step's operands are fetched into registers
// while the tensor cores work on this one. Each 16 x 16 result goes out
// through a small per-subgroup staging area (the bias added, the edges
// cut). Needs cols % 4 (checked when recording). Same push constants as
// matmul_tiled.comp.
// Push constants: PC_MM_* (pc.h) but the selection.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#include "common.glsl"
#include "wquad.glsl"
#define NSG (SGM * SGN)
#define NT (32u * NSG)
#define TM (SGM * FM * 16u) /* tokens a workgroup */
#define TN (SGN * FN * 16u) /* output rows a workgroup */
#define CK (BK / 8u)        /* 16-byte chunks of a tile row a step */
#define PK (CK + 1u)        /* row pitch of the tiles in chunks (fewer bank conflicts) */
#define ACH (TM * CK / NT)  /* activation chunks an invocation fetches a step */
#define WCH (TN * CK / NT)  /* weight chunks */
layout(local_size_x = NT) in;
layout(std430, binding = 1) readonly buffer BA4 { vec4 a4[]; };
layout(std430, binding = 4) readonly buffer BW8 { uvec4 w8v[]; };
shared uvec4 As[TM * PK];
shared uvec4 Ws[TN * PK];
shared float Cs[NSG * 256u]; /* one 16 x 16 result per subgroup */
#define FRAG fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

uvec4 ar[ACH], wr[WCH]; /* this invocation's share of the next step */

uvec4 pack8(vec4 x, vec4 y) { return uvec4(packHalf2x16(x.xy), packHalf2x16(x.zw), packHalf2x16(y.xy), packHalf2x16(y.zw)); }
vec4 i4(uint x) { int v = int(x); return vec4(bitfieldExtract(v, 0, 8), bitfieldExtract(v, 8, 8), bitfieldExtract(v, 16, 8), bitfieldExtract(v, 24, 8)); }
vec4 n4(uint x) { return vec4(bitfieldExtract(x, 0, 4), bitfieldExtract(x, 4, 4), bitfieldExtract(x, 8, 4), bitfieldExtract(x, 12, 4)) - 8.0; }

/* Weights col..col+7 of row o as eight f16 (cols % 8 == 0, so one load
 * holds them): f16 as stored, q8_row times the row scale, q4_block less 8
 * times the group scale. */
uvec4 w_oct(uint dt, uint o, uint col, uint nr, uint nc)
{
    const uint k = o * nc + col;
    if (dt == 1u) return w8v[k >> 3];
    if (dt == 3u) {
        const uvec2 q = w2[k >> 3];
        const float s = half_at(nr * nc + 2u * o);
        return pack8(i4(q.x) * s, i4(q.y) * s);
    }
    const uint q = w[k >> 3]; /* q4_block: nibbles k..k+7 in one word, in group k / 32 */
    const float s = half_at(16u * ((nr * nc + 31u) / 32u) + 2u * (k >> 5));
    return pack8(n4(q) * s, n4(q >> 16) * s);
}

/* Chunk q of a tile: row q / CK, columns k0 + (q % CK) * 8 ..+7 (zeros past the edges). */
void fetch(uint k0, uint l, uint o0, uint t0)
{
    const uint nr = p.u[PC_MM_W_ROWS], nc = p.u[PC_MM_W_COLS], n = p.u[PC_N_TOK], dt = p.u[PC_MM_DTYPE];
    const bool vec_a = (p.u[PC_A_OFF] & 3u) == 0u && (p.u[PC_A_NB] & 3u) == 0u;
    const bool oct = (nc & 7u) == 0u && (dt == 1u || dt == 3u || dt == 4u);
    [[unroll]] for (uint e = 0u; e < ACH; e++) {
        uint q = l + NT * e, t = t0 + q / CK, col = k0 + (q % CK) * 8u, at = p.u[PC_A_OFF] + t * p.u[PC_A_NB] + col;
        if (t >= n || col >= nc) ar[e] = uvec4(0u);
        else if (vec_a) ar[e] = pack8(a4[at >> 2], col + 4u < nc ? a4[(at >> 2) + 1u] : vec4(0.0));
        else {
            vec4 x = vec4(uintBitsToFloat(a[at]), uintBitsToFloat(a[at + 1u]), uintBitsToFloat(a[at + 2u]),
                          uintBitsToFloat(a[at + 3u])), y = vec4(0.0);
            if (col + 4u < nc)
                y = vec4(uintBitsToFloat(a[at + 4u]), uintBitsToFloat(a[at + 5u]), uintBitsToFloat(a[at + 6u]),
                         uintBitsToFloat(a[at + 7u]));
            ar[e] = pack8(x, y);
        }
    }
    [[unroll]] for (uint e = 0u; e < WCH; e++) {
        uint q = l + NT * e, o = o0 + q / CK, col = k0 + (q % CK) * 8u;
        if (o >= nr || col >= nc) wr[e] = uvec4(0u);
        else if (oct) wr[e] = w_oct(dt, o, col, nr, nc);
        else wr[e] = pack8(w_quad(dt, o, col, nr, nc), col + 4u < nc ? w_quad(dt, o, col + 4u, nr, nc) : vec4(0.0));
    }
}

void main()
{
    const uint l = gl_LocalInvocationID.x, sg = l / 32u, lane = l % 32u, sm = sg / SGN, sn = sg % SGN;
    const uint o0 = gl_WorkGroupID.x * TN, t0 = gl_WorkGroupID.y * TM;
    const uint nr = p.u[PC_MM_W_ROWS], nc = p.u[PC_MM_W_COLS], n = p.u[PC_N_TOK];
    ACC acc[FM][FN];
    [[unroll]] for (uint i = 0u; i < FM; i++)
        [[unroll]] for (uint j = 0u; j < FN; j++) acc[i][j] = ACC(0.0);
    fetch(0u, l, o0, t0);
    for (uint k0 = 0u; k0 < nc; k0 += BK) {
        [[unroll]] for (uint e = 0u; e < ACH; e++) {
            uint q = l + NT * e;
            As[(q / CK) * PK + q % CK] = ar[e];
        }
        [[unroll]] for (uint e = 0u; e < WCH; e++) {
            uint q = l + NT * e;
            Ws[(q / CK) * PK + q % CK] = wr[e];
        }
        barrier();
        if (k0 + BK < nc) fetch(k0 + BK, l, o0, t0); /* in flight while the tensor cores run */
        [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
            FRAG fa[FM], fb[FN];
            [[unroll]] for (uint i = 0u; i < FM; i++)
                coopMatLoadNV(fa[i], As, (FM * 16u * sm + 16u * i) * PK + kk / 8u, PK, false);
            [[unroll]] for (uint j = 0u; j < FN; j++)
                coopMatLoadNV(fb[j], Ws, (FN * 16u * sn + 16u * j) * PK + kk / 8u, PK, true);
            [[unroll]] for (uint i = 0u; i < FM; i++)
                [[unroll]] for (uint j = 0u; j < FN; j++) acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
        }
        barrier();
    }
    const bool bias = p.u[PC_MM_HAS_BIAS] != 0u;
    [[unroll]] for (uint i = 0u; i < FM; i++)
        [[unroll]] for (uint j = 0u; j < FN; j++) {
            coopMatStoreNV(acc[i][j], Cs, sg * 256u, 16u, false);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            [[unroll]] for (uint e = 0u; e < 8u; e++) {
                uint idx = lane + 32u * e, t = t0 + FM * 16u * sm + 16u * i + (idx >> 4),
                     o = o0 + FN * 16u * sn + 16u * j + (idx & 15u);
                if (t < n && o < nr)
                    d[p.u[PC_DST_OFF] + t * p.u[PC_DST_NB] + o] =
                        floatBitsToUint(Cs[sg * 256u + idx] + (bias ? uintBitsToFloat(v[o]) : 0.0));
            }
            subgroupBarrier(); /* read before the next fragment overwrites it */
        }
}
