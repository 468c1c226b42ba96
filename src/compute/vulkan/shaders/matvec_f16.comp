#version 450
// matvec_f16.comp — the decode matmul for f16 weights (matvec.glsl).
#define DT 1
#include "matvec.glsl"
