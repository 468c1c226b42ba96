/* grammar.h — the grammar engine behind constrained decoding: GBNF text
 * (llama.cpp's syntax) compiled into rules of elements (gbnf.c), a
 * matcher whose state is a set of pushdown stacks advanced one byte at a
 * time over UTF-8 (match.c), the vocabulary's token bytes in a prefix
 * trie with allowed-token masks (vocab.c), and JSON Schema -> GBNF
 * (schema.c, schema_oneof.c, regex.c). A compiled cmf__gram and a
 * cmf__gvocab are immutable: any number of threads may use them at once,
 * each with its own cmf__gstate and cmf__gwalk. */
#ifndef CMF_GRAMMAR_GRAMMAR_H
#define CMF_GRAMMAR_GRAMMAR_H

#include "cmf.h"
#include "text/tokenizer.h"
#include "util/buf.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A rule is a run of elements: alternatives separated by ALT, the last one
 * closed by END. A character class is CHAR or CHAR_NOT with its first
 * code point, an optional RNG_UPPER (the range's upper end), then any
 * number of CHAR_ALT (+ RNG_UPPER) for further ranges. ANY is ".". */
enum {
    CMF__G_END, CMF__G_ALT, CMF__G_REF, CMF__G_CHAR, CMF__G_CHAR_NOT, CMF__G_RNG_UPPER,
    CMF__G_CHAR_ALT, CMF__G_ANY
};
typedef struct cmf__gelem {
    uint32_t type;
    uint32_t value;     /* code point, or rule index for REF */
} cmf__gelem;

typedef struct cmf__gram {
    cmf__gelem *el;      /* [n_el] every rule's elements end to end */
    size_t n_el;
    uint32_t *rule_start; /* [n_rules] index of the rule's first element */
    char **rule_name;    /* [n_rules] names; generated rules are "<name>_<n>" */
    size_t n_rules;
    uint32_t root;       /* the rule named "root" */
} cmf__gram;

/* Parses GBNF text (`len` bytes). `what` names the source in messages.
 * Errors: CMF_ERR_PARSE, the message naming line and column ("schema.gbnf:
 * line 3, column 14: unterminated character class"), undefined rules,
 * a missing root, left recursion; CMF_ERR_NOMEM. */
cmf_status cmf__gram_parse(const char *text, size_t len, const char *what, cmf__gram **out);
void cmf__gram_free(cmf__gram *g);

/* ---- matcher (match.c) ----
 * A state: the stacks of element positions the input may continue with
 * (top last, always a character element; an empty stack means the
 * grammar may end here), and the partial UTF-8 character read so far. */
typedef struct cmf__gstate {
    uint32_t *pos;        /* [n_pos] stacks end to end */
    uint32_t *off;        /* [n_stacks + 1] stack i is pos[off[i] .. off[i+1]) */
    size_t n_pos, cap_pos, n_stacks, cap_off;
    uint32_t cp;          /* partial character: value so far */
    uint8_t need;         /* continuation bytes still to come (0: none) */
    uint8_t lo, hi;       /* range of the next continuation byte */
    uint32_t *suf;        /* scratch for expansion (n_rules + 4) */
    size_t cap_suf;
} cmf__gstate;

/* The start state of g (its root's alternatives expanded). */
cmf_status cmf__gstate_init(const cmf__gram *g, cmf__gstate *s);
void cmf__gstate_free(cmf__gstate *s);
cmf_status cmf__gstate_copy(cmf__gstate *dst, const cmf__gstate *src);
/* Advances `in` by one byte into `out` (a different state). Returns 1 when
 * some continuation remains, 0 when the byte is refused (out is then
 * empty), -1 on allocation failure (message set). */
int cmf__gstate_byte(const cmf__gram *g, const cmf__gstate *in, uint8_t b, cmf__gstate *out);
/* Whether the input may end here (no partial character, an empty stack). */
bool cmf__gstate_can_end(const cmf__gstate *s);
/* Whether no continuation remains. */
static inline bool cmf__gstate_dead(const cmf__gstate *s) { return s->n_stacks == 0; }
/* Serialises the state (stacks and partial character) into out, as a
 * cache key: equal keys mean equal futures. */
cmf_status cmf__gstate_key(const cmf__gstate *s, cmf__buf *out);

/* ---- token tries (vocab.c) ----
 * Byte strings with ids in a prefix trie laid out depth-first (node i's
 * subtree is [i, end[i])): one matcher step per node serves every string
 * through it, and a refused byte skips its subtree. */
typedef struct cmf__gtrie_key {
    const uint8_t *p;
    size_t len;
    int32_t id;
} cmf__gtrie_key;
typedef struct cmf__gtrie {
    uint8_t *node_byte;   /* [n_nodes] */
    uint16_t *node_depth; /* [n_nodes] 1 = a first byte */
    uint32_t *node_end;   /* [n_nodes] one past the subtree */
    uint32_t *node_tok;   /* [n_nodes] first index into ids[] of the strings ending here */
    uint32_t *node_ntok;  /* [n_nodes] */
    int32_t *ids;         /* the ids, by their strings */
    size_t n_nodes, max_depth;
} cmf__gtrie;
/* Builds from keys[0..n) (sorted in place; lengths below 65536; the
 * bytes must outlive the trie only during the build). */
cmf_status cmf__gtrie_build(cmf__gtrie *t, cmf__gtrie_key *keys, size_t n);
void cmf__gtrie_free(cmf__gtrie *t);
typedef struct cmf__gwalk cmf__gwalk;
/* Sets the bit of every id whose string state s accepts whole. */
cmf_status cmf__gtrie_walk(const cmf__gtrie *t, const cmf__gram *g, const cmf__gstate *s, cmf__gwalk *w,
                           uint32_t *bits);

/* ---- vocabulary (vocab.c) ----
 * Every token's bytes (cmf__tok_token_bytes) and a prefix trie of them,
 * built once per model. Tokens that are never allowed: special added
 * tokens (unless an eos), ids without a piece or with no bytes, ids past
 * the tokenizer (a model's padded rows). eos ids are allowed exactly
 * where the grammar may end. */
typedef struct cmf__gvocab cmf__gvocab;
typedef struct cmf__gloops cmf__gloops;
cmf_status cmf__gvocab_new(const cmf__tok *tok, int32_t n_vocab, const int32_t *eos, size_t n_eos,
                           cmf__gvocab **out);
void cmf__gvocab_free(cmf__gvocab *v);
int32_t cmf__gvocab_n_vocab(const cmf__gvocab *v);
bool cmf__gvocab_is_eos(const cmf__gvocab *v, int32_t token);
/* The token's bytes (borrowed); NULL for a token never allowed. */
const uint8_t *cmf__gvocab_bytes(const cmf__gvocab *v, int32_t token, size_t *len);
/* The vocabulary's class cache for cmf__gmask. */
cmf__gloops *cmf__gvocab_loops(const cmf__gvocab *v);

/* Per-caller scratch of the trie walk (one state per trie depth). */
struct cmf__gwalk {
    cmf__gstate *st;
    size_t n_st;
    cmf__gstate *chain;          /* fastmask.c: states along a character class */
    const cmf__gstate **chain_at;
    size_t n_chain;
};
void cmf__gwalk_free(cmf__gwalk *w);
/* Sets bit t of `bits` ([(n_vocab + 31) / 32], cleared first) for every
 * token that may come next in state s. */
cmf_status cmf__gvocab_mask(const cmf__gvocab *v, const cmf__gram *g, const cmf__gstate *s, cmf__gwalk *w,
                            uint32_t *bits);
/* The same set, checking every token one by one (the reference the trie
 * walk is tested against). */
cmf_status cmf__gvocab_mask_brute(const cmf__gvocab *v, const cmf__gram *g, const cmf__gstate *s,
                                  uint32_t *bits);
/* Whether token may come next: 1 yes, 0 no, -1 allocation failure. When
 * `next` is not NULL and the answer is 1, it receives the state after the
 * token (an eos leaves it a copy of s). */
int cmf__gvocab_allows(const cmf__gvocab *v, const cmf__gram *g, const cmf__gstate *s, int32_t token,
                       cmf__gstate *next);

/* ---- fast masks (fastmask.c) ----
 * Per vocabulary: the token sets of the character classes states run on,
 * made on first use and kept (any grammar's classes); thread-safe. */
cmf__gloops *cmf__gloops_new(void);
void cmf__gloops_free(cmf__gloops *l);
/* The same set as cmf__gvocab_mask; loops may be NULL (always the trie). */
cmf_status cmf__gmask(const cmf__gvocab *v, const cmf__gram *g, cmf__gloops *loops, const cmf__gstate *s,
                      cmf__gwalk *w, uint32_t *bits);

/* ---- JSON Schema (schema.c) ----
 * Writes a GBNF grammar for the JSON values `schema` (JSON text, `len`
 * bytes; an object or a boolean) accepts into out. Errors: CMF_ERR_PARSE
 * (bad JSON), CMF_ERR_UNSUPPORTED naming the keyword and its JSON pointer
 * path ("json schema: /properties/age/multipleOf: keyword 'multipleOf' not
 * supported"; a oneOf whose branches are not proven disjoint),
 * CMF_ERR_ARG for contradictions (minItems > maxItems, the schema false). */
cmf_status cmf__schema_to_gbnf(const char *schema, size_t len, cmf__buf *out);
/* The grammar of any JSON object (response_format json_object). */
const char *cmf__gbnf_json_object(void);

/* ---- regular expressions (regex.c) ----
 * Appends a GBNF expression matching the strings of `pattern` (JSON
 * Schema's ECMA subset: literals, ., classes with ranges and \d \w \s,
 * groups, |, * + ? {m,n}, ^ $ at the ends) to out, inside a JSON string
 * (escaping '"' and '\\'). `path` is the schema's JSON pointer. Errors:
 * CMF_ERR_UNSUPPORTED naming the path, the construct and its offset, as the
 * schema's other errors read ("json schema: /properties/c/pattern: a
 * lookaround or named group at offset 1 of ..."). */
cmf_status cmf__regex_to_gbnf(const char *pattern, const char *path, cmf__buf *out);

#endif
