/* test_util_file.c — the output check every writer makes (util/file.h):
 * FIFOs, directories and symlinks to them refused, the same file by another
 * name (./, symlink, hard link) refused, new or ordinary files accepted; an
 * output that turns into a FIFO mid-write is not renamed over and no
 * temporary stays; the signal registry hands out and takes back slots;
 * user-named inputs that are not regular files refused without blocking. */
#include "harness.h"
#include "util/file.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *tpath(const char *name)
{
    static char buf[8][1024];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 1024, "%s/%s", harness_tmpdir(), name);
    return p;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    CHECK(fclose(f) == 0);
}

TEST(output_check_kinds)
{
    const char *fifo = tpath("fifo"), *dir = tpath("dir"), *flink = tpath("fifolink"), *reg = tpath("reg");
    const char *dangling = tpath("dangling"), *rlink = tpath("reglink");
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(mkdir(dir, 0700) == 0);
    CHECK(symlink("fifo", flink) == 0);
    CHECK(symlink("nowhere", dangling) == 0);
    write_text(reg, "x");
    CHECK(symlink("reg", rlink) == 0);
    CHECK_ERR(cmf__output_check(fifo, NULL, 0), CMF_ERR_IO, "is a FIFO, not a regular file; not replacing it");
    CHECK_ERR(cmf__output_check(dir, NULL, 0), CMF_ERR_IO, "is a directory");
    CHECK_ERR(cmf__output_check(flink, NULL, 0), CMF_ERR_IO, "symlink to a FIFO");
    CHECK_OK(cmf__output_check(reg, NULL, 0));
    CHECK_OK(cmf__output_check(rlink, NULL, 0));
    CHECK_OK(cmf__output_check(dangling, NULL, 0));
    CHECK_OK(cmf__output_check(tpath("absent"), NULL, 0));
    CHECK_OK(cmf__output_check(tpath("nodir/absent"), NULL, 0)); /* creating it will say why */
}

TEST(output_check_same_file)
{
    const char *in = tpath("in.bin"), *other = tpath("other.bin"), *hard = tpath("hard.bin"), *soft = tpath("soft.bin");
    write_text(in, "input");
    write_text(other, "other");
    CHECK(link(in, hard) == 0);
    CHECK(symlink("in.bin", soft) == 0);
    char dotted[1100];
    snprintf(dotted, sizeof dotted, "%s/./in.bin", harness_tmpdir());
    const char *inputs[3] = {NULL, tpath("missing.bin"), in};
    CHECK_ERR(cmf__output_check(in, inputs, 3), CMF_ERR_ARG, "the output is the input file");
    CHECK_ERR(cmf__output_check(dotted, inputs, 3), CMF_ERR_ARG, "(same file)");
    CHECK_ERR(cmf__output_check(hard, inputs, 3), CMF_ERR_ARG, "in.bin");
    CHECK_ERR(cmf__output_check(soft, inputs, 3), CMF_ERR_ARG, "not replacing it");
    CHECK_OK(cmf__output_check(other, inputs, 3));
    char *text = harness_read_file(in, NULL);
    CHECK_EQ_STR(text, "input");
    free(text);
}

TEST(atomic_refuses_and_rechecks)
{
    cmf__atomic_file af;
    const char *fifo = tpath("afifo");
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK_ERR(cmf__atomic_open(&af, fifo), CMF_ERR_IO, "FIFO");
    /* the output becomes a FIFO while the temporary is written */
    const char *out = tpath("late.bin");
    CHECK_OK(cmf__atomic_open(&af, out));
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s", af.tmp_path ? af.tmp_path : "");
    CHECK_OK(cmf__write_all(af.fp, "data", 4, out));
    CHECK(mkfifo(out, 0600) == 0);
    CHECK_ERR(cmf__atomic_commit(&af), CMF_ERR_IO, "FIFO");
    struct stat sb;
    CHECK(stat(out, &sb) == 0 && S_ISFIFO(sb.st_mode));
    CHECK(access(tmp, F_OK) != 0); /* the temporary went away */
    /* an ordinary round trip */
    const char *ok = tpath("ok.bin");
    CHECK_OK(cmf__atomic_open(&af, ok));
    CHECK_OK(cmf__write_all(af.fp, "fine", 4, ok));
    CHECK_OK(cmf__atomic_commit(&af));
    char *text = harness_read_file(ok, NULL);
    CHECK_EQ_STR(text, "fine");
    free(text);
}

TEST(temp_registry_slots)
{
    int slots[17];
    int n = 0;
    for (int i = 0; i < 17; i++) slots[i] = cmf__temp_register(tpath("t"));
    for (int i = 0; i < 16; i++) n += slots[i] >= 0;
    CHECK_EQ_INT(n, 16);
    CHECK_EQ_INT(slots[16], -1); /* full: the caller goes on without cleanup */
    for (int i = 0; i < 17; i++) cmf__temp_release(slots[i]);
    int again = cmf__temp_register(tpath("t"));
    CHECK(again >= 0);
    cmf__temp_release(again);
    cmf__temp_release(-1);
    char *longp = malloc(5000);
    if (longp) {
        memset(longp, 'a', 4999);
        longp[4999] = 0;
        CHECK_EQ_INT(cmf__temp_register(longp), -1);
        free(longp);
    }
}

/* An endless source is refused at the limit, a file at the limit is read. */
TEST(read_file_bounded)
{
    char *text = NULL;
    size_t len = 0;
    CHECK_ERR(cmf__read_file_max("/dev/zero", (size_t)1 << 20, &text, &len), CMF_ERR_BOUNDS, "endless");
    CHECK(text == NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/small.txt", harness_tmpdir());
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    for (int i = 0; i < 70000; i++) fputc('a' + i % 26, f);
    fclose(f);
    CHECK_OK(cmf__read_file_max(path, (size_t)1 << 20, &text, &len));
    CHECK_EQ_INT(len, 70000);
    CHECK(text && text[69999] == 'a' + 69999 % 26);
    free(text);
}

/* A FIFO nobody writes to, a directory and a device are refused by the
 * user-input opens at once (a blocking open of the FIFO would hang here);
 * a regular file opens blocking again. */
TEST(regular_inputs_only)
{
    const char *fifo = tpath("in.fifo"), *dir = tpath("in.dir"), *reg = tpath("in.txt");
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    mkdir(dir, 0700);
    write_text(reg, "abc");
    int fd = -1;
    FILE *fp = NULL;
    char *text = NULL;
    size_t len = 9;
    CHECK_ERR(cmf__open_regular(fifo, &fd), CMF_ERR_IO, "not a regular file (a FIFO)");
    CHECK_EQ_INT(fd, -1);
    CHECK_ERR(cmf__fopen_regular(fifo, &fp), CMF_ERR_IO, "in.fifo: not a regular file (a FIFO)");
    CHECK(fp == NULL);
    CHECK_ERR(cmf__read_regular(fifo, &text, &len), CMF_ERR_IO, "not a regular file (a FIFO)");
    CHECK(text == NULL && len == 0);
    CHECK_ERR(cmf__read_regular(dir, &text, &len), CMF_ERR_IO, "not a regular file (a directory)");
    CHECK_ERR(cmf__fopen_regular("/dev/null", &fp), CMF_ERR_IO, "not a regular file (a character device)");
    CHECK_ERR(cmf__read_regular(tpath("absent"), &text, &len), CMF_ERR_IO, "cannot open: No such file");
    CHECK_OK(cmf__open_regular(reg, &fd));
    CHECK(fd >= 0 && !(fcntl(fd, F_GETFL) & O_NONBLOCK));
    if (fd >= 0) close(fd);
    CHECK_OK(cmf__read_regular(reg, &text, &len));
    CHECK(text && len == 3 && !strcmp(text, "abc"));
    free(text);
    unlink(fifo);
    rmdir(dir);
}

int main(void)
{
    RUN(read_file_bounded);
    RUN(output_check_kinds);
    RUN(output_check_same_file);
    RUN(atomic_refuses_and_rechecks);
    RUN(temp_registry_slots);
    RUN(regular_inputs_only);
    return harness_done();
}
