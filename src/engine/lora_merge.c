/* lora_merge.c — `cmf lora merge`: writes a .cmf whose projections carry
 * LoRA adapters merged in, W' = W + sum_i s_i B_i A_i, for users who want
 * no run-time cost. A merged tensor is decoded to f32, summed in double
 * per element, and encoded back in its own dtype (exact for f32; a
 * quantized tensor is requantized, adding that dtype's error once); every
 * other tensor (skills' replacements included: an adapter is cut against
 * the backbone), the header and the sections are copied as they are. */
#include "engine/lora.h"
#include "format/format.h"
#include "util/buf.h"
#include "util/error.h"
#include "util/file.h"
#include "util/json.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Adds the adapters' terms for tensor `name` ([rows][cols] f32 in w); false
 * when a merged weight is not a finite 32-bit float (*bad: its index). */
static bool add_terms(cmf__lora *const *lo, const float *scale, int n, const char *name, float *w, int64_t rows,
                      int64_t cols, int64_t *bad)
{
    for (int i = 0; i < n; i++) {
        const cmf__lora_entry *en = cmf__lora_find(lo[i], name);
        if (!en) continue;
        const double s = lo[i]->scale * (double)scale[i];
        for (int64_t o = 0; o < rows; o++)
            for (int64_t c = 0; c < cols; c++) {
                double d = 0;
                for (int64_t r = 0; r < en->rank; r++) d += (double)en->b[o * en->rank + r] * en->a[r * cols + c];
                double v = (double)w[o * cols + c] + s * d;
                if (!(fabs(v) <= FLT_MAX)) {
                    *bad = o * cols + c;
                    return false;
                }
                w[o * cols + c] = (float)v;
            }
    }
    return true;
}

cmf_status cmf__lora_merge(const char *in, const char *const *paths, const float *scale, int n, const char *out)
{
    if (n < 1 || n > CMF__LORA_MAX) return cmf__error(CMF_ERR_ARG, "lora merge: %d adapters (1..%d)", n, CMF__LORA_MAX);
    /* inputs: the model, each adapter and its adapter_config.json */
    const char *inputs[2 * CMF__LORA_MAX + 1] = {in};
    char *cfgs[CMF__LORA_MAX] = {0};
    cmf_status st = CMF_OK;
    for (int i = 0; i < n && !st; i++) {
        inputs[1 + 2 * i] = paths[i];
        if (!(inputs[2 + 2 * i] = cfgs[i] = cmf__lora_config_path(paths[i])))
            st = cmf__error(CMF_ERR_NOMEM, "out of memory");
        else if (!isfinite(scale[i]))
            st = cmf__error(CMF_ERR_ARG, "lora merge: adapter %s: the scale is not finite", paths[i]);
    }
    if (!st) st = cmf__output_check(out, inputs, 2 * (size_t)n + 1);
    for (int i = 0; i < n; i++) free(cfgs[i]);
    if (st) return st;
    cmf__model *m = NULL;
    cmf__lora *lo[CMF__LORA_MAX] = {0};
    cmf__writer *w = NULL;
    json_t *header = NULL;
    float *vals = NULL;
    cmf__buf enc = {0};
    if ((st = cmf__model_open(in, &m))) return st;
    for (int i = 0; i < n && !st; i++) st = cmf__lora_open(m, paths[i], &lo[i]);
    for (int i = 0; i < n && !st; i++)
        if (!(fabs(lo[i]->scale * (double)scale[i]) <= FLT_MAX))
            st = cmf__error(CMF_ERR_ARG, "%s: LoRA scale %g x lora_alpha / r %g is not a finite 32-bit float",
                            paths[i], (double)scale[i], lo[i]->scale);
    if (st) goto done;
    const cmf__file *f = m->file;
    /* the writer re-hashes every tensor it copies: the source must verify */
    if ((st = cmf__file_verify(f, NULL, NULL, NULL, NULL))) {
        if (st == CMF_ERR_HASH)
            cmf__error_prefix(st, "%s: not merging into a file that fails verification (cmf verify lists every "
                                  "problem)",
                              in);
        goto done;
    }
    header = json_deep_copy(f->header);
    if (!header) {
        st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", in);
        goto done;
    }
    json_object_del(header, "section_hashes");
    json_object_del(header, "format");
    json_object_del(header, "version");
    json_t *prov = json_object_get(header, "provenance");
    if (!json_is_object(prov)) {
        prov = json_object();
        json_object_set_new(header, "provenance", prov);
    }
    json_t *list = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(list, json_pack("{s:s, s:f, s:f}", "adapter", paths[i], "scale", (double)scale[i],
                                              "alpha_over_r", lo[i]->scale));
    json_object_set_new(prov, "lora_merge", list);
    if ((st = cmf__writer_open(out, &w)) || (st = cmf__writer_set_header(w, header)) ||
        (st = cmf__writer_add_features(w, f->features & (CMF_FEAT_LOOP_MASKS | CMF_FEAT_SKILL_FILE))))
        goto done;
    const cmf__shard *s0 = &f->shards[0];
    if ((s0->vocab.data && (st = cmf__writer_set_vocab(w, s0->vocab.data, s0->vocab.len))) ||
        (s0->masks.data && (st = cmf__writer_set_masks(w, s0->masks.data, s0->masks.len))) ||
        (s0->index.data && (st = cmf__writer_set_index(w, s0->index.data, s0->index.len))))
        goto done;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const cmf__tensor *t = &f->tensors[i];
        const void *data = t->data;
        uint64_t nb = t->nbytes;
        bool targeted = false;
        for (int k = 0; k < n && !targeted; k++) targeted = cmf__lora_find(lo[k], t->name) != NULL;
        if (targeted) {
            cmf__qmat q;
            if ((st = cmf__qmat_init(&q, t->dtype, t->data, t->nbytes, t->ndim, t->shape, t->name))) {
                cmf__error_prefix(st, "%s", in);
                goto done;
            }
            float *nv = realloc(vals, (size_t)(q.rows * q.cols) * sizeof *nv + 1);
            if (!nv) {
                cmf__qmat_free(&q);
                st = cmf__error(CMF_ERR_NOMEM, "%s: tensor '%s': out of memory", in, t->name);
                goto done;
            }
            vals = nv;
            for (int64_t r = 0; r < q.rows; r++) cmf__qmat_decode_row(&q, r, vals + r * q.cols);
            int64_t rows = q.rows, cols = q.cols;
            cmf__qmat_free(&q);
            int64_t bad = 0;
            if (!add_terms(lo, scale, n, t->name, vals, rows, cols, &bad)) {
                st = cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s': merged weight [%lld, %lld] is not a finite 32-bit "
                                               "float (the adapters' scale is too large)",
                                in, t->name, (long long)(bad / cols), (long long)(bad % cols));
                goto done;
            }
            enc.len = 0;
            cmf__quant_opts qo = cmf__quant_opts_default();
            if ((st = cmf__quantize(t->dtype, vals, rows, cols, &qo, &enc, t->name))) {
                cmf__error_prefix(st, "%s", out);
                goto done;
            }
            data = enc.data;
            nb = enc.len;
        }
        if ((st = cmf__writer_add_tensor(w, t->name, t->dtype, t->ndim, t->shape, data, nb))) goto done;
    }
    st = cmf__writer_finish(w);
    w = NULL;
done:
    if (w) cmf__writer_abort(w);
    cmf__buf_free(&enc);
    free(vals);
    json_decref(header);
    for (int i = 0; i < n; i++) cmf__lora_free(lo[i]);
    cmf__model_free(m);
    return st;
}
