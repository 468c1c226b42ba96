/* pool.c — persistent workers woken per job through a condition variable;
 * tasks are claimed with an atomic counter so uneven tasks balance.
 * Lock order: only p->mu exists. */
#include "util/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct cmf__pool {
    int n_threads;
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    unsigned long generation; /* bumped per job; workers wait for a change */
    int stop;
    /* current job */
    cmf__pool_fn fn;
    void *ctx;
    int n_tasks;
    atomic_int next;
    int active; /* workers still inside the current job */
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
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->stop) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        drain(p, id);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

cmf__pool *cmf__pool_new(int n_threads)
{
    if (n_threads <= 0) n_threads = cmf__cpu_count();
    cmf__pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
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
    p->stop = 1;
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
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->next, 0);
    p->active = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    drain(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->active > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
