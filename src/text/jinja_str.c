/* jinja_str.c — Python's str semantics over UTF-8 for templates: the str
 * methods a sandboxed jinja2 lets through (one table of {name, function};
 * names Python has but cmf does not implement are listed with no function
 * and fail when called), and the case, strip, split and replace operations
 * the filters share. Invalid UTF-8 bytes count as one code point each. */
#include "text/jinja.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

jv cmf__js_case(jctx *x, jv s, int mode /* 0 lower 1 upper */)
{
    cmf__buf b = {0};
    int32_t cp;
    for (size_t i = 0; i < s.u.s.n;) {
        size_t j = cmf__ju_next(s.u.s.p, s.u.s.n, i, &cp);
        if (j - i == 1 && (unsigned char)s.u.s.p[i] >= 0x80) cmf__jx_buf_put(x, &b, s.u.s.p + i, 1);
        else cmf__ju_put(x, &b, mode ? utf8proc_toupper(cp) : utf8proc_tolower(cp));
        i = j;
    }
    return cmf__jx_buf_take(x, &b);
}

bool cmf__js_is_alpha(int32_t cp)
{
    utf8proc_category_t c = utf8proc_category(cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT ||
           c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_LO;
}
bool cmf__js_is_digit(int32_t cp) { return utf8proc_category(cp) == UTF8PROC_CATEGORY_ND; }
static bool cp_cased(int32_t cp) { return utf8proc_tolower(cp) != cp || utf8proc_toupper(cp) != cp; }

/* Python str.title(): uppercase after an uncased char, lowercase after a cased one. */
static jv py_title(jctx *x, jv s)
{
    cmf__buf b = {0};
    bool prev_cased = false;
    int32_t cp;
    for (size_t i = 0; i < s.u.s.n;) {
        size_t j = cmf__ju_next(s.u.s.p, s.u.s.n, i, &cp);
        int32_t o = prev_cased ? utf8proc_tolower(cp) : utf8proc_totitle(cp);
        cmf__ju_put(x, &b, o);
        prev_cased = cp_cased(cp);
        i = j;
    }
    return cmf__jx_buf_take(x, &b);
}

jv cmf__js_capitalize(jctx *x, jv s)
{
    cmf__buf b = {0};
    int32_t cp;
    for (size_t i = 0; i < s.u.s.n;) {
        size_t j = cmf__ju_next(s.u.s.p, s.u.s.n, i, &cp);
        cmf__ju_put(x, &b, i == 0 ? utf8proc_totitle(cp) : utf8proc_tolower(cp));
        i = j;
    }
    return cmf__jx_buf_take(x, &b);
}

/* jinja2's title filter: capitalize each piece split at [-\s({\[<]+ */
jv cmf__js_title_words(jctx *x, jv s)
{
    cmf__buf b = {0};
    bool at_start = true;
    int32_t cp;
    for (size_t i = 0; i < s.u.s.n;) {
        size_t j = cmf__ju_next(s.u.s.p, s.u.s.n, i, &cp);
        bool sep = cp == '-' || cmf__ju_isspace(cp) || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        if (sep) {
            cmf__ju_put(x, &b, cp);
            at_start = true;
        } else {
            cmf__ju_put(x, &b, at_start ? utf8proc_toupper(cp) : utf8proc_tolower(cp));
            at_start = false;
        }
        i = j;
    }
    return cmf__jx_buf_take(x, &b);
}

static bool in_chars(jv chars, int32_t cp)
{
    int32_t c;
    for (size_t i = 0; i < chars.u.s.n;) {
        i = cmf__ju_next(chars.u.s.p, chars.u.s.n, i, &c);
        if (c == cp) return true;
    }
    return false;
}

/* strip: which bit 1 left, 2 right; chars JV_NONE = whitespace */
jv cmf__js_strip(jctx *x, const jnode *at, jv s, jv chars, int which)
{
    bool ws = chars.t == JV_NONE || chars.t == JV_UNDEF;
    if (!ws) cmf__jx_need_str(x, at, chars, "strip arg");
    size_t a = 0, b = s.u.s.n;
    int32_t cp;
    if (which & 1)
        while (a < b) {
            size_t j = cmf__ju_next(s.u.s.p, b, a, &cp);
            if (ws ? !cmf__ju_isspace(cp) : !in_chars(chars, cp)) break;
            a = j;
        }
    if (which & 2)
        while (b > a) {
            size_t k = b - 1;
            while (k > a && ((unsigned char)s.u.s.p[k] & 0xc0) == 0x80) k--;
            cmf__ju_next(s.u.s.p, b, k, &cp);
            if (ws ? !cmf__ju_isspace(cp) : !in_chars(chars, cp)) break;
            b = k;
        }
    return jv_str(s.u.s.p + a, b - a);
}

jv cmf__js_replace(jctx *x, jv s, jv old, jv new_, int64_t count)
{
    cmf__buf b = {0};
    if (old.u.s.n == 0) {
        /* Python inserts `new` between every character and at both ends */
        int32_t cp;
        int64_t done = 0;
        size_t i = 0;
        for (;;) {
            if (count >= 0 && done >= count) break;
            cmf__jx_buf_put(x, &b, new_.u.s.p, new_.u.s.n);
            done++;
            if (i >= s.u.s.n) break;
            size_t j = cmf__ju_next(s.u.s.p, s.u.s.n, i, &cp);
            cmf__jx_buf_put(x, &b, s.u.s.p + i, j - i);
            i = j;
        }
        cmf__jx_buf_put(x, &b, s.u.s.p + i, s.u.s.n - i);
        return cmf__jx_buf_take(x, &b);
    }
    size_t i = 0;
    int64_t done = 0;
    while (i < s.u.s.n) {
        const char *hit = (count < 0 || done < count) ? memmem(s.u.s.p + i, s.u.s.n - i, old.u.s.p, old.u.s.n) : NULL;
        if (!hit) break;
        size_t k = (size_t)(hit - s.u.s.p);
        cmf__jx_buf_put(x, &b, s.u.s.p + i, k - i);
        cmf__jx_buf_put(x, &b, new_.u.s.p, new_.u.s.n);
        i = k + old.u.s.n;
        done++;
    }
    cmf__jx_buf_put(x, &b, s.u.s.p + i, s.u.s.n - i);
    return cmf__jx_buf_take(x, &b);
}

jv cmf__js_split(jctx *x, const jnode *at, jv s, jv sep, int64_t maxsplit, bool right)
{
    jv out = cmf__jv_list_new(x, 4);
    if (sep.t == JV_NONE || sep.t == JV_UNDEF) {
        /* runs of whitespace; no empty strings */
        size_t n = s.u.s.n;
        jv parts = cmf__jv_list_new(x, 4);
        size_t i = 0;
        int32_t cp;
        while (i < n) {
            while (i < n) {
                size_t j = cmf__ju_next(s.u.s.p, n, i, &cp);
                if (!cmf__ju_isspace(cp)) break;
                i = j;
            }
            if (i >= n) break;
            size_t a = i;
            while (i < n) {
                size_t j = cmf__ju_next(s.u.s.p, n, i, &cp);
                if (cmf__ju_isspace(cp)) break;
                i = j;
            }
            cmf__jl_push(x, parts.u.l, jv_str(s.u.s.p + a, i - a));
        }
        if (maxsplit < 0 || (size_t)maxsplit >= parts.u.l->n) return parts;
        /* limited: rejoin the tail with its original spacing */
        if (!right) {
            for (int64_t k = 0; k < maxsplit; k++) cmf__jl_push(x, out.u.l, parts.u.l->v[k]);
            /* the rest runs to the end, trailing whitespace kept */
            const char *p = parts.u.l->v[maxsplit].u.s.p;
            cmf__jl_push(x, out.u.l, jv_str(p, (size_t)(s.u.s.p + n - p)));
            return out;
        }
        size_t keep = parts.u.l->n - (size_t)maxsplit;
        jv last_head = parts.u.l->v[keep - 1];
        /* the head starts at the string's start, leading whitespace kept */
        cmf__jl_push(x, out.u.l, jv_str(s.u.s.p, (size_t)(last_head.u.s.p + last_head.u.s.n - s.u.s.p)));
        for (size_t k = keep; k < parts.u.l->n; k++) cmf__jl_push(x, out.u.l, parts.u.l->v[k]);
        return out;
    }
    cmf__jx_need_str(x, at, sep, "separator");
    if (sep.u.s.n == 0) cmf__jx_fail(x, at, "empty separator");
    if (!right) {
        size_t i = 0;
        int64_t done = 0;
        for (;;) {
            const char *hit = (maxsplit < 0 || done < maxsplit) ? memmem(s.u.s.p + i, s.u.s.n - i, sep.u.s.p, sep.u.s.n) : NULL;
            if (!hit) break;
            size_t k = (size_t)(hit - s.u.s.p);
            cmf__jl_push(x, out.u.l, jv_str(s.u.s.p + i, k - i));
            i = k + sep.u.s.n;
            done++;
        }
        cmf__jl_push(x, out.u.l, jv_str(s.u.s.p + i, s.u.s.n - i));
        return out;
    }
    /* rsplit: collect from the right, then reverse */
    jv rev = cmf__jv_list_new(x, 4);
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
        cmf__jl_push(x, rev.u.l, jv_str(s.u.s.p + found + sep.u.s.n, end - found - sep.u.s.n));
        end = found;
        done++;
    }
    cmf__jl_push(x, out.u.l, jv_str(s.u.s.p, end));
    for (size_t k = rev.u.l->n; k-- > 0;) cmf__jl_push(x, out.u.l, rev.u.l->v[k]);
    return out;
}

jv cmf__js_splitlines(jctx *x, jv s, bool keepends)
{
    jv out = cmf__jv_list_new(x, 4);
    size_t i = 0, a = 0, n = s.u.s.n;
    const char *p = s.u.s.p;
    while (i < n) {
        int32_t cp;
        size_t j = cmf__ju_next(p, n, i, &cp);
        bool br = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 ||
                  cp == 0x2028 || cp == 0x2029;
        if (br) {
            size_t e = j;
            if (cp == '\r' && j < n && p[j] == '\n') e = j + 1;
            cmf__jl_push(x, out.u.l, jv_str(p + a, (keepends ? e : i) - a));
            a = i = e;
        } else i = j;
    }
    if (a < n) cmf__jl_push(x, out.u.l, jv_str(p + a, n - a));
    return out;
}

/* Python str.find/rfind/count over code points. */
static int64_t cp_index_of(jv s, size_t byte_off) { return (int64_t)cmf__ju_len(s.u.s.p, byte_off); }

static jv py_format(jctx *x, const jnode *at, jv fmt, jargs *a)
{
    cmf__buf b = {0};
    size_t auto_idx = 0;
    const char *p = fmt.u.s.p;
    size_t n = fmt.u.s.n;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '{' && i + 1 < n && p[i + 1] == '{') { cmf__jx_buf_put(x, &b, "{", 1); i++; continue; }
        if (p[i] == '}' && i + 1 < n && p[i + 1] == '}') { cmf__jx_buf_put(x, &b, "}", 1); i++; continue; }
        if (p[i] == '}') cmf__jx_fail(x, at, "Single '}' encountered in format string");
        if (p[i] != '{') { cmf__jx_buf_put(x, &b, p + i, 1); continue; }
        size_t e = i + 1;
        while (e < n && p[e] != '}') e++;
        if (e >= n) cmf__jx_fail(x, at, "Single '{' encountered in format string");
        const char *f = p + i + 1;
        size_t fl = e - i - 1;
        for (size_t k = 0; k < fl; k++)
            if (f[k] == ':' || f[k] == '!' || f[k] == '.' || f[k] == '[')
                cmf__jx_fail(x, at, "format specs and conversions in str.format are not supported");
        jv v;
        if (fl == 0) {
            if (auto_idx >= a->n_pos) cmf__jx_fail(x, at, "Replacement index %zu out of range for positional args tuple", auto_idx);
            v = a->pos[auto_idx++];
        } else if (f[0] >= '0' && f[0] <= '9') {
            size_t idx = (size_t)strtoul(f, NULL, 10);
            if (idx >= a->n_pos) cmf__jx_fail(x, at, "Replacement index %zu out of range for positional args tuple", idx);
            v = a->pos[idx];
        } else {
            bool found = false;
            for (size_t k = 0; k < a->n_kw; k++)
                if (a->kw_len[k] == fl && memcmp(a->kw_name[k], f, fl) == 0) {
                    v = a->kw_val[k];
                    found = true;
                }
            if (!found) cmf__jx_fail(x, at, "KeyError: '%.*s'", (int)fl, f);
        }
        cmf__jv_str_into(x, &b, v);
        i = e;
    }
    return cmf__jx_buf_take(x, &b);
}

static bool str_all(jv s, bool (*pred)(int32_t))
{
    if (s.u.s.n == 0) return false;
    int32_t cp;
    for (size_t i = 0; i < s.u.s.n;) {
        i = cmf__ju_next(s.u.s.p, s.u.s.n, i, &cp);
        if (!pred(cp)) return false;
    }
    return true;
}
static bool p_alnum(int32_t c) { return cmf__js_is_alpha(c) || cmf__js_is_digit(c); }
static bool p_space(int32_t c) { return cmf__ju_isspace(c); }

int cmf__js_case_state(jv s) /* bit1: has lower-cased-able upper; bit2: has lower */
{
    int st = 0;
    int32_t cp;
    for (size_t i = 0; i < s.u.s.n;) {
        i = cmf__ju_next(s.u.s.p, s.u.s.n, i, &cp);
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
        cmf__jx_fail(x, at, "%s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith", cmf__jv_type_name(pre));
    if (pre.u.s.n > s.u.s.n) return false;
    return memcmp(s.u.s.p + (end ? s.u.s.n - pre.u.s.n : 0), pre.u.s.p, pre.u.s.n) == 0;
}

/* ---- the str methods ------------------------------------------------------------ */
#define METHOD(name) static jv name(jctx *x, const jnode *at, jv s, jargs *a)

/* startswith / endswith (prefix or tuple of prefixes, optional start/end) */
static jv affix_test(jctx *x, const jnode *at, jv s, jargs *a, bool end)
{
    jv sub = s;
    if (a->n_pos > 1) {
        int64_t n = (int64_t)cmf__ju_len(s.u.s.p, s.u.s.n), st = cmf__jx_need_int(x, at, a->pos[1], "start");
        int64_t en = a->n_pos > 2 ? cmf__jx_need_int(x, at, a->pos[2], "end") : n;
        if (st < 0) st = st + n < 0 ? 0 : st + n;
        if (en < 0) en = en + n < 0 ? 0 : en + n;
        if (st > n) return jv_bool(false);
        if (en > n) en = n;
        if (en < st) en = st;
        size_t bs = cmf__ju_offset(s.u.s.p, s.u.s.n, (size_t)st), be = cmf__ju_offset(s.u.s.p, s.u.s.n, (size_t)en);
        sub = jv_str(s.u.s.p + bs, be - bs);
    }
    return jv_bool(prefix_match(x, at, sub, cmf__jx_arg(a, 0, NULL, jv_none()), end));
}
METHOD(m_startswith) { return affix_test(x, at, s, a, false); }
METHOD(m_endswith) { return affix_test(x, at, s, a, true); }
METHOD(m_strip) { return cmf__js_strip(x, at, s, cmf__jx_arg(a, 0, "chars", jv_none()), 3); }
METHOD(m_lstrip) { return cmf__js_strip(x, at, s, cmf__jx_arg(a, 0, "chars", jv_none()), 1); }
METHOD(m_rstrip) { return cmf__js_strip(x, at, s, cmf__jx_arg(a, 0, "chars", jv_none()), 2); }

static jv split_method(jctx *x, const jnode *at, jv s, jargs *a, bool right)
{
    jv ms = cmf__jx_arg(a, 1, "maxsplit", jv_int(-1));
    return cmf__js_split(x, at, s, cmf__jx_arg(a, 0, "sep", jv_none()), cmf__jx_need_int(x, at, ms, "maxsplit"), right);
}
METHOD(m_split) { return split_method(x, at, s, a, false); }
METHOD(m_rsplit) { return split_method(x, at, s, a, true); }

METHOD(m_replace)
{
    jv old = cmf__jx_need_str(x, at, cmf__jx_arg(a, 0, NULL, jv_none()), "replace arg 1");
    jv nw = cmf__jx_need_str(x, at, cmf__jx_arg(a, 1, NULL, jv_none()), "replace arg 2");
    return cmf__js_replace(x, s, old, nw, cmf__jx_need_int(x, at, cmf__jx_arg(a, 2, "count", jv_int(-1)), "count"));
}
METHOD(m_upper) { return cmf__js_case(x, s, 1); }
METHOD(m_lower) { return cmf__js_case(x, s, 0); }
METHOD(m_title) { return py_title(x, s); }
METHOD(m_capitalize) { return cmf__js_capitalize(x, s); }

/* find / rfind / index / rindex / count: substring search in code points */
enum { SEARCH_FIND, SEARCH_RFIND, SEARCH_INDEX, SEARCH_RINDEX, SEARCH_COUNT };
static jv search(jctx *x, const jnode *at, jv s, jargs *a, int mode, const char *name)
{
    jv sub = cmf__jx_need_str(x, at, cmf__jx_arg(a, 0, NULL, jv_none()), "substring");
    if (a->n_pos > 1) cmf__jx_fail(x, at, "start/end arguments of %s are not supported", name);
    if (mode == SEARCH_COUNT) {
        if (sub.u.s.n == 0) return jv_int((int64_t)cmf__ju_len(s.u.s.p, s.u.s.n) + 1);
        int64_t c = 0;
        size_t i = 0;
        const char *h;
        while (i <= s.u.s.n && (h = memmem(s.u.s.p + i, s.u.s.n - i, sub.u.s.p, sub.u.s.n))) {
            c++;
            i = (size_t)(h - s.u.s.p) + sub.u.s.n;
        }
        return jv_int(c);
    }
    bool rev = mode == SEARCH_RFIND || mode == SEARCH_RINDEX;
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
    if (found < 0 && (mode == SEARCH_INDEX || mode == SEARCH_RINDEX)) cmf__jx_fail(x, at, "substring not found");
    return jv_int(found);
}
METHOD(m_find) { return search(x, at, s, a, SEARCH_FIND, "find"); }
METHOD(m_rfind) { return search(x, at, s, a, SEARCH_RFIND, "rfind"); }
METHOD(m_index) { return search(x, at, s, a, SEARCH_INDEX, "index"); }
METHOD(m_rindex) { return search(x, at, s, a, SEARCH_RINDEX, "rindex"); }
METHOD(m_count) { return search(x, at, s, a, SEARCH_COUNT, "count"); }
METHOD(m_format) { return py_format(x, at, s, a); }

METHOD(m_join)
{
    jv it = cmf__jx_arg(a, 0, NULL, jv_none());
    if (it.t != JV_LIST) cmf__jx_fail(x, at, "can only join an iterable");
    cmf__buf b = {0};
    for (size_t i = 0; i < it.u.l->n; i++) {
        if (i) cmf__jx_buf_put(x, &b, s.u.s.p, s.u.s.n);
        jv e = it.u.l->v[i];
        if (e.t != JV_STR) cmf__jx_fail(x, at, "sequence item %zu: expected str instance, %s found", i, cmf__jv_type_name(e));
        cmf__jx_buf_put(x, &b, e.u.s.p, e.u.s.n);
    }
    return cmf__jx_buf_take(x, &b);
}
METHOD(m_isdigit) { return jv_bool(str_all(s, cmf__js_is_digit)); }
METHOD(m_isalpha) { return jv_bool(str_all(s, cmf__js_is_alpha)); }
METHOD(m_isalnum) { return jv_bool(str_all(s, p_alnum)); }
METHOD(m_isspace) { return jv_bool(str_all(s, p_space)); }
METHOD(m_isupper) { return jv_bool(cmf__js_case_state(s) == 1); }
METHOD(m_islower) { return jv_bool(cmf__js_case_state(s) == 2); }
METHOD(m_splitlines) { return cmf__js_splitlines(x, s, cmf__jv_truthy(cmf__jx_arg(a, 0, "keepends", jv_bool(false)))); }

static jv remove_affix(jctx *x, const jnode *at, jv s, jargs *a, bool suffix)
{
    jv p = cmf__jx_need_str(x, at, cmf__jx_arg(a, 0, NULL, jv_none()), "affix");
    if (prefix_match(x, at, s, p, suffix))
        return suffix ? jv_str(s.u.s.p, s.u.s.n - p.u.s.n) : jv_str(s.u.s.p + p.u.s.n, s.u.s.n - p.u.s.n);
    return s;
}
METHOD(m_removeprefix) { return remove_affix(x, at, s, a, false); }
METHOD(m_removesuffix) { return remove_affix(x, at, s, a, true); }

METHOD(m_swapcase)
{
    cmf__buf b = {0};
    int32_t cp;
    for (size_t i = 0; i < s.u.s.n;) {
        i = cmf__ju_next(s.u.s.p, s.u.s.n, i, &cp);
        int32_t lo = utf8proc_tolower(cp);
        cmf__ju_put(x, &b, lo != cp ? lo : utf8proc_toupper(cp));
    }
    return cmf__jx_buf_take(x, &b);
}

static jv partition(jctx *x, const jnode *at, jv s, jargs *a, bool right)
{
    jv sep = cmf__jx_need_str(x, at, cmf__jx_arg(a, 0, NULL, jv_none()), "separator");
    if (!sep.u.s.n) cmf__jx_fail(x, at, "empty separator");
    jv parts = cmf__js_split(x, at, s, sep, 1, right);
    jv out = cmf__jv_list_new(x, 3);
    out.flag = JVF_TUPLE;
    if (parts.u.l->n == 2) {
        cmf__jl_push(x, out.u.l, parts.u.l->v[0]);
        cmf__jl_push(x, out.u.l, sep);
        cmf__jl_push(x, out.u.l, parts.u.l->v[1]);
    } else if (right) {
        cmf__jl_push(x, out.u.l, jv_str("", 0));
        cmf__jl_push(x, out.u.l, jv_str("", 0));
        cmf__jl_push(x, out.u.l, s);
    } else {
        cmf__jl_push(x, out.u.l, s);
        cmf__jl_push(x, out.u.l, jv_str("", 0));
        cmf__jl_push(x, out.u.l, jv_str("", 0));
    }
    return out;
}
METHOD(m_partition) { return partition(x, at, s, a, false); }
METHOD(m_rpartition) { return partition(x, at, s, a, true); }
METHOD(m_istitle) { return jv_bool(cmf__js_case_state(s) & 1 && cmf__jv_equal(x, py_title(x, s), s)); }

/* The one list of str methods. A NULL function: Python has it, cmf does
 * not implement it; the attribute exists and calling it fails. */
const jmethod cmf__jx_str_methods[] = {
    {"startswith", m_startswith}, {"endswith", m_endswith}, {"strip", m_strip}, {"lstrip", m_lstrip},
    {"rstrip", m_rstrip}, {"split", m_split}, {"rsplit", m_rsplit}, {"replace", m_replace},
    {"upper", m_upper}, {"lower", m_lower}, {"casefold", m_lower}, {"title", m_title},
    {"capitalize", m_capitalize}, {"find", m_find}, {"rfind", m_rfind}, {"index", m_index},
    {"rindex", m_rindex}, {"count", m_count}, {"format", m_format}, {"join", m_join},
    {"isdigit", m_isdigit}, {"isnumeric", m_isdigit}, {"isdecimal", m_isdigit}, {"isalpha", m_isalpha},
    {"isalnum", m_isalnum}, {"isspace", m_isspace}, {"isupper", m_isupper}, {"islower", m_islower},
    {"splitlines", m_splitlines}, {"removeprefix", m_removeprefix}, {"removesuffix", m_removesuffix},
    {"swapcase", m_swapcase}, {"partition", m_partition}, {"rpartition", m_rpartition},
    {"istitle", m_istitle},
    {"zfill", NULL}, {"center", NULL}, {"ljust", NULL}, {"rjust", NULL}, {"expandtabs", NULL}, {"encode", NULL},
    {NULL, NULL}};
