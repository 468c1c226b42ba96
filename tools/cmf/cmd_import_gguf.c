/* cmd_import_gguf.c — `cmf import-gguf`: a GGUF file to .cmf (the work is
 * in src/convert/gguf*.c; this file parses options, draws the progress bar
 * and prints the summary). Also exports a GGUF's vocabulary alone as a
 * tokenizer.json (works for vocab-only GGUFs). */
#include "cli.h"
#include "commands.h"
#include "convert/gguf.h"
#include "quant/quant.h"
#include "util/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cmf import-gguf FILE.gguf --output FILE.cmf [options]\n"
            "  --output FILE        the .cmf to write (atomically: nothing is left on failure\n"
            "                       or on Ctrl-C; never the input, a directory, FIFO or device)\n"
            "  --quant Q            dtype of 2-D weights: f32 f16 bf16 q8 q8_2f q4 q4t q4tp\n"
            "                       (default: f32/f16/bf16 sources kept, quantized sources -> q8)\n"
            "  --set KEY=JSON       set an arch header field the GGUF lacks, e.g.\n"
            "                       --set rope_theta=1000000 --set sliding_window=4096\n"
            "  --tokenizer-json OUT write only the vocabulary as tokenizer.json (no .cmf)\n"
            "  --dry-run            print the plan (tensor, shape, dtype, bytes); write nothing\n"
            "  --quiet              no progress bar and no summary\n"
            "1-D tensors and MoE routers are kept f32. See docs/GGUF.md.\n");
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    cli_progress *p = ctx;
    p->total = total ? total : 1;
    cli_progress_update(p, done);
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
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    cmf__gguf_import_opts opts = cmf__gguf_import_opts_default();
    const char *in = NULL, *output = NULL, *tok_out = NULL;
    bool quiet = false;
    json_t *over = json_object();
    int rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "--output", "-o")) {
            if (!(output = cli_value("import-gguf", argc, argv, &i))) goto out;
        } else if (cli_is(a, "--tokenizer-json", NULL)) {
            if (!(tok_out = cli_value("import-gguf", argc, argv, &i))) goto out;
        } else if (cli_is(a, "--dry-run", NULL)) {
            opts.dry_run = true;
        } else if (cli_is(a, "--quiet", "-q")) {
            quiet = true;
        } else if (cli_is(a, "--quant", NULL)) {
            const char *v = cli_value("import-gguf", argc, argv, &i);
            if (!v) goto out;
            opts.quant = cmf__dtype_from_name(v);
            if (opts.quant < 0) {
                cli_fail("import-gguf", "--quant: unknown dtype '%s'", v);
                goto out;
            }
        } else if (cli_is(a, "--set", NULL)) {
            const char *v = cli_value("import-gguf", argc, argv, &i);
            if (!v) goto out;
            const char *eq = strchr(v, '=');
            json_error_t jerr;
            json_t *val = eq ? json_loads(eq + 1, JSON_DECODE_ANY, &jerr) : NULL;
            if (!val) {
                cli_fail("import-gguf", "--set '%s': expected KEY=JSON", v);
                goto out;
            }
            json_object_setn_new(over, v, (size_t)(eq - v), val);
        } else if (a[0] != '-' && !in) {
            in = a;
        } else {
            cli_fail("import-gguf", "unknown option '%s' (cmf import-gguf --help)", a);
            goto out;
        }
    }
    if (!in) {
        cli_fail("import-gguf", "FILE.gguf is required (cmf import-gguf --help)");
        goto out;
    }
    if (tok_out) {
        rc = export_tokenizer(in, tok_out);
        goto out;
    }
    if (!output && !opts.dry_run) {
        cli_fail("import-gguf", "--output FILE is required (cmf import-gguf --help)");
        goto out;
    }
    if (json_object_size(over)) opts.arch_override = over;
    if (opts.dry_run) opts.plan_out = stdout;
    cli_progress bar;
    cli_progress_start(&bar, "import-gguf", 1, quiet || opts.dry_run);
    opts.progress = on_progress;
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
