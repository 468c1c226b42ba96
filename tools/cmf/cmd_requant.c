/* cmd_requant.c — `cmf requant IN --output OUT --quant Q`: re-encode every
 * tensor of a .cmf under a new policy (src/convert/convert.h, cmf__requant);
 * header, vocab, masks and index are kept. A source that fails verification
 * is refused unless --force. */
#include "cli.h"
#include "commands.h"
#include "convert/convert.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cmf requant IN.cmf --output OUT.cmf --quant Q [options]\n"
            "  --quant Q           default dtype of 2-D weights: f32 f16 bf16 q8 q8_2f q4 q4t q4tp\n"
            "  --quant-attn Q      override for self_attn / linear_attn weights\n"
            "  --quant-ffn Q       override for mlp weights\n"
            "  --quant-embed Q     override for embed_tokens and lm_head\n"
            "  --dry-run           print old and new dtype of every tensor; write nothing\n"
            "  --force             re-encode IN even when its hash chain fails verification\n"
            "                      (recorded as provenance.requant.unverified_source)\n"
            "  --quiet             no progress bar and no summary\n"
            "Each tensor is decoded to f32 and encoded again; a tensor whose dtype does not\n"
            "change is copied byte for byte. Same size rules as cmf convert. IN's whole hash\n"
            "chain is verified first: re-encoding would give a corrupt file a valid chain.\n"
            "OUT is written atomically (nothing is left on failure or on Ctrl-C) and must\n"
            "not be IN, nor a directory, FIFO or device.\n");
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    cli_progress *p = ctx;
    p->total = total ? total : 1;
    cli_progress_update(p, done);
}

int cmd_requant(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    cmf__convert_opts opts = cmf__convert_opts_default();
    const char *in = NULL, *output = NULL;
    bool quiet = false, have_quant = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "--output", "-o")) {
            if (!(output = cli_value("requant", argc, argv, &i))) return 2;
        } else if (cli_is(a, "--dry-run", NULL)) {
            opts.dry_run = true;
        } else if (cli_is(a, "--force", NULL)) {
            opts.force = true;
        } else if (cli_is(a, "--quiet", "-q")) {
            quiet = true;
        } else if (!strncmp(a, "--quant", 7)) {
            const char *v = cli_value("requant", argc, argv, &i);
            if (!v) return 2;
            cmf_status st = cmf__convert_apply_flag(&opts, a, v);
            if (st == CMF_ERR_NOT_FOUND) return cli_fail("requant", "unknown option '%s'", a), 2;
            if (st) return cli_fail_status("requant", st), 2;
            if (!strcmp(a, "--quant")) have_quant = true;
        } else if (a[0] != '-' && !in) {
            in = a;
        } else {
            cli_fail("requant", "unknown option '%s' (cmf requant --help)", a);
            return 2;
        }
    }
    if (!in) return cli_fail("requant", "input file required (cmf requant --help)"), 2;
    if (!output && !opts.dry_run) return cli_fail("requant", "--output FILE is required"), 2;
    if (!have_quant) return cli_fail("requant", "--quant Q is required"), 2;
    if (opts.dry_run) opts.plan_out = stdout;
    cli_progress bar;
    cli_progress_start(&bar, "requant", 1, quiet || opts.dry_run);
    opts.progress = on_progress;
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
