/* cmd_compact.c — `cmf compact IN --output OUT`: rewrite a .cmf tightly,
 * dropping the dead tails that append-only growth leaves (format.h,
 * cmf__file_compact). The input is never modified. */
#include "cli.h"
#include "commands.h"
#include "format/format.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int cmd_compact(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        printf("usage: cmf compact IN.cmf --output OUT.cmf [--quiet]\n"
               "Rewrites IN tightly to OUT (every tensor, header and section kept; the\n"
               "space left behind by append-only growth dropped). IN's hash chain is\n"
               "verified first: a corrupt file is refused. OUT is written atomically and\n"
               "must not be IN, nor a directory, FIFO or device.\n");
        return 0;
    }
    const char *in = NULL, *output = NULL;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "--output", "-o")) {
            if (!(output = cli_value("compact", argc, argv, &i))) return 2;
        } else if (cli_is(argv[i], "--quiet", "-q")) {
            quiet = true;
        } else if (argv[i][0] != '-' && !in) {
            in = argv[i];
        } else {
            cli_fail("compact", "unknown option '%s' (cmf compact --help)", argv[i]);
            return 2;
        }
    }
    if (!in || !output) return cli_fail("compact", "usage: cmf compact IN.cmf --output OUT.cmf"), 2;
    struct stat a, b;
    cmf_status st = cmf__file_compact(in, output);
    if (st) return cli_fail_status("compact", st);
    if (!quiet && stat(in, &a) == 0 && stat(output, &b) == 0)
        fprintf(stderr, "cmf compact: %s: %lld -> %lld bytes\n", output, (long long)a.st_size, (long long)b.st_size);
    return 0;
}
