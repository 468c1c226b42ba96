/* harness.c — check bookkeeping and fixture lookup for the test programs. */
#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int n_pass, n_fail, n_skip, cur_failed, cur_skipped, in_test;
static const char *cur_name = "";

void harness_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s: %s:%d: ", cur_name, file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    cur_failed = 1;
    if (!in_test) n_fail++; /* a failed check outside a test (setup in main) fails the program */
}

void harness_skip(const char *why)
{
    fprintf(stderr, "SKIP %s: %s\n", cur_name, why);
    cur_skipped = 1;
    if (!in_test) n_skip++; /* a skip in main (no fixture, no tool) reports the program skipped */
}

void harness_run(const char *name, void (*fn)(void))
{
    const char *only = getenv("CMF_TEST_ONLY"); /* a list of test names to run (the rest are left out, uncounted) */
    if (only && *only && !strstr(only, name)) return;
    cur_name = name;
    cur_failed = cur_skipped = 0;
    in_test = 1;
    fn();
    in_test = 0;
    if (cur_failed) n_fail++;
    else if (cur_skipped) n_skip++;
    else n_pass++;
    fprintf(stderr, "%s %s\n", cur_failed ? "not ok" : cur_skipped ? "skip  " : "ok    ", name);
}

int harness_done(void)
{
    printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
    if (n_fail) return 1;
    if (n_skip && !n_pass) return 77; /* ctest SKIP_RETURN_CODE */
    return 0;
}

const char *harness_fixtures(void)
{
    static char root[4096];
    const char *env = getenv("CMF_FIXTURES");
    snprintf(root, sizeof root, "%s", env && *env ? env : "../shared/fixtures");
    struct stat st;
    if (stat(root, &st) != 0 || !S_ISDIR(st.st_mode)) {
        static int warned;
        if (!warned++)
            fprintf(stderr, "*** fixtures not found at '%s' (set CMF_FIXTURES): fixture tests SKIPPED ***\n", root);
        return NULL;
    }
    return root;
}

bool harness_light(void)
{
    const char *env = getenv("CMF_TEST_LIGHT");
    return env && !strcmp(env, "1");
}

const char *harness_fixture_path(const char *rel)
{
    static char bufs[8][4096];
    static int slot;
    const char *root = harness_fixtures();
    if (!root) return NULL;
    char *b = bufs[slot++ & 7];
    snprintf(b, 4096, "%s/%s", root, rel);
    return b;
}

const char *harness_tmpdir(void)
{
    static char dir[4096];
    if (dir[0]) return dir;
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/cmf-test-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(2);
    }
    return dir;
}

char *harness_read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    if (buf) {
        buf[n] = 0;
        if (len) *len = (size_t)n;
    }
    return buf;
}

double harness_max_rel_err(const float *got, const float *ref, size_t n)
{
    if (n == 0) return HUGE_VAL;
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(ref[i])) return HUGE_VAL;
        double d = fabs((double)got[i] - ref[i]);
        if (d > e) e = d;
        if (fabs(ref[i]) > m) m = fabs(ref[i]);
    }
    return m > 0 ? e / m : e;
}
