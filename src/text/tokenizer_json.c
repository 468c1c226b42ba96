/* tokenizer_json.c — a small, fast reader for the two big values of a
 * tokenizer.json: model.vocab and model.merges (hundreds of thousands of
 * entries, where a general JSON DOM spends most of the load time). It
 * locates them, hands each entry to a callback, and leaves the rest of the
 * document to jansson (the caller blanks these spans before parsing).
 * Errors name the byte offset in the document. */
#include "text/tokenizer_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct rd {
    const char *s;
    size_t len, pos;
    const char *what;
    cmf__buf tmp[2];
} rd;

static cmf_status rd_err(const rd *r, const char *msg)
{
    return cmf__error(CMF_ERR_PARSE, "%s: byte %zu: %s", r->what, r->pos, msg);
}

static inline void ws(rd *r)
{
    while (r->pos < r->len) {
        char c = r->s[r->pos];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
        r->pos++;
    }
}

static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Reads a string at r->pos ('"'); *out points into the document when it
 * has no escapes, else into tmp[slot]. */
static cmf_status rd_str(rd *r, int slot, const char **out, size_t *out_len)
{
    if (r->pos >= r->len || r->s[r->pos] != '"') return rd_err(r, "expected a string");
    size_t start = ++r->pos;
    const char *q = r->s + start;
    const char *end = r->s + r->len;
    while (q < end && *q != '"' && *q != '\\' && (uint8_t)*q >= 0x20) q++;
    if (q < end && *q == '"') {
        *out = r->s + start;
        *out_len = (size_t)(q - (r->s + start));
        r->pos = (size_t)(q - r->s) + 1;
        return CMF_OK;
    }
    cmf__buf *b = &r->tmp[slot];
    b->len = 0;
    cmf_status st = cmf__buf_append(b, r->s + start, (size_t)(q - (r->s + start)));
    if (st) return st;
    r->pos = (size_t)(q - r->s);
    while (r->pos < r->len) {
        char c = r->s[r->pos];
        if (c == '"') {
            r->pos++;
            *out = b->data ? (const char *)b->data : "";
            *out_len = b->len;
            return CMF_OK;
        }
        if ((uint8_t)c < 0x20) return rd_err(r, "control character in string");
        if (c != '\\') {
            if ((st = cmf__buf_append(b, &c, 1))) return st;
            r->pos++;
            continue;
        }
        if (r->pos + 1 >= r->len) break;
        char e = r->s[r->pos + 1];
        char one = 0;
        switch (e) {
        case '"': one = '"'; break;
        case '\\': one = '\\'; break;
        case '/': one = '/'; break;
        case 'b': one = '\b'; break;
        case 'f': one = '\f'; break;
        case 'n': one = '\n'; break;
        case 'r': one = '\r'; break;
        case 't': one = '\t'; break;
        case 'u': {
            if (r->pos + 6 > r->len) return rd_err(r, "truncated \\u escape");
            int cp = hex4(r->s + r->pos + 2);
            if (cp < 0) return rd_err(r, "bad \\u escape");
            r->pos += 6;
            uint32_t c32 = (uint32_t)cp;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                int lo = r->pos + 6 <= r->len && r->s[r->pos] == '\\' && r->s[r->pos + 1] == 'u' ? hex4(r->s + r->pos + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) return rd_err(r, "unpaired surrogate");
                r->pos += 6;
                c32 = 0x10000 + (((uint32_t)cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) return rd_err(r, "unpaired surrogate");
            char u[4];
            if ((st = cmf__buf_append(b, u, cmf__utf8_put(c32, u)))) return st;
            continue;
        }
        default: return rd_err(r, "bad escape");
        }
        if ((st = cmf__buf_append(b, &one, 1))) return st;
        r->pos += 2;
    }
    return rd_err(r, "unterminated string");
}

static cmf_status rd_skip(rd *r, int depth)
{
    ws(r);
    if (r->pos >= r->len) return rd_err(r, "unexpected end");
    if (depth > 200) return rd_err(r, "nesting too deep");
    char c = r->s[r->pos];
    cmf_status st;
    const char *s;
    size_t l;
    if (c == '"') return rd_str(r, 0, &s, &l);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        r->pos++;
        ws(r);
        if (r->pos < r->len && r->s[r->pos] == close) {
            r->pos++;
            return CMF_OK;
        }
        for (;;) {
            if (c == '{') {
                ws(r);
                if ((st = rd_str(r, 0, &s, &l))) return st;
                ws(r);
                if (r->pos >= r->len || r->s[r->pos] != ':') return rd_err(r, "expected ':'");
                r->pos++;
            }
            if ((st = rd_skip(r, depth + 1))) return st;
            ws(r);
            if (r->pos >= r->len) return rd_err(r, "unexpected end");
            if (r->s[r->pos] == ',') { r->pos++; continue; }
            if (r->s[r->pos] == close) { r->pos++; return CMF_OK; }
            return rd_err(r, "expected ',' or a closing bracket");
        }
    }
    /* number, true, false, null */
    size_t start = r->pos;
    while (r->pos < r->len && strchr("+-0123456789.eEtrufalsn", r->s[r->pos]) && r->s[r->pos]) r->pos++;
    if (r->pos == start) return rd_err(r, "unexpected character");
    return CMF_OK;
}

/* Skips an array or object quickly: strings are jumped over with memchr,
 * brackets counted. Full validation happens when the value is read. */
static cmf_status fast_skip(rd *r)
{
    ws(r);
    if (r->pos >= r->len || (r->s[r->pos] != '[' && r->s[r->pos] != '{')) return rd_skip(r, 1);
    size_t depth = 0, i = r->pos;
    const char *s = r->s;
    while (i < r->len) {
        char c = s[i];
        if (c == '"') {
            for (;;) {
                const char *q = memchr(s + i + 1, '"', r->len - i - 1);
                if (!q) {
                    r->pos = r->len;
                    return rd_err(r, "unterminated string");
                }
                i = (size_t)(q - s);
                size_t bs = 0;
                while (s[i - 1 - bs] == '\\') bs++;
                if (!(bs & 1)) break;
            }
            i++;
            continue;
        }
        if (c == '[' || c == '{') depth++;
        else if (c == ']' || c == '}') {
            if (--depth == 0) {
                r->pos = i + 1;
                return CMF_OK;
            }
        }
        i++;
    }
    r->pos = r->len;
    return rd_err(r, "unterminated value");
}

/* Finds key in the object at r->pos; leaves r->pos at its value. */
static cmf_status rd_find(rd *r, const char *key, bool *found)
{
    cmf_status st;
    *found = false;
    ws(r);
    if (r->pos >= r->len || r->s[r->pos] != '{') return CMF_OK;
    r->pos++;
    ws(r);
    if (r->pos < r->len && r->s[r->pos] == '}') return CMF_OK;
    size_t kl = strlen(key);
    for (;;) {
        const char *k;
        size_t l;
        ws(r);
        if ((st = rd_str(r, 0, &k, &l))) return st;
        ws(r);
        if (r->pos >= r->len || r->s[r->pos] != ':') return rd_err(r, "expected ':'");
        r->pos++;
        ws(r);
        if (l == kl && !memcmp(k, key, kl)) {
            *found = true;
            return CMF_OK;
        }
        if ((st = fast_skip(r))) return st;
        ws(r);
        if (r->pos < r->len && r->s[r->pos] == ',') { r->pos++; continue; }
        return CMF_OK;
    }
}

cmf_status cmf__tkj_locate(const char *json, size_t len, const char *what, tk_raw *raw)
{
    rd r = {.s = json, .len = len, .what = what};
    cmf_status st;
    bool found;
    memset(raw, 0, sizeof *raw);
    if ((st = rd_find(&r, "model", &found)) || !found) goto out;
    size_t model = r.pos;
    if ((st = rd_find(&r, "vocab", &found))) goto out;
    if (found) {
        raw->vocab.off = r.pos;
        if ((st = fast_skip(&r))) goto out;
        raw->vocab.len = r.pos - raw->vocab.off;
    }
    r.pos = model;
    if ((st = rd_find(&r, "merges", &found))) goto out;
    if (found) {
        raw->merges.off = r.pos;
        if ((st = fast_skip(&r))) goto out;
        raw->merges.len = r.pos - raw->merges.off;
    }
out:
    /* Syntax errors are left for jansson to report with line/column. */
    cmf__buf_free(&r.tmp[0]);
    cmf__buf_free(&r.tmp[1]);
    if (st) memset(raw, 0, sizeof *raw);
    cmf__error_clear();
    return CMF_OK;
}

static cmf_status expect(rd *r, char c, const char *msg)
{
    ws(r);
    if (r->pos >= r->len || r->s[r->pos] != c) return rd_err(r, msg);
    r->pos++;
    return CMF_OK;
}

/* Iterates an object or array; calls item() with r at each element/value. */
typedef cmf_status (*item_fn)(rd *r, const char *key, size_t klen, size_t idx, void *ud);

static cmf_status iterate(const char *json, tk_span sp, const char *what, bool object, item_fn fn, void *ud)
{
    rd r = {.s = json, .len = sp.off + sp.len, .pos = sp.off, .what = what};
    cmf_status st;
    char close = object ? '}' : ']';
    if ((st = expect(&r, object ? '{' : '[', object ? "expected an object" : "expected an array"))) goto out;
    ws(&r);
    if (r.pos < r.len && r.s[r.pos] == close) goto out;
    for (size_t idx = 0;; idx++) {
        const char *k = NULL;
        size_t kl = 0;
        ws(&r);
        if (object) {
            if ((st = rd_str(&r, 1, &k, &kl))) goto out;
            if ((st = expect(&r, ':', "expected ':'"))) goto out;
            ws(&r);
        }
        if ((st = fn(&r, k, kl, idx, ud))) goto out;
        ws(&r);
        if (r.pos < r.len && r.s[r.pos] == ',') { r.pos++; continue; }
        st = expect(&r, close, "expected ',' or a closing bracket");
        goto out;
    }
out:
    cmf__buf_free(&r.tmp[0]);
    cmf__buf_free(&r.tmp[1]);
    return st;
}

static cmf_status rd_number(rd *r, double *v, bool *is_int, int64_t *iv)
{
    ws(r);
    size_t start = r->pos;
    while (r->pos < r->len && strchr("+-0123456789.eE", r->s[r->pos]) && r->s[r->pos]) r->pos++;
    if (r->pos == start || r->pos - start > 60) return rd_err(r, "expected a number");
    char tmp[64];
    memcpy(tmp, r->s + start, r->pos - start);
    tmp[r->pos - start] = 0;
    char *end;
    errno = 0;
    *is_int = !strpbrk(tmp, ".eE");
    if (*is_int) {
        *iv = strtoll(tmp, &end, 10);
        *v = (double)*iv;
    } else *v = strtod(tmp, &end);
    if (*end || errno) {
        r->pos = start;
        return rd_err(r, "bad number");
    }
    return CMF_OK;
}

typedef struct vctx {
    tkj_vocab_fn fn;
    tkj_score_fn sfn;
    tkj_merge_fn mfn;
    void *ud;
} vctx;

static cmf_status vocab_item(rd *r, const char *key, size_t klen, size_t idx, void *ud)
{
    vctx *v = ud;
    double d;
    bool is_int;
    int64_t iv = 0;
    cmf_status st = rd_number(r, &d, &is_int, &iv);
    if (st) return st;
    if (!is_int)
        return cmf__error(CMF_ERR_TOKENIZER, "%s: model.vocab['%.*s']: id is not an integer (byte %zu)", r->what,
                          (int)(klen > 60 ? 60 : klen), key, r->pos);
    return v->fn(v->ud, key, klen, iv, r->pos);
}

cmf_status cmf__tkj_vocab(const char *json, tk_span sp, const char *what, tkj_vocab_fn fn, void *ud)
{
    vctx v = {.fn = fn, .ud = ud};
    return iterate(json, sp, what, true, vocab_item, &v);
}

static cmf_status score_item(rd *r, const char *key, size_t klen, size_t idx, void *ud)
{
    vctx *v = ud;
    cmf_status st;
    const char *p;
    size_t pl;
    double d;
    bool is_int;
    int64_t iv;
    if ((st = expect(r, '[', "expected [piece, score]"))) return st;
    ws(r);
    if ((st = rd_str(r, 0, &p, &pl))) return st;
    if ((st = expect(r, ',', "expected [piece, score]"))) return st;
    if ((st = rd_number(r, &d, &is_int, &iv))) return st;
    if ((st = expect(r, ']', "expected [piece, score]"))) return st;
    return v->sfn(v->ud, p, pl, d, idx);
}

cmf_status cmf__tkj_scores(const char *json, tk_span sp, const char *what, tkj_score_fn fn, void *ud)
{
    vctx v = {.sfn = fn, .ud = ud};
    return iterate(json, sp, what, false, score_item, &v);
}

static cmf_status merge_item(rd *r, const char *key, size_t klen, size_t idx, void *ud)
{
    vctx *v = ud;
    cmf_status st;
    const char *a, *b;
    size_t al, bl;
    ws(r);
    if (r->pos < r->len && r->s[r->pos] == '"') {
        size_t at = r->pos;
        if ((st = rd_str(r, 0, &a, &al))) return st;
        const char *sp = memchr(a, ' ', al);
        if (!sp)
            return cmf__error(CMF_ERR_TOKENIZER, "%s: model.merges[%zu]: merge has no space (byte %zu)", r->what,
                              idx, at);
        return v->mfn(v->ud, a, (size_t)(sp - a), sp + 1, al - (size_t)(sp - a) - 1, idx);
    }
    if ((st = expect(r, '[', "expected \"a b\" or [a, b]"))) return st;
    ws(r);
    if ((st = rd_str(r, 0, &a, &al))) return st;
    if ((st = expect(r, ',', "expected [a, b]"))) return st;
    ws(r);
    if ((st = rd_str(r, 1, &b, &bl))) return st;
    if ((st = expect(r, ']', "expected [a, b]"))) return st;
    return v->mfn(v->ud, a, al, b, bl, idx);
}

cmf_status cmf__tkj_merges(const char *json, tk_span sp, const char *what, tkj_merge_fn fn, void *ud)
{
    vctx v = {.mfn = fn, .ud = ud};
    return iterate(json, sp, what, false, merge_item, &v);
}
