#version 450
// rmsnorm.comp — one workgroup of 256 per (row, group of gsz values), the
// sum of squares read 16 bytes a load where the row allows:
// y = x / sqrt(mean(x^2) + eps) * (has_w ? (plus_one ? 1 + w : w) : 1), w in v.
// Push constants: PC_NORM_* (pc.h), gsz PC_NORM_GROUP.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer BA4 { vec4 a4[]; };
shared float part[256];
void main()
{
    uint groups = p.u[PC_COLS] / p.u[PC_NORM_GROUP];
    uint g = group_index(), r = g / groups, c0 = (g % groups) * p.u[PC_NORM_GROUP], tid = gl_LocalInvocationID.x;
    if (r >= p.u[PC_ROWS]) return; /* past the last row: the whole workgroup */
    uint at = p.u[PC_A_OFF] + r * p.u[PC_A_NB] + c0, n = p.u[PC_NORM_GROUP];
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
    float inv = inversesqrt(part[0] / float(p.u[PC_NORM_GROUP]) + p.f[PC_NORM_EPS]);
    for (uint i = tid; i < n; i += 256u) {
        float x = uintBitsToFloat(a[at + i]) * inv;
        if (p.u[PC_NORM_HAS_W] != 0u) {
            float g = uintBitsToFloat(v[i]);
            x *= p.u[PC_NORM_PLUS_ONE] != 0u ? 1.0 + g : g;
        }
        d[p.u[PC_DST_OFF] + r * p.u[PC_DST_NB] + c0 + i] = floatBitsToUint(x);
    }
}
