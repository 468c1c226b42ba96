#version 450
// matmul_coop7.comp — matmul_coop.glsl with 128 x 128, 8 subgroups, 32 columns a step
#define SGM 4u
#define SGN 2u
#define FM 2u
#define FN 4u
#define BK 32u
#define WDIRECT 0
#include "matmul_coop.glsl"
