/* open.c — opening a CMF v2 file or shard set: map, check the envelope,
 * sections, header JSON and every directory record (spec §1.2, §3, §4),
 * parse masks and sparse index, merge shard directories (§10). Never reads
 * the weight blob. Every failure names the file, the object and the byte
 * offset; a handle is only returned for a file that passed every check. */
#include "format/format_internal.h"
#include "quant/quant.h"
#include "util/arith.h"
#include "util/error.h"
#include "util/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct file_priv {
    cmf__nameset names;
    char **name_bufs;      /* one NUL-separated copy of each shard's names */
    uint32_t n_name_bufs;
    bool borrowed;         /* shard 0's mapping is caller memory */
    cmf__masks *masks;
} file_priv;

cmf__open_opts cmf__open_opts_default(void)
{
    cmf__open_opts o = {.allow_skill_file = false, .single_shard = false};
    return o;
}

/* ---- envelope and sections -------------------------------------------- */

static const struct {
    const char *name;
    unsigned field; /* envelope offset of the section's off */
} SECTIONS[] = {
    {"header", 0x10}, {"directory", 0x20}, {"data", 0x30}, {"masks", 0x40}, {"vocab", 0x50}, {"index", 0x60},
};

static cmf__section *section_of(cmf__shard *sh, int i)
{
    cmf__section *s[] = {&sh->header, &sh->dir, &sh->data, &sh->masks, &sh->vocab, &sh->index};
    return s[i];
}

/* What a file that is not CMF looks like, with the command that takes it
 * ("" when unknown): the wrong file gets told what to do, not only bytes. */
static const char *other_kind(const uint8_t *p, uint64_t size)
{
    if (!memcmp(p, "GGUF", 4)) return "a GGUF file (llama.cpp's format), not a .cmf file: import it with "
                                      "`cmf import-gguf FILE.gguf --output FILE.cmf` (";
    uint64_t hl = size >= 9 ? cmf__rd64(p) : 0;
    if (hl >= 2 && hl <= size - 8 && p[8] == '{')
        return "a safetensors file, not a .cmf file: convert its Hugging Face folder with "
               "`cmf convert --model DIR --output FILE.cmf` (";
    size_t i = 0;
    while (i < size && i < 64 && (p[i] == ' ' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t')) i++;
    if (i < size && (p[i] == '{' || p[i] == '['))
        return "a JSON file, not a .cmf file: a Hugging Face folder converts with "
               "`cmf convert --model DIR --output FILE.cmf` (";
    return "";
}

static cmf_status check_envelope(cmf__shard *sh)
{
    const char *path = sh->path;
    /* the envelope as it was when the file was mapped (a file grown in
     * place gets a new one later; its other bytes never change) */
    const uint8_t *p = sh->map.head;
    uint64_t size = sh->map.size;
    if (size < 4) /* no magic to show: say what the file is */
        return cmf__error(CMF_ERR_MAGIC,
                          "%s: envelope magic at 0x0: the file is %llu bytes%s; a .cmf file starts with 43 4d 46 01 "
                          "(\"CMF\\x01\") and a 128-byte envelope",
                          path, (unsigned long long)size, size ? "" : " (empty)");
    if (memcmp(p, "CMF\x01", 4) != 0) {
        uint8_t m[4];
        memcpy(m, p, 4);
        return cmf__error(CMF_ERR_MAGIC,
                          "%s: %senvelope magic at 0x0: found %02x %02x %02x %02x, expected 43 4d 46 01 (\"CMF\\x01\")%s",
                          path, other_kind(p, size), m[0], m[1], m[2], m[3], *other_kind(p, size) ? ")" : "");
    }
    if (size < CMF_ENVELOPE_SIZE)
        return cmf__error(CMF_ERR_BOUNDS, "%s: envelope at 0x0: file is %llu bytes, the envelope needs 128", path,
                          (unsigned long long)size);
    sh->version = cmf__rd32(p + 4);
    sh->flags = cmf__rd32(p + 8);
    sh->features = cmf__rd32(p + 12);
    if (sh->version != 2)
        return cmf__error(CMF_ERR_VERSION, "%s: envelope version at 0x4: %u, only version 2 is supported", path,
                          sh->version);
    uint32_t unknown = sh->features & ~CMF_FEAT_KNOWN;
    if (unknown)
        return cmf__error(CMF_ERR_FEATURE,
                          "%s: required_features at 0xc: unknown bit(s) 0x%x set (this reader knows bits 0,1,2,5,6)",
                          path, unknown);
    for (int i = 0; i < 6; i++) {
        cmf__section *s = section_of(sh, i);
        unsigned fo = SECTIONS[i].field;
        s->off = cmf__rd64(p + fo);
        s->len = cmf__rd64(p + fo + 8);
        s->data = NULL;
        bool required = i < 2;
        if (s->off == 0) {
            if (required)
                return cmf__error(CMF_ERR_BOUNDS, "%s: envelope field 0x%x: %s section is missing (offset 0)", path,
                                  fo, SECTIONS[i].name);
            if (s->len != 0)
                return cmf__error(CMF_ERR_BOUNDS,
                                  "%s: envelope field 0x%x: %s section has offset 0 (absent) but length %llu", path,
                                  fo, SECTIONS[i].name, (unsigned long long)s->len);
            continue;
        }
        if (s->off < CMF_ENVELOPE_SIZE)
            return cmf__error(CMF_ERR_BOUNDS,
                              "%s: envelope field 0x%x: %s section at 0x%llx starts inside the 128-byte envelope",
                              path, fo, SECTIONS[i].name, (unsigned long long)s->off);
        if (!cmf__range_ok(s->off, s->len, size))
            return cmf__error(CMF_ERR_BOUNDS,
                              "%s: envelope field 0x%x: %s section [0x%llx, +%llu) extends past end of file (%llu bytes)",
                              path, fo, SECTIONS[i].name, (unsigned long long)s->off, (unsigned long long)s->len,
                              (unsigned long long)size);
        s->data = sh->map.data + s->off;
    }
    if (sh->data.off % CMF_DATA_ALIGN != 0)
        return cmf__error(CMF_ERR_ALIGN, "%s: envelope field 0x30: data section at 0x%llx is not a multiple of 4096",
                          path, (unsigned long long)sh->data.off);
    sh->header_hash = cmf__rd64(p + 0x70);
    sh->dir_hash = cmf__rd64(p + 0x78);
    return CMF_OK;
}

static cmf_status parse_header(cmf__shard *sh, const cmf__open_opts *opts)
{
    char what[512];
    snprintf(what, sizeof what, "%s: header JSON at 0x%llx", sh->path, (unsigned long long)sh->header.off);
    if (!cmf__fmt_utf8_ok(sh->header.data, (size_t)sh->header.len) && sh->header.len)
        return cmf__error(CMF_ERR_PARSE, "%s: not valid UTF-8", what);
    cmf_status st = cmf__json_parse((const char *)sh->header.data, (size_t)sh->header.len, what, &sh->header_json);
    if (st != CMF_OK) return CMF_ERR_PARSE;
    if (!json_is_object(sh->header_json))
        return cmf__error(CMF_ERR_PARSE, "%s: expected a JSON object", what);
    const json_t *arch = json_object_get(sh->header_json, "arch");
    if (arch && !json_is_object(arch) && !json_is_null(arch))
        return cmf__error(CMF_ERR_PARSE, "%s: \"arch\" is not an object", what);
    const json_t *shard = json_object_get(sh->header_json, "shard");
    if (shard && !json_is_null(shard)) {
        int64_t no = 0, count = 0;
        if (!json_is_object(shard) || cmf__json_get_int(shard, "no", "shard", &no) != CMF_OK ||
            cmf__json_get_int(shard, "count", "shard", &count) != CMF_OK || count < 1 || no < 1 ||
            no > count || count > 99999)
            return cmf__error(CMF_ERR_PARSE, "%s: \"shard\" must be {\"no\": 1..count, \"count\": 1..99999}", what);
        sh->shard_no = (uint32_t)no;
        sh->shard_count = (uint32_t)count;
    }
    if ((sh->features & CMF_FEAT_SKILL_FILE) && !opts->allow_skill_file)
        return cmf__error(CMF_ERR_UNSUPPORTED,
                          "%s: required_features at 0xc: SKILL_FILE (bit 6) is set: a standalone skill is a partial "
                          "tensor set cut against a base model and cannot run; attach it with "
                          "`cmf skill apply BASE SKILL -o OUT.cmf`",
                          sh->path);
    return CMF_OK;
}

static void shape_str(const uint64_t *shape, int ndim, char *out, size_t cap)
{
    size_t n = 0;
    n += (size_t)snprintf(out + n, cap - n, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
    if (n < cap) snprintf(out + n, cap - n, "]");
}

/* Decodes shard `si`'s directory, appending to f->tensors (already sized). */
static cmf_status parse_dir(cmf__file *f, uint32_t si, uint64_t *n_tensors)
{
    file_priv *pv = f->name_index;
    cmf__shard *sh = &f->shards[si];
    const char *path = sh->path;
    const uint8_t *d = sh->dir.data;
    uint64_t len = sh->dir.len, base = sh->dir.off;
    if (len < 16)
        return cmf__error(CMF_ERR_BOUNDS, "%s: directory at 0x%llx: %llu bytes, the count and pool offset need 16",
                          path, (unsigned long long)base, (unsigned long long)len);
    uint64_t count = cmf__rd64(d), pool_off = cmf__rd64(d + 8), rec_bytes, rec_end;
    if (cmf__mul_overflow(count, CMF_DIR_RECORD_SIZE, &rec_bytes) || cmf__add_overflow(rec_bytes, 16, &rec_end) ||
        rec_end > len)
        return cmf__error(CMF_ERR_BOUNDS, "%s: directory at 0x%llx: %llu records of 56 bytes do not fit in %llu bytes",
                          path, (unsigned long long)base, (unsigned long long)count, (unsigned long long)len);
    if (pool_off > len)
        return cmf__error(CMF_ERR_BOUNDS, "%s: directory at 0x%llx: name pool offset %llu is past its end (%llu bytes)",
                          path, (unsigned long long)(base + 8), (unsigned long long)pool_off, (unsigned long long)len);
    /* Name copies, NUL-terminated. Names may alias inside the pool (a
     * duplicate does), so size the copy from the records, bounds first. */
    uint64_t pool_len = len - pool_off, total = 1;
    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *r = d + 16 + i * CMF_DIR_RECORD_SIZE;
        uint32_t name_off = cmf__rd32(r);
        uint16_t name_len = cmf__rd16(r + 4);
        if (!cmf__range_ok(pool_off + (uint64_t)name_off, name_len, len))
            return cmf__error(CMF_ERR_BOUNDS,
                              "%s: tensor #%llu record at 0x%llx: name [pool+%u, +%u) is outside the directory (%llu bytes, pool at %llu)",
                              path, (unsigned long long)i, (unsigned long long)(base + 16 + i * CMF_DIR_RECORD_SIZE),
                              name_off, name_len, (unsigned long long)len, (unsigned long long)pool_off);
        total += (uint64_t)name_len + 1;
    }
    /* Aliasing names could make the copy far larger than the file: cap it. */
    if (total > pool_len + count + (16u << 20))
        return cmf__error(CMF_ERR_BOUNDS, "%s: directory at 0x%llx: %llu name bytes referenced from a %llu-byte pool",
                          path, (unsigned long long)base, (unsigned long long)total, (unsigned long long)pool_len);
    char *names = malloc((size_t)total);
    if (!names) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory for %llu tensor names", path, (unsigned long long)count);
    pv->name_bufs[pv->n_name_bufs++] = names;
    uint64_t name_pos = 0;
    cmf__tensor *tv = realloc(f->tensors, (size_t)(*n_tensors + count + 1) * sizeof *tv);
    if (!tv) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory for %llu tensors", path, (unsigned long long)count);
    f->tensors = tv;
    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *r = d + 16 + i * CMF_DIR_RECORD_SIZE;
        uint64_t roff = base + 16 + i * CMF_DIR_RECORD_SIZE;
        cmf__tensor *t = &tv[*n_tensors];
        memset(t, 0, sizeof *t);
        uint32_t name_off = cmf__rd32(r);
        uint16_t name_len = cmf__rd16(r + 4);
        const uint8_t *nm = d + pool_off + name_off;
        if (name_len == 0)
            return cmf__error(CMF_ERR_PARSE, "%s: tensor #%llu record at 0x%llx: empty name", path,
                              (unsigned long long)i, (unsigned long long)roff);
        if (!cmf__fmt_utf8_ok(nm, name_len))
            return cmf__error(CMF_ERR_PARSE, "%s: tensor #%llu record at 0x%llx: name at 0x%llx is not valid UTF-8",
                              path, (unsigned long long)i, (unsigned long long)roff,
                              (unsigned long long)(base + pool_off + name_off));
        memcpy(names + name_pos, nm, name_len);
        names[name_pos + name_len] = '\0';
        t->name = names + name_pos;
        t->name_len = name_len;
        name_pos += (uint64_t)name_len + 1;
        t->dtype = r[6];
        t->ndim = r[7];
        t->off = cmf__rd64(r + 32);
        t->nbytes = cmf__rd64(r + 40);
        t->hash = cmf__rd64(r + 48);
        t->shard = si;
        t->record_off = roff;
        const cmf__dtype_info *info = cmf__dtype_get(t->dtype);
        if (!info)
            return cmf__error(CMF_ERR_DTYPE, "%s: tensor '%s' at 0x%llx: dtype %d unknown (known 0..16)", path,
                              t->name, (unsigned long long)(roff + 6), t->dtype);
        if (!info->supported)
            return cmf__error(CMF_ERR_DTYPE,
                              "%s: tensor '%s' at 0x%llx: dtype %d (%s) is reserved by the spec and not supported",
                              path, t->name, (unsigned long long)(roff + 6), t->dtype, info->name);
        if (t->ndim > CMF_MAX_NDIM)
            return cmf__error(CMF_ERR_PARSE, "%s: tensor '%s' at 0x%llx: ndim %d exceeds 6", path, t->name,
                              (unsigned long long)(roff + 7), t->ndim);
        for (int k = 0; k < CMF_MAX_NDIM; k++) {
            uint32_t dim = cmf__rd32(r + 8 + 4 * k);
            if (k >= t->ndim && dim != 0)
                return cmf__error(CMF_ERR_PARSE, "%s: tensor '%s' at 0x%llx: shape[%d] = %u past ndim %d (must be 0)",
                                  path, t->name, (unsigned long long)(roff + 8 + 4 * k), k, dim, t->ndim);
            t->shape[k] = dim;
        }
        if (t->off % CMF_TENSOR_ALIGN != 0)
            return cmf__error(CMF_ERR_ALIGN, "%s: tensor '%s' at 0x%llx: data offset %llu is not a multiple of 64",
                              path, t->name, (unsigned long long)(roff + 32), (unsigned long long)t->off);
        if (!cmf__range_ok(t->off, t->nbytes, sh->data.len))
            return cmf__error(CMF_ERR_BOUNDS,
                              "%s: tensor '%s' at 0x%llx: bytes [%llu, +%llu) exceed the data section (%llu bytes)",
                              path, t->name, (unsigned long long)(roff + 32), (unsigned long long)t->off,
                              (unsigned long long)t->nbytes, (unsigned long long)sh->data.len);
        if (info->fixed_size) {
            uint64_t want = 0;
            cmf_status st = cmf__dtype_nbytes(t->dtype, t->ndim, t->shape, &want);
            char shp[160];
            shape_str(t->shape, t->ndim, shp, sizeof shp);
            if (st == CMF_OK && want != t->nbytes)
                return cmf__error(CMF_ERR_SIZE, "%s: tensor '%s' at 0x%llx: nbytes %llu, %s %s needs %llu", path,
                                  t->name, (unsigned long long)(roff + 40), (unsigned long long)t->nbytes, info->name,
                                  shp, (unsigned long long)want);
            if (st != CMF_OK && st != CMF_ERR_UNSUPPORTED)
                return cmf__error_prefix(CMF_ERR_SIZE, "%s: tensor '%s' at 0x%llx: %s %s", path, t->name,
                                         (unsigned long long)roff, info->name, shp);
        }
        t->data = sh->data.data ? sh->data.data + t->off : sh->map.data + sh->data.off;
        (*n_tensors)++;
    }
    return CMF_OK;
}

/* ---- shard plumbing ---------------------------------------------------- */

bool cmf__shard_name_parse(const char *path, char **base, uint32_t *no, uint32_t *count)
{
    static const char tail[] = "-00000-of-00000.cmf";
    size_t n = strlen(path), t = sizeof tail - 1;
    if (n <= t) return false;
    const char *s = path + n - t;
    uint32_t a = 0, b = 0;
    for (size_t i = 0; i < t; i++) {
        if (tail[i] == '0') {
            if (s[i] < '0' || s[i] > '9') return false;
            if (i < 6) a = a * 10 + (uint32_t)(s[i] - '0');
            else b = b * 10 + (uint32_t)(s[i] - '0');
        } else if (s[i] != tail[i]) {
            return false;
        }
    }
    if (a < 1 || b < 1 || a > b) return false;
    if (base && !(*base = strndup(path, n - t))) return false;
    if (no) *no = a;
    if (count) *count = b;
    return true;
}

static char *shard_path(const char *base, uint32_t no, uint32_t count)
{
    size_t n = strlen(base) + 32;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s-%05u-of-%05u.cmf", base, no, count);
    return p;
}

static cmf_status open_shard(cmf__file *f, uint32_t si, const char *path, const cmf__open_opts *opts)
{
    cmf__shard *sh = &f->shards[si];
    if (!(sh->path = strdup(path))) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) { /* say what the folder is before "not a regular file" */
        char *cfg = cmf__path_join(path, "config.json");
        bool hf = cfg && stat(cfg, &sb) == 0 && S_ISREG(sb.st_mode);
        free(cfg);
        if (hf)
            return cmf__error(CMF_ERR_IO,
                              "%s: a Hugging Face checkpoint folder, not a .cmf file: convert it with "
                              "`cmf convert --model %s --output FILE.cmf`",
                              path, path);
        return cmf__error(CMF_ERR_IO, "%s: a folder, not a .cmf file", path);
    }
    cmf_status st = cmf__map_file(path, &sh->map);
    if (st != CMF_OK) return st;
    if ((st = check_envelope(sh)) != CMF_OK) return st;
    return parse_header(sh, opts);
}

static file_priv *priv_new(uint32_t n_shards)
{
    file_priv *pv = calloc(1, sizeof *pv);
    if (pv && !(pv->name_bufs = calloc(n_shards, sizeof *pv->name_bufs))) {
        free(pv);
        pv = NULL;
    }
    return pv;
}

/* Everything after the shards are mapped and their headers parsed. */
static cmf_status finish_open(cmf__file *f)
{
    file_priv *pv = f->name_index;
    cmf_status st;
    uint64_t n = 0;
    for (uint32_t si = 0; si < f->n_shards; si++) {
        if ((st = parse_dir(f, si, &n)) != CMF_OK) return st;
        f->features |= f->shards[si].features;
    }
    f->n_tensors = n;
    for (uint64_t i = 0; i < n; i++) {
        const cmf__tensor *t = &f->tensors[i];
        uint64_t prev = 0;
        st = cmf__nameset_put(&pv->names, t->name, t->name_len, i, &prev);
        if (st == CMF_ERR_NOMEM) return cmf__error(st, "%s: out of memory", f->path);
        if (st == CMF_ERR_DUPLICATE) {
            const cmf__tensor *p = &f->tensors[prev];
            return cmf__error(CMF_ERR_DUPLICATE,
                              "%s: tensor '%s' record at 0x%llx: duplicate name (first at 0x%llx in %s)",
                              f->shards[t->shard].path, t->name, (unsigned long long)t->record_off,
                              (unsigned long long)p->record_off, f->shards[p->shard].path);
        }
    }
    cmf__shard *s0 = &f->shards[0];
    f->header = s0->header_json;
    const json_t *arch = json_object_get(s0->header_json, "arch");
    f->arch = json_is_object(arch) ? arch : NULL;
    if (s0->masks.data) {
        char what[512];
        snprintf(what, sizeof what, "%s: masks section", s0->path);
        if ((st = cmf__masks_parse(s0->masks.data, s0->masks.len, s0->masks.off, f->arch, what, &pv->masks)) != CMF_OK)
            return st;
    }
    if (s0->index.data) {
        cmf__index_entry *e = NULL;
        uint32_t ne = 0;
        char what[512];
        snprintf(what, sizeof what, "%s: sparse index", s0->path);
        st = cmf__index_parse(s0->index.data, s0->index.len, s0->index.off, what, &e, &ne);
        free(e);
        if (st != CMF_OK) return st;
    }
    return CMF_OK;
}

static cmf_status new_file(const char *path, uint32_t n_shards, cmf__file **out)
{
    cmf__file *f = calloc(1, sizeof *f);
    if (f) {
        f->path = strdup(path);
        f->shards = calloc(n_shards, sizeof *f->shards);
        f->n_shards = n_shards;
        f->name_index = priv_new(n_shards);
    }
    if (!f || !f->path || !f->shards || !f->name_index) {
        cmf__file_free(f);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
    }
    *out = f;
    return CMF_OK;
}

static cmf_status open_set(const char *path, const char *base, uint32_t no, uint32_t count,
                           const cmf__open_opts *opts, cmf__file **out)
{
    cmf__file *f = NULL;
    cmf_status st = new_file(path, count, &f);
    if (st != CMF_OK) return st;
    for (uint32_t i = 1; i <= count; i++) {
        char *sp = shard_path(base, i, count);
        if (!sp) {
            st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
            goto fail;
        }
        if (access(sp, F_OK) != 0) {
            st = cmf__error(CMF_ERR_SHARD, "%s: shard %u of %u is missing: %s not found (opened as %s, shard %u)", path,
                            i, count, sp, path, no);
            free(sp);
            goto fail;
        }
        st = open_shard(f, i - 1, sp, opts);
        free(sp);
        if (st != CMF_OK) goto fail;
        cmf__shard *sh = &f->shards[i - 1];
        if (sh->shard_count != count || sh->shard_no != i) {
            st = cmf__error(CMF_ERR_SHARD,
                            "%s: header JSON at 0x%llx: \"shard\" says no %u of %u, the file name says %u of %u (count mismatch)",
                            sh->path, (unsigned long long)sh->header.off, sh->shard_no, sh->shard_count, i, count);
            goto fail;
        }
    }
    if ((st = finish_open(f)) != CMF_OK) goto fail;
    *out = f;
    return CMF_OK;
fail:
    cmf__file_free(f);
    return st;
}

cmf_status cmf__file_open(const char *path, const cmf__open_opts *opts, cmf__file **out)
{
    *out = NULL;
    cmf__open_opts def = cmf__open_opts_default();
    if (!opts) opts = &def;
    if (!path) return cmf__error(CMF_ERR_ARG, "cmf__file_open: no path");
    char *base = NULL;
    uint32_t no = 0, count = 0;
    if (!opts->single_shard && cmf__shard_name_parse(path, &base, &no, &count)) {
        cmf_status st = open_set(path, base, no, count, opts, out);
        free(base);
        return st;
    }
    cmf__file *f = NULL;
    cmf_status st = new_file(path, 1, &f);
    if (st != CMF_OK) return st;
    if ((st = open_shard(f, 0, path, opts)) != CMF_OK) goto fail;
    cmf__shard *sh = &f->shards[0];
    if (!opts->single_shard && sh->shard_count > 1) {
        st = cmf__error(CMF_ERR_SHARD,
                        "%s: header JSON at 0x%llx: this is shard %u of %u, but the file name does not follow "
                        "{base}-NNNNN-of-NNNNN.cmf, so its siblings cannot be found",
                        path, (unsigned long long)sh->header.off, sh->shard_no, sh->shard_count);
        goto fail;
    }
    if ((st = finish_open(f)) != CMF_OK) goto fail;
    *out = f;
    return CMF_OK;
fail:
    cmf__file_free(f);
    return st;
}

cmf_status cmf__file_open_memory(const void *data, size_t len, const char *name, const cmf__open_opts *opts,
                                 cmf__file **out)
{
    *out = NULL;
    cmf__open_opts def = cmf__open_opts_default();
    if (!opts) opts = &def;
    if (!name) name = "(memory)";
    cmf__file *f = NULL;
    cmf_status st = new_file(name, 1, &f);
    if (st != CMF_OK) return st;
    ((file_priv *)f->name_index)->borrowed = true;
    cmf__shard *sh = &f->shards[0];
    sh->map.data = len ? data : NULL;
    sh->map.size = len;
    if (len) memcpy(sh->map.head, data, len < sizeof sh->map.head ? len : sizeof sh->map.head);
    if (!(sh->path = strdup(name))) {
        st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", name);
        goto fail;
    }
    if ((st = check_envelope(sh)) != CMF_OK || (st = parse_header(sh, opts)) != CMF_OK ||
        (st = finish_open(f)) != CMF_OK)
        goto fail;
    *out = f;
    return CMF_OK;
fail:
    cmf__file_free(f);
    return st;
}

void cmf__file_free(cmf__file *f)
{
    if (!f) return;
    file_priv *pv = f->name_index;
    for (uint32_t i = 0; f->shards && i < f->n_shards; i++) {
        cmf__shard *sh = &f->shards[i];
        if (!(pv && pv->borrowed)) cmf__unmap(&sh->map);
        json_decref(sh->header_json);
        free(sh->path);
    }
    if (pv) {
        cmf__nameset_free(&pv->names);
        for (uint32_t i = 0; i < pv->n_name_bufs; i++) free(pv->name_bufs[i]);
        free(pv->name_bufs);
        cmf__masks_free(pv->masks);
        free(pv);
    }
    free(f->tensors);
    free(f->shards);
    free(f->path);
    free(f);
}

const cmf__tensor *cmf__file_find(const cmf__file *f, const char *name)
{
    uint64_t i;
    if (!f || !name) return NULL;
    const file_priv *pv = f->name_index;
    size_t n = strlen(name);
    if (n > UINT32_MAX || !cmf__nameset_get(&pv->names, name, (uint32_t)n, &i)) return NULL;
    return &f->tensors[i];
}

const cmf__section *cmf__file_vocab(const cmf__file *f) { return f->shards[0].vocab.data ? &f->shards[0].vocab : NULL; }
const cmf__section *cmf__file_masks(const cmf__file *f) { return f->shards[0].masks.data ? &f->shards[0].masks : NULL; }
const cmf__masks *cmf__file_mask_set(const cmf__file *f) { return ((const file_priv *)f->name_index)->masks; }
