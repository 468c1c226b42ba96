/* cmd_requant.c — `cmf requant IN --output OUT --quant Q`: re-encode every
 * tensor of a .cmf under a new policy (src/convert/convert.h, cmf__requant);
 * header, vocab, masks and index are kept. A source that fails verification
 * is refused unless --force. */
#include "cli.h"
#include "commands.h"
#include "convert/convert.h"
#include "opts.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *TAIL =
            "Each tensor is decoded to f32 and encoded again; a tensor whose dtype does not\n"
            "change is copied byte for byte. Same size rules as cmf convert. IN's whole hash\n"
            "chain is verified first: re-encoding would give a corrupt file a valid chain.\n"
            "OUT is written atomically (nothing is left on failure or on Ctrl-C) and must\n"
            "not be IN, nor a directory, FIFO or device.\n";

typedef struct quant_dest {
    cmf__convert_opts *opts;
    bool have_quant; /* --quant given */
} quant_dest;

/* --quant and its overrides (dest: a quant_dest). */
static int quant_flag(const char *cmd, void *dest, const char *name, const char *value)
{
    quant_dest *q = dest;
    cmf_status st = cmf__convert_apply_flag(q->opts, name, value);
    if (st) return cli_fail_status(cmd, st);
    if (!strcmp(name, "--quant")) q->have_quant = true;
    return 0;
}

int cmd_requant(int argc, char **argv)
{
    cmf__convert_opts opts = cmf__convert_opts_default();
    const char *in = NULL, *output = NULL;
    bool quiet = false;
    quant_dest q = {&opts, false};
    const opt_spec spec[] = {
        {"--output", "-o", OPT_STR, &output, "FILE", "the .cmf to write (required unless --dry-run)", NULL, NULL},
        {"--quant", NULL, OPT_CALL, &q, "Q", "default dtype of 2-D weights: f32 f16 bf16 q8 q8_2f q4 q4t q4tp", NULL,
         quant_flag},
        {"--quant-attn", NULL, OPT_CALL, &q, "Q", "override for self_attn / linear_attn weights", NULL, quant_flag},
        {"--quant-ffn", NULL, OPT_CALL, &q, "Q", "override for mlp weights", NULL, quant_flag},
        {"--quant-embed", NULL, OPT_CALL, &q, "Q", "override for embed_tokens and lm_head", NULL, quant_flag},
        {"--dry-run", NULL, OPT_FLAG, &opts.dry_run, NULL, "print old and new dtype of every tensor; write nothing",
         NULL, NULL},
        {"--force", NULL, OPT_FLAG, &opts.force, NULL,
         "re-encode IN even when its hash chain fails verification\n"
         "(recorded as provenance.requant.unverified_source)", NULL, NULL},
        {"--quiet", "-q", OPT_FLAG, &quiet, NULL, "no progress bar and no summary", NULL, NULL},
    };
    opts_cmd c = {.name = "requant", .head = "usage: cmf requant IN.cmf --output OUT.cmf --quant Q [options]\n",
                  .tail = TAIL, .spec = spec, .n_spec = OPTS_N(spec), .pos = &in, .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!in) return opts_usage("requant", "input file required");
    if (!output && !opts.dry_run) return opts_usage("requant", "--output FILE is required");
    if (!q.have_quant) return opts_usage("requant", "--quant Q is required");
    if (opts.dry_run) opts.plan_out = stdout;
    cli_progress bar;
    cli_progress_start(&bar, "requant", 1, quiet || opts.dry_run);
    opts.progress = cli_progress_cb;
    opts.progress_ctx = &bar;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cmf__convert_result res;
    cmf_status st = cmf__requant(in, output, &opts, &res);
    cli_progress_end(&bar);
    if (st) return cli_fail_status("requant", st);
    if (res.source_unverified)
        fprintf(stderr, "cmf requant: warning: %s fails verification; --force re-encoded it anyway\n", in);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!quiet && !opts.dry_run)
        fprintf(stderr, "cmf requant: wrote %s: %llu tensors, %.2f MiB in %.2f s\n", output,
                (unsigned long long)res.n_tensors, (double)res.file_bytes / 1048576.0,
                (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    return 0;
}
