/* cmd_keygen.c — `cmf keygen --out KEYFILE`: a fresh Ed25519 seed written
 * as 64 hex digits (mode 0600, atomically); prints the public key. Never
 * overwrites an existing key unless --force. */
#include "cli.h"
#include "commands.h"
#include "format/format.h"
#include "opts.h"

#include <sodium.h>
#include <stdio.h>
#include <unistd.h>

static const char *HELP =
    "usage: cmf keygen --out KEYFILE [--force]\n"
    "\n"
    "Make an Ed25519 signing key for cmf sign: a random 32-byte seed\n"
    "written to KEYFILE as 64 hex digits, readable only by you (mode 0600).\n"
    "The public key (64 hex digits) is printed on stdout; it is also\n"
    "embedded in every FILE.sig made with the key. Keep KEYFILE private.\n"
    "\n";

int cmd_keygen(int argc, char **argv)
{
    const char *out = NULL;
    bool force = false;
    const opt_spec spec[] = {
        {"--out", "-o", OPT_STR, &out, "KEYFILE", "where to write the key (required)", NULL, NULL},
        {"--force", NULL, OPT_FLAG, &force, NULL,
         "replace an existing KEYFILE (never a directory, FIFO or\ndevice: those are refused)", NULL, NULL},
    };
    opts_cmd c = {.name = "keygen", .head = HELP, .spec = spec, .n_spec = OPTS_N(spec)};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!out) return opts_usage("keygen", "missing --out KEYFILE");
    if (!force && access(out, F_OK) == 0)
        return cli_fail("keygen", "%s exists; not replacing a key (use --force)", out);
    uint8_t seed[32], pk[32];
    cmf_status st = cmf__sign_keygen(seed, pk);
    if (st == CMF_OK) st = cmf__sign_key_write(out, seed);
    sodium_memzero(seed, sizeof seed);
    if (st != CMF_OK) return cli_fail_status("keygen", st);
    char hex[65];
    sodium_bin2hex(hex, sizeof hex, pk, 32);
    printf("%s\n", hex);
    return 0;
}
