#version 450
// rows.comp — dst[i] = a[idx[i]] (idx in b).
#include "common.glsl"
layout(local_size_x = 256) in;
void main()
{
    uint k = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    if (k >= p.u[PC_ROWS] * p.u[PC_COLS]) return;
    uint r = k / p.u[PC_COLS], i = k % p.u[PC_COLS];
    uint src = b[p.u[PC_B_OFF] + r];
    d[p.u[PC_DST_OFF] + r * p.u[PC_DST_NB] + i] = a[p.u[PC_A_OFF] + src * p.u[PC_A_NB] + i];
}
