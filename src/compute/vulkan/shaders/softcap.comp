#version 450
// softcap.comp — dst = a * f0, then f1 * tanh(dst / f1) when f1 > 0
#include "common.glsl"
float cap(float x) { return p.f[1] > 0.0 ? p.f[1] * tanh(x / p.f[1]) : x; }
#define OP(r, i) cap(A(r, i) * p.f[0])
#include "eltwise.glsl"
