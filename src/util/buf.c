/* buf.c — growable byte buffer. */
#include "util/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cmf_status cmf__buf_reserve(cmf__buf *b, size_t extra)
{
    if (b->cap - b->len > extra) return CMF_OK;
    size_t need = b->len + extra + 1;
    if (need < b->len) return cmf__error(CMF_ERR_NOMEM, "buffer size overflow");
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p) return cmf__error(CMF_ERR_NOMEM, "out of memory growing a buffer to %zu bytes", cap);
    b->data = p;
    b->cap = cap;
    return CMF_OK;
}

cmf_status cmf__buf_append(cmf__buf *b, const void *data, size_t len)
{
    cmf_status st = cmf__buf_reserve(b, len);
    if (st) return st;
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = 0;
    return CMF_OK;
}

cmf_status cmf__buf_append_zeros(cmf__buf *b, size_t len)
{
    cmf_status st = cmf__buf_reserve(b, len);
    if (st) return st;
    memset(b->data + b->len, 0, len);
    b->len += len;
    b->data[b->len] = 0;
    return CMF_OK;
}

cmf_status cmf__buf_printf(cmf__buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return cmf__error(CMF_ERR_INTERNAL, "bad format string");
    cmf_status st = cmf__buf_reserve(b, (size_t)n);
    if (st) return st;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return CMF_OK;
}

void cmf__buf_free(cmf__buf *b)
{
    if (!b) return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
