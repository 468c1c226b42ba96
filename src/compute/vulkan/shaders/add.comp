#version 450
// add.comp — dst = a + f0 * b
#include "common.glsl"
#define OP(r, i) (A(r, i) + p.f[0] * B(r, i))
#include "eltwise.glsl"
