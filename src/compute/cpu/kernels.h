/* kernels.h — CPU kernel tables, one per ISA: per dtype a row dot product,
 * a row decode and an optional integer matmul (activations quantized to
 * int8 blocks). The reference table routes every dtype through the quant
 * module's scalar cmf__qmat_dot_row / decode_row; the generic, avx2,
 * avx512 and neon tables each start from a simpler one and override what
 * they have (any entry may be left to the table below), so an ISA file
 * fills in only its own kernels. Picked once at start from CPU feature checks; tests
 * compare each against the reference and the exact integer sums. */
#ifndef CMF_COMPUTE_CPU_KERNELS_H
#define CMF_COMPUTE_CPU_KERNELS_H

#include "cmf.h"
#include "quant/quant.h"
#include "util/arith.h"
#include "util/half.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef float (*cmf__kdot_fn)(const cmf__qmat *w, int64_t row, const float *x);
typedef void (*cmf__kdecode_fn)(const cmf__qmat *w, int64_t row, float *out);

/* An integer matmul path for one weight dtype: the activations of a
 * matmul are quantized once per token to 8-bit blocks of `xblock` values
 * (scale d = max|x| / 127, q = nearest(x * 127 / max|x|), ties to even; an
 * all-zero block has d = 0), in a layout private to the table that made
 * them, and the kernel takes integer dot products of those with the
 * weight's own integer codes, scaling per block. Every field is optional:
 * a table without `mm` for a dtype uses dot/decode on f32 activations. */
typedef struct cmf__kmmq {
    /* bytes of one quantized activation row of `cols` values (a multiple of 64);
     * xbytes, quant and xblock are set whenever mm or pmm is */
    size_t (*xbytes)(int64_t cols);
    void (*quant)(const float *x, int64_t cols, void *xq);
    /* y[t*ys + r] = w[r] · x_t for r0 <= r < r1, t < n; x_t at xq + t*xbytes(cols) */
    void (*mm)(const cmf__qmat *w, int64_t r0, int64_t r1, const void *xq, int64_t n, float *y, int64_t ys);
    int xblock; /* activation values per scale: 32, or 256 where the weight has one scale a row; 0: the
                 * activations stay f32 (f16 / bf16 weights: only the packed layout is gained) */
    /* Optional packed form, built once when a graph is prepared: the weight
     * re-laid in groups of 16 rows for a tile kernel that reads only it
     * (same activations as mm). pack_bytes: its size (0: none for this
     * shape); pack: row groups [g0, g1) into dst, the whole packed buffer
     * (disjoint groups may be packed by several threads at once); pmm: as
     * mm over the packed form, r0 a multiple of 16. */
    /* the activations are x ⊙ the weight's column scales (q8_2f: f16 per
     * column at aux2) before quantization: q8_2f runs as q8_row */
    bool col_scaled;
    /* xblock 0 only: activations rounded to bf16 (nearest even), and f16
     * weights too when packed (the opt-in bf16-dot table) */
    bool bf16;
    size_t (*pack_bytes)(const cmf__qmat *w);
    /* the packed kernel's activations where they differ from quant's
     * (NULL: quant, xbytes, xblock) */
    size_t (*pxbytes)(int64_t cols);
    void (*pquant)(const float *x, int64_t cols, void *xq);
    int pxblock;
    void (*pack)(const cmf__qmat *w, int64_t g0, int64_t g1, uint8_t *dst);
    void (*pmm)(const cmf__qmat *w, const uint8_t *packed, int64_t r0, int64_t r1, const void *xq, int64_t n, float *y,
                int64_t ys);
} cmf__kmmq;
#define CMF__KPACK_ROWS 16 /* rows of a packed group */

/* The packed layouts shared by the ISA tables (kern_pack.c says how they
 * lie). q8: q8_row and q8_2f (its codes and row scales); q4: q4_block,
 * q4_tiled and q4tp (whole 32-groups per row, else 0 bytes). */
size_t cmf__kpack_q8_bytes(const cmf__qmat *w);
size_t cmf__kpack_q8_group_bytes(int64_t cols); /* the codes of one group, without the scales */
void cmf__kpack_q8(const cmf__qmat *w, int64_t g0, int64_t g1, uint8_t *dst);
enum { CMF__KPACK_Q4_BLOCK, CMF__KPACK_Q4_TILED, CMF__KPACK_Q4TP };
int cmf__kpack_q4_layout(const cmf__qmat *w);
size_t cmf__kpack_q4_block_bytes(int layout); /* one 32-block of a group */
size_t cmf__kpack_q4_group_bytes(const cmf__qmat *w);
size_t cmf__kpack_q4_bytes(const cmf__qmat *w);
void cmf__kpack_q4(const cmf__qmat *w, int64_t g0, int64_t g1, uint8_t *dst);
/* f16 / bf16: per column the group's 16 values as stored (32 bytes); their
 * activations are an f32 copy, zero-padded to 16 values. */
#define CMF__KPACK_HALF_COL (2 * CMF__KPACK_ROWS) /* bytes of one column of a group */
static inline size_t cmf__kpack_half_group_bytes(int64_t cols) { return (size_t)cols * CMF__KPACK_HALF_COL; }
size_t cmf__kpack_half_bytes(const cmf__qmat *w);
void cmf__kpack_half(const cmf__qmat *w, int64_t g0, int64_t g1, uint8_t *dst);
size_t cmf__kpack_xf_bytes(int64_t cols);
void cmf__kpack_xf_quant(const float *x, int64_t cols, void *xq);
/* The packed integer matmul (cmf__kmmq.pmm) NAME of a table whose tile
 * TILE(w, pk, g, x, xs, y, ys, T) computes group g for T <= 2 tokens (x:
 * quantized activations, XBYTES(cols) bytes a token): the groups of rows
 * r0 .. r1, each over the tokens two at a time, then the last one. One
 * driver for q8 and q4 on every ISA. */
#define CMF__KPACK_INT_PMM(NAME, TILE, XBYTES)                                                                    \
    static void NAME(const cmf__qmat *w, const uint8_t *pk, int64_t r0, int64_t r1, const void *xq, int64_t n,    \
                     float *y, int64_t ys)                                                                        \
    {                                                                                                             \
        const size_t xs = XBYTES(w->cols);                                                                        \
        for (int64_t g = r0 / CMF__KPACK_ROWS; g < (r1 + CMF__KPACK_ROWS - 1) / CMF__KPACK_ROWS; g++) {           \
            int64_t t = 0;                                                                                        \
            for (; t + 2 <= n; t += 2) TILE(w, pk, g, (const uint8_t *)xq + (size_t)t * xs, xs, y + t * ys, ys, 2); \
            for (; t < n; t++) TILE(w, pk, g, (const uint8_t *)xq + (size_t)t * xs, xs, y + t * ys, ys, 1);       \
        }                                                                                                         \
    }
/* The packed f16 / bf16 matmul (cmf__kmmq.pmm) NAME of a table whose tile
 * TILE(w, pk, bf, g, x, xs, y, ys, RG, T) computes groups g .. g+RG-1 (RG
 * <= 2) for T <= 3 tokens (x: f32 rows xs floats apart): the groups of
 * rows r0 .. r1 two at a time, the tokens three at a time, then the rest. */
#define CMF__KPACK_HALF_PMM(NAME, TILE)                                                                       \
    static inline __attribute__((always_inline)) void NAME##_tiles(const cmf__qmat *w, const uint8_t *pk,    \
                                                                   bool bf, int64_t g, int RG, const float *x, \
                                                                   size_t xs, int64_t n, float *y, int64_t ys) \
    {                                                                                                         \
        int64_t t = 0;                                                                                        \
        for (; t + 3 <= n; t += 3) TILE(w, pk, bf, g, x + (size_t)t * xs, xs, y + t * ys, ys, RG, 3);         \
        if (n - t == 2) TILE(w, pk, bf, g, x + (size_t)t * xs, xs, y + t * ys, ys, RG, 2);                    \
        if (n - t == 1) TILE(w, pk, bf, g, x + (size_t)t * xs, xs, y + t * ys, ys, RG, 1);                    \
    }                                                                                                         \
    static inline __attribute__((always_inline)) void NAME##_bf(const cmf__qmat *w, const uint8_t *pk, bool bf, \
                                                                int64_t r0, int64_t r1, const void *xq,       \
                                                                int64_t n, float *y, int64_t ys)              \
    {                                                                                                         \
        const size_t xs = cmf__kpack_xf_bytes(w->cols) / sizeof(float);                                       \
        const int64_t g1 = (r1 + CMF__KPACK_ROWS - 1) / CMF__KPACK_ROWS;                                      \
        for (int64_t g = r0 / CMF__KPACK_ROWS; g < g1; g += 2) {                                              \
            if (g + 2 <= g1) NAME##_tiles(w, pk, bf, g, 2, xq, xs, n, y, ys);                                 \
            else NAME##_tiles(w, pk, bf, g, 1, xq, xs, n, y, ys);                                             \
        }                                                                                                     \
    }                                                                                                         \
    static void NAME(const cmf__qmat *w, const uint8_t *pk, int64_t r0, int64_t r1, const void *xq, int64_t n, \
                     float *y, int64_t ys)                                                                    \
    {                                                                                                         \
        if (w->dtype == CMF_DTYPE_BF16) NAME##_bf(w, pk, true, r0, r1, xq, n, y, ys);                         \
        else NAME##_bf(w, pk, false, r0, r1, xq, n, y, ys);                                                   \
    }
/* Signed activations for packed kernels (NEON sdot, AVX2): q8 blocks of 256
 * [256 x int8][d: f32, padded to 64 bytes]; q4 quads of four 32-blocks
 * [64: elements 0..15 of each][64: 16..31][16 x f32: d per lane, 4 a block]
 * [16 x f32: 2 d Σq per lane]. The rule of every integer path. */
size_t cmf__kpack_xq8_bytes(int64_t cols);
void cmf__kpack_xq8_quant(const float *x, int64_t cols, void *xq);
size_t cmf__kpack_xq4_bytes(int64_t cols);
void cmf__kpack_xq4_quant(const float *x, int64_t cols, void *xq);

typedef struct cmf__cpu_kernels {
    const char *isa;
    cmf__kdot_fn dot[CMF_DTYPE_COUNT_];       /* w[row] · x */
    cmf__kdecode_fn decode[CMF_DTYPE_COUNT_]; /* w[row] -> out[cols] */
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    /* out[j] = w · x[j*x_stride .. +n) for j < 4: one weight row, four tokens */
    void (*dot_f32_x4)(const float *w, const float *x, int64_t x_stride, int64_t n, float out[4]);
    /* two weight rows (w, w + n) by four tokens: out[r*4 + j] */
    void (*dot_f32_2x4)(const float *w, const float *x, int64_t x_stride, int64_t n, float out[8]);
    void (*axpy)(float *y, float a, const float *x, int64_t n); /* y += a*x */
    /* f16 KV cache rows: a · x16, y += a * x16, and the store y16 = f16(x) (round to nearest even) */
    float (*dot_f16)(const float *a, const uint16_t *x, int64_t n);
    void (*axpy_f16)(float *y, float a, const uint16_t *x, int64_t n);
    void (*store_f16)(uint16_t *y, const float *x, int64_t n);
    /* f16 KV rows k + r*stride (r < n_rows, hd values each): out[r] = a · k_r, and
     * y[0..hd) += Σ_r p[r] · v_r (attention scores and the weighted sum of values) */
    void (*dot_f16_rows)(const float *a, const uint16_t *k, size_t stride, int64_t n_rows, int64_t hd, float *out);
    void (*axpy_f16_rows)(float *y, const float *p, const uint16_t *v, size_t stride, int64_t n_rows, int64_t hd);
    /* A block of queries against a run of f16 KV rows (prefill attention):
     * s[i*ss + j] = q_i · k_j with q_i at q + i*hd (i < nq) and k_j at k + j*stride
     * (j < nk); and o[i*hd ..] += Σ_j p[i*ps + j] · v_j. Optional: call them
     * through cmf__kern_qk_f16 / cmf__kern_pv_f16, which run the row
     * kernels above once per query where a table has no block kernel. */
    void (*qk_f16)(const float *q, int64_t nq, const uint16_t *k, size_t stride, int64_t nk, int64_t hd, float *s,
                   int64_t ss);
    void (*pv_f16)(float *o, const float *p, int64_t ps, int64_t nq, const uint16_t *v, size_t stride, int64_t nk,
                   int64_t hd);
    /* s[i] = exp(s[i] - m) for i < n; returns their sum (exp within 2 ulp) */
    float (*exp_sum)(float *s, int64_t n, float m);
    /* y[i] = x[i] / (1 + exp(-x[i])) * u[i] (SiLU-gated unit; y may be x or u) */
    void (*silu_mul)(float *y, const float *x, const float *u, int64_t n);
    cmf__kmmq mmq[CMF_DTYPE_COUNT_];
} cmf__cpu_kernels;

/* The block attention of table k (kernels without one: its row kernels, query by query). */
static inline void cmf__kern_qk_f16(const cmf__cpu_kernels *k, const float *q, int64_t nq, const uint16_t *kr,
                                    size_t stride, int64_t nk, int64_t hd, float *s, int64_t ss)
{
    if (k->qk_f16) k->qk_f16(q, nq, kr, stride, nk, hd, s, ss);
    else
        for (int64_t i = 0; i < nq; i++) k->dot_f16_rows(q + i * hd, kr, stride, nk, hd, s + i * ss);
}
static inline void cmf__kern_pv_f16(const cmf__cpu_kernels *k, float *o, const float *p, int64_t ps, int64_t nq,
                                    const uint16_t *v, size_t stride, int64_t nk, int64_t hd)
{
    if (k->pv_f16) k->pv_f16(o, p, ps, nq, v, stride, nk, hd);
    else
        for (int64_t i = 0; i < nq; i++) k->axpy_f16_rows(o + i * hd, p + i * ps, v, stride, nk, hd);
}

const cmf__cpu_kernels *cmf__cpu_kernels_ref(void);
const cmf__cpu_kernels *cmf__cpu_kernels_generic(void);
/* Each ISA table is built only for its architecture (CMakeLists.txt picks
 * the kern_<isa>.c files); elsewhere its getter is an inline returning NULL,
 * so callers need no #if. */
#if defined(__x86_64__) || defined(__i386__)
/* NULL when the CPU lacks AVX2+FMA+F16C. */
const cmf__cpu_kernels *cmf__cpu_kernels_avx2(void);
/* NULL when the CPU lacks AVX-512 F/BW/VL/VNNI (+ the AVX2 set). */
const cmf__cpu_kernels *cmf__cpu_kernels_avx512(void);
/* Sets the packed integer entries of the AVX2 table (kern_x86_pack_avx2.c). */
void cmf__kern_avx2_fill_packed(cmf__cpu_kernels *k);
/* Sets the packed entries of the AVX-512 table (kern_x86_pack_avx512.c). */
void cmf__kern_avx512_fill_packed(cmf__cpu_kernels *k);
/* Replaces its f16 / bf16 entries with bf16 dot products (vdpbf16ps). */
void cmf__kern_avx512_fill_bf16dot(cmf__cpu_kernels *k);
/* The AVX-512 table with f16 / bf16 matmuls as bf16 dot products: weights
 * and activations rounded to bf16 (CMF_CPU_BF16_DOT=1 picks it); NULL when
 * the CPU lacks AVX512_BF16 or the AVX-512 table. */
const cmf__cpu_kernels *cmf__cpu_kernels_avx512_bf16dot(void);
#else
static inline const cmf__cpu_kernels *cmf__cpu_kernels_avx2(void) { return NULL; }
static inline const cmf__cpu_kernels *cmf__cpu_kernels_avx512(void) { return NULL; }
static inline const cmf__cpu_kernels *cmf__cpu_kernels_avx512_bf16dot(void) { return NULL; }
#endif
#if defined(__aarch64__)
/* NEON (Advanced SIMD, always present on AArch64). */
const cmf__cpu_kernels *cmf__cpu_kernels_neon(void);
/* Sets the packed SDOT entries of the NEON table (kern_neon_dotprod.c);
 * call only where HWCAP_ASIMDDP is set. */
void cmf__kern_neon_fill_dotprod(cmf__cpu_kernels *k);
#else
static inline const cmf__cpu_kernels *cmf__cpu_kernels_neon(void) { return NULL; }
#endif
/* Fills a table with the generic kernels (no one-time init involved). */
void cmf__cpu_kernels_fill_generic(cmf__cpu_kernels *k);
/* The fastest table this CPU runs (computed once). */
const cmf__cpu_kernels *cmf__cpu_kernels_best(void);

/* Layout helpers shared by the tables (CMF v2 §3.2). Fast paths require a
 * 2-D matrix with cols % 32 == 0 for q4 layouts (rows start on a group). */
static inline int cmf__kern_q4_fast_ok(const cmf__qmat *w) { return w->cols % 32 == 0; }
/* Whether table k has a matmul of its own for w, unpacked or packed (q4
 * layouts need whole groups per row); without mm only a packed w takes it. */
static inline bool cmf__kern_mmq_ok(const cmf__cpu_kernels *k, const cmf__qmat *w)
{
    return (k->mmq[w->dtype].mm || k->mmq[w->dtype].pmm) &&
           (w->dtype == CMF_DTYPE_Q8_ROW || w->dtype == CMF_DTYPE_Q8_2F || w->dtype == CMF_DTYPE_F16 ||
            w->dtype == CMF_DTYPE_BF16 || cmf__kern_q4_fast_ok(w));
}
/* One row of a q4_block or q4_tiled matrix with whole groups (fast-path
 * shapes), group by group: q4_block keeps the nibbles in one plane and the
 * f16 scales in another (aux), q4_tiled a 2-byte scale before each group's
 * 16 nibble bytes; q4tp's nibbles lie as q4_block's (its scales are codes
 * into the row's ladder: cmf__qmat_tp_code). The row kernels of every table
 * walk rows through it. */
typedef struct cmf__kq4_row {
    const uint8_t *nib, *scale;
    uint32_t nib_step, scale_step;
    uint64_t groups;
} cmf__kq4_row;
static inline cmf__kq4_row cmf__kern_q4_row(const cmf__qmat *w, int64_t row)
{
    const uint64_t gpr = (uint64_t)w->cols / 32, g0 = (uint64_t)row * gpr;
    if (w->dtype == CMF_DTYPE_Q4_TILED) return (cmf__kq4_row){w->data + 18 * g0 + 2, w->data + 18 * g0, 18, 18, gpr};
    return (cmf__kq4_row){w->data + 16 * g0, w->aux + 2 * g0, 16, 2, gpr};
}
static inline const uint8_t *cmf__kq4_nib(const cmf__kq4_row *r, uint64_t g) { return r->nib + r->nib_step * g; }
static inline const uint8_t *cmf__kq4_scale_bits(const cmf__kq4_row *r, uint64_t g)
{
    return r->scale + r->scale_step * g; /* the f16 scale, as stored */
}
static inline float cmf__kq4_scale(const cmf__kq4_row *r, uint64_t g)
{
    return cmf__f16_to_f32(cmf__rd16(cmf__kq4_scale_bits(r, g)));
}

#endif
