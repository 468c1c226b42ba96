#version 450
// rmsnorm.comp — one workgroup of 256 per (row, group of gsz values), the
// sum of squares read 16 bytes a load where the row allows:
// y = x / sqrt(mean(x^2) + eps) * (has_w ? (plus_one ? 1 + w : w) : 1), w in v.
// u: 0 d_off, 1 d_nb, 2 a_off, 3 a_nb, 6 rows, 7 cols, 8 gsz, 9 plus_one, 10 has_w; f0 eps
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer BA4 { vec4 a4[]; };
shared float part[256];
void main()
{
    uint groups = p.u[7] / p.u[8];
    uint g = group_index(), r = g / groups, c0 = (g % groups) * p.u[8], tid = gl_LocalInvocationID.x;
    if (r >= p.u[6]) return; /* past the last row: the whole workgroup */
    uint at = p.u[2] + r * p.u[3] + c0, n = p.u[8];
    float ss = 0.0;
    if ((at & 3u) == 0u && (n & 3u) == 0u) { /* 16-byte loads */
        for (uint i = tid; i < n / 4u; i += 256u) {
            vec4 x = a4[at / 4u + i];
            ss += dot(x, x);
        }
    } else {
        for (uint i = tid; i < n; i += 256u) {
            float x = uintBitsToFloat(a[at + i]);
            ss += x * x;
        }
    }
    part[tid] = ss;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (tid < s) part[tid] += part[tid + s];
        barrier();
    }
    float inv = inversesqrt(part[0] / float(p.u[8]) + p.f[0]);
    for (uint i = tid; i < n; i += 256u) {
        float x = uintBitsToFloat(a[at + i]) * inv;
        if (p.u[10] != 0u) {
            float g = uintBitsToFloat(v[i]);
            x *= p.u[9] != 0u ? 1.0 + g : g;
        }
        d[p.u[0] + r * p.u[1] + c0 + i] = floatBitsToUint(x);
    }
}
