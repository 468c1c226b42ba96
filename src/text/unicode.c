/* unicode.c — UTF-8 handling and character classes for the tokenizer.
 * Classes follow Rust's `char` methods (what HF `tokenizers` calls), using
 * utf8proc's category tables; the Unicode version is utf8proc's, which can
 * differ from Rust's for newly assigned code points. */
#include "text/unicode.h"

#include <pthread.h>
#include <utf8proc.h>

size_t cmf__utf8_next(const uint8_t *s, size_t len, uint32_t *cp)
{
    if (!len) return 0;
    uint8_t b = s[0];
    if (b < 0x80) { *cp = b; return 1; }
    size_t n;
    uint32_t c;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) { n = 2; c = b & 0x1F; }
    else if (b >= 0xE0 && b <= 0xEF) {
        n = 3; c = b & 0x0F;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 4; c = b & 0x07;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else return 0;
    if (len < n) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    c = (c << 6) | (s[1] & 0x3F);
    for (size_t i = 2; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    *cp = c;
    return n;
}

size_t cmf__utf8_put(uint32_t cp, char out[4])
{
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

bool cmf__utf8_valid(const char *s, size_t len)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0;
    while (i < len) {
        if (p[i] < 0x80) { i++; continue; }
        uint32_t cp;
        size_t n = cmf__utf8_next(p + i, len - i, &cp);
        if (!n) return false;
        i += n;
    }
    return true;
}

/* Length of the maximal subpart of an invalid sequence at p (>= 1). */
static size_t invalid_len(const uint8_t *p, size_t len)
{
    uint8_t b = p[0];
    size_t n;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) n = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        n = 3;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 4;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else return 1;
    size_t i = 1;
    if (i < len && i < n && p[i] >= lo && p[i] <= hi) {
        i++;
        while (i < len && i < n && (p[i] & 0xC0) == 0x80) i++;
    }
    return i;
}

cmf_status cmf__utf8_lossy(const char *s, size_t len, cmf__buf *out)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0, run = 0;
    cmf_status st = cmf__buf_reserve(out, len);
    if (st) return st;
    while (i < len) {
        uint32_t cp;
        size_t n = p[i] < 0x80 ? 1 : cmf__utf8_next(p + i, len - i, &cp);
        if (n) { i += n; continue; }
        if ((st = cmf__buf_append(out, s + run, i - run))) return st;
        if ((st = cmf__buf_append(out, "\xEF\xBF\xBD", 3))) return st;
        i += invalid_len(p + i, len - i);
        run = i;
    }
    return cmf__buf_append(out, s + run, len - run);
}

bool cmf__uni_is_whitespace(uint32_t c)
{
    if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
    if (c < 0x85) return false;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static utf8proc_category_t cat(uint32_t c)
{
    return utf8proc_category((utf8proc_int32_t)c);
}

bool cmf__uni_is_alphanumeric(uint32_t c)
{
    if (c < 0x80) return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
    utf8proc_category_t k = cat(c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
           (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}

bool cmf__uni_is_numeric(uint32_t c)
{
    utf8proc_category_t k = cat(c);
    return k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO;
}

bool cmf__uni_is_punctuation(uint32_t c)
{
    utf8proc_category_t k = cat(c);
    return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

bool cmf__uni_is_mark(uint32_t c)
{
    utf8proc_category_t k = cat(c);
    return k >= UTF8PROC_CATEGORY_MN && k <= UTF8PROC_CATEGORY_ME;
}

bool cmf__uni_is_other(uint32_t c)
{
    utf8proc_category_t k = cat(c);
    return k == UTF8PROC_CATEGORY_CN || (k >= UTF8PROC_CATEGORY_CC && k <= UTF8PROC_CATEGORY_CO);
}

bool cmf__uni_is_cjk(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Bytes that print (33..126, 161..172, 174..255) map to themselves; the
 * other 68 map, in byte order, to 256, 257, ... */
static bool bl_printable(unsigned b)
{
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
}

static uint32_t bl_cp[256];
static int16_t bl_byte[256 + 68];
static pthread_once_t bl_once = PTHREAD_ONCE_INIT;

static uint8_t bl_utf8[256][4];

static void bl_init(void)
{
    uint32_t n = 0;
    for (unsigned b = 0; b < 256 + 68; b++) bl_byte[b] = -1;
    for (unsigned b = 0; b < 256; b++) {
        bl_cp[b] = bl_printable(b) ? b : 256 + n++;
        bl_byte[bl_cp[b]] = (int16_t)b;
        bl_utf8[b][0] = (uint8_t)cmf__utf8_put(bl_cp[b], (char *)&bl_utf8[b][1]);
    }
}

const uint8_t (*cmf__bytelevel_utf8(void))[4]
{
    pthread_once(&bl_once, bl_init);
    return bl_utf8;
}

int cmf__bytelevel_byte(uint32_t cp)
{
    pthread_once(&bl_once, bl_init);
    return cp < 256 + 68 ? bl_byte[cp] : -1;
}
