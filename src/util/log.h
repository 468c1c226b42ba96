/* log.h — diagnostics to stderr, filtered by the CMF_LOG environment
 * variable (error|warn|info|debug; default warn). Never used for results. */
#ifndef CMF_UTIL_LOG_H
#define CMF_UTIL_LOG_H

#include "util/error.h"

typedef enum { CMF__LOG_ERROR, CMF__LOG_WARN, CMF__LOG_INFO, CMF__LOG_DEBUG } cmf__log_level;

void cmf__log(cmf__log_level level, const char *fmt, ...) CMF_PRINTF(2, 3);
int cmf__log_enabled(cmf__log_level level);

#define CMF_WARN(...) cmf__log(CMF__LOG_WARN, __VA_ARGS__)
#define CMF_INFO(...) cmf__log(CMF__LOG_INFO, __VA_ARGS__)
#define CMF_DEBUG(...) cmf__log(CMF__LOG_DEBUG, __VA_ARGS__)

#endif
