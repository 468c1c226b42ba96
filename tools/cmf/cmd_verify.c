/* cmd_verify.c — `cmf verify FILE`: the whole integrity chain (envelope
 * header/dir hashes, section_hashes, every tensor's hash64) and, when
 * FILE.sig sits next to it, the detached Ed25519 signature. Exit 0 only
 * when everything is intact; every mismatch is listed by name. */
#include "cli.h"
#include "commands.h"
#include "format/format.h"
#include "opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *HELP =
    "usage: cmf verify FILE [--all-shards] [--no-sig] [--quiet]\n"
    "\n"
    "Check a CMF v2 file end to end: structure (every open-time check),\n"
    "the header and directory hashes in the envelope, the section hashes of\n"
    "masks/vocab/index, and the hash64 of every tensor. When FILE.sig exists\n"
    "it is checked too (SHA-256 of the file, Ed25519 signature); a missing\n"
    ".sig is not an error. hash64 cannot see two swapped 8-byte words; the\n"
    "signature can (see docs/FORMAT.md).\n"
    "\n";
static const char *TAIL =
    "\n"
    "Exit status: 0 intact, 1 any problem (each listed on stderr), 2 a usage error.\n";

int cmd_verify(int argc, char **argv)
{
    const char *path = NULL;
    bool all = false, no_sig = false, quiet = false;
    const opt_spec spec[] = {
        {"--all-shards", NULL, OPT_FLAG, &all, NULL,
         "verify the whole shard set FILE belongs to (default:\n"
         "FILE alone; every shard is verifiable without siblings)", NULL, NULL},
        {"--no-sig", NULL, OPT_FLAG, &no_sig, NULL, "skip the .sig check", NULL, NULL},
        {"--quiet", "-q", OPT_FLAG, &quiet, NULL, "no progress bar", NULL, NULL},
    };
    opts_cmd c = {.name = "verify", .head = HELP, .tail = TAIL, .spec = spec, .n_spec = OPTS_N(spec), .pos = &path,
                  .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!path) return opts_usage("verify", "missing FILE");
    cmf__open_opts o = cmf__open_opts_default();
    o.allow_skill_file = true;
    o.single_shard = !all;
    cmf__file *f = NULL;
    cmf_status st = cmf__file_open(path, &o, &f);
    if (st != CMF_OK) return cli_fail_status("verify", st);
    cli_progress bar;
    cli_progress_start(&bar, "hashing tensors", 1, quiet);
    cmf__verify_problem *problems = NULL;
    size_t n = 0;
    st = cmf__file_verify(f, cli_progress_cb, &bar, &problems, &n);
    cli_progress_end(&bar);
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) bytes += f->tensors[i].nbytes;
    int rc = 0;
    if (st == CMF_ERR_HASH) {
        for (size_t i = 0; i < n; i++) fprintf(stderr, "cmf verify: %s\n", problems[i].what);
        fprintf(stderr, "cmf verify: %s: FAILED, %zu problem%s\n", path, n, n == 1 ? "" : "s");
        rc = 1;
    } else if (st != CMF_OK) {
        rc = cli_fail_status("verify", st);
    } else {
        printf("%s: hash chain OK (%llu tensors, %llu bytes; header, directory, sections)\n", path,
               (unsigned long long)f->n_tensors, (unsigned long long)bytes);
    }
    free(problems);
    uint32_t n_shards = f->n_shards;
    char **paths = calloc(n_shards, sizeof *paths);
    for (uint32_t s = 0; paths && s < n_shards; s++) paths[s] = strdup(f->shards[s].path);
    cmf__file_free(f);
    for (uint32_t s = 0; !no_sig && paths && s < n_shards; s++) {
        if (!paths[s]) continue;
        char *sig = cli_sig_path(paths[s]);
        if (!sig) break;
        if (access(sig, F_OK) == 0) {
            char pk[65] = {0};
            cli_progress_start(&bar, "sha-256", 1, quiet);
            st = cmf__sign_verify(paths[s], sig, pk, cli_progress_cb, &bar);
            cli_progress_end(&bar);
            if (st == CMF_OK) {
                printf("%s: signature OK (ed25519-sha256, pubkey %s)\n", paths[s], pk);
            } else {
                cli_fail_status("verify", st);
                fprintf(stderr, "cmf verify: %s: signature FAILED\n", paths[s]);
                rc = 1;
            }
        } else if (!quiet && isatty(1)) {
            printf("%s: no signature (%s absent)\n", paths[s], sig);
        }
        free(sig);
    }
    for (uint32_t s = 0; paths && s < n_shards; s++) free(paths[s]);
    free(paths);
    return rc;
}
