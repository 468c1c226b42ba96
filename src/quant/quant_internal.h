/* quant_internal.h — helpers shared by the files of src/quant only: shape
 * checks, plane offsets, the q4tp/q2tp ladder and bit-field readers. Every
 * reader here is bounds-safe only for payloads qmat_init has validated. */
#ifndef CMF_QUANT_INTERNAL_H
#define CMF_QUANT_INTERNAL_H

#include "quant/quant.h"
#include "util/half.h"
#include <math.h>

/* Looks the dtype up (ERR_DTYPE for unknown/reserved), takes the matrix
 * view and checks 2-D / cols % 32 (ERR_SIZE). */
cmf_status cmf__quant_check_shape(int dtype, int ndim, const uint64_t *shape, int64_t *rows,
                                  int64_t *cols);
/* Bytes of one row of the 5-bit q4tp/q2tp code plane: ceil(cols/32*5/8). */
uint64_t cmf__quant_tp_code_stride(int64_t cols);

/* The q4tp row ladder, per spec README: t[0] = exp2(lo), t[c] = t[c-1] *
 * exp2(step) — one exp2 and 31 multiplies, so every decoder gets the same
 * f32 bits. lo and step are the f16 values already widened to f32. */
static inline void cmf__quant_tp_ladder(float lo, float step, float ladder[32])
{
    float mul = exp2f(step);
    ladder[0] = exp2f(lo);
    for (int c = 1; c < 32; c++) ladder[c] = ladder[c - 1] * mul;
}

/* The 5-bit code of group g from a row's code plane (LSB-first). Reads the
 * second byte only when the code straddles it, so it never passes the
 * row's ceil(gpr*5/8) bytes. */
static inline unsigned cmf__quant_tp_code(const uint8_t *codes, int64_t g)
{
    uint64_t bit = (uint64_t)g * 5;
    const uint8_t *p = codes + bit / 8;
    unsigned sh = (unsigned)(bit % 8), v = p[0];
    if (sh > 3) v |= (unsigned)p[1] << 8;
    return (v >> sh) & 31u;
}

/* f16 -> f32 with one integer shift and one exact multiply by 2^112 (the
 * exponent rebias; exact for normals and subnormals alike); inf/NaN take the
 * rare branch. Bit-identical to cmf__f16_to_f32 (checked over all 65536
 * inputs in tests/test_quant_basic.c), without its subnormal branch. */
static inline float cmf__quant_f16(uint16_t h)
{
    uint32_t mag = (uint32_t)(h & 0x7fff) << 13;
    uint32_t fin = cmf__f32_bits(cmf__bits_f32(mag) * 0x1p112f), inf = mag | 0x7f800000u;
    uint32_t bits = (h & 0x7c00) == 0x7c00 ? inf : fin; /* a select, not a branch */
    return cmf__bits_f32(bits | (uint32_t)(h & 0x8000) << 16);
}

/* Bytes of one vbit row of `cols` weights at `bits` bits: ceil(cols*bits/8). */
static inline uint64_t cmf__quant_vbit_row_bytes(int64_t cols, int bits)
{
    return ((uint64_t)cols * (uint64_t)bits + 7) / 8;
}

static inline bool cmf__quant_vbit_width_ok(unsigned b) { return (b >= 3 && b <= 6) || b == 8; }

#endif
