/* tokdecode.c — tokenizer.json decoders (ByteLevel, Metaspace, ByteFallback,
 * Fuse, Strip, Replace, WordPiece, BPEDecoder, Sequence). Like HF's
 * decode_chain, each maps a list of token strings to a list of strings;
 * the caller joins the final list. Output is always valid UTF-8. */
#include "text/tokenizer_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


cmf_status cmf__tk_strlist_push(tk_strlist *l, const char *s, size_t len)
{
    cmf_status st;
    if ((st = cmf__tk_grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v))) return st;
    size_t off = l->text.len;
    if ((st = cmf__buf_append(&l->text, s, len))) return st;
    l->v[l->n++] = (tk_span){off, len};
    return CMF_OK;
}

void cmf__tk_strlist_free(tk_strlist *l)
{
    cmf__buf_free(&l->text);
    free(l->v);
    memset(l, 0, sizeof *l);
}

#define ITEM(l, i) ((const char *)(l)->text.data + (l)->v[i].off)

/* Byte-level: every token whose chars all belong to the alphabet becomes
 * its bytes, others stay as they are; the whole is read lossily. */
static cmf_status dec_bytelevel(const tk_strlist *in, tk_strlist *out)
{
    cmf__buf bytes = {0};
    cmf_status st = CMF_OK;
    for (size_t i = 0; i < in->n && !st; i++) {
        const uint8_t *s = (const uint8_t *)ITEM(in, i);
        size_t len = in->v[i].len, mark = bytes.len;
        bool ok = true;
        for (size_t k = 0; k < len && ok;) {
            uint32_t c;
            size_t l = cmf__utf8_next(s + k, len - k, &c);
            int b = l ? cmf__bytelevel_byte(c) : -1;
            if (b < 0) ok = false;
            else {
                uint8_t bb = (uint8_t)b;
                st = cmf__buf_append(&bytes, &bb, 1);
                k += l;
            }
        }
        if (!ok) {
            bytes.len = mark;
            st = cmf__buf_append(&bytes, s, len);
        }
    }
    cmf__buf fixed = {0};
    if (!st) st = cmf__utf8_lossy(bytes.data ? (const char *)bytes.data : "", bytes.len, &fixed);
    if (!st) st = cmf__tk_strlist_push(out, fixed.data ? (const char *)fixed.data : "", fixed.len);
    cmf__buf_free(&bytes);
    cmf__buf_free(&fixed);
    return st;
}

static cmf_status dec_metaspace(const tk_decoder *d, const tk_strlist *in, tk_strlist *out)
{
    cmf__buf t = {0};
    cmf_status st = CMF_OK;
    for (size_t i = 0; i < in->n && !st; i++) {
        const uint8_t *s = (const uint8_t *)ITEM(in, i);
        size_t len = in->v[i].len;
        t.len = 0;
        for (size_t k = 0; k < len && !st;) {
            uint32_t c;
            size_t l = cmf__utf8_next(s + k, len - k, &c);
            if (!l) l = 1, c = 0xFFFD;
            if (c == d->ch) {
                if (!(i == 0 && d->prepend != TK_PREPEND_NEVER)) st = cmf__buf_append(&t, " ", 1);
            } else st = cmf__buf_append(&t, s + k, l);
            k += l;
        }
        if (!st) st = cmf__tk_strlist_push(out, t.data ? (const char *)t.data : "", t.len);
    }
    cmf__buf_free(&t);
    return st;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static cmf_status flush_bytes(cmf__buf *pend, tk_strlist *out)
{
    cmf_status st = CMF_OK;
    if (!pend->len) return CMF_OK;
    if (cmf__utf8_valid((const char *)pend->data, pend->len))
        st = cmf__tk_strlist_push(out, (const char *)pend->data, pend->len);
    else
        for (size_t i = 0; i < pend->len && !st; i++) st = cmf__tk_strlist_push(out, "\xEF\xBF\xBD", 3);
    pend->len = 0;
    return st;
}

static cmf_status dec_bytefallback(const tk_strlist *in, tk_strlist *out)
{
    cmf__buf pend = {0};
    cmf_status st = CMF_OK;
    for (size_t i = 0; i < in->n && !st; i++) {
        const char *s = ITEM(in, i);
        size_t len = in->v[i].len;
        int hi, lo;
        if (len == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && (hi = hexval(s[3])) >= 0 && (lo = hexval(s[4])) >= 0) {
            uint8_t b = (uint8_t)(hi * 16 + lo);
            st = cmf__buf_append(&pend, &b, 1);
            continue;
        }
        if ((st = flush_bytes(&pend, out))) break;
        st = cmf__tk_strlist_push(out, s, len);
    }
    if (!st) st = flush_bytes(&pend, out);
    cmf__buf_free(&pend);
    return st;
}

static cmf_status dec_strip(const tk_decoder *d, const tk_strlist *in, tk_strlist *out)
{
    char cb[4];
    size_t cl = cmf__utf8_put(d->ch, cb);
    cmf_status st = CMF_OK;
    for (size_t i = 0; i < in->n && !st; i++) {
        const char *s = ITEM(in, i);
        size_t a = 0, b = in->v[i].len;
        for (size_t k = 0; k < d->start && b - a >= cl && !memcmp(s + a, cb, cl); k++) a += cl;
        for (size_t k = 0; k < d->stop && b - a >= cl && !memcmp(s + b - cl, cb, cl); k++) b -= cl;
        st = cmf__tk_strlist_push(out, s + a, b - a);
    }
    return st;
}

static cmf_status dec_replace(const tk_decoder *d, tk_ctx *ctx, const tk_strlist *in, tk_strlist *out)
{
    cmf__buf t = {0};
    tk_span *m = NULL;
    size_t nm = 0, cap = 0;
    cmf_status st = CMF_OK;
    for (size_t i = 0; i < in->n && !st; i++) {
        const char *s = ITEM(in, i);
        size_t len = in->v[i].len, prev = 0;
        t.len = 0;
        if ((st = cmf__tk_re_find(&d->re, ctx, s, len, &m, &nm, &cap))) break;
        for (size_t k = 0; k < nm && !st; k++) {
            st = cmf__buf_append(&t, s + prev, m[k].off - prev);
            if (!st) st = cmf__buf_append(&t, d->str, d->str_len);
            prev = m[k].off + m[k].len;
        }
        if (!st) st = cmf__buf_append(&t, s + prev, len - prev);
        if (!st) st = cmf__tk_strlist_push(out, t.data ? (const char *)t.data : "", t.len);
    }
    free(m);
    cmf__buf_free(&t);
    return st;
}

/* WordPiece cleanup: HF's list of " x" -> "x" rewrites, in its order. */
static cmf_status wp_cleanup(cmf__buf *t)
{
    static const char *const from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " do not", " 's", " 've", " 're"};
    static const char *const to[] = {".", "?", "!", ",", "'", "n't", "'m", " don't", "'s", "'ve", "'re"};
    cmf__buf r = {0};
    cmf_status st = CMF_OK;
    for (size_t k = 0; k < sizeof from / sizeof *from && !st; k++) {
        size_t fl = strlen(from[k]), tl = strlen(to[k]);
        r.len = 0;
        for (size_t i = 0; i < t->len && !st;) {
            if (t->len - i >= fl && !memcmp(t->data + i, from[k], fl)) {
                st = cmf__buf_append(&r, to[k], tl);
                i += fl;
            } else st = cmf__buf_append(&r, t->data + i++, 1);
        }
        if (!st) {
            t->len = 0;
            st = cmf__buf_append(t, r.data ? r.data : (uint8_t *)"", r.len);
        }
    }
    cmf__buf_free(&r);
    return st;
}

static cmf_status dec_wordpiece(const tk_decoder *d, const tk_strlist *in, tk_strlist *out)
{
    cmf__buf t = {0};
    cmf_status st = CMF_OK;
    for (size_t i = 0; i < in->n && !st; i++) {
        const char *s = ITEM(in, i);
        size_t len = in->v[i].len;
        t.len = 0;
        if (i != 0 && !(len >= d->str_len && !memcmp(s, d->str, d->str_len))) {
            st = cmf__buf_append(&t, " ", 1);
            if (!st) st = cmf__buf_append(&t, s, len);
        } else if (i != 0) st = cmf__buf_append(&t, s + d->str_len, len - d->str_len);
        else st = cmf__buf_append(&t, s, len);
        if (!st && d->cleanup) st = wp_cleanup(&t);
        if (!st) st = cmf__tk_strlist_push(out, t.data ? (const char *)t.data : "", t.len);
    }
    cmf__buf_free(&t);
    return st;
}

static cmf_status dec_bpe(const tk_decoder *d, const tk_strlist *in, tk_strlist *out)
{
    cmf__buf t = {0};
    cmf_status st = CMF_OK;
    for (size_t i = 0; i < in->n && !st; i++) {
        const char *s = ITEM(in, i);
        size_t len = in->v[i].len, prev = 0;
        const char *rep = i + 1 == in->n ? "" : " ";
        t.len = 0;
        for (size_t k = 0; d->str_len && k + d->str_len <= len && !st;) {
            if (!memcmp(s + k, d->str, d->str_len)) {
                st = cmf__buf_append(&t, s + prev, k - prev);
                if (!st) st = cmf__buf_append(&t, rep, strlen(rep));
                k += d->str_len;
                prev = k;
            } else k++;
        }
        if (!st) st = cmf__buf_append(&t, s + prev, len - prev);
        if (!st) st = cmf__tk_strlist_push(out, t.data ? (const char *)t.data : "", t.len);
    }
    cmf__buf_free(&t);
    return st;
}

cmf_status cmf__tk_decoder_apply(const tk_decoder *d, tk_ctx *ctx, tk_strlist *io)
{
    cmf_status st;
    if (d->type == TK_D_SEQ) {
        for (size_t i = 0; i < d->n_kids; i++)
            if ((st = cmf__tk_decoder_apply(&d->kids[i], ctx, io))) return st;
        return CMF_OK;
    }
    tk_strlist out = {0};
    switch (d->type) {
    case TK_D_BYTELEVEL: st = dec_bytelevel(io, &out); break;
    case TK_D_METASPACE: st = dec_metaspace(d, io, &out); break;
    case TK_D_BYTEFALLBACK: st = dec_bytefallback(io, &out); break;
    case TK_D_FUSE: {
        cmf__buf *t = &out.text;
        st = CMF_OK;
        for (size_t i = 0; i < io->n && !st; i++) st = cmf__buf_append(t, ITEM(io, i), io->v[i].len);
        if (!st) {
            st = cmf__tk_grow((void **)&out.v, &out.cap, 1, sizeof *out.v);
            if (!st) out.v[out.n++] = (tk_span){0, t->len};
        }
        break;
    }
    case TK_D_STRIP: st = dec_strip(d, io, &out); break;
    case TK_D_REPLACE: st = dec_replace(d, ctx, io, &out); break;
    case TK_D_WORDPIECE: st = dec_wordpiece(d, io, &out); break;
    case TK_D_BPE: st = dec_bpe(d, io, &out); break;
    default: st = cmf__error(CMF_ERR_INTERNAL, "tokenizer: bad decoder type %d", d->type);
    }
    if (st) {
        cmf__tk_strlist_free(&out);
        return st;
    }
    cmf__tk_strlist_free(io);
    *io = out;
    return CMF_OK;
}

/* One element of a Sequence. */
static cmf_status load_kid(void *item, const json_t *j, const char *what, const char *path)
{
    return cmf__tk_decoder_load(item, j, what, path);
}

cmf_status cmf__tk_decoder_load(tk_decoder *d, const json_t *j, const char *what, const char *path)
{
    char q[TK_PATH_MAX];
    cmf_status st;
    memset(d, 0, sizeof *d);
    const char *tn;
    if ((st = cmf__tk_component_type(j, what, path, &tn))) return st;
    const char *s;
    size_t sl;
    if (!strcmp(tn, "Sequence")) {
        d->type = TK_D_SEQ;
        if ((st = cmf__tk_load_seq(j, "decoders", what, path, sizeof *d->kids, load_kid, (void **)&d->kids, &d->n_kids)))
            return st;
    } else if (!strcmp(tn, "ByteLevel")) d->type = TK_D_BYTELEVEL;
    else if (!strcmp(tn, "ByteFallback")) d->type = TK_D_BYTEFALLBACK;
    else if (!strcmp(tn, "Fuse")) d->type = TK_D_FUSE;
    else if (!strcmp(tn, "Metaspace")) {
        d->type = TK_D_METASPACE;
        if ((st = cmf__tk_metaspace_opts(j, what, path, &d->ch, &d->prepend))) return st;
    } else if (!strcmp(tn, "Strip")) {
        d->type = TK_D_STRIP;
        if ((st = cmf__tk_opt_str(j, "content", what, path, &s, &sl))) return st;
        snprintf(q, sizeof q, "%s.content", path);
        if (!s || !sl || cmf__utf8_next((const uint8_t *)s, sl, &d->ch) != sl)
            return cmf__tk_err(what, q, "expected exactly one character");
        if ((st = cmf__tk_opt_uint(j, "start", what, path, 0, &d->start))) return st;
        if ((st = cmf__tk_opt_uint(j, "stop", what, path, 0, &d->stop))) return st;
    } else if (!strcmp(tn, "Replace")) {
        d->type = TK_D_REPLACE;
        if ((st = cmf__tk_pattern(j, "pattern", what, path, &d->re, &d->pat, &d->pat_len, &d->regex))) return st;
        if ((st = cmf__tk_str_field(j, "content", what, path, &d->str, &d->str_len))) return st;
    } else if (!strcmp(tn, "WordPiece")) {
        d->type = TK_D_WORDPIECE;
        if ((st = cmf__tk_opt_str(j, "prefix", what, path, &s, &sl))) return st;
        if (!s) { s = "##"; sl = 2; }
        if (!(d->str = cmf__tk_dup(s, sl))) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
        d->str_len = sl;
        if ((st = cmf__tk_opt_bool(j, "cleanup", what, path, true, &d->cleanup))) return st;
    } else if (!strcmp(tn, "BPEDecoder")) {
        d->type = TK_D_BPE;
        if ((st = cmf__tk_opt_str(j, "suffix", what, path, &s, &sl))) return st;
        if (!s) { s = "</w>"; sl = 4; }
        if (!(d->str = cmf__tk_dup(s, sl))) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
        d->str_len = sl;
    } else return cmf__tk_unknown_type(what, path, tn);
    return CMF_OK;
}

void cmf__tk_decoder_free(tk_decoder *d)
{
    if (!d) return;
    for (size_t i = 0; i < d->n_kids; i++) cmf__tk_decoder_free(&d->kids[i]);
    free(d->kids);
    free(d->pat);
    free(d->str);
    cmf__tk_re_free(&d->re);
    memset(d, 0, sizeof *d);
}
