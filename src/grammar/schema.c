/* schema.c — JSON Schema to GBNF. Each schema node becomes a rule; $ref
 * targets get one rule each, named before they are expanded, so recursive
 * schemas give recursive grammars. Objects write their properties in the
 * schema's order (required ones always, optional ones maybe), without
 * extra keys unless additionalProperties allows them (then under keys
 * that differ from every declared one). Every keyword is either enforced,
 * an annotation (title, description, ...), or an error naming it and its
 * JSON pointer path: nothing is skipped silently. A boolean schema is
 * any value (true) or nothing (false: an error, or a property or branch
 * left out). oneOf is enforced as anyOf once schema_oneof.c proves its
 * branches pairwise disjoint, and refused otherwise. */
#include "grammar/grammar.h"
#include "grammar/schema.h"
#include "text/unicode.h"
#include "util/json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct refname { char *ref; char name[24]; } refname;
typedef struct left_edge { size_t from, to; } left_edge; /* refs[to] can start refs[from]'s value */

#define NO_OWNER ((size_t)-1)

typedef struct conv {
    json_t *root;
    cmf__buf *out;       /* rules written so far */
    refname *refs;
    size_t n_refs, cap_refs;
    left_edge *edges;    /* for the left-recursion check */
    size_t n_edges, cap_edges;
    size_t owner;        /* the ref whose value is being started (nothing written yet), or NO_OWNER */
    unsigned n_rule;
    int depth;
    cmf_status st;
} conv;

static const char *PRIMITIVES =
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" ws ( string \":\" ws value ( \",\" ws string \":\" ws value )* )? \"}\" ws\n"
    "array ::= \"[\" ws ( value ( \",\" ws value )* )? \"]\" ws\n"
    "string ::= \"\\\"\" char* \"\\\"\" ws\n"
    "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
    /* one code point, as minLength and maxLength count: no surrogate escapes (a pair is one character) */
    "lchar ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] hex{3} | [dD] [0-7] hex{2} ) )\n"
    "keychar ::= [^\"\\\\\\x7F\\x00-\\x1F]\n"
    "int ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"
    "integer ::= int ws\n"
    "number ::= int ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )? ws\n"
    "boolean ::= ( \"true\" | \"false\" ) ws\n"
    "null ::= \"null\" ws\n"
    "date ::= year \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | "
    "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | \"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )\n"
    "year ::= [0-9]{3} [1-9] | [0-9]{2} [1-9] \"0\" | [0-9] [1-9] \"00\" | [1-9] \"000\"\n" /* 0001..9999 */
    "time ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )? "
    "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n"
    "hex ::= [0-9a-fA-F]\n"
    "uuid ::= hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}\n";


static cmf_status fail(conv *c, cmf_status st, const char *path, const char *fmt, const char *arg)
{
    if (c->st) return c->st;
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    c->st = cmf__error(st, "json schema: %s: %s", *path ? path : "/", msg);
    return c->st;
}

static void put(conv *c, cmf__buf *b, const char *s)
{
    if (!c->st) c->st = cmf__buf_append(b, s, strlen(s));
}

/* A GBNF literal for the bytes s[0..n). */
static void put_lit(conv *c, cmf__buf *b, const char *s, size_t n)
{
    put(c, b, "\"");
    for (size_t i = 0; i < n && !c->st; i++) {
        unsigned char ch = (unsigned char)s[i];
        char e[8];
        if (ch == '"' || ch == '\\') snprintf(e, sizeof e, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7F) snprintf(e, sizeof e, "\\x%02X", ch);
        else e[0] = (char)ch, e[1] = 0;
        put(c, b, e);
    }
    put(c, b, "\"");
}

/* The JSON text of v (compact) as a literal followed by ws. */
static void put_json_lit(conv *c, cmf__buf *b, const json_t *v)
{
    char *txt = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    if (!txt) {
        if (!c->st) c->st = cmf__error(CMF_ERR_NOMEM, "json schema: out of memory");
        return;
    }
    put_lit(c, b, txt, strlen(txt));
    put(c, b, " ws");
    free(txt);
}

static void new_name(conv *c, char *name)
{
    snprintf(name, 24, "r%u", c->n_rule++);
}

static void def_rule(conv *c, const char *name, const cmf__buf *body)
{
    put(c, c->out, name);
    put(c, c->out, " ::= ");
    if (!c->st) c->st = cmf__buf_append(c->out, body->data ? body->data : (const uint8_t *)"", body->len);
    put(c, c->out, "\n");
}

static void gen(conv *c, const json_t *s, const char *path, char *name);

/* Why s (neither true nor an object) cannot be compiled. */
static const char *not_a_schema(const json_t *s)
{
    return json_is_false(s) ? "the schema false accepts nothing" : "a schema must be an object or a boolean";
}

static void subpath(char *dst, size_t cap, const char *path, const char *a, const char *b)
{
    int n = snprintf(dst, cap, "%s/%s%s%s", path, a, b ? "/" : "", b ? b : "");
    if (n >= 0 && (size_t)n >= cap && cap > 4) memcpy(dst + cap - 4, "...", 4); /* a path too deep to name whole */
}

/* ---- integers in a range ---- */

static uint64_t pow10u(int k)
{
    uint64_t p = 1;
    while (k-- > 0) p *= 10;
    return p;
}

static int ndigits(uint64_t v)
{
    int d = 1;
    while (v >= 10) v /= 10, d++;
    return d;
}

/* w-digit strings (leading zeros allowed) for the numbers lo..hi. */
static void range_w(conv *c, cmf__buf *b, uint64_t lo, uint64_t hi, int w)
{
    char t[192];
    if (w == 0) return;
    uint64_t p = pow10u(w - 1);
    if (lo == 0 && hi == p * 10 - 1) {
        snprintf(t, sizeof t, "[0-9]{%d}", w);
        put(c, b, t);
        return;
    }
    unsigned a = (unsigned)(lo / p), z = (unsigned)(hi / p);
    if (a == z) {
        snprintf(t, sizeof t, "[%u] ", a);
        put(c, b, t);
        range_w(c, b, lo % p, hi % p, w - 1);
        return;
    }
    put(c, b, "(");
    snprintf(t, sizeof t, "[%u] ", a);
    put(c, b, t);
    range_w(c, b, lo % p, p - 1, w - 1);
    if (a + 1 <= z - 1) {
        snprintf(t, sizeof t, " | [%u-%u]", a + 1, z - 1);
        put(c, b, t);
        if (w > 1) snprintf(t, sizeof t, " [0-9]{%d}", w - 1), put(c, b, t);
    }
    snprintf(t, sizeof t, " | [%u] ", z);
    put(c, b, t);
    range_w(c, b, 0, hi % p, w - 1);
    put(c, b, ")");
}

/* Decimal naturals lo..hi without leading zeros; hi UINT64_MAX: unbounded. */
static void range_nat(conv *c, cmf__buf *b, uint64_t lo, uint64_t hi)
{
    bool unbounded = hi == UINT64_MAX;
    if (unbounded) hi = pow10u(ndigits(lo)) - 1; /* then any longer number */
    put(c, b, "(");
    bool first = true;
    for (int d = ndigits(lo); d <= ndigits(hi); d++) {
        uint64_t a = d == 1 ? 0 : pow10u(d - 1), z = pow10u(d) - 1;
        if (a < lo) a = lo;
        if (z > hi) z = hi;
        if (a > z) continue;
        if (!first) put(c, b, " | ");
        range_w(c, b, a, z, d);
        first = false;
    }
    if (unbounded) {
        char t[192];
        int d = ndigits(hi) + 1;
        if (d <= 16) {
            snprintf(t, sizeof t, " | [1-9] [0-9]{%d,15}", d - 1);
            put(c, b, t);
        }
    }
    put(c, b, ")");
}

static void gen_integer(conv *c, const json_t *s, const char *path, cmf__buf *b)
{
    const json_t *mn = json_object_get(s, "minimum"), *mx = json_object_get(s, "maximum");
    const json_t *xmn = json_object_get(s, "exclusiveMinimum"), *xmx = json_object_get(s, "exclusiveMaximum");
    if (!mn && !mx && !xmn && !xmx) {
        put(c, b, "integer");
        return;
    }
    const int64_t LIM = 999999999999999LL; /* 15 digits */
    int64_t lo = -LIM - 1, hi = LIM + 1;
    bool has_lo = false, has_hi = false;
    const json_t *v[4] = {mn, xmn, mx, xmx};
    const char *k[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int i = 0; i < 4; i++) {
        if (!v[i]) continue;
        char p[512];
        subpath(p, sizeof p, path, k[i], NULL);
        if (!json_is_number(v[i])) {
            fail(c, CMF_ERR_ARG, p, "%s must be a number", k[i]);
            return;
        }
        double x = json_number_value(v[i]);
        if (x < (double)-LIM || x > (double)LIM) {
            fail(c, CMF_ERR_UNSUPPORTED, p, "%s past 15 digits is not supported", k[i]);
            return;
        }
        int64_t n = i < 2 ? (int64_t)ceil(x) : (int64_t)floor(x);
        if (i == 1 && (double)n == x) n++;
        if (i == 3 && (double)n == x) n--;
        if (i < 2) {
            if (!has_lo || n > lo) lo = n;
            has_lo = true;
        } else {
            if (!has_hi || n < hi) hi = n;
            has_hi = true;
        }
    }
    if (has_lo && has_hi && lo > hi) {
        fail(c, CMF_ERR_ARG, path, "%s", "minimum above maximum: no integer fits");
        return;
    }
    put(c, b, "(");
    bool first = true;
    /* negative part: "-" then |x| for x in [lo, min(hi, -1)] */
    if (!has_lo || lo < 0) {
        uint64_t alo = has_hi && hi < 0 ? (uint64_t)(-hi) : 1;
        uint64_t ahi = has_lo ? (uint64_t)(-lo) : UINT64_MAX;
        put(c, b, "\"-\" ");
        range_nat(c, b, alo, ahi);
        first = false;
    }
    if (!has_hi || hi >= 0) {
        if (!first) put(c, b, " | ");
        range_nat(c, b, has_lo && lo > 0 ? (uint64_t)lo : 0, has_hi ? (uint64_t)hi : UINT64_MAX);
    }
    put(c, b, ") ws");
}

/* ---- strings ---- */

static bool get_count(conv *c, const json_t *s, const char *key, const char *path, int64_t *out)
{
    const json_t *v = json_object_get(s, key);
    if (!v) return false;
    char p[512];
    subpath(p, sizeof p, path, key, NULL);
    if (!json_is_integer(v) || json_integer_value(v) < 0) fail(c, CMF_ERR_ARG, p, "%s must be a non-negative integer", key);
    else if (json_integer_value(v) > 10000) fail(c, CMF_ERR_UNSUPPORTED, p, "%s past 10000 is not supported", key);
    else *out = json_integer_value(v);
    return !c->st;
}

static void gen_string(conv *c, const json_t *s, const char *path, cmf__buf *b)
{
    const json_t *fmt = json_object_get(s, "format"), *pat = json_object_get(s, "pattern");
    int64_t mn = 0, mx = -1;
    bool has_mn = get_count(c, s, "minLength", path, &mn), has_mx = get_count(c, s, "maxLength", path, &mx);
    if (c->st) return;
    char p[512];
    if ((fmt || pat) && (has_mn || has_mx)) {
        subpath(p, sizeof p, path, has_mn ? "minLength" : "maxLength", NULL);
        fail(c, CMF_ERR_UNSUPPORTED, p, "%s", "a length bound together with format or pattern is not supported");
        return;
    }
    if (fmt && pat) {
        subpath(p, sizeof p, path, "pattern", NULL);
        fail(c, CMF_ERR_UNSUPPORTED, p, "%s", "pattern together with format is not supported");
        return;
    }
    if (fmt) {
        subpath(p, sizeof p, path, "format", NULL);
        const char *f = json_string_value(fmt);
        const char *rule = !f ? NULL : !strcmp(f, "date") ? "date" : !strcmp(f, "time") ? "time"
                         : !strcmp(f, "date-time") ? "date \"T\" time" : !strcmp(f, "uuid") ? "uuid" : NULL;
        if (!rule) {
            fail(c, CMF_ERR_UNSUPPORTED, p, "format '%s' not supported (date, time, date-time, uuid are)", f ? f : "?");
            return;
        }
        put(c, b, "\"\\\"\" ");
        put(c, b, rule);
        put(c, b, " \"\\\"\" ws");
        return;
    }
    if (pat) {
        if (!json_is_string(pat)) {
            subpath(p, sizeof p, path, "pattern", NULL);
            fail(c, CMF_ERR_ARG, p, "%s", "pattern must be a string");
            return;
        }
        put(c, b, "\"\\\"\" ");
        if (!c->st) c->st = cmf__regex_to_gbnf(json_string_value(pat), path, b);
        put(c, b, " \"\\\"\" ws");
        return;
    }
    if (has_mx && mx < mn) {
        fail(c, CMF_ERR_ARG, path, "%s", "minLength above maxLength");
        return;
    }
    char t[192];
    if (has_mx) snprintf(t, sizeof t, "\"\\\"\" lchar{%" PRId64 ",%" PRId64 "} \"\\\"\" ws", mn, mx);
    else if (mn) snprintf(t, sizeof t, "\"\\\"\" lchar{%" PRId64 ",} \"\\\"\" ws", mn);
    else snprintf(t, sizeof t, "string");
    put(c, b, t);
}

/* ---- arrays ---- */

static void gen_array(conv *c, const json_t *s, const char *path, cmf__buf *b)
{
    const json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    int64_t mn = 0, mx = -1;
    get_count(c, s, "minItems", path, &mn);
    bool has_mx = get_count(c, s, "maxItems", path, &mx);
    if (c->st) return;
    if (has_mx && mx < mn) {
        fail(c, CMF_ERR_ARG, path, "%s", "minItems above maxItems");
        return;
    }
    char p[512], item[24] = "value";
    size_t np = 0;
    char (*pre)[24] = NULL;
    if (prefix) {
        if (!json_is_array(prefix)) {
            subpath(p, sizeof p, path, "prefixItems", NULL);
            fail(c, CMF_ERR_ARG, p, "%s", "prefixItems must be an array");
            return;
        }
        np = json_array_size(prefix);
        pre = calloc(np ? np : 1, sizeof *pre);
        if (!pre) {
            c->st = cmf__error(CMF_ERR_NOMEM, "json schema: out of memory");
            return;
        }
        for (size_t i = 0; i < np && !c->st; i++) {
            char idx[24];
            snprintf(idx, sizeof idx, "%zu", i);
            subpath(p, sizeof p, path, "prefixItems", idx);
            gen(c, json_array_get(prefix, i), p, pre[i]);
        }
    }
    bool more = !prefix || (items && !json_is_false(items));
    if (items && json_is_false(items)) more = false;
    else if (items) {
        subpath(p, sizeof p, path, "items", NULL);
        gen(c, items, p, item);
    }
    if (c->st) goto done;
    /* the prefix, then (when allowed) more items within the bounds */
    int64_t lo = mn > (int64_t)np ? mn - (int64_t)np : 0, hi = has_mx ? mx - (int64_t)np : -1;
    if (has_mx && mx < (int64_t)np) {
        /* maxItems cuts the prefix: the first mx prefix items, all optional past minItems */
        np = (size_t)mx;
        more = false;
    }
    if (!more && mn > (int64_t)np) {
        subpath(p, sizeof p, path, "minItems", NULL);
        fail(c, CMF_ERR_UNSUPPORTED, p, "%s", "minItems beyond prefixItems with no items schema");
        goto done;
    }
    put(c, b, "\"[\" ws ");
    char t[192];
    if (np) {
        /* prefix items: those at index >= minItems may be left out (from the end) */
        size_t need = (size_t)(mn < (int64_t)np ? mn : (int64_t)np);
        size_t opened = 0;
        for (size_t i = 0; i < np; i++) {
            if (i >= need && i > 0) put(c, b, "( "), opened++;
            else if (i >= need) put(c, b, "( "), opened++;
            if (i) put(c, b, "\",\" ws ");
            put(c, b, pre[i]);
            put(c, b, " ");
        }
        if (more && hi != 0) {
            if (hi < 0) snprintf(t, sizeof t, "( \",\" ws %s ){%" PRId64 ",} ", item, lo);
            else snprintf(t, sizeof t, "( \",\" ws %s ){%" PRId64 ",%" PRId64 "} ", item, lo, hi);
            put(c, b, t);
        }
        for (size_t i = 0; i < opened; i++) put(c, b, ")? ");
    } else if (more) {
        /* item ("," item){lo-1, hi-1}, optional as a whole when lo == 0 */
        if (hi == 0) {
            /* empty array only */
        } else {
            int64_t rlo = lo > 0 ? lo - 1 : 0;
            if (hi < 0) snprintf(t, sizeof t, "( %s ( \",\" ws %s ){%" PRId64 ",} )", item, item, rlo);
            else snprintf(t, sizeof t, "( %s ( \",\" ws %s ){%" PRId64 ",%" PRId64 "} )", item, item, rlo, hi - 1);
            put(c, b, t);
            if (lo == 0) put(c, b, "?");
            put(c, b, " ");
        }
    }
    put(c, b, "\"]\" ws");
done:
    free(pre);
}

/* ---- objects ---- */

/* A rule for JSON keys (escape-free) that differ from every key in keys
 * (all sharing their first `depth` bytes): a trie walk over code points
 * where each step may leave the keys' paths. */
static void not_keys(conv *c, const char **keys, size_t n, size_t depth, char *name)
{
    cmf__buf b = {0}, cls = {0};
    new_name(c, name);
    uint32_t *seen = malloc((n ? n : 1) * sizeof *seen);
    const char **sub = malloc((n ? n : 1) * sizeof *sub);
    size_t n_seen = 0;
    bool terminal = false, first = true;
    if (!seen || !sub) c->st = cmf__error(CMF_ERR_NOMEM, "json schema: out of memory");
    put(c, &b, "(");
    for (size_t i = 0; i < n && !c->st; i++) {
        size_t len = strlen(keys[i]);
        if (len == depth) {
            terminal = true;
            continue;
        }
        uint32_t ch;
        size_t l = cmf__utf8_next((const uint8_t *)keys[i] + depth, len - depth, &ch);
        if (!l) {
            fail(c, CMF_ERR_ARG, "", "property name '%s' is not valid UTF-8", keys[i]);
            break;
        }
        bool dup = false;
        for (size_t k = 0; k < n_seen; k++) dup |= seen[k] == ch;
        if (dup) continue;
        seen[n_seen++] = ch;
        size_t m = 0;
        for (size_t j = 0; j < n; j++) {
            uint32_t cj;
            size_t lj = strlen(keys[j]);
            if (lj > depth && cmf__utf8_next((const uint8_t *)keys[j] + depth, lj - depth, &cj) && cj == ch)
                sub[m++] = keys[j];
        }
        char child[24];
        const char **mine = malloc(m * sizeof *mine);
        if (!mine) {
            c->st = cmf__error(CMF_ERR_NOMEM, "json schema: out of memory");
            break;
        }
        memcpy(mine, sub, m * sizeof *mine);
        not_keys(c, mine, m, depth + l, child);
        free(mine);
        char t[192];
        if (!first) put(c, &b, " | ");
        snprintf(t, sizeof t, "[\\U%08X] %s", (unsigned)ch, child);
        put(c, &b, t);
        first = false;
        snprintf(t, sizeof t, "\\U%08X", (unsigned)ch);
        put(c, &cls, t);
    }
    /* leave the keys' paths: a character none of them has next */
    if (!first) put(c, &b, " | ");
    put(c, &b, "[^\"\\\\\\x7F\\x00-\\x1F");
    if (!c->st && cls.len) c->st = cmf__buf_append(&b, cls.data, cls.len);
    put(c, &b, "] keychar*");
    if (!terminal) put(c, &b, " | \"\"");
    put(c, &b, ")");
    def_rule(c, name, &b);
    cmf__buf_free(&b);
    cmf__buf_free(&cls);
    free(seen);
    free(sub);
}

static void gen_object(conv *c, const json_t *s, const char *path, cmf__buf *b)
{
    const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    const json_t *ap = json_object_get(s, "additionalProperties");
    char p[512];
    if (props && !json_is_object(props)) {
        subpath(p, sizeof p, path, "properties", NULL);
        fail(c, CMF_ERR_ARG, p, "%s", "properties must be an object");
        return;
    }
    if (req && !json_is_array(req)) {
        subpath(p, sizeof p, path, "required", NULL);
        fail(c, CMF_ERR_ARG, p, "%s", "required must be an array");
        return;
    }
    if (!props && !req && (!ap || json_is_true(ap))) {
        put(c, b, "object");
        return;
    }
    size_t np = props ? json_object_size(props) : 0, nr = req ? json_array_size(req) : 0, n = 0;
    const char **keys = calloc(np + nr + 1, sizeof *keys);
    char (*val)[24] = calloc(np + nr + 1, sizeof *val);
    bool *must = calloc(np + nr + 1, sizeof *must), *never = calloc(np + nr + 1, sizeof *never);
    char (*first)[24] = calloc(np + nr + 2, sizeof *first), (*rest)[24] = calloc(np + nr + 2, sizeof *rest);
    cmf__buf r = {0};
    if (!keys || !val || !must || !never || !first || !rest) {
        c->st = cmf__error(CMF_ERR_NOMEM, "json schema: out of memory");
        goto done;
    }
    const char *k;
    const json_t *v;
    char apv[24] = "value"; /* the values of keys without a schema of their own */
    if (ap && !json_is_boolean(ap)) {
        subpath(p, sizeof p, path, "additionalProperties", NULL);
        gen(c, ap, p, apv);
    }
    json_object_foreach((json_t *)props, k, v) {
        subpath(p, sizeof p, path, "properties", k);
        keys[n] = k;
        never[n] = json_is_false(v); /* a key that must not appear (nor as an extra key) */
        if (never[n]) snprintf(val[n], 24, "value");
        else gen(c, v, p, val[n]);
        n++;
    }
    for (size_t i = 0; i < nr && !c->st; i++) {
        const char *name = json_string_value(json_array_get(req, i));
        if (!name) {
            subpath(p, sizeof p, path, "required", NULL);
            fail(c, CMF_ERR_ARG, p, "%s", "required must list strings");
            break;
        }
        size_t j = 0;
        while (j < n && strcmp(keys[j], name)) j++;
        if (j == n && json_is_false(ap)) {
            subpath(p, sizeof p, path, "required", NULL);
            fail(c, CMF_ERR_ARG, p, "'%s' is required, not in properties, and additionalProperties is false", name);
        }
        if (j == n) keys[n] = name, snprintf(val[n], 24, "%s", apv), n++;
        must[j] = true;
        if (never[j]) {
            subpath(p, sizeof p, path, "properties", name);
            fail(c, CMF_ERR_ARG, p, "property '%s' is required but its schema is false", name);
        }
    }
    if (c->st) goto done;
    /* extra keys */
    new_name(c, first[n]);
    new_name(c, rest[n]);
    if (ap && !json_is_false(ap)) {
        char nk[24], kv[24];
        not_keys(c, keys, n, 0, nk);
        new_name(c, kv);
        r.len = 0;
        put(c, &r, "\"\\\"\" ");
        put(c, &r, nk);
        put(c, &r, " \"\\\"\" ws \":\" ws ");
        put(c, &r, apv);
        def_rule(c, kv, &r);
        r.len = 0;
        char t[192];
        snprintf(t, sizeof t, "( \",\" ws %s )*", kv);
        put(c, &r, t);
        def_rule(c, rest[n], &r);
        r.len = 0;
        snprintf(t, sizeof t, "( %s ( \",\" ws %s )* )?", kv, kv);
        put(c, &r, t);
        def_rule(c, first[n], &r);
    } else {
        r.len = 0;
        put(c, &r, "\"\"");
        def_rule(c, rest[n], &r);
        def_rule(c, first[n], &r);
    }
    for (size_t i = n; i-- > 0 && !c->st;) {
        if (never[i]) {
            memcpy(first[i], first[i + 1], sizeof first[i]);
            memcpy(rest[i], rest[i + 1], sizeof rest[i]);
            continue;
        }
        char kvn[24];
        new_name(c, kvn);
        r.len = 0;
        json_t *ks = json_string(keys[i]); /* the key's JSON text */
        char *kj = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
        json_decref(ks);
        if (!kj) {
            c->st = cmf__error(CMF_ERR_NOMEM, "json schema: out of memory");
            break;
        }
        put_lit(c, &r, kj, strlen(kj));
        free(kj);
        put(c, &r, " ws \":\" ws ");
        put(c, &r, val[i]);
        def_rule(c, kvn, &r);
        new_name(c, first[i]);
        new_name(c, rest[i]);
        char t[192];
        r.len = 0;
        snprintf(t, sizeof t, "\",\" ws %s %s%s%s", kvn, rest[i + 1], must[i] ? "" : " | ", must[i] ? "" : rest[i + 1]);
        put(c, &r, t);
        def_rule(c, rest[i], &r);
        r.len = 0;
        snprintf(t, sizeof t, "%s %s%s%s", kvn, rest[i + 1], must[i] ? "" : " | ", must[i] ? "" : first[i + 1]);
        put(c, &r, t);
        def_rule(c, first[i], &r);
    }
    put(c, b, "\"{\" ws ");
    put(c, b, first[0]);
    put(c, b, " \"}\" ws");
done:
    cmf__buf_free(&r);
    free(keys);
    free(val);
    free(must);
    free(never);
    free(first);
    free(rest);
}

/* ---- the schema node ---- */

static const char *ANNOTATIONS[] = {"title", "description", "$schema", "$id", "$comment", "default", "examples",
                                    "deprecated", "readOnly", "writeOnly", "$defs", "definitions", NULL};
static const char *KEYWORDS[] = {"type", "properties", "required", "additionalProperties", "enum", "const", "items",
                                 "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum",
                                 "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf", "$ref", "format",
                                 "pattern", NULL};

static bool in_list(const char *k, const char **list)
{
    for (size_t i = 0; list[i]; i++)
        if (!strcmp(k, list[i])) return true;
    return false;
}

const json_t *cmf__schema_pointer(const json_t *root, const char *ref)
{
    if (ref[0] != '#') return NULL;
    const json_t *cur = root;
    const char *q = ref + 1;
    while (*q == '/') {
        q++;
        char tok[256];
        size_t n = 0;
        while (*q && *q != '/' && n + 1 < sizeof tok) {
            if (q[0] == '~' && q[1] == '1') tok[n++] = '/', q += 2;
            else if (q[0] == '~' && q[1] == '0') tok[n++] = '~', q += 2;
            else tok[n++] = *q++;
        }
        tok[n] = 0;
        if (json_is_object(cur)) cur = json_object_get(cur, tok);
        else if (json_is_array(cur)) cur = json_array_get(cur, strtoul(tok, NULL, 10));
        else cur = NULL;
        if (!cur) return NULL;
    }
    return *q ? NULL : cur;
}

/* The schema a "#..." JSON pointer names. */
static const json_t *resolve(conv *c, const char *ref, const char *path)
{
    char p[512];
    subpath(p, sizeof p, path, "$ref", NULL);
    if (ref[0] != '#') {
        fail(c, CMF_ERR_UNSUPPORTED, p, "remote reference '%s' not supported (only '#...' within the schema)", ref);
        return NULL;
    }
    const json_t *cur = cmf__schema_pointer(c->root, ref);
    if (!cur) fail(c, CMF_ERR_ARG, p, "reference '%s' names nothing in the schema", ref);
    return cur;
}

static void gen_type(conv *c, const json_t *s, const char *type, const char *path, cmf__buf *b)
{
    char p[512];
    if (!strcmp(type, "object")) gen_object(c, s, path, b);
    else if (!strcmp(type, "array")) gen_array(c, s, path, b);
    else if (!strcmp(type, "string")) gen_string(c, s, path, b);
    else if (!strcmp(type, "integer")) gen_integer(c, s, path, b);
    else if (!strcmp(type, "number")) {
        static const char *bounds[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
        for (int i = 0; i < 4; i++)
            if (json_object_get(s, bounds[i])) {
                subpath(p, sizeof p, path, bounds[i], NULL);
                fail(c, CMF_ERR_UNSUPPORTED, p, "%s is enforced for integers only, not numbers", bounds[i]);
                return;
            }
        put(c, b, "number");
    } else if (!strcmp(type, "boolean")) put(c, b, "boolean");
    else if (!strcmp(type, "null")) put(c, b, "null");
    else {
        subpath(p, sizeof p, path, "type", NULL);
        fail(c, CMF_ERR_ARG, p, "unknown type '%s'", type);
    }
}

static void gen_typed(conv *c, const json_t *s, const char *type, const char *path, cmf__buf *b)
{
    size_t saved = c->owner;
    c->owner = NO_OWNER; /* a typed value starts with its own characters ('{', '[', a digit, ...) */
    gen_type(c, s, type, path, b);
    c->owner = saved;
}

const char *cmf__schema_implied_type(const json_t *s)
{
    static const char *obj[] = {"properties", "required", "additionalProperties", NULL};
    static const char *arr[] = {"items", "prefixItems", "minItems", "maxItems", NULL};
    static const char *str[] = {"minLength", "maxLength", "pattern", "format", NULL};
    static const char *num[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};
    for (int i = 0; obj[i]; i++) if (json_object_get(s, obj[i])) return "object";
    for (int i = 0; arr[i]; i++) if (json_object_get(s, arr[i])) return "array";
    for (int i = 0; str[i]; i++) if (json_object_get(s, str[i])) return "string";
    for (int i = 0; num[i]; i++) if (json_object_get(s, num[i])) return "integer";
    return NULL;
}

/* Adds a part's properties to the merge; a name two parts declare with
 * different schemas is refused (the merge could keep only one of them). */
static bool merge_props(conv *c, json_t *props, const json_t *add, const char *path)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)add, k, v) {
        const json_t *had = json_object_get(props, k);
        if (had && !json_equal((json_t *)had, v)) {
            char p[700];
            subpath(p, sizeof p, path, k, NULL);
            fail(c, CMF_ERR_UNSUPPORTED, p, "property '%s' declared by two allOf parts with different schemas is not "
                 "supported", k);
            return true;
        }
        if (json_object_set(props, k, v)) return false;
    }
    return true;
}

/* A part that limits other keys (additionalProperties false or a schema)
 * holds for the merge only when it declares every property the merge
 * declares: the merge writes another part's property with that part's
 * schema. (A required name no part declares takes the limit's schema.) */
static void check_limit(conv *c, const json_t *limit, const char *path, const json_t *props)
{
    const json_t *own = json_object_get(limit, "properties"), *v;
    const char *k, *missing = NULL;
    json_object_foreach((json_t *)props, k, v) if (!missing && !json_object_get(own, k)) missing = k;
    if (missing)
        fail(c, CMF_ERR_UNSUPPORTED, path, "additionalProperties in an allOf part that does not declare '%s' "
             "(another part's property) is not supported", missing);
}

/* allOf: one object schema with every part's properties and required. */
static json_t *merge_all_of(conv *c, const json_t *s, const char *path)
{
    json_t *m = json_object(), *props = json_object(), *req = json_array();
    const json_t *limit = NULL; /* the part with additionalProperties other than true */
    char limit_path[600] = "";
    if (!m || !props || !req) goto nomem;
    const json_t *all = json_object_get(s, "allOf");
    size_t n = json_array_size(all);
    for (size_t i = 0; i <= n && !c->st; i++) {
        const json_t *part = i < n ? json_array_get(all, i) : s;
        char p[512], idx[24];
        snprintf(idx, sizeof idx, "%zu", i);
        if (i < n) subpath(p, sizeof p, path, "allOf", idx);
        else snprintf(p, sizeof p, "%s", path);
        for (int hops = 0; part && json_is_string(json_object_get(part, "$ref")); hops++)
            part = hops < 16 ? resolve(c, json_string_value(json_object_get(part, "$ref")), p) : NULL;
        if (!part) {
            fail(c, CMF_ERR_UNSUPPORTED, p, "%s", "a chain of more than 16 $refs (a loop?)");
            break;
        }
        if (json_is_true(part)) continue;
        if (!json_is_object(part)) {
            fail(c, CMF_ERR_ARG, p, "%s", not_a_schema(part));
            break;
        }
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)part, k, v) {
            char kp[600];
            subpath(kp, sizeof kp, p, k, NULL);
            if (in_list(k, ANNOTATIONS) || !strcmp(k, "allOf")) continue;
            if (!strcmp(k, "type")) {
                if (!json_is_string(v) || strcmp(json_string_value(v), "object"))
                    fail(c, CMF_ERR_UNSUPPORTED, kp, "%s", "allOf is supported for object schemas only");
            } else if (!strcmp(k, "properties") && json_is_object(v)) {
                if (!merge_props(c, props, v, kp)) goto nomem;
            } else if (!strcmp(k, "required") && json_is_array(v)) {
                if (json_array_extend(req, (json_t *)v)) goto nomem;
            } else if (!strcmp(k, "additionalProperties")) {
                if (json_is_true(v)) continue;
                if (limit) fail(c, CMF_ERR_UNSUPPORTED, kp, "%s", "additionalProperties in two allOf parts is not supported");
                limit = part;
                snprintf(limit_path, sizeof limit_path, "%s", kp);
                if (json_object_set(m, k, (json_t *)v)) goto nomem;
            } else if (!strcmp(k, "properties") || !strcmp(k, "required")) {
                fail(c, CMF_ERR_ARG, kp, "%s must be an object (properties) or an array (required)", k);
            } else fail(c, CMF_ERR_UNSUPPORTED, kp, "keyword '%s' inside allOf not supported (objects' properties, "
                        "required and additionalProperties are)", k);
        }
    }
    if (limit) check_limit(c, limit, limit_path, props);
    if (c->st) {
        json_decref(m);
        json_decref(props);
        json_decref(req);
        return NULL;
    }
    json_object_set_new(m, "type", json_string("object"));
    json_object_set_new(m, "properties", props);
    json_object_set_new(m, "required", req);
    return m;
nomem:
    json_decref(m);
    json_decref(props);
    json_decref(req);
    if (!c->st) c->st = cmf__error(CMF_ERR_NOMEM, "json schema: out of memory");
    return NULL;
}

/* oneOf: each pair of branches proven disjoint (schema_oneof.c), or an
 * error. A shared budget of proof steps bounds the work. */
static void check_disjoint(conv *c, const json_t *list, const char *path)
{
    long steps = 1L << 20;
    size_t n = json_array_size(list);
    for (size_t i = 0; i < n && !c->st; i++)
        for (size_t j = i + 1; j < n && !c->st; j++) {
            if (cmf__schema_disjoint(c->root, json_array_get(list, i), json_array_get(list, j), &steps)) continue;
            char msg[200];
            snprintf(msg, sizeof msg, "branches %zu and %zu may both match; use anyOf (oneOf is enforced only where "
                     "its branches are proven disjoint%s)", i, j, steps > 0 ? "" : "; the proof ran out of steps");
            fail(c, CMF_ERR_UNSUPPORTED, path, "%s", msg);
        }
}

/* anyOf, oneOf: the union of the branches, false ones left out. */
static void gen_union(conv *c, const json_t *s, const char *path, cmf__buf *b)
{
    const json_t *any = json_object_get(s, "anyOf"), *one = json_object_get(s, "oneOf");
    const json_t *list = any ? any : one;
    const char *kw = any ? "anyOf" : "oneOf", *k;
    const json_t *v;
    char p[512];
    subpath(p, sizeof p, path, kw, NULL);
    if (!json_is_array(list) || !json_array_size(list)) {
        fail(c, CMF_ERR_ARG, p, "%s must be a non-empty array", kw);
        return;
    }
    if (any && one) {
        fail(c, CMF_ERR_UNSUPPORTED, p, "%s", "anyOf together with oneOf is not supported");
        return;
    }
    json_object_foreach((json_t *)s, k, v) {
        if (in_list(k, ANNOTATIONS) || !strcmp(k, "anyOf") || !strcmp(k, "oneOf")) continue;
        char kp[600];
        subpath(kp, sizeof kp, path, k, NULL);
        fail(c, CMF_ERR_UNSUPPORTED, kp, "keyword '%s' beside anyOf/oneOf not supported (move it into each branch)", k);
        return;
    }
    put(c, b, "(");
    bool first = true;
    for (size_t i = 0; i < json_array_size(list) && !c->st; i++) {
        if (json_is_false(json_array_get(list, i))) continue; /* matches nothing */
        char idx[24], sub[24], ip[600];
        snprintf(idx, sizeof idx, "%zu", i);
        subpath(ip, sizeof ip, path, kw, idx);
        gen(c, json_array_get(list, i), ip, sub);
        if (!first) put(c, b, " | ");
        put(c, b, sub);
        first = false;
    }
    put(c, b, ")");
    if (first) fail(c, CMF_ERR_ARG, p, "%s", "every branch is false: nothing can match");
    if (one) check_disjoint(c, one, p);
}

/* Writes rule `name` for schema s. */
static void gen_into(conv *c, const json_t *s, const char *path, const char *name)
{
    cmf__buf b = {0};
    char p[512];
    const char *k;
    const json_t *v;
    if (++c->depth > MAX_DEPTH) {
        fail(c, CMF_ERR_UNSUPPORTED, path, "schema nested deeper than %s levels", "64");
        goto done;
    }
    json_object_foreach((json_t *)s, k, v) {
        if (in_list(k, ANNOTATIONS) || in_list(k, KEYWORDS)) continue;
        subpath(p, sizeof p, path, k, NULL);
        fail(c, CMF_ERR_UNSUPPORTED, p, "keyword '%s' not supported (docs/CONSTRAINED.md lists those that are)", k);
        goto done;
    }
    const json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    const json_t *any = json_object_get(s, "anyOf"), *one = json_object_get(s, "oneOf");
    const json_t *all = json_object_get(s, "allOf"), *type = json_object_get(s, "type");
    if (cn) {
        put_json_lit(c, &b, cn);
    } else if (en) {
        if (!json_is_array(en) || !json_array_size(en)) {
            subpath(p, sizeof p, path, "enum", NULL);
            fail(c, CMF_ERR_ARG, p, "%s", "enum must be a non-empty array");
            goto done;
        }
        put(c, &b, "(");
        for (size_t i = 0; i < json_array_size(en); i++) {
            if (i) put(c, &b, " | ");
            put_json_lit(c, &b, json_array_get(en, i));
        }
        put(c, &b, ")");
    } else if (all) {
        if (!json_is_array(all)) {
            subpath(p, sizeof p, path, "allOf", NULL);
            fail(c, CMF_ERR_ARG, p, "%s", "allOf must be an array");
            goto done;
        }
        json_t *m = merge_all_of(c, s, path);
        if (m) {
            char sub[24];
            gen(c, m, path, sub);
            put(c, &b, sub);
            json_decref(m);
        }
    } else if (any || one) {
        gen_union(c, s, path, &b);
    } else if (json_is_array(type)) {
        put(c, &b, "(");
        for (size_t i = 0; i < json_array_size(type) && !c->st; i++) {
            const char *t = json_string_value(json_array_get(type, i));
            if (!t) {
                subpath(p, sizeof p, path, "type", NULL);
                fail(c, CMF_ERR_ARG, p, "%s", "type lists must hold strings");
                break;
            }
            if (i) put(c, &b, " | ");
            put(c, &b, "(");
            gen_typed(c, s, t, path, &b);
            put(c, &b, ")");
        }
        put(c, &b, ")");
    } else if (type) {
        if (!json_is_string(type)) {
            subpath(p, sizeof p, path, "type", NULL);
            fail(c, CMF_ERR_ARG, p, "%s", "type must be a string or a list of strings");
            goto done;
        }
        gen_typed(c, s, json_string_value(type), path, &b);
    } else {
        const char *t = cmf__schema_implied_type(s);
        if (t) gen_typed(c, s, t, path, &b);
        else put(c, &b, "value");
    }
    def_rule(c, name, &b);
done:
    c->depth--;
    cmf__buf_free(&b);
}

static bool add_edge(conv *c, size_t from, size_t to)
{
    if (c->n_edges == c->cap_edges) {
        size_t nc = c->cap_edges ? c->cap_edges * 2 : 16;
        left_edge *ne = realloc(c->edges, nc * sizeof *ne);
        if (!ne) return false;
        c->edges = ne, c->cap_edges = nc;
    }
    c->edges[c->n_edges++] = (left_edge){from, to};
    return true;
}

/* The index of ref r in c->refs, added (with a new rule name) when new;
 * NO_OWNER when out of memory. */
static size_t ref_index(conv *c, const char *r, bool *added)
{
    *added = false;
    for (size_t i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, r)) return i;
    if (c->n_refs == c->cap_refs) {
        size_t nc = c->cap_refs ? c->cap_refs * 2 : 8;
        refname *nr = realloc(c->refs, nc * sizeof *nr);
        if (!nr) return NO_OWNER;
        c->refs = nr, c->cap_refs = nc;
    }
    char *dup = strdup(r);
    if (!dup) return NO_OWNER;
    refname *e = &c->refs[c->n_refs];
    e->ref = dup;
    new_name(c, e->name);
    *added = true;
    return c->n_refs++;
}

/* A $ref: one rule per target, named before the target is expanded (so
 * recursion gives recursive rules). A ref met before anything of the
 * current ref's value is written is an edge of the left-recursion check. */
static void gen_ref(conv *c, const json_t *s, const char *path, char *name)
{
    const char *k;
    const json_t *v, *ref = json_object_get(s, "$ref");
    char p[600];
    json_object_foreach((json_t *)s, k, v) {
        if (in_list(k, ANNOTATIONS) || !strcmp(k, "$ref")) continue;
        subpath(p, sizeof p, path, k, NULL);
        fail(c, CMF_ERR_UNSUPPORTED, p, "keyword '%s' beside $ref not supported", k);
        return;
    }
    const char *r = json_string_value(ref);
    if (!r) {
        subpath(p, sizeof p, path, "$ref", NULL);
        fail(c, CMF_ERR_ARG, p, "%s", "$ref must be a string");
        return;
    }
    const json_t *target = resolve(c, r, path);
    if (!target) return;
    bool added;
    size_t i = ref_index(c, r, &added);
    if (i == NO_OWNER || (c->owner != NO_OWNER && !add_edge(c, c->owner, i))) {
        c->st = cmf__error(CMF_ERR_NOMEM, "json schema: out of memory");
        return;
    }
    char own[24], tp[512];
    snprintf(own, sizeof own, "%s", c->refs[i].name); /* refs may move when the list grows */
    snprintf(name, 24, "%s", own);
    if (!added) return;
    snprintf(tp, sizeof tp, "%s", r + 1);
    size_t saved = c->owner;
    c->owner = i;
    if (json_is_true(target) || (json_is_object(target) && json_object_get(target, "$ref"))) {
        char sub[24]; /* a ref to a ref: this rule is that one's */
        gen(c, target, tp, sub);
        cmf__buf b = {0};
        put(c, &b, sub);
        def_rule(c, own, &b);
        cmf__buf_free(&b);
    } else if (!json_is_object(target)) {
        fail(c, CMF_ERR_ARG, tp, "%s", not_a_schema(target));
    } else gen_into(c, target, tp, own);
    c->owner = saved;
}

/* A ref that can reach itself before any character is written would be a
 * left-recursive rule, which the matcher refuses: found here (Kahn's
 * topological sort of the left edges) to name the ref. */
static void check_left_recursion(conv *c)
{
    size_t n = c->n_refs, *indeg = calloc(n ? n : 1, sizeof *indeg), *queue = malloc((n ? n : 1) * sizeof *queue);
    if (!indeg || !queue) {
        c->st = cmf__error(CMF_ERR_NOMEM, "json schema: out of memory");
        goto done;
    }
    for (size_t e = 0; e < c->n_edges; e++) indeg[c->edges[e].to]++;
    size_t head = 0, tail = 0;
    for (size_t i = 0; i < n; i++)
        if (!indeg[i]) queue[tail++] = i;
    while (head < tail) {
        size_t i = queue[head++];
        for (size_t e = 0; e < c->n_edges; e++)
            if (c->edges[e].from == i && !--indeg[c->edges[e].to]) queue[tail++] = c->edges[e].to;
    }
    if (tail == n) goto done;
    /* every ref left has a predecessor left: n steps back is on a cycle */
    size_t at = 0;
    while (!indeg[at]) at++;
    for (size_t step = 0; step < n; step++)
        for (size_t e = 0; e < c->n_edges; e++)
            if (c->edges[e].to == at && indeg[c->edges[e].from]) {
                at = c->edges[e].from;
                break;
            }
    const char *r = c->refs[at].ref;
    fail(c, CMF_ERR_UNSUPPORTED, r[1] ? r + 1 : "/", "$ref '%s' reaches itself before any value is written (left "
         "recursion; a recursive reference must sit inside an object or array)", r);
done:
    free(indeg);
    free(queue);
}

static void gen(conv *c, const json_t *s, const char *path, char *name)
{
    snprintf(name, 24, "value");
    if (c->st) return;
    if (json_is_true(s)) return;
    if (!json_is_object(s)) {
        fail(c, CMF_ERR_ARG, path, "%s", not_a_schema(s));
        return;
    }
    if (json_object_get(s, "$ref")) {
        gen_ref(c, s, path, name);
        return;
    }
    if (!json_object_size(s)) return;
    new_name(c, name);
    gen_into(c, s, path, name);
}

cmf_status cmf__schema_to_gbnf(const char *schema, size_t len, cmf__buf *out)
{
    json_error_t e;
    json_t *root = json_loadb(schema, len, JSON_ALLOW_NUL | JSON_DECODE_ANY, &e); /* true is a schema too */
    if (!root)
        return cmf__error(CMF_ERR_PARSE, "json schema: invalid JSON at line %d column %d (byte %d): %s", e.line,
                          e.column, e.position, e.text);
    conv c = {.root = root, .out = out, .owner = NO_OWNER};
    out->len = 0;
    char name[24];
    gen(&c, root, "", name);
    if (!c.st) check_left_recursion(&c);
    if (!c.st) {
        put(&c, out, "root ::= ");
        put(&c, out, name);
        put(&c, out, "\n");
        put(&c, out, PRIMITIVES);
    }
    for (size_t i = 0; i < c.n_refs; i++) free(c.refs[i].ref);
    free(c.refs);
    free(c.edges);
    json_decref(root);
    return c.st;
}

const char *cmf__gbnf_json_object(void)
{
    return "root ::= object\n"
           "value ::= object | array | string | number | ( \"true\" | \"false\" | \"null\" ) ws\n"
           "object ::= \"{\" ws ( string \":\" ws value ( \",\" ws string \":\" ws value )* )? \"}\" ws\n"
           "array ::= \"[\" ws ( value ( \",\" ws value )* )? \"]\" ws\n"
           "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} ) )* \"\\\"\" ws\n"
           "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )? ws\n"
           "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";
}
