/* cmd_logits.c — `cmf logits FILE --tokens 1,2,3 [--tokens 4,5] --out L.f32`:
 * runs each token list as its own sequence, all of them in one batch, and
 * writes the f32 logits of every position, little-endian, row-major
 * [n_tokens][vocab], sequence after sequence. The parity scripts compare
 * against reference logits; the batched tests compare sequences run
 * together with the same sequences run alone. */
#include "cli.h"
#include "commands.h"
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
    "\n"
    "  --tokens LIST   comma-separated token ids (required; repeatable, at most 64)\n"
    "  --out FILE      output file (required; '-' = stdout), written atomically:\n"
    "                  nothing is left on failure; never the model file itself\n"
    "  --batch N       prompt tokens per forward chunk (default: all at once)\n"
    "  --ctx N         context length (default: the model's)\n"
    "  -t, --threads N threads (default: one per core)\n"
    "  --kv-type T     KV cache element type: f32, f16 or q8 (default f32: exact logits)\n"
    "  --skill ID      activate a skill of the file\n"
    "  --task NAME     activate the file's task mask NAME ('default' = its default_task)\n";

/* Writes the logits to `out` ('-' = stdout) through a temporary renamed
 * into place, so a failure (disk full, a signal) leaves no partial file;
 * never over the model file itself. Returns the exit status. */
static int write_logits(const char *model_path, const char *out, const float *lg, size_t count)
{
    if (!strcmp(out, "-")) {
        if (fwrite(lg, sizeof(float), count, stdout) != count || fflush(stdout) != 0)
            return cli_fail("logits", "stdout: write failed: %s", strerror(errno));
        return 0;
    }
    cmf__atomic_file af;
    cmf_status st = cmf__output_check(out, &model_path, 1);
    if (!st && !(st = cmf__atomic_open(&af, out))) {
        if ((st = cmf__write_all(af.fp, lg, count * sizeof(float), out))) cmf__atomic_abort(&af);
        else st = cmf__atomic_commit(&af);
    }
    return st ? cli_fail_status("logits", st) : 0;
}

int cmd_logits(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(HELP, stdout);
        return 0;
    }
    const char *path = NULL, *toks[64], *out = NULL, *skill = NULL, *task = NULL, *kv = "f32";
    int n_seq = 0;
    long long ctx = 0, threads = 0, batch = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (cli_is(argv[i], "--tokens", NULL)) {
            if (n_seq == 64) return cli_fail("logits", "at most 64 --tokens lists"), 2;
            if (!(toks[n_seq++] = cli_value("logits", argc, argv, &i))) return 2;
        } else if (cli_is(argv[i], "--kv-type", NULL)) {
            if (!(kv = cli_value("logits", argc, argv, &i))) return 2;
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
    if (!path || !n_seq || !out) {
        cli_fail("logits", "FILE, --tokens and --out are required (see --help)");
        return 2;
    }
    int32_t *ids = NULL, *seq = NULL;
    size_t n = 0;
    for (int q = 0; q < n_seq; q++) { /* the lists, concatenated; seq[i] = which list */
        int32_t *one;
        size_t k;
        if (!runopt_tokens("logits", toks[q], &one, &k)) {
            free(ids);
            free(seq);
            return 2;
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
    runopt_session so = {ctx, threads, batch ? batch : (long long)n, n_seq, kv};
    if (!runopt_open("logits", path, skill, task, &so, &m, &s)) {
        free(ids);
        free(seq);
        return 1;
    }
    int rc = 0;
    size_t V = (size_t)cmf_model_n_vocab(m);
    float *lg = malloc(n * V * sizeof(float));
    bool *want = malloc(n);
    if (want) memset(want, 1, n);
    cmf_batch b = {(int32_t)n, ids, seq, want};
    cmf_status st = lg && want ? cmf_session_decode_batch(s, &b, lg) : CMF_ERR_NOMEM;
    if (st) {
        rc = cli_fail("logits", "%s", lg && want ? cmf_session_errmsg(s) : "out of memory");
    } else {
        rc = write_logits(path, out, lg, n * V);
    }
    free(want);
    free(seq);
    free(lg);
    free(ids);
    cmf_session_free(s);
    cmf_model_free(m);
    return rc;
}
