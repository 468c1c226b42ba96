#version 450
// rope.comp — rotates, in place, n_heads heads of head_dim in each row at
// the row's position (b): pairs (i, i + rot/2) for i < rot/2, angle
// pos * inv_freq[i] (inv_freq in v) rounded to f32, cos/sin times
// PC_ROPE_FACTOR. Push constants: PC_ROPE_* (pc.h).
#include "common.glsl"
layout(local_size_x = 256) in;
void main()
{
    uint half_ = p.u[PC_ROPE_ROT_DIMS] / 2u;
    uint k = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    if (k >= p.u[PC_ROWS] * p.u[PC_ROPE_N_HEAD] * half_) return;
    uint r = k / (p.u[PC_ROPE_N_HEAD] * half_), h = (k / half_) % p.u[PC_ROPE_N_HEAD], i = k % half_;
    float th = float(int(b[p.u[PC_B_OFF] + r])) * uintBitsToFloat(v[i]);
    float cs = cos(th) * p.f[PC_ROPE_FACTOR], sn = sin(th) * p.f[PC_ROPE_FACTOR];
    uint o = p.u[PC_DST_OFF] + r * p.u[PC_DST_NB] + h * p.u[PC_ROPE_HEAD_DIM];
    float x0 = uintBitsToFloat(d[o + i]), x1 = uintBitsToFloat(d[o + i + half_]);
    d[o + i] = floatBitsToUint(x0 * cs - x1 * sn);
    d[o + i + half_] = floatBitsToUint(x1 * cs + x0 * sn);
}
