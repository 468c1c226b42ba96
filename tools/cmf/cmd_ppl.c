/* cmd_ppl.c — `cmf ppl FILE --file TEXT`: teacher-forced perplexity. The
 * text is tokenized once; windows of ctx+1 ids start every `stride` ids,
 * each in a fresh context; in a window the first ctx ids predict the next
 * ctx (with stride < ctx, windows after the first score only their last
 * `stride` predictions, so each id is predicted once). */
#include "cli.h"
#include "commands.h"
#include "runopts.h"
#include "util/file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *HELP =
    "usage: cmf ppl FILE --file TEXT [--ctx N] [--stride S] [--limit N] [options]\n"
    "\n"
    "Teacher-forced perplexity of TEXT. The text is tokenized once (with the\n"
    "tokenizer's special-token post-processing); windows of N+1 ids start at\n"
    "ids 0, S, 2S, ... while a whole window fits, each run in a fresh context;\n"
    "in a window the first N ids predict the next N. With S < N, windows after\n"
    "the first score only their last S predictions. Prints exp(mean NLL).\n"
    "\n";
static const char *TAIL =
    "\n"
    "The shakespeare fixture protocol is --ctx 256 --stride 256 --limit 4096.\n";

int cmd_ppl(int argc, char **argv)
{
    const char *path = NULL, *text_path = NULL, *skill = NULL, *task = NULL, *kv = NULL, *gpu = NULL;
    long long ctx = 0, stride = 0, limit = 0, threads = 0, batch = 0;
    bool json = false;
    const char *lora_v[8];
    opt_list loras = {lora_v, 0, 8};
    float blend = 0;
    bool autoroute = false;
    const opt_spec spec[] = {
        {"--file", "-f", OPT_STR, &text_path, "TEXT", "text file (required)", NULL, NULL},
        {"--ctx", "-c", OPT_INT, &ctx, "N", "window length in predictions", "min(512, model context - 1)", NULL,
         OPT_RANGE(0, INT32_MAX)},
        {"--stride", NULL, OPT_INT, &stride, "S", "window step", "N", NULL, OPT_RANGE(0, INT32_MAX)},
        {"--limit", NULL, OPT_INT, &limit, "P", "stop after P predictions", "all windows", NULL, OPT_RANGE(0, OPT_NO_MAX)},
        {"--batch", "-b", OPT_INT, &batch, "N", "prompt tokens per forward chunk", "N", NULL, OPT_RANGE(0, INT32_MAX)},
        {"--threads", "-t", OPT_INT, &threads, "N", "threads", "one per core", NULL, OPT_RANGE(0, 4096)},
        {"--kv-type", NULL, OPT_STR, &kv, "T", RUNOPT_KV_HELP, "f16", NULL},
        {"--gpu", NULL, OPT_STR, &gpu, "on|off|auto", RUNOPT_GPU_HELP, NULL, NULL},
        RUNOPT_SKILL_SPEC(&skill, &blend),
        RUNOPT_LORA_SPEC(&loras),
        {"--task", NULL, OPT_STR, &task, "NAME", "activate the file's task mask NAME ('default' = its default_task)",
         NULL, NULL},
        {"--json", NULL, OPT_FLAG, &json, NULL, "print {\"ppl\", \"nll\", \"n_predictions\", \"n_windows\", ...}",
         NULL, NULL},
    };
    opts_cmd c = {.name = "ppl", .head = HELP, .tail = TAIL, .spec = spec, .n_spec = OPTS_N(spec), .pos = &path,
                  .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!path || !text_path) return opts_usage("ppl", "FILE and --file are required");
    if (ctx < 0 || stride < 0 || limit < 0) return opts_usage("ppl", "--ctx, --stride and --limit must be >= 0");
    runopt_session given = {ctx, threads, batch, 0, kv, gpu, NULL};
    if (!runopt_check("ppl", &given, NULL) || !runopt_skill_check("ppl", skill, blend, &autoroute)) return CLI_EXIT_USAGE;
    FILE *tf = NULL; /* a regular file: a FIFO is refused, not waited on */
    if (cmf__fopen_regular(text_path, &tf)) return cli_fail("ppl", "--file %s", cmf_last_error());
    char *text = NULL;
    size_t tl = 0, tc = 0;
    for (;;) {
        if (tl + 65536 > tc) {
            char *p = realloc(text, tc = tl + 65536 * 2);
            if (!p) {
                fclose(tf);
                free(text);
                return cli_fail("ppl", "out of memory");
            }
            text = p;
        }
        size_t r = fread(text + tl, 1, tc - tl, tf);
        tl += r;
        if (r == 0) break;
    }
    fclose(tf);
    /* open with the largest context we may need (ctx + 1 is never fed: ctx) */
    cmf_model *m;
    cmf_session *s;
    cmf_model_params mp = cmf_model_params_default();
    mp.skill = autoroute ? NULL : skill;
    cmf_status st = cmf_model_open(path, &mp, &m);
    if (st) {
        free(text);
        return cli_fail_status("ppl", st);
    }
    if (!ctx) ctx = cmf_model_n_ctx_train(m) - 1 < 512 ? cmf_model_n_ctx_train(m) - 1 : 512;
    if (ctx < 1) ctx = 1;
    if (!stride) stride = ctx;
    cmf_model_free(m);
    runopt_session so = {ctx, threads, batch ? batch : ctx, 0, kv, gpu, &loras};
    if (!runopt_open("ppl", path, autoroute ? NULL : skill, task, &so, &m, &s)) {
        free(text);
        return 1;
    }
    int rc = 0;
    size_t n_ids = 0;
    cmf_model_tokenize(m, text, tl, true, NULL, 0, &n_ids);
    int32_t *ids = malloc((n_ids ? n_ids : 1) * sizeof *ids);
    if (!ids || (n_ids && cmf_model_tokenize(m, text, tl, true, ids, n_ids, &n_ids))) {
        rc = cli_fail("ppl", "%s", ids ? cmf_model_errmsg(m) : "out of memory");
        goto done;
    }
    if (cmf_session_n_ctx(s) < ctx) {
        rc = cli_fail("ppl", "--ctx %lld exceeds the model context %d", ctx, cmf_session_n_ctx(s));
        goto done;
    }
    /* --skill auto: the text is one request, routed on its first window */
    if (autoroute && n_ids &&
        !runopt_route("ppl", m, s, ids, n_ids < (size_t)ctx ? n_ids : (size_t)ctx, blend, false)) {
        rc = 1;
        goto done;
    }
    size_t V = (size_t)cmf_model_n_vocab(m);
    float *lg = malloc((size_t)ctx * V * sizeof(float));
    if (!lg) {
        rc = cli_fail("ppl", "out of memory");
        goto done;
    }
    double nll = 0;
    long long n_pred = 0, n_win = 0;
    /* windows the loop will run (start = 0, stride, ... while a window fits) */
    long long total_win = (long long)n_ids >= ctx + 1 ? ((long long)n_ids - ctx - 1) / stride + 1 : 0;
    if (limit) { /* the first window predicts ctx ids, each later one min(stride, ctx) */
        const long long per = stride < ctx ? stride : ctx;
        const long long need = limit <= ctx ? 1 : 1 + (limit - ctx + per - 1) / per;
        if (need < total_win) total_win = need;
    }
    for (long long start = 0; start + ctx + 1 <= (long long)n_ids; start += stride) {
        if (limit && n_pred >= limit) break;
        cmf_session_reset(s);
        if ((st = cmf_session_decode(s, ids + start, (size_t)ctx, lg, true))) {
            rc = cli_fail("ppl", "%s", cmf_session_errmsg(s));
            break;
        }
        long long from = (n_win > 0 && stride < ctx) ? ctx - stride : 0;
        for (long long i = from; i < ctx && !(limit && n_pred >= limit); i++) {
            const float *row = lg + (size_t)i * V;
            float mx = row[0];
            for (size_t k = 1; k < V; k++)
                if (row[k] > mx) mx = row[k];
            double sum = 0;
            for (size_t k = 0; k < V; k++) sum += exp((double)row[k] - mx);
            nll += (double)mx + log(sum) - (double)row[ids[start + i + 1]];
            n_pred++;
        }
        n_win++;
        if (!json && isatty(2))
            fprintf(stderr, "\r[window %lld/%lld: running ppl %.4f]", n_win, total_win, exp(nll / (double)n_pred));
    }
    free(lg);
    if (!rc && !n_pred) rc = cli_fail("ppl", "%s: %zu tokens, too short for one window of %lld", text_path, n_ids, ctx + 1);
    if (!rc) {
        double ppl = exp(nll / (double)n_pred);
        if (!json && isatty(2)) fputc('\n', stderr);
        if (json)
            printf("{\"ppl\": %.6f, \"nll\": %.6f, \"n_predictions\": %lld, \"n_windows\": %lld, \"ctx\": %lld, "
                   "\"stride\": %lld, \"n_tokens\": %zu}\n",
                   ppl, nll / (double)n_pred, n_pred, n_win, ctx, stride, n_ids);
        else
            printf("ppl %.4f over %lld predictions (%lld windows, ctx %lld, stride %lld; text %zu tokens)\n", ppl,
                   n_pred, n_win, ctx, stride, n_ids);
    }
done:
    free(ids);
    free(text);
    cmf_session_free(s);
    cmf_model_free(m);
    return rc;
}
