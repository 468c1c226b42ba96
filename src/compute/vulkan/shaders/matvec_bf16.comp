#version 450
// matvec_bf16.comp — the decode matmul for bf16 weights (matvec.glsl).
#define DT 2
#include "matvec.glsl"
