/* sched_step.c — the scheduler's thread: admission (first come, first
 * served, into the free slot whose cache shares the longest prefix with
 * the prompt), the step (one decode token per generating request, then
 * prefill chunks up to batch_tokens), and the end of a request (result,
 * on_done, waking its waiters). Only this thread touches the session and
 * the slots. A request's handle is never touched after `done` is set. */
#include "engine/api.h"
#include "engine/features.h"
#include "engine/sched.h"
#include "util/error.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Running requests and the cache positions they hold, for the stats. */
static void publish(cmf_sched *s)
{
    int64_t used = 0;
    for (int k = 0; k < s->n_running; k++) used += s->slots[s->running[k]->slot].n_hist;
    pthread_mutex_lock(&s->mu);
    s->st.running = s->n_running;
    s->st.kv_used = used;
    pthread_mutex_unlock(&s->mu);
}

static bool same_skill(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

/* Ends a request: its result, its slot freed (the cache stays for reuse),
 * on_done, then `done` and its waiters woken. st != OK: it failed with the
 * message in cmf_last_error(). */
static void finish(cmf_sched *s, cmf_request *rq, cmf_status st, cmf_finish why)
{
    if (st) snprintf(rq->err, sizeof rq->err, "%s", cmf_last_error());
    else if (why != CMF_FINISH_NONE) rq->gen.finish = why;
    if (!st && rq->state != CMF__RQ_QUEUED) cmf__gen_flush(&rq->gen);
    double t = now_ms();
    cmf_request_result r;
    memset(&r, 0, sizeof r);
    r.status = st;
    r.gen.n_reused = (int32_t)rq->reused;
    r.gen.n_prompt = rq->state == CMF__RQ_QUEUED ? 0 : (int32_t)(rq->fed - rq->reused);
    r.gen.n_gen = rq->gen.n_gen;
    r.gen.finish = st ? CMF_FINISH_NONE : rq->gen.finish;
    if (rq->t_admit > 0) {
        r.queue_ms = rq->t_admit - rq->t_submit;
        double pre = rq->t_prefilled > 0 ? rq->t_prefilled : t;
        r.gen.prompt_ms = pre - rq->t_admit;
        r.gen.gen_ms = rq->t_prefilled > 0 ? t - rq->t_prefilled : 0;
    } else {
        r.queue_ms = t - rq->t_submit;
    }
    r.ttft_ms = rq->t_first > 0 ? rq->t_first - rq->t_submit : 0;
    r.skill = rq->p.skill_auto || rq->skill ? cmf__sched_skill_record(s->model, rq->skill) : s->default_skill;
    if (rq->slot >= 0) {
        s->slots[rq->slot].rq = NULL;
        int k = 0;
        while (k < s->n_running && s->running[k] != rq) k++;
        if (k < s->n_running) {
            memmove(s->running + k, s->running + k + 1, (size_t)(s->n_running - k - 1) * sizeof *s->running);
            s->n_running--;
        }
    }
    const uint64_t n_gen = (uint64_t)rq->gen.n_gen;
    cmf__gen_free(&rq->gen);
    pthread_mutex_lock(&s->mu);
    s->st.requests_done++;
    s->st.gen_tokens += n_gen;
    pthread_mutex_unlock(&s->mu);
    publish(s);
    pthread_mutex_lock(&rq->mu);
    rq->res = r;
    rq->ended = true; /* cmf_request_wait returns from here on, inside on_done too */
    pthread_cond_broadcast(&rq->cv);
    pthread_mutex_unlock(&rq->mu);
    if (rq->p.on_done) rq->p.on_done(rq->user, rq);
    pthread_mutex_lock(&rq->mu);
    rq->done = true;
    pthread_cond_broadcast(&rq->cv);
    pthread_mutex_unlock(&rq->mu);
}

/* Routing of a skill_auto request: E per record on the backbone, the
 * smallest one's id becomes the request's skill. */
static cmf_status route(cmf_sched *s, cmf_request *rq)
{
    const int32_t ns = cmf_model_n_skills(s->model);
    double *E = malloc((size_t)(ns > 0 ? ns : 1) * sizeof *E);
    if (!E) return cmf__error(CMF_ERR_NOMEM, "route: out of memory");
    const cmf__model *backbone = NULL;
    int pick = -1;
    cmf_status st = cmf__model_skill_view(s->model, NULL, &backbone);
    if (!st) st = cmf__skill_route_scores(backbone, s->sess->e->be, rq->prompt, (int64_t)rq->n_prompt, E, (size_t)ns, &pick);
    if (!st && pick < 0)
        st = cmf__error(CMF_ERR_NOT_FOUND, "%s: no skill has a routing block (cmf skill add --prompts)", s->model->m->what);
    const char *id = st ? NULL : cmf_model_skill_id(s->model, pick);
    if (!st && !(rq->skill = strdup(id ? id : ""))) st = cmf__error(CMF_ERR_NOMEM, "route: out of memory");
    if (st) {
        free(E);
        return st;
    }
    pthread_mutex_lock(&rq->mu);
    rq->scores = E;
    rq->n_scores = (size_t)ns;
    pthread_mutex_unlock(&rq->mu);
    return CMF_OK;
}

static int64_t common_prefix(const cmf__sched_slot *sl, const cmf_request *rq)
{
    int64_t n = 0, lim = (int64_t)rq->n_prompt - 1; /* at least one prompt token is run: its logits start the generation */
    while (n < sl->n_hist && n < lim && sl->hist[n] == rq->prompt[n]) n++;
    return n;
}

/* Puts rq into a free slot: the one whose cache shares the longest prefix
 * under the same skill, else the least recently used. */
static cmf_status admit(cmf_sched *s, cmf_request *rq)
{
    cmf_status st = rq->p.skill_auto ? route(s, rq) : CMF_OK;
    if (st) return st;
    int best = -1;
    int64_t best_n = -1;
    for (int i = 0; i < s->p.n_parallel; i++) {
        const cmf__sched_slot *sl = &s->slots[i];
        if (sl->rq) continue;
        int64_t n = same_skill(sl->skill, rq->skill) ? common_prefix(sl, rq) : 0;
        if (n > best_n || (n == best_n && sl->used < s->slots[best].used)) best = i, best_n = n;
    }
    cmf__sched_slot *sl = &s->slots[best];
    if (!same_skill(sl->skill, rq->skill)) {
        char *key = rq->skill ? strdup(rq->skill) : NULL;
        if (rq->skill && !key) return cmf__error(CMF_ERR_NOMEM, "admit: out of memory");
        if ((st = cmf_session_seq_set_skill(s->sess, best, rq->skill))) {
            free(key);
            return st;
        }
        free(sl->skill);
        sl->skill = key;
        (void)cmf_session_seq_reset(s->sess, best); /* same binding after all (NULL vs the model's id): start clean */
        sl->n_hist = 0;
    }
    int64_t keep = common_prefix(sl, rq);
    if (keep < sl->n_hist && cmf__engine_truncate_seq(s->sess->e, best, keep) != CMF_OK) {
        if ((st = cmf_session_seq_reset(s->sess, best))) return st;
        keep = 0;
    }
    sl->n_hist = keep;
    sl->rq = rq;
    sl->used = ++s->n_steps;
    rq->slot = best;
    rq->fed = rq->reused = keep;
    rq->state = CMF__RQ_PREFILL;
    rq->t_admit = now_ms();
    s->running[s->n_running++] = rq;
    pthread_mutex_lock(&s->mu);
    s->st.prefix_queries++;
    s->st.prefix_hits += keep > 0;
    s->st.prompt_computed += rq->n_prompt - (size_t)keep;
    pthread_mutex_unlock(&s->mu);
    return CMF_OK;
}

/* Takes what the queue holds into free slots (cancelled ones end there).
 * Returns false when the scheduler is to stop. */
static bool take_work(cmf_sched *s)
{
    pthread_mutex_lock(&s->mu);
    while (!s->stopping && s->q_len == 0 && s->n_running == 0) pthread_cond_wait(&s->cv, &s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        return false;
    }
    cmf_request *take[64];
    int n = 0;
    /* cancelled ones leave the queue wherever they stand */
    for (size_t i = 0, kept = 0, len = s->q_len; i < len; i++) {
        cmf_request *rq = s->queue[(s->q_head + i) % s->q_cap];
        if (atomic_load(&rq->cancel) && n < 64) { /* more than 64: the rest at the next step */
            take[n++] = rq;
            s->q_len--;
        } else {
            s->queue[(s->q_head + kept++) % s->q_cap] = rq;
        }
    }
    int n_cancel = n;
    while (s->q_len && s->n_running + (n - n_cancel) < s->p.n_parallel && n < 64) {
        take[n++] = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % s->q_cap;
        s->q_len--;
    }
    s->st.waiting = (int32_t)s->q_len;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < n_cancel; i++) finish(s, take[i], CMF_OK, CMF_FINISH_CANCELLED);
    for (int i = n_cancel; i < n; i++) {
        cmf_status st = admit(s, take[i]);
        if (st) finish(s, take[i], st, CMF_FINISH_NONE);
    }
    return true;
}

/* Fills the step's batch; the count of tokens. b_rq gets the request of
 * each wanted row, in batch order; *n_want their count. */
static int64_t fill_batch(cmf_sched *s, int *n_want)
{
    int64_t n = 0;
    int w = 0;
    for (int k = 0; k < s->n_running; k++) {
        cmf_request *rq = s->running[k];
        if (rq->state != CMF__RQ_DECODE) continue;
        s->b_tok[n] = rq->next;
        s->b_seq[n] = rq->slot;
        s->b_want[n++] = true;
        s->b_rq[w++] = rq;
    }
    int64_t budget = n ? s->p.batch_tokens - n : s->p.batch_tokens;
    for (int k = 0; k < s->n_running && budget > 0; k++) {
        cmf_request *rq = s->running[k];
        if (rq->state != CMF__RQ_PREFILL) continue;
        int64_t left = (int64_t)rq->n_prompt - rq->fed, take = left < budget ? left : budget;
        for (int64_t i = 0; i < take; i++) {
            s->b_tok[n] = rq->prompt[rq->fed + i];
            s->b_seq[n] = rq->slot;
            s->b_want[n++] = i == left - 1;
        }
        if (take == left) s->b_rq[w++] = rq;
        budget -= take;
    }
    *n_want = w;
    return n;
}

/* Records what the step fed into the slots' histories and the requests. */
static void account_fed(cmf_sched *s, int64_t n)
{
    for (int64_t t = 0; t < n; t++) {
        cmf__sched_slot *sl = &s->slots[s->b_seq[t]];
        sl->hist[sl->n_hist++] = s->b_tok[t];
        if (sl->rq->state == CMF__RQ_PREFILL) sl->rq->fed++;
    }
}

static void step(cmf_sched *s)
{
    for (int k = 0; k < s->n_running;) { /* cancelled while running: they end before the step */
        cmf_request *rq = s->running[k];
        if (atomic_load(&rq->cancel)) finish(s, rq, CMF_OK, CMF_FINISH_CANCELLED);
        else k++;
    }
    if (!s->n_running) return;
    int n_want = 0;
    int64_t n = fill_batch(s, &n_want);
    const int64_t V = s->model->m->arch.vocab_size;
    cmf_batch b = {(int32_t)n, s->b_tok, s->b_seq, s->b_want};
    const uint64_t hits = s->sess->e->graph_hits, misses = s->sess->e->graph_misses;
    cmf_status st = cmf_session_decode_batch(s->sess, &b, s->logits);
    pthread_mutex_lock(&s->mu);
    s->st.steps++;
    s->st.graph_hits += s->sess->e->graph_hits - hits;
    s->st.graph_misses += s->sess->e->graph_misses - misses;
    pthread_mutex_unlock(&s->mu);
    if (st) {
        /* a chunk may have gone in before the failure: every running sequence restarts clean */
        cmf_status why = st;
        while (s->n_running) {
            cmf_request *rq = s->running[0];
            (void)cmf_session_seq_reset(s->sess, rq->slot);
            s->slots[rq->slot].n_hist = 0;
            finish(s, rq, why, CMF_FINISH_NONE);
        }
        return;
    }
    account_fed(s, n);
    double t = now_ms();
    for (int w = 0; w < n_want; w++) {
        cmf_request *rq = s->b_rq[w];
        cmf__sched_slot *sl = &s->slots[rq->slot];
        if (rq->state == CMF__RQ_PREFILL) {
            rq->state = CMF__RQ_DECODE;
            rq->t_prefilled = t;
        }
        int32_t feed = -1;
        st = cmf__gen_next(&rq->gen, s->logits + (size_t)w * (size_t)V, sl->hist, sl->n_hist, sl->n_hist, s->n_ctx,
                           atomic_load(&rq->cancel), &feed);
        if (st || feed < 0) finish(s, rq, st, CMF_FINISH_NONE);
        else rq->next = feed;
    }
}

/* Stopping: every request still queued or running ends as cancelled. */
static void drain(cmf_sched *s)
{
    while (s->n_running) finish(s, s->running[0], CMF_OK, CMF_FINISH_CANCELLED);
    for (;;) {
        pthread_mutex_lock(&s->mu);
        cmf_request *rq = NULL;
        if (s->q_len) {
            rq = s->queue[s->q_head];
            s->q_head = (s->q_head + 1) % s->q_cap;
            s->q_len--;
        }
        pthread_mutex_unlock(&s->mu);
        if (!rq) break;
        finish(s, rq, CMF_OK, CMF_FINISH_CANCELLED);
    }
}

void *cmf__sched_main(void *arg)
{
    cmf_sched *s = arg;
    while (take_work(s)) {
        step(s);
        publish(s);
    }
    drain(s);
    return NULL;
}
