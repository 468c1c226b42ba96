/* bench_serve.h — the serving workload of `cmf bench --requests`. */
#ifndef CMF_TOOL_BENCH_SERVE_H
#define CMF_TOOL_BENCH_SERVE_H

#include "cmf.h"

typedef struct bench_serve_opts {
    int requests, parallel, batch_tokens, threads;
    int prompt_min, prompt_max, n_gen;
    cmf_kv_type kv_type;
    cmf_device device;
} bench_serve_opts;

/* Runs the workload on m and prints its table; the exit status. */
int bench_serve(cmf_model *m, const bench_serve_opts *o);

#endif
