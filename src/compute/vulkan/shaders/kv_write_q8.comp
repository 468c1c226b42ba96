#version 450
// kv_write_q8.comp — row t of a into the q8 cache row of (seq[t], pos[t])
// (pos in b, seq in c; kv_row), one workgroup per token: per group of gsz values
// scale = max|x| / 127, q = round-to-even(x / scale); the int8 values four
// to a word (padded to a whole word), then the groups' f32 scales.
// At most 256 groups a row.
// Push constants: PC_KVW_* (pc.h), gsz PC_KVW_GROUP.
#include "common.glsl"
layout(local_size_x = 64) in;
shared float inv_s[256];
void main()
{
    uint cols = p.u[PC_COLS], gsz = p.u[PC_KVW_GROUP], groups = (cols + gsz - 1u) / gsz, words = (cols + 3u) / 4u;
    uint t = group_index(), tid = gl_LocalInvocationID.x;
    if (t >= p.u[PC_N_TOK]) return; /* past the last token: the whole workgroup */
    uint row = kv_row(c[p.u[PC_KVW_SEQ_OFF] + t], uint(int(b[p.u[PC_B_OFF] + t])), p.u[PC_KVW_CAP], p.u[PC_KVW_BLOCK],
                      p.u[PC_KVW_TAB_OFF], p.u[PC_KVW_TAB_COLS]);
    uint src = p.u[PC_A_OFF] + t * p.u[PC_A_NB], dst = p.u[PC_DST_OFF] + row * p.u[PC_DST_NB];
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
