/* rope_ext.h — rotary variants beyond plain/linear/llama3 that the
 * MoE-era families need: YaRN (gpt-oss) and Gemma-4's "proportional"
 * partial rotation. Both reduce to an inverse-frequency table over the
 * half-split pairs (i, i + d/2) plus a cos/sin scale; cmf__rope_apply_freqs
 * rotates with such a table. f32 throughout, as the reference computes. */
#ifndef CMF_COMPUTE_ROPE_EXT_H
#define CMF_COMPUTE_ROPE_EXT_H

#include <stdbool.h>

/* YaRN for `dim` rotated dims (dim/2 frequencies). attention_factor <= 0
 * selects the default 0.1·ln(factor) + 1 (1 when factor <= 1); the result
 * is written to *scale (multiplies cos and sin, so q·k grows by scale²).
 * truncate: floor/ceil the correction range (default true in the
 * reference; gpt-oss sets false). */
void cmf__rope_yarn_inv_freq(float theta, int dim, float factor, float original_max_pos, float beta_fast,
                             float beta_slow, bool truncate, float attention_factor, float *inv_freq,
                             float *scale);

/* Gemma-4 "proportional": head_dim/2 frequencies; the first
 * floor(partial·head_dim/2) are theta^(-2i/head_dim), the rest 0 (those
 * pairs are not rotated). Divided by factor (1 = none). */
void cmf__rope_proportional_inv_freq(float theta, int head_dim, float partial, float factor, float *inv_freq);

/* Rotates n_heads heads of x[n_heads][head_dim] in place at position pos:
 * pairs (i, i + head_dim/2), angle pos·inv_freq[i], cos/sin times scale. */
void cmf__rope_apply_freqs(float *x, int n_heads, int head_dim, int pos, const float *inv_freq, float scale);

#endif
