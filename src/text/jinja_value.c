/* jinja_value.c — the template value model: arena allocation, JSON-like
 * values plus undefined/callables, Python str()/repr() printing, float repr
 * (shortest round trip, as Python), json.dumps as HF's tojson does, equality
 * and ordering with Python's rules, UTF-8 helpers. Values never own memory:
 * everything lives in the render's arena. */
#include "text/jinja.h"
#include "util/error.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena --------------------------------------------------------------- */
#define CHUNK_MIN (64u * 1024u)

static void *arena_take(jarena *a, size_t n, bool zero)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (a->limit && (a->total + n > a->limit || a->total + n < a->total)) return NULL;
    jchunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > CHUNK_MIN ? n : CHUNK_MIN;
        size_t hdr = (sizeof(jchunk) + 15) & ~(size_t)15;
        c = malloc(hdr + cap);
        if (!c) return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    size_t hdr = (sizeof(jchunk) + 15) & ~(size_t)15;
    void *p = (char *)c + hdr + c->used;
    c->used += n;
    a->total += n;
    if (zero) memset(p, 0, n);
    return p;
}

void *cmf__ja_alloc(jarena *a, size_t n) { return arena_take(a, n, true); }

void cmf__ja_free(jarena *a)
{
    jchunk *c = a->head;
    while (c) {
        jchunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->total = 0;
}

void *cmf__jx_alloc_raw(jctx *x, size_t n)
{
    void *p = arena_take(&x->arena, n, false);
    if (!p) cmf__jx_fail_status(x, CMF_ERR_TEMPLATE, NULL, "render needs more than %zu bytes of memory",
                           x->arena.limit);
    return p;
}

void *cmf__jx_alloc(jctx *x, size_t n)
{
    void *p = cmf__ja_alloc(&x->arena, n);
    if (!p) cmf__jx_fail_status(x, CMF_ERR_TEMPLATE, NULL, "render needs more than %zu bytes of memory",
                           x->arena.limit);
    return p;
}

static _Noreturn void vfail(jctx *x, cmf_status st, const jnode *at, const char *fmt, va_list ap)
{
    int k = 0;
    if (at) k = snprintf(x->err, sizeof x->err, "line %d column %d: ", at->line, at->col);
    if (k < 0 || (size_t)k >= sizeof x->err) k = 0;
    vsnprintf(x->err + k, sizeof x->err - (size_t)k, fmt, ap);
    x->err_status = st;
    longjmp(x->jmp, 1);
}

void cmf__jx_fail(jctx *x, const jnode *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(x, CMF_ERR_TEMPLATE, at, fmt, ap);
}

void cmf__jx_fail_status(jctx *x, cmf_status st, const jnode *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(x, st, at, fmt, ap);
}

void cmf__jx_step(jctx *x, const jnode *at)
{
    if (++x->steps > x->step_limit)
        cmf__jx_fail(x, at, "template runs more than %llu steps", (unsigned long long)x->step_limit);
}

/* ---- constructors -------------------------------------------------------- */

jv cmf__jv_strdup(jctx *x, const char *p, size_t n)
{
    char *q = cmf__jx_alloc_raw(x, n + 1);
    if (n) memcpy(q, p, n);
    q[n] = 0;
    return jv_str(q, n);
}

jv cmf__jv_list_new(jctx *x, size_t cap)
{
    jv v = {.t = JV_LIST};
    v.u.l = cmf__jx_alloc(x, sizeof(jlist));
    if (cap) {
        v.u.l->v = cmf__jx_alloc(x, cap * sizeof(jv));
        v.u.l->cap = cap;
    }
    return v;
}

jv cmf__jv_dict_new(jctx *x, size_t cap)
{
    jv v = {.t = JV_DICT};
    v.u.d = cmf__jx_alloc(x, sizeof(jdict));
    if (cap) {
        v.u.d->k = cmf__jx_alloc(x, cap * sizeof(jv));
        v.u.d->v = cmf__jx_alloc(x, cap * sizeof(jv));
        v.u.d->cap = cap;
    }
    return v;
}

void cmf__jl_push(jctx *x, jlist *l, jv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        jv *nv = cmf__jx_alloc(x, cap * sizeof(jv));
        if (l->n) memcpy(nv, l->v, l->n * sizeof(jv));
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

static bool equal_at(jctx *x, jv a, jv b, int depth);

static jv *dict_find(jctx *x, const jdict *d, jv k, int depth)
{
    for (size_t i = 0; i < d->n; i++)
        if (equal_at(x, d->k[i], k, depth)) return &d->v[i];
    return NULL;
}

jv *cmf__jd_get(jctx *x, const jdict *d, jv k) { return dict_find(x, d, k, 0); }

jv *cmf__jd_get_str(const jdict *d, const char *k, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].u.s.n == n && memcmp(d->k[i].u.s.p, k, n) == 0)
            return &d->v[i];
    return NULL;
}

/* Appends a key known to be new (JSON objects: jansson keys are unique). */
static void jd_push(jctx *x, jdict *d, jv k, jv v)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jv *nk = cmf__jx_alloc(x, cap * sizeof(jv)), *nv = cmf__jx_alloc(x, cap * sizeof(jv));
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(jv));
            memcpy(nv, d->v, d->n * sizeof(jv));
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
}

void cmf__jd_set(jctx *x, jdict *d, jv k, jv v)
{
    jv *slot = cmf__jd_get(x, d, k);
    if (slot) *slot = v;
    else jd_push(x, d, k, v);
}

jv cmf__jv_from_json(jctx *x, const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jv d = cmf__jv_dict_new(x, json_object_size(j));
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)j, key, val) {
            /* keys and strings borrow the JSON's storage: it outlives the render */
            jd_push(x, d.u.d, jv_str(key, strlen(key)), cmf__jv_from_json(x, val));
        }
        return d;
    }
    case JSON_ARRAY: {
        jv l = cmf__jv_list_new(x, json_array_size(j));
        size_t i;
        json_t *val;
        json_array_foreach(j, i, val) cmf__jl_push(x, l.u.l, cmf__jv_from_json(x, val));
        return l;
    }
    case JSON_STRING: return jv_str(json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return jv_int(json_integer_value(j));
    case JSON_REAL: return jv_float(json_real_value(j));
    case JSON_TRUE: return jv_bool(true);
    case JSON_FALSE: return jv_bool(false);
    default: return jv_none();
    }
}

/* ---- Python semantics ------------------------------------------------------ */
bool cmf__jv_truthy(jv v)
{
    switch (v.t) {
    case JV_UNDEF: case JV_NONE: return false;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s.n != 0;
    case JV_LIST: return (v.flag & JVF_GEN) || v.u.l->n != 0;
    case JV_DICT: return v.u.d->is_ns || v.u.d->n != 0;
    default: return true;
    }
}


/* Values nest as deep as a template builds them (a loop can wrap a list
 * 100,000 times): comparing and printing stop at VALUE_MAX_DEPTH levels. */
#define VALUE_MAX_DEPTH 200

static bool equal_at(jctx *x, jv a, jv b, int depth)
{
    if (depth > VALUE_MAX_DEPTH) cmf__jx_fail(x, NULL, "values nested too deeply to compare (more than %d levels)", VALUE_MAX_DEPTH);
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) {
            int64_t ai = a.t == JV_BOOL ? a.u.b : a.u.i, bi = b.t == JV_BOOL ? b.u.b : b.u.i;
            return ai == bi;
        }
        return jv_num(a) == jv_num(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case JV_UNDEF: case JV_NONE: return true;
    case JV_STR: return a.u.s.n == b.u.s.n && memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
    case JV_LIST:
        if (a.u.l->n != b.u.l->n) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal_at(x, a.u.l->v[i], b.u.l->v[i], depth + 1)) return false;
        return true;
    case JV_DICT:
        if (a.u.d == b.u.d) return true;
        if (a.u.d->is_ns || b.u.d->is_ns) return false;
        if (a.u.d->n != b.u.d->n) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jv *o = dict_find(x, b.u.d, a.u.d->k[i], depth + 1);
            if (!o || !equal_at(x, a.u.d->v[i], *o, depth + 1)) return false;
        }
        return true;
    case JV_FUNC: return a.u.fn == b.u.fn;
    case JV_LOOP: return a.u.loop == b.u.loop;
    default: return false;
    }
}

bool cmf__jv_equal(jctx *x, jv a, jv b) { return equal_at(x, a, b, 0); }

const char *cmf__jv_type_name(jv v)
{
    switch (v.t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return (v.flag & JVF_GEN) ? "generator" : (v.flag & JVF_TUPLE) ? "tuple" : "list";
    case JV_DICT: return v.u.d->is_ns ? "Namespace" : "dict";
    case JV_FUNC: return v.u.fn->kind == FN_MACRO ? "Macro" : "function";
    default: return "LoopContext";
    }
}

static int compare_at(jctx *x, const jnode *at, jv a, jv b, int depth)
{
    if (depth > VALUE_MAX_DEPTH) cmf__jx_fail(x, at, "values nested too deeply to compare (more than %d levels)", VALUE_MAX_DEPTH);
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) {
            int64_t ai = a.t == JV_BOOL ? a.u.b : a.u.i, bi = b.t == JV_BOOL ? b.u.b : b.u.i;
            return ai < bi ? -1 : ai > bi;
        }
        double da = jv_num(a), db = jv_num(b);
        return da < db ? -1 : da > db;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        /* UTF-8 byte order equals code point order */
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int c = memcmp(a.u.s.p, b.u.s.p, n);
        if (c) return c < 0 ? -1 : 1;
        return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (equal_at(x, a.u.l->v[i], b.u.l->v[i], depth + 1)) continue;
            return compare_at(x, at, a.u.l->v[i], b.u.l->v[i], depth + 1);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    cmf__jx_fail(x, at, "'<' not supported between instances of '%s' and '%s'", cmf__jv_type_name(a),
            cmf__jv_type_name(b));
}

int cmf__jv_compare(jctx *x, const jnode *at, jv a, jv b) { return compare_at(x, at, a, b, 0); }

/* ---- printing ------------------------------------------------------------- */
void cmf__jx_buf_put(jctx *x, cmf__buf *b, const char *p, size_t n)
{
    if (b->len + n > x->out_limit || b->len + n < b->len)
        cmf__jx_fail(x, NULL, "text grows past %zu bytes", x->out_limit);
    /* buffers grow inside the arena, so an error unwinding past a half-built
     * text leaks nothing */
    if (b->cap - b->len <= n) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap - b->len <= n) cap *= 2;
        uint8_t *d = cmf__jx_alloc_raw(x, cap);
        if (b->len) memcpy(d, b->data, b->len);
        b->data = d;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

static void put_s(jctx *x, cmf__buf *b, const char *s) { cmf__jx_buf_put(x, b, s, strlen(s)); }

jv cmf__jx_buf_take(jctx *x, cmf__buf *b)
{
    jv v = jv_str(b->data ? (const char *)b->data : "", b->len);
    memset(b, 0, sizeof *b);
    return v;
}

void cmf__jx_float_repr(double f, char *out, size_t cap)
{
    if (isnan(f)) { snprintf(out, cap, "nan"); return; }
    if (isinf(f)) { snprintf(out, cap, f < 0 ? "-inf" : "inf"); return; }
    char tmp[64];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp = [-]d[.ddd]e[+-]XX: collect digits and exponent */
    char digits[32];
    int nd = 0, exp10 = 0;
    bool neg = tmp[0] == '-';
    const char *p = tmp + neg;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    if (*p == 'e') exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    size_t k = 0;
    char buf[64];
    if (neg) buf[k++] = '-';
    if (exp10 >= -5 + 1 && exp10 < 16) {
        /* fixed notation: value = 0.d1d2.. * 10^(exp10+1) */
        int decpt = exp10 + 1;
        if (decpt <= 0) {
            buf[k++] = '0';
            buf[k++] = '.';
            for (int i = 0; i < -decpt; i++) buf[k++] = '0';
            for (int i = 0; i < nd; i++) buf[k++] = digits[i];
        } else {
            for (int i = 0; i < decpt; i++) buf[k++] = i < nd ? digits[i] : '0';
            buf[k++] = '.';
            if (nd > decpt)
                for (int i = decpt; i < nd; i++) buf[k++] = digits[i];
            else
                buf[k++] = '0';
        }
        buf[k] = 0;
    } else {
        buf[k++] = digits[0];
        if (nd > 1) {
            buf[k++] = '.';
            for (int i = 1; i < nd; i++) buf[k++] = digits[i];
        }
        buf[k] = 0;
        snprintf(buf + k, sizeof buf - k, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
    snprintf(out, cap, "%s", buf);
}

static void repr_str(jctx *x, cmf__buf *b, const char *p, size_t n)
{
    bool has_sq = memchr(p, '\'', n) != NULL, has_dq = memchr(p, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    cmf__jx_buf_put(x, b, &q, 1);
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        const char *esc = NULL;
        char hex[8];
        if (c == '\\') esc = "\\\\";
        else if (c == (unsigned char)q) esc = q == '\'' ? "\\'" : "\\\"";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c < 0x20 || c == 0x7f) {
            snprintf(hex, sizeof hex, "\\x%02x", c);
            esc = hex;
        }
        if (esc) {
            cmf__jx_buf_put(x, b, p + start, i - start);
            put_s(x, b, esc);
            start = i + 1;
        }
    }
    cmf__jx_buf_put(x, b, p + start, n - start);
    cmf__jx_buf_put(x, b, &q, 1);
}

static void print_value(jctx *x, cmf__buf *b, jv v, bool repr, int depth)
{
    char num[64];
    if (depth > VALUE_MAX_DEPTH) cmf__jx_fail(x, NULL, "value nested too deeply to print");
    switch (v.t) {
    case JV_UNDEF: if (repr) put_s(x, b, "Undefined"); return;
    case JV_NONE: put_s(x, b, "None"); return;
    case JV_BOOL: put_s(x, b, v.u.b ? "True" : "False"); return;
    case JV_INT: snprintf(num, sizeof num, "%lld", (long long)v.u.i); put_s(x, b, num); return;
    case JV_FLOAT: cmf__jx_float_repr(v.u.f, num, sizeof num); put_s(x, b, num); return;
    case JV_STR:
        if (repr) repr_str(x, b, v.u.s.p, v.u.s.n);
        else cmf__jx_buf_put(x, b, v.u.s.p, v.u.s.n);
        return;
    case JV_LIST: {
        if (v.flag & JVF_GEN) {
            put_s(x, b, "<generator object>");
            return;
        }
        bool tup = v.flag & JVF_TUPLE;
        put_s(x, b, tup ? "(" : "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) put_s(x, b, ", ");
            print_value(x, b, v.u.l->v[i], true, depth + 1);
        }
        if (tup && v.u.l->n == 1) put_s(x, b, ",");
        put_s(x, b, tup ? ")" : "]");
        return;
    }
    case JV_DICT:
        if (v.u.d->is_ns) {
            put_s(x, b, "<Namespace {");
        } else {
            put_s(x, b, "{");
        }
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) put_s(x, b, ", ");
            print_value(x, b, v.u.d->k[i], true, depth + 1);
            put_s(x, b, ": ");
            print_value(x, b, v.u.d->v[i], true, depth + 1);
        }
        put_s(x, b, v.u.d->is_ns ? "}>" : "}");
        return;
    case JV_FUNC:
        put_s(x, b, "<function ");
        cmf__jx_buf_put(x, b, v.u.fn->name ? v.u.fn->name : "?", v.u.fn->name ? v.u.fn->name_len : 1);
        put_s(x, b, ">");
        return;
    default: put_s(x, b, "<LoopContext>"); return;
    }
}

void cmf__jv_str_into(jctx *x, cmf__buf *b, jv v) { print_value(x, b, v, false, 0); }
void cmf__jv_repr_into(jctx *x, cmf__buf *b, jv v) { print_value(x, b, v, true, 0); }

jv cmf__jv_to_str(jctx *x, jv v)
{
    if (v.t == JV_STR) return v;
    if (v.t == JV_UNDEF) return jv_str("", 0);
    cmf__buf b = {0};
    cmf__jv_str_into(x, &b, v);
    return cmf__jx_buf_take(x, &b);
}

jv cmf__jv_html_escape(jctx *x, jv s)
{
    if (s.flag & JVF_SAFE) return s;
    cmf__buf b = {0};
    size_t start = 0;
    for (size_t i = 0; i < s.u.s.n; i++) {
        char c = s.u.s.p[i];
        const char *r = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;"
                        : c == '\'' ? "&#39;" : NULL;
        if (!r) continue;
        cmf__jx_buf_put(x, &b, s.u.s.p + start, i - start);
        put_s(x, &b, r);
        start = i + 1;
    }
    cmf__jx_buf_put(x, &b, s.u.s.p + start, s.u.s.n - start);
    jv out = cmf__jx_buf_take(x, &b);
    out.flag = JVF_SAFE;
    return out;
}

/* ---- JSON (Python json.dumps) ----------------------------------------------------- */
static void json_str(jctx *x, cmf__buf *b, const char *p, size_t n, bool ensure_ascii)
{
    put_s(x, b, "\"");
    size_t start = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)p[i];
        char esc[16];
        const char *e = NULL;
        size_t adv = 1;
        if (c == '"') e = "\\\"";
        else if (c == '\\') e = "\\\\";
        else if (c == '\n') e = "\\n";
        else if (c == '\r') e = "\\r";
        else if (c == '\t') e = "\\t";
        else if (c == '\b') e = "\\b";
        else if (c == '\f') e = "\\f";
        else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            e = esc;
        } else if (c >= 0x80 && ensure_ascii) {
            int32_t cp;
            size_t nx = cmf__ju_next(p, n, i, &cp);
            adv = nx - i;
            if (cp >= 0x10000) {
                int32_t v = cp - 0x10000;
                snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
            } else {
                snprintf(esc, sizeof esc, "\\u%04x", cp);
            }
            e = esc;
        }
        if (e) {
            cmf__jx_buf_put(x, b, p + start, i - start);
            put_s(x, b, e);
            start = i + adv;
        }
        i += adv;
    }
    cmf__jx_buf_put(x, b, p + start, n - start);
    put_s(x, b, "\"");
}

static void json_newline(jctx *x, cmf__buf *b, int indent, int level)
{
    put_s(x, b, "\n");
    for (int i = 0; i < indent * level; i++) put_s(x, b, " ");
}

/* A dict key as json.dumps turns it into a string. */
static void json_key(jctx *x, const jnode *at, cmf__buf *b, jv k, bool ensure_ascii)
{
    char num[64];
    switch (k.t) {
    case JV_STR: json_str(x, b, k.u.s.p, k.u.s.n, ensure_ascii); return;
    case JV_INT: snprintf(num, sizeof num, "\"%lld\"", (long long)k.u.i); put_s(x, b, num); return;
    case JV_BOOL: put_s(x, b, k.u.b ? "\"true\"" : "\"false\""); return;
    case JV_NONE: put_s(x, b, "\"null\""); return;
    case JV_FLOAT:
        put_s(x, b, "\"");
        cmf__jx_float_repr(k.u.f, num, sizeof num);
        put_s(x, b, num);
        put_s(x, b, "\"");
        return;
    default:
        cmf__jx_fail(x, at, "keys must be str, int, float, bool or None, not %s", cmf__jv_type_name(k));
    }
}

void cmf__jv_json_into(jctx *x, const jnode *at, cmf__buf *b, jv v, int indent, const char *item_sep,
                  const char *key_sep, bool sort_keys, bool ensure_ascii, int level)
{
    char num[64];
    if (level > 200) cmf__jx_fail(x, at, "value nested too deeply for tojson");
    switch (v.t) {
    case JV_NONE: put_s(x, b, "null"); return;
    case JV_BOOL: put_s(x, b, v.u.b ? "true" : "false"); return;
    case JV_INT: snprintf(num, sizeof num, "%lld", (long long)v.u.i); put_s(x, b, num); return;
    case JV_FLOAT:
        if (isnan(v.u.f)) put_s(x, b, "NaN");
        else if (isinf(v.u.f)) put_s(x, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else {
            cmf__jx_float_repr(v.u.f, num, sizeof num);
            put_s(x, b, num);
        }
        return;
    case JV_STR: json_str(x, b, v.u.s.p, v.u.s.n, ensure_ascii); return;
    case JV_LIST:
        if (v.flag & JVF_GEN) break;
        if (v.u.l->n == 0) { put_s(x, b, "[]"); return; }
        put_s(x, b, "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) put_s(x, b, item_sep);
            if (indent >= 0) json_newline(x, b, indent, level + 1);
            cmf__jv_json_into(x, at, b, v.u.l->v[i], indent, item_sep, key_sep, sort_keys, ensure_ascii, level + 1);
        }
        if (indent >= 0) json_newline(x, b, indent, level);
        put_s(x, b, "]");
        return;
    case JV_DICT: {
        if (v.u.d->is_ns) break;
        if (v.u.d->n == 0) { put_s(x, b, "{}"); return; }
        size_t n = v.u.d->n;
        size_t *order = cmf__jx_alloc(x, n * sizeof(size_t));
        for (size_t i = 0; i < n; i++) order[i] = i;
        if (sort_keys) {
            /* insertion sort by key (small dicts; keeps the comparison's error path simple) */
            for (size_t i = 1; i < n; i++) {
                size_t cur = order[i], j = i;
                while (j > 0 && cmf__jv_compare(x, at, v.u.d->k[order[j - 1]], v.u.d->k[cur]) > 0) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = cur;
            }
        }
        put_s(x, b, "{");
        for (size_t i = 0; i < n; i++) {
            size_t k = order[i];
            if (i) put_s(x, b, item_sep);
            if (indent >= 0) json_newline(x, b, indent, level + 1);
            json_key(x, at, b, v.u.d->k[k], ensure_ascii);
            put_s(x, b, key_sep);
            cmf__jv_json_into(x, at, b, v.u.d->v[k], indent, item_sep, key_sep, sort_keys, ensure_ascii, level + 1);
        }
        if (indent >= 0) json_newline(x, b, indent, level);
        put_s(x, b, "}");
        return;
    }
    default: break;
    }
    cmf__jx_fail(x, at, "Object of type %s is not JSON serializable", cmf__jv_type_name(v));
}

/* ---- UTF-8 ------------------------------------------------------------------ */
size_t cmf__ju_next(const char *p, size_t n, size_t i, int32_t *cp)
{
    const unsigned char *s = (const unsigned char *)p;
    unsigned char c = s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + (size_t)len > n) {
        *cp = c;
        return i + 1;
    }
    int32_t v = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (int k = 1; k < len; k++) {
        if ((s[i + k] & 0xc0) != 0x80) {
            *cp = c;
            return i + 1;
        }
        v = (v << 6) | (s[i + k] & 0x3f);
    }
    *cp = v;
    return i + (size_t)len;
}

size_t cmf__ju_len(const char *p, size_t n)
{
    size_t k = 0;
    int32_t cp;
    for (size_t i = 0; i < n; k++) i = cmf__ju_next(p, n, i, &cp);
    return k;
}

size_t cmf__ju_offset(const char *p, size_t n, size_t cp_index)
{
    size_t i = 0;
    int32_t cp;
    while (cp_index > 0 && i < n) {
        i = cmf__ju_next(p, n, i, &cp);
        cp_index--;
    }
    return i;
}

bool cmf__ju_isspace(int32_t c)
{
    return (c >= 9 && c <= 13) || c == ' ' || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

void cmf__ju_put(jctx *x, cmf__buf *b, int32_t cp)
{
    char s[4];
    size_t n;
    if (cp < 0x80) { s[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { s[0] = (char)(0xc0 | (cp >> 6)); s[1] = (char)(0x80 | (cp & 0x3f)); n = 2; }
    else if (cp < 0x10000) {
        s[0] = (char)(0xe0 | (cp >> 12)); s[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        s[2] = (char)(0x80 | (cp & 0x3f)); n = 3;
    } else {
        s[0] = (char)(0xf0 | (cp >> 18)); s[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        s[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); s[3] = (char)(0x80 | (cp & 0x3f)); n = 4;
    }
    cmf__jx_buf_put(x, b, s, n);
}
