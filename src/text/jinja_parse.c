/* jinja_parse.c — lexer and recursive-descent parser for the Jinja subset
 * of chat templates, following jinja2 3.1's lexer rules as transformers
 * configures them (trim_blocks, lstrip_blocks, keep_trailing_newline off,
 * loopcontrols, {% generation %}). Produces an AST in the template's arena.
 * Errors unwind with longjmp and name line and column. */
#include "text/jinja.h"
#include "util/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PARSE_MAX_RECURSION 200

typedef enum ttype {
    T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING,
    T_INT, T_FLOAT, T_OP, T_EOF
} ttype;

typedef struct tok {
    uint8_t t;
    int line, col;
    const char *p;  /* T_NAME/T_OP/T_DATA: source text; T_STRING: decoded (arena) */
    size_t n;
    int64_t i;
    double f;
} tok;

typedef struct pctx {
    struct cmf__template *t;
    const char *s;
    size_t len;
    size_t *line_start;
    size_t n_lines;
    tok *toks;
    size_t n_toks, cap_toks, pos;
    int loop_depth;
    int depth;
    jmp_buf jmp;
    char err[512];
    cmf_status st;
} pctx;

static _Noreturn __attribute__((format(printf, 4, 5))) void perr(pctx *P, int line, int col, const char *fmt, ...)
{
    int k = snprintf(P->err, sizeof P->err, "line %d column %d: ", line, col);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(P->err + k, sizeof P->err - (size_t)k, fmt, ap);
    va_end(ap);
    P->st = CMF_ERR_TEMPLATE;
    longjmp(P->jmp, 1);
}

static void *palloc(pctx *P, size_t n)
{
    void *p = cmf__ja_alloc(&P->t->arena, n);
    if (!p) {
        snprintf(P->err, sizeof P->err, "template too large to compile");
        P->st = CMF_ERR_NOMEM;
        longjmp(P->jmp, 1);
    }
    return p;
}

static void where(pctx *P, size_t off, int *line, int *col)
{
    size_t lo = 0, hi = P->n_lines;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (P->line_start[mid] <= off) lo = mid; else hi = mid;
    }
    *line = (int)lo + 1;
    *col = (int)(off - P->line_start[lo]) + 1;
}

static tok *push_tok(pctx *P, ttype t, size_t off, const char *p, size_t n)
{
    if (P->n_toks == P->cap_toks) {
        size_t cap = P->cap_toks ? P->cap_toks * 2 : 256;
        tok *nt = realloc(P->toks, cap * sizeof(tok));
        if (!nt) {
            snprintf(P->err, sizeof P->err, "out of memory lexing the template");
            P->st = CMF_ERR_NOMEM;
            longjmp(P->jmp, 1);
        }
        P->toks = nt;
        P->cap_toks = cap;
    }
    tok *k = &P->toks[P->n_toks++];
    memset(k, 0, sizeof *k);
    k->t = (uint8_t)t;
    where(P, off, &k->line, &k->col);
    k->p = p;
    k->n = n;
    return k;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Emits data [a, b) unless empty. */
static void emit_data(pctx *P, size_t a, size_t b)
{
    if (b > a) push_tok(P, T_DATA, a, P->s + a, b - a);
}

/* jinja2's lstrip_blocks / '-' handling of the text before a tag. */
static size_t strip_before(pctx *P, size_t a, size_t b, char mod, bool lstrip_ok, bool line_starting)
{
    const char *s = P->s;
    if (mod == '-') {
        while (b > a && is_ws(s[b - 1])) b--;
        return b;
    }
    if (mod == '+' || !lstrip_ok) return b;
    size_t l = b;
    while (l > a && s[l - 1] != '\n') l--;
    bool has_nl = l > a;
    if (!has_nl && !line_starting) return b;
    for (size_t i = l; i < b; i++)
        if (!is_ws(s[i])) return b;
    return l;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void put_cp(pctx *P, char *out, size_t *k, uint32_t cp)
{
    (void)P;
    if (cp < 0x80) out[(*k)++] = (char)cp;
    else if (cp < 0x800) { out[(*k)++] = (char)(0xc0 | (cp >> 6)); out[(*k)++] = (char)(0x80 | (cp & 0x3f)); }
    else if (cp < 0x10000) {
        out[(*k)++] = (char)(0xe0 | (cp >> 12)); out[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*k)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        out[(*k)++] = (char)(0xf0 | (cp >> 18)); out[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3f)); out[(*k)++] = (char)(0x80 | (cp & 0x3f));
    }
}

/* A string literal body [a, b) decoded like Python's unicode-escape. */
static void decode_string(pctx *P, tok *k, size_t a, size_t b)
{
    const char *s = P->s;
    char *out = palloc(P, (b - a) + 1);
    size_t n = 0;
    for (size_t i = a; i < b;) {
        if (s[i] != '\\' || i + 1 >= b) {
            out[n++] = s[i++];
            continue;
        }
        char c = s[i + 1];
        i += 2;
        switch (c) {
        case '\n': break;
        case '\\': out[n++] = '\\'; break;
        case '\'': out[n++] = '\''; break;
        case '"': out[n++] = '"'; break;
        case 'a': out[n++] = '\a'; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'v': out[n++] = '\v'; break;
        case 'x': case 'u': case 'U': {
            int want = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (int d = 0; d < want; d++) {
                int h = i + (size_t)d < b ? hexval(s[i + (size_t)d]) : -1;
                if (h < 0) perr(P, k->line, k->col, "truncated \\%c escape in a string", c);
                cp = cp * 16 + (uint32_t)h;
            }
            if (cp > 0x10ffff) perr(P, k->line, k->col, "illegal Unicode character in a string");
            i += (size_t)want;
            put_cp(P, out, &n, cp);
            break;
        }
        default:
            if (c >= '0' && c <= '7') {
                uint32_t cp = (uint32_t)(c - '0');
                for (int d = 0; d < 2 && i < b && s[i] >= '0' && s[i] <= '7'; d++) cp = cp * 8 + (uint32_t)(s[i++] - '0');
                put_cp(P, out, &n, cp);
            } else {
                out[n++] = '\\';
                out[n++] = c;
            }
        }
    }
    out[n] = 0;
    k->p = out;
    k->n = n;
}

static const char *const OPS2[] = {"//", "**", "==", "!=", ">=", "<="};
static const char OPS1[] = "+-/*%~[](){}><=.:|,;";

/* Lexes the inside of a {% %} or {{ }} starting at pos; returns the offset
 * after the end tag (with trim rules applied) and sets *nl when the end
 * consumed a trailing newline. */
static size_t lex_tag(pctx *P, size_t pos, bool block, bool *line_starting)
{
    const char *s = P->s;
    size_t n = P->len;
    int balance = 0;
    size_t open_off = pos;
    for (;;) {
        while (pos < n && is_ws(s[pos])) pos++;
        if (pos >= n) {
            int l, c;
            where(P, open_off, &l, &c);
            perr(P, l, c, "unexpected end of template, expected '%s'", block ? "end of statement block" : "end of print statement");
        }
        if (balance == 0) {
            size_t end = 0;
            bool dash = false, plus = false;
            if (block) {
                if (s[pos] == '-' && pos + 2 < n && s[pos + 1] == '%' && s[pos + 2] == '}') { end = pos + 3; dash = true; }
                else if (s[pos] == '+' && pos + 2 < n && s[pos + 1] == '%' && s[pos + 2] == '}') { end = pos + 3; plus = true; }
                else if (s[pos] == '%' && pos + 1 < n && s[pos + 1] == '}') end = pos + 2;
            } else {
                if (s[pos] == '-' && pos + 2 < n && s[pos + 1] == '}' && s[pos + 2] == '}') { end = pos + 3; dash = true; }
                else if (s[pos] == '}' && pos + 1 < n && s[pos + 1] == '}') end = pos + 2;
            }
            if (end) {
                push_tok(P, block ? T_BLOCK_END : T_VAR_END, pos, s + pos, end - pos);
                if (dash) {
                    while (end < n && is_ws(s[end])) end++;
                } else if (block && !plus && end < n && s[end] == '\n') {
                    end++;
                }
                *line_starting = end > 0 && s[end - 1] == '\n';
                return end;
            }
        }
        char c = s[pos];
        if (is_digit(c)) {
            size_t a = pos;
            bool after_dot = a > 0 && s[a - 1] == '.';
            while (pos < n && (is_digit(s[pos]) || (s[pos] == '_' && pos + 1 < n && is_digit(s[pos + 1])))) pos++;
            bool is_float = false;
            if (!after_dot && pos + 1 < n && s[pos] == '.' && is_digit(s[pos + 1])) {
                is_float = true;
                pos++;
                while (pos < n && (is_digit(s[pos]) || (s[pos] == '_' && pos + 1 < n && is_digit(s[pos + 1])))) pos++;
            }
            if (!after_dot && pos < n && (s[pos] == 'e' || s[pos] == 'E')) {
                size_t q = pos + 1;
                if (q < n && (s[q] == '+' || s[q] == '-')) q++;
                if (q < n && is_digit(s[q])) {
                    is_float = true;
                    pos = q;
                    while (pos < n && (is_digit(s[pos]) || s[pos] == '_')) pos++;
                }
            }
            char buf[128];
            size_t k = 0;
            for (size_t i = a; i < pos && k + 1 < sizeof buf; i++)
                if (s[i] != '_') buf[k++] = s[i];
            buf[k] = 0;
            tok *t = push_tok(P, is_float ? T_FLOAT : T_INT, a, s + a, pos - a);
            errno = 0;
            if (is_float) t->f = strtod(buf, NULL);
            else {
                t->i = strtoll(buf, NULL, 10);
                if (errno == ERANGE) perr(P, t->line, t->col, "integer literal out of range");
            }
            continue;
        }
        if (is_alpha(c)) {
            size_t a = pos;
            while (pos < n && (is_alpha(s[pos]) || is_digit(s[pos]))) pos++;
            push_tok(P, T_NAME, a, s + a, pos - a);
            continue;
        }
        if (c == '\'' || c == '"') {
            size_t a = pos++;
            while (pos < n && s[pos] != c) {
                if (s[pos] == '\\' && pos + 1 < n) pos++;
                pos++;
            }
            if (pos >= n) {
                int l, cc;
                where(P, a, &l, &cc);
                perr(P, l, cc, "unexpected char %s", c == '\'' ? "\"'\"" : "'\"'");
            }
            tok *t = push_tok(P, T_STRING, a, NULL, 0);
            decode_string(P, t, a + 1, pos);
            pos++;
            continue;
        }
        size_t oplen = 0;
        for (size_t i = 0; i < sizeof OPS2 / sizeof OPS2[0]; i++)
            if (pos + 1 < n && s[pos] == OPS2[i][0] && s[pos + 1] == OPS2[i][1]) oplen = 2;
        if (!oplen && c && strchr(OPS1, c)) oplen = 1;
        if (!oplen) {
            int l, cc;
            where(P, pos, &l, &cc);
            perr(P, l, cc, "unexpected char '%c'", c);
        }
        tok *t = push_tok(P, T_OP, pos, s + pos, oplen);
        if (oplen == 1) {
            if (c == '(' || c == '[' || c == '{') balance++;
            else if (c == ')' || c == ']' || c == '}') {
                if (balance == 0) perr(P, t->line, t->col, "unexpected '%c'", c);
                balance--;
            }
        }
        pos += oplen;
    }
}

/* Matches `{%[-+]? raw [-]?%}` at pos; returns end offset or 0. */
static size_t match_raw(pctx *P, size_t pos, const char *word, bool *dash_end, char *mod)
{
    const char *s = P->s;
    size_t n = P->len, wl = strlen(word);
    if (pos + 2 > n || s[pos] != '{' || s[pos + 1] != '%') return 0;
    size_t q = pos + 2;
    *mod = 0;
    if (q < n && (s[q] == '-' || s[q] == '+')) *mod = s[q++];
    while (q < n && is_ws(s[q])) q++;
    if (q + wl > n || memcmp(s + q, word, wl) != 0) return 0;
    q += wl;
    if (q < n && (is_alpha(s[q]) || is_digit(s[q]))) return 0;
    while (q < n && is_ws(s[q])) q++;
    *dash_end = false;
    if (q + 2 < n && s[q] == '-' && s[q + 1] == '%' && s[q + 2] == '}') { *dash_end = true; return q + 3; }
    if (q + 2 < n && s[q] == '+' && s[q + 1] == '%' && s[q + 2] == '}') return q + 3;
    if (q + 1 < n && s[q] == '%' && s[q + 1] == '}') return q + 2;
    return 0;
}

static void lex(pctx *P)
{
    const char *s = P->s;
    size_t n = P->len, pos = 0;
    bool line_starting = true;
    while (pos < n) {
        size_t k = pos;
        while (k + 1 < n && !(s[k] == '{' && (s[k + 1] == '{' || s[k + 1] == '%' || s[k + 1] == '#'))) k++;
        if (k + 1 >= n) {
            emit_data(P, pos, n);
            break;
        }
        char kind = s[k + 1];
        char mod = (k + 2 < n && (s[k + 2] == '-' || s[k + 2] == '+')) ? s[k + 2] : 0;
        size_t tend = strip_before(P, pos, k, mod, kind != '{', line_starting);
        emit_data(P, pos, tend);
        line_starting = false;
        if (kind == '#') {
            size_t q = k + 2 + (mod ? 1 : 0);
            while (q + 1 < n && !(s[q] == '#' && s[q + 1] == '}')) q++;
            if (q + 1 >= n) {
                int l, c;
                where(P, k, &l, &c);
                perr(P, l, c, "missing end of comment tag");
            }
            size_t end = q + 2;
            char emod = q > k + 2 + (mod ? 1 : 0) ? s[q - 1] : 0;
            if (emod == '-') while (end < n && is_ws(s[end])) end++;
            else if (emod != '+' && end < n && s[end] == '\n') end++;
            line_starting = s[end - 1] == '\n';
            pos = end;
            continue;
        }
        if (kind == '%') {
            bool dash;
            char rmod;
            size_t rend = match_raw(P, k, "raw", &dash, &rmod);
            if (rend) {
                size_t body = rend;
                if (dash) while (body < n && is_ws(s[body])) body++;
                size_t q = body, eend = 0;
                char emod = 0;
                bool edash = false;
                for (; q + 1 < n; q++)
                    if (s[q] == '{' && s[q + 1] == '%' && (eend = match_raw(P, q, "endraw", &edash, &emod))) break;
                if (!eend) {
                    int l, c;
                    where(P, k, &l, &c);
                    perr(P, l, c, "missing end of raw directive");
                }
                size_t dend = strip_before(P, body, q, emod, true, false);
                emit_data(P, body, dend);
                /* endraw's end: '-' strips whitespace, else trim_blocks drops one newline */
                if (edash) while (eend < n && is_ws(s[eend])) eend++;
                else if (!(eend >= 3 && s[eend - 3] == '+') && eend < n && s[eend] == '\n') eend++;
                line_starting = s[eend - 1] == '\n';
                pos = eend;
                continue;
            }
        }
        push_tok(P, kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, k, s + k, 2);
        pos = lex_tag(P, k + 2 + (mod ? 1 : 0), kind == '%', &line_starting);
    }
    push_tok(P, T_EOF, n, s + n, 0);
}

/* ---- parser ----------------------------------------------------------------- */
static tok *cur(pctx *P) { return &P->toks[P->pos]; }
static tok *peek(pctx *P, size_t k)
{
    size_t i = P->pos + k;
    return &P->toks[i < P->n_toks ? i : P->n_toks - 1];
}
static bool is_op(const tok *t, const char *op) { return t->t == T_OP && t->n == strlen(op) && memcmp(t->p, op, t->n) == 0; }
static bool is_name(const tok *t, const char *nm) { return t->t == T_NAME && t->n == strlen(nm) && memcmp(t->p, nm, t->n) == 0; }
static tok *advance(pctx *P)
{
    tok *t = cur(P);
    if (P->pos + 1 < P->n_toks) P->pos++;
    return t;
}

static const char *describe(const tok *t, char *buf, size_t cap)
{
    switch (t->t) {
    case T_EOF: return "end of template";
    case T_BLOCK_END: return "end of statement block";
    case T_VAR_END: return "end of print statement";
    case T_BLOCK_BEGIN: return "begin of statement block";
    case T_VAR_BEGIN: return "begin of print statement";
    case T_STRING: return "string";
    case T_INT: return "integer";
    case T_FLOAT: return "float";
    case T_DATA: return "template data";
    default:
        snprintf(buf, cap, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->p);
        return buf;
    }
}

static _Noreturn void unexpected(pctx *P, const char *expected)
{
    char b[64];
    tok *t = cur(P);
    if (expected) perr(P, t->line, t->col, "expected %s, got %s", expected, describe(t, b, sizeof b));
    perr(P, t->line, t->col, "unexpected %s", describe(t, b, sizeof b));
}

static void expect_op(pctx *P, const char *op)
{
    if (!is_op(cur(P), op)) {
        char e[16];
        snprintf(e, sizeof e, "'%s'", op);
        unexpected(P, e);
    }
    advance(P);
}

static tok *expect_type(pctx *P, ttype t, const char *what)
{
    if (cur(P)->t != t) unexpected(P, what);
    return advance(P);
}

static jnode *mk(pctx *P, jn_kind kind, const tok *at)
{
    jnode *n = palloc(P, sizeof(jnode));
    n->kind = (uint8_t)kind;
    n->line = at->line;
    n->col = at->col;
    return n;
}

/* A growable node list in the arena. */
typedef struct nlist { jnode **v; size_t n, cap; } nlist;
static void nl_push(pctx *P, nlist *l, jnode *x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jnode **nv = palloc(P, cap * sizeof(jnode *));
        if (l->n) memcpy(nv, l->v, l->n * sizeof(jnode *));
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

typedef struct kwlist { const char **name; size_t *len; jnode **val; size_t n, cap; } kwlist;
static void kw_push(pctx *P, kwlist *k, const char *name, size_t len, jnode *v)
{
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 4;
        const char **nn = palloc(P, cap * sizeof(char *));
        size_t *nl = palloc(P, cap * sizeof(size_t));
        jnode **nv = palloc(P, cap * sizeof(jnode *));
        if (k->n) {
            memcpy(nn, k->name, k->n * sizeof(char *));
            memcpy(nl, k->len, k->n * sizeof(size_t));
            memcpy(nv, k->val, k->n * sizeof(jnode *));
        }
        k->name = nn; k->len = nl; k->val = nv; k->cap = cap;
    }
    k->name[k->n] = name; k->len[k->n] = len; k->val[k->n] = v; k->n++;
}

static jnode *parse_expression(pctx *P, bool with_condexpr);
static jnode *parse_unary(pctx *P, bool with_filter);
static jnode *parse_primary(pctx *P);
static jnode *parse_postfix(pctx *P, jnode *node);
static jnode *parse_filter_expr(pctx *P, jnode *node);

/* The parser's own recursion (brackets, unary operators, statements). */
static void enter(pctx *P)
{
    if (++P->depth > PARSE_MAX_RECURSION) perr(P, cur(P)->line, cur(P)->col, "template nested too deeply");
}

/* (args) after the '(' has been seen at cur. */
static void parse_call_args(pctx *P, nlist *args, kwlist *kw)
{
    expect_op(P, "(");
    bool first = true;
    while (!is_op(cur(P), ")")) {
        if (!first) {
            expect_op(P, ",");
            if (is_op(cur(P), ")")) break;
        }
        first = false;
        if (is_op(cur(P), "*") || is_op(cur(P), "**"))
            perr(P, cur(P)->line, cur(P)->col, "*args and **kwargs in calls are not supported");
        if (cur(P)->t == T_NAME && is_op(peek(P, 1), "=")) {
            tok *nm = advance(P);
            advance(P);
            kw_push(P, kw, nm->p, nm->n, parse_expression(P, true));
        } else {
            if (kw->n) perr(P, cur(P)->line, cur(P)->col, "positional argument follows keyword argument");
            nl_push(P, args, parse_expression(P, true));
        }
    }
    advance(P);
}

static void set_args(jnode *n, nlist *args, kwlist *kw)
{
    n->kids = args->v;
    n->n_kids = args->n;
    n->kw_name = kw->name;
    n->kw_len = kw->len;
    n->kw_val = kw->val;
    n->n_kw = kw->n;
}

/* callee(args) with cur at '('; errors of the call name line:col. */
static jnode *parse_call(pctx *P, jnode *callee, int line, int col)
{
    jnode *c = mk(P, N_CALL, cur(P));
    c->line = line;
    c->col = col;
    nlist args = {0};
    kwlist kw = {0};
    parse_call_args(P, &args, &kw);
    set_args(c, &args, &kw);
    c->a = callee;
    return c;
}

/* Dotted filter / test name into a node. */
static void parse_dotted(pctx *P, jnode *n)
{
    tok *t = expect_type(P, T_NAME, "a name");
    n->name = t->p;
    n->name_len = t->n;
    while (is_op(cur(P), ".") && peek(P, 1)->t == T_NAME) {
        advance(P);
        tok *u = advance(P);
        n->name_len = (size_t)(u->p + u->n - n->name);
    }
}

static jnode *parse_filter(pctx *P, jnode *node, bool start_inline)
{
    while (is_op(cur(P), "|") || start_inline) {
        if (!start_inline) advance(P);
        start_inline = false;
        jnode *f = mk(P, N_FILTER, cur(P));
        parse_dotted(P, f);
        f->a = node;
        nlist args = {0};
        kwlist kw = {0};
        if (is_op(cur(P), "(")) parse_call_args(P, &args, &kw);
        set_args(f, &args, &kw);
        node = f;
    }
    return node;
}

static jnode *parse_test(pctx *P, jnode *node)
{
    tok *is = advance(P);
    bool negated = false;
    if (is_name(cur(P), "not")) {
        advance(P);
        negated = true;
    }
    jnode *t = mk(P, N_TEST, is);
    parse_dotted(P, t);
    t->a = node;
    nlist args = {0};
    kwlist kw = {0};
    tok *c = cur(P);
    if (is_op(c, "(")) {
        parse_call_args(P, &args, &kw);
    } else if ((c->t == T_NAME || c->t == T_STRING || c->t == T_INT || c->t == T_FLOAT || is_op(c, "[") ||
                is_op(c, "{")) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) perr(P, c->line, c->col, "You cannot chain multiple tests with is");
        jnode *arg = parse_postfix(P, parse_primary(P));
        nl_push(P, &args, arg);
    }
    set_args(t, &args, &kw);
    if (negated) {
        jnode *nn = mk(P, N_NOT, is);
        nn->a = t;
        return nn;
    }
    return t;
}

static jnode *parse_filter_expr(pctx *P, jnode *node)
{
    for (;;) {
        if (is_op(cur(P), "|")) node = parse_filter(P, node, false);
        else if (is_name(cur(P), "is")) node = parse_test(P, node);
        else if (is_op(cur(P), "(")) node = parse_call(P, node, cur(P)->line, cur(P)->col);
        else break;
    }
    return node;
}

static jnode *parse_subscript_part(pctx *P)
{
    /* expression, or a slice a:b:c with any part missing */
    tok *start = cur(P);
    jnode *parts[3] = {NULL, NULL, NULL};
    if (!is_op(cur(P), ":")) {
        parts[0] = parse_expression(P, true);
        if (!is_op(cur(P), ":")) return parts[0];
    }
    advance(P);
    if (!is_op(cur(P), "]") && !is_op(cur(P), ":")) parts[1] = parse_expression(P, true);
    if (is_op(cur(P), ":")) {
        advance(P);
        if (!is_op(cur(P), "]")) parts[2] = parse_expression(P, true);
    }
    jnode *s = mk(P, N_SLICE, start);
    s->b = parts[0];
    s->c = parts[1];
    s->d = parts[2];
    return s;
}

static jnode *parse_postfix(pctx *P, jnode *node)
{
    for (;;) {
        tok *t = cur(P);
        if (is_op(t, ".")) {
            advance(P);
            tok *a = cur(P);
            if (a->t == T_NAME) {
                advance(P);
                jnode *g = mk(P, N_ATTR, a);
                g->a = node;
                g->name = a->p;
                g->name_len = a->n;
                node = g;
            } else if (a->t == T_INT) {
                advance(P);
                jnode *g = mk(P, N_ITEM, a);
                g->a = node;
                g->b = mk(P, N_LIT, a);
                g->b->lit = jv_int(a->i);
                node = g;
            } else unexpected(P, "a name or number after '.'");
        } else if (is_op(t, "[")) {
            advance(P);
            jnode *sub = parse_subscript_part(P);
            if (is_op(cur(P), ",")) perr(P, cur(P)->line, cur(P)->col, "tuple subscripts are not supported");
            expect_op(P, "]");
            if (sub->kind == N_SLICE) {
                sub->a = node;
                node = sub;
            } else {
                jnode *g = mk(P, N_ITEM, t);
                g->a = node;
                g->b = sub;
                node = g;
            }
        } else if (is_op(t, "(")) {
            node = parse_call(P, node, node->line, node->col); /* errors of a call point at its callee */
        } else break;
    }
    return node;
}

/* Comma-separated items up to `close`, a trailing comma allowed; with
 * `pairs`, each item is key: value (two entries). Consumes `close`. */
static void parse_items(pctx *P, const char *close, bool pairs, nlist *items)
{
    for (bool first = true; !is_op(cur(P), close); first = false) {
        if (!first) {
            expect_op(P, ",");
            if (is_op(cur(P), close)) break;
        }
        nl_push(P, items, parse_expression(P, true));
        if (pairs) {
            expect_op(P, ":");
            nl_push(P, items, parse_expression(P, true));
        }
    }
    advance(P);
}

static jnode *parse_primary(pctx *P)
{
    tok *t = cur(P);
    enter(P);
    jnode *n = NULL;
    if (t->t == T_NAME) {
        advance(P);
        n = mk(P, N_LIT, t);
        if (is_name(t, "true") || is_name(t, "True")) n->lit = jv_bool(true);
        else if (is_name(t, "false") || is_name(t, "False")) n->lit = jv_bool(false);
        else if (is_name(t, "none") || is_name(t, "None")) n->lit = jv_none();
        else {
            n->kind = N_NAME;
            n->name = t->p;
            n->name_len = t->n;
        }
    } else if (t->t == T_STRING) {
        /* adjacent string literals concatenate */
        size_t total = 0, k = 0;
        while (peek(P, k)->t == T_STRING) total += peek(P, k++)->n;
        char *buf = palloc(P, total + 1);
        size_t off = 0;
        while (cur(P)->t == T_STRING) {
            tok *s = advance(P);
            memcpy(buf + off, s->p, s->n);
            off += s->n;
        }
        n = mk(P, N_LIT, t);
        n->lit = jv_str(buf, total);
    } else if (t->t == T_INT || t->t == T_FLOAT) {
        advance(P);
        n = mk(P, N_LIT, t);
        n->lit = t->t == T_INT ? jv_int(t->i) : jv_float(t->f);
    } else if (is_op(t, "(")) {
        advance(P);
        if (is_op(cur(P), ")")) {
            advance(P);
            n = mk(P, N_TUPLE, t);
        } else {
            jnode *first = parse_expression(P, true);
            if (is_op(cur(P), ",")) {
                nlist items = {0};
                nl_push(P, &items, first);
                while (is_op(cur(P), ",")) {
                    advance(P);
                    if (is_op(cur(P), ")")) break;
                    nl_push(P, &items, parse_expression(P, true));
                }
                n = mk(P, N_TUPLE, t);
                n->kids = items.v;
                n->n_kids = items.n;
            } else n = first;
            expect_op(P, ")");
        }
    } else if (is_op(t, "[") || is_op(t, "{")) {
        bool dict = is_op(t, "{");
        advance(P);
        nlist items = {0};
        parse_items(P, dict ? "}" : "]", dict, &items);
        n = mk(P, dict ? N_DICT : N_LIST, t);
        n->kids = items.v;
        n->n_kids = items.n;
    } else {
        unexpected(P, NULL);
    }
    P->depth--;
    return n;
}

static jnode *parse_unary(pctx *P, bool with_filter)
{
    tok *t = cur(P);
    enter(P);
    jnode *node;
    if (is_op(t, "-") || is_op(t, "+")) {
        advance(P);
        node = mk(P, is_op(t, "-") ? N_NEG : N_POS, t);
        node->a = parse_unary(P, false);
    } else {
        node = parse_primary(P);
    }
    node = parse_postfix(P, node);
    if (with_filter) node = parse_filter_expr(P, node);
    P->depth--;
    return node;
}

static jnode *binop(pctx *P, const tok *t, int op, jnode *a, jnode *b)
{
    jnode *n = mk(P, N_BINOP, t);
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

/* One precedence level of left-associative binary operators:
 * operand (op operand)*, with ops[i] giving the node operator codes[i]. */
typedef struct binop_level {
    const char *ops[4];
    int codes[4];
} binop_level;

static jnode *parse_level(pctx *P, jnode *(*operand)(pctx *P), const binop_level *lv)
{
    jnode *left = operand(P);
    for (;;) {
        tok *t = cur(P);
        int op = 0;
        for (size_t i = 0; i < 4 && lv->ops[i] && !op; i++)
            if (is_op(t, lv->ops[i])) op = lv->codes[i];
        if (!op) return left;
        advance(P);
        left = binop(P, t, op, left, operand(P));
    }
}

static jnode *parse_unary_filtered(pctx *P) { return parse_unary(P, true); }

static jnode *parse_pow(pctx *P)
{
    static const binop_level power = {{"**"}, {JOP_POW}};
    return parse_level(P, parse_unary_filtered, &power);
}

static jnode *parse_math2(pctx *P)
{
    static const binop_level mul = {{"*", "/", "//", "%"}, {JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD}};
    return parse_level(P, parse_pow, &mul);
}

static jnode *parse_concat(pctx *P)
{
    tok *t = cur(P);
    jnode *first = parse_math2(P);
    if (!is_op(cur(P), "~")) return first;
    nlist parts = {0};
    nl_push(P, &parts, first);
    while (is_op(cur(P), "~")) {
        advance(P);
        nl_push(P, &parts, parse_math2(P));
    }
    jnode *n = mk(P, N_CONCAT, t);
    n->kids = parts.v;
    n->n_kids = parts.n;
    return n;
}

static jnode *parse_math1(pctx *P)
{
    static const binop_level add = {{"+", "-"}, {JOP_ADD, JOP_SUB}};
    return parse_level(P, parse_concat, &add);
}

static jnode *parse_compare(pctx *P)
{
    tok *t0 = cur(P);
    jnode *first = parse_math1(P);
    nlist operands = {0};
    uint8_t ops[64];
    size_t n_ops = 0;
    for (;;) {
        tok *t = cur(P);
        int op = is_op(t, "==") ? JOP_EQ : is_op(t, "!=") ? JOP_NE : is_op(t, "<") ? JOP_LT
                 : is_op(t, "<=") ? JOP_LE : is_op(t, ">") ? JOP_GT : is_op(t, ">=") ? JOP_GE
                 : is_name(t, "in") ? JOP_IN : 0;
        if (!op && is_name(t, "not") && is_name(peek(P, 1), "in")) {
            advance(P);
            op = JOP_NOTIN;
        }
        if (!op) break;
        if (n_ops == sizeof ops) perr(P, t->line, t->col, "too many chained comparisons");
        advance(P);
        if (!operands.n) nl_push(P, &operands, first);
        ops[n_ops++] = (uint8_t)op;
        nl_push(P, &operands, parse_math1(P));
    }
    if (!n_ops) return first;
    jnode *n = mk(P, N_COMPARE, t0);
    n->kids = operands.v;
    n->n_kids = operands.n;
    n->ops = palloc(P, n_ops);
    memcpy(n->ops, ops, n_ops);
    return n;
}

static jnode *parse_not(pctx *P)
{
    if (is_name(cur(P), "not")) {
        tok *t = advance(P);
        enter(P);
        jnode *n = mk(P, N_NOT, t);
        n->a = parse_not(P);
        P->depth--;
        return n;
    }
    return parse_compare(P);
}

/* operand (word operand)*, left-associative: `and` and `or` */
static jnode *parse_logic(pctx *P, jnode *(*operand)(pctx *P), const char *word, jn_kind kind)
{
    jnode *left = operand(P);
    while (is_name(cur(P), word)) {
        tok *t = advance(P);
        jnode *n = mk(P, kind, t);
        n->a = left;
        n->b = operand(P);
        left = n;
    }
    return left;
}

static jnode *parse_and(pctx *P) { return parse_logic(P, parse_not, "and", N_AND); }
static jnode *parse_or(pctx *P) { return parse_logic(P, parse_and, "or", N_OR); }

static jnode *parse_expression(pctx *P, bool with_condexpr)
{
    enter(P);
    jnode *expr = parse_or(P);
    if (with_condexpr) {
        while (is_name(cur(P), "if")) {
            tok *t = advance(P);
            jnode *n = mk(P, N_COND, t);
            n->a = expr;
            n->b = parse_or(P);
            if (is_name(cur(P), "else")) {
                advance(P);
                n->c = parse_expression(P, true);
            }
            expr = n;
        }
    }
    P->depth--;
    return expr;
}

/* expression or a bare tuple `a, b` (output, set values, for iterables) */
static jnode *parse_tuple(pctx *P, bool with_condexpr, const char *extra_end)
{
    tok *t = cur(P);
    nlist items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n) expect_op(P, ",");
        tok *c = cur(P);
        if (c->t == T_BLOCK_END || c->t == T_VAR_END || is_op(c, ")") || is_op(c, "]") || is_op(c, "}") ||
            (extra_end && is_name(c, extra_end)) || c->t == T_EOF)
            break;
        nl_push(P, &items, parse_expression(P, with_condexpr));
        if (is_op(cur(P), ",")) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (!items.n) unexpected(P, "an expression");
        return items.v[0];
    }
    jnode *n = mk(P, N_TUPLE, t);
    n->kids = items.v;
    n->n_kids = items.n;
    return n;
}

/* for / set targets: a name, a tuple of names, or (set only) ns.attr */
static jnode *parse_assign_target(pctx *P, bool with_namespace, const char *extra_end)
{
    tok *t = cur(P);
    if (with_namespace && t->t == T_NAME && is_op(peek(P, 1), ".") && peek(P, 2)->t == T_NAME) {
        advance(P);
        advance(P);
        tok *a = advance(P);
        jnode *n = mk(P, N_ATTR, t);
        n->a = mk(P, N_NAME, t);
        n->a->name = t->p;
        n->a->name_len = t->n;
        n->name = a->p;
        n->name_len = a->n;
        return n;
    }
    bool paren = false;
    if (is_op(t, "(")) {
        paren = true;
        advance(P);
    }
    nlist items = {0};
    for (;;) {
        tok *c = expect_type(P, T_NAME, "a name to assign to");
        jnode *n = mk(P, N_NAME, c);
        n->name = c->p;
        n->name_len = c->n;
        nl_push(P, &items, n);
        if (!is_op(cur(P), ",")) break;
        advance(P);
        if ((extra_end && is_name(cur(P), extra_end)) || is_op(cur(P), "=") || is_op(cur(P), ")")) break;
    }
    if (paren) expect_op(P, ")");
    if (items.n == 1 && !paren) return items.v[0];
    jnode *n = mk(P, N_TUPLE, t);
    n->kids = items.v;
    n->n_kids = items.n;
    return n;
}

static jnode *subparse(pctx *P, const char *const *ends, size_t n_ends, const tok *opener);

static void expect_block_end(pctx *P) { expect_type(P, T_BLOCK_END, "end of statement block"); }

/* After subparse stopped at an end tag: the name under cur. */
static bool at_name(pctx *P, const char *nm) { return is_name(cur(P), nm); }

/* The body after `opener` up to {% end %}, which is consumed. A macro or
 * call body (`own_scope`) is left by no break/continue of a loop around it. */
static jnode *parse_body(pctx *P, const tok *opener, const char *end, bool own_scope)
{
    const char *const ends[] = {end};
    int saved = P->loop_depth;
    if (own_scope) P->loop_depth = 0;
    jnode *b = subparse(P, ends, 1, opener);
    P->loop_depth = saved;
    advance(P);
    expect_block_end(P);
    return b;
}

static jnode *parse_if(pctx *P, tok *t)
{
    jnode *n = mk(P, N_IF, t);
    n->a = parse_expression(P, false);
    expect_block_end(P);
    static const char *const ends[] = {"elif", "else", "endif"};
    n->b = subparse(P, ends, 3, t);
    if (at_name(P, "elif")) {
        tok *e = advance(P);
        enter(P); /* each elif nests one level: bounds the recursion */
        n->c = parse_if(P, e);
        P->depth--;
        return n;
    }
    if (at_name(P, "else")) {
        advance(P);
        expect_block_end(P);
        static const char *const ends2[] = {"endif"};
        n->c = subparse(P, ends2, 1, t);
    }
    advance(P); /* endif */
    expect_block_end(P);
    return n;
}

static jnode *parse_for(pctx *P, tok *t)
{
    jnode *n = mk(P, N_FOR, t);
    n->a = parse_assign_target(P, false, "in");
    if (!is_name(cur(P), "in")) unexpected(P, "'in'");
    advance(P);
    n->b = parse_tuple(P, false, "recursive");
    if (is_name(cur(P), "if")) {
        advance(P);
        n->e = parse_expression(P, true);
    }
    if (is_name(cur(P), "recursive")) perr(P, cur(P)->line, cur(P)->col, "recursive loops are not supported");
    expect_block_end(P);
    static const char *const ends[] = {"endfor", "else"};
    P->loop_depth++;
    n->c = subparse(P, ends, 2, t);
    P->loop_depth--;
    if (at_name(P, "else")) {
        advance(P);
        expect_block_end(P);
        static const char *const ends2[] = {"endfor"};
        n->d = subparse(P, ends2, 1, t);
    }
    advance(P);
    expect_block_end(P);
    return n;
}

static jnode *parse_set(pctx *P, tok *t)
{
    jnode *target = parse_assign_target(P, true, NULL);
    if (is_op(cur(P), "=")) {
        advance(P);
        jnode *n = mk(P, N_SET, t);
        n->a = target;
        n->b = parse_tuple(P, true, NULL);
        expect_block_end(P);
        return n;
    }
    jnode *n = mk(P, N_SETBLOCK, t);
    n->a = target;
    if (is_op(cur(P), "|")) n->c = parse_filter(P, NULL, false);
    expect_block_end(P);
    n->b = parse_body(P, t, "endset", false);
    return n;
}

/* (a, b=1, ...) parameter lists of macro and call blocks */
static void parse_signature(pctx *P, jnode *n)
{
    nlist params = {0};
    kwlist defs = {0};
    expect_op(P, "(");
    while (!is_op(cur(P), ")")) {
        if (params.n) expect_op(P, ",");
        if (is_op(cur(P), ")")) break;
        tok *nm = expect_type(P, T_NAME, "a parameter name");
        jnode *p = mk(P, N_NAME, nm);
        p->name = nm->p;
        p->name_len = nm->n;
        nl_push(P, &params, p);
        if (is_op(cur(P), "=")) {
            advance(P);
            kw_push(P, &defs, nm->p, nm->n, parse_expression(P, true));
        } else if (defs.n) {
            perr(P, nm->line, nm->col, "non-default argument follows default argument");
        }
    }
    advance(P);
    set_args(n, &params, &defs);
}

static jnode *parse_macro(pctx *P, tok *t)
{
    jnode *n = mk(P, N_MACRO, t);
    tok *nm = expect_type(P, T_NAME, "a macro name");
    n->name = nm->p;
    n->name_len = nm->n;
    parse_signature(P, n);
    expect_block_end(P);
    n->b = parse_body(P, t, "endmacro", true);
    return n;
}

static jnode *parse_call_block(pctx *P, tok *t)
{
    jnode *n = mk(P, N_CALLBLOCK, t);
    if (is_op(cur(P), "(")) parse_signature(P, n);
    n->a = parse_expression(P, true);
    if (n->a->kind != N_CALL) perr(P, n->a->line, n->a->col, "expected call");
    expect_block_end(P);
    n->b = parse_body(P, t, "endcall", true);
    return n;
}

static jnode *parse_statement(pctx *P)
{
    tok *t = cur(P);
    if (t->t != T_NAME) unexpected(P, "a tag name");
    advance(P);
    enter(P);
    jnode *n;
    if (is_name(t, "if")) n = parse_if(P, t);
    else if (is_name(t, "for")) n = parse_for(P, t);
    else if (is_name(t, "set")) n = parse_set(P, t);
    else if (is_name(t, "macro")) n = parse_macro(P, t);
    else if (is_name(t, "call")) n = parse_call_block(P, t);
    else if (is_name(t, "filter")) {
        n = mk(P, N_FILTERBLOCK, t);
        n->a = parse_filter(P, NULL, true);
        expect_block_end(P);
        n->b = parse_body(P, t, "endfilter", false);
    } else if (is_name(t, "generation")) {
        expect_block_end(P);
        n = parse_body(P, t, "endgeneration", false);
    } else if (is_name(t, "with")) {
        n = mk(P, N_WITH, t);
        kwlist assigns = {0};
        while (cur(P)->t != T_BLOCK_END) {
            if (assigns.n) expect_op(P, ",");
            tok *nm = expect_type(P, T_NAME, "a name");
            expect_op(P, "=");
            kw_push(P, &assigns, nm->p, nm->n, parse_expression(P, true));
        }
        n->kw_name = assigns.name;
        n->kw_len = assigns.len;
        n->kw_val = assigns.val;
        n->n_kw = assigns.n;
        expect_block_end(P);
        n->b = parse_body(P, t, "endwith", false);
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        if (!P->loop_depth) perr(P, t->line, t->col, "'%.*s' outside of a loop", (int)t->n, t->p);
        n = mk(P, is_name(t, "break") ? N_BREAK : N_CONTINUE, t);
        expect_block_end(P);
    } else {
        perr(P, t->line, t->col, "Encountered unknown tag '%.*s'.", (int)(t->n > 40 ? 40 : t->n), t->p);
    }
    P->depth--;
    return n;
}

static jnode *subparse(pctx *P, const char *const *ends, size_t n_ends, const tok *opener)
{
    nlist body = {0};
    jnode *b = mk(P, N_BODY, cur(P));
    for (;;) {
        tok *t = cur(P);
        if (t->t == T_EOF) {
            if (n_ends) {
                const char *want = ends[0];
                for (size_t i = 0; i < n_ends; i++)
                    if (strncmp(ends[i], "end", 3) == 0) want = ends[i];
                perr(P, opener->line, opener->col, "unexpected end of template: the '%.*s' tag is not closed, expected '%s'",
                     (int)opener->n, opener->p, want);
            }
            break;
        }
        if (t->t == T_DATA) {
            advance(P);
            jnode *n = mk(P, N_TEXT, t);
            n->lit = jv_str(t->p, t->n);
            nl_push(P, &body, n);
        } else if (t->t == T_VAR_BEGIN) {
            advance(P);
            jnode *n = mk(P, N_OUTPUT, t);
            n->a = parse_tuple(P, true, NULL);
            expect_type(P, T_VAR_END, "end of print statement");
            nl_push(P, &body, n);
        } else if (t->t == T_BLOCK_BEGIN) {
            advance(P);
            tok *nm = cur(P);
            for (size_t i = 0; i < n_ends; i++)
                if (is_name(nm, ends[i])) goto done;
            if (nm->t == T_NAME && (is_name(nm, "endif") || is_name(nm, "endfor") || is_name(nm, "endset") ||
                                    is_name(nm, "endmacro") || is_name(nm, "endcall") || is_name(nm, "endfilter") ||
                                    is_name(nm, "else") || is_name(nm, "elif") || is_name(nm, "endwith") ||
                                    is_name(nm, "endgeneration") || is_name(nm, "endraw")))
                perr(P, nm->line, nm->col, "Encountered unknown tag '%.*s'.", (int)nm->n, nm->p);
            nl_push(P, &body, parse_statement(P));
        } else {
            unexpected(P, NULL);
        }
    }
done:
    b->kids = body.v;
    b->n_kids = body.n;
    return b;
}

/* After parsing, one walk over the tree: jinja2 resolves filter and test
 * names when it compiles (an unknown one fails the template even in a
 * branch that never runs), and the tree may not be deeper than
 * JINJA_MAX_DEPTH. Chains such as 1+1+..., x|f|f..., a.b.c... or
 * x[0][0]... are parsed by loops, so this is where their depth is bounded;
 * the evaluator recurses once per level, and so does this walk, which
 * stops at the limit. */
static void check_tree(pctx *P, const jnode *n, int depth)
{
    if (!n) return;
    if (depth > JINJA_MAX_DEPTH)
        perr(P, n->line, n->col, "template nested too deeply (more than %d levels of expressions and blocks)",
             JINJA_MAX_DEPTH);
    if (n->kind == N_FILTER && !cmf__jx_filter_known(n->name, n->name_len))
        perr(P, n->line, n->col, "No filter named '%.*s'.", (int)(n->name_len > 60 ? 60 : n->name_len), n->name);
    if (n->kind == N_TEST && !cmf__jx_test_known(n->name, n->name_len))
        perr(P, n->line, n->col, "No test named '%.*s'.", (int)(n->name_len > 60 ? 60 : n->name_len), n->name);
    const jnode *kids[] = {n->a, n->b, n->c, n->d, n->e};
    for (size_t i = 0; i < 5; i++) check_tree(P, kids[i], depth + 1);
    for (size_t i = 0; i < n->n_kids; i++) check_tree(P, n->kids[i], depth + 1);
    for (size_t i = 0; i < n->n_kw; i++) check_tree(P, n->kw_val[i], depth + 1);
}

cmf_status cmf__jinja_parse(struct cmf__template *t)
{
    pctx *P = calloc(1, sizeof *P);
    if (!P) return cmf__error(CMF_ERR_NOMEM, "out of memory compiling a template");
    P->t = t;
    P->s = t->src;
    P->len = t->src_len;
    size_t lines = 1;
    for (size_t i = 0; i < P->len; i++) lines += P->s[i] == '\n';
    P->line_start = malloc(lines * sizeof(size_t));
    cmf_status st = CMF_OK;
    if (!P->line_start) {
        free(P);
        return cmf__error(CMF_ERR_NOMEM, "out of memory compiling a template");
    }
    P->line_start[0] = 0;
    P->n_lines = 1;
    for (size_t i = 0; i < P->len; i++)
        if (P->s[i] == '\n') P->line_start[P->n_lines++] = i + 1;
    if (setjmp(P->jmp) == 0) {
        lex(P);
        t->root = subparse(P, NULL, 0, NULL);
        check_tree(P, t->root, 0);
    } else {
        st = cmf__error(P->st ? P->st : CMF_ERR_TEMPLATE, "%s", P->err);
    }
    free(P->toks);
    free(P->line_start);
    free(P);
    return st;
}
