/* tokenizer.c — loading tokenizer.json and running the whole pipeline:
 * added tokens (leftmost-longest, before normalization for the
 * non-normalized ones), normalizer, pre-tokenizer, model, post-processor;
 * and decoding with the decoder chain, plus the streaming detokenizer.
 * Semantics follow HF `tokenizers` (Rust); offsets are not tracked. */
#include "text/tokenizer_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>

#include "util/file.h"
#include "util/json.h"

enum { TK_POST_SEQ, TK_POST_TEMPLATE };

typedef struct tk_post {
    int type;
    struct tk_post *kids;
    size_t n_kids;
    int32_t *items; /* ids to insert; -1 stands for the sequence */
    size_t n_items;
} tk_post;

typedef struct tk_added {
    int32_t id;
    uint32_t str; /* index in added_str */
    bool special, lstrip, rstrip, single_word, normalized;
} tk_added;

struct cmf__tok {
    tk_model model;
    tk_norm *norm;
    tk_pretok *pretok;
    tk_post *post;
    tk_decoder *dec;
    tk_added *added;
    size_t n_added;
    tk_strs added_str;
    tk_map added_lookup;       /* content -> added index */
    tk_trie trie_raw, trie_norm; /* value: added index */
    int32_t *id_added;         /* [vocab_size] added index or -1 */
    size_t vocab_size;
    /* Scratch (regex match data, buffers, BPE word cache) kept between
     * calls; a call that finds it locked uses a fresh one of its own. */
    pthread_mutex_t lock;
    tk_ctx *ctx;
};

/* Takes the shared context when free, else makes a private one. */
static cmf_status ctx_take(const cmf__tok *ct, tk_ctx *local, tk_ctx **out)
{
    cmf__tok *t = (cmf__tok *)ct;
    cmf_status st;
    if (pthread_mutex_trylock(&t->lock) == 0) {
        if (!t->ctx) {
            tk_ctx *c = malloc(sizeof *c);
            if (!c || (st = cmf__tk_ctx_init(c))) {
                free(c);
                pthread_mutex_unlock(&t->lock);
                goto private;
            }
            t->ctx = c;
        }
        *out = t->ctx;
        return CMF_OK;
    }
private:
    if ((st = cmf__tk_ctx_init(local))) return st;
    *out = local;
    return CMF_OK;
}

/* Big buffers and a full word cache are dropped rather than kept. */
static void ctx_give(const cmf__tok *ct, tk_ctx *local, tk_ctx *c)
{
    cmf__tok *t = (cmf__tok *)ct;
    if (c == local) {
        cmf__tk_ctx_free(local);
        return;
    }
    const size_t big = (size_t)16 << 20;
    if (c->pieces_tmp.text.cap > big || c->nbuf.cap > big || c->ptmp.cap > big || c->m_cap * sizeof(tk_span) > big ||
        c->segs_cap > big / 32 || c->pieces_tmp.cap * sizeof(tk_piece) > big || c->cache.n >= (1u << 16) ||
        c->work_cap > big / 16 || c->work2_cap > big / 16) {
        cmf__tk_ctx_free(c);
        if (cmf__tk_ctx_init(c)) {
            free(c);
            t->ctx = NULL;
        }
    }
    pthread_mutex_unlock(&t->lock);
}

/* ---- per-call context ---- */

cmf_status cmf__tk_ctx_init(tk_ctx *c)
{
    memset(c, 0, sizeof *c);
    c->md = pcre2_match_data_create(4, NULL);
    c->mctx = pcre2_match_context_create(NULL);
    c->jit = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (!c->md || !c->mctx || !c->jit) {
        cmf__tk_ctx_free(c);
        return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory (regex context)");
    }
    pcre2_jit_stack_assign(c->mctx, NULL, c->jit);
    return CMF_OK;
}

void cmf__tk_ctx_free(tk_ctx *c)
{
    if (c->md) pcre2_match_data_free(c->md);
    if (c->mctx) pcre2_match_context_free(c->mctx);
    if (c->jit) pcre2_jit_stack_free(c->jit);
    free(c->m);
    free(c->segs);
    cmf__buf_free(&c->ptmp);
    cmf__tk_pieces_free(&c->pieces_tmp);
    cmf__tk_pieces_free(&c->pieces);
    cmf__buf_free(&c->nbuf);
    cmf__buf_free(&c->nbuf2);
    cmf__tk_strlist_free(&c->list_tmp);
    cmf__tk_map_free(&c->cache);
    cmf__tok_ids_free(&c->cache_ids);
    free(c->cache_slice);
    free(c->work);
    free(c->work2);
    memset(c, 0, sizeof *c);
}

void cmf__tok_ids_free(cmf__tok_ids *v)
{
    if (!v) return;
    free(v->ids);
    memset(v, 0, sizeof *v);
}

/* ---- post-processors ---- */

static void post_free(tk_post *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n_kids; i++) post_free(&p->kids[i]);
    free(p->kids);
    free(p->items);
}

static cmf_status post_push(tk_post *p, int32_t v)
{
    size_t cap = p->n_items;
    cmf_status st = cmf__tk_grow((void **)&p->items, &cap, p->n_items + 1, sizeof(int32_t));
    if (st) return st;
    p->items[p->n_items++] = v;
    return CMF_OK;
}

/* Reads ["<s>", 0] (Roberta/Bert style) into an id. */
static cmf_status pair_id(const json_t *j, const char *key, const char *what, const char *path, int32_t *id)
{
    char p[TK_PATH_MAX];
    snprintf(p, sizeof p, "%s.%s", path, key);
    const json_t *v = json_object_get(j, key);
    const json_t *i = json_array_get(v, 1);
    if (!json_is_array(v) || !json_is_integer(i) || json_integer_value(i) < 0 || json_integer_value(i) > INT32_MAX)
        return cmf__tk_err(what, p, "expected [token, id]");
    *id = (int32_t)json_integer_value(i);
    return CMF_OK;
}

static cmf_status post_load(tk_post *p, const json_t *j, const char *what, const char *path);
/* One element of a Sequence. */
static cmf_status load_kid(void *item, const json_t *j, const char *what, const char *path)
{
    return post_load(item, j, what, path);
}

static cmf_status post_load(tk_post *p, const json_t *j, const char *what, const char *path)
{
    char q[TK_PATH_MAX];
    cmf_status st;
    memset(p, 0, sizeof *p);
    const char *tn;
    if ((st = cmf__tk_component_type(j, what, path, &tn))) return st;
    p->type = TK_POST_TEMPLATE;
    if (!strcmp(tn, "Sequence")) {
        p->type = TK_POST_SEQ;
        if ((st = cmf__tk_load_seq(j, "processors", what, path, sizeof *p->kids, load_kid, (void **)&p->kids, &p->n_kids)))
            return st;
    } else if (!strcmp(tn, "ByteLevel")) {
        return post_push(p, -1); /* offsets only */
    } else if (!strcmp(tn, "RobertaProcessing") || !strcmp(tn, "BertProcessing")) {
        int32_t cls, sep;
        if ((st = pair_id(j, "cls", what, path, &cls)) || (st = pair_id(j, "sep", what, path, &sep))) return st;
        if ((st = post_push(p, cls)) || (st = post_push(p, -1)) || (st = post_push(p, sep))) return st;
    } else if (!strcmp(tn, "TemplateProcessing")) {
        const json_t *single = json_object_get(j, "single"), *sp = json_object_get(j, "special_tokens");
        snprintf(q, sizeof q, "%s.single", path);
        if (!json_is_array(single)) return cmf__tk_err(what, q, "expected an array");
        for (size_t i = 0; i < json_array_size(single); i++) {
            const json_t *it = json_array_get(single, i);
            const json_t *s = json_object_get(it, "SpecialToken"), *seq = json_object_get(it, "Sequence");
            snprintf(q, sizeof q, "%s.single[%zu]", path, i);
            if (json_is_object(seq)) {
                if ((st = post_push(p, -1))) return st;
                continue;
            }
            const json_t *name = json_object_get(s, "id");
            if (!json_is_object(s) || !json_is_string(name))
                return cmf__tk_err(what, q, "expected {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}");
            const json_t *def = json_object_get(sp, json_string_value(name));
            const json_t *ids = json_object_get(def, "ids");
            if (!json_is_array(ids))
                return cmf__tk_err(what, q, "special token '%s' missing from special_tokens", json_string_value(name));
            for (size_t k = 0; k < json_array_size(ids); k++) {
                const json_t *x = json_array_get(ids, k);
                if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
                    return cmf__tk_err(what, q, "special token '%s': bad id", json_string_value(name));
                if ((st = post_push(p, (int32_t)json_integer_value(x)))) return st;
            }
        }
    } else return cmf__tk_unknown_type(what, path, tn);
    return CMF_OK;
}

/* The ids a post-processor inserts are emitted as they are: each must be
 * one of the tokenizer's ids. */
static cmf_status post_check(const tk_post *p, size_t vocab_size, const char *what, const char *path)
{
    char q[TK_PATH_MAX];
    cmf_status st;
    for (size_t i = 0; i < p->n_kids; i++) {
        snprintf(q, sizeof q, "%s.processors[%zu]", path, i);
        if ((st = post_check(&p->kids[i], vocab_size, what, q))) return st;
    }
    for (size_t i = 0; i < p->n_items; i++)
        if (p->items[i] >= 0 && (size_t)p->items[i] >= vocab_size)
            return cmf__tk_err(what, path, "token id %d is outside the vocabulary (ids 0..%zu)", p->items[i],
                               vocab_size - 1);
    return CMF_OK;
}

static cmf_status post_apply(const tk_post *p, cmf__tok_ids *ids, size_t from)
{
    cmf_status st;
    if (p->type == TK_POST_SEQ) {
        for (size_t i = 0; i < p->n_kids; i++)
            if ((st = post_apply(&p->kids[i], ids, from))) return st;
        return CMF_OK;
    }
    size_t n = ids->n - from, extra = 0, seqs = 0;
    for (size_t i = 0; i < p->n_items; i++) {
        if (p->items[i] < 0) seqs++;
        else extra++;
    }
    int32_t *seq = malloc((n ? n : 1) * sizeof *seq);
    if (!seq) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
    if (n) memcpy(seq, ids->ids + from, n * sizeof *seq);
    if ((st = cmf__tk_grow((void **)&ids->ids, &ids->cap, from + extra + seqs * n, sizeof(int32_t)))) {
        free(seq);
        return st;
    }
    ids->n = from;
    for (size_t i = 0; i < p->n_items; i++) {
        if (p->items[i] >= 0) ids->ids[ids->n++] = p->items[i];
        else if (n) {
            memcpy(ids->ids + ids->n, seq, n * sizeof *seq);
            ids->n += n;
        }
    }
    free(seq);
    return CMF_OK;
}

/* ---- added tokens ---- */

static const char *added_text(const cmf__tok *t, const tk_added *a, size_t *len)
{
    *len = t->added_str.len[a->str];
    return t->added_str.pool + t->added_str.off[a->str];
}

static cmf_status load_added(cmf__tok *t, const json_t *arr, const char *what)
{
    char p[TK_PATH_MAX];
    cmf_status st;
    if (!arr || json_is_null(arr)) return CMF_OK;
    if (!json_is_array(arr)) return cmf__tk_err(what, "added_tokens", "expected an array");
    size_t n = json_array_size(arr);
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (!t->added) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        snprintf(p, sizeof p, "added_tokens[%zu]", i);
        if (!json_is_object(e)) return cmf__tk_err(what, p, "expected an object");
        const json_t *id = json_object_get(e, "id");
        const char *c;
        size_t cl;
        snprintf(p, sizeof p, "added_tokens[%zu].id", i);
        if (!json_is_integer(id) || json_integer_value(id) < 0) return cmf__tk_err(what, p, "expected a non-negative integer");
        /* the id space: the model's entries and the added tokens */
        if ((st = cmf__tk_check_id(json_integer_value(id), t->model.n_entries + n, what, p))) return st;
        snprintf(p, sizeof p, "added_tokens[%zu]", i);
        if ((st = cmf__tk_opt_str(e, "content", what, p, &c, &cl))) return st;
        if (!c || !cl) {
            snprintf(p, sizeof p, "added_tokens[%zu].content", i);
            return cmf__tk_err(what, p, "expected a non-empty string");
        }
        tk_added *a = &t->added[t->n_added++];
        a->id = (int32_t)json_integer_value(id);
        if ((st = cmf__tk_opt_bool(e, "special", what, p, false, &a->special))) return st;
        if ((st = cmf__tk_opt_bool(e, "lstrip", what, p, false, &a->lstrip))) return st;
        if ((st = cmf__tk_opt_bool(e, "rstrip", what, p, false, &a->rstrip))) return st;
        if ((st = cmf__tk_opt_bool(e, "single_word", what, p, false, &a->single_word))) return st;
        /* HF's default: normalized = !special. */
        if ((st = cmf__tk_opt_bool(e, "normalized", what, p, !a->special, &a->normalized))) return st;
        if ((st = cmf__tk_strs_add(&t->added_str, c, cl, &a->str))) return st;
        if ((st = cmf__tk_map_put(&t->added_lookup, c, cl, (int32_t)(t->n_added - 1), true))) return st;
    }
    return CMF_OK;
}

static cmf_status build_added(cmf__tok *t)
{
    cmf_status st;
    tk_ctx ctx;
    cmf__buf nb = {0};
    if ((st = cmf__tk_ctx_init(&ctx))) return st;
    for (size_t i = 0; i < t->n_added && !st; i++) {
        tk_added *a = &t->added[i];
        size_t len;
        const char *s = added_text(t, a, &len);
        if (a->normalized && t->norm) {
            nb.len = 0;
            if ((st = cmf__tk_norm_apply(t->norm, &ctx, s, len, &nb))) break;
            if (nb.len) st = cmf__tk_trie_add(&t->trie_norm, (const char *)nb.data, nb.len, (int32_t)i);
        } else if (a->normalized) st = cmf__tk_trie_add(&t->trie_norm, s, len, (int32_t)i);
        else st = cmf__tk_trie_add(&t->trie_raw, s, len, (int32_t)i);
    }
    cmf__buf_free(&nb);
    cmf__tk_ctx_free(&ctx);
    if (st) return st;
    size_t vs = t->model.vocab.n;
    for (size_t i = 0; i < t->n_added; i++)
        if ((size_t)t->added[i].id + 1 > vs) vs = (size_t)t->added[i].id + 1;
    t->vocab_size = vs;
    t->id_added = malloc((vs ? vs : 1) * sizeof *t->id_added);
    if (!t->id_added) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < vs; i++) t->id_added[i] = -1;
    for (size_t i = 0; i < t->n_added; i++) t->id_added[t->added[i].id] = (int32_t)i;
    return CMF_OK;
}

/* ---- load ---- */

cmf_status cmf__tok_load(const char *json, size_t len, const char *what, cmf__tok **out)
{
    json_t *root = NULL;
    cmf_status st;
    *out = NULL;
    if (!what) what = "tokenizer.json";
    if (!json && len) return cmf__error(CMF_ERR_ARG, "tokenizer: load: NULL data");
    /* The vocab and merges are read by the fast reader; jansson parses a
     * copy where they are blanked. */
    tk_raw raw;
    cmf__tkj_locate(json ? json : "", len, what, &raw);
    /* The copy leaves the two big values out: doc[..a) "{}" doc[b..c) "[]" doc[d..). */
    cmf__buf copy = {0};
    tk_span sp[2] = {raw.vocab, raw.merges};
    if (sp[0].len && sp[1].len && sp[1].off < sp[0].off) {
        tk_span x = sp[0];
        sp[0] = sp[1];
        sp[1] = x;
    }
    size_t at = 0;
    st = CMF_OK;
    for (int i = 0; i < 2 && !st; i++) {
        if (sp[i].len < 2) continue;
        char pair[2] = {json[sp[i].off], json[sp[i].off] == '{' ? '}' : ']'};
        st = cmf__buf_append(&copy, json + at, sp[i].off - at);
        if (!st) st = cmf__buf_append(&copy, pair, 2);
        at = sp[i].off + sp[i].len;
    }
    if (!st) st = cmf__buf_append(&copy, json ? json + at : "", len - at);
    if (!st) st = cmf__json_parse(copy.data ? (const char *)copy.data : "", copy.len, what, &root);
    cmf__buf_free(&copy);
    if (st) return st;
    cmf__tok *t = calloc(1, sizeof *t);
    if (!t) {
        json_decref(root);
        return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
    }
    pthread_mutex_init(&t->lock, NULL);
    const json_t *v;
    if (!json_is_object(root)) {
        st = cmf__tk_err(what, "(root)", "expected an object");
        goto fail;
    }
    v = json_object_get(root, "model");
    if (!v) {
        st = cmf__tk_err(what, "model", "missing");
        goto fail;
    }
    if ((st = cmf__tk_model_load(&t->model, v, json, &raw, what))) goto fail;
    if ((v = json_object_get(root, "normalizer")) && !json_is_null(v)) {
        if (!(t->norm = calloc(1, sizeof *t->norm))) goto nomem;
        if ((st = cmf__tk_norm_load(t->norm, v, what, "normalizer"))) goto fail;
    }
    if ((v = json_object_get(root, "pre_tokenizer")) && !json_is_null(v)) {
        if (!(t->pretok = calloc(1, sizeof *t->pretok))) goto nomem;
        if ((st = cmf__tk_pretok_load(t->pretok, v, what, "pre_tokenizer"))) goto fail;
    }
    if ((v = json_object_get(root, "post_processor")) && !json_is_null(v)) {
        if (!(t->post = calloc(1, sizeof *t->post))) goto nomem;
        if ((st = post_load(t->post, v, what, "post_processor"))) goto fail;
    }
    if ((v = json_object_get(root, "decoder")) && !json_is_null(v)) {
        if (!(t->dec = calloc(1, sizeof *t->dec))) goto nomem;
        if ((st = cmf__tk_decoder_load(t->dec, v, what, "decoder"))) goto fail;
    }
    if ((st = load_added(t, json_object_get(root, "added_tokens"), what))) goto fail;
    if ((st = build_added(t))) goto fail;
    if (t->post && (st = post_check(t->post, t->vocab_size, what, "post_processor"))) goto fail;
    json_decref(root);
    *out = t;
    return CMF_OK;
nomem:
    st = cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
fail:
    json_decref(root);
    cmf__tok_free(t);
    return st;
}

cmf_status cmf__tok_load_path(const char *path, cmf__tok **out)
{
    char *full = NULL;
    struct stat sb;
    const char *file = path;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path);
        full = malloc(n + 16);
        if (!full) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
        snprintf(full, n + 16, "%s/tokenizer.json", path);
        file = full;
    }
    cmf__mapping map = {0};
    cmf_status st = cmf__map_file(file, &map);
    if (!st) st = cmf__tok_load((const char *)map.data, (size_t)map.size, file, out);
    cmf__unmap(&map);
    free(full);
    return st;
}

void cmf__tok_free(cmf__tok *t)
{
    if (!t) return;
    cmf__tk_model_free(&t->model);
    cmf__tk_norm_free(t->norm);
    free(t->norm);
    cmf__tk_pretok_free(t->pretok);
    free(t->pretok);
    post_free(t->post);
    free(t->post);
    cmf__tk_decoder_free(t->dec);
    free(t->dec);
    free(t->added);
    cmf__tk_strs_free(&t->added_str);
    cmf__tk_map_free(&t->added_lookup);
    cmf__tk_trie_free(&t->trie_raw);
    cmf__tk_trie_free(&t->trie_norm);
    free(t->id_added);
    if (t->ctx) {
        cmf__tk_ctx_free(t->ctx);
        free(t->ctx);
    }
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* ---- encode ---- */

typedef struct tk_seg {
    size_t off, len;
    int32_t added; /* added index or -1 */
} tk_seg;

static bool last_is_word(const char *s, size_t end)
{
    if (!end) return false;
    size_t k = end - 1;
    while (k > 0 && ((uint8_t)s[k] & 0xC0) == 0x80) k--;
    uint32_t c;
    if (!cmf__utf8_next((const uint8_t *)s + k, end - k, &c)) return false;
    return c == '_' || cmf__uni_is_alphanumeric(c);
}

static bool first_is_word(const char *s, size_t len)
{
    uint32_t c;
    if (!len || !cmf__utf8_next((const uint8_t *)s, len, &c)) return false;
    return c == '_' || cmf__uni_is_alphanumeric(c);
}

/* Splits s on the added tokens of `trie` (leftmost-longest) into segs. */
static cmf_status split_added(const cmf__tok *t, const tk_trie *trie, const char *s, size_t len, tk_seg **segs,
                              size_t *n, size_t *cap)
{
    cmf_status st;
    size_t start_off = 0, i = 0;
    *n = 0;
    const uint8_t *p = (const uint8_t *)s;
    while (trie->n_nodes && i < len) {
        if (!trie->first[p[i]]) { i++; continue; }
        uint32_t node = 0;
        int32_t best = -1;
        size_t best_end = 0;
        for (size_t k = i; k < len; k++) {
            node = cmf__tk_trie_step(trie, node, p[k]);
            if (!node) break;
            if (trie->value[node] >= 0) {
                best = trie->value[node];
                best_end = k + 1;
            }
        }
        if (best < 0) { i++; continue; }
        const tk_added *a = &t->added[best];
        size_t a0 = i, a1 = best_end;
        if (a->single_word && ((a0 > 0 && last_is_word(s, a0)) || (a1 < len && first_is_word(s + a1, len - a1)))) {
            i++;
            continue;
        }
        if (a->lstrip) {
            size_t k = a0;
            while (k > 0) {
                size_t q = k - 1;
                while (q > 0 && (p[q] & 0xC0) == 0x80) q--;
                uint32_t c;
                if (!cmf__utf8_next(p + q, k - q, &c) || !cmf__uni_is_whitespace(c)) break;
                k = q;
            }
            a0 = k > start_off ? k : start_off;
        }
        if (a->rstrip) {
            while (a1 < len) {
                uint32_t c;
                size_t l = cmf__utf8_next(p + a1, len - a1, &c);
                if (!l || !cmf__uni_is_whitespace(c)) break;
                a1 += l;
            }
        }
        if ((st = cmf__tk_grow((void **)segs, cap, *n + 2, sizeof **segs))) return st;
        if (start_off < a0) (*segs)[(*n)++] = (tk_seg){start_off, a0 - start_off, -1};
        (*segs)[(*n)++] = (tk_seg){a0, a1 - a0, best};
        start_off = a1;
        i = a1;
    }
    if (start_off < len) {
        if ((st = cmf__tk_grow((void **)segs, cap, *n + 1, sizeof **segs))) return st;
        (*segs)[(*n)++] = (tk_seg){start_off, len - start_off, -1};
    }
    return CMF_OK;
}

static cmf_status push_id(cmf__tok_ids *out, int32_t id)
{
    cmf_status st = cmf__tk_grow((void **)&out->ids, &out->cap, out->n + 1, sizeof(int32_t));
    if (st) return st;
    out->ids[out->n++] = id;
    return CMF_OK;
}

static cmf_status encode_plain(const cmf__tok *t, tk_ctx *ctx, const char *s, size_t len, bool at_start,
                               tk_pieces *pcs, cmf__tok_ids *out)
{
    cmf_status st;
    pcs->text.len = 0;
    pcs->n = 0;
    if ((st = cmf__tk_pieces_push(pcs, s, len, at_start))) return st;
    if (t->pretok && (st = cmf__tk_pretok_apply(t->pretok, ctx, pcs))) return st;
    for (size_t i = 0; i < pcs->n; i++)
        if ((st = cmf__tk_model_encode(&t->model, ctx, (const char *)pcs->text.data + pcs->v[i].off, pcs->v[i].len,
                                       out)))
            return st;
    return CMF_OK;
}

cmf_status cmf__tok_encode(const cmf__tok *t, const char *text, size_t len, bool add_special_tokens,
                           cmf__tok_ids *out)
{
    cmf_status st;
    tk_ctx local, *ctx;
    cmf__buf fixed = {0};
    tk_seg *segs = NULL, *segs2 = NULL;
    size_t n1 = 0, c1 = 0, n2 = 0, c2 = 0;
    size_t from = out->n;
    if (!t || (!text && len)) return cmf__error(CMF_ERR_ARG, "tokenizer: encode: NULL argument");
    if (!text) text = "";
    if ((st = ctx_take(t, &local, &ctx))) return st;
    if (!cmf__utf8_valid(text, len)) {
        if ((st = cmf__utf8_lossy(text, len, &fixed))) goto done;
        text = (const char *)fixed.data;
        len = fixed.len;
    }
    if ((st = split_added(t, &t->trie_raw, text, len, &segs, &n1, &c1))) goto done;
    for (size_t i = 0; i < n1; i++) {
        if (segs[i].added >= 0) {
            if ((st = push_id(out, t->added[segs[i].added].id))) goto done;
            continue;
        }
        const char *s = text + segs[i].off;
        size_t sl = segs[i].len;
        if (t->norm) {
            ctx->nbuf.len = 0;
            if ((st = cmf__tk_norm_apply(t->norm, ctx, s, sl, &ctx->nbuf))) goto done;
            s = ctx->nbuf.data ? (const char *)ctx->nbuf.data : "";
            sl = ctx->nbuf.len;
        }
        if ((st = split_added(t, &t->trie_norm, s, sl, &segs2, &n2, &c2))) goto done;
        for (size_t k = 0; k < n2; k++) {
            if (segs2[k].added >= 0) st = push_id(out, t->added[segs2[k].added].id);
            else
                st = encode_plain(t, ctx, s + segs2[k].off, segs2[k].len, segs[i].off == 0 && segs2[k].off == 0,
                                  &ctx->pieces, out);
            if (st) goto done;
        }
    }
    if (add_special_tokens && t->post) st = post_apply(t->post, out, from);
done:
    if (st) out->n = from;
    cmf__buf_free(&fixed);
    free(segs);
    free(segs2);
    ctx_give(t, &local, ctx);
    return st;
}

/* ---- vocabulary queries ---- */

size_t cmf__tok_vocab_size(const cmf__tok *t)
{
    return t ? t->vocab_size : 0;
}

static const char *piece_of(const cmf__tok *t, int32_t id, size_t *len)
{
    if (id < 0 || (size_t)id >= t->vocab_size) return NULL;
    if (t->id_added[id] >= 0) return added_text(t, &t->added[t->id_added[id]], len);
    if ((size_t)id >= t->model.vocab.n || t->model.vocab.off[id] == UINT32_MAX) return NULL;
    *len = t->model.vocab.len[id];
    return t->model.vocab.pool + t->model.vocab.off[id];
}

const char *cmf__tok_piece(const cmf__tok *t, int32_t id)
{
    size_t len;
    return t ? piece_of(t, id, &len) : NULL;
}

const char *cmf__tok_piece_n(const cmf__tok *t, int32_t id, size_t *len)
{
    *len = 0;
    return t ? piece_of(t, id, len) : NULL;
}

const tk_decoder *cmf__tok_decoder_of(const cmf__tok *t)
{
    return t ? t->dec : NULL;
}

int32_t cmf__tok_lookup(const cmf__tok *t, const char *piece, size_t len)
{
    if (!t || !piece) return -1;
    int32_t a = cmf__tk_map_get(&t->added_lookup, piece, len);
    if (a >= 0) return t->added[a].id;
    return cmf__tk_map_get(&t->model.lookup, piece, len);
}

bool cmf__tok_is_special(const cmf__tok *t, int32_t id)
{
    if (!t || id < 0 || (size_t)id >= t->vocab_size || t->id_added[id] < 0) return false;
    return t->added[t->id_added[id]].special;
}

bool cmf__tok_is_added(const cmf__tok *t, int32_t id)
{
    return t && id >= 0 && (size_t)id < t->vocab_size && t->id_added[id] >= 0;
}

/* ---- decode ---- */

cmf_status cmf__tok_decode(const cmf__tok *t, const int32_t *ids, size_t n, bool skip_special_tokens, char **out,
                           size_t *out_len)
{
    cmf_status st = CMF_OK;
    tk_strlist list = {0};
    cmf__buf res = {0};
    tk_ctx local, *ctx;
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!t || (!ids && n)) return cmf__error(CMF_ERR_ARG, "tokenizer: decode: NULL argument");
    if ((st = ctx_take(t, &local, &ctx))) return st;
    for (size_t i = 0; i < n && !st; i++) {
        size_t len;
        const char *p = piece_of(t, ids[i], &len);
        if (!p) continue; /* HF drops ids it does not know */
        if (skip_special_tokens && cmf__tok_is_special(t, ids[i])) continue;
        st = cmf__tk_strlist_push(&list, p, len);
    }
    if (!st && t->dec) st = cmf__tk_decoder_apply(t->dec, ctx, &list);
    for (size_t i = 0; i < list.n && !st; i++) {
        if (!t->dec && i > 0) st = cmf__buf_append(&res, " ", 1);
        if (!st) st = cmf__buf_append(&res, list.text.data + list.v[i].off, list.v[i].len);
    }
    if (!st) st = cmf__buf_reserve(&res, 1);
    if (!st) {
        res.data[res.len] = 0;
        *out = (char *)res.data;
        if (out_len) *out_len = res.len;
    } else cmf__buf_free(&res);
    cmf__tk_strlist_free(&list);
    ctx_give(t, &local, ctx);
    return st;
}

/* ---- streaming ---- */

/* The window ids[0..n) is decoded whole at each step; ids[0..round_start)
 * are context whose text was already given out, `emitted` bytes of the
 * window's text have been given out. A trailing run of U+FFFD may be an
 * incomplete character still growing, so it is held back; everything
 * before it is final (a lossy UTF-8 read only changes its last replacement
 * when more bytes come). When nothing is held back the window restarts
 * from this round's ids, which stay as context (decoders such as Metaspace
 * and Strip treat the first token specially), as HF's DecodeStream does. */
struct cmf__tok_stream {
    const cmf__tok *tok;
    bool skip;
    cmf__tok_ids ids;
    size_t round_start;
    size_t emitted;
    char *out;          /* last returned text */
};

cmf_status cmf__tok_stream_new(const cmf__tok *tok, bool skip_special_tokens, cmf__tok_stream **out)
{
    *out = NULL;
    if (!tok) return cmf__error(CMF_ERR_ARG, "tokenizer: stream: NULL tokenizer");
    cmf__tok_stream *s = calloc(1, sizeof *s);
    if (!s) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
    s->tok = tok;
    s->skip = skip_special_tokens;
    *out = s;
    return CMF_OK;
}

static cmf_status stream_emit(cmf__tok_stream *s, const char *str, size_t from, size_t to, const char **text,
                              size_t *text_len)
{
    free(s->out);
    s->out = NULL;
    if (to <= from) return CMF_OK;
    if (!(s->out = cmf__tk_dup(str + from, to - from))) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
    *text = s->out;
    *text_len = to - from;
    return CMF_OK;
}

cmf_status cmf__tok_stream_push(cmf__tok_stream *s, int32_t id, const char **text, size_t *text_len)
{
    cmf_status st;
    char *str = NULL;
    size_t len = 0;
    *text = "";
    *text_len = 0;
    if ((st = push_id(&s->ids, id))) return st;
    if ((st = cmf__tok_decode(s->tok, s->ids.ids, s->ids.n, s->skip, &str, &len))) return st;
    size_t safe = len;
    while (safe >= 3 && !memcmp(str + safe - 3, "\xEF\xBF\xBD", 3)) safe -= 3;
    if (safe > s->emitted) {
        st = stream_emit(s, str, s->emitted, safe, text, text_len);
        s->emitted = safe;
    }
    free(str);
    if (st || safe != len) return st;
    /* Everything is out: restart the window from this round's ids. */
    size_t from = s->round_start;
    memmove(s->ids.ids, s->ids.ids + from, (s->ids.n - from) * sizeof(int32_t));
    s->ids.n -= from;
    s->round_start = s->ids.n;
    if ((st = cmf__tok_decode(s->tok, s->ids.ids, s->ids.n, s->skip, &str, &len))) return st;
    free(str);
    s->emitted = len;
    return CMF_OK;
}

cmf_status cmf__tok_stream_flush(cmf__tok_stream *s, const char **text, size_t *text_len)
{
    cmf_status st;
    char *str = NULL;
    size_t len = 0;
    *text = "";
    *text_len = 0;
    if ((st = cmf__tok_decode(s->tok, s->ids.ids, s->ids.n, s->skip, &str, &len))) return st;
    st = stream_emit(s, str, s->emitted, len, text, text_len);
    free(str);
    s->ids.n = 0;
    s->round_start = 0;
    s->emitted = 0;
    return st;
}

void cmf__tok_stream_free(cmf__tok_stream *s)
{
    if (!s) return;
    cmf__tok_ids_free(&s->ids);
    free(s->out);
    free(s);
}
