/* gbnf.c — parses GBNF (llama.cpp's grammar syntax) into cmf__gram:
 * rules "name ::= alternatives", literals "..." with escapes, classes
 * [...] with ranges and ^, ".", groups, * + ? {m} {m,} {m,n} {,n}, "#"
 * comments. Repetitions become generated right-recursive rules (so a long
 * repetition never grows a stack). Every error names line and column.
 * Left-recursive grammars are refused: the matcher could not expand them. */
#include "grammar/grammar.h"
#include "text/unicode.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPEAT 10000 /* {m,n} bound: each copy is elements */

typedef struct prule {
    char *name;
    cmf__gelem *el;
    size_t n, cap;
    size_t def_at;  /* offset of the definition, SIZE_MAX = only referenced */
    size_t ref_at;  /* offset of the first reference */
} prule;

typedef struct parser {
    const char *s, *what;
    size_t len, p;
    prule *r;
    size_t n_r, cap_r;
    cmf_status st;  /* first error */
    int depth;
} parser;

static cmf_status perr(parser *ps, size_t at, const char *fmt, ...) CMF_PRINTF(3, 4);
static cmf_status perr(parser *ps, size_t at, const char *fmt, ...)
{
    if (ps->st) return ps->st;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < ps->len; i++) {
        if (ps->s[i] == '\n') line++, col = 1;
        else col++;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ps->st = cmf__error(CMF_ERR_PARSE, "%s: line %zu, column %zu: %s", ps->what, line, col, msg);
    return ps->st;
}

static cmf_status push(parser *ps, uint32_t r, uint32_t type, uint32_t value)
{
    prule *x = &ps->r[r];
    if (x->n == x->cap) {
        size_t nc = x->cap ? x->cap * 2 : 16;
        cmf__gelem *e = realloc(x->el, nc * sizeof *e);
        if (!e) return ps->st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", ps->what);
        x->el = e, x->cap = nc;
    }
    x->el[x->n++] = (cmf__gelem){type, value};
    return CMF_OK;
}

/* The index of rule `name`, adding it when new. */
static int64_t rule_id(parser *ps, const char *name, size_t nlen, size_t at)
{
    for (size_t i = 0; i < ps->n_r; i++)
        if (strlen(ps->r[i].name) == nlen && !memcmp(ps->r[i].name, name, nlen)) return (int64_t)i;
    if (ps->n_r == ps->cap_r) {
        size_t nc = ps->cap_r ? ps->cap_r * 2 : 16;
        prule *r = realloc(ps->r, nc * sizeof *r);
        if (!r) return perr(ps, at, "out of memory"), -1;
        ps->r = r, ps->cap_r = nc;
    }
    char *n = malloc(nlen + 1);
    if (!n) return perr(ps, at, "out of memory"), -1;
    memcpy(n, name, nlen);
    n[nlen] = 0;
    ps->r[ps->n_r] = (prule){.name = n, .def_at = SIZE_MAX, .ref_at = at};
    return (int64_t)ps->n_r++;
}

/* A new rule named <base>_<n>. */
static int64_t gen_rule(parser *ps, uint32_t base, size_t at)
{
    char name[160];
    snprintf(name, sizeof name, "%.120s_%zu", ps->r[base].name, ps->n_r);
    int64_t id = rule_id(ps, name, strlen(name), at);
    if (id >= 0) ps->r[id].def_at = at;
    return id;
}

static bool is_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Skips blanks and comments; newlines only when `nl`. */
static void space(parser *ps, bool nl)
{
    while (ps->p < ps->len) {
        char c = ps->s[ps->p];
        if (c == ' ' || c == '\t' || c == '\r' || (nl && c == '\n')) ps->p++;
        else if (c == '#') {
            while (ps->p < ps->len && ps->s[ps->p] != '\n') ps->p++;
        } else break;
    }
}

static int hexdig(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads one (possibly escaped) character of a literal or class. */
static bool read_char(parser *ps, uint32_t *cp)
{
    size_t at = ps->p;
    if (ps->p >= ps->len) return perr(ps, at, "unexpected end of input"), false;
    uint8_t c = (uint8_t)ps->s[ps->p];
    if (c == '\\') {
        if (ps->p + 1 >= ps->len) return perr(ps, at, "unexpected end of input after '\\'"), false;
        char e = ps->s[ps->p + 1];
        ps->p += 2;
        int nhex = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (nhex) {
            uint32_t v = 0;
            for (int i = 0; i < nhex; i++) {
                int h = ps->p < ps->len ? hexdig(ps->s[ps->p]) : -1;
                if (h < 0) return perr(ps, at, "escape '\\%c' needs %d hex digits", e, nhex), false;
                v = v << 4 | (uint32_t)h;
                ps->p++;
            }
            if (v > 0x10FFFF) return perr(ps, at, "escape value 0x%X is past U+10FFFF", (unsigned)v), false;
            *cp = v;
            return true;
        }
        switch (e) {
        case 'n': *cp = '\n'; return true;
        case 'r': *cp = '\r'; return true;
        case 't': *cp = '\t'; return true;
        case '0': *cp = 0; return true;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': case '/': case '.':
        case '(': case ')': case '*': case '+': case '?': case '{': case '}': case '|':
            *cp = (uint8_t)e;
            return true;
        default:
            return perr(ps, at, "unknown escape '\\%c'", e), false;
        }
    }
    size_t l = cmf__utf8_next((const uint8_t *)ps->s + ps->p, ps->len - ps->p, cp);
    if (!l) return perr(ps, at, "invalid UTF-8"), false;
    ps->p += l;
    return true;
}

static bool alternates(parser *ps, uint32_t r, bool nested);

/* Appends elements [from, from+n) of rule r again (a repetition's copy). */
static bool copy_elems(parser *ps, uint32_t dst, const cmf__gelem *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (push(ps, dst, src[i].type, src[i].value)) return false;
    return true;
}

/* Rewrites the symbol at el[start..n) of rule r as repeated min..max times
 * (max UINT32_MAX: unbounded), as llama.cpp does: min copies, then a
 * generated rule "x r | " for the unbounded tail, or nested optionals. */
static bool repeat(parser *ps, uint32_t r, size_t start, uint32_t min, uint32_t max, size_t at)
{
    size_t n = ps->r[r].n - start;
    cmf__gelem *sym = malloc((n ? n : 1) * sizeof *sym);
    if (!sym) return perr(ps, at, "out of memory"), false;
    memcpy(sym, ps->r[r].el + start, n * sizeof *sym);
    ps->r[r].n = start;
    bool ok = true;
    for (uint32_t i = 0; i < min && ok; i++) ok = copy_elems(ps, r, sym, n);
    if (ok && max == UINT32_MAX) {
        int64_t t = gen_rule(ps, r, at);
        ok = t >= 0 && copy_elems(ps, (uint32_t)t, sym, n) && !push(ps, (uint32_t)t, CMF__G_REF, (uint32_t)t) &&
             !push(ps, (uint32_t)t, CMF__G_ALT, 0) && !push(ps, (uint32_t)t, CMF__G_END, 0) &&
             !push(ps, r, CMF__G_REF, (uint32_t)t);
    } else if (ok && max > min) {
        /* opt_k ::= sym opt_{k-1} | ; built innermost first */
        int64_t last = -1;
        for (uint32_t k = 0; k < max - min && ok; k++) {
            int64_t t = gen_rule(ps, r, at);
            ok = t >= 0 && copy_elems(ps, (uint32_t)t, sym, n);
            if (ok && last >= 0) ok = !push(ps, (uint32_t)t, CMF__G_REF, (uint32_t)last);
            ok = ok && !push(ps, (uint32_t)t, CMF__G_ALT, 0) && !push(ps, (uint32_t)t, CMF__G_END, 0);
            last = t;
        }
        if (ok) ok = !push(ps, r, CMF__G_REF, (uint32_t)last);
    }
    free(sym);
    return ok && !ps->st;
}

static bool read_uint(parser *ps, uint32_t *v)
{
    size_t at = ps->p;
    uint64_t x = 0;
    if (ps->p >= ps->len || ps->s[ps->p] < '0' || ps->s[ps->p] > '9') return perr(ps, at, "expected a number"), false;
    while (ps->p < ps->len && ps->s[ps->p] >= '0' && ps->s[ps->p] <= '9') {
        x = x * 10 + (uint64_t)(ps->s[ps->p++] - '0');
        if (x > MAX_REPEAT) return perr(ps, at, "repetition count past %d", MAX_REPEAT), false;
    }
    *v = (uint32_t)x;
    return true;
}

/* One sequence of symbols (up to '|', ')' or the end of the line). */
static bool sequence(parser *ps, uint32_t r, bool nested)
{
    size_t last = SIZE_MAX; /* start of the last symbol in r's elements */
    while (ps->p < ps->len && !ps->st) {
        size_t at = ps->p;
        char c = ps->s[at];
        if (c == '"') {
            ps->p++;
            last = ps->r[r].n;
            while (ps->p < ps->len && ps->s[ps->p] != '"') {
                uint32_t cp;
                if (ps->s[ps->p] == '\n') return perr(ps, at, "unterminated literal"), false;
                if (!read_char(ps, &cp) || push(ps, r, CMF__G_CHAR, cp)) return false;
            }
            if (ps->p >= ps->len) return perr(ps, at, "unterminated literal"), false;
            ps->p++;
        } else if (c == '[') {
            ps->p++;
            last = ps->r[r].n;
            uint32_t t = CMF__G_CHAR;
            if (ps->p < ps->len && ps->s[ps->p] == '^') ps->p++, t = CMF__G_CHAR_NOT;
            size_t first = ps->r[r].n;
            while (ps->p < ps->len && ps->s[ps->p] != ']') {
                uint32_t lo, hi;
                if (ps->s[ps->p] == '\n') return perr(ps, at, "unterminated character class"), false;
                if (!read_char(ps, &lo)) return false;
                if (push(ps, r, ps->r[r].n == first ? t : CMF__G_CHAR_ALT, lo)) return false;
                if (ps->p + 1 < ps->len && ps->s[ps->p] == '-' && ps->s[ps->p + 1] != ']') {
                    size_t rat = ps->p;
                    ps->p++;
                    if (ps->s[ps->p] == '\n') return perr(ps, at, "unterminated character class"), false;
                    if (!read_char(ps, &hi)) return false;
                    if (hi < lo) return perr(ps, rat, "range end U+%04X below its start U+%04X", (unsigned)hi, (unsigned)lo), false;
                    if (push(ps, r, CMF__G_RNG_UPPER, hi)) return false;
                }
            }
            if (ps->p >= ps->len) return perr(ps, at, "unterminated character class"), false;
            if (ps->r[r].n == first) return perr(ps, at, "empty character class"), false;
            ps->p++;
        } else if (c == '.') {
            ps->p++;
            last = ps->r[r].n;
            if (push(ps, r, CMF__G_ANY, 0)) return false;
        } else if (is_word(c)) {
            size_t e = ps->p;
            while (e < ps->len && is_word(ps->s[e])) e++;
            int64_t id = rule_id(ps, ps->s + ps->p, e - ps->p, at);
            if (id < 0) return false;
            ps->p = e;
            last = ps->r[r].n;
            if (push(ps, r, CMF__G_REF, (uint32_t)id)) return false;
        } else if (c == '(') {
            ps->p++;
            if (++ps->depth > 200) return perr(ps, at, "groups nested deeper than 200"), false;
            int64_t sub = gen_rule(ps, r, at);
            if (sub < 0) return false;
            space(ps, true);
            if (!alternates(ps, (uint32_t)sub, true)) return false;
            ps->depth--;
            if (ps->p < ps->len && ps->s[ps->p] != ')') return perr(ps, ps->p, "unexpected '%c' in a group", ps->s[ps->p]), false;
            if (ps->p >= ps->len) return perr(ps, at, "'(' without a matching ')'"), false;
            ps->p++;
            last = ps->r[r].n;
            if (push(ps, r, CMF__G_REF, (uint32_t)sub)) return false;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last == SIZE_MAX) return perr(ps, at, "'%c' follows no symbol", c), false;
            uint32_t min = 0, max = UINT32_MAX;
            ps->p++;
            if (c == '+') min = 1;
            else if (c == '?') max = 1;
            else if (c == '{') {
                space(ps, false);
                if (ps->p < ps->len && ps->s[ps->p] == ',') min = 0;
                else if (!read_uint(ps, &min)) return false;
                space(ps, false);
                if (ps->p < ps->len && ps->s[ps->p] == ',') {
                    ps->p++;
                    space(ps, false);
                    if (ps->p < ps->len && ps->s[ps->p] != '}' && !read_uint(ps, &max)) return false;
                } else max = min;
                space(ps, false);
                if (ps->p >= ps->len || ps->s[ps->p] != '}') return perr(ps, at, "expected '}' closing '{'"), false;
                ps->p++;
                if (max < min) return perr(ps, at, "repetition {%u,%u}: max below min", min, max), false;
            }
            if (!repeat(ps, r, last, min, max, at)) return false;
            last = SIZE_MAX;
        } else break;
        space(ps, nested);
    }
    return !ps->st;
}

static bool alternates(parser *ps, uint32_t r, bool nested)
{
    for (;;) {
        if (!sequence(ps, r, nested)) return false;
        /* a line starting with '|' continues the rule */
        size_t save = ps->p;
        space(ps, true);
        if (ps->p < ps->len && ps->s[ps->p] == '|') {
            ps->p++;
            if (push(ps, r, CMF__G_ALT, 0)) return false;
            space(ps, true);
            continue;
        }
        if (!nested) ps->p = save;
        break;
    }
    return !push(ps, r, CMF__G_END, 0);
}

static bool rule_def(parser *ps)
{
    size_t at = ps->p;
    size_t e = ps->p;
    while (e < ps->len && is_word(ps->s[e])) e++;
    if (e == ps->p) return perr(ps, at, "expected a rule name, found '%c'", ps->s[at]), false;
    int64_t id = rule_id(ps, ps->s + ps->p, e - ps->p, at);
    if (id < 0) return false;
    if (ps->r[id].def_at != SIZE_MAX) {
        size_t first = ps->r[id].def_at;
        size_t line = 1;
        for (size_t i = 0; i < first; i++) line += ps->s[i] == '\n';
        return perr(ps, at, "rule '%s' defined twice (first on line %zu)", ps->r[id].name, line), false;
    }
    ps->r[id].def_at = at;
    ps->p = e;
    space(ps, false);
    if (ps->len - ps->p < 3 || memcmp(ps->s + ps->p, "::=", 3))
        return perr(ps, ps->p, "expected '::=' after rule name '%s'", ps->r[id].name), false;
    ps->p += 3;
    space(ps, true);
    if (!alternates(ps, (uint32_t)id, false)) return false;
    space(ps, false);
    if (ps->p < ps->len && ps->s[ps->p] != '\n') {
        char c = ps->s[ps->p];
        if (c == ')') return perr(ps, ps->p, "')' without a matching '('"), false;
        return perr(ps, ps->p, "unexpected '%c'", c), false;
    }
    return true;
}

/* nullable[r]: rule r can match the empty string. */
static void nullables(const cmf__gram *g, bool *nullable)
{
    bool changed = true;
    while (changed) {
        changed = false;
        for (size_t r = 0; r < g->n_rules; r++) {
            if (nullable[r]) continue;
            const cmf__gelem *e = g->el + g->rule_start[r];
            bool alt_ok = true;
            for (;; e++) {
                if (e->type == CMF__G_END || e->type == CMF__G_ALT) {
                    if (alt_ok) {
                        nullable[r] = changed = true;
                        break;
                    }
                    if (e->type == CMF__G_END) break;
                    alt_ok = true;
                } else if (e->type == CMF__G_REF) {
                    if (!nullable[e->value]) alt_ok = false;
                } else if (e->type != CMF__G_RNG_UPPER && e->type != CMF__G_CHAR_ALT) alt_ok = false;
            }
        }
    }
}

/* Depth-first search over "r may start with a reference to s" edges;
 * mark: 0 new, 1 on the path, 2 done. Returns the rule closing a cycle. */
static int64_t left_cycle(const cmf__gram *g, const bool *nullable, uint8_t *mark, uint32_t r)
{
    mark[r] = 1;
    const cmf__gelem *e = g->el + g->rule_start[r];
    bool leading = true;
    for (;; e++) {
        if (e->type == CMF__G_END) break;
        if (e->type == CMF__G_ALT) {
            leading = true;
            continue;
        }
        if (!leading) continue;
        if (e->type == CMF__G_REF) {
            if (mark[e->value] == 1) return e->value;
            if (mark[e->value] == 0) {
                int64_t c = left_cycle(g, nullable, mark, e->value);
                if (c >= 0) return c;
            }
            if (!nullable[e->value]) leading = false;
        } else if (e->type != CMF__G_RNG_UPPER && e->type != CMF__G_CHAR_ALT) leading = false;
    }
    mark[r] = 2;
    return -1;
}

void cmf__gram_free(cmf__gram *g)
{
    if (!g) return;
    for (size_t i = 0; i < g->n_rules; i++) free(g->rule_name[i]);
    free(g->rule_name);
    free(g->rule_start);
    free(g->el);
    free(g);
}

cmf_status cmf__gram_parse(const char *text, size_t len, const char *what, cmf__gram **out)
{
    *out = NULL;
    parser ps = {.s = text ? text : "", .len = text ? len : 0, .what = what ? what : "grammar"};
    cmf__gram *g = NULL;
    space(&ps, true);
    while (ps.p < ps.len && !ps.st) {
        if (!rule_def(&ps)) break;
        space(&ps, true);
    }
    for (size_t i = 0; i < ps.n_r && !ps.st; i++)
        if (ps.r[i].def_at == SIZE_MAX) perr(&ps, ps.r[i].ref_at, "undefined rule '%s'", ps.r[i].name);
    int64_t root = -1;
    for (size_t i = 0; i < ps.n_r && !ps.st; i++)
        if (!strcmp(ps.r[i].name, "root")) root = (int64_t)i;
    if (!ps.st && root < 0) perr(&ps, ps.len, "no rule named 'root'");
    if (!ps.st) {
        g = calloc(1, sizeof *g);
        size_t n_el = 0;
        for (size_t i = 0; i < ps.n_r; i++) n_el += ps.r[i].n;
        if (g) {
            g->el = malloc((n_el ? n_el : 1) * sizeof *g->el);
            g->rule_start = malloc(ps.n_r * sizeof *g->rule_start);
            g->rule_name = calloc(ps.n_r, sizeof *g->rule_name);
        }
        if (!g || !g->el || !g->rule_start || !g->rule_name || n_el > UINT32_MAX) {
            perr(&ps, 0, "out of memory");
        } else {
            g->n_rules = ps.n_r;
            for (size_t i = 0; i < ps.n_r; i++) {
                g->rule_start[i] = (uint32_t)g->n_el;
                memcpy(g->el + g->n_el, ps.r[i].el, ps.r[i].n * sizeof *g->el);
                g->n_el += ps.r[i].n;
                g->rule_name[i] = ps.r[i].name;
                ps.r[i].name = NULL;
            }
            g->root = (uint32_t)root;
        }
    }
    if (!ps.st) {
        bool *nullable = calloc(g->n_rules, sizeof *nullable);
        uint8_t *mark = calloc(g->n_rules, 1);
        if (!nullable || !mark) perr(&ps, 0, "out of memory");
        else {
            nullables(g, nullable);
            for (size_t r = 0; r < g->n_rules && !ps.st; r++) {
                if (mark[r]) continue;
                int64_t c = left_cycle(g, nullable, mark, (uint32_t)r);
                if (c >= 0) {
                    /* generated names carry their parent's: report that rule */
                    ps.st = cmf__error(CMF_ERR_PARSE, "%s: rule '%s' is left-recursive (it can reach itself "
                                       "before reading a character)", ps.what, g->rule_name[c]);
                }
            }
        }
        free(nullable);
        free(mark);
    }
    for (size_t i = 0; i < ps.n_r; i++) {
        free(ps.r[i].name);
        free(ps.r[i].el);
    }
    free(ps.r);
    if (ps.st) {
        cmf__gram_free(g);
        return ps.st;
    }
    *out = g;
    return CMF_OK;
}
