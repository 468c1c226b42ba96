/* skill_add.c — `cmf skill add` (skill_add.h): the converter runs over the
 * donor folder with two hooks, one that gives every planned tensor the
 * backbone's dtype (refusing a tensor the backbone lacks or shapes
 * differently) and one that compares each encoded payload with the
 * backbone's and keeps it when ‖Δ‖/‖W‖ > min_delta. The kept tensors and the
 * new registry record go to the file by cmf__file_append. */
#include "convert/skill_add.h"
#include "convert/convert.h"
#include "format/format.h"
#include "format/skills.h"
#include "quant/quant.h"
#include "util/error.h"
#include "util/file.h"
#include "util/json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cmf__skill_add_opts cmf__skill_add_opts_default(void)
{
    cmf__skill_add_opts o = {0};
    o.min_delta = CMF_SKILL_MIN_DELTA_DEFAULT;
    return o;
}

typedef struct add_ctx {
    const cmf__file *f;
    const char *path, *donor, *id;
    const json_t *donor_arch;
    double min_delta;
    uint8_t *seen; /* [f->n_tensors] */
    bool checked;  /* coverage and arch checked (first sink call) */
    cmf__append_tensor *kept;
    size_t n_kept, cap;
    float *row_a, *row_b;
    cmf__skill_add_result *res;
} add_ctx;

static void fmt_shape(char *out, size_t cap, int ndim, const uint64_t *shape)
{
    size_t o = 0;
    o += (size_t)snprintf(out + o, cap - o, "[");
    for (int i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%" PRIu64, i ? ", " : "", shape[i]);
    if (o < cap) snprintf(out + o, cap - o, "]");
}

static bool is_skill_tensor(const char *name) { return !strncmp(name, "skill.", 6); }

static cmf_status plan_hook(void *vctx, const char *name, int ndim, const uint64_t *shape, int *dtype)
{
    add_ctx *c = vctx;
    const cmf__tensor *t = cmf__file_find(c->f, name);
    if (!t)
        return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s' is not in %s: the donor is not of this base", c->donor,
                          name, c->path);
    bool same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char a[96], b[96];
        fmt_shape(a, sizeof a, ndim, shape);
        fmt_shape(b, sizeof b, t->ndim, t->shape);
        return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s' has shape %s, %s has %s: the donor is not of this base",
                          c->donor, name, a, c->path, b);
    }
    c->seen[t - c->f->tensors] = 1;
    *dtype = t->dtype;
    return CMF_OK;
}

/* Every backbone tensor has a donor counterpart, and the arch blocks agree
 * (tie_word_embeddings aside: the tensor set already shows it). */
static cmf_status check_cover(add_ctx *c)
{
    for (uint64_t i = 0; i < c->f->n_tensors; i++)
        if (!c->seen[i] && !is_skill_tensor(c->f->tensors[i].name))
            return cmf__error(CMF_ERR_CONFIG, "%s: no tensor '%s' (%s has it): the donor is not of this base",
                              c->donor, c->f->tensors[i].name, c->path);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)c->f->arch, key, v) {
        if (!strcmp(key, "tie_word_embeddings")) continue;
        const json_t *d = json_object_get(c->donor_arch, key);
        if (!d || !json_equal((json_t *)v, (json_t *)d)) {
            char *a = d ? json_dumps(d, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
            char *b = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            cmf_status st = cmf__error(CMF_ERR_CONFIG, "%s: arch.%s is %s, in %s it is %s: the donor is not of this base",
                                       c->donor, key, a ? a : "absent", c->path, b ? b : "?");
            free(a);
            free(b);
            return st;
        }
    }
    c->checked = true;
    return CMF_OK;
}

static cmf_status sink_hook(void *vctx, const char *name, int dtype, int ndim, const uint64_t *shape, const void *data,
                            uint64_t nbytes)
{
    add_ctx *c = vctx;
    cmf_status st;
    if (!c->checked && (st = check_cover(c))) return st;
    const cmf__tensor *t = cmf__file_find(c->f, name);
    c->res->n_compared++;
    if (t->nbytes == nbytes && !memcmp(t->data, data, (size_t)nbytes)) return CMF_OK;
    cmf__qmat qa, qb;
    if ((st = cmf__qmat_init(&qa, dtype, data, nbytes, ndim, shape, name))) return st;
    if ((st = cmf__qmat_init(&qb, t->dtype, t->data, t->nbytes, t->ndim, t->shape, name))) {
        cmf__qmat_free(&qa);
        return cmf__error_prefix(st, "%s", c->path);
    }
    float *a = realloc(c->row_a, (size_t)qa.cols * sizeof *a);
    if (a) c->row_a = a;
    float *b = a ? realloc(c->row_b, (size_t)qa.cols * sizeof *b) : NULL;
    if (b) c->row_b = b;
    double dd = 0, ww = 0;
    for (int64_t r = 0; a && b && r < qa.rows; r++) {
        cmf__qmat_decode_row(&qa, r, a);
        cmf__qmat_decode_row(&qb, r, b);
        for (int64_t i = 0; i < qa.cols; i++) {
            double d = (double)a[i] - b[i];
            dd += d * d;
            ww += (double)b[i] * b[i];
        }
    }
    cmf__qmat_free(&qa);
    cmf__qmat_free(&qb);
    if (!a || !b) return cmf__error(CMF_ERR_NOMEM, "tensor '%s': out of memory", name);
    double rel = ww > 0 ? sqrt(dd / ww) : (dd > 0 ? INFINITY : 0);
    if (!isfinite(dd)) rel = INFINITY;
    if (rel > c->res->max_delta || c->res->max_name[0] == 0) {
        c->res->max_delta = rel;
        snprintf(c->res->max_name, sizeof c->res->max_name, "%s", name);
    }
    if (!(rel > c->min_delta)) return CMF_OK;
    if (c->n_kept == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 16;
        cmf__append_tensor *nk = realloc(c->kept, nc * sizeof *nk);
        if (!nk) return cmf__error(CMF_ERR_NOMEM, "out of memory");
        c->kept = nk;
        c->cap = nc;
    }
    cmf__append_tensor *k = &c->kept[c->n_kept];
    memset(k, 0, sizeof *k);
    size_t nl = strlen(c->id) + strlen(name) + 8;
    char *kn = malloc(nl);
    void *copy = malloc(nbytes ? (size_t)nbytes : 1);
    if (!kn || !copy) {
        free(kn);
        free(copy);
        return cmf__error(CMF_ERR_NOMEM, "tensor '%s': out of memory holding %" PRIu64 " bytes", name, nbytes);
    }
    snprintf(kn, nl, "skill.%s.%s", c->id, name);
    memcpy(copy, data, (size_t)nbytes);
    k->name = kn;
    k->dtype = dtype;
    k->ndim = ndim;
    for (int i = 0; i < ndim; i++) k->shape[i] = shape[i];
    k->data = copy;
    k->nbytes = nbytes;
    c->n_kept++;
    c->res->n_kept++;
    c->res->bytes += nbytes;
    return CMF_OK;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static const char *base_name(const char *dir, char *buf, size_t cap)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/') b--;
    snprintf(buf, cap, "%.*s", (int)(n - b), dir + b);
    return buf;
}

/* header.skills + the new record (id, name, layers, extra keys, provenance). */
static json_t *new_header(const add_ctx *c, const cmf__skill_add_opts *o)
{
    json_t *h = json_deep_copy(c->f->header);
    json_t *rec = json_object(), *layers = json_array(), *prov = json_object();
    long *ls = malloc((c->n_kept + 1) * sizeof *ls);
    if (!h || !rec || !layers || !prov || !ls) goto fail;
    size_t nl = 0;
    for (size_t i = 0; i < c->n_kept; i++) {
        long l = cmf__skill_layer_of(c->kept[i].name);
        if (l >= 0) ls[nl++] = l;
    }
    qsort(ls, nl, sizeof *ls, cmp_long);
    for (size_t i = 0; i < nl; i++)
        if (i == 0 || ls[i] != ls[i - 1]) json_array_append_new(layers, json_integer(ls[i]));
    json_object_set_new(rec, "id", json_string(o->id));
    json_object_set_new(rec, "name", json_string(o->name ? o->name : o->id));
    json_object_set_new(rec, "layers", layers);
    layers = NULL;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o->extra, key, v) json_object_set(rec, key, v);
    char bn[256];
    json_object_set_new(prov, "donor", json_string(base_name(c->donor, bn, sizeof bn)));
    json_object_set_new(prov, "tensors", json_integer((json_int_t)c->n_kept));
    json_object_set_new(prov, "bytes", json_integer((json_int_t)c->res->bytes));
    char md[32];
    snprintf(md, sizeof md, "%.6g", o->min_delta); /* as given, not as its float rounding */
    json_object_set_new(prov, "min_delta", json_real(strtod(md, NULL)));
    json_object_set_new(prov, "tool", json_string("cmf " CMF_VERSION_STRING));
    json_object_set_new(rec, "provenance", prov);
    prov = NULL;
    json_t *skills = json_object_get(h, "skills");
    if (!json_is_array(skills)) {
        skills = json_array();
        if (!skills || json_object_set_new(h, "skills", skills)) goto fail;
    }
    if (json_array_append_new(skills, rec)) {
        rec = NULL;
        goto fail;
    }
    free(ls);
    return h;
fail:
    free(ls);
    json_decref(h);
    json_decref(rec);
    json_decref(layers);
    json_decref(prov);
    return NULL;
}

/* The id must be new to the file: no registry record, no skill.<id>.* tensor. */
static cmf_status check_free(const cmf__file *f, const char *path, const char *id)
{
    size_t plen = strlen(id) + 8;
    char prefix[CMF_SKILL_ID_MAX + 8];
    snprintf(prefix, sizeof prefix, "skill.%s.", id);
    bool taken = cmf__skills_find(f->header, id, NULL) != NULL;
    for (uint64_t i = 0; !taken && i < f->n_tensors; i++) taken = !strncmp(f->tensors[i].name, prefix, plen - 1);
    if (taken) return cmf__error(CMF_ERR_DUPLICATE, "%s: skill '%s' already exists (cmf skill remove first)", path, id);
    return CMF_OK;
}

cmf_status cmf__skill_add(const char *path, const char *donor_dir, const cmf__skill_add_opts *o,
                          cmf__skill_add_result *result)
{
    cmf__skill_add_result local;
    cmf__skill_add_result *res = result ? result : &local;
    memset(res, 0, sizeof *res);
    if (!cmf__skill_id_ok(o->id))
        return cmf__error(CMF_ERR_ARG, "skill id '%s': expected 1..%d of A-Z a-z 0-9 _ -", o->id ? o->id : "",
                          CMF_SKILL_ID_MAX);
    if (!(o->min_delta >= 0) || !isfinite(o->min_delta))
        return cmf__error(CMF_ERR_ARG, "min delta %g: expected a finite number >= 0", o->min_delta);
    cmf__open_opts oo = cmf__open_opts_default();
    cmf__file *f = NULL;
    cmf_status st = cmf__file_open(path, &oo, &f);
    if (st) return st;
    cmf__lock lk = {.slot = -1};
    add_ctx c = {.f = f, .path = path, .donor = donor_dir, .id = o->id, .min_delta = o->min_delta, .res = res};
    json_t *config = NULL, *arch = NULL, *header = NULL;
    char *cfg_path = NULL;
    if (f->n_shards > 1) {
        st = cmf__error(CMF_ERR_UNSUPPORTED, "%s: a shard set grows shard by shard; add skills to one file "
                                             "(cmf compact) before sharding", path);
        goto done;
    }
    if ((st = check_free(f, path, o->id))) goto done;
    if (!(c.seen = calloc(f->n_tensors + 1, 1))) {
        st = cmf__error(CMF_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!(cfg_path = cmf__path_join(donor_dir, "config.json"))) {
        st = cmf__error(CMF_ERR_NOMEM, "out of memory");
        goto done;
    }
    char *text = NULL;
    size_t len = 0;
    if ((st = cmf__read_file(cfg_path, &text, &len))) goto done;
    st = cmf__json_parse(text, len, cfg_path, &config);
    free(text);
    if (st || (st = cmf__convert_arch(config, cfg_path, &arch))) goto done;
    c.donor_arch = arch;
    /* The donor is read through the converter with the backbone's dtypes. */
    cmf__convert_opts co = cmf__convert_opts_default();
    co.plan = plan_hook;
    co.sink = sink_hook;
    co.hook_ctx = &c;
    if ((st = cmf__convert_hf(donor_dir, NULL, &co, NULL))) goto done;
    if (!c.checked && (st = check_cover(&c))) goto done;
    if (c.n_kept == 0) {
        st = cmf__error(CMF_ERR_NOT_FOUND,
                        "%s: no tensor differs from %s by more than %g (largest relative delta %.3g at '%s'); "
                        "nothing written",
                        donor_dir, path, o->min_delta, res->max_delta, res->max_name);
        goto done;
    }
    /* The conversion ran unlocked (readers and other writers go on). Now,
     * under the file's lock, the header is built from the file as it is:
     * another writer may have added or removed a skill meanwhile, never
     * the backbone the deltas were taken against. */
    uint64_t bh0 = 0, bh1 = 0;
    if ((st = cmf__file_backbone_dir_hash(f, &bh0))) goto done;
    cmf__file_free(f);
    f = NULL;
    c.f = NULL;
    if ((st = cmf__lock_file(path, &lk))) goto done;
    if ((st = cmf__file_open(path, &oo, &f))) goto done;
    c.f = f;
    if ((st = cmf__file_backbone_dir_hash(f, &bh1))) goto done;
    if (bh1 != bh0) {
        st = cmf__error(CMF_ERR_CONFIG, "%s: the backbone changed while skill '%s' was made; nothing written", path,
                        o->id);
        goto done;
    }
    if ((st = check_free(f, path, o->id))) goto done;
    if (!(header = new_header(&c, o))) {
        st = cmf__error(CMF_ERR_NOMEM, "out of memory building the header");
        goto done;
    }
    /* release the backbone mapping before writing into its file */
    cmf__file_free(f);
    f = NULL;
    c.f = NULL;
    st = cmf__file_append(path, c.kept, c.n_kept, header);
done:
    cmf__unlock_file(&lk);
    for (size_t i = 0; i < c.n_kept; i++) {
        free((void *)c.kept[i].name);
        free((void *)c.kept[i].data);
    }
    free(c.kept);
    free(c.seen);
    free(c.row_a);
    free(c.row_b);
    free(cfg_path);
    json_decref(config);
    json_decref(arch);
    json_decref(header);
    cmf__file_free(f);
    return st;
}
