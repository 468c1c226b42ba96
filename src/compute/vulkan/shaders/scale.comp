#version 450
// scale.comp — dst = a * f0
#include "common.glsl"
#define OP(r, i) (A(r, i) * p.f[0])
#include "eltwise.glsl"
