/* fuzz_engine_skills.c — the header `skills` registry and its selection
 * blocks, through what `cmf skill list`, `explain` and `route` read. The
 * input is JSON: an object {"skills": ..., "arch": {field: value, ...}}
 * (the arch fields override the toy's, tests/toy_model.h), or any other
 * value, taken as the registry itself. The toy is written with that header
 * (a valid hash chain, so the opener goes past the hashes), opened as a
 * file (each record's id, name and layers as list reads them; the arch
 * through the typed parse and each selection block as explain decodes
 * them, scored for a fixed feature vector: finite or +inf, never NaN) and
 * as a model, whose session routes a 3-token prompt over the registry. */
#include "../tests/toy_model.h"
#include "cmf.h"
#include "format/skills.h"
#include "model/arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What list and explain read of one file. */
static void read_registry(const char *path)
{
    cmf__open_opts o = cmf__open_opts_default();
    o.allow_skill_file = true;
    cmf__file *f = NULL;
    if (cmf__file_open(path, &o, &f) != CMF_OK) return;
    cmf__arch a;
    bool have_arch = cmf__arch_parse(f->arch, "fuzz", &a) == CMF_OK;
    size_t i;
    const json_t *rec;
    json_array_foreach(json_object_get(f->header, "skills"), i, rec) {
        const char *id = json_string_value(json_object_get(rec, "id"));
        (void)json_string_value(json_object_get(rec, "name"));
        size_t k;
        const json_t *v;
        long long sum = 0;
        json_array_foreach(json_object_get(rec, "layers"), k, v) sum += json_integer_value(v);
        (void)sum;
        if (id && cmf__skills_find(f->header, id, NULL) == NULL) abort(); /* the record is found by its id */
        const json_t *sel = json_object_get(rec, "selection");
        cmf__skill_selection s;
        if (have_arch && json_is_object(sel) &&
            cmf__skill_selection_parse(sel, (uint32_t)a.hidden_size, (int)a.n_layer, "fuzz", &s) == CMF_OK) {
            float *phi = malloc((size_t)s.dim * sizeof *phi);
            if (phi) {
                for (uint32_t d = 0; d < s.dim; d++) phi[d] = (float)d - 3.5f;
                if (isnan(cmf__skill_selection_error(&s, phi))) abort();
            }
            free(phi);
            cmf__skill_selection_free(&s);
        }
    }
    if (have_arch) cmf__arch_free(&a);
    cmf__file_free(f);
}

static void route(const char *path)
{
    cmf_model *m = NULL;
    if (cmf_model_open(path, NULL, &m) != CMF_OK) return;
    cmf_session_params sp = cmf_session_params_default();
    sp.n_ctx = 8;
    sp.n_batch = 4;
    sp.n_threads = 1;
    sp.device = CMF_DEVICE_CPU;
    cmf_session *s = NULL;
    int32_t ns = cmf_model_n_skills(m);
    if (ns >= 0 && ns <= 4096 && cmf_session_new(m, &sp, &s) == CMF_OK) {
        int32_t V = cmf_model_n_vocab(m);
        int32_t ids[3] = {0, V / 2, V - 1}, best = -1;
        double *scores = calloc((size_t)ns + 1, sizeof *scores);
        if (scores && cmf_session_route(s, ids, 3, 0.0f, scores, &best) == CMF_OK && (best < -1 || best >= ns)) abort();
        if (scores) (void)cmf_session_route(s, ids, 3, 0.5f, scores, &best); /* a blend */
        free(scores);
        cmf_session_free(s);
    }
    cmf_model_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[512];
    if (!path[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/cmf_fuzz_skills_%ld.cmf", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    }
    if (size > 1 << 16) return 0;
    json_t *in = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!in) return 0;
    json_t *arch = toy_arch(), *extra = json_object();
    const json_t *over = json_object_get(in, "arch");
    if (json_is_object(in) && (json_object_get(in, "skills") || json_is_object(over))) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)over, key, v) toy_set(arch, key, json_incref(v));
        if (json_object_get(in, "skills")) json_object_set(extra, "skills", json_object_get(in, "skills"));
    } else {
        json_object_set(extra, "skills", in);
    }
    cmf_status st = toy_write_with(path, arch, extra);
    json_decref(arch);
    json_decref(extra);
    json_decref(in);
    if (st == CMF_OK) {
        read_registry(path);
        route(path);
    }
    unlink(path);
    return 0;
}
