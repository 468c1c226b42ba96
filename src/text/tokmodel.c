/* tokmodel.c — the tokenizer models (BPE, Unigram, WordPiece, WordLevel)
 * (the string pool, map and trie they are built on are in tokshared.c).
 * Each model maps one pre-tokenized word to ids exactly as HF `tokenizers`
 * does (BPE: lowest rank first, leftmost on ties; Unigram: Viterbi with
 * first-inserted-wins ties). BPE dropout is ignored (inference only). */
#include "text/tokenizer_impl.h"
#include "util/hash.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- model loading ---- */

static cmf_status vocab_set(tk_model *m, int64_t id, const char *s, size_t len, const char *what,
                            const char *path)
{
    cmf_status st;
    if ((st = cmf__tk_check_id(id, m->n_entries, what, path))) return st;
    size_t need = (size_t)id + 1;
    if (need > m->vocab.cap) {
        size_t c1 = m->vocab.cap, c2 = m->vocab.cap;
        if ((st = cmf__tk_grow((void **)&m->vocab.off, &c1, need, sizeof(uint32_t)))) return st;
        if ((st = cmf__tk_grow((void **)&m->vocab.len, &c2, need, sizeof(uint32_t)))) return st;
        m->vocab.cap = c1;
    }
    while (m->vocab.n < need) {
        m->vocab.off[m->vocab.n] = UINT32_MAX;
        m->vocab.len[m->vocab.n++] = 0;
    }
    if (m->vocab.pool_len + len + 1 > UINT32_MAX) return cmf__error(CMF_ERR_NOMEM, "tokenizer: vocab over 4 GiB");
    if ((st = cmf__tk_grow((void **)&m->vocab.pool, &m->vocab.pool_cap, m->vocab.pool_len + len + 1, 1))) return st;
    memcpy(m->vocab.pool + m->vocab.pool_len, s, len);
    m->vocab.pool[m->vocab.pool_len + len] = 0;
    m->vocab.off[id] = (uint32_t)m->vocab.pool_len;
    m->vocab.len[id] = (uint32_t)len;
    m->vocab.pool_len += len + 1;
    /* HF builds its reverse map from the piece->id map: the last id wins. */
    return cmf__tk_map_put(&m->lookup, s, len, (int32_t)id, true);
}

static cmf_status merge_put(tk_model *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id)
{
    uint64_t k = (((uint64_t)a << 32) | b) + 1;
    size_t i = cmf__fmix64(k) & m->merges_mask;
    while (m->merges[i].key && m->merges[i].key != k) i = (i + 1) & m->merges_mask;
    /* A repeated pair takes the later rank, as HF's HashMap insert does. */
    m->merges[i].key = k;
    m->merges[i].rank = rank;
    m->merges[i].id = id;
    return CMF_OK;
}

static const tk_merge *merge_get(const tk_model *m, uint32_t a, uint32_t b)
{
    if (!m->merges) return NULL;
    uint64_t k = (((uint64_t)a << 32) | b) + 1;
    size_t i = cmf__fmix64(k) & m->merges_mask;
    while (m->merges[i].key) {
        if (m->merges[i].key == k) return &m->merges[i];
        i = (i + 1) & m->merges_mask;
    }
    return NULL;
}

/* Merges are resolved in batches: hashing a batch first and prefetching
 * the slots it will probe hides most of the cache misses of three vocab
 * lookups and one merge-table insert per merge (the load-time hot spot). */
#define MERGE_BATCH 64
typedef struct merge_ent {
    size_t a, al, b, bl, r; /* a, b: offsets in batch text */
    uint64_t ha, hb, hj;
    size_t j;               /* joined: offset in join text */
    int32_t ia, ib;
} merge_ent;
typedef struct merge_ctx {
    tk_model *m;
    const char *what;
    cmf__buf text, join;
    merge_ent e[MERGE_BATCH];
    size_t n;
} merge_ctx;

static void prefetch_slot(const tk_map *m, uint64_t h)
{
    __builtin_prefetch(&m->slot[h & m->mask]);
}

static cmf_status flush_merges(merge_ctx *c)
{
    tk_model *m = c->m;
    char path[TK_PATH_MAX];
    cmf_status st;
    const char *t = (const char *)c->text.data;
    size_t skip = m->prefix ? m->prefix_len : 0;
    if (!m->lookup.slot) return cmf__tk_err(c->what, "model.vocab", "is empty");
    for (size_t k = 0; k < c->n; k++) {
        merge_ent *e = &c->e[k];
        e->ha = cmf__tk_hash(t + e->a, e->al);
        e->hb = cmf__tk_hash(t + e->b, e->bl);
        prefetch_slot(&m->lookup, e->ha);
        prefetch_slot(&m->lookup, e->hb);
    }
    c->join.len = 0;
    for (size_t k = 0; k < c->n; k++) {
        merge_ent *e = &c->e[k];
        e->ia = cmf__tk_map_get_hashed(&m->lookup, t + e->a, e->al, e->ha);
        e->ib = cmf__tk_map_get_hashed(&m->lookup, t + e->b, e->bl, e->hb);
        if (e->ia < 0 || e->ib < 0 || skip > e->bl) {
            snprintf(path, sizeof path, "model.merges[%zu]", e->r);
            return cmf__tk_err(c->what, path, "token '%.*s' not in vocab", (int)(e->ia < 0 ? e->al : e->bl),
                               e->ia < 0 ? t + e->a : t + e->b);
        }
        e->j = c->join.len;
        if ((st = cmf__buf_append(&c->join, t + e->a, e->al)) ||
            (st = cmf__buf_append(&c->join, t + e->b + skip, e->bl - skip)))
            return st;
    }
    const char *jt = (const char *)c->join.data;
    for (size_t k = 0; k < c->n; k++) {
        merge_ent *e = &c->e[k];
        size_t jl = (k + 1 < c->n ? c->e[k + 1].j : c->join.len) - e->j;
        e->hj = cmf__tk_hash(jt + e->j, jl);
        prefetch_slot(&m->lookup, e->hj);
    }
    for (size_t k = 0; k < c->n; k++) {
        merge_ent *e = &c->e[k];
        size_t jl = (k + 1 < c->n ? c->e[k + 1].j : c->join.len) - e->j;
        int32_t id = cmf__tk_map_get_hashed(&m->lookup, jt + e->j, jl, e->hj);
        if (id < 0) {
            snprintf(path, sizeof path, "model.merges[%zu]", e->r);
            return cmf__tk_err(c->what, path, "merged token '%.*s' not in vocab", (int)jl, jt + e->j);
        }
        e->hj = (uint64_t)id; /* reuse: the merged id */
        uint64_t key = (((uint64_t)(uint32_t)e->ia << 32) | (uint32_t)e->ib) + 1;
        __builtin_prefetch(&m->merges[cmf__fmix64(key) & m->merges_mask]);
    }
    for (size_t k = 0; k < c->n; k++) {
        merge_ent *e = &c->e[k];
        if ((st = merge_put(m, (uint32_t)e->ia, (uint32_t)e->ib, (uint32_t)e->r, (uint32_t)e->hj))) return st;
    }
    c->n = 0;
    c->text.len = 0;
    return CMF_OK;
}

static cmf_status add_merge(void *ud, const char *a, size_t al, const char *b, size_t bl, size_t r)
{
    merge_ctx *c = ud;
    cmf_status st;
    merge_ent *e = &c->e[c->n++];
    e->r = r;
    e->a = c->text.len;
    e->al = al;
    if ((st = cmf__buf_append(&c->text, a, al))) return st;
    e->b = c->text.len;
    e->bl = bl;
    if ((st = cmf__buf_append(&c->text, b, bl))) return st;
    return c->n == MERGE_BATCH ? flush_merges(c) : CMF_OK;
}

static cmf_status merges_alloc(tk_model *m, size_t n)
{
    size_t slots = 64;
    while (slots < n * 2 + 2) slots *= 2;
    free(m->merges);
    m->merges = calloc(slots, sizeof *m->merges);
    if (!m->merges) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory (merges)");
    m->merges_mask = slots - 1;
    return CMF_OK;
}

static cmf_status load_merges(tk_model *m, const json_t *arr, const char *what)
{
    char path[TK_PATH_MAX];
    size_t n = json_array_size(arr);
    cmf_status st = merges_alloc(m, n);
    merge_ctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.what = what;
    for (size_t r = 0; r < n && !st; r++) {
        const json_t *e = json_array_get(arr, r);
        if (json_is_string(e)) {
            const char *s = json_string_value(e);
            size_t sl = json_string_length(e);
            const char *sp = memchr(s, ' ', sl);
            if (!sp) {
                snprintf(path, sizeof path, "model.merges[%zu]", r);
                st = cmf__tk_err(what, path, "merge '%s' has no space", s);
                break;
            }
            st = add_merge(&c, s, (size_t)(sp - s), sp + 1, sl - (size_t)(sp - s) - 1, r);
        } else if (json_is_array(e) && json_array_size(e) == 2 && json_is_string(json_array_get(e, 0)) &&
                   json_is_string(json_array_get(e, 1))) {
            st = add_merge(&c, json_string_value(json_array_get(e, 0)), json_string_length(json_array_get(e, 0)),
                           json_string_value(json_array_get(e, 1)), json_string_length(json_array_get(e, 1)), r);
        } else {
            snprintf(path, sizeof path, "model.merges[%zu]", r);
            st = cmf__tk_err(what, path, "expected \"a b\" or [a, b]");
        }
    }
    if (!st && c.n) st = flush_merges(&c);
    cmf__buf_free(&c.text);
    cmf__buf_free(&c.join);
    return st;
}

/* The strings in a JSON span, counted by their quote pairs (an escaped
 * quote counts too: an upper bound). Bounds the vocab's ids and, plus one,
 * sizes the merge table. */
static size_t quote_pairs(const char *doc, tk_span sp)
{
    size_t n = 0;
    const char *p = doc + sp.off, *end = doc + sp.off + sp.len;
    while ((p = memchr(p, '"', (size_t)(end - p)))) {
        n++;
        p++;
    }
    return n / 2;
}

static cmf_status load_merges_raw(tk_model *m, const char *doc, tk_span sp, const char *what)
{
    cmf_status st = merges_alloc(m, quote_pairs(doc, sp) + 1);
    merge_ctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.what = what;
    if (!st) st = cmf__tkj_merges(doc, sp, what, add_merge, &c);
    if (!st && c.n) st = flush_merges(&c);
    cmf__buf_free(&c.text);
    cmf__buf_free(&c.join);
    return st;
}

typedef struct vocab_ctx {
    tk_model *m;
    const char *what;
} vocab_ctx;

static cmf_status vocab_cb(void *ud, const char *piece, size_t len, int64_t id, size_t at)
{
    vocab_ctx *c = ud;
    char path[TK_PATH_MAX];
    snprintf(path, sizeof path, "model.vocab (byte %zu)", at);
    return vocab_set(c->m, id, piece, len, c->what, path);
}

static cmf_status score_cb(void *ud, const char *piece, size_t len, double score, size_t idx)
{
    vocab_ctx *c = ud;
    tk_model *m = c->m;
    char path[TK_PATH_MAX];
    cmf_status st;
    snprintf(path, sizeof path, "model.vocab[%zu]", idx);
    size_t cap = m->vocab.n;
    if ((st = cmf__tk_grow((void **)&m->scores, &cap, idx + 1, sizeof *m->scores))) return st;
    if ((st = vocab_set(m, (int64_t)idx, piece, len, c->what, path))) return st;
    m->scores[idx] = score;
    if (score < m->min_score) m->min_score = score;
    return cmf__tk_trie_add(&m->trie, piece, len, (int32_t)idx);
}

static cmf_status load_unk(tk_model *m, const json_t *j, const char *key, const char *def, const char *what)
{
    const char *unk;
    size_t ul;
    cmf_status st = cmf__tk_opt_str(j, key, what, "model", &unk, &ul);
    if (st) return st;
    if (!unk && def) { unk = def; ul = strlen(def); }
    m->unk_id = unk ? cmf__tk_map_get(&m->lookup, unk, ul) : -1;
    return CMF_OK;
}

cmf_status cmf__tk_model_load(tk_model *m, const json_t *j, const char *doc, const tk_raw *raw, const char *what)
{
    vocab_ctx vc = {.m = m, .what = what};
    char path[TK_PATH_MAX];
    cmf_status st;
    memset(m, 0, sizeof *m);
    m->unk_id = -1;
    for (int i = 0; i < 256; i++) m->byte_ids[i] = -1;
    if (!json_is_object(j)) return cmf__tk_err(what, "model", "expected an object");
    const json_t *type = json_object_get(j, "type");
    const json_t *vocab = json_object_get(j, "vocab");
    const char *tn;
    if (type && !json_is_string(type)) return cmf__tk_err(what, "model.type", "expected a string");
    if (type) tn = json_string_value(type);
    else if (json_object_get(j, "merges")) tn = "BPE";
    else if (json_is_array(vocab)) tn = "Unigram";
    else if (json_object_get(j, "max_input_chars_per_word")) tn = "WordPiece";
    else tn = "WordLevel";
    if (!strcmp(tn, "BPE")) m->type = TK_M_BPE;
    else if (!strcmp(tn, "Unigram")) m->type = TK_M_UNIGRAM;
    else if (!strcmp(tn, "WordPiece")) m->type = TK_M_WORDPIECE;
    else if (!strcmp(tn, "WordLevel")) m->type = TK_M_WORDLEVEL;
    else return cmf__tk_err(what, "model.type", "unknown '%s'", tn);

    /* The entries, counted before any id is read: the fast reader's span
     * (its strings, an upper bound) or the parsed object / array. */
    if (raw && raw->vocab.len) m->n_entries = quote_pairs(doc, raw->vocab);
    else m->n_entries = json_is_array(vocab) ? json_array_size(vocab) : json_object_size(vocab);
    if (m->type == TK_M_UNIGRAM) {
        if (!json_is_array(vocab)) return cmf__tk_err(what, "model.vocab", "expected an array of [piece, score]");
        m->min_score = INFINITY;
        if (raw && raw->vocab.len) {
            if ((st = cmf__tkj_scores(doc, raw->vocab, what, score_cb, &vc))) return st;
        }
        size_t n = raw && raw->vocab.len ? 0 : json_array_size(vocab);
        if (n && !(m->scores = malloc(n * sizeof *m->scores)))
            return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory (unigram)");
        for (size_t i = 0; i < n; i++) {
            const json_t *e = json_array_get(vocab, i);
            const json_t *p = json_array_get(e, 0), *s = json_array_get(e, 1);
            if (!json_is_array(e) || !json_is_string(p) || !json_is_number(s)) {
                snprintf(path, sizeof path, "model.vocab[%zu]", i);
                return cmf__tk_err(what, path, "expected [piece, score]");
            }
            snprintf(path, sizeof path, "model.vocab[%zu]", i);
            if ((st = vocab_set(m, (int64_t)i, json_string_value(p), json_string_length(p), what, path))) return st;
            m->scores[i] = json_number_value(s);
            if (m->scores[i] < m->min_score) m->min_score = m->scores[i];
            if ((st = cmf__tk_trie_add(&m->trie, json_string_value(p), json_string_length(p), (int32_t)i))) return st;
        }
        json_t *u = json_object_get(j, "unk_id");
        if (u && !json_is_null(u)) {
            if (!json_is_integer(u) || json_integer_value(u) < 0 || (size_t)json_integer_value(u) >= m->vocab.n)
                return cmf__tk_err(what, "model.unk_id", "expected an id below %zu", m->vocab.n);
            m->unk_id = (int32_t)json_integer_value(u);
        }
        if ((st = cmf__tk_opt_bool(j, "byte_fallback", what, "model", false, &m->byte_fallback))) return st;
        m->fuse_unk = true;
    } else {
        if (!json_is_object(vocab)) return cmf__tk_err(what, "model.vocab", "expected an object {piece: id}");
        if (raw && raw->vocab.len) {
            size_t hint = quote_pairs(doc, raw->vocab) + 1, slots = 64;
            while (slots < hint * 2 + 2) slots *= 2;
            if ((st = cmf__tk_map_reserve(&m->lookup, slots))) return st;
            /* The pieces take fewer bytes than their JSON text. */
            if ((st = cmf__tk_grow((void **)&m->vocab.pool, &m->vocab.pool_cap, raw->vocab.len, 1)) ||
                (st = cmf__tk_grow((void **)&m->lookup.keys.pool, &m->lookup.keys.pool_cap, raw->vocab.len, 1)))
                return st;
            if ((st = cmf__tkj_vocab(doc, raw->vocab, what, vocab_cb, &vc))) return st;
        }
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)vocab, key, v) {
            if (!json_is_integer(v)) {
                snprintf(path, sizeof path, "model.vocab['%.60s']", key);
                return cmf__tk_err(what, path, "expected an integer id");
            }
            snprintf(path, sizeof path, "model.vocab['%.60s']", key);
            if ((st = vocab_set(m, json_integer_value(v), key, strlen(key), what, path))) return st;
        }
    }
    if (m->type == TK_M_BPE) {
        const char *s;
        size_t sl;
        if ((st = cmf__tk_opt_str(j, "continuing_subword_prefix", what, "model", &s, &sl))) return st;
        if (s && !(m->prefix = cmf__tk_dup(s, sl))) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
        m->prefix_len = s ? sl : 0;
        if ((st = cmf__tk_opt_str(j, "end_of_word_suffix", what, "model", &s, &sl))) return st;
        if (s && !(m->suffix = cmf__tk_dup(s, sl))) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
        m->suffix_len = s ? sl : 0;
        if ((st = cmf__tk_opt_bool(j, "fuse_unk", what, "model", false, &m->fuse_unk))) return st;
        if ((st = cmf__tk_opt_bool(j, "byte_fallback", what, "model", false, &m->byte_fallback))) return st;
        if ((st = cmf__tk_opt_bool(j, "ignore_merges", what, "model", false, &m->ignore_merges))) return st;
        if ((st = load_unk(m, j, "unk_token", NULL, what))) return st;
        const json_t *merges = json_object_get(j, "merges");
        if (merges && !json_is_null(merges)) {
            if (!json_is_array(merges)) return cmf__tk_err(what, "model.merges", "expected an array");
            if (raw && raw->merges.len) st = load_merges_raw(m, doc, raw->merges, what);
            else st = load_merges(m, merges, what);
            if (st) return st;
        }
    } else if (m->type == TK_M_WORDPIECE) {
        const char *s;
        size_t sl;
        if ((st = load_unk(m, j, "unk_token", "[UNK]", what))) return st;
        if ((st = cmf__tk_opt_str(j, "continuing_subword_prefix", what, "model", &s, &sl))) return st;
        if (!s) { s = "##"; sl = 2; }
        if (!(m->prefix = cmf__tk_dup(s, sl))) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
        m->prefix_len = sl;
        if ((st = cmf__tk_opt_uint(j, "max_input_chars_per_word", what, "model", 100, &m->max_chars))) return st;
    } else if (m->type == TK_M_WORDLEVEL) {
        if ((st = load_unk(m, j, "unk_token", NULL, what))) return st;
    }
    if (m->type == TK_M_BPE && !m->prefix_len && !m->suffix_len && cmf__tk_map_get(&m->lookup, "\xE2\x96\x81", 3) >= 0) {
        /* Collect the chars that precede a "▁" inside some token (other
         * than "▁" itself); the word may be cut before a "▁" run whose
         * preceding char is not one of them. Too many: no cutting. */
        m->meta_split = true;
        for (size_t id = 0; id < m->vocab.n && m->meta_split; id++) {
            if (m->vocab.off[id] == UINT32_MAX) continue;
            const uint8_t *p = (const uint8_t *)m->vocab.pool + m->vocab.off[id];
            size_t l = m->vocab.len[id];
            for (size_t k = 1; k + 3 <= l; k++) {
                if (memcmp(p + k, "\xE2\x96\x81", 3) || (k >= 3 && !memcmp(p + k - 3, "\xE2\x96\x81", 3))) continue;
                /* A byte-fallback or unknown-token symbol before the "▁"
                 * would not show in the text as its last char: no cutting. */
                bool byte_tok = k >= 6 && p[k - 6] == '<' && p[k - 5] == '0' && p[k - 4] == 'x' && p[k - 1] == '>';
                size_t ul = m->unk_id >= 0 ? m->vocab.len[m->unk_id] : 0;
                bool unk_tok = ul && k >= ul && !memcmp(p + k - ul, m->vocab.pool + m->vocab.off[m->unk_id], ul);
                if (byte_tok || unk_tok) {
                    m->meta_split = false;
                    break;
                }
                size_t q = k - 1;
                while (q > 0 && (p[q] & 0xC0) == 0x80) q--;
                uint32_t c;
                if (!cmf__utf8_next(p + q, k - q, &c)) c = 0xFFFFFFFFu;
                bool seen = false;
                for (size_t x = 0; x < m->n_meta_pre; x++) seen |= m->meta_pre[x] == c;
                if (seen) continue;
                if (m->n_meta_pre == sizeof m->meta_pre / sizeof *m->meta_pre) {
                    m->meta_split = false;
                    break;
                }
                m->meta_pre[m->n_meta_pre++] = c;
            }
        }
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        m->byte_ids[b] = cmf__tk_map_get(&m->lookup, name, 6);
    }
    return CMF_OK;
}

void cmf__tk_model_free(tk_model *m)
{
    cmf__tk_strs_free(&m->vocab);
    cmf__tk_map_free(&m->lookup);
    free(m->merges);
    free(m->prefix);
    free(m->suffix);
    free(m->scores);
    cmf__tk_trie_free(&m->trie);
    memset(m, 0, sizeof *m);
}

/* ---- encoding ---- */

static cmf_status push_id(cmf__tok_ids *out, int32_t id)
{
    cmf_status st = cmf__tk_grow((void **)&out->ids, &out->cap, out->n + 1, sizeof(int32_t));
    if (st) return st;
    out->ids[out->n++] = id;
    return CMF_OK;
}

static cmf_status missing_unk(const char *model)
{
    return cmf__error(CMF_ERR_TOKENIZER, "tokenizer: %s: text needs the unknown token, which the vocab lacks", model);
}

typedef struct bpe_sym {
    int32_t id;
    int32_t prev, next;
    bool dead;
} bpe_sym;
typedef struct bpe_item {
    uint32_t rank, pos, id;
} bpe_item;

static bool item_less(const bpe_item *a, const bpe_item *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(bpe_item *h, size_t *n, bpe_item it)
{
    size_t i = (*n)++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (!item_less(&it, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
}

static bpe_item heap_pop(bpe_item *h, size_t *n)
{
    bpe_item top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const bpe_item *best = &last;
        if (l < *n && item_less(&h[l], best)) { m = l; best = &h[l]; }
        if (r < *n && item_less(&h[r], best)) { m = r; best = &h[r]; }
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    h[i] = last;
    return top;
}

static cmf_status bpe_word(const tk_model *m, tk_ctx *ctx, const char *w, size_t len, cmf__tok_ids *out)
{
    cmf_status st;
    if (m->ignore_merges) {
        int32_t id = cmf__tk_map_get(&m->lookup, w, len);
        if (id >= 0) return push_id(out, id);
    }
    /* Each char gives at most 4 byte-fallback symbols. */
    if ((st = cmf__tk_grow(&ctx->work, &ctx->work_cap, 4 * len + 1, sizeof(bpe_sym)))) return st;
    if ((st = cmf__tk_grow(&ctx->work2, &ctx->work2_cap, 8 * len + 8, sizeof(bpe_item)))) return st;
    bpe_sym *sym = ctx->work;
    size_t n = 0;
    int32_t unk = -1;
    cmf__buf *tmp = &ctx->nbuf2;
    const uint8_t *p = (const uint8_t *)w;
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        size_t cl = cmf__utf8_next(p + i, len - i, &cp);
        if (!cl) cl = 1;
        bool first = i == 0, last = i + cl >= len;
        const char *s = w + i;
        size_t sl = cl;
        if ((!first && m->prefix_len) || (last && m->suffix_len)) {
            tmp->len = 0;
            if (!first && (st = cmf__buf_append(tmp, m->prefix, m->prefix_len))) return st;
            if ((st = cmf__buf_append(tmp, s, sl))) return st;
            if (last && (st = cmf__buf_append(tmp, m->suffix, m->suffix_len))) return st;
            s = (const char *)tmp->data;
            sl = tmp->len;
        }
        int32_t id = cmf__tk_map_get(&m->lookup, s, sl);
        i += cl;
        if (id >= 0) {
            if (unk >= 0) { sym[n++].id = unk; unk = -1; }
            sym[n++].id = id;
            continue;
        }
        if (m->byte_fallback) {
            bool all = true;
            for (size_t k = 0; k < sl; k++) all &= m->byte_ids[(uint8_t)s[k]] >= 0;
            if (all) {
                if ((st = cmf__tk_grow(&ctx->work, &ctx->work_cap, n + sl + 4 * (len - i) + 1, sizeof(bpe_sym))))
                    return st;
                sym = ctx->work;
                for (size_t k = 0; k < sl; k++) sym[n++].id = m->byte_ids[(uint8_t)s[k]];
                continue;
            }
        }
        if (m->unk_id < 0) continue; /* HF: no unk_token -> the char is dropped */
        if (unk >= 0 && !m->fuse_unk) sym[n++].id = unk;
        unk = m->unk_id;
    }
    if (unk >= 0) sym[n++].id = unk;
    for (size_t k = 0; k < n; k++) {
        sym[k].prev = (int32_t)k - 1;
        sym[k].next = k + 1 < n ? (int32_t)k + 1 : -1;
        sym[k].dead = false;
    }
    bpe_item *heap = ctx->work2;
    size_t hn = 0;
    for (size_t k = 0; k + 1 < n; k++) {
        const tk_merge *mg = merge_get(m, (uint32_t)sym[k].id, (uint32_t)sym[k + 1].id);
        if (mg) heap_push(heap, &hn, (bpe_item){mg->rank, (uint32_t)k, mg->id});
    }
    while (hn) {
        bpe_item top = heap_pop(heap, &hn);
        bpe_sym *a = &sym[top.pos];
        if (a->dead || a->next < 0) continue;
        bpe_sym *b = &sym[a->next];
        const tk_merge *mg = merge_get(m, (uint32_t)a->id, (uint32_t)b->id);
        if (!mg || mg->id != top.id) continue;
        a->id = (int32_t)top.id;
        b->dead = true;
        a->next = b->next;
        if (b->next >= 0) sym[b->next].prev = (int32_t)top.pos;
        if (a->prev >= 0) {
            mg = merge_get(m, (uint32_t)sym[a->prev].id, (uint32_t)a->id);
            if (mg) heap_push(heap, &hn, (bpe_item){mg->rank, (uint32_t)a->prev, mg->id});
        }
        if (a->next >= 0) {
            mg = merge_get(m, (uint32_t)a->id, (uint32_t)sym[a->next].id);
            if (mg) heap_push(heap, &hn, (bpe_item){mg->rank, top.pos, mg->id});
        }
    }
    for (size_t k = 0; k < n; k++)
        if (!sym[k].dead && (st = push_id(out, sym[k].id))) return st;
    return CMF_OK;
}

static cmf_status bpe_encode(const tk_model *m, tk_ctx *ctx, const char *w, size_t len, cmf__tok_ids *out);

/* SentencePiece-style BPE without a pre-tokenizer sees the whole text as
 * one word. A merge result spanning the start of a "▁" run would contain
 * "X▁" (X the char before); when no vocab token contains that pair, no
 * merge can cross there, so the word is cut and each part merged alone
 * (same result, and the parts hit the word cache). The chars X that do
 * occur before "▁" in some token are collected at load (meta_pre). */
static cmf_status bpe_meta_split(const tk_model *m, tk_ctx *ctx, const char *w, size_t len, cmf__tok_ids *out)
{
    static const char META[] = "\xE2\x96\x81";
    cmf_status st;
    size_t start = 0, i = 0;
    while (i + 3 <= len) {
        const char *q = memmem(w + i, len - i, META, 3);
        if (!q) break;
        size_t at = (size_t)(q - w);
        bool after_meta = at >= 3 && !memcmp(w + at - 3, META, 3);
        bool blocked = false;
        if (at > start && !after_meta && m->n_meta_pre) {
            size_t q = at - 1;
            while (q > start && ((uint8_t)w[q] & 0xC0) == 0x80) q--;
            uint32_t c;
            if (!cmf__utf8_next((const uint8_t *)w + q, at - q, &c)) c = 0xFFFFFFFFu;
            for (size_t x = 0; x < m->n_meta_pre; x++) blocked |= m->meta_pre[x] == c;
        }
        if (at > start && !after_meta && !blocked) {
            if ((st = bpe_encode(m, ctx, w + start, at - start, out))) return st;
            start = at;
        }
        i = at + 3;
    }
    if (start == 0) return bpe_word(m, ctx, w, len, out); /* no cut point */
    return bpe_encode(m, ctx, w + start, len - start, out);
}

/* BPE with the per-call word cache (words repeat a lot in real text). */
static cmf_status bpe_encode(const tk_model *m, tk_ctx *ctx, const char *w, size_t len, cmf__tok_ids *out)
{
    cmf_status st;
    if (len > 64 && m->meta_split && !m->ignore_merges && memmem(w + 1, len - 1, "\xE2\x96\x81", 3))
        return bpe_meta_split(m, ctx, w, len, out);
    if (len > 64) return bpe_word(m, ctx, w, len, out);
    int32_t k = cmf__tk_map_get(&ctx->cache, w, len);
    if (k >= 0) {
        uint32_t start = ctx->cache_slice[2 * k], count = ctx->cache_slice[2 * k + 1];
        if ((st = cmf__tk_grow((void **)&out->ids, &out->cap, out->n + count, sizeof(int32_t)))) return st;
        if (count) memcpy(out->ids + out->n, ctx->cache_ids.ids + start, count * sizeof(int32_t));
        out->n += count;
        return CMF_OK;
    }
    size_t before = out->n;
    if ((st = bpe_word(m, ctx, w, len, out))) return st;
    if (ctx->cache.n >= (1u << 16)) return CMF_OK;
    uint32_t idx = (uint32_t)ctx->cache.n;
    if ((st = cmf__tk_map_put(&ctx->cache, w, len, (int32_t)idx, false))) return st;
    if ((st = cmf__tk_grow((void **)&ctx->cache_slice, &ctx->cache_slice_cap, 2 * idx + 2, sizeof(uint32_t))))
        return st;
    size_t count = out->n - before;
    ctx->cache_slice[2 * idx] = (uint32_t)ctx->cache_ids.n;
    ctx->cache_slice[2 * idx + 1] = (uint32_t)count;
    if ((st = cmf__tk_grow((void **)&ctx->cache_ids.ids, &ctx->cache_ids.cap, ctx->cache_ids.n + count,
                           sizeof(int32_t))))
        return st;
    if (count) memcpy(ctx->cache_ids.ids + ctx->cache_ids.n, out->ids + before, count * sizeof(int32_t));
    ctx->cache_ids.n += count;
    return CMF_OK;
}

typedef struct uni_cell {
    double score;
    int32_t id;     /* token ending here on the best path */
    uint32_t start; /* its start */
    bool reached;
} uni_cell;

static cmf_status unigram_encode(const tk_model *m, tk_ctx *ctx, const char *w, size_t len, cmf__tok_ids *out)
{
    cmf_status st;
    if (!len) return CMF_OK;
    if ((st = cmf__tk_grow(&ctx->work, &ctx->work_cap, len + 1, sizeof(uni_cell)))) return st;
    uni_cell *c = ctx->work;
    for (size_t i = 0; i <= len; i++) c[i].reached = false;
    c[0].reached = true;
    c[0].score = 0;
    double unk_score = m->min_score - 10.0;
    const uint8_t *p = (const uint8_t *)w;
    for (size_t pos = 0; pos < len;) {
        uint32_t cp;
        size_t cl = cmf__utf8_next(p + pos, len - pos, &cp);
        if (!cl) cl = 1;
        if (!c[pos].reached) return CMF_OK; /* HF's Viterbi gives up: no tokens */
        bool single = false;
        uint32_t node = 0;
        for (size_t e = pos; e < len; e++) {
            node = cmf__tk_trie_step(&m->trie, node, p[e]);
            if (!node) break;
            int32_t id = m->trie.value[node];
            if (id < 0) continue;
            size_t end = e + 1;
            double s = c[pos].score + m->scores[id];
            if (!c[end].reached || s > c[end].score) {
                c[end] = (uni_cell){s, id, (uint32_t)pos, true};
            }
            if (end - pos == cl) single = true;
        }
        if (!single && m->unk_id >= 0) {
            size_t end = pos + cl;
            double s = c[pos].score + unk_score;
            if (!c[end].reached || s > c[end].score) c[end] = (uni_cell){s, m->unk_id, (uint32_t)pos, true};
        }
        pos += cl;
    }
    if (!c[len].reached) return CMF_OK;
    /* Backtrack into work2 as (start, end, id) triples, then emit forward. */
    size_t cnt = 0;
    for (size_t e = len; e > 0; e = c[e].start) cnt++;
    if ((st = cmf__tk_grow(&ctx->work2, &ctx->work2_cap, cnt * 3, sizeof(uint32_t)))) return st;
    uint32_t *path = ctx->work2;
    size_t k = cnt;
    for (size_t e = len; e > 0; e = c[e].start) {
        k--;
        path[3 * k] = c[e].start;
        path[3 * k + 1] = (uint32_t)e;
        path[3 * k + 2] = (uint32_t)c[e].id;
    }
    for (size_t i = 0; i < cnt;) {
        int32_t id = (int32_t)path[3 * i + 2];
        if (id != m->unk_id) {
            if ((st = push_id(out, id))) return st;
            i++;
            continue;
        }
        /* Consecutive unknowns fuse into one string. */
        size_t s0 = path[3 * i], e0 = path[3 * i + 1];
        i++;
        while (i < cnt && (int32_t)path[3 * i + 2] == m->unk_id) e0 = path[3 * i++ + 1];
        int32_t vid = cmf__tk_map_get(&m->lookup, w + s0, e0 - s0);
        if (vid >= 0) {
            if ((st = push_id(out, vid))) return st;
            continue;
        }
        if (m->byte_fallback) {
            bool all = true;
            for (size_t b = s0; b < e0; b++) all &= m->byte_ids[p[b]] >= 0;
            if (all) {
                for (size_t b = s0; b < e0; b++)
                    if ((st = push_id(out, m->byte_ids[p[b]]))) return st;
                continue;
            }
        }
        if ((st = push_id(out, m->unk_id))) return st;
    }
    return CMF_OK;
}

static cmf_status wordpiece_encode(const tk_model *m, tk_ctx *ctx, const char *w, size_t len, cmf__tok_ids *out)
{
    cmf_status st;
    size_t chars = 0;
    for (size_t i = 0; i < len; i++) chars += ((uint8_t)w[i] & 0xC0) != 0x80;
    if (m->unk_id < 0 && chars > m->max_chars) return missing_unk("WordPiece");
    if (chars > m->max_chars) return push_id(out, m->unk_id);
    size_t before = out->n, start = 0;
    cmf__buf *tmp = &ctx->nbuf2;
    while (start < len) {
        size_t end = len;
        int32_t found = -1;
        while (start < end) {
            tmp->len = 0;
            if (start > 0 && (st = cmf__buf_append(tmp, m->prefix, m->prefix_len))) return st;
            if ((st = cmf__buf_append(tmp, w + start, end - start))) return st;
            found = cmf__tk_map_get(&m->lookup, (const char *)tmp->data, tmp->len);
            if (found >= 0) break;
            end--;
            while (end > start && ((uint8_t)w[end] & 0xC0) == 0x80) end--;
        }
        if (found < 0) {
            out->n = before;
            if (m->unk_id < 0) return missing_unk("WordPiece");
            return push_id(out, m->unk_id);
        }
        if ((st = push_id(out, found))) return st;
        start = end;
    }
    return CMF_OK;
}

cmf_status cmf__tk_model_encode(const tk_model *m, tk_ctx *ctx, const char *s, size_t len, cmf__tok_ids *out)
{
    switch (m->type) {
    case TK_M_BPE: return len ? bpe_encode(m, ctx, s, len, out) : CMF_OK;
    case TK_M_UNIGRAM: return unigram_encode(m, ctx, s, len, out);
    case TK_M_WORDPIECE: return wordpiece_encode(m, ctx, s, len, out);
    default: {
        int32_t id = cmf__tk_map_get(&m->lookup, s, len);
        if (id < 0) id = m->unk_id;
        if (id < 0) return missing_unk("WordLevel");
        return push_id(out, id);
    }
    }
}
