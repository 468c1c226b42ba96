/* quant.h — the one dtype table and, per dtype family, the byte layout,
 * payload-size rule, row decode (dequant), scalar reference dot product and
 * the quantizers (encode). Layouts follow CMF v2 §3.2 exactly; every
 * optimized kernel elsewhere must agree with the scalar reference here.
 *
 * Matrix view: a tensor of shape [d0, d1, ...] is seen as rows = d0 and
 * cols = d1*d2*... (a 1-D tensor is one row). Groups of 32 (q4_block) run
 * over the flattened tensor, so a row may start mid-group when cols % 32. */
#ifndef CMF_QUANT_H
#define CMF_QUANT_H

#include "cmf.h"
#include "util/buf.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct cmf__dtype_info {
    const char *name;       /* "q8_row"; for reserved ids "mix8_4" etc. */
    bool supported;         /* false for the reserved ids 5, 6, 7 */
    bool matrix_only;       /* 2-D only per spec (q8_row, vbit, q4_tiled, ...) */
    bool needs_cols32;      /* requires in % 32 == 0 */
    bool fixed_size;        /* payload size follows from dtype and shape */
    uint32_t feature_bits;  /* required_features bits its presence implies (QUANT_2F) */
    double bits_per_weight; /* nominal, for `cmf info` and size estimates */
} cmf__dtype_info;

/* NULL for ids outside 0..16. Reserved ids return an entry with
 * supported == false. */
const cmf__dtype_info *cmf__dtype_get(int dtype);
/* Looks a dtype up by name ("q8_row", also CLI aliases "q8" "q4" "q4t");
 * returns -1 when unknown. */
int cmf__dtype_from_name(const char *name);

/* Expected payload bytes for a fixed-size dtype and a shape. Errors:
 * CMF_ERR_DTYPE (unknown/reserved), CMF_ERR_UNSUPPORTED (variable-size
 * dtype: q1s, q1t, vbit, vbit_ro), CMF_ERR_SIZE (shape not allowed for the
 * dtype: not 2-D, cols % 32), CMF_ERR_BOUNDS (overflow). */
cmf_status cmf__dtype_nbytes(int dtype, int ndim, const uint64_t *shape, uint64_t *nbytes);

/* The matrix view of a shape: rows = d0, cols = d1*...; a 1-D tensor is
 * one row, a 0-D tensor is 1x1. CMF_ERR_BOUNDS when the element count does
 * not fit int64 or ndim is outside 0..6. */
cmf_status cmf__quant_matrix_view(int ndim, const uint64_t *shape, int64_t *rows, int64_t *cols);

/* A prepared, validated view of one quantized tensor as a matrix. For
 * variable-length layouts init checks the internal tables against nbytes
 * (row offsets, outlier counts/indices) and may build a row-offset table
 * (vbit), so decode and dot never read out of bounds. `what` names the
 * tensor in error messages. */
typedef struct cmf__qmat {
    int dtype;
    const uint8_t *data;
    uint64_t nbytes;
    int64_t rows, cols;
    uint64_t *row_off; /* owned [rows+1]: vbit packed-row offsets (relative to
                        * aux2); else NULL */
    const uint8_t *aux; /* scales plane (q8_row, q4_block, vbit, vbit_ro, q8_2f row
                         * scales), params plane (q4tp, q2tp), row_ptr (q1t),
                         * overlay count (q1s); else NULL */
    const uint8_t *aux2; /* packed rows (vbit, vbit_ro), codes plane (q4tp, q2tp),
                          * col field (q8_2f), overlay entries (q1s, q1t); else NULL */
} cmf__qmat;

cmf_status cmf__qmat_init(cmf__qmat *m, int dtype, const uint8_t *data, uint64_t nbytes,
                          int ndim, const uint64_t *shape, const char *what);
void cmf__qmat_free(cmf__qmat *m);
/* decode_row and dot_row only read the payload and the view: any number of
 * threads may call them on one initialized qmat at once. */
/* Dequantizes row `row` (0 <= row < rows) into out[cols]. */
void cmf__qmat_decode_row(const cmf__qmat *m, int64_t row, float *out);
/* Scalar reference: sum_i w[row][i] * x[i], accumulated in f32 in index
 * order within each 32-group, groups summed in order. */
float cmf__qmat_dot_row(const cmf__qmat *m, int64_t row, const float *x);

/* For kernels that read q4tp / q2tp directly: the row's 32-rung scale
 * ladder exactly as decode computes it (t[0] = exp2f(lo), t[c] = t[c-1] *
 * exp2f(step)), and the 5-bit rung of group g (0 <= g < cols/32) of a row.
 * q4tp scale = ladder[code]; q2tp scale = code ? ladder[code-1] : 0.
 * Only for an initialized qmat of dtype q4tp or q2tp. */
void cmf__qmat_tp_ladder(const cmf__qmat *m, int64_t row, float ladder[32]);
unsigned cmf__qmat_tp_code(const cmf__qmat *m, int64_t row, int64_t g);

/* Quantizer options; defaults from cmf__quant_opts_default(). */
typedef struct cmf__quant_opts {
    double vbit_mean_bits;   /* vbit/vbit_ro target mean bits per weight (default 4.0) */
    double vbit_theta;       /* vbit/vbit_ro water level shared by a family of tensors
                              * (cmf__vbit_water_level over all their rows); NaN
                              * (default): solve vbit_mean_bits per tensor */
    double q1t_outlier_frac; /* q1t fraction of weights kept as outliers (default 0.005) */
    double q1s_outlier_frac; /* q1s likewise (default 0.005) */
} cmf__quant_opts;
cmf__quant_opts cmf__quant_opts_default(void);

/* vbit bit allocation (spec §3.2, water-filling): a row's width is the
 * allowed width {3,4,5,6,8} nearest theta + amp[row], amp = log2 of the
 * row's largest magnitude. For MoE experts the budget is shared by a
 * family (layer x projection): collect every expert's amplitudes, take one
 * water level for all of them, and pass it as opts.vbit_theta, so a loud
 * expert gets more bits and a quiet one fewer. */
void cmf__vbit_row_amplitudes(const float *src, int64_t rows, int64_t cols, double *amp /* [rows] */);
/* The largest theta whose mean width over the n amplitudes stays within
 * budget (a budget under 3 gives every row the floor of 3). */
double cmf__vbit_water_level(const double *amp, int64_t n, double budget);

/* Encodes `rows x cols` f32 values (row-major) as `dtype`, appending the
 * payload to `out`. Writable dtypes: f32, f16, bf16, q8_row, q8_2f,
 * q4_block, q4_tiled, q4tp, q2tp, vbit, vbit_ro, q1, q1s, q1t. Errors name
 * `what`: CMF_ERR_SIZE when the shape does not suit the dtype. */
cmf_status cmf__quantize(int dtype, const float *src, int64_t rows, int64_t cols,
                         const cmf__quant_opts *opts, cmf__buf *out, const char *what);

#endif
