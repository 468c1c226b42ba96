/* jinja_builtins.c — what templates call by name: jinja2 filters (with HF's
 * tojson), tests, the Python str/dict/list methods a sandboxed jinja2 lets
 * through (mutating ones are blocked as ImmutableSandboxedEnvironment
 * blocks them), loop attributes, and the globals range, namespace, dict,
 * raise_exception, strftime_now. Unknown names fail like jinja2 does. */
#include "text/jinja.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#define NAME_IS(p, n, lit) ((n) == sizeof(lit) - 1 && memcmp((p), (lit), (n)) == 0)

/* Argument `i` positionally or by keyword `kw`, else `def`. */
static jv arg(jargs *a, size_t i, const char *kw, jv def)
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
    jv v = arg(a, i, kw, sentinel);
    return !(v.t == JV_UNDEF && v.u.s.p && v.u.s.p[0] == 1 && v.u.s.p[1] == 0);
}

static jv need_str(jctx *x, const jnode *at, jv v, const char *what)
{
    if (v.t == JV_STR) return v;
    jx_fail(x, at, "%s must be a string, not %s", what, jv_type_name(v));
}

static int64_t need_int(jctx *x, const jnode *at, jv v, const char *what)
{
    if (v.t == JV_INT) return v.u.i;
    if (v.t == JV_BOOL) return v.u.b;
    jx_fail(x, at, "%s must be an integer, not %s", what, jv_type_name(v));
}

/* ---- strings ----------------------------------------------------------------- */
static jv str_map_case(jctx *x, jv s, int mode /* 0 lower 1 upper */)
{
    cmf__buf b = {0};
    int32_t cp;
    for (size_t i = 0; i < s.u.s.n;) {
        size_t j = ju_next(s.u.s.p, s.u.s.n, i, &cp);
        if (j - i == 1 && (unsigned char)s.u.s.p[i] >= 0x80) jx_buf_put(x, &b, s.u.s.p + i, 1);
        else ju_put(x, &b, mode ? utf8proc_toupper(cp) : utf8proc_tolower(cp));
        i = j;
    }
    return jx_buf_take(x, &b);
}

static bool cp_is_alpha(int32_t cp)
{
    utf8proc_category_t c = utf8proc_category(cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT ||
           c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_LO;
}
static bool cp_is_digit(int32_t cp) { return utf8proc_category(cp) == UTF8PROC_CATEGORY_ND; }
static bool cp_cased(int32_t cp) { return utf8proc_tolower(cp) != cp || utf8proc_toupper(cp) != cp; }

/* Python str.title(): uppercase after an uncased char, lowercase after a cased one. */
static jv py_title(jctx *x, jv s)
{
    cmf__buf b = {0};
    bool prev_cased = false;
    int32_t cp;
    for (size_t i = 0; i < s.u.s.n;) {
        size_t j = ju_next(s.u.s.p, s.u.s.n, i, &cp);
        int32_t o = prev_cased ? utf8proc_tolower(cp) : utf8proc_totitle(cp);
        ju_put(x, &b, o);
        prev_cased = cp_cased(cp);
        i = j;
    }
    return jx_buf_take(x, &b);
}

static jv py_capitalize(jctx *x, jv s)
{
    cmf__buf b = {0};
    int32_t cp;
    for (size_t i = 0; i < s.u.s.n;) {
        size_t j = ju_next(s.u.s.p, s.u.s.n, i, &cp);
        ju_put(x, &b, i == 0 ? utf8proc_totitle(cp) : utf8proc_tolower(cp));
        i = j;
    }
    return jx_buf_take(x, &b);
}

/* jinja2's title filter: capitalize each piece split at [-\s({\[<]+ */
static jv jinja_title(jctx *x, jv s)
{
    cmf__buf b = {0};
    bool at_start = true;
    int32_t cp;
    for (size_t i = 0; i < s.u.s.n;) {
        size_t j = ju_next(s.u.s.p, s.u.s.n, i, &cp);
        bool sep = cp == '-' || ju_isspace(cp) || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        if (sep) {
            ju_put(x, &b, cp);
            at_start = true;
        } else {
            ju_put(x, &b, at_start ? utf8proc_toupper(cp) : utf8proc_tolower(cp));
            at_start = false;
        }
        i = j;
    }
    return jx_buf_take(x, &b);
}

static bool in_chars(jv chars, int32_t cp)
{
    int32_t c;
    for (size_t i = 0; i < chars.u.s.n;) {
        i = ju_next(chars.u.s.p, chars.u.s.n, i, &c);
        if (c == cp) return true;
    }
    return false;
}

/* strip: which bit 1 left, 2 right; chars JV_NONE = whitespace */
static jv py_strip(jctx *x, const jnode *at, jv s, jv chars, int which)
{
    bool ws = chars.t == JV_NONE || chars.t == JV_UNDEF;
    if (!ws) need_str(x, at, chars, "strip arg");
    size_t a = 0, b = s.u.s.n;
    int32_t cp;
    if (which & 1)
        while (a < b) {
            size_t j = ju_next(s.u.s.p, b, a, &cp);
            if (ws ? !ju_isspace(cp) : !in_chars(chars, cp)) break;
            a = j;
        }
    if (which & 2)
        while (b > a) {
            size_t k = b - 1;
            while (k > a && ((unsigned char)s.u.s.p[k] & 0xc0) == 0x80) k--;
            ju_next(s.u.s.p, b, k, &cp);
            if (ws ? !ju_isspace(cp) : !in_chars(chars, cp)) break;
            b = k;
        }
    return jv_str(s.u.s.p + a, b - a);
}

static jv py_replace(jctx *x, jv s, jv old, jv new_, int64_t count)
{
    cmf__buf b = {0};
    if (old.u.s.n == 0) {
        /* Python inserts `new` between every character and at both ends */
        int32_t cp;
        int64_t done = 0;
        size_t i = 0;
        for (;;) {
            if (count >= 0 && done >= count) break;
            jx_buf_put(x, &b, new_.u.s.p, new_.u.s.n);
            done++;
            if (i >= s.u.s.n) break;
            size_t j = ju_next(s.u.s.p, s.u.s.n, i, &cp);
            jx_buf_put(x, &b, s.u.s.p + i, j - i);
            i = j;
        }
        jx_buf_put(x, &b, s.u.s.p + i, s.u.s.n - i);
        return jx_buf_take(x, &b);
    }
    size_t i = 0;
    int64_t done = 0;
    while (i < s.u.s.n) {
        const char *hit = (count < 0 || done < count) ? memmem(s.u.s.p + i, s.u.s.n - i, old.u.s.p, old.u.s.n) : NULL;
        if (!hit) break;
        size_t k = (size_t)(hit - s.u.s.p);
        jx_buf_put(x, &b, s.u.s.p + i, k - i);
        jx_buf_put(x, &b, new_.u.s.p, new_.u.s.n);
        i = k + old.u.s.n;
        done++;
    }
    jx_buf_put(x, &b, s.u.s.p + i, s.u.s.n - i);
    return jx_buf_take(x, &b);
}

static jv py_split(jctx *x, const jnode *at, jv s, jv sep, int64_t maxsplit, bool right)
{
    jv out = jv_list_new(x, 4);
    if (sep.t == JV_NONE || sep.t == JV_UNDEF) {
        /* runs of whitespace; no empty strings */
        size_t n = s.u.s.n;
        jv parts = jv_list_new(x, 4);
        size_t i = 0;
        int32_t cp;
        while (i < n) {
            while (i < n) {
                size_t j = ju_next(s.u.s.p, n, i, &cp);
                if (!ju_isspace(cp)) break;
                i = j;
            }
            if (i >= n) break;
            size_t a = i;
            while (i < n) {
                size_t j = ju_next(s.u.s.p, n, i, &cp);
                if (ju_isspace(cp)) break;
                i = j;
            }
            jl_push(x, parts.u.l, jv_str(s.u.s.p + a, i - a));
        }
        if (maxsplit < 0 || (size_t)maxsplit >= parts.u.l->n) return parts;
        /* limited: rejoin the tail with its original spacing */
        if (!right) {
            for (int64_t k = 0; k < maxsplit; k++) jl_push(x, out.u.l, parts.u.l->v[k]);
            /* the rest runs to the end, trailing whitespace kept */
            const char *p = parts.u.l->v[maxsplit].u.s.p;
            jl_push(x, out.u.l, jv_str(p, (size_t)(s.u.s.p + n - p)));
            return out;
        }
        size_t keep = parts.u.l->n - (size_t)maxsplit;
        jv last_head = parts.u.l->v[keep - 1];
        /* the head starts at the string's start, leading whitespace kept */
        jl_push(x, out.u.l, jv_str(s.u.s.p, (size_t)(last_head.u.s.p + last_head.u.s.n - s.u.s.p)));
        for (size_t k = keep; k < parts.u.l->n; k++) jl_push(x, out.u.l, parts.u.l->v[k]);
        return out;
    }
    need_str(x, at, sep, "separator");
    if (sep.u.s.n == 0) jx_fail(x, at, "empty separator");
    if (!right) {
        size_t i = 0;
        int64_t done = 0;
        for (;;) {
            const char *hit = (maxsplit < 0 || done < maxsplit) ? memmem(s.u.s.p + i, s.u.s.n - i, sep.u.s.p, sep.u.s.n) : NULL;
            if (!hit) break;
            size_t k = (size_t)(hit - s.u.s.p);
            jl_push(x, out.u.l, jv_str(s.u.s.p + i, k - i));
            i = k + sep.u.s.n;
            done++;
        }
        jl_push(x, out.u.l, jv_str(s.u.s.p + i, s.u.s.n - i));
        return out;
    }
    /* rsplit: collect from the right, then reverse */
    jv rev = jv_list_new(x, 4);
    size_t end = s.u.s.n;
    int64_t done = 0;
    while (maxsplit < 0 || done < maxsplit) {
        size_t found = (size_t)-1;
        if (end >= sep.u.s.n)
            for (size_t k = end - sep.u.s.n + 1; k-- > 0;)
                if (memcmp(s.u.s.p + k, sep.u.s.p, sep.u.s.n) == 0) {
                    found = k;
                    break;
                }
        if (found == (size_t)-1) break;
        jl_push(x, rev.u.l, jv_str(s.u.s.p + found + sep.u.s.n, end - found - sep.u.s.n));
        end = found;
        done++;
    }
    jl_push(x, out.u.l, jv_str(s.u.s.p, end));
    for (size_t k = rev.u.l->n; k-- > 0;) jl_push(x, out.u.l, rev.u.l->v[k]);
    return out;
}

static jv py_splitlines(jctx *x, jv s, bool keepends)
{
    jv out = jv_list_new(x, 4);
    size_t i = 0, a = 0, n = s.u.s.n;
    const char *p = s.u.s.p;
    while (i < n) {
        int32_t cp;
        size_t j = ju_next(p, n, i, &cp);
        bool br = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 ||
                  cp == 0x2028 || cp == 0x2029;
        if (br) {
            size_t e = j;
            if (cp == '\r' && j < n && p[j] == '\n') e = j + 1;
            jl_push(x, out.u.l, jv_str(p + a, (keepends ? e : i) - a));
            a = i = e;
        } else i = j;
    }
    if (a < n) jl_push(x, out.u.l, jv_str(p + a, n - a));
    return out;
}

/* Python str.find/rfind/count over code points. */
static int64_t cp_index_of(jv s, size_t byte_off) { return (int64_t)ju_len(s.u.s.p, byte_off); }

static jv py_format(jctx *x, const jnode *at, jv fmt, jargs *a)
{
    cmf__buf b = {0};
    size_t auto_idx = 0;
    const char *p = fmt.u.s.p;
    size_t n = fmt.u.s.n;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '{' && i + 1 < n && p[i + 1] == '{') { jx_buf_put(x, &b, "{", 1); i++; continue; }
        if (p[i] == '}' && i + 1 < n && p[i + 1] == '}') { jx_buf_put(x, &b, "}", 1); i++; continue; }
        if (p[i] == '}') jx_fail(x, at, "Single '}' encountered in format string");
        if (p[i] != '{') { jx_buf_put(x, &b, p + i, 1); continue; }
        size_t e = i + 1;
        while (e < n && p[e] != '}') e++;
        if (e >= n) jx_fail(x, at, "Single '{' encountered in format string");
        const char *f = p + i + 1;
        size_t fl = e - i - 1;
        for (size_t k = 0; k < fl; k++)
            if (f[k] == ':' || f[k] == '!' || f[k] == '.' || f[k] == '[')
                jx_fail(x, at, "format specs and conversions in str.format are not supported");
        jv v;
        if (fl == 0) {
            if (auto_idx >= a->n_pos) jx_fail(x, at, "Replacement index %zu out of range for positional args tuple", auto_idx);
            v = a->pos[auto_idx++];
        } else if (f[0] >= '0' && f[0] <= '9') {
            size_t idx = (size_t)strtoul(f, NULL, 10);
            if (idx >= a->n_pos) jx_fail(x, at, "Replacement index %zu out of range for positional args tuple", idx);
            v = a->pos[idx];
        } else {
            bool found = false;
            for (size_t k = 0; k < a->n_kw; k++)
                if (a->kw_len[k] == fl && memcmp(a->kw_name[k], f, fl) == 0) {
                    v = a->kw_val[k];
                    found = true;
                }
            if (!found) jx_fail(x, at, "KeyError: '%.*s'", (int)fl, f);
        }
        jv_str_into(x, &b, v);
        i = e;
    }
    return jx_buf_take(x, &b);
}

/* ---- methods ------------------------------------------------------------------- */
static const char *const STR_METHODS[] = {
    "startswith", "endswith", "strip", "lstrip", "rstrip", "split", "rsplit", "replace", "upper", "lower",
    "title", "capitalize", "find", "rfind", "count", "format", "join", "isdigit", "isalpha", "isalnum",
    "isspace", "isupper", "islower", "splitlines", "removeprefix", "removesuffix", "index", "rindex",
    "casefold", "swapcase", "isnumeric", "isdecimal", "partition", "rpartition", "zfill", "center",
    "ljust", "rjust", "expandtabs", "istitle", "encode", NULL};
static const char *const DICT_METHODS[] = {"items", "keys", "values", "get", "copy", NULL};
static const char *const LIST_METHODS[] = {"index", "count", "copy", NULL};
static const char *const DICT_UNSAFE[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};
static const char *const LIST_UNSAFE[] = {"append", "clear", "pop", "reverse", "insert", "sort", "extend", "remove", NULL};

static bool in_names(const char *const *names, const char *p, size_t n)
{
    for (; *names; names++)
        if (strlen(*names) == n && memcmp(*names, p, n) == 0) return true;
    return false;
}

jv jx_method_lookup(jctx *x, jv self, const char *name, size_t n)
{
    const char *const *ok = self.t == JV_STR ? STR_METHODS : self.t == JV_DICT ? DICT_METHODS
                            : self.t == JV_LIST ? LIST_METHODS : NULL;
    const char *const *unsafe = self.t == JV_DICT ? DICT_UNSAFE : self.t == JV_LIST ? LIST_UNSAFE : NULL;
    if (ok && in_names(ok, name, n)) {
        jfunc *fn = jx_alloc(x, sizeof(jfunc));
        fn->kind = FN_METHOD;
        fn->name = name;
        fn->name_len = n;
        fn->self = self;
        jv v = {.t = JV_FUNC};
        v.u.fn = fn;
        return v;
    }
    if (unsafe && in_names(unsafe, name, n)) {
        char buf[160];
        snprintf(buf, sizeof buf, "access to attribute '%.*s' of '%s' object is unsafe.", (int)n, name, jv_type_name(self));
        jv u = jv_undef(jv_strdup(x, buf, strlen(buf)).u.s.p);
        u.flag = JVF_UNSAFE;
        return u;
    }
    return jv_undef(NULL);
}

static bool str_all(jv s, bool (*pred)(int32_t))
{
    if (s.u.s.n == 0) return false;
    int32_t cp;
    for (size_t i = 0; i < s.u.s.n;) {
        i = ju_next(s.u.s.p, s.u.s.n, i, &cp);
        if (!pred(cp)) return false;
    }
    return true;
}
static bool p_alnum(int32_t c) { return cp_is_alpha(c) || cp_is_digit(c); }
static bool p_space(int32_t c) { return ju_isspace(c); }

static int case_state(jv s) /* bit1: has lower-cased-able upper; bit2: has lower */
{
    int st = 0;
    int32_t cp;
    for (size_t i = 0; i < s.u.s.n;) {
        i = ju_next(s.u.s.p, s.u.s.n, i, &cp);
        if (utf8proc_tolower(cp) != cp) st |= 1;
        else if (utf8proc_toupper(cp) != cp) st |= 2;
    }
    return st;
}

static bool prefix_match(jctx *x, const jnode *at, jv s, jv pre, bool end)
{
    if (pre.t == JV_LIST && (pre.flag & JVF_TUPLE)) {
        for (size_t i = 0; i < pre.u.l->n; i++)
            if (prefix_match(x, at, s, pre.u.l->v[i], end)) return true;
        return false;
    }
    if (pre.t != JV_STR)
        jx_fail(x, at, "%s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith", jv_type_name(pre));
    if (pre.u.s.n > s.u.s.n) return false;
    return memcmp(s.u.s.p + (end ? s.u.s.n - pre.u.s.n : 0), pre.u.s.p, pre.u.s.n) == 0;
}

static jv str_method(jctx *x, const jnode *at, const char *m, size_t mn, jv s, jargs *a)
{
    if (NAME_IS(m, mn, "startswith") || NAME_IS(m, mn, "endswith")) {
        bool end = m[0] == 'e';
        jv sub = s;
        if (a->n_pos > 1) {
            int64_t n = (int64_t)ju_len(s.u.s.p, s.u.s.n), st = need_int(x, at, a->pos[1], "start");
            int64_t en = a->n_pos > 2 ? need_int(x, at, a->pos[2], "end") : n;
            if (st < 0) st = st + n < 0 ? 0 : st + n;
            if (en < 0) en = en + n < 0 ? 0 : en + n;
            if (st > n) return jv_bool(false);
            if (en > n) en = n;
            if (en < st) en = st;
            size_t bs = ju_offset(s.u.s.p, s.u.s.n, (size_t)st), be = ju_offset(s.u.s.p, s.u.s.n, (size_t)en);
            sub = jv_str(s.u.s.p + bs, be - bs);
        }
        return jv_bool(prefix_match(x, at, sub, arg(a, 0, NULL, jv_none()), end));
    }
    if (NAME_IS(m, mn, "strip")) return py_strip(x, at, s, arg(a, 0, "chars", jv_none()), 3);
    if (NAME_IS(m, mn, "lstrip")) return py_strip(x, at, s, arg(a, 0, "chars", jv_none()), 1);
    if (NAME_IS(m, mn, "rstrip")) return py_strip(x, at, s, arg(a, 0, "chars", jv_none()), 2);
    if (NAME_IS(m, mn, "split") || NAME_IS(m, mn, "rsplit")) {
        jv ms = arg(a, 1, "maxsplit", jv_int(-1));
        return py_split(x, at, s, arg(a, 0, "sep", jv_none()), need_int(x, at, ms, "maxsplit"), m[0] == 'r');
    }
    if (NAME_IS(m, mn, "replace")) {
        jv old = need_str(x, at, arg(a, 0, NULL, jv_none()), "replace arg 1");
        jv nw = need_str(x, at, arg(a, 1, NULL, jv_none()), "replace arg 2");
        return py_replace(x, s, old, nw, need_int(x, at, arg(a, 2, "count", jv_int(-1)), "count"));
    }
    if (NAME_IS(m, mn, "upper")) return str_map_case(x, s, 1);
    if (NAME_IS(m, mn, "lower") || NAME_IS(m, mn, "casefold")) return str_map_case(x, s, 0);
    if (NAME_IS(m, mn, "title")) return py_title(x, s);
    if (NAME_IS(m, mn, "capitalize")) return py_capitalize(x, s);
    if (NAME_IS(m, mn, "find") || NAME_IS(m, mn, "rfind") || NAME_IS(m, mn, "index") || NAME_IS(m, mn, "rindex") ||
        NAME_IS(m, mn, "count")) {
        jv sub = need_str(x, at, arg(a, 0, NULL, jv_none()), "substring");
        if (a->n_pos > 1) jx_fail(x, at, "start/end arguments of %.*s are not supported", (int)mn, m);
        if (m[0] == 'c') {
            if (sub.u.s.n == 0) return jv_int((int64_t)ju_len(s.u.s.p, s.u.s.n) + 1);
            int64_t c = 0;
            size_t i = 0;
            const char *h;
            while (i <= s.u.s.n && (h = memmem(s.u.s.p + i, s.u.s.n - i, sub.u.s.p, sub.u.s.n))) {
                c++;
                i = (size_t)(h - s.u.s.p) + sub.u.s.n;
            }
            return jv_int(c);
        }
        bool rev = m[0] == 'r';
        int64_t found = -1;
        if (!rev) {
            const char *h = memmem(s.u.s.p, s.u.s.n, sub.u.s.p, sub.u.s.n);
            if (h) found = cp_index_of(s, (size_t)(h - s.u.s.p));
        } else if (sub.u.s.n <= s.u.s.n) {
            for (size_t k = s.u.s.n - sub.u.s.n + 1; k-- > 0;)
                if (memcmp(s.u.s.p + k, sub.u.s.p, sub.u.s.n) == 0) {
                    found = cp_index_of(s, k);
                    break;
                }
        }
        if (found < 0 && (NAME_IS(m, mn, "index") || NAME_IS(m, mn, "rindex"))) jx_fail(x, at, "substring not found");
        return jv_int(found);
    }
    if (NAME_IS(m, mn, "format")) return py_format(x, at, s, a);
    if (NAME_IS(m, mn, "join")) {
        jv it = arg(a, 0, NULL, jv_none());
        if (it.t != JV_LIST) jx_fail(x, at, "can only join an iterable");
        cmf__buf b = {0};
        for (size_t i = 0; i < it.u.l->n; i++) {
            if (i) jx_buf_put(x, &b, s.u.s.p, s.u.s.n);
            jv e = it.u.l->v[i];
            if (e.t != JV_STR) jx_fail(x, at, "sequence item %zu: expected str instance, %s found", i, jv_type_name(e));
            jx_buf_put(x, &b, e.u.s.p, e.u.s.n);
        }
        return jx_buf_take(x, &b);
    }
    if (NAME_IS(m, mn, "isdigit") || NAME_IS(m, mn, "isnumeric") || NAME_IS(m, mn, "isdecimal"))
        return jv_bool(str_all(s, cp_is_digit));
    if (NAME_IS(m, mn, "isalpha")) return jv_bool(str_all(s, cp_is_alpha));
    if (NAME_IS(m, mn, "isalnum")) return jv_bool(str_all(s, p_alnum));
    if (NAME_IS(m, mn, "isspace")) return jv_bool(str_all(s, p_space));
    if (NAME_IS(m, mn, "isupper")) return jv_bool(case_state(s) == 1);
    if (NAME_IS(m, mn, "islower")) return jv_bool(case_state(s) == 2);
    if (NAME_IS(m, mn, "splitlines")) return py_splitlines(x, s, jv_truthy(arg(a, 0, "keepends", jv_bool(false))));
    if (NAME_IS(m, mn, "removeprefix") || NAME_IS(m, mn, "removesuffix")) {
        jv p = need_str(x, at, arg(a, 0, NULL, jv_none()), "affix");
        bool suf = m[6] == 's';
        if (prefix_match(x, at, s, p, suf))
            return suf ? jv_str(s.u.s.p, s.u.s.n - p.u.s.n) : jv_str(s.u.s.p + p.u.s.n, s.u.s.n - p.u.s.n);
        return s;
    }
    if (NAME_IS(m, mn, "swapcase")) {
        cmf__buf b = {0};
        int32_t cp;
        for (size_t i = 0; i < s.u.s.n;) {
            i = ju_next(s.u.s.p, s.u.s.n, i, &cp);
            int32_t lo = utf8proc_tolower(cp);
            ju_put(x, &b, lo != cp ? lo : utf8proc_toupper(cp));
        }
        return jx_buf_take(x, &b);
    }
    if (NAME_IS(m, mn, "partition") || NAME_IS(m, mn, "rpartition")) {
        jv sep = need_str(x, at, arg(a, 0, NULL, jv_none()), "separator");
        if (!sep.u.s.n) jx_fail(x, at, "empty separator");
        jv parts = py_split(x, at, s, sep, 1, m[0] == 'r');
        jv out = jv_list_new(x, 3);
        out.flag = JVF_TUPLE;
        if (parts.u.l->n == 2) {
            jl_push(x, out.u.l, parts.u.l->v[0]);
            jl_push(x, out.u.l, sep);
            jl_push(x, out.u.l, parts.u.l->v[1]);
        } else if (m[0] == 'r') {
            jl_push(x, out.u.l, jv_str("", 0));
            jl_push(x, out.u.l, jv_str("", 0));
            jl_push(x, out.u.l, s);
        } else {
            jl_push(x, out.u.l, s);
            jl_push(x, out.u.l, jv_str("", 0));
            jl_push(x, out.u.l, jv_str("", 0));
        }
        return out;
    }
    if (NAME_IS(m, mn, "istitle")) {
        jv t = py_title(x, s);
        return jv_bool(case_state(s) & 1 && jv_equal(t, s));
    }
    jx_fail(x, at, "str.%.*s() is not supported", (int)mn, m);
}

static jv pair(jctx *x, jv a, jv b)
{
    jv t = jv_list_new(x, 2);
    t.flag = JVF_TUPLE;
    jl_push(x, t.u.l, a);
    jl_push(x, t.u.l, b);
    return t;
}

jv jx_method_call(jctx *x, const jnode *at, jfunc *fn, jargs *a)
{
    jv self = fn->self;
    const char *m = fn->name;
    size_t mn = fn->name_len;
    if (self.t == JV_LOOP) {
        /* loop.cycle(a, b, ...) */
        if (a->n_pos == 0) jx_fail(x, at, "no items for cycling given");
        return a->pos[self.u.loop->index0 % a->n_pos];
    }
    if (self.t == JV_STR) return str_method(x, at, m, mn, self, a);
    if (self.t == JV_DICT) {
        jdict *d = self.u.d;
        if (NAME_IS(m, mn, "items") || NAME_IS(m, mn, "keys") || NAME_IS(m, mn, "values")) {
            jv out = jv_list_new(x, d->n);
            for (size_t i = 0; i < d->n; i++)
                jl_push(x, out.u.l, m[0] == 'i' ? pair(x, d->k[i], d->v[i]) : m[0] == 'k' ? d->k[i] : d->v[i]);
            return out;
        }
        if (NAME_IS(m, mn, "get")) {
            jv *v = jd_get(d, arg(a, 0, NULL, jv_none()));
            return v ? *v : arg(a, 1, NULL, jv_none());
        }
        if (NAME_IS(m, mn, "copy")) {
            jv c = jv_dict_new(x, d->n);
            for (size_t i = 0; i < d->n; i++) jd_set(x, c.u.d, d->k[i], d->v[i]);
            return c;
        }
    }
    if (self.t == JV_LIST) {
        jlist *l = self.u.l;
        if (NAME_IS(m, mn, "index")) {
            jv want = arg(a, 0, NULL, jv_none());
            for (size_t i = 0; i < l->n; i++)
                if (jv_equal(l->v[i], want)) return jv_int((int64_t)i);
            jx_fail(x, at, "value is not in list");
        }
        if (NAME_IS(m, mn, "count")) {
            jv want = arg(a, 0, NULL, jv_none());
            int64_t c = 0;
            for (size_t i = 0; i < l->n; i++) c += jv_equal(l->v[i], want);
            return jv_int(c);
        }
        if (NAME_IS(m, mn, "copy")) {
            jv c = jv_list_new(x, l->n);
            for (size_t i = 0; i < l->n; i++) jl_push(x, c.u.l, l->v[i]);
            return c;
        }
    }
    jx_fail(x, at, "%s.%.*s() is not supported", jv_type_name(self), (int)mn, m);
}

/* ---- loop ---------------------------------------------------------------------------- */
jv jx_loop_attr(jctx *x, jloop *l, const char *name, size_t n)
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
        jfunc *fn = jx_alloc(x, sizeof(jfunc));
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
    return jv_undef(jv_strdup(x, buf, strlen(buf)).u.s.p);
}

/* ---- globals ------------------------------------------------------------------------- */
enum { G_RANGE, G_NAMESPACE, G_DICT, G_RAISE, G_STRFTIME };

bool jx_global_lookup(const char *name, size_t n, jv *out, jctx *x)
{
    static const char *const names[] = {"range", "namespace", "dict", "raise_exception", "strftime_now"};
    for (int i = 0; i < 5; i++)
        if (strlen(names[i]) == n && memcmp(names[i], name, n) == 0) {
            jfunc *fn = jx_alloc(x, sizeof(jfunc));
            fn->kind = FN_GLOBAL;
            fn->id = i;
            fn->name = names[i];
            fn->name_len = n;
            jv v = {.t = JV_FUNC};
            v.u.fn = fn;
            *out = v;
            return true;
        }
    return false;
}

jv jx_global_call(jctx *x, const jnode *at, jfunc *fn, jargs *a)
{
    switch (fn->id) {
    case G_RANGE: {
        if (a->n_pos < 1 || a->n_pos > 3) jx_fail(x, at, "range expected 1 to 3 arguments, got %zu", a->n_pos);
        int64_t start = 0, stop, step = 1;
        if (a->n_pos == 1) stop = need_int(x, at, a->pos[0], "range argument");
        else {
            start = need_int(x, at, a->pos[0], "range argument");
            stop = need_int(x, at, a->pos[1], "range argument");
            if (a->n_pos == 3) step = need_int(x, at, a->pos[2], "range argument");
        }
        if (step == 0) jx_fail(x, at, "range() arg 3 must not be zero");
        jv out = jv_list_new(x, 0);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (out.u.l->n >= 100000) jx_fail(x, at, "range too big (more than 100000 items)");
            jl_push(x, out.u.l, jv_int(i));
            if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
        }
        return out;
    }
    case G_NAMESPACE: case G_DICT: {
        jv d = jv_dict_new(x, 4);
        d.u.d->is_ns = fn->id == G_NAMESPACE;
        if (a->n_pos > 1) jx_fail(x, at, "%s expected at most 1 positional argument", fn->name);
        if (a->n_pos == 1) {
            jv src = a->pos[0];
            if (src.t == JV_DICT && !src.u.d->is_ns) {
                for (size_t i = 0; i < src.u.d->n; i++) jd_set(x, d.u.d, src.u.d->k[i], src.u.d->v[i]);
            } else if (src.t == JV_LIST) {
                for (size_t i = 0; i < src.u.l->n; i++) {
                    jv p = src.u.l->v[i];
                    if (p.t != JV_LIST || p.u.l->n != 2) jx_fail(x, at, "dictionary update sequence element has wrong length");
                    jd_set(x, d.u.d, p.u.l->v[0], p.u.l->v[1]);
                }
            } else jx_fail(x, at, "'%s' object is not iterable", jv_type_name(src));
        }
        for (size_t k = 0; k < a->n_kw; k++) jd_set(x, d.u.d, jv_str(a->kw_name[k], a->kw_len[k]), a->kw_val[k]);
        return d;
    }
    case G_RAISE: {
        jv msg = arg(a, 0, "message", jv_str("", 0));
        jv s = jv_to_str(x, msg);
        jx_fail(x, at, "%.*s", (int)(s.u.s.n > 900 ? 900 : s.u.s.n), s.u.s.p);
    }
    case G_STRFTIME: {
        jv f = need_str(x, at, arg(a, 0, "format", jv_none()), "strftime_now format");
        char fmt[256], out[512];
        if (f.u.s.n >= sizeof fmt) jx_fail(x, at, "strftime_now format too long");
        memcpy(fmt, f.u.s.p, f.u.s.n);
        fmt[f.u.s.n] = 0;
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        size_t k = strftime(out, sizeof out, fmt, &tmv);
        return jv_strdup(x, out, k);
    }
    default: jx_fail(x, at, "unknown global");
    }
}

static const char *const FILTERS[] = {
    "safe", "e", "escape", "forceescape", "tojson", "length", "count", "default", "d", "string", "list",
    "items", "first", "last", "join", "reverse", "map", "select", "reject", "selectattr", "rejectattr",
    "unique", "sort", "dictsort", "min", "max", "sum", "attr", "batch", "int", "float", "abs", "round",
    "trim", "upper", "lower", "title", "capitalize", "indent", "replace", "wordcount", "center", "truncate",
    NULL};
static const char *const TESTS[] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "true", "false",
    "mapping", "iterable", "sequence", "callable", "escaped", "odd", "even", "divisibleby", "eq", "equalto",
    "ne", "lt", "lessthan", "le", "gt", "greaterthan", "ge", "sameas", "lower", "upper", "in", NULL};

bool jx_filter_known(const char *name, size_t n) { return in_names(FILTERS, name, n); }
bool jx_test_known(const char *name, size_t n) { return in_names(TESTS, name, n); }

/* ---- tests --------------------------------------------------------------------------- */
static bool is_iterable(jv v) { return v.t == JV_STR || v.t == JV_LIST || v.t == JV_UNDEF || v.t == JV_LOOP || (v.t == JV_DICT && !v.u.d->is_ns); }

bool jx_test(jctx *x, jframe *f, const jnode *at, const char *nm, size_t n, jv v, jargs *a)
{
    (void)f;
    jv o = arg(a, 0, NULL, jv_undef(NULL));
    if (NAME_IS(nm, n, "defined")) return v.t != JV_UNDEF;
    if (NAME_IS(nm, n, "undefined")) return v.t == JV_UNDEF;
    if (NAME_IS(nm, n, "none")) return v.t == JV_NONE;
    if (NAME_IS(nm, n, "string")) return v.t == JV_STR;
    if (NAME_IS(nm, n, "number")) return jv_is_num(v);
    if (NAME_IS(nm, n, "integer")) return v.t == JV_INT;
    if (NAME_IS(nm, n, "float")) return v.t == JV_FLOAT;
    if (NAME_IS(nm, n, "boolean")) return v.t == JV_BOOL;
    if (NAME_IS(nm, n, "true")) return v.t == JV_BOOL && v.u.b;
    if (NAME_IS(nm, n, "false")) return v.t == JV_BOOL && !v.u.b;
    if (NAME_IS(nm, n, "mapping")) return v.t == JV_DICT && !v.u.d->is_ns;
    if (NAME_IS(nm, n, "iterable")) return is_iterable(v);
    if (NAME_IS(nm, n, "sequence")) return v.t == JV_STR || v.t == JV_LIST || v.t == JV_UNDEF || (v.t == JV_DICT && !v.u.d->is_ns);
    if (NAME_IS(nm, n, "callable")) return v.t == JV_FUNC || v.t == JV_UNDEF;
    if (NAME_IS(nm, n, "escaped")) return false;
    if (NAME_IS(nm, n, "odd") || NAME_IS(nm, n, "even") || NAME_IS(nm, n, "divisibleby")) {
        /* value % 2 == 1, value % 2 == 0, value % num == 0 with Python's % */
        jv d = nm[0] == 'd' ? o : jv_int(2);
        if (v.t == JV_UNDEF) jx_fail(x, at, "%s", v.u.s.p ? v.u.s.p : "undefined value");
        if (d.t == JV_UNDEF) jx_fail(x, at, "divisibleby() missing 1 required positional argument: 'num'");
        if (v.t == JV_STR) jx_fail(x, at, "not all arguments converted during string formatting");
        if (!jv_is_num(v) || !jv_is_num(d))
            jx_fail(x, at, "unsupported operand type(s) for %%: '%s' and '%s'", jv_type_name(v), jv_type_name(d));
        double dv = jv_num(d);
        if (dv == 0) jx_fail(x, at, "integer division or modulo by zero");
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
        if (nm[0] == 'o') return m == 1;
        return m == 0;
    }
    if (NAME_IS(nm, n, "eq") || NAME_IS(nm, n, "equalto") || NAME_IS(nm, n, "==")) return jv_equal(v, o);
    if (NAME_IS(nm, n, "ne") || NAME_IS(nm, n, "!=")) return !jv_equal(v, o);
    if (NAME_IS(nm, n, "lt") || NAME_IS(nm, n, "lessthan")) return jv_compare(x, at, v, o) < 0;
    if (NAME_IS(nm, n, "le")) return jv_compare(x, at, v, o) <= 0;
    if (NAME_IS(nm, n, "gt") || NAME_IS(nm, n, "greaterthan")) return jv_compare(x, at, v, o) > 0;
    if (NAME_IS(nm, n, "ge")) return jv_compare(x, at, v, o) >= 0;
    if (NAME_IS(nm, n, "sameas")) {
        if (v.t != o.t) return false;
        if (v.t == JV_LIST) return v.u.l == o.u.l;
        if (v.t == JV_DICT) return v.u.d == o.u.d;
        return jv_equal(v, o);
    }
    if (NAME_IS(nm, n, "lower") || NAME_IS(nm, n, "upper")) {
        jv s = jv_to_str(x, v);
        return case_state(s) == (nm[0] == 'l' ? 2 : 1);
    }
    if (NAME_IS(nm, n, "in")) {
        if (o.t == JV_STR) return v.t == JV_STR && memmem(o.u.s.p, o.u.s.n, v.u.s.p, v.u.s.n) != NULL;
        if (o.t == JV_LIST) {
            for (size_t i = 0; i < o.u.l->n; i++)
                if (jv_equal(o.u.l->v[i], v)) return true;
            return false;
        }
        if (o.t == JV_DICT) return jd_get(o.u.d, v) != NULL;
        if (o.t == JV_UNDEF) return false;
        jx_fail(x, at, "argument of type '%s' is not iterable", jv_type_name(o));
    }
    jx_fail(x, at, "No test named '%.*s'.", (int)(n > 60 ? 60 : n), nm);
}

/* ---- filters --------------------------------------------------------------------------- */
static jv seq_items(jctx *x, const jnode *at, jv v)
{
    switch (v.t) {
    case JV_LIST: return v;
    case JV_UNDEF: return jv_list_new(x, 0);
    case JV_DICT: {
        if (v.u.d->is_ns) break;
        jv l = jv_list_new(x, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) jl_push(x, l.u.l, v.u.d->k[i]);
        return l;
    }
    case JV_STR: {
        jv l = jv_list_new(x, v.u.s.n);
        int32_t cp;
        for (size_t i = 0; i < v.u.s.n;) {
            size_t j = ju_next(v.u.s.p, v.u.s.n, i, &cp);
            jl_push(x, l.u.l, jv_str(v.u.s.p + i, j - i));
            i = j;
        }
        return l;
    }
    default: break;
    }
    jx_fail(x, at, "'%s' object is not iterable", jv_type_name(v));
}

/* jinja2's make_attrgetter: dotted path, integer parts index. */
static jv attr_path(jctx *x, const jnode *at, jv item, jv path)
{
    if (path.t == JV_INT) return jx_getitem(x, at, item, path);
    need_str(x, at, path, "attribute");
    const char *p = path.u.s.p, *end = p + path.u.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        if (!dot) dot = end;
        size_t n = (size_t)(dot - p);
        bool digits = n > 0;
        for (size_t i = 0; i < n; i++) digits &= p[i] >= '0' && p[i] <= '9';
        jv key = digits ? jv_int(strtoll(p, NULL, 10)) : jv_str(p, n);
        item = jx_getitem(x, at, item, key);
        p = dot + 1;
    }
    return item;
}

static jv lower_key(jctx *x, jv v, bool case_sensitive)
{
    return (!case_sensitive && v.t == JV_STR) ? str_map_case(x, v, 0) : v;
}

/* Stable merge sort of items by keys. */
static void sort_by(jctx *x, const jnode *at, jv *items, jv *keys, size_t n, bool reverse)
{
    if (n < 2) return;
    jv *ti = jx_alloc(x, n * sizeof(jv)), *tk = jx_alloc(x, n * sizeof(jv));
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int c = jv_compare(x, at, keys[j], keys[i]);
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

static jv f_tojson(jctx *x, const jnode *at, jv v, jargs *a)
{
    /* HF: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
    bool ensure_ascii = jv_truthy(arg(a, 0, "ensure_ascii", jv_bool(false)));
    jv ind = arg(a, 1, "indent", jv_none());
    jv seps = arg(a, 2, "separators", jv_none());
    bool sort_keys = jv_truthy(arg(a, 3, "sort_keys", jv_bool(false)));
    int indent = -1;
    if (ind.t == JV_INT || ind.t == JV_BOOL) indent = (int)(ind.t == JV_BOOL ? ind.u.b : (ind.u.i < 0 ? 0 : ind.u.i > 64 ? 64 : ind.u.i));
    else if (ind.t != JV_NONE) jx_fail(x, at, "tojson: indent must be an integer or None");
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
    } else if (seps.t != JV_NONE) jx_fail(x, at, "tojson: separators must be a pair of strings");
    if (v.t == JV_UNDEF) jx_fail(x, at, "Object of type Undefined is not JSON serializable");
    cmf__buf b = {0};
    jv_json_into(x, at, &b, v, indent, item_sep, key_sep, sort_keys, ensure_ascii, 0);
    return jx_buf_take(x, &b);
}

static jv f_indent(jctx *x, const jnode *at, jv s, jargs *a)
{
    jv w = arg(a, 0, "width", jv_int(4));
    bool first = jv_truthy(arg(a, 1, "first", jv_bool(false)));
    bool blank = jv_truthy(arg(a, 2, "blank", jv_bool(false)));
    cmf__buf ind = {0};
    if (w.t == JV_STR) jx_buf_put(x, &ind, w.u.s.p, w.u.s.n);
    else {
        int64_t k = need_int(x, at, w, "indent width");
        for (int64_t i = 0; i < k && i < 4096; i++) jx_buf_put(x, &ind, " ", 1);
    }
    jv indention = jx_buf_take(x, &ind);
    /* s += "\n"; lines = s.splitlines() */
    cmf__buf t = {0};
    jx_buf_put(x, &t, s.u.s.p, s.u.s.n);
    jx_buf_put(x, &t, "\n", 1);
    jv lines = py_splitlines(x, jx_buf_take(x, &t), false);
    cmf__buf b = {0};
    if (first) jx_buf_put(x, &b, indention.u.s.p, indention.u.s.n);
    for (size_t i = 0; i < lines.u.l->n; i++) {
        jv ln = lines.u.l->v[i];
        if (i) {
            jx_buf_put(x, &b, "\n", 1);
            if (blank || ln.u.s.n) jx_buf_put(x, &b, indention.u.s.p, indention.u.s.n);
        }
        jx_buf_put(x, &b, ln.u.s.p, ln.u.s.n);
    }
    return jx_buf_take(x, &b);
}

static jv do_round(jctx *x, const jnode *at, jv v, int64_t prec, jv method)
{
    if (!jv_is_num(v)) jx_fail(x, at, "round: value must be a number");
    double d = jv_num(v);
    const char *m = method.t == JV_STR ? method.u.s.p : "common";
    size_t mn = method.t == JV_STR ? method.u.s.n : 6;
    double scale = pow(10.0, (double)prec);
    if (NAME_IS(m, mn, "floor")) return jv_float(floor(d * scale) / scale);
    if (NAME_IS(m, mn, "ceil")) return jv_float(ceil(d * scale) / scale);
    if (!NAME_IS(m, mn, "common")) jx_fail(x, at, "method must be common, ceil or floor");
    if (v.t != JV_FLOAT) return jv_int(v.t == JV_BOOL ? v.u.b : v.u.i);
    if (prec < 0 || prec > 300) return jv_float(round(d * scale) / scale);
    /* Python round(): correctly rounded, ties to even — printf rounds the exact binary value */
    char buf[512];
    snprintf(buf, sizeof buf, "%.*f", (int)prec, d);
    return jv_float(strtod(buf, NULL));
}

static jv select_like(jctx *x, jframe *f, const jnode *at, jv v, jargs *a, bool want, bool by_attr)
{
    jv items = jv_truthy(v) ? seq_items(x, at, v) : jv_list_new(x, 0);
    jv out = jv_list_new(x, items.u.l->n);
    out.flag = JVF_GEN;
    size_t first_arg = by_attr ? 1 : 0;
    jv attr = by_attr ? arg(a, 0, NULL, jv_none()) : jv_none();
    bool has_test = a->n_pos > first_arg;
    jargs rest = {has_test ? a->pos + first_arg + 1 : NULL, has_test ? a->n_pos - first_arg - 1 : 0,
                  a->kw_name, a->kw_len, a->kw_val, a->n_kw};
    for (size_t i = 0; i < items.u.l->n; i++) {
        jv item = items.u.l->v[i];
        jv probe = by_attr ? attr_path(x, at, item, attr) : item;
        bool ok;
        if (has_test) {
            jv tn = need_str(x, at, a->pos[first_arg], "test name");
            ok = jx_test(x, f, at, tn.u.s.p, tn.u.s.n, probe, &rest);
        } else ok = jv_truthy(probe);
        if (ok == want) jl_push(x, out.u.l, item);
    }
    return out;
}

jv jx_filter(jctx *x, jframe *f, const jnode *at, const char *nm, size_t n, jv v, jargs *a)
{
    if (NAME_IS(nm, n, "safe")) {
        jv r = jv_to_str(x, v);
        r.flag |= JVF_SAFE;
        return r;
    }
    if (NAME_IS(nm, n, "e") || NAME_IS(nm, n, "escape")) return jv_html_escape(x, jv_to_str(x, v));
    if (NAME_IS(nm, n, "forceescape")) {
        jv r = jv_to_str(x, v);
        r.flag &= (uint8_t)~JVF_SAFE;
        return jv_html_escape(x, r);
    }
    if (NAME_IS(nm, n, "tojson")) return f_tojson(x, at, v, a);
    if (NAME_IS(nm, n, "length") || NAME_IS(nm, n, "count")) {
        switch (v.t) {
        case JV_STR: return jv_int((int64_t)ju_len(v.u.s.p, v.u.s.n));
        case JV_LIST: if (!(v.flag & JVF_GEN)) return jv_int((int64_t)v.u.l->n); break;
        case JV_DICT: if (!v.u.d->is_ns) return jv_int((int64_t)v.u.d->n); break;
        case JV_UNDEF: return jv_int(0);
        default: break;
        }
        jx_fail(x, at, "object of type '%s' has no len()", jv_type_name(v));
    }
    if (NAME_IS(nm, n, "default") || NAME_IS(nm, n, "d")) {
        jv def = arg(a, 0, "default_value", jv_str("", 0));
        bool boolean = jv_truthy(arg(a, 1, "boolean", jv_bool(false)));
        if (v.t == JV_UNDEF || (boolean && !jv_truthy(v))) return def;
        return v;
    }
    if (NAME_IS(nm, n, "string")) return jv_to_str(x, v);
    if (NAME_IS(nm, n, "list")) {
        jv items = seq_items(x, at, v);
        if (items.t == JV_LIST && items.u.l == v.u.l && v.t == JV_LIST) {
            jv c = jv_list_new(x, v.u.l->n);
            for (size_t i = 0; i < v.u.l->n; i++) jl_push(x, c.u.l, v.u.l->v[i]);
            return c;
        }
        return items;
    }
    if (NAME_IS(nm, n, "items")) {
        if (v.t == JV_UNDEF) return jv_list_new(x, 0);
        if (v.t != JV_DICT || v.u.d->is_ns) jx_fail(x, at, "Can only get item pairs from a mapping.");
        jv out = jv_list_new(x, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) jl_push(x, out.u.l, pair(x, v.u.d->k[i], v.u.d->v[i]));
        out.flag = JVF_GEN;
        return out;
    }
    if (NAME_IS(nm, n, "first") || NAME_IS(nm, n, "last")) {
        if (nm[0] == 'l' && v.t == JV_LIST && (v.flag & JVF_GEN)) jx_fail(x, at, "'generator' object is not reversible");
        jv items = seq_items(x, at, v);
        if (!items.u.l->n) return jv_undef(nm[0] == 'f' ? "No first item, sequence was empty." : "No last item, sequence was empty.");
        return items.u.l->v[nm[0] == 'f' ? 0 : items.u.l->n - 1];
    }
    if (NAME_IS(nm, n, "join")) {
        jv sep = arg(a, 0, "d", jv_str("", 0));
        jv attr = arg(a, 1, "attribute", jv_none());
        jv items = seq_items(x, at, v);
        jv sp = jv_to_str(x, sep);
        cmf__buf b = {0};
        for (size_t i = 0; i < items.u.l->n; i++) {
            if (i) jx_buf_put(x, &b, sp.u.s.p, sp.u.s.n);
            jv it = items.u.l->v[i];
            if (attr.t != JV_NONE) it = attr_path(x, at, it, attr);
            jv_str_into(x, &b, it);
        }
        return jx_buf_take(x, &b);
    }
    if (NAME_IS(nm, n, "reverse")) {
        if (v.t == JV_STR) {
            jv items = seq_items(x, at, v);
            cmf__buf b = {0};
            for (size_t i = items.u.l->n; i-- > 0;) jx_buf_put(x, &b, items.u.l->v[i].u.s.p, items.u.l->v[i].u.s.n);
            return jx_buf_take(x, &b);
        }
        jv items = seq_items(x, at, v);
        jv out = jv_list_new(x, items.u.l->n);
        for (size_t i = items.u.l->n; i-- > 0;) jl_push(x, out.u.l, items.u.l->v[i]);
        out.flag = JVF_GEN; /* a list_reverseiterator */
        return out;
    }
    if (NAME_IS(nm, n, "map")) {
        /* generators, and `if value:` first: a falsy input maps to nothing */
        jv items = jv_truthy(v) ? seq_items(x, at, v) : jv_list_new(x, 0);
        jv out = jv_list_new(x, items.u.l->n);
        out.flag = JVF_GEN;
        jv attr = arg(a, 99, "attribute", jv_undef(NULL));
        if (attr.t != JV_UNDEF) {
            jv def = arg(a, 99, "default", jv_undef(NULL));
            for (size_t i = 0; i < items.u.l->n; i++) {
                jv r = attr_path(x, at, items.u.l->v[i], attr);
                if (r.t == JV_UNDEF && def.t != JV_UNDEF) r = def;
                jl_push(x, out.u.l, r);
            }
            return out;
        }
        if (!a->n_pos) jx_fail(x, at, "map requires a filter argument");
        jv fname = need_str(x, at, a->pos[0], "filter name");
        jargs rest = {a->pos + 1, a->n_pos - 1, a->kw_name, a->kw_len, a->kw_val, a->n_kw};
        for (size_t i = 0; i < items.u.l->n; i++)
            jl_push(x, out.u.l, jx_filter(x, f, at, fname.u.s.p, fname.u.s.n, items.u.l->v[i], &rest));
        return out;
    }
    if (NAME_IS(nm, n, "select")) return select_like(x, f, at, v, a, true, false);
    if (NAME_IS(nm, n, "reject")) return select_like(x, f, at, v, a, false, false);
    if (NAME_IS(nm, n, "selectattr")) return select_like(x, f, at, v, a, true, true);
    if (NAME_IS(nm, n, "rejectattr")) return select_like(x, f, at, v, a, false, true);
    if (NAME_IS(nm, n, "unique")) {
        bool cs = jv_truthy(arg(a, 0, "case_sensitive", jv_bool(false)));
        jv attr = arg(a, 1, "attribute", jv_none());
        jv items = seq_items(x, at, v);
        jv out = jv_list_new(x, items.u.l->n), seen = jv_list_new(x, items.u.l->n);
        out.flag = JVF_GEN;
        for (size_t i = 0; i < items.u.l->n; i++) {
            jv it = items.u.l->v[i];
            jv key = lower_key(x, attr.t != JV_NONE ? attr_path(x, at, it, attr) : it, cs);
            if (key.t == JV_LIST || key.t == JV_DICT) jx_fail(x, at, "unhashable type: '%s'", jv_type_name(key));
            bool dup = false;
            for (size_t k = 0; k < seen.u.l->n && !dup; k++) dup = jv_equal(seen.u.l->v[k], key);
            if (!dup) {
                jl_push(x, seen.u.l, key);
                jl_push(x, out.u.l, it);
            }
        }
        return out;
    }
    if (NAME_IS(nm, n, "sort") || NAME_IS(nm, n, "dictsort") || NAME_IS(nm, n, "min") || NAME_IS(nm, n, "max")) {
        bool dictsort = nm[0] == 'd', minmax = nm[0] == 'm';
        bool reverse = false, cs;
        jv attr = jv_none();
        jv items;
        size_t key_part = 0;
        if (dictsort) {
            cs = jv_truthy(arg(a, 0, "case_sensitive", jv_bool(false)));
            jv by = arg(a, 1, "by", jv_str("key", 3));
            reverse = jv_truthy(arg(a, 2, "reverse", jv_bool(false)));
            if (v.t != JV_DICT || v.u.d->is_ns) jx_fail(x, at, "dictsort: value must be a mapping");
            items = jv_list_new(x, v.u.d->n);
            for (size_t i = 0; i < v.u.d->n; i++) jl_push(x, items.u.l, pair(x, v.u.d->k[i], v.u.d->v[i]));
            if (by.t == JV_STR && NAME_IS(by.u.s.p, by.u.s.n, "value")) key_part = 1;
            else if (!(by.t == JV_STR && NAME_IS(by.u.s.p, by.u.s.n, "key")))
                jx_fail(x, at, "You can only sort by either \"key\" or \"value\"");
        } else if (minmax) {
            cs = jv_truthy(arg(a, 0, "case_sensitive", jv_bool(false)));
            attr = arg(a, 1, "attribute", jv_none());
            jv src = seq_items(x, at, v);
            items = jv_list_new(x, src.u.l->n);
            for (size_t i = 0; i < src.u.l->n; i++) jl_push(x, items.u.l, src.u.l->v[i]);
        } else {
            reverse = jv_truthy(arg(a, 0, "reverse", jv_bool(false)));
            cs = jv_truthy(arg(a, 1, "case_sensitive", jv_bool(false)));
            attr = arg(a, 2, "attribute", jv_none());
            jv src = seq_items(x, at, v);
            items = jv_list_new(x, src.u.l->n);
            for (size_t i = 0; i < src.u.l->n; i++) jl_push(x, items.u.l, src.u.l->v[i]);
        }
        size_t cnt = items.u.l->n;
        jv *keys = jx_alloc(x, (cnt ? cnt : 1) * sizeof(jv));
        for (size_t i = 0; i < cnt; i++) {
            jv it = items.u.l->v[i];
            jv k = dictsort ? it.u.l->v[key_part] : attr.t != JV_NONE ? attr_path(x, at, it, attr) : it;
            keys[i] = lower_key(x, k, cs);
        }
        if (minmax) {
            if (!cnt) return jv_undef("No aggregated item, sequence was empty.");
            size_t best = 0;
            for (size_t i = 1; i < cnt; i++) {
                int c = jv_compare(x, at, keys[i], keys[best]);
                if (nm[1] == 'i' ? c < 0 : c > 0) best = i;
            }
            return items.u.l->v[best];
        }
        sort_by(x, at, items.u.l->v, keys, cnt, reverse);
        return items;
    }
    if (NAME_IS(nm, n, "sum")) {
        jv attr = arg(a, 0, "attribute", jv_none());
        jv acc = arg(a, 1, "start", jv_int(0));
        jv items = seq_items(x, at, v);
        for (size_t i = 0; i < items.u.l->n; i++) {
            jv it = items.u.l->v[i];
            if (attr.t != JV_NONE) it = attr_path(x, at, it, attr);
            if (!jv_is_num(it) || !jv_is_num(acc)) jx_fail(x, at, "sum: unsupported operand types");
            if (acc.t == JV_FLOAT || it.t == JV_FLOAT) acc = jv_float(jv_num(acc) + jv_num(it));
            else {
                int64_t r;
                if (__builtin_add_overflow((int64_t)jv_num(acc), (int64_t)jv_num(it), &r)) jx_fail(x, at, "integer overflow");
                acc = jv_int(r);
            }
        }
        return acc;
    }
    if (NAME_IS(nm, n, "attr")) {
        jv name = need_str(x, at, arg(a, 0, "name", jv_none()), "attribute name");
        if (v.t == JV_DICT) {
            jv m = jx_method_lookup(x, v, name.u.s.p, name.u.s.n);
            return m.t == JV_FUNC ? m : jv_undef(NULL);
        }
        return jx_getattr(x, at, v, name.u.s.p, name.u.s.n);
    }
    if (NAME_IS(nm, n, "batch")) {
        int64_t cnt = need_int(x, at, arg(a, 0, "linecount", jv_none()), "linecount");
        if (cnt <= 0) jx_fail(x, at, "batch: linecount must be positive");
        jv fill = arg(a, 1, "fill_with", jv_none());
        bool has_fill = has_arg(a, 1, "fill_with") && fill.t != JV_NONE;
        jv items = seq_items(x, at, v);
        jv out = jv_list_new(x, 4);
        out.flag = JVF_GEN;
        jv cur = jv_list_new(x, (size_t)(cnt < 64 ? cnt : 64));
        for (size_t i = 0; i < items.u.l->n; i++) {
            if ((int64_t)cur.u.l->n == cnt) {
                jl_push(x, out.u.l, cur);
                cur = jv_list_new(x, 4);
            }
            jl_push(x, cur.u.l, items.u.l->v[i]);
        }
        if (cur.u.l->n) {
            if (has_fill)
                while ((int64_t)cur.u.l->n < cnt) jl_push(x, cur.u.l, fill);
            jl_push(x, out.u.l, cur);
        }
        return out;
    }
    if (NAME_IS(nm, n, "int")) {
        jv def = arg(a, 0, "default", jv_int(0));
        if (v.t == JV_INT) return v;
        if (v.t == JV_BOOL) return jv_int(v.u.b);
        if (v.t == JV_FLOAT) return isfinite(v.u.f) ? jv_int((int64_t)v.u.f) : def;
        if (v.t == JV_STR) {
            char buf[64];
            jv t = py_strip(x, at, v, jv_none(), 3);
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
    if (NAME_IS(nm, n, "float")) {
        jv def = arg(a, 0, "default", jv_float(0.0));
        if (jv_is_num(v)) return jv_float(jv_num(v));
        if (v.t == JV_STR) {
            char buf[64];
            jv t = py_strip(x, at, v, jv_none(), 3);
            if (t.u.s.n == 0 || t.u.s.n >= sizeof buf) return def;
            memcpy(buf, t.u.s.p, t.u.s.n);
            buf[t.u.s.n] = 0;
            char *end;
            double d = strtod(buf, &end);
            if (*end == 0) return jv_float(d);
        }
        return def;
    }
    if (NAME_IS(nm, n, "abs")) {
        if (v.t == JV_INT) {
            if (v.u.i == INT64_MIN) jx_fail(x, at, "integer overflow");
            return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        }
        if (v.t == JV_BOOL) return jv_int(v.u.b);
        if (v.t == JV_FLOAT) return jv_float(fabs(v.u.f));
        jx_fail(x, at, "bad operand type for abs(): '%s'", jv_type_name(v));
    }
    if (NAME_IS(nm, n, "truncate") && v.t != JV_STR) {
        /* jinja2 measures len(value) first: short sequences come back as they are */
        int64_t length = need_int(x, at, arg(a, 0, "length", jv_int(255)), "length");
        jv lw = arg(a, 3, "leeway", jv_none());
        int64_t leeway = lw.t == JV_NONE ? 5 : need_int(x, at, lw, "leeway");
        int64_t len = v.t == JV_LIST && !(v.flag & JVF_GEN) ? (int64_t)v.u.l->n
                      : v.t == JV_DICT && !v.u.d->is_ns ? (int64_t)v.u.d->n : v.t == JV_UNDEF ? 0 : -1;
        if (len < 0) jx_fail(x, at, "object of type '%s' has no len()", jv_type_name(v));
        if (len <= length + leeway) return v;
        jx_fail(x, at, "truncate: cannot cut a %s", jv_type_name(v));
    }
    if (NAME_IS(nm, n, "round"))
        return do_round(x, at, v, need_int(x, at, arg(a, 0, "precision", jv_int(0)), "precision"),
                        arg(a, 1, "method", jv_str("common", 6)));
    /* the rest work on str(value) */
    if (NAME_IS(nm, n, "indent") && v.t != JV_STR) {
        if (v.t == JV_UNDEF) jx_fail(x, at, "%s", v.u.s.p ? v.u.s.p : "undefined value");
        jx_fail(x, at, "unsupported operand type(s) for +=: '%s' and 'str'", jv_type_name(v));
    }
    jv s = jv_to_str(x, v);
    jv r;
    uint8_t safe = s.flag & JVF_SAFE; /* Markup methods return Markup */
    if (NAME_IS(nm, n, "trim")) r = py_strip(x, at, s, arg(a, 0, "chars", jv_none()), 3);
    else if (NAME_IS(nm, n, "upper")) r = str_map_case(x, s, 1);
    else if (NAME_IS(nm, n, "lower")) r = str_map_case(x, s, 0);
    else if (NAME_IS(nm, n, "title")) r = jinja_title(x, s);
    else if (NAME_IS(nm, n, "capitalize")) r = py_capitalize(x, s);
    else if (NAME_IS(nm, n, "indent")) r = f_indent(x, at, s, a);
    else goto more;
    r.flag |= safe;
    return r;
more:
    if (NAME_IS(nm, n, "replace")) {
        jv old = jv_to_str(x, arg(a, 0, "old", jv_str("", 0)));
        jv nw = jv_to_str(x, arg(a, 1, "new", jv_str("", 0)));
        jv cnt = arg(a, 2, "count", jv_none());
        return py_replace(x, s, old, nw, cnt.t == JV_NONE ? -1 : need_int(x, at, cnt, "count"));
    }
    if (NAME_IS(nm, n, "wordcount")) {
        int64_t words = 0;
        bool in_word = false;
        int32_t cp;
        for (size_t i = 0; i < s.u.s.n;) {
            i = ju_next(s.u.s.p, s.u.s.n, i, &cp);
            bool w = cp == '_' || cp_is_alpha(cp) || cp_is_digit(cp);
            if (w && !in_word) words++;
            in_word = w;
        }
        return jv_int(words);
    }
    if (NAME_IS(nm, n, "center")) {
        int64_t width = need_int(x, at, arg(a, 0, "width", jv_int(80)), "width");
        int64_t len = (int64_t)ju_len(s.u.s.p, s.u.s.n);
        if (width <= len) return s;
        if (width > 1 << 20) jx_fail(x, at, "center width too large");
        int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
        cmf__buf b = {0};
        for (int64_t i = 0; i < left; i++) jx_buf_put(x, &b, " ", 1);
        jx_buf_put(x, &b, s.u.s.p, s.u.s.n);
        for (int64_t i = 0; i < marg - left; i++) jx_buf_put(x, &b, " ", 1);
        return jx_buf_take(x, &b);
    }
    if (NAME_IS(nm, n, "truncate")) {
        int64_t length = need_int(x, at, arg(a, 0, "length", jv_int(255)), "length");
        bool killwords = jv_truthy(arg(a, 1, "killwords", jv_bool(false)));
        jv end = jv_to_str(x, arg(a, 2, "end", jv_str("...", 3)));
        jv lw = arg(a, 3, "leeway", jv_none());
        int64_t leeway = lw.t == JV_NONE ? 5 : need_int(x, at, lw, "leeway");
        int64_t len = (int64_t)ju_len(s.u.s.p, s.u.s.n), endlen = (int64_t)ju_len(end.u.s.p, end.u.s.n);
        if (length < endlen) jx_fail(x, at, "expected length >= %lld, got %lld", (long long)endlen, (long long)length);
        if (leeway < 0) jx_fail(x, at, "expected leeway >= 0, got %lld", (long long)leeway);
        if (len <= length + leeway) return s;
        size_t cut = ju_offset(s.u.s.p, s.u.s.n, (size_t)(length - endlen));
        jv head = jv_str(s.u.s.p, cut);
        if (!killwords) {
            jv parts = py_split(x, at, head, jv_str(" ", 1), 1, true);
            head = parts.u.l->v[0];
        }
        cmf__buf b = {0};
        jx_buf_put(x, &b, head.u.s.p, head.u.s.n);
        jx_buf_put(x, &b, end.u.s.p, end.u.s.n);
        return jx_buf_take(x, &b);
    }
    jx_fail(x, at, "No filter named '%.*s'.", (int)(n > 60 ? 60 : n), nm);
}
