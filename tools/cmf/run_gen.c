/* run_gen.c — run_gen.h: each answer a request whose tokens are polled
 * on the main thread, so output, the routing line and Ctrl-C stay there;
 * the scheduler's threads start with SIGINT blocked, so the handler runs
 * where the request it cancels lives. The session path: blend, fallback. */
#include "run_gen.h"
#include "cli.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct run_gen {
    const char *cmd, *path, *task;
    const runopt_session *so;
    cmf_model *model;
    cmf_sched *sched;     /* the path of every answer ... */
    cmf_session *session; /* ... but a blend's (--skill auto --blend T) */
    float blend;
    bool quiet;
    bool skill_set;       /* /skill chose the requests' skill */
    char *skill;          /* that skill: its id, "" = the backbone alone */
    char err[512];
};

/* What SIGINT stops: the request being answered, else the session's
 * generation; neither: Ctrl-C at the prompt ends the program. */
static cmf_request *volatile g_request;
static cmf_session *volatile g_session;

static void on_sigint(int sig)
{
    cmf_request *rq = g_request;
    cmf_session *s = g_session;
    if (rq) {
        cmf_request_cancel(rq); /* an atomic store: stops the answer, the chat goes on */
    } else if (s) {
        cmf_session_cancel(s);
    } else {
        signal(sig, SIG_DFL);
        raise(sig);
    }
}

/* The --lora values as the scheduler's paths and scales; false (printed)
 * when out of memory. paths[i] are malloc'd. */
static bool lora_lists(const char *cmd, const opt_list *l, char **paths, float *scales)
{
    for (size_t i = 0; l && i < l->n; i++)
        if (!(paths[i] = runopt_lora_split(l->v[i], &scales[i]))) return cli_fail(cmd, "out of memory"), false;
    return true;
}

/* The message of a failed scheduler creation, naming the --lora value
 * whose file it names (as the session's --lora errors always did). */
static void say_open_error(const char *cmd, const opt_list *l, char *const *paths, const char *msg)
{
    for (size_t i = 0; l && i < l->n; i++)
        if (paths[i] && strstr(msg, paths[i])) {
            cli_fail(cmd, "--lora %s: %s", l->v[i], msg);
            return;
        }
    cli_fail(cmd, "%s", msg);
}

/* The scheduler of one slot over model m: --ctx (default the model's
 * context, as a session's), --batch as its step's tokens. */
static bool open_sched(const char *cmd, const run_gen_opts *o, const cmf_session_params *sp, const char *task,
                       run_gen *g)
{
    const runopt_session *so = o->so;
    cmf_sched_params p = cmf_sched_params_default();
    p.n_parallel = 1;
    p.queue_max = 1;
    p.n_ctx = so->n_ctx > 0 ? (int32_t)so->n_ctx : cmf_model_n_ctx_train(g->model);
    if (so->n_batch > 0) p.batch_tokens = so->n_batch < 65536 ? (int32_t)so->n_batch : 65536; /* the scheduler's most */
    p.n_threads = (int32_t)so->n_threads;
    p.kv_type = sp->kv_type;
    p.device = sp->device;
    p.task = task;
    char *paths[8] = {0};
    float scales[8];
    size_t n_lora = so->lora ? so->lora->n : 0;
    bool ok = n_lora <= 8 && lora_lists(cmd, so->lora, paths, scales);
    p.lora = (const char *const *)paths;
    p.lora_scale = scales;
    p.n_lora = (int32_t)n_lora;
    if (ok) {
        /* the scheduler's and the thread pool's threads inherit the mask: SIGINT stays on this thread */
        sigset_t block, was;
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        pthread_sigmask(SIG_BLOCK, &block, &was);
        cmf_status st = cmf_sched_new(g->model, &p, &g->sched);
        pthread_sigmask(SIG_SETMASK, &was, NULL);
        if (st) say_open_error(cmd, so->lora, paths, cmf_model_errmsg(g->model));
        ok = !st;
    }
    for (size_t i = 0; i < 8; i++) free(paths[i]);
    return ok;
}

bool run_gen_open(const char *cmd, const run_gen_opts *o, cmf_model **model, run_gen **out)
{
    *model = NULL;
    *out = NULL;
    run_gen *g = calloc(1, sizeof *g);
    if (!g) return cli_fail(cmd, "out of memory"), false;
    g->cmd = cmd;
    g->path = o->path;
    g->task = o->task;
    g->so = o->so;
    g->blend = o->blend;
    g->quiet = o->quiet;
    if (o->blend > 0) { /* a blend runs on a session: see run_gen.h */
        if (!runopt_open(cmd, o->path, o->skill, o->task, o->so, &g->model, &g->session)) goto fail;
    } else {
        cmf_session_params sp;
        if (!runopt_check(cmd, o->so, &sp)) goto fail;
        cmf_model_params mp = cmf_model_params_default();
        mp.skill = o->skill;
        cmf_status st = cmf_model_open(o->path, &mp, &g->model);
        if (st) {
            cli_fail_status(cmd, st);
            goto fail;
        }
        const char *task = o->task ? runopt_task(cmd, o->path, g->model, o->task) : NULL;
        if ((o->task && !task) || !open_sched(cmd, o, &sp, task, g)) goto fail;
    }
    signal(SIGINT, on_sigint);
    *model = g->model;
    *out = g;
    return true;
fail:
    run_gen_free(g);
    return false;
}

void run_gen_free(run_gen *g)
{
    if (!g) return;
    cmf_sched_free(g->sched);
    cmf_session_free(g->session);
    cmf_model_free(g->model);
    free(g->skill);
    free(g);
}

int32_t run_gen_n_ctx(const run_gen *g)
{
    return g->sched ? cmf_sched_n_ctx(g->sched) : g->session ? cmf_session_n_ctx(g->session) : 0;
}

const char *run_gen_set_skill(run_gen *g, const char *id)
{
    if (g->session) {
        if (!cmf_session_set_skill(g->session, id)) return NULL;
        snprintf(g->err, sizeof g->err, "%s", cmf_session_errmsg(g->session));
        return g->err;
    }
    /* the ids of the file's skills registry; the scheduler binds the skill at the next answer */
    bool known = !id;
    for (int32_t i = 0; id && !known && i < cmf_model_n_skills(g->model); i++) {
        const char *r = cmf_model_skill_id(g->model, i);
        known = r && !strcmp(r, id);
    }
    if (!known) {
        snprintf(g->err, sizeof g->err, "%s: skill '%s' not in this file", g->path, id);
        return g->err;
    }
    char *dup = strdup(id ? id : "");
    if (!dup) return "out of memory";
    free(g->skill);
    g->skill = dup;
    g->skill_set = true;
    return NULL;
}

/* --skill auto's line from the request's routing scores; false when it
 * has none (yet). */
static bool say_route(run_gen *g, const cmf_request *rq)
{
    int32_t ns = cmf_model_n_skills(g->model), best = -1;
    double *E = malloc(((size_t)ns + 1) * sizeof *E);
    if (!E) return true; /* nothing to say it with: do not try again */
    size_t got = cmf_request_route_scores(rq, E, (size_t)ns);
    for (int32_t i = 0; i < (int32_t)got; i++) /* the scheduler's choice: the first smallest E */
        if (isfinite(E[i]) && (best < 0 || E[i] < E[best])) best = i;
    if (got && !g->quiet) runopt_route_say(g->cmd, g->model, E, best, 0);
    free(E);
    return got > 0;
}

static int session_answer(run_gen *g, const int32_t *prompt, size_t n, const cmf_generate_params *gp, bool autoroute,
                          bool quiet, cmf_generate_result *r)
{
    if (autoroute && !runopt_route(g->cmd, g->model, g->session, prompt, n, g->blend, quiet)) return 1;
    g_session = g->session;
    cmf_status st = cmf_session_generate(g->session, prompt, n, gp, r);
    g_session = NULL;
    if (st) return cli_fail(g->cmd, "%s", cmf_session_errmsg(g->session));
    return 0;
}

/* One answer as a request. *refused: the scheduler could not run the
 * request's skill beside the model's (a layer with per-session op state:
 * ERR_UNSUPPORTED before any token), nothing printed. */
static int sched_answer(run_gen *g, const int32_t *prompt, size_t n, const cmf_generate_params *gp, bool autoroute,
                        cmf_generate_result *r, bool *refused)
{
    cmf_request_params rp = cmf_request_params_default();
    rp.prompt = prompt;
    rp.n_prompt = n;
    rp.gen = *gp;
    rp.gen.on_token = NULL; /* tokens are polled here, on this thread */
    rp.gen.user = NULL;
    rp.skill = g->skill_set ? g->skill : NULL;
    rp.skill_auto = autoroute;
    cmf_request *rq;
    cmf_status st = cmf_sched_submit(g->sched, &rp, &rq);
    if (st) return cli_fail(g->cmd, "%s%s", autoroute && st == CMF_ERR_NOT_FOUND ? "--skill auto: " : "", cmf_last_error());
    g_request = rq;
    bool routed = !autoroute, stopped = false, any = false;
    cmf_token_info t;
    int k;
    while ((k = cmf_request_poll(rq, -1, &t)) >= 0) {
        if (!routed) routed = say_route(g, rq); /* routing precedes the first token */
        any |= k == 1;
        if (k == 1 && !stopped && gp->on_token && gp->on_token(gp->user, &t)) {
            stopped = true; /* the callback's stop: the rest is not shown */
            cmf_request_cancel(rq);
        }
    }
    if (!routed) routed = say_route(g, rq);
    cmf_request_result res;
    st = cmf_request_wait(rq, &res);
    g_request = NULL;
    *refused = st == CMF_ERR_UNSUPPORTED && !any && (g->skill_set || autoroute);
    if (st && !*refused) cli_fail(g->cmd, "%s%s", routed ? "" : "--skill auto: ", cmf_request_errmsg(rq));
    cmf_request_free(rq);
    if (st) return 1;
    *r = res.gen;
    if (stopped) r->finish = CMF_FINISH_CALLBACK;
    return 0;
}

/* From the scheduler to a session for the rest of the run, the skill
 * /skill chose kept; false (printed) when the session cannot be made. */
static bool to_session(run_gen *g)
{
    cmf_sched_free(g->sched); /* its cache first: the session allocates its own */
    g->sched = NULL;
    sigset_t block, was;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &was);
    bool ok = runopt_session_open(g->cmd, g->path, g->model, g->task, g->so, &g->session);
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    if (ok && g->skill_set && cmf_session_set_skill(g->session, *g->skill ? g->skill : NULL)) {
        cli_fail(g->cmd, "/skill: %s", cmf_session_errmsg(g->session));
        ok = false;
    }
    return ok;
}

int run_gen_answer(run_gen *g, const int32_t *prompt, size_t n, const cmf_generate_params *gp, bool autoroute,
                   cmf_generate_result *r)
{
    memset(r, 0, sizeof *r);
    if (g->session) return session_answer(g, prompt, n, gp, autoroute, g->quiet, r);
    bool refused = false;
    int rc = sched_answer(g, prompt, n, gp, autoroute, r, &refused);
    if (!refused) return rc;
    /* A skill that replaces a DeltaNet mixer or a Gemma-4 per-layer block
     * runs only as the whole session's skill: the answer, which has not
     * begun, is generated on a session (its routing line already said). */
    if (!to_session(g)) return 1;
    return session_answer(g, prompt, n, gp, autoroute, true, r);
}
