/* safetensors.h — read-only view of safetensors checkpoints: one file or a
 * shard set named by model.safetensors.index.json. Every header length,
 * offset and shape is checked against the file before use; tensor data stay
 * in the mapping (nothing is copied). Source dtypes F32, F16, BF16. */
#ifndef CMF_FORMAT_SAFETENSORS_H
#define CMF_FORMAT_SAFETENSORS_H

#include "cmf.h"
#include "util/file.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CMF_ST_MAX_NDIM 6
#define CMF_ST_MAX_HEADER (100u << 20) /* 100 MiB: the format's own limit */

typedef enum { CMF_ST_F32, CMF_ST_F16, CMF_ST_BF16 } cmf__st_dtype;

typedef struct cmf__st_tensor {
    char *name;                     /* owned */
    cmf__st_dtype dtype;
    int ndim;
    uint64_t shape[CMF_ST_MAX_NDIM];
    uint64_t numel;
    uint64_t off;                   /* absolute offset in its file */
    uint64_t nbytes;
    uint32_t file;                  /* index into the set's files */
    const uint8_t *data;            /* into the mapping (NULL when only parsed) */
} cmf__st_tensor;

typedef struct cmf__st_set {
    char **paths;                   /* [n_files] */
    cmf__mapping *maps;             /* [n_files] */
    uint32_t n_files;
    cmf__st_tensor *tensors;        /* [n_tensors], sorted by name */
    size_t n_tensors;
} cmf__st_set;

/* Bytes per element of a source dtype (4 or 2). */
int cmf__st_dtype_size(cmf__st_dtype d);
const char *cmf__st_dtype_name(cmf__st_dtype d);

/* Parses the header of one whole safetensors file held in memory (`size`
 * bytes) and checks every entry against it. Appends its tensors to the
 * array `tensors` of length `n` (both updated; realloc'd; free with
 * cmf__st_tensors_free) with file index `file`; data pointers stay NULL.
 * `what` names the file in messages. */
cmf_status cmf__st_parse(const uint8_t *data, uint64_t size, const char *what, uint32_t file,
                         cmf__st_tensor **tensors, size_t *n);

/* Opens the checkpoint in folder `dir`: model.safetensors.index.json when
 * present (every shard it names), else model.safetensors, else every
 * file of the folder whose name ends in .safetensors. Tensor names must be unique across
 * files. */
cmf_status cmf__st_open_dir(const char *dir, cmf__st_set **out);
void cmf__st_free(cmf__st_set *s);
/* NULL when absent. */
const cmf__st_tensor *cmf__st_find(const cmf__st_set *s, const char *name);
/* Drops the tensor's pages from this process's resident set (the source
 * stays in the page cache): keeps RSS bounded while streaming. */
void cmf__st_release(const cmf__st_set *s, const cmf__st_tensor *t);
/* Reads element i of t as f32 (exact for every source dtype). */
float cmf__st_get(const cmf__st_tensor *t, uint64_t i);
/* Frees a tensor array from cmf__st_parse. */
void cmf__st_tensors_free(cmf__st_tensor *t, size_t n);

#endif
