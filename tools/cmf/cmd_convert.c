/* cmd_convert.c — `cmf convert`: a Hugging Face checkpoint folder to .cmf
 * (src/convert/convert.h does the work; this file parses options, draws the
 * progress bar and prints the summary). */
#include "cli.h"
#include "commands.h"
#include "convert/convert.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cmf convert --model DIR --output FILE.cmf [options]\n"
            "  --model DIR         Hugging Face checkpoint folder (config.json, *.safetensors\n"
            "                      or model.safetensors.index.json, tokenizer.json)\n"
            "  --output FILE       the .cmf to write (atomically: nothing is left on failure\n"
            "                      or on Ctrl-C; never a file of DIR, a directory, FIFO or device)\n"
            "  --quant Q           default dtype of 2-D weights: f32 f16 bf16 q8 q8_2f q4 q4t q4tp\n"
            "                      (default q8)\n"
            "  --quant-attn Q      override for self_attn / linear_attn weights\n"
            "  --quant-ffn Q       override for mlp weights (dense, experts, shared expert)\n"
            "  --quant-embed Q     override for embed_tokens and lm_head\n"
            "  --dry-run           print the plan (tensor, shape, dtype, bytes) and the file size;\n"
            "                      write nothing\n"
            "  --quiet             no progress bar and no summary\n"
            "1-D tensors and tensors under 32 elements are f16 (f32/bf16 with --quant f32/bf16);\n"
            "expert routers keep a float dtype; see docs/CONVERT.md.\n");
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    cli_progress *p = ctx;
    p->total = total ? total : 1;
    cli_progress_update(p, done);
}

int cmd_convert(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    cmf__convert_opts opts = cmf__convert_opts_default();
    const char *model = NULL, *output = NULL;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "--model", "-m")) {
            if (!(model = cli_value("convert", argc, argv, &i))) return 2;
        } else if (cli_is(a, "--output", "-o")) {
            if (!(output = cli_value("convert", argc, argv, &i))) return 2;
        } else if (cli_is(a, "--dry-run", NULL)) {
            opts.dry_run = true;
        } else if (cli_is(a, "--quiet", "-q")) {
            quiet = true;
        } else if (!strncmp(a, "--quant", 7)) {
            const char *v = cli_value("convert", argc, argv, &i);
            if (!v) return 2;
            cmf_status st = cmf__convert_apply_flag(&opts, a, v);
            if (st == CMF_ERR_NOT_FOUND) return cli_fail("convert", "unknown option '%s'", a), 2;
            if (st) return cli_fail_status("convert", st), 2;
        } else if (a[0] != '-' && !model) {
            model = a;
        } else {
            cli_fail("convert", "unknown option '%s' (cmf convert --help)", a);
            return 2;
        }
    }
    if (!model) return cli_fail("convert", "--model DIR is required (cmf convert --help)"), 2;
    if (!output && !opts.dry_run) return cli_fail("convert", "--output FILE is required (cmf convert --help)"), 2;
    if (opts.dry_run) opts.plan_out = stdout;
    cli_progress bar;
    cli_progress_start(&bar, "convert", 1, quiet || opts.dry_run);
    opts.progress = on_progress;
    opts.progress_ctx = &bar;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cmf__convert_result res;
    cmf_status st = cmf__convert_hf(model, output, &opts, &res);
    cli_progress_end(&bar);
    if (st) return cli_fail_status("convert", st);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!quiet && !opts.dry_run)
        fprintf(stderr, "cmf convert: wrote %s: %llu tensors, %.2f MiB in %.2f s\n", output,
                (unsigned long long)res.n_tensors, (double)res.file_bytes / 1048576.0,
                (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    return 0;
}
