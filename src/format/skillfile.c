/* skillfile.c — moving skills in and out of files (spec §9, §9.1): remove
 * (drop a skill's directory entries and registry record in place, by
 * append-only growth), export (a standalone SKILL_FILE bound to its base by
 * base_dir_hash) and apply (base + SKILL_FILE -> a complete specialist
 * file). Outputs go through the writer: atomic, nothing left on failure. */
#include "format/format_internal.h"
#include "format/skills.h"
#include "util/error.h"
#include "util/hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool has_prefix(const char *name, const char *id)
{
    size_t n = strlen(id);
    return !strncmp(name, "skill.", 6) && !strncmp(name + 6, id, n) && name[6 + n] == '.';
}

cmf_status cmf__file_backbone_dir_hash(const cmf__file *f, uint64_t *out)
{
    cmf__dir_rec *recs = calloc((size_t)f->n_tensors + 1, sizeof *recs);
    cmf__buf dir = {0};
    if (!recs) return cmf__error(CMF_ERR_NOMEM, "out of memory");
    uint64_t n = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const cmf__tensor *t = &f->tensors[i];
        if (!strncmp(t->name, "skill.", 6)) continue;
        cmf__dir_rec *r = &recs[n++];
        r->name = t->name;
        r->name_len = t->name_len;
        r->dtype = t->dtype;
        r->ndim = t->ndim;
        memcpy(r->shape, t->shape, sizeof r->shape);
        r->off = t->off;
        r->nbytes = t->nbytes;
        r->hash = t->hash;
    }
    cmf_status st = cmf__fmt_encode_dir(recs, n, &dir);
    if (!st) *out = cmf__hash64(dir.data, dir.len);
    cmf__buf_free(&dir);
    free(recs);
    return st;
}

/* ---- remove ---------------------------------------------------------------- */
static bool drop_skill(void *ctx, const char *name) { return has_prefix(name, ctx); }

cmf_status cmf__skill_remove(const char *path, const char *id, uint64_t *n_dropped, uint64_t *bytes)
{
    cmf__open_opts o = cmf__open_opts_default();
    o.single_shard = true;
    cmf__file *f = NULL;
    json_t *h = NULL;
    *n_dropped = *bytes = 0;
    cmf__lock lk; /* read-modify-write: no other writer in between */
    cmf_status st = cmf__lock_file(path, &lk);
    if (st) return st;
    if ((st = cmf__file_open(path, &o, &f))) goto done;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (has_prefix(f->tensors[i].name, id)) ++*n_dropped, *bytes += f->tensors[i].nbytes;
    size_t idx = 0;
    bool rec = cmf__skills_find(f->header, id, &idx) != NULL;
    if (!rec && !*n_dropped) {
        st = cmf__error(CMF_ERR_NOT_FOUND, "%s: skill '%s' not in this file", path, id);
        goto done;
    }
    if (!(h = json_deep_copy(f->header))) {
        st = cmf__error(CMF_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (rec) json_array_remove(json_object_get(h, "skills"), idx);
    cmf__file_free(f);
    f = NULL;
    st = cmf__file_append_drop(path, NULL, 0, h, drop_skill, (void *)id);
done:
    json_decref(h);
    cmf__file_free(f);
    cmf__unlock_file(&lk);
    return st;
}

cmf_status cmf__skill_record_set(const char *path, const char *id, const char *key, json_t *value)
{
    cmf__open_opts o = cmf__open_opts_default();
    o.single_shard = true;
    cmf__file *f = NULL;
    cmf__lock lk;
    cmf_status st = cmf__lock_file(path, &lk);
    if (st) return st;
    if ((st = cmf__file_open(path, &o, &f))) {
        cmf__unlock_file(&lk);
        return st;
    }
    json_t *h = json_deep_copy(f->header);
    json_t *rec = h ? cmf__skills_find(h, id, NULL) : NULL;
    cmf__file_free(f);
    if (!h) st = cmf__error(CMF_ERR_NOMEM, "out of memory");
    else if (!rec) st = cmf__error(CMF_ERR_NOT_FOUND, "%s: skill '%s' not in the registry", path, id);
    else if (json_object_set(rec, key, value)) st = cmf__error(CMF_ERR_NOMEM, "out of memory");
    else st = cmf__file_append(path, NULL, 0, h);
    json_decref(h);
    cmf__unlock_file(&lk);
    return st;
}

/* The writer re-hashes what it copies: a source must verify first (whole
 * chain). With `force` a failing one goes on, its first problem recorded as
 * `unverified_source` in *prov (created when NULL) and *unverified set. */
static cmf_status source_check(const cmf__file *f, const char *verb, bool force, json_t **prov, bool *unverified)
{
    cmf_status st = cmf__file_verify(f, NULL, NULL, NULL, NULL);
    if (st != CMF_ERR_HASH) return st;
    if (!force)
        return cmf__error_prefix(st, "%s: not %s a file that fails verification (cmf verify lists every problem; "
                                     "--force goes on and records it)",
                                 f->path, verb);
    if (!*prov && !(*prov = json_object())) return cmf__error(CMF_ERR_NOMEM, "out of memory");
    json_t *prev = json_object_get(*prov, "unverified_source");
    char *msg = NULL;
    const char *now = cmf_last_error();
    size_t n = strlen(now) + (json_is_string(prev) ? strlen(json_string_value(prev)) : 0) + 8;
    if (!(msg = malloc(n))) return cmf__error(CMF_ERR_NOMEM, "out of memory");
    if (json_is_string(prev)) snprintf(msg, n, "%s; %s", json_string_value(prev), now);
    else snprintf(msg, n, "%s", now);
    json_object_set_new(*prov, "unverified_source", json_string(msg));
    free(msg);
    *unverified = true;
    return CMF_OK;
}

/* ---- export ---------------------------------------------------------------- */
cmf_status cmf__skill_export(const char *path, const char *id, const char *out, bool force, uint64_t *n_tensors,
                             bool *unverified)
{
    cmf__open_opts o = cmf__open_opts_default();
    cmf__file *f = NULL;
    *unverified = false;
    cmf_status st = cmf__file_open(path, &o, &f);
    if (st) return st;
    cmf__writer *w = NULL;
    json_t *h = NULL, *rec = NULL, *prov = NULL;
    *n_tensors = 0;
    if ((st = cmf__output_check(out, (const char *const *)&path, 1))) goto done;
    if ((st = source_check(f, "exporting from", force, &prov, unverified))) goto done;
    if (f->n_shards > 1) {
        st = cmf__error(CMF_ERR_UNSUPPORTED, "%s: export from one file, not a shard set (cmf compact first)", path);
        goto done;
    }
    const json_t *r = cmf__skills_find(f->header, id, NULL);
    for (uint64_t i = 0; i < f->n_tensors; i++) *n_tensors += has_prefix(f->tensors[i].name, id);
    if (!*n_tensors) {
        st = cmf__error(CMF_ERR_NOT_FOUND, "%s: skill '%s' has no tensors in this file", path, id);
        goto done;
    }
    uint64_t bh;
    if ((st = cmf__file_backbone_dir_hash(f, &bh))) goto done;
    char hex[17];
    cmf__hash64_hex(bh, hex);
    rec = r ? json_deep_copy(r) : json_pack("{s:s}", "id", id);
    h = json_object();
    if (!rec || !h) {
        st = cmf__error(CMF_ERR_NOMEM, "out of memory");
        goto done;
    }
    const char *arch_name = json_string_value(json_object_get(f->arch, "arch_name"));
    if (!arch_name) arch_name = json_string_value(json_object_get(f->arch, "model_type"));
    json_object_set_new(rec, "base_dir_hash", json_string(hex));
    if (arch_name) json_object_set_new(rec, "base_arch", json_string(arch_name));
    if (f->arch) json_object_set(h, "arch", (json_t *)f->arch);
    json_object_set_new(h, "skills", json_pack("[O]", rec));
    if (prov) json_object_set_new(h, "provenance", json_pack("{s:O}", "skill_export", prov));
    if ((st = cmf__writer_open(out, &w))) goto done;
    if ((st = cmf__writer_set_header(w, h))) goto fail;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const cmf__tensor *t = &f->tensors[i];
        if (has_prefix(t->name, id) &&
            (st = cmf__writer_add_tensor(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes)))
            goto fail;
    }
    st = cmf__writer_finish(w); /* raises SKILL_FILE from base_dir_hash */
    goto done;
fail:
    cmf__writer_abort(w);
done:
    json_decref(h);
    json_decref(rec);
    json_decref(prov);
    cmf__file_free(f);
    return st;
}

/* ---- apply ----------------------------------------------------------------- */
cmf_status cmf__skill_apply(const char *base, const char *skill, const char *out, bool force, uint64_t *n_replaced,
                            bool *forced, bool *unverified)
{
    cmf__open_opts o = cmf__open_opts_default();
    cmf__file *b = NULL, *s = NULL;
    cmf__writer *w = NULL;
    json_t *h = NULL, *uprov = NULL;
    *n_replaced = 0;
    *forced = false;
    *unverified = false;
    cmf_status st = cmf__file_open(base, &o, &b);
    if (st) return st;
    o.allow_skill_file = true;
    if ((st = cmf__file_open(skill, &o, &s))) goto done;
    const char *ins[2] = {base, skill};
    if ((st = cmf__output_check(out, ins, 2))) goto done;
    if ((st = source_check(b, "applying onto", force, &uprov, unverified)) ||
        (st = source_check(s, "applying", force, &uprov, unverified)))
        goto done;
    /* a skill file exported with --force carries its source's problem on */
    const json_t *ex = json_object_get(json_object_get(s->header, "provenance"), "skill_export");
    const json_t *exu = json_object_get(ex, "unverified_source");
    if (json_is_string(exu)) {
        if (!uprov && !(uprov = json_object())) {
            st = cmf__error(CMF_ERR_NOMEM, "out of memory");
            goto done;
        }
        json_object_set(uprov, "skill_file_unverified_source", (json_t *)exu);
        *unverified = true;
    }
    if (b->n_shards > 1) {
        st = cmf__error(CMF_ERR_UNSUPPORTED, "%s: apply onto one file, not a shard set (cmf compact first)", base);
        goto done;
    }
    const json_t *skills = json_object_get(s->header, "skills");
    const json_t *rec = json_array_size(skills) == 1 ? json_array_get(skills, 0) : NULL;
    const char *id = json_string_value(json_object_get(rec, "id"));
    const char *want = json_string_value(json_object_get(rec, "base_dir_hash"));
    if (!(s->features & CMF_FEAT_SKILL_FILE) || !id || !want) {
        st = cmf__error(CMF_ERR_PARSE, "%s: not a skill file (header.skills must hold one record with id and "
                                       "base_dir_hash; cmf skill export writes one)", skill);
        goto done;
    }
    uint64_t have, want_h;
    if ((st = cmf__file_backbone_dir_hash(b, &have))) goto done;
    if (cmf__hash64_parse_hex(want, &want_h)) {
        st = cmf__error(CMF_ERR_PARSE, "%s: skills[0].base_dir_hash '%s' is not 16 hex digits", skill, want);
        goto done;
    }
    if (have != want_h) {
        char hx[17];
        cmf__hash64_hex(have, hx);
        if (!force) {
            st = cmf__error(CMF_ERR_HASH, "%s: skill '%s' was cut against base %s, %s is %s; --force applies it "
                                          "anyway (the result is out of spec)", skill, id, want, base, hx);
            goto done;
        }
        *forced = true;
    }
    /* Every skill tensor must replace a backbone tensor of the same shape. */
    for (uint64_t i = 0; i < s->n_tensors; i++) {
        const cmf__tensor *t = &s->tensors[i];
        if (!has_prefix(t->name, id)) {
            st = cmf__error(CMF_ERR_PARSE, "%s: tensor '%s' is not under skill.%s.", skill, t->name, id);
            goto done;
        }
        const char *name = t->name + 7 + strlen(id);
        const cmf__tensor *bt = cmf__file_find(b, name);
        bool same = bt && bt->ndim == t->ndim;
        for (int d = 0; same && d < t->ndim; d++) same = bt->shape[d] == t->shape[d];
        if (!same) {
            st = cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s' replaces '%s', which %s %s", skill, t->name, name, base,
                            bt ? "shapes differently" : "does not have");
            goto done;
        }
    }
    /* The specialist: the base's tensors with the skill's in their place;
     * the base's own skills (deltas against the backbone) are left out. */
    if (!(h = json_deep_copy(b->header))) {
        st = cmf__error(CMF_ERR_NOMEM, "out of memory");
        goto done;
    }
    json_object_del(h, "skills");
    json_t *prov = json_object_get(h, "provenance");
    if (!json_is_object(prov)) json_object_set_new(h, "provenance", prov = json_object());
    json_t *sa = json_pack("{s:s, s:s, s:b}", "id", id, "base_dir_hash", want, "forced", *forced);
    if (sa && uprov) json_object_update(sa, uprov);
    json_object_set_new(prov, "skill_applied", sa);
    if ((st = cmf__writer_open(out, &w))) goto done;
    const cmf__shard *sh = &b->shards[0];
    if ((st = cmf__writer_set_header(w, h)) || (st = cmf__writer_set_vocab(w, sh->vocab.data, sh->vocab.len)) ||
        (st = cmf__writer_set_masks(w, sh->masks.data, sh->masks.len)) ||
        (st = cmf__writer_set_index(w, sh->index.data, sh->index.len)) ||
        (st = cmf__writer_add_features(w, sh->features & CMF_FEAT_LOOP_MASKS)))
        goto fail;
    char key[512];
    for (uint64_t i = 0; i < b->n_tensors; i++) {
        const cmf__tensor *t = &b->tensors[i];
        if (!strncmp(t->name, "skill.", 6)) continue;
        snprintf(key, sizeof key, "skill.%s.%s", id, t->name);
        const cmf__tensor *r = strlen(id) + t->name_len + 8 <= sizeof key ? cmf__file_find(s, key) : NULL;
        if (r) ++*n_replaced, t = r;
        if ((st = cmf__writer_add_tensor(w, t == r ? r->name + 7 + strlen(id) : t->name, t->dtype, t->ndim, t->shape,
                                         t->data, t->nbytes)))
            goto fail;
    }
    st = cmf__writer_finish(w);
    goto done;
fail:
    cmf__writer_abort(w);
done:
    json_decref(h);
    json_decref(uprov);
    cmf__file_free(s);
    cmf__file_free(b);
    return st;
}
