/* gen.h — the generation state of one sequence: its sampler and RNG, the
 * logit hook of a constrained request, UTF-8-safe text with stop-string
 * hold-back, logprobs, the finish reason. Both cmf_session_generate and
 * the serving scheduler step sequences through it, so there is one
 * generation path. It never runs the model: the caller feeds the token
 * it returns and hands back the next row of logits. */
#ifndef CMF_ENGINE_GEN_H
#define CMF_ENGINE_GEN_H

#include "cmf.h"
#include "engine/sampler.h"
#include "text/tokenizer.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct cmf__gen {
    const struct cmf_model *model;
    cmf_generate_params p;     /* p.stop points at stop[] below */
    char **stop;               /* owned copies of the stop strings */
    cmf__sampler smp;
    cmf__tok_stream *ts;       /* NULL when the model has no vocabulary */
    char *pend;                /* text decoded but not yet emitted (stop hold-back) */
    size_t pend_len, pend_cap;
    float *masked;             /* [n_vocab] the row the hook masks, NULL without a hook */
    int32_t top_ids[20];
    float top_lp[20];
    int32_t n_gen;
    cmf_finish finish;         /* NONE while it runs */
} cmf__gen;

/* Checks p (n_logprobs 0..20, sampling values) and readies the state; the
 * stop strings are copied. Errors: CMF_ERR_ARG naming the field,
 * CMF_ERR_NOMEM. On failure nothing needs freeing. */
cmf_status cmf__gen_init(cmf__gen *g, const struct cmf_model *model, const cmf_generate_params *p);
void cmf__gen_free(cmf__gen *g);

/* One step, given the logits of the sequence's last position: picks the
 * next token, emits its text through p.on_token and decides whether the
 * generation goes on. hist[0..n_hist) is the sequence so far (what the
 * penalties see); n_past its positions in the cache; n_ctx its room.
 * cancelled: stop now (finish CANCELLED, nothing sampled). *feed gets the
 * token to run next, or -1 when the generation has ended (g->finish is
 * set). Errors (the hook, the tokenizer, memory) end it too. */
cmf_status cmf__gen_next(cmf__gen *g, const float *logits, const int32_t *hist, int64_t n_hist, int64_t n_past,
                         int64_t n_ctx, bool cancelled, int32_t *feed);

/* Emits what is held back once the generation has ended (not after a stop
 * string, nor after the callback asked to stop). */
void cmf__gen_flush(cmf__gen *g);

#endif
