#version 450
// softcap.comp — dst = a * f0, then f1 * tanh(dst / f1) when f1 > 0 (the
// node's f[0] and f[1]: PC_F_NODE0, PC_F_NODE1)
#include "common.glsl"
float cap(float x) { return p.f[PC_F_NODE1] > 0.0 ? p.f[PC_F_NODE1] * tanh(x / p.f[PC_F_NODE1]) : x; }
#define OP(r, i) cap(A(r, i) * p.f[PC_F_NODE0])
#include "eltwise.glsl"
