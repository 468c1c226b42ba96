#version 450
// matmul.comp — matrix x a few tokens, partial sums reduced through shared
// memory (every device); the body is matmul.glsl.
#include "matmul.glsl"
