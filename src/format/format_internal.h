/* format_internal.h — helpers shared by the format module's files (open,
 * writer, append, verify): UTF-8 checks, a name hash set, the tensor-spec
 * check every writer path runs, and the directory/envelope encoders.
 * Not a contract for other modules. */
#ifndef CMF_FORMAT_INTERNAL_H
#define CMF_FORMAT_INTERNAL_H

#include "format/format.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Strict UTF-8 (no overlongs, surrogates, > U+10FFFF); NUL rejected. */
bool cmf__fmt_utf8_ok(const uint8_t *s, size_t n);

/* Open-addressing set of names -> index (uint64). Names are borrowed. */
typedef struct cmf__nameset {
    const char **keys;
    uint32_t *key_lens;
    uint64_t *vals;
    uint64_t cap, n;
} cmf__nameset;
/* Inserts; returns CMF_OK, CMF_ERR_NOMEM, or CMF_ERR_DUPLICATE (no message
 * set; *prev gets the existing value). */
cmf_status cmf__nameset_put(cmf__nameset *s, const char *name, uint32_t len, uint64_t val, uint64_t *prev);
/* True and *val when present. */
bool cmf__nameset_get(const cmf__nameset *s, const char *name, uint32_t len, uint64_t *val);
void cmf__nameset_free(cmf__nameset *s);

/* One directory record, as writers hold it before encoding. */
typedef struct cmf__dir_rec {
    const char *name;
    uint32_t name_len;
    int dtype, ndim;
    uint64_t shape[CMF_MAX_NDIM];
    uint64_t off, nbytes, hash;
} cmf__dir_rec;

/* Checks a tensor about to be written: name (non-empty, UTF-8, < 64 KiB),
 * dtype writable, ndim 0..6, dims fit u32, and nbytes for fixed-size
 * dtypes. `what` names the target file. */
cmf_status cmf__fmt_check_tensor(const char *what, const char *name, int dtype, int ndim,
                                 const uint64_t *shape, uint64_t nbytes);
/* required_features bits a dtype implies. */
uint32_t cmf__fmt_dtype_features(int dtype);
/* SKILL_FILE when some header.skills record has base_dir_hash. */
uint32_t cmf__fmt_header_features(const json_t *header);

/* Encodes the directory (§3) into `out`. */
cmf_status cmf__fmt_encode_dir(const cmf__dir_rec *recs, uint64_t n, cmf__buf *out);
/* A new header object: "format", "version", the caller's other keys in
 * order, then "section_hashes" for the sections present (NULL data =
 * absent). Returns NULL on allocation failure. */
json_t *cmf__fmt_build_header(const json_t *user, const void *masks, uint64_t masks_len,
                              const void *vocab, uint64_t vocab_len, const void *index,
                              uint64_t index_len);

typedef struct cmf__envelope {
    uint32_t features;
    uint64_t header_off, header_len, dir_off, dir_len, data_off, data_len;
    uint64_t masks_off, masks_len, vocab_off, vocab_len, index_off, index_len;
    uint64_t header_hash, dir_hash;
} cmf__envelope;
void cmf__fmt_encode_envelope(const cmf__envelope *e, uint8_t out[CMF_ENVELOPE_SIZE]);

/* Tests set this to force the writer's copying path (no INSERT_RANGE). */
extern bool cmf__fmt_no_insert_range;
/* Bytes per verify hashing task (64 MiB; rounded down to a multiple of 8).
 * Tests lower it to exercise the chunk fold and the pool on small files. */
extern uint64_t cmf__fmt_verify_chunk;

#endif
