/* buf.h — a growable byte buffer for building sections, JSON and text.
 * Functions return CMF_OK or CMF_ERR_NOMEM (message set). */
#ifndef CMF_UTIL_BUF_H
#define CMF_UTIL_BUF_H

#include "cmf.h"
#include "util/error.h"
#include <stddef.h>
#include <stdint.h>

typedef struct cmf__buf {
    uint8_t *data;
    size_t len, cap;
} cmf__buf;

cmf_status cmf__buf_reserve(cmf__buf *b, size_t extra);
cmf_status cmf__buf_append(cmf__buf *b, const void *data, size_t len);
cmf_status cmf__buf_append_zeros(cmf__buf *b, size_t len);
cmf_status cmf__buf_printf(cmf__buf *b, const char *fmt, ...) CMF_PRINTF(2, 3);
void cmf__buf_free(cmf__buf *b);

#endif
