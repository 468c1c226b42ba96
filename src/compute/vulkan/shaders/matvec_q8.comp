#version 450
// matvec_q8.comp — the decode matmul for q8 weights (matvec.glsl).
#define DT 3
#include "matvec.glsl"
