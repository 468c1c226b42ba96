#version 450
// matmul_sg.comp — matmul.comp with subgroup reductions, for devices whose
// compute stage has subgroup arithmetic; the body is matmul.glsl.
#define SUBGROUP 1
#include "matmul.glsl"
