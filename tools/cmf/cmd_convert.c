/* cmd_convert.c — `cmf convert`: a Hugging Face checkpoint folder to .cmf
 * (src/convert/convert.h does the work; this file parses options, draws the
 * progress bar and prints the summary). */
#include "cli.h"
#include "commands.h"
#include "convert/convert.h"
#include "opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* --quant and its overrides (dest: the cmf__convert_opts). */
static int quant_flag(const char *cmd, void *dest, const char *name, const char *value)
{
    cmf_status st = cmf__convert_apply_flag(dest, name, value);
    return st ? cli_fail_status(cmd, st) : 0;
}

int cmd_convert(int argc, char **argv)
{
    cmf__convert_opts opts = cmf__convert_opts_default();
    const char *model = NULL, *output = NULL;
    bool quiet = false;
    const opt_spec spec[] = {
        {"--model", "-m", OPT_STR, &model, "DIR",
         "Hugging Face checkpoint folder (config.json, *.safetensors\n"
         "or model.safetensors.index.json, tokenizer.json)", NULL, NULL},
        {"--output", "-o", OPT_STR, &output, "FILE",
         "the .cmf to write (atomically: nothing is left on failure\n"
         "or on Ctrl-C; never a file of DIR, a directory, FIFO or device)", NULL, NULL},
        {"--quant", NULL, OPT_CALL, &opts, "Q",
         "default dtype of 2-D weights: f32 f16 bf16 q8 q8_2f q4 q4t q4tp\n", "q8", quant_flag},
        {"--quant-attn", NULL, OPT_CALL, &opts, "Q", "override for self_attn / linear_attn weights", NULL, quant_flag},
        {"--quant-ffn", NULL, OPT_CALL, &opts, "Q", "override for mlp weights (dense, experts, shared expert)", NULL,
         quant_flag},
        {"--quant-embed", NULL, OPT_CALL, &opts, "Q", "override for embed_tokens and lm_head", NULL, quant_flag},
        {"--dry-run", NULL, OPT_FLAG, &opts.dry_run, NULL,
         "print the plan (tensor, shape, dtype, bytes) and the file size;\nwrite nothing", NULL, NULL},
        {"--quiet", "-q", OPT_FLAG, &quiet, NULL, "no progress bar and no summary", NULL, NULL},
    };
    opts_cmd c = {.name = "convert",
                  .head = "usage: cmf convert --model DIR --output FILE.cmf [options]\n",
                  .tail = "1-D tensors and tensors under 32 elements are f16 (f32/bf16 with --quant f32/bf16);\n"
                          "expert routers keep a float dtype; see docs/CONVERT.md.\n",
                  .spec = spec, .n_spec = OPTS_N(spec), .pos = &model, .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!model) return opts_usage("convert", "--model DIR is required");
    char *model_dir = NULL; /* --model DIR/config.json (or a file of DIR): DIR was meant */
    struct stat sb;
    if (stat(model, &sb) == 0 && S_ISREG(sb.st_mode)) {
        const char *slash = strrchr(model, '/'), *base = slash ? slash + 1 : model;
        size_t bl = strlen(base);
        if (!strcmp(base, "config.json") || (bl > 12 && !strcmp(base + bl - 12, ".safetensors"))) {
            model_dir = slash ? strndup(model, slash == model ? 1 : (size_t)(slash - model)) : strdup(".");
            if (!model_dir) return cli_fail("convert", "out of memory");
            if (!quiet) fprintf(stderr, "cmf convert: --model %s is a file of %s: converting that folder\n", model, model_dir);
            model = model_dir;
        } else {
            return cli_fail("convert", "--model %s: a file; --model takes the Hugging Face checkpoint folder "
                                       "(config.json, *.safetensors, tokenizer.json)%s", model,
                            !strncmp(base + (bl > 5 ? bl - 5 : 0), ".gguf", 5) ? "; a GGUF file imports with "
                                                                                  "`cmf import-gguf`" : "");
        }
    }
    if (!output && !opts.dry_run) return opts_usage("convert", "--output FILE is required");
    if (opts.dry_run) opts.plan_out = stdout;
    cli_progress bar;
    cli_progress_start(&bar, "convert", 1, quiet || opts.dry_run);
    opts.progress = cli_progress_cb;
    opts.progress_ctx = &bar;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cmf__convert_result res;
    cmf_status st = cmf__convert_hf(model, output, &opts, &res);
    cli_progress_end(&bar);
    if (st) return free(model_dir), cli_fail_status("convert", st);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!quiet && !opts.dry_run)
        fprintf(stderr, "cmf convert: wrote %s: %llu tensors, %.2f MiB in %.2f s\n", output,
                (unsigned long long)res.n_tensors, (double)res.file_bytes / 1048576.0,
                (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    free(model_dir);
    return 0;
}
