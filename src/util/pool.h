/* pool.h — a fixed pthread pool for data-parallel loops. One job at a time
 * per pool: cmf__pool_run blocks until every task index has run. The caller
 * thread works too, so a pool of n threads starts n-1 workers. */
#ifndef CMF_UTIL_POOL_H
#define CMF_UTIL_POOL_H

#include "cmf.h"

typedef struct cmf__pool cmf__pool;
/* fn(ctx, task, thread): task in [0, n_tasks), thread in [0, n_threads). */
typedef void (*cmf__pool_fn)(void *ctx, int task, int thread);

/* n_threads <= 0 means the number of online cores. NULL on failure. */
cmf__pool *cmf__pool_new(int n_threads);
void cmf__pool_free(cmf__pool *p);
int cmf__pool_threads(const cmf__pool *p);
/* Runs fn for every task; tasks are handed out dynamically. p may be NULL
 * (runs inline). Not reentrant: do not call from inside fn. */
void cmf__pool_run(cmf__pool *p, int n_tasks, cmf__pool_fn fn, void *ctx);
/* Number of online cores (>= 1). */
int cmf__cpu_count(void);

#endif
