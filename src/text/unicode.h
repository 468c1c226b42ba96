/* unicode.h — the small Unicode toolkit the tokenizer needs: UTF-8 decode/
 * encode, lossy repair (Rust from_utf8_lossy semantics), character classes
 * with Rust `char` method semantics (is_whitespace, is_alphanumeric, ...),
 * and the GPT-2 byte-level alphabet. Built on utf8proc's tables. */
#ifndef CMF_TEXT_UNICODE_H
#define CMF_TEXT_UNICODE_H

#include "cmf.h"
#include "util/buf.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decodes one scalar at s[0..len). Returns its length (1..4) and sets *cp;
 * returns 0 when the bytes there do not start a valid sequence. */
size_t cmf__utf8_next(const uint8_t *s, size_t len, uint32_t *cp);
/* Encodes cp (a valid scalar) into out; returns 1..4. */
size_t cmf__utf8_put(uint32_t cp, char out[4]);
/* True when all `len` bytes are valid UTF-8. */
bool cmf__utf8_valid(const char *s, size_t len);
/* Appends s to out, replacing each maximal invalid subpart by U+FFFD. */
cmf_status cmf__utf8_lossy(const char *s, size_t len, cmf__buf *out);

bool cmf__uni_is_whitespace(uint32_t c); /* Rust char::is_whitespace */
bool cmf__uni_is_alphanumeric(uint32_t c); /* letters and numbers */
bool cmf__uni_is_numeric(uint32_t c);    /* Nd, Nl, No */
bool cmf__uni_is_punctuation(uint32_t c); /* P* */
bool cmf__uni_is_mark(uint32_t c);       /* Mn, Mc, Me */
bool cmf__uni_is_other(uint32_t c);      /* Cc, Cf, Cs, Co, Cn */
bool cmf__uni_is_cjk(uint32_t c);        /* BERT's "Chinese character" ranges */

/* GPT-2 byte-level alphabet: code point -> byte (-1 when none). */
int cmf__bytelevel_byte(uint32_t cp);
/* Table: [b][0] = UTF-8 length (1..2) of byte b's code point, [b][1..] = bytes. */
const uint8_t (*cmf__bytelevel_utf8(void))[4];

#endif
