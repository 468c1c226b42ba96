#version 450
// scale.comp — dst = a * f (the node's f[0], PC_F_NODE0)
#include "common.glsl"
#define OP(r, i) (A(r, i) * p.f[PC_F_NODE0])
#include "eltwise.glsl"
