/* match.c — the grammar matcher: a state is the set of pushdown stacks of
 * element positions the input may continue with (each top a character
 * element), plus the partial UTF-8 character read so far. A byte either
 * extends the partial character (kept only while some top's class meets
 * the code points it can still become) or completes it, and the stacks
 * whose top matches advance, rule references expanded until each top is
 * a character element again. Stacks are deduplicated, so equal states
 * have equal contents (cmf__gstate_key). */
#include "grammar/grammar.h"

#include <stdlib.h>
#include <string.h>

#define MAX_STATE (1 << 20)  /* stack entries one state may hold */
#define MAX_EXPAND (1 << 20) /* rule expansions one step may take: nullable
                              * alternatives nested under a repeat otherwise
                              * multiply paths to the same few stacks */

static cmf_status grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return CMF_OK;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q) return cmf__error(CMF_ERR_NOMEM, "grammar: out of memory (%zu stack entries)", nc);
    *p = q;
    *cap = nc;
    return CMF_OK;
}

static void clear(cmf__gstate *s)
{
    s->n_pos = 0;
    s->n_stacks = 0;
    s->cp = 0;
    s->need = 0;
    s->lo = 0x80, s->hi = 0xBF;
}

void cmf__gstate_free(cmf__gstate *s)
{
    if (!s) return;
    free(s->pos);
    free(s->off);
    free(s->suf);
    memset(s, 0, sizeof *s);
}

/* Adds the stack base[0..nb) ++ suf[0..ns) unless already present. */
static cmf_status add_stack(cmf__gstate *o, const uint32_t *base, size_t nb, const uint32_t *suf, size_t ns)
{
    size_t n = nb + ns;
    for (size_t i = 0; i < o->n_stacks; i++) {
        const uint32_t *x = o->pos + o->off[i];
        if (o->off[i + 1] - o->off[i] != n) continue;
        if ((!nb || !memcmp(x, base, nb * sizeof *x)) && (!ns || !memcmp(x + nb, suf, ns * sizeof *x))) return CMF_OK;
    }
    cmf_status st;
    if (o->n_pos + n > MAX_STATE)
        return cmf__error(CMF_ERR_UNSUPPORTED, "grammar: more than %d stack entries at one point of the input "
                          "(a highly ambiguous grammar)", MAX_STATE);
    if ((st = grow((void **)&o->pos, &o->cap_pos, o->n_pos + n, sizeof *o->pos))) return st;
    if ((st = grow((void **)&o->off, &o->cap_off, o->n_stacks + 2, sizeof *o->off))) return st;
    if (o->n_stacks == 0) o->off[0] = 0;
    if (nb) memcpy(o->pos + o->n_pos, base, nb * sizeof *base);
    if (ns) memcpy(o->pos + o->n_pos + nb, suf, ns * sizeof *suf);
    o->n_pos += n;
    o->off[++o->n_stacks] = (uint32_t)o->n_pos;
    return CMF_OK;
}

static bool end_of_seq(const cmf__gram *g, uint32_t p)
{
    return g->el[p].type == CMF__G_END || g->el[p].type == CMF__G_ALT;
}

/* Expands the stack base[0..nb) ++ suf[0..ns) until its top is a
 * character element (or it is empty), adding each result to o. suf is
 * o->suf; entries below ns belong to the caller. */
static cmf_status expand(const cmf__gram *g, cmf__gstate *o, const uint32_t *base, size_t nb, size_t ns, size_t depth,
                         size_t *budget)
{
    if (!*budget)
        return cmf__error(CMF_ERR_UNSUPPORTED, "grammar: more than %d rule expansions at one point of the input "
                          "(a highly ambiguous grammar: nullable alternatives under a repeat?)", MAX_EXPAND);
    --*budget;
    uint32_t top;
    if (ns) top = o->suf[ns - 1];
    else if (nb) top = base[nb - 1];
    else return add_stack(o, base, 0, o->suf, 0);
    const cmf__gelem *e = &g->el[top];
    if (e->type != CMF__G_REF) return add_stack(o, base, nb, o->suf, ns);
    if (depth > g->n_rules + 2) return cmf__error(CMF_ERR_PARSE, "grammar: expansion deeper than its rules");
    /* pop the reference, push its continuation and each alternative; the
     * entry popped from suf is the caller's and is put back at the end */
    size_t ns0 = ns;
    if (ns) ns--;
    else nb--;
    cmf_status st;
    if ((st = grow((void **)&o->suf, &o->cap_suf, ns + 2, sizeof *o->suf))) return st;
    if (!end_of_seq(g, top + 1)) o->suf[ns++] = top + 1;
    uint32_t p = g->rule_start[e->value];
    for (;;) {
        if (end_of_seq(g, p)) st = expand(g, o, base, nb, ns, depth + 1, budget);
        else {
            if ((st = grow((void **)&o->suf, &o->cap_suf, ns + 2, sizeof *o->suf))) return st;
            o->suf[ns] = p;
            st = expand(g, o, base, nb, ns + 1, depth + 1, budget);
        }
        if (st) return st;
        /* next alternative */
        while (!end_of_seq(g, p)) p++;
        if (g->el[p].type == CMF__G_END) break;
        p++;
    }
    if (ns0) o->suf[ns0 - 1] = top;
    return CMF_OK;
}

cmf_status cmf__gstate_init(const cmf__gram *g, cmf__gstate *s)
{
    clear(s);
    cmf_status st = grow((void **)&s->suf, &s->cap_suf, 4, sizeof *s->suf);
    if (st) return st;
    size_t budget = MAX_EXPAND;
    /* root's alternatives, each expanded */
    uint32_t p = g->rule_start[g->root];
    for (;;) {
        if (end_of_seq(g, p)) st = expand(g, s, NULL, 0, 0, 0, &budget);
        else {
            s->suf[0] = p;
            st = expand(g, s, NULL, 0, 1, 0, &budget);
        }
        if (st) return st;
        while (!end_of_seq(g, p)) p++;
        if (g->el[p].type == CMF__G_END) break;
        p++;
    }
    return CMF_OK;
}

cmf_status cmf__gstate_copy(cmf__gstate *d, const cmf__gstate *s)
{
    cmf_status st;
    if ((st = grow((void **)&d->pos, &d->cap_pos, s->n_pos + 1, sizeof *d->pos))) return st;
    if ((st = grow((void **)&d->off, &d->cap_off, s->n_stacks + 1, sizeof *d->off))) return st;
    if (s->n_pos) memcpy(d->pos, s->pos, s->n_pos * sizeof *d->pos);
    if (s->n_stacks) memcpy(d->off, s->off, (s->n_stacks + 1) * sizeof *d->off);
    d->n_pos = s->n_pos;
    d->n_stacks = s->n_stacks;
    d->cp = s->cp, d->need = s->need, d->lo = s->lo, d->hi = s->hi;
    return CMF_OK;
}

/* Whether the class at p matches c; *next receives the element after it. */
static bool class_match(const cmf__gram *g, uint32_t p, uint32_t c, uint32_t *next)
{
    const cmf__gelem *e = &g->el[p];
    if (e->type == CMF__G_ANY) {
        *next = p + 1;
        return true;
    }
    bool neg = e->type == CMF__G_CHAR_NOT, hit = false;
    do {
        uint32_t lo = e->value, hi = lo;
        if (e[1].type == CMF__G_RNG_UPPER) hi = (++e)->value;
        if (c >= lo && c <= hi) hit = true;
        e++;
    } while (e->type == CMF__G_CHAR_ALT);
    *next = (uint32_t)(e - g->el);
    return hit != neg;
}

/* Whether some code point of [lo, hi] matches the class at p. */
static bool class_meets(const cmf__gram *g, uint32_t p, uint32_t lo, uint32_t hi)
{
    const cmf__gelem *e0 = &g->el[p];
    if (e0->type == CMF__G_ANY) return true;
    bool neg = e0->type == CMF__G_CHAR_NOT;
    if (!neg) {
        const cmf__gelem *e = e0;
        do {
            uint32_t a = e->value, b = a;
            if (e[1].type == CMF__G_RNG_UPPER) b = (++e)->value;
            if (a <= hi && b >= lo) return true;
            e++;
        } while (e->type == CMF__G_CHAR_ALT);
        return false;
    }
    /* negated: is [lo, hi] entirely covered by the ranges? */
    uint32_t x = lo;
    for (;;) {
        bool moved = false;
        const cmf__gelem *e = e0;
        do {
            uint32_t a = e->value, b = a;
            if (e[1].type == CMF__G_RNG_UPPER) b = (++e)->value;
            if (a <= x && x <= b) {
                if (b >= hi) return false;
                x = b + 1;
                moved = true;
            }
            e++;
        } while (e->type == CMF__G_CHAR_ALT);
        if (!moved) return true;
    }
}

/* Advances every stack of in by the complete code point c into out. */
static cmf_status advance_cp(const cmf__gram *g, const cmf__gstate *in, uint32_t c, cmf__gstate *out)
{
    cmf_status st;
    size_t budget = MAX_EXPAND;
    for (size_t i = 0; i < in->n_stacks; i++) {
        const uint32_t *stk = in->pos + in->off[i];
        size_t n = in->off[i + 1] - in->off[i];
        if (!n) continue;
        uint32_t next;
        if (!class_match(g, stk[n - 1], c, &next)) continue;
        size_t ns = 0;
        if ((st = grow((void **)&out->suf, &out->cap_suf, 2, sizeof *out->suf))) return st;
        if (!end_of_seq(g, next)) out->suf[ns++] = next;
        if ((st = expand(g, out, stk, n - 1, ns, 0, &budget))) return st;
    }
    return CMF_OK;
}

int cmf__gstate_byte(const cmf__gram *g, const cmf__gstate *in, uint8_t b, cmf__gstate *out)
{
    clear(out);
    uint32_t c;
    if (in->need) {
        if (b < in->lo || b > in->hi) return 0;
        c = in->cp << 6 | (b & 0x3F);
        if (in->need > 1) {
            /* still partial: keep the stacks while some class meets the
             * code points this prefix can still become */
            unsigned rest = 6u * (in->need - 1u);
            uint32_t lo = c << rest, hi = lo | ((1u << rest) - 1u);
            bool any = false;
            for (size_t i = 0; i < in->n_stacks && !any; i++) {
                size_t n = in->off[i + 1] - in->off[i];
                if (n && class_meets(g, in->pos[in->off[i] + n - 1], lo, hi)) any = true;
            }
            if (!any) return 0;
            if (cmf__gstate_copy(out, in)) return -1;
            out->cp = c, out->need = (uint8_t)(in->need - 1), out->lo = 0x80, out->hi = 0xBF;
            return 1;
        }
    } else if (b < 0x80) {
        c = b;
    } else {
        uint8_t need, lo = 0x80, hi = 0xBF;
        if (b >= 0xC2 && b <= 0xDF) need = 1, c = b & 0x1Fu;
        else if (b >= 0xE0 && b <= 0xEF) {
            need = 2, c = b & 0x0Fu;
            if (b == 0xE0) lo = 0xA0;
            if (b == 0xED) hi = 0x9F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            need = 3, c = b & 0x07u;
            if (b == 0xF0) lo = 0x90;
            if (b == 0xF4) hi = 0x8F;
        } else return 0; /* a continuation byte with nothing to continue, or never valid */
        unsigned rest = 6u * (need - 1u);
        uint32_t cplo = ((c << 6) | (lo & 0x3Fu)) << rest, cphi = (((c << 6) | (hi & 0x3Fu)) << rest) | ((1u << rest) - 1u);
        bool any = false;
        for (size_t i = 0; i < in->n_stacks && !any; i++) {
            size_t n = in->off[i + 1] - in->off[i];
            if (n && class_meets(g, in->pos[in->off[i] + n - 1], cplo, cphi)) any = true;
        }
        if (!any) return 0;
        if (cmf__gstate_copy(out, in)) return -1;
        out->cp = c, out->need = need, out->lo = lo, out->hi = hi;
        return 1;
    }
    if (advance_cp(g, in, c, out)) return -1;
    return out->n_stacks ? 1 : 0;
}

bool cmf__gstate_can_end(const cmf__gstate *s)
{
    if (s->need) return false;
    for (size_t i = 0; i < s->n_stacks; i++)
        if (s->off[i + 1] == s->off[i]) return true;
    return false;
}

cmf_status cmf__gstate_key(const cmf__gstate *s, cmf__buf *out)
{
    out->len = 0;
    uint32_t head[4] = {(uint32_t)s->n_stacks, s->cp, s->need, (uint32_t)s->lo << 8 | s->hi};
    cmf_status st = cmf__buf_append(out, head, sizeof head);
    if (!st && s->n_stacks) st = cmf__buf_append(out, s->off, (s->n_stacks + 1) * sizeof *s->off);
    if (!st && s->n_pos) st = cmf__buf_append(out, s->pos, s->n_pos * sizeof *s->pos);
    return st;
}
