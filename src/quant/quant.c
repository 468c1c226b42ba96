/* quant.c — the dtype table (CMF v2 §3.1), name lookup with CLI aliases,
 * the matrix view of a shape and the payload-size rule of every fixed-size
 * dtype. Variable-size dtypes (vbit, vbit_ro, q1s, q1t) have no size rule
 * here: qmat_init validates their internal tables against the stored span. */
#include "quant/quant.h"

#include "util/arith.h"
#include "util/error.h"

#include <string.h>

/* required_features bit 2 (QUANT_2F, §1.1); format.h owns the full list. */
#define QUANT_FEAT_2F (1u << 2)

/*                         name        sup    matrix cols32 fixed  feat           bpw */
static const cmf__dtype_info dtype_table[CMF_DTYPE_COUNT_] = {
    [CMF_DTYPE_F32]      = {"f32",      true,  false, false, true,  0,             32.0},
    [CMF_DTYPE_F16]      = {"f16",      true,  false, false, true,  0,             16.0},
    [CMF_DTYPE_BF16]     = {"bf16",     true,  false, false, true,  0,             16.0},
    [CMF_DTYPE_Q8_ROW]   = {"q8_row",   true,  true,  false, true,  0,             8.0},
    [CMF_DTYPE_Q4_BLOCK] = {"q4_block", true,  false, false, true,  0,             4.5},
    [CMF_DTYPE_MIX8_4]   = {"mix8_4",   false, false, false, false, 0,             0.0},
    [CMF_DTYPE_U8]       = {"u8",       false, false, false, false, 0,             0.0},
    [CMF_DTYPE_Q4_COL]   = {"q4_col",   false, false, false, false, 0,             0.0},
    [CMF_DTYPE_VBIT]     = {"vbit",     true,  true,  true,  false, QUANT_FEAT_2F, 4.5},
    [CMF_DTYPE_Q8_2F]    = {"q8_2f",    true,  true,  false, true,  QUANT_FEAT_2F, 8.0},
    [CMF_DTYPE_VBIT_RO]  = {"vbit_ro",  true,  true,  true,  false, 0,             4.5},
    [CMF_DTYPE_Q4_TILED] = {"q4_tiled", true,  true,  true,  true,  0,             4.5},
    [CMF_DTYPE_Q1]       = {"q1",       true,  true,  true,  true,  0,             1.5},
    [CMF_DTYPE_Q1S]      = {"q1s",      true,  true,  true,  false, 0,             1.8},
    [CMF_DTYPE_Q1T]      = {"q1t",      true,  true,  true,  false, 0,             2.27},
    [CMF_DTYPE_Q4TP]     = {"q4tp",     true,  true,  true,  true,  0,             4.17},
    [CMF_DTYPE_Q2TP]     = {"q2tp",     true,  true,  true,  true,  0,             2.17},
};

const cmf__dtype_info *cmf__dtype_get(int dtype)
{
    if (dtype < 0 || dtype >= CMF_DTYPE_COUNT_) return NULL;
    return &dtype_table[dtype];
}

int cmf__dtype_from_name(const char *name)
{
    static const struct { const char *alias; int dtype; } aliases[] = {
        {"q8", CMF_DTYPE_Q8_ROW},     {"q4", CMF_DTYPE_Q4_BLOCK},
        {"q4t", CMF_DTYPE_Q4_TILED},  {"vbit", CMF_DTYPE_VBIT_RO}, /* §3.1: converter default */
        {"fp16", CMF_DTYPE_F16},
        {"fp32", CMF_DTYPE_F32},
    };
    if (!name) return -1;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].alias) == 0) return aliases[i].dtype;
    for (int d = 0; d < CMF_DTYPE_COUNT_; d++)
        if (strcmp(name, dtype_table[d].name) == 0) return d;
    return -1;
}

cmf_status cmf__quant_matrix_view(int ndim, const uint64_t *shape, int64_t *rows, int64_t *cols)
{
    if (ndim < 0 || ndim > 6) return cmf__error(CMF_ERR_BOUNDS, "ndim %d outside 0..6", ndim);
    uint64_t r = ndim ? shape[0] : 1, c = 1;
    for (int i = 1; i < ndim; i++)
        if (cmf__mul_overflow(c, shape[i], &c))
            return cmf__error(CMF_ERR_BOUNDS, "shape dimension product overflows");
    uint64_t n;
    /* rows, cols and their product all <= 2^60: every size rule below then
     * stays far from 2^64 (the largest, q4tp, is < 2^62 + 2^61) */
    const uint64_t cap = 1ull << 60;
    if (cmf__mul_overflow(r, c, &n) || n > cap || r > cap || c > cap)
        return cmf__error(CMF_ERR_BOUNDS, "tensor of %llu x %llu elements is too large",
                          (unsigned long long)r, (unsigned long long)c);
    if (ndim == 1) { c = r; r = 1; }
    *rows = (int64_t)r;
    *cols = (int64_t)c;
    return CMF_OK;
}

/* Checks that the shape suits the dtype (2-D only, cols % 32). */
static cmf_status check_shape(int dtype, int ndim, int64_t cols)
{
    const cmf__dtype_info *di = &dtype_table[dtype];
    if (di->matrix_only && ndim != 2)
        return cmf__error(CMF_ERR_SIZE, "dtype %s needs a 2-D tensor, got %d-D", di->name, ndim);
    if (di->needs_cols32 && cols % 32 != 0)
        return cmf__error(CMF_ERR_SIZE, "dtype %s needs cols %% 32 == 0, got cols %lld", di->name,
                          (long long)cols);
    return CMF_OK;
}

cmf_status cmf__quant_check_shape(int dtype, int ndim, const uint64_t *shape, int64_t *rows,
                                  int64_t *cols)
{
    const cmf__dtype_info *di = cmf__dtype_get(dtype);
    if (!di) return cmf__error(CMF_ERR_DTYPE, "dtype %d unknown (known 0..16)", dtype);
    if (!di->supported)
        return cmf__error(CMF_ERR_DTYPE, "dtype %d (%s) is reserved, not supported", dtype, di->name);
    cmf_status st = cmf__quant_matrix_view(ndim, shape, rows, cols);
    if (st) return st;
    return check_shape(dtype, ndim, *cols);
}

/* Bytes of the 5-bit code plane of one q4tp/q2tp row. */
uint64_t cmf__quant_tp_code_stride(int64_t cols) { return cmf__div_ceil((uint64_t)(cols / 32) * 5, 8); }

cmf_status cmf__dtype_nbytes(int dtype, int ndim, const uint64_t *shape, uint64_t *nbytes)
{
    int64_t rows, cols;
    cmf_status st = cmf__quant_check_shape(dtype, ndim, shape, &rows, &cols);
    if (st) return st;
    if (!dtype_table[dtype].fixed_size)
        return cmf__error(CMF_ERR_UNSUPPORTED,
                          "dtype %s is variable-size: its payload size is the stored span",
                          dtype_table[dtype].name);
    /* matrix_view bounded rows, cols and rows*cols by 2^60: none of these overflow. */
    uint64_t r = (uint64_t)rows, c = (uint64_t)cols, n = r * c, groups = cmf__div_ceil(n, 32);
    switch (dtype) {
    case CMF_DTYPE_F32: *nbytes = 4 * n; break;
    case CMF_DTYPE_F16:
    case CMF_DTYPE_BF16: *nbytes = 2 * n; break;
    case CMF_DTYPE_Q8_ROW: *nbytes = n + 2 * r; break;
    case CMF_DTYPE_Q8_2F: *nbytes = n + 2 * r + 2 * c; break;
    case CMF_DTYPE_Q4_BLOCK:
    case CMF_DTYPE_Q4_TILED: *nbytes = 18 * groups; break;
    case CMF_DTYPE_Q1: *nbytes = 6 * groups; break;
    case CMF_DTYPE_Q4TP: *nbytes = 16 * groups + 4 * r + r * cmf__quant_tp_code_stride(cols); break;
    case CMF_DTYPE_Q2TP: *nbytes = 8 * groups + 4 * r + r * cmf__quant_tp_code_stride(cols); break;
    default: return cmf__error(CMF_ERR_INTERNAL, "dtype %d has no size rule", dtype);
    }
    return CMF_OK;
}
