#version 450
// rmsnorm.comp — one workgroup per (row, group of gsz values):
// y = x / sqrt(mean(x^2) + eps) * (has_w ? (plus_one ? 1 + w : w) : 1), w in v.
// u: 0 d_off, 1 d_nb, 2 a_off, 3 a_nb, 6 rows, 7 cols, 8 gsz, 9 plus_one, 10 has_w; f0 eps
#include "common.glsl"
layout(local_size_x = 128) in;
shared float part[128];
void main()
{
    uint groups = p.u[7] / p.u[8];
    uint g = group_index(), r = g / groups, c0 = (g % groups) * p.u[8], tid = gl_LocalInvocationID.x;
    if (r >= p.u[6]) return; /* past the last row: the whole workgroup */
    float ss = 0.0;
    for (uint i = tid; i < p.u[8]; i += 128u) {
        float x = uintBitsToFloat(a[p.u[2] + r * p.u[3] + c0 + i]);
        ss += x * x;
    }
    part[tid] = ss;
    barrier();
    for (uint s = 64u; s > 0u; s >>= 1) {
        if (tid < s) part[tid] += part[tid + s];
        barrier();
    }
    float inv = inversesqrt(part[0] / float(p.u[8]) + p.f[0]);
    for (uint i = tid; i < p.u[8]; i += 128u) {
        float x = uintBitsToFloat(a[p.u[2] + r * p.u[3] + c0 + i]) * inv;
        if (p.u[10] != 0u) {
            float g = uintBitsToFloat(v[i]);
            x *= p.u[9] != 0u ? 1.0 + g : g;
        }
        d[p.u[0] + r * p.u[1] + c0 + i] = floatBitsToUint(x);
    }
}
