/* test_format_writers.c — in-place writers against each other, against
 * readers, against signals and against corrupt inputs (docs/SECURITY.md,
 * "Concurrent writers"): the file lock (another process holding it makes a
 * writer and a reader wait, then refuse with CMF_LOCK_WAIT=0; within one
 * process it is re-entrant), an append interrupted by SIGTERM, SIGINT or
 * SIGHUP mid-tail cuts the tail off again, an append over a header that fails its hash is
 * refused, and a selection block with a width of 0 is an error, not a
 * division by zero.
 *
 * Generator mode (for tests/cli/hardening_skills.sh and fuzz seeds):
 *   test_format_writers --write OUT.cmf HEADER_JSON [ARCH_KEY=JSON ...]
 * writes the toy model (tests/toy_model.h) with the header keys of
 * HEADER_JSON (e.g. a `skills` registry) and the arch fields overridden. */
#include "harness.h"
#include "toy_model.h"
#include "format/skills.h"
#include "util/error.h"
#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char g_path[1024];

static const char *toy(const char *name)
{
    snprintf(g_path, sizeof g_path, "%s/%s", harness_tmpdir(), name);
    json_t *arch = toy_arch();
    cmf_status st = toy_write(g_path, arch);
    json_decref(arch);
    return st ? NULL : g_path;
}

static long long file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long long)st.st_size : -1;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A child process that holds an exclusive flock on `path` for `ms`, as
 * another cmf writer (or flock(1)) would; returns its pid once it holds it. */
static pid_t hold_lock(const char *path, long ms)
{
    int pfd[2];
    if (pipe(pfd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        int fd = open(path, O_RDONLY);
        if (fd < 0 || flock(fd, LOCK_EX) != 0) _exit(3);
        if (write(pfd[1], "x", 1) != 1) _exit(4);
        sleep_ms(ms);
        _exit(0);
    }
    close(pfd[1]);
    char c;
    bool ok = read(pfd[0], &c, 1) == 1;
    close(pfd[0]);
    return ok ? pid : -1;
}

TEST(lock_held_elsewhere_refuses_then_waits)
{
    const char *p = toy("lock.cmf");
    if (!p) SKIP("cannot write the toy model");
    long long size = file_size(p);
    pid_t pid = hold_lock(p, 600);
    CHECK(pid > 0);
    setenv("CMF_LOCK_WAIT", "0", 1);
    cmf__lock lk;
    CHECK_ERR(cmf__lock_file(p, &lk), CMF_ERR_IO, "another process is writing this file");
    CHECK_ERR(cmf__file_append(p, NULL, 0, NULL), CMF_ERR_IO, "another process is writing this file");
    CHECK_EQ_INT(file_size(p), size);
    /* a reader refuses too rather than read the envelope mid-append */
    cmf__mapping m = {0};
    CHECK_ERR(cmf__map_file(p, &m), CMF_ERR_IO, "another process is writing this file");
    /* waiting: both go on once the other lets go */
    setenv("CMF_LOCK_WAIT", "10", 1);
    CHECK_OK(cmf__map_file(p, &m));
    CHECK_EQ_INT(m.size, size);
    CHECK(m.data && !memcmp(m.head, m.data, 128));
    cmf__unmap(&m);
    CHECK_OK(cmf__file_append(p, NULL, 0, NULL));
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    unsetenv("CMF_LOCK_WAIT");
    cmf__file *f = NULL;
    CHECK_OK(cmf__file_open(p, NULL, &f));
    CHECK_OK(cmf__file_verify(f, NULL, NULL, NULL, NULL));
    cmf__file_free(f);
}

TEST(lock_reentrant_in_process)
{
    const char *p = toy("reentrant.cmf");
    if (!p) SKIP("cannot write the toy model");
    setenv("CMF_LOCK_WAIT", "0", 1);
    cmf__lock a, b;
    CHECK_OK(cmf__lock_file(p, &a));
    CHECK_OK(cmf__lock_file(p, &b)); /* the same process: counted, not a conflict */
    CHECK(cmf__lock_held(p));
    cmf__file *f = NULL;
    CHECK_OK(cmf__file_open(p, NULL, &f)); /* its own reader does not wait for itself */
    cmf__file_free(f);
    CHECK_OK(cmf__file_append(p, NULL, 0, NULL));
    cmf__unlock_file(&b);
    CHECK(cmf__lock_held(p));
    /* another process still sees it held */
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(p, O_RDONLY);
        _exit(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK ? 0 : 1);
    }
    int status = 1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cmf__unlock_file(&a);
    CHECK(!cmf__lock_held(p));
    cmf__unlock_file(&a); /* twice: nothing */
    pid = fork();
    if (pid == 0) {
        int fd = open(p, O_RDONLY);
        _exit(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : 1);
    }
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    unsetenv("CMF_LOCK_WAIT");
    /* a FIFO is neither locked nor mapped, and nothing blocks on it */
    char fifo[1100];
    snprintf(fifo, sizeof fifo, "%s/lock.fifo", harness_tmpdir());
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK_ERR(cmf__lock_file(fifo, &a), CMF_ERR_IO, "not a regular file (a FIFO)");
    cmf__mapping m = {0};
    CHECK_ERR(cmf__map_file(fifo, &m), CMF_ERR_IO, "not a regular file (a FIFO)");
    char *text = NULL;
    size_t len = 7;
    CHECK_OK(cmf__read_file(fifo, &text, &len)); /* no writer: reads as empty */
    CHECK_EQ_INT(len, 0);
    free(text);
    unlink(fifo);
}

/* A payload large enough that its write and fsync take a while; the child
 * appends it, the parent signals once the file has grown. */
TEST(append_signalled_mid_tail_cuts_the_tail)
{
    const char *p = toy("signal.cmf");
    if (!p) SKIP("cannot write the toy model");
    long long size = file_size(p);
    const int signals[] = {SIGTERM, SIGINT, SIGHUP};
    for (int sig = 0; sig < 3; sig++) {
        int signo = signals[sig];
        pid_t pid = fork();
        if (pid == 0) {
            const size_t nb = (size_t)256 << 20;
            uint8_t *d = malloc(nb);
            if (!d) _exit(5);
            for (size_t i = 0; i < nb; i += 4096) d[i] = (uint8_t)i;
            cmf__append_tensor t = {.name = "skill.big.x", .dtype = CMF_DTYPE_F32, .ndim = 1,
                                    .shape = {nb / 4}, .data = d, .nbytes = nb};
            cmf_status st = cmf__file_append(p, &t, 1, NULL);
            _exit(st ? 6 : 7); /* 7: finished before the signal came */
        }
        long long grown = 0;
        for (int i = 0; i < 20000 && (grown = file_size(p)) <= size; i++) sleep_ms(1);
        kill(pid, signo);
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 7) {
            harness_skip("the append finished before the signal");
            return;
        }
        CHECK(grown > size);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == signo);
        CHECK_EQ_INT(file_size(p), size); /* the tail is gone */
        cmf__file *f = NULL;
        CHECK_OK(cmf__file_open(p, NULL, &f));
        if (f) CHECK(cmf__file_find(f, "skill.big.x") == NULL);
        if (f) CHECK_OK(cmf__file_verify(f, NULL, NULL, NULL, NULL));
        cmf__file_free(f);
    }
}

TEST(append_refuses_a_corrupt_header)
{
    const char *p = toy("corrupt.cmf");
    if (!p) SKIP("cannot write the toy model");
    size_t len = 0;
    char *all = harness_read_file(p, &len);
    CHECK(all != NULL);
    if (!all) return;
    /* "arch_name":"toy" -> "toz": still JSON, no longer the hashed bytes */
    char *hit = NULL;
    for (size_t i = 0; i + 5 < len; i++)
        if (!memcmp(all + i, "\"toy\"", 5)) hit = all + i;
    CHECK(hit != NULL);
    if (hit) {
        hit[3] = 'z';
        FILE *fp = fopen(p, "wb");
        CHECK(fp && fwrite(all, 1, len, fp) == len);
        if (fp) fclose(fp);
    }
    free(all);
    CHECK_ERR(cmf__file_append(p, NULL, 0, NULL), CMF_ERR_HASH, "not rewriting the header of a corrupt file");
    CHECK_EQ_INT(file_size(p), (long long)len);
    cmf__file *f = NULL;
    CHECK_OK(cmf__file_open(p, NULL, &f));
    if (f) CHECK_STATUS(cmf__file_verify(f, NULL, NULL, NULL, NULL), CMF_ERR_HASH);
    cmf__file_free(f);
}

TEST(selection_width_zero_is_an_error)
{
    json_t *sel = json_pack("{s:s, s:i, s:s, s:s}", "metric", "mse", "phi_layer", 1, "mean", "AAAA", "basis", "AAAA");
    cmf__skill_selection s;
    CHECK_ERR(cmf__skill_selection_parse(sel, 0, 3, "t", &s), CMF_ERR_ARG, "model width 0");
    CHECK_ERR(cmf__skill_selection_parse(sel, 2, -1, "t", &s), CMF_ERR_ARG, "out of range");
    json_decref(sel);
}

static int write_mode(int argc, char **argv)
{
    json_error_t je;
    json_t *extra = json_loads(argv[3], 0, &je), *arch = toy_arch();
    if (!json_is_object(extra)) {
        fprintf(stderr, "HEADER_JSON: %s\n", je.text);
        return 2;
    }
    for (int i = 4; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        if (!eq) return 2;
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(eq - argv[i]), argv[i]);
        json_t *v = json_loads(eq + 1, JSON_DECODE_ANY, &je);
        if (!v) {
            fprintf(stderr, "%s: %s\n", argv[i], je.text);
            return 2;
        }
        toy_set(arch, key, v);
    }
    cmf_status st = toy_write_with(argv[2], arch, extra);
    json_decref(arch);
    json_decref(extra);
    if (st) fprintf(stderr, "%s\n", cmf_last_error());
    return st ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "--write")) return write_mode(argc, argv);
    RUN(lock_held_elsewhere_refuses_then_waits);
    RUN(lock_reentrant_in_process);
    RUN(append_signalled_mid_tail_cuts_the_tail);
    RUN(append_refuses_a_corrupt_header);
    RUN(selection_width_zero_is_an_error);
    return harness_done();
}
