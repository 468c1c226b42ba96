/* writer.c — writing a CMF v2 file (§1, §3, §4, §8.1) and shard sets (§10).
 * Payloads stream into "<path>.tmp.<pid>.blob", so memory stays bounded by
 * the largest tensor; finish shifts that blob up in place (INSERT_RANGE, no
 * copy) or copies it where the filesystem cannot, writes envelope, header
 * and directory in front, and renames: nothing half-written has the name.
 * The output passes cmf__output_check (util/file.h) at open and before the
 * rename; the blob temporary is registered for removal on SIGINT/SIGTERM. */
#include "format/format_internal.h"
#include "util/file.h"
#include "util/arith.h"
#include "util/error.h"
#include "util/hash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool cmf__fmt_no_insert_range = false;

struct cmf__writer {
    char *path;
    char *blob_path;         /* the temporary holding the data blob */
    int blob_slot;           /* its cmf__temp_register slot, -1 = none */
    FILE *blob;
    uint64_t blob_len;       /* end of the last tensor */
    json_t *header;          /* caller's object (deep copy) or NULL */
    uint8_t *sec[3];         /* masks, vocab, index copies (NULL = absent) */
    uint64_t sec_len[3];
    cmf__dir_rec *recs;
    uint64_t n_recs, cap_recs;
    cmf__nameset names;
    uint32_t features;       /* from content and add_features */
};

enum { SEC_MASKS, SEC_VOCAB, SEC_INDEX };

cmf_status cmf__writer_open(const char *path, cmf__writer **out)
{
    *out = NULL;
    cmf_status st = cmf__output_check(path, NULL, 0);
    if (st != CMF_OK) return st;
    cmf__writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
    }
    w->blob_slot = -1;
    size_t n = strlen(path) + 48;
    char *tmp = malloc(n);
    if (!tmp) {
        cmf__writer_abort(w);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, n, "%s.tmp.%ld.blob", path, (long)getpid());
    w->blob_slot = cmf__temp_register(tmp); /* before it exists: no window */
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        st = cmf__error(CMF_ERR_IO, "%s: cannot create blob temporary %s: %s", path, tmp, strerror(errno));
        free(tmp);
        cmf__writer_abort(w);
        return st;
    }
    w->blob_path = tmp;
    if (!(w->blob = fdopen(fd, "w+b"))) {
        close(fd);
        cmf__writer_abort(w);
        return cmf__error(CMF_ERR_IO, "%s: cannot open blob temporary: %s", path, strerror(errno));
    }
    w->features = CMF_FEAT_TENSOR_DIR;
    *out = w;
    return CMF_OK;
}

cmf_status cmf__writer_set_header(cmf__writer *w, json_t *header)
{
    if (!json_is_object(header)) return cmf__error(CMF_ERR_ARG, "%s: header must be a JSON object", w->path);
    json_t *copy = json_deep_copy(header);
    if (!copy) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", w->path);
    json_decref(w->header);
    w->header = copy;
    return CMF_OK;
}

static cmf_status set_section(cmf__writer *w, int i, const void *data, uint64_t len)
{
    free(w->sec[i]);
    w->sec[i] = NULL;
    w->sec_len[i] = 0;
    if (!data || !len) return CMF_OK;
    if (len > SIZE_MAX || !(w->sec[i] = malloc((size_t)len)))
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory for a %llu-byte section", w->path, (unsigned long long)len);
    memcpy(w->sec[i], data, (size_t)len);
    w->sec_len[i] = len;
    return CMF_OK;
}

cmf_status cmf__writer_set_vocab(cmf__writer *w, const void *data, uint64_t len)
{
    return set_section(w, SEC_VOCAB, data, len);
}
cmf_status cmf__writer_set_masks(cmf__writer *w, const void *data, uint64_t len)
{
    return set_section(w, SEC_MASKS, data, len);
}
cmf_status cmf__writer_set_index(cmf__writer *w, const void *data, uint64_t len)
{
    return set_section(w, SEC_INDEX, data, len);
}

cmf_status cmf__writer_add_features(cmf__writer *w, uint32_t bits)
{
    if (bits & ~CMF_FEAT_KNOWN)
        return cmf__error(CMF_ERR_FEATURE, "%s: feature bits 0x%x are not defined", w->path, bits & ~CMF_FEAT_KNOWN);
    w->features |= bits;
    return CMF_OK;
}

cmf_status cmf__writer_add_tensor(cmf__writer *w, const char *name, int dtype, int ndim, const uint64_t *shape,
                                  const void *data, uint64_t nbytes)
{
    cmf_status st = cmf__fmt_check_tensor(w->path, name, dtype, ndim, shape, nbytes);
    if (st != CMF_OK) return st;
    if (nbytes && !data) return cmf__error(CMF_ERR_ARG, "%s: tensor '%s': no data", w->path, name);
    if (w->n_recs == w->cap_recs) {
        uint64_t cap = w->cap_recs ? w->cap_recs * 2 : 64;
        cmf__dir_rec *r = realloc(w->recs, (size_t)cap * sizeof *r);
        if (!r) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", w->path);
        w->recs = r;
        w->cap_recs = cap;
    }
    cmf__dir_rec *r = &w->recs[w->n_recs];
    memset(r, 0, sizeof *r);
    char *copy = strdup(name);
    if (!copy) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", w->path);
    r->name = copy;
    r->name_len = (uint32_t)strlen(name);
    st = cmf__nameset_put(&w->names, copy, r->name_len, w->n_recs, NULL);
    if (st != CMF_OK) {
        free(copy);
        if (st == CMF_ERR_DUPLICATE) return cmf__error(st, "%s: tensor '%s' added twice", w->path, name);
        return cmf__error(st, "%s: out of memory", w->path);
    }
    r->dtype = dtype;
    r->ndim = ndim;
    for (int i = 0; i < ndim; i++) r->shape[i] = shape[i];
    uint64_t off = cmf__align_up(w->blob_len, CMF_TENSOR_ALIGN);
    static const uint8_t zeros[CMF_TENSOR_ALIGN];
    if ((st = cmf__write_all(w->blob, zeros, (size_t)(off - w->blob_len), w->path)) != CMF_OK ||
        (st = cmf__write_all(w->blob, data, (size_t)nbytes, w->path)) != CMF_OK) {
        w->n_recs++; /* keeps the name owned by recs for abort to free */
        return st;
    }
    r->off = off;
    r->nbytes = nbytes;
    r->hash = cmf__hash64(data, (size_t)nbytes);
    w->blob_len = off + nbytes;
    w->features |= cmf__fmt_dtype_features(dtype);
    w->n_recs++;
    return CMF_OK;
}

static void writer_free(cmf__writer *w)
{
    if (!w) return;
    if (w->blob) fclose(w->blob);
    if (w->blob_path) unlink(w->blob_path);
    cmf__temp_release(w->blob_slot);
    free(w->blob_path);
    json_decref(w->header);
    for (int i = 0; i < 3; i++) free(w->sec[i]);
    for (uint64_t i = 0; i < w->n_recs; i++) free((char *)w->recs[i].name);
    free(w->recs);
    cmf__nameset_free(&w->names);
    free(w->path);
    free(w);
}

void cmf__writer_abort(cmf__writer *w) { writer_free(w); }

static cmf_status write_zeros(FILE *fp, uint64_t n, const char *what)
{
    static const uint8_t z[4096];
    while (n) {
        size_t k = n > sizeof z ? sizeof z : (size_t)n;
        cmf_status st = cmf__write_all(fp, z, k, what);
        if (st != CMF_OK) return st;
        n -= k;
    }
    return CMF_OK;
}

/* Turns the blob temporary into the output without copying the payloads:
 * INSERT_RANGE shifts the blob up by data_off (a multiple of 4096, so of
 * the block size), and the front and the trailing sections are written
 * around it. CMF_ERR_UNSUPPORTED (no message) when the filesystem cannot:
 * the blob is then untouched and the caller copies. */
static cmf_status finish_in_place(cmf__writer *w, const cmf__envelope *e, const uint8_t *env, const char *hdr,
                                  const cmf__buf *dir)
{
#ifdef FALLOC_FL_INSERT_RANGE
    if (cmf__fmt_no_insert_range || w->blob_len == 0) return CMF_ERR_UNSUPPORTED;
    int fd = fileno(w->blob);
    if (fallocate(fd, FALLOC_FL_INSERT_RANGE, 0, (off_t)e->data_off) != 0) return CMF_ERR_UNSUPPORTED;
    uint8_t *front = calloc(1, (size_t)e->data_off);
    if (!front) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", w->path);
    memcpy(front, env, CMF_ENVELOPE_SIZE);
    memcpy(front + e->header_off, hdr, (size_t)e->header_len);
    memcpy(front + e->dir_off, dir->data, dir->len);
    cmf_status st = cmf__pwrite_all(fd, front, e->data_off, 0, w->blob_path);
    free(front);
    const uint64_t offs[3] = {e->masks_off, e->vocab_off, e->index_off};
    for (int i = 0; st == CMF_OK && i < 3; i++) {
        if (!w->sec[i]) continue;
        /* The padding before each section is a hole past the old end: zeros. */
        st = cmf__pwrite_all(fd, w->sec[i], w->sec_len[i], offs[i], w->blob_path);
    }
    if (st != CMF_OK) return st;
    if (fsync(fd) != 0) return cmf__error(CMF_ERR_IO, "%s: fsync failed: %s", w->blob_path, strerror(errno));
    if ((st = cmf__output_check(w->path, NULL, 0)) != CMF_OK) return st; /* changed while we wrote? */
    if (rename(w->blob_path, w->path) != 0)
        return cmf__error(CMF_ERR_IO, "%s: cannot rename into place: %s", w->path, strerror(errno));
    free(w->blob_path); /* renamed: nothing to remove */
    w->blob_path = NULL;
    cmf__temp_release(w->blob_slot);
    w->blob_slot = -1;
    return CMF_OK;
#else
    (void)w, (void)e, (void)env, (void)hdr, (void)dir;
    return CMF_ERR_UNSUPPORTED;
#endif
}

cmf_status cmf__writer_finish(cmf__writer *w)
{
    cmf_status st;
    cmf__buf dir = {0};
    char *hdr = NULL;
    json_t *header = NULL;
    uint8_t *chunk = NULL;
    cmf__atomic_file af = {0};

    header = cmf__fmt_build_header(w->header, w->sec[SEC_MASKS], w->sec_len[SEC_MASKS], w->sec[SEC_VOCAB],
                                   w->sec_len[SEC_VOCAB], w->sec[SEC_INDEX], w->sec_len[SEC_INDEX]);
    if (!header || !(hdr = cmf__json_dump(header))) {
        st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory building the header", w->path);
        goto done;
    }
    if ((st = cmf__fmt_encode_dir(w->recs, w->n_recs, &dir)) != CMF_OK) goto done;
    uint32_t features = w->features | cmf__fmt_header_features(header);
    if (w->sec[SEC_MASKS]) features |= CMF_FEAT_BINARY_MASKS;

    cmf__envelope e = {0};
    e.features = features;
    e.header_off = CMF_ENVELOPE_SIZE;
    e.header_len = strlen(hdr);
    e.dir_off = e.header_off + e.header_len;
    e.dir_len = dir.len;
    e.data_off = cmf__align_up(e.dir_off + e.dir_len, CMF_DATA_ALIGN);
    e.data_len = w->blob_len;
    uint64_t end = e.data_off + e.data_len;
    uint64_t *offs[3] = {&e.masks_off, &e.vocab_off, &e.index_off};
    uint64_t *lens[3] = {&e.masks_len, &e.vocab_len, &e.index_len};
    uint64_t pads[3] = {0};
    for (int i = 0; i < 3; i++) {
        if (!w->sec[i]) continue;
        uint64_t at = cmf__align_up(end, 8);
        pads[i] = at - end;
        *offs[i] = at;
        *lens[i] = w->sec_len[i];
        end = at + w->sec_len[i];
    }
    e.header_hash = cmf__hash64(hdr, (size_t)e.header_len);
    e.dir_hash = cmf__hash64(dir.data, dir.len);
    uint8_t env[CMF_ENVELOPE_SIZE];
    cmf__fmt_encode_envelope(&e, env);

    if (fflush(w->blob) != 0) {
        st = cmf__error(CMF_ERR_IO, "%s: blob temporary: %s", w->blob_path, strerror(errno));
        goto done;
    }
    if ((st = finish_in_place(w, &e, env, hdr, &dir)) != CMF_ERR_UNSUPPORTED) goto done;
    if ((st = cmf__atomic_open(&af, w->path)) != CMF_OK) goto done;
    if ((st = cmf__write_all(af.fp, env, sizeof env, w->path)) ||
        (st = cmf__write_all(af.fp, hdr, (size_t)e.header_len, w->path)) ||
        (st = cmf__write_all(af.fp, dir.data, dir.len, w->path)) ||
        (st = write_zeros(af.fp, e.data_off - (e.dir_off + e.dir_len), w->path)))
        goto done;
    /* Copy the blob. */
    if (fseek(w->blob, 0, SEEK_SET) != 0) {
        st = cmf__error(CMF_ERR_IO, "%s: blob temporary: %s", w->path, strerror(errno));
        goto done;
    }
    size_t csz = 1 << 20;
    if (!(chunk = malloc(csz))) {
        st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", w->path);
        goto done;
    }
    for (uint64_t left = w->blob_len; left;) {
        size_t k = left > csz ? csz : (size_t)left;
        if (fread(chunk, 1, k, w->blob) != k) {
            st = cmf__error(CMF_ERR_IO, "%s: reading back the blob temporary failed", w->path);
            goto done;
        }
        if ((st = cmf__write_all(af.fp, chunk, k, w->path)) != CMF_OK) goto done;
        left -= k;
    }
    for (int i = 0; i < 3; i++) {
        if (!w->sec[i]) continue;
        if ((st = write_zeros(af.fp, pads[i], w->path)) ||
            (st = cmf__write_all(af.fp, w->sec[i], (size_t)w->sec_len[i], w->path)))
            goto done;
    }
    st = cmf__atomic_commit(&af);
done:
    if (af.tmp_path) cmf__atomic_abort(&af);
    free(chunk);
    free(hdr);
    json_decref(header);
    cmf__buf_free(&dir);
    writer_free(w);
    return st;
}

/* ---- shard sets -------------------------------------------------------- */

cmf_status cmf__write_sharded(const char *base, const json_t *header, const cmf__append_tensor *tensors, size_t n,
                              const void *vocab, uint64_t vocab_len, const void *masks, uint64_t masks_len,
                              uint64_t max_shard_bytes, uint32_t *n_shards)
{
    /* Names must be unique across the whole set, not only per shard. */
    cmf__nameset seen = {0};
    for (size_t i = 0; i < n; i++) {
        const char *nm = tensors[i].name ? tensors[i].name : "";
        cmf_status st = cmf__nameset_put(&seen, nm, (uint32_t)strlen(nm), i, NULL);
        if (st != CMF_OK) {
            cmf__nameset_free(&seen);
            if (st == CMF_ERR_DUPLICATE) return cmf__error(st, "%s: tensor '%s' given twice", base, nm);
            return cmf__error(st, "%s: out of memory", base);
        }
    }
    cmf__nameset_free(&seen);
    /* Greedy split in order: a shard closes when the next tensor would pass the threshold. */
    size_t *first = calloc(n + 2, sizeof *first);
    if (!first) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", base);
    uint32_t count = 0;
    uint64_t cur = 0;
    first[0] = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > first[count] && cur + tensors[i].nbytes > max_shard_bytes) {
            first[++count] = i;
            cur = 0;
        }
        cur += tensors[i].nbytes;
    }
    first[++count] = n;
    if (count > 99999) {
        free(first);
        return cmf__error(CMF_ERR_ARG, "%s: %u shards exceed the 99999 the naming allows", base, count);
    }
    cmf_status st = CMF_OK;
    size_t plen = strlen(base) + 32;
    char *path = malloc(plen);
    if (!path) st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", base);
    for (uint32_t s = 0; st == CMF_OK && s < count; s++) {
        snprintf(path, plen, "%s-%05u-of-%05u.cmf", base, s + 1, count);
        json_t *h = header ? json_deep_copy(header) : json_object();
        json_t *shard = json_pack("{s:I, s:I}", "no", (json_int_t)(s + 1), "count", (json_int_t)count);
        if (!h || !shard || json_object_set_new(h, "shard", shard)) {
            json_decref(h);
            st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        if (s > 0) {
            json_object_set_new(h, "tokenizer_config", json_null());
            json_object_del(h, "skills");
        }
        cmf__writer *w = NULL;
        if ((st = cmf__writer_open(path, &w)) == CMF_OK) {
            st = cmf__writer_set_header(w, h);
            if (st == CMF_OK && s == 0) {
                if ((st = cmf__writer_set_vocab(w, vocab, vocab_len)) == CMF_OK)
                    st = cmf__writer_set_masks(w, masks, masks_len);
            }
            for (size_t i = first[s]; st == CMF_OK && i < first[s + 1]; i++) {
                const cmf__append_tensor *t = &tensors[i];
                st = cmf__writer_add_tensor(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes);
            }
            if (st == CMF_OK) st = cmf__writer_finish(w);
            else cmf__writer_abort(w);
        }
        json_decref(h);
    }
    free(path);
    free(first);
    if (st == CMF_OK && n_shards) *n_shards = count;
    return st;
}
