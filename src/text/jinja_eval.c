/* jinja_eval.c — evaluates the template AST: expressions with Python
 * semantics (truthiness, int/float arithmetic, chained comparisons,
 * attribute/item lookup falling back on each other, jinja2's default
 * Undefined) and statements (if, for with loop, set, macro/call, filter,
 * with, break/continue). Scopes follow jinja2: a for loop or macro body has
 * its own frame, if does not. Errors longjmp out through cmf__jx_fail. */
#include "text/jinja.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- frames --------------------------------------------------------------- */
jframe *cmf__jx_frame_new(jctx *x, jframe *parent)
{
    jframe *f = cmf__jx_alloc(x, sizeof(jframe));
    f->parent = parent;
    return f;
}

void cmf__jx_frame_set(jctx *x, jframe *f, const char *name, size_t n, jv v)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->len[i] == n && memcmp(f->name[i], name, n) == 0) {
            f->val[i] = v;
            return;
        }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        const char **nn = cmf__jx_alloc(x, cap * sizeof(char *));
        size_t *nl = cmf__jx_alloc(x, cap * sizeof(size_t));
        jv *nv = cmf__jx_alloc(x, cap * sizeof(jv));
        if (f->n) {
            memcpy(nn, f->name, f->n * sizeof(char *));
            memcpy(nl, f->len, f->n * sizeof(size_t));
            memcpy(nv, f->val, f->n * sizeof(jv));
        }
        f->name = nn;
        f->len = nl;
        f->val = nv;
        f->cap = cap;
    }
    f->name[f->n] = name;
    f->len[f->n] = n;
    f->val[f->n] = v;
    f->n++;
}

jv cmf__jx_lookup(jframe *f, const char *name, size_t n, bool *found)
{
    for (; f; f = f->parent)
        for (size_t i = 0; i < f->n; i++)
            if (f->len[i] == n && memcmp(f->name[i], name, n) == 0) {
                *found = true;
                return f->val[i];
            }
    *found = false;
    return jv_undef(NULL);
}

static const char *hintf(jctx *x, const char *fmt, const char *a, size_t an, const char *b, size_t bn)
{
    char buf[256];
    snprintf(buf, sizeof buf, fmt, (int)(an > 80 ? 80 : an), a, (int)(bn > 80 ? 80 : bn), b);
    jv s = cmf__jv_strdup(x, buf, strlen(buf));
    return s.u.s.p;
}

/* The text jinja2 names an object by in "'dict object' has no attribute". */
static const char *obj_repr(jv v)
{
    switch (v.t) {
    case JV_NONE: return "None";
    case JV_DICT: return v.u.d->is_ns ? "Namespace object" : "dict object";
    case JV_LIST: return (v.flag & JVF_TUPLE) ? "tuple object" : "list object";
    case JV_STR: return "str object";
    case JV_INT: return "int object";
    case JV_FLOAT: return "float object";
    case JV_BOOL: return "bool object";
    case JV_LOOP: return "LoopContext object";
    default: return "function object";
    }
}

static _Noreturn void fail_undef(jctx *x, const jnode *at, jv u)
{
    if (u.u.s.p) cmf__jx_fail(x, at, "%s", u.u.s.p);
    cmf__jx_fail(x, at, "undefined value");
}

static jv no_attr(jctx *x, jv obj, const char *name, size_t n)
{
    const char *r = obj_repr(obj);
    return jv_undef(hintf(x, "'%.*s' has no attribute '%.*s'", r, strlen(r), name, n));
}

jv cmf__jx_getattr(jctx *x, const jnode *at, jv obj, const char *name, size_t n)
{
    switch (obj.t) {
    case JV_UNDEF: fail_undef(x, at, obj);
    case JV_LOOP: return cmf__jx_loop_attr(x, obj.u.loop, name, n);
    case JV_DICT: {
        if (!obj.u.d->is_ns) {
            jv m = cmf__jx_method_lookup(x, obj, name, n);
            if (m.t != JV_UNDEF || (m.flag & JVF_UNSAFE)) return m;
        }
        jv *v = cmf__jd_get_str(obj.u.d, name, n);
        if (v) return *v;
        return no_attr(x, obj, name, n);
    }
    case JV_STR: case JV_LIST: {
        jv m = cmf__jx_method_lookup(x, obj, name, n);
        if (m.t != JV_UNDEF || (m.flag & JVF_UNSAFE)) return m;
        return no_attr(x, obj, name, n);
    }
    default: return no_attr(x, obj, name, n);
    }
}

static bool as_index(jv k, int64_t *out)
{
    if (k.t == JV_INT) { *out = k.u.i; return true; }
    if (k.t == JV_BOOL) { *out = k.u.b; return true; }
    return false;
}

jv cmf__jx_getitem(jctx *x, const jnode *at, jv obj, jv key)
{
    int64_t i;
    switch (obj.t) {
    case JV_UNDEF: fail_undef(x, at, obj);
    case JV_DICT: {
        if (obj.u.d->is_ns) break;
        jv *v = cmf__jd_get(x, obj.u.d, key);
        if (v) return *v;
        break;
    }
    case JV_LIST:
        if (obj.flag & JVF_GEN) break;
        if (as_index(key, &i)) {
            int64_t n = (int64_t)obj.u.l->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) return obj.u.l->v[i];
            char buf[96];
            snprintf(buf, sizeof buf, "%s has no element %lld", obj_repr(obj), (long long)key.u.i);
            return jv_undef(cmf__jv_strdup(x, buf, strlen(buf)).u.s.p);
        }
        break;
    case JV_STR:
        if (as_index(key, &i)) {
            int64_t n = (int64_t)cmf__ju_len(obj.u.s.p, obj.u.s.n);
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                size_t a = cmf__ju_offset(obj.u.s.p, obj.u.s.n, (size_t)i);
                int32_t cp;
                size_t b = cmf__ju_next(obj.u.s.p, obj.u.s.n, a, &cp);
                return jv_str(obj.u.s.p + a, b - a);
            }
            char buf[96];
            snprintf(buf, sizeof buf, "str object has no element %lld", (long long)key.u.i);
            return jv_undef(cmf__jv_strdup(x, buf, strlen(buf)).u.s.p);
        }
        break;
    case JV_LOOP:
        if (key.t == JV_STR) return cmf__jx_loop_attr(x, obj.u.loop, key.u.s.p, key.u.s.n);
        break;
    default: break;
    }
    if (key.t == JV_STR) return cmf__jx_getattr(x, at, obj, key.u.s.p, key.u.s.n);
    cmf__buf b = {0};
    cmf__jv_repr_into(x, &b, key);
    jv ks = cmf__jx_buf_take(x, &b);
    const char *r = obj_repr(obj);
    return jv_undef(hintf(x, "'%.*s' has no attribute '%.*s'", r, strlen(r), ks.u.s.p, ks.u.s.n));
}

/* Python slice index adjustment; returns the count of selected items. */
static size_t slice_indices(jctx *x, const jnode *at, int64_t len, jv vs, jv ve, jv vst,
                            int64_t *start, int64_t *step)
{
    int64_t st = 1, s = 0, e = 0;
    if (vst.t != JV_NONE && vst.t != JV_UNDEF) {
        if (!as_index(vst, &st)) cmf__jx_fail(x, at, "slice indices must be integers or None");
        if (st == 0) cmf__jx_fail(x, at, "slice step cannot be zero");
    }
    bool has_s = vs.t != JV_NONE && vs.t != JV_UNDEF, has_e = ve.t != JV_NONE && ve.t != JV_UNDEF;
    if ((has_s && !as_index(vs, &s)) || (has_e && !as_index(ve, &e)))
        cmf__jx_fail(x, at, "slice indices must be integers or None");
    if (st > 0) {
        if (!has_s) s = 0;
        else if (s < 0) { s += len; if (s < 0) s = 0; }
        else if (s > len) s = len;
        if (!has_e) e = len;
        else if (e < 0) { e += len; if (e < 0) e = 0; }
        else if (e > len) e = len;
    } else {
        if (!has_s) s = len - 1;
        else if (s < 0) { s += len; if (s < 0) s = -1; }
        else if (s >= len) s = len - 1;
        if (!has_e) e = -1;
        else if (e < 0) { e += len; if (e < 0) e = -1; }
        else if (e >= len) e = len - 1;
    }
    *start = s;
    *step = st;
    if (st > 0) return e > s ? (size_t)((e - s - 1) / st + 1) : 0;
    return s > e ? (size_t)((s - e - 1) / (-st) + 1) : 0;
}

static jv do_slice(jctx *x, const jnode *at, jv obj, jv vs, jv ve, jv vst)
{
    int64_t start, step;
    if (obj.t == JV_LIST) {
        size_t cnt = slice_indices(x, at, (int64_t)obj.u.l->n, vs, ve, vst, &start, &step);
        jv out = cmf__jv_list_new(x, cnt);
        for (size_t k = 0; k < cnt; k++) cmf__jl_push(x, out.u.l, obj.u.l->v[start + (int64_t)k * step]);
        out.flag = obj.flag & JVF_TUPLE;
        return out;
    }
    if (obj.t == JV_STR) {
        /* code point offsets, then gather */
        size_t n = cmf__ju_len(obj.u.s.p, obj.u.s.n);
        size_t cnt = slice_indices(x, at, (int64_t)n, vs, ve, vst, &start, &step);
        size_t *offs = cmf__jx_alloc(x, (n + 1) * sizeof(size_t));
        size_t i = 0, k = 0;
        int32_t cp;
        while (i < obj.u.s.n) {
            offs[k++] = i;
            i = cmf__ju_next(obj.u.s.p, obj.u.s.n, i, &cp);
        }
        offs[k] = obj.u.s.n;
        if (step == 1) {
            size_t a = offs[start], b = offs[start + (int64_t)cnt];
            return jv_str(obj.u.s.p + a, cnt ? b - a : 0);
        }
        cmf__buf b = {0};
        for (size_t j = 0; j < cnt; j++) {
            int64_t idx = start + (int64_t)j * step;
            cmf__jx_buf_put(x, &b, obj.u.s.p + offs[idx], offs[idx + 1] - offs[idx]);
        }
        return cmf__jx_buf_take(x, &b);
    }
    if (obj.t == JV_UNDEF) fail_undef(x, at, obj);
    return jv_undef(NULL);
}

/* ---- arithmetic --------------------------------------------------------------- */
static _Noreturn void bad_operands(jctx *x, const jnode *at, const char *op, jv a, jv b)
{
    if (a.t == JV_UNDEF) fail_undef(x, at, a);
    if (b.t == JV_UNDEF) fail_undef(x, at, b);
    if (a.t == JV_STR && *op == '+')
        cmf__jx_fail(x, at, "can only concatenate str (not \"%s\") to str", cmf__jv_type_name(b));
    if (a.t == JV_LIST && *op == '+')
        cmf__jx_fail(x, at, "can only concatenate list (not \"%s\") to list", cmf__jv_type_name(b));
    cmf__jx_fail(x, at, "unsupported operand type(s) for %s: '%s' and '%s'", op, cmf__jv_type_name(a), cmf__jv_type_name(b));
}

static int64_t ival(jv v) { return v.t == JV_BOOL ? (int64_t)v.u.b : v.u.i; }

/* Python's str % args for the conversions templates use: %s %r %d %i %f
 * (with an optional precision) and %%. A tuple spreads over the specs. */
static jv printf_format(jctx *x, const jnode *at, jv fmt, jv args)
{
    jv *av = &args;
    size_t an = 1, ai = 0;
    if (args.t == JV_LIST && (args.flag & JVF_TUPLE)) {
        av = args.u.l->v;
        an = args.u.l->n;
    }
    cmf__buf b = {0};
    const char *p = fmt.u.s.p;
    size_t n = fmt.u.s.n;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '%') {
            cmf__jx_buf_put(x, &b, p + i, 1);
            continue;
        }
        if (++i >= n) cmf__jx_fail(x, at, "incomplete format");
        int prec = -1;
        if (p[i] == '.') {
            prec = 0;
            while (++i < n && p[i] >= '0' && p[i] <= '9') prec = prec * 10 + (p[i] - '0') > 100 ? 100 : prec * 10 + (p[i] - '0');
            if (i >= n) cmf__jx_fail(x, at, "incomplete format");
        }
        char c = p[i];
        if (c == '%') {
            cmf__jx_buf_put(x, &b, "%", 1);
            continue;
        }
        if (ai >= an) cmf__jx_fail(x, at, "not enough arguments for format string");
        jv v = av[ai++];
        char num[512];
        if (c == 's') cmf__jv_str_into(x, &b, v);
        else if (c == 'r') cmf__jv_repr_into(x, &b, v);
        else if (c == 'd' || c == 'i' || c == 'f') {
            if (!jv_is_num(v)) cmf__jx_fail(x, at, "%%%c format: a real number is required, not %s", c, cmf__jv_type_name(v));
            if (c == 'f') snprintf(num, sizeof num, "%.*f", prec < 0 ? 6 : prec, jv_num(v));
            else if (v.t == JV_FLOAT) snprintf(num, sizeof num, "%.0f", trunc(v.u.f));
            else snprintf(num, sizeof num, "%lld", (long long)ival(v));
            cmf__jx_buf_put(x, &b, num, strlen(num));
        } else cmf__jx_fail(x, at, "unsupported format character '%c'", c);
    }
    if (ai < an && !(an == 1 && args.t == JV_DICT)) cmf__jx_fail(x, at, "not all arguments converted during string formatting");
    return cmf__jx_buf_take(x, &b);
}

static jv arith(jctx *x, const jnode *at, int op, jv a, jv b)
{
    bool nums = jv_is_num(a) && jv_is_num(b);
    bool ints = nums && a.t != JV_FLOAT && b.t != JV_FLOAT;
    int64_t r;
    switch (op) {
    case JOP_ADD:
        if (ints) {
            if (__builtin_add_overflow(ival(a), ival(b), &r)) cmf__jx_fail(x, at, "integer overflow");
            return jv_int(r);
        }
        if (nums) return jv_float(jv_num(a) + jv_num(b));
        if (a.t == JV_STR && b.t == JV_STR) {
            /* Markup + str escapes the str (markupsafe), the result is Markup */
            uint8_t safe = (a.flag | b.flag) & JVF_SAFE;
            if (safe) {
                a = cmf__jv_html_escape(x, a);
                b = cmf__jv_html_escape(x, b);
            }
            char *p = cmf__jx_alloc_raw(x, a.u.s.n + b.u.s.n + 1);
            memcpy(p, a.u.s.p, a.u.s.n);
            memcpy(p + a.u.s.n, b.u.s.p, b.u.s.n);
            p[a.u.s.n + b.u.s.n] = 0;
            jv r = jv_str(p, a.u.s.n + b.u.s.n);
            r.flag = safe;
            return r;
        }
        if (a.t == JV_LIST && b.t == JV_LIST && !((a.flag | b.flag) & JVF_GEN)) {
            jv out = cmf__jv_list_new(x, a.u.l->n + b.u.l->n);
            for (size_t i = 0; i < a.u.l->n; i++) cmf__jl_push(x, out.u.l, a.u.l->v[i]);
            for (size_t i = 0; i < b.u.l->n; i++) cmf__jl_push(x, out.u.l, b.u.l->v[i]);
            return out;
        }
        bad_operands(x, at, "+", a, b);
    case JOP_SUB:
        if (ints) {
            if (__builtin_sub_overflow(ival(a), ival(b), &r)) cmf__jx_fail(x, at, "integer overflow");
            return jv_int(r);
        }
        if (nums) return jv_float(jv_num(a) - jv_num(b));
        bad_operands(x, at, "-", a, b);
    case JOP_MUL:
        if (ints) {
            if (__builtin_mul_overflow(ival(a), ival(b), &r)) cmf__jx_fail(x, at, "integer overflow");
            return jv_int(r);
        }
        if (nums) return jv_float(jv_num(a) * jv_num(b));
        if ((a.t == JV_STR || a.t == JV_LIST) && (b.t == JV_INT || b.t == JV_BOOL)) {
            jv t = a;
            a = b;
            b = t;
        }
        if ((a.t == JV_INT || a.t == JV_BOOL) && (b.t == JV_STR || b.t == JV_LIST)) {
            int64_t k = ival(a);
            if (k < 0) k = 0;
            if (b.t == JV_STR) {
                if (b.u.s.n && (uint64_t)k > x->out_limit / b.u.s.n) cmf__jx_fail(x, at, "string repetition too large");
                cmf__buf buf = {0};
                for (int64_t i = 0; i < k; i++) cmf__jx_buf_put(x, &buf, b.u.s.p, b.u.s.n);
                return cmf__jx_buf_take(x, &buf);
            }
            if (b.u.l->n && (uint64_t)k > (1u << 24) / b.u.l->n) cmf__jx_fail(x, at, "list repetition too large");
            jv out = cmf__jv_list_new(x, 0);
            for (int64_t i = 0; i < k; i++)
                for (size_t j = 0; j < b.u.l->n; j++) cmf__jl_push(x, out.u.l, b.u.l->v[j]);
            return out;
        }
        bad_operands(x, at, "*", a, b);
    case JOP_DIV:
        if (nums) {
            if (jv_num(b) == 0) cmf__jx_fail(x, at, "division by zero");
            return jv_float(jv_num(a) / jv_num(b));
        }
        bad_operands(x, at, "/", a, b);
    case JOP_FLOORDIV:
        if (ints) {
            int64_t p = ival(a), q = ival(b);
            if (q == 0) cmf__jx_fail(x, at, "integer division or modulo by zero");
            if (p == INT64_MIN && q == -1) cmf__jx_fail(x, at, "integer overflow");
            int64_t d = p / q;
            if ((p % q != 0) && ((p < 0) != (q < 0))) d--;
            return jv_int(d);
        }
        if (nums) {
            if (jv_num(b) == 0) cmf__jx_fail(x, at, "float floor division by zero");
            return jv_float(floor(jv_num(a) / jv_num(b)));
        }
        bad_operands(x, at, "//", a, b);
    case JOP_MOD:
        if (ints) {
            int64_t p = ival(a), q = ival(b);
            if (q == 0) cmf__jx_fail(x, at, "integer division or modulo by zero");
            if (q == -1) return jv_int(0);
            int64_t m = p % q;
            if (m != 0 && ((m < 0) != (q < 0))) m += q;
            return jv_int(m);
        }
        if (nums) {
            double p = jv_num(a), q = jv_num(b);
            if (q == 0) cmf__jx_fail(x, at, "float modulo");
            double m = fmod(p, q);
            if (m != 0 && ((m < 0) != (q < 0))) m += q;
            return jv_float(m);
        }
        if (a.t == JV_STR) return printf_format(x, at, a, b);
        bad_operands(x, at, "%", a, b);
    case JOP_POW:
        if (ints && ival(b) >= 0) {
            int64_t base = ival(a), e = ival(b), res = 1;
            while (e-- > 0)
                if (__builtin_mul_overflow(res, base, &res)) cmf__jx_fail(x, at, "integer overflow");
            return jv_int(res);
        }
        if (nums) return jv_float(pow(jv_num(a), jv_num(b)));
        bad_operands(x, at, "** or pow()", a, b);
    default: cmf__jx_fail(x, at, "unknown operator");
    }
}

static bool contains(jctx *x, const jnode *at, jv item, jv container)
{
    switch (container.t) {
    case JV_STR:
        if (item.t != JV_STR)
            cmf__jx_fail(x, at, "'in <string>' requires string as left operand, not %s", cmf__jv_type_name(item));
        if (item.u.s.n == 0) return true;
        if (item.u.s.n > container.u.s.n) return false;
        return memmem(container.u.s.p, container.u.s.n, item.u.s.p, item.u.s.n) != NULL;
    case JV_LIST:
        for (size_t i = 0; i < container.u.l->n; i++)
            if (cmf__jv_equal(x, container.u.l->v[i], item)) return true;
        return false;
    case JV_DICT:
        if (container.u.d->is_ns) break;
        if (item.t == JV_LIST || item.t == JV_DICT) cmf__jx_fail(x, at, "unhashable type: '%s'", cmf__jv_type_name(item));
        return cmf__jd_get(x, container.u.d, item) != NULL;
    case JV_UNDEF: return false;
    default: break;
    }
    cmf__jx_fail(x, at, "argument of type '%s' is not iterable", cmf__jv_type_name(container));
}

static bool compare_op(jctx *x, const jnode *at, int op, jv a, jv b)
{
    switch (op) {
    case JOP_EQ: return cmf__jv_equal(x, a, b);
    case JOP_NE: return !cmf__jv_equal(x, a, b);
    case JOP_IN: return contains(x, at, a, b);
    case JOP_NOTIN: return !contains(x, at, a, b);
    default: break;
    }
    if (a.t == JV_UNDEF) fail_undef(x, at, a);
    if (b.t == JV_UNDEF) fail_undef(x, at, b);
    if (!((jv_is_num(a) && jv_is_num(b)) || (a.t == JV_STR && b.t == JV_STR) || (a.t == JV_LIST && b.t == JV_LIST))) {
        const char *sym = op == JOP_LT ? "<" : op == JOP_LE ? "<=" : op == JOP_GT ? ">" : ">=";
        cmf__jx_fail(x, at, "'%s' not supported between instances of '%s' and '%s'", sym, cmf__jv_type_name(a), cmf__jv_type_name(b));
    }
    int c = cmf__jv_compare(x, at, a, b);
    switch (op) {
    case JOP_LT: return c < 0;
    case JOP_LE: return c <= 0;
    case JOP_GT: return c > 0;
    default: return c >= 0;
    }
}

/* ---- evaluation ----------------------------------------------------------------- */
static void eval_args(jctx *x, jframe *f, const jnode *n, jargs *a)
{
    a->n_pos = n->n_kids;
    a->pos = n->n_kids ? cmf__jx_alloc(x, n->n_kids * sizeof(jv)) : NULL;
    for (size_t i = 0; i < n->n_kids; i++) a->pos[i] = cmf__jx_eval(x, f, n->kids[i]);
    a->n_kw = n->n_kw;
    a->kw_name = n->kw_name;
    a->kw_len = n->kw_len;
    a->kw_val = n->n_kw ? cmf__jx_alloc(x, n->n_kw * sizeof(jv)) : NULL;
    for (size_t i = 0; i < n->n_kw; i++) a->kw_val[i] = cmf__jx_eval(x, f, n->kw_val[i]);
}

/* Applies a chain of N_FILTER nodes whose innermost input is NULL to `input`. */
static jv apply_filter_chain(jctx *x, jframe *f, const jnode *n, jv input)
{
    jv v = n->a ? apply_filter_chain(x, f, n->a, input) : input;
    jargs a;
    eval_args(x, f, n, &a);
    return cmf__jx_filter(x, f, n, n->name, n->name_len, v, &a);
}

static jv call_macro(jctx *x, const jnode *at, jfunc *fn, jargs *a, jv caller);

jv cmf__jx_call(jctx *x, jframe *f, const jnode *at, jv callee, jv *args, size_t n_args,
           const char **kw_name, const size_t *kw_len, jv *kw_val, size_t n_kw)
{
    (void)f;
    jargs a = {args, n_args, kw_name, kw_len, kw_val, n_kw};
    if (callee.t == JV_UNDEF) {
        if (callee.flag & JVF_UNSAFE) cmf__jx_fail(x, at, "%s", callee.u.s.p);
        fail_undef(x, at, callee);
    }
    if (callee.t != JV_FUNC) cmf__jx_fail(x, at, "'%s' object is not callable", cmf__jv_type_name(callee));
    jfunc *fn = callee.u.fn;
    switch (fn->kind) {
    case FN_GLOBAL: return cmf__jx_global_call(x, at, fn, &a);
    case FN_METHOD: return cmf__jx_method_call(x, at, fn, &a);
    case FN_MACRO: case FN_CALLER: return call_macro(x, at, fn, &a, jv_undef(NULL));
    default: cmf__jx_fail(x, at, "object is not callable");
    }
}

static jv eval_call(jctx *x, jframe *f, const jnode *n)
{
    jv callee = cmf__jx_eval(x, f, n->a);
    jargs a;
    eval_args(x, f, n, &a);
    return cmf__jx_call(x, f, n, callee, a.pos, a.n_pos, a.kw_name, a.kw_len, a.kw_val, a.n_kw);
}

static jv eval_node(jctx *x, jframe *f, const jnode *n);

/* Counts the nesting: the parser bounds one tree's depth, macro calls
 * could still stack trees on top of each other. */
jv cmf__jx_eval(jctx *x, jframe *f, const jnode *n)
{
    if (++x->eval_depth > x->eval_depth_limit)
        cmf__jx_fail(x, n, "expressions nested deeper than %d (counting through macro calls)", x->eval_depth_limit);
    jv v = eval_node(x, f, n);
    x->eval_depth--;
    return v;
}

static jv eval_node(jctx *x, jframe *f, const jnode *n)
{
    cmf__jx_step(x, n);
    switch (n->kind) {
    case N_LIT: return n->lit;
    case N_NAME: {
        bool found;
        jv v = cmf__jx_lookup(f, n->name, n->name_len, &found);
        if (found) return v;
        if (cmf__jx_global_lookup(n->name, n->name_len, &v, x)) return v;
        return jv_undef(hintf(x, "'%.*s' is undefined%.*s", n->name, n->name_len, "", 0));
    }
    case N_LIST: case N_TUPLE: {
        jv l = cmf__jv_list_new(x, n->n_kids);
        for (size_t i = 0; i < n->n_kids; i++) cmf__jl_push(x, l.u.l, cmf__jx_eval(x, f, n->kids[i]));
        if (n->kind == N_TUPLE) l.flag = JVF_TUPLE;
        return l;
    }
    case N_DICT: {
        jv d = cmf__jv_dict_new(x, n->n_kids / 2);
        for (size_t i = 0; i + 1 < n->n_kids; i += 2) {
            jv k = cmf__jx_eval(x, f, n->kids[i]);
            if (k.t == JV_LIST || k.t == JV_DICT || k.t == JV_UNDEF)
                cmf__jx_fail(x, n->kids[i], "unhashable type: '%s'", cmf__jv_type_name(k));
            cmf__jd_set(x, d.u.d, k, cmf__jx_eval(x, f, n->kids[i + 1]));
        }
        return d;
    }
    case N_ATTR: return cmf__jx_getattr(x, n, cmf__jx_eval(x, f, n->a), n->name, n->name_len);
    case N_ITEM: {
        jv obj = cmf__jx_eval(x, f, n->a);
        return cmf__jx_getitem(x, n, obj, cmf__jx_eval(x, f, n->b));
    }
    case N_SLICE: {
        jv obj = cmf__jx_eval(x, f, n->a);
        jv s = n->b ? cmf__jx_eval(x, f, n->b) : jv_none();
        jv e = n->c ? cmf__jx_eval(x, f, n->c) : jv_none();
        jv st = n->d ? cmf__jx_eval(x, f, n->d) : jv_none();
        return do_slice(x, n, obj, s, e, st);
    }
    case N_CALL: return eval_call(x, f, n);
    case N_FILTER: {
        jv v = cmf__jx_eval(x, f, n->a);
        jargs a;
        eval_args(x, f, n, &a);
        return cmf__jx_filter(x, f, n, n->name, n->name_len, v, &a);
    }
    case N_TEST: {
        jv v = cmf__jx_eval(x, f, n->a);
        jargs a;
        eval_args(x, f, n, &a);
        return jv_bool(cmf__jx_test(x, f, n, n->name, n->name_len, v, &a));
    }
    case N_NOT: return jv_bool(!cmf__jv_truthy(cmf__jx_eval(x, f, n->a)));
    case N_NEG: case N_POS: {
        jv v = cmf__jx_eval(x, f, n->a);
        if (v.t == JV_INT || v.t == JV_BOOL) {
            int64_t i = ival(v);
            if (n->kind == N_POS) return jv_int(i);
            if (i == INT64_MIN) cmf__jx_fail(x, n, "integer overflow");
            return jv_int(-i);
        }
        if (v.t == JV_FLOAT) return jv_float(n->kind == N_NEG ? -v.u.f : v.u.f);
        if (v.t == JV_UNDEF) fail_undef(x, n, v);
        cmf__jx_fail(x, n, "bad operand type for unary %c: '%s'", n->kind == N_NEG ? '-' : '+', cmf__jv_type_name(v));
    }
    case N_BINOP: {
        jv a = cmf__jx_eval(x, f, n->a);
        jv b = cmf__jx_eval(x, f, n->b);
        return arith(x, n, n->op, a, b);
    }
    case N_COMPARE: {
        jv left = cmf__jx_eval(x, f, n->kids[0]);
        for (size_t i = 1; i < n->n_kids; i++) {
            jv right = cmf__jx_eval(x, f, n->kids[i]);
            if (!compare_op(x, n, n->ops[i - 1], left, right)) return jv_bool(false);
            left = right;
        }
        return jv_bool(true);
    }
    case N_AND: {
        jv a = cmf__jx_eval(x, f, n->a);
        return cmf__jv_truthy(a) ? cmf__jx_eval(x, f, n->b) : a;
    }
    case N_OR: {
        jv a = cmf__jx_eval(x, f, n->a);
        return cmf__jv_truthy(a) ? a : cmf__jx_eval(x, f, n->b);
    }
    case N_COND:
        if (cmf__jv_truthy(cmf__jx_eval(x, f, n->b))) return cmf__jx_eval(x, f, n->a);
        return n->c ? cmf__jx_eval(x, f, n->c) : jv_undef("the inline if-expression evaluated to false and no else section was defined.");
    case N_CONCAT: {
        cmf__buf b = {0};
        for (size_t i = 0; i < n->n_kids; i++) {
            jv v = cmf__jx_eval(x, f, n->kids[i]);
            cmf__jv_str_into(x, &b, v);
        }
        return cmf__jx_buf_take(x, &b);
    }
    default: cmf__jx_fail(x, n, "statement used as an expression");
    }
}

/* ---- statements -------------------------------------------------------------------- */
static void out_value(jctx *x, jv v)
{
    if (v.t == JV_STR) cmf__jx_buf_put(x, &x->out, v.u.s.p, v.u.s.n);
    else cmf__jv_str_into(x, &x->out, v);
}

/* Runs `body` with x->out redirected; returns the text. */
static jv capture(jctx *x, jframe *f, const jnode *body)
{
    cmf__buf saved = x->out;
    memset(&x->out, 0, sizeof x->out);
    cmf__jx_exec_body(x, f, body);
    jv s = cmf__jx_buf_take(x, &x->out);
    x->out = saved;
    return s;
}

static jv call_macro(jctx *x, const jnode *at, jfunc *fn, jargs *a, jv caller)
{
    const jnode *m = fn->node;
    if (++x->depth > x->depth_limit) cmf__jx_fail(x, at, "macro calls nested deeper than %d", x->depth_limit);
    jframe *mf = cmf__jx_frame_new(x, fn->closure);
    size_t n_params = m->n_kids;
    if (a->n_pos > n_params)
        cmf__jx_fail(x, at, "macro '%.*s' takes not more than %zu argument(s)", (int)fn->name_len, fn->name, n_params);
    for (size_t i = 0; i < n_params; i++) {
        const jnode *p = m->kids[i];
        jv v = jv_undef(NULL);
        bool set = false;
        if (i < a->n_pos) {
            v = a->pos[i];
            set = true;
        }
        for (size_t k = 0; k < a->n_kw; k++)
            if (a->kw_len[k] == p->name_len && memcmp(a->kw_name[k], p->name, p->name_len) == 0) {
                if (set) cmf__jx_fail(x, at, "macro '%.*s' got multiple values for argument '%.*s'", (int)fn->name_len,
                                 fn->name, (int)p->name_len, p->name);
                v = a->kw_val[k];
                set = true;
            }
        if (!set) {
            for (size_t k = 0; k < m->n_kw; k++)
                if (m->kw_len[k] == p->name_len && memcmp(m->kw_name[k], p->name, p->name_len) == 0) {
                    v = cmf__jx_eval(x, mf, m->kw_val[k]);
                    set = true;
                }
            if (!set) v = jv_undef(hintf(x, "parameter '%.*s' was not provided%.*s", p->name, p->name_len, "", 0));
        }
        cmf__jx_frame_set(x, mf, p->name, p->name_len, v);
    }
    for (size_t k = 0; k < a->n_kw; k++) {
        bool known = false;
        for (size_t i = 0; i < n_params; i++)
            if (a->kw_len[k] == m->kids[i]->name_len && memcmp(a->kw_name[k], m->kids[i]->name, a->kw_len[k]) == 0)
                known = true;
        if (!known && fn->kind == FN_MACRO)
            cmf__jx_fail(x, at, "macro '%.*s' takes no keyword argument '%.*s'", (int)fn->name_len, fn->name,
                    (int)a->kw_len[k], a->kw_name[k]);
    }
    if (caller.t == JV_FUNC) cmf__jx_frame_set(x, mf, "caller", 6, caller);
    int saved_ctl = x->ctl;
    x->ctl = 0;
    jv r = capture(x, mf, m->b);
    x->ctl = saved_ctl;
    x->depth--;
    return r;
}

static void assign(jctx *x, jframe *f, const jnode *target, jv v)
{
    if (target->kind == N_NAME) {
        cmf__jx_frame_set(x, f, target->name, target->name_len, v);
        return;
    }
    if (target->kind == N_ATTR) {
        bool found;
        jv ns = cmf__jx_lookup(f, target->a->name, target->a->name_len, &found);
        if (!found || ns.t != JV_DICT || !ns.u.d->is_ns)
            cmf__jx_fail(x, target, "cannot assign attribute on non-namespace object");
        cmf__jd_set(x, ns.u.d, jv_str(target->name, target->name_len), v);
        return;
    }
    /* tuple unpacking */
    if (v.t != JV_LIST) cmf__jx_fail(x, target, "cannot unpack non-iterable %s object", cmf__jv_type_name(v));
    if (v.u.l->n != target->n_kids)
        cmf__jx_fail(x, target, "%s values to unpack (expected %zu, got %zu)",
                v.u.l->n > target->n_kids ? "too many" : "not enough", target->n_kids, v.u.l->n);
    for (size_t i = 0; i < target->n_kids; i++) assign(x, f, target->kids[i], v.u.l->v[i]);
}

static void exec_for(jctx *x, jframe *f, const jnode *n)
{
    jv seq = cmf__jx_eval(x, f, n->b);
    jlist *items = cmf__jx_iter_items(x, n->b, seq).u.l;
    jframe *lf = cmf__jx_frame_new(x, f);
    if (n->e) {
        /* `for x in xs if cond`: filter first; loop.* counts the kept items */
        jv kept = cmf__jv_list_new(x, items->n);
        for (size_t i = 0; i < items->n; i++) {
            assign(x, lf, n->a, items->v[i]);
            if (cmf__jv_truthy(cmf__jx_eval(x, lf, n->e))) cmf__jl_push(x, kept.u.l, items->v[i]);
        }
        items = kept.u.l;
    }
    /* no snapshot needed: lists are never mutated (the sandbox blocks append & co.) */
    jloop *lp = cmf__jx_alloc(x, sizeof(jloop));
    lp->items = items;
    jv loopv = {.t = JV_LOOP};
    loopv.u.loop = lp;
    for (size_t i = 0; i < items->n; i++) {
        cmf__jx_step(x, n);
        lp->index0 = i;
        assign(x, lf, n->a, items->v[i]);
        cmf__jx_frame_set(x, lf, "loop", 4, loopv);
        cmf__jx_exec_body(x, lf, n->c);
        if (x->ctl == 1) {
            x->ctl = 0;
            break;
        }
        x->ctl = 0;
    }
    if (items->n == 0 && n->d) cmf__jx_exec_body(x, f, n->d);
}

static void exec_stmt(jctx *x, jframe *f, const jnode *n)
{
    cmf__jx_step(x, n);
    switch (n->kind) {
    case N_TEXT: cmf__jx_buf_put(x, &x->out, n->lit.u.s.p, n->lit.u.s.n); return;
    case N_OUTPUT: out_value(x, cmf__jx_eval(x, f, n->a)); return;
    case N_BODY: cmf__jx_exec_body(x, f, n); return;
    case N_IF:
        if (cmf__jv_truthy(cmf__jx_eval(x, f, n->a))) cmf__jx_exec_body(x, f, n->b);
        else if (n->c) exec_stmt(x, f, n->c);
        return;
    case N_FOR: exec_for(x, f, n); return;
    case N_SET: assign(x, f, n->a, cmf__jx_eval(x, f, n->b)); return;
    case N_SETBLOCK: {
        jv s = capture(x, f, n->b);
        if (n->c) s = apply_filter_chain(x, f, n->c, s);
        assign(x, f, n->a, s);
        return;
    }
    case N_MACRO: {
        jfunc *fn = cmf__jx_alloc(x, sizeof(jfunc));
        fn->kind = FN_MACRO;
        fn->name = n->name;
        fn->name_len = n->name_len;
        fn->node = n;
        fn->closure = f;
        jv v = {.t = JV_FUNC};
        v.u.fn = fn;
        cmf__jx_frame_set(x, f, n->name, n->name_len, v);
        return;
    }
    case N_CALLBLOCK: {
        jfunc *cf = cmf__jx_alloc(x, sizeof(jfunc));
        cf->kind = FN_CALLER;
        cf->name = "caller";
        cf->name_len = 6;
        cf->node = n;
        cf->closure = f;
        jv cv = {.t = JV_FUNC};
        cv.u.fn = cf;
        const jnode *call = n->a;
        jv callee = cmf__jx_eval(x, f, call->a);
        jargs a;
        eval_args(x, f, call, &a);
        if (callee.t != JV_FUNC || callee.u.fn->kind != FN_MACRO) {
            out_value(x, cmf__jx_call(x, f, call, callee, a.pos, a.n_pos, a.kw_name, a.kw_len, a.kw_val, a.n_kw));
            return;
        }
        out_value(x, call_macro(x, call, callee.u.fn, &a, cv));
        return;
    }
    case N_FILTERBLOCK: {
        jv s = capture(x, f, n->b);
        out_value(x, apply_filter_chain(x, f, n->a, s));
        return;
    }
    case N_BREAK: x->ctl = 1; return;
    case N_CONTINUE: x->ctl = 2; return;
    case N_WITH: {
        jframe *wf = cmf__jx_frame_new(x, f);
        for (size_t i = 0; i < n->n_kw; i++)
            cmf__jx_frame_set(x, wf, n->kw_name[i], n->kw_len[i], cmf__jx_eval(x, f, n->kw_val[i]));
        cmf__jx_exec_body(x, wf, n->b);
        return;
    }
    default: out_value(x, cmf__jx_eval(x, f, n)); return;
    }
}

void cmf__jx_exec_body(jctx *x, jframe *f, const jnode *body)
{
    if (++x->depth > x->depth_limit) cmf__jx_fail(x, body, "template nested deeper than %d", x->depth_limit);
    for (size_t i = 0; i < body->n_kids && !x->ctl; i++) exec_stmt(x, f, body->kids[i]);
    x->depth--;
}
