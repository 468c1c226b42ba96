/* pool.c — persistent workers for data-parallel jobs. A job is published
 * by bumping an atomic generation; tasks are claimed with an atomic
 * counter so uneven tasks balance. Between jobs a worker spins for a
 * while (a decode step runs a hundred small jobs a few microseconds
 * apart, and a futex wake-up costs more than most of them) and then
 * sleeps on a condition variable; the caller likewise spins on the count
 * of busy workers before sleeping. Sleeping and waking meet through
 * sequentially consistent atomics (a sleeper announces itself, then
 * re-checks; a waker publishes, then looks for sleepers), with the mutex
 * only around the condition variables.
 * Lock order: only p->mu exists. */
#include "util/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

#define SPIN_US_DEFAULT 200 /* how long an idle thread polls before it sleeps */

struct cmf__pool {
    int n_threads;
    long spin_ns; /* 0: sleep at once */
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    atomic_ulong generation; /* bumped per job; workers wait for a change */
    atomic_int stop;
    atomic_int sleepers;    /* workers inside (or entering) pthread_cond_wait(wake) */
    atomic_int caller_asleep;
    /* current job, written before generation is bumped */
    cmf__pool_fn fn;
    void *ctx;
    int n_tasks;
    atomic_int next;
    atomic_int active; /* workers still inside the current job */
};

typedef struct {
    cmf__pool *p;
    int id;
} worker_arg;

int cmf__cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Polls until done(p, arg) holds or spin_ns passed; whether it holds. */
static bool spin_until(const cmf__pool *p, bool (*done)(cmf__pool *, unsigned long), unsigned long arg)
{
    if (p->spin_ns <= 0) return done((cmf__pool *)p, arg);
    long start = now_ns();
    for (unsigned i = 1;; i++) {
        if (done((cmf__pool *)p, arg)) return true;
        CPU_RELAX();
        if ((i & 63) == 0 && now_ns() - start > p->spin_ns) return done((cmf__pool *)p, arg);
    }
}

static bool job_posted(cmf__pool *p, unsigned long seen)
{
    return atomic_load(&p->generation) != seen || atomic_load(&p->stop);
}
static bool workers_idle(cmf__pool *p, unsigned long unused)
{
    (void)unused;
    return atomic_load(&p->active) == 0;
}

static void drain(cmf__pool *p, int thread)
{
    for (;;) {
        int t = atomic_fetch_add(&p->next, 1);
        if (t >= p->n_tasks) break;
        p->fn(p->ctx, t, thread);
    }
}

static void *worker_main(void *arg)
{
    worker_arg *wa = arg;
    cmf__pool *p = wa->p;
    int id = wa->id;
    free(wa);
    unsigned long seen = 0;
    for (;;) {
        if (!spin_until(p, job_posted, seen)) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (!job_posted(p, seen)) pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = atomic_load(&p->generation);
        drain(p, id);
        if (atomic_fetch_sub(&p->active, 1) == 1 && atomic_load(&p->caller_asleep)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

/* CMF_POOL_SPIN_US (0 .. 100000) overrides the spin; a pool with more
 * threads than cores never spins (a spinner would hold a core that a
 * worker with tasks needs). */
static long spin_ns_for(int n_threads)
{
    if (n_threads > cmf__cpu_count()) return 0;
    long us = SPIN_US_DEFAULT;
    const char *e = getenv("CMF_POOL_SPIN_US");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*end == '\0' && v >= 0 && v <= 100000) us = v;
    }
    return us * 1000L;
}

cmf__pool *cmf__pool_new(int n_threads)
{
    if (n_threads <= 0) n_threads = cmf__cpu_count();
    cmf__pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
    p->spin_ns = spin_ns_for(n_threads);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) goto fail;
        for (int i = 1; i < n_threads; i++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (!wa) goto fail_started;
            wa->p = p;
            wa->id = i;
            if (pthread_create(&p->workers[i - 1], NULL, worker_main, wa) != 0) {
                free(wa);
            fail_started:
                p->n_threads = i; /* workers 1..i-1 exist */
                cmf__pool_free(p);
                return NULL;
            }
        }
    }
    return p;
fail:
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p);
    return NULL;
}

void cmf__pool_free(cmf__pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->workers[i - 1], NULL);
    free(p->workers);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p);
}

int cmf__pool_threads(const cmf__pool *p) { return p ? p->n_threads : 1; }

void cmf__pool_run(cmf__pool *p, int n_tasks, cmf__pool_fn fn, void *ctx)
{
    if (n_tasks <= 0) return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    /* every worker is idle here: the previous job waited for active == 0 */
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->next, 0);
    atomic_store(&p->active, p->n_threads - 1);
    atomic_fetch_add(&p->generation, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    drain(p, 0);
    if (!spin_until(p, workers_idle, 0)) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->caller_asleep, 1);
        while (atomic_load(&p->active) > 0) pthread_cond_wait(&p->done, &p->mu);
        atomic_store(&p->caller_asleep, 0);
        pthread_mutex_unlock(&p->mu);
    }
}
