/* qmat.c — validated matrix views of quantized tensors: init checks every
 * size, table, count and offset of a payload against its stored span before
 * anything is decoded; decode_row and the scalar reference dot product then
 * read only inside validated bounds. Layouts: CMF v2 §3.2 (see QUANT.md). */
#include "quant/quant_internal.h"

#include "util/arith.h"
#include "util/error.h"
#include "util/half.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long ull;

/* ---- init: per-layout validation --------------------------------------- */

static cmf_status init_vbit(cmf__qmat *m, const char *what, bool ro)
{
    const char *dn = ro ? "vbit_ro" : "vbit";
    uint64_t r = (uint64_t)m->rows, gpr = (uint64_t)m->cols / 32, scales_len, hdr;
    if (cmf__mul_overflow(r, gpr * 2, &scales_len) || cmf__add_overflow(r, scales_len, &hdr))
        return cmf__error(CMF_ERR_BOUNDS, "tensor '%s': %s tables overflow", what, dn);
    if (m->nbytes < r)
        return cmf__error(CMF_ERR_BOUNDS,
                          "tensor '%s': %s payload of %llu bytes cannot hold the %llu-byte bit-width table",
                          what, dn, (ull)m->nbytes, (ull)r);
    if (m->nbytes < hdr)
        return cmf__error(CMF_ERR_BOUNDS,
                          "tensor '%s': %s payload of %llu bytes cannot hold the scales table ending at byte %llu",
                          what, dn, (ull)m->nbytes, (ull)hdr);
    for (uint64_t i = 0; i < r; i++)
        if (!cmf__quant_vbit_width_ok(m->data[i]))
            return cmf__error(CMF_ERR_BOUNDS,
                              "tensor '%s': %s row %llu: bit width %u at payload byte %llu not in {3,4,5,6,8}",
                              what, dn, (ull)i, m->data[i], (ull)i);
    m->aux = m->data + r;
    if (!ro) {
        m->aux2 = m->data + hdr;
        m->row_off = malloc((r + 1) * sizeof *m->row_off);
        if (!m->row_off) return cmf__error(CMF_ERR_NOMEM, "tensor '%s': out of memory", what);
        uint64_t off = 0;
        for (uint64_t i = 0; i < r; i++) {
            m->row_off[i] = off;
            off += cmf__quant_vbit_row_bytes(m->cols, m->data[i]); /* <= 8 bytes/weight: no overflow */
        }
        m->row_off[r] = off;
        if (off != m->nbytes - hdr)
            return cmf__error(CMF_ERR_SIZE,
                              "tensor '%s': vbit payload is %llu bytes, the bit widths need %llu (%llu table + %llu packed)",
                              what, (ull)m->nbytes, (ull)(hdr + off), (ull)hdr, (ull)off);
        return CMF_OK;
    }
    uint64_t offs = hdr, packed, tab_len;
    if (cmf__mul_overflow(r + 1, 4, &tab_len) || cmf__add_overflow(offs, tab_len, &packed) || m->nbytes < packed)
        return cmf__error(CMF_ERR_BOUNDS,
                          "tensor '%s': vbit_ro payload of %llu bytes cannot hold the row-offset table at byte %llu (%llu entries)",
                          what, (ull)m->nbytes, (ull)offs, (ull)(r + 1));
    const uint8_t *tab = m->data + offs;
    if (cmf__rd32(tab) != 0)
        return cmf__error(CMF_ERR_BOUNDS, "tensor '%s': vbit_ro row_offsets[0] at payload byte %llu is %u, not 0",
                          what, (ull)offs, cmf__rd32(tab));
    uint64_t prev = 0;
    for (uint64_t i = 0; i < r; i++) {
        uint64_t next = cmf__rd32(tab + 4 * (i + 1));
        uint64_t want = cmf__quant_vbit_row_bytes(m->cols, m->data[i]);
        if (next < prev || next - prev != want)
            return cmf__error(CMF_ERR_BOUNDS,
                              "tensor '%s': vbit_ro row_offsets[%llu] at payload byte %llu is %llu: row %llu spans %lld bytes, its %u-bit width needs %llu",
                              what, (ull)(i + 1), (ull)(offs + 4 * (i + 1)), (ull)next, (ull)i,
                              (long long)next - (long long)prev, m->data[i], (ull)want);
        prev = next;
    }
    if (packed + prev != m->nbytes)
        return cmf__error(CMF_ERR_SIZE,
                          "tensor '%s': vbit_ro payload is %llu bytes, the row offsets end at %llu",
                          what, (ull)m->nbytes, (ull)(packed + prev));
    m->aux2 = m->data + packed;
    return CMF_OK;
}

static cmf_status init_q1s(cmf__qmat *m, const char *what)
{
    uint64_t n = (uint64_t)m->rows * (uint64_t)m->cols, base = n / 32 * 6;
    if (m->nbytes < base + 4)
        return cmf__error(CMF_ERR_BOUNDS,
                          "tensor '%s': q1s payload of %llu bytes cannot hold the q1 base (%llu bytes) and the outlier count at byte %llu",
                          what, (ull)m->nbytes, (ull)base, (ull)base);
    uint64_t count = cmf__rd32(m->data + base);
    if ((m->nbytes - base - 4) / 6 < count || m->nbytes - base - 4 != count * 6)
        return cmf__error(CMF_ERR_SIZE,
                          "tensor '%s': q1s outlier count %llu at payload byte %llu needs %llu bytes, the payload has %llu",
                          what, (ull)count, (ull)base, (ull)(base + 4 + count * 6), (ull)m->nbytes);
    m->aux = m->data + base;
    m->aux2 = m->data + base + 4;
    uint64_t prev = 0;
    for (uint64_t e = 0; e < count; e++) {
        uint64_t idx = cmf__rd32(m->aux2 + 6 * e);
        if (idx >= n)
            return cmf__error(CMF_ERR_BOUNDS,
                              "tensor '%s': q1s outlier %llu at payload byte %llu: flat index %llu outside %llu weights",
                              what, (ull)e, (ull)(base + 4 + 6 * e), (ull)idx, (ull)n);
        if (e > 0 && idx <= prev)
            return cmf__error(CMF_ERR_BOUNDS,
                              "tensor '%s': q1s outlier %llu at payload byte %llu: flat index %llu not increasing (previous %llu)",
                              what, (ull)e, (ull)(base + 4 + 6 * e), (ull)idx, (ull)prev);
        prev = idx;
    }
    return CMF_OK;
}

/* First q1s overlay entry whose flat index is >= idx (entries are strictly
 * increasing, checked at init): a binary search, so no per-row table. */
static uint64_t q1s_lower_bound(const cmf__qmat *m, uint64_t idx)
{
    uint64_t lo = 0, hi = cmf__rd32(m->aux);
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (cmf__rd32(m->aux2 + 6 * mid) < idx) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static cmf_status init_q1t(cmf__qmat *m, const char *what)
{
    uint64_t r = (uint64_t)m->rows, n = r * (uint64_t)m->cols, base = n / 32 * 9, ent, tab;
    if (cmf__mul_overflow(r + 1, 4, &tab) || cmf__add_overflow(base, tab, &ent) || m->nbytes < ent)
        return cmf__error(CMF_ERR_BOUNDS,
                          "tensor '%s': q1t payload of %llu bytes cannot hold the ternary base (%llu bytes) and the row_ptr table (%llu entries) at byte %llu",
                          what, (ull)m->nbytes, (ull)base, (ull)(r + 1), (ull)base);
    const uint8_t *rp = m->data + base;
    if (cmf__rd32(rp) != 0)
        return cmf__error(CMF_ERR_BOUNDS, "tensor '%s': q1t row_ptr[0] at payload byte %llu is %u, not 0",
                          what, (ull)base, cmf__rd32(rp));
    uint64_t avail = (m->nbytes - ent) / 4, prev = 0;
    for (uint64_t i = 1; i <= r; i++) {
        uint64_t p = cmf__rd32(rp + 4 * i);
        if (p < prev || p > avail)
            return cmf__error(CMF_ERR_BOUNDS,
                              "tensor '%s': q1t row_ptr[%llu] at payload byte %llu is %llu: %s",
                              what, (ull)i, (ull)(base + 4 * i), (ull)p,
                              p < prev ? "decreasing" : "past the outlier entries the payload holds");
        prev = p;
    }
    if (m->nbytes != ent + prev * 4)
        return cmf__error(CMF_ERR_SIZE,
                          "tensor '%s': q1t payload is %llu bytes, row_ptr[%llu] = %llu outliers need %llu",
                          what, (ull)m->nbytes, (ull)r, (ull)prev, (ull)(ent + prev * 4));
    m->aux = rp;
    m->aux2 = m->data + ent;
    for (uint64_t i = 0; i < r; i++) {
        uint64_t a = cmf__rd32(rp + 4 * i), b = cmf__rd32(rp + 4 * (i + 1));
        for (uint64_t e = a; e < b; e++) {
            unsigned col = cmf__rd16(m->aux2 + 4 * e);
            if ((int64_t)col >= m->cols)
                return cmf__error(CMF_ERR_BOUNDS,
                                  "tensor '%s': q1t outlier %llu (row %llu) at payload byte %llu: column %u outside %lld columns",
                                  what, (ull)e, (ull)i, (ull)(ent + 4 * e), col, (long long)m->cols);
            if (e > a && col <= cmf__rd16(m->aux2 + 4 * (e - 1)))
                return cmf__error(CMF_ERR_BOUNDS,
                                  "tensor '%s': q1t outlier %llu (row %llu) at payload byte %llu: column %u not increasing",
                                  what, (ull)e, (ull)i, (ull)(ent + 4 * e), col);
        }
    }
    return CMF_OK;
}

cmf_status cmf__qmat_init(cmf__qmat *m, int dtype, const uint8_t *data, uint64_t nbytes,
                          int ndim, const uint64_t *shape, const char *what)
{
    memset(m, 0, sizeof *m);
    if (!what) what = "?";
    int64_t rows, cols;
    cmf_status st = cmf__quant_check_shape(dtype, ndim, shape, &rows, &cols);
    if (st) return cmf__error_prefix(st, "tensor '%s'", what);
    if (!data && nbytes)
        return cmf__error(CMF_ERR_ARG, "tensor '%s': NULL payload of %llu bytes", what, (ull)nbytes);
    m->dtype = dtype;
    m->data = data;
    m->nbytes = nbytes;
    m->rows = rows;
    m->cols = cols;
    uint64_t n = (uint64_t)rows * (uint64_t)cols, groups = cmf__div_ceil(n, 32);
    if (cmf__dtype_get(dtype)->fixed_size) {
        uint64_t want;
        st = cmf__dtype_nbytes(dtype, ndim, shape, &want);
        if (st) return cmf__error_prefix(st, "tensor '%s'", what);
        if (want != nbytes)
            return cmf__error(CMF_ERR_SIZE, "tensor '%s': %s payload is %llu bytes, expected %llu for %lld x %lld",
                              what, cmf__dtype_get(dtype)->name, (ull)nbytes, (ull)want,
                              (long long)rows, (long long)cols);
    }
    switch (dtype) {
    case CMF_DTYPE_Q8_ROW: m->aux = data + n; break;
    case CMF_DTYPE_Q8_2F: m->aux = data + n; m->aux2 = data + n + 2 * (uint64_t)rows; break;
    case CMF_DTYPE_Q4_BLOCK: m->aux = data + 16 * groups; break;
    case CMF_DTYPE_Q4TP: m->aux = data + 16 * groups; m->aux2 = m->aux + 4 * (uint64_t)rows; break;
    case CMF_DTYPE_Q2TP: m->aux = data + 8 * groups; m->aux2 = m->aux + 4 * (uint64_t)rows; break;
    case CMF_DTYPE_VBIT: st = init_vbit(m, what, false); break;
    case CMF_DTYPE_VBIT_RO: st = init_vbit(m, what, true); break;
    case CMF_DTYPE_Q1S: st = init_q1s(m, what); break;
    case CMF_DTYPE_Q1T: st = init_q1t(m, what); break;
    default: break;
    }
    if (st) cmf__qmat_free(m);
    return st;
}

void cmf__qmat_free(cmf__qmat *m)
{
    if (!m) return;
    free(m->row_off);
    m->row_off = NULL;
}

/* ---- decode: one row, chunk by chunk ------------------------------------
 * A chunk is a run of at most 32 weights inside one row and one 32-group
 * (groups are cols-aligned except in q4_block, where they run over the
 * flattened tensor). Per-row state is set up once in row_begin. */

typedef struct rowctx {
    const cmf__qmat *m;
    int64_t row;
    float scale;            /* q8_row / q8_2f row scale */
    float ladder[32];       /* q4tp / q2tp */
    const uint8_t *codes;   /* q4tp / q2tp: this row's code plane */
    const uint8_t *packed;  /* vbit: this row's bits */
    int bits;               /* vbit width */
    float level;            /* vbit L = 2^(b-1)-1 */
    uint64_t cur, end;      /* q1s / q1t: overlay entries of this row */
} rowctx;

static void row_begin(rowctx *c, const cmf__qmat *m, int64_t row)
{
    c->m = m;
    c->row = row;
    switch (m->dtype) {
    case CMF_DTYPE_Q8_ROW:
    case CMF_DTYPE_Q8_2F: c->scale = cmf__quant_f16(cmf__rd16(m->aux + 2 * row)); break;
    case CMF_DTYPE_Q4TP:
    case CMF_DTYPE_Q2TP:
        cmf__qmat_tp_ladder(m, row, c->ladder);
        c->codes = m->aux2 + (uint64_t)row * cmf__quant_tp_code_stride(m->cols);
        break;
    case CMF_DTYPE_VBIT:
    case CMF_DTYPE_VBIT_RO:
        c->bits = m->data[row];
        c->level = (float)((1 << (c->bits - 1)) - 1);
        c->packed = m->aux2 + (m->dtype == CMF_DTYPE_VBIT
                                   ? m->row_off[row]
                                   : cmf__rd32(m->aux + (uint64_t)m->rows * (uint64_t)(m->cols / 32) * 2 + 4 * row));
        break;
    case CMF_DTYPE_Q1S: {
        uint64_t first = (uint64_t)row * (uint64_t)m->cols;
        c->cur = q1s_lower_bound(m, first);
        c->end = q1s_lower_bound(m, first + (uint64_t)m->cols);
        break;
    }
    case CMF_DTYPE_Q1T: c->cur = cmf__rd32(m->aux + 4 * row); c->end = cmf__rd32(m->aux + 4 * row + 4); break;
    default: break;
    }
}

static void decode_nibbles(const uint8_t *nib, int k0, int len, float s, float *out)
{
    if (k0 == 0 && len == 32) { /* the common whole-tile case: two weights per byte */
        for (int j = 0; j < 16; j++) {
            out[2 * j] = ((float)(nib[j] & 15u) - 8.0f) * s;
            out[2 * j + 1] = ((float)(nib[j] >> 4) - 8.0f) * s;
        }
        return;
    }
    for (int k = 0; k < len; k++) {
        int kk = k0 + k;
        unsigned q = (nib[kk >> 1] >> ((kk & 1) * 4)) & 15u;
        out[k] = ((float)q - 8.0f) * s;
    }
}

/* Decodes weights [c0, c0+len) of the row (one chunk) into out. Always
 * inlined so the whole-chunk call sites (len == 32) get a constant trip
 * count the compiler can unroll and vectorize. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void decode_chunk(rowctx *c, int64_t c0, int len, float *out)
{
    const cmf__qmat *m = c->m;
    const uint8_t *d = m->data;
    uint64_t base = (uint64_t)c->row * (uint64_t)m->cols + (uint64_t)c0; /* flat index */
    uint64_t g = base / 32; /* flat group (== row*gpr + c0/32 for cols32 layouts) */
    switch (m->dtype) {
    case CMF_DTYPE_F32:
        for (int k = 0; k < len; k++) out[k] = cmf__bits_f32(cmf__rd32(d + 4 * (base + k)));
        break;
    case CMF_DTYPE_F16:
        for (int k = 0; k < len; k++) out[k] = cmf__quant_f16(cmf__rd16(d + 2 * (base + k)));
        break;
    case CMF_DTYPE_BF16:
        for (int k = 0; k < len; k++) out[k] = cmf__bf16_to_f32(cmf__rd16(d + 2 * (base + k)));
        break;
    case CMF_DTYPE_Q8_ROW:
        for (int k = 0; k < len; k++) out[k] = (float)(int8_t)d[base + k] * c->scale;
        break;
    case CMF_DTYPE_Q8_2F: {
        const uint8_t *col = m->aux2 + 2 * c0;
        for (int k = 0; k < len; k++)
            out[k] = (float)(int8_t)d[base + k] * c->scale * cmf__quant_f16(cmf__rd16(col + 2 * k));
        break;
    }
    case CMF_DTYPE_Q4_BLOCK:
        decode_nibbles(d + 16 * g, (int)(base % 32), len, cmf__quant_f16(cmf__rd16(m->aux + 2 * g)), out);
        break;
    case CMF_DTYPE_Q4_TILED:
        decode_nibbles(d + 18 * g + 2, 0, len, cmf__quant_f16(cmf__rd16(d + 18 * g)), out);
        break;
    case CMF_DTYPE_Q4TP:
        decode_nibbles(d + 16 * g, 0, len, c->ladder[cmf__quant_tp_code(c->codes, c0 / 32)], out);
        break;
    case CMF_DTYPE_Q2TP: {
        unsigned rung = cmf__quant_tp_code(c->codes, c0 / 32);
        float s = rung ? c->ladder[rung - 1] : 0.0f;
        const uint8_t *q = d + 8 * g;
        for (int k = 0; k < len; k++) out[k] = ((float)((q[k >> 2] >> ((k & 3) * 2)) & 3u) - 1.5f) * s;
        break;
    }
    case CMF_DTYPE_VBIT:
    case CMF_DTYPE_VBIT_RO: {
        /* chunks start on a 32-weight boundary, and 32 * b bits is whole
         * bytes, so each chunk's bits start byte-aligned: stream them
         * MSB-first through an accumulator */
        int b = c->bits;
        uint32_t mask = (1u << b) - 1, acc = 0;
        int nbits = 0;
        float s = cmf__quant_f16(cmf__rd16(m->aux + 2 * g));
        const uint8_t *p = c->packed + (uint64_t)c0 * (uint64_t)b / 8;
        for (int k = 0; k < len; k++) {
            if (nbits < b) { acc = acc << 8 | *p++; nbits += 8; }
            nbits -= b;
            out[k] = ((float)((acc >> nbits) & mask) - c->level) * s;
        }
        break;
    }
    case CMF_DTYPE_Q1:
    case CMF_DTYPE_Q1S: {
        const uint8_t *t = d + 6 * g;
        float s = cmf__quant_f16(cmf__rd16(t)), val[2] = {-s, s};
        for (int k = 0; k < len; k++) out[k] = val[(t[2 + (k >> 3)] >> (k & 7)) & 1u];
        if (m->dtype == CMF_DTYPE_Q1S) {
            uint64_t lim = base + (uint64_t)len;
            for (; c->cur < c->end; c->cur++) {
                const uint8_t *e = m->aux2 + 6 * c->cur;
                uint64_t idx = cmf__rd32(e);
                if (idx >= lim) break;
                out[idx - base] = cmf__quant_f16(cmf__rd16(e + 4));
            }
        }
        break;
    }
    case CMF_DTYPE_Q1T: {
        const uint8_t *t = d + 9 * g;
        float s = cmf__quant_f16(cmf__rd16(t)), val[3] = {0.0f, s, -s};
        /* base-3 digits, least significant first: five per byte (a byte
         * above 242 has a sixth digit, which no weight reads) */
        for (int j = 0, k = 0; j < 7 && k < len; j++) {
            unsigned v = t[2 + j];
            for (int i = 0; i < 5 && k < len; i++, k++) {
                out[k] = val[v % 3];
                v /= 3;
            }
        }
        for (; c->cur < c->end; c->cur++) {
            const uint8_t *e = m->aux2 + 4 * c->cur;
            int64_t col = cmf__rd16(e);
            if (col >= c0 + len) break;
            out[col - c0] = cmf__quant_f16(cmf__rd16(e + 2));
        }
        break;
    }
    default: /* qmat_init admits no other dtype */
        memset(out, 0, (size_t)len * sizeof *out);
        break;
    }
}

/* Length of the chunk starting at column c0. */
static int chunk_len(const cmf__qmat *m, int64_t row, int64_t c0)
{
    int64_t left = m->cols - c0, n = 32;
    if (m->dtype == CMF_DTYPE_Q4_BLOCK) n = 32 - (int64_t)(((uint64_t)row * (uint64_t)m->cols + (uint64_t)c0) % 32);
    return (int)(left < n ? left : n);
}

void cmf__qmat_decode_row(const cmf__qmat *m, int64_t row, float *out)
{
    rowctx c;
    row_begin(&c, m, row);
    for (int64_t c0 = 0; c0 < m->cols;) {
        int len = chunk_len(m, row, c0);
        if (len == 32) decode_chunk(&c, c0, 32, out + c0);
        else decode_chunk(&c, c0, len, out + c0);
        c0 += len;
    }
}

float cmf__qmat_dot_row(const cmf__qmat *m, int64_t row, const float *x)
{
    rowctx c;
    float w[32], sum = 0.0f;
    row_begin(&c, m, row);
    for (int64_t c0 = 0; c0 < m->cols;) {
        int len = chunk_len(m, row, c0);
        if (len == 32) decode_chunk(&c, c0, 32, w);
        else decode_chunk(&c, c0, len, w);
        float part = 0.0f;
        for (int k = 0; k < len; k++) part += w[k] * x[c0 + k];
        sum += part;
        c0 += len;
    }
    return sum;
}

void cmf__qmat_tp_ladder(const cmf__qmat *m, int64_t row, float ladder[32])
{
    cmf__quant_tp_ladder(cmf__quant_f16(cmf__rd16(m->aux + 4 * row)),
                         cmf__quant_f16(cmf__rd16(m->aux + 4 * row + 2)), ladder);
}

unsigned cmf__qmat_tp_code(const cmf__qmat *m, int64_t row, int64_t g)
{
    return cmf__quant_tp_code(m->aux2 + (uint64_t)row * cmf__quant_tp_code_stride(m->cols), g);
}
