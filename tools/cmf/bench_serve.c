/* bench_serve.c — `cmf bench FILE --requests N --parallel P`: a serving
 * workload through the scheduler (cmf_sched). N requests of random prompt
 * tokens, lengths drawn evenly from [prompt_min, prompt_max], each
 * generating n_gen tokens (eos ignored), all submitted at once; reports the
 * aggregate generated tokens/s over the wall time, time to first token and
 * inter-token latency (p50 / p99 over every request / every gap). Timing
 * only; results go to stdout. */
#include "bench_serve.h"
#include "cli.h"

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

typedef struct stamp {
    double *t;   /* [n_gen] when each token arrived */
    int n, cap;
} stamp;

static int on_token(void *user, const cmf_token_info *ti)
{
    stamp *s = user;
    if (ti->id >= 0 && s->n < s->cap) s->t[s->n++] = now_ms();
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, size_t n, double q)
{
    if (!n) return 0;
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

int bench_serve(cmf_model *m, const bench_serve_opts *o)
{
    cmf_sched_params sp = cmf_sched_params_default();
    sp.n_parallel = o->parallel;
    sp.batch_tokens = o->batch_tokens;
    sp.kv_type = o->kv_type;
    sp.device = o->device;
    sp.n_threads = o->threads;
    sp.n_ctx = o->prompt_max + o->n_gen + 1;
    sp.queue_max = o->requests;
    cmf_sched *sc = NULL;
    if (cmf_sched_new(m, &sp, &sc)) return cli_fail("bench", "%s", cmf_model_errmsg(m)), 1;
    const size_t n = (size_t)o->requests;
    const int32_t V = cmf_model_n_vocab(m);
    int32_t **prompts = calloc(n, sizeof *prompts);
    size_t *lens = calloc(n, sizeof *lens);
    stamp *st = calloc(n, sizeof *st);
    cmf_request **rq = calloc(n, sizeof *rq);
    double *ttft = calloc(n, sizeof *ttft), *itl = calloc(n * (size_t)o->n_gen + 1, sizeof *itl);
    int rc = 0;
    if (!prompts || !lens || !st || !rq || !ttft || !itl) rc = cli_fail("bench", "out of memory");
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n && !rc; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        lens[i] = (size_t)o->prompt_min + (size_t)(x % (uint64_t)(o->prompt_max - o->prompt_min + 1));
        prompts[i] = malloc(lens[i] * sizeof **prompts);
        st[i].t = malloc((size_t)o->n_gen * sizeof *st[i].t);
        st[i].cap = o->n_gen;
        if (!prompts[i] || !st[i].t) rc = cli_fail("bench", "out of memory");
        for (size_t k = 0; !rc && k < lens[i]; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            prompts[i][k] = (int32_t)(x % (uint64_t)V);
        }
    }
    double t0 = now_ms();
    for (size_t i = 0; i < n && !rc; i++) {
        cmf_request_params rp = cmf_request_params_default();
        rp.prompt = prompts[i];
        rp.n_prompt = lens[i];
        rp.gen.sampling.temperature = 0;
        rp.gen.max_tokens = o->n_gen;
        rp.gen.ignore_eos = true;
        rp.gen.on_token = on_token;
        rp.gen.user = &st[i];
        if (cmf_sched_submit(sc, &rp, &rq[i])) rc = cli_fail("bench", "request %zu: %s", i, cmf_last_error());
    }
    size_t n_itl = 0;
    long long gen = 0, prompt_tok = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rq[i]) continue;
        cmf_request_result r;
        if (cmf_request_wait(rq[i], &r) && !rc) rc = cli_fail("bench", "request %zu: %s", i, cmf_request_errmsg(rq[i]));
        ttft[i] = r.ttft_ms;
        gen += r.gen.n_gen;
        prompt_tok += (long long)lens[i];
        for (int k = 1; k < st[i].n; k++) itl[n_itl++] = st[i].t[k] - st[i].t[k - 1];
    }
    double wall = now_ms() - t0;
    cmf_sched_stats ss;
    cmf_sched_stats_get(sc, &ss);
    if (!rc) {
        printf("| %8s | %8s | %12s | %10s | %10s | %10s | %10s | %10s | %8s |\n", "requests", "parallel", "gen tok/s",
               "prompt t/s", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "graphs");
        printf("| %8d | %8d | %12.1f | %10.1f | %8.1f ms | %8.1f ms | %8.2f ms | %8.2f ms | %7.0f%% |\n", o->requests,
               o->parallel, (double)gen * 1e3 / wall, (double)prompt_tok * 1e3 / wall, pct(ttft, n, 0.5),
               pct(ttft, n, 0.99), pct(itl, n_itl, 0.5), pct(itl, n_itl, 0.99),
               ss.graph_hits + ss.graph_misses ? 100.0 * (double)ss.graph_hits / (double)(ss.graph_hits + ss.graph_misses) : 0);
        printf("prompts %d..%d tokens, %d generated each, batch_tokens %d, %llu steps in %.2f s; device: %s\n",
               o->prompt_min, o->prompt_max, o->n_gen, o->batch_tokens, (unsigned long long)ss.steps, wall / 1e3,
               cmf_sched_device(sc));
    }
    for (size_t i = 0; i < n; i++) {
        cmf_request_free(rq ? rq[i] : NULL);
        if (prompts) free(prompts[i]);
        if (st) free(st[i].t);
    }
    free(prompts);
    free(lens);
    free(st);
    free(rq);
    free(ttft);
    free(itl);
    cmf_sched_free(sc);
    return rc;
}
