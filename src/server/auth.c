/* auth.c — bearer keys: each accepted key is kept only as its BLAKE2b-256
 * digest, and a presented key is hashed the same way and compared with
 * sodium_memcmp against every digest, so neither the comparison's time
 * nor its length depends on where the keys differ. */
#include "server/srv.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void digest(const char *key, size_t len, unsigned char out[32])
{
    crypto_generichash(out, 32, (const unsigned char *)key, len, NULL, 0);
}

bool cmf__srv_auth_init(srv_auth *a, const char *const *keys, size_t n)
{
    a->digest = NULL;
    a->n = 0;
    if (!n) return true;
    if (sodium_init() < 0) return false;
    a->digest = calloc(n, sizeof *a->digest);
    if (!a->digest) return false;
    for (size_t i = 0; i < n; i++) digest(keys[i], strlen(keys[i]), a->digest[i]);
    a->n = n;
    return true;
}

void cmf__srv_auth_free(srv_auth *a)
{
    if (a->digest) sodium_memzero(a->digest, a->n * sizeof *a->digest);
    free(a->digest);
    a->digest = NULL;
    a->n = 0;
}

bool cmf__srv_auth_check(const srv_auth *a, const char *header)
{
    if (!a->n) return true;
    if (!header || strncasecmp(header, "Bearer ", 7)) return false;
    const char *key = header + 7;
    while (*key == ' ') key++;
    size_t len = strlen(key);
    while (len && (key[len - 1] == ' ' || key[len - 1] == '\t')) len--;
    if (!len) return false;
    unsigned char d[32];
    digest(key, len, d);
    int ok = 0;
    for (size_t i = 0; i < a->n; i++) ok |= sodium_memcmp(d, a->digest[i], 32) == 0;
    return ok;
}
