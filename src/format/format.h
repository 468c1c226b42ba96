/* format.h — the CMF v2 container: open (mmap + validate per spec §1.2),
 * the tensor directory, header JSON, masks/vocab/index sections, shard sets
 * (§10), verify (§8, §8.1), and the writer (§4, §9 append-only growth).
 * Opening never touches the weight blob: only the envelope, header and
 * directory are read. A file is valid or open fails naming file, object and
 * byte offset; there is no third state. */
#ifndef CMF_FORMAT_H
#define CMF_FORMAT_H

#include "cmf.h"
#include "util/file.h"
#include "util/json.h"
#include <stdbool.h>
#include <stdint.h>

#define CMF_ENVELOPE_SIZE 128
#define CMF_MAX_NDIM 6
#define CMF_DIR_RECORD_SIZE 56
#define CMF_DATA_ALIGN 4096
#define CMF_TENSOR_ALIGN 64

/* required_features bits (§1.1) */
#define CMF_FEAT_TENSOR_DIR (1u << 0)
#define CMF_FEAT_BINARY_MASKS (1u << 1)
#define CMF_FEAT_QUANT_2F (1u << 2)
#define CMF_FEAT_LOOP_MASKS (1u << 5)
#define CMF_FEAT_SKILL_FILE (1u << 6)
#define CMF_FEAT_KNOWN (CMF_FEAT_TENSOR_DIR | CMF_FEAT_BINARY_MASKS | CMF_FEAT_QUANT_2F | \
                        CMF_FEAT_LOOP_MASKS | CMF_FEAT_SKILL_FILE)

typedef struct cmf__tensor {
    const char *name;      /* NUL-terminated, owned by the file */
    uint32_t name_len;
    int dtype;
    int ndim;
    uint64_t shape[CMF_MAX_NDIM]; /* zero past ndim */
    uint64_t off;          /* relative to the shard's data_off */
    uint64_t nbytes;
    uint64_t hash;         /* hash64 of the payload (§8) */
    const uint8_t *data;   /* into the shard's mapping; never copied */
    uint32_t shard;        /* index into the set's shards (0 for one file) */
    uint64_t record_off;   /* absolute file offset of the directory record */
} cmf__tensor;

typedef struct cmf__section {
    uint64_t off, len;     /* absolute; off == 0 means absent */
    const uint8_t *data;   /* NULL when absent */
} cmf__section;

/* One physical file. */
typedef struct cmf__shard {
    char *path;
    cmf__mapping map;
    uint32_t version, flags, features;
    cmf__section header, dir, data, masks, vocab, index;
    uint64_t header_hash, dir_hash; /* envelope [0x70], [0x78]; 0 = absent */
    json_t *header_json;
} cmf__shard;

/* An opened model: one file or a merged shard set. */
typedef struct cmf__file {
    char *path;              /* as given by the caller */
    cmf__shard *shards;      /* [n_shards]; shards[0] carries header JSON extras */
    uint32_t n_shards;
    cmf__tensor *tensors;    /* [n_tensors], merged, in directory order */
    uint64_t n_tensors;
    const json_t *header;    /* shards[0].header_json */
    const json_t *arch;      /* header.arch or NULL */
    uint32_t features;       /* OR over shards */
    void *name_index;        /* private lookup table */
} cmf__file;

typedef struct cmf__open_opts {
    bool allow_skill_file;   /* open a SKILL_FILE (bit 6) for inspection */
    bool single_shard;       /* open exactly this file, even if it belongs to a set */
} cmf__open_opts;
cmf__open_opts cmf__open_opts_default(void);

/* Opens and validates. Errors (status, and a message naming path, object,
 * offset): ERR_IO, ERR_MAGIC, ERR_VERSION, ERR_FEATURE, ERR_BOUNDS,
 * ERR_ALIGN, ERR_PARSE, ERR_DTYPE, ERR_SIZE, ERR_DUPLICATE, ERR_SHARD. */
cmf_status cmf__file_open(const char *path, const cmf__open_opts *opts, cmf__file **out);
void cmf__file_free(cmf__file *f);
/* NULL when absent (no error set). */
const cmf__tensor *cmf__file_find(const cmf__file *f, const char *name);
/* Convenience: vocab (tokenizer.json bytes) and masks sections of shard 0. */
const cmf__section *cmf__file_vocab(const cmf__file *f);
const cmf__section *cmf__file_masks(const cmf__file *f);

/* ---- verify (§8, §8.1, §8.2) ------------------------------------------- */
typedef struct cmf__verify_problem {
    char what[320];          /* "tensor 'x' at 0x1a40: hash 0123.. != stored 4567.." */
} cmf__verify_problem;
typedef void (*cmf__progress_fn)(void *ctx, uint64_t done_bytes, uint64_t total_bytes);
/* Checks header/dir hashes, section_hashes, every tensor hash. Problems are
 * appended to *problems (malloc'd, caller frees); returns CMF_OK when the
 * chain is intact, CMF_ERR_HASH otherwise. */
cmf_status cmf__file_verify(const cmf__file *f, cmf__progress_fn progress, void *ctx,
                            cmf__verify_problem **problems, size_t *n_problems);

/* ---- writer ------------------------------------------------------------ */
typedef struct cmf__writer cmf__writer;
/* Starts a new file at `path` (written to a temporary and renamed by
 * finish; nothing is left on failure). Tensor payloads are streamed to
 * disk as they come, so memory stays bounded by the largest tensor. */
cmf_status cmf__writer_open(const char *path, cmf__writer **out);
/* Header JSON object to write: the writer sets "format", "version" and
 * "section_hashes" itself. Takes a new reference. */
cmf_status cmf__writer_set_header(cmf__writer *w, json_t *header);
cmf_status cmf__writer_set_vocab(cmf__writer *w, const void *data, uint64_t len);
cmf_status cmf__writer_set_masks(cmf__writer *w, const void *data, uint64_t len);
cmf_status cmf__writer_set_index(cmf__writer *w, const void *data, uint64_t len);
/* Adds a tensor; checks the name is new, the dtype writable, and (for
 * fixed-size dtypes) that nbytes matches dtype and shape. */
cmf_status cmf__writer_add_tensor(cmf__writer *w, const char *name, int dtype, int ndim,
                                  const uint64_t *shape, const void *data, uint64_t nbytes);
/* Writes everything, sets required_features from content, renames into
 * place, frees w (also on failure). */
cmf_status cmf__writer_finish(cmf__writer *w);
/* Drops everything written so far (removes temporaries), frees w. */
void cmf__writer_abort(cmf__writer *w);

/* Append-only growth (§9): adds tensors (and optionally a new header JSON)
 * to an existing file without moving any existing byte: new payloads go to
 * the tail, the directory and header are re-emitted at the tail, and the
 * envelope is updated in place last. */
typedef struct cmf__append_tensor {
    const char *name;
    int dtype, ndim;
    uint64_t shape[CMF_MAX_NDIM];
    const void *data;
    uint64_t nbytes;
} cmf__append_tensor;
cmf_status cmf__file_append(const char *path, const cmf__append_tensor *tensors, size_t n,
                            json_t *new_header /* NULL: keep */);
/* Rewrites `in` tightly to `out` (drops dead tails of append-only growth). */
cmf_status cmf__file_compact(const char *in, const char *out);

#endif
