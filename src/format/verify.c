/* verify.c — the integrity chain of §8.1 over every shard of an opened
 * file: envelope hashes of header JSON and directory, the header's
 * section_hashes of masks/vocab/index, then hash64 of every tensor.
 * Every mismatch is listed by name; nothing stops at the first. hash64 is
 * not cryptographic (see docs/FORMAT.md); the .sig check is in sign.c. */
#include "format/format_internal.h"
#include "util/error.h"
#include "util/hash.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct problems {
    cmf__verify_problem *v;
    size_t n, cap;
    bool oom;
} problems;

static void add(problems *p, const char *fmt, ...) CMF_PRINTF(2, 3);
static void add(problems *p, const char *fmt, ...)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        cmf__verify_problem *v = realloc(p->v, cap * sizeof *v);
        if (!v) {
            p->oom = true;
            return;
        }
        p->v = v;
        p->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->v[p->n].what, sizeof p->v[p->n].what, fmt, ap);
    va_end(ap);
    p->n++;
}

/* hash64 in 64 MiB steps so progress moves on big tensors. */
static uint64_t hash_progress(const uint8_t *data, uint64_t len, uint64_t *done, uint64_t total,
                              cmf__progress_fn progress, void *ctx)
{
    const uint64_t step = 64ull << 20;
    cmf__hash64_state s;
    cmf__hash64_init(&s);
    for (uint64_t at = 0; at < len; at += step) {
        uint64_t k = len - at < step ? len - at : step;
        cmf__hash64_update(&s, data + at, (size_t)k);
        *done += k;
        if (progress) progress(ctx, *done, total);
    }
    return cmf__hash64_final(&s);
}

static void check_section(problems *p, const cmf__shard *sh, const json_t *hashes, const char *key,
                          const cmf__section *sec)
{
    const json_t *v = json_object_get(hashes, key);
    if (!v) return; /* not recorded: an older file, nothing to compare */
    uint64_t want = 0;
    if (!json_is_string(v) || cmf__hash64_parse_hex(json_string_value(v), &want) != 0) {
        add(p, "%s: header section_hashes.%s is not a hex hash64", sh->path, key);
        return;
    }
    if (!sec->data) {
        add(p, "%s: header section_hashes.%s is recorded but the %s section is absent", sh->path, key, key);
        return;
    }
    uint64_t got = cmf__hash64(sec->data, (size_t)sec->len);
    if (got != want)
        add(p, "%s: %s section at 0x%llx (%llu bytes): hash %016llx != recorded %016llx", sh->path, key,
            (unsigned long long)sec->off, (unsigned long long)sec->len, (unsigned long long)got,
            (unsigned long long)want);
}

cmf_status cmf__file_verify(const cmf__file *f, cmf__progress_fn progress, void *ctx,
                            cmf__verify_problem **out, size_t *n_out)
{
    problems p = {0};
    uint64_t total = 0, done = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) total += f->tensors[i].nbytes;
    for (uint32_t si = 0; si < f->n_shards; si++) {
        const cmf__shard *sh = &f->shards[si];
        if (sh->header_hash) {
            uint64_t h = cmf__hash64(sh->header.data, (size_t)sh->header.len);
            if (h != sh->header_hash)
                add(&p, "%s: header JSON at 0x%llx (%llu bytes): hash %016llx != envelope [0x70] %016llx", sh->path,
                    (unsigned long long)sh->header.off, (unsigned long long)sh->header.len, (unsigned long long)h,
                    (unsigned long long)sh->header_hash);
        }
        if (sh->dir_hash) {
            uint64_t h = cmf__hash64(sh->dir.data, (size_t)sh->dir.len);
            if (h != sh->dir_hash)
                add(&p, "%s: directory at 0x%llx (%llu bytes): hash %016llx != envelope [0x78] %016llx", sh->path,
                    (unsigned long long)sh->dir.off, (unsigned long long)sh->dir.len, (unsigned long long)h,
                    (unsigned long long)sh->dir_hash);
        }
        const json_t *hashes = json_object_get(sh->header_json, "section_hashes");
        if (hashes && !json_is_object(hashes)) {
            add(&p, "%s: header section_hashes is not an object", sh->path);
        } else if (hashes) {
            check_section(&p, sh, hashes, "masks", &sh->masks);
            check_section(&p, sh, hashes, "vocab", &sh->vocab);
            check_section(&p, sh, hashes, "index", &sh->index);
        }
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const cmf__tensor *t = &f->tensors[i];
        const cmf__shard *sh = &f->shards[t->shard];
        uint64_t h = hash_progress(t->data, t->nbytes, &done, total, progress, ctx);
        if (h != t->hash)
            add(&p, "%s: tensor '%s' at 0x%llx (%llu bytes): hash %016llx != stored %016llx", sh->path, t->name,
                (unsigned long long)(sh->data.off + t->off), (unsigned long long)t->nbytes, (unsigned long long)h,
                (unsigned long long)t->hash);
    }
    if (progress) progress(ctx, total, total);
    if (p.oom) {
        free(p.v);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory listing verify problems", f->path);
    }
    cmf_status st = CMF_OK;
    if (p.n)
        st = cmf__error(CMF_ERR_HASH, "%s: %zu integrity problem%s, first: %s", f->path, p.n, p.n == 1 ? "" : "s",
                        p.v[0].what);
    if (out) *out = p.v;
    else free(p.v);
    if (n_out) *n_out = p.n;
    return st;
}
