/* gguf_read.c — the GGUF container reader: header, metadata key/values,
 * tensor infos, alignment, data section. Little-endian v2/v3 only (v1 used
 * 32-bit lengths and is long gone; a byte-swapped version is a big-endian
 * file and is refused). Nothing is read before its bounds are checked; the
 * tensor data stay in the mapping. */
#include "convert/gguf.h"
#include "util/arith.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

/* Sanity limits far above any real file, so that counts read from the
 * file cannot drive huge allocations before the bytes are checked. */
#define MAX_KEY_LEN 65536u
#define MAX_ARRAY_DEPTH 1 /* arrays of arrays are rejected */

typedef struct rd {
    const uint8_t *p;
    uint64_t size, pos;
    const char *what;
} rd;

static cmf_status need(rd *r, uint64_t n, const char *obj)
{
    if (!cmf__range_ok(r->pos, n, r->size))
        return cmf__error(CMF_ERR_BOUNDS, "%s: %s at 0x%llx: needs %llu bytes, file has %llu",
                          r->what, obj, (unsigned long long)r->pos, (unsigned long long)n,
                          (unsigned long long)(r->size - (r->pos < r->size ? r->pos : r->size)));
    return CMF_OK;
}

static cmf_status rd_u32(rd *r, uint32_t *v, const char *obj)
{
    cmf_status st = need(r, 4, obj);
    if (st) return st;
    *v = cmf__rd32(r->p + r->pos);
    r->pos += 4;
    return CMF_OK;
}

static cmf_status rd_u64(rd *r, uint64_t *v, const char *obj)
{
    cmf_status st = need(r, 8, obj);
    if (st) return st;
    *v = cmf__rd64(r->p + r->pos);
    r->pos += 8;
    return CMF_OK;
}

/* A string: u64 length then bytes. Returns a pointer into the data. */
static cmf_status rd_str(rd *r, const uint8_t **s, uint64_t *len, const char *obj)
{
    uint64_t at = r->pos;
    *s = NULL;
    cmf_status st = rd_u64(r, len, obj);
    if (st) return st;
    if (!cmf__range_ok(r->pos, *len, r->size))
        return cmf__error(CMF_ERR_BOUNDS, "%s: %s at 0x%llx: string length %llu past the end (%llu bytes left)",
                          r->what, obj, (unsigned long long)at, (unsigned long long)*len,
                          (unsigned long long)(r->size - r->pos));
    *s = r->p + r->pos;
    r->pos += *len;
    return CMF_OK;
}

static const uint8_t scalar_size[CMF_GGUF_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

static char *dup_n(const uint8_t *s, uint64_t n)
{
    char *c = malloc(n + 1);
    if (!c) return NULL;
    memcpy(c, s, n);
    c[n] = 0;
    return c;
}

/* Reads one value of `type` (not ARRAY) at the cursor, checking it. */
static cmf_status skip_scalar(rd *r, uint32_t type, const char *key)
{
    if (type == CMF_GGUF_STRING) {
        const uint8_t *s;
        uint64_t n;
        return rd_str(r, &s, &n, key);
    }
    cmf_status st = need(r, scalar_size[type], key);
    if (st) return st;
    if (type == CMF_GGUF_BOOL && r->p[r->pos] > 1)
        return cmf__error(CMF_ERR_PARSE, "%s: key '%s' at 0x%llx: bool value %u is not 0 or 1", r->what,
                          key, (unsigned long long)r->pos, r->p[r->pos]);
    r->pos += scalar_size[type];
    return CMF_OK;
}

static cmf_status read_kv(rd *r, cmf__gguf_kv *kv)
{
    uint64_t at = r->pos, klen;
    const uint8_t *k;
    kv->off = at;
    cmf_status st = rd_str(r, &k, &klen, "metadata key");
    if (st) return st;
    if (klen == 0 || klen > MAX_KEY_LEN)
        return cmf__error(CMF_ERR_PARSE, "%s: metadata key at 0x%llx: length %llu (allowed 1..%u)", r->what,
                          (unsigned long long)at, (unsigned long long)klen, MAX_KEY_LEN);
    if (memchr(k, 0, klen))
        return cmf__error(CMF_ERR_PARSE, "%s: metadata key at 0x%llx: contains a NUL byte", r->what,
                          (unsigned long long)at);
    if (!(kv->key = dup_n(k, klen))) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", r->what);
    uint64_t tat = r->pos;
    if ((st = rd_u32(r, &kv->type, kv->key))) return st;
    if (kv->type >= CMF_GGUF_NTYPES)
        return cmf__error(CMF_ERR_PARSE, "%s: key '%s' at 0x%llx: value type %u unknown (known 0..12)", r->what,
                          kv->key, (unsigned long long)tat, kv->type);
    if (kv->type != CMF_GGUF_ARRAY) {
        kv->val = r->p + r->pos;
        if ((st = skip_scalar(r, kv->type, kv->key))) return st;
        kv->val_len = (uint64_t)(r->p + r->pos - kv->val);
        return CMF_OK;
    }
    uint64_t aat = r->pos;
    if ((st = rd_u32(r, &kv->arr_type, kv->key))) return st;
    if ((st = rd_u64(r, &kv->arr_n, kv->key))) return st;
    if (kv->arr_type >= CMF_GGUF_NTYPES || kv->arr_type == CMF_GGUF_ARRAY)
        return cmf__error(CMF_ERR_PARSE, "%s: key '%s' at 0x%llx: array element type %u not allowed", r->what,
                          kv->key, (unsigned long long)aat, kv->arr_type);
    kv->val = r->p + r->pos;
    if (kv->arr_type == CMF_GGUF_STRING) {
        /* each element takes at least 8 bytes: bound the count before allocating */
        uint64_t min_bytes;
        if (cmf__mul_overflow(kv->arr_n, 8, &min_bytes) || !cmf__range_ok(r->pos, min_bytes, r->size))
            return cmf__error(CMF_ERR_BOUNDS, "%s: key '%s' at 0x%llx: %llu strings cannot fit in the %llu bytes left",
                              r->what, kv->key, (unsigned long long)aat, (unsigned long long)kv->arr_n,
                              (unsigned long long)(r->size - r->pos));
        kv->str_off = malloc((kv->arr_n ? kv->arr_n : 1) * sizeof *kv->str_off);
        if (!kv->str_off) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", r->what);
        for (uint64_t i = 0; i < kv->arr_n; i++) {
            kv->str_off[i] = (uint64_t)(r->p + r->pos - kv->val);
            const uint8_t *s;
            uint64_t n;
            if ((st = rd_str(r, &s, &n, kv->key))) return st;
        }
    } else {
        uint64_t bytes;
        if (cmf__mul_overflow(kv->arr_n, scalar_size[kv->arr_type], &bytes) || !cmf__range_ok(r->pos, bytes, r->size))
            return cmf__error(CMF_ERR_BOUNDS, "%s: key '%s' at 0x%llx: array of %llu x %u-byte values past the end",
                              r->what, kv->key, (unsigned long long)aat, (unsigned long long)kv->arr_n,
                              scalar_size[kv->arr_type]);
        if (kv->arr_type == CMF_GGUF_BOOL)
            for (uint64_t i = 0; i < kv->arr_n; i++)
                if (r->p[r->pos + i] > 1)
                    return cmf__error(CMF_ERR_PARSE, "%s: key '%s' at 0x%llx: bool value %u is not 0 or 1",
                                      r->what, kv->key, (unsigned long long)(r->pos + i), r->p[r->pos + i]);
        r->pos += bytes;
    }
    kv->val_len = (uint64_t)(r->p + r->pos - kv->val);
    return CMF_OK;
}

static cmf_status read_tensor_info(rd *r, cmf__gguf_tensor *t)
{
    uint64_t at = r->pos, nlen;
    const uint8_t *n;
    t->info_off = at;
    cmf_status st = rd_str(r, &n, &nlen, "tensor name");
    if (st) return st;
    if (nlen == 0 || nlen > MAX_KEY_LEN || memchr(n, 0, nlen))
        return cmf__error(CMF_ERR_PARSE, "%s: tensor info at 0x%llx: bad name (length %llu)", r->what,
                          (unsigned long long)at, (unsigned long long)nlen);
    if (!(t->name = dup_n(n, nlen))) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", r->what);
    uint64_t dat = r->pos;
    if ((st = rd_u32(r, &t->ndim, t->name))) return st;
    if (t->ndim == 0 || t->ndim > CMF_GGUF_MAX_DIMS)
        return cmf__error(CMF_ERR_PARSE, "%s: tensor '%s' at 0x%llx: %u dims (allowed 1..%d)", r->what, t->name,
                          (unsigned long long)dat, t->ndim, CMF_GGUF_MAX_DIMS);
    uint64_t n_elems = 1;
    for (uint32_t d = 0; d < CMF_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->ndim; d++) {
        if ((st = rd_u64(r, &t->ne[d], t->name))) return st;
        if (t->ne[d] == 0 || t->ne[d] > (1ull << 62) || cmf__mul_overflow(n_elems, t->ne[d], &n_elems))
            return cmf__error(CMF_ERR_PARSE, "%s: tensor '%s' at 0x%llx: dim %u = %llu not allowed (or overflow)",
                              r->what, t->name, (unsigned long long)dat, d, (unsigned long long)t->ne[d]);
    }
    t->n_elems = n_elems;
    uint64_t tat = r->pos;
    if ((st = rd_u32(r, &t->type, t->name))) return st;
    uint32_t be, bb;
    if (!cmf__ggml_type_size(t->type, &be, &bb))
        return cmf__error(CMF_ERR_DTYPE, "%s: tensor '%s' at 0x%llx: ggml type %u unknown", r->what, t->name,
                          (unsigned long long)tat, t->type);
    if (t->ne[0] % be != 0)
        return cmf__error(CMF_ERR_SIZE, "%s: tensor '%s' at 0x%llx: row of %llu elements is not a whole number of %s blocks (%u)",
                          r->what, t->name, (unsigned long long)dat, (unsigned long long)t->ne[0],
                          cmf__ggml_type_name(t->type), be);
    if (cmf__mul_overflow(n_elems / be, bb, &t->nbytes))
        return cmf__error(CMF_ERR_BOUNDS, "%s: tensor '%s' at 0x%llx: byte size overflows", r->what, t->name,
                          (unsigned long long)dat);
    return rd_u64(r, &t->off, t->name);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Rejects duplicate names among n strings (sorted copy of pointers). */
static cmf_status check_unique(const char *what, const char *kind, char **names, uint64_t n)
{
    if (n < 2) return CMF_OK;
    char **s = malloc(n * sizeof *s);
    if (!s) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", what);
    memcpy(s, names, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_str);
    for (uint64_t i = 1; i < n; i++)
        if (strcmp(s[i - 1], s[i]) == 0) {
            cmf_status st = cmf__error(CMF_ERR_DUPLICATE, "%s: %s '%s' appears twice", what, kind, s[i]);
            free(s);
            return st;
        }
    free(s);
    return CMF_OK;
}

void cmf__gguf_free(cmf__gguf *g)
{
    if (!g) return;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        free(g->kvs[i].key);
        free(g->kvs[i].str_off);
    }
    free(g->kvs);
    for (uint64_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->tensors);
    if (g->owns_map) cmf__unmap(&g->map);
    for (uint32_t i = 0; i < g->n_parts; i++) cmf__gguf_free(g->parts[i]);
    free(g->parts);
    free(g->path);
    free(g);
}

cmf_status cmf__gguf_parse(const uint8_t *data, uint64_t size, const char *what, cmf__gguf **out)
{
    *out = NULL;
    cmf__gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(what))) {
        free(g);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", what);
    }
    g->data = data;
    g->size = size;
    rd r = {data, size, 0, g->path};
    cmf_status st;
    uint64_t n_tensors, n_kv;
    if (size < 4 || memcmp(data, "GGUF", 4) != 0) {
        if (size < 4)
            st = cmf__error(CMF_ERR_MAGIC, "%s: file is %llu bytes%s, too short for the 'GGUF' magic", what,
                            (unsigned long long)size, size ? "" : " (empty)");
        else
            st = cmf__error(CMF_ERR_MAGIC, "%s: at 0x0: magic is not 'GGUF' (found %02x %02x %02x %02x)", what,
                            data[0], data[1], data[2], data[3]);
        goto fail;
    }
    r.pos = 4;
    if ((st = rd_u32(&r, &g->version, "version"))) goto fail;
    if (g->version != 2 && g->version != 3) {
        if (g->version > 0xffff)
            st = cmf__error(CMF_ERR_VERSION, "%s: at 0x4: version 0x%x looks byte-swapped: big-endian GGUF is not supported",
                            what, g->version);
        else
            st = cmf__error(CMF_ERR_VERSION, "%s: at 0x4: GGUF version %u unsupported (2 or 3)", what, g->version);
        goto fail;
    }
    if ((st = rd_u64(&r, &n_tensors, "tensor count")) || (st = rd_u64(&r, &n_kv, "metadata count"))) goto fail;
    /* every kv takes >= 8+1+4 bytes and every tensor info >= 8+1+4+8+4+8 */
    if (n_kv > (size - r.pos) / 13) {
        st = cmf__error(CMF_ERR_BOUNDS, "%s: at 0x10: metadata count %llu cannot fit in %llu bytes", what,
                        (unsigned long long)n_kv, (unsigned long long)(size - r.pos));
        goto fail;
    }
    if (n_tensors > (size - r.pos) / 33) {
        st = cmf__error(CMF_ERR_BOUNDS, "%s: at 0x8: tensor count %llu cannot fit in %llu bytes", what,
                        (unsigned long long)n_tensors, (unsigned long long)(size - r.pos));
        goto fail;
    }
    g->kvs = calloc(n_kv ? n_kv : 1, sizeof *g->kvs);
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->kvs || !g->tensors) {
        st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", what);
        goto fail;
    }
    for (uint64_t i = 0; i < n_kv; i++) {
        g->n_kv = i + 1;
        if ((st = read_kv(&r, &g->kvs[i]))) goto fail;
    }
    {
        char **names = malloc((n_kv ? n_kv : 1) * sizeof *names);
        if (!names) {
            st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", what);
            goto fail;
        }
        for (uint64_t i = 0; i < n_kv; i++) names[i] = g->kvs[i].key;
        st = check_unique(what, "metadata key", names, n_kv);
        free(names);
        if (st) goto fail;
    }
    g->alignment = CMF_GGUF_DEFAULT_ALIGN;
    const cmf__gguf_kv *al = cmf__gguf_find_kv(g, "general.alignment");
    if (al) {
        uint64_t a = 0;
        if (al->type == CMF_GGUF_U32) a = cmf__rd32(al->val);
        else if (al->type == CMF_GGUF_U64) a = cmf__rd64(al->val);
        else {
            st = cmf__error(CMF_ERR_PARSE, "%s: key 'general.alignment' at 0x%llx: type %u, expected u32", what,
                            (unsigned long long)al->off, al->type);
            goto fail;
        }
        if (a == 0 || (a & (a - 1)) || a > (1u << 30)) {
            st = cmf__error(CMF_ERR_ALIGN, "%s: key 'general.alignment' at 0x%llx: %llu is not a power of two",
                            what, (unsigned long long)al->off, (unsigned long long)a);
            goto fail;
        }
        g->alignment = a;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        g->n_tensors = i + 1;
        if ((st = read_tensor_info(&r, &g->tensors[i]))) goto fail;
    }
    {
        char **names = malloc((n_tensors ? n_tensors : 1) * sizeof *names);
        if (!names) {
            st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", what);
            goto fail;
        }
        for (uint64_t i = 0; i < n_tensors; i++) names[i] = g->tensors[i].name;
        st = check_unique(what, "tensor", names, n_tensors);
        free(names);
        if (st) goto fail;
    }
    g->data_off = cmf__align_up(r.pos, g->alignment);
    if (n_tensors > 0 && g->data_off > size) {
        st = cmf__error(CMF_ERR_BOUNDS, "%s: data section at 0x%llx starts past the end (%llu bytes)", what,
                        (unsigned long long)g->data_off, (unsigned long long)size);
        goto fail;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        cmf__gguf_tensor *t = &g->tensors[i];
        if (t->off % g->alignment) {
            st = cmf__error(CMF_ERR_ALIGN, "%s: tensor '%s' at 0x%llx: data offset %llu is not a multiple of %llu",
                            what, t->name, (unsigned long long)t->info_off, (unsigned long long)t->off,
                            (unsigned long long)g->alignment);
            goto fail;
        }
        if (!cmf__range_ok(t->off, t->nbytes, size - g->data_off)) {
            st = cmf__error(CMF_ERR_BOUNDS, "%s: tensor '%s' at 0x%llx: data [0x%llx, +%llu) past the end of the file (%llu bytes)",
                            what, t->name, (unsigned long long)t->info_off,
                            (unsigned long long)(g->data_off + t->off), (unsigned long long)t->nbytes,
                            (unsigned long long)size);
            goto fail;
        }
        t->data = data + g->data_off + t->off;
    }
    *out = g;
    return CMF_OK;
fail:
    cmf__gguf_free(g);
    return st;
}

cmf_status cmf__gguf_open(const char *path, cmf__gguf **out)
{
    *out = NULL;
    cmf__mapping m;
    cmf_status st = cmf__map_file(path, &m);
    if (st) return st;
    if ((st = cmf__gguf_parse(m.data, m.size, path, out))) {
        cmf__unmap(&m);
        return st;
    }
    (*out)->map = m;
    (*out)->owns_map = true;
    return CMF_OK;
}

const cmf__gguf_kv *cmf__gguf_find_kv(const cmf__gguf *g, const char *key)
{
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kvs[i].key, key) == 0) return &g->kvs[i];
    return NULL;
}

const cmf__gguf_tensor *cmf__gguf_find_tensor(const cmf__gguf *g, const char *name)
{
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}

static bool is_int_type(uint32_t t)
{
    return t <= CMF_GGUF_I32 || t == CMF_GGUF_U64 || t == CMF_GGUF_I64;
}

/* Any numeric scalar at p as double / as signed 64 (integers only). */
static int64_t load_int(uint32_t t, const uint8_t *p)
{
    switch (t) {
    case CMF_GGUF_U8: return p[0];
    case CMF_GGUF_I8: return (int8_t)p[0];
    case CMF_GGUF_U16: return cmf__rd16(p);
    case CMF_GGUF_I16: return (int16_t)cmf__rd16(p);
    case CMF_GGUF_U32: return cmf__rd32(p);
    case CMF_GGUF_I32: return (int32_t)cmf__rd32(p);
    case CMF_GGUF_U64: return (int64_t)cmf__rd64(p);
    case CMF_GGUF_I64: return (int64_t)cmf__rd64(p);
    case CMF_GGUF_BOOL: return p[0];
    default: return 0;
    }
}

static double load_num(uint32_t t, const uint8_t *p)
{
    if (t == CMF_GGUF_F32) {
        uint32_t u = cmf__rd32(p);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    if (t == CMF_GGUF_F64) {
        uint64_t u = cmf__rd64(p);
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    if (t == CMF_GGUF_U64) return (double)cmf__rd64(p);
    return (double)load_int(t, p);
}

static cmf_status lookup(const cmf__gguf *g, const char *key, const cmf__gguf_kv **kv)
{
    *kv = cmf__gguf_find_kv(g, key);
    if (!*kv) return cmf__error(CMF_ERR_NOT_FOUND, "%s: metadata key '%s' missing", g->path, key);
    return CMF_OK;
}

cmf_status cmf__gguf_get_uint(const cmf__gguf *g, const char *key, uint64_t *out)
{
    const cmf__gguf_kv *kv;
    cmf_status st = lookup(g, key, &kv);
    if (st) return st;
    if (!is_int_type(kv->type))
        return cmf__error(CMF_ERR_PARSE, "%s: key '%s' at 0x%llx: type %u, expected an integer", g->path, key,
                          (unsigned long long)kv->off, kv->type);
    if (kv->type == CMF_GGUF_U64) {
        *out = cmf__rd64(kv->val);
        return CMF_OK;
    }
    int64_t v = load_int(kv->type, kv->val);
    if (v < 0)
        return cmf__error(CMF_ERR_PARSE, "%s: key '%s' at 0x%llx: negative value %lld", g->path, key,
                          (unsigned long long)kv->off, (long long)v);
    *out = (uint64_t)v;
    return CMF_OK;
}

cmf_status cmf__gguf_get_num(const cmf__gguf *g, const char *key, double *out)
{
    const cmf__gguf_kv *kv;
    cmf_status st = lookup(g, key, &kv);
    if (st) return st;
    if (!is_int_type(kv->type) && kv->type != CMF_GGUF_F32 && kv->type != CMF_GGUF_F64)
        return cmf__error(CMF_ERR_PARSE, "%s: key '%s' at 0x%llx: type %u, expected a number", g->path, key,
                          (unsigned long long)kv->off, kv->type);
    *out = load_num(kv->type, kv->val);
    return CMF_OK;
}

cmf_status cmf__gguf_get_bool(const cmf__gguf *g, const char *key, bool *out)
{
    const cmf__gguf_kv *kv;
    cmf_status st = lookup(g, key, &kv);
    if (st) return st;
    if (kv->type != CMF_GGUF_BOOL)
        return cmf__error(CMF_ERR_PARSE, "%s: key '%s' at 0x%llx: type %u, expected a bool", g->path, key,
                          (unsigned long long)kv->off, kv->type);
    *out = kv->val[0] != 0;
    return CMF_OK;
}

cmf_status cmf__gguf_get_str(const cmf__gguf *g, const char *key, const char **s, uint64_t *len)
{
    const cmf__gguf_kv *kv;
    cmf_status st = lookup(g, key, &kv);
    if (st) return st;
    if (kv->type != CMF_GGUF_STRING)
        return cmf__error(CMF_ERR_PARSE, "%s: key '%s' at 0x%llx: type %u, expected a string", g->path, key,
                          (unsigned long long)kv->off, kv->type);
    *len = cmf__rd64(kv->val);
    *s = (const char *)kv->val + 8;
    return CMF_OK;
}

void cmf__gguf_arr_str(const cmf__gguf_kv *kv, uint64_t i, const char **s, uint64_t *len)
{
    const uint8_t *p = kv->val + kv->str_off[i];
    *len = cmf__rd64(p);
    *s = (const char *)p + 8;
}

double cmf__gguf_arr_num(const cmf__gguf_kv *kv, uint64_t i)
{
    return load_num(kv->arr_type, kv->val + i * scalar_size[kv->arr_type]);
}

int64_t cmf__gguf_arr_int(const cmf__gguf_kv *kv, uint64_t i)
{
    return load_int(kv->arr_type, kv->val + i * scalar_size[kv->arr_type]);
}

/* split.* keys as unsigned (gguf-split writes u16 / i32). */
static uint64_t split_key(const cmf__gguf *g, const char *key, uint64_t def)
{
    uint64_t v;
    if (!cmf__gguf_find_kv(g, key) || cmf__gguf_get_uint(g, key, &v)) return def;
    return v;
}

cmf_status cmf__gguf_open_set(const char *path, cmf__gguf **out)
{
    cmf_status st = cmf__gguf_open(path, out);
    if (st) return st;
    cmf__gguf *g = *out;
    uint64_t count = split_key(g, "split.count", 1);
    if (count <= 1) return CMF_OK;
    /* "<prefix>-00001-of-00003.gguf": the part number sits before "-of-" */
    const char *of = strstr(path, "-of-");
    size_t plen = strlen(path);
    if (count > 9999 || split_key(g, "split.no", 0) != 0 || !of || of - path < 5) {
        st = cmf__error(CMF_ERR_SHARD, "%s: split.count %llu: open the first file (<prefix>-00001-of-%05llu.gguf)",
                        path, (unsigned long long)count, (unsigned long long)count);
        goto fail;
    }
    g->parts = calloc(count - 1, sizeof *g->parts);
    char *p = malloc(plen + 1);
    if (!g->parts || !p) {
        free(p);
        st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    for (uint64_t k = 1; k < count; k++) {
        memcpy(p, path, plen + 1);
        char num[8];
        snprintf(num, sizeof num, "%05llu", (unsigned long long)(k + 1));
        memcpy(p + (of - path) - 5, num, 5);
        cmf__gguf *part = NULL;
        if ((st = cmf__gguf_open(p, &part))) {
            free(p);
            st = cmf__error_prefix(CMF_ERR_SHARD, "%s: split part %llu of %llu", path, (unsigned long long)(k + 1),
                                   (unsigned long long)count);
            goto fail;
        }
        g->parts[g->n_parts++] = part;
        if (split_key(part, "split.no", 0) != k || split_key(part, "split.count", 0) != count) {
            st = cmf__error(CMF_ERR_SHARD, "%s: split.no / split.count say it is not part %llu of %llu", p,
                            (unsigned long long)(k + 1), (unsigned long long)count);
            free(p);
            goto fail;
        }
        cmf__gguf_tensor *nt = realloc(g->tensors, (g->n_tensors + part->n_tensors + 1) * sizeof *nt);
        if (!nt) {
            free(p);
            st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
            goto fail;
        }
        g->tensors = nt;
        for (uint64_t i = 0; i < part->n_tensors; i++) {
            if (cmf__gguf_find_tensor(g, part->tensors[i].name)) {
                st = cmf__error(CMF_ERR_DUPLICATE, "%s: tensor '%s' at 0x%llx is also in %s", p,
                                part->tensors[i].name, (unsigned long long)part->tensors[i].info_off, path);
                free(p);
                goto fail;
            }
            g->tensors[g->n_tensors] = part->tensors[i];
            if (!(g->tensors[g->n_tensors].name = strdup(part->tensors[i].name))) {
                free(p);
                st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
                goto fail;
            }
            g->n_tensors++;
        }
    }
    free(p);
    return CMF_OK;
fail:
    cmf__gguf_free(g);
    *out = NULL;
    return st;
}
