// common.glsl — what every cmf compute shader shares: the eight storage
// buffers a node may bind (dst, a, b, c, then weight / vector / two
// extra), word-addressed (offsets and row pitches in 4-byte words), the
// push-constant block (32 words, each slot named in pc.h), and
// readers for the element types (f16, bf16 and int8 unpacked from words).
#extension GL_EXT_control_flow_attributes : enable
layout(std430, binding = 0) buffer BD { uint d[]; };
layout(std430, binding = 1) readonly buffer BA { uint a[]; };
layout(std430, binding = 2) readonly buffer BB { uint b[]; };
layout(std430, binding = 3) readonly buffer BC { uint c[]; };
layout(std430, binding = 4) readonly buffer BW { uint w[]; };
layout(std430, binding = 5) readonly buffer BV { uint v[]; };
layout(std430, binding = 6) buffer BX { uint x1[]; };
layout(std430, binding = 7) readonly buffer BY { uint x2[]; };
#include "pc.h"
layout(push_constant) uniform PC { uint u[PC_N_U]; float f[PC_N_F]; } p;

// The workgroup's index when a dispatch is split over x and y (65535 each):
// the ops with a workgroup per row or per (token, head)
uint group_index() { return gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u; }
float wf(uint i) { return uintBitsToFloat(w[i]); }
// byte `o` of the weight buffer
uint w8(uint o) { return (w[o >> 2] >> ((o & 3u) * 8u)) & 0xffu; }
// 16-bit value at byte offset o (2-aligned or not)
uint w16(uint o) { return w8(o) | (w8(o + 1u) << 8); }
// 16-bit value at byte o: one load when o is even (it cannot straddle words)
uint w16e(uint o) { return (o & 1u) == 0u ? (w[o >> 2] >> ((o & 2u) * 8u)) & 0xffffu : w16(o); }
float half_at(uint o) { return unpackHalf2x16(w16e(o)).x; }
float bf16_at(uint o) { return uintBitsToFloat(w16e(o) << 16); }
float i8_at(uint o) { return float(int(w8(o) << 24) >> 24); }

// Element (r, col) of a weight matrix of dtype dt (cols per row = nc,
// rows = nr). 0 f32, 1 f16, 2 bf16, 3 q8_row (int8 rows, then f16 row
// scales), 4 q4_block (16 bytes of nibbles per group of 32 over the
// flattened matrix, low nibble first, then an f16 scale per group; value
// (q - 8) * scale), 9 q8_2f (q8_row, then an f16 scale per column). The
// ids are the quant module's CMF_DTYPE_* values; the products are the CPU
// decoder's, in its order.
float weight_at(uint dt, uint r, uint col, uint nr, uint nc)
{
    uint k = r * nc + col;
    if (dt == 0u) return wf(k);
    if (dt == 1u) return half_at(2u * k);
    if (dt == 2u) return bf16_at(2u * k);
    if (dt == 4u) {
        uint g = k / 32u, q = (w8(16u * g + (k % 32u) / 2u) >> (4u * (k & 1u))) & 15u;
        return (float(q) - 8.0) * half_at(16u * ((nr * nc + 31u) / 32u) + 2u * g);
    }
    if (dt == 9u) return i8_at(k) * half_at(nr * nc + 2u * r) * half_at(nr * nc + 2u * nr + 2u * col);
    return i8_at(k) * half_at(nr * nc + 2u * r);
}

// The KV cache row of position pos of sequence s: in a ring of cap rows a
// sequence, or (block > 0: a paged cache) in the block the table names
// (I32 entries in c from word tab, per_seq a sequence; checked on the host).
uint kv_row(uint s, uint pos, uint cap, uint block, uint tab, uint per_seq)
{
    uint r = pos % cap;
    return block > 0u ? c[tab + s * per_seq + r / block] * block + r % block : s * cap + r;
}
