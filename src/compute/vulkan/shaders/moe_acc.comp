#version 450
// moe_acc.comp — dst[t][i] += w_t * a[t][i]: mode 0 w_t = b[t] for the
// tokens marked in c (others untouched), 1 w_t = sigmoid(b[t]) (the
// shared expert's gate), 2 w_t = 1.
// Push constants: PC_ACC_* (pc.h).
#include "common.glsl"
layout(local_size_x = 256) in;
void main()
{
    uint k = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    if (k >= p.u[PC_ROWS] * p.u[PC_COLS]) return;
    uint r = k / p.u[PC_COLS], i = k % p.u[PC_COLS];
    float wt = 1.0;
    if (p.u[PC_ACC_MODE] == 0u) {
        if (c[p.u[PC_ACC_C_OFF] + r * p.u[PC_ACC_C_NB]] == 0u) return;
        wt = uintBitsToFloat(b[p.u[PC_B_OFF] + r * p.u[PC_B_NB]]);
    } else if (p.u[PC_ACC_MODE] == 1u) {
        wt = 1.0 / (1.0 + exp(-uintBitsToFloat(b[p.u[PC_B_OFF] + r * p.u[PC_B_NB]])));
    }
    uint o = p.u[PC_DST_OFF] + r * p.u[PC_DST_NB] + i;
    d[o] = floatBitsToUint(uintBitsToFloat(d[o]) + wt * uintBitsToFloat(a[p.u[PC_A_OFF] + r * p.u[PC_A_NB] + i]));
}
