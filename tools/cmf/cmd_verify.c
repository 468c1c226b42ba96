/* cmd_verify.c — `cmf verify FILE`: the whole integrity chain (envelope
 * header/dir hashes, section_hashes, every tensor's hash64) and, when
 * FILE.sig sits next to it, the detached Ed25519 signature. Exit 0 only
 * when everything is intact; every mismatch is listed by name. */
#include "cli.h"
#include "commands.h"
#include "format/format.h"

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
    "\n"
    "  --all-shards  verify the whole shard set FILE belongs to (default:\n"
    "                FILE alone; every shard is verifiable without siblings)\n"
    "  --no-sig      skip the .sig check\n"
    "  --quiet       no progress bar\n"
    "\n"
    "Exit status: 0 intact, 1 any problem (each listed on stderr).\n";

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    cli_progress *p = ctx;
    p->total = total ? total : 1;
    cli_progress_update(p, done);
}

int cmd_verify(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(HELP, stdout);
        return 0;
    }
    const char *path = NULL;
    bool all = false, no_sig = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "--all-shards", NULL)) all = true;
        else if (cli_is(argv[i], "--no-sig", NULL)) no_sig = true;
        else if (cli_is(argv[i], "--quiet", "-q")) quiet = true;
        else if (argv[i][0] == '-' && argv[i][1]) return cli_fail("verify", "unknown option %s (see cmf verify --help)", argv[i]);
        else if (path) return cli_fail("verify", "one FILE only (got %s and %s)", path, argv[i]);
        else path = argv[i];
    }
    if (!path) return cli_fail("verify", "missing FILE (see cmf verify --help)");
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
    st = cmf__file_verify(f, on_progress, &bar, &problems, &n);
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
        size_t len = strlen(paths[s]) + 5;
        char *sig = malloc(len);
        if (!sig) break;
        snprintf(sig, len, "%s.sig", paths[s]);
        if (access(sig, F_OK) == 0) {
            char pk[65] = {0};
            cli_progress_start(&bar, "sha-256", 1, quiet);
            st = cmf__sign_verify(paths[s], sig, pk, on_progress, &bar);
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
