#version 450
// matmul_coop_t128.comp — matmul_coop.glsl with 128 tokens x 128 rows, 8 subgroups of 32 x 64 (CMF_VK_COOP=2)
#define SGM 4u
#define SGN 2u
#define FM 2u
#define FN 4u
#define BK 64u
#include "matmul_coop.glsl"
