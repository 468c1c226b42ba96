/* half.h — IEEE f16 and bfloat16 <-> f32, bit exact, round to nearest even
 * on the way down (NaN stays NaN, overflow goes to inf). Scalar reference:
 * SIMD code must agree with these bit for bit. */
#ifndef CMF_UTIL_HALF_H
#define CMF_UTIL_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t cmf__f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float cmf__bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float cmf__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0) {
        if (mant == 0) return cmf__bits_f32(sign);
        /* subnormal: value = mant * 2^-24 */
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (exp == 31) return cmf__bits_f32(sign | 0x7f800000u | (mant << 13));
    return cmf__bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

static inline uint16_t cmf__f32_to_f16(float f)
{
    uint32_t x = cmf__f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 | ((ax >> 13) & 0x3ff) : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520 -> inf */
    if (ax < 0x38800000u) { /* below the smallest normal 2^-14: subnormal or zero */
        if (ax < 0x33000000u) return (uint16_t)sign; /* < 2^-25: rounds to 0 */
        uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax + 0xc8000fffu + ((ax >> 13) & 1); /* rebias exp by -112, round to even */
    return (uint16_t)(sign | (r >> 13));
}

static inline float cmf__bf16_to_f32(uint16_t h) { return cmf__bits_f32((uint32_t)h << 16); }

static inline uint16_t cmf__f32_to_bf16(float f)
{
    uint32_t x = cmf__f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

#endif
