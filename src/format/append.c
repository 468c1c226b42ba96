/* append.c — append-only growth (§9) and compaction. Append writes new
 * payloads, a new header and directory at the tail, fsyncs, and only then
 * rewrites the 128-byte envelope in place: no other existing byte changes,
 * and a crash before the envelope write leaves the old file intact (a
 * failure there also cuts the partial tail off again). A dropped directory
 * entry's payload stays, dead, until compaction.
 * Compact rewrites the live content tightly through the writer.
 * Append holds the file's exclusive lock (cmf__lock_file) from the open to
 * the envelope write, refuses a file whose header, directory or sections
 * do not match their hashes (it would re-hash them), and while the tail is
 * written a SIGINT/SIGTERM/SIGHUP truncates it off again before the
 * process dies; those signals are held back during the envelope write. */
#include "format/format_internal.h"
#include "util/file.h"
#include "util/arith.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes the tail (padding, payloads, header, directory), fsyncs, then the
 * envelope, under `lk`; a failure or a signal before the envelope cuts the
 * tail off again. */
static cmf_status write_tail(const char *path, const cmf__lock *lk, uint64_t old_size,
                             const cmf__append_tensor *tensors, size_t n, const uint64_t *new_pos, const char *hdr,
                             const cmf__envelope *e, const cmf__buf *dir, const uint8_t *env)
{
    cmf_status st = CMF_OK;
    int fd = -1, tail_slot = -1;
    bool tail_written = false; /* bytes past the old end, envelope not yet rewritten */
    if ((fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK)) < 0)
        return cmf__error(CMF_ERR_IO, "%s: cannot open for append: %s", path, strerror(errno));
    struct stat fs;
    if (!cmf__lock_covers(lk, fd) || fstat(fd, &fs) != 0 || (uint64_t)fs.st_size != old_size) {
        close(fd);
        return cmf__error(CMF_ERR_IO, "%s: the file changed under its lock (replaced or resized); not appending", path);
    }
    /* Zero padding, then payloads, then header and directory; envelope last. */
    static const uint8_t zeros[CMF_TENSOR_ALIGN];
    tail_written = true;
    tail_slot = cmf__tail_register(fd, old_size);
    uint64_t at = old_size;
    for (size_t k = 0; k < n; k++) {
        if ((st = cmf__pwrite_all(fd, zeros, new_pos[k] - at, at, path)) ||
            (st = cmf__pwrite_all(fd, tensors[k].data, tensors[k].nbytes, new_pos[k], path)))
            goto done;
        at = new_pos[k] + tensors[k].nbytes;
    }
    if ((st = cmf__pwrite_all(fd, hdr, e->header_len, e->header_off, path)) ||
        (st = cmf__pwrite_all(fd, dir->data, dir->len, e->dir_off, path)))
        goto done;
    if (fsync(fd) != 0) {
        st = cmf__error(CMF_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
        goto done;
    }
    /* The envelope makes the tail live: a signal now must neither cut the
     * tail off under a new envelope nor stop between the two. */
    sigset_t hold, old_mask;
    sigemptyset(&hold);
    sigaddset(&hold, SIGINT);
    sigaddset(&hold, SIGTERM);
    sigaddset(&hold, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &hold, &old_mask);
    cmf__tail_release(tail_slot);
    tail_slot = -1;
    tail_written = false;
    st = cmf__pwrite_all(fd, env, CMF_ENVELOPE_SIZE, 0, path);
    if (st == CMF_OK && fsync(fd) != 0) st = cmf__error(CMF_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
done:
    cmf__tail_release(tail_slot);
    /* a failure before the envelope: the old envelope still describes the
     * file; give back the partial tail (best effort: it is dead bytes) */
    if (st && tail_written && ftruncate(fd, (off_t)old_size) != 0)
        CMF_WARN("%s: could not cut the unused tail of a failed append: %s", path, strerror(errno));
    close(fd);
    return st;
}

cmf_status cmf__file_append(const char *path, const cmf__append_tensor *tensors, size_t n, json_t *new_header)
{
    return cmf__file_append_drop(path, tensors, n, new_header, NULL, NULL);
}

cmf_status cmf__file_append_drop(const char *path, const cmf__append_tensor *tensors, size_t n, json_t *new_header,
                                 bool (*drop)(void *ctx, const char *name), void *drop_ctx)
{
    cmf__open_opts o = cmf__open_opts_default();
    o.single_shard = true;
    o.allow_skill_file = true;
    cmf__file *f = NULL;
    cmf__lock lk;
    cmf_status st = cmf__lock_file(path, &lk);
    if (st != CMF_OK) return st;
    if ((st = cmf__file_open(path, &o, &f)) != CMF_OK) {
        cmf__unlock_file(&lk);
        return st;
    }
    cmf__nameset names = {0};
    cmf__dir_rec *recs = NULL;
    cmf__buf dir = {0};
    json_t *header = NULL;
    char *hdr = NULL;
    uint64_t *new_pos = NULL;
    const cmf__shard *sh = &f->shards[0];
    uint64_t n_old = f->n_tensors, n_all = n_old + n;

    if (sh->data.off == 0) {
        st = cmf__error(CMF_ERR_UNSUPPORTED,
                        "%s: envelope field 0x30: no data section to grow (offset 0); rewrite the file instead", path);
        goto done;
    }
    /* The new header and directory get fresh hashes: never over bytes
     * that do not match the old ones (payload hashes are carried as they
     * are, so a corrupt payload stays visible to cmf verify). */
    if ((st = cmf__file_verify_meta(f)) != CMF_OK) {
        if (st == CMF_ERR_HASH)
            cmf__error_prefix(st, "%s: not rewriting the header of a corrupt file (cmf verify lists every problem)",
                              path);
        goto done;
    }
    if (new_header && !json_is_object(new_header)) {
        st = cmf__error(CMF_ERR_ARG, "%s: new header must be a JSON object", path);
        goto done;
    }
    recs = calloc((size_t)n_all + 1, sizeof *recs);
    new_pos = calloc(n + 1, sizeof *new_pos);
    if (!recs || !new_pos) {
        st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    uint32_t features = sh->features;
    uint64_t n_kept = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const cmf__tensor *t = &f->tensors[i];
        if (drop && drop(drop_ctx, t->name)) continue;
        uint64_t k = n_kept++;
        cmf__dir_rec *r = &recs[k];
        r->name = t->name;
        r->name_len = t->name_len;
        r->dtype = t->dtype;
        r->ndim = t->ndim;
        memcpy(r->shape, t->shape, sizeof r->shape);
        r->off = t->off;
        r->nbytes = t->nbytes;
        r->hash = t->hash;
        cmf__nameset_put(&names, t->name, t->name_len, k, NULL); /* names are unique: open checked */
    }
    n_old = n_kept;
    n_all = n_old + n;
    /* New payloads go past the old end of file, 64-aligned in the data range. */
    uint64_t pos = sh->map.size, data_end = sh->data.off + sh->data.len;
    for (size_t k = 0; k < n; k++) {
        const cmf__append_tensor *t = &tensors[k];
        if ((st = cmf__fmt_check_tensor(path, t->name, t->dtype, t->ndim, t->shape, t->nbytes)) != CMF_OK) goto done;
        if (t->nbytes && !t->data) {
            st = cmf__error(CMF_ERR_ARG, "%s: tensor '%s': no data", path, t->name);
            goto done;
        }
        cmf__dir_rec *r = &recs[n_old + k];
        r->name = t->name;
        r->name_len = (uint32_t)strlen(t->name);
        st = cmf__nameset_put(&names, r->name, r->name_len, n_old + k, NULL);
        if (st == CMF_ERR_DUPLICATE) {
            st = cmf__error(st, "%s: tensor '%s' already exists; append never replaces a tensor", path, t->name);
            goto done;
        }
        if (st != CMF_OK) {
            st = cmf__error(st, "%s: out of memory", path);
            goto done;
        }
        r->dtype = t->dtype;
        r->ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) r->shape[d] = t->shape[d];
        pos = cmf__align_up(pos, CMF_TENSOR_ALIGN);
        new_pos[k] = pos;
        r->off = pos - sh->data.off;
        r->nbytes = t->nbytes;
        r->hash = cmf__hash64(t->data, (size_t)t->nbytes);
        pos += t->nbytes;
        if (pos > data_end) data_end = pos;
        features |= cmf__fmt_dtype_features(t->dtype);
    }
    header = cmf__fmt_build_header(new_header ? new_header : sh->header_json, sh->masks.data, sh->masks.len,
                                   sh->vocab.data, sh->vocab.len, sh->index.data, sh->index.len);
    if (!header || !(hdr = cmf__json_dump(header))) {
        st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory building the header", path);
        goto done;
    }
    features |= cmf__fmt_header_features(header);
    if ((st = cmf__fmt_encode_dir(recs, n_all, &dir)) != CMF_OK) goto done;

    cmf__envelope e = {0};
    e.features = features;
    e.header_off = pos;
    e.header_len = strlen(hdr);
    e.dir_off = e.header_off + e.header_len;
    e.dir_len = dir.len;
    e.data_off = sh->data.off;
    e.data_len = data_end - sh->data.off;
    e.masks_off = sh->masks.off;
    e.masks_len = sh->masks.len;
    e.vocab_off = sh->vocab.off;
    e.vocab_len = sh->vocab.len;
    e.index_off = sh->index.off;
    e.index_len = sh->index.len;
    e.header_hash = cmf__hash64(hdr, (size_t)e.header_len);
    e.dir_hash = cmf__hash64(dir.data, dir.len);
    uint8_t env[CMF_ENVELOPE_SIZE];
    cmf__fmt_encode_envelope(&e, env);
    uint64_t old_size = sh->map.size;

    st = write_tail(path, &lk, old_size, tensors, n, new_pos, hdr, &e, &dir, env);
done:
    free(hdr);
    json_decref(header);
    cmf__buf_free(&dir);
    free(new_pos);
    free(recs);
    cmf__nameset_free(&names);
    cmf__file_free(f);
    cmf__unlock_file(&lk);
    return st;
}

cmf_status cmf__file_compact(const char *in, const char *out)
{
    cmf__open_opts o = cmf__open_opts_default();
    o.single_shard = true;
    o.allow_skill_file = true;
    cmf__file *f = NULL;
    cmf_status st = cmf__file_open(in, &o, &f);
    if (st != CMF_OK) return st;
    const cmf__shard *sh = &f->shards[0];
    cmf__writer *w = NULL;
    if ((st = cmf__output_check(out, &in, 1)) != CMF_OK) goto done;
    /* The writer recomputes every hash: refuse to launder a corrupt
     * payload or section into a file that verifies. */
    if ((st = cmf__file_verify(f, NULL, NULL, NULL, NULL)) != CMF_OK) {
        if (st == CMF_ERR_HASH)
            cmf__error_prefix(st, "%s: not compacting a corrupt file (cmf verify lists every problem)", in);
        goto done;
    }
    if ((st = cmf__writer_open(out, &w)) != CMF_OK) goto done;
    if ((st = cmf__writer_set_header(w, sh->header_json)) || (st = cmf__writer_set_vocab(w, sh->vocab.data, sh->vocab.len)) ||
        (st = cmf__writer_set_masks(w, sh->masks.data, sh->masks.len)) ||
        (st = cmf__writer_set_index(w, sh->index.data, sh->index.len)) ||
        (st = cmf__writer_add_features(w, sh->features & CMF_FEAT_LOOP_MASKS)))
        goto abort;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const cmf__tensor *t = &f->tensors[i];
        if ((st = cmf__writer_add_tensor(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes)) != CMF_OK)
            goto abort;
    }
    st = cmf__writer_finish(w);
    goto done;
abort:
    cmf__writer_abort(w);
done:
    cmf__file_free(f);
    return st;
}
