/* common.c — pieces every format path shares: strict UTF-8, the name set,
 * the writer-side tensor check, the directory, header and envelope
 * encoders. The reader's checks live in open.c; these mirror them so a
 * file this module writes always opens. */
#include "format/format_internal.h"
#include "quant/quant.h"
#include "util/arith.h"
#include "util/error.h"
#include "util/hash.h"

#include <stdlib.h>
#include <string.h>

bool cmf__fmt_utf8_ok(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c == 0) return false;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) { k = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { k = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { k = 3; cp = c & 0x07; }
        else return false;
        if (n - i <= k) return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += k + 1;
    }
    return true;
}

/* ---- name set ---------------------------------------------------------- */

static uint64_t name_hash(const char *s, uint32_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint32_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static uint64_t find_slot(const cmf__nameset *s, const char *name, uint32_t len)
{
    uint64_t mask = s->cap - 1, i = name_hash(name, len) & mask;
    while (s->keys[i] && !(s->key_lens[i] == len && memcmp(s->keys[i], name, len) == 0))
        i = (i + 1) & mask;
    return i;
}

static cmf_status grow(cmf__nameset *s)
{
    cmf__nameset n = {0};
    n.cap = s->cap ? s->cap * 2 : 64;
    n.keys = calloc(n.cap, sizeof *n.keys);
    n.key_lens = calloc(n.cap, sizeof *n.key_lens);
    n.vals = calloc(n.cap, sizeof *n.vals);
    if (!n.keys || !n.key_lens || !n.vals) {
        cmf__nameset_free(&n);
        return CMF_ERR_NOMEM;
    }
    for (uint64_t i = 0; i < s->cap; i++) {
        if (!s->keys[i]) continue;
        uint64_t j = find_slot(&n, s->keys[i], s->key_lens[i]);
        n.keys[j] = s->keys[i];
        n.key_lens[j] = s->key_lens[i];
        n.vals[j] = s->vals[i];
        n.n++;
    }
    cmf__nameset_free(s);
    *s = n;
    return CMF_OK;
}

cmf_status cmf__nameset_put(cmf__nameset *s, const char *name, uint32_t len, uint64_t val, uint64_t *prev)
{
    if ((s->n + 1) * 2 > s->cap && grow(s) != CMF_OK) return CMF_ERR_NOMEM;
    uint64_t i = find_slot(s, name, len);
    if (s->keys[i]) {
        if (prev) *prev = s->vals[i];
        return CMF_ERR_DUPLICATE;
    }
    s->keys[i] = name;
    s->key_lens[i] = len;
    s->vals[i] = val;
    s->n++;
    return CMF_OK;
}

bool cmf__nameset_get(const cmf__nameset *s, const char *name, uint32_t len, uint64_t *val)
{
    if (!s->cap) return false;
    uint64_t i = find_slot(s, name, len);
    if (!s->keys[i]) return false;
    if (val) *val = s->vals[i];
    return true;
}

void cmf__nameset_free(cmf__nameset *s)
{
    free(s->keys);
    free(s->key_lens);
    free(s->vals);
    memset(s, 0, sizeof *s);
}

/* ---- writer-side checks ------------------------------------------------ */

cmf_status cmf__fmt_check_tensor(const char *what, const char *name, int dtype, int ndim,
                                 const uint64_t *shape, uint64_t nbytes)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0) return cmf__error(CMF_ERR_ARG, "%s: tensor name is empty", what);
    if (len > 0xFFFF)
        return cmf__error(CMF_ERR_ARG, "%s: tensor name of %zu bytes exceeds the 65535 a record holds", what, len);
    if (!cmf__fmt_utf8_ok((const uint8_t *)name, len))
        return cmf__error(CMF_ERR_PARSE, "%s: tensor name is not valid UTF-8", what);
    const cmf__dtype_info *info = cmf__dtype_get(dtype);
    if (!info) return cmf__error(CMF_ERR_DTYPE, "%s: tensor '%s': dtype %d unknown (known 0..16)", what, name, dtype);
    if (!info->supported)
        return cmf__error(CMF_ERR_DTYPE, "%s: tensor '%s': dtype %d (%s) is reserved, not writable", what, name,
                          dtype, info->name);
    if (ndim < 0 || ndim > CMF_MAX_NDIM)
        return cmf__error(CMF_ERR_ARG, "%s: tensor '%s': ndim %d (allowed 0..6)", what, name, ndim);
    for (int i = 0; i < ndim; i++)
        if (shape[i] > UINT32_MAX)
            return cmf__error(CMF_ERR_ARG, "%s: tensor '%s': dim %d = %llu does not fit u32", what, name, i,
                              (unsigned long long)shape[i]);
    if (info->fixed_size) {
        uint64_t want = 0;
        cmf_status st = cmf__dtype_nbytes(dtype, ndim, shape, &want);
        if (st == CMF_OK && want != nbytes)
            return cmf__error(CMF_ERR_SIZE, "%s: tensor '%s': %llu payload bytes, %s of this shape needs %llu",
                              what, name, (unsigned long long)nbytes, info->name, (unsigned long long)want);
        if (st != CMF_OK && st != CMF_ERR_UNSUPPORTED)
            return cmf__error_prefix(CMF_ERR_SIZE, "%s: tensor '%s'", what, name);
    }
    return CMF_OK;
}

uint32_t cmf__fmt_dtype_features(int dtype)
{
    uint32_t bits = 0;
    if (dtype == CMF_DTYPE_Q8_2F || dtype == CMF_DTYPE_VBIT || dtype == CMF_DTYPE_VBIT_RO)
        bits |= CMF_FEAT_QUANT_2F;
    const cmf__dtype_info *info = cmf__dtype_get(dtype);
    if (info) bits |= info->feature_bits & CMF_FEAT_KNOWN;
    return bits;
}

uint32_t cmf__fmt_header_features(const json_t *header)
{
    const json_t *skills = json_object_get(header, "skills");
    size_t i;
    const json_t *rec;
    if (!json_is_array(skills)) return 0;
    json_array_foreach(skills, i, rec)
        if (json_object_get(rec, "base_dir_hash")) return CMF_FEAT_SKILL_FILE;
    return 0;
}

/* ---- encoders ---------------------------------------------------------- */

cmf_status cmf__fmt_encode_dir(const cmf__dir_rec *recs, uint64_t n, cmf__buf *out)
{
    uint64_t pool_off = 16 + n * CMF_DIR_RECORD_SIZE, pool_len = 0;
    for (uint64_t i = 0; i < n; i++) pool_len += recs[i].name_len;
    out->len = 0;
    if (cmf__buf_append_zeros(out, pool_off + pool_len) != CMF_OK) return CMF_ERR_NOMEM;
    uint8_t *p = out->data;
    cmf__wr64(p, n);
    cmf__wr64(p + 8, pool_off);
    uint64_t name_off = 0;
    for (uint64_t i = 0; i < n; i++) {
        const cmf__dir_rec *r = &recs[i];
        uint8_t *q = p + 16 + i * CMF_DIR_RECORD_SIZE;
        if (name_off > UINT32_MAX)
            return cmf__error(CMF_ERR_BOUNDS, "directory: name pool passes 4 GiB at tensor '%s'", r->name);
        cmf__wr32(q, (uint32_t)name_off);
        cmf__wr16(q + 4, (uint16_t)r->name_len);
        q[6] = (uint8_t)r->dtype;
        q[7] = (uint8_t)r->ndim;
        for (int d = 0; d < CMF_MAX_NDIM; d++) cmf__wr32(q + 8 + 4 * d, d < r->ndim ? (uint32_t)r->shape[d] : 0);
        cmf__wr64(q + 32, r->off);
        cmf__wr64(q + 40, r->nbytes);
        cmf__wr64(q + 48, r->hash);
        memcpy(p + pool_off + name_off, r->name, r->name_len);
        name_off += r->name_len;
    }
    return CMF_OK;
}

static int set_hash_hex(json_t *obj, const char *key, const void *data, uint64_t len)
{
    char hex[17];
    cmf__hash64_hex(cmf__hash64(data, (size_t)len), hex);
    return json_object_set_new(obj, key, json_string(hex));
}

json_t *cmf__fmt_build_header(const json_t *user, const void *masks, uint64_t masks_len,
                              const void *vocab, uint64_t vocab_len, const void *index,
                              uint64_t index_len)
{
    json_t *h = json_object();
    json_t *sh = json_object();
    if (!h || !sh) goto fail;
    if (json_object_set_new(h, "format", json_string("cmf")) || json_object_set_new(h, "version", json_integer(2)))
        goto fail;
    const char *key;
    json_t *val;
    if (json_is_object(user)) {
        json_object_foreach((json_t *)user, key, val) {
            if (!strcmp(key, "format") || !strcmp(key, "version") || !strcmp(key, "section_hashes")) continue;
            if (json_object_set(h, key, val)) goto fail;
        }
    }
    if ((masks && set_hash_hex(sh, "masks", masks, masks_len)) ||
        (vocab && set_hash_hex(sh, "vocab", vocab, vocab_len)) ||
        (index && set_hash_hex(sh, "index", index, index_len)))
        goto fail;
    if (json_object_set_new(h, "section_hashes", sh)) {
        sh = NULL;
        goto fail;
    }
    return h;
fail:
    json_decref(sh);
    json_decref(h);
    return NULL;
}

void cmf__fmt_encode_envelope(const cmf__envelope *e, uint8_t out[CMF_ENVELOPE_SIZE])
{
    memset(out, 0, CMF_ENVELOPE_SIZE);
    memcpy(out, "CMF\x01", 4);
    cmf__wr32(out + 0x04, 2);
    cmf__wr32(out + 0x08, 0);
    cmf__wr32(out + 0x0C, e->features);
    cmf__wr64(out + 0x10, e->header_off);
    cmf__wr64(out + 0x18, e->header_len);
    cmf__wr64(out + 0x20, e->dir_off);
    cmf__wr64(out + 0x28, e->dir_len);
    cmf__wr64(out + 0x30, e->data_off);
    cmf__wr64(out + 0x38, e->data_len);
    cmf__wr64(out + 0x40, e->masks_off);
    cmf__wr64(out + 0x48, e->masks_len);
    cmf__wr64(out + 0x50, e->vocab_off);
    cmf__wr64(out + 0x58, e->vocab_len);
    cmf__wr64(out + 0x60, e->index_off);
    cmf__wr64(out + 0x68, e->index_len);
    cmf__wr64(out + 0x70, e->header_hash);
    cmf__wr64(out + 0x78, e->dir_hash);
}
