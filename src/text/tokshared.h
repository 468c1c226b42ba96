/* tokshared.h — what every tokenizer file shares: the containers
 * (tokshared.c: growable arrays, string pool, string -> id map, byte trie),
 * the tokenizer.json field readers and the one "Sequence" loader
 * (tokshared_json.c), and the limit on token ids. */
#ifndef CMF_TEXT_TOKSHARED_H
#define CMF_TEXT_TOKSHARED_H

#include "cmf.h"
#include "util/error.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TK_PATH_MAX 256

/* ---- strings, maps, trie (tokshared.c) ---- */
typedef struct tk_strs {      /* id -> string, strings stored in one pool */
    char *pool;
    size_t pool_len, pool_cap;
    uint32_t *off, *len;      /* [n] */
    size_t n, cap;
} tk_strs;
cmf_status cmf__tk_strs_add(tk_strs *s, const char *str, size_t len, uint32_t *idx);
void cmf__tk_strs_free(tk_strs *s);

typedef struct tk_map_slot {
    uint32_t tag;             /* high hash bits; slot empty when len == UINT32_MAX */
    uint32_t len, off;        /* key bytes in keys.pool */
    int32_t val;
} tk_map_slot;
typedef struct tk_map {       /* string -> int32 value, open addressing */
    tk_map_slot *slot;        /* [mask+1]; one probe touches the slot and the key bytes */
    size_t mask, n;
    tk_strs keys;
} tk_map;
/* Grows *p (of *cap elements of `elem` bytes) to hold `need`, doubling. */
cmf_status cmf__tk_grow(void **p, size_t *cap, size_t need, size_t elem);

cmf_status cmf__tk_map_put(tk_map *m, const char *s, size_t len, int32_t v, bool overwrite);
int32_t cmf__tk_map_get(const tk_map *m, const char *s, size_t len); /* -1 absent */
/* The same with h = cmf__tk_hash(s, len) computed by the caller. */
int32_t cmf__tk_map_get_hashed(const tk_map *m, const char *s, size_t len, uint64_t h);
/* Rehashes into `slots` slots (a power of two above twice the entries). */
cmf_status cmf__tk_map_reserve(tk_map *m, size_t slots);
void cmf__tk_map_free(tk_map *m);
uint64_t cmf__tk_hash(const char *s, size_t len);

typedef struct tk_trie {      /* byte trie, for added tokens and Unigram */
    uint64_t *key;            /* hash slots: (node << 8 | byte) + 1, 0 empty */
    uint32_t *child;
    size_t mask, n_edges;
    int32_t *value;           /* [n_nodes] -1 none */
    size_t n_nodes, nodes_cap;
    bool first[256];
} tk_trie;
cmf_status cmf__tk_trie_add(tk_trie *t, const char *s, size_t len, int32_t value);
/* Node reached from `node` by byte b; 0 when none (the root is never a child). */
uint32_t cmf__tk_trie_step(const tk_trie *t, uint32_t node, uint8_t b);
void cmf__tk_trie_free(tk_trie *t);

/* ---- tokenizer.json fields (tokshared_json.c) ---- */
/* CMF_ERR_TOKENIZER with the message "<what>: <path>: ..." */
cmf_status cmf__tk_err(const char *what, const char *path, const char *fmt, ...) CMF_PRINTF(3, 4);
/* Reads an optional string field; absent or null -> *out NULL. */
cmf_status cmf__tk_opt_str(const json_t *j, const char *key, const char *what, const char *path,
                           const char **out, size_t *len);
cmf_status cmf__tk_opt_bool(const json_t *j, const char *key, const char *what, const char *path, bool def,
                            bool *out);
cmf_status cmf__tk_opt_uint(const json_t *j, const char *key, const char *what, const char *path,
                            size_t def, size_t *out);
/* A required string field, copied (malloc'd, NUL-terminated) into *out. */
cmf_status cmf__tk_str_field(const json_t *j, const char *key, const char *what, const char *path, char **out,
                             size_t *len);
char *cmf__tk_dup(const char *s, size_t len);   /* malloc'd copy plus a NUL; NULL on OOM */
/* A component's "type": j must be an object whose "type" is a string. */
cmf_status cmf__tk_component_type(const json_t *j, const char *what, const char *path, const char **type);
/* The error for a type no loader knows: "<what>: <path>.type: unknown 'T'". */
cmf_status cmf__tk_unknown_type(const char *what, const char *path, const char *type);

/* Token ids size per-id tables (id -> piece, id -> added token), so every
 * id is checked before a table grows: it must be below
 * cmf__tk_id_limit(entries), twice the entries the document holds plus
 * CMF__TK_ID_SLACK (room for the gaps real vocabularies have), and never
 * at or past CMF__TK_MAX_IDS (2^24, the format's vocabulary limit). A few
 * bytes of JSON can thus never claim gigabytes. */
#define CMF__TK_MAX_IDS ((size_t)1 << 24)
#define CMF__TK_ID_SLACK ((size_t)65536)
size_t cmf__tk_id_limit(size_t entries);
/* CMF_OK, or CMF_ERR_TOKENIZER "<what>: <path>: id N out of range: ..." */
cmf_status cmf__tk_check_id(int64_t id, size_t entries, const char *what, const char *path);

/* Loads j[key], an array of components, into a calloc'd array of n_kids
 * elements of `elem` bytes, each through `load` with the path
 * "<path>.<key>[i]". *kids and *n_kids are set before the first element
 * loads, so on failure the caller frees what was loaded as usual. */
typedef cmf_status (*tk_load_fn)(void *item, const json_t *j, const char *what, const char *path);
cmf_status cmf__tk_load_seq(const json_t *j, const char *key, const char *what, const char *path, size_t elem,
                            tk_load_fn load, void **kids, size_t *n_kids);

#endif
