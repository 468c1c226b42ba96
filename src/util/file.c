/* file.c — mmap, whole-file reads, atomic temp+rename writes, the output
 * check every writer makes, and the registry of temporaries a SIGINT,
 * SIGTERM or SIGHUP handler removes. The handler touches only the static
 * slot table (lock-free atomics) and calls unlink/sigaction/raise. */
#include "util/file.h"
#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

cmf_status cmf__map_file(const char *path, cmf__mapping *out)
{
    out->data = NULL;
    out->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return cmf__error(CMF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return cmf__error(CMF_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return cmf__error(CMF_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return cmf__error(CMF_ERR_IO, "%s: cannot map %lld bytes: %s", path,
                              (long long)st.st_size, strerror(e));
        }
        out->data = p;
    }
    out->size = (uint64_t)st.st_size;
    close(fd);
    return CMF_OK;
}

void cmf__unmap(cmf__mapping *m)
{
    if (m && m->data) munmap((void *)m->data, (size_t)m->size);
    if (m) {
        m->data = NULL;
        m->size = 0;
    }
}

char *cmf__path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

cmf_status cmf__read_file(const char *path, char **out, size_t *len)
{
    return cmf__read_file_max(path, CMF__READ_FILE_MAX, out, len);
}

cmf_status cmf__read_file_max(const char *path, size_t max, char **out, size_t *len)
{
    *out = NULL;
    if (len) *len = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return cmf__error(CMF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(fp);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
    }
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (n < cap) break;
        if (cap >= max) {
            free(buf);
            fclose(fp);
            return cmf__error(CMF_ERR_BOUNDS, "%s: larger than %zu MiB (or endless): not read", path, max >> 20);
        }
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            fclose(fp);
            return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        free(buf);
        return cmf__error(CMF_ERR_IO, "%s: read error", path);
    }
    buf[n] = '\0';
    *out = buf;
    if (len) *len = n;
    return CMF_OK;
}

/* ---- the output check ----------------------------------------------------- */

static const char *kind_name(mode_t m)
{
    if (S_ISDIR(m)) return "directory";
    if (S_ISFIFO(m)) return "FIFO";
    if (S_ISCHR(m)) return "character device";
    if (S_ISBLK(m)) return "block device";
    if (S_ISSOCK(m)) return "socket";
    return "special file";
}

cmf_status cmf__output_check(const char *path, const char *const *inputs, size_t n_inputs)
{
    struct stat ls, st;
    if (lstat(path, &ls) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return CMF_OK; /* nothing there: creating it says the rest */
        return cmf__error(CMF_ERR_IO, "%s: cannot examine the output path: %s", path, strerror(errno));
    }
    bool target = true; /* st describes what the name leads to */
    if (S_ISLNK(ls.st_mode)) {
        if (stat(path, &st) != 0) target = false; /* dangling: the rename replaces only the link */
    } else {
        st = ls;
    }
    if (!S_ISREG(ls.st_mode) && !S_ISLNK(ls.st_mode))
        return cmf__error(CMF_ERR_IO, "%s: the output exists and is a %s, not a regular file; not replacing it", path,
                          kind_name(ls.st_mode));
    if (target && !S_ISREG(st.st_mode))
        return cmf__error(CMF_ERR_IO, "%s: the output is a symlink to a %s, not a regular file; not replacing it",
                          path, kind_name(st.st_mode));
    for (size_t i = 0; target && i < n_inputs; i++) {
        struct stat in;
        if (!inputs[i] || stat(inputs[i], &in) != 0) continue;
        if (in.st_dev == st.st_dev && in.st_ino == st.st_ino)
            return cmf__error(CMF_ERR_ARG, "%s: the output is the input file %s (same file); not replacing it",
                              path, inputs[i]);
    }
    return CMF_OK;
}

/* ---- temporaries removed on a fatal signal ----------------------------------- */

enum { TEMP_SLOTS = 16, SLOT_FREE = 0, SLOT_FILLING = 1, SLOT_ARMED = 2 };
static char g_temp_path[TEMP_SLOTS][PATH_MAX];
static atomic_int g_temp_state[TEMP_SLOTS];
static atomic_flag g_handlers_installed = ATOMIC_FLAG_INIT;
static const int CLEANUP_SIGNALS[] = {SIGINT, SIGTERM, SIGHUP};

static void on_fatal_signal(int sig)
{
    int saved = errno;
    for (int i = 0; i < TEMP_SLOTS; i++)
        if (atomic_load(&g_temp_state[i]) == SLOT_ARMED) unlink(g_temp_path[i]);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig); /* pending until the handler returns: then the default action */
    errno = saved;
}

static void install_handlers(void)
{
    if (atomic_flag_test_and_set(&g_handlers_installed)) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof CLEANUP_SIGNALS / sizeof *CLEANUP_SIGNALS; i++)
        sigaddset(&sa.sa_mask, CLEANUP_SIGNALS[i]); /* one cleanup at a time */
    for (size_t i = 0; i < sizeof CLEANUP_SIGNALS / sizeof *CLEANUP_SIGNALS; i++) {
        struct sigaction old;
        if (sigaction(CLEANUP_SIGNALS[i], NULL, &old) != 0) continue;
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) sigaction(CLEANUP_SIGNALS[i], &sa, NULL);
    }
}

int cmf__temp_register(const char *path)
{
    size_t n = strlen(path);
    if (n >= PATH_MAX) return -1;
    install_handlers();
    for (int i = 0; i < TEMP_SLOTS; i++) {
        int expect = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&g_temp_state[i], &expect, SLOT_FILLING)) continue;
        memcpy(g_temp_path[i], path, n + 1);
        atomic_store(&g_temp_state[i], SLOT_ARMED);
        return i;
    }
    return -1;
}

void cmf__temp_release(int slot)
{
    if (slot >= 0 && slot < TEMP_SLOTS) atomic_store(&g_temp_state[slot], SLOT_FREE);
}

/* ---- atomic files ---------------------------------------------------------- */

cmf_status cmf__atomic_open(cmf__atomic_file *af, const char *path)
{
    memset(af, 0, sizeof *af);
    af->temp_slot = -1;
    cmf_status st = cmf__output_check(path, NULL, 0);
    if (st != CMF_OK) return st;
    size_t n = strlen(path) + 32;
    af->path = strdup(path);
    af->tmp_path = malloc(n);
    if (!af->path || !af->tmp_path) {
        free(af->path);
        free(af->tmp_path);
        memset(af, 0, sizeof *af);
        af->temp_slot = -1;
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(af->tmp_path, n, "%s.tmp.%ld", path, (long)getpid());
    af->temp_slot = cmf__temp_register(af->tmp_path);
    af->fp = fopen(af->tmp_path, "wb");
    if (!af->fp) {
        st = cmf__error(CMF_ERR_IO, "%s: cannot create: %s", af->tmp_path, strerror(errno));
        cmf__temp_release(af->temp_slot);
        free(af->path);
        free(af->tmp_path);
        memset(af, 0, sizeof *af);
        af->temp_slot = -1;
        return st;
    }
    return CMF_OK;
}

cmf_status cmf__atomic_commit(cmf__atomic_file *af)
{
    cmf_status st = CMF_OK;
    if (fflush(af->fp) != 0 || ferror(af->fp) || fsync(fileno(af->fp)) != 0)
        st = cmf__error(CMF_ERR_IO, "%s: write failed: %s", af->tmp_path, errno ? strerror(errno) : "I/O error");
    if (fclose(af->fp) != 0 && st == CMF_OK)
        st = cmf__error(CMF_ERR_IO, "%s: close failed: %s", af->tmp_path, strerror(errno));
    af->fp = NULL;
    /* the output may have changed while the temporary was written */
    if (st == CMF_OK) st = cmf__output_check(af->path, NULL, 0);
    if (st == CMF_OK && rename(af->tmp_path, af->path) != 0)
        st = cmf__error(CMF_ERR_IO, "%s: cannot rename into place: %s", af->path, strerror(errno));
    if (st != CMF_OK) remove(af->tmp_path);
    cmf__temp_release(af->temp_slot);
    free(af->path);
    free(af->tmp_path);
    memset(af, 0, sizeof *af);
    af->temp_slot = -1;
    return st;
}

void cmf__atomic_abort(cmf__atomic_file *af)
{
    if (!af || !af->tmp_path) return;
    if (af->fp) fclose(af->fp);
    remove(af->tmp_path);
    cmf__temp_release(af->temp_slot);
    free(af->path);
    free(af->tmp_path);
    memset(af, 0, sizeof *af);
    af->temp_slot = -1;
}

cmf_status cmf__write_all(FILE *fp, const void *data, size_t len, const char *what)
{
    if (len && fwrite(data, 1, len, fp) != len)
        return cmf__error(CMF_ERR_IO, "%s: write failed: %s", what, strerror(errno));
    return CMF_OK;
}

cmf_status cmf__pwrite_all(int fd, const void *data, uint64_t len, uint64_t off, const char *path)
{
    const uint8_t *p = data;
    while (len) {
        ssize_t n = pwrite(fd, p, len > (1u << 30) ? (1u << 30) : (size_t)len, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return cmf__error(CMF_ERR_IO, "%s: write at 0x%llx failed: %s", path, (unsigned long long)off,
                              n < 0 ? strerror(errno) : "short write");
        p += n;
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return CMF_OK;
}
