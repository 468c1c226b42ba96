#version 450
// matmul_coop8.comp — matmul_coop.glsl with 16 tokens x 128 rows, 4 subgroups of 16 x 32 (few tokens: more workgroups)
#define SGM 1u
#define SGN 4u
#define FM 1u
#define FN 2u
#define BK 64u
#define WDIRECT 0
#include "matmul_coop.glsl"
