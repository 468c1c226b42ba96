/* error.h — setting and reading the thread-local error message.
 * Library code reports a failure as `return cmf__error(CMF_ERR_X, fmt, ...)`:
 * the message is formatted into a thread-local buffer read by
 * cmf_last_error(), and the status is returned unchanged. */
#ifndef CMF_UTIL_ERROR_H
#define CMF_UTIL_ERROR_H

#include "cmf.h"
#include <stdarg.h>

#if defined(__GNUC__)
#define CMF_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CMF_PRINTF(a, b)
#endif

/* Formats the message, stores it for cmf_last_error(), returns `status`. */
cmf_status cmf__error(cmf_status status, const char *fmt, ...) CMF_PRINTF(2, 3);
cmf_status cmf__verror(cmf_status status, const char *fmt, va_list ap);
/* Prepends "prefix: " to the current message (adds context on the way up). */
cmf_status cmf__error_prefix(cmf_status status, const char *fmt, ...) CMF_PRINTF(2, 3);
/* Clears the message. */
void cmf__error_clear(void);

#endif
