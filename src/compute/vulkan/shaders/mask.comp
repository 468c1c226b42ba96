#version 450
// mask.comp — in place: zero dst columns [k*width, (k+1)*width) whose bit k
// of the bitset (bytes in v) is clear; width PC_MASK_WIDTH (pc.h).
#include "common.glsl"
layout(local_size_x = 256) in;
void main()
{
    uint k = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    if (k >= p.u[PC_ROWS] * p.u[PC_COLS]) return;
    uint r = k / p.u[PC_COLS], i = k % p.u[PC_COLS], bit = i / p.u[PC_MASK_WIDTH];
    if (((v[bit >> 5] >> (bit & 31u)) & 1u) == 0u) d[p.u[PC_DST_OFF] + r * p.u[PC_DST_NB] + i] = 0u;
}
