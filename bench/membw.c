/* membw.c — read-bandwidth probe for bench/cpu_bench.sh: T threads stream
 * reads over disjoint slices of one buffer (summing 64-bit words, four
 * streams a thread, as a matrix-vector product streams weight rows), best
 * of several passes, for a buffer far larger than the last-level cache and one that fits in it.
 * Usage: cmf-membw [THREADS...] (default: 1 and 2); prints one line per
 * buffer and thread count: "membw dram|cache SIZE MiB threads T: G GB/s". */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread barriers, sysconf cache sizes under -std=c11 */
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct job {
    const uint64_t *p;
    size_t n; /* words */
    int passes;
    pthread_barrier_t *bar;
    uint64_t sum;
    double secs;
} job;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* four streams at once (four quarters of the slice, as a matrix-vector
 * product reads several weight rows together, which keeps more cache-line
 * fetches in flight than one stream), eight independent sums: the loads,
 * not an add chain, set the pace */
static uint64_t stream(const uint64_t *p, size_t n)
{
    uint64_t s[4][8] = {{0}};
    size_t q = n / 4 / 8 * 8, i = 0;
    const uint64_t *a = p, *b = p + q, *c = p + 2 * q, *d = p + 3 * q;
    for (; i < q; i += 8)
        for (int j = 0; j < 8; j++) s[0][j] += a[i + j], s[1][j] += b[i + j], s[2][j] += c[i + j], s[3][j] += d[i + j];
    uint64_t t = 0;
    for (i = 4 * q; i < n; i++) t += p[i];
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 8; j++) t += s[k][j];
    return t;
}

static void *run(void *arg)
{
    job *jb = arg;
    double best = 1e30;
    for (int r = 0; r < jb->passes; r++) {
        pthread_barrier_wait(jb->bar);
        double t0 = now();
        jb->sum += stream(jb->p, jb->n);
        pthread_barrier_wait(jb->bar);
        double t = now() - t0;
        if (t < best) best = t;
    }
    jb->secs = best;
    return NULL;
}

/* GB/s of T threads reading `bytes` of buf (each thread its own slice) */
static double measure(const uint64_t *buf, size_t bytes, int threads, uint64_t *sink)
{
    size_t words = bytes / 8, per = words / (size_t)threads;
    int passes = bytes >= ((size_t)64 << 20) ? 5 : 50;
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    job jobs[64];
    pthread_t tid[64];
    for (int t = 0; t < threads; t++) {
        jobs[t] = (job){buf + (size_t)t * per, per, passes, &bar, 0, 0};
        if (t > 0 && pthread_create(&tid[t], NULL, run, &jobs[t])) {
            fprintf(stderr, "membw: cannot start thread %d\n", t);
            exit(1);
        }
    }
    run(&jobs[0]);
    double worst = jobs[0].secs;
    for (int t = 1; t < threads; t++) {
        pthread_join(tid[t], NULL);
        if (jobs[t].secs > worst) worst = jobs[t].secs;
    }
    for (int t = 0; t < threads; t++) *sink += jobs[t].sum;
    pthread_barrier_destroy(&bar);
    return (double)(per * (size_t)threads * 8) / worst / 1e9;
}

/* the last-level cache from sysfs (the highest cache level of cpu0), else
 * sysconf (glibc's figure can be the whole package's on some CPUs) */
static size_t llc_bytes(void)
{
    size_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 16; i++) {
        char path[96], unit = 0;
        int level = 0;
        unsigned long size = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) break;
        int ok = fscanf(f, "%d", &level) == 1;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!ok || !(f = fopen(path, "r"))) continue;
        ok = fscanf(f, "%lu%c", &size, &unit) >= 1;
        fclose(f);
        if (!ok) continue;
        size_t bytes = unit == 'K' ? (size_t)size << 10 : unit == 'M' ? (size_t)size << 20 : (size_t)size;
        if (level > best_level) best_level = level, best = bytes;
    }
    if (best) return best;
    long v = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    v = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (v <= 0) v = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return v > 0 ? (size_t)v : (size_t)8 << 20; /* unknown: assume 8 MiB */
}

static volatile uint64_t g_sink; /* the sums are stored, so the reads stay */

int main(int argc, char **argv)
{
    int threads[16], nt = 0;
    for (int i = 1; i < argc && nt < 16; i++) {
        char *end;
        long t = strtol(argv[i], &end, 10);
        if (*end || t < 1 || t > 64) {
            fprintf(stderr, "membw: thread count '%s' is not 1..64\nusage: cmf-membw [THREADS...]\n", argv[i]);
            return 2;
        }
        threads[nt++] = (int)t;
    }
    if (nt == 0) threads[nt++] = 1, threads[nt++] = 2;
    size_t llc = llc_bytes();
    /* 8x the cache, within 256 MiB .. 1 GiB, and never under 2x the cache */
    size_t big = 8 * llc, lo = (size_t)256 << 20, hi = (size_t)1 << 30;
    big = big < lo ? lo : big > hi ? hi : big;
    if (big < 2 * llc) big = 2 * llc;
    size_t small = llc / 2;
    uint64_t *buf = malloc(big);
    if (!buf) {
        fprintf(stderr, "membw: cannot allocate %zu MiB\n", big >> 20);
        return 1;
    }
    for (size_t i = 0; i < big / 8; i++) buf[i] = i * 0x9E3779B97F4A7C15ull; /* touch every page */
    printf("membw: last-level cache %zu KiB; streaming reads, best pass\n", llc >> 10);
    uint64_t sink = 0;
    for (int k = 0; k < 2; k++) {
        size_t bytes = k == 0 ? big : small;
        for (int i = 0; i < nt; i++)
            printf("membw %s %.1f MiB threads %d: %.2f GB/s\n", k == 0 ? "dram" : "cache", (double)bytes / 1048576.0,
                   threads[i], measure(buf, bytes, threads[i], &sink));
    }
    g_sink = sink;
    free(buf);
    return 0;
}
