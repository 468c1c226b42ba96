/* cmd_logits.c — `cmf logits FILE --tokens 1,2,3 --out L.f32`: runs the
 * tokens through the model in one prompt batch and writes the f32 logits
 * of every position, little-endian, row-major [n_tokens][vocab]. The tool
 * parity scripts compare against reference logits. */
#include "cli.h"
#include "commands.h"
#include "runopts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *HELP =
    "usage: cmf logits FILE --tokens ID,ID,... --out OUT.f32 [options]\n"
    "\n"
    "Feed the token ids through the model (one prompt batch unless --batch\n"
    "is smaller) and write the f32 logits of every position to OUT.f32,\n"
    "little-endian, row-major [n_tokens][vocab].\n"
    "\n"
    "  --tokens LIST   comma-separated token ids (required)\n"
    "  --out FILE      output file (required; '-' = stdout)\n"
    "  --batch N       prompt tokens per forward chunk (default: all at once)\n"
    "  --ctx N         context length (default: the model's)\n"
    "  -t, --threads N threads (default: one per core)\n"
    "  --skill ID      activate a skill of the file\n"
    "  --task NAME     activate the file's task mask NAME ('default' = its default_task)\n";

int cmd_logits(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(HELP, stdout);
        return 0;
    }
    const char *path = NULL, *toks = NULL, *out = NULL, *skill = NULL, *task = NULL;
    long long ctx = 0, threads = 0, batch = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (cli_is(argv[i], "--tokens", NULL)) {
            if (!(toks = cli_value("logits", argc, argv, &i))) return 2;
        } else if (cli_is(argv[i], "--out", "-o")) {
            if (!(out = cli_value("logits", argc, argv, &i))) return 2;
        } else if (cli_is(argv[i], "--skill", NULL)) {
            if (!(skill = cli_value("logits", argc, argv, &i))) return 2;
        } else if (cli_is(argv[i], "--task", NULL)) {
            if (!(task = cli_value("logits", argc, argv, &i))) return 2;
        } else if (cli_is(argv[i], "--ctx", "-c")) {
            if (!(v = cli_value("logits", argc, argv, &i)) || !cli_int("logits", "--ctx", v, &ctx)) return 2;
        } else if (cli_is(argv[i], "--threads", "-t")) {
            if (!(v = cli_value("logits", argc, argv, &i)) || !cli_int("logits", "--threads", v, &threads)) return 2;
        } else if (cli_is(argv[i], "--batch", "-b")) {
            if (!(v = cli_value("logits", argc, argv, &i)) || !cli_int("logits", "--batch", v, &batch)) return 2;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_fail("logits", "unknown option '%s' (see --help)", argv[i]);
            return 2;
        } else if (!path) {
            path = argv[i];
        } else {
            cli_fail("logits", "unexpected argument '%s'", argv[i]);
            return 2;
        }
    }
    if (!path || !toks || !out) {
        cli_fail("logits", "FILE, --tokens and --out are required (see --help)");
        return 2;
    }
    int32_t *ids;
    size_t n;
    if (!runopt_tokens("logits", toks, &ids, &n)) return 2;
    cmf_model *m;
    cmf_session *s;
    if (!runopt_open("logits", path, skill, task, ctx, threads, batch ? batch : (long long)n, &m, &s)) {
        free(ids);
        return 1;
    }
    int rc = 0;
    size_t V = (size_t)cmf_model_n_vocab(m);
    float *lg = malloc(n * V * sizeof(float));
    cmf_status st = lg ? cmf_session_decode(s, ids, n, lg, true) : CMF_ERR_NOMEM;
    if (st) {
        rc = cli_fail("logits", "%s", lg ? cmf_session_errmsg(s) : "out of memory");
    } else {
        FILE *f = strcmp(out, "-") ? fopen(out, "wb") : stdout;
        if (!f || fwrite(lg, sizeof(float), n * V, f) != n * V || (f != stdout && fclose(f) != 0))
            rc = cli_fail("logits", "%s: cannot write", out);
    }
    free(lg);
    free(ids);
    cmf_session_free(s);
    cmf_model_free(m);
    return rc;
}
