/* normalize.c — tokenizer.json normalizers: NFC/NFD/NFKC/NFKD (utf8proc),
 * Lowercase, Strip, StripAccents, Replace, Prepend, BertNormalizer,
 * Precompiled (SentencePiece charsmap: a Darts-clone double-array trie plus
 * a pool of NUL-terminated replacements) and Sequence. Each maps a valid
 * UTF-8 string to a valid UTF-8 string; no alignment is kept. */
#include "text/tokenizer_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static int b64_val(int c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Standard base64 with optional padding; false on a bad character. */
static bool b64_decode(const char *s, size_t len, uint8_t *out, size_t *out_len)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '=') {
            for (size_t k = i; k < len; k++)
                if (s[k] != '=') return false;
            break;
        }
        int v = b64_val((unsigned char)s[i]);
        if (v < 0) return false;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    *out_len = n;
    return true;
}

static cmf_status load_precompiled(tk_norm *n, const json_t *j, const char *what, const char *path)
{
    char p[TK_PATH_MAX];
    snprintf(p, sizeof p, "%s.precompiled_charsmap", path);
    const json_t *v = json_object_get(j, "precompiled_charsmap");
    if (!json_is_string(v)) return cmf__tk_err(what, p, "expected a base64 string");
    size_t sl = json_string_length(v);
    uint8_t *raw = malloc(sl / 4 * 3 + 4);
    if (!raw) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory (charsmap)");
    size_t rl;
    cmf_status st = CMF_OK;
    if (!b64_decode(json_string_value(v), sl, raw, &rl)) {
        st = cmf__tk_err(what, p, "invalid base64");
        goto done;
    }
    if (rl < 4) {
        st = cmf__tk_err(what, p, "%zu bytes, too short for the trie size", rl);
        goto done;
    }
    uint32_t trie_size = (uint32_t)raw[0] | (uint32_t)raw[1] << 8 | (uint32_t)raw[2] << 16 | (uint32_t)raw[3] << 24;
    if (trie_size % 4 || trie_size > rl - 4 || trie_size == 0) {
        st = cmf__tk_err(what, p, "trie size %u does not fit the %zu-byte blob", trie_size, rl);
        goto done;
    }
    n->trie_n = trie_size / 4;
    n->pool_len = rl - 4 - trie_size;
    n->trie = malloc(trie_size);
    n->pool = malloc(n->pool_len + 1);
    if (!n->trie || !n->pool) {
        st = cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory (charsmap)");
        goto done;
    }
    for (size_t i = 0; i < n->trie_n; i++) {
        const uint8_t *q = raw + 4 + 4 * i;
        n->trie[i] = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
    }
    memcpy(n->pool, raw + 4 + trie_size, n->pool_len);
    n->pool[n->pool_len] = 0;
    if (!cmf__utf8_valid(n->pool, n->pool_len)) st = cmf__tk_err(what, p, "replacement pool is not UTF-8");
done:
    free(raw);
    return st;
}

/* The replacement of the SHORTEST rule matching a prefix of s (HF's
 * behaviour), or NULL. A corrupt trie reads as "no rule". */
static const char *charsmap_lookup(const tk_norm *n, const uint8_t *s, size_t len, size_t *out_len)
{
    const uint32_t *a = n->trie;
    size_t pos = 0;
    uint32_t u = a[0];
    pos ^= (u >> 10) << ((u & (1u << 9)) >> 6);
    for (size_t i = 0; i < len; i++) {
        if (!s[i]) break;
        pos ^= s[i];
        if (pos >= n->trie_n) return NULL;
        u = a[pos];
        if ((u & (0x80000000u | 0xFFu)) != s[i]) return NULL;
        pos ^= (u >> 10) << ((u & (1u << 9)) >> 6);
        if ((u >> 8) & 1) {
            if (pos >= n->trie_n) return NULL;
            size_t v = a[pos] & 0x7FFFFFFFu;
            if (v >= n->pool_len) return NULL;
            const char *r = n->pool + v;
            *out_len = strlen(r);
            return r;
        }
    }
    return NULL;
}

static cmf_status precompiled_apply(const tk_norm *n, const char *s, size_t len, cmf__buf *out)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0;
    cmf_status st;
    while (i < len) {
        /* One extended grapheme cluster: [i, g). */
        utf8proc_int32_t state = 0;
        uint32_t c1;
        size_t cl = cmf__utf8_next(p + i, len - i, &c1);
        if (!cl) cl = 1, c1 = 0xFFFD;
        size_t g = i + cl;
        while (g < len) {
            uint32_t c2;
            size_t l2 = cmf__utf8_next(p + g, len - g, &c2);
            if (!l2) break;
            if (utf8proc_grapheme_break_stateful((utf8proc_int32_t)c1, (utf8proc_int32_t)c2, &state)) break;
            c1 = c2;
            g += l2;
        }
        size_t rl;
        const char *r;
        if (g - i < 6 && (r = charsmap_lookup(n, p + i, g - i, &rl))) {
            if ((st = cmf__buf_append(out, r, rl))) return st;
        } else {
            for (size_t k = i; k < g;) {
                uint32_t c;
                size_t l = cmf__utf8_next(p + k, g - k, &c);
                if (!l) l = 1;
                r = charsmap_lookup(n, p + k, l, &rl);
                if ((st = r ? cmf__buf_append(out, r, rl) : cmf__buf_append(out, s + k, l))) return st;
                k += l;
            }
        }
        i = g;
    }
    return CMF_OK;
}

static cmf_status utf8proc_apply(const char *s, size_t len, int opts, cmf__buf *out)
{
    if (!len) return CMF_OK;
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &dst,
                                      (utf8proc_option_t)(opts | UTF8PROC_STABLE));
    if (r < 0) return cmf__error(CMF_ERR_TOKENIZER, "tokenizer: normalization failed: %s", utf8proc_errmsg(r));
    cmf_status st = cmf__buf_append(out, dst, (size_t)r);
    free(dst);
    return st;
}

/* Normalization forms leave ASCII alone, and an ASCII char never combines
 * with what follows it; so only the runs holding non-ASCII bytes (plus the
 * one ASCII char before each, which a following mark may compose with) go
 * through utf8proc. */
static cmf_status nf_apply(const char *s, size_t len, int opts, cmf__buf *out)
{
    cmf_status st;
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && (uint8_t)s[j] < 0x80) j++;
        if (j == len) return cmf__buf_append(out, s + i, len - i);
        size_t start = j > i ? j - 1 : j; /* keep the ASCII char before */
        if ((st = cmf__buf_append(out, s + i, start - i))) return st;
        size_t k = j;
        while (k < len && !((uint8_t)s[k] < 0x80 && k + 1 < len && (uint8_t)s[k + 1] < 0x80)) k++;
        if ((st = utf8proc_apply(s + start, k - start, opts, out))) return st;
        i = k;
    }
    return CMF_OK;
}

static cmf_status put_cp(cmf__buf *out, uint32_t c)
{
    char b[4];
    return cmf__buf_append(out, b, cmf__utf8_put(c, b));
}

static cmf_status lower_apply(const char *s, size_t len, cmf__buf *out)
{
    const uint8_t *p = (const uint8_t *)s;
    cmf_status st;
    for (size_t i = 0; i < len;) {
        uint32_t c;
        size_t l = cmf__utf8_next(p + i, len - i, &c);
        if (!l) l = 1, c = 0xFFFD;
        i += l;
        if (c == 0x130) { /* the one unconditional multi-char lowercase */
            if ((st = cmf__buf_append(out, "i\xCC\x87", 3))) return st;
            continue;
        }
        if ((st = put_cp(out, (uint32_t)utf8proc_tolower((utf8proc_int32_t)c)))) return st;
    }
    return CMF_OK;
}

/* Keeps the chars for which keep() is true. */
static cmf_status filter_apply(const char *s, size_t len, bool (*drop)(uint32_t), cmf__buf *out)
{
    const uint8_t *p = (const uint8_t *)s;
    cmf_status st;
    for (size_t i = 0; i < len;) {
        uint32_t c;
        size_t l = cmf__utf8_next(p + i, len - i, &c);
        if (!l) l = 1, c = 0xFFFD;
        if (!drop(c) && (st = cmf__buf_append(out, s + i, l))) return st;
        i += l;
    }
    return CMF_OK;
}

static cmf_status strip_apply(const tk_norm *n, const char *s, size_t len, cmf__buf *out)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t a = 0, b = len;
    if (n->left)
        while (a < b) {
            uint32_t c;
            size_t l = cmf__utf8_next(p + a, b - a, &c);
            if (!l || !cmf__uni_is_whitespace(c)) break;
            a += l;
        }
    if (n->right)
        while (b > a) {
            size_t k = b - 1;
            while (k > a && (p[k] & 0xC0) == 0x80) k--;
            uint32_t c;
            size_t l = cmf__utf8_next(p + k, b - k, &c);
            if (!l || !cmf__uni_is_whitespace(c)) break;
            b = k;
        }
    return cmf__buf_append(out, s + a, b - a);
}

static cmf_status replace_apply(const tk_norm *n, tk_ctx *ctx, const char *s, size_t len, cmf__buf *out)
{
    cmf_status st;
    tk_span *m = NULL;
    size_t nm = 0, cap = 0;
    if ((st = cmf__tk_re_find(&n->re, ctx, s, len, &m, &nm, &cap))) goto done;
    size_t prev = 0;
    for (size_t i = 0; i < nm; i++) {
        if ((st = cmf__buf_append(out, s + prev, m[i].off - prev))) goto done;
        if ((st = cmf__buf_append(out, n->str, n->str_len))) goto done;
        prev = m[i].off + m[i].len;
    }
    st = cmf__buf_append(out, s + prev, len - prev);
done:
    free(m);
    return st;
}

static bool bert_drop(uint32_t c)
{
    if (c == 0 || c == 0xFFFD) return true;
    if (c == '\t' || c == '\n' || c == '\r') return false;
    return cmf__uni_is_other(c);
}

static cmf_status bert_apply(const tk_norm *n, const char *s, size_t len, cmf__buf *out)
{
    cmf__buf a = {0}, b = {0};
    cmf_status st = CMF_OK;
    const uint8_t *p = (const uint8_t *)s;
    /* clean_text + chinese chars in one pass into a. */
    for (size_t i = 0; i < len;) {
        uint32_t c;
        size_t l = cmf__utf8_next(p + i, len - i, &c);
        if (!l) l = 1, c = 0xFFFD;
        i += l;
        if (n->clean_text) {
            if (bert_drop(c)) continue;
            if (c == '\t' || c == '\n' || c == '\r' || cmf__uni_is_whitespace(c)) c = ' ';
        }
        if (n->chinese && cmf__uni_is_cjk(c)) {
            if ((st = cmf__buf_append(&a, " ", 1)) || (st = put_cp(&a, c)) || (st = cmf__buf_append(&a, " ", 1)))
                goto done;
            continue;
        }
        if ((st = put_cp(&a, c))) goto done;
    }
    bool strip = n->strip_accents < 0 ? n->lowercase : n->strip_accents > 0;
    if (strip) {
        if ((st = utf8proc_apply((const char *)a.data, a.len, UTF8PROC_DECOMPOSE, &b))) goto done;
        a.len = 0;
        if ((st = filter_apply((const char *)b.data, b.len, cmf__uni_is_mark, &a))) goto done;
    }
    if (n->lowercase) st = lower_apply((const char *)a.data, a.len, out);
    else st = cmf__buf_append(out, a.data, a.len);
done:
    cmf__buf_free(&a);
    cmf__buf_free(&b);
    return st;
}

cmf_status cmf__tk_norm_apply(const tk_norm *n, tk_ctx *ctx, const char *s, size_t len, cmf__buf *out)
{
    switch (n->type) {
    case TK_N_NFC: return nf_apply(s, len, UTF8PROC_COMPOSE, out);
    case TK_N_NFD: return nf_apply(s, len, UTF8PROC_DECOMPOSE, out);
    case TK_N_NFKC: return nf_apply(s, len, UTF8PROC_COMPOSE | UTF8PROC_COMPAT, out);
    case TK_N_NFKD: return nf_apply(s, len, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, out);
    case TK_N_LOWER: return lower_apply(s, len, out);
    case TK_N_STRIP: return strip_apply(n, s, len, out);
    case TK_N_STRIP_ACCENTS: return filter_apply(s, len, cmf__uni_is_mark, out);
    case TK_N_REPLACE: return replace_apply(n, ctx, s, len, out);
    case TK_N_PREPEND: {
        cmf_status st;
        if (len && (st = cmf__buf_append(out, n->str, n->str_len))) return st;
        return cmf__buf_append(out, s, len);
    }
    case TK_N_PRECOMPILED: return precompiled_apply(n, s, len, out);
    case TK_N_BERT: return bert_apply(n, s, len, out);
    case TK_N_SEQ: {
        if (!n->n_kids) return cmf__buf_append(out, s, len);
        cmf__buf a = {0}, b = {0};
        cmf_status st = cmf__buf_append(&a, s, len);
        for (size_t i = 0; !st && i < n->n_kids; i++) {
            b.len = 0;
            st = cmf__tk_norm_apply(&n->kids[i], ctx, a.data ? (const char *)a.data : "", a.len, &b);
            cmf__buf t = a;
            a = b;
            b = t;
        }
        if (!st) st = cmf__buf_append(out, a.data, a.len);
        cmf__buf_free(&a);
        cmf__buf_free(&b);
        return st;
    }
    }
    return cmf__error(CMF_ERR_INTERNAL, "tokenizer: bad normalizer type %d", n->type);
}

/* One element of a Sequence. */
static cmf_status load_kid(void *item, const json_t *j, const char *what, const char *path)
{
    return cmf__tk_norm_load(item, j, what, path);
}

cmf_status cmf__tk_norm_load(tk_norm *n, const json_t *j, const char *what, const char *path)
{
    char p[TK_PATH_MAX];
    cmf_status st;
    memset(n, 0, sizeof *n);
    n->strip_accents = -1;
    const char *tn;
    if ((st = cmf__tk_component_type(j, what, path, &tn))) return st;
    if (!strcmp(tn, "Sequence")) {
        n->type = TK_N_SEQ;
        if ((st = cmf__tk_load_seq(j, "normalizers", what, path, sizeof *n->kids, load_kid, (void **)&n->kids, &n->n_kids)))
            return st;
    } else if (!strcmp(tn, "NFC")) n->type = TK_N_NFC;
    else if (!strcmp(tn, "NFD")) n->type = TK_N_NFD;
    else if (!strcmp(tn, "NFKC")) n->type = TK_N_NFKC;
    else if (!strcmp(tn, "NFKD")) n->type = TK_N_NFKD;
    else if (!strcmp(tn, "Lowercase")) n->type = TK_N_LOWER;
    else if (!strcmp(tn, "StripAccents")) n->type = TK_N_STRIP_ACCENTS;
    else if (!strcmp(tn, "Strip")) {
        n->type = TK_N_STRIP;
        if ((st = cmf__tk_opt_bool(j, "strip_left", what, path, true, &n->left))) return st;
        if ((st = cmf__tk_opt_bool(j, "strip_right", what, path, true, &n->right))) return st;
    } else if (!strcmp(tn, "Replace")) {
        n->type = TK_N_REPLACE;
        if ((st = cmf__tk_pattern(j, "pattern", what, path, &n->re, &n->pat, &n->pat_len, &n->regex))) return st;
        if ((st = cmf__tk_str_field(j, "content", what, path, &n->str, &n->str_len))) return st;
    } else if (!strcmp(tn, "Prepend")) {
        n->type = TK_N_PREPEND;
        if ((st = cmf__tk_str_field(j, "prepend", what, path, &n->str, &n->str_len))) return st;
    } else if (!strcmp(tn, "Precompiled")) {
        n->type = TK_N_PRECOMPILED;
        if ((st = load_precompiled(n, j, what, path))) return st;
    } else if (!strcmp(tn, "BertNormalizer")) {
        n->type = TK_N_BERT;
        if ((st = cmf__tk_opt_bool(j, "clean_text", what, path, true, &n->clean_text))) return st;
        if ((st = cmf__tk_opt_bool(j, "handle_chinese_chars", what, path, true, &n->chinese))) return st;
        if ((st = cmf__tk_opt_bool(j, "lowercase", what, path, true, &n->lowercase))) return st;
        const json_t *sa = json_object_get(j, "strip_accents");
        if (sa && !json_is_null(sa)) {
            snprintf(p, sizeof p, "%s.strip_accents", path);
            if (!json_is_boolean(sa)) return cmf__tk_err(what, p, "expected a boolean or null");
            n->strip_accents = json_is_true(sa);
        }
    } else return cmf__tk_unknown_type(what, path, tn);
    return CMF_OK;
}

void cmf__tk_norm_free(tk_norm *n)
{
    if (!n) return;
    for (size_t i = 0; i < n->n_kids; i++) cmf__tk_norm_free(&n->kids[i]);
    free(n->kids);
    free(n->str);
    free(n->pat);
    cmf__tk_re_free(&n->re);
    free(n->trie);
    free(n->pool);
    memset(n, 0, sizeof *n);
}
