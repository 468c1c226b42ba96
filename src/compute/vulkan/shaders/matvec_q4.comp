#version 450
// matvec_q4.comp — the decode matmul for q4 weights (matvec.glsl).
#define DT 4
#include "matvec.glsl"
