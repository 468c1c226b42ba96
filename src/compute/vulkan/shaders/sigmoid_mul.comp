#version 450
// sigmoid_mul.comp — dst = a * sigmoid(b)
#include "common.glsl"
#define OP(r, i) (A(r, i) / (1.0 + exp(-B(r, i))))
#include "eltwise.glsl"
