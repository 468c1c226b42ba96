#version 450
// matmul_coop5.comp — matmul_coop.glsl with 64 x 128, 8 subgroups of 32 x 32
#define SGM 2u
#define SGN 4u
#define FM 2u
#define FN 2u
#define BK 64u
#define WDIRECT 0
#include "matmul_coop.glsl"
