/* pool.c — persistent workers for data-parallel jobs. A job is one
 * atomic ticket (generation, task count, next task): a thread claims a
 * task by advancing the ticket with a compare-and-swap that also proves
 * the job is still the current one, and the caller waits only for the
 * tasks claimed to finish (a count of tasks done), never for a worker to
 * show up: a worker the OS has not scheduled costs nothing, the caller
 * runs the tasks itself. Between jobs a thread spins for a while (a decode
 * step runs a hundred small jobs a few microseconds apart, and a futex
 * wake-up costs more than most of them) and then sleeps on a condition
 * variable, but not while the machine is oversubscribed: a thread that
 * finds itself preempted involuntarily (getrusage) turns spinning off for
 * the whole pool for a while, since a spinner then holds a core that the
 * other work, or our own caller, needs. Sleeping and waking meet through
 * sequentially consistent atomics (a sleeper announces itself, then
 * re-checks; a waker publishes, then looks for sleepers), with the mutex
 * only around the condition variables. Each side's store and the load
 * after it are also split by a full fence (store_then_load): the C11
 * orders alone are enough for the hardware, but a translator such as
 * qemu-user running aarch64's store-release / load-acquire pair on an x86
 * host lets the load pass the store, and both sides then sleep.
 * Lock order: only p->mu exists. */
#include "util/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
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

#define SPIN_US_DEFAULT 200      /* how long an idle thread polls before it sleeps */
#define CONTENDED_NS 200000000L  /* spinning stays off this long after a preemption was seen */
#define PROBE_EVERY 16           /* waits between two looks at a thread's preemption count */

/* ticket: generation (24 bits) | task count (20) | next task (20) */
#define T_IDX_BITS 20
#define T_MAX_TASKS ((1 << T_IDX_BITS) - 1)
#define T_GEN(t) ((t) >> (2 * T_IDX_BITS))
#define T_N(t) (((t) >> T_IDX_BITS) & T_MAX_TASKS)
#define T_IDX(t) ((t) & T_MAX_TASKS)

struct cmf__pool {
    int n_threads;
    long spin_ns; /* 0: sleep at once */
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    _Atomic uint64_t ticket;
    atomic_int stop;
    atomic_int sleepers;    /* workers inside (or entering) pthread_cond_wait(wake) */
    atomic_int caller_asleep;
    atomic_int tasks_done;  /* of the current job */
    atomic_long contended_at; /* when a thread last saw itself preempted (ns) */
    /* current job, written before the ticket is published; read only by a
     * thread holding a claimed, unfinished task of it */
    cmf__pool_fn fn;
    void *ctx;
    int base;               /* task index of the job's first task (jobs past T_MAX_TASKS run in parts) */
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

/* A thread's own look at whether the OS took its core away since the last
 * look; then spinning stops pool-wide for CONTENDED_NS. */
typedef struct probe {
    unsigned waits;
    long nivcsw;
} probe;

static void probe_preemption(cmf__pool *p, probe *pr)
{
#ifdef RUSAGE_THREAD
    if (p->spin_ns <= 0 || pr->waits++ % PROBE_EVERY) return;
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru)) return;
    if (pr->nivcsw >= 0 && ru.ru_nivcsw > pr->nivcsw) atomic_store(&p->contended_at, now_ns());
    pr->nivcsw = ru.ru_nivcsw;
#else
    (void)p;
    (void)pr;
#endif
}

/* The store side of a sleep/wake handshake is done: a full fence before
 * looking at the other side's flag (see the head of the file).
 * ThreadSanitizer does not model fences (gcc refuses them under
 * -fsanitize=thread); there the seq_cst store and load on each side are
 * what C11 orders, and are all it checks. */
#if defined(__SANITIZE_THREAD__)
#define CMF__POOL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CMF__POOL_TSAN 1
#endif
#endif
#ifdef CMF__POOL_TSAN
static void store_then_load(void) {}
#else
static void store_then_load(void) { atomic_thread_fence(memory_order_seq_cst); }
#endif

static bool may_spin(cmf__pool *p, long now)
{
    return p->spin_ns > 0 && now - atomic_load(&p->contended_at) > CONTENDED_NS;
}

/* Polls until done(p, arg) holds or the spin time passed; whether it holds. */
static bool spin_until(cmf__pool *p, bool (*done)(cmf__pool *, uint64_t), uint64_t arg)
{
    long start = now_ns();
    if (!may_spin(p, start)) return done(p, arg);
    for (unsigned i = 1;; i++) {
        if (done(p, arg)) return true;
        CPU_RELAX();
        if ((i & 63) == 0 && now_ns() - start > p->spin_ns) return done(p, arg);
    }
}

static bool job_posted(cmf__pool *p, uint64_t seen_gen)
{
    return T_GEN(atomic_load(&p->ticket)) != seen_gen || atomic_load(&p->stop);
}

static bool tasks_finished(cmf__pool *p, uint64_t n)
{
    return (uint64_t)atomic_load(&p->tasks_done) == n;
}

/* Claims and runs tasks of job `gen` until it has none left (or another
 * job replaced it); the count run. */
static int drain(cmf__pool *p, uint64_t gen, int thread)
{
    int ran = 0;
    uint64_t t = atomic_load(&p->ticket);
    while (T_GEN(t) == gen && T_IDX(t) < T_N(t)) {
        if (!atomic_compare_exchange_weak(&p->ticket, &t, t + 1)) continue;
        /* task T_IDX(t) of job gen is ours: the job cannot change until it is done */
        p->fn(p->ctx, p->base + (int)T_IDX(t), thread);
        ran++;
        const bool last = (uint64_t)atomic_fetch_add(&p->tasks_done, 1) + 1 == T_N(t);
        if (last) store_then_load();
        if (last && atomic_load(&p->caller_asleep)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
        t = atomic_load(&p->ticket);
    }
    return ran;
}

static void *worker_main(void *arg)
{
    worker_arg *wa = arg;
    cmf__pool *p = wa->p;
    int id = wa->id;
    free(wa);
    uint64_t seen = 0;
    probe pr = {0, -1};
    for (;;) {
        probe_preemption(p, &pr);
        if (!spin_until(p, job_posted, seen)) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            store_then_load();
            while (!job_posted(p, seen)) pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = T_GEN(atomic_load(&p->ticket));
        drain(p, seen, id);
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
    atomic_store(&p->contended_at, now_ns() - 2 * CONTENDED_NS);
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

/* One job of n <= T_MAX_TASKS tasks starting at task `base`. */
static void run_part(cmf__pool *p, int base, int n, cmf__pool_fn fn, void *ctx)
{
    static _Thread_local probe pr = {0, -1};
    /* every task of the previous job is done: nobody reads fn / ctx now */
    p->fn = fn;
    p->ctx = ctx;
    p->base = base;
    atomic_store(&p->tasks_done, 0);
    uint64_t gen = (T_GEN(atomic_load(&p->ticket)) + 1) & ((1u << 24) - 1);
    atomic_store(&p->ticket, gen << (2 * T_IDX_BITS) | (uint64_t)n << T_IDX_BITS);
    store_then_load();
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    drain(p, gen, 0);
    probe_preemption(p, &pr);
    if (!spin_until(p, tasks_finished, (uint64_t)n)) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->caller_asleep, 1);
        store_then_load();
        while (!tasks_finished(p, (uint64_t)n)) pthread_cond_wait(&p->done, &p->mu);
        atomic_store(&p->caller_asleep, 0);
        pthread_mutex_unlock(&p->mu);
    }
}

void cmf__pool_run(cmf__pool *p, int n_tasks, cmf__pool_fn fn, void *ctx)
{
    if (n_tasks <= 0) return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    for (int base = 0; base < n_tasks; base += T_MAX_TASKS)
        run_part(p, base, n_tasks - base < T_MAX_TASKS ? n_tasks - base : T_MAX_TASKS, fn, ctx);
}
