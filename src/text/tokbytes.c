/* tokbytes.c — the raw bytes one token stands for, for constrained
 * decoding: the tokenizer's decoder chain applied to a single piece as if
 * it stood in the middle of a text. Unlike cmf__tok_decode the result is
 * not made valid UTF-8 (a byte-fallback "<0xE2>" is the one byte 0xE2),
 * and effects that only touch the start of a whole text (Strip, the
 * Metaspace first-token prefix) are left out. */
#include "text/tokenizer_impl.h"

#include <stdlib.h>
#include <string.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Replaces every occurrence of pat in cur by rep. */
static cmf_status replace_all(cmf__buf *cur, const char *pat, size_t pat_len, const char *rep, size_t rep_len)
{
    if (!pat_len || cur->len < pat_len) return CMF_OK;
    cmf__buf o = {0};
    cmf_status st = CMF_OK;
    size_t i = 0;
    while (i < cur->len && !st) {
        if (i + pat_len <= cur->len && !memcmp(cur->data + i, pat, pat_len)) {
            st = cmf__buf_append(&o, rep, rep_len);
            i += pat_len;
        } else st = cmf__buf_append(&o, cur->data + i++, 1);
    }
    if (st) {
        cmf__buf_free(&o);
        return st;
    }
    cmf__buf_free(cur);
    *cur = o;
    return CMF_OK;
}

static cmf_status apply(const tk_decoder *d, cmf__buf *cur)
{
    cmf_status st = CMF_OK;
    switch (d->type) {
    case TK_D_SEQ:
        for (size_t i = 0; i < d->n_kids && !st; i++) st = apply(&d->kids[i], cur);
        return st;
    case TK_D_BYTELEVEL: {
        /* all chars in the byte alphabet: their bytes; else unchanged */
        cmf__buf o = {0};
        for (size_t k = 0; k < cur->len && !st;) {
            uint32_t c;
            size_t l = cmf__utf8_next(cur->data + k, cur->len - k, &c);
            int b = l ? cmf__bytelevel_byte(c) : -1;
            if (b < 0) {
                cmf__buf_free(&o);
                return CMF_OK;
            }
            uint8_t bb = (uint8_t)b;
            st = cmf__buf_append(&o, &bb, 1);
            k += l;
        }
        if (st) {
            cmf__buf_free(&o);
            return st;
        }
        cmf__buf_free(cur);
        *cur = o;
        return CMF_OK;
    }
    case TK_D_METASPACE: {
        char rep[4];
        size_t rl = cmf__utf8_put(d->ch, rep);
        return replace_all(cur, rep, rl, " ", 1);
    }
    case TK_D_REPLACE:
        /* the regex form is applied as a literal only when it is one */
        if (d->regex) return CMF_OK;
        return replace_all(cur, d->pat, d->pat_len, d->str ? d->str : "", d->str_len);
    case TK_D_BYTEFALLBACK:
        if (cur->len == 6 && !memcmp(cur->data, "<0x", 3) && cur->data[5] == '>') {
            int h = hexval((char)cur->data[3]), l = hexval((char)cur->data[4]);
            if (h >= 0 && l >= 0) {
                cur->data[0] = (uint8_t)(h << 4 | l);
                cur->len = 1;
            }
        }
        return CMF_OK;
    case TK_D_WORDPIECE:
        /* inside a text: "##x" joins the previous word, "x" starts one */
        if (d->str && cur->len >= d->str_len && !memcmp(cur->data, d->str, d->str_len)) {
            memmove(cur->data, cur->data + d->str_len, cur->len - d->str_len);
            cur->len -= d->str_len;
            return CMF_OK;
        } else {
            cmf__buf o = {0};
            if ((st = cmf__buf_append(&o, " ", 1)) || (st = cmf__buf_append(&o, cur->data, cur->len))) {
                cmf__buf_free(&o);
                return st;
            }
            cmf__buf_free(cur);
            *cur = o;
            return CMF_OK;
        }
    case TK_D_BPE:
        return replace_all(cur, d->str, d->str_len, " ", 1);
    default: /* Fuse, Strip: no effect on one token inside a text */
        return CMF_OK;
    }
}

cmf_status cmf__tok_token_bytes(const cmf__tok *tok, int32_t id, cmf__buf *out)
{
    size_t len;
    const char *p = cmf__tok_piece_n(tok, id, &len);
    out->len = 0;
    if (!p) return cmf__error(CMF_ERR_NOT_FOUND, "tokenizer: token %d has no piece", (int)id);
    cmf__buf cur = {0};
    cmf_status st = cmf__buf_append(&cur, p, len);
    const tk_decoder *d = cmf__tok_decoder_of(tok);
    /* added tokens go through the decoder too, as in cmf__tok_decode */
    if (!st && d) st = apply(d, &cur);
    if (!st) st = cmf__buf_append(out, cur.data ? cur.data : (const uint8_t *)"", cur.len);
    cmf__buf_free(&cur);
    return st;
}
