#version 450
// kv_write.comp — row t of a into the cache row of (seq[t], pos[t])
// (pos in b, seq in c; kv_row). f32: one word per value; f16: one thread
// per pair of values (kv_dim even). u: 0 d_off, 1 d_nb (words), 2 a_off,
// 3 a_nb, 4 b_off, 5 c_off, 6 n_tok, 7 cols, 8 type (0 f32, 2 f16), 9 cap,
// 10 block (0: not paged), 11 table off (in c), 12 table entries a sequence
#include "common.glsl"
layout(local_size_x = 256) in;
void main()
{
    uint per = p.u[8] == 2u ? p.u[7] / 2u : p.u[7];
    uint k = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    if (k >= p.u[6] * per) return;
    uint t = k / per, i = k % per;
    uint row = kv_row(c[p.u[5] + t], uint(int(b[p.u[4] + t])), p.u[9], p.u[10], p.u[11], p.u[12]);
    uint src = p.u[2] + t * p.u[3];
    if (p.u[8] == 2u)
        d[p.u[0] + row * p.u[1] + i] = packHalf2x16(vec2(uintBitsToFloat(a[src + 2u * i]), uintBitsToFloat(a[src + 2u * i + 1u])));
    else
        d[p.u[0] + row * p.u[1] + i] = a[src + i];
}
