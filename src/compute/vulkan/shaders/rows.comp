#version 450
// rows.comp — dst[i] = a[idx[i]] (idx in b). u: 0 d_off, 1 d_nb, 2 a_off, 3 a_nb,
// 4 b_off, 6 rows, 7 cols
#include "common.glsl"
layout(local_size_x = 256) in;
void main()
{
    uint k = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    if (k >= p.u[6] * p.u[7]) return;
    uint r = k / p.u[7], i = k % p.u[7];
    uint src = b[p.u[4] + r];
    d[p.u[0] + r * p.u[1] + i] = a[p.u[2] + src * p.u[3] + i];
}
