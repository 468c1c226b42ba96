/* quantize.c — the encoders: f32/f16/bf16 copies and the grouped integer
 * layouts. Every encoder rounds a scale to f16 FIRST and quantizes against
 * the reconstructed scale, so the codes it picks are the nearest ones for
 * what a reader will actually multiply by. Input must be finite. */
#include "quant/quant_internal.h"

#include "util/arith.h"
#include "util/error.h"
#include "util/half.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long ull;

cmf__quant_opts cmf__quant_opts_default(void)
{
    cmf__quant_opts o = {.vbit_mean_bits = 4.0, .vbit_theta = NAN, .q1t_outlier_frac = 0.005,
                         .q1s_outlier_frac = 0.005};
    return o;
}

/* f16 round trip of a scale (what a reader will see). */
static inline float f16_round(float x) { return cmf__f16_to_f32(cmf__f32_to_f16(x)); }

/* Nearest integer of x clamped to [lo, hi]. */
static inline int qround(float x, int lo, int hi)
{
    float r = rintf(x);
    if (r < (float)lo) return lo;
    if (r > (float)hi) return hi;
    return (int)r;
}

static float absmax(const float *x, int64_t n)
{
    float a = 0.0f;
    for (int64_t i = 0; i < n; i++) a = fmaxf(a, fabsf(x[i]));
    return a;
}

/* Largest f16 scale s with s*lim >= amax, as close to amax/lim as f16
 * allows: rounding the scale down would clip the group's largest weight. */
static float scale_for(float amax, float lim)
{
    if (amax == 0.0f) return 0.0f;
    float s = f16_round(amax / lim);
    if (s * lim < amax) {
        uint16_t h = cmf__f32_to_f16(s);
        if ((h & 0x7fff) < 0x7bff) s = cmf__f16_to_f32((uint16_t)(h + 1));
    }
    return s;
}

/* Reciprocal for quantizing against s (0 for an all-zero group). */
static inline float inv_of(float s) { return s > 0.0f ? 1.0f / s : 0.0f; }

/* ---- f32 / f16 / bf16 --------------------------------------------------- */

static cmf_status enc_float(int dtype, const float *src, uint64_t n, uint8_t *o)
{
    for (uint64_t i = 0; i < n; i++) {
        if (dtype == CMF_DTYPE_F32) cmf__wr32(o + 4 * i, cmf__f32_bits(src[i]));
        else if (dtype == CMF_DTYPE_F16) cmf__wr16(o + 2 * i, cmf__f32_to_f16(src[i]));
        else cmf__wr16(o + 2 * i, cmf__f32_to_bf16(src[i]));
    }
    return CMF_OK;
}

/* ---- q8_row ------------------------------------------------------------- */

static void enc_q8_row(const float *src, int64_t rows, int64_t cols, uint8_t *o)
{
    uint8_t *sc = o + (uint64_t)rows * (uint64_t)cols;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = src + r * cols;
        float s = scale_for(absmax(x, cols), 127.0f), inv = inv_of(s);
        cmf__wr16(sc + 2 * r, cmf__f32_to_f16(s));
        for (int64_t i = 0; i < cols; i++) o[r * cols + i] = (uint8_t)(int8_t)qround(x[i] * inv, -127, 127);
    }
}

/* ---- q4_block / q4_tiled ------------------------------------------------ */

/* One 32-group of q4 (len <= 32 weights, the rest zero-padded): returns
 * the f16 scale bits and writes 16 nibble bytes. */
static uint16_t enc_q4_group(const float *x, int len, uint8_t nib[16])
{
    float s = scale_for(absmax(x, len), 7.0f), inv = inv_of(s);
    memset(nib, 0x88, 16);
    for (int k = 0; k < len; k++) {
        unsigned q = (unsigned)(qround(x[k] * inv, -8, 7) + 8);
        nib[k >> 1] = (uint8_t)((nib[k >> 1] & ~(15u << ((k & 1) * 4))) | q << ((k & 1) * 4));
    }
    return cmf__f32_to_f16(s);
}

static void enc_q4(int dtype, const float *src, uint64_t n, uint8_t *o)
{
    uint64_t groups = cmf__div_ceil(n, 32);
    for (uint64_t g = 0; g < groups; g++) {
        int len = (int)(n - 32 * g < 32 ? n - 32 * g : 32);
        uint8_t nib[16];
        uint16_t s = enc_q4_group(src + 32 * g, len, nib);
        if (dtype == CMF_DTYPE_Q4_BLOCK) {
            memcpy(o + 16 * g, nib, 16);
            cmf__wr16(o + 16 * groups + 2 * g, s);
        } else {
            cmf__wr16(o + 18 * g, s);
            memcpy(o + 18 * g + 2, nib, 16);
        }
    }
}

/* ---- q8_2f: w = q * row_scale[o] * col[i] ------------------------------ */

/* f16 of x, floored at the smallest normal f16 (a zero field would make
 * the column unrecoverable and divide by zero). */
static float f16_field(float x) { return fmaxf(f16_round(x), 6.1035156e-5f); }

static cmf_status enc_q8_2f(const float *src, int64_t rows, int64_t cols, uint8_t *o)
{
    uint64_t n = (uint64_t)rows * (uint64_t)cols;
    uint8_t *rs = o + n, *cf = o + n + 2 * (uint64_t)rows;
    float *col = malloc((size_t)(cols + 1) * sizeof *col);
    if (!col) return cmf__error(CMF_ERR_NOMEM, "out of memory");
    /* the column field is the RMS of the column over rows: it absorbs
     * outlier input channels, the row scale absorbs loud rows */
    for (int64_t i = 0; i < cols; i++) {
        double acc = 0;
        for (int64_t r = 0; r < rows; r++) acc += (double)src[r * cols + i] * src[r * cols + i];
        col[i] = f16_field(rows ? (float)sqrt(acc / (double)rows) : 1.0f);
        cmf__wr16(cf + 2 * i, cmf__f32_to_f16(col[i]));
    }
    for (int64_t r = 0; r < rows; r++) {
        const float *x = src + r * cols;
        float amax = 0;
        for (int64_t i = 0; i < cols; i++) amax = fmaxf(amax, fabsf(x[i] / col[i]));
        float s = scale_for(amax, 127.0f);
        cmf__wr16(rs + 2 * r, cmf__f32_to_f16(s));
        for (int64_t i = 0; i < cols; i++) {
            float step = s * col[i]; /* what the reader multiplies q by */
            o[r * cols + i] = (uint8_t)(int8_t)qround(x[i] * inv_of(step), -127, 127);
        }
    }
    free(col);
    return CMF_OK;
}

/* ---- q1: w = +-scale, scale = mean|group| -------------------------------- */

static void enc_q1_tile(const float *x, const uint8_t *skip, uint8_t t[6])
{
    float sum = 0;
    int cnt = 0;
    for (int k = 0; k < 32; k++)
        if (!skip || !skip[k]) { sum += fabsf(x[k]); cnt++; }
    cmf__wr16(t, cmf__f32_to_f16(cnt ? sum / (float)cnt : 0.0f));
    memset(t + 2, 0, 4);
    for (int k = 0; k < 32; k++)
        if (x[k] >= 0.0f) t[2 + k / 8] |= (uint8_t)(1u << (k % 8));
}

/* ---- outlier selection (q1s, q1t) --------------------------------------- */

/* The k-th largest value (1-based) of a[0..n), reordering a: quickselect
 * with a median-of-three pivot, expected O(n). */
static float kth_largest(float *a, uint64_t n, uint64_t k)
{
    uint64_t lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        float x = a[lo], y = a[mid], z = a[hi];
        float piv = x > y ? (y > z ? y : (x > z ? z : x)) : (x > z ? x : (y > z ? z : y));
        uint64_t i = lo, j = hi;
        while (i <= j) { /* descending: larger values to the left */
            while (a[i] > piv) i++;
            while (a[j] < piv) j--;
            if (i <= j) {
                float t = a[i]; a[i] = a[j]; a[j] = t;
                i++;
                if (j == 0) break;
                j--;
            }
        }
        if (want <= j && j != (uint64_t)-1) hi = j;
        else if (want >= i) lo = i;
        else return a[want];
    }
    return a[want];
}

/* Marks the k weights of largest magnitude (ties broken by index order).
 * Returns a malloc'd flag array of n bytes, NULL on out of memory. */
static uint8_t *mark_outliers(const float *src, uint64_t n, uint64_t k)
{
    uint8_t *flag = calloc(n ? n : 1, 1);
    if (!flag || k == 0) return flag;
    float *mag = malloc(n * sizeof *mag);
    if (!mag) { free(flag); return NULL; }
    for (uint64_t i = 0; i < n; i++) mag[i] = fabsf(src[i]);
    float thr = kth_largest(mag, n, k);
    free(mag);
    uint64_t taken = 0;
    for (uint64_t i = 0; i < n; i++)
        if (fabsf(src[i]) > thr) { flag[i] = 1; taken++; }
    for (uint64_t i = 0; i < n && taken < k; i++)
        if (fabsf(src[i]) == thr && !flag[i]) { flag[i] = 1; taken++; }
    return flag;
}

static uint64_t outlier_count(double frac, uint64_t n)
{
    if (!(frac > 0)) return 0;
    double k = floor(frac * (double)n + 0.5);
    return k >= (double)n ? n : (uint64_t)k;
}

static cmf_status enc_q1s(const float *src, int64_t rows, int64_t cols, double frac, cmf__buf *out,
                          const char *what)
{
    uint64_t n = (uint64_t)rows * (uint64_t)cols, k = outlier_count(frac, n);
    if (k && n - 1 > UINT32_MAX)
        return cmf__error(CMF_ERR_SIZE, "tensor '%s': q1s flat indices are u32, %llu weights do not fit",
                          what, (ull)n);
    uint8_t *flag = mark_outliers(src, n, k);
    if (!flag) return cmf__error(CMF_ERR_NOMEM, "tensor '%s': out of memory", what);
    cmf_status st = cmf__buf_reserve(out, n / 32 * 6 + 4 + 6 * k);
    for (uint64_t g = 0; !st && g < n / 32; g++) {
        uint8_t t[6];
        enc_q1_tile(src + 32 * g, flag + 32 * g, t);
        st = cmf__buf_append(out, t, 6);
    }
    uint8_t e[6];
    cmf__wr32(e, (uint32_t)k);
    if (!st) st = cmf__buf_append(out, e, 4);
    for (uint64_t i = 0; !st && i < n; i++)
        if (flag[i]) {
            cmf__wr32(e, (uint32_t)i);
            cmf__wr16(e + 4, cmf__f32_to_f16(src[i]));
            st = cmf__buf_append(out, e, 6);
        }
    free(flag);
    return st;
}

/* ---- q1t: ternary {-s, 0, +s} + per-row outliers ------------------------- */

/* One ternary tile. The scale maximizes the energy the ternary code
 * captures: with the m kept magnitudes sorted descending, coding the top j
 * as +-s (s = their mean) and the rest as 0 leaves error
 * sum|w|^2 - (sum of top j)^2 / j, so the best j maximizes S_j^2 / j. The
 * codes are then the nearest of {-s', 0, +s'} for the f16 scale s'. */
static void enc_q1t_tile(const float *x, const uint8_t *skip, uint8_t t[9])
{
    float mag[32];
    int m = 0;
    for (int k = 0; k < 32; k++)
        if (!skip[k]) mag[m++] = fabsf(x[k]);
    for (int i = 1; i < m; i++) { /* insertion sort, descending: m <= 32 */
        float v = mag[i];
        int j = i;
        for (; j > 0 && mag[j - 1] < v; j--) mag[j] = mag[j - 1];
        mag[j] = v;
    }
    double sum = 0, best = 0, best_s = 0;
    for (int j = 1; j <= m; j++) {
        sum += mag[j - 1];
        if (sum * sum / j > best) { best = sum * sum / j; best_s = sum / j; }
    }
    float s = f16_round((float)best_s), half = 0.5f * s;
    cmf__wr16(t, cmf__f32_to_f16(s));
    memset(t + 2, 0, 7);
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    for (int k = 0; k < 32; k++) {
        unsigned code = 0;
        if (!skip[k] && s > 0 && fabsf(x[k]) > half) code = x[k] > 0 ? 1 : 2;
        t[2 + k / 5] = (uint8_t)(t[2 + k / 5] + code * pow3[k % 5]);
    }
}

static cmf_status enc_q1t(const float *src, int64_t rows, int64_t cols, double frac, cmf__buf *out,
                          const char *what)
{
    uint64_t n = (uint64_t)rows * (uint64_t)cols, k = outlier_count(frac, n);
    if (cols > 65535)
        return cmf__error(CMF_ERR_SIZE, "tensor '%s': q1t needs cols to fit u16, got %lld", what,
                          (long long)cols);
    if (k > UINT32_MAX)
        return cmf__error(CMF_ERR_SIZE, "tensor '%s': q1t outlier count %llu does not fit u32", what, (ull)k);
    uint8_t *flag = mark_outliers(src, n, k);
    if (!flag) return cmf__error(CMF_ERR_NOMEM, "tensor '%s': out of memory", what);
    cmf_status st = cmf__buf_reserve(out, n / 32 * 9 + 4 * ((uint64_t)rows + 1) + 4 * k);
    for (uint64_t g = 0; !st && g < n / 32; g++) {
        uint8_t t[9];
        enc_q1t_tile(src + 32 * g, flag + 32 * g, t);
        st = cmf__buf_append(out, t, 9);
    }
    uint8_t e[4];
    uint64_t acc = 0;
    for (int64_t r = 0; !st && r <= rows; r++) {
        cmf__wr32(e, (uint32_t)acc);
        st = cmf__buf_append(out, e, 4);
        for (int64_t i = 0; r < rows && i < cols; i++) acc += flag[r * cols + i];
    }
    for (uint64_t i = 0; !st && i < n; i++)
        if (flag[i]) {
            cmf__wr16(e, (uint16_t)(i % (uint64_t)cols));
            cmf__wr16(e + 2, cmf__f32_to_f16(src[i]));
            st = cmf__buf_append(out, e, 4);
        }
    free(flag);
    return st;
}

/* ---- q4tp / q2tp: per-row geometric scale ladder ------------------------- */

/* Nearest f16 at or below / at or above x (x finite, within f16 range). */
static float f16_down(float x)
{
    uint16_t h = cmf__f32_to_f16(x);
    if (cmf__f16_to_f32(h) <= x) return cmf__f16_to_f32(h);
    if (h == 0x0000) h = 0x8001;
    else if (h & 0x8000) h++;
    else h--;
    return cmf__f16_to_f32(h);
}
static float f16_up(float x) { return -f16_down(-x); }

/* Squared error of a q4 group quantized against scale t (nibbles out). */
static float q4_group_err(const float *x, float t, uint8_t nib[16])
{
    float inv = inv_of(t), err = 0;
    memset(nib, 0x88, 16);
    for (int k = 0; k < 32; k++) {
        int q = qround(x[k] * inv, -8, 7);
        float d = x[k] - (float)q * t;
        err += d * d;
        nib[k >> 1] = (uint8_t)((nib[k >> 1] & ~(15u << ((k & 1) * 4))) | (unsigned)(q + 8) << ((k & 1) * 4));
    }
    return err;
}

/* Squared error of a q2 group against scale t (codes c: (c - 1.5) * t). */
static float q2_group_err(const float *x, float t, uint8_t q[8])
{
    float inv = inv_of(t), err = 0;
    memset(q, 0, 8);
    for (int k = 0; k < 32; k++) {
        int c = t > 0 ? qround(floorf(x[k] * inv + 2.0f), 0, 3) : 0;
        float d = t > 0 ? x[k] - ((float)c - 1.5f) * t : x[k];
        err += d * d;
        q[k >> 2] = (uint8_t)(q[k >> 2] | c << ((k & 3) * 2));
    }
    return err;
}

/* Best continuous 2-bit scale of a group: the grid (c - 1.5) * s spans
 * +-2s, and a few candidates between amax/2.5 and amax/1.5 cover the
 * clip-versus-resolution trade. */
static float q2_group_scale(const float *x, float amax)
{
    float best = amax / 1.5f, best_err = INFINITY;
    uint8_t tmp[8];
    for (int j = 0; j <= 8; j++) {
        float s = amax / (1.5f + 0.125f * (float)j), e = q2_group_err(x, s, tmp);
        if (e < best_err) { best_err = e; best = s; }
    }
    return best;
}

static void write_tp_code(uint8_t *codes, int64_t g, unsigned c)
{
    for (int b = 0; b < 5; b++)
        if (c >> b & 1) {
            uint64_t bit = (uint64_t)g * 5 + (uint64_t)b;
            codes[bit / 8] |= (uint8_t)(1u << (bit % 8));
        }
}

/* q4tp (two = false) or q2tp (two = true). Per row: each group's ideal
 * scale s_g (amax/7 for q4, a 2-bit fit for q2); lo/step span the row's
 * min/max log2 s_g and are rounded to f16 FIRST (lo down, step up, so the
 * ladder covers every group); each group then takes the rung, among the
 * neighbours of its ideal one, whose re-quantized weights err least. */
static cmf_status enc_tp(bool two, const float *src, int64_t rows, int64_t cols, uint8_t *o)
{
    int64_t gpr = cols / 32;
    uint64_t groups = (uint64_t)rows * (uint64_t)gpr, wbytes = two ? 8 : 16;
    uint64_t stride = cmf__quant_tp_code_stride(cols);
    uint8_t *params = o + wbytes * groups, *codes = params + 4 * (uint64_t)rows;
    float *lg = malloc((size_t)(gpr + 1) * sizeof *lg);
    if (!lg) return cmf__error(CMF_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; r < rows; r++) {
        const float *x = src + r * cols;
        float lo = INFINITY, hi = -INFINITY;
        for (int64_t g = 0; g < gpr; g++) {
            float amax = absmax(x + 32 * g, 32);
            float s = amax == 0 ? 0 : two ? q2_group_scale(x + 32 * g, amax) : amax / 7.0f;
            lg[g] = s > 0 ? fmaxf(log2f(s), -126.0f) : -INFINITY;
            if (s > 0) { lo = fminf(lo, lg[g]); hi = fmaxf(hi, lg[g]); }
        }
        float lo16 = 0, step16 = 0;
        if (lo <= hi) {
            lo16 = f16_down(lo);
            step16 = hi > lo16 ? f16_up((hi - lo16) / (two ? 30.0f : 31.0f)) : 0.0f;
        }
        cmf__wr16(params + 4 * r, cmf__f32_to_f16(lo16));
        cmf__wr16(params + 4 * r + 2, cmf__f32_to_f16(step16));
        float ladder[32];
        cmf__quant_tp_ladder(lo16, step16, ladder);
        uint8_t *rc = codes + (uint64_t)r * stride;
        for (int64_t g = 0; g < gpr; g++) {
            const float *xg = x + 32 * g;
            uint8_t *w = o + wbytes * ((uint64_t)r * (uint64_t)gpr + (uint64_t)g), tmp[16];
            int code = 0;
            if (two) {
                float best = q2_group_err(xg, 0.0f, w); /* rung 0: an exactly zero group */
                if (lg[g] > -INFINITY) {
                    int c0 = step16 > 0 ? (int)floorf((lg[g] - lo16) / step16) : 0;
                    for (int c = c0 - 1; c <= c0 + 2; c++) {
                        if (c < 0 || c > 30) continue;
                        float e = q2_group_err(xg, ladder[c], tmp);
                        if (e < best) { best = e; code = c + 1; memcpy(w, tmp, 8); }
                    }
                }
            } else {
                float best = q4_group_err(xg, ladder[0], w);
                if (lg[g] > -INFINITY) {
                    int c0 = step16 > 0 ? (int)floorf((lg[g] - lo16) / step16) : 0;
                    for (int c = c0 - 1; c <= c0 + 2; c++) {
                        if (c <= 0 || c > 31) continue;
                        float e = q4_group_err(xg, ladder[c], tmp);
                        if (e < best) { best = e; code = c; memcpy(w, tmp, 16); }
                    }
                }
            }
            write_tp_code(rc, g, (unsigned)code);
        }
    }
    free(lg);
    return CMF_OK;
}

/* ---- vbit / vbit_ro ------------------------------------------------------ */

static const int vbit_levels[5] = {3, 4, 5, 6, 8};

/* Nearest allowed width (the lower one on a tie), never below the floor 3. */
static int vbit_snap(double x)
{
    int best = 3;
    for (int i = 1; i < 5; i++)
        if (fabs(x - vbit_levels[i]) < fabs(x - best)) best = vbit_levels[i];
    return best;
}

void cmf__vbit_row_amplitudes(const float *src, int64_t rows, int64_t cols, double *amp)
{
    for (int64_t r = 0; r < rows; r++) amp[r] = log2(fmax(absmax(src + r * cols, cols), 1e-30));
}

/* Water-filling: widths snap(theta + amp_r); theta is the largest value
 * (bisection over a range where every row sits at the floor at one end and
 * at 8 at the other) whose mean width stays within the budget. Rows of
 * equal amplitude all get the same width; a louder row gets more bits, a
 * quieter one fewer, down to the floor of 3. */
double cmf__vbit_water_level(const double *amp, int64_t n, double budget)
{
    double amin = INFINITY, amax = -INFINITY;
    for (int64_t i = 0; i < n; i++) { amin = fmin(amin, amp[i]); amax = fmax(amax, amp[i]); }
    if (n == 0) return 4.0;
    double lo = 2.0 - amax, hi = 9.0 - amin; /* all rows at 3 / all rows at 8 */
    for (int it = 0; it < 80; it++) {
        double mid = 0.5 * (lo + hi), tot = 0;
        for (int64_t i = 0; i < n; i++) tot += vbit_snap(mid + amp[i]);
        if (tot <= budget * (double)n) lo = mid;
        else hi = mid;
    }
    return lo;
}

static cmf_status enc_vbit(bool ro, const float *src, int64_t rows, int64_t cols, const cmf__quant_opts *opts,
                           cmf__buf *out, const char *what)
{
    uint64_t r = (uint64_t)rows, gpr = (uint64_t)cols / 32, packed = 0;
    size_t start = out->len;
    double *amp = malloc((r + 1) * sizeof *amp);
    if (!amp) return cmf__error(CMF_ERR_NOMEM, "tensor '%s': out of memory", what);
    cmf__vbit_row_amplitudes(src, rows, cols, amp);
    double theta = isfinite(opts->vbit_theta) ? opts->vbit_theta : cmf__vbit_water_level(amp, rows, opts->vbit_mean_bits);
    cmf_status st = cmf__buf_append_zeros(out, r + 2 * r * gpr + (ro ? 4 * (r + 1) : 0));
    if (st) { free(amp); return st; }
    uint8_t *bits = out->data + start;
    for (uint64_t i = 0; i < r; i++) bits[i] = (uint8_t)vbit_snap(theta + amp[i]);
    free(amp);
    for (uint64_t i = 0; i < r; i++) packed += cmf__quant_vbit_row_bytes(cols, bits[i]);
    if (ro && packed > UINT32_MAX)
        return cmf__error(CMF_ERR_SIZE, "tensor '%s': vbit_ro packed rows of %llu bytes overflow u32 offsets",
                          what, (ull)packed);
    size_t pstart = out->len;
    st = cmf__buf_append_zeros(out, packed);
    if (st) return st;
    bits = out->data + start; /* the buffer may have moved */
    uint8_t *scales = bits + r, *offs = scales + 2 * r * gpr, *p = out->data + pstart;
    uint64_t off = 0;
    for (int64_t row = 0; row < rows; row++) {
        int b = bits[row];
        int lvl = (1 << (b - 1)) - 1, umax = (1 << b) - 1;
        if (ro) cmf__wr32(offs + 4 * row, (uint32_t)off);
        uint64_t bit = 0;
        for (uint64_t g = 0; g < gpr; g++) {
            const float *x = src + row * cols + 32 * (int64_t)g;
            float s = scale_for(absmax(x, 32), (float)lvl), inv = inv_of(s);
            cmf__wr16(scales + 2 * ((uint64_t)row * gpr + g), cmf__f32_to_f16(s));
            for (int k = 0; k < 32; k++, bit += (uint64_t)b) {
                unsigned u = (unsigned)qround(x[k] * inv + (float)lvl, 0, umax);
                /* MSB-first: the field occupies bits [bit, bit+b) counted from
                 * the top of byte off+bit/8 */
                unsigned v = u << (16 - (unsigned)b - (unsigned)(bit % 8));
                p[off + bit / 8] |= (uint8_t)(v >> 8);
                if (bit % 8 + (uint64_t)b > 8) p[off + bit / 8 + 1] |= (uint8_t)v;
            }
        }
        off += cmf__quant_vbit_row_bytes(cols, b);
    }
    if (ro) cmf__wr32(offs + 4 * r, (uint32_t)off);
    return CMF_OK;
}

/* ---- entry point -------------------------------------------------------- */

/* The largest |weight| each layout represents without its f16 scale (or
 * f16 outlier value, or column field) overflowing: limit_of_code * 65504. */
static double magnitude_limit(int dtype)
{
    switch (dtype) {
    case CMF_DTYPE_Q8_ROW: return 127.0 * 65504.0;
    case CMF_DTYPE_Q4_BLOCK:
    case CMF_DTYPE_Q4_TILED: return 7.0 * 65504.0;
    case CMF_DTYPE_VBIT:
    case CMF_DTYPE_VBIT_RO: return 3.0 * 65504.0; /* the narrowest width, L = 3 */
    case CMF_DTYPE_Q8_2F:   /* column RMS is an f16 field */
    case CMF_DTYPE_Q1:
    case CMF_DTYPE_Q1S:
    case CMF_DTYPE_Q1T: return 65504.0;
    case CMF_DTYPE_Q4TP:
    case CMF_DTYPE_Q2TP: return 1.0e36; /* log-domain ladder: only f32 range binds */
    default: return INFINITY;
    }
}

/* Opens what was just appended and decodes it: a finite weight must come
 * back finite. This is how an out-of-range magnitude surfaces (a group
 * scale or column field past the f16 maximum 65504, a value past f16 or
 * bf16 range) instead of a payload full of inf/NaN. On failure the append
 * is undone. */
static cmf_status verify_finite(int dtype, const float *src, int64_t rows, int64_t cols, cmf__buf *out,
                                size_t start, const char *what)
{
    uint64_t shape[2] = {(uint64_t)rows, (uint64_t)cols};
    cmf__qmat m;
    cmf_status st = cmf__qmat_init(&m, dtype, out->data + start, out->len - start, 2, shape, what);
    if (st) {
        out->len = start;
        return cmf__error_prefix(CMF_ERR_INTERNAL, "encoder produced an invalid payload");
    }
    float *w = malloc((size_t)(cols + 1) * sizeof *w);
    if (!w) {
        cmf__qmat_free(&m);
        out->len = start;
        return cmf__error(CMF_ERR_NOMEM, "tensor '%s': out of memory", what);
    }
    for (int64_t r = 0; r < rows && !st; r++) {
        cmf__qmat_decode_row(&m, r, w);
        for (int64_t i = 0; i < cols; i++)
            if (isfinite(src[r * cols + i]) && !isfinite(w[i])) {
                st = cmf__error(CMF_ERR_ARG,
                                "tensor '%s': weight %g (row %lld, col %lld) is beyond what %s can represent "
                                "(its scales and values are f16/bf16, max 65504 for f16)",
                                what, (double)src[r * cols + i], (long long)r, (long long)i,
                                cmf__dtype_get(dtype)->name);
                break;
            }
    }
    free(w);
    cmf__qmat_free(&m);
    if (st) out->len = start;
    return st;
}

cmf_status cmf__quantize(int dtype, const float *src, int64_t rows, int64_t cols,
                         const cmf__quant_opts *opts, cmf__buf *out, const char *what)
{
    if (!what) what = "?";
    cmf__quant_opts def = cmf__quant_opts_default();
    if (!opts) opts = &def;
    if (rows < 0 || cols < 0)
        return cmf__error(CMF_ERR_ARG, "tensor '%s': negative shape %lld x %lld", what, (long long)rows,
                          (long long)cols);
    uint64_t shape[2] = {(uint64_t)rows, (uint64_t)cols};
    int64_t r, c;
    cmf_status st = cmf__quant_check_shape(dtype, 2, shape, &r, &c);
    if (st) return cmf__error_prefix(st, "tensor '%s'", what);
    uint64_t n = (uint64_t)rows * (uint64_t)cols;
    double limit = magnitude_limit(dtype);
    if (dtype != CMF_DTYPE_F32 && dtype != CMF_DTYPE_F16 && dtype != CMF_DTYPE_BF16)
        for (uint64_t i = 0; i < n; i++) {
            if (!isfinite(src[i]))
                return cmf__error(CMF_ERR_ARG, "tensor '%s': weight %llu (row %llu, col %llu) is not finite",
                                  what, (ull)i, (ull)(i / (uint64_t)cols), (ull)(i % (uint64_t)cols));
            if (fabs((double)src[i]) > limit)
                return cmf__error(CMF_ERR_ARG,
                                  "tensor '%s': weight %g (row %llu, col %llu) exceeds %g, the largest magnitude %s can carry with f16 scales",
                                  what, (double)src[i], (ull)(i / (uint64_t)cols), (ull)(i % (uint64_t)cols), limit,
                                  cmf__dtype_get(dtype)->name);
        }
    uint64_t nbytes = 0;
    if (cmf__dtype_get(dtype)->fixed_size) {
        st = cmf__dtype_nbytes(dtype, 2, shape, &nbytes);
        if (st) return cmf__error_prefix(st, "tensor '%s'", what);
    } else {
        size_t start = out->len;
        switch (dtype) {
        case CMF_DTYPE_VBIT:
        case CMF_DTYPE_VBIT_RO:
            st = enc_vbit(dtype == CMF_DTYPE_VBIT_RO, src, rows, cols, opts, out, what);
            break;
        case CMF_DTYPE_Q1S: st = enc_q1s(src, rows, cols, opts->q1s_outlier_frac, out, what); break;
        case CMF_DTYPE_Q1T: st = enc_q1t(src, rows, cols, opts->q1t_outlier_frac, out, what); break;
        default: st = cmf__error(CMF_ERR_INTERNAL, "no encoder for dtype %d", dtype); break;
        }
        if (st) {
            out->len = start;
            return st;
        }
        return verify_finite(dtype, src, rows, cols, out, start, what);
    }
    size_t start = out->len;
    st = cmf__buf_reserve(out, nbytes);
    if (st) return st;
    uint8_t *o = out->data + start;
    memset(o, 0, nbytes);
    switch (dtype) {
    case CMF_DTYPE_F32:
    case CMF_DTYPE_F16:
    case CMF_DTYPE_BF16: enc_float(dtype, src, n, o); break;
    case CMF_DTYPE_Q8_ROW: enc_q8_row(src, rows, cols, o); break;
    case CMF_DTYPE_Q4_BLOCK:
    case CMF_DTYPE_Q4_TILED: enc_q4(dtype, src, n, o); break;
    case CMF_DTYPE_Q8_2F: st = enc_q8_2f(src, rows, cols, o); break;
    case CMF_DTYPE_Q1:
        for (uint64_t g = 0; g < n / 32; g++) enc_q1_tile(src + 32 * g, NULL, o + 6 * g);
        break;
    case CMF_DTYPE_Q4TP:
    case CMF_DTYPE_Q2TP:
        st = enc_tp(dtype == CMF_DTYPE_Q2TP, src, rows, cols, o);
        break;
    default:
        return cmf__error(CMF_ERR_UNSUPPORTED, "tensor '%s': encoder for %s not implemented yet", what,
                          cmf__dtype_get(dtype)->name);
    }
    if (st) return cmf__error_prefix(st, "tensor '%s'", what);
    out->len = start + nbytes;
    out->data[out->len] = 0;
    return dtype == CMF_DTYPE_F32 ? CMF_OK : verify_finite(dtype, src, rows, cols, out, start, what);
}
