/* verify.c — the integrity chain of §8.1 over every shard: envelope header
 * and directory hashes, section_hashes, then every tensor's hash64, hashed
 * in 64 MiB chunks on a pool (hash64 XORs per-word terms, so chunk folds
 * combine). Every mismatch is listed by name; nothing stops at the first.
 * hash64 is not cryptographic (docs/FORMAT.md); the .sig check is sign.c. */
#include "format/format_internal.h"
#include "util/arith.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/pool.h"

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

uint64_t cmf__fmt_verify_chunk = 64ull << 20;
#define CHUNK (cmf__fmt_verify_chunk & ~7ull ? cmf__fmt_verify_chunk & ~7ull : 8) /* word multiple */

typedef struct chunk {
    const uint8_t *data;
    uint64_t len, first_word;
    cmf__hash64_state st;
} chunk;

static void hash_chunk(void *ctx, int task, int thread)
{
    (void)thread;
    chunk *c = &((chunk *)ctx)[task];
    cmf__hash64_init(&c->st);
    c->st.n_words = c->first_word; /* the positional salt continues from here */
    cmf__hash64_update(&c->st, c->data, (size_t)c->len);
}

/* Hashes every tensor into hashes[]: chunks fan out over the pool in
 * batches, progress is reported between batches on this thread. */
static cmf_status hash_tensors(const cmf__file *f, uint64_t *hashes, cmf__progress_fn progress, void *ctx)
{
    uint64_t total = 0, n_chunks = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        total += f->tensors[i].nbytes;
        n_chunks += f->tensors[i].nbytes ? cmf__div_ceil(f->tensors[i].nbytes, CHUNK) : 1;
    }
    chunk *cs = calloc((size_t)n_chunks + 1, sizeof *cs);
    uint64_t *owner = calloc((size_t)n_chunks + 1, sizeof *owner);
    if (!cs || !owner) {
        free(cs);
        free(owner);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", f->path);
    }
    uint64_t k = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const cmf__tensor *t = &f->tensors[i];
        uint64_t at = 0;
        do {
            uint64_t len = t->nbytes - at < CHUNK ? t->nbytes - at : CHUNK;
            cs[k] = (chunk){.data = t->data + at, .len = len, .first_word = at / 8};
            owner[k++] = i;
            at += len;
        } while (at < t->nbytes);
    }
    cmf__pool *pool = total > CHUNK ? cmf__pool_new(cmf__cpu_count() < 16 ? cmf__cpu_count() : 16) : NULL;
    int batch = pool ? 4 * cmf__pool_threads(pool) : 64;
    uint64_t done = 0;
    for (uint64_t b = 0; b < n_chunks; b += (uint64_t)batch) {
        int n = n_chunks - b < (uint64_t)batch ? (int)(n_chunks - b) : batch;
        cmf__pool_run(pool, n, hash_chunk, cs + b);
        for (int j = 0; j < n; j++) done += cs[b + (uint64_t)j].len;
        if (progress) progress(ctx, done, total);
    }
    cmf__pool_free(pool);
    /* Fold: XOR the chunk accumulators; the tensor's last chunk carries the
     * tail bytes and the word count, so it finishes the hash. */
    for (uint64_t c = 0; c < n_chunks;) {
        uint64_t i = owner[c], acc = 0;
        uint64_t last = c;
        for (; last < n_chunks && owner[last] == i; last++) acc ^= cs[last].st.acc;
        cmf__hash64_state st = cs[last - 1].st;
        st.acc = acc;
        st.len = f->tensors[i].nbytes;
        hashes[i] = cmf__hash64_final(&st);
        c = last;
    }
    free(cs);
    free(owner);
    return CMF_OK;
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

/* The envelope's header and directory hashes and section_hashes of every
 * shard: everything but the tensors' payloads. */
static void check_meta(problems *pp, const cmf__file *f)
{
    for (uint32_t si = 0; si < f->n_shards; si++) {
        const cmf__shard *sh = &f->shards[si];
        if (sh->header_hash) {
            uint64_t h = cmf__hash64(sh->header.data, (size_t)sh->header.len);
            if (h != sh->header_hash)
                add(pp, "%s: header JSON at 0x%llx (%llu bytes): hash %016llx != envelope [0x70] %016llx", sh->path,
                    (unsigned long long)sh->header.off, (unsigned long long)sh->header.len, (unsigned long long)h,
                    (unsigned long long)sh->header_hash);
        }
        if (sh->dir_hash) {
            uint64_t h = cmf__hash64(sh->dir.data, (size_t)sh->dir.len);
            if (h != sh->dir_hash)
                add(pp, "%s: directory at 0x%llx (%llu bytes): hash %016llx != envelope [0x78] %016llx", sh->path,
                    (unsigned long long)sh->dir.off, (unsigned long long)sh->dir.len, (unsigned long long)h,
                    (unsigned long long)sh->dir_hash);
        }
        const json_t *hashes = json_object_get(sh->header_json, "section_hashes");
        if (hashes && !json_is_object(hashes)) {
            add(pp, "%s: header section_hashes is not an object", sh->path);
        } else if (hashes) {
            check_section(pp, sh, hashes, "masks", &sh->masks);
            check_section(pp, sh, hashes, "vocab", &sh->vocab);
            check_section(pp, sh, hashes, "index", &sh->index);
        }
    }
}

cmf_status cmf__file_verify(const cmf__file *f, cmf__progress_fn progress, void *ctx,
                            cmf__verify_problem **out, size_t *n_out)
{
    problems p = {0};
    uint64_t total = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) total += f->tensors[i].nbytes;
    check_meta(&p, f);
    uint64_t *hashes = calloc((size_t)f->n_tensors + 1, sizeof *hashes);
    if (!hashes) {
        free(p.v);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", f->path);
    }
    cmf_status hst = hash_tensors(f, hashes, progress, ctx);
    if (hst != CMF_OK) {
        free(hashes);
        free(p.v);
        return hst;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const cmf__tensor *t = &f->tensors[i];
        const cmf__shard *sh = &f->shards[t->shard];
        if (hashes[i] != t->hash)
            add(&p, "%s: tensor '%s' at 0x%llx (%llu bytes): hash %016llx != stored %016llx", sh->path, t->name,
                (unsigned long long)(sh->data.off + t->off), (unsigned long long)t->nbytes,
                (unsigned long long)hashes[i], (unsigned long long)t->hash);
    }
    free(hashes);
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

cmf_status cmf__file_verify_meta(const cmf__file *f)
{
    problems p = {0};
    check_meta(&p, f);
    cmf_status st = CMF_OK;
    if (p.oom) st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory listing verify problems", f->path);
    else if (p.n)
        st = cmf__error(CMF_ERR_HASH, "%s: %zu integrity problem%s, first: %s", f->path, p.n, p.n == 1 ? "" : "s",
                        p.v[0].what);
    free(p.v);
    return st;
}
