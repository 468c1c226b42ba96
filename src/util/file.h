/* file.h — read-only mappings, whole-file reads, and atomic writes
 * (temporary file in the same folder, fsync, rename): nothing is ever left
 * half-written under the final name. */
#ifndef CMF_UTIL_FILE_H
#define CMF_UTIL_FILE_H

#include "cmf.h"
#include <stdint.h>
#include <stdio.h>

typedef struct cmf__mapping {
    const uint8_t *data; /* NULL for an empty file */
    uint64_t size;
} cmf__mapping;

/* Maps `path` read-only (MAP_PRIVATE). Errors name the path. */
cmf_status cmf__map_file(const char *path, cmf__mapping *out);
void cmf__unmap(cmf__mapping *m);

/* "dir/name", malloc'd; NULL when out of memory. */
char *cmf__path_join(const char *dir, const char *name);

/* Reads a whole file into a malloc'd buffer with a trailing NUL (not
 * counted in *len). Caller frees. */
cmf_status cmf__read_file(const char *path, char **out, size_t *len);

/* Atomic writer: open creates "<path>.tmp.<pid>" beside `path`; commit
 * flushes, fsyncs and renames over `path`; abort removes the temporary. */
typedef struct cmf__atomic_file {
    FILE *fp;
    char *path;
    char *tmp_path;
} cmf__atomic_file;
cmf_status cmf__atomic_open(cmf__atomic_file *af, const char *path);
cmf_status cmf__atomic_commit(cmf__atomic_file *af);
void cmf__atomic_abort(cmf__atomic_file *af);
/* fwrite with an error naming the file. */
/* pwrite of all `len` bytes at `off` (retries short writes and EINTR);
 * errors name `path` and the offset. */
cmf_status cmf__pwrite_all(int fd, const void *data, uint64_t len, uint64_t off, const char *path);

cmf_status cmf__write_all(FILE *fp, const void *data, size_t len, const char *what);

#endif
