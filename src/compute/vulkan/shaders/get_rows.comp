#version 450
// get_rows.comp — dst[t] = W[id[t]] * f0 (ids in a). u: 0 d_off, 1 d_nb, 2 a_off,
// 6 rows, 7 cols, 8 dtype, 9 w_rows
#include "common.glsl"
layout(local_size_x = 256) in;
void main()
{
    uint k = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    if (k >= p.u[6] * p.u[7]) return;
    uint t = k / p.u[7], i = k % p.u[7];
    uint id = a[p.u[2] + t];
    d[p.u[0] + t * p.u[1] + i] = floatBitsToUint(weight_at(p.u[8], id, i, p.u[9], p.u[7]) * p.f[0]);
}
