#version 450
// add.comp — dst = a + f * b (f: the node's f[0], PC_F_NODE0)
#include "common.glsl"
#define OP(r, i) (A(r, i) + p.f[PC_F_NODE0] * B(r, i))
#include "eltwise.glsl"
