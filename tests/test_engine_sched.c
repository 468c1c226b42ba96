/* test_engine_sched.c — the serving scheduler against each request alone:
 * 1, 8 and 32 concurrent requests (different prompts, lengths, greedy and
 * seeded sampling, stop strings, limits, submitted from several threads)
 * give byte-identical token streams and texts to cmf_session_generate on
 * a fresh session; prefix reuse computes only the suffix and gives the
 * cold run's logprobs; cancel while queued, mid-prefill and mid-decode
 * frees the slot and leaves the others unaffected; a full queue is
 * ERR_BUSY; freeing the scheduler ends what is pending. Runs on the demo
 * model (models/shakespeare), converted by the built cmf; then the same on
 * the Vulkan device where there is one (lavapipe in CI). */
#include "harness.h"
#include "cmf.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static cmf_model *g_model;
static cmf_kv_type g_kv = CMF_KV_F32;
static cmf_device g_device = CMF_DEVICE_CPU; /* where sessions and schedulers compute */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

#define MAX_GEN 48

/* What one request produced. */
typedef struct run {
    int32_t ids[MAX_GEN + 1];
    float lp[MAX_GEN + 1];
    int n;
    char text[4096];
    size_t text_len;
    cmf_finish finish;
    int n_reused;
} run;

static int collect(void *user, const cmf_token_info *t)
{
    run *r = user;
    if (t->id >= 0 && r->n <= MAX_GEN) {
        r->ids[r->n] = t->id;
        r->lp[r->n++] = t->logprob;
    }
    if (r->text_len + t->text_len < sizeof r->text) {
        memcpy(r->text + r->text_len, t->text, t->text_len);
        r->text_len += t->text_len;
        r->text[r->text_len] = 0;
    }
    return 0;
}

/* Case i: its prompt (tokens of a text), sampling and limits. */
typedef struct req_case {
    int32_t prompt[256];
    size_t n_prompt;
    cmf_generate_params gp;
} req_case;

static const char *const STOPS[] = {"\n\n", "the"};
static const char *const TEXTS[] = {"ROMEO:\n", "JULIET:\nO Romeo, Romeo! wherefore art thou",
                                    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\n",
                                    "KING RICHARD III:\nNow is the winter of our discontent", "MENENIUS:\nWhat work's, my countrymen,"};

static void make_case(int i, req_case *c)
{
    const char *text = TEXTS[i % 5];
    size_t n = 0;
    CHECK_OK(cmf_model_tokenize(g_model, text, strlen(text), false, c->prompt, 200, &n));
    for (int k = 0; k < i / 5 && n < 250; k++, n++) c->prompt[n] = c->prompt[(size_t)k % n]; /* longer variants */
    c->n_prompt = n;
    c->gp = cmf_generate_params_default();
    c->gp.max_tokens = 8 + (i * 7) % 40;
    c->gp.n_logprobs = i % 3 == 0 ? 2 : 0;
    if (i % 2 == 0) {
        c->gp.sampling.temperature = 0; /* greedy */
    } else {
        c->gp.sampling.temperature = 0.9f;
        c->gp.sampling.seed = 1000 + (uint64_t)i;
        c->gp.sampling.top_k = i % 4 == 1 ? 0 : 20;
        c->gp.sampling.repeat_penalty = i % 3 ? 1.1f : 1.0f;
    }
    if (i % 4 == 3) {
        c->gp.stop = STOPS;
        c->gp.n_stop = 2;
    }
}

static cmf_session *new_session(int n_ctx)
{
    cmf_session_params sp = cmf_session_params_default();
    sp.n_ctx = n_ctx;
    sp.kv_type = g_kv;
    sp.device = g_device;
    cmf_session *s = NULL;
    CHECK_OK(cmf_session_new(g_model, &sp, &s));
    return s;
}

static void run_alone(const req_case *c, run *out)
{
    memset(out, 0, sizeof *out);
    cmf_session *s = new_session(512);
    if (!s) return;
    cmf_generate_params gp = c->gp;
    gp.on_token = collect;
    gp.user = out;
    cmf_generate_result r;
    CHECK_OK(cmf_session_generate(s, c->prompt, c->n_prompt, &gp, &r));
    out->finish = r.finish;
    cmf_session_free(s);
}

static cmf_sched *new_sched(int n_parallel, int batch_tokens, int queue_max)
{
    cmf_sched_params p = cmf_sched_params_default();
    p.n_parallel = n_parallel;
    p.batch_tokens = batch_tokens;
    p.queue_max = queue_max;
    p.kv_type = g_kv;
    p.device = g_device;
    p.n_ctx = 512;
    cmf_sched *s = NULL;
    CHECK_OK(cmf_sched_new(g_model, &p, &s));
    return s;
}

static cmf_request *submit(cmf_sched *s, const req_case *c, run *out)
{
    memset(out, 0, sizeof *out);
    cmf_request_params rp = cmf_request_params_default();
    rp.prompt = c->prompt;
    rp.n_prompt = c->n_prompt;
    rp.gen = c->gp;
    rp.gen.on_token = collect;
    rp.gen.user = out;
    cmf_request *rq = NULL;
    CHECK_OK(cmf_sched_submit(s, &rp, &rq));
    return rq;
}

static void check_same(const run *alone, const run *got, int i)
{
    CHECK(alone->n > 0 || alone->finish != CMF_FINISH_LENGTH);
    if (alone->n != got->n || memcmp(alone->ids, got->ids, (size_t)alone->n * sizeof *alone->ids) ||
        alone->text_len != got->text_len || memcmp(alone->text, got->text, alone->text_len) ||
        alone->finish != got->finish) {
        fprintf(stderr, "request %d: alone %d tokens (%s) \"%.60s\", scheduled %d tokens (%s) \"%.60s\"\n", i,
                alone->n, cmf_finish_name(alone->finish), alone->text, got->n, cmf_finish_name(got->finish), got->text);
        CHECK(!"scheduled stream differs from the request alone");
    }
    for (int k = 0; k < alone->n && k < got->n; k++)
        if (!isfinite(got->lp[k]) || fabsf(alone->lp[k] - got->lp[k]) > (g_kv == CMF_KV_F32 ? 1e-4f : 2e-3f)) { /* summation order (f16 cache: its rounding too) */
            fprintf(stderr, "request %d token %d: logprob %g alone, %g scheduled\n", i, k, (double)alone->lp[k],
                    (double)got->lp[k]);
            CHECK(!"logprob differs");
            break;
        }
}

/* n requests at once through a scheduler of n_parallel slots. */
static void concurrent(int n, int n_parallel, int batch_tokens)
{
    req_case *c = calloc((size_t)n, sizeof *c);
    run *alone = calloc((size_t)n, sizeof *alone), *got = calloc((size_t)n, sizeof *got);
    cmf_request **rq = calloc((size_t)n, sizeof *rq);
    for (int i = 0; i < n; i++) {
        make_case(i, &c[i]);
        run_alone(&c[i], &alone[i]);
    }
    cmf_sched *s = new_sched(n_parallel, batch_tokens, 256);
    for (int i = 0; s && i < n; i++) rq[i] = submit(s, &c[i], &got[i]);
    for (int i = 0; s && i < n; i++) {
        cmf_request_result r;
        CHECK_OK(cmf_request_wait(rq[i], &r));
        got[i].finish = r.gen.finish;
        CHECK_EQ_INT(r.gen.n_gen, got[i].n);
        check_same(&alone[i], &got[i], i);
        cmf_request_free(rq[i]);
    }
    if (s) {
        cmf_sched_stats st;
        cmf_sched_stats_get(s, &st);
        CHECK_EQ_INT(st.running, 0);
        CHECK_EQ_INT(st.waiting, 0);
        CHECK_EQ_INT(st.kv_used, 0);
        CHECK_EQ_U64(st.requests_done, (uint64_t)n);
        CHECK(st.steps > 0);
    }
    cmf_sched_free(s);
    free(c);
    free(alone);
    free(got);
    free(rq);
}

TEST(one_request) { concurrent(1, 4, 256); }
TEST(eight_requests) { concurrent(8, 8, 64); }
TEST(thirty_two_requests_four_slots) { concurrent(32, 4, 32); }
TEST(thirty_two_requests_thirty_two_slots) { concurrent(32, 32, 128); }
/* more decoding sequences than the 64 logit rows a chunk once held: one weight pass still */
TEST(seventy_two_slots) { concurrent(72, 72, 128); }

/* Submitting threads: each submits and waits for its own requests. */
typedef struct sub_arg {
    cmf_sched *s;
    int first, n;
    req_case *c;
    run *alone;
} sub_arg;

static void *submitter(void *arg)
{
    sub_arg *a = arg;
    for (int i = a->first; i < a->first + a->n; i++) {
        run got;
        cmf_request *rq = submit(a->s, &a->c[i], &got);
        if (!rq) continue;
        cmf_request_result r;
        CHECK_OK(cmf_request_wait(rq, &r));
        got.finish = r.gen.finish;
        check_same(&a->alone[i], &got, i);
        cmf_request_free(rq);
    }
    return NULL;
}

TEST(threads_submit)
{
    enum { N = 16, T = 4 };
    req_case c[N];
    run alone[N];
    for (int i = 0; i < N; i++) {
        make_case(i, &c[i]);
        run_alone(&c[i], &alone[i]);
    }
    cmf_sched *s = new_sched(3, 48, 64);
    if (!s) return;
    pthread_t th[T];
    sub_arg a[T];
    for (int t = 0; t < T; t++) {
        a[t] = (sub_arg){s, t * (N / T), N / T, c, alone};
        CHECK(pthread_create(&th[t], NULL, submitter, &a[t]) == 0);
    }
    for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
    cmf_sched_free(s);
}

/* Positions a KV block holds (the scheduler's: CMF_KV_BLOCK or 16). */
static int kv_block(void)
{
    const char *b = getenv("CMF_KV_BLOCK");
    return b && atoi(b) > 0 ? atoi(b) : 16;
}

/* A second request sharing a long prefix computes only the rest (the
 * prefix's whole blocks come from the cache, from another slot: the first
 * request's blocks outlive it), and its tokens and logprobs are the cold
 * run's. */
TEST(prefix_reuse)
{
    req_case a, b;
    make_case(12, &a); /* its sampling; a prompt of several blocks */
    const char *longer = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
                         "KING RICHARD III:\nNow is the winter of our discontent\nMENENIUS:\nWhat work's, my countrymen,";
    CHECK_OK(cmf_model_tokenize(g_model, longer, strlen(longer), false, a.prompt, 200, &a.n_prompt));
    b = a;
    const char *more = " And then";
    size_t n = 0;
    CHECK_OK(cmf_model_tokenize(g_model, more, strlen(more), false, b.prompt + a.n_prompt, 40, &n));
    b.n_prompt = a.n_prompt + n;
    a.gp.n_logprobs = b.gp.n_logprobs = 3;
    run cold;
    run_alone(&b, &cold);
    cmf_sched *s = new_sched(2, 64, 8);
    if (!s) return;
    run ra, rb;
    cmf_request *rq = submit(s, &a, &ra);
    cmf_request_result r;
    CHECK_OK(cmf_request_wait(rq, &r));
    CHECK_EQ_INT(r.gen.n_reused, 0);
    cmf_request_free(rq);
    rq = submit(s, &b, &rb);
    CHECK_OK(cmf_request_wait(rq, &r));
    rb.finish = r.gen.finish;
    const int blk = kv_block();
    CHECK(a.n_prompt >= 3 * (size_t)blk); /* at least three whole blocks shared */
    CHECK_EQ_INT(r.gen.n_reused, (int)a.n_prompt / blk * blk);
    CHECK_EQ_INT(r.gen.n_prompt + r.gen.n_reused, (int)b.n_prompt);
    CHECK(r.gen.n_prompt < (int)n + blk + 1);
    check_same(&cold, &rb, 0);
    cmf_request_free(rq);
    cmf_sched_stats st;
    cmf_sched_stats_get(s, &st);
    CHECK_EQ_U64(st.prefix_queries, 2);
    CHECK_EQ_U64(st.prefix_hits, 1);
    CHECK_EQ_U64(st.prompt_tokens - st.prompt_computed, (uint64_t)r.gen.n_reused);
    cmf_sched_free(s);
}

/* More requests than the cache's blocks hold: 8 at once over a cache of
 * 2.5 whole contexts. The newest are preempted and recomputed; every one
 * completes exactly as alone, and the cache ends empty. */
TEST(kv_exhaustion)
{
    enum { N = 8, CTX = 128 };
    req_case c[N];
    run alone[N], got[N];
    for (int i = 0; i < N; i++) {
        make_case(i, &c[i]);
        c[i].gp.max_tokens = MAX_GEN;
        c[i].gp.n_stop = 0;
        c[i].gp.ignore_eos = true;
        CHECK(c[i].n_prompt + MAX_GEN <= CTX);
        run_alone(&c[i], &alone[i]);
    }
    cmf_session *probe = new_session(16);
    if (!probe) return;
    const int64_t per_tok = cmf_session_kv_bytes_per_token(probe);
    cmf_session_free(probe);
    cmf_sched_params p = cmf_sched_params_default();
    p.n_parallel = N;
    p.batch_tokens = 64;
    p.kv_type = g_kv;
    p.device = g_device;
    p.n_ctx = CTX;
    p.kv_budget = per_tok * CTX * 5 / 2;
    cmf_sched *s = NULL;
    CHECK_OK(cmf_sched_new(g_model, &p, &s));
    if (!s) return;
    cmf_request *rq[N];
    for (int i = 0; i < N; i++) rq[i] = submit(s, &c[i], &got[i]);
    for (int i = 0; i < N; i++) {
        cmf_request_result r;
        CHECK_OK(cmf_request_wait(rq[i], &r));
        got[i].finish = r.gen.finish;
        CHECK_EQ_INT(r.gen.n_gen, MAX_GEN);
        check_same(&alone[i], &got[i], i);
        cmf_request_free(rq[i]);
    }
    cmf_sched_stats st;
    cmf_sched_stats_get(s, &st);
    fprintf(stderr, "kv_exhaustion: %llu preemptions, %lld positions in the cache\n", (unsigned long long)st.preemptions,
            (long long)st.kv_total);
    CHECK(st.preemptions > 0);
    CHECK(st.kv_total < 3 * CTX && st.kv_total >= 2 * CTX);
    CHECK_EQ_INT(st.kv_used, 0);
    CHECK_EQ_INT(st.running, 0);
    /* a budget that holds less than one context is refused, naming it */
    cmf_sched *bad = NULL;
    p.kv_budget = per_tok * CTX / 2;
    CHECK(cmf_sched_new(g_model, &p, &bad) == CMF_ERR_ARG);
    CHECK(strstr(cmf_last_error(), "KV budget") != NULL);
    cmf_sched_free(s);
}

/* A callback that cancels its own request after k tokens (mid-decode).
 * The handle is stored by the submitting thread once submit returns, while
 * the scheduler's thread may already be generating: it waits for it. */
typedef struct cancel_at {
    run r;
    _Atomic(cmf_request *) rq;
    int k;
} cancel_at;

static int cancel_after(void *user, const cmf_token_info *t)
{
    cancel_at *c = user;
    collect(&c->r, t);
    if (c->r.n == c->k) {
        cmf_request *rq;
        while (!(rq = atomic_load(&c->rq))) sched_yield();
        cmf_request_cancel(rq);
    }
    return 0;
}

TEST(cancel_anywhere)
{
    enum { N = 6 };
    req_case c[N];
    run alone[N], got[N];
    for (int i = 0; i < N; i++) {
        make_case(i * 2, &c[i]); /* greedy ones */
        c[i].gp.max_tokens = 40;
        c[i].gp.n_stop = 0;
        run_alone(&c[i], &alone[i]);
    }
    /* one slot busy with a long prompt read in small chunks: the others wait in the queue */
    cmf_sched *s = new_sched(2, 4, 16);
    if (!s) return;
    cmf_request *rq[N];
    for (int i = 0; i < N; i++) rq[i] = submit(s, &c[i], &got[i]);
    cmf_request_cancel(rq[5]); /* queued (two slots, six requests) */
    cancel_at mid = {.k = 3};
    req_case d;
    make_case(24, &d);
    d.gp.max_tokens = 40;
    cmf_request_params rp = cmf_request_params_default();
    rp.prompt = d.prompt;
    rp.n_prompt = d.n_prompt;
    rp.gen = d.gp;
    rp.gen.on_token = cancel_after;
    rp.gen.user = &mid;
    cmf_request *rm = NULL;
    CHECK_OK(cmf_sched_submit(s, &rp, &rm));
    atomic_store(&mid.rq, rm);
    cmf_request_result r;
    CHECK_OK(cmf_request_wait(rq[5], &r));
    CHECK_EQ_INT(r.gen.finish, CMF_FINISH_CANCELLED);
    CHECK_EQ_INT(r.gen.n_gen, 0);
    CHECK_OK(cmf_request_wait(rm, &r));
    CHECK_EQ_INT(r.gen.finish, CMF_FINISH_CANCELLED);
    CHECK_EQ_INT(r.gen.n_gen, 3);
    for (int i = 0; i < 5; i++) {
        CHECK_OK(cmf_request_wait(rq[i], &r));
        got[i].finish = r.gen.finish;
        check_same(&alone[i], &got[i], i);
    }
    /* mid-prefill: a long prompt in chunks of 4, cancelled at once */
    req_case e;
    make_case(29, &e);
    run re;
    cmf_request *rp2 = submit(s, &e, &re);
    usleep(2000);
    cmf_request_cancel(rp2);
    CHECK_OK(cmf_request_wait(rp2, &r));
    CHECK_EQ_INT(r.gen.finish, CMF_FINISH_CANCELLED);
    CHECK(r.gen.n_gen < e.gp.max_tokens);
    cmf_sched_stats st;
    cmf_sched_stats_get(s, &st);
    CHECK_EQ_INT(st.running, 0);
    CHECK_EQ_INT(st.kv_used, 0);
    for (int i = 0; i < N; i++) cmf_request_free(rq[i]);
    cmf_request_free(rm);
    cmf_request_free(rp2);
    /* the slots serve again as before */
    run again;
    cmf_request *ra = submit(s, &c[0], &again);
    CHECK_OK(cmf_request_wait(ra, &r));
    again.finish = r.gen.finish;
    check_same(&alone[0], &again, 0);
    cmf_request_free(ra);
    cmf_sched_free(s);
}

/* on_done sees the result through cmf_request_wait. */
static cmf_finish g_done_finish;
static int g_done_calls;
static void on_done(void *user, cmf_request *rq)
{
    (void)user;
    cmf_request_result r;
    CHECK_OK(cmf_request_wait(rq, &r));
    g_done_finish = r.gen.finish;
    g_done_calls++;
}

/* Tokens through cmf_request_poll (no callback) equal the callback's. */
TEST(poll_tokens)
{
    req_case c;
    make_case(3, &c);
    run alone, got;
    run_alone(&c, &alone);
    memset(&got, 0, sizeof got);
    cmf_sched *s = new_sched(2, 64, 8);
    if (!s) return;
    cmf_request_params rp = cmf_request_params_default();
    rp.prompt = c.prompt;
    rp.n_prompt = c.n_prompt;
    rp.gen = c.gp;
    rp.on_done = on_done;
    cmf_request *rq = NULL;
    CHECK_OK(cmf_sched_submit(s, &rp, &rq));
    cmf_token_info t;
    int k, guard = 0;
    while ((k = cmf_request_poll(rq, 1000, &t)) >= 0 && guard++ < 1000)
        if (k == 1) collect(&got, &t);
    CHECK_EQ_INT(k, -1);
    cmf_request_result r;
    CHECK_OK(cmf_request_wait(rq, &r));
    got.finish = r.gen.finish;
    check_same(&alone, &got, 3);
    CHECK(r.ttft_ms > 0);
    cmf_request_free(rq);
    rq = NULL;
    CHECK_EQ_INT(g_done_calls, 1);
    CHECK_EQ_INT(g_done_finish, r.gen.finish);
    cmf_request_free(rq);
    cmf_sched_free(s);
}

TEST(errors_and_shutdown)
{
    cmf_sched *s = new_sched(1, 8, 2);
    if (!s) return;
    req_case c;
    make_case(20, &c);
    c.gp.max_tokens = 200;
    c.gp.sampling.temperature = 0;
    c.gp.ignore_eos = true;
    run r0, r1, r2;
    cmf_request *a = submit(s, &c, &r0), *b = submit(s, &c, &r1), *d = NULL;
    /* one runs, one or two wait: the third waiting one is refused */
    cmf_request_params rp = cmf_request_params_default();
    rp.prompt = c.prompt;
    rp.n_prompt = c.n_prompt;
    rp.gen = c.gp;
    cmf_request *x = NULL, *y = NULL;
    cmf_status st1 = cmf_sched_submit(s, &rp, &x);
    cmf_status st2 = cmf_sched_submit(s, &rp, &y);
    CHECK(st1 == CMF_ERR_BUSY || st2 == CMF_ERR_BUSY);
    (void)r2;
    int32_t bad = 1 << 30;
    rp.prompt = &bad;
    rp.n_prompt = 1;
    CHECK_ERR(cmf_sched_submit(s, &rp, &d), CMF_ERR_ARG, "out of range");
    CHECK(d == NULL);
    int32_t *lng = calloc(600, sizeof *lng);
    rp.prompt = lng;
    rp.n_prompt = 600;
    CHECK_ERR(cmf_sched_submit(s, &rp, &d), CMF_ERR_CONTEXT, "context");
    free(lng);
    rp.prompt = c.prompt;
    rp.n_prompt = c.n_prompt;
    rp.skill = "no-such-skill";
    CHECK_ERR(cmf_sched_submit(s, &rp, &d), CMF_ERR_NOT_FOUND, "no-such-skill");
    rp.skill = NULL;
    rp.gen.n_logprobs = 21;
    CHECK_ERR(cmf_sched_submit(s, &rp, &d), CMF_ERR_ARG, "n_logprobs");
    cmf_sched_free(s); /* ends what runs and what waits */
    cmf_request_result r;
    CHECK_OK(cmf_request_wait(a, &r));
    CHECK_EQ_INT(r.gen.finish, CMF_FINISH_CANCELLED);
    CHECK_OK(cmf_request_wait(b, &r));
    CHECK_EQ_INT(r.gen.finish, CMF_FINISH_CANCELLED);
    cmf_request_free(a);
    cmf_request_free(b);
    cmf_request_free(x);
    cmf_request_free(y);
}

int main(void)
{
    const char *bin = getenv("CMF_BIN"), *src = getenv("CMF_SOURCE_DIR");
    if (!bin || !src) {
        harness_skip("CMF_BIN / CMF_SOURCE_DIR not set (run through ctest)");
        return harness_done();
    }
    char out[1024], cmd[4096];
    snprintf(out, sizeof out, "%s/shk-f32.cmf", harness_tmpdir());
    snprintf(cmd, sizeof cmd, "'%s' convert --quiet --quant f32 --model '%s/models/shakespeare' --output '%s'", bin, src,
             out);
    CHECK_EQ_INT(system(cmd), 0);
    CHECK_OK(cmf_model_open(out, NULL, &g_model));
    if (!g_model) return harness_done();
    RUN(one_request);
    RUN(eight_requests);
    RUN(thirty_two_requests_four_slots);
    RUN(thirty_two_requests_thirty_two_slots);
    RUN(seventy_two_slots);
    RUN(threads_submit);
    RUN(prefix_reuse);
    RUN(kv_exhaustion);
    RUN(cancel_anywhere);
    RUN(poll_tokens);
    RUN(errors_and_shutdown);
    g_kv = CMF_KV_F16; /* the default cache type: the same holds */
    RUN(eight_requests);
    RUN(prefix_reuse);
    RUN(kv_exhaustion);
    /* on the Vulkan device (lavapipe in CI: slow, so two cases), each
     * request against itself alone on that device */
#ifdef UNDER_TSAN
    fprintf(stderr, "*** ThreadSanitizer build: the scheduler's GPU runs SKIPPED (the CPU runs above cover the threads) ***\n");
#else
    cmf_session_params sp = cmf_session_params_default();
    sp.device = CMF_DEVICE_GPU;
    sp.n_ctx = 64;
    cmf_session *probe = NULL;
    if (cmf_session_new(g_model, &sp, &probe) == CMF_OK) {
        cmf_session_free(probe);
        g_device = CMF_DEVICE_GPU;
        g_kv = CMF_KV_F32;
        RUN(eight_requests);
        g_kv = CMF_KV_F16;
        RUN(prefix_reuse);
    } else {
        fprintf(stderr, "*** no Vulkan device (%s): the scheduler's GPU runs SKIPPED ***\n", cmf_last_error());
    }
#endif
    cmf_model_free(g_model);
    return harness_done();
}
