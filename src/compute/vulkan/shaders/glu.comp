#version 450
// glu.comp — dst = act(a) * b; PC_GLU_ACT = act (0 silu, 1 gelu_tanh,
// 2 gelu_erf, 3 gpt-oss swiglu with PC_GLU_ALPHA, PC_GLU_LIMIT: pc.h).
#include "common.glsl"
float erf_approx(float x)
{
    // Abramowitz-Stegun 7.1.26 refined: |error| < 1.5e-7
    float t = 1.0 / (1.0 + 0.3275911 * abs(x));
    float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
    return sign(x) * y;
}
float act(float x, float u)
{
    uint k = p.u[PC_GLU_ACT];
    if (k == 1u) return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))) * u;
    if (k == 2u) return 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752)) * u;
    if (k == 3u) {
        x = min(x, p.f[PC_GLU_LIMIT]);
        u = clamp(u, -p.f[PC_GLU_LIMIT], p.f[PC_GLU_LIMIT]);
        return (u + 1.0) * x / (1.0 + exp(-p.f[PC_GLU_ALPHA] * x));
    }
    return x / (1.0 + exp(-x)) * u;
}
#define OP(r, i) act(A(r, i), B(r, i))
#include "eltwise.glsl"
