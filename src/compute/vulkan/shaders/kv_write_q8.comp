#version 450
// kv_write_q8.comp — row t of a into the q8 cache row of (seq[t], pos[t])
// (pos in b, seq in c; kv_row), one workgroup per token: per group of gsz values
// scale = max|x| / 127, q = round-to-even(x / scale); the int8 values four
// to a word (padded to a whole word), then the groups' f32 scales.
// At most 256 groups a row.
// u: 0 d_off, 1 d_nb (words), 2 a_off, 3 a_nb, 4 b_off, 5 c_off, 6 n_tok,
// 7 cols, 8 gsz, 9 cap, 10 block (0: not paged), 11 table off (in c),
// 12 table entries a sequence
#include "common.glsl"
layout(local_size_x = 64) in;
shared float inv_s[256];
void main()
{
    uint cols = p.u[7], gsz = p.u[8], groups = (cols + gsz - 1u) / gsz, words = (cols + 3u) / 4u;
    uint t = group_index(), tid = gl_LocalInvocationID.x;
    if (t >= p.u[6]) return; /* past the last token: the whole workgroup */
    uint row = kv_row(c[p.u[5] + t], uint(int(b[p.u[4] + t])), p.u[9], p.u[10], p.u[11], p.u[12]);
    uint src = p.u[2] + t * p.u[3], dst = p.u[0] + row * p.u[1];
    for (uint g = tid; g < groups; g += 64u) {
        float amax = 0.0;
        for (uint i = g * gsz; i < min(cols, (g + 1u) * gsz); i++) amax = max(amax, abs(uintBitsToFloat(a[src + i])));
        float sc = amax / 127.0;
        inv_s[g] = sc > 0.0 ? 1.0 / sc : 0.0;
        d[dst + words + g] = floatBitsToUint(sc);
    }
    barrier();
    for (uint q = tid; q < words; q += 64u) {
        uint word = 0u;
        for (uint k = 0u; k < 4u; k++) {
            uint col = 4u * q + k;
            if (col >= cols) break;
            int v8 = int(roundEven(uintBitsToFloat(a[src + col]) * inv_s[col / gsz]));
            word |= (uint(v8) & 0xffu) << (8u * k);
        }
        d[dst + q] = word;
    }
}
