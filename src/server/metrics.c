/* metrics.c — /metrics in the Prometheus text format (0.0.4): the
 * server's own counters and latency histograms, and per model the
 * scheduler's snapshot (cmf_sched_stats_get). The three gauges load
 * balancers for LLMs read are cmf:num_requests_waiting,
 * cmf:num_requests_running and cmf:kv_cache_usage_perc (docs/SERVING.md). */
#include "server/srv.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double BOUNDS[SRV_N_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                             0.5,   1,      2.5,   5,    10,    20,   40,  80};
static const unsigned CODES[SRV_N_CODES] = {200, 400, 401, 404, 405, 408, 413, 429, 500, 503, 0, 0};
static const char *const EP_NAMES[SRV_EP_COUNT] = {"/v1/chat/completions", "/v1/completions", "/v1/models",
                                                   "/tokenize", "/detokenize", "/health", "/metrics", "/",
                                                   "other"};
static const char *const H_NAMES[SRV_H_COUNT][2] = {
    {"cmf:time_to_first_token_seconds", "Time from the request's arrival to its first generated token."},
    {"cmf:inter_token_latency_seconds", "Time between two generated tokens of one request."},
    {"cmf:request_queue_time_seconds", "Time a request waited in the queue before it ran."},
    {"cmf:e2e_request_latency_seconds", "Time from the request's arrival to its last byte."},
};

void cmf__srv_metrics_init(srv_metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void cmf__srv_metrics_free(srv_metrics *m) { pthread_mutex_destroy(&m->mu); }

static int code_index(unsigned code)
{
    for (int i = 0; i < SRV_N_CODES; i++)
        if (CODES[i] == code) return i;
    return SRV_N_CODES - 1; /* other */
}

void cmf__srv_metrics_request(srv_metrics *m, int endpoint, unsigned code)
{
    if (endpoint < 0 || endpoint >= SRV_EP_COUNT) endpoint = SRV_EP_OTHER;
    pthread_mutex_lock(&m->mu);
    m->requests[endpoint][code_index(code)]++;
    pthread_mutex_unlock(&m->mu);
}

void cmf__srv_metrics_observe(srv_metrics *m, int hist, double seconds)
{
    if (!(seconds >= 0) || !isfinite(seconds)) return;
    pthread_mutex_lock(&m->mu);
    srv_hist *h = &m->hist[hist];
    int b = 0;
    while (b < SRV_N_BUCKETS && seconds > BOUNDS[b]) b++;
    h->bucket[b]++;
    h->sum += seconds;
    h->count++;
    pthread_mutex_unlock(&m->mu);
}

void cmf__srv_metrics_tokens(srv_metrics *m, uint64_t prompt, uint64_t gen, uint64_t cached)
{
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += prompt;
    m->gen_tokens += gen;
    m->cached_tokens += cached;
    pthread_mutex_unlock(&m->mu);
}

typedef struct out {
    char *p;
    size_t len, cap;
    bool fail;
} out;

__attribute__((format(printf, 2, 3))) static void put(out *o, const char *fmt, ...)
{
    if (o->fail) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->p ? o->p + o->len : NULL, o->p ? o->cap - o->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->fail = true;
            return;
        }
        if (o->p && o->len + (size_t)n < o->cap) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap ? o->cap * 2 : 8192;
        while (cap < o->len + (size_t)n + 1) cap *= 2;
        char *p = realloc(o->p, cap);
        if (!p) {
            o->fail = true;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
}

static void head(out *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sched_metrics(out *o, srv *s)
{
    static const struct { const char *name, *type, *help; } G[] = {
        {"cmf:num_requests_running", "gauge", "Requests admitted and generating (a load balancer's running requests)."},
        {"cmf:num_requests_waiting", "gauge", "Requests queued, not yet admitted (a load balancer's queue length)."},
        {"cmf:kv_cache_usage_perc", "gauge", "Fraction of the KV cache held by running requests, 0 to 1."},
        {"cmf:kv_cache_used_tokens", "gauge", "KV cache positions held by running requests."},
        {"cmf:kv_cache_total_tokens", "gauge", "KV cache positions of all sequence slots."},
        {"cmf:num_parallel", "gauge", "Sequence slots (--parallel)."},
        {"cmf:prefix_cache_queries_total", "counter", "Admissions that looked for a cached prefix."},
        {"cmf:prefix_cache_hits_total", "counter", "Admissions that reused cached prompt tokens."},
        {"cmf:prompt_tokens_computed_total", "counter", "Prompt tokens computed (not taken from the cache)."},
        {"cmf:num_preemptions_total", "counter", "Requests put back in the queue for memory."},
        {"cmf:engine_steps_total", "counter", "Forward passes of the scheduler."},
        {"cmf:engine_requests_done_total", "counter", "Requests the scheduler ended, any finish."},
        {"cmf:engine_generation_tokens_total", "counter", "Tokens the scheduler generated, counted as they are made."},
    };
    for (size_t g = 0; g < sizeof G / sizeof G[0]; g++) {
        head(o, G[g].name, G[g].type, G[g].help);
        for (size_t i = 0; i < s->n_models; i++) {
            srv_model *m = &s->models[i];
            if (!m->sched) continue;
            cmf_sched_stats st;
            cmf__srv_model_stats(m, &st);
            double v = 0;
            switch (g) {
            case 0: v = st.running; break;
            case 1: v = st.waiting; break;
            case 2: v = st.kv_total > 0 ? (double)st.kv_used / (double)st.kv_total : 0; break;
            case 3: v = (double)st.kv_used; break;
            case 4: v = (double)st.kv_total; break;
            case 5: v = st.n_parallel; break;
            case 6: v = (double)st.prefix_queries; break;
            case 7: v = (double)st.prefix_hits; break;
            case 8: v = (double)st.prompt_computed; break;
            case 9: v = (double)st.preemptions; break;
            case 10: v = (double)st.steps; break;
            case 11: v = (double)st.requests_done; break;
            default: v = (double)st.gen_tokens; break;
            }
            put(o, "%s{model_name=\"%s\"} %.17g\n", G[g].name, m->id, v);
        }
    }
}

char *cmf__srv_metrics_render(srv *s, size_t *len)
{
    out o = {0};
    srv_metrics *m = &s->metrics;
    sched_metrics(&o, s);
    pthread_mutex_lock(&m->mu);
    head(&o, "cmf:http_requests_total", "counter", "HTTP requests answered, by endpoint and status.");
    for (int e = 0; e < SRV_EP_COUNT; e++)
        for (int c = 0; c < SRV_N_CODES; c++)
            if (m->requests[e][c]) {
                if (CODES[c]) put(&o, "cmf:http_requests_total{endpoint=\"%s\",status=\"%u\"} %llu\n", EP_NAMES[e],
                                  CODES[c], (unsigned long long)m->requests[e][c]);
                else put(&o, "cmf:http_requests_total{endpoint=\"%s\",status=\"other\"} %llu\n", EP_NAMES[e],
                         (unsigned long long)m->requests[e][c]);
            }
    head(&o, "cmf:prompt_tokens_total", "counter", "Prompt tokens of the requests answered.");
    put(&o, "cmf:prompt_tokens_total %llu\n", (unsigned long long)m->prompt_tokens);
    head(&o, "cmf:generation_tokens_total", "counter", "Tokens generated for the requests answered.");
    put(&o, "cmf:generation_tokens_total %llu\n", (unsigned long long)m->gen_tokens);
    head(&o, "cmf:prompt_tokens_cached_total", "counter", "Prompt tokens taken from the prefix cache.");
    put(&o, "cmf:prompt_tokens_cached_total %llu\n", (unsigned long long)m->cached_tokens);
    head(&o, "cmf:client_disconnects_total", "counter", "Requests cancelled because the client went away.");
    put(&o, "cmf:client_disconnects_total %llu\n", (unsigned long long)m->disconnects);
    for (int h = 0; h < SRV_H_COUNT; h++) {
        const srv_hist *hi = &m->hist[h];
        head(&o, H_NAMES[h][0], "histogram", H_NAMES[h][1]);
        uint64_t cum = 0;
        for (int b = 0; b < SRV_N_BUCKETS; b++) {
            cum += hi->bucket[b];
            put(&o, "%s_bucket{le=\"%g\"} %llu\n", H_NAMES[h][0], BOUNDS[b], (unsigned long long)cum);
        }
        cum += hi->bucket[SRV_N_BUCKETS];
        put(&o, "%s_bucket{le=\"+Inf\"} %llu\n", H_NAMES[h][0], (unsigned long long)cum);
        put(&o, "%s_sum %.9g\n%s_count %llu\n", H_NAMES[h][0], hi->sum, H_NAMES[h][0],
            (unsigned long long)hi->count);
    }
    pthread_mutex_unlock(&m->mu);
    if (o.fail) {
        free(o.p);
        return NULL;
    }
    *len = o.len;
    return o.p;
}
