#version 450
// zero.comp — dst = 0 over rows x cols (the MoE sum starts from zero)
#include "common.glsl"
#define OP(r, i) 0.0
#include "eltwise.glsl"
