#version 450
// matmul_coop6.comp — matmul_coop.glsl with 128 x 128, 8 subgroups, f16 weights read directly
#define SGM 4u
#define SGN 2u
#define FM 2u
#define FN 4u
#define BK 64u
#define WDIRECT 1
#include "matmul_coop.glsl"
