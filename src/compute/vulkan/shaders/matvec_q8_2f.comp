#version 450
// matvec_q8_2f.comp — the decode matmul for q8_2f weights (matvec.glsl).
#define DT 9
#include "matvec.glsl"
