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
    /* the trie, depth-first; the root is implicit */
    uint8_t *node_byte;   /* [n_nodes] */
    uint16_t *node_depth; /* [n_nodes] 1 = a first byte */
    uint32_t *node_end;   /* [n_nodes] one past the subtree */
    uint32_t *node_tok;   /* [n_nodes] first index into sorted[] of the tokens ending here */
    uint32_t *node_ntok;  /* [n_nodes] */
    int32_t *sorted;      /* text token ids by their bytes */
    size_t n_nodes, n_sorted, max_depth;
};

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
    free(v->node_byte);
    free(v->node_depth);
    free(v->node_end);
    free(v->node_tok);
    free(v->node_ntok);
    free(v->sorted);
    free(v);
}

typedef struct tok_key {
    const uint8_t *p;
    size_t len;
    int32_t id;
} tok_key;

static int cmp_tok(const void *a, const void *b)
{
    const tok_key *x = a, *y = b;
    int c = memcmp(x->p, y->p, x->len < y->len ? x->len : y->len);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static cmf_status build_trie(cmf__gvocab *v)
{
    tok_key *keys = malloc((v->n_sorted ? v->n_sorted : 1) * sizeof *keys);
    if (!keys) return cmf__error(CMF_ERR_NOMEM, "grammar: out of memory for the token trie");
    for (size_t k = 0; k < v->n_sorted; k++) {
        int32_t t = v->sorted[k];
        keys[k] = (tok_key){v->bytes + v->tok_off[t], v->tok_off[t + 1] - v->tok_off[t], t};
    }
    qsort(keys, v->n_sorted, sizeof *keys, cmp_tok);
    for (size_t k = 0; k < v->n_sorted; k++) v->sorted[k] = keys[k].id;
    free(keys);
    size_t cap = v->tok_off[v->n_vocab] + 1;
    v->node_byte = malloc(cap);
    v->node_depth = malloc(cap * sizeof *v->node_depth);
    v->node_end = malloc(cap * sizeof *v->node_end);
    v->node_tok = malloc(cap * sizeof *v->node_tok);
    v->node_ntok = calloc(cap, sizeof *v->node_ntok);
    uint32_t *open = malloc((v->max_depth + 1) * sizeof *open); /* node at each depth on the current path */
    if (!v->node_byte || !v->node_depth || !v->node_end || !v->node_tok || !v->node_ntok || !open) {
        free(open);
        return cmf__error(CMF_ERR_NOMEM, "grammar: out of memory for the token trie");
    }
    size_t n = 0, path = 0; /* path: depth of the current path */
    const uint8_t *prev = NULL;
    size_t prev_len = 0;
    for (size_t k = 0; k < v->n_sorted; k++) {
        int32_t t = v->sorted[k];
        const uint8_t *s = v->bytes + v->tok_off[t];
        size_t len = v->tok_off[t + 1] - v->tok_off[t], lcp = 0;
        while (prev && lcp < len && lcp < prev_len && s[lcp] == prev[lcp]) lcp++;
        /* close the nodes below the common prefix */
        while (path > lcp) v->node_end[open[--path]] = (uint32_t)n;
        for (size_t d = lcp; d < len; d++) {
            v->node_byte[n] = s[d];
            v->node_depth[n] = (uint16_t)(d + 1);
            v->node_ntok[n] = 0;
            open[path++] = (uint32_t)n++;
        }
        uint32_t at = open[len - 1];
        if (!v->node_ntok[at]) v->node_tok[at] = (uint32_t)k;
        v->node_ntok[at]++;
        prev = s, prev_len = len;
    }
    while (path) v->node_end[open[--path]] = (uint32_t)n;
    free(open);
    v->n_nodes = n;
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
        !(v->sorted = malloc((size_t)n_vocab * sizeof *v->sorted))) {
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
        v->sorted[v->n_sorted++] = t;
        if (one.len > v->max_depth) v->max_depth = one.len;
    }
    if (st) goto fail;
    v->tok_off[n_vocab] = all.len;
    v->bytes = all.data ? all.data : malloc(1);
    all.data = NULL;
    if (!v->bytes) {
        st = cmf__error(CMF_ERR_NOMEM, "grammar: out of memory");
        goto fail;
    }
    if ((st = build_trie(v))) goto fail;
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
    w->st = NULL;
    w->n_st = 0;
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
    if (w->n_st < v->max_depth + 1) {
        cmf__gstate *ns = realloc(w->st, (v->max_depth + 1) * sizeof *ns);
        if (!ns) return cmf__error(CMF_ERR_NOMEM, "grammar: out of memory");
        memset(ns + w->n_st, 0, (v->max_depth + 1 - w->n_st) * sizeof *ns);
        w->st = ns;
        w->n_st = v->max_depth + 1;
    }
    set_eos(v, s, bits);
    size_t i = 0;
    while (i < v->n_nodes) {
        size_t d = v->node_depth[i];
        const cmf__gstate *parent = d == 1 ? s : &w->st[d - 1];
        int r = cmf__gstate_byte(g, parent, v->node_byte[i], &w->st[d]);
        if (r < 0) return CMF_ERR_NOMEM;
        if (!r) {
            i = v->node_end[i];
            continue;
        }
        for (uint32_t k = 0; k < v->node_ntok[i]; k++) {
            int32_t t = v->sorted[v->node_tok[i] + k];
            bits[t >> 5] |= 1u << (t & 31);
        }
        i++;
    }
    return CMF_OK;
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
