#version 450
// moe_acc.comp — dst[t][i] += w_t * a[t][i]: mode 0 w_t = b[t] for the
// tokens marked in c (others untouched), 1 w_t = sigmoid(b[t]) (the
// shared expert's gate), 2 w_t = 1.
// u: 0 d_off, 1 d_nb, 2 a_off, 3 a_nb, 4 b_off, 5 b_nb, 6 rows, 7 cols,
// 8 mode, 9 c_off, 10 c_nb
#include "common.glsl"
layout(local_size_x = 256) in;
void main()
{
    uint k = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    if (k >= p.u[6] * p.u[7]) return;
    uint r = k / p.u[7], i = k % p.u[7];
    float wt = 1.0;
    if (p.u[8] == 0u) {
        if (c[p.u[9] + r * p.u[10]] == 0u) return;
        wt = uintBitsToFloat(b[p.u[4] + r * p.u[5]]);
    } else if (p.u[8] == 1u) {
        wt = 1.0 / (1.0 + exp(-uintBitsToFloat(b[p.u[4] + r * p.u[5]])));
    }
    uint o = p.u[0] + r * p.u[1] + i;
    d[o] = floatBitsToUint(uintBitsToFloat(d[o]) + wt * uintBitsToFloat(a[p.u[2] + r * p.u[3] + i]));
}
