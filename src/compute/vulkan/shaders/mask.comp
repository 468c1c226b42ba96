#version 450
// mask.comp — in place: zero dst columns [k*width, (k+1)*width) whose bit k
// of the bitset (bytes in v) is clear. u: 0 d_off, 1 d_nb, 6 rows, 7 cols, 8 width
#include "common.glsl"
layout(local_size_x = 256) in;
void main()
{
    uint k = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    if (k >= p.u[6] * p.u[7]) return;
    uint r = k / p.u[7], i = k % p.u[7], bit = i / p.u[8];
    if (((v[bit >> 5] >> (bit & 31u)) & 1u) == 0u) d[p.u[0] + r * p.u[1] + i] = 0u;
}
