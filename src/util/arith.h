/* arith.h — checked size arithmetic. Every count, length and offset read
 * from a file goes through these before it is used to address memory. */
#ifndef CMF_UTIL_ARITH_H
#define CMF_UTIL_ARITH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Each returns true on overflow (and leaves *out unspecified). */
static inline bool cmf__add_overflow(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_add_overflow(a, b, out);
}
static inline bool cmf__mul_overflow(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}
/* True when [off, off+len) lies inside [0, size). */
static inline bool cmf__range_ok(uint64_t off, uint64_t len, uint64_t size)
{
    uint64_t end;
    return !cmf__add_overflow(off, len, &end) && end <= size;
}
static inline uint64_t cmf__align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
static inline uint64_t cmf__div_ceil(uint64_t x, uint64_t d) { return (x + d - 1) / d; }

/* Little-endian loads/stores from unaligned bytes. */
static inline uint16_t cmf__rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t cmf__rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t cmf__rd64(const uint8_t *p)
{
    return (uint64_t)cmf__rd32(p) | (uint64_t)cmf__rd32(p + 4) << 32;
}
static inline void cmf__wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void cmf__wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void cmf__wr64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

#endif
