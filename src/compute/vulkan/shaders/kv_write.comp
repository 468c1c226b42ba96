#version 450
// kv_write.comp — row t of a into the cache row of (seq[t], pos[t])
// (pos in b, seq in c; kv_row). f32: one word per value; f16: one thread
// per pair of values (kv_dim even). Push constants: PC_KVW_* (pc.h).
#include "common.glsl"
layout(local_size_x = 256) in;
void main()
{
    uint per = p.u[PC_KVW_TYPE] == 2u ? p.u[PC_COLS] / 2u : p.u[PC_COLS];
    uint k = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    if (k >= p.u[PC_N_TOK] * per) return;
    uint t = k / per, i = k % per;
    uint row = kv_row(c[p.u[PC_KVW_SEQ_OFF] + t], uint(int(b[p.u[PC_B_OFF] + t])), p.u[PC_KVW_CAP], p.u[PC_KVW_BLOCK],
                      p.u[PC_KVW_TAB_OFF], p.u[PC_KVW_TAB_COLS]);
    uint src = p.u[PC_A_OFF] + t * p.u[PC_A_NB];
    if (p.u[PC_KVW_TYPE] == 2u)
        d[p.u[PC_DST_OFF] + row * p.u[PC_DST_NB] + i] =
            packHalf2x16(vec2(uintBitsToFloat(a[src + 2u * i]), uintBitsToFloat(a[src + 2u * i + 1u])));
    else
        d[p.u[PC_DST_OFF] + row * p.u[PC_DST_NB] + i] = a[src + i];
}
