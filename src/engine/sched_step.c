/* sched_step.c — the scheduler's thread: admission (first come, first
 * served, when the paged cache has the blocks for the prompt; the prompt's
 * cached blocks taken by prefix key, or, where blocks cannot be shared,
 * the free slot whose cache shares the longest prefix), the step (one
 * decode token per generating request, then prefill chunks up to
 * batch_tokens and the blocks left; when a decoder finds no block, the
 * newest request is preempted: its blocks freed, itself put back at the
 * head of the queue to recompute what it had), and the end of a request
 * (result, its blocks released into the prefix cache, on_done, waking its
 * waiters). Only this thread touches the session and the slots. A
 * request's handle is never touched after `done` is set. */
#include "engine/api.h"
#include "engine/features.h"
#include "engine/sched.h"
#include "util/error.h"
#include "util/hash.h"
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
    int64_t used = 0, block = 0, blocks = 0, total = 0;
    if (s->paged) {
        cmf__engine_kv_usage(s->sess->e, &block, &blocks, &total);
        used = blocks * block;
    } else {
        for (int k = 0; k < s->n_running; k++) used += s->slots[s->running[k]->slot].n_hist;
    }
    pthread_mutex_lock(&s->mu);
    s->st.running = s->n_running;
    s->st.kv_used = used;
    if (s->paged) s->st.kv_total = total * block;
    pthread_mutex_unlock(&s->mu);
}

/* The tokens a request's cache is filled from: its prompt, or after a
 * preemption while generating, what its cache held then. */
static const int32_t *feed_tokens(const cmf_request *rq) { return rq->replay ? rq->replay : rq->prompt; }
static int64_t n_feed(const cmf_request *rq) { return rq->replay ? rq->n_replay : (int64_t)rq->n_prompt; }

/* Keys of the first n full blocks of tok under skill (see
 * cmf__engine_kv_attach): each chains the one before it, so a key names
 * every token up to its block's end. */
static void block_keys(const cmf_sched *s, const char *skill, const int32_t *tok, int64_t n, uint64_t *key)
{
    uint64_t h = skill ? cmf__hash64(skill, strlen(skill)) ^ 0x9E3779B97F4A7C15ull : 0x2545F4914F6CDD1Dull;
    for (int64_t j = 0; j < n; j++) {
        cmf__hash64_state hs;
        cmf__hash64_init(&hs);
        cmf__hash64_update(&hs, &h, sizeof h);
        cmf__hash64_update(&hs, tok + j * s->block, (size_t)s->block * sizeof *tok);
        h = cmf__hash64_final(&hs);
        key[j] = h ? h : 1; /* 0 means "no key" */
    }
}

/* A slot's full blocks into the prefix cache (blocks shared by key only). */
static void publish_blocks(cmf_sched *s, int slot)
{
    if (!s->share) return;
    const cmf__sched_slot *sl = &s->slots[slot];
    int64_t n = sl->n_hist / s->block;
    block_keys(s, sl->skill, sl->hist, n, s->keys);
    cmf__engine_kv_publish(s->sess->e, slot, s->keys, n);
}

/* A slot's cache forgotten (its blocks released). */
static void clear_slot(cmf_sched *s, int slot)
{
    (void)cmf_session_seq_reset(s->sess, slot);
    s->slots[slot].n_hist = 0;
}

static void unlink_running(cmf_sched *s, cmf_request *rq)
{
    int k = 0;
    while (k < s->n_running && s->running[k] != rq) k++;
    if (k == s->n_running) return;
    memmove(s->running + k, s->running + k + 1, (size_t)(s->n_running - k - 1) * sizeof *s->running);
    s->n_running--;
}

static bool same_skill(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

/* Ends a request: its result, its slot freed (the cache stays for reuse),
 * on_done, then `done` and its waiters woken. st != OK: it failed with the
 * message in cmf_last_error(). */
static void finish(cmf_sched *s, cmf_request *rq, cmf_status st, cmf_finish why)
{
    if (st) snprintf(rq->err, sizeof rq->err, "%s", cmf_last_error());
    else if (why != CMF_FINISH_NONE) rq->gen.finish = why;
    if (!st && rq->t_admit > 0) cmf__gen_flush(&rq->gen);
    double t = now_ms();
    cmf_request_result r;
    memset(&r, 0, sizeof r);
    r.status = st;
    r.gen.n_reused = (int32_t)rq->reused;
    const int64_t fed = rq->fed < (int64_t)rq->n_prompt ? rq->fed : (int64_t)rq->n_prompt;
    r.gen.n_prompt = rq->t_admit > 0 && fed > rq->reused ? (int32_t)(fed - rq->reused) : 0;
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
        unlink_running(s, rq);
        if (s->share) { /* its blocks stay findable by key until the space is needed */
            publish_blocks(s, rq->slot);
            clear_slot(s, rq->slot);
        }
        rq->slot = -1;
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
    const int32_t *tok = feed_tokens(rq);
    int64_t n = 0, lim = n_feed(rq) - 1; /* at least one token is run: its logits start the generation */
    while (n < sl->n_hist && n < lim && sl->hist[n] == tok[n]) n++;
    return n;
}

/* Blocks the decoders' next tokens take (a decoder whose last block is full needs one). */
static int64_t decoder_blocks(const cmf_sched *s)
{
    int64_t n = 0;
    for (int k = 0; k < s->n_running; k++)
        if (s->running[k]->state == CMF__RQ_DECODE) n += cmf__engine_kv_need(s->sess->e, s->running[k]->slot, 1);
    return n;
}

/* Where blocks are not shared, idle slots keep their caches for prefix
 * reuse: the least recently used ones give them up until `want` blocks are
 * available (or none is left to give). */
static void free_idle(cmf_sched *s, int64_t want)
{
    while (!s->share && cmf__engine_kv_avail(s->sess->e) < want) {
        int pick = -1;
        for (int i = 0; i < s->p.n_parallel; i++)
            if (!s->slots[i].rq && s->slots[i].n_hist && (pick < 0 || s->slots[i].used < s->slots[pick].used)) pick = i;
        if (pick < 0) return;
        clear_slot(s, pick);
    }
}

/* Puts rq into a free slot: the one whose cache shares the longest prefix
 * under the same skill, else the least recently used; with shared blocks,
 * the prompt's cached blocks are taken by key. 1 (nothing changed but a
 * routing) when the cache lacks the blocks for the rest of the prompt
 * beside what the decoders need next: it waits. */
static int admit(cmf_sched *s, cmf_request *rq, cmf_status *err)
{
    cmf_status st = CMF_OK;
    *err = CMF_OK;
    if (rq->p.skill_auto && !rq->routed) {
        if ((st = route(s, rq))) return *err = st, 0;
        rq->routed = true;
    }
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
        if (rq->skill && !key) return *err = cmf__error(CMF_ERR_NOMEM, "admit: out of memory"), 0;
        if ((st = cmf_session_seq_set_skill(s->sess, best, rq->skill))) {
            free(key);
            return *err = st, 0;
        }
        free(sl->skill);
        sl->skill = key;
        clear_slot(s, best); /* same binding after all (NULL vs the model's id): start clean */
    }
    cmf__engine *e = s->sess->e;
    const int64_t total = n_feed(rq);
    int64_t keep;
    if (s->share) {
        int64_t nb = (total - 1) / s->block; /* whole blocks before the last token, which is always run */
        block_keys(s, rq->skill, feed_tokens(rq), nb, s->keys);
        keep = cmf__engine_kv_attach(e, best, s->keys, nb);
        memcpy(sl->hist, feed_tokens(rq), (size_t)keep * sizeof *sl->hist); /* the slot's history is what it holds */
    } else {
        keep = common_prefix(sl, rq);
        if (keep < sl->n_hist && cmf__engine_truncate_seq(e, best, keep) != CMF_OK) clear_slot(s, best);
        keep = e->n_past[best];
    }
    sl->n_hist = keep;
    if (s->paged) {
        int64_t want = cmf__engine_kv_need(e, best, total - keep) + decoder_blocks(s);
        free_idle(s, want);
        if (want > cmf__engine_kv_avail(e)) {
            if (s->share) clear_slot(s, best); /* the blocks it took go back to the cache */
            return 1;
        }
    }
    sl->rq = rq;
    sl->used = ++s->n_steps;
    rq->slot = best;
    rq->fed = keep;
    if (!rq->replay) rq->reused = keep;
    rq->state = CMF__RQ_PREFILL;
    if (rq->t_admit == 0) rq->t_admit = now_ms();
    s->running[s->n_running++] = rq;
    pthread_mutex_lock(&s->mu);
    s->st.prefix_queries++;
    s->st.prefix_hits += keep > 0;
    s->st.prompt_computed += (uint64_t)(total - keep);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* Puts requests back at the head of the queue, in order. */
static void requeue_front(cmf_sched *s, cmf_request **rq, int n)
{
    pthread_mutex_lock(&s->mu);
    for (int i = n - 1; i >= 0; i--) {
        s->q_head = (s->q_head + s->q_cap - 1) % s->q_cap;
        s->queue[s->q_head] = rq[i];
        s->q_len++;
    }
    s->st.waiting = (int32_t)s->q_len;
    pthread_mutex_unlock(&s->mu);
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
        cmf_status st;
        if (admit(s, take[i], &st)) { /* no room in the cache: it and those behind it wait (first come, first served) */
            requeue_front(s, take + i, n - i);
            break;
        }
        if (st) finish(s, take[i], st, CMF_FINISH_NONE);
    }
    return true;
}

/* Preempts the newest running request for its blocks: its full blocks
 * stay in the prefix cache, its cache is cleared, and it goes back to the
 * head of the queue; one that was generating keeps what its cache held, to
 * be fed again before its next token. */
static void preempt(cmf_sched *s)
{
    cmf_request *rq = s->running[s->n_running - 1];
    cmf__sched_slot *sl = &s->slots[rq->slot];
    if (rq->state == CMF__RQ_DECODE) { /* (one preempted again while reading its replay keeps that) */
        int32_t *keep = malloc((size_t)(sl->n_hist > 0 ? sl->n_hist : 1) * sizeof *keep);
        if (!keep) { /* cannot keep its tokens: it ends here instead */
            finish(s, rq, cmf__error(CMF_ERR_NOMEM, "preempt: out of memory"), CMF_FINISH_NONE);
            return;
        }
        memcpy(keep, sl->hist, (size_t)sl->n_hist * sizeof *keep);
        free(rq->replay);
        rq->replay = keep;
        rq->n_replay = sl->n_hist;
        rq->resumed = true;
    }
    publish_blocks(s, rq->slot);
    clear_slot(s, rq->slot);
    sl->rq = NULL;
    unlink_running(s, rq);
    rq->slot = -1;
    rq->state = CMF__RQ_QUEUED;
    rq->fed = 0;
    requeue_front(s, &rq, 1);
    pthread_mutex_lock(&s->mu);
    s->st.preemptions++;
    pthread_mutex_unlock(&s->mu);
}

/* Fills the step's batch; the count of tokens. b_rq gets the request of
 * each wanted row, in batch order; *n_want their count. A prefill chunk
 * takes what the budget and the cache's free blocks allow. */
static int64_t fill_batch(cmf_sched *s, int *n_want)
{
    int64_t n = 0;
    int w = 0;
    const cmf__engine *e = s->sess->e;
    int64_t blocks = s->paged ? cmf__engine_kv_avail(e) - decoder_blocks(s) : INT64_MAX;
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
        int64_t left = n_feed(rq) - rq->fed, take = left < budget ? left : budget;
        if (s->paged) { /* positions its held blocks have left, and those of the blocks still free */
            int64_t past = e->n_past[rq->slot], room = (past + s->block - 1) / s->block * s->block - past;
            int64_t fit = blocks > 0 ? room + blocks * s->block : room;
            if (take > fit) take = fit;
            blocks -= cmf__engine_kv_need(e, rq->slot, take);
        }
        const int32_t *tok = feed_tokens(rq);
        for (int64_t i = 0; i < take; i++) {
            s->b_tok[n] = tok[rq->fed + i];
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

/* The step's logits of rq (wanted row w): its prompt read, a token sampled. */
static void after_step(cmf_sched *s, cmf_request *rq, const float *logits, double t)
{
    cmf__sched_slot *sl = &s->slots[rq->slot];
    if (rq->state == CMF__RQ_PREFILL) {
        rq->state = CMF__RQ_DECODE;
        if (rq->t_prefilled == 0) rq->t_prefilled = t;
        publish_blocks(s, rq->slot); /* its prompt's blocks, for requests that start the same way */
        if (rq->resumed) { /* its cache is back: the token it had sampled comes next */
            rq->resumed = false;
            return;
        }
    }
    int32_t feed = -1;
    cmf_status st = cmf__gen_next(&rq->gen, logits, sl->hist, sl->n_hist, sl->n_hist, s->n_ctx,
                                  atomic_load(&rq->cancel), &feed);
    if (st || feed < 0) finish(s, rq, st, CMF_FINISH_NONE);
    else rq->next = feed;
}

static void step(cmf_sched *s)
{
    for (int k = 0; k < s->n_running;) { /* cancelled while running: they end before the step */
        cmf_request *rq = s->running[k];
        if (atomic_load(&rq->cancel)) finish(s, rq, CMF_OK, CMF_FINISH_CANCELLED);
        else k++;
    }
    if (!s->n_running) return;
    /* the decoders' next blocks first: the newest requests give theirs up */
    if (s->paged) {
        free_idle(s, decoder_blocks(s));
        while (s->n_running > 1 && decoder_blocks(s) > cmf__engine_kv_avail(s->sess->e)) preempt(s);
    }
    int n_want = 0;
    int64_t n = fill_batch(s, &n_want);
    while (n == 0 && s->n_running > 1) { /* every prefill stuck for blocks: the newest makes room */
        preempt(s);
        n = fill_batch(s, &n_want);
    }
    if (n == 0) return;
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
            clear_slot(s, rq->slot);
            finish(s, rq, why, CMF_FINISH_NONE);
        }
        return;
    }
    account_fed(s, n);
    double t = now_ms();
    for (int w = 0; w < n_want; w++) after_step(s, s->b_rq[w], s->logits + (size_t)w * (size_t)V, t);
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
