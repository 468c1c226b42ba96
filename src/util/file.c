/* file.c — mmap, whole-file reads, atomic temp+rename writes, the output
 * check every writer makes, and the registry of temporaries a SIGINT,
 * SIGTERM or SIGHUP handler removes. The handler touches only the static
 * slot table (lock-free atomics) and calls unlink/sigaction/raise. */
#include "util/file.h"
#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Reads all of `fp` (closed here) up to `max` bytes; errors name `path`. */
static cmf_status read_stream(FILE *fp, const char *path, size_t max, char **out, size_t *len)
{
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

cmf_status cmf__read_file_max(const char *path, size_t max, char **out, size_t *len)
{
    *out = NULL;
    if (len) *len = 0;
    /* O_NONBLOCK: a FIFO nobody writes to reads as empty instead of
     * blocking the open; reads block as usual once it is open */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return cmf__error(CMF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        int e = errno;
        close(fd);
        return cmf__error(CMF_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    return read_stream(fp, path, max, out, len);
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

/* ---- locks --------------------------------------------------------------------- */
/* The exclusive locks this process holds, by file identity: a writer that
 * holds one may open, map and append to the same file again without
 * waiting for itself (flock conflicts between two descriptions of one
 * file, even in one process). */
enum { LOCK_SLOTS = 16 };
static struct {
    dev_t dev;
    ino_t ino;
    int fd, depth;
} g_locks[LOCK_SLOTS];
static pthread_mutex_t g_locks_mu = PTHREAD_MUTEX_INITIALIZER;

static int held_slot(dev_t dev, ino_t ino)
{
    for (int i = 0; i < LOCK_SLOTS; i++)
        if (g_locks[i].depth > 0 && g_locks[i].dev == dev && g_locks[i].ino == ino) return i;
    return -1;
}

int cmf__lock_wait_seconds(void)
{
    const char *e = getenv("CMF_LOCK_WAIT");
    if (!e || !*e) return CMF__LOCK_WAIT_DEFAULT;
    char *end = NULL;
    long v = strtol(e, &end, 10);
    return end && !*end && v >= 0 && v <= 3600 ? (int)v : CMF__LOCK_WAIT_DEFAULT;
}

/* flock(fd, op) retried every 10 ms for up to `wait_s` seconds: 0, or the
 * errno of the last try (EWOULDBLOCK when another holds it throughout). */
static int flock_wait(int fd, int op, int wait_s)
{
    long tries = (long)wait_s * 100;
    for (long k = 0;; k++) {
        if (flock(fd, op | LOCK_NB) == 0) return 0;
        int e = errno;
        if (e == EINTR) continue;
        if (e != EWOULDBLOCK || k >= tries) return e;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Opens `path` without blocking on a FIFO (O_NONBLOCK, cleared again for a
 * regular file) and refuses anything but a regular file. */
static cmf_status open_regular(const char *path, struct stat *st, int *out)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return cmf__error(CMF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        return cmf__error(CMF_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return cmf__error(CMF_ERR_IO, "%s: not a regular file (a %s)", path, kind_name(st->st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *out = fd;
    return CMF_OK;
}

cmf_status cmf__open_regular(const char *path, int *fd)
{
    struct stat st;
    *fd = -1;
    return open_regular(path, &st, fd);
}

cmf_status cmf__fopen_regular(const char *path, FILE **fp)
{
    int fd = -1;
    *fp = NULL;
    cmf_status st = cmf__open_regular(path, &fd);
    if (st) return st;
    if (!(*fp = fdopen(fd, "rb"))) {
        int e = errno;
        close(fd);
        return cmf__error(CMF_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    return CMF_OK;
}

cmf_status cmf__read_regular(const char *path, char **out, size_t *len)
{
    FILE *fp = NULL;
    *out = NULL;
    if (len) *len = 0;
    cmf_status st = cmf__fopen_regular(path, &fp);
    return st ? st : read_stream(fp, path, CMF__READ_FILE_MAX, out, len);
}

cmf_status cmf__lock_file(const char *path, cmf__lock *lk)
{
    lk->slot = -1;
    for (int attempt = 0; attempt < 8; attempt++) {
        struct stat st, now;
        int fd = -1;
        cmf_status s = open_regular(path, &st, &fd);
        if (s) return s;
        pthread_mutex_lock(&g_locks_mu);
        int slot = held_slot(st.st_dev, st.st_ino);
        if (slot >= 0) {
            g_locks[slot].depth++;
            pthread_mutex_unlock(&g_locks_mu);
            close(fd);
            lk->slot = slot;
            return CMF_OK;
        }
        pthread_mutex_unlock(&g_locks_mu);
        int wait_s = cmf__lock_wait_seconds();
        int e = flock_wait(fd, LOCK_EX, wait_s);
        if (e) {
            close(fd);
            if (e == EWOULDBLOCK)
                return cmf__error(CMF_ERR_IO,
                                  "%s: another process is writing this file (it held the file's lock for %d s); "
                                  "not writing (CMF_LOCK_WAIT sets how long to wait)",
                                  path, wait_s);
            return cmf__error(CMF_ERR_IO, "%s: cannot lock the file for writing: %s", path, strerror(e));
        }
        /* the name may lead to another file by now (renamed over while we waited) */
        if (stat(path, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
            close(fd);
            continue;
        }
        pthread_mutex_lock(&g_locks_mu);
        for (int i = 0; i < LOCK_SLOTS && slot < 0; i++)
            if (g_locks[i].depth == 0) slot = i;
        if (slot >= 0) {
            g_locks[slot].dev = st.st_dev;
            g_locks[slot].ino = st.st_ino;
            g_locks[slot].fd = fd;
            g_locks[slot].depth = 1;
        }
        pthread_mutex_unlock(&g_locks_mu);
        if (slot < 0) {
            close(fd);
            return cmf__error(CMF_ERR_IO, "%s: more than %d files locked at once", path, LOCK_SLOTS);
        }
        lk->slot = slot;
        return CMF_OK;
    }
    return cmf__error(CMF_ERR_IO, "%s: the file keeps being replaced while waiting for its lock", path);
}

void cmf__unlock_file(cmf__lock *lk)
{
    if (!lk || lk->slot < 0 || lk->slot >= LOCK_SLOTS) return;
    pthread_mutex_lock(&g_locks_mu);
    if (g_locks[lk->slot].depth > 0 && --g_locks[lk->slot].depth == 0) {
        close(g_locks[lk->slot].fd); /* releases the flock */
        g_locks[lk->slot].fd = -1;
    }
    pthread_mutex_unlock(&g_locks_mu);
    lk->slot = -1;
}

bool cmf__lock_covers(const cmf__lock *lk, int fd)
{
    struct stat st;
    if (!lk || lk->slot < 0 || lk->slot >= LOCK_SLOTS || fstat(fd, &st) != 0) return false;
    pthread_mutex_lock(&g_locks_mu);
    bool same = g_locks[lk->slot].depth > 0 && g_locks[lk->slot].dev == st.st_dev && g_locks[lk->slot].ino == st.st_ino;
    pthread_mutex_unlock(&g_locks_mu);
    return same;
}

bool cmf__lock_held(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) return false;
    pthread_mutex_lock(&g_locks_mu);
    bool held = held_slot(st.st_dev, st.st_ino) >= 0;
    pthread_mutex_unlock(&g_locks_mu);
    return held;
}

cmf_status cmf__lock_shared_fd(int fd, const char *path)
{
    struct stat st;
    if (fstat(fd, &st) != 0) return cmf__error(CMF_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return cmf__error(CMF_ERR_IO, "%s: not a regular file (a %s)", path, kind_name(st.st_mode));
    pthread_mutex_lock(&g_locks_mu);
    bool mine = held_slot(st.st_dev, st.st_ino) >= 0;
    pthread_mutex_unlock(&g_locks_mu);
    if (mine) return CMF_OK;
    int wait_s = cmf__lock_wait_seconds();
    int e = flock_wait(fd, LOCK_SH, wait_s);
    if (e == EWOULDBLOCK)
        return cmf__error(CMF_ERR_IO, "%s: another process is writing this file (it held the file's lock for %d s)", path,
                          wait_s);
    return CMF_OK; /* or no lock support: unlocked */
}

/* ---- mappings ------------------------------------------------------------------ */
cmf_status cmf__map_file(const char *path, cmf__mapping *out)
{
    out->data = NULL;
    out->size = 0;
    memset(out->head, 0, sizeof out->head);
    struct stat st;
    int fd = -1;
    cmf_status s = open_regular(path, &st, &fd);
    if (s) return s;
    /* A shared lock while the size is taken and the envelope copied: an
     * in-place writer (append) holds the exclusive lock while it writes, so
     * the size and the first 128 bytes are those of one complete state.
     * Everything else an append touches lies past the old end. Without
     * lock support (some network file systems) the map goes on unlocked. */
    pthread_mutex_lock(&g_locks_mu);
    bool mine = held_slot(st.st_dev, st.st_ino) >= 0;
    pthread_mutex_unlock(&g_locks_mu);
    bool locked = false;
    if (!mine) {
        int wait_s = cmf__lock_wait_seconds();
        int e = flock_wait(fd, LOCK_SH, wait_s);
        if (e == EWOULDBLOCK) {
            close(fd);
            return cmf__error(CMF_ERR_IO, "%s: another process is writing this file (it held the file's lock for %d s)",
                              path, wait_s);
        }
        locked = e == 0;
        if (locked && fstat(fd, &st) != 0) {
            int e2 = errno;
            close(fd);
            return cmf__error(CMF_ERR_IO, "%s: cannot stat: %s", path, strerror(e2));
        }
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
        memcpy(out->head, p, (size_t)st.st_size < sizeof out->head ? (size_t)st.st_size : sizeof out->head);
    }
    out->size = (uint64_t)st.st_size;
    close(fd); /* drops the shared lock */
    return CMF_OK;
}

/* ---- temporaries removed on a fatal signal ----------------------------------- */

enum { TEMP_SLOTS = 16, SLOT_FREE = 0, SLOT_FILLING = 1, SLOT_ARMED = 2 };
static char g_temp_path[TEMP_SLOTS][PATH_MAX];
static atomic_int g_temp_state[TEMP_SLOTS];
static atomic_flag g_handlers_installed = ATOMIC_FLAG_INIT;
static const int CLEANUP_SIGNALS[] = {SIGINT, SIGTERM, SIGHUP};

enum { TAIL_SLOTS = 4 };
static int g_tail_fd[TAIL_SLOTS];
static uint64_t g_tail_end[TAIL_SLOTS];
static atomic_int g_tail_state[TAIL_SLOTS];

static void on_fatal_signal(int sig)
{
    int saved = errno;
    for (int i = 0; i < TAIL_SLOTS; i++)
        if (atomic_load(&g_tail_state[i]) == SLOT_ARMED) {
            if (ftruncate(g_tail_fd[i], (off_t)g_tail_end[i]) == 0) fsync(g_tail_fd[i]);
        }
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

int cmf__tail_register(int fd, uint64_t old_end)
{
    install_handlers();
    for (int i = 0; i < TAIL_SLOTS; i++) {
        int expect = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&g_tail_state[i], &expect, SLOT_FILLING)) continue;
        g_tail_fd[i] = fd;
        g_tail_end[i] = old_end;
        atomic_store(&g_tail_state[i], SLOT_ARMED);
        return i;
    }
    return -1;
}

void cmf__tail_release(int slot)
{
    if (slot >= 0 && slot < TAIL_SLOTS) atomic_store(&g_tail_state[slot], SLOT_FREE);
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
