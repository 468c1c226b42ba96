/* schema_oneof.c — the proof behind oneOf: two branches are disjoint when
 * every value the grammar of one writes fails the other as a JSON Schema
 * validator reads it, both ways round. Cheap and sound, not complete:
 * type sets (integer inside number), const and enum values (1 equals
 * 1.0), a key one branch requires that the other never writes or
 * writes only with values it refuses, and disjoint length, item-count
 * and integer bounds. "Not proven" is always the safe answer (schema.c then refuses
 * the oneOf). format and pattern prove nothing: to a validator without
 * format assertion they are annotations. */
#include "grammar/schema.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

enum {
    T_NULL = 1, T_BOOL = 2, T_OBJECT = 4, T_ARRAY = 8, T_STRING = 16,
    T_INT = 32,  /* integral numbers, 1.0 among them */
    T_FRAC = 64, /* the other numbers */
    T_ALL = 127
};

/* How a schema is read: as a validator does (every keyword applies), or
 * as the grammar schema.c compiles from it writes values (const wins,
 * objects without additionalProperties are closed, ...). */
enum { VALIDATOR, GRAMMAR };

#define MAX_DEPTH 24

typedef struct proof {
    const json_t *root;
    long *steps; /* left for this oneOf; at 0 every question answers "not proven" */
} proof;

static bool step(proof *p, int depth) { return depth <= MAX_DEPTH && (*p->steps)-- > 0; }

static const json_t *get(const json_t *s, const char *key) { return json_object_get(s, key); }

static unsigned type_bit(const char *t)
{
    static const struct { const char *name; unsigned bits; } names[] = {
        {"null", T_NULL}, {"boolean", T_BOOL}, {"object", T_OBJECT}, {"array", T_ARRAY},
        {"string", T_STRING}, {"integer", T_INT}, {"number", T_INT | T_FRAC}};
    for (size_t i = 0; t && i < sizeof names / sizeof *names; i++)
        if (!strcmp(t, names[i].name)) return names[i].bits;
    return T_ALL; /* unknown: schema.c refused it already */
}

/* The types a "type" keyword lists. */
static unsigned type_set(const json_t *t)
{
    if (json_is_string(t)) return type_bit(json_string_value(t));
    if (!json_is_array(t)) return T_ALL;
    unsigned bits = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(t, i, e) bits |= json_is_string(e) ? type_bit(json_string_value(e)) : T_ALL;
    return bits;
}

static unsigned value_bits(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_NULL: return T_NULL;
    case JSON_TRUE: case JSON_FALSE: return T_BOOL;
    case JSON_OBJECT: return T_OBJECT;
    case JSON_ARRAY: return T_ARRAY;
    case JSON_STRING: return T_STRING;
    case JSON_INTEGER: return T_INT;
    default: {
        double d = json_real_value(v);
        return isfinite(d) && floor(d) == d ? T_INT : T_FRAC;
    }
    }
}

/* The types the grammar of s writes (s holds no const, enum or anyOf). */
static unsigned grammar_types(const json_t *s)
{
    if (get(s, "allOf")) return T_OBJECT;
    const json_t *t = get(s, "type");
    if (t) return type_set(t);
    const char *implied = cmf__schema_implied_type(s);
    return implied ? type_bit(implied) : T_ALL;
}

/* s with its $refs followed; NULL when one names nothing or they loop. */
static const json_t *deref(const proof *p, const json_t *s)
{
    for (int i = 0; s && i < 16; i++) {
        const json_t *r = json_is_object(s) ? get(s, "$ref") : NULL;
        if (!json_is_string(r)) return s;
        s = cmf__schema_pointer(p->root, json_string_value(r));
    }
    return NULL;
}

/* JSON Schema's equality: numbers by value (1 == 1.0), objects without
 * order. Too deep to tell counts as equal, which never proves a value
 * outside an enum. */
static bool same_value(const json_t *a, const json_t *b, int depth)
{
    if (depth > 64) return true;
    if (json_is_number(a) && json_is_number(b)) {
        if (json_is_integer(a) && json_is_integer(b)) return json_integer_value(a) == json_integer_value(b);
        return json_number_value(a) == json_number_value(b); /* rounding only ever says "equal" wrongly */
    }
    if (json_typeof(a) != json_typeof(b)) return false;
    size_t i;
    const char *k;
    const json_t *e;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               !memcmp(json_string_value(a), json_string_value(b), json_string_length(a));
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b)) return false;
        json_array_foreach(a, i, e) if (!same_value(e, json_array_get(b, i), depth + 1)) return false;
        return true;
    case JSON_OBJECT:
        if (json_object_size(a) != json_object_size(b)) return false;
        json_object_foreach((json_t *)a, k, e) {
            const json_t *f = get(b, k);
            if (!f || !same_value(e, f, depth + 1)) return false;
        }
        return true;
    default:
        return true; /* true, false, null */
    }
}

static bool in_list(const json_t *list, const json_t *v)
{
    size_t i;
    const json_t *e;
    json_array_foreach(list, i, e) if (same_value(v, e, 0)) return true;
    return false;
}

static bool names(const json_t *list, const char *key)
{
    size_t i;
    const json_t *e;
    json_array_foreach(list, i, e) if (json_is_string(e) && !strcmp(json_string_value(e), key)) return true;
    return false;
}

static bool get_count(const json_t *s, const char *key, int64_t *out)
{
    const json_t *v = get(s, key);
    if (!json_is_integer(v)) return false;
    *out = json_integer_value(v);
    return true;
}

static bool value_fails(proof *p, const json_t *v, const json_t *s, int mode, int depth);

static bool object_fails(proof *p, const json_t *v, const json_t *s, int mode, int depth)
{
    const json_t *req = get(s, "required"), *props = get(s, "properties"), *ap = get(s, "additionalProperties");
    size_t i;
    const char *k;
    const json_t *e;
    json_array_foreach(req, i, e) if (json_is_string(e) && !get(v, json_string_value(e))) return true;
    bool closed = mode == GRAMMAR && !ap && (props || req); /* schema.c writes no other keys */
    json_object_foreach((json_t *)v, k, e) {
        const json_t *ks = json_is_object(props) ? get(props, k) : NULL;
        if (ks) {
            if (value_fails(p, e, ks, mode, depth + 1)) return true;
            continue;
        }
        /* (the grammar writes a required key without a schema as additionalProperties says) */
        if ((closed && !names(req, k)) || (ap && value_fails(p, e, ap, mode, depth + 1))) return true;
    }
    return false;
}

static bool array_fails(proof *p, const json_t *v, const json_t *s, int mode, int depth)
{
    int64_t n = (int64_t)json_array_size(v), bound;
    if ((get_count(s, "minItems", &bound) && n < bound) || (get_count(s, "maxItems", &bound) && n > bound)) return true;
    const json_t *prefix = get(s, "prefixItems"), *items = get(s, "items");
    size_t np = json_array_size(prefix), i;
    const json_t *e;
    json_array_foreach(v, i, e) {
        const json_t *is = i < np ? json_array_get(prefix, i) : items;
        if (!is) return mode == GRAMMAR && prefix; /* the grammar writes nothing past prefixItems alone */
        if (value_fails(p, e, is, mode, depth + 1)) return true;
    }
    return false;
}

static bool string_fails(const json_t *v, const json_t *s, int mode)
{
    if (mode == GRAMMAR && (get(s, "format") || get(s, "pattern"))) return false;
    const unsigned char *t = (const unsigned char *)json_string_value(v);
    int64_t n = 0, bound;
    for (size_t i = 0; i < json_string_length(v); i++) n += (t[i] & 0xC0) != 0x80; /* code points */
    return (get_count(s, "minLength", &bound) && n < bound) || (get_count(s, "maxLength", &bound) && n > bound);
}

/* Whether a JSON number is exactly its double. */
static bool exact(const json_t *v)
{
    return json_is_real(v) || (json_integer_value(v) <= (1LL << 53) && json_integer_value(v) >= -(1LL << 53));
}

static bool number_fails(const json_t *v, const json_t *s)
{
    /* in doubles: rounding is monotonic, so a strict comparison of the
     * rounded values holds for the exact ones; equality needs both exact */
    double d = json_number_value(v);
    const json_t *b;
    return (json_is_number(b = get(s, "minimum")) && d < json_number_value(b)) ||
           (json_is_number(b = get(s, "maximum")) && d > json_number_value(b)) ||
           (json_is_number(b = get(s, "exclusiveMinimum")) &&
            (d < json_number_value(b) || (d == json_number_value(b) && exact(v) && exact(b)))) ||
           (json_is_number(b = get(s, "exclusiveMaximum")) &&
            (d > json_number_value(b) || (d == json_number_value(b) && exact(v) && exact(b))));
}

/* Whether v certainly fails s (VALIDATOR), or the grammar of s never
 * writes v (GRAMMAR). */
static bool value_fails(proof *p, const json_t *v, const json_t *s, int mode, int depth)
{
    if (!step(p, depth) || !(s = deref(p, s))) return false;
    if (json_is_boolean(s)) return json_is_false(s);
    if (!json_is_object(s)) return false;
    const json_t *x = get(s, "const");
    if (x) {
        if (!same_value(v, x, 0)) return true;
        if (mode == GRAMMAR) return false; /* the grammar writes the const, whatever else s says */
    } else if ((x = get(s, "enum"))) {
        if (json_is_array(x) && !in_list(x, v)) return true;
        if (mode == GRAMMAR) return false;
    }
    if (mode == GRAMMAR && get(s, "allOf")) return !(value_bits(v) & T_OBJECT);
    static const char *const unions[] = {"anyOf", "oneOf"};
    for (int u = 0; u < 2; u++) {
        if (!json_array_size(x = get(s, unions[u]))) continue;
        bool all = true;
        size_t i;
        const json_t *e;
        json_array_foreach(x, i, e) if (all && !value_fails(p, v, e, mode, depth + 1)) all = false;
        if (all) return true; /* (a value matching two oneOf branches fails too; not needed here) */
        if (mode == GRAMMAR) return false; /* nothing stands beside them in a compiled schema */
    }
    if (mode == VALIDATOR && json_is_array(x = get(s, "allOf"))) {
        size_t i;
        const json_t *e;
        json_array_foreach(x, i, e) if (value_fails(p, v, e, mode, depth + 1)) return true;
    }
    x = get(s, "type");
    unsigned types = mode == GRAMMAR ? grammar_types(s) : x ? type_set(x) : T_ALL;
    if (!(value_bits(v) & types)) return true;
    switch (json_typeof(v)) {
    case JSON_OBJECT: return object_fails(p, v, s, mode, depth);
    case JSON_ARRAY: return array_fails(p, v, s, mode, depth);
    case JSON_STRING: return string_fails(v, s, mode);
    case JSON_INTEGER: case JSON_REAL: return number_fails(v, s);
    default: return false;
    }
}

/* The types of the values s accepts, as a validator reads it (a superset). */
static unsigned valid_types(proof *p, const json_t *s, int depth)
{
    if (!step(p, depth) || !(s = deref(p, s))) return T_ALL;
    if (json_is_boolean(s)) return json_is_true(s) ? T_ALL : 0;
    if (!json_is_object(s)) return T_ALL;
    unsigned bits = T_ALL;
    const json_t *x, *e;
    size_t i;
    if ((x = get(s, "type"))) bits &= type_set(x);
    if ((x = get(s, "const"))) bits &= value_bits(x);
    if (json_is_array(x = get(s, "enum"))) {
        unsigned u = 0;
        json_array_foreach(x, i, e) u |= value_bits(e);
        bits &= u;
    }
    static const char *const unions[] = {"anyOf", "oneOf"};
    for (int k = 0; k < 2; k++) {
        if (!json_array_size(x = get(s, unions[k]))) continue;
        unsigned u = 0;
        json_array_foreach(x, i, e) u |= valid_types(p, e, depth + 1);
        bits &= u;
    }
    json_array_foreach(get(s, "allOf"), i, e) bits &= valid_types(p, e, depth + 1);
    return bits;
}

static bool excludes(proof *p, const json_t *a, const json_t *b, int depth);

/* a's objects: b requires a key that a never writes or writes only with
 * values b refuses, or a always writes a key whose values b refuses. */
static bool objects_excluded(proof *p, const json_t *a, const json_t *b, int depth)
{
    if (get(a, "allOf")) return false; /* merged from parts: not reasoned about */
    const json_t *pa = get(a, "properties"), *ra = get(a, "required"), *apa = get(a, "additionalProperties");
    const json_t *pb = get(b, "properties"), *rb = get(b, "required"), *apb = get(b, "additionalProperties");
    bool closed = json_is_false(apa) || (!apa && (pa || ra)); /* schema.c writes no other keys */
    const json_t *other = apa && !json_is_false(apa) ? apa : json_true(); /* what it writes other keys with */
    size_t i;
    const json_t *e;
    json_array_foreach(rb, i, e) {
        if (!json_is_string(e)) continue;
        const char *k = json_string_value(e);
        const json_t *ka = json_is_object(pa) ? get(pa, k) : NULL, *kb = json_is_object(pb) ? get(pb, k) : NULL;
        if (!ka && (names(ra, k) || !closed)) ka = other;
        if (!kb) kb = apb; /* absent too: any value */
        if (!ka || json_is_false(ka) || (kb && excludes(p, ka, kb, depth + 1))) return true;
    }
    json_array_foreach(ra, i, e) {
        if (!json_is_string(e)) continue;
        const char *k = json_string_value(e);
        const json_t *ka = json_is_object(pa) ? get(pa, k) : NULL, *kb = json_is_object(pb) ? get(pb, k) : NULL;
        if (!ka) ka = other; /* a required key without a schema */
        if (!kb) kb = apb;
        if (kb && excludes(p, ka, kb, depth + 1)) return true;
    }
    return false;
}

/* a's arrays: item counts out of b's bounds, or a first item b refuses
 * (an empty array being refused by b's minItems). */
static bool arrays_excluded(proof *p, const json_t *a, const json_t *b, int depth)
{
    int64_t mn = 0, mx = INT64_MAX, bmn = 0, bmx = INT64_MAX;
    get_count(a, "minItems", &mn);
    get_count(a, "maxItems", &mx);
    get_count(b, "minItems", &bmn);
    get_count(b, "maxItems", &bmx);
    const json_t *pa = get(a, "prefixItems"), *ia = get(a, "items"), *pb = get(b, "prefixItems"), *ib = get(b, "items");
    size_t np = json_array_size(pa);
    if ((pa && !ia) || json_is_false(ia)) mx = mx < (int64_t)np ? mx : (int64_t)np; /* nothing past the prefix */
    if (mx < bmn || mn > bmx) return true;
    if (mx < 1 || (mn < 1 && bmn < 1)) return false;
    const json_t *a0 = np ? json_array_get(pa, 0) : ia ? ia : json_true();
    const json_t *b0 = json_array_size(pb) ? json_array_get(pb, 0) : ib;
    return b0 && excludes(p, a0, b0, depth + 1);
}

static bool strings_excluded(const json_t *a, const json_t *b)
{
    if (get(a, "format") || get(a, "pattern")) return false;
    int64_t mn = 0, mx = INT64_MAX, bmn = 0, bmx = INT64_MAX;
    get_count(a, "minLength", &mn);
    get_count(a, "maxLength", &mx);
    get_count(b, "minLength", &bmn);
    get_count(b, "maxLength", &bmx);
    return mx < bmn || mn > bmx;
}

/* a's integers (schema.c's exact range, within 15 digits, so exact as
 * doubles) against b's bounds on numbers. */
static bool integers_excluded(const json_t *a, const json_t *b)
{
    double lo = -INFINITY, hi = INFINITY;
    const json_t *x;
    if (json_is_number(x = get(a, "minimum"))) lo = fmax(lo, ceil(json_number_value(x)));
    if (json_is_number(x = get(a, "exclusiveMinimum"))) lo = fmax(lo, floor(json_number_value(x)) + 1);
    if (json_is_number(x = get(a, "maximum"))) hi = fmin(hi, floor(json_number_value(x)));
    if (json_is_number(x = get(a, "exclusiveMaximum"))) hi = fmin(hi, ceil(json_number_value(x)) - 1);
    return (json_is_number(x = get(b, "minimum")) && hi < json_number_value(x)) ||
           (json_is_number(x = get(b, "exclusiveMinimum")) && hi <= json_number_value(x)) ||
           (json_is_number(x = get(b, "maximum")) && lo > json_number_value(x)) ||
           (json_is_number(x = get(b, "exclusiveMaximum")) && lo >= json_number_value(x));
}

/* Whether every value a's grammar writes fails b. */
static bool excludes(proof *p, const json_t *a, const json_t *b, int depth)
{
    if (!step(p, depth) || !(a = deref(p, a)) || !(b = deref(p, b))) return false;
    if (json_is_false(a) || json_is_false(b)) return true;
    if (!json_is_object(b)) return false; /* true */
    if (!json_is_object(a)) return json_is_true(a) && !valid_types(p, b, depth + 1);
    const json_t *x, *e;
    size_t i;
    /* a writes exactly its const or enum values */
    if ((x = get(a, "const"))) return value_fails(p, x, b, VALIDATOR, depth + 1);
    if ((x = get(a, "enum"))) {
        if (!json_is_array(x)) return false;
        json_array_foreach(x, i, e) if (!value_fails(p, e, b, VALIDATOR, depth + 1)) return false;
        return true;
    }
    /* b accepts only its own values: enough that a's grammar writes none */
    if ((x = get(b, "const")) && value_fails(p, x, a, GRAMMAR, depth + 1)) return true;
    if (json_array_size(x = get(b, "enum"))) {
        bool all = true;
        json_array_foreach(x, i, e) if (all && !value_fails(p, e, a, GRAMMAR, depth + 1)) all = false;
        if (all) return true;
    }
    static const char *const unions[] = {"anyOf", "oneOf"};
    for (int u = 0; u < 2 && !get(a, "allOf"); u++) {
        if (!json_is_array(x = get(a, unions[u]))) continue;
        json_array_foreach(x, i, e) if (!excludes(p, e, b, depth + 1)) return false;
        return true;
    }
    for (int u = 0; u < 2; u++) {
        if (!json_array_size(x = get(b, unions[u]))) continue;
        bool all = true;
        json_array_foreach(x, i, e) if (all && !excludes(p, a, e, depth + 1)) all = false;
        if (all) return true;
    }
    json_array_foreach(get(b, "allOf"), i, e) if (excludes(p, a, e, depth + 1)) return true;
    /* type by type: a's values of each type b may hold */
    unsigned rest = grammar_types(a) & valid_types(p, b, depth + 1);
    for (unsigned t = 1; t < T_ALL; t <<= 1) {
        if (!(rest & t)) continue;
        bool out = t == T_OBJECT ? objects_excluded(p, a, b, depth)
                 : t == T_ARRAY  ? arrays_excluded(p, a, b, depth)
                 : t == T_STRING ? strings_excluded(a, b)
                 : t == T_INT    ? integers_excluded(a, b)
                 : false;
        if (!out) return false;
    }
    return true;
}

bool cmf__schema_disjoint(const json_t *root, const json_t *a, const json_t *b, long *steps)
{
    proof p = {root, steps};
    return excludes(&p, a, b, 0) && excludes(&p, b, a, 0);
}
