/* cmd_compact.c — `cmf compact IN --output OUT`: rewrite a .cmf tightly,
 * dropping the dead tails that append-only growth leaves (format.h,
 * cmf__file_compact). The input is never modified. */
#include "cli.h"
#include "commands.h"
#include "format/format.h"
#include "opts.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int cmd_compact(int argc, char **argv)
{
    const char *in = NULL, *output = NULL;
    bool quiet = false;
    const opt_spec spec[] = {
        {"--output", "-o", OPT_STR, &output, "OUT.cmf", "the file to write (required)", NULL, NULL},
        {"--quiet", "-q", OPT_FLAG, &quiet, NULL, "no summary", NULL, NULL},
    };
    opts_cmd c = {.name = "compact",
                  .head = "usage: cmf compact IN.cmf --output OUT.cmf [--quiet]\n"
                          "Rewrites IN tightly to OUT (every tensor, header and section kept; the\n"
                          "space left behind by append-only growth dropped). IN's hash chain is\n"
                          "verified first: a corrupt file is refused. OUT is written atomically and\n"
                          "must not be IN, nor a directory, FIFO or device.\n",
                  .spec = spec, .n_spec = OPTS_N(spec), .pos = &in, .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!in || !output) return opts_usage("compact", "usage: cmf compact IN.cmf --output OUT.cmf");
    struct stat a, b;
    cmf_status st = cmf__file_compact(in, output);
    if (st) return cli_fail_status("compact", st);
    if (!quiet && stat(in, &a) == 0 && stat(output, &b) == 0)
        fprintf(stderr, "cmf compact: %s: %lld -> %lld bytes\n", output, (long long)a.st_size, (long long)b.st_size);
    return 0;
}
