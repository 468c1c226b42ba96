/* regex.c — JSON Schema "pattern" to GBNF, for the subset that maps to a
 * grammar: literals, ".", classes with ranges, negation and \d \w \s (and
 * their negations), groups (capturing or "(?:"), alternation, * + ? {m}
 * {m,} {m,n} (lazy forms read as greedy: a whole-string match is the
 * same). A pattern matches anywhere in the string unless anchored with ^
 * and $, as in JSON Schema. The expression produced matches the JSON
 * text of the string's contents: '"', '\\' and control characters appear
 * in their escaped forms. Backreferences, lookarounds, \b and the like
 * are an error naming the construct and its offset. */
#include "grammar/grammar.h"
#include "text/unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 512
typedef struct rr { uint32_t lo, hi; } rr;

typedef struct rx {
    const char *s, *path;
    size_t len, p;
    cmf__buf *out;
    cmf_status st;
    int depth;
} rx;

static cmf_status rerr(rx *x, const char *what)
{
    if (!x->st)
        x->st = cmf__error(CMF_ERR_UNSUPPORTED,
                           "json schema: %s/pattern: %s at offset %zu of \"%s\" cannot be enforced by a grammar",
                           x->path, what, x->p, x->s);
    return x->st;
}

static void emit(rx *x, const char *s)
{
    if (!x->st) x->st = cmf__buf_append(x->out, s, strlen(s));
}

/* One character as it appears in JSON text, as a GBNF literal. */
static void emit_char(rx *x, uint32_t c)
{
    char b[32];
    if (c == '"') snprintf(b, sizeof b, "\"\\\\\\\"\"");
    else if (c == '\\') snprintf(b, sizeof b, "\"\\\\\\\\\"");
    else if (c == '\n') snprintf(b, sizeof b, "\"\\\\n\"");
    else if (c == '\t') snprintf(b, sizeof b, "\"\\\\t\"");
    else if (c == '\r') snprintf(b, sizeof b, "\"\\\\r\"");
    else if (c < 0x20 || c == 0x7F) snprintf(b, sizeof b, "\"\\\\u%04x\"", (unsigned)c);
    else snprintf(b, sizeof b, "[\\U%08X]", (unsigned)c);
    emit(x, b);
}

static int cmp_rr(const void *a, const void *b)
{
    const rr *p = a, *q = b;
    return p->lo < q->lo ? -1 : p->lo > q->lo;
}

static size_t normalise(rr *r, size_t n, bool neg)
{
    qsort(r, n, sizeof *r, cmp_rr);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
        } else r[m++] = r[i];
    }
    if (!neg) return m;
    rr inv[MAXR];
    size_t q = 0;
    uint32_t at = 0;
    for (size_t i = 0; i < m && q < MAXR; i++) {
        if (r[i].lo > at) inv[q++] = (rr){at, r[i].lo - 1};
        at = r[i].hi + 1;
    }
    if (at <= 0x10FFFF && q < MAXR) inv[q++] = (rr){at, 0x10FFFF};
    memcpy(r, inv, q * sizeof *r);
    return q;
}

/* Emits a set of code points: raw where JSON allows them, escaped forms
 * for '"', '\\' and controls, surrogates left out. */
static void emit_set(rx *x, const rr *r, size_t n)
{
    cmf__buf cls = {0};
    bool any_raw = false;
    emit(x, "(");
    bool first = true;
    for (size_t i = 0; i < n && !x->st; i++) {
        for (uint32_t c = r[i].lo; c <= r[i].hi && c < 0x20; c++) {
            if (!first) emit(x, " | ");
            emit_char(x, c), first = false;
        }
        static const uint32_t spec[] = {'"', '\\', 0x7F};
        for (size_t k = 0; k < 3; k++)
            if (spec[k] >= r[i].lo && spec[k] <= r[i].hi) {
                if (!first) emit(x, " | ");
                emit_char(x, spec[k]), first = false;
            }
        /* the raw pieces: [lo, hi] minus controls, '"', '\\', DEL, surrogates */
        uint32_t cuts[][2] = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}, {0xD800, 0xDFFF}};
        uint32_t lo = r[i].lo;
        while (lo <= r[i].hi) {
            uint32_t hi = r[i].hi;
            bool cut = false;
            for (size_t k = 0; k < 5; k++) {
                if (lo >= cuts[k][0] && lo <= cuts[k][1]) {
                    lo = cuts[k][1] + 1;
                    cut = true;
                    break;
                }
                if (cuts[k][0] > lo && cuts[k][0] - 1 < hi) hi = cuts[k][0] - 1;
            }
            if (cut) continue;
            char b[40];
            snprintf(b, sizeof b, "\\U%08X-\\U%08X", (unsigned)lo, (unsigned)hi);
            if (cmf__buf_append(&cls, b, strlen(b))) x->st = CMF_ERR_NOMEM;
            any_raw = true;
            if (hi == UINT32_MAX || hi >= 0x10FFFF) break;
            lo = hi + 1;
        }
    }
    if (any_raw) {
        if (!first) emit(x, " | ");
        emit(x, "[");
        if (!x->st) x->st = cmf__buf_append(x->out, cls.data, cls.len);
        emit(x, "]");
        first = false;
    }
    if (first) rerr(x, "an empty character set");
    emit(x, ")");
    cmf__buf_free(&cls);
}

static bool next_cp(rx *x, uint32_t *c)
{
    size_t l = cmf__utf8_next((const uint8_t *)x->s + x->p, x->len - x->p, c);
    if (!l) return rerr(x, "invalid UTF-8"), false;
    x->p += l;
    return true;
}

/* Adds the ranges of \d \w \s (neg: their complements) to r. */
static bool class_escape(char e, rr *r, size_t *n)
{
    rr tmp[8];
    size_t k = 0;
    bool neg = false;
    switch (e) {
    case 'D': neg = true; /* fall through */
    case 'd': tmp[k++] = (rr){'0', '9'}; break;
    case 'W': neg = true; /* fall through */
    case 'w': tmp[k++] = (rr){'0', '9'}, tmp[k++] = (rr){'A', 'Z'}, tmp[k++] = (rr){'_', '_'}, tmp[k++] = (rr){'a', 'z'}; break;
    case 'S': neg = true; /* fall through */
    case 's': tmp[k++] = (rr){'\t', '\r'}, tmp[k++] = (rr){' ', ' '}, tmp[k++] = (rr){0xA0, 0xA0},
              tmp[k++] = (rr){0x2028, 0x2029}, tmp[k++] = (rr){0xFEFF, 0xFEFF}; break;
    default: return false;
    }
    k = normalise(tmp, k, neg);
    for (size_t i = 0; i < k && *n < MAXR; i++) r[(*n)++] = tmp[i];
    return true;
}

/* A plain escape: the character it stands for, or false. */
static bool char_escape(rx *x, char e, uint32_t *c)
{
    switch (e) {
    case 'n': *c = '\n'; return true;
    case 't': *c = '\t'; return true;
    case 'r': *c = '\r'; return true;
    case 'f': *c = '\f'; return true;
    case 'v': *c = '\v'; return true;
    case '0': *c = 0; return true;
    case 'u': case 'x': {
        int nd = e == 'u' ? 4 : 2;
        uint32_t v = 0;
        for (int i = 0; i < nd; i++) {
            char h = x->p < x->len ? x->s[x->p] : 0;
            int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (d < 0) return rerr(x, "a short hex escape"), false;
            v = v << 4 | (uint32_t)d;
            x->p++;
        }
        *c = v;
        return true;
    }
    default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '1' && e <= '9')) {
            x->p--;
            rerr(x, "an escape (backreference, \\b, \\p or similar)");
            return false;
        }
        *c = (uint8_t)e;
        return true;
    }
}

static void alternation(rx *x);

static void atom_class(rx *x)
{
    rr r[MAXR];
    size_t n = 0;
    bool neg = false;
    if (x->p < x->len && x->s[x->p] == '^') neg = true, x->p++;
    bool first = true;
    while (!x->st) {
        if (x->p >= x->len) {
            rerr(x, "an unterminated class");
            return;
        }
        if (x->s[x->p] == ']' && !first) {
            x->p++;
            break;
        }
        first = false;
        uint32_t lo;
        if (x->s[x->p] == '\\' && x->p + 1 < x->len) {
            char e = x->s[x->p + 1];
            x->p += 2;
            if (class_escape(e, r, &n)) continue;
            if (e == 'b') lo = '\b';
            else if (!char_escape(x, e, &lo)) return;
        } else if (!next_cp(x, &lo)) return;
        uint32_t hi = lo;
        if (x->p + 1 < x->len && x->s[x->p] == '-' && x->s[x->p + 1] != ']') {
            x->p++;
            if (x->s[x->p] == '\\' && x->p + 1 < x->len) {
                char e = x->s[x->p + 1];
                x->p += 2;
                if (!char_escape(x, e, &hi)) return;
            } else if (!next_cp(x, &hi)) return;
            if (hi < lo) {
                rerr(x, "a range whose end is below its start");
                return;
            }
        }
        if (n == MAXR) {
            rerr(x, "a class with too many ranges");
            return;
        }
        r[n++] = (rr){lo, hi};
    }
    n = normalise(r, n, neg);
    emit_set(x, r, n);
}

static void atom(rx *x)
{
    char c = x->s[x->p];
    if (c == '(') {
        x->p++;
        if (x->p < x->len && x->s[x->p] == '?') {
            if (x->p + 1 < x->len && x->s[x->p + 1] == ':') x->p += 2;
            else {
                x->p--; /* the offset of the group's '(' */
                rerr(x, "a lookaround or named group");
                return;
            }
        }
        if (++x->depth > 100) {
            rerr(x, "groups nested deeper than 100");
            return;
        }
        emit(x, "(");
        alternation(x);
        emit(x, ")");
        x->depth--;
        if (x->p >= x->len || x->s[x->p] != ')') rerr(x, "a '(' without ')'");
        else x->p++;
    } else if (c == '[') {
        x->p++;
        atom_class(x);
    } else if (c == '.') {
        x->p++;
        rr r[2] = {{'\n', '\n'}, {'\r', '\r'}};
        size_t n = normalise(r, 2, true);
        emit_set(x, r, n);
    } else if (c == '\\') {
        if (x->p + 1 >= x->len) {
            rerr(x, "a trailing '\\'");
            return;
        }
        char e = x->s[x->p + 1];
        x->p += 2;
        rr r[MAXR];
        size_t n = 0;
        if (class_escape(e, r, &n)) {
            emit_set(x, r, n);
            return;
        }
        uint32_t cp;
        if (char_escape(x, e, &cp)) emit_char(x, cp);
    } else if (c == '^' || c == '$') {
        rerr(x, "an anchor inside the pattern");
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        rerr(x, "a quantifier with nothing to repeat");
    } else {
        uint32_t cp;
        if (next_cp(x, &cp)) emit_char(x, cp);
    }
}

static void quantifier(rx *x)
{
    if (x->p >= x->len) return;
    char c = x->s[x->p];
    char b[48];
    if (c == '*' || c == '+' || c == '?') {
        b[0] = c, b[1] = 0;
        x->p++;
    } else if (c == '{') {
        unsigned m = 0, n = 0;
        int used = 0;
        if (sscanf(x->s + x->p, "{%u,%u}%n", &m, &n, &used) == 2 && used) snprintf(b, sizeof b, "{%u,%u}", m, n);
        else if ((used = 0, sscanf(x->s + x->p, "{%u,}%n", &m, &used) == 1 && used)) snprintf(b, sizeof b, "{%u,}", m);
        else if ((used = 0, sscanf(x->s + x->p, "{%u}%n", &m, &used) == 1 && used)) snprintf(b, sizeof b, "{%u}", m);
        else {
            rerr(x, "a malformed {m,n}");
            return;
        }
        if (m > 1000 || n > 1000) {
            rerr(x, "a repetition count past 1000");
            return;
        }
        x->p += (size_t)used;
    } else return;
    if (x->p < x->len && x->s[x->p] == '?') x->p++; /* lazy: same whole-string language */
    emit(x, b);
}

static void sequence(rx *x)
{
    emit(x, "(\"\"");
    while (x->p < x->len && !x->st) {
        char c = x->s[x->p];
        if (c == '|' || c == ')') break;
        if (c == '$' && x->p + 1 == x->len) break;
        emit(x, " (");
        atom(x);
        emit(x, ")");
        quantifier(x);
    }
    emit(x, ")");
}

static void alternation(rx *x)
{
    sequence(x);
    while (!x->st && x->p < x->len && x->s[x->p] == '|') {
        x->p++;
        emit(x, " | ");
        sequence(x);
    }
}

cmf_status cmf__regex_to_gbnf(const char *pattern, const char *path, cmf__buf *out)
{
    rx x = {.s = pattern, .len = strlen(pattern), .path = path, .out = out};
    bool start = x.len && pattern[0] == '^';
    if (start) x.p++;
    /* JSON string characters, for the unanchored ends */
    const char *any = "([^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}))*";
    emit(&x, "(");
    if (!start) emit(&x, any), emit(&x, " ");
    emit(&x, "(");
    alternation(&x);
    emit(&x, ")");
    bool end = false;
    if (!x.st && x.p < x.len && pattern[x.p] == '$' && x.p + 1 == x.len) end = true, x.p++;
    if (!x.st && x.p < x.len) rerr(&x, pattern[x.p] == ')' ? "a ')' without '('" : "an unexpected character");
    if (!end) emit(&x, " "), emit(&x, any);
    emit(&x, ")");
    return x.st;
}
