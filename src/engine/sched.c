/* sched.c — the serving scheduler (cmf.h, "serving"): requests queued by
 * any thread, run by the scheduler's own thread over one session whose
 * sequence slots are the running requests. A step is one
 * cmf_session_decode_batch: the next token of every generating request,
 * then prefill chunks of those still reading their prompts, up to
 * batch_tokens (continuous batching); each wanted row of logits goes to
 * its request's gen.c step. A slot keeps its cache after its request ends,
 * so a later prompt with the same beginning reuses it (prefix reuse).
 * Lock order: sched->mu, then a request's mu; the scheduler's thread is
 * the only one that touches the session, the slots and a running
 * request's generation state. */
#include "engine/sched.h"
#include "engine/api.h"
#include "engine/features.h"
#include "util/error.h"
#include "util/log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_KV_BUDGET (2ll << 30)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

cmf_sched_params cmf_sched_params_default(void)
{
    cmf_sched_params p;
    memset(&p, 0, sizeof p);
    p.n_parallel = 4;
    p.batch_tokens = 256;
    p.queue_max = 256;
    p.kv_type = CMF_KV_F16;
    p.device = CMF_DEVICE_AUTO;
    return p;
}

cmf_request_params cmf_request_params_default(void)
{
    cmf_request_params p;
    memset(&p, 0, sizeof p);
    p.gen = cmf_generate_params_default();
    return p;
}

/* ---- requests: the handle side (any thread) ------------------------------------ */
static void event_clear(cmf__rq_event *ev)
{
    free(ev->text);
    ev->text = NULL;
}

bool cmf_request_done(const cmf_request *rq)
{
    cmf_request *r = (cmf_request *)rq;
    pthread_mutex_lock(&r->mu);
    bool d = r->done;
    pthread_mutex_unlock(&r->mu);
    return d;
}

void cmf_request_cancel(cmf_request *rq)
{
    if (rq) atomic_store(&rq->cancel, true);
}

cmf_status cmf_request_wait(cmf_request *rq, cmf_request_result *res)
{
    pthread_mutex_lock(&rq->mu);
    while (!rq->ended) pthread_cond_wait(&rq->cv, &rq->mu);
    cmf_request_result r = rq->res;
    pthread_mutex_unlock(&rq->mu);
    if (res) *res = r;
    return r.status;
}

int cmf_request_poll(cmf_request *rq, int timeout_ms, cmf_token_info *tok)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    if (timeout_ms > 0) {
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&rq->mu);
    int got = 0;
    for (;;) {
        if (rq->ev_len) {
            event_clear(&rq->cur);
            rq->cur = rq->ev[rq->ev_head];
            rq->ev_head = (rq->ev_head + 1) % rq->ev_cap;
            rq->ev_len--;
            *tok = (cmf_token_info){rq->cur.id,      rq->cur.text ? rq->cur.text : "", rq->cur.len, rq->cur.lp,
                                    rq->cur.n_top,   rq->cur.top_ids,                  rq->cur.top_lp};
            got = 1;
            break;
        }
        if (rq->ended) {
            got = -1;
            break;
        }
        if (timeout_ms == 0) break;
        if (timeout_ms < 0) pthread_cond_wait(&rq->cv, &rq->mu);
        else if (pthread_cond_timedwait(&rq->cv, &rq->mu, &until)) break;
    }
    pthread_mutex_unlock(&rq->mu);
    return got;
}

size_t cmf_request_route_scores(const cmf_request *rq, double *scores, size_t cap)
{
    cmf_request *r = (cmf_request *)rq;
    pthread_mutex_lock(&r->mu);
    size_t n = r->n_scores < cap ? r->n_scores : cap;
    if (n && scores) memcpy(scores, r->scores, n * sizeof *scores);
    pthread_mutex_unlock(&r->mu);
    return scores ? n : 0;
}

const char *cmf_request_errmsg(const cmf_request *rq) { return rq->err; }

void cmf_request_free(cmf_request *rq)
{
    if (!rq) return;
    cmf_request_cancel(rq);
    pthread_mutex_lock(&rq->mu);
    while (!rq->done) pthread_cond_wait(&rq->cv, &rq->mu);
    pthread_mutex_unlock(&rq->mu);
    for (size_t i = 0; i < rq->ev_len; i++) event_clear(&rq->ev[(rq->ev_head + i) % rq->ev_cap]);
    event_clear(&rq->cur);
    free(rq->ev);
    free(rq->scores);
    free(rq->prompt);
    free(rq->replay);
    free(rq->skill);
    pthread_cond_destroy(&rq->cv);
    pthread_mutex_destroy(&rq->mu);
    free(rq);
}

/* The generation's token callback, on the scheduler's thread: times the
 * first token, then hands the token to the request's callback or queues
 * it for cmf_request_poll. */
static int on_token(void *user, const cmf_token_info *ti)
{
    cmf_request *rq = user;
    if (rq->t_first == 0 && ti->id >= 0) rq->t_first = now_ms();
    if (rq->user_on_token) return rq->user_on_token(rq->user, ti);
    cmf__rq_event ev = {.id = ti->id, .len = ti->text_len, .lp = ti->logprob, .n_top = ti->n_top};
    if (ti->n_top > 0) {
        memcpy(ev.top_ids, ti->top_ids, (size_t)ti->n_top * sizeof *ev.top_ids);
        memcpy(ev.top_lp, ti->top_logprobs, (size_t)ti->n_top * sizeof *ev.top_lp);
    }
    if (ti->text_len && !(ev.text = malloc(ti->text_len + 1))) return 1; /* out of memory: stop the request */
    if (ev.text) {
        memcpy(ev.text, ti->text, ti->text_len);
        ev.text[ti->text_len] = 0;
    }
    pthread_mutex_lock(&rq->mu);
    if (rq->ev_len == rq->ev_cap) {
        size_t cap = rq->ev_cap ? rq->ev_cap * 2 : 16;
        cmf__rq_event *q = malloc(cap * sizeof *q);
        if (!q) {
            pthread_mutex_unlock(&rq->mu);
            free(ev.text);
            return 1;
        }
        for (size_t i = 0; i < rq->ev_len; i++) q[i] = rq->ev[(rq->ev_head + i) % rq->ev_cap];
        free(rq->ev);
        rq->ev = q;
        rq->ev_cap = cap;
        rq->ev_head = 0;
    }
    rq->ev[(rq->ev_head + rq->ev_len++) % rq->ev_cap] = ev;
    pthread_cond_broadcast(&rq->cv);
    pthread_mutex_unlock(&rq->mu);
    return 0;
}

static cmf_status submit_fail(cmf_sched *s, cmf_status st)
{
    pthread_mutex_lock(&s->err_mu);
    snprintf(s->err, sizeof s->err, "%s", cmf_last_error());
    pthread_mutex_unlock(&s->err_mu);
    return st;
}

cmf_status cmf_sched_submit(cmf_sched *s, const cmf_request_params *p, cmf_request **out)
{
    *out = NULL;
    const int64_t V = s->model->m->arch.vocab_size;
    if (!p || !p->prompt || p->n_prompt == 0) return submit_fail(s, cmf__error(CMF_ERR_ARG, "submit: empty prompt"));
    if ((int64_t)p->n_prompt > s->n_ctx)
        return submit_fail(s, cmf__error(CMF_ERR_CONTEXT, "submit: prompt of %zu tokens exceeds the context of %lld",
                                         p->n_prompt, (long long)s->n_ctx));
    for (size_t i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= V)
            return submit_fail(s, cmf__error(CMF_ERR_ARG, "submit: prompt token %zu: id %d out of range [0, %lld)", i,
                                             p->prompt[i], (long long)V));
    if (p->skill && *p->skill && !p->skill_auto) {
        const cmf__model *view;
        cmf_status st = cmf__model_skill_view(s->model, p->skill, &view);
        if (st) return submit_fail(s, st);
    }
    if (p->skill_auto && cmf_model_n_skills(s->model) == 0)
        return submit_fail(s, cmf__error(CMF_ERR_NOT_FOUND, "%s: no skills to route to", s->model->m->what));
    cmf_request *rq = calloc(1, sizeof *rq);
    if (!rq) return submit_fail(s, cmf__error(CMF_ERR_NOMEM, "submit: out of memory"));
    pthread_mutex_init(&rq->mu, NULL);
    pthread_cond_init(&rq->cv, NULL);
    rq->slot = -1;
    rq->p = *p;
    rq->user_on_token = p->gen.on_token;
    rq->user = p->gen.user;
    rq->prompt = malloc(p->n_prompt * sizeof *rq->prompt);
    rq->skill = p->skill && !p->skill_auto ? strdup(p->skill) : NULL;
    cmf_status st = CMF_OK;
    if (!rq->prompt || (p->skill && !p->skill_auto && !rq->skill)) st = cmf__error(CMF_ERR_NOMEM, "submit: out of memory");
    if (!st) {
        memcpy(rq->prompt, p->prompt, p->n_prompt * sizeof *rq->prompt);
        rq->n_prompt = p->n_prompt;
        cmf_generate_params gp = p->gen;
        gp.on_token = on_token;
        gp.user = rq;
        st = cmf__gen_init(&rq->gen, s->model, &gp);
    }
    if (st) {
        rq->done = rq->ended = true;
        cmf_request_free(rq);
        return submit_fail(s, st);
    }
    rq->t_submit = now_ms();
    pthread_mutex_lock(&s->mu);
    if (s->stopping) st = cmf__error(CMF_ERR_CANCELLED, "submit: the scheduler is stopping");
    else if (s->q_len >= (size_t)s->p.queue_max)
        st = cmf__error(CMF_ERR_BUSY, "submit: %zu requests already waiting (queue_max %d)", s->q_len, s->p.queue_max);
    if (!st) {
        s->queue[(s->q_head + s->q_len++) % s->q_cap] = rq;
        s->st.prompt_tokens += p->n_prompt;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (st) {
        cmf__gen_free(&rq->gen);
        rq->done = rq->ended = true;
        cmf_request_free(rq);
        return submit_fail(s, st);
    }
    *out = rq;
    return CMF_OK;
}

void cmf_sched_stats_get(const cmf_sched *sc, cmf_sched_stats *out)
{
    cmf_sched *s = (cmf_sched *)sc;
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    out->waiting = (int32_t)s->q_len;
    out->n_parallel = s->p.n_parallel;
    if (!s->paged) out->kv_total = (int64_t)s->p.n_parallel * s->n_ctx; /* else published by the scheduler's thread */
    pthread_mutex_unlock(&s->mu);
}

int32_t cmf_sched_n_ctx(const cmf_sched *s) { return (int32_t)s->n_ctx; }
const char *cmf_sched_device(const cmf_sched *s) { return cmf_session_device(s->sess); }

/* ---- creation ------------------------------------------------------------------ */
/* The session: n_parallel slots over a paged cache of kv_budget bytes; n_ctx
 * 0 = as many positions as the budget holds, at most the model's (one
 * request may use what the others leave). For measurements and tests,
 * CMF_KV_BLOCK picks the block size (positions; default CMF__KV_BLOCK) and
 * CMF_GRAPH_BUCKETS=1|0 turns the engine's shape buckets on or off (default:
 * the backend's way, engine.h). */
static cmf_status make_session(cmf_sched *s, cmf_session **out)
{
    cmf_session_params sp = cmf_session_params_default();
    sp.n_ctx = s->p.n_ctx;
    sp.n_batch = s->p.batch_tokens;
    sp.n_threads = s->p.n_threads;
    sp.n_seq_max = s->p.n_parallel;
    sp.kv_type = s->p.kv_type;
    sp.device = s->p.device;
    const char *bs = getenv("CMF_KV_BLOCK");
    char *end = NULL;
    long block = bs ? strtol(bs, &end, 10) : 0;
    if (bs && (end == bs || *end || block < 1 || block > 4096))
        return cmf__error(CMF_ERR_ARG, "CMF_KV_BLOCK '%s': expected positions per block, 1..4096", bs);
    const char *gb = getenv("CMF_GRAPH_BUCKETS");
    if (gb && strcmp(gb, "0") && strcmp(gb, "1"))
        return cmf__error(CMF_ERR_ARG, "CMF_GRAPH_BUCKETS '%s': expected 1 (on) or 0 (off)", gb);
    return cmf__session_new(s->model, &sp, s->p.kv_budget ? s->p.kv_budget : DEFAULT_KV_BUDGET, block,
                            gb ? (*gb == '1' ? 1 : -1) : 0, out);
}

/* The task and LoRA adapters every request runs with. */
static cmf_status configure(cmf_sched *s)
{
    cmf_status st = CMF_OK;
    if (s->p.task && (st = cmf_session_set_task(s->sess, s->p.task))) return st;
    for (int32_t i = 0; i < s->p.n_lora && !st; i++)
        st = cmf_session_add_lora(s->sess, s->p.lora[i], s->p.lora_scale ? s->p.lora_scale[i] : 1.0f);
    if (st) return cmf__error(st, "%s", cmf_session_errmsg(s->sess));
    s->p.task = NULL; /* the caller's strings are not kept */
    s->p.lora = NULL;
    s->p.lora_scale = NULL;
    return CMF_OK;
}

static cmf_status check_params(const cmf_sched_params *p)
{
    if (p->n_parallel < 1 || p->n_parallel > 4096)
        return cmf__error(CMF_ERR_ARG, "scheduler: n_parallel %d outside 1..4096", p->n_parallel);
    if (p->batch_tokens < 1 || p->batch_tokens > 65536)
        return cmf__error(CMF_ERR_ARG, "scheduler: batch_tokens %d outside 1..65536", p->batch_tokens);
    if (p->queue_max < 1 || p->queue_max > 1 << 20)
        return cmf__error(CMF_ERR_ARG, "scheduler: queue_max %d outside 1..1048576", p->queue_max);
    if (p->n_ctx < 0 || p->kv_budget < 0 || p->n_threads < 0)
        return cmf__error(CMF_ERR_ARG, "scheduler: negative n_ctx, kv_budget or n_threads");
    if (p->n_lora < 0 || p->n_lora > 8 || (p->n_lora && !p->lora))
        return cmf__error(CMF_ERR_ARG, "scheduler: n_lora %d (0..8, with the paths)", p->n_lora);
    return CMF_OK;
}

cmf_status cmf_sched_new(cmf_model *model, const cmf_sched_params *pp, cmf_sched **out)
{
    *out = NULL;
    cmf_sched_params p = pp ? *pp : cmf_sched_params_default();
    cmf_status st = check_params(&p);
    if (st) return cmf__model_fail(model, st);
    cmf_sched *s = calloc(1, sizeof *s);
    if (!s) return cmf__model_fail(model, cmf__error(CMF_ERR_NOMEM, "scheduler: out of memory"));
    s->model = model;
    s->p = p;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->err_mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if ((st = make_session(s, &s->sess))) goto fail;
    s->n_ctx = cmf_session_n_ctx(s->sess);
    const cmf__engine *e = s->sess->e;
    s->paged = e->kv_paged;
    s->share = e->kv_share;
    s->block = e->kv_paged ? e->kv.block : 1;
    if ((st = configure(s))) goto fail;
    const size_t np = (size_t)p.n_parallel, V = (size_t)model->m->arch.vocab_size;
    const size_t step_max = (size_t)p.batch_tokens + np;
    s->q_cap = (size_t)p.queue_max + np + 64; /* requests taken and put back never find it full */
    s->queue = malloc(s->q_cap * sizeof *s->queue);
    s->slots = calloc(np, sizeof *s->slots);
    s->running = calloc(np, sizeof *s->running);
    s->b_tok = malloc(step_max * sizeof *s->b_tok);
    s->b_seq = malloc(step_max * sizeof *s->b_seq);
    s->b_want = malloc(step_max * sizeof *s->b_want);
    s->b_rq = malloc(np * sizeof *s->b_rq);
    s->logits = malloc(np * V * sizeof *s->logits);
    s->keys = malloc(((size_t)s->n_ctx / (size_t)s->block + 2) * sizeof *s->keys);
    if (!s->keys || !s->queue || !s->slots || !s->running || !s->b_tok || !s->b_seq || !s->b_want || !s->b_rq || !s->logits) {
        st = cmf__error(CMF_ERR_NOMEM, "scheduler: out of memory for %d sequences", p.n_parallel);
        goto fail;
    }
    for (size_t i = 0; i < np; i++)
        if (!(s->slots[i].hist = malloc((size_t)s->n_ctx * sizeof(int32_t)))) {
            st = cmf__error(CMF_ERR_NOMEM, "scheduler: out of memory for the token history of %lld positions",
                            (long long)s->n_ctx);
            goto fail;
        }
    const char *def = cmf_session_skill(s->sess);
    s->default_skill = def ? cmf__sched_skill_record(model, def) : -1;
    if (pthread_create(&s->thread, NULL, cmf__sched_main, s)) {
        st = cmf__error(CMF_ERR_INTERNAL, "scheduler: cannot start its thread");
        goto fail;
    }
    *out = s;
    return CMF_OK;
fail:
    cmf__sched_release(s);
    return cmf__model_fail(model, st);
}

void cmf_sched_free(cmf_sched *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    cmf__sched_release(s);
}

void cmf__sched_release(cmf_sched *s)
{
    if (s->slots)
        for (int i = 0; i < s->p.n_parallel; i++) {
            free(s->slots[i].hist);
            free(s->slots[i].skill);
        }
    free(s->slots);
    free(s->running);
    free(s->queue);
    free(s->b_tok);
    free(s->b_seq);
    free(s->b_want);
    free(s->b_rq);
    free(s->logits);
    free(s->keys);
    cmf_session_free(s->sess);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->err_mu);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int32_t cmf__sched_skill_record(const cmf_model *model, const char *id)
{
    const int32_t n = cmf_model_n_skills(model);
    for (int32_t i = 0; id && i < n; i++) {
        const char *r = cmf_model_skill_id(model, i);
        if (r && !strcmp(r, id)) return i;
    }
    return -1;
}
