// matvec.glsl — the decode matmul, one shader per weight dtype (DT, set
// by the including file; no dtype switch in the loop): dst[t][o] =
// sum_i W[o][i] * a[t][i] (+ bias v[o]) for NT tokens (specialization
// constant 0: 1, 2, 4 or 8), 4 output rows per workgroup of 128
// invocations, 32 a row. Each invocation reads the weight row 16 bytes a
// load (8 f16 / bf16, 16 int8, or one q4_block group of 32 nibbles) and
// the activations as vec4s, once for the block's NT tokens; every weight
// byte is read once per token block (two loads in flight per invocation). Partial sums are reduced by
// subgroupAdd (subgroups of at most 32, which tile a row's 32
// invocations), else through shared memory. Needs (checked when
// recording): cols % 8 (f16, bf16), % 16 (q8_row, q8_2f with an even row
// count), % 32 (q4_block); a_off and a_nb multiples of 4 words.
// Workgroup (x + 65535 z) takes rows 4x..4x+3, y the token block.
// u: 0 d_off, 1 d_nb, 2 a_off, 3 a_nb, 6 n_tok, 9 w_rows, 10 w_cols, 11 has_bias
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#include "common.glsl"
layout(std430, binding = 4) readonly buffer BW4 { uvec4 w4[]; };
layout(std430, binding = 1) readonly buffer BA4 { vec4 a4[]; };
layout(constant_id = 0) const uint NT = 1;
layout(local_size_x = 128) in;
shared float part[8][128];

vec4 h4(uint x, uint y) { return vec4(unpackHalf2x16(x), unpackHalf2x16(y)); }
vec4 b4(uint x, uint y) { return vec4(uintBitsToFloat(x << 16), uintBitsToFloat(x & 0xffff0000u), uintBitsToFloat(y << 16), uintBitsToFloat(y & 0xffff0000u)); }
vec4 i4(uint x) { int v = int(x); return vec4(bitfieldExtract(v, 0, 8), bitfieldExtract(v, 8, 8), bitfieldExtract(v, 16, 8), bitfieldExtract(v, 24, 8)); }
vec4 n4(uint x) { return vec4(bitfieldExtract(x, 0, 4), bitfieldExtract(x, 4, 4), bitfieldExtract(x, 8, 4), bitfieldExtract(x, 12, 4)) - 8.0; }
vec4 X(uint t, uint q) { return a4[(p.u[2] + t * p.u[3]) / 4u + q]; } // activations [4q, 4q+4) of token t

/* adds the products of weight block j of the row (16 bytes q; row: the
 * row's first block) with the NT tokens' activations to acc */
void mv_step(uvec4 q, uint row, uint j, uint tk[8], inout float acc[8])
{
#if DT == 1 || DT == 2
#if DT == 1
    vec4 w0 = h4(q.x, q.y), w1 = h4(q.z, q.w);
#else
    vec4 w0 = b4(q.x, q.y), w1 = b4(q.z, q.w);
#endif
    [[unroll]] for (uint k = 0u; k < NT; k++) acc[k] += dot(w0, X(tk[k], 2u * j)) + dot(w1, X(tk[k], 2u * j + 1u));
#elif DT == 3 || DT == 9
    vec4 w0 = i4(q.x), w1 = i4(q.y), w2 = i4(q.z), w3 = i4(q.w);
#if DT == 9
    const uint cs = (p.u[9] * p.u[10] + 2u * p.u[9]) / 4u; /* the column scales, in words (2 f16 a word) */
    w0 *= h4(w[cs + 8u * j], w[cs + 8u * j + 1u]), w1 *= h4(w[cs + 8u * j + 2u], w[cs + 8u * j + 3u]);
    w2 *= h4(w[cs + 8u * j + 4u], w[cs + 8u * j + 5u]), w3 *= h4(w[cs + 8u * j + 6u], w[cs + 8u * j + 7u]);
#endif
    [[unroll]] for (uint k = 0u; k < NT; k++)
        acc[k] += dot(w0, X(tk[k], 4u * j)) + dot(w1, X(tk[k], 4u * j + 1u)) + dot(w2, X(tk[k], 4u * j + 2u)) +
                  dot(w3, X(tk[k], 4u * j + 3u));
#elif DT == 4
    const float s = half_at(p.u[9] * p.u[10] / 2u + 2u * (row + j)); /* scales: f16 per group, after the nibbles */
    vec4 wv[8] = vec4[8](n4(q.x), n4(q.x >> 16), n4(q.y), n4(q.y >> 16), n4(q.z), n4(q.z >> 16), n4(q.w), n4(q.w >> 16));
    [[unroll]] for (uint k = 0u; k < NT; k++) {
        float s8 = 0.0;
        [[unroll]] for (uint e = 0u; e < 8u; e++) s8 += dot(wv[e], X(tk[k], 8u * j + e));
        acc[k] += s8 * s;
    }
#endif
}

void main()
{
    const uint tid = gl_LocalInvocationID.x, lane = tid % 32u, rw = tid / 32u;
    const uint nr = p.u[9], nc = p.u[10], t0 = gl_WorkGroupID.y * NT;
    const uint o_raw = (gl_WorkGroupID.x + gl_WorkGroupID.z * 65535u) * 4u + rw;
    const uint o = min(o_raw, nr - 1u); /* rows past the end compute row nr-1 and write nothing */
    const uint nt = min(NT, p.u[6] - t0);
    uint tk[8];
    [[unroll]] for (uint k = 0u; k < NT; k++) tk[k] = t0 + min(k, nt - 1u);
    float acc[8];
    [[unroll]] for (uint k = 0u; k < NT; k++) acc[k] = 0.0;
    /* two 16-byte loads in flight per invocation: j and j + 32 */
#if DT == 1 || DT == 2
    const uint per = nc / 8u, row = o * per;
#elif DT == 3 || DT == 9
    const uint per = nc / 16u, row = o * per;
#else
    const uint per = nc / 32u, row = o * per;
#endif
    for (uint j = lane; j < per; j += 64u) {
        const bool two = j + 32u < per;
        uvec4 q0 = w4[row + j], q1 = two ? w4[row + j + 32u] : uvec4(0u);
        mv_step(q0, row, j, tk, acc);
        if (two) mv_step(q1, row, j + 32u, tk, acc);
    }
#if DT == 3 || DT == 9
    const float rs = half_at(nr * nc + 2u * o);
    [[unroll]] for (uint k = 0u; k < NT; k++) acc[k] *= rs;
#endif
    if (gl_SubgroupSize <= 32u) { /* whole subgroups in each row's 32 invocations */
        [[unroll]] for (uint k = 0u; k < NT; k++) {
            float s = subgroupAdd(acc[k]);
            if (subgroupElect()) part[k][gl_SubgroupID] = s;
        }
        barrier();
        const uint per_row = 32u / gl_SubgroupSize;
        if (lane < NT && o_raw < nr && lane < nt) {
            float s = 0.0;
            for (uint i = 0u; i < per_row; i++) s += part[lane][rw * per_row + i];
            d[p.u[0] + (t0 + lane) * p.u[1] + o] = floatBitsToUint(s + (p.u[11] != 0u ? uintBitsToFloat(v[o]) : 0.0));
        }
    } else {
        [[unroll]] for (uint k = 0u; k < NT; k++) part[k][tid] = acc[k];
        barrier();
        if (lane < NT && o_raw < nr && lane < nt) {
            float s = 0.0;
            for (uint i = 0u; i < 32u; i++) s += part[lane][rw * 32u + i];
            d[p.u[0] + (t0 + lane) * p.u[1] + o] = floatBitsToUint(s + (p.u[11] != 0u ? uintBitsToFloat(v[o]) : 0.0));
        }
    }
}
