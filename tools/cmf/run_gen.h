/* run_gen.h — the answers of `cmf run` and `cmf chat`: requests to a
 * serving scheduler of one slot (the path of `cmf serve`), whose cache
 * carries the conversation from turn to turn. On a session instead: a
 * blend (--skill auto --blend T: a request runs one skill), and the rest
 * of a run once a request's skill needs to be session-wide (a DeltaNet or
 * Gemma-4 per-layer block replaced). Ctrl-C stops the answer. */
#ifndef CMF_TOOLS_RUN_GEN_H
#define CMF_TOOLS_RUN_GEN_H

#include "cmf.h"
#include "runopts.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct run_gen run_gen;

typedef struct run_gen_opts {
    const char *path;         /* the model file */
    const char *skill;        /* --skill ID the file is opened with; NULL = none (also for auto) */
    const char *task;         /* --task NAME, NULL = none ("default" as runopt_open) */
    float blend;              /* --blend T with --skill auto; > 0 takes the session path */
    bool quiet;               /* no routing line on stderr */
    const runopt_session *so; /* --ctx, --threads, --batch, --kv-type, --gpu, --lora */
} run_gen_opts;

/* Opens the model and what generates on it (the scheduler, or the session
 * for a blend) and installs the SIGINT handler; prints the error and
 * returns false on failure (nothing left open). */
bool run_gen_open(const char *cmd, const run_gen_opts *o, cmf_model **model, run_gen **out);
void run_gen_free(run_gen *g);
/* Positions one answer's prompt and generated tokens may take together. */
int32_t run_gen_n_ctx(const run_gen *g);

/* Generates one answer continuing prompt[0..n) (the whole context: what
 * the last answer left in the cache is reused) with gp's sampling, limits,
 * stops and hook; gp->on_token sees every token on the calling thread.
 * autoroute: route this prompt to a skill first (--skill auto), the
 * scores on stderr unless quiet. *r gets the result. Returns 0, or 1 with
 * the message printed. */
int run_gen_answer(run_gen *g, const int32_t *prompt, size_t n, const cmf_generate_params *gp, bool autoroute,
                   cmf_generate_result *r);

/* /skill: later answers run skill `id` (NULL = the backbone alone).
 * Returns NULL, or why not (borrowed until the next call). */
const char *run_gen_set_skill(run_gen *g, const char *id);

#endif
