/* sign.c — the detached signature of §8.2: FILE.sig is the JSON object
 * {"alg":"ed25519-sha256","pubkey":hex32,"sha256":hex32,"sig":hex64}, the
 * Ed25519 signature (libsodium) over the 32 raw bytes of the file's
 * SHA-256. The container is never rewritten. A key file holds the 32-byte
 * seed as 64 hex digits; the secret key is wiped after use. */
#include "format/format.h"
#include "util/error.h"
#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static cmf_status init_sodium(void)
{
    if (sodium_init() < 0) return cmf__error(CMF_ERR_INTERNAL, "libsodium failed to initialise");
    return CMF_OK;
}

cmf_status cmf__sign_keygen(uint8_t seed[32], uint8_t pubkey[32])
{
    cmf_status st = init_sodium();
    if (st) return st;
    uint8_t sk[crypto_sign_SECRETKEYBYTES];
    randombytes_buf(seed, 32);
    crypto_sign_seed_keypair(pubkey, sk, seed);
    sodium_memzero(sk, sizeof sk);
    return CMF_OK;
}

cmf_status cmf__sign_key_write(const char *path, const uint8_t seed[32])
{
    char hex[65];
    sodium_bin2hex(hex, sizeof hex, seed, 32);
    cmf__atomic_file af;
    cmf_status st = cmf__atomic_open(&af, path);
    if (st) return st;
    if (fchmod(fileno(af.fp), 0600) != 0) {
        st = cmf__error(CMF_ERR_IO, "%s: cannot restrict key file permissions: %s", path, strerror(errno));
        cmf__atomic_abort(&af);
        return st;
    }
    if ((st = cmf__write_all(af.fp, hex, 64, path)) || (st = cmf__write_all(af.fp, "\n", 1, path))) {
        cmf__atomic_abort(&af);
        sodium_memzero(hex, sizeof hex);
        return st;
    }
    sodium_memzero(hex, sizeof hex);
    return cmf__atomic_commit(&af);
}

static bool parse_hex(const char *s, size_t n_hex, uint8_t *out)
{
    size_t got = 0;
    const char *end = NULL;
    if (strlen(s) != n_hex) return false;
    return sodium_hex2bin(out, n_hex / 2, s, n_hex, NULL, &got, &end) == 0 && got == n_hex / 2 && end == s + n_hex;
}

cmf_status cmf__sign_key_read(const char *path, uint8_t seed[32], uint8_t pubkey[32])
{
    cmf_status st = init_sodium();
    if (st) return st;
    char *text = NULL;
    size_t len = 0;
    /* the key a user names: a regular file (a FIFO is refused, not read as empty) */
    if ((st = cmf__read_regular(path, &text, &len)) != CMF_OK) return st;
    char *a = text, *b = text + len;
    while (a < b && (*a == ' ' || *a == '\n' || *a == '\r' || *a == '\t')) a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\n' || b[-1] == '\r' || b[-1] == '\t')) b--;
    *b = '\0';
    bool ok = parse_hex(a, 64, seed);
    sodium_memzero(text, len);
    free(text);
    if (!ok) return cmf__error(CMF_ERR_PARSE, "%s: a key file holds exactly 64 hex digits (a 32-byte Ed25519 seed)", path);
    uint8_t sk[crypto_sign_SECRETKEYBYTES];
    crypto_sign_seed_keypair(pubkey, sk, seed);
    sodium_memzero(sk, sizeof sk);
    return CMF_OK;
}

cmf_status cmf__sha256_file(const char *path, uint8_t out[32], cmf__progress_fn progress, void *ctx)
{
    cmf_status st = init_sodium();
    if (st) return st;
    /* one state of a file grown in place: no append between the reads */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return cmf__error(CMF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if ((st = cmf__lock_shared_fd(fd, path))) {
        close(fd);
        return st;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        close(fd);
        return cmf__error(CMF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat sb;
    uint64_t total = fstat(fileno(fp), &sb) == 0 ? (uint64_t)sb.st_size : 0, done = 0;
    size_t cap = 1 << 20;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        fclose(fp);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
    }
    crypto_hash_sha256_state s;
    crypto_hash_sha256_init(&s);
    size_t n;
    while ((n = fread(buf, 1, cap, fp)) > 0) {
        crypto_hash_sha256_update(&s, buf, n);
        done += n;
        if (progress) progress(ctx, done, total);
    }
    bool bad = ferror(fp);
    fclose(fp);
    free(buf);
    if (bad) return cmf__error(CMF_ERR_IO, "%s: read error", path);
    crypto_hash_sha256_final(&s, out);
    return CMF_OK;
}

cmf_status cmf__sign_file(const char *path, const uint8_t seed[32], cmf__progress_fn progress, void *ctx)
{
    uint8_t digest[32], pk[32], sk[crypto_sign_SECRETKEYBYTES], sig[crypto_sign_BYTES];
    cmf_status st = cmf__sha256_file(path, digest, progress, ctx);
    if (st) return st;
    crypto_sign_seed_keypair(pk, sk, seed);
    crypto_sign_detached(sig, NULL, digest, sizeof digest, sk);
    sodium_memzero(sk, sizeof sk);
    char pk_hex[65], sha_hex[65], sig_hex[129];
    sodium_bin2hex(pk_hex, sizeof pk_hex, pk, 32);
    sodium_bin2hex(sha_hex, sizeof sha_hex, digest, 32);
    sodium_bin2hex(sig_hex, sizeof sig_hex, sig, sizeof sig);
    json_t *j = json_pack("{s:s, s:s, s:s, s:s}", "alg", CMF_SIG_ALG, "pubkey", pk_hex, "sha256", sha_hex, "sig", sig_hex);
    char *text = j ? cmf__json_dump(j) : NULL;
    json_decref(j);
    if (!text) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
    size_t n = strlen(path) + 5;
    char *sig_path = malloc(n);
    if (!sig_path) {
        free(text);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(sig_path, n, "%s.sig", path);
    cmf__atomic_file af;
    if ((st = cmf__atomic_open(&af, sig_path)) == CMF_OK) {
        if ((st = cmf__write_all(af.fp, text, strlen(text), sig_path)) ||
            (st = cmf__write_all(af.fp, "\n", 1, sig_path)))
            cmf__atomic_abort(&af);
        else
            st = cmf__atomic_commit(&af);
    }
    free(sig_path);
    free(text);
    return st;
}

static cmf_status sig_field(const json_t *j, const char *key, size_t n_hex, uint8_t *out, const char *sig_path)
{
    const json_t *v = json_object_get(j, key);
    if (!json_is_string(v) || !parse_hex(json_string_value(v), n_hex, out))
        return cmf__error(CMF_ERR_PARSE, "%s: \"%s\" must be %zu hex digits", sig_path, key, n_hex);
    return CMF_OK;
}

cmf_status cmf__sign_verify(const char *path, const char *sig_path, char pubkey_hex[65], cmf__progress_fn progress,
                            void *ctx)
{
    cmf_status st = init_sodium();
    if (st) return st;
    char *text = NULL;
    size_t len = 0;
    if ((st = cmf__read_file(sig_path, &text, &len)) != CMF_OK) return st;
    json_t *j = NULL;
    st = cmf__json_parse(text, len, sig_path, &j);
    free(text);
    if (st) return CMF_ERR_PARSE;
    uint8_t pk[32], sha[32], sig[crypto_sign_BYTES], digest[32];
    const json_t *alg = json_object_get(j, "alg");
    if (!json_is_string(alg) || strcmp(json_string_value(alg), CMF_SIG_ALG) != 0) {
        st = cmf__error(CMF_ERR_PARSE, "%s: \"alg\" must be \"%s\"", sig_path, CMF_SIG_ALG);
        goto done;
    }
    if ((st = sig_field(j, "pubkey", 64, pk, sig_path)) || (st = sig_field(j, "sha256", 64, sha, sig_path)) ||
        (st = sig_field(j, "sig", 128, sig, sig_path)))
        goto done;
    if (pubkey_hex) sodium_bin2hex(pubkey_hex, 65, pk, 32);
    if (crypto_sign_verify_detached(sig, sha, sizeof sha, pk) != 0) {
        st = cmf__error(CMF_ERR_SIGNATURE, "%s: the Ed25519 signature does not match its sha256 and pubkey", sig_path);
        goto done;
    }
    if ((st = cmf__sha256_file(path, digest, progress, ctx)) != CMF_OK) goto done;
    if (sodium_memcmp(digest, sha, 32) != 0) {
        char got[65];
        sodium_bin2hex(got, sizeof got, digest, 32);
        st = cmf__error(CMF_ERR_SIGNATURE, "%s: file SHA-256 %s differs from the signed %s (%s): the file changed after signing",
                        path, got, json_string_value(json_object_get(j, "sha256")), sig_path);
    }
done:
    json_decref(j);
    return st;
}
