/* fastmask.c — the allowed-token mask, fast where most of the vocabulary
 * is allowed. When a state loops on a character class C (every stack's
 * top class either contains C or is disjoint from it, and reading any
 * character of C gives the same state back: the inside of a JSON string,
 * a "[^\n]+" line), every token made only of C's characters is allowed
 * and leaves the state as it was; only the others are run, from where
 * their first character outside C begins. Those per-class token sets are
 * computed once per (grammar, vocabulary) and kept, under a lock. Other
 * states walk the trie (cmf__gvocab_mask). Both give exactly the set the
 * brute force gives (tests/test_grammar_mask.c). */
#include "grammar/grammar.h"
#include "text/unicode.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANGES 256
#define MAX_CLASSES 32

typedef struct range { uint32_t lo, hi; } range;

typedef struct loop_class {
    range r[MAX_RANGES];
    size_t n;
    uint32_t *full;       /* [words] tokens made only of C's characters */
    int32_t *rest;        /* [n_rest] the other text tokens */
    uint32_t *rest_off;   /* [n_rest] byte offset of their first character outside C */
    size_t n_rest;
} loop_class;

struct cmf__gloops {
    pthread_mutex_t mu;
    loop_class *c[MAX_CLASSES];
    size_t n;
};

cmf__gloops *cmf__gloops_new(void)
{
    cmf__gloops *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    pthread_mutex_init(&l->mu, NULL);
    return l;
}

void cmf__gloops_free(cmf__gloops *l)
{
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) {
        free(l->c[i]->full);
        free(l->c[i]->rest);
        free(l->c[i]->rest_off);
        free(l->c[i]);
    }
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static int cmp_range(const void *a, const void *b)
{
    const range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The class at p as sorted, merged ranges of code points; false when it
 * has more than MAX_RANGES. */
static bool class_ranges(const cmf__gram *g, uint32_t p, range *out, size_t *n)
{
    const cmf__gelem *e = &g->el[p];
    if (e->type == CMF__G_ANY) {
        out[0] = (range){0, 0x10FFFF};
        *n = 1;
        return true;
    }
    bool neg = e->type == CMF__G_CHAR_NOT;
    range tmp[MAX_RANGES];
    size_t k = 0;
    do {
        uint32_t lo = e->value, hi = lo;
        if (e[1].type == CMF__G_RNG_UPPER) hi = (++e)->value;
        if (k == MAX_RANGES) return false;
        tmp[k++] = (range){lo, hi};
        e++;
    } while (e->type == CMF__G_CHAR_ALT);
    qsort(tmp, k, sizeof *tmp, cmp_range);
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m && tmp[i].lo <= out[m - 1].hi + 1) {
            if (tmp[i].hi > out[m - 1].hi) out[m - 1].hi = tmp[i].hi;
        } else out[m++] = tmp[i];
    }
    if (neg) {
        range inv[MAX_RANGES + 1];
        size_t q = 0;
        uint32_t at = 0;
        for (size_t i = 0; i < m; i++) {
            if (out[i].lo > at) inv[q++] = (range){at, out[i].lo - 1};
            at = out[i].hi + 1;
        }
        if (at <= 0x10FFFF) inv[q++] = (range){at, 0x10FFFF};
        if (q > MAX_RANGES) return false;
        memcpy(out, inv, q * sizeof *inv);
        m = q;
    }
    *n = m;
    return true;
}

static bool in_ranges(const range *r, size_t n, uint32_t c)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c < r[mid].lo) hi = mid;
        else if (c > r[mid].hi) lo = mid + 1;
        else return true;
    }
    return false;
}

/* Whether a ⊇ b, and whether they meet at all. */
static void relate(const range *a, size_t na, const range *b, size_t nb, bool *contains, bool *meets)
{
    *contains = true, *meets = false;
    for (size_t j = 0; j < nb; j++) {
        /* is b[j] inside one range of a? does it touch any? */
        bool inside = false;
        for (size_t i = 0; i < na; i++) {
            if (a[i].lo <= b[j].hi && a[i].hi >= b[j].lo) *meets = true;
            if (a[i].lo <= b[j].lo && a[i].hi >= b[j].hi) inside = true;
        }
        if (!inside) *contains = false;
    }
}

/* The first code point of C that is a Unicode scalar value. */
static bool representative(const range *r, size_t n, uint32_t *c)
{
    for (size_t i = 0; i < n; i++) {
        if (r[i].lo < 0xD800 || r[i].lo > 0xDFFF) {
            *c = r[i].lo;
            return true;
        }
        if (r[i].hi > 0xDFFF) {
            *c = 0xE000;
            return true;
        }
    }
    return false;
}

/* Finds a class s loops on (see the file comment); out/n receive it. */
static int find_loop(const cmf__gram *g, const cmf__gstate *s, range *out, size_t *n, cmf__gstate *a, cmf__gstate *b,
                     cmf__buf *k1, cmf__buf *k2)
{
    if (s->need || !s->n_stacks) return 0;
    static const size_t MAXS = 16;
    if (s->n_stacks > MAXS) return 0;
    range cls[16][MAX_RANGES];
    size_t ncls[16];
    for (size_t i = 0; i < s->n_stacks; i++) {
        size_t len = s->off[i + 1] - s->off[i];
        ncls[i] = 0;
        if (len && !class_ranges(g, s->pos[s->off[i] + len - 1], cls[i], &ncls[i])) return 0;
    }
    for (size_t i = 0; i < s->n_stacks; i++) {
        if (!ncls[i]) continue;
        bool ok = true;
        for (size_t j = 0; j < s->n_stacks && ok; j++) {
            if (j == i || !ncls[j]) continue;
            bool contains, meets;
            relate(cls[j], ncls[j], cls[i], ncls[i], &contains, &meets);
            if (meets && !contains) ok = false;
        }
        uint32_t c;
        if (!ok || !representative(cls[i], ncls[i], &c)) continue;
        char u[4];
        size_t ul = cmf__utf8_put(c, u);
        const cmf__gstate *cur = s;
        cmf__gstate *bufs[2] = {a, b};
        int r = 1;
        for (size_t k = 0; k < ul && r == 1; k++) {
            r = cmf__gstate_byte(g, cur, (uint8_t)u[k], bufs[k & 1]);
            cur = bufs[k & 1];
        }
        if (r < 0) return -1;
        if (r == 0) continue;
        if (cmf__gstate_key(s, k1) || cmf__gstate_key(cur, k2)) return -1;
        if (k1->len == k2->len && !memcmp(k1->data, k2->data, k1->len)) {
            memcpy(out, cls[i], ncls[i] * sizeof *out);
            *n = ncls[i];
            return 1;
        }
    }
    return 0;
}

static loop_class *make_class(const cmf__gvocab *v, const range *r, size_t n)
{
    int32_t nv = cmf__gvocab_n_vocab(v);
    loop_class *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    memcpy(c->r, r, n * sizeof *r);
    c->n = n;
    c->full = calloc(((size_t)nv + 31) / 32, sizeof *c->full);
    size_t cap = 1024;
    c->rest = malloc(cap * sizeof *c->rest);
    c->rest_off = malloc(cap * sizeof *c->rest_off);
    if (!c->full || !c->rest || !c->rest_off) goto fail;
    for (int32_t t = 0; t < nv; t++) {
        size_t len;
        const uint8_t *p = cmf__gvocab_bytes(v, t, &len);
        if (!p) continue;
        size_t k = 0;
        while (k < len) {
            uint32_t cp;
            size_t l = cmf__utf8_next(p + k, len - k, &cp);
            if (!l || !in_ranges(r, n, cp)) break;
            k += l;
        }
        if (k == len) {
            c->full[t >> 5] |= 1u << (t & 31);
            continue;
        }
        if (c->n_rest == cap) {
            cap *= 2;
            int32_t *nr = realloc(c->rest, cap * sizeof *nr);
            if (nr) c->rest = nr;
            uint32_t *no = realloc(c->rest_off, cap * sizeof *no);
            if (no) c->rest_off = no;
            if (!nr || !no) goto fail;
        }
        c->rest[c->n_rest] = t;
        c->rest_off[c->n_rest++] = (uint32_t)k;
    }
    return c;
fail:
    free(c->full);
    free(c->rest);
    free(c->rest_off);
    free(c);
    return NULL;
}

static loop_class *get_class(cmf__gloops *l, const cmf__gvocab *v, const range *r, size_t n)
{
    pthread_mutex_lock(&l->mu);
    loop_class *c = NULL;
    for (size_t i = 0; i < l->n && !c; i++)
        if (l->c[i]->n == n && !memcmp(l->c[i]->r, r, n * sizeof *r)) c = l->c[i];
    if (!c && l->n < MAX_CLASSES) {
        c = make_class(v, r, n);
        if (c) l->c[l->n++] = c;
    }
    pthread_mutex_unlock(&l->mu);
    return c;
}

cmf_status cmf__gmask(const cmf__gvocab *v, const cmf__gram *g, cmf__gloops *loops, const cmf__gstate *s,
                      cmf__gwalk *w, uint32_t *bits)
{
    range r[MAX_RANGES];
    size_t n = 0;
    cmf__gstate a = {0}, b = {0};
    cmf__buf k1 = {0}, k2 = {0};
    int found = loops ? find_loop(g, s, r, &n, &a, &b, &k1, &k2) : 0;
    cmf__buf_free(&k1);
    cmf__buf_free(&k2);
    loop_class *c = found == 1 ? get_class(loops, v, r, n) : NULL;
    if (!c) {
        cmf__gstate_free(&a);
        cmf__gstate_free(&b);
        if (found < 0) return CMF_ERR_NOMEM;
        return cmf__gvocab_mask(v, g, s, w, bits);
    }
    int32_t nv = cmf__gvocab_n_vocab(v);
    memcpy(bits, c->full, ((size_t)nv + 31) / 32 * sizeof *bits);
    if (cmf__gstate_can_end(s))
        for (int32_t t = 0; t < nv; t++)
            if (cmf__gvocab_is_eos(v, t)) bits[t >> 5] |= 1u << (t & 31);
    cmf_status st = CMF_OK;
    for (size_t i = 0; i < c->n_rest && !st; i++) {
        size_t len;
        const uint8_t *p = cmf__gvocab_bytes(v, c->rest[i], &len);
        const cmf__gstate *cur = s;
        cmf__gstate *bufs[2] = {&a, &b};
        int rr = 1;
        for (size_t k = c->rest_off[i], j = 0; k < len && rr == 1; k++, j++) {
            rr = cmf__gstate_byte(g, cur, p[k], bufs[j & 1]);
            cur = bufs[j & 1];
        }
        if (rr < 0) st = CMF_ERR_NOMEM;
        else if (rr) bits[c->rest[i] >> 5] |= 1u << (c->rest[i] & 31);
    }
    cmf__gstate_free(&a);
    cmf__gstate_free(&b);
    return st;
}
