/* jinja.h — internals of the chat-template interpreter shared by
 * jinja_value.c (values, arena, str/repr/tojson), jinja_parse.c (lexer and
 * parser to an AST), jinja_eval.c (statements and expressions),
 * jinja_builtins.c (filters, tests, dict/list methods, globals) and
 * jinja_str.c (Python str methods and operations). Everything a render
 * allocates lives in one arena freed at its end; errors unwind with longjmp
 * to the render (or compile) entry point, so no partial state escapes.
 * Functions shared across these files carry the cmf__ prefix, so that a
 * static link never meets a user's own jv_/jx_ names (tests/cli/symbols.sh). */
#ifndef CMF_TEXT_JINJA_H
#define CMF_TEXT_JINJA_H

#include "cmf.h"
#include "util/buf.h"
#include <jansson.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- limits ------------------------------------------------------------ */
/* No template may exhaust the C stack. The parser's tree check rejects a
 * tree deeper than JINJA_MAX_DEPTH (chains such as 1+1+... or x|f|f... are
 * parsed by loops, so their depth is bounded there); the evaluator counts
 * the expressions it is inside, across macro calls, against
 * jctx.eval_depth_limit, and bodies and macro calls against depth_limit. */
#define JINJA_MAX_DEPTH 1000

/* ---- arena ------------------------------------------------------------- */
typedef struct jchunk {
    struct jchunk *next;
    size_t used, cap;
    /* payload follows, max-aligned */
} jchunk;

typedef struct jarena {
    jchunk *head;
    size_t total, limit;   /* bytes handed out; failing past limit */
} jarena;

/* ---- values ------------------------------------------------------------ */
typedef enum jv_type {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT,
    JV_FUNC, JV_LOOP
} jv_type;

#define JVF_TUPLE 1   /* list printed as a tuple */
#define JVF_UNSAFE 2  /* undefined from a sandbox-blocked attribute */
#define JVF_GEN 4     /* list standing for a Python generator (map, select, ...):
                       * always true, no len(), not JSON serializable */
#define JVF_SAFE 8    /* str that is a markupsafe.Markup (|safe, |e): `+` escapes
                       * the other operand, as Markup.__add__ does */

struct jlist;
struct jdict;
struct jfunc;
struct jloop;

typedef struct jv {
    uint8_t t, flag;
    union {
        bool b;
        int64_t i;
        double f;
        struct { const char *p; size_t n; } s;  /* JV_STR; JV_UNDEF: hint (p may be NULL) */
        struct jlist *l;
        struct jdict *d;
        struct jfunc *fn;
        struct jloop *loop;
    } u;
} jv;

typedef struct jlist { size_t n, cap; jv *v; } jlist;
typedef struct jdict { size_t n, cap; jv *k, *v; bool is_ns; } jdict;

/* ---- AST --------------------------------------------------------------- */
typedef enum jn_kind {
    /* expressions */
    N_LIT, N_NAME, N_LIST, N_TUPLE, N_DICT, N_ATTR, N_ITEM, N_SLICE, N_CALL,
    N_FILTER, N_TEST, N_NOT, N_NEG, N_POS, N_BINOP, N_COMPARE, N_AND, N_OR,
    N_COND, N_CONCAT,
    /* statements */
    N_BODY, N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO,
    N_CALLBLOCK, N_FILTERBLOCK, N_BREAK, N_CONTINUE, N_WITH
} jn_kind;

typedef struct jnode jnode;
struct jnode {
    uint8_t kind;
    uint8_t op;           /* N_BINOP: operator char code (see JOP_*); N_TEST: negated */
    uint8_t flag;
    int line, col;
    const char *name;     /* identifier, attribute, filter or test name */
    size_t name_len;
    jv lit;               /* N_LIT, N_TEXT */
    jnode *a, *b, *c, *d, *e;
    jnode **kids;         /* args, items, statements, compare operands */
    size_t n_kids;
    uint8_t *ops;         /* N_COMPARE: n_kids - 1 operators */
    const char **kw_name; /* keyword arguments (call, filter, test, macro defaults) */
    size_t *kw_len;
    jnode **kw_val;
    size_t n_kw;
};

enum {
    JOP_ADD = '+', JOP_SUB = '-', JOP_MUL = '*', JOP_DIV = '/', JOP_FLOORDIV = 'f',
    JOP_MOD = '%', JOP_POW = 'p',
    JOP_EQ = '=', JOP_NE = '!', JOP_LT = '<', JOP_LE = 'l', JOP_GT = '>', JOP_GE = 'g',
    JOP_IN = 'i', JOP_NOTIN = 'n'
};

/* ---- compiled template -------------------------------------------------- */
struct cmf__template {
    jarena arena;         /* AST and literal strings */
    char *src;            /* normalized source (newlines, trailing newline) */
    size_t src_len;
    jnode *root;          /* N_BODY */
};

/* ---- render state -------------------------------------------------------- */
typedef struct jframe {
    struct jframe *parent;
    size_t n, cap;
    const char **name;
    size_t *len;
    jv *val;
} jframe;

typedef struct jloop {
    jlist *items;         /* the iterated (filtered) sequence */
    size_t index0;
    struct jloop *outer;
} jloop;

enum jfunc_kind { FN_GLOBAL, FN_METHOD, FN_MACRO, FN_CALLER, FN_FILTER_REF };

typedef struct jfunc {
    int kind;
    int id;               /* FN_GLOBAL: global id; FN_METHOD: method id */
    const char *name;
    size_t name_len;
    jv self;              /* FN_METHOD: receiver */
    const jnode *node;    /* FN_MACRO: the N_MACRO node; FN_CALLER: N_CALLBLOCK */
    jframe *closure;      /* frame the macro / caller body sees */
    jv caller;            /* FN_MACRO invoked from a call block: its caller() */
} jfunc;

typedef struct jctx {
    jarena arena;
    jmp_buf jmp;
    char err[1024];
    cmf_status err_status;
    cmf__buf out;         /* the render */
    size_t out_limit;
    uint64_t steps, step_limit;
    int depth, depth_limit;          /* nested bodies and macro calls */
    int eval_depth, eval_depth_limit; /* nested expression evaluations */
    int ctl;              /* 1 break, 2 continue pending */
    const struct cmf__template *tpl;
    jframe *globals;
} jctx;

/* Value constructors and numeric views (inline: the interpreter's hot path). */
static inline jv jv_undef(const char *hint) { jv v = {.t = JV_UNDEF}; v.u.s.p = hint; return v; }
static inline jv jv_none(void) { jv v = {.t = JV_NONE}; return v; }
static inline jv jv_bool(bool b) { jv v = {.t = JV_BOOL}; v.u.b = b; return v; }
static inline jv jv_int(int64_t i) { jv v = {.t = JV_INT}; v.u.i = i; return v; }
static inline jv jv_float(double f) { jv v = {.t = JV_FLOAT}; v.u.f = f; return v; }
/* borrows p: it must outlive the render */
static inline jv jv_str(const char *p, size_t n) { jv v = {.t = JV_STR}; v.u.s.p = p ? p : ""; v.u.s.n = n; return v; }
static inline bool jv_is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static inline double jv_num(jv v)
{
    return v.t == JV_INT ? (double)v.u.i : v.t == JV_FLOAT ? v.u.f : v.t == JV_BOOL ? (double)v.u.b : 0.0;
}

/* ---- jinja_value.c ------------------------------------------------------- */
void *cmf__ja_alloc(jarena *a, size_t n);            /* NULL past the limit or on OOM */
void cmf__ja_free(jarena *a);
void *cmf__jx_alloc(jctx *x, size_t n);              /* fails the render instead of NULL */
void *cmf__jx_alloc_raw(jctx *x, size_t n);          /* same, not zeroed (text bytes) */
_Noreturn void cmf__jx_fail(jctx *x, const jnode *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
_Noreturn void cmf__jx_fail_status(jctx *x, cmf_status st, const jnode *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void cmf__jx_step(jctx *x, const jnode *at);         /* counts work; fails past the limit */

jv cmf__jv_strdup(jctx *x, const char *p, size_t n); /* copies into the arena */
jv cmf__jv_list_new(jctx *x, size_t cap);
jv cmf__jv_dict_new(jctx *x, size_t cap);
void cmf__jl_push(jctx *x, jlist *l, jv v);
void cmf__jd_set(jctx *x, jdict *d, jv k, jv v);     /* replaces an equal key in place */
jv *cmf__jd_get(jctx *x, const jdict *d, jv k);      /* NULL when absent */
jv *cmf__jd_get_str(const jdict *d, const char *k, size_t n);
jv cmf__jv_from_json(jctx *x, const json_t *j);

bool cmf__jv_truthy(jv v);
bool cmf__jv_equal(jctx *x, jv a, jv b);              /* Python ==; fails past 200 levels of nesting */
/* -1/0/1; fails the render for unorderable types (Python TypeError). */
int cmf__jv_compare(jctx *x, const jnode *at, jv a, jv b);
const char *cmf__jv_type_name(jv v);                 /* Python's type name: "str", "dict", ... */

/* Python str() of v appended to b (repr for containers). */
void cmf__jv_str_into(jctx *x, cmf__buf *b, jv v);
void cmf__jv_repr_into(jctx *x, cmf__buf *b, jv v);
jv cmf__jv_to_str(jctx *x, jv v);                     /* str(v) as a JV_STR */
jv cmf__jv_html_escape(jctx *x, jv s);               /* markupsafe.escape: & < > " ' */
/* json.dumps(v, ensure_ascii, indent (<0: None), separators item/key, sort_keys) */
void cmf__jv_json_into(jctx *x, const jnode *at, cmf__buf *b, jv v, int indent,
                  const char *item_sep, const char *key_sep, bool sort_keys,
                  bool ensure_ascii, int level);
void cmf__jx_float_repr(double f, char *out, size_t cap); /* Python repr(float) */
void cmf__jx_buf_put(jctx *x, cmf__buf *b, const char *p, size_t n);
jv cmf__jx_buf_take(jctx *x, cmf__buf *b);            /* moves the text into the arena as a JV_STR */

/* UTF-8 helpers (invalid bytes count as one code point each). */
size_t cmf__ju_len(const char *p, size_t n);          /* code points */
size_t cmf__ju_next(const char *p, size_t n, size_t i, int32_t *cp);  /* next offset */
size_t cmf__ju_offset(const char *p, size_t n, size_t cp_index);      /* byte offset of a code point */
bool cmf__ju_isspace(int32_t cp);
void cmf__ju_put(jctx *x, cmf__buf *b, int32_t cp);

/* ---- jinja_parse.c ---------------------------------------------------------- */
/* Parses t->src into t->root; on failure sets the message and returns
 * CMF_ERR_TEMPLATE (or CMF_ERR_NOMEM). */
cmf_status cmf__jinja_parse(struct cmf__template *t);

/* ---- jinja_eval.c ------------------------------------------------------------ */
jv cmf__jx_eval(jctx *x, jframe *f, const jnode *n);
void cmf__jx_exec_body(jctx *x, jframe *f, const jnode *body); /* writes to x->out */
jv cmf__jx_call(jctx *x, jframe *f, const jnode *at, jv callee, jv *args, size_t n_args,
           const char **kw_name, const size_t *kw_len, jv *kw_val, size_t n_kw);
jv cmf__jx_getattr(jctx *x, const jnode *at, jv obj, const char *name, size_t n);
jv cmf__jx_getitem(jctx *x, const jnode *at, jv obj, jv key);
jframe *cmf__jx_frame_new(jctx *x, jframe *parent);
void cmf__jx_frame_set(jctx *x, jframe *f, const char *name, size_t n, jv v);
jv cmf__jx_lookup(jframe *f, const char *name, size_t n, bool *found);

/* ---- jinja_builtins.c ---------------------------------------------------------- */
/* Arguments as evaluated: positional and keyword. */
typedef struct jargs {
    jv *pos;
    size_t n_pos;
    const char **kw_name;
    const size_t *kw_len;
    jv *kw_val;
    size_t n_kw;
} jargs;

/* Argument `i` positionally or by keyword `kw` (may be NULL), else `def`. */
jv cmf__jx_arg(jargs *a, size_t i, const char *kw, jv def);
/* The value when it is a str / an int (or bool); else fails "<what> must be ...". */
jv cmf__jx_need_str(jctx *x, const jnode *at, jv v, const char *what);
int64_t cmf__jx_need_int(jctx *x, const jnode *at, jv v, const char *what);
/* The items a for loop or a filter walks: list items, dict keys, string
 * characters (undefined: none); fails for what is not iterable. */
jv cmf__jx_iter_items(jctx *x, const jnode *at, jv v);

jv cmf__jx_filter(jctx *x, jframe *f, const jnode *at, const char *name, size_t n, jv value, jargs *a);
bool cmf__jx_test(jctx *x, jframe *f, const jnode *at, const char *name, size_t n, jv value, jargs *a);
/* Method of a str/dict/list receiver; JV_UNDEF (with hint) when none. */
jv cmf__jx_method_lookup(jctx *x, jv self, const char *name, size_t n);
jv cmf__jx_method_call(jctx *x, const jnode *at, jfunc *fn, jargs *a);
/* Template globals: range, namespace, dict, raise_exception, strftime_now, ... */
bool cmf__jx_global_lookup(const char *name, size_t n, jv *out, jctx *x);
jv cmf__jx_global_call(jctx *x, const jnode *at, jfunc *fn, jargs *a);
jv cmf__jx_loop_attr(jctx *x, jloop *l, const char *name, size_t n);
/* Whether a filter / test of this name exists (jinja2 checks at compile time). */
bool cmf__jx_filter_known(const char *name, size_t n);
bool cmf__jx_test_known(const char *name, size_t n);

/* ---- jinja_str.c ------------------------------------------------------------------ */
/* A method table entry: a NULL fn names a method that exists but fails when called. */
typedef struct jmethod {
    const char *name;
    jv (*fn)(jctx *x, const jnode *at, jv self, jargs *a);
} jmethod;
extern const jmethod cmf__jx_str_methods[];   /* ends with a NULL name */

jv cmf__js_case(jctx *x, jv s, int mode);             /* 0 lower, 1 upper (str.lower/upper) */
jv cmf__js_capitalize(jctx *x, jv s);                 /* str.capitalize */
jv cmf__js_title_words(jctx *x, jv s);                /* jinja2's title filter */
/* str.strip with chars (none/undefined: whitespace); which: 1 left, 2 right, 3 both */
jv cmf__js_strip(jctx *x, const jnode *at, jv s, jv chars, int which);
jv cmf__js_replace(jctx *x, jv s, jv old, jv new_, int64_t count);  /* count < 0: all */
/* str.split / str.rsplit (right); sep none/undefined: runs of whitespace */
jv cmf__js_split(jctx *x, const jnode *at, jv s, jv sep, int64_t maxsplit, bool right);
jv cmf__js_splitlines(jctx *x, jv s, bool keepends);
int cmf__js_case_state(jv s);                         /* | 1: has an upper char, | 2: a lower one */
bool cmf__js_is_alpha(int32_t cp);
bool cmf__js_is_digit(int32_t cp);

#endif
