/* gguf_quants.c — ggml block layouts: sizes for every type a GGUF may name,
 * and dequantizers for F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
 * Q3_K, Q4_K, Q5_K, Q6_K, Q8_K. Each value is computed with the same f32
 * operations in the same order as gguf-py's numpy dequantizers (scale times
 * sub-scale first, then times the code, then minus the min), one operation
 * per statement so that no compiler contracts them into an FMA. */
#include "convert/gguf.h"
#include "util/arith.h"
#include "util/error.h"
#include "util/half.h"

#include <string.h>

#define QK_K 256

typedef struct type_info {
    const char *name;
    uint32_t block_elems, block_bytes;
    bool dequant;
} type_info;

/* Indexed by ggml type id; block_elems == 0 marks an unknown id. */
static const type_info types[] = {
    [0] = {"f32", 1, 4, true},        [1] = {"f16", 1, 2, true},
    [2] = {"q4_0", 32, 18, true},     [3] = {"q4_1", 32, 20, true},
    [6] = {"q5_0", 32, 22, true},     [7] = {"q5_1", 32, 24, true},
    [8] = {"q8_0", 32, 34, true},     [9] = {"q8_1", 32, 36, false},
    [10] = {"q2_K", 256, 84, true},   [11] = {"q3_K", 256, 110, true},
    [12] = {"q4_K", 256, 144, true},  [13] = {"q5_K", 256, 176, true},
    [14] = {"q6_K", 256, 210, true},  [15] = {"q8_K", 256, 292, true},
    [16] = {"iq2_xxs", 256, 66, false}, [17] = {"iq2_xs", 256, 74, false},
    [18] = {"iq3_xxs", 256, 98, false}, [19] = {"iq1_s", 256, 50, false},
    [20] = {"iq4_nl", 32, 18, true}, [21] = {"iq3_s", 256, 110, false},
    [22] = {"iq2_s", 256, 82, false}, [23] = {"iq4_xs", 256, 136, true},
    [24] = {"i8", 1, 1, false},       [25] = {"i16", 1, 2, false},
    [26] = {"i32", 1, 4, false},      [27] = {"i64", 1, 8, false},
    [28] = {"f64", 1, 8, false},      [29] = {"iq1_m", 256, 56, false},
    [30] = {"bf16", 1, 2, true},      [34] = {"tq1_0", 256, 54, false},
    [35] = {"tq2_0", 256, 66, false},
};
#define N_TYPES (sizeof types / sizeof types[0])

const char *cmf__ggml_type_name(uint32_t type)
{
    return type < N_TYPES && types[type].block_elems ? types[type].name : NULL;
}

bool cmf__ggml_type_size(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes)
{
    if (type >= N_TYPES || !types[type].block_elems) return false;
    *block_elems = types[type].block_elems;
    *block_bytes = types[type].block_bytes;
    return true;
}

bool cmf__ggml_can_dequant(uint32_t type) { return type < N_TYPES && types[type].dequant; }

static float h2f(const uint8_t *p) { return cmf__f16_to_f32(cmf__rd16(p)); }

static void dq_q4_0(const uint8_t *b, float *y)
{
    float d = h2f(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((b[2 + j] & 0xf) - 8);
        y[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
    }
}

static void dq_q4_1(const uint8_t *b, float *y)
{
    float d = h2f(b), m = h2f(b + 2);
    for (int j = 0; j < 16; j++) {
        float lo = d * (float)(b[4 + j] & 0xf), hi = d * (float)(b[4 + j] >> 4);
        y[j] = lo + m;
        y[j + 16] = hi + m;
    }
}

static void dq_q5_0(const uint8_t *b, float *y)
{
    float d = h2f(b);
    uint32_t qh = cmf__rd32(b + 2);
    for (int j = 0; j < 16; j++) {
        int lo = (b[6 + j] & 0xf) | (int)((qh >> j) & 1) << 4;
        int hi = (b[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)(lo - 16);
        y[j + 16] = d * (float)(hi - 16);
    }
}

static void dq_q5_1(const uint8_t *b, float *y)
{
    float d = h2f(b), m = h2f(b + 2);
    uint32_t qh = cmf__rd32(b + 4);
    for (int j = 0; j < 16; j++) {
        int lo = (b[8 + j] & 0xf) | (int)((qh >> j) & 1) << 4;
        int hi = (b[8 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        float a = d * (float)lo, c = d * (float)hi;
        y[j] = a + m;
        y[j + 16] = c + m;
    }
}

static void dq_q8_0(const uint8_t *b, float *y)
{
    float d = h2f(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

/* Q2_K: scales[16] (lo nibble scale, hi nibble min), qs[64], d, dmin.
 * Element c*128 + s*32 + l is bits 2s..2s+1 of qs[c*32 + l]; group of 16
 * is element / 16. */
static void dq_q2_k(const uint8_t *b, float *y)
{
    const uint8_t *sc = b, *qs = b + 16;
    float d = h2f(b + 80), dmin = h2f(b + 82);
    for (int c = 0; c < 2; c++)
        for (int s = 0; s < 4; s++)
            for (int h = 0; h < 2; h++) {
                int g = c * 8 + s * 2 + h; /* group of 16 = element / 16 */
                float dl = d * (float)(sc[g] & 0xf), ml = dmin * (float)(sc[g] >> 4);
                float *out = y + g * 16;
                const uint8_t *q = qs + c * 32 + h * 16;
                for (int l = 0; l < 16; l++) {
                    float t = dl * (float)((q[l] >> (2 * s)) & 3);
                    out[l] = t - ml;
                }
            }
}

/* Q3_K: hmask[32], qs[64], scales[12] (6-bit, packed), d. A set hmask bit
 * means no -4 offset. */
static void dq_q3_k(const uint8_t *b, float *y)
{
    const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
    float d = h2f(b + 108);
    float dl[16];
    for (int g = 0; g < 16; g++) {
        int lo = (sc[g % 8] >> (4 * (g / 8))) & 0xf;
        int hi = (sc[8 + g % 4] >> (2 * (g / 4))) & 3;
        dl[g] = d * (float)((lo | hi << 4) - 32);
    }
    for (int c = 0; c < 2; c++)
        for (int s = 0; s < 4; s++) {
            int base = c * 128 + s * 32;
            for (int l = 0; l < 32; l++) {
                int ql = (qs[c * 32 + l] >> (2 * s)) & 3;
                int h = (hm[l] >> (base / 32)) & 1;
                y[base + l] = dl[(base + l) / 16] * (float)(ql - ((h ^ 1) << 2));
            }
        }
}

/* 6-bit scale and min of sub-block j (0..7) of Q4_K / Q5_K. */
static void k_scale_min(const uint8_t *s, int j, int *sc, int *mn)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Q4_K: d, dmin, scales[12], qs[128]. Element c*64 + s*32 + l is nibble s
 * of qs[c*32 + l]; sub-block is element / 32. */
static void dq_q4_k(const uint8_t *b, float *y)
{
    float d = h2f(b), dmin = h2f(b + 2);
    const uint8_t *qs = b + 16;
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        k_scale_min(b + 4, j, &sc, &mn);
        float dd = d * (float)sc, dm = dmin * (float)mn;
        int c = j / 2, s = j % 2;
        for (int l = 0; l < 32; l++) {
            float t = dd * (float)((qs[c * 32 + l] >> (4 * s)) & 0xf);
            y[j * 32 + l] = t - dm;
        }
    }
}

/* Q5_K: d, dmin, scales[12], qh[32], qs[128]; the fifth bit of element i
 * is bit i/32 of qh[i % 32]. */
static void dq_q5_k(const uint8_t *b, float *y)
{
    float d = h2f(b), dmin = h2f(b + 2);
    const uint8_t *qh = b + 16, *qs = b + 48;
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        k_scale_min(b + 4, j, &sc, &mn);
        float dd = d * (float)sc, dm = dmin * (float)mn;
        int c = j / 2, s = j % 2;
        for (int l = 0; l < 32; l++) {
            int q = ((qs[c * 32 + l] >> (4 * s)) & 0xf) | ((qh[l] >> j) & 1) << 4;
            float t = dd * (float)q;
            y[j * 32 + l] = t - dm;
        }
    }
}

/* Q6_K: ql[128], qh[64], scales[16] (int8), d. Element c*128 + s*64 + l
 * (l < 64) takes nibble s of ql[c*64 + l]; its high 2 bits are bits
 * 2*(k/32)..+1 of qh[c*32 + k%32] with k = s*64 + l. */
static void dq_q6_k(const uint8_t *b, float *y)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = h2f(b + 208);
    float dd[16];
    for (int g = 0; g < 16; g++) dd[g] = d * (float)sc[g];
    for (int c = 0; c < 2; c++)
        for (int k = 0; k < 128; k++) {
            int s = k / 64, l = k % 64;
            int lo = (ql[c * 64 + l] >> (4 * s)) & 0xf;
            int hi = (qh[c * 32 + k % 32] >> (2 * (k / 32))) & 3;
            y[c * 128 + k] = dd[(c * 128 + k) / 16] * (float)((lo | hi << 4) - 32);
        }
}

/* Q8_K: f32 d, int8 qs[256], int16 bsums[16] (sums, unused here). */
static void dq_q8_k(const uint8_t *b, float *y)
{
    float d = cmf__bits_f32(cmf__rd32(b));
    for (int i = 0; i < QK_K; i++) y[i] = d * (float)(int8_t)b[4 + i];
}

/* IQ4_NL / IQ4_XS: 4-bit indices into a fixed non-linear table. */
static const int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static void dq_iq4_nl(const uint8_t *b, float *y)
{
    float d = h2f(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)kvalues_iq4nl[b[2 + j] & 0xf];
        y[j + 16] = d * (float)kvalues_iq4nl[b[2 + j] >> 4];
    }
}

/* IQ4_XS: d, scales_h (u16, 2 bits per 32-group), scales_l[4] (4 bits per
 * group), qs[128] (per group: 16 bytes, low nibbles then high nibbles). */
static void dq_iq4_xs(const uint8_t *b, float *y)
{
    float d = h2f(b);
    uint16_t sh = cmf__rd16(b + 2);
    const uint8_t *sl = b + 4, *qs = b + 8;
    for (int ib = 0; ib < 8; ib++) {
        int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xf) | ((sh >> (2 * ib)) & 3) << 4;
        float dl = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            y[ib * 32 + j] = dl * (float)kvalues_iq4nl[qs[ib * 16 + j] & 0xf];
            y[ib * 32 + j + 16] = dl * (float)kvalues_iq4nl[qs[ib * 16 + j] >> 4];
        }
    }
}

cmf_status cmf__ggml_dequant(uint32_t type, const uint8_t *src, uint64_t n, float *dst)
{
    if (!cmf__ggml_can_dequant(type))
        return cmf__error(CMF_ERR_DTYPE, "ggml type %u (%s) has no dequantizer", type,
                          cmf__ggml_type_name(type) ? cmf__ggml_type_name(type) : "unknown");
    const type_info *ti = &types[type];
    if (n % ti->block_elems)
        return cmf__error(CMF_ERR_SIZE, "%llu %s values are not a whole number of %u-blocks",
                          (unsigned long long)n, ti->name, ti->block_elems);
    uint64_t nb = n / ti->block_elems;
    switch (type) {
    case CMF_GGML_F32:
        for (uint64_t i = 0; i < n; i++) dst[i] = cmf__bits_f32(cmf__rd32(src + 4 * i));
        return CMF_OK;
    case CMF_GGML_F16:
        for (uint64_t i = 0; i < n; i++) dst[i] = h2f(src + 2 * i);
        return CMF_OK;
    case CMF_GGML_BF16:
        for (uint64_t i = 0; i < n; i++) dst[i] = cmf__bf16_to_f32(cmf__rd16(src + 2 * i));
        return CMF_OK;
    default: break;
    }
    void (*fn)(const uint8_t *, float *) = NULL;
    switch (type) {
    case CMF_GGML_Q4_0: fn = dq_q4_0; break;
    case CMF_GGML_Q4_1: fn = dq_q4_1; break;
    case CMF_GGML_Q5_0: fn = dq_q5_0; break;
    case CMF_GGML_Q5_1: fn = dq_q5_1; break;
    case CMF_GGML_Q8_0: fn = dq_q8_0; break;
    case CMF_GGML_Q2_K: fn = dq_q2_k; break;
    case CMF_GGML_Q3_K: fn = dq_q3_k; break;
    case CMF_GGML_Q4_K: fn = dq_q4_k; break;
    case CMF_GGML_Q5_K: fn = dq_q5_k; break;
    case CMF_GGML_Q6_K: fn = dq_q6_k; break;
    case CMF_GGML_Q8_K: fn = dq_q8_k; break;
    case CMF_GGML_IQ4_NL: fn = dq_iq4_nl; break;
    case CMF_GGML_IQ4_XS: fn = dq_iq4_xs; break;
    default: return cmf__error(CMF_ERR_INTERNAL, "ggml type %u: dequantizer missing", type);
    }
    for (uint64_t i = 0; i < nb; i++) fn(src + i * ti->block_bytes, dst + i * ti->block_elems);
    return CMF_OK;
}
