/* requant.c — re-encode every tensor of a .cmf under a new quantization
 * policy: decode to f32 row by row (cmf__qmat_decode_row), quantize again,
 * stream into a new file. Header (quant_type and provenance updated), vocab,
 * masks and index sections are kept. A tensor whose dtype does not change
 * is copied byte for byte, so requant never compounds error needlessly.
 * The source's hash chain is verified first: re-encoding a corrupt file
 * would give it a fresh, valid chain (opts.force goes on, and says so in
 * the header's provenance). */
#include "convert/convert.h"
#include "convert/convert_internal.h"
#include "format/format.h"
#include "quant/quant.h"
#include "util/buf.h"
#include "util/error.h"
#include "util/file.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Drops a tensor's pages of the input mapping from the resident set after
 * use (they stay in the page cache), so RSS stays bounded by one tensor.
 * Only whole pages inside the tensor are dropped. */
static void release(const cmf__tensor *t)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t beg = ((uintptr_t)t->data + page - 1) / page * page, end = ((uintptr_t)t->data + t->nbytes) / page * page;
    if (t->data && end > beg) madvise((void *)beg, end - beg, MADV_DONTNEED);
}

static const char *dtname(int d)
{
    const cmf__dtype_info *i = cmf__dtype_get(d);
    return i ? i->name : "?";
}

cmf_status cmf__requant(const char *in, const char *out_path, const cmf__convert_opts *opts_in,
                        cmf__convert_result *result)
{
    cmf__convert_opts opts = opts_in ? *opts_in : cmf__convert_opts_default();
    if (result) memset(result, 0, sizeof *result);
    cmf_status st = cmf__convert_check_opts(&opts);
    if (st) return st;
    cmf__file *f = NULL;
    cmf__writer *w = NULL;
    json_t *header = NULL;
    cmf__buf enc = {0};
    float *vals = NULL;
    char *unverified = NULL; /* the verify failure opts.force went past */
    uint64_t total = 0, done = 0, payload = 0;
    if ((st = cmf__file_open(in, NULL, &f))) return st;
    for (uint32_t i = 0; !opts.dry_run && i < f->n_shards; i++) {
        const char *src = f->shards[i].path;
        if ((st = cmf__output_check(out_path, &src, 1))) goto done;
    }
    if (!opts.dry_run && (st = cmf__file_verify(f, NULL, NULL, NULL, NULL))) {
        if (st != CMF_ERR_HASH || !opts.force) {
            if (st == CMF_ERR_HASH)
                cmf__error_prefix(st, "%s: not requantizing a file that fails verification (cmf verify lists "
                                      "every problem; --force re-encodes it anyway)",
                                  in);
            goto done;
        }
        if (!(unverified = strdup(cmf_last_error()))) {
            st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", in);
            goto done;
        }
        if (result) result->source_unverified = true;
        st = CMF_OK;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) total += f->tensors[i].nbytes;
    header = f->header ? json_deep_copy(f->header) : json_object();
    json_object_del(header, "section_hashes");
    json_object_del(header, "format");
    json_object_del(header, "version");
    char qt[16];
    cmf__convert_quant_type_name(opts.quant, qt);
    json_object_set_new(header, "quant_type", json_string(qt));
    json_t *prov = json_object_get(header, "provenance");
    if (!json_is_object(prov)) {
        prov = json_object();
        json_object_set_new(header, "provenance", prov);
    }
    json_t *rq = json_object();
    json_object_set_new(rq, "tool", json_string("cmf " CMF_VERSION_STRING));
    json_object_set_new(rq, "default", json_string(dtname(opts.quant)));
    if (opts.quant_attn >= 0) json_object_set_new(rq, "attn", json_string(dtname(opts.quant_attn)));
    if (opts.quant_ffn >= 0) json_object_set_new(rq, "ffn", json_string(dtname(opts.quant_ffn)));
    if (opts.quant_embed >= 0) json_object_set_new(rq, "embed", json_string(dtname(opts.quant_embed)));
    if (unverified) json_object_set_new(rq, "unverified_source", json_string(unverified));
    json_object_set_new(prov, "requant", rq);

    if (opts.plan_out || opts.dry_run) {
        for (uint64_t i = 0; i < f->n_tensors; i++) {
            const cmf__tensor *t = &f->tensors[i];
            int d = cmf__convert_pick_dtype(&opts, t->name, t->ndim, t->shape);
            uint64_t nb = t->nbytes;
            if (d != t->dtype && (st = cmf__dtype_nbytes(d, t->ndim, t->shape, &nb))) {
                cmf__error_prefix(st, "%s: tensor '%s'", in, t->name);
                goto done;
            }
            payload += nb;
            if (opts.plan_out)
                fprintf(opts.plan_out, "%-60s %-8s -> %-8s %12" PRIu64 "\n", t->name, dtname(t->dtype), dtname(d), nb);
        }
        if (opts.plan_out)
            fprintf(opts.plan_out, "total: %" PRIu64 " tensors, %" PRIu64 " payload bytes\n", f->n_tensors, payload);
        if (result) result->n_tensors = f->n_tensors, result->payload_bytes = payload;
        if (opts.dry_run) goto done;
        payload = 0;
    }

    if ((st = cmf__writer_open(out_path, &w))) goto done;
    if ((st = cmf__writer_set_header(w, header))) goto done;
    /* feature bits the content alone does not imply (loop masks, skill file) */
    if ((st = cmf__writer_add_features(w, f->features & (CMF_FEAT_LOOP_MASKS | CMF_FEAT_SKILL_FILE)))) goto done;
    const cmf__shard *s0 = &f->shards[0];
    if (s0->vocab.data && (st = cmf__writer_set_vocab(w, s0->vocab.data, s0->vocab.len))) goto done;
    if (s0->masks.data && (st = cmf__writer_set_masks(w, s0->masks.data, s0->masks.len))) goto done;
    if (s0->index.data && (st = cmf__writer_set_index(w, s0->index.data, s0->index.len))) goto done;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const cmf__tensor *t = &f->tensors[i];
        int d = cmf__convert_pick_dtype(&opts, t->name, t->ndim, t->shape);
        const void *data = t->data;
        uint64_t nb = t->nbytes;
        if (d != t->dtype) {
            cmf__qmat q;
            if ((st = cmf__qmat_init(&q, t->dtype, t->data, t->nbytes, t->ndim, t->shape, t->name))) {
                cmf__error_prefix(st, "%s", in); /* "IN: tensor 'name': ..." */
                goto done;
            }
            uint64_t n = (uint64_t)q.rows * (uint64_t)q.cols;
            float *nv = realloc(vals, (n ? n : 1) * sizeof *nv);
            if (!nv) {
                cmf__qmat_free(&q);
                st = cmf__error(CMF_ERR_NOMEM, "%s: tensor '%s': out of memory", in, t->name);
                goto done;
            }
            vals = nv;
            for (int64_t r = 0; r < q.rows; r++) cmf__qmat_decode_row(&q, r, vals + (uint64_t)r * (uint64_t)q.cols);
            int64_t rows = q.rows, cols = q.cols;
            cmf__qmat_free(&q);
            enc.len = 0;
            cmf__quant_opts qo = cmf__quant_opts_default();
            if ((st = cmf__quantize(d, vals, rows, cols, &qo, &enc, t->name))) goto done;
            data = enc.data;
            nb = enc.len;
        }
        if ((st = cmf__writer_add_tensor(w, t->name, d, t->ndim, t->shape, data, nb))) goto done;
        release(t);
        payload += nb;
        done += t->nbytes;
        if (opts.progress) opts.progress(opts.progress_ctx, done, total);
    }
    st = cmf__writer_finish(w);
    w = NULL;
    if (!st && result) {
        result->n_tensors = f->n_tensors;
        result->payload_bytes = payload;
        struct stat sb;
        if (stat(out_path, &sb) == 0) result->file_bytes = (uint64_t)sb.st_size;
    }
done:
    if (w) cmf__writer_abort(w);
    free(unverified);
    cmf__buf_free(&enc);
    free(vals);
    json_decref(header);
    cmf__file_free(f);
    return st;
}
