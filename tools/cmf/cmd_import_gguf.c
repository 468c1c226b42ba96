/* cmd_import_gguf.c — `cmf import-gguf`: a GGUF file to .cmf (the work is
 * in src/convert/gguf*.c; this file parses options, draws the progress bar
 * and prints the summary). Also exports a GGUF's vocabulary alone as a
 * tokenizer.json (works for vocab-only GGUFs). */
#include "cli.h"
#include "commands.h"
#include "convert/gguf.h"
#include "opts.h"
#include "quant/quant.h"
#include "util/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --quant (dest: the cmf__gguf_import_opts). */
static int quant_flag(const char *cmd, void *dest, const char *name, const char *value)
{
    cmf__gguf_import_opts *o = dest;
    o->quant = cmf__dtype_from_name(value);
    return o->quant < 0 ? cli_fail(cmd, "%s: unknown dtype '%s'", name, value) : 0;
}

/* --set KEY=JSON, repeatable (dest: the json object of overrides). */
static int set_flag(const char *cmd, void *dest, const char *name, const char *value)
{
    const char *eq = strchr(value, '=');
    json_error_t jerr;
    json_t *val = eq ? json_loads(eq + 1, JSON_DECODE_ANY, &jerr) : NULL;
    if (!val) return cli_fail(cmd, "%s '%s': expected KEY=JSON", name, value);
    json_object_setn_new(dest, value, (size_t)(eq - value), val);
    return 0;
}

static int export_tokenizer(const char *in, const char *out)
{
    cmf__gguf *g = NULL;
    cmf_status st = cmf__output_check(out, &in, 1);
    if (st || (st = cmf__gguf_open(in, &g))) return cli_fail_status("import-gguf", st);
    char *json = NULL;
    size_t len = 0;
    st = cmf__gguf_tokenizer_json(g, &json, &len);
    cmf__gguf_free(g);
    if (st) return cli_fail_status("import-gguf", st);
    cmf__atomic_file af;
    if (!(st = cmf__atomic_open(&af, out))) {
        if ((st = cmf__write_all(af.fp, json, len, out))) cmf__atomic_abort(&af);
        else st = cmf__atomic_commit(&af);
    }
    free(json);
    return st ? cli_fail_status("import-gguf", st) : 0;
}

int cmd_import_gguf(int argc, char **argv)
{
    cmf__gguf_import_opts opts = cmf__gguf_import_opts_default();
    const char *in = NULL, *output = NULL, *tok_out = NULL;
    bool quiet = false;
    json_t *over = json_object();
    if (!over) return cli_fail("import-gguf", "out of memory");
    const opt_spec spec[] = {
        {"--output", "-o", OPT_STR, &output, "FILE",
         "the .cmf to write (atomically: nothing is left on failure\n"
         "or on Ctrl-C; never the input, a directory, FIFO or device)", NULL, NULL},
        {"--quant", NULL, OPT_CALL, &opts, "Q",
         "dtype of 2-D weights: f32 f16 bf16 q8 q8_2f q4 q4t q4tp\n",
         "f32/f16/bf16 sources kept, quantized sources -> q8", quant_flag},
        {"--set", NULL, OPT_CALL, over, "KEY=JSON",
         "set an arch header field the GGUF lacks (repeatable), e.g.\n"
         "--set rope_theta=1000000 --set sliding_window=4096", NULL, set_flag},
        {"--tokenizer-json", NULL, OPT_STR, &tok_out, "OUT", "write only the vocabulary as tokenizer.json (no .cmf)",
         NULL, NULL},
        {"--dry-run", NULL, OPT_FLAG, &opts.dry_run, NULL,
         "print the plan (tensor, shape, dtype, bytes); write nothing", NULL, NULL},
        {"--quiet", "-q", OPT_FLAG, &quiet, NULL, "no progress bar and no summary", NULL, NULL},
    };
    opts_cmd c = {.name = "import-gguf", .head = "usage: cmf import-gguf FILE.gguf --output FILE.cmf [options]\n",
                  .tail = "1-D tensors and MoE routers are kept f32. See docs/GGUF.md.\n", .spec = spec,
                  .n_spec = OPTS_N(spec), .pos = &in, .max_pos = 1};
    int rc = opts_parse(&c, argc, argv);
    if (rc != OPTS_RUN) goto out;
    rc = CLI_EXIT_USAGE;
    if (!in) {
        opts_usage("import-gguf", "FILE.gguf is required");
        goto out;
    }
    if (tok_out) {
        rc = export_tokenizer(in, tok_out);
        goto out;
    }
    if (!output && !opts.dry_run) {
        opts_usage("import-gguf", "--output FILE is required");
        goto out;
    }
    if (json_object_size(over)) opts.arch_override = over;
    if (opts.dry_run) opts.plan_out = stdout;
    cli_progress bar;
    cli_progress_start(&bar, "import-gguf", 1, quiet || opts.dry_run);
    opts.progress = cli_progress_cb;
    opts.progress_ctx = &bar;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t n = 0, bytes = 0;
    cmf_status st = cmf__gguf_import(in, output, &opts, &n, &bytes);
    cli_progress_end(&bar);
    if (st) {
        rc = cli_fail_status("import-gguf", st);
        goto out;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!quiet && !opts.dry_run)
        fprintf(stderr, "cmf import-gguf: wrote %s: %llu tensors, %.2f MiB payload in %.2f s\n", output,
                (unsigned long long)n, (double)bytes / 1048576.0,
                (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    rc = 0;
out:
    json_decref(over);
    return rc;
}
