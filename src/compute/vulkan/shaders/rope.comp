#version 450
// rope.comp — rotates, in place, n_heads heads of head_dim in each row at
// the row's position (b): pairs (i, i + rot/2) for i < rot/2, angle
// pos * inv_freq[i] (inv_freq in v) rounded to f32, cos/sin times f0.
// u: 0 d_off, 1 d_nb, 4 b_off, 6 rows, 8 n_heads, 9 head_dim, 10 rot_dims
#include "common.glsl"
layout(local_size_x = 256) in;
void main()
{
    uint half_ = p.u[10] / 2u;
    uint k = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65535u * 256u;
    if (k >= p.u[6] * p.u[8] * half_) return;
    uint r = k / (p.u[8] * half_), h = (k / half_) % p.u[8], i = k % half_;
    float th = float(int(b[p.u[4] + r])) * uintBitsToFloat(v[i]);
    float cs = cos(th) * p.f[0], sn = sin(th) * p.f[0];
    uint o = p.u[0] + r * p.u[1] + h * p.u[9];
    float x0 = uintBitsToFloat(d[o + i]), x1 = uintBitsToFloat(d[o + i + half_]);
    d[o + i] = floatBitsToUint(x0 * cs - x1 * sn);
    d[o + i + half_] = floatBitsToUint(x1 * cs + x0 * sn);
}
