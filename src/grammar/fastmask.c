/* fastmask.c — the allowed-token mask, fast where most of the vocabulary
 * is allowed. A state s runs on a character class C when every stack's
 * top class either contains C or is disjoint from it: then every
 * character of C leads to one same next state, and a chain s_0 = s, s_1,
 * s_2 ... follows C character by character (the inside of a JSON string:
 * s_1 = s_0, a loop; a string of bounded length: a chain that dies after
 * the bound). A token whose first q characters are in C and nothing else
 * is allowed exactly when s_q is alive; a token leaving C after q
 * characters continues from s_q with its remaining bytes, run through a
 * trie of those suffixes. The per-class token data is computed once per
 * vocabulary (for any grammar) and kept, under a lock. States without such a
 * class walk the whole vocabulary's trie. Both give exactly the set the
 * brute force gives (tests/test_grammar_mask.c). */
#include "grammar/grammar.h"
#include "text/unicode.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANGES 256
#define MAX_CLASSES 64 /* beyond, states of further classes walk the trie */
#define MIN_CLASS 128  /* code points a class needs for the fast path */

typedef struct range { uint32_t lo, hi; } range;

typedef struct loop_class {
    range r[MAX_RANGES];
    size_t n;
    uint32_t *full;       /* [words] tokens made only of C's characters */
    int32_t *by_q;        /* those tokens by their length q in characters */
    uint32_t *q_start;    /* [max_q + 2] by_q[q_start[q] .. q_start[q + 1]) have length q */
    size_t max_q;         /* the longest run of C characters a token starts with */
    cmf__gtrie rest_all;  /* every other text token, from its first character outside C */
    cmf__gtrie *rest_q;   /* [max_q + 1] the same, by the number q of C characters before */
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

static void free_class(loop_class *c)
{
    if (!c) return;
    free(c->full);
    free(c->by_q);
    free(c->q_start);
    cmf__gtrie_free(&c->rest_all);
    if (c->rest_q)
        for (size_t q = 0; q <= c->max_q; q++) cmf__gtrie_free(&c->rest_q[q]);
    free(c->rest_q);
    free(c);
}

void cmf__gloops_free(cmf__gloops *l)
{
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) free_class(l->c[i]);
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

/* Whether every stack top of s contains C or is disjoint from it. */
static int uniform(const cmf__gram *g, const cmf__gstate *s, const range *c, size_t nc)
{
    range cls[MAX_RANGES];
    size_t n;
    for (size_t i = 0; i < s->n_stacks; i++) {
        size_t len = s->off[i + 1] - s->off[i];
        if (!len) continue;
        if (!class_ranges(g, s->pos[s->off[i] + len - 1], cls, &n)) return 0;
        bool contains, meets;
        relate(cls, n, c, nc, &contains, &meets);
        if (meets && !contains) return 0;
    }
    return 1;
}

/* Advances s by the code point c into out: 1 alive, 0 dead, -1 no memory. */
static int step_cp(const cmf__gram *g, const cmf__gstate *s, uint32_t c, cmf__gstate *tmp, cmf__gstate *out)
{
    char u[4];
    size_t ul = cmf__utf8_put(c, u);
    const cmf__gstate *cur = s;
    int r = 1;
    for (size_t k = 0; k < ul && r == 1; k++) {
        cmf__gstate *dst = (ul - k) & 1 ? out : tmp; /* the last byte lands in out */
        r = cmf__gstate_byte(g, cur, (uint8_t)u[k], dst);
        cur = dst;
    }
    return r;
}

/* A class s runs on (see the file comment) into out/n. */
static int find_class(const cmf__gram *g, const cmf__gstate *s, range *out, size_t *n)
{
    if (s->need || !s->n_stacks || s->n_stacks > 16) return 0;
    for (size_t i = 0; i < s->n_stacks; i++) {
        size_t len = s->off[i + 1] - s->off[i];
        uint32_t c;
        if (!len || !class_ranges(g, s->pos[s->off[i] + len - 1], out, n)) continue;
        /* a small class prunes the trie at once: the walk is cheap there */
        uint64_t size = 0;
        for (size_t k = 0; k < *n; k++) size += out[k].hi - out[k].lo + 1;
        if (size < MIN_CLASS) continue;
        if (representative(out, *n, &c) && uniform(g, s, out, *n)) return 1;
    }
    return 0;
}

static loop_class *make_class(const cmf__gvocab *v, const range *r, size_t n)
{
    int32_t nv = cmf__gvocab_n_vocab(v);
    loop_class *c = calloc(1, sizeof *c);
    uint32_t *q = malloc((size_t)nv * sizeof *q), *off = malloc((size_t)nv * sizeof *off);
    cmf__gtrie_key *keys = malloc((size_t)nv * sizeof *keys);
    size_t n_rest = 0;
    if (!c || !q || !off || !keys) goto fail;
    memcpy(c->r, r, n * sizeof *r);
    c->n = n;
    if (!(c->full = calloc(((size_t)nv + 31) / 32, sizeof *c->full))) goto fail;
    for (int32_t t = 0; t < nv; t++) {
        size_t len;
        const uint8_t *p = cmf__gvocab_bytes(v, t, &len);
        q[t] = UINT32_MAX;
        if (!p) continue;
        size_t k = 0;
        uint32_t chars = 0;
        while (k < len) {
            uint32_t cp;
            size_t l = cmf__utf8_next(p + k, len - k, &cp);
            if (!l || !in_ranges(r, n, cp)) break;
            k += l, chars++;
        }
        q[t] = chars;
        off[t] = (uint32_t)k;
        if (chars > c->max_q) c->max_q = chars;
        if (k == len) c->full[t >> 5] |= 1u << (t & 31);
        else keys[n_rest++] = (cmf__gtrie_key){p + k, len - k, t};
    }
    /* full tokens by length */
    if (!(c->q_start = calloc(c->max_q + 2, sizeof *c->q_start))) goto fail;
    size_t n_full = 0;
    for (int32_t t = 0; t < nv; t++)
        if (c->full[t >> 5] >> (t & 31) & 1) c->q_start[q[t] + 1]++, n_full++;
    for (size_t i = 1; i <= c->max_q + 1; i++) c->q_start[i] += c->q_start[i - 1];
    if (!(c->by_q = malloc((n_full ? n_full : 1) * sizeof *c->by_q))) goto fail;
    {
        uint32_t *fill = malloc((c->max_q + 1) * sizeof *fill);
        if (!fill) goto fail;
        memcpy(fill, c->q_start, (c->max_q + 1) * sizeof *fill);
        for (int32_t t = 0; t < nv; t++)
            if (c->full[t >> 5] >> (t & 31) & 1) c->by_q[fill[q[t]]++] = t;
        free(fill);
    }
    /* the others' suffixes: one trie, and one per q */
    if (!(c->rest_q = calloc(c->max_q + 1, sizeof *c->rest_q))) goto fail;
    if (cmf__gtrie_build(&c->rest_all, keys, n_rest)) goto fail;
    {
        /* keys are now sorted by suffix; split them by q (a stable counting
         * sort), each slice then a trie of its own */
        cmf__gtrie_key *part = malloc((n_rest ? n_rest : 1) * sizeof *part);
        size_t *start = calloc(c->max_q + 2, sizeof *start);
        if (!part || !start) {
            free(part);
            free(start);
            goto fail;
        }
        for (size_t i = 0; i < n_rest; i++) start[q[keys[i].id] + 1]++;
        for (size_t qq = 1; qq <= c->max_q + 1; qq++) start[qq] += start[qq - 1];
        size_t *fill = malloc((c->max_q + 1) * sizeof *fill);
        bool ok = fill != NULL;
        if (ok) {
            memcpy(fill, start, (c->max_q + 1) * sizeof *fill);
            for (size_t i = 0; i < n_rest; i++) part[fill[q[keys[i].id]]++] = keys[i];
        }
        for (size_t qq = 0; ok && qq <= c->max_q; qq++)
            if (start[qq + 1] > start[qq] && cmf__gtrie_build(&c->rest_q[qq], part + start[qq], start[qq + 1] - start[qq]))
                ok = false;
        free(fill);
        free(part);
        free(start);
        if (!ok) goto fail;
    }
    free(q);
    free(off);
    free(keys);
    return c;
fail:
    free(q);
    free(off);
    free(keys);
    free_class(c);
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

/* The chain s_0 .. s_m along C (w->chain); *dead: the first index whose
 * state is dead (m + 1 when none). Returns 0 when some chain state is not
 * uniform on C before m (the caller falls back), -1 on no memory. */
static int chain(const cmf__gram *g, const cmf__gstate *s, const range *r, size_t n, size_t m, cmf__gwalk *w,
                 const cmf__gstate ***out, size_t *dead)
{
    uint32_t rep = 0;
    if (!representative(r, n, &rep)) return 0;
    if (w->n_chain < m + 2) {
        cmf__gstate *nc = realloc(w->chain, (m + 2) * sizeof *nc);
        const cmf__gstate **np = realloc(w->chain_at, (m + 2) * sizeof *np);
        if (nc) w->chain = nc;
        if (np) w->chain_at = np;
        if (!nc || !np) return -1;
        memset(w->chain + w->n_chain, 0, (m + 2 - w->n_chain) * sizeof *nc);
        w->n_chain = m + 2;
    }
    const cmf__gstate **at = w->chain_at;
    at[0] = s;
    *dead = m + 1;
    cmf__buf k1 = {0}, k2 = {0};
    int ret = 1;
    for (size_t j = 0; j < m; j++) {
        if (j && !uniform(g, at[j], r, n)) {
            ret = 0;
            break;
        }
        int st = step_cp(g, at[j], rep, &w->chain[m + 1], &w->chain[j + 1]);
        if (st < 0) {
            ret = -1;
            break;
        }
        if (!st) {
            *dead = j + 1;
            break;
        }
        at[j + 1] = &w->chain[j + 1];
        /* a loop: every later state is this one */
        if (cmf__gstate_key(at[j], &k1) || cmf__gstate_key(at[j + 1], &k2)) {
            ret = -1;
            break;
        }
        if (k1.len == k2.len && !memcmp(k1.data, k2.data, k1.len)) {
            for (size_t i = j + 1; i <= m; i++) at[i] = at[j];
            break;
        }
    }
    cmf__buf_free(&k1);
    cmf__buf_free(&k2);
    *out = at;
    return ret;
}

cmf_status cmf__gmask(const cmf__gvocab *v, const cmf__gram *g, cmf__gloops *loops, const cmf__gstate *s,
                      cmf__gwalk *w, uint32_t *bits)
{
    range r[MAX_RANGES];
    size_t n = 0;
    loop_class *c = loops && find_class(g, s, r, &n) ? get_class(loops, v, r, n) : NULL;
    const cmf__gstate **at = NULL;
    size_t dead = 0;
    int ok = c ? chain(g, s, r, n, c->max_q, w, &at, &dead) : 0;
    if (ok < 0) return cmf__error(CMF_ERR_NOMEM, "grammar: out of memory");
    if (!ok) return cmf__gvocab_mask(v, g, s, w, bits);
    int32_t nv = cmf__gvocab_n_vocab(v);
    size_t words = ((size_t)nv + 31) / 32;
    bool loop = dead > c->max_q && (c->max_q == 0 || at[1] == at[0]);
    if (loop) memcpy(bits, c->full, words * sizeof *bits);
    else {
        memset(bits, 0, words * sizeof *bits);
        for (uint32_t i = c->q_start[1]; i < c->q_start[dead < c->max_q + 1 ? dead : c->max_q + 1]; i++)
            bits[c->by_q[i] >> 5] |= 1u << (c->by_q[i] & 31);
    }
    if (cmf__gstate_can_end(s))
        for (int32_t t = 0; t < nv; t++)
            if (cmf__gvocab_is_eos(v, t)) bits[t >> 5] |= 1u << (t & 31);
    cmf_status st = CMF_OK;
    if (loop) st = cmf__gtrie_walk(&c->rest_all, g, s, w, bits);
    else
        for (size_t qq = 0; qq < dead && qq <= c->max_q && !st; qq++)
            if (c->rest_q[qq].n_nodes) st = cmf__gtrie_walk(&c->rest_q[qq], g, at[qq], w, bits);
    return st;
}
