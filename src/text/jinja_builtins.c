/* jinja_builtins.c — what templates call by name: jinja2 filters (with HF's
 * tojson), tests, the dict/list methods a sandboxed jinja2 lets through
 * (mutating ones are blocked as ImmutableSandboxedEnvironment blocks them;
 * str methods are in jinja_str.c), loop attributes, and the globals range,
 * namespace, dict, raise_exception, strftime_now. Filters, tests, methods
 * and globals are each one table of {name, function}; unknown names fail
 * like jinja2 does. */
#include "text/jinja.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NAME_IS(p, n, lit) ((n) == sizeof(lit) - 1 && memcmp((p), (lit), (n)) == 0)

/* ---- arguments ---------------------------------------------------------------- */
jv cmf__jx_arg(jargs *a, size_t i, const char *kw, jv def)
{
    if (i < a->n_pos) return a->pos[i];
    if (kw)
        for (size_t k = 0; k < a->n_kw; k++)
            if (a->kw_len[k] == strlen(kw) && memcmp(a->kw_name[k], kw, a->kw_len[k]) == 0) return a->kw_val[k];
    return def;
}

static bool has_arg(jargs *a, size_t i, const char *kw)
{
    jv sentinel = jv_undef("\x01");
    jv v = cmf__jx_arg(a, i, kw, sentinel);
    return !(v.t == JV_UNDEF && v.u.s.p && v.u.s.p[0] == 1 && v.u.s.p[1] == 0);
}

jv cmf__jx_need_str(jctx *x, const jnode *at, jv v, const char *what)
{
    if (v.t == JV_STR) return v;
    cmf__jx_fail(x, at, "%s must be a string, not %s", what, cmf__jv_type_name(v));
}

int64_t cmf__jx_need_int(jctx *x, const jnode *at, jv v, const char *what)
{
    if (v.t == JV_INT) return v.u.i;
    if (v.t == JV_BOOL) return v.u.b;
    cmf__jx_fail(x, at, "%s must be an integer, not %s", what, cmf__jv_type_name(v));
}

static bool name_eq(const char *entry, const char *name, size_t n)
{
    return strlen(entry) == n && memcmp(entry, name, n) == 0;
}

static jv pair(jctx *x, jv a, jv b)
{
    jv t = cmf__jv_list_new(x, 2);
    t.flag = JVF_TUPLE;
    cmf__jl_push(x, t.u.l, a);
    cmf__jl_push(x, t.u.l, b);
    return t;
}

/* ---- dict and list methods ------------------------------------------------------ */
#define METHOD(name) static jv name(jctx *x, const jnode *at, jv self, jargs *a)

static jv dict_view(jctx *x, jv self, int which /* 0 items 1 keys 2 values */)
{
    jdict *d = self.u.d;
    jv out = cmf__jv_list_new(x, d->n);
    for (size_t i = 0; i < d->n; i++)
        cmf__jl_push(x, out.u.l, which == 0 ? pair(x, d->k[i], d->v[i]) : which == 1 ? d->k[i] : d->v[i]);
    return out;
}
METHOD(dict_items) { return dict_view(x, self, 0); }
METHOD(dict_keys) { return dict_view(x, self, 1); }
METHOD(dict_values) { return dict_view(x, self, 2); }
METHOD(dict_get)
{
    jv *v = cmf__jd_get(x, self.u.d, cmf__jx_arg(a, 0, NULL, jv_none()));
    return v ? *v : cmf__jx_arg(a, 1, NULL, jv_none());
}
METHOD(dict_copy)
{
    jdict *d = self.u.d;
    jv c = cmf__jv_dict_new(x, d->n);
    for (size_t i = 0; i < d->n; i++) cmf__jd_set(x, c.u.d, d->k[i], d->v[i]);
    return c;
}
METHOD(list_index)
{
    jlist *l = self.u.l;
    jv want = cmf__jx_arg(a, 0, NULL, jv_none());
    for (size_t i = 0; i < l->n; i++)
        if (cmf__jv_equal(x, l->v[i], want)) return jv_int((int64_t)i);
    cmf__jx_fail(x, at, "value is not in list");
}
METHOD(list_count)
{
    jlist *l = self.u.l;
    jv want = cmf__jx_arg(a, 0, NULL, jv_none());
    int64_t c = 0;
    for (size_t i = 0; i < l->n; i++) c += cmf__jv_equal(x, l->v[i], want);
    return jv_int(c);
}
METHOD(list_copy)
{
    jlist *l = self.u.l;
    jv c = cmf__jv_list_new(x, l->n);
    for (size_t i = 0; i < l->n; i++) cmf__jl_push(x, c.u.l, l->v[i]);
    return c;
}

static const jmethod DICT_METHODS[] = {
    {"items", dict_items}, {"keys", dict_keys}, {"values", dict_values}, {"get", dict_get}, {"copy", dict_copy},
    {NULL, NULL}};
static const jmethod LIST_METHODS[] = {{"index", list_index}, {"count", list_count}, {"copy", list_copy}, {NULL, NULL}};
/* Mutating methods: the attribute is an "unsafe" undefined, as in the sandbox. */
static const jmethod DICT_UNSAFE[] = {
    {"clear", NULL}, {"pop", NULL}, {"popitem", NULL}, {"setdefault", NULL}, {"update", NULL}, {NULL, NULL}};
static const jmethod LIST_UNSAFE[] = {
    {"append", NULL}, {"clear", NULL}, {"pop", NULL}, {"reverse", NULL}, {"insert", NULL}, {"sort", NULL},
    {"extend", NULL}, {"remove", NULL}, {NULL, NULL}};

/* Index of `name` in a method table; -1 when absent. */
static int find_method(const jmethod *t, const char *name, size_t n)
{
    for (int i = 0; t[i].name; i++)
        if (name_eq(t[i].name, name, n)) return i;
    return -1;
}

static const jmethod *methods_of(jv self)
{
    return self.t == JV_STR ? cmf__jx_str_methods : self.t == JV_DICT ? DICT_METHODS : self.t == JV_LIST ? LIST_METHODS : NULL;
}

jv cmf__jx_method_lookup(jctx *x, jv self, const char *name, size_t n)
{
    const jmethod *ok = methods_of(self);
    const jmethod *unsafe = self.t == JV_DICT ? DICT_UNSAFE : self.t == JV_LIST ? LIST_UNSAFE : NULL;
    int id = ok ? find_method(ok, name, n) : -1;
    if (id >= 0) {
        jfunc *fn = cmf__jx_alloc(x, sizeof(jfunc));
        fn->kind = FN_METHOD;
        fn->id = id;
        fn->name = name;
        fn->name_len = n;
        fn->self = self;
        jv v = {.t = JV_FUNC};
        v.u.fn = fn;
        return v;
    }
    if (unsafe && find_method(unsafe, name, n) >= 0) {
        char buf[160];
        snprintf(buf, sizeof buf, "access to attribute '%.*s' of '%s' object is unsafe.", (int)n, name, cmf__jv_type_name(self));
        jv u = jv_undef(cmf__jv_strdup(x, buf, strlen(buf)).u.s.p);
        u.flag = JVF_UNSAFE;
        return u;
    }
    return jv_undef(NULL);
}

jv cmf__jx_method_call(jctx *x, const jnode *at, jfunc *fn, jargs *a)
{
    jv self = fn->self;
    if (self.t == JV_LOOP) {
        /* loop.cycle(a, b, ...) */
        if (a->n_pos == 0) cmf__jx_fail(x, at, "no items for cycling given");
        return a->pos[self.u.loop->index0 % a->n_pos];
    }
    const jmethod *m = methods_of(self);
    if (!m || !m[fn->id].fn)
        cmf__jx_fail(x, at, "%s.%.*s() is not supported", cmf__jv_type_name(self), (int)fn->name_len, fn->name);
    return m[fn->id].fn(x, at, self, a);
}

/* ---- loop ---------------------------------------------------------------------------- */
jv cmf__jx_loop_attr(jctx *x, jloop *l, const char *name, size_t n)
{
    int64_t i = (int64_t)l->index0, len = (int64_t)l->items->n;
    if (NAME_IS(name, n, "index")) return jv_int(i + 1);
    if (NAME_IS(name, n, "index0")) return jv_int(i);
    if (NAME_IS(name, n, "revindex")) return jv_int(len - i);
    if (NAME_IS(name, n, "revindex0")) return jv_int(len - i - 1);
    if (NAME_IS(name, n, "first")) return jv_bool(i == 0);
    if (NAME_IS(name, n, "last")) return jv_bool(i == len - 1);
    if (NAME_IS(name, n, "length")) return jv_int(len);
    if (NAME_IS(name, n, "depth")) return jv_int(1);
    if (NAME_IS(name, n, "depth0")) return jv_int(0);
    if (NAME_IS(name, n, "previtem"))
        return i > 0 ? l->items->v[i - 1] : jv_undef("there is no previous item");
    if (NAME_IS(name, n, "nextitem"))
        return i + 1 < len ? l->items->v[i + 1] : jv_undef("there is no next item");
    if (NAME_IS(name, n, "cycle")) {
        jfunc *fn = cmf__jx_alloc(x, sizeof(jfunc));
        fn->kind = FN_METHOD;
        fn->name = "cycle";
        fn->name_len = 5;
        fn->self.t = JV_LOOP;
        fn->self.u.loop = l;
        jv v = {.t = JV_FUNC};
        v.u.fn = fn;
        return v;
    }
    char buf[128];
    snprintf(buf, sizeof buf, "'LoopContext object' has no attribute '%.*s'", (int)(n > 60 ? 60 : n), name);
    return jv_undef(cmf__jv_strdup(x, buf, strlen(buf)).u.s.p);
}

/* ---- globals ------------------------------------------------------------------------- */
#define GLOBAL(name) static jv name(jctx *x, const jnode *at, jfunc *fn, jargs *a)

GLOBAL(g_range)
{
    if (a->n_pos < 1 || a->n_pos > 3) cmf__jx_fail(x, at, "range expected 1 to 3 arguments, got %zu", a->n_pos);
    int64_t start = 0, stop, step = 1;
    if (a->n_pos == 1) stop = cmf__jx_need_int(x, at, a->pos[0], "range argument");
    else {
        start = cmf__jx_need_int(x, at, a->pos[0], "range argument");
        stop = cmf__jx_need_int(x, at, a->pos[1], "range argument");
        if (a->n_pos == 3) step = cmf__jx_need_int(x, at, a->pos[2], "range argument");
    }
    if (step == 0) cmf__jx_fail(x, at, "range() arg 3 must not be zero");
    jv out = cmf__jv_list_new(x, 0);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (out.u.l->n >= 100000) cmf__jx_fail(x, at, "range too big (more than 100000 items)");
        cmf__jl_push(x, out.u.l, jv_int(i));
        if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
    }
    return out;
}

/* dict(...) and namespace(...): a mapping or pairs, then keyword arguments */
static jv make_dict(jctx *x, const jnode *at, jfunc *fn, jargs *a, bool is_ns)
{
    jv d = cmf__jv_dict_new(x, 4);
    d.u.d->is_ns = is_ns;
    if (a->n_pos > 1) cmf__jx_fail(x, at, "%s expected at most 1 positional argument", fn->name);
    if (a->n_pos == 1) {
        jv src = a->pos[0];
        if (src.t == JV_DICT && !src.u.d->is_ns) {
            for (size_t i = 0; i < src.u.d->n; i++) cmf__jd_set(x, d.u.d, src.u.d->k[i], src.u.d->v[i]);
        } else if (src.t == JV_LIST) {
            for (size_t i = 0; i < src.u.l->n; i++) {
                jv p = src.u.l->v[i];
                if (p.t != JV_LIST || p.u.l->n != 2) cmf__jx_fail(x, at, "dictionary update sequence element has wrong length");
                cmf__jd_set(x, d.u.d, p.u.l->v[0], p.u.l->v[1]);
            }
        } else cmf__jx_fail(x, at, "'%s' object is not iterable", cmf__jv_type_name(src));
    }
    for (size_t k = 0; k < a->n_kw; k++) cmf__jd_set(x, d.u.d, jv_str(a->kw_name[k], a->kw_len[k]), a->kw_val[k]);
    return d;
}
GLOBAL(g_namespace) { return make_dict(x, at, fn, a, true); }
GLOBAL(g_dict) { return make_dict(x, at, fn, a, false); }

GLOBAL(g_raise_exception)
{
    jv s = cmf__jv_to_str(x, cmf__jx_arg(a, 0, "message", jv_str("", 0)));
    cmf__jx_fail(x, at, "%.*s", (int)(s.u.s.n > 900 ? 900 : s.u.s.n), s.u.s.p);
}

GLOBAL(g_strftime_now)
{
    jv f = cmf__jx_need_str(x, at, cmf__jx_arg(a, 0, "format", jv_none()), "strftime_now format");
    char fmt[256], out[512];
    if (f.u.s.n >= sizeof fmt) cmf__jx_fail(x, at, "strftime_now format too long");
    memcpy(fmt, f.u.s.p, f.u.s.n);
    fmt[f.u.s.n] = 0;
    time_t now = time(NULL);
    struct tm tmv;
    localtime_r(&now, &tmv);
    size_t k = strftime(out, sizeof out, fmt, &tmv);
    return cmf__jv_strdup(x, out, k);
}

static const struct {
    const char *name;
    jv (*fn)(jctx *x, const jnode *at, jfunc *fn, jargs *a);
} GLOBALS[] = {
    {"range", g_range}, {"namespace", g_namespace}, {"dict", g_dict}, {"raise_exception", g_raise_exception},
    {"strftime_now", g_strftime_now}, {NULL, NULL}};

bool cmf__jx_global_lookup(const char *name, size_t n, jv *out, jctx *x)
{
    for (int i = 0; GLOBALS[i].name; i++)
        if (name_eq(GLOBALS[i].name, name, n)) {
            jfunc *fn = cmf__jx_alloc(x, sizeof(jfunc));
            fn->kind = FN_GLOBAL;
            fn->id = i;
            fn->name = GLOBALS[i].name;
            fn->name_len = n;
            jv v = {.t = JV_FUNC};
            v.u.fn = fn;
            *out = v;
            return true;
        }
    return false;
}

jv cmf__jx_global_call(jctx *x, const jnode *at, jfunc *fn, jargs *a) { return GLOBALS[fn->id].fn(x, at, fn, a); }

/* ---- tests --------------------------------------------------------------------------- */
/* v is the tested value, o the first argument (undefined when none). */
#define TESTFN(name) static bool name(jctx *x, const jnode *at, jv v, jv o)

static bool is_mapping(jv v) { return v.t == JV_DICT && !v.u.d->is_ns; }

TESTFN(t_defined) { return v.t != JV_UNDEF; }
TESTFN(t_undefined) { return v.t == JV_UNDEF; }
TESTFN(t_none) { return v.t == JV_NONE; }
TESTFN(t_string) { return v.t == JV_STR; }
TESTFN(t_number) { return jv_is_num(v); }
TESTFN(t_integer) { return v.t == JV_INT; }
TESTFN(t_float) { return v.t == JV_FLOAT; }
TESTFN(t_boolean) { return v.t == JV_BOOL; }
TESTFN(t_true) { return v.t == JV_BOOL && v.u.b; }
TESTFN(t_false) { return v.t == JV_BOOL && !v.u.b; }
TESTFN(t_mapping) { return is_mapping(v); }
TESTFN(t_iterable) { return v.t == JV_STR || v.t == JV_LIST || v.t == JV_UNDEF || v.t == JV_LOOP || is_mapping(v); }
TESTFN(t_sequence) { return v.t == JV_STR || v.t == JV_LIST || v.t == JV_UNDEF || is_mapping(v); }
TESTFN(t_callable) { return v.t == JV_FUNC || v.t == JV_UNDEF; }
TESTFN(t_escaped) { return false; }

/* value % d with Python's %: odd (== 1), even and divisibleby (== 0) */
static bool modulo_is(jctx *x, const jnode *at, jv v, jv d, int want)
{
    if (v.t == JV_UNDEF) cmf__jx_fail(x, at, "%s", v.u.s.p ? v.u.s.p : "undefined value");
    if (d.t == JV_UNDEF) cmf__jx_fail(x, at, "divisibleby() missing 1 required positional argument: 'num'");
    if (v.t == JV_STR) cmf__jx_fail(x, at, "not all arguments converted during string formatting");
    if (!jv_is_num(v) || !jv_is_num(d))
        cmf__jx_fail(x, at, "unsupported operand type(s) for %%: '%s' and '%s'", cmf__jv_type_name(v), cmf__jv_type_name(d));
    double dv = jv_num(d);
    if (dv == 0) cmf__jx_fail(x, at, "integer division or modulo by zero");
    double m;
    if (v.t != JV_FLOAT && d.t != JV_FLOAT) {
        int64_t a = v.t == JV_BOOL ? v.u.b : v.u.i, b = d.t == JV_BOOL ? d.u.b : d.u.i;
        int64_t r = b == -1 ? 0 : a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        m = (double)r;
    } else {
        m = fmod(jv_num(v), dv);
        if (m != 0 && ((m < 0) != (dv < 0))) m += dv;
    }
    return m == want;
}
TESTFN(t_odd) { return modulo_is(x, at, v, jv_int(2), 1); }
TESTFN(t_even) { return modulo_is(x, at, v, jv_int(2), 0); }
TESTFN(t_divisibleby) { return modulo_is(x, at, v, o, 0); }
TESTFN(t_eq) { return cmf__jv_equal(x, v, o); }
TESTFN(t_ne) { return !cmf__jv_equal(x, v, o); }
TESTFN(t_lt) { return cmf__jv_compare(x, at, v, o) < 0; }
TESTFN(t_le) { return cmf__jv_compare(x, at, v, o) <= 0; }
TESTFN(t_gt) { return cmf__jv_compare(x, at, v, o) > 0; }
TESTFN(t_ge) { return cmf__jv_compare(x, at, v, o) >= 0; }
TESTFN(t_sameas)
{
    if (v.t != o.t) return false;
    if (v.t == JV_LIST) return v.u.l == o.u.l;
    if (v.t == JV_DICT) return v.u.d == o.u.d;
    return cmf__jv_equal(x, v, o);
}
TESTFN(t_lower) { return cmf__js_case_state(cmf__jv_to_str(x, v)) == 2; }
TESTFN(t_upper) { return cmf__js_case_state(cmf__jv_to_str(x, v)) == 1; }
TESTFN(t_in)
{
    if (o.t == JV_STR) return v.t == JV_STR && memmem(o.u.s.p, o.u.s.n, v.u.s.p, v.u.s.n) != NULL;
    if (o.t == JV_LIST) {
        for (size_t i = 0; i < o.u.l->n; i++)
            if (cmf__jv_equal(x, o.u.l->v[i], v)) return true;
        return false;
    }
    if (o.t == JV_DICT) return cmf__jd_get(x, o.u.d, v) != NULL;
    if (o.t == JV_UNDEF) return false;
    cmf__jx_fail(x, at, "argument of type '%s' is not iterable", cmf__jv_type_name(o));
}

/* The one list of tests ("==" and "!=" are reachable by name only, from select and reject). */
static const struct {
    const char *name;
    bool (*fn)(jctx *x, const jnode *at, jv v, jv o);
} TESTS[] = {
    {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"string", t_string},
    {"number", t_number}, {"integer", t_integer}, {"float", t_float}, {"boolean", t_boolean},
    {"true", t_true}, {"false", t_false}, {"mapping", t_mapping}, {"iterable", t_iterable},
    {"sequence", t_sequence}, {"callable", t_callable}, {"escaped", t_escaped}, {"odd", t_odd},
    {"even", t_even}, {"divisibleby", t_divisibleby}, {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq},
    {"ne", t_ne}, {"!=", t_ne}, {"lt", t_lt}, {"lessthan", t_lt}, {"le", t_le}, {"gt", t_gt},
    {"greaterthan", t_gt}, {"ge", t_ge}, {"sameas", t_sameas}, {"lower", t_lower}, {"upper", t_upper},
    {"in", t_in}, {NULL, NULL}};

static int find_test(const char *name, size_t n)
{
    for (int i = 0; TESTS[i].name; i++)
        if (name_eq(TESTS[i].name, name, n)) return i;
    return -1;
}

bool cmf__jx_test_known(const char *name, size_t n) { return find_test(name, n) >= 0; }

bool cmf__jx_test(jctx *x, jframe *f, const jnode *at, const char *name, size_t n, jv v, jargs *a)
{
    jv o = cmf__jx_arg(a, 0, NULL, jv_undef(NULL));
    int i = find_test(name, n);
    if (i < 0) cmf__jx_fail(x, at, "No test named '%.*s'.", (int)(n > 60 ? 60 : n), name);
    return TESTS[i].fn(x, at, v, o);
}

/* ---- filters --------------------------------------------------------------------------- */
/* The items a for loop or filter walks: list items, dict keys, string characters. */
jv cmf__jx_iter_items(jctx *x, const jnode *at, jv v)
{
    switch (v.t) {
    case JV_LIST: return v;
    case JV_UNDEF: return cmf__jv_list_new(x, 0);
    case JV_DICT: {
        if (v.u.d->is_ns) break;
        jv l = cmf__jv_list_new(x, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) cmf__jl_push(x, l.u.l, v.u.d->k[i]);
        return l;
    }
    case JV_STR: {
        jv l = cmf__jv_list_new(x, v.u.s.n);
        int32_t cp;
        for (size_t i = 0; i < v.u.s.n;) {
            size_t j = cmf__ju_next(v.u.s.p, v.u.s.n, i, &cp);
            cmf__jl_push(x, l.u.l, jv_str(v.u.s.p + i, j - i));
            i = j;
        }
        return l;
    }
    default: break;
    }
    cmf__jx_fail(x, at, "'%s' object is not iterable", cmf__jv_type_name(v));
}

/* jinja2's make_attrgetter: dotted path, integer parts index. */
static jv attr_path(jctx *x, const jnode *at, jv item, jv path)
{
    if (path.t == JV_INT) return cmf__jx_getitem(x, at, item, path);
    cmf__jx_need_str(x, at, path, "attribute");
    const char *p = path.u.s.p, *end = p + path.u.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        if (!dot) dot = end;
        size_t n = (size_t)(dot - p);
        bool digits = n > 0;
        for (size_t i = 0; i < n; i++) digits &= p[i] >= '0' && p[i] <= '9';
        jv key = digits ? jv_int(strtoll(p, NULL, 10)) : jv_str(p, n);
        item = cmf__jx_getitem(x, at, item, key);
        p = dot + 1;
    }
    return item;
}

static jv lower_key(jctx *x, jv v, bool case_sensitive)
{
    return (!case_sensitive && v.t == JV_STR) ? cmf__js_case(x, v, 0) : v;
}

/* Stable merge sort of items by keys. */
static void sort_by(jctx *x, const jnode *at, jv *items, jv *keys, size_t n, bool reverse)
{
    if (n < 2) return;
    jv *ti = cmf__jx_alloc(x, n * sizeof(jv)), *tk = cmf__jx_alloc(x, n * sizeof(jv));
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int c = cmf__jv_compare(x, at, keys[j], keys[i]);
                bool take_right = reverse ? c > 0 : c < 0;
                if (take_right) { ti[k] = items[j]; tk[k++] = keys[j++]; }
                else { ti[k] = items[i]; tk[k++] = keys[i++]; }
            }
            while (i < mid) { ti[k] = items[i]; tk[k++] = keys[i++]; }
            while (j < hi) { ti[k] = items[j]; tk[k++] = keys[j++]; }
        }
        memcpy(items, ti, n * sizeof(jv));
        memcpy(keys, tk, n * sizeof(jv));
    }
}

static jv tojson(jctx *x, const jnode *at, jv v, jargs *a)
{
    /* HF: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
    bool ensure_ascii = cmf__jv_truthy(cmf__jx_arg(a, 0, "ensure_ascii", jv_bool(false)));
    jv ind = cmf__jx_arg(a, 1, "indent", jv_none());
    jv seps = cmf__jx_arg(a, 2, "separators", jv_none());
    bool sort_keys = cmf__jv_truthy(cmf__jx_arg(a, 3, "sort_keys", jv_bool(false)));
    int indent = -1;
    if (ind.t == JV_INT || ind.t == JV_BOOL) indent = (int)(ind.t == JV_BOOL ? ind.u.b : (ind.u.i < 0 ? 0 : ind.u.i > 64 ? 64 : ind.u.i));
    else if (ind.t != JV_NONE) cmf__jx_fail(x, at, "tojson: indent must be an integer or None");
    const char *item_sep = indent >= 0 ? "," : ", ", *key_sep = ": ";
    char isep[64], ksep[64];
    if (seps.t == JV_LIST && seps.u.l->n == 2 && seps.u.l->v[0].t == JV_STR && seps.u.l->v[1].t == JV_STR &&
        seps.u.l->v[0].u.s.n < sizeof isep && seps.u.l->v[1].u.s.n < sizeof ksep) {
        memcpy(isep, seps.u.l->v[0].u.s.p, seps.u.l->v[0].u.s.n);
        isep[seps.u.l->v[0].u.s.n] = 0;
        memcpy(ksep, seps.u.l->v[1].u.s.p, seps.u.l->v[1].u.s.n);
        ksep[seps.u.l->v[1].u.s.n] = 0;
        item_sep = isep;
        key_sep = ksep;
    } else if (seps.t != JV_NONE) cmf__jx_fail(x, at, "tojson: separators must be a pair of strings");
    if (v.t == JV_UNDEF) cmf__jx_fail(x, at, "Object of type Undefined is not JSON serializable");
    cmf__buf b = {0};
    cmf__jv_json_into(x, at, &b, v, indent, item_sep, key_sep, sort_keys, ensure_ascii, 0);
    return cmf__jx_buf_take(x, &b);
}

static jv indent_str(jctx *x, const jnode *at, jv s, jargs *a)
{
    jv w = cmf__jx_arg(a, 0, "width", jv_int(4));
    bool first = cmf__jv_truthy(cmf__jx_arg(a, 1, "first", jv_bool(false)));
    bool blank = cmf__jv_truthy(cmf__jx_arg(a, 2, "blank", jv_bool(false)));
    cmf__buf ind = {0};
    if (w.t == JV_STR) cmf__jx_buf_put(x, &ind, w.u.s.p, w.u.s.n);
    else {
        int64_t k = cmf__jx_need_int(x, at, w, "indent width");
        for (int64_t i = 0; i < k && i < 4096; i++) cmf__jx_buf_put(x, &ind, " ", 1);
    }
    jv indention = cmf__jx_buf_take(x, &ind);
    /* s += "\n"; lines = s.splitlines() */
    cmf__buf t = {0};
    cmf__jx_buf_put(x, &t, s.u.s.p, s.u.s.n);
    cmf__jx_buf_put(x, &t, "\n", 1);
    jv lines = cmf__js_splitlines(x, cmf__jx_buf_take(x, &t), false);
    cmf__buf b = {0};
    if (first) cmf__jx_buf_put(x, &b, indention.u.s.p, indention.u.s.n);
    for (size_t i = 0; i < lines.u.l->n; i++) {
        jv ln = lines.u.l->v[i];
        if (i) {
            cmf__jx_buf_put(x, &b, "\n", 1);
            if (blank || ln.u.s.n) cmf__jx_buf_put(x, &b, indention.u.s.p, indention.u.s.n);
        }
        cmf__jx_buf_put(x, &b, ln.u.s.p, ln.u.s.n);
    }
    return cmf__jx_buf_take(x, &b);
}

static jv do_round(jctx *x, const jnode *at, jv v, int64_t prec, jv method)
{
    if (!jv_is_num(v)) cmf__jx_fail(x, at, "round: value must be a number");
    double d = jv_num(v);
    const char *m = method.t == JV_STR ? method.u.s.p : "common";
    size_t mn = method.t == JV_STR ? method.u.s.n : 6;
    double scale = pow(10.0, (double)prec);
    if (NAME_IS(m, mn, "floor")) return jv_float(floor(d * scale) / scale);
    if (NAME_IS(m, mn, "ceil")) return jv_float(ceil(d * scale) / scale);
    if (!NAME_IS(m, mn, "common")) cmf__jx_fail(x, at, "method must be common, ceil or floor");
    if (v.t != JV_FLOAT) return jv_int(v.t == JV_BOOL ? v.u.b : v.u.i);
    if (prec < 0 || prec > 300) return jv_float(round(d * scale) / scale);
    /* Python round(): correctly rounded, ties to even — printf rounds the exact binary value */
    char buf[512];
    snprintf(buf, sizeof buf, "%.*f", (int)prec, d);
    return jv_float(strtod(buf, NULL));
}

static jv select_like(jctx *x, jframe *f, const jnode *at, jv v, jargs *a, bool want, bool by_attr)
{
    jv items = cmf__jv_truthy(v) ? cmf__jx_iter_items(x, at, v) : cmf__jv_list_new(x, 0);
    jv out = cmf__jv_list_new(x, items.u.l->n);
    out.flag = JVF_GEN;
    size_t first_arg = by_attr ? 1 : 0;
    jv attr = by_attr ? cmf__jx_arg(a, 0, NULL, jv_none()) : jv_none();
    bool has_test = a->n_pos > first_arg;
    jargs rest = {has_test ? a->pos + first_arg + 1 : NULL, has_test ? a->n_pos - first_arg - 1 : 0,
                  a->kw_name, a->kw_len, a->kw_val, a->n_kw};
    for (size_t i = 0; i < items.u.l->n; i++) {
        jv item = items.u.l->v[i];
        jv probe = by_attr ? attr_path(x, at, item, attr) : item;
        bool ok;
        if (has_test) {
            jv tn = cmf__jx_need_str(x, at, a->pos[first_arg], "test name");
            ok = cmf__jx_test(x, f, at, tn.u.s.p, tn.u.s.n, probe, &rest);
        } else ok = cmf__jv_truthy(probe);
        if (ok == want) cmf__jl_push(x, out.u.l, item);
    }
    return out;
}


#define FILTER(name) static jv name(jctx *x, jframe *f, const jnode *at, jv v, jargs *a)

FILTER(f_safe)
{
    jv r = cmf__jv_to_str(x, v);
    r.flag |= JVF_SAFE;
    return r;
}
FILTER(f_escape) { return cmf__jv_html_escape(x, cmf__jv_to_str(x, v)); }
FILTER(f_forceescape)
{
    jv r = cmf__jv_to_str(x, v);
    r.flag &= (uint8_t)~JVF_SAFE;
    return cmf__jv_html_escape(x, r);
}
FILTER(f_tojson) { return tojson(x, at, v, a); }

FILTER(f_length)
{
    switch (v.t) {
    case JV_STR: return jv_int((int64_t)cmf__ju_len(v.u.s.p, v.u.s.n));
    case JV_LIST: if (!(v.flag & JVF_GEN)) return jv_int((int64_t)v.u.l->n); break;
    case JV_DICT: if (!v.u.d->is_ns) return jv_int((int64_t)v.u.d->n); break;
    case JV_UNDEF: return jv_int(0);
    default: break;
    }
    cmf__jx_fail(x, at, "object of type '%s' has no len()", cmf__jv_type_name(v));
}

FILTER(f_default)
{
    jv def = cmf__jx_arg(a, 0, "default_value", jv_str("", 0));
    bool boolean = cmf__jv_truthy(cmf__jx_arg(a, 1, "boolean", jv_bool(false)));
    if (v.t == JV_UNDEF || (boolean && !cmf__jv_truthy(v))) return def;
    return v;
}
FILTER(f_string) { return cmf__jv_to_str(x, v); }

FILTER(f_list)
{
    jv items = cmf__jx_iter_items(x, at, v);
    if (items.t == JV_LIST && items.u.l == v.u.l && v.t == JV_LIST) {
        jv c = cmf__jv_list_new(x, v.u.l->n);
        for (size_t i = 0; i < v.u.l->n; i++) cmf__jl_push(x, c.u.l, v.u.l->v[i]);
        return c;
    }
    return items;
}

FILTER(f_items)
{
    if (v.t == JV_UNDEF) return cmf__jv_list_new(x, 0);
    if (v.t != JV_DICT || v.u.d->is_ns) cmf__jx_fail(x, at, "Can only get item pairs from a mapping.");
    jv out = cmf__jv_list_new(x, v.u.d->n);
    for (size_t i = 0; i < v.u.d->n; i++) cmf__jl_push(x, out.u.l, pair(x, v.u.d->k[i], v.u.d->v[i]));
    out.flag = JVF_GEN;
    return out;
}

FILTER(f_first)
{
    jv items = cmf__jx_iter_items(x, at, v);
    if (!items.u.l->n) return jv_undef("No first item, sequence was empty.");
    return items.u.l->v[0];
}
FILTER(f_last)
{
    if (v.t == JV_LIST && (v.flag & JVF_GEN)) cmf__jx_fail(x, at, "'generator' object is not reversible");
    jv items = cmf__jx_iter_items(x, at, v);
    if (!items.u.l->n) return jv_undef("No last item, sequence was empty.");
    return items.u.l->v[items.u.l->n - 1];
}

FILTER(f_join)
{
    jv sep = cmf__jx_arg(a, 0, "d", jv_str("", 0));
    jv attr = cmf__jx_arg(a, 1, "attribute", jv_none());
    jv items = cmf__jx_iter_items(x, at, v);
    jv sp = cmf__jv_to_str(x, sep);
    cmf__buf b = {0};
    for (size_t i = 0; i < items.u.l->n; i++) {
        if (i) cmf__jx_buf_put(x, &b, sp.u.s.p, sp.u.s.n);
        jv it = items.u.l->v[i];
        if (attr.t != JV_NONE) it = attr_path(x, at, it, attr);
        cmf__jv_str_into(x, &b, it);
    }
    return cmf__jx_buf_take(x, &b);
}

FILTER(f_reverse)
{
    jv items = cmf__jx_iter_items(x, at, v);
    if (v.t == JV_STR) {
        cmf__buf b = {0};
        for (size_t i = items.u.l->n; i-- > 0;) cmf__jx_buf_put(x, &b, items.u.l->v[i].u.s.p, items.u.l->v[i].u.s.n);
        return cmf__jx_buf_take(x, &b);
    }
    jv out = cmf__jv_list_new(x, items.u.l->n);
    for (size_t i = items.u.l->n; i-- > 0;) cmf__jl_push(x, out.u.l, items.u.l->v[i]);
    out.flag = JVF_GEN; /* a list_reverseiterator */
    return out;
}

FILTER(f_map)
{
    /* generators, and `if value:` first: a falsy input maps to nothing */
    jv items = cmf__jv_truthy(v) ? cmf__jx_iter_items(x, at, v) : cmf__jv_list_new(x, 0);
    jv out = cmf__jv_list_new(x, items.u.l->n);
    out.flag = JVF_GEN;
    jv attr = cmf__jx_arg(a, 99, "attribute", jv_undef(NULL));
    if (attr.t != JV_UNDEF) {
        jv def = cmf__jx_arg(a, 99, "default", jv_undef(NULL));
        for (size_t i = 0; i < items.u.l->n; i++) {
            jv r = attr_path(x, at, items.u.l->v[i], attr);
            if (r.t == JV_UNDEF && def.t != JV_UNDEF) r = def;
            cmf__jl_push(x, out.u.l, r);
        }
        return out;
    }
    if (!a->n_pos) cmf__jx_fail(x, at, "map requires a filter argument");
    jv fname = cmf__jx_need_str(x, at, a->pos[0], "filter name");
    jargs rest = {a->pos + 1, a->n_pos - 1, a->kw_name, a->kw_len, a->kw_val, a->n_kw};
    for (size_t i = 0; i < items.u.l->n; i++)
        cmf__jl_push(x, out.u.l, cmf__jx_filter(x, f, at, fname.u.s.p, fname.u.s.n, items.u.l->v[i], &rest));
    return out;
}
FILTER(f_select) { return select_like(x, f, at, v, a, true, false); }
FILTER(f_reject) { return select_like(x, f, at, v, a, false, false); }
FILTER(f_selectattr) { return select_like(x, f, at, v, a, true, true); }
FILTER(f_rejectattr) { return select_like(x, f, at, v, a, false, true); }

FILTER(f_unique)
{
    bool cs = cmf__jv_truthy(cmf__jx_arg(a, 0, "case_sensitive", jv_bool(false)));
    jv attr = cmf__jx_arg(a, 1, "attribute", jv_none());
    jv items = cmf__jx_iter_items(x, at, v);
    jv out = cmf__jv_list_new(x, items.u.l->n), seen = cmf__jv_list_new(x, items.u.l->n);
    out.flag = JVF_GEN;
    for (size_t i = 0; i < items.u.l->n; i++) {
        jv it = items.u.l->v[i];
        jv key = lower_key(x, attr.t != JV_NONE ? attr_path(x, at, it, attr) : it, cs);
        if (key.t == JV_LIST || key.t == JV_DICT) cmf__jx_fail(x, at, "unhashable type: '%s'", cmf__jv_type_name(key));
        bool dup = false;
        for (size_t k = 0; k < seen.u.l->n && !dup; k++) dup = cmf__jv_equal(x, seen.u.l->v[k], key);
        if (!dup) {
            cmf__jl_push(x, seen.u.l, key);
            cmf__jl_push(x, out.u.l, it);
        }
    }
    return out;
}

/* sort, dictsort, min and max: items with their keys, then sorted or scanned */
enum { ORDER_SORT, ORDER_DICTSORT, ORDER_MIN, ORDER_MAX };
static jv order(jctx *x, const jnode *at, jv v, jargs *a, int mode)
{
    bool reverse = false, cs;
    jv attr = jv_none();
    jv items;
    size_t key_part = 0;
    if (mode == ORDER_DICTSORT) {
        cs = cmf__jv_truthy(cmf__jx_arg(a, 0, "case_sensitive", jv_bool(false)));
        jv by = cmf__jx_arg(a, 1, "by", jv_str("key", 3));
        reverse = cmf__jv_truthy(cmf__jx_arg(a, 2, "reverse", jv_bool(false)));
        if (v.t != JV_DICT || v.u.d->is_ns) cmf__jx_fail(x, at, "dictsort: value must be a mapping");
        items = cmf__jv_list_new(x, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) cmf__jl_push(x, items.u.l, pair(x, v.u.d->k[i], v.u.d->v[i]));
        if (by.t == JV_STR && NAME_IS(by.u.s.p, by.u.s.n, "value")) key_part = 1;
        else if (!(by.t == JV_STR && NAME_IS(by.u.s.p, by.u.s.n, "key")))
            cmf__jx_fail(x, at, "You can only sort by either \"key\" or \"value\"");
    } else {
        if (mode == ORDER_SORT) {
            reverse = cmf__jv_truthy(cmf__jx_arg(a, 0, "reverse", jv_bool(false)));
            cs = cmf__jv_truthy(cmf__jx_arg(a, 1, "case_sensitive", jv_bool(false)));
            attr = cmf__jx_arg(a, 2, "attribute", jv_none());
        } else {
            cs = cmf__jv_truthy(cmf__jx_arg(a, 0, "case_sensitive", jv_bool(false)));
            attr = cmf__jx_arg(a, 1, "attribute", jv_none());
        }
        jv src = cmf__jx_iter_items(x, at, v);
        items = cmf__jv_list_new(x, src.u.l->n);
        for (size_t i = 0; i < src.u.l->n; i++) cmf__jl_push(x, items.u.l, src.u.l->v[i]);
    }
    size_t cnt = items.u.l->n;
    jv *keys = cmf__jx_alloc(x, (cnt ? cnt : 1) * sizeof(jv));
    for (size_t i = 0; i < cnt; i++) {
        jv it = items.u.l->v[i];
        jv k = mode == ORDER_DICTSORT ? it.u.l->v[key_part] : attr.t != JV_NONE ? attr_path(x, at, it, attr) : it;
        keys[i] = lower_key(x, k, cs);
    }
    if (mode == ORDER_MIN || mode == ORDER_MAX) {
        if (!cnt) return jv_undef("No aggregated item, sequence was empty.");
        size_t best = 0;
        for (size_t i = 1; i < cnt; i++) {
            int c = cmf__jv_compare(x, at, keys[i], keys[best]);
            if (mode == ORDER_MIN ? c < 0 : c > 0) best = i;
        }
        return items.u.l->v[best];
    }
    sort_by(x, at, items.u.l->v, keys, cnt, reverse);
    return items;
}
FILTER(f_sort) { return order(x, at, v, a, ORDER_SORT); }
FILTER(f_dictsort) { return order(x, at, v, a, ORDER_DICTSORT); }
FILTER(f_min) { return order(x, at, v, a, ORDER_MIN); }
FILTER(f_max) { return order(x, at, v, a, ORDER_MAX); }

FILTER(f_sum)
{
    jv attr = cmf__jx_arg(a, 0, "attribute", jv_none());
    jv acc = cmf__jx_arg(a, 1, "start", jv_int(0));
    jv items = cmf__jx_iter_items(x, at, v);
    for (size_t i = 0; i < items.u.l->n; i++) {
        jv it = items.u.l->v[i];
        if (attr.t != JV_NONE) it = attr_path(x, at, it, attr);
        if (!jv_is_num(it) || !jv_is_num(acc)) cmf__jx_fail(x, at, "sum: unsupported operand types");
        if (acc.t == JV_FLOAT || it.t == JV_FLOAT) acc = jv_float(jv_num(acc) + jv_num(it));
        else {
            int64_t r;
            if (__builtin_add_overflow((int64_t)jv_num(acc), (int64_t)jv_num(it), &r)) cmf__jx_fail(x, at, "integer overflow");
            acc = jv_int(r);
        }
    }
    return acc;
}

FILTER(f_attr)
{
    jv name = cmf__jx_need_str(x, at, cmf__jx_arg(a, 0, "name", jv_none()), "attribute name");
    if (v.t == JV_DICT) {
        jv m = cmf__jx_method_lookup(x, v, name.u.s.p, name.u.s.n);
        return m.t == JV_FUNC ? m : jv_undef(NULL);
    }
    return cmf__jx_getattr(x, at, v, name.u.s.p, name.u.s.n);
}

FILTER(f_batch)
{
    int64_t cnt = cmf__jx_need_int(x, at, cmf__jx_arg(a, 0, "linecount", jv_none()), "linecount");
    if (cnt <= 0) cmf__jx_fail(x, at, "batch: linecount must be positive");
    jv fill = cmf__jx_arg(a, 1, "fill_with", jv_none());
    bool has_fill = has_arg(a, 1, "fill_with") && fill.t != JV_NONE;
    jv items = cmf__jx_iter_items(x, at, v);
    jv out = cmf__jv_list_new(x, 4);
    out.flag = JVF_GEN;
    jv cur = cmf__jv_list_new(x, (size_t)(cnt < 64 ? cnt : 64));
    for (size_t i = 0; i < items.u.l->n; i++) {
        if ((int64_t)cur.u.l->n == cnt) {
            cmf__jl_push(x, out.u.l, cur);
            cur = cmf__jv_list_new(x, 4);
        }
        cmf__jl_push(x, cur.u.l, items.u.l->v[i]);
    }
    if (cur.u.l->n) {
        if (has_fill)
            while ((int64_t)cur.u.l->n < cnt) cmf__jl_push(x, cur.u.l, fill);
        cmf__jl_push(x, out.u.l, cur);
    }
    return out;
}

FILTER(f_int)
{
    jv def = cmf__jx_arg(a, 0, "default", jv_int(0));
    if (v.t == JV_INT) return v;
    if (v.t == JV_BOOL) return jv_int(v.u.b);
    if (v.t == JV_FLOAT) return isfinite(v.u.f) ? jv_int((int64_t)v.u.f) : def;
    if (v.t == JV_STR) {
        char buf[64];
        jv t = cmf__js_strip(x, at, v, jv_none(), 3);
        if (t.u.s.n == 0 || t.u.s.n >= sizeof buf) return def;
        size_t k = 0;
        for (size_t i = 0; i < t.u.s.n; i++)
            if (t.u.s.p[i] != '_') buf[k++] = t.u.s.p[i];
        buf[k] = 0;
        char *end;
        long long r = strtoll(buf, &end, 10);
        if (*end == 0) return jv_int(r);
        double d = strtod(buf, &end);
        if (*end == 0 && isfinite(d)) return jv_int((int64_t)d);
    }
    return def;
}

FILTER(f_float)
{
    jv def = cmf__jx_arg(a, 0, "default", jv_float(0.0));
    if (jv_is_num(v)) return jv_float(jv_num(v));
    if (v.t == JV_STR) {
        char buf[64];
        jv t = cmf__js_strip(x, at, v, jv_none(), 3);
        if (t.u.s.n == 0 || t.u.s.n >= sizeof buf) return def;
        memcpy(buf, t.u.s.p, t.u.s.n);
        buf[t.u.s.n] = 0;
        char *end;
        double d = strtod(buf, &end);
        if (*end == 0) return jv_float(d);
    }
    return def;
}

FILTER(f_abs)
{
    if (v.t == JV_INT) {
        if (v.u.i == INT64_MIN) cmf__jx_fail(x, at, "integer overflow");
        return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
    }
    if (v.t == JV_BOOL) return jv_int(v.u.b);
    if (v.t == JV_FLOAT) return jv_float(fabs(v.u.f));
    cmf__jx_fail(x, at, "bad operand type for abs(): '%s'", cmf__jv_type_name(v));
}

FILTER(f_round)
{
    return do_round(x, at, v, cmf__jx_need_int(x, at, cmf__jx_arg(a, 0, "precision", jv_int(0)), "precision"),
                    cmf__jx_arg(a, 1, "method", jv_str("common", 6)));
}

/* The filters below work on str(value). These keep a Markup input Markup. */
static jv keep_safe(jv in, jv out)
{
    out.flag |= in.flag & JVF_SAFE;
    return out;
}
FILTER(f_trim)
{
    jv s = cmf__jv_to_str(x, v);
    return keep_safe(s, cmf__js_strip(x, at, s, cmf__jx_arg(a, 0, "chars", jv_none()), 3));
}
FILTER(f_upper) { jv s = cmf__jv_to_str(x, v); return keep_safe(s, cmf__js_case(x, s, 1)); }
FILTER(f_lower) { jv s = cmf__jv_to_str(x, v); return keep_safe(s, cmf__js_case(x, s, 0)); }
FILTER(f_title) { jv s = cmf__jv_to_str(x, v); return keep_safe(s, cmf__js_title_words(x, s)); }
FILTER(f_capitalize) { jv s = cmf__jv_to_str(x, v); return keep_safe(s, cmf__js_capitalize(x, s)); }
FILTER(f_indent)
{
    if (v.t == JV_UNDEF) cmf__jx_fail(x, at, "%s", v.u.s.p ? v.u.s.p : "undefined value");
    if (v.t != JV_STR) cmf__jx_fail(x, at, "unsupported operand type(s) for +=: '%s' and 'str'", cmf__jv_type_name(v));
    return keep_safe(v, indent_str(x, at, v, a));
}

FILTER(f_replace)
{
    jv s = cmf__jv_to_str(x, v);
    jv old = cmf__jv_to_str(x, cmf__jx_arg(a, 0, "old", jv_str("", 0)));
    jv nw = cmf__jv_to_str(x, cmf__jx_arg(a, 1, "new", jv_str("", 0)));
    jv cnt = cmf__jx_arg(a, 2, "count", jv_none());
    return cmf__js_replace(x, s, old, nw, cnt.t == JV_NONE ? -1 : cmf__jx_need_int(x, at, cnt, "count"));
}

FILTER(f_wordcount)
{
    jv s = cmf__jv_to_str(x, v);
    int64_t words = 0;
    bool in_word = false;
    int32_t cp;
    for (size_t i = 0; i < s.u.s.n;) {
        i = cmf__ju_next(s.u.s.p, s.u.s.n, i, &cp);
        bool w = cp == '_' || cmf__js_is_alpha(cp) || cmf__js_is_digit(cp);
        if (w && !in_word) words++;
        in_word = w;
    }
    return jv_int(words);
}

FILTER(f_center)
{
    jv s = cmf__jv_to_str(x, v);
    int64_t width = cmf__jx_need_int(x, at, cmf__jx_arg(a, 0, "width", jv_int(80)), "width");
    int64_t len = (int64_t)cmf__ju_len(s.u.s.p, s.u.s.n);
    if (width <= len) return s;
    if (width > 1 << 20) cmf__jx_fail(x, at, "center width too large");
    int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
    cmf__buf b = {0};
    for (int64_t i = 0; i < left; i++) cmf__jx_buf_put(x, &b, " ", 1);
    cmf__jx_buf_put(x, &b, s.u.s.p, s.u.s.n);
    for (int64_t i = 0; i < marg - left; i++) cmf__jx_buf_put(x, &b, " ", 1);
    return cmf__jx_buf_take(x, &b);
}

FILTER(f_truncate)
{
    int64_t length = cmf__jx_need_int(x, at, cmf__jx_arg(a, 0, "length", jv_int(255)), "length");
    jv lw = cmf__jx_arg(a, 3, "leeway", jv_none());
    if (v.t != JV_STR) {
        /* jinja2 measures len(value) first: short sequences come back as they are */
        int64_t leeway = lw.t == JV_NONE ? 5 : cmf__jx_need_int(x, at, lw, "leeway");
        int64_t len = v.t == JV_LIST && !(v.flag & JVF_GEN) ? (int64_t)v.u.l->n
                      : v.t == JV_DICT && !v.u.d->is_ns ? (int64_t)v.u.d->n : v.t == JV_UNDEF ? 0 : -1;
        if (len < 0) cmf__jx_fail(x, at, "object of type '%s' has no len()", cmf__jv_type_name(v));
        if (len <= length + leeway) return v;
        cmf__jx_fail(x, at, "truncate: cannot cut a %s", cmf__jv_type_name(v));
    }
    bool killwords = cmf__jv_truthy(cmf__jx_arg(a, 1, "killwords", jv_bool(false)));
    jv end = cmf__jv_to_str(x, cmf__jx_arg(a, 2, "end", jv_str("...", 3)));
    int64_t leeway = lw.t == JV_NONE ? 5 : cmf__jx_need_int(x, at, lw, "leeway");
    int64_t len = (int64_t)cmf__ju_len(v.u.s.p, v.u.s.n), endlen = (int64_t)cmf__ju_len(end.u.s.p, end.u.s.n);
    if (length < endlen) cmf__jx_fail(x, at, "expected length >= %lld, got %lld", (long long)endlen, (long long)length);
    if (leeway < 0) cmf__jx_fail(x, at, "expected leeway >= 0, got %lld", (long long)leeway);
    if (len <= length + leeway) return v;
    size_t cut = cmf__ju_offset(v.u.s.p, v.u.s.n, (size_t)(length - endlen));
    jv head = jv_str(v.u.s.p, cut);
    if (!killwords) {
        jv parts = cmf__js_split(x, at, head, jv_str(" ", 1), 1, true);
        head = parts.u.l->v[0];
    }
    cmf__buf b = {0};
    cmf__jx_buf_put(x, &b, head.u.s.p, head.u.s.n);
    cmf__jx_buf_put(x, &b, end.u.s.p, end.u.s.n);
    return cmf__jx_buf_take(x, &b);
}

/* The one list of filters. */
static const struct {
    const char *name;
    jv (*fn)(jctx *x, jframe *f, const jnode *at, jv v, jargs *a);
} FILTERS[] = {
    {"safe", f_safe}, {"e", f_escape}, {"escape", f_escape}, {"forceescape", f_forceescape},
    {"tojson", f_tojson}, {"length", f_length}, {"count", f_length}, {"default", f_default},
    {"d", f_default}, {"string", f_string}, {"list", f_list}, {"items", f_items}, {"first", f_first},
    {"last", f_last}, {"join", f_join}, {"reverse", f_reverse}, {"map", f_map}, {"select", f_select},
    {"reject", f_reject}, {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr},
    {"unique", f_unique}, {"sort", f_sort}, {"dictsort", f_dictsort}, {"min", f_min}, {"max", f_max},
    {"sum", f_sum}, {"attr", f_attr}, {"batch", f_batch}, {"int", f_int}, {"float", f_float},
    {"abs", f_abs}, {"round", f_round}, {"trim", f_trim}, {"upper", f_upper}, {"lower", f_lower},
    {"title", f_title}, {"capitalize", f_capitalize}, {"indent", f_indent}, {"replace", f_replace},
    {"wordcount", f_wordcount}, {"center", f_center}, {"truncate", f_truncate}, {NULL, NULL}};

static int find_filter(const char *name, size_t n)
{
    for (int i = 0; FILTERS[i].name; i++)
        if (name_eq(FILTERS[i].name, name, n)) return i;
    return -1;
}

bool cmf__jx_filter_known(const char *name, size_t n) { return find_filter(name, n) >= 0; }

jv cmf__jx_filter(jctx *x, jframe *f, const jnode *at, const char *name, size_t n, jv v, jargs *a)
{
    int i = find_filter(name, n);
    if (i < 0) cmf__jx_fail(x, at, "No filter named '%.*s'.", (int)(n > 60 ? 60 : n), name);
    return FILTERS[i].fn(x, f, at, v, a);
}
