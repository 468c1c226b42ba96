/* cmf.h — the one public header of libcmf, a C11 inference runtime for
 * CMF v2 model files. Everything else under src/ is private.
 *
 * Conventions: fallible calls return cmf_status (CMF_OK == 0) or NULL from a
 * constructor; the reason is then in cmf_last_error() (thread-local) or on
 * the handle. Every _free(NULL) is a no-op. Returned const char * are
 * borrowed; each declaration says how long they live. */
#ifndef CMF_H
#define CMF_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CMF_API __attribute__((visibility("default")))
#else
#define CMF_API
#endif

#define CMF_VERSION_MAJOR 0
#define CMF_VERSION_MINOR 1
#define CMF_VERSION_PATCH 0
#define CMF_VERSION_STRING "0.1.0"

/* ---- status codes ------------------------------------------------------
 * One list: the enum, its names and its texts come from it and never drift. */
#define CMF_STATUS_LIST(X)                                                  \
    X(OK,          0,  "ok")                                                \
    X(ERR_IO,      1,  "input/output error")                                \
    X(ERR_NOMEM,   2,  "out of memory")                                     \
    X(ERR_ARG,     3,  "invalid argument")                                  \
    X(ERR_MAGIC,   4,  "bad magic")                                         \
    X(ERR_VERSION, 5,  "unsupported version")                               \
    X(ERR_FEATURE, 6,  "unsupported required feature")                      \
    X(ERR_BOUNDS,  7,  "out of bounds")                                     \
    X(ERR_ALIGN,   8,  "misaligned")                                        \
    X(ERR_PARSE,   9,  "parse error")                                       \
    X(ERR_DTYPE,   10, "unknown or unsupported dtype")                      \
    X(ERR_SIZE,    11, "payload size inconsistent with dtype and shape")    \
    X(ERR_DUPLICATE, 12, "duplicate name")                                  \
    X(ERR_HASH,    13, "hash mismatch")                                     \
    X(ERR_SIGNATURE, 14, "signature invalid")                               \
    X(ERR_SHARD,   15, "shard set error")                                   \
    X(ERR_NOT_FOUND, 16, "not found")                                       \
    X(ERR_UNSUPPORTED, 17, "unsupported")                                   \
    X(ERR_CONFIG,  18, "model configuration error")                         \
    X(ERR_TOKENIZER, 19, "tokenizer error")                                 \
    X(ERR_TEMPLATE, 20, "template error")                                   \
    X(ERR_CANCELLED, 21, "cancelled")                                       \
    X(ERR_CONTEXT, 22, "context full")                                      \
    X(ERR_BACKEND, 23, "backend error")                                     \
    X(ERR_INTERNAL, 24, "internal error")

typedef enum cmf_status {
#define CMF_X_ENUM(name, value, text) CMF_##name = value,
    CMF_STATUS_LIST(CMF_X_ENUM)
#undef CMF_X_ENUM
    CMF_STATUS_COUNT_
} cmf_status;


/* ---- dtypes (CMF v2 §3.1; ids are never reused) ----------------------- */
typedef enum cmf_dtype {
    CMF_DTYPE_F32 = 0,
    CMF_DTYPE_F16 = 1,
    CMF_DTYPE_BF16 = 2,
    CMF_DTYPE_Q8_ROW = 3,
    CMF_DTYPE_Q4_BLOCK = 4,
    CMF_DTYPE_MIX8_4 = 5,   /* reserved: reported as unsupported */
    CMF_DTYPE_U8 = 6,       /* reserved */
    CMF_DTYPE_Q4_COL = 7,   /* reserved */
    CMF_DTYPE_VBIT = 8,
    CMF_DTYPE_Q8_2F = 9,
    CMF_DTYPE_VBIT_RO = 10,
    CMF_DTYPE_Q4_TILED = 11,
    CMF_DTYPE_Q1 = 12,
    CMF_DTYPE_Q1S = 13,
    CMF_DTYPE_Q1T = 14,
    CMF_DTYPE_Q4TP = 15,
    CMF_DTYPE_Q2TP = 16,
    CMF_DTYPE_COUNT_ = 17
} cmf_dtype;

/* Name of a status ("ERR_BOUNDS"); static storage, never NULL. */
CMF_API const char *cmf_status_name(cmf_status s);
/* One-line text of a status ("out of bounds"); static storage, never NULL. */
CMF_API const char *cmf_status_text(cmf_status s);
/* Message of the last failed call on this thread, naming file, object and
 * offset where known. Valid until the next failing cmf call on this thread.
 * Never NULL ("" when nothing failed). Thread-safe (thread-local). */
CMF_API const char *cmf_last_error(void);
/* Library version string ("0.1.0"); static storage. */
CMF_API const char *cmf_version(void);

#ifdef __cplusplus
}
#endif
#endif /* CMF_H */
