#version 450
// matmul_coop4.comp — matmul_coop.glsl with 64 x 128, f16 weights read directly
#define SGM 2u
#define SGN 2u
#define FM 2u
#define FN 4u
#define BK 64u
#define WDIRECT 1
#include "matmul_coop.glsl"
