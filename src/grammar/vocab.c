/* vocab.c — a model's tokens as bytes for constrained decoding, and the
 * allowed-token mask of a grammar state. The tokens' byte strings are
 * kept sorted in a prefix trie laid out in depth-first order (node i's
 * subtree is [i, end[i])), so one matcher step per trie node serves every
 * token through it, and a refused byte skips its whole subtree. Built
 * once per model, read-only after. */
#include "grammar/grammar.h"

#include <stdlib.h>
#include <string.h>

enum { KIND_TEXT, KIND_NEVER, KIND_EOS };

struct cmf__gvocab {
    int32_t n_vocab;
    uint8_t *kind;        /* [n_vocab] */
    uint8_t *bytes;       /* every text token's bytes end to end */
    size_t *tok_off;      /* [n_vocab + 1] */
    int32_t *text_ids;    /* [n_text] the text tokens */
    size_t n_text;
    cmf__gtrie trie;      /* of the text tokens */
    cmf__gloops *loops;   /* fastmask.c's per-class token sets, filled on use (own lock) */
};

cmf__gloops *cmf__gvocab_loops(const cmf__gvocab *v) { return v->loops; }

int32_t cmf__gvocab_n_vocab(const cmf__gvocab *v) { return v->n_vocab; }
bool cmf__gvocab_is_eos(const cmf__gvocab *v, int32_t t)
{
    return t >= 0 && t < v->n_vocab && v->kind[t] == KIND_EOS;
}

const uint8_t *cmf__gvocab_bytes(const cmf__gvocab *v, int32_t t, size_t *len)
{
    *len = 0;
    if (t < 0 || t >= v->n_vocab || v->kind[t] != KIND_TEXT) return NULL;
    *len = v->tok_off[t + 1] - v->tok_off[t];
    return v->bytes + v->tok_off[t];
}

void cmf__gvocab_free(cmf__gvocab *v)
{
    if (!v) return;
    free(v->kind);
    free(v->bytes);
    free(v->tok_off);
    free(v->text_ids);
    cmf__gtrie_free(&v->trie);
    cmf__gloops_free(v->loops);
    free(v);
}

static int cmp_key(const void *a, const void *b)
{
    const cmf__gtrie_key *x = a, *y = b;
    int c = memcmp(x->p, y->p, x->len < y->len ? x->len : y->len);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void cmf__gtrie_free(cmf__gtrie *t)
{
    free(t->node_byte);
    free(t->node_depth);
    free(t->node_end);
    free(t->node_tok);
    free(t->node_ntok);
    free(t->ids);
    memset(t, 0, sizeof *t);
}

cmf_status cmf__gtrie_build(cmf__gtrie *t, cmf__gtrie_key *keys, size_t n)
{
    memset(t, 0, sizeof *t);
    size_t cap = 1;
    for (size_t k = 0; k < n; k++) {
        cap += keys[k].len;
        if (keys[k].len > t->max_depth) t->max_depth = keys[k].len;
    }
    qsort(keys, n, sizeof *keys, cmp_key);
    t->ids = malloc((n ? n : 1) * sizeof *t->ids);
    t->node_byte = malloc(cap);
    t->node_depth = malloc(cap * sizeof *t->node_depth);
    t->node_end = malloc(cap * sizeof *t->node_end);
    t->node_tok = malloc(cap * sizeof *t->node_tok);
    t->node_ntok = calloc(cap, sizeof *t->node_ntok);
    uint32_t *open = malloc((t->max_depth + 1) * sizeof *open); /* node at each depth on the current path */
    if (!t->ids || !t->node_byte || !t->node_depth || !t->node_end || !t->node_tok || !t->node_ntok || !open) {
        free(open);
        cmf__gtrie_free(t);
        return cmf__error(CMF_ERR_NOMEM, "grammar: out of memory for a token trie");
    }
    size_t nn = 0, path = 0; /* path: depth of the current path */
    const uint8_t *prev = NULL;
    size_t prev_len = 0;
    for (size_t k = 0; k < n; k++) {
        const uint8_t *p = keys[k].p;
        size_t len = keys[k].len, lcp = 0;
        t->ids[k] = keys[k].id;
        if (!len) continue;
        while (prev && lcp < len && lcp < prev_len && p[lcp] == prev[lcp]) lcp++;
        /* close the nodes below the common prefix */
        while (path > lcp) t->node_end[open[--path]] = (uint32_t)nn;
        for (size_t d = lcp; d < len; d++) {
            t->node_byte[nn] = p[d];
            t->node_depth[nn] = (uint16_t)(d + 1);
            t->node_ntok[nn] = 0;
            open[path++] = (uint32_t)nn++;
        }
        uint32_t at = open[len - 1];
        if (!t->node_ntok[at]) t->node_tok[at] = (uint32_t)k;
        t->node_ntok[at]++;
        prev = p, prev_len = len;
    }
    while (path) t->node_end[open[--path]] = (uint32_t)nn;
    free(open);
    t->n_nodes = nn;
    return CMF_OK;
}

cmf_status cmf__gtrie_walk(const cmf__gtrie *t, const cmf__gram *g, const cmf__gstate *s, cmf__gwalk *w,
                           uint32_t *bits)
{
    if (w->n_st < t->max_depth + 1) {
        cmf__gstate *ns = realloc(w->st, (t->max_depth + 1) * sizeof *ns);
        if (!ns) return cmf__error(CMF_ERR_NOMEM, "grammar: out of memory");
        memset(ns + w->n_st, 0, (t->max_depth + 1 - w->n_st) * sizeof *ns);
        w->st = ns;
        w->n_st = t->max_depth + 1;
    }
    size_t i = 0;
    while (i < t->n_nodes) {
        size_t d = t->node_depth[i];
        const cmf__gstate *parent = d == 1 ? s : &w->st[d - 1];
        int r = cmf__gstate_byte(g, parent, t->node_byte[i], &w->st[d]);
        if (r < 0) return CMF_ERR_NOMEM;
        if (!r) {
            i = t->node_end[i];
            continue;
        }
        for (uint32_t k = 0; k < t->node_ntok[i]; k++) {
            int32_t id = t->ids[t->node_tok[i] + k];
            bits[id >> 5] |= 1u << (id & 31);
        }
        i++;
    }
    return CMF_OK;
}

cmf_status cmf__gvocab_new(const cmf__tok *tok, int32_t n_vocab, const int32_t *eos, size_t n_eos,
                           cmf__gvocab **out)
{
    *out = NULL;
    if (!tok || n_vocab <= 0) return cmf__error(CMF_ERR_ARG, "grammar: the model has no vocabulary");
    cmf__gvocab *v = calloc(1, sizeof *v);
    cmf__buf all = {0}, one = {0};
    cmf_status st = CMF_OK;
    if (!v || !(v->kind = malloc((size_t)n_vocab)) || !(v->tok_off = malloc(((size_t)n_vocab + 1) * sizeof *v->tok_off)) ||
        !(v->text_ids = malloc((size_t)n_vocab * sizeof *v->text_ids))) {
        st = cmf__error(CMF_ERR_NOMEM, "grammar: out of memory for %d tokens", (int)n_vocab);
        goto fail;
    }
    v->n_vocab = n_vocab;
    size_t n_tok = cmf__tok_vocab_size(tok);
    for (int32_t t = 0; t < n_vocab && !st; t++) {
        v->tok_off[t] = all.len;
        v->kind[t] = KIND_NEVER;
        bool is_eos = false;
        for (size_t k = 0; k < n_eos; k++) is_eos |= eos[k] == t;
        if (is_eos) {
            v->kind[t] = KIND_EOS;
            continue;
        }
        if ((size_t)t >= n_tok || cmf__tok_is_special(tok, t)) continue;
        size_t plen;
        if (!cmf__tok_piece_n(tok, t, &plen)) continue;
        if ((st = cmf__tok_token_bytes(tok, t, &one))) break;
        if (!one.len || one.len > 0xFFFF) continue;
        if ((st = cmf__buf_append(&all, one.data, one.len))) break;
        v->kind[t] = KIND_TEXT;
        v->text_ids[v->n_text++] = t;
    }
    if (st) goto fail;
    v->tok_off[n_vocab] = all.len;
    v->bytes = all.data ? all.data : malloc(1);
    all.data = NULL;
    if (!v->bytes) {
        st = cmf__error(CMF_ERR_NOMEM, "grammar: out of memory");
        goto fail;
    }
    cmf__gtrie_key *keys = malloc((v->n_text ? v->n_text : 1) * sizeof *keys);
    if (!keys) {
        st = cmf__error(CMF_ERR_NOMEM, "grammar: out of memory");
        goto fail;
    }
    for (size_t k = 0; k < v->n_text; k++) {
        int32_t t = v->text_ids[k];
        keys[k] = (cmf__gtrie_key){v->bytes + v->tok_off[t], v->tok_off[t + 1] - v->tok_off[t], t};
    }
    st = cmf__gtrie_build(&v->trie, keys, v->n_text);
    free(keys);
    if (st) goto fail;
    if (!(v->loops = cmf__gloops_new())) {
        st = cmf__error(CMF_ERR_NOMEM, "grammar: out of memory");
        goto fail;
    }
    cmf__buf_free(&one);
    *out = v;
    return CMF_OK;
fail:
    cmf__buf_free(&all);
    cmf__buf_free(&one);
    cmf__gvocab_free(v);
    return st;
}

void cmf__gwalk_free(cmf__gwalk *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n_st; i++) cmf__gstate_free(&w->st[i]);
    free(w->st);
    for (size_t i = 0; i < w->n_chain; i++) cmf__gstate_free(&w->chain[i]);
    free(w->chain);
    free(w->chain_at);
    memset(w, 0, sizeof *w);
}

static void set_eos(const cmf__gvocab *v, const cmf__gstate *s, uint32_t *bits)
{
    if (!cmf__gstate_can_end(s)) return;
    for (int32_t t = 0; t < v->n_vocab; t++)
        if (v->kind[t] == KIND_EOS) bits[t >> 5] |= 1u << (t & 31);
}

cmf_status cmf__gvocab_mask(const cmf__gvocab *v, const cmf__gram *g, const cmf__gstate *s, cmf__gwalk *w,
                            uint32_t *bits)
{
    memset(bits, 0, ((size_t)v->n_vocab + 31) / 32 * sizeof *bits);
    set_eos(v, s, bits);
    return cmf__gtrie_walk(&v->trie, g, s, w, bits);
}

/* Runs the token's bytes from s; 1 alive, 0 refused, -1 no memory. The
 * end state is in *a or *b (returned through *end). */
static int run_token(const cmf__gram *g, const cmf__gstate *s, const uint8_t *p, size_t len, cmf__gstate *a,
                     cmf__gstate *b, const cmf__gstate **end)
{
    const cmf__gstate *cur = s;
    cmf__gstate *bufs[2] = {a, b};
    for (size_t k = 0; k < len; k++) {
        cmf__gstate *nx = bufs[k & 1];
        int r = cmf__gstate_byte(g, cur, p[k], nx);
        if (r <= 0) return r;
        cur = nx;
    }
    *end = cur;
    return 1;
}

cmf_status cmf__gvocab_mask_brute(const cmf__gvocab *v, const cmf__gram *g, const cmf__gstate *s, uint32_t *bits)
{
    memset(bits, 0, ((size_t)v->n_vocab + 31) / 32 * sizeof *bits);
    set_eos(v, s, bits);
    cmf__gstate a = {0}, b = {0};
    cmf_status st = CMF_OK;
    for (int32_t t = 0; t < v->n_vocab; t++) {
        size_t len;
        const uint8_t *p = cmf__gvocab_bytes(v, t, &len);
        if (!p) continue;
        const cmf__gstate *end;
        int r = run_token(g, s, p, len, &a, &b, &end);
        if (r < 0) {
            st = CMF_ERR_NOMEM;
            break;
        }
        if (r) bits[t >> 5] |= 1u << (t & 31);
    }
    cmf__gstate_free(&a);
    cmf__gstate_free(&b);
    return st;
}

int cmf__gvocab_allows(const cmf__gvocab *v, const cmf__gram *g, const cmf__gstate *s, int32_t t, cmf__gstate *next)
{
    if (t < 0 || t >= v->n_vocab) return 0;
    if (v->kind[t] == KIND_EOS) {
        if (!cmf__gstate_can_end(s)) return 0;
        return next && cmf__gstate_copy(next, s) ? -1 : 1;
    }
    size_t len;
    const uint8_t *p = cmf__gvocab_bytes(v, t, &len);
    if (!p) return 0;
    cmf__gstate a = {0}, b = {0};
    const cmf__gstate *end = NULL;
    int r = run_token(g, s, p, len, &a, &b, &end);
    if (r == 1 && next && cmf__gstate_copy(next, end)) r = -1;
    cmf__gstate_free(&a);
    cmf__gstate_free(&b);
    return r;
}
