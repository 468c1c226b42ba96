/* error.c — status names/texts from the one X-macro list, and the
 * thread-local last-error message. No allocation: fixed buffers. */
#include "util/error.h"

#include <stdio.h>
#include <string.h>

#define ERRBUF_CAP 2048
static _Thread_local char errbuf[ERRBUF_CAP];

const char *cmf_status_name(cmf_status s)
{
    switch (s) {
#define X(name, value, text) case CMF_##name: return #name;
        CMF_STATUS_LIST(X)
#undef X
    default: return "UNKNOWN_STATUS";
    }
}

const char *cmf_status_text(cmf_status s)
{
    switch (s) {
#define X(name, value, text) case CMF_##name: return text;
        CMF_STATUS_LIST(X)
#undef X
    default: return "unknown status";
    }
}

const char *cmf_last_error(void) { return errbuf; }

const char *cmf_version(void) { return CMF_VERSION_STRING; }

cmf_status cmf__verror(cmf_status status, const char *fmt, va_list ap)
{
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    return status;
}

cmf_status cmf__error(cmf_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cmf__verror(status, fmt, ap);
    va_end(ap);
    return status;
}

cmf_status cmf__error_prefix(cmf_status status, const char *fmt, ...)
{
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    size_t plen = strlen(prefix), olen = strlen(errbuf);
    if (plen + 2 >= ERRBUF_CAP) plen = ERRBUF_CAP - 3;
    if (plen + 2 + olen >= ERRBUF_CAP) olen = ERRBUF_CAP - 3 - plen;
    memmove(errbuf + plen + 2, errbuf, olen);
    memcpy(errbuf, prefix, plen);
    errbuf[plen] = ':';
    errbuf[plen + 1] = ' ';
    errbuf[plen + 2 + olen] = '\0';
    return status;
}

void cmf__error_clear(void) { errbuf[0] = '\0'; }
