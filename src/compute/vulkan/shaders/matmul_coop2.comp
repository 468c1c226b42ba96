#version 450
// matmul_coop2.comp — matmul_coop.glsl with 64 tokens x 128 rows, 4 subgroups, 64 columns a step
#define SGM 2u
#define SGN 2u
#define FM 2u
#define FN 4u
#define BK 64u
#define WDIRECT 0
#include "matmul_coop.glsl"
