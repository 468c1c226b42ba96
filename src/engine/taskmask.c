/* taskmask.c — one task mask (spec §5) on one sequence: which dense FFN
 * neurons, query heads and layers run, and (through cmf__archs_apply_mask)
 * which experts MoE layers route over. Activation checks the whole mask
 * against the bound layers before changing anything; the forward pass then
 * reads per-layer rows that are NULL wherever nothing is restricted, so an
 * all-ones mask runs the unmasked code and gives the same bits. */
#include "engine/archs_engine.h"
#include "engine/engine.h"
#include "util/error.h"

#include <stdlib.h>

/* True when bits 0..n-1 of the LSB-first row are all set. */
static bool row_full(const uint8_t *row, uint64_t n)
{
    for (uint64_t b = 0; b < n / 8; b++)
        if (row[b] != 0xff) return false;
    uint8_t tail = (uint8_t)((1u << (n % 8)) - 1);
    return n % 8 == 0 || (row[n / 8] & tail) == tail;
}

static bool is_dense_ffn(const cmf__layer_weights *lw) { return !lw->has_router && lw->w_down.present; }

cmf_status cmf__engine_set_mask(cmf__engine *e, const cmf__masks *ms, const cmf__mask *mask)
{
    const cmf__model *m = e->model;
    const int64_t L = m->arch.n_layer;
    if (mask == e->task.mask) return CMF_OK;
    if (mask) {
        if (!ms || (int64_t)ms->num_layers != L)
            return cmf__error(CMF_ERR_CONFIG, "%s: mask '%s': the masks section has %u layers, the model %lld", m->what,
                              mask->name, ms ? ms->num_layers : 0, (long long)L);
        if (mask->ffn_rows != ms->num_layers)
            return cmf__error(CMF_ERR_UNSUPPORTED,
                              "%s: mask '%s': %u FFN rows (one per layer loop); this engine runs each layer once",
                              m->what, mask->name, mask->ffn_rows);
        for (int64_t l = 0; l < L; l++) {
            const cmf__layer_weights *lw = &m->layers[l];
            const uint8_t *ffn = mask->ffn + (uint64_t)l * ms->ffn_bytes;
            const uint8_t *heads = mask->heads + (uint64_t)l * ms->head_bytes;
            if (is_dense_ffn(lw) && lw->ffn_dim != (int64_t)ms->intermediate_size &&
                !row_full(ffn, ms->intermediate_size))
                return cmf__error(CMF_ERR_CONFIG,
                                  "%s: mask '%s': layer %lld: FFN row of %u neurons, the layer's mlp.down_proj has %lld "
                                  "columns",
                                  m->what, mask->name, (long long)l, ms->intermediate_size, (long long)lw->ffn_dim);
            if (lw->kind != CMF__LAYER_LINEAR && lw->n_head != (int64_t)ms->num_heads && !row_full(heads, ms->num_heads))
                return cmf__error(CMF_ERR_CONFIG, "%s: mask '%s': layer %lld: head row of %u heads, the layer has %lld",
                                  m->what, mask->name, (long long)l, ms->num_heads, (long long)lw->n_head);
        }
    }
    cmf_status st = cmf__archs_apply_mask(e, ms, mask); /* changes nothing when it fails */
    if (st) return st;
    for (int64_t l = 0; l < L; l++) {
        const cmf__layer_weights *lw = &m->layers[l];
        e->task.ffn[l] = e->task.heads[l] = NULL;
        e->task.skip[l] = false;
        if (!mask) continue;
        const uint8_t *ffn = mask->ffn + (uint64_t)l * ms->ffn_bytes;
        const uint8_t *heads = mask->heads + (uint64_t)l * ms->head_bytes;
        if (is_dense_ffn(lw) && !row_full(ffn, ms->intermediate_size)) e->task.ffn[l] = ffn;
        if (lw->kind != CMF__LAYER_LINEAR && !row_full(heads, ms->num_heads)) e->task.heads[l] = heads;
        e->task.skip[l] = !(mask->gates[l / 8] >> (l % 8) & 1);
    }
    e->task.mask = mask;
    cmf__engine_invalidate(e); /* the graphs hold the old rows */
    cmf__engine_reset(e); /* the cache was computed under the previous mask */
    return CMF_OK;
}
