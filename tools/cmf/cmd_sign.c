/* cmd_sign.c — `cmf sign FILE --key KEYFILE`: checks the file's hash chain,
 * then writes FILE.sig (Ed25519 over the file's SHA-256, §8.2) atomically.
 * The container itself is never modified. */
#include "cli.h"
#include "commands.h"
#include "format/format.h"
#include "opts.h"
#include "util/file.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *HELP =
    "usage: cmf sign FILE --key KEYFILE [--quiet]\n"
    "\n"
    "Write FILE.sig, a detached signature: JSON {alg: \"ed25519-sha256\",\n"
    "pubkey, sha256, sig} with the Ed25519 signature over the 32-byte\n"
    "SHA-256 of FILE. FILE is verified first (cmf verify) and is never\n"
    "modified; FILE.sig is replaced atomically. KEYFILE holds a 32-byte\n"
    "seed as 64 hex digits (make one with cmf keygen). FILE.sig must not be\n"
    "FILE or KEYFILE, nor a directory, FIFO or device.\n"
    "\n";

int cmd_sign(int argc, char **argv)
{
    const char *path = NULL, *key = NULL;
    bool quiet = false;
    const opt_spec spec[] = {
        {"--key", "-k", OPT_STR, &key, "KEYFILE", "the private signing key (required)", NULL, NULL},
        {"--quiet", "-q", OPT_FLAG, &quiet, NULL, "no progress bar", NULL, NULL},
    };
    opts_cmd c = {.name = "sign", .head = HELP, .spec = spec, .n_spec = OPTS_N(spec), .pos = &path, .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!path) return opts_usage("sign", "missing FILE");
    if (!key) return opts_usage("sign", "missing --key KEYFILE (make one with cmf keygen --out KEYFILE)");
    {
        /* FILE.sig, before any work: never over FILE or the key */
        char *sig = cli_sig_path(path);
        if (!sig) return cli_fail("sign", "out of memory");
        const char *inputs[2] = {path, key};
        cmf_status cst = cmf__output_check(sig, inputs, 2);
        free(sig);
        if (cst != CMF_OK) return cli_fail_status("sign", cst);
    }
    uint8_t seed[32], pk[32];
    cmf_status st = cmf__sign_key_read(key, seed, pk);
    if (st != CMF_OK) return cli_fail_status("sign", st);
    cmf__open_opts o = cmf__open_opts_default();
    o.allow_skill_file = true;
    o.single_shard = true;
    cmf__file *f = NULL;
    int rc = 0;
    if ((st = cmf__file_open(path, &o, &f)) != CMF_OK) {
        rc = cli_fail_status("sign", st);
        goto done;
    }
    cli_progress bar;
    cli_progress_start(&bar, "verifying", 1, quiet);
    st = cmf__file_verify(f, cli_progress_cb, &bar, NULL, NULL);
    cli_progress_end(&bar);
    cmf__file_free(f);
    if (st != CMF_OK) {
        rc = cli_fail_status("sign", st);
        fprintf(stderr, "cmf sign: not signing a file that fails verification (run cmf verify %s)\n", path);
        goto done;
    }
    cli_progress_start(&bar, "sha-256", 1, quiet);
    st = cmf__sign_file(path, seed, cli_progress_cb, &bar);
    cli_progress_end(&bar);
    if (st != CMF_OK) {
        rc = cli_fail_status("sign", st);
        goto done;
    }
    char hex[65];
    sodium_bin2hex(hex, sizeof hex, pk, 32);
    printf("wrote %s.sig (pubkey %s)\n", path, hex);
done:
    sodium_memzero(seed, sizeof seed);
    return rc;
}
