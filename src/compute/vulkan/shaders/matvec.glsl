// matvec.glsl — the decode matmul, one shader per weight dtype (DT, set
// by the including file; no dtype switch in the loop): dst[t][o] =
// sum_i W[o][i] * a[t][i] (+ bias v[o]) for NT tokens (specialization
// constant 0: 1, 2, 4 or 8), R = 4 output rows per workgroup of 128
// invocations. All 128 invocations walk the columns together: invocation
// l takes the 16-byte chunks l, l + 128, ... of each of the 4 rows (8 f16
// / bf16, 16 int8, or one q4_block group of 32 nibbles), so the four
// rows' loads are in flight at once and each chunk's activations (vec4
// loads) serve four rows. Quantized values become floats without
// conversion instructions: a nibble or byte masked in place is ORed into
// the mantissa of 2^23 (0x4B000000) and 2^23 plus its offset subtracted,
// which leaves the value times 16^k (nibble k of a half word) or 256^k
// (byte k), exactly; each lane of a vec4 keeps one k, and the lanes are
// scaled back by P once per chunk. Partial sums are reduced by subgroupAdd
// and then across the workgroup's subgroups (at most 32 of them: subgroups
// of at least 4) in shared memory, in a fixed order. Needs (checked when
// recording): cols % 8 (f16, bf16), % 16 (q8_row, q8_2f with an even row
// count), % 32 (q4_block); a_off and a_nb multiples of 4 words.
// Workgroup (x + 65535 z) takes rows 4x..4x+3, y the token block.
// Push constants: PC_MM_* (pc.h) but the dtype (DT) and the selection.
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#include "common.glsl"
layout(std430, binding = 4) readonly buffer BW4 { uvec4 w4[]; };
layout(std430, binding = 1) readonly buffer BA4 { vec4 a4[]; };
layout(constant_id = 0) const uint NT = 1;
layout(local_size_x = 128) in;
#define R 4u /* rows a workgroup (MV_ROWS in vk_be.h) */
shared float part[R * 8u][32];

#if DT == 1 || DT == 2
#define CA 2u /* activation vec4s a 16-byte chunk: 8 values */
const vec4 P = vec4(1.0);
#elif DT == 3 || DT == 9
#define CA 4u /* 16 values */
const vec4 P = vec4(1.0, 1.0 / 256.0, 1.0, 1.0 / 256.0);
#else
#define CA 8u /* 32 values */
const vec4 P = vec4(1.0, 1.0 / 16.0, 1.0 / 256.0, 1.0 / 4096.0);
#endif
const vec4 Q8C = vec4(8388608.0 + 128.0, 8388608.0 + 32768.0, 8388608.0 + 128.0, 8388608.0 + 32768.0);
const vec4 Q4C = vec4(8388608.0 + 8.0, 8388608.0 + 128.0, 8388608.0 + 2048.0, 8388608.0 + 32768.0);

vec4 X(uint t, uint q) { return a4[(p.u[PC_A_OFF] + t * p.u[PC_A_NB]) / 4u + q]; } // activations [4q, 4q+4) of token t
float mf(uint x) { return uintBitsToFloat(x | 0x4B000000u); }         // 2^23 + x, for x < 2^23
// bytes 0..3 of x, biased by 128 (x ^ 0x80808080), as (b0, 256 b1, b2, 256 b3)
vec4 q8v(uint x) { return vec4(mf(x & 0xffu), mf(x & 0xff00u), mf((x >> 16) & 0xffu), mf((x >> 16) & 0xff00u)) - Q8C; }
// nibbles 0..3 of x as (n0, 16 n1, 256 n2, 4096 n3), each less 8
vec4 q4v(uint x) { return vec4(mf(x & 0xfu), mf(x & 0xf0u), mf(x & 0xf00u), mf(x & 0xf000u)) - Q4C; }

/* Chunk j of a row (q: its 16 bytes, rc: the row's first chunk) as CA vec4s
 * in the lanes' scales of P, and the factor the chunk's sum takes (the
 * q4_block group's scale; q8_row's row scale waits for the end). cs: the
 * chunk's q8_2f column scales. */
float decode(uvec4 q, uint rc, uint j, vec4 cs[4], out vec4 wv[CA])
{
#if DT == 1
    wv[0] = vec4(unpackHalf2x16(q.x), unpackHalf2x16(q.y)), wv[1] = vec4(unpackHalf2x16(q.z), unpackHalf2x16(q.w));
    return 1.0;
#elif DT == 2
    wv[0] = vec4(uintBitsToFloat(q.x << 16), uintBitsToFloat(q.x & 0xffff0000u), uintBitsToFloat(q.y << 16),
                 uintBitsToFloat(q.y & 0xffff0000u));
    wv[1] = vec4(uintBitsToFloat(q.z << 16), uintBitsToFloat(q.z & 0xffff0000u), uintBitsToFloat(q.w << 16),
                 uintBitsToFloat(q.w & 0xffff0000u));
    return 1.0;
#elif DT == 3 || DT == 9
    q ^= uvec4(0x80808080u);
    wv[0] = q8v(q.x), wv[1] = q8v(q.y), wv[2] = q8v(q.z), wv[3] = q8v(q.w);
#if DT == 9
    [[unroll]] for (uint e = 0u; e < 4u; e++) wv[e] *= cs[e];
#endif
    return 1.0;
#else
    wv[0] = q4v(q.x), wv[1] = q4v(q.x >> 16), wv[2] = q4v(q.y), wv[3] = q4v(q.y >> 16);
    wv[4] = q4v(q.z), wv[5] = q4v(q.z >> 16), wv[6] = q4v(q.w), wv[7] = q4v(q.w >> 16);
    const uint b = p.u[PC_MM_W_ROWS] * p.u[PC_MM_W_COLS] / 2u + 2u * (rc + j); /* its f16 scale, after the nibbles */
    return unpackHalf2x16((w[b >> 2] >> ((b & 2u) * 8u)) & 0xffffu).x;
#endif
}

void main()
{
    const uint l = gl_LocalInvocationID.x, nr = p.u[PC_MM_W_ROWS], nc = p.u[PC_MM_W_COLS], t0 = gl_WorkGroupID.y * NT;
    const uint o0 = (gl_WorkGroupID.x + gl_WorkGroupID.z * 65535u) * R;
    const uint nt = min(NT, p.u[PC_N_TOK] - t0), per = nc / (4u * CA);
    uint tk[8], rc[R];
    [[unroll]] for (uint k = 0u; k < NT; k++) tk[k] = t0 + min(k, nt - 1u);
    [[unroll]] for (uint r = 0u; r < R; r++) rc[r] = min(o0 + r, nr - 1u) * per; /* rows past the end: nr-1, not written */
    float acc[R][8];
    [[unroll]] for (uint r = 0u; r < R; r++)
        [[unroll]] for (uint k = 0u; k < NT; k++) acc[r][k] = 0.0;
    vec4 cs[4];
    for (uint j = l; j < per; j += 128u) {
        uvec4 q[R];
        [[unroll]] for (uint r = 0u; r < R; r++) q[r] = w4[rc[r] + j];
#if DT == 9
        const uint c0 = (nr * nc + 2u * nr) / 4u + 8u * j; /* the column scales, 2 f16 a word */
        [[unroll]] for (uint e = 0u; e < 4u; e++)
            cs[e] = vec4(unpackHalf2x16(w[c0 + 2u * e]), unpackHalf2x16(w[c0 + 2u * e + 1u]));
#endif
        vec4 wv[CA];
        if (NT == 1u) { /* the activations once, in registers, for the four rows */
            vec4 xa[CA];
            [[unroll]] for (uint e = 0u; e < CA; e++) xa[e] = X(tk[0], CA * j + e);
            [[unroll]] for (uint r = 0u; r < R; r++) {
                const float sc = decode(q[r], rc[r], j, cs, wv);
                vec4 s4 = vec4(0.0);
                [[unroll]] for (uint e = 0u; e < CA; e++) s4 += wv[e] * xa[e];
                acc[r][0] += dot(s4, P) * sc;
            }
        } else { /* each row decoded once, the tokens' activations read per row */
            [[unroll]] for (uint r = 0u; r < R; r++) {
                const float sc = decode(q[r], rc[r], j, cs, wv);
                [[unroll]] for (uint k = 0u; k < NT; k++) {
                    vec4 s4 = vec4(0.0);
                    [[unroll]] for (uint e = 0u; e < CA; e++) s4 += wv[e] * X(tk[k], CA * j + e);
                    acc[r][k] += dot(s4, P) * sc;
                }
            }
        }
    }
    [[unroll]] for (uint r = 0u; r < R; r++)
        [[unroll]] for (uint k = 0u; k < NT; k++) {
            const float s = subgroupAdd(acc[r][k]);
            if (subgroupElect()) part[r * NT + k][gl_SubgroupID] = s;
        }
    barrier();
    if (l < R * NT) {
        const uint r = l / NT, k = l % NT, o = o0 + r;
        if (o < nr && k < nt) {
            float s = 0.0;
            for (uint g = 0u; g < gl_NumSubgroups; g++) s += part[l][g];
#if DT == 3 || DT == 9
            s *= half_at(nr * nc + 2u * o); /* the row scale */
#endif
            d[p.u[PC_DST_OFF] + (t0 + k) * p.u[PC_DST_NB] + o] =
                floatBitsToUint(s + (p.u[PC_MM_HAS_BIAS] != 0u ? uintBitsToFloat(v[o]) : 0.0));
        }
    }
}
