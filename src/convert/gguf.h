/* gguf.h — GGUF (v2/v3, little-endian) reader, ggml dequantizers, and the
 * GGUF -> CMF import: metadata onto the header `arch` block, tensor names
 * back to Hugging Face names (llama.cpp's rope row permutation undone), the
 * GGUF vocabulary as a tokenizer.json. Every count, length, type and offset
 * read from the file is checked against the bytes that remain before use. */
#ifndef CMF_CONVERT_GGUF_H
#define CMF_CONVERT_GGUF_H

#include "cmf.h"
#include "util/file.h"
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define CMF_GGUF_MAX_DIMS 4
#define CMF_GGUF_DEFAULT_ALIGN 32

/* Metadata value types (GGUF spec). */
enum {
    CMF_GGUF_U8 = 0, CMF_GGUF_I8 = 1, CMF_GGUF_U16 = 2, CMF_GGUF_I16 = 3,
    CMF_GGUF_U32 = 4, CMF_GGUF_I32 = 5, CMF_GGUF_F32 = 6, CMF_GGUF_BOOL = 7,
    CMF_GGUF_STRING = 8, CMF_GGUF_ARRAY = 9, CMF_GGUF_U64 = 10, CMF_GGUF_I64 = 11,
    CMF_GGUF_F64 = 12, CMF_GGUF_NTYPES = 13
};

/* ggml tensor types this reader knows the size of. */
enum {
    CMF_GGML_F32 = 0, CMF_GGML_F16 = 1, CMF_GGML_Q4_0 = 2, CMF_GGML_Q4_1 = 3,
    CMF_GGML_Q5_0 = 6, CMF_GGML_Q5_1 = 7, CMF_GGML_Q8_0 = 8, CMF_GGML_Q8_1 = 9,
    CMF_GGML_Q2_K = 10, CMF_GGML_Q3_K = 11, CMF_GGML_Q4_K = 12, CMF_GGML_Q5_K = 13,
    CMF_GGML_Q6_K = 14, CMF_GGML_Q8_K = 15, CMF_GGML_IQ4_NL = 20, CMF_GGML_IQ4_XS = 23,
    CMF_GGML_BF16 = 30
};

typedef struct cmf__gguf_kv {
    char *key;             /* NUL-terminated copy */
    uint32_t type;         /* CMF_GGUF_* */
    uint32_t arr_type;     /* element type when type == ARRAY */
    uint64_t arr_n;        /* element count when type == ARRAY */
    const uint8_t *val;    /* value bytes in the mapping (array: first element) */
    uint64_t val_len;      /* bytes of the value (array: all elements) */
    uint64_t *str_off;     /* ARRAY of STRING: offset of each element from val (owned) */
    uint64_t off;          /* absolute file offset of the key */
} cmf__gguf_kv;

typedef struct cmf__gguf_tensor {
    char *name;            /* NUL-terminated copy */
    uint32_t ndim;
    uint64_t ne[CMF_GGUF_MAX_DIMS]; /* ggml order: ne[0] is the fastest-varying dim; 1 past ndim */
    uint32_t type;         /* CMF_GGML_* */
    uint64_t n_elems;
    uint64_t nbytes;
    uint64_t off;          /* relative to the data section */
    const uint8_t *data;   /* into the mapping */
    uint64_t info_off;     /* absolute file offset of the tensor info */
} cmf__gguf_tensor;

typedef struct cmf__gguf {
    char *path;            /* name used in messages */
    cmf__mapping map;      /* owned when opened from a path */
    bool owns_map;
    const uint8_t *data;
    uint64_t size;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_off;     /* absolute offset of the tensor data section */
    cmf__gguf_kv *kvs;
    uint64_t n_kv;
    cmf__gguf_tensor *tensors;
    uint64_t n_tensors;
    struct cmf__gguf **parts; /* the other files of a split set (owned), see cmf__gguf_open_set */
    uint32_t n_parts;
} cmf__gguf;

/* Parses `size` bytes (borrowed: they must outlive the handle). `what`
 * names the source in messages. Errors: ERR_MAGIC, ERR_VERSION, ERR_BOUNDS
 * (a count, length or tensor past the end), ERR_PARSE (bad value type,
 * ndims, zero dim), ERR_DUPLICATE (a key or tensor twice), ERR_SIZE (a row
 * not a whole number of blocks), ERR_DTYPE (unknown ggml type),
 * ERR_ALIGN (tensor offset or general.alignment), ERR_NOMEM. */
cmf_status cmf__gguf_parse(const uint8_t *data, uint64_t size, const char *what, cmf__gguf **out);
/* Maps and parses the file at `path`. */
cmf_status cmf__gguf_open(const char *path, cmf__gguf **out);
void cmf__gguf_free(cmf__gguf *g);
/* Opens `path` and, when it is the first file of a llama.cpp split set
 * (split.count > 1, names "<prefix>-00001-of-0000N.gguf"), the other files,
 * whose tensors join g->tensors (data pointers into their own mappings).
 * Errors: a missing or foreign part (ERR_SHARD naming it), a tensor in two
 * parts (ERR_DUPLICATE), or any cmf__gguf_open error. */
cmf_status cmf__gguf_open_set(const char *path, cmf__gguf **out);

/* Lookups (NULL when absent). */
const cmf__gguf_kv *cmf__gguf_find_kv(const cmf__gguf *g, const char *key);
const cmf__gguf_tensor *cmf__gguf_find_tensor(const cmf__gguf *g, const char *name);

/* Typed getters. Absent key: CMF_ERR_NOT_FOUND (message set). Wrong type:
 * CMF_ERR_PARSE. get_uint takes any integer type (negative is an error),
 * get_num any integer or float type, get_bool a bool. The string is
 * borrowed from the mapping and is NOT NUL-terminated. */
cmf_status cmf__gguf_get_uint(const cmf__gguf *g, const char *key, uint64_t *out);
cmf_status cmf__gguf_get_num(const cmf__gguf *g, const char *key, double *out);
cmf_status cmf__gguf_get_bool(const cmf__gguf *g, const char *key, bool *out);
cmf_status cmf__gguf_get_str(const cmf__gguf *g, const char *key, const char **s, uint64_t *len);
/* Array element access; the kv must be an ARRAY of the right element type. */
void cmf__gguf_arr_str(const cmf__gguf_kv *kv, uint64_t i, const char **s, uint64_t *len);
double cmf__gguf_arr_num(const cmf__gguf_kv *kv, uint64_t i);   /* numeric element types */
int64_t cmf__gguf_arr_int(const cmf__gguf_kv *kv, uint64_t i);  /* integer element types */

/* ---- ggml types ------------------------------------------------------- */
/* Name ("q4_K") or NULL for an unknown type. */
const char *cmf__ggml_type_name(uint32_t type);
/* Elements per block and bytes per block; false for unknown types. */
bool cmf__ggml_type_size(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);
/* True when cmf__ggml_dequant handles the type. */
bool cmf__ggml_can_dequant(uint32_t type);
/* Dequantizes n (a multiple of the block size) elements of `type` from
 * `src` into dst, with the exact float arithmetic of gguf-py's numpy
 * dequantizers (bit-identical results). CMF_ERR_DTYPE for types without a
 * dequantizer, CMF_ERR_SIZE when n is not a whole number of blocks. */
cmf_status cmf__ggml_dequant(uint32_t type, const uint8_t *src, uint64_t n, float *dst);

/* ---- import ------------------------------------------------------------ */

/* One output tensor of the import plan: an HF name and where its values
 * come from in the GGUF. */
typedef struct cmf__gguf_out {
    char name[160];
    int ndim;
    uint64_t shape[3];     /* HF order (rows first) */
    const cmf__gguf_tensor *src;
    uint64_t elem_off;     /* first source element (expert slices, fused splits) */
    uint32_t permute_heads; /* > 0: undo llama.cpp's rope row permutation with this many heads */
    bool is_router;        /* MoE router: kept f32 */
} cmf__gguf_out;

typedef struct cmf__gguf_plan {
    cmf__gguf_out *outs;
    size_t n;
} cmf__gguf_plan;

/* Maps the GGUF's tensors onto HF names for its general.architecture.
 * Errors: ERR_CONFIG (unknown architecture, an unmapped tensor name, a
 * shape against the metadata), ERR_NOMEM. */
cmf_status cmf__gguf_plan_make(const cmf__gguf *g, cmf__gguf_plan *plan);
void cmf__gguf_plan_free(cmf__gguf_plan *plan);
/* Values of one planned tensor as f32, HF layout (row-major over shape).
 * *out is malloc'd (caller frees), *n its element count. */
cmf_status cmf__gguf_out_f32(const cmf__gguf *g, const cmf__gguf_out *o, float **out, uint64_t *n);

/* general.architecture into name[cap] when supported (ERR_CONFIG
 * otherwise); *undo_rope_permute tells whether llama.cpp permuted the q/k
 * rows of this architecture for its interleaved rope. */
cmf_status cmf__gguf_arch_name(const cmf__gguf *g, char *name, size_t cap, bool *undo_rope_permute);
/* The header `arch` block (docs/ARCH_HEADER.md) for the GGUF's metadata.
 * ERR_CONFIG for an unsupported architecture or a missing required key. */
cmf_status cmf__gguf_arch(const cmf__gguf *g, json_t **out);
/* The same, and for every key absent from the metadata whose value was
 * filled in with a default, an entry of `filled` (a JSON object; NULL: not
 * noted): "<arch>.<key>": {"value": V, "set": the arch field --set names}. */
cmf_status cmf__gguf_arch_filled(const cmf__gguf *g, json_t **out, json_t *filled);
/* Merges `over` (a JSON object) into `arch` for fields a GGUF lacks. A
 * sliding_window > 0 without layer_types turns an all-full layout into
 * all-sliding; rope_local_base_freq / local_partial_rotary_factor follow
 * the global values unless given. */
cmf_status cmf__gguf_arch_override(json_t *arch, const json_t *over);

/* The GGUF vocabulary (tokenizer.ggml.*) as HF tokenizer.json bytes
 * (*json malloc'd, NUL-terminated; caller frees) and the chat bundle for the
 * header (`tokenizer_config`; NULL when the file has no vocabulary).
 * ERR_NOT_FOUND when the file has no tokenizer.ggml.model, ERR_UNSUPPORTED
 * for a tokenizer model other than gpt2 / llama / bert. */
cmf_status cmf__gguf_tokenizer_json(const cmf__gguf *g, char **json, size_t *len);
cmf_status cmf__gguf_chat_bundle(const cmf__gguf *g, json_t **out);

typedef struct cmf__gguf_import_opts {
    int quant;        /* dtype of 2-D weights; -1 = by source (f32/f16/bf16 kept, quantized -> q8_row) */
    bool dry_run;     /* plan only */
    FILE *plan_out;   /* when non-NULL, one line per tensor (name shape dtype bytes) */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
    /* Fields merged over the arch block (what the GGUF lacks, e.g. a
     * rope_theta or sliding_window its converter dropped); may be NULL.
     * A sliding_window > 0 without layer_types makes every layer sliding. */
    const json_t *arch_override;
} cmf__gguf_import_opts;
cmf__gguf_import_opts cmf__gguf_import_opts_default(void);

/* Converts the GGUF file `in` to the CMF file `out_path`. Nothing is left
 * at out_path on failure. n_tensors/payload (may be NULL) report the
 * directory entries and payload bytes written. */
cmf_status cmf__gguf_import(const char *in, const char *out_path, const cmf__gguf_import_opts *opts,
                            uint64_t *n_tensors, uint64_t *payload_bytes);

#endif
