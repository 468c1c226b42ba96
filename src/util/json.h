/* json.h — thin helpers over jansson: parse with a message naming the
 * source and line/column, and typed field access whose errors name the
 * JSON path ("arch.num_layers: expected an integer"). */
#ifndef CMF_UTIL_JSON_H
#define CMF_UTIL_JSON_H

#include "cmf.h"
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* Parses `len` bytes; `what` names the source in errors. Caller decrefs. */
cmf_status cmf__json_parse(const char *data, size_t len, const char *what, json_t **out);

/* Typed getters. `path` is only used in messages. A missing key returns
 * CMF_ERR_NOT_FOUND (message set) unless a default variant is used. */
cmf_status cmf__json_get_int(const json_t *obj, const char *key, const char *path, int64_t *out);
cmf_status cmf__json_get_num(const json_t *obj, const char *key, const char *path, double *out);
cmf_status cmf__json_get_str(const json_t *obj, const char *key, const char *path, const char **out);
cmf_status cmf__json_get_bool(const json_t *obj, const char *key, const char *path, bool *out);
/* Absent or null -> *out = def, CMF_OK; present but wrong type -> error. */
cmf_status cmf__json_opt_int(const json_t *obj, const char *key, const char *path, int64_t def, int64_t *out);
cmf_status cmf__json_opt_num(const json_t *obj, const char *key, const char *path, double def, double *out);
cmf_status cmf__json_opt_bool(const json_t *obj, const char *key, const char *path, bool def, bool *out);
cmf_status cmf__json_opt_str(const json_t *obj, const char *key, const char *path, const char *def, const char **out);

/* Compact, key-order-preserving dump (JSON_COMPACT|JSON_PRESERVE_ORDER|
 * JSON_ENSURE_ASCII off). Caller frees. NULL on allocation failure. */
char *cmf__json_dump(const json_t *v);

#endif
