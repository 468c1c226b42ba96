#version 450
// matmul_coop3.comp — matmul_coop.glsl with 128 tokens x 128 rows, 8 subgroups, 64 columns a step
#define SGM 4u
#define SGN 2u
#define FM 2u
#define FN 4u
#define BK 64u
#define WDIRECT 0
#include "matmul_coop.glsl"
