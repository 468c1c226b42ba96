/* cmd_logits.c — `cmf logits FILE --tokens 1,2,3 [--tokens 4,5] --out L.f32`:
 * runs each token list as its own sequence, all of them in one batch, and
 * writes the f32 logits of every position, little-endian, row-major
 * [n_tokens][vocab], sequence after sequence. The parity scripts compare
 * against reference logits; the batched tests compare sequences run
 * together with the same sequences run alone. */
#include "cli.h"
#include "commands.h"
#include "engine/lora.h"
#include "runopts.h"
#include "util/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *HELP =
    "usage: cmf logits FILE --tokens ID,ID,... [--tokens ...] --out OUT.f32 [options]\n"
    "\n"
    "Feed the token ids through the model (one batch unless --batch is\n"
    "smaller) and write the f32 logits of every position to OUT.f32,\n"
    "little-endian, row-major [n_tokens][vocab]. Each --tokens list is its\n"
    "own sequence; all run in one batch and their logits are written one\n"
    "sequence after another, in the order given.\n"
    "\n";

/* Writes the logits to `out` ('-' = stdout) through a temporary renamed
 * into place, so a failure (disk full, a signal) leaves no partial file;
 * never over the model file itself. Returns the exit status. */
/* The inputs an output must not replace: the model, and each --lora
 * adapter (as FILE:S and as FILE) with its adapter_config.json. */
static cmf_status check_out(const char *model_path, const opt_list *loras, const char *out)
{
    const char *in[1 + 4 * 8] = {model_path};
    char *own[4 * 8] = {0};
    size_t n = 1, k = 0;
    cmf_status st = CMF_OK;
    for (size_t i = 0; i < loras->n && i < 8 && !st; i++) {
        const char *v = loras->v[i], *colon = strrchr(v, ':');
        in[n++] = v;
        char *bare = colon ? strndup(v, (size_t)(colon - v)) : NULL;
        if (colon && !bare) st = CMF_ERR_NOMEM;
        if (bare) in[n++] = own[k++] = bare;
        char *c1 = cmf__lora_config_path(v), *c2 = bare ? cmf__lora_config_path(bare) : NULL;
        if (!c1 || (bare && !c2)) st = CMF_ERR_NOMEM;
        if (c1) in[n++] = own[k++] = c1;
        if (c2) in[n++] = own[k++] = c2;
    }
    if (st) st = cmf__error(st, "out of memory");
    else st = cmf__output_check(out, in, n);
    for (size_t i = 0; i < k; i++) free(own[i]);
    return st;
}

static int write_logits(const char *model_path, const opt_list *loras, const char *out, const float *lg,
                        size_t count)
{
    if (!strcmp(out, "-")) {
        if (fwrite(lg, sizeof(float), count, stdout) != count || fflush(stdout) != 0)
            return cli_fail("logits", "stdout: write failed: %s", strerror(errno));
        return 0;
    }
    cmf__atomic_file af;
    cmf_status st = check_out(model_path, loras, out);
    if (!st && !(st = cmf__atomic_open(&af, out))) {
        if ((st = cmf__write_all(af.fp, lg, count * sizeof(float), out))) cmf__atomic_abort(&af);
        else st = cmf__atomic_commit(&af);
    }
    return st ? cli_fail_status("logits", st) : 0;
}

int cmd_logits(int argc, char **argv)
{
    const char *path = NULL, *toks[64], *out = NULL, *skill = NULL, *task = NULL, *kv = "f32", *gpu = NULL;
    opt_list tok_lists = {toks, 0, 64};
    const char *lora_v[8];
    opt_list loras = {lora_v, 0, 8};
    float blend = 0;
    bool autoroute = false;
    long long ctx = 0, threads = 0, batch = 0;
    const opt_spec spec[] = {
        {"--tokens", NULL, OPT_LIST, &tok_lists, "LIST",
         "comma-separated token ids (required; repeatable, at most 64)", NULL, NULL},
        {"--out", "-o", OPT_STR, &out, "FILE",
         "output file (required; '-' = stdout), written atomically:\n"
         "nothing is left on failure; never the model file itself", NULL, NULL},
        {"--batch", "-b", OPT_INT, &batch, "N", "prompt tokens per forward chunk", "all at once", NULL, OPT_RANGE(0, INT32_MAX)},
        {"--ctx", "-c", OPT_INT, &ctx, "N", "context length", "the model's", NULL, OPT_RANGE(0, INT32_MAX)},
        {"--threads", "-t", OPT_INT, &threads, "N", "threads", "one per core", NULL, OPT_RANGE(0, 4096)},
        {"--kv-type", NULL, OPT_STR, &kv, "T", RUNOPT_KV_HELP, "f32: exact logits", NULL},
        {"--gpu", NULL, OPT_STR, &gpu, "on|off|auto", RUNOPT_GPU_HELP, NULL, NULL},
        RUNOPT_SKILL_SPEC(&skill, &blend),
        RUNOPT_LORA_SPEC(&loras),
        {"--task", NULL, OPT_STR, &task, "NAME", "activate the file's task mask NAME ('default' = its default_task)",
         NULL, NULL},
    };
    opts_cmd c = {.name = "logits", .head = HELP, .spec = spec, .n_spec = OPTS_N(spec), .pos = &path, .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    int n_seq = (int)tok_lists.n;
    if (!path || !n_seq || !out) return opts_usage("logits", "FILE, --tokens and --out are required");
    if (!runopt_skill_check("logits", skill, blend, &autoroute)) return CLI_EXIT_USAGE;
    if (autoroute && blend > 0 && n_seq > 1)
        return opts_usage("logits", "--blend routes one request: give one --tokens list");
    runopt_session given = {ctx, threads, batch, n_seq, kv, gpu, NULL};
    if (!runopt_check("logits", &given, NULL)) return CLI_EXIT_USAGE;
    int32_t *ids = NULL, *seq = NULL;
    size_t n = 0;
    for (int q = 0; q < n_seq; q++) { /* the lists, concatenated; seq[i] = which list */
        int32_t *one;
        size_t k;
        if (!runopt_tokens("logits", toks[q], &one, &k)) {
            free(ids);
            free(seq);
            return CLI_EXIT_USAGE;
        }
        int32_t *ni = realloc(ids, (n + k) * sizeof *ids), *ns = ni ? realloc(seq, (n + k) * sizeof *seq) : NULL;
        if (ni) ids = ni;
        if (ns) seq = ns;
        if (!ni || !ns) {
            free(one);
            free(ids);
            free(seq);
            return cli_fail("logits", "out of memory"), 1;
        }
        memcpy(ids + n, one, k * sizeof *ids);
        for (size_t j = 0; j < k; j++) seq[n + j] = q;
        n += k;
        free(one);
    }
    cmf_model *m;
    cmf_session *s;
    runopt_session so = {ctx, threads, batch ? batch : (long long)n, n_seq, kv, gpu, &loras};
    if (!runopt_open("logits", path, autoroute ? NULL : skill, task, &so, &m, &s)) {
        free(ids);
        free(seq);
        return 1;
    }
    int rc = 0;
    /* --skill auto: each list is a request, routed on its own tokens to its own sequence's skill */
    for (size_t i = 0, q0 = 0; autoroute && i <= n && !rc; i++) {
        if (i < n && seq[i] == seq[q0]) continue;
        if (!runopt_route("logits", m, s, ids + q0, i - q0, blend, false)) rc = 1;
        else if (n_seq > 1) {
            const char *id = cmf_session_skill(s);
            if (cmf_session_seq_set_skill(s, seq[q0], id ? id : "")) rc = cli_fail("logits", "%s", cmf_session_errmsg(s));
        }
        q0 = i;
    }
    if (rc) {
        free(ids);
        free(seq);
        cmf_session_free(s);
        cmf_model_free(m);
        return rc;
    }
    size_t V = (size_t)cmf_model_n_vocab(m);
    float *lg = malloc(n * V * sizeof(float));
    bool *want = malloc(n);
    if (want) memset(want, 1, n);
    cmf_batch b = {(int32_t)n, ids, seq, want};
    cmf_status st = lg && want ? cmf_session_decode_batch(s, &b, lg) : CMF_ERR_NOMEM;
    if (st) {
        rc = cli_fail("logits", "%s", lg && want ? cmf_session_errmsg(s) : "out of memory");
    } else {
        rc = write_logits(path, &loras, out, lg, n * V);
    }
    free(want);
    free(seq);
    free(lg);
    free(ids);
    cmf_session_free(s);
    cmf_model_free(m);
    return rc;
}
