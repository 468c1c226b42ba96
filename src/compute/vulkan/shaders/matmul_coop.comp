#version 450
// matmul_coop.comp — matmul_coop.glsl with 64 tokens x 128 rows, 8 subgroups of 32 x 32 (the default on NVIDIA)
#define SGM 2u
#define SGN 4u
#define FM 2u
#define FN 2u
#define BK 64u
#include "matmul_coop.glsl"
