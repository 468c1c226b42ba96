/* log.c — leveled stderr logging; the level is read once from CMF_LOG. */
#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int level_from_env(void)
{
    const char *s = getenv("CMF_LOG");
    if (!s) return CMF__LOG_WARN;
    if (!strcmp(s, "error")) return CMF__LOG_ERROR;
    if (!strcmp(s, "info")) return CMF__LOG_INFO;
    if (!strcmp(s, "debug")) return CMF__LOG_DEBUG;
    return CMF__LOG_WARN;
}

int cmf__log_enabled(cmf__log_level level)
{
    /* Racy first read is benign: every thread computes the same value. */
    static volatile int cached = -1;
    if (cached < 0) cached = level_from_env();
    return (int)level <= cached;
}

void cmf__log(cmf__log_level level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warning", "info", "debug"};
    if (!cmf__log_enabled(level)) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cmf: %s: ", names[level]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
