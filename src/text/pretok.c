/* pretok.c — tokenizer.json pre-tokenizers (Split, ByteLevel, Metaspace,
 * Whitespace, WhitespaceSplit, Punctuation, Digits, BertPreTokenizer,
 * CharDelimiterSplit, Sequence) and the PCRE2 wrapper they share. HF
 * patterns are Oniguruma/Rust syntax; the ones in use are also valid PCRE2
 * with UTF+UCP. Empty pieces are dropped, as HF's PreTokenizedString does. */
#include "text/tokenizer_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char GPT2_RE[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char WHITESPACE_RE[] = "\\w+|[^\\w\\s]+";

cmf_status cmf__tk_re_compile(tk_re *re, const char *pat, size_t len, bool literal, const char *what,
                              const char *path)
{
    int err;
    PCRE2_SIZE at;
    uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    re->code = pcre2_compile((PCRE2_SPTR)pat, len, opts, &err, &at, NULL);
    if (!re->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return cmf__tk_err(what, path, "regex /%.*s/ at offset %zu: %s", (int)(len > 200 ? 200 : len), pat,
                           (size_t)at, (const char *)msg);
    }
    /* JIT is an optimisation: when unavailable the interpreter runs. */
    (void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    return CMF_OK;
}

void cmf__tk_re_free(tk_re *re)
{
    if (re && re->code) pcre2_code_free(re->code);
    if (re) re->code = NULL;
}

static size_t char_len_at(const char *s, size_t len, size_t i)
{
    uint32_t c;
    size_t l = cmf__utf8_next((const uint8_t *)s + i, len - i, &c);
    return l ? l : 1;
}

cmf_status cmf__tk_re_find(const tk_re *re, tk_ctx *ctx, const char *s, size_t len, tk_span **m, size_t *n,
                           size_t *cap)
{
    cmf_status st;
    size_t start = 0;
    bool have_last = false;
    size_t last_end = 0;
    *n = 0;
    while (start <= len) {
        int rc = pcre2_match(re->code, (PCRE2_SPTR)(s ? s : ""), len, start, PCRE2_NO_UTF_CHECK, ctx->md,
                             ctx->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return cmf__error(CMF_ERR_TOKENIZER, "tokenizer: regex match failed: %s", (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(ctx->md);
        size_t a = ov[0], b = ov[1];
        if (a == b && have_last && last_end == b) {
            /* No empty match right after the previous match (Rust/onig). */
            if (start >= len) break;
            start += char_len_at(s, len, start);
            continue;
        }
        if ((st = cmf__tk_grow((void **)m, cap, *n + 1, sizeof **m))) return st;
        (*m)[(*n)++] = (tk_span){a, b - a};
        have_last = true;
        last_end = b;
        if (b == a) {
            if (b >= len) break;
            start = b + char_len_at(s, len, b);
        } else start = b;
    }
    return CMF_OK;
}

/* ---- pieces ---- */

cmf_status cmf__tk_pieces_push(tk_pieces *p, const char *s, size_t len, bool at_start)
{
    cmf_status st;
    if (!len) return CMF_OK;
    if ((st = cmf__tk_grow((void **)&p->v, &p->cap, p->n + 1, sizeof *p->v))) return st;
    size_t off = p->text.len;
    if ((st = cmf__buf_append(&p->text, s, len))) return st;
    p->v[p->n++] = (tk_piece){off, len, at_start};
    return CMF_OK;
}

void cmf__tk_pieces_free(tk_pieces *p)
{
    cmf__buf_free(&p->text);
    free(p->v);
    memset(p, 0, sizeof *p);
}

typedef struct seg {
    size_t off, len;
    bool match;
} seg;

static cmf_status seg_push(tk_ctx *ctx, size_t *n, size_t off, size_t len, bool match)
{
    cmf_status st = cmf__tk_grow(&ctx->segs, &ctx->segs_cap, *n + 1, sizeof(seg));
    if (st) return st;
    ((seg *)ctx->segs)[(*n)++] = (seg){off, len, match};
    return CMF_OK;
}

/* Segments of s from regex matches: gaps (not matches) and matches. */
static cmf_status segs_from_re(const tk_re *re, tk_ctx *ctx, const char *s, size_t len, size_t *n)
{
    cmf_status st = cmf__tk_re_find(re, ctx, s, len, &ctx->m, &ctx->m_n, &ctx->m_cap);
    if (st) return st;
    size_t prev = 0;
    *n = 0;
    for (size_t i = 0; i < ctx->m_n; i++) {
        tk_span m = ctx->m[i];
        if (prev != m.off && (st = seg_push(ctx, n, prev, m.off - prev, false))) return st;
        if ((st = seg_push(ctx, n, m.off, m.len, true))) return st;
        prev = m.off + m.len;
    }
    if (prev != len && (st = seg_push(ctx, n, prev, len - prev, false))) return st;
    return CMF_OK;
}

/* Segments from a per-char predicate: each matching char is one match. */
static cmf_status segs_from_pred(bool (*pred)(uint32_t, uint32_t), uint32_t arg, tk_ctx *ctx, const char *s,
                                 size_t len, size_t *n)
{
    cmf_status st;
    size_t last = 0;
    *n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t c;
        size_t l = cmf__utf8_next((const uint8_t *)s + i, len - i, &c);
        if (!l) l = 1, c = 0xFFFD;
        if (pred(c, arg)) {
            if (last < i && (st = seg_push(ctx, n, last, i - last, false))) return st;
            if ((st = seg_push(ctx, n, i, l, true))) return st;
            last = i + l;
        }
        i += l;
    }
    if (last < len && (st = seg_push(ctx, n, last, len - last, false))) return st;
    return CMF_OK;
}

/* Applies HF's SplitDelimiterBehavior to the segments and pushes pieces. */
static cmf_status emit_behavior(tk_ctx *ctx, size_t n, int behavior, bool invert, const char *s, bool at_start,
                                tk_pieces *out)
{
    seg *g = ctx->segs;
    if (invert)
        for (size_t i = 0; i < n; i++) g[i].match = !g[i].match;
    /* Compact in place into [off,len) pieces; `keep` reuses the match flag. */
    size_t k = 0;
    bool prev_match = false;
    switch (behavior) {
    case TK_B_REMOVED:
        for (size_t i = 0; i < n; i++)
            if (!g[i].match) g[k++] = g[i];
        break;
    case TK_B_ISOLATED: k = n; break;
    case TK_B_MERGED_PREV:
        for (size_t i = 0; i < n; i++) {
            bool m = g[i].match;
            if (m && !prev_match && k) g[k - 1].len = g[i].off + g[i].len - g[k - 1].off;
            else g[k++] = g[i];
            prev_match = m;
        }
        break;
    case TK_B_CONTIGUOUS:
        for (size_t i = 0; i < n; i++) {
            bool m = g[i].match;
            if (m == prev_match && k) g[k - 1].len = g[i].off + g[i].len - g[k - 1].off;
            else g[k++] = g[i];
            prev_match = m;
        }
        break;
    case TK_B_MERGED_NEXT: {
        /* Right to left, building from the end of the array. */
        size_t w = n;
        for (size_t i = n; i-- > 0;) {
            bool m = g[i].match;
            if (m && !prev_match && w < n) {
                g[w].len = g[w].off + g[w].len - g[i].off;
                g[w].off = g[i].off;
            } else g[--w] = g[i];
            prev_match = m;
        }
        memmove(g, g + w, (n - w) * sizeof *g);
        k = n - w;
        break;
    }
    }
    cmf_status st;
    for (size_t i = 0; i < k; i++)
        if ((st = cmf__tk_pieces_push(out, s + g[i].off, g[i].len, at_start && g[i].off == 0))) return st;
    return CMF_OK;
}

static bool pred_ws(uint32_t c, uint32_t a) { (void)a; return cmf__uni_is_whitespace(c); }
static bool pred_punct(uint32_t c, uint32_t a)
{
    (void)a;
    return (c < 128 && ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126))) ||
           cmf__uni_is_punctuation(c);
}
static bool pred_digit(uint32_t c, uint32_t a) { (void)a; return cmf__uni_is_numeric(c); }
static bool pred_char(uint32_t c, uint32_t a) { return c == a; }

static cmf_status bytelevel_piece(const tk_pretok *p, tk_ctx *ctx, const char *s, size_t len, bool at_start,
                                  tk_pieces *out)
{
    cmf_status st;
    cmf__buf *t = &ctx->ptmp;
    t->len = 0;
    if (p->add_prefix_space && (len == 0 || s[0] != ' ')) {
        if ((st = cmf__buf_append(t, " ", 1))) return st;
    }
    if ((st = cmf__buf_append(t, s, len))) return st;
    const char *w = (const char *)t->data;
    size_t wl = t->len, n = 0;
    if (p->use_regex) {
        if ((st = segs_from_re(&p->re, ctx, w, wl, &n))) return st;
    } else if ((st = seg_push(ctx, &n, 0, wl, false))) return st;
    seg *g = ctx->segs;
    for (size_t i = 0; i < n; i++) {
        if (!g[i].len) continue;
        size_t off = out->text.len;
        if ((st = cmf__buf_reserve(&out->text, 2 * g[i].len))) return st;
        const uint8_t(*tab)[4] = cmf__bytelevel_utf8();
        uint8_t *dst = out->text.data + out->text.len;
        for (size_t k = 0; k < g[i].len; k++) {
            const uint8_t *e = tab[(uint8_t)w[g[i].off + k]];
            dst[0] = e[1];
            dst[1] = e[2];
            dst += e[0];
        }
        out->text.len = (size_t)(dst - out->text.data);
        out->text.data[out->text.len] = 0;
        if ((st = cmf__tk_grow((void **)&out->v, &out->cap, out->n + 1, sizeof *out->v))) return st;
        out->v[out->n++] = (tk_piece){off, out->text.len - off, at_start && g[i].off == 0};
    }
    return CMF_OK;
}

static cmf_status metaspace_piece(const tk_pretok *p, tk_ctx *ctx, const char *s, size_t len, bool at_start,
                                  tk_pieces *out)
{
    cmf_status st;
    cmf__buf *t = &ctx->ptmp;
    t->len = 0;
    bool starts = len >= p->rep_len && memcmp(s, p->rep, p->rep_len) == 0;
    bool space0 = len && s[0] == ' ';
    if (!starts && !space0 &&
        (p->prepend == TK_PREPEND_ALWAYS || (p->prepend == TK_PREPEND_FIRST && at_start))) {
        if ((st = cmf__buf_append(t, p->rep, p->rep_len))) return st;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') st = cmf__buf_append(t, p->rep, p->rep_len);
        else st = cmf__buf_append(t, s + i, 1);
        if (st) return st;
    }
    const char *w = (const char *)t->data;
    size_t n = 0;
    if (!p->split) return cmf__tk_pieces_push(out, w, t->len, at_start);
    if ((st = segs_from_pred(pred_char, p->replacement, ctx, w, t->len, &n))) return st;
    return emit_behavior(ctx, n, TK_B_MERGED_NEXT, false, w, at_start, out);
}

static cmf_status apply_one(const tk_pretok *p, tk_ctx *ctx, const char *s, size_t len, bool at_start,
                            tk_pieces *out)
{
    cmf_status st;
    size_t n = 0;
    switch (p->type) {
    case TK_P_SPLIT:
        if ((st = segs_from_re(&p->re, ctx, s, len, &n))) return st;
        return emit_behavior(ctx, n, p->behavior, p->invert, s, at_start, out);
    case TK_P_WHITESPACE:
        if ((st = segs_from_re(&p->re, ctx, s, len, &n))) return st;
        return emit_behavior(ctx, n, TK_B_REMOVED, true, s, at_start, out);
    case TK_P_WSSPLIT:
        if ((st = segs_from_pred(pred_ws, 0, ctx, s, len, &n))) return st;
        return emit_behavior(ctx, n, TK_B_REMOVED, false, s, at_start, out);
    case TK_P_CHARDELIM:
        if ((st = segs_from_pred(pred_char, p->delim, ctx, s, len, &n))) return st;
        return emit_behavior(ctx, n, TK_B_REMOVED, false, s, at_start, out);
    case TK_P_PUNCT:
        if ((st = segs_from_pred(pred_punct, 0, ctx, s, len, &n))) return st;
        return emit_behavior(ctx, n, p->behavior, false, s, at_start, out);
    case TK_P_DIGITS:
        if ((st = segs_from_pred(pred_digit, 0, ctx, s, len, &n))) return st;
        return emit_behavior(ctx, n, p->individual_digits ? TK_B_ISOLATED : TK_B_CONTIGUOUS, false, s, at_start,
                             out);
    case TK_P_BYTELEVEL: return bytelevel_piece(p, ctx, s, len, at_start, out);
    case TK_P_METASPACE: return metaspace_piece(p, ctx, s, len, at_start, out);
    }
    return cmf__error(CMF_ERR_INTERNAL, "tokenizer: bad pre-tokenizer type %d", p->type);
}

static cmf_status apply_all(const tk_pretok *p, tk_ctx *ctx, tk_pieces *io)
{
    tk_pieces *out = &ctx->pieces_tmp;
    out->text.len = 0;
    out->n = 0;
    cmf_status st;
    for (size_t i = 0; i < io->n; i++) {
        tk_piece pc = io->v[i];
        if ((st = apply_one(p, ctx, (const char *)io->text.data + pc.off, pc.len, pc.at_start, out))) return st;
    }
    tk_pieces t = *io;
    *io = *out;
    *out = t;
    return CMF_OK;
}

cmf_status cmf__tk_pretok_apply(const tk_pretok *p, tk_ctx *ctx, tk_pieces *io)
{
    cmf_status st;
    if (p->type == TK_P_SEQ) {
        for (size_t i = 0; i < p->n_kids; i++)
            if ((st = cmf__tk_pretok_apply(&p->kids[i], ctx, io))) return st;
        return CMF_OK;
    }
    if (p->type == TK_P_BERT) {
        tk_pretok ws = {.type = TK_P_WSSPLIT}, pu = {.type = TK_P_PUNCT, .behavior = TK_B_ISOLATED};
        if ((st = apply_all(&ws, ctx, io))) return st;
        return apply_all(&pu, ctx, io);
    }
    return apply_all(p, ctx, io);
}

static cmf_status parse_behavior(const json_t *j, const char *what, const char *path, int def, int *out)
{
    char p[TK_PATH_MAX];
    const char *b;
    size_t bl;
    cmf_status st = cmf__tk_opt_str(j, "behavior", what, path, &b, &bl);
    if (st) return st;
    if (!b) { *out = def; return CMF_OK; }
    if (!strcmp(b, "Removed")) *out = TK_B_REMOVED;
    else if (!strcmp(b, "Isolated")) *out = TK_B_ISOLATED;
    else if (!strcmp(b, "MergedWithPrevious")) *out = TK_B_MERGED_PREV;
    else if (!strcmp(b, "MergedWithNext")) *out = TK_B_MERGED_NEXT;
    else if (!strcmp(b, "Contiguous")) *out = TK_B_CONTIGUOUS;
    else {
        snprintf(p, sizeof p, "%s.behavior", path);
        return cmf__tk_err(what, p, "unknown '%s'", b);
    }
    return CMF_OK;
}

cmf_status cmf__tk_metaspace_opts(const json_t *j, const char *what, const char *path, uint32_t *rep,
                                  int *prepend)
{
    char p[TK_PATH_MAX];
    const char *r, *ps;
    size_t rl, psl;
    cmf_status st;
    if ((st = cmf__tk_opt_str(j, "replacement", what, path, &r, &rl))) return st;
    if (!r) { r = "\xE2\x96\x81"; rl = 3; }
    uint32_t c;
    snprintf(p, sizeof p, "%s.replacement", path);
    if (!rl || cmf__utf8_next((const uint8_t *)r, rl, &c) != rl)
        return cmf__tk_err(what, p, "expected exactly one character");
    *rep = c;
    if ((st = cmf__tk_opt_str(j, "prepend_scheme", what, path, &ps, &psl))) return st;
    if (ps) {
        snprintf(p, sizeof p, "%s.prepend_scheme", path);
        if (!strcmp(ps, "always")) *prepend = TK_PREPEND_ALWAYS;
        else if (!strcmp(ps, "first")) *prepend = TK_PREPEND_FIRST;
        else if (!strcmp(ps, "never")) *prepend = TK_PREPEND_NEVER;
        else return cmf__tk_err(what, p, "unknown '%s'", ps);
    } else {
        bool aps;
        if ((st = cmf__tk_opt_bool(j, "add_prefix_space", what, path, true, &aps))) return st;
        *prepend = aps ? TK_PREPEND_ALWAYS : TK_PREPEND_NEVER;
    }
    return CMF_OK;
}

/* One element of a Sequence. */
static cmf_status load_kid(void *item, const json_t *j, const char *what, const char *path)
{
    return cmf__tk_pretok_load(item, j, what, path);
}

cmf_status cmf__tk_pretok_load(tk_pretok *p, const json_t *j, const char *what, const char *path)
{
    char q[TK_PATH_MAX];
    cmf_status st;
    memset(p, 0, sizeof *p);
    const char *tn;
    if ((st = cmf__tk_component_type(j, what, path, &tn))) return st;
    if (!strcmp(tn, "Sequence")) {
        p->type = TK_P_SEQ;
        if ((st = cmf__tk_load_seq(j, "pretokenizers", what, path, sizeof *p->kids, load_kid, (void **)&p->kids, &p->n_kids)))
            return st;
    } else if (!strcmp(tn, "Split")) {
        p->type = TK_P_SPLIT;
        char *lit = NULL;
        size_t ll;
        bool rx;
        st = cmf__tk_pattern(j, "pattern", what, path, &p->re, &lit, &ll, &rx);
        free(lit);
        if (st) return st;
        p->has_re = true;
        if ((st = parse_behavior(j, what, path, -1, &p->behavior))) return st;
        if (p->behavior < 0) {
            snprintf(q, sizeof q, "%s.behavior", path);
            return cmf__tk_err(what, q, "missing");
        }
        if ((st = cmf__tk_opt_bool(j, "invert", what, path, false, &p->invert))) return st;
    } else if (!strcmp(tn, "ByteLevel")) {
        p->type = TK_P_BYTELEVEL;
        if ((st = cmf__tk_opt_bool(j, "add_prefix_space", what, path, true, &p->add_prefix_space))) return st;
        if ((st = cmf__tk_opt_bool(j, "use_regex", what, path, true, &p->use_regex))) return st;
        if (p->use_regex) {
            if ((st = cmf__tk_re_compile(&p->re, GPT2_RE, sizeof GPT2_RE - 1, false, what, path))) return st;
            p->has_re = true;
        }
    } else if (!strcmp(tn, "Metaspace")) {
        p->type = TK_P_METASPACE;
        if ((st = cmf__tk_metaspace_opts(j, what, path, &p->replacement, &p->prepend))) return st;
        p->rep_len = cmf__utf8_put(p->replacement, p->rep);
        if ((st = cmf__tk_opt_bool(j, "split", what, path, true, &p->split))) return st;
    } else if (!strcmp(tn, "Whitespace")) {
        p->type = TK_P_WHITESPACE;
        if ((st = cmf__tk_re_compile(&p->re, WHITESPACE_RE, sizeof WHITESPACE_RE - 1, false, what, path))) return st;
        p->has_re = true;
    } else if (!strcmp(tn, "WhitespaceSplit")) p->type = TK_P_WSSPLIT;
    else if (!strcmp(tn, "BertPreTokenizer")) p->type = TK_P_BERT;
    else if (!strcmp(tn, "Punctuation")) {
        p->type = TK_P_PUNCT;
        if ((st = parse_behavior(j, what, path, TK_B_ISOLATED, &p->behavior))) return st;
    } else if (!strcmp(tn, "Digits")) {
        p->type = TK_P_DIGITS;
        if ((st = cmf__tk_opt_bool(j, "individual_digits", what, path, false, &p->individual_digits))) return st;
    } else if (!strcmp(tn, "CharDelimiterSplit")) {
        p->type = TK_P_CHARDELIM;
        const char *d;
        size_t dl;
        if ((st = cmf__tk_opt_str(j, "delimiter", what, path, &d, &dl))) return st;
        snprintf(q, sizeof q, "%s.delimiter", path);
        if (!d || !dl || cmf__utf8_next((const uint8_t *)d, dl, &p->delim) != dl)
            return cmf__tk_err(what, q, "expected exactly one character");
    } else return cmf__tk_unknown_type(what, path, tn);
    return CMF_OK;
}

void cmf__tk_pretok_free(tk_pretok *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n_kids; i++) cmf__tk_pretok_free(&p->kids[i]);
    free(p->kids);
    cmf__tk_re_free(&p->re);
    memset(p, 0, sizeof *p);
}
