/* sched.h — the structs behind cmf_sched / cmf_request (sched.c: the
 * handle side and creation; sched_step.c: the scheduler's thread). */
#ifndef CMF_ENGINE_SCHED_H
#define CMF_ENGINE_SCHED_H

#include "cmf.h"
#include "engine/gen.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* A token queued for cmf_request_poll (text owned). */
typedef struct cmf__rq_event {
    int32_t id;
    char *text;
    size_t len;
    float lp;
    int32_t n_top;
    int32_t top_ids[20];
    float top_lp[20];
} cmf__rq_event;

enum { CMF__RQ_QUEUED, CMF__RQ_PREFILL, CMF__RQ_DECODE };

struct cmf_request {
    /* set at submit, read-only after */
    int32_t *prompt;
    size_t n_prompt;
    cmf_request_params p;       /* p.prompt, p.skill, p.gen.stop are not read after submit */
    char *skill;                /* copy of p.skill (NULL: the model's, "": the backbone) */
    cmf_token_fn user_on_token;
    void *user;
    atomic_bool cancel;
    /* the scheduler's thread only, while the request is queued or running */
    int state;                  /* CMF__RQ_* */
    int slot;                   /* sequence slot, -1 while queued */
    int64_t fed;                /* prompt tokens in the slot's cache */
    int32_t next;               /* sampled token to feed at the next step */
    int64_t reused;             /* prompt tokens the cache already held at (first) admission */
    int32_t *replay;            /* after a preemption in the middle of generating: the tokens its cache held
                                 * (prompt and generated), fed again at re-admission before `next` */
    int64_t n_replay;
    bool resumed;               /* replay being fed: its last logits are not sampled (next is known) */
    bool routed;                /* skill_auto: routed already (a preempted request keeps its skill) */
    cmf__gen gen;
    double t_submit, t_admit, t_prefilled, t_first;
    /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool ended;                 /* the result is written (wait and poll see the end) */
    bool done;                  /* on_done has returned: the scheduler no longer touches it */
    cmf__rq_event *ev;          /* ring of queued tokens (no on_token) */
    size_t ev_head, ev_len, ev_cap;
    cmf__rq_event cur;          /* the token the last poll returned */
    cmf_request_result res;
    double *scores;             /* routing E per registry record (skill_auto) */
    size_t n_scores;
    char err[1024];
};

/* A sequence slot of the session: the running request, or none, and the
 * tokens its cache holds (kept after the request for prefix reuse). */
typedef struct cmf__sched_slot {
    cmf_request *rq;
    int32_t *hist;              /* [n_ctx] */
    int64_t n_hist;
    char *skill;                /* binding its cache was computed under (as cmf_request.skill) */
    uint64_t used;              /* step of its last admission (least recently used first) */
} cmf__sched_slot;

struct cmf_sched {
    cmf_model *model;
    cmf_session *sess;          /* n_parallel sequence slots */
    cmf_sched_params p;
    int64_t n_ctx;
    int32_t default_skill;      /* registry record of the model's skill, -1 = backbone */
    pthread_t thread;
    pthread_mutex_t mu;         /* queue, stopping, st */
    pthread_cond_t cv;          /* work arrived or stop */
    bool stopping;
    cmf_request **queue;        /* ring of q_cap (queue_max + room for requests put back at the front) */
    size_t q_head, q_len, q_cap;
    cmf_sched_stats st;
    pthread_mutex_t err_mu;
    char err[1024];
    /* the scheduler's thread only */
    cmf__sched_slot *slots;     /* [n_parallel] */
    cmf_request **running;      /* [n_parallel] in admission order */
    int n_running;
    uint64_t n_steps;
    bool paged;                 /* the session's cache is in blocks (admission and steps count them) */
    bool share;                 /* and blocks are shared between requests by prefix keys */
    int64_t block;              /* positions a block holds */
    uint64_t *keys;             /* [n_ctx / block + 1] scratch: a token run's block keys */
    int32_t *b_tok, *b_seq;     /* a step's batch [batch_tokens + n_parallel] */
    bool *b_want;
    cmf_request **b_rq;         /* [n_parallel] the request of each wanted row */
    float *logits;              /* [n_parallel][n_vocab] */
};

void *cmf__sched_main(void *arg);
void cmf__sched_release(cmf_sched *s);
/* Registry record of skill `id`, -1 when none. */
int32_t cmf__sched_skill_record(const cmf_model *model, const char *id);

#endif
