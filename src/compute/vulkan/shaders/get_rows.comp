#version 450
// get_rows.comp — dst[t] = W[id[t]] * scale (ids in a). Push constants:
// PC_GET_* (pc.h).
#include "common.glsl"
layout(local_size_x = 256) in;
void main()
{
    uint k = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    if (k >= p.u[PC_ROWS] * p.u[PC_COLS]) return;
    uint t = k / p.u[PC_COLS], i = k % p.u[PC_COLS];
    uint id = a[p.u[PC_A_OFF] + t];
    d[p.u[PC_DST_OFF] + t * p.u[PC_DST_NB] + i] =
        floatBitsToUint(weight_at(p.u[PC_GET_DTYPE], id, i, p.u[PC_GET_W_ROWS], p.u[PC_COLS]) * p.f[PC_GET_SCALE]);
}
