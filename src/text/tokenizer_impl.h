/* tokenizer_impl.h — internals shared by the tokenizer's files (not an API):
 * the component structs built from tokenizer.json, the PCRE2 wrapper and
 * the per-call scratch context (containers and field readers: tokshared.h). Offsets are
 * not tracked anywhere: every stage maps strings to strings. */
#ifndef CMF_TEXT_TOKENIZER_IMPL_H
#define CMF_TEXT_TOKENIZER_IMPL_H

#include "text/tokenizer.h"
#include "text/tokshared.h"
#include "text/unicode.h"
#include "util/buf.h"
#include "util/error.h"
#include <jansson.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* ---- regex (pretok.c) ---- */
typedef struct tk_re {
    pcre2_code *code;
} tk_re;
typedef struct tk_span {
    size_t off, len;
} tk_span;
typedef struct tk_ctx tk_ctx;
cmf_status cmf__tk_re_compile(tk_re *re, const char *pat, size_t len, bool literal, const char *what,
                              const char *path);
void cmf__tk_re_free(tk_re *re);
/* All non-overlapping matches of re in s (Rust find_iter semantics). */
cmf_status cmf__tk_re_find(const tk_re *re, tk_ctx *ctx, const char *s, size_t len, tk_span **m,
                           size_t *n, size_t *cap);

/* ---- fast reader for model.vocab / model.merges (tokenizer_json.c) ---- */
typedef struct tk_raw {
    tk_span vocab, merges; /* byte spans in the document; len 0 = absent */
} tk_raw;

/* Locates model.vocab and model.merges. Never fails: on a syntax error the
 * spans stay empty and jansson reports the error when parsing. */
cmf_status cmf__tkj_locate(const char *json, size_t len, const char *what, tk_raw *raw);

typedef cmf_status (*tkj_vocab_fn)(void *ud, const char *piece, size_t len, int64_t id, size_t at);
typedef cmf_status (*tkj_score_fn)(void *ud, const char *piece, size_t len, double score, size_t idx);
typedef cmf_status (*tkj_merge_fn)(void *ud, const char *a, size_t al, const char *b, size_t bl, size_t idx);
/* {piece: id, ...} */
cmf_status cmf__tkj_vocab(const char *json, tk_span sp, const char *what, tkj_vocab_fn fn, void *ud);
/* [[piece, score], ...] */
cmf_status cmf__tkj_scores(const char *json, tk_span sp, const char *what, tkj_score_fn fn, void *ud);
/* ["a b", ...] or [[a, b], ...] */
cmf_status cmf__tkj_merges(const char *json, tk_span sp, const char *what, tkj_merge_fn fn, void *ud);


/* ---- normalizers (normalize.c) ---- */
enum {
    TK_N_SEQ, TK_N_NFC, TK_N_NFD, TK_N_NFKC, TK_N_NFKD, TK_N_LOWER, TK_N_STRIP, TK_N_STRIP_ACCENTS,
    TK_N_REPLACE, TK_N_PREPEND, TK_N_PRECOMPILED, TK_N_BERT
};
typedef struct tk_norm {
    int type;
    struct tk_norm *kids;
    size_t n_kids;
    char *str; size_t str_len;      /* Prepend text, Replace content */
    char *pat; size_t pat_len;      /* Replace: literal pattern */
    tk_re re; bool regex;           /* Replace: regex pattern */
    bool left, right;               /* Strip */
    bool clean_text, chinese, lowercase; int strip_accents; /* Bert; -1 = follow lowercase */
    uint32_t *trie; size_t trie_n;  /* Precompiled: double-array units */
    char *pool; size_t pool_len;    /* Precompiled: replacement strings */
} tk_norm;
cmf_status cmf__tk_norm_load(tk_norm *n, const json_t *j, const char *what, const char *path);
void cmf__tk_norm_free(tk_norm *n);
/* Appends the normalization of s to out. */
cmf_status cmf__tk_norm_apply(const tk_norm *n, tk_ctx *ctx, const char *s, size_t len, cmf__buf *out);

/* ---- pre-tokenizers (pretok.c) ---- */
enum { TK_B_REMOVED, TK_B_ISOLATED, TK_B_MERGED_PREV, TK_B_MERGED_NEXT, TK_B_CONTIGUOUS };
enum {
    TK_P_SEQ, TK_P_SPLIT, TK_P_BYTELEVEL, TK_P_METASPACE, TK_P_WHITESPACE, TK_P_WSSPLIT, TK_P_PUNCT,
    TK_P_DIGITS, TK_P_BERT, TK_P_CHARDELIM
};
enum { TK_PREPEND_ALWAYS, TK_PREPEND_FIRST, TK_PREPEND_NEVER };
typedef struct tk_pretok {
    int type;
    struct tk_pretok *kids;
    size_t n_kids;
    tk_re re; bool has_re;          /* Split pattern, ByteLevel regex, Whitespace */
    int behavior; bool invert;
    bool add_prefix_space, use_regex; /* ByteLevel */
    uint32_t replacement; char rep[4]; size_t rep_len; int prepend; bool split; /* Metaspace */
    bool individual_digits;         /* Digits */
    uint32_t delim;                 /* CharDelimiterSplit */
} tk_pretok;
/* A list of pieces of text; at_start marks a piece at original offset 0
 * (Metaspace prepend_scheme "first"). */
typedef struct tk_piece {
    size_t off, len;
    bool at_start;
} tk_piece;
typedef struct tk_pieces {
    cmf__buf text;
    tk_piece *v;
    size_t n, cap;
} tk_pieces;
cmf_status cmf__tk_pieces_push(tk_pieces *p, const char *s, size_t len, bool at_start);
void cmf__tk_pieces_free(tk_pieces *p);
cmf_status cmf__tk_pretok_load(tk_pretok *p, const json_t *j, const char *what, const char *path);
void cmf__tk_pretok_free(tk_pretok *p);
/* Replaces *io by its pre-tokenization (uses ctx->pieces_tmp). */
cmf_status cmf__tk_pretok_apply(const tk_pretok *p, tk_ctx *ctx, tk_pieces *io);

/* Reads a Metaspace "replacement" (one char) and prepend scheme (pretok.c;
 * the Metaspace decoder reads the same fields). */
cmf_status cmf__tk_metaspace_opts(const json_t *j, const char *what, const char *path, uint32_t *rep,
                                  int *prepend);

/* ---- models (tokmodel.c) ---- */
enum { TK_M_BPE, TK_M_UNIGRAM, TK_M_WORDPIECE, TK_M_WORDLEVEL };
typedef struct tk_merge {
    uint64_t key;                   /* (left << 32 | right) + 1; 0 empty */
    uint32_t rank, id;
} tk_merge;
typedef struct tk_model {
    int type;
    tk_strs vocab;                  /* id -> piece; ids without a piece have len 0 and off UINT32_MAX */
    tk_map lookup;                  /* piece -> id */
    int32_t unk_id;                 /* -1 none */
    size_t n_entries;               /* entries model.vocab holds: bounds its ids */
    /* BPE */
    tk_merge *merges; size_t merges_mask;
    char *prefix; size_t prefix_len;  /* continuing_subword_prefix (NULL = none) */
    char *suffix; size_t suffix_len;  /* end_of_word_suffix */
    bool fuse_unk, byte_fallback, ignore_merges;
    bool meta_split;                /* words may be cut before each "▁" run (see tokmodel.c) */
    uint32_t meta_pre[16];          /* chars seen right before a "▁" inside a vocab token */
    size_t n_meta_pre;
    int32_t byte_ids[256];          /* "<0xXX>" ids, -1 absent */
    /* Unigram */
    double *scores; double min_score; tk_trie trie;
    /* WordPiece */
    size_t max_chars;
} tk_model;
/* doc/raw: the document and the spans of model.vocab / model.merges, read
 * with the fast reader (j's copies of them are blanked). */
cmf_status cmf__tk_model_load(tk_model *m, const json_t *j, const char *doc, const tk_raw *raw, const char *what);
void cmf__tk_model_free(tk_model *m);
/* Tokenizes one pre-tokenized word, appending ids. */
cmf_status cmf__tk_model_encode(const tk_model *m, tk_ctx *ctx, const char *s, size_t len, cmf__tok_ids *out);

/* ---- decoders (tokdecode.c) ---- */
enum {
    TK_D_SEQ, TK_D_BYTELEVEL, TK_D_METASPACE, TK_D_BYTEFALLBACK, TK_D_FUSE, TK_D_STRIP, TK_D_REPLACE,
    TK_D_WORDPIECE, TK_D_BPE
};
typedef struct tk_decoder {
    int type;
    struct tk_decoder *kids;
    size_t n_kids;
    uint32_t ch; size_t start, stop;          /* Strip; ch also Metaspace replacement */
    int prepend;                              /* Metaspace */
    char *pat; size_t pat_len; tk_re re; bool regex; /* Replace */
    char *str; size_t str_len;                /* Replace content, WordPiece prefix, BPE suffix */
    bool cleanup;                             /* WordPiece */
} tk_decoder;
typedef struct tk_strlist {
    cmf__buf text;
    tk_span *v;
    size_t n, cap;
} tk_strlist;
cmf_status cmf__tk_strlist_push(tk_strlist *l, const char *s, size_t len);
void cmf__tk_strlist_free(tk_strlist *l);
cmf_status cmf__tk_decoder_load(tk_decoder *d, const json_t *j, const char *what, const char *path);
void cmf__tk_decoder_free(tk_decoder *d);
/* Replaces *io by the decoder's output list. */
cmf_status cmf__tk_decoder_apply(const tk_decoder *d, tk_ctx *ctx, tk_strlist *io);

/* The tokenizer's decoder (NULL = none), for tokbytes.c. */
const tk_decoder *cmf__tok_decoder_of(const cmf__tok *tok);

/* ---- per-call scratch ---- */
struct tk_ctx {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
    tk_span *m; size_t m_n, m_cap;  /* regex matches */
    void *segs; size_t segs_cap;    /* pre-tokenizer split segments */
    cmf__buf ptmp;                  /* pre-tokenizer scratch string */
    tk_pieces pieces_tmp;
    tk_pieces pieces;               /* encode: the current segment's pieces */
    cmf__buf nbuf, nbuf2;           /* normalizer scratch */
    tk_strlist list_tmp;
    /* BPE word cache: word -> slice of cache_ids */
    tk_map cache;
    cmf__tok_ids cache_ids;
    uint32_t *cache_slice;          /* [cache.keys.n] (start << 8 | count) packed as 2 words */
    size_t cache_slice_cap;
    /* BPE / Unigram working arrays */
    void *work; size_t work_cap;
    void *work2; size_t work2_cap;
};
cmf_status cmf__tk_ctx_init(tk_ctx *c);
void cmf__tk_ctx_free(tk_ctx *c);

/* Reads {"String": s} or {"Regex": r} (the pattern at path.key), compiles it
 * into re; *lit is the malloc'd pattern text (tokshared_json.c). */
cmf_status cmf__tk_pattern(const json_t *j, const char *key, const char *what, const char *path, tk_re *re,
                           char **lit, size_t *lit_len, bool *regex);

#endif
