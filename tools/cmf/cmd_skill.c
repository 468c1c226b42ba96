/* cmd_skill.c — `cmf skill add|list|remove|compact|export|apply|route|explain`:
 * making skills from donor checkpoints (src/convert/skill_add.c), moving
 * them between files (src/format/skillfile.c) and routing prompts to them
 * (src/engine/features.c). Every write is append-only growth in place
 * (add, remove) or an atomic new file (compact, export, apply). */
#include "chat.h"
#include "cli.h"
#include "commands.h"
#include "convert/skill_add.h"
#include "engine/api.h"
#include "engine/features.h"
#include "format/format.h"
#include "format/skills.h"
#include "model/arch.h"
#include "opts.h"
#include "runopts.h"
#include "util/file.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- prompts and features ----------------------------------------------------- */
/* Tokenizes one prompt (with the model's BOS rule); malloc'd ids. */
static bool tokenize(cmf_model *m, const char *text, int32_t **ids, size_t *n)
{
    size_t len = strlen(text), need = 0;
    *ids = NULL;
    cmf_model_tokenize(m, text, len, true, NULL, 0, &need);
    *ids = malloc((need ? need : 1) * sizeof **ids);
    if (!*ids || (need && cmf_model_tokenize(m, text, len, true, *ids, need, &need))) {
        cli_fail("skill", "%s", *ids ? cmf_model_errmsg(m) : "out of memory");
        free(*ids);
        *ids = NULL;
        return false;
    }
    *n = need;
    return true;
}

#define MAX_PROMPTS 4096

/* Builds a selection block from a prompts file (one prompt a line, empty
 * lines skipped) over the backbone `path`. */
static int build_selection(const char *path, const char *prompts, long long phi_layer, long long rank, json_t **out)
{
    cmf_model *m = NULL;
    cmf_model_params mp = cmf_model_params_default();
    cmf_status st = cmf_model_open(path, &mp, &m);
    if (st) return cli_fail_status("skill add", st);
    char *text = NULL;
    size_t len = 0;
    float *phi = NULL;
    int rc = 0;
    uint32_t n = 0, cap = 0;
    const cmf__model *cm = m->m;
    const int64_t H = cm->arch.hidden_size;
    if (phi_layer < 0) phi_layer = cm->arch.n_layer / 2;
    if (phi_layer > cm->arch.n_layer) {
        rc = cli_fail("skill add", "--phi-layer %lld: %s has %lld layers (0..%lld)", phi_layer, path,
                      (long long)cm->arch.n_layer, (long long)cm->arch.n_layer);
        goto done;
    }
    if ((st = cmf__read_regular(prompts, &text, &len))) {
        rc = cli_fail_status("skill add", st);
        goto done;
    }
    unsigned lineno = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        lineno++;
        size_t ll = strlen(line);
        if (ll && line[ll - 1] == '\r') line[ll - 1] = 0;
        if (!*line) continue;
        char what[64];
        snprintf(what, sizeof what, "prompts line %u", lineno);
        if (!chat_text_ok("skill add", what, line, strlen(line))) {
            rc = 1;
            goto done;
        }
        if (n == MAX_PROMPTS) {
            rc = cli_fail("skill add", "%s: more than %d prompts (the routing block's PCA is n x n)", prompts,
                          MAX_PROMPTS);
            goto done;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            float *np = realloc(phi, (size_t)cap * (size_t)H * sizeof *np);
            if (!np) {
                rc = cli_fail("skill add", "out of memory");
                goto done;
            }
            phi = np;
        }
        int32_t *ids = NULL;
        size_t nid = 0;
        if (!tokenize(m, line, &ids, &nid)) {
            rc = 1;
            goto done;
        }
        st = cmf__engine_features(cm, NULL, ids, (int64_t)nid, phi_layer, phi + (size_t)n * (size_t)H);
        free(ids);
        if (st) {
            rc = cli_fail("skill add", "%s: line %u: %s", prompts, lineno, cmf_last_error());
            goto done;
        }
        n++;
    }
    if (n < 2) {
        rc = cli_fail("skill add", "%s: %u prompts; a selection block needs at least 2", prompts, n);
        goto done;
    }
    if ((st = cmf__skill_selection_build(phi, n, (uint32_t)H, (uint32_t)rank, (int)phi_layer, out)))
        rc = cli_fail_status("skill add", st);
    else
        json_object_set_new(*out, "prompts", json_integer(n));
done:
    free(phi);
    free(text);
    cmf_model_free(m);
    return rc;
}

/* ---- quality ----------------------------------------------------------------------- */
/* Teacher-forced perplexity of `ids` under `path` with `skill` active (NULL:
 * the backbone), the way `cmf ppl` measures it with its defaults:
 * consecutive windows of ctx predictions, each from a fresh context. */
static int perplexity(const char *path, const char *skill, const int32_t *ids, size_t n, long long ctx, double *ppl,
                      long long *n_pred)
{
    cmf_model *m = NULL;
    cmf_session *s = NULL;
    cmf_model_params mp = cmf_model_params_default();
    mp.skill = skill;
    cmf_status st = cmf_model_open(path, &mp, &m);
    if (st) return cli_fail_status("skill add", st);
    cmf_session_params sp = cmf_session_params_default();
    sp.n_ctx = (int32_t)ctx;
    sp.n_batch = (int32_t)ctx;
    float *lg = NULL;
    int rc = 0;
    if ((st = cmf_session_new(m, &sp, &s))) {
        rc = cli_fail("skill add", "%s", cmf_model_errmsg(m));
        goto done;
    }
    size_t V = (size_t)cmf_model_n_vocab(m);
    if (!(lg = malloc((size_t)ctx * V * sizeof *lg))) {
        rc = cli_fail("skill add", "out of memory");
        goto done;
    }
    double nll = 0;
    *n_pred = 0;
    for (long long start = 0; start + ctx + 1 <= (long long)n; start += ctx) {
        cmf_session_reset(s);
        if (cmf_session_decode(s, ids + start, (size_t)ctx, lg, true)) {
            rc = cli_fail("skill add", "%s", cmf_session_errmsg(s));
            goto done;
        }
        for (long long i = 0; i < ctx; i++) {
            const float *row = lg + (size_t)i * V;
            float mx = row[0];
            for (size_t k = 1; k < V; k++) mx = row[k] > mx ? row[k] : mx;
            double sum = 0;
            for (size_t k = 0; k < V; k++) sum += exp((double)row[k] - mx);
            nll += (double)mx + log(sum) - (double)row[ids[start + i + 1]];
            ++*n_pred;
        }
    }
    *ppl = *n_pred ? exp(nll / (double)*n_pred) : NAN;
done:
    free(lg);
    cmf_session_free(s);
    cmf_model_free(m);
    return rc;
}

/* Measures backbone vs overlaid perplexity on `eval` and records it as the
 * skill's `quality` (spec §9). */
static int record_quality(const char *path, const char *id, const char *eval, json_t **out)
{
    cmf_model *m = NULL;
    cmf_model_params mp = cmf_model_params_default();
    cmf_status st = cmf_model_open(path, &mp, &m);
    if (st) return cli_fail_status("skill add", st);
    char *text = NULL;
    size_t len = 0, n = 0;
    int32_t *ids = NULL;
    int rc = 0;
    long long ctx = cmf_model_n_ctx_train(m) - 1 < 512 ? cmf_model_n_ctx_train(m) - 1 : 512;
    if ((st = cmf__read_regular(eval, &text, &len))) {
        rc = cli_fail_status("skill add", st);
        cmf_model_free(m);
        return rc;
    }
    bool ok = chat_text_ok("skill add", "--quality text", text, len) && tokenize(m, text, &ids, &n);
    cmf_model_free(m);
    free(text);
    if (!ok) return 1;
    if (ctx < 1 || (long long)n < ctx + 1) {
        free(ids);
        return cli_fail("skill add", "%s: %zu tokens, too short for one window of %lld predictions", eval, n, ctx);
    }
    double pb = 0, po = 0;
    long long nb = 0, no = 0;
    if ((rc = perplexity(path, NULL, ids, n, ctx, &pb, &nb)) || (rc = perplexity(path, id, ids, n, ctx, &po, &no))) {
        free(ids);
        return rc;
    }
    free(ids);
    uint8_t d[32];
    char hex[65];
    if ((st = cmf__sha256_file(eval, d, NULL, NULL))) return cli_fail_status("skill add", st);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    *out = json_pack("{s:s, s:f, s:f, s:s, s:I, s:I}", "metric", "ppl", "backbone", pb, "overlaid",
                     po, "dataset_sha256", hex, "n_predictions", (json_int_t)nb, "ctx",
                     (json_int_t)ctx);
    return *out ? 0 : cli_fail("skill add", "out of memory");
}

/* ---- add ---------------------------------------------------------------------- */
/* --name is one line of text for the registry: valid UTF-8 (a string the
 * header's JSON can hold) without control characters (C0, DEL, C1). */
static bool name_ok(const char *name)
{
    if (!chat_text_ok("skill add", "--name", name, strlen(name))) return false;
    const unsigned char *s = (const unsigned char *)name;
    for (size_t i = 0; s[i]; i++) {
        bool c1 = s[i] == 0xC2 && s[i + 1] >= 0x80 && s[i + 1] <= 0x9F;
        if (s[i] < 0x20 || s[i] == 0x7F || c1) {
            cli_fail("skill add", "--name: control character %s%02x at offset %zu; a skill name is one line of "
                     "printable text", c1 ? "U+00" : "0x", c1 ? s[i + 1] : s[i], i);
            return false;
        }
    }
    return true;
}

static int skill_add(int argc, char **argv)
{
    const char *path = NULL, *donor = NULL, *id = NULL, *name = NULL, *prompts = NULL, *quality = NULL;
    float min_delta = (float)CMF_SKILL_MIN_DELTA_DEFAULT;
    long long phi_layer = -1, rank = CMF_SKILL_RANK_DEFAULT;
    bool quiet = false;
    char def[32];
    snprintf(def, sizeof def, "%g", CMF_SKILL_MIN_DELTA_DEFAULT);
    const opt_spec spec[] = {
        {"--from", NULL, OPT_STR, &donor, "DIR", "the donor: a Hugging Face checkpoint of the same base", NULL, NULL},
        {"--id", NULL, OPT_STR, &id, "ID", "the skill id (A-Z a-z 0-9 _ -, at most 64)", NULL, NULL},
        {"--name", NULL, OPT_STR, &name, "NAME", "human name for the registry", "the id", NULL},
        {"--min-delta", NULL, OPT_FLOAT, &min_delta, "D",
         "keep a tensor when ||donor - backbone|| / ||backbone|| > D\n(both in the backbone's encoding)", def, NULL,
         OPT_RANGE(0, OPT_NO_MAX)},
        {"--prompts", NULL, OPT_STR, &prompts, "P.txt",
         "prompts of the skill, one a line: builds its routing block", NULL, NULL},
        {"--phi-layer", NULL, OPT_INT, &phi_layer, "L", "routing feature layer (with --prompts)", "n_layer / 2",
         NULL, OPT_RANGE(0, INT32_MAX)},
        {"--rank", NULL, OPT_INT, &rank, "K", "routing subspace rank (with --prompts; at most prompts - 1)",
         "4", NULL, OPT_RANGE(1, 1024)},
        {"--quality", NULL, OPT_STR, &quality, "EVAL.txt",
         "record backbone vs overlaid perplexity on this text\n(as `cmf ppl` measures it) in the record", NULL, NULL},
        {"--quiet", "-q", OPT_FLAG, &quiet, NULL, "no summary", NULL, NULL},
    };
    opts_cmd c = {.name = "skill add",
                  .head = "usage: cmf skill add FILE --from DIR --id ID [options]\n"
                          "Converts DIR (same architecture and shapes as FILE's backbone) tensor by tensor\n"
                          "in the backbone's own encodings, keeps the tensors that changed by more than\n"
                          "--min-delta, and appends them to FILE as skill.ID.<tensor> with a `skills`\n"
                          "registry record (append-only: no existing byte of FILE moves; the envelope\n"
                          "is rewritten last, so a failure or a signal leaves FILE as it was). FILE is\n"
                          "locked while it is written: another writer waits up to CMF_LOCK_WAIT\n"
                          "seconds (default 10), then refuses. FILE's header must pass its hash.\n",
                  .spec = spec, .n_spec = OPTS_N(spec), .pos = &path, .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!(min_delta >= 0)) return opts_usage("skill add", "--min-delta %g: expected a number >= 0", (double)min_delta);
    if (!path) return opts_usage("skill add", "missing FILE");
    if (!donor || !id) return opts_usage("skill add", "--from DIR and --id ID are required");
    if (rank < 1 || rank > 1024) return opts_usage("skill add", "--rank %lld: expected 1..1024", rank);
    if (!cmf__skill_id_ok(id))
        return opts_usage("skill add", "--id '%s': expected 1..%d of A-Z a-z 0-9 _ -", cli_esc(id), CMF_SKILL_ID_MAX);
    if (name && !name_ok(name)) return CLI_EXIT_USAGE;
    json_t *extra = json_object(), *sel = NULL;
    if (prompts) {
        int rc = build_selection(path, prompts, phi_layer, rank, &sel);
        if (rc) {
            json_decref(extra);
            return rc;
        }
        json_object_set_new(extra, "selection", sel);
    }
    cmf__skill_add_opts o = cmf__skill_add_opts_default();
    o.id = id;
    o.name = name;
    o.min_delta = min_delta;
    o.extra = extra;
    cmf__skill_add_result r;
    cmf_status st = cmf__skill_add(path, donor, &o, &r);
    json_decref(extra);
    if (st) return cli_fail_status("skill add", st);
    if (!quiet)
        printf("skill %s: %" PRIu64 " of %" PRIu64 " tensors kept (relative delta > %g), %" PRIu64
               " bytes appended; largest delta %.4g at %s%s\n",
               id, r.n_kept, r.n_compared, (double)min_delta, r.bytes, r.max_delta, r.max_name,
               prompts ? "; routing block from the prompts" : "");
    if (quality) {
        /* measured on the grown file, then recorded by a header-only append;
         * a failure takes the skill out again */
        json_t *q = NULL;
        int rc = record_quality(path, id, quality, &q);
        if (!rc && (st = cmf__skill_record_set(path, id, "quality", q))) rc = cli_fail_status("skill add", st);
        if (rc) {
            uint64_t nd, bytes;
            if (cmf__skill_remove(path, id, &nd, &bytes))
                fprintf(stderr, "cmf skill add: %s: removing skill '%s' again failed: %s\n", path, id, cmf_last_error());
            else
                fprintf(stderr, "cmf skill add: skill '%s' not added (its bytes are dead until compaction)\n", id);
            json_decref(q);
            return rc;
        }
        if (!quiet)
            printf("quality on %s: perplexity %.4f backbone, %.4f with skill %s (%lld predictions)\n", quality,
                   json_real_value(json_object_get(q, "backbone")), json_real_value(json_object_get(q, "overlaid")),
                   id, (long long)json_integer_value(json_object_get(q, "n_predictions")));
        json_decref(q);
    }
    return 0;
}

/* ---- list / explain --------------------------------------------------------------- */
static int open_file(const char *cmd, const char *path, bool allow_skill_file, cmf__file **f)
{
    cmf__open_opts o = cmf__open_opts_default();
    o.allow_skill_file = allow_skill_file;
    cmf_status st = cmf__file_open(path, &o, f);
    return st ? cli_fail_status(cmd, st) : 0;
}

static void skill_counts(const cmf__file *f, const char *id, uint64_t *n, uint64_t *bytes)
{
    size_t len = strlen(id);
    *n = *bytes = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const char *t = f->tensors[i].name;
        if (!strncmp(t, "skill.", 6) && !strncmp(t + 6, id, len) && t[6 + len] == '.')
            ++*n, *bytes += f->tensors[i].nbytes;
    }
}

/* "3,4,5" (or "-" when none) into buf. */
static void fmt_layers(const json_t *layers, char *buf, size_t cap)
{
    size_t i, o = 0;
    const json_t *v;
    snprintf(buf, cap, "-");
    json_array_foreach(layers, i, v) {
        int k = json_is_integer(v) ? snprintf(buf + o, cap - o, "%s%lld", i ? "," : "", (long long)json_integer_value(v))
                                   : snprintf(buf + o, cap - o, "%s?", i ? "," : ""); /* not a layer number */
        if (k < 0 || (size_t)k >= cap - o) break;
        o += (size_t)k;
    }
}

static int skill_list(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false;
    const opt_spec spec[] = {{"--json", NULL, OPT_FLAG, &json, NULL,
                              "a JSON array: each registry record with its tensors and bytes", NULL, NULL}};
    opts_cmd c = {.name = "skill list",
                  .head = "usage: cmf skill list FILE [--json]\n"
                          "One line per skill of FILE's registry: id, layers it replaces, tensors and\n"
                          "payload bytes in the file, whether it has a routing block, and its name.\n",
                  .spec = spec, .n_spec = OPTS_N(spec), .pos = &path, .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!path) return opts_usage("skill list", "missing FILE");
    cmf__file *f = NULL;
    if (open_file("skill list", path, true, &f)) return 1;
    const json_t *skills = json_object_get(f->header, "skills");
    size_t i;
    const json_t *rec;
    json_t *arr = json ? json_array() : NULL;
    if (!json) printf("%-16s %-14s %8s %12s %-7s %s\n", "id", "layers", "tensors", "bytes", "routing", "name");
    json_array_foreach(skills, i, rec) {
        const char *id = json_string_value(json_object_get(rec, "id"));
        const char *name = json_string_value(json_object_get(rec, "name"));
        uint64_t n, bytes;
        skill_counts(f, id ? id : "", &n, &bytes);
        char lay[64];
        fmt_layers(json_object_get(rec, "layers"), lay, sizeof lay);
        if (json) {
            json_t *o = json_pack("{s:O, s:I, s:I}", "record", rec, "tensors", (json_int_t)n, "bytes", (json_int_t)bytes);
            json_array_append_new(arr, o);
            continue;
        }
        printf("%-16s ", id ? cli_esc(id) : "?");
        printf("%-14s %8" PRIu64 " %12" PRIu64 " %-7s %s\n", lay, n, bytes,
               json_is_object(json_object_get(rec, "selection")) ? "yes" : "no", cli_esc(name));
    }
    if (json) {
        char *d = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", d ? d : "[]");
        free(d);
        json_decref(arr);
    } else if (!json_array_size(skills)) {
        printf("(no skills)\n");
    }
    cmf__file_free(f);
    return 0;
}

static int skill_explain(int argc, char **argv)
{
    const char *path = NULL, *id = NULL;
    const opt_spec spec[] = {{"--id", NULL, OPT_STR, &id, "ID", "the skill (required)", NULL, NULL}};
    opts_cmd c = {.name = "skill explain",
                  .head = "usage: cmf skill explain FILE --id ID\n"
                          "Prints the skill's registry record (the selection block's vectors\n"
                          "summarised), its tensors and the routing parameters.\n",
                  .spec = spec, .n_spec = OPTS_N(spec), .pos = &path, .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!path || !id) return opts_usage("skill explain", "usage: cmf skill explain FILE --id ID");
    cmf__file *f = NULL;
    if (open_file("skill explain", path, true, &f)) return 1;
    int rc = 0;
    json_t *rec = cmf__skills_find(f->header, id, NULL);
    if (!rec) {
        rc = cli_fail("skill explain", "%s: skill '%s' not in the registry", path, id);
        goto done;
    }
    json_t *copy = json_deep_copy(rec);
    json_t *sel = json_object_get(copy, "selection");
    if (json_is_object(sel)) {
        /* the arch numbers through the one typed, checked parse */
        cmf__arch a;
        cmf__skill_selection s;
        char what[256];
        snprintf(what, sizeof what, "%s: header", path);
        cmf_status st = cmf__arch_parse(f->arch, what, &a);
        if (!st) {
            snprintf(what, sizeof what, "%s: skill '%s'", path, id);
            st = cmf__skill_selection_parse(sel, (uint32_t)a.hidden_size, (int)a.n_layer, what, &s);
            cmf__arch_free(&a);
        }
        if (st) {
            json_decref(copy);
            rc = cli_fail_status("skill explain", st);
            goto done;
        }
        double mn = 0;
        for (uint32_t i = 0; i < s.dim; i++) mn += (double)s.mean[i] * s.mean[i];
        char buf[160];
        snprintf(buf, sizeof buf, "<%u f16, norm %.4g>", s.dim, sqrt(mn));
        json_object_set_new(sel, "mean", json_string(buf));
        snprintf(buf, sizeof buf, "<%u x %u f16>", s.dim, s.rank);
        json_object_set_new(sel, "basis", json_string(buf));
        cmf__skill_selection_free(&s);
    }
    char *dump = json_dumps(copy, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(copy);
    printf("%s\n", dump ? dump : "?");
    free(dump);
    uint64_t n, bytes;
    skill_counts(f, id, &n, &bytes);
    printf("tensors: %" PRIu64 " (%" PRIu64 " bytes)\n", n, bytes);
    size_t len = strlen(id);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const cmf__tensor *t = &f->tensors[i];
        if (!strncmp(t->name, "skill.", 6) && !strncmp(t->name + 6, id, len) && t->name[6 + len] == '.')
            printf("  %s  %" PRIu64 " bytes\n", cli_esc(t->name), t->nbytes);
    }
    const json_t *rsel = json_object_get(rec, "selection");
    if (json_is_object(rsel))
        printf("routing: E = ||r - B B^T r||^2 / ||phi||^2, r = phi - mean; phi = mean over the prompt's tokens\n"
               "of final_norm(hidden state entering layer %lld); the skill with the smallest E is chosen\n",
               (long long)json_integer_value(json_object_get(rsel, "phi_layer")));
    else
        printf("routing: none (no selection block; cmf skill add --prompts makes one)\n");
done:
    cmf__file_free(f);
    return rc;
}

/* ---- remove / compact ------------------------------------------------------------- */
static int skill_remove(int argc, char **argv)
{
    const char *path = NULL, *id = NULL;
    const opt_spec spec[] = {{"--id", NULL, OPT_STR, &id, "ID", "the skill to remove (required)", NULL, NULL}};
    opts_cmd c = {.name = "skill remove",
                  .head = "usage: cmf skill remove FILE --id ID\n"
                          "Drops the skill's registry record and its skill.ID.* directory entries in\n"
                          "place (append-only: a new header and directory at the tail, the envelope\n"
                          "last). The payload bytes stay in the file until `cmf skill compact`.\n"
                          "FILE is locked while it is written (as for add) and its header must pass\n"
                          "its hash.\n",
                  .spec = spec, .n_spec = OPTS_N(spec), .pos = &path, .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!path || !id) return opts_usage("skill remove", "usage: cmf skill remove FILE --id ID");
    uint64_t n, bytes;
    cmf_status st = cmf__skill_remove(path, id, &n, &bytes);
    if (st) return cli_fail_status("skill remove", st);
    printf("skill %s removed: %" PRIu64 " tensors (%" PRIu64 " bytes) no longer referenced; "
           "cmf skill compact reclaims them\n",
           id, n, bytes);
    return 0;
}

static int skill_compact(int argc, char **argv)
{
    const char *path = NULL, *out = NULL;
    const opt_spec spec[] = {
        {"--output", "-o", OPT_STR, &out, "OUT.cmf", "the file to write (required)", NULL, NULL}};
    opts_cmd c = {.name = "skill compact",
                  .head = "usage: cmf skill compact FILE --output OUT.cmf\n"
                          "Rewrites FILE tightly to OUT: the bytes of removed skills and of old headers\n"
                          "and directories left by append-only growth are dropped (`cmf compact`).\n",
                  .spec = spec, .n_spec = OPTS_N(spec), .pos = &path, .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!path || !out) return opts_usage("skill compact", "usage: cmf skill compact FILE --output OUT.cmf");
    cmf_status st = cmf__file_compact(path, out);
    if (st) return cli_fail_status("skill compact", st);
    struct stat a, b;
    if (stat(path, &a) == 0 && stat(out, &b) == 0)
        printf("wrote %s: %lld -> %lld bytes\n", out, (long long)a.st_size, (long long)b.st_size);
    return 0;
}

/* ---- export / apply ------------------------------------------------------------------ */
static int skill_export(int argc, char **argv)
{
    const char *path = NULL, *id = NULL, *out = NULL;
    bool force = false;
    const opt_spec spec[] = {
        {"--id", NULL, OPT_STR, &id, "ID", "the skill to export (required)", NULL, NULL},
        {"--output", "-o", OPT_STR, &out, "SKILL.cmf", "the skill file to write (required)", NULL, NULL},
        {"--force", NULL, OPT_FLAG, &force, NULL,
         "export from a FILE that fails verification (recorded as\nprovenance.skill_export.unverified_source)", NULL,
         NULL},
    };
    opts_cmd c = {.name = "skill export",
                  .head = "usage: cmf skill export FILE --id ID --output SKILL.cmf\n"
                          "Writes the skill alone as a SKILL_FILE (spec 9.1, feature bit 6): its\n"
                          "tensors and registry record, bound to FILE's backbone by base_dir_hash.\n"
                          "A SKILL_FILE does not run; `cmf skill apply` turns it back into a model.\n"
                          "FILE must pass `cmf verify` (the output gets fresh hashes) unless --force.\n",
                  .spec = spec, .n_spec = OPTS_N(spec), .pos = &path, .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!path || !id || !out) return opts_usage("skill export", "usage: cmf skill export FILE --id ID --output SKILL.cmf");
    uint64_t n;
    bool unverified;
    cmf_status st = cmf__skill_export(path, id, out, force, &n, &unverified);
    if (st) return cli_fail_status("skill export", st);
    if (unverified)
        fprintf(stderr, "cmf skill export: warning: %s fails verification (--force); recorded in %s\n", path, out);
    printf("wrote %s: skill %s, %" PRIu64 " tensors\n", out, id, n);
    return 0;
}

static int skill_apply(int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL}, *out = NULL;
    bool force = false;
    const opt_spec spec[] = {
        {"--output", "-o", OPT_STR, &out, "OUT.cmf", "the model file to write (required)", NULL, NULL},
        {"--force", NULL, OPT_FLAG, &force, NULL,
         "apply onto a base whose directory hash differs (the result\nis out of spec), or from inputs that fail verification\n"
         "(recorded as provenance.skill_applied.unverified_source)", NULL, NULL},
    };
    opts_cmd c = {.name = "skill apply",
                  .head = "usage: cmf skill apply BASE.cmf SKILL.cmf --output OUT.cmf [--force]\n"
                          "Writes the specialist: BASE's tensors with the skill file's in their place\n"
                          "(BASE's own skills left out). BASE must be the backbone the skill was cut\n"
                          "against (same base_dir_hash), and both must pass `cmf verify`, unless --force.\n",
                  .spec = spec, .n_spec = OPTS_N(spec), .pos = pos, .max_pos = 2};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!pos[0] || !pos[1] || !out) return opts_usage("skill apply", "usage: cmf skill apply BASE SKILL --output OUT");
    uint64_t n;
    bool forced, unverified;
    cmf_status st = cmf__skill_apply(pos[0], pos[1], out, force, &n, &forced, &unverified);
    if (st) return cli_fail_status("skill apply", st);
    if (unverified)
        fprintf(stderr, "cmf skill apply: warning: an input fails verification (--force); recorded in %s\n", out);
    if (forced) fprintf(stderr, "cmf skill apply: warning: %s is not the skill's base (--force)\n", pos[0]);
    printf("wrote %s: %" PRIu64 " tensors replaced\n", out, n);
    return 0;
}

/* ---- route ----------------------------------------------------------------------------- */
static int skill_route(int argc, char **argv)
{
    const char *path = NULL, *prompt = NULL, *toks = NULL;
    float blend = 0;
    const opt_spec spec[] = {
        {"--prompt", "-p", OPT_STR, &prompt, "TEXT", "the prompt to route", NULL, NULL},
        {"--tokens", NULL, OPT_STR, &toks, "IDS", "the prompt as token ids (1,2,3)", NULL, NULL},
        {"--blend", NULL, OPT_FLOAT, &blend, "T", "also print soft-blend weights softmax(-E/T)", NULL, NULL,
         OPT_RANGE(0, 1000)},
    };
    opts_cmd c = {.name = "skill route",
                  .head = "usage: cmf skill route FILE (-p PROMPT | --tokens IDS) [--blend T]\n"
                          "Prints each skill's recon-argmin score E (spec 9; skills without a routing\n"
                          "block: -) and the chosen skill, the one with the smallest E.\n",
                  .spec = spec, .n_spec = OPTS_N(spec), .pos = &path, .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!path || (!prompt == !toks)) return opts_usage("skill route", "usage: cmf skill route FILE (-p PROMPT | --tokens IDS)");
    if (blend < 0 || !isfinite(blend)) return opts_usage("skill route", "--blend %g: expected a number > 0", (double)blend);
    cmf_model *m = NULL;
    cmf_model_params mp = cmf_model_params_default();
    cmf_status st = cmf_model_open(path, &mp, &m);
    if (st) return cli_fail_status("skill route", st);
    int32_t *ids = NULL;
    size_t n = 0;
    double *E = NULL;
    int rc = 0, best = -1;
    if (prompt && !chat_text_ok("skill route", "--prompt", prompt, strlen(prompt))) {
        rc = 1;
        goto done;
    }
    if (prompt ? !tokenize(m, prompt, &ids, &n) : !runopt_tokens("skill route", toks, &ids, &n)) {
        rc = 1;
        goto done;
    }
    const json_t *skills = json_object_get(m->m->file->header, "skills");
    size_t ns = json_array_size(skills);
    if (!ns) {
        rc = cli_fail("skill route", "%s: no skills to route to", path);
        goto done;
    }
    if (!(E = calloc(ns, sizeof *E))) {
        rc = cli_fail("skill route", "out of memory");
        goto done;
    }
    if ((st = cmf__skill_route_scores(m->m, NULL, ids, (int64_t)n, E, ns, &best))) {
        rc = cli_fail_status("skill route", st);
        goto done;
    }
    double *w = blend > 0 ? calloc(ns, sizeof *w) : NULL;
    if (blend > 0 && (!w || cmf__skill_blend_weights(E, ns, blend, w))) {
        free(w);
        rc = cli_fail("skill route", "%s", w ? cmf_last_error() : "out of memory");
        goto done;
    }
    for (size_t i = 0; i < ns; i++) {
        const char *id = json_string_value(json_object_get(json_array_get(skills, i), "id"));
        if (isfinite(E[i])) printf("%-16s E=%.6f", id ? cli_esc(id) : "?", E[i]);
        else printf("%-16s E=-", id ? cli_esc(id) : "?");
        if (w) printf(" w=%.6f", w[i]);
        putchar('\n');
    }
    free(w);
    if (best < 0) rc = cli_fail("skill route", "%s: no skill has a routing block (cmf skill add --prompts)", path);
    else printf("chosen: %s\n", cli_esc(json_string_value(json_object_get(json_array_get(skills, (size_t)best), "id"))));
done:
    free(E);
    free(ids);
    cmf_model_free(m);
    return rc;
}

/* ---- dispatch ---------------------------------------------------------------------------- */
static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} SUB[] = {
    {"add", skill_add, "make a skill from a donor checkpoint (append-only)"},
    {"list", skill_list, "list the skills of a file"},
    {"explain", skill_explain, "print a skill's record, tensors and routing parameters"},
    {"route", skill_route, "score a prompt against every skill and pick one"},
    {"remove", skill_remove, "drop a skill (in place; compact reclaims its bytes)"},
    {"compact", skill_compact, "rewrite a file tightly (reclaims removed skills)"},
    {"export", skill_export, "write one skill as a standalone skill file"},
    {"apply", skill_apply, "base + skill file -> the specialist model file"},
};

int cmd_skill(int argc, char **argv)
{
    if (argc >= 2)
        for (size_t i = 0; i < sizeof SUB / sizeof *SUB; i++)
            if (!strcmp(argv[1], SUB[i].name)) return SUB[i].fn(argc - 1, argv + 1);
    bool help = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
    FILE *o = help ? stdout : stderr;
    if (argc >= 2 && !help) fprintf(stderr, "cmf skill: unknown subcommand '%s'\n\n", argv[1]);
    fprintf(o, "usage: cmf skill <subcommand> FILE [options]   (cmf skill <subcommand> --help)\n"
               "Skills (spec 9): specialists carried by one backbone as skill.<id>.* tensors.\n\n");
    for (size_t i = 0; i < sizeof SUB / sizeof *SUB; i++) fprintf(o, "  %-9s %s\n", SUB[i].name, SUB[i].help);
    return help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}
