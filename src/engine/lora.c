/* lora.c — LoRA adapters at run time: a PEFT adapter (safetensors with
 * base_model.model.<name>.lora_A/lora_B.weight, adapter_config.json beside
 * it) read into small f32 matrices, evaluated beside the base projection,
 * y = x W^T + s (x A^T) B^T with s = lora_alpha / r times the user's scale
 * (alpha / sqrt(r) with use_rslora). The model's weights are never touched.
 * Only projections the graph runs as plain matrix products may carry one.
 * Every A and B value is finite and each pair's gain bounded (lora.h), so
 * no adapter turns finite activations into inf or NaN.
 * The engine side: the adapters of an engine and their graph nodes. */
#include "engine/lora.h"
#include "engine/engine.h"
#include "format/safetensors.h"
#include "util/error.h"
#include "util/json.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "base_model.model."

static int by_target(const void *a, const void *b)
{
    return strcmp(((const cmf__lora_entry *)a)->target, ((const cmf__lora_entry *)b)->target);
}

const cmf__lora_entry *cmf__lora_find(const cmf__lora *lo, const char *target)
{
    cmf__lora_entry key = {.target = (char *)target};
    return bsearch(&key, lo->entries, lo->n, sizeof key, by_target);
}

void cmf__lora_free(cmf__lora *lo)
{
    if (!lo) return;
    for (size_t i = 0; i < lo->n; i++) {
        cmf__qmat_free(&lo->entries[i].qa);
        cmf__qmat_free(&lo->entries[i].qb);
        free(lo->entries[i].a);
        free(lo->entries[i].b);
        free(lo->entries[i].target);
    }
    free(lo->entries);
    free(lo->path);
    free(lo);
}

/* The matrices the graph multiplies by: the dense projections of a layer,
 * and lm_head. A LoRA may sit only beside one of these. */
static const cmf__wmat *projection(const cmf__model *m, const char *name, int64_t *layer)
{
    const cmf__tensor *t = cmf__file_find(m->file, name);
    for (int64_t l = 0; t && l < m->arch.n_layer; l++) {
        const cmf__layer_weights *lw = &m->layers[l];
        const cmf__wmat *mats[] = {&lw->wq, &lw->wk, &lw->wv, &lw->wqkv, &lw->wo, &lw->w_gate, &lw->w_up, &lw->w_down,
                                   &lw->w_gate_up};
        for (size_t k = 0; k < sizeof mats / sizeof *mats; k++)
            if (mats[k]->present && (mats[k]->t == t || !strcmp(cmf__skill_strip(mats[k]->t->name), name))) {
                *layer = l;
                return mats[k];
            }
    }
    if (t && m->lm_head.present && m->lm_head.t == t && m->lm_head.t != m->embed.t) {
        *layer = -1;
        return &m->lm_head;
    }
    return NULL;
}

const char *cmf__skill_strip(const char *name)
{
    if (strncmp(name, "skill.", 6)) return name;
    const char *dot = strchr(name + 6, '.');
    return dot ? dot + 1 : name;
}

char *cmf__lora_config_path(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) : 0;
    char *cfg = malloc(dir_len + 32);
    if (cfg) snprintf(cfg, dir_len + 32, "%.*s%sadapter_config.json", (int)dir_len, path, slash ? "/" : "");
    return cfg;
}

/* r, lora_alpha and use_rslora from adapter_config.json beside `path`. */
static cmf_status read_config(const char *path, double *scale)
{
    char *cfg = cmf__lora_config_path(path);
    if (!cfg) return cmf__error(CMF_ERR_NOMEM, "out of memory");
    char *text = NULL;
    size_t len = 0;
    cmf_status st = cmf__read_regular(cfg, &text, &len);
    if (st) {
        cmf__error_prefix(st, "%s: LoRA adapter: its adapter_config.json (lora_alpha, r)", path);
        free(cfg);
        return st;
    }
    json_error_t je;
    json_t *j = json_loadb(text, len, 0, &je);
    free(text);
    const json_t *r = json_object_get(j, "r"), *alpha = json_object_get(j, "lora_alpha");
    const json_t *rs = json_object_get(j, "use_rslora"), *rp = json_object_get(j, "rank_pattern"),
                 *ap = json_object_get(j, "alpha_pattern");
    if (!j) st = cmf__error(CMF_ERR_PARSE, "%s: line %d: %s", cfg, je.line, je.text);
    else if (!json_is_integer(r) || json_integer_value(r) <= 0 || json_integer_value(r) > 65536)
        st = cmf__error(CMF_ERR_CONFIG, "%s: r: expected an integer in 1..65536", cfg);
    else if (!json_is_number(alpha) || !isfinite(json_number_value(alpha)))
        st = cmf__error(CMF_ERR_CONFIG, "%s: lora_alpha: expected a number", cfg);
    else if ((json_is_object(rp) && json_object_size(rp)) || (json_is_object(ap) && json_object_size(ap)))
        st = cmf__error(CMF_ERR_UNSUPPORTED, "%s: rank_pattern / alpha_pattern (per-module ranks) are not supported", cfg);
    else {
        double rr = (double)json_integer_value(r);
        *scale = json_number_value(alpha) / (json_is_true(rs) ? sqrt(rr) : rr);
        /* the engine multiplies in 32-bit floats */
        if (!(fabs(*scale) <= FLT_MAX))
            st = cmf__error(CMF_ERR_CONFIG, "%s: lora_alpha %g / r %lld = %g is not a finite 32-bit float", cfg,
                            json_number_value(alpha), (long long)json_integer_value(r), *scale);
    }
    json_decref(j);
    free(cfg);
    return st;
}

/* Copies safetensors tensor t, which must be [rows, cols], to a new f32 array. */
static cmf_status to_f32(const char *path, const cmf__st_tensor *t, int64_t rows, int64_t cols, float **out)
{
    if (t->ndim != 2 || (int64_t)t->shape[0] != rows || (int64_t)t->shape[1] != cols)
        return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s': shape [%llu, %llu] (%d-D), expected [%lld, %lld]", path,
                          t->name, (unsigned long long)t->shape[0], (unsigned long long)(t->ndim > 1 ? t->shape[1] : 0),
                          t->ndim, (long long)rows, (long long)cols);
    float *d = malloc((size_t)(rows * cols) * sizeof(float) + 1);
    if (!d) return cmf__error(CMF_ERR_NOMEM, "%s: tensor '%s': out of memory", path, t->name);
    for (uint64_t i = 0; i < (uint64_t)(rows * cols); i++) d[i] = cmf__st_get(t, i);
    for (uint64_t i = 0; i < (uint64_t)(rows * cols); i++)
        if (!isfinite(d[i])) {
            free(d);
            return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s': element %llu is not finite", path, t->name,
                              (unsigned long long)i);
        }
    *out = d;
    return CMF_OK;
}

/* Splits "base_model.model.<name>.lora_A.weight" into target "<name>.weight" and 'A'/'B'. */
static bool parse_name(const char *name, char *target, size_t cap, char *which)
{
    size_t n = strlen(name), pl = strlen(PREFIX), sl = strlen(".lora_A.weight");
    if (n <= pl + sl || strncmp(name, PREFIX, pl)) return false;
    const char *suffix = name + n - sl;
    if (strcmp(suffix, ".lora_A.weight") && strcmp(suffix, ".lora_B.weight")) return false;
    *which = suffix[6];
    int k = snprintf(target, cap, "%.*s.weight", (int)(n - pl - sl), name + pl);
    return k > 0 && (size_t)k < cap;
}

static double max_abs(const float *v, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fabs((double)v[i]) > m ? fabs((double)v[i]) : m;
    return m;
}

/* The pair's gains (lora.h) against the limit at total scale s: inputs up
 * to 2^63 keep x A^T, (x A^T) B^T and s times it below 2^127. The products
 * are formed in double: at most 2^16 * 2^24 * FLT_MAX^2, far inside it. */
static bool gain_ok(const cmf__lora_entry *en, double s)
{
    return en->gain_a <= CMF__LORA_GAIN_MAX && en->gain * fmax(1.0, fabs(s)) <= CMF__LORA_GAIN_MAX;
}

static cmf_status gain_error(cmf_status code, const char *path, const cmf__lora_entry *en, const char *what, double s)
{
    return cmf__error(code,
                      "%s: %s: could overflow 32-bit floats: width %lld x max|A| %g = %g, times rank %lld x max|B| %g x "
                      "max(1, |scale| %g) = %g (each at most 2^62 = %g)",
                      path, what, (long long)en->qa.cols, max_abs(en->a, en->rank * en->qa.cols), en->gain_a,
                      (long long)en->rank, max_abs(en->b, en->qb.rows * en->rank), s,
                      en->gain * fmax(1.0, fabs(s)), CMF__LORA_GAIN_MAX);
}

static const cmf__lora_entry *find_linear(const cmf__lora *lo, const char *target)
{
    for (size_t i = 0; i < lo->n; i++)
        if (!strcmp(lo->entries[i].target, target)) return &lo->entries[i];
    return NULL;
}

cmf_status cmf__lora_open(const cmf__model *m, const char *path, cmf__lora **out)
{
    *out = NULL;
    double scale = 0;
    cmf__mapping map = {0};
    cmf_status st = read_config(path, &scale);
    if (!st) st = cmf__map_file(path, &map);
    if (!st) st = cmf__lora_parse(m, map.data, map.size, path, scale, out);
    cmf__unmap(&map);
    return st;
}

cmf_status cmf__lora_parse(const cmf__model *m, const uint8_t *data, uint64_t size, const char *path, double scale,
                           cmf__lora **out)
{
    *out = NULL;
    cmf_status st = CMF_OK;
    cmf__st_tensor *ts = NULL;
    size_t nt = 0;
    cmf__lora *lo = calloc(1, sizeof *lo);
    if (!lo || !(lo->path = strdup(path))) {
        st = cmf__error(CMF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    lo->scale = scale;
    if (!data || size == 0) {
        st = cmf__error(CMF_ERR_PARSE, "%s: empty file, not safetensors", path);
        goto fail;
    }
    if ((st = cmf__st_parse(data, size, path, 0, &ts, &nt))) goto fail;
    for (size_t i = 0; i < nt; i++) ts[i].data = data + ts[i].off;
    lo->entries = calloc(nt / 2 + 1, sizeof *lo->entries);
    if (!lo->entries) {
        st = cmf__error(CMF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < nt; i++) {
        char target[512], which = 0;
        if (!parse_name(ts[i].name, target, sizeof target, &which)) {
            st = cmf__error(CMF_ERR_UNSUPPORTED, "%s: tensor '%s': not a PEFT LoRA matrix (expected '" PREFIX
                                                 "<name>.lora_A.weight' or '.lora_B.weight')",
                            path, ts[i].name);
            goto fail;
        }
        if (which != 'A') continue;
        /* lora_A [r, in] and its lora_B [out, r] beside the model's [out, in] */
        char bname[600];
        snprintf(bname, sizeof bname, "%.*slora_B.weight", (int)(strlen(ts[i].name) - strlen("lora_A.weight")), ts[i].name);
        const cmf__st_tensor *tb = NULL;
        for (size_t k = 0; k < nt && !tb; k++)
            if (!strcmp(ts[k].name, bname)) tb = &ts[k];
        int64_t layer = 0;
        const cmf__tensor *mt = cmf__file_find(m->file, target);
        const cmf__wmat *wm = mt ? projection(m, target, &layer) : NULL;
        if (!tb) st = cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s' has no '%s' beside it", path, ts[i].name, bname);
        else if (!mt)
            st = cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s': the model %s has no tensor '%s'", path, ts[i].name,
                            m->what, target);
        else if (!wm)
            st = cmf__error(CMF_ERR_UNSUPPORTED,
                            "%s: tensor '%s': '%s' is not a projection the runtime multiplies by on its own (LoRA is "
                            "supported on attention and dense MLP projections and lm_head)",
                            path, ts[i].name, target);
        if (st) goto fail;
        const int64_t rows = wm->q.rows, cols = wm->q.cols, r = ts[i].ndim == 2 ? (int64_t)ts[i].shape[0] : 0;
        if (r <= 0 || r > 65536) {
            st = cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s': shape with rank %lld, expected [r, %lld]", path,
                            ts[i].name, (long long)r, (long long)cols);
            goto fail;
        }
        cmf__lora_entry *en = &lo->entries[lo->n];
        if ((st = to_f32(path, &ts[i], r, cols, &en->a)) || (st = to_f32(path, tb, rows, r, &en->b))) {
            free(en->a);
            en->a = NULL;
            goto fail;
        }
        en->rank = r;
        en->layer = layer;
        en->target = strdup(target);
        uint64_t sa[2] = {(uint64_t)r, (uint64_t)cols}, sb[2] = {(uint64_t)rows, (uint64_t)r};
        if (!en->target) st = cmf__error(CMF_ERR_NOMEM, "out of memory");
        if (!st) st = cmf__qmat_init(&en->qa, CMF_DTYPE_F32, (const uint8_t *)en->a, (uint64_t)(r * cols) * 4, 2, sa, ts[i].name);
        if (!st) st = cmf__qmat_init(&en->qb, CMF_DTYPE_F32, (const uint8_t *)en->b, (uint64_t)(rows * r) * 4, 2, sb, tb->name);
        lo->n++;
        if (st) goto fail;
        const double max_a = max_abs(en->a, r * cols);
        en->gain_a = (double)cols * max_a;
        en->gain = (double)r * en->gain_a * max_abs(en->b, rows * r);
        if (!gain_ok(en, scale)) {
            char what[1300];
            snprintf(what, sizeof what, "tensors '%s' and '%s'", ts[i].name, tb->name);
            st = gain_error(CMF_ERR_CONFIG, path, en, what, scale);
            goto fail;
        }
        lo->max_rank = r > lo->max_rank ? r : lo->max_rank;
        if (layer < 0) lo->head = true;
    }
    for (size_t i = 0; i < nt; i++) { /* every B has its A */
        char target[512], which = 0;
        if (parse_name(ts[i].name, target, sizeof target, &which) && which == 'B' && !find_linear(lo, target)) {
            st = cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s' has no lora_A beside it", path, ts[i].name);
            goto fail;
        }
    }
    if (lo->n == 0) {
        st = cmf__error(CMF_ERR_CONFIG, "%s: no LoRA matrices in the adapter", path);
        goto fail;
    }
    qsort(lo->entries, lo->n, sizeof *lo->entries, by_target);
    for (size_t i = 1; i < lo->n; i++)
        if (!strcmp(lo->entries[i].target, lo->entries[i - 1].target)) {
            st = cmf__error(CMF_ERR_DUPLICATE, "%s: two LoRA pairs for '%s'", path, lo->entries[i].target);
            goto fail;
        }
    cmf__st_tensors_free(ts, nt);
    *out = lo;
    return CMF_OK;
fail:
    cmf__st_tensors_free(ts, nt);
    cmf__lora_free(lo);
    return st;
}

/* ---- the engine side ------------------------------------------------------ */
cmf_status cmf__engine_set_loras(cmf__engine *e, int n, const cmf__lora *const *lo, const float *scale)
{
    if (n < 0 || n > CMF__LORA_MAX || (n && (!lo || !scale)))
        return cmf__error(CMF_ERR_ARG, "LoRA: %d adapters (0..%d)", n, CMF__LORA_MAX);
    int64_t rank = 1;
    bool head = false;
    for (int i = 0; i < n; i++) {
        if (!lo[i] || !isfinite(scale[i]))
            return cmf__error(CMF_ERR_ARG, "LoRA: adapter %d: %s", i, lo[i] ? "the scale is not finite" : "NULL");
        const double s = lo[i]->scale * (double)scale[i];
        if (!(fabs(s) <= FLT_MAX))
            return cmf__error(CMF_ERR_ARG, "%s: LoRA scale %g x lora_alpha / r %g = %g is not a finite 32-bit float",
                              lo[i]->path, (double)scale[i], lo[i]->scale, s);
        for (size_t k = 0; k < lo[i]->n; k++) /* the user's scale may push a pair past its bound */
            if (!gain_ok(&lo[i]->entries[k], s)) {
                char what[600];
                snprintf(what, sizeof what, "LoRA '%s' at scale %g x lora_alpha / r %g", lo[i]->entries[k].target,
                         (double)scale[i], lo[i]->scale);
                return gain_error(CMF_ERR_ARG, lo[i]->path, &lo[i]->entries[k], what, s);
            }
        rank = lo[i]->max_rank > rank ? lo[i]->max_rank : rank;
        head = head || lo[i]->head;
    }
    bool same = n == e->n_lora;
    for (int i = 0; same && i < n; i++) same = e->lora[i].lo == lo[i] && e->lora[i].scale == scale[i];
    if (same) return CMF_OK;
    cmf__buffer *buf = NULL;
    const int64_t B = e->n_batch, W = cmf__engine_widest(e->root), V = e->root->arch.vocab_size;
    size_t rb = (size_t)B * (size_t)rank * 4, ob = (size_t)B * (size_t)W * 4,
           hb = head ? (size_t)e->out_max * (size_t)V * 4 : 0;
    cmf_status st = n ? e->be->ops->buffer_new(e->be, rb + ob + hb, 0, "LoRA scratch", &buf) : CMF_OK;
    if (st) return st;
    cmf__engine_invalidate(e); /* graphs point at the old scratch and adapters */
    if (e->lora_buf) e->be->ops->buffer_free(e->be, e->lora_buf);
    e->lora_buf = buf;
    e->lora_rank = n ? cmf__ten_make(buf, 0, CMF__E_F32, B, rank) : (cmf__ten){0};
    e->lora_out = n ? cmf__ten_make(buf, rb, CMF__E_F32, B, W) : (cmf__ten){0};
    e->lora_head = head ? cmf__ten_make(buf, rb + ob, CMF__E_F32, e->out_max, V) : (cmf__ten){0};
    for (int i = 0; i < n; i++) e->lora[i] = (struct cmf__engine_lora){lo[i], scale[i]};
    e->n_lora = n;
    return cmf__engine_reset_seq(e, -1);
}

cmf_status cmf__build_lora(cmf__engine *e, cmf__graph *g, int64_t l, cmf__node nd)
{
    const size_t span = l >= 0 ? sizeof e->model->layers[l] : sizeof *e->model;
    const char *base = l >= 0 ? (const char *)&e->model->layers[l] : (const char *)e->model;
    if ((const char *)nd.w < base || (const char *)nd.w >= base + span) return CMF_OK; /* not a model projection */
    const cmf__wmat *wm = (const cmf__wmat *)((const char *)nd.w - offsetof(cmf__wmat, q));
    if (!wm->present || !wm->t) return CMF_OK;
    const char *name = cmf__skill_strip(wm->t->name);
    cmf_status st = CMF_OK;
    for (int i = 0; i < e->n_lora && !st; i++) {
        const cmf__lora_entry *en = cmf__lora_find(e->lora[i].lo, name);
        if (!en) continue;
        const int64_t n = nd.dst.rows;
        const cmf__ten out = l >= 0 ? e->lora_out : e->lora_head;
        if (n > e->lora_rank.rows || en->rank > e->lora_rank.cols || !out.buf || n > out.rows || nd.dst.cols > out.cols)
            return cmf__error(CMF_ERR_UNSUPPORTED, "%s: LoRA '%s': no scratch for a [%lld x %lld] output",
                              e->lora[i].lo->path, en->target, (long long)n, (long long)nd.dst.cols);
        cmf__ten xa = cmf__ten_make(e->lora_rank.buf, e->lora_rank.off, CMF__E_F32, n, en->rank);
        cmf__ten xab = cmf__ten_make(out.buf, out.off, CMF__E_F32, n, nd.dst.cols);
        float s = (float)(e->lora[i].lo->scale * e->lora[i].scale);
        if (!(st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_MATMUL, .dst = xa, .a = nd.a, .w = &en->qa})) &&
            !(st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_MATMUL, .dst = xab, .a = xa, .w = &en->qb})))
            st = cmf__graph_add(g, (cmf__node){.op = CMF__OP_ADD, .dst = nd.dst, .a = nd.dst, .b = xab, .f = {s}});
    }
    return st;
}
