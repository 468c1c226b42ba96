#version 450
// mul.comp — dst = a * b
#include "common.glsl"
#define OP(r, i) (A(r, i) * B(r, i))
#include "eltwise.glsl"
