/* tokenizer.h — Hugging Face tokenizer.json pipeline (normalizer, pre-tokenizer,
 * BPE/Unigram/WordPiece/WordLevel model, added tokens, post-processor, decoder),
 * byte-exact with HF `tokenizers` for ids and decoded text. Offsets are not
 * tracked. A loaded cmf__tok is immutable except for its scratch context
 * (buffers, BPE word cache), taken with a trylock (a concurrent call makes
 * its own): encode/decode may be called from several threads at once. */
#ifndef CMF_TEXT_TOKENIZER_H
#define CMF_TEXT_TOKENIZER_H

#include "cmf.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cmf__tok cmf__tok;

/* Growable id array: encode appends to it. Zero-initialise, free with
 * cmf__tok_ids_free. */
typedef struct cmf__tok_ids {
    int32_t *ids;
    size_t n, cap;
} cmf__tok_ids;
void cmf__tok_ids_free(cmf__tok_ids *v);

/* Parses tokenizer.json bytes (`len` bytes, need not be NUL-terminated).
 * `what` names the source in error messages ("model.cmf: vocab"). Errors:
 * CMF_ERR_PARSE (bad JSON), CMF_ERR_TOKENIZER (unknown component type,
 * bad field; the message names the JSON path, e.g. "tokenizer.json:
 * pre_tokenizer.pretokenizers[1].type: unknown 'Foo'"), CMF_ERR_NOMEM.
 * The bytes are not referenced after return. */
cmf_status cmf__tok_load(const char *json, size_t len, const char *what, cmf__tok **out);
/* Reads a tokenizer.json file, or <dir>/tokenizer.json for a directory. */
cmf_status cmf__tok_load_path(const char *path, cmf__tok **out);
void cmf__tok_free(cmf__tok *tok);

/* Encodes `len` bytes of UTF-8 `text`, appending the ids to `out`. Invalid
 * UTF-8 is first replaced by U+FFFD (one per maximal invalid subpart, like
 * Rust's from_utf8_lossy); HF only ever sees valid strings. add_special_tokens applies the post-processor (BOS/EOS).
 * Added tokens present in the text are always recognised. */
cmf_status cmf__tok_encode(const cmf__tok *tok, const char *text, size_t len,
                           bool add_special_tokens, cmf__tok_ids *out);

/* Decodes `n` ids into a malloc'd NUL-terminated UTF-8 string (*out,
 * *out_len without the NUL; caller frees). skip_special_tokens drops added
 * tokens marked special. Ids outside the vocabulary are dropped, as HF
 * does. Byte sequences the ids produce that are not valid UTF-8 become
 * U+FFFD, as in HF. */
cmf_status cmf__tok_decode(const cmf__tok *tok, const int32_t *ids, size_t n,
                           bool skip_special_tokens, char **out, size_t *out_len);

/* Size of the id space: max(model vocab, added token ids) + 1. */
size_t cmf__tok_vocab_size(const cmf__tok *tok);
/* The token string of `id` as stored in the vocab (e.g. "Ġthe", "▁the",
 * "<0x0A>"), borrowed for the tokenizer's lifetime; NULL when unknown. */
const char *cmf__tok_piece(const cmf__tok *tok, int32_t id);
/* As cmf__tok_piece, with its length in *len (pieces may hold NUL). */
const char *cmf__tok_piece_n(const cmf__tok *tok, int32_t id, size_t *len);
/* The bytes token `id` stands for in the middle of a decoded text (the
 * decoder applied to it alone, without the effects that only touch the
 * start of a text: Strip, Metaspace's first-token prefix), replacing
 * out's contents (tokbytes.c). Raw bytes, not made valid UTF-8: a
 * byte-fallback or byte-level token may hold part of a character.
 * CMF_ERR_NOT_FOUND for an id without a piece; CMF_ERR_NOMEM. */
struct cmf__buf;
cmf_status cmf__tok_token_bytes(const cmf__tok *tok, int32_t id, struct cmf__buf *out);
/* The id of a token string (added tokens first, then the model vocab);
 * -1 when absent. Use it for "<|im_end|>", "<s>", ... */
int32_t cmf__tok_lookup(const cmf__tok *tok, const char *piece, size_t len);
/* True when `id` is an added token marked "special": true. */
bool cmf__tok_is_special(const cmf__tok *tok, int32_t id);
/* True when `id` is any added token (special or not). */
bool cmf__tok_is_added(const cmf__tok *tok, int32_t id);

/* Incremental detokenizer for streaming generation: feed ids one at a
 * time and get back only the text that became final. It decodes a window
 * of recent ids with the full decoder (so Metaspace/Strip/ByteLevel
 * semantics match cmf__tok_decode of the whole sequence, like HF's
 * DecodeStream) and holds back a trailing run of U+FFFD, which may be an
 * incomplete character, so a chunk never ends inside a character; held
 * text comes out on a later push or on flush. Concatenating all pushes and
 * the flush equals cmf__tok_decode of all ids. Not thread-safe per stream. */
typedef struct cmf__tok_stream cmf__tok_stream;
cmf_status cmf__tok_stream_new(const cmf__tok *tok, bool skip_special_tokens,
                               cmf__tok_stream **out);
/* *text (borrowed until the next call on the stream) / *text_len receive
 * the newly completed text, possibly empty. */
cmf_status cmf__tok_stream_push(cmf__tok_stream *s, int32_t id, const char **text,
                                size_t *text_len);
/* Returns whatever was held back (an incomplete trailing sequence comes
 * out as U+FFFD, as decode gives it) and resets the stream. */
cmf_status cmf__tok_stream_flush(cmf__tok_stream *s, const char **text, size_t *text_len);
void cmf__tok_stream_free(cmf__tok_stream *s);

#endif
