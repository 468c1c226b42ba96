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
    uint32_t shard_no, shard_count; /* header "shard" block; 0, 0 when absent */
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
/* Opens a whole file image held in memory (borrowed: `data` must outlive
 * the handle). `name` stands for the path in messages. Never a shard set.
 * The fuzz entry point. */
cmf_status cmf__file_open_memory(const void *data, size_t len, const char *name,
                                 const cmf__open_opts *opts, cmf__file **out);
void cmf__file_free(cmf__file *f);
/* NULL when absent (no error set). */
const cmf__tensor *cmf__file_find(const cmf__file *f, const char *name);
/* Convenience: vocab (tokenizer.json bytes) and masks sections of shard 0;
 * NULL when the section is absent. */
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
/* The same without the tensors: header and directory hashes and
 * section_hashes (what an in-place append re-hashes). CMF_ERR_HASH names
 * the count and the first problem. */
cmf_status cmf__file_verify_meta(const cmf__file *f);

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
/* The same, and the new directory leaves out every existing entry for
 * which drop(ctx, name) is true (drop NULL: none). Their payload bytes stay
 * where they are, unreferenced, until cmf__file_compact drops them. */
cmf_status cmf__file_append_drop(const char *path, const cmf__append_tensor *tensors, size_t n, json_t *new_header,
                                 bool (*drop)(void *ctx, const char *name), void *drop_ctx);
/* Rewrites `in` tightly to `out` (drops dead tails of append-only growth).
 * The whole hash chain of `in` is verified first (CMF_ERR_HASH naming the
 * first problem: a corrupt file is never re-hashed into one that verifies);
 * `out` must pass cmf__output_check against `in`. */
cmf_status cmf__file_compact(const char *in, const char *out);

/* ---- masks section (§5) ------------------------------------------------ */
typedef struct cmf__mask {
    const char *name;          /* borrowed from the parsed meta JSON */
    uint32_t task_id;
    bool has_expert_fields;
    const json_t *meta;        /* this mask's meta object */
    const uint8_t *blob;       /* into the mapping */
    uint64_t blob_off, blob_len; /* relative to the section start */
    uint32_t ffn_rows;         /* num_layers, or num_layers * num_loops (LOOP_MASKS) */
    const uint8_t *ffn;        /* [ffn_rows][ffn_bytes] */
    const uint8_t *heads;      /* [num_layers][head_bytes] */
    const uint8_t *gates;      /* [gates_bytes] */
    const uint8_t *experts;    /* [num_layers][expert_bytes] or NULL */
} cmf__mask;

typedef struct cmf__masks {
    json_t *meta;              /* owned */
    const char *default_task;  /* NULL when absent */
    uint32_t n_masks;
    cmf__mask *masks;          /* [n_masks] */
    uint32_t num_layers, intermediate_size, num_heads, num_experts, num_loops;
    uint64_t ffn_bytes, head_bytes, gates_bytes, expert_bytes;
} cmf__masks;

/* Parses and checks a masks section against `arch` (intermediate_size,
 * num_attention_heads, num_layers, optional num_loops and moe.num_experts):
 * meta JSON, n_masks, blob bounds and 8-alignment, blob_len, zero tail
 * bits. `what` names the file in messages; `sec_off` is the section's
 * absolute offset (for messages). Caller frees with cmf__masks_free. */
cmf_status cmf__masks_parse(const uint8_t *data, uint64_t len, uint64_t sec_off, const json_t *arch,
                            const char *what, cmf__masks **out);
void cmf__masks_free(cmf__masks *m);
/* Bit accessors (no bounds check beyond the arch dimensions). */
bool cmf__mask_ffn_bit(const cmf__masks *ms, const cmf__mask *m, uint32_t row, uint32_t neuron);
bool cmf__mask_head_bit(const cmf__masks *ms, const cmf__mask *m, uint32_t layer, uint32_t head);
bool cmf__mask_gate_bit(const cmf__masks *ms, const cmf__mask *m, uint32_t layer);
/* True when the mask carries no expert area (unrestricted) or the bit is set. */
bool cmf__mask_expert_bit(const cmf__masks *ms, const cmf__mask *m, uint32_t layer, uint32_t expert);
/* The parsed masks of shard 0 (checked at open), or NULL when absent. */
const cmf__masks *cmf__file_mask_set(const cmf__file *f);

/* ---- sparse index (§7, read-only, deprecation-pending) ------------------ */
typedef struct cmf__index_entry {
    uint32_t task_id, layer_idx, n_groups, n_heads;
    const uint8_t *groups;     /* n_groups little-endian u16 */
    const uint8_t *heads;      /* n_heads u8 */
} cmf__index_entry;
/* Parses with bounds checks; entries malloc'd (caller frees). */
cmf_status cmf__index_parse(const uint8_t *data, uint64_t len, uint64_t sec_off, const char *what,
                            cmf__index_entry **out, uint32_t *n_out);

/* ---- shards (§10) ------------------------------------------------------ */
/* Splits `tensors` greedily in order into shards of at most
 * `max_shard_bytes` payload bytes (a tensor larger than that gets a shard of
 * its own) and writes `{base}-{no:05}-of-{count:05}.cmf`. Masks, vocab,
 * index, tokenizer_config and skills go to shard 1 only. *n_shards gets the
 * count. */
cmf_status cmf__write_sharded(const char *base, const json_t *header, const cmf__append_tensor *tensors,
                              size_t n, const void *vocab, uint64_t vocab_len, const void *masks,
                              uint64_t masks_len, uint64_t max_shard_bytes, uint32_t *n_shards);
/* Parses "{base}-{no:05}-of-{count:05}.cmf"; false when `path` is not so
 * named. `base` (may be NULL) gets a malloc'd copy of the base. */
bool cmf__shard_name_parse(const char *path, char **base, uint32_t *no, uint32_t *count);

/* Extra required_features bits the content cannot show (LOOP_MASKS). */
cmf_status cmf__writer_add_features(cmf__writer *w, uint32_t bits);

/* ---- detached signature (§8.2) ----------------------------------------- */
#define CMF_SIG_ALG "ed25519-sha256"
/* Random 32-byte seed and its public key. */
cmf_status cmf__sign_keygen(uint8_t seed[32], uint8_t pubkey[32]);
/* Writes the seed as 64 hex digits + newline, mode 0600, atomically. */
cmf_status cmf__sign_key_write(const char *path, const uint8_t seed[32]);
/* Reads a key file (64 hex digits, surrounding whitespace allowed). */
cmf_status cmf__sign_key_read(const char *path, uint8_t seed[32], uint8_t pubkey[32]);
/* SHA-256 of a whole file, streamed (progress may be NULL). */
cmf_status cmf__sha256_file(const char *path, uint8_t out[32], cmf__progress_fn progress, void *ctx);
/* Signs `path` with `seed`; writes `path`.sig atomically. */
cmf_status cmf__sign_file(const char *path, const uint8_t seed[32], cmf__progress_fn progress, void *ctx);
/* Checks `sig_path` against `path`: CMF_OK when the SHA-256 matches and the
 * Ed25519 signature is valid for the embedded pubkey (hex copied to
 * pubkey_hex when not NULL); CMF_ERR_SIGNATURE or CMF_ERR_PARSE otherwise. */
cmf_status cmf__sign_verify(const char *path, const char *sig_path, char pubkey_hex[65],
                            cmf__progress_fn progress, void *ctx);

#endif
