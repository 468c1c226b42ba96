/* features.c — prompt features and recon-argmin skill scores (features.h).
 * A private engine (on the caller's backend when given: its thread pool and
 * packed weights are reused) runs the prompt with every layer from `layer` on gated
 * off through the task-mask layer gate (spec §5: a clear gate passes x
 * unchanged), so the output rows hold final_norm(h entering `layer`); the
 * logits it computes on the way are dropped. */
#include "engine/features.h"
#include "engine/engine.h"
#include "format/skills.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 64 /* tokens per call: at most the engine's output rows per chunk */

cmf_status cmf__engine_features(const cmf__model *m, cmf__backend *be, const int32_t *tokens, int64_t n, int64_t layer,
                                 float *phi)
{
    const cmf__arch *a = &m->arch;
    const int64_t H = a->hidden_size, V = a->vocab_size;
    if (layer < 0 || layer > a->n_layer)
        return cmf__error(CMF_ERR_ARG, "%s: feature layer %lld outside 0..%lld", m->what, (long long)layer,
                          (long long)a->n_layer);
    if (n < 1 || !tokens) return cmf__error(CMF_ERR_ARG, "%s: features of an empty prompt", m->what);
    if (n > a->max_pos)
        return cmf__error(CMF_ERR_CONTEXT, "%s: prompt of %lld tokens > max_position_embeddings %lld", m->what,
                          (long long)n, (long long)a->max_pos);
    cmf__engine_params p = cmf__engine_params_default();
    p.n_ctx = n;
    p.n_batch = n < CHUNK ? n : CHUNK;
    p.backend = be;
    cmf__engine *e = NULL;
    cmf_status st = cmf__engine_new(m, &p, &e);
    if (st) return st;
    /* the layer gate of an otherwise empty mask: rows NULL restrict nothing */
    static const cmf__mask gate_only;
    e->task.mask = &gate_only;
    for (int64_t l = 0; l < a->n_layer; l++) e->task.skip[l] = l >= layer;
    cmf__engine_invalidate(e);
    float *logits = malloc((size_t)(CHUNK * V) * sizeof *logits);
    uint8_t *rows = NULL;
    bool *want = malloc(CHUNK);
    double *sum = calloc((size_t)H, sizeof *sum);
    if (!logits || !want || !sum) {
        st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory for features", m->what);
        goto done;
    }
    memset(want, 1, CHUNK);
    for (int64_t done = 0; done < n;) {
        int64_t c = n - done < CHUNK ? n - done : CHUNK;
        cmf__batch b = {c, tokens + done, NULL, want};
        if ((st = cmf__engine_decode(e, &b, logits))) goto done;
        size_t nb = e->hout.nb, need = (size_t)(c - 1) * nb + (size_t)H * 4;
        uint8_t *r = realloc(rows, need);
        if (!r) {
            st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory for features", m->what);
            goto done;
        }
        rows = r;
        if ((st = e->be->ops->get(e->be, e->out_buf, e->hout.off, rows, need))) goto done;
        for (int64_t t = 0; t < c; t++) {
            const float *h = (const float *)(rows + (size_t)t * nb);
            for (int64_t i = 0; i < H; i++) sum[i] += h[i];
        }
        done += c;
    }
    for (int64_t i = 0; i < H; i++) phi[i] = (float)(sum[i] / (double)n);
done:
    free(sum);
    free(want);
    free(rows);
    free(logits);
    cmf__engine_free(e);
    return st;
}

cmf_status cmf__skill_route_scores(const cmf__model *m, cmf__backend *be, const int32_t *tokens, int64_t n, double *E,
                                   size_t n_skills, int *best)
{
    const json_t *skills = json_object_get(m->file->header, "skills");
    size_t ns = json_is_array(skills) ? json_array_size(skills) : 0;
    if (best) *best = -1;
    if (ns != n_skills)
        return cmf__error(CMF_ERR_ARG, "%s: %zu skills in the registry, %zu scores asked for", m->what, ns, n_skills);
    const int64_t H = m->arch.hidden_size, L = m->arch.n_layer;
    cmf__skill_selection *sel = calloc(ns + 1, sizeof *sel);
    float *phi = malloc((size_t)H * sizeof *phi);
    int64_t phi_at = -1;
    cmf_status st = CMF_OK;
    if (!sel || !phi) {
        st = cmf__error(CMF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < ns; i++) {
        const json_t *rec = json_array_get(skills, i), *s = json_object_get(rec, "selection");
        E[i] = INFINITY;
        if (!s || json_is_null(s)) continue;
        char what[160];
        const char *id = json_string_value(json_object_get(rec, "id"));
        snprintf(what, sizeof what, "%s: skill '%s'", m->what, id ? id : "?");
        if ((st = cmf__skill_selection_parse(s, (uint32_t)H, (int)L, what, &sel[i]))) goto done;
    }
    /* features once per distinct layer, in registry order */
    for (size_t i = 0; i < ns; i++) {
        if (!sel[i].mean) continue;
        for (size_t j = i; j < ns; j++) {
            if (!sel[j].mean || sel[j].phi_layer != sel[i].phi_layer || !isinf(E[j])) continue;
            if (phi_at != sel[j].phi_layer) {
                if ((st = cmf__engine_features(m, be, tokens, n, sel[j].phi_layer, phi))) goto done;
                phi_at = sel[j].phi_layer;
            }
            E[j] = cmf__skill_selection_error(&sel[j], phi);
        }
    }
    if (best)
        for (size_t i = 0; i < ns; i++)
            if (isfinite(E[i]) && (*best < 0 || E[i] < E[*best])) *best = (int)i;
done:
    for (size_t i = 0; sel && i < ns; i++) cmf__skill_selection_free(&sel[i]);
    free(sel);
    free(phi);
    return st;
}
