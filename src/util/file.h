/* file.h — read-only mappings, whole-file reads, and atomic writes
 * (temporary file in the same folder, fsync, rename): nothing is ever left
 * half-written under the final name, no output replaces a writer's input
 * or a non-regular file, and temporaries go away on SIGINT/SIGTERM/SIGHUP. */
#ifndef CMF_UTIL_FILE_H
#define CMF_UTIL_FILE_H

#include "cmf.h"
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct cmf__mapping {
    const uint8_t *data; /* NULL for an empty file */
    uint64_t size;
    uint8_t head[128];   /* the first min(size, 128) bytes as they were when mapped */
} cmf__mapping;

/* Maps `path` read-only (MAP_PRIVATE). Refuses anything but a regular file
 * before it could block (a FIFO is opened with O_NONBLOCK). The size and
 * `head` are taken under a shared flock (waiting up to
 * cmf__lock_wait_seconds for an in-place writer's exclusive lock, skipped
 * when this process holds that lock), so they describe one complete state
 * of a file that is appended to in place. Errors name the path. */
cmf_status cmf__map_file(const char *path, cmf__mapping *out);
void cmf__unmap(cmf__mapping *m);

/* In-place writers (append-only growth) hold an exclusive flock on the file
 * for the whole read-modify-write; readers (cmf__map_file) take a shared one
 * while they read the envelope. A lock already held by another process is
 * waited for up to cmf__lock_wait_seconds (env CMF_LOCK_WAIT, seconds,
 * 0..3600; default CMF__LOCK_WAIT_DEFAULT), then refused with an error
 * naming the file. Within one process the lock is re-entrant (counted by
 * file identity), and this process's readers of a file it holds locked do
 * not wait for themselves. Only regular files are locked. */
#define CMF__LOCK_WAIT_DEFAULT 10
typedef struct cmf__lock {
    int slot; /* -1: not held */
} cmf__lock;
cmf_status cmf__lock_file(const char *path, cmf__lock *lk);
void cmf__unlock_file(cmf__lock *lk); /* lk NULL or not held: nothing */
bool cmf__lock_held(const char *path);
bool cmf__lock_covers(const cmf__lock *lk, int fd); /* fd is the locked file */
int cmf__lock_wait_seconds(void);
/* A shared lock on the open regular file `fd` (held until it is closed),
 * for a reader that reads the whole file (a signature's SHA-256); waits
 * like cmf__map_file, and takes none when this process holds the
 * exclusive one. */
cmf_status cmf__lock_shared_fd(int fd, const char *path);

/* An in-place append's tail: while armed, a SIGINT, SIGTERM or SIGHUP
 * (the handlers of cmf__temp_register) truncates `fd` back to `old_end`
 * before the process dies, so an interrupted append leaves the file as it
 * was. Arm before writing past the old end; release before the envelope
 * write that makes the tail live. -1 when no slot is free. */
int cmf__tail_register(int fd, uint64_t old_end);
void cmf__tail_release(int slot);

/* "dir/name", malloc'd; NULL when out of memory. */
char *cmf__path_join(const char *dir, const char *name);

/* Reads a whole file into a malloc'd buffer with a trailing NUL (not
 * counted in *len). Caller frees. */
cmf_status cmf__read_file(const char *path, char **out, size_t *len);
/* Whole-file reads stop at this size (configs, tokenizer.json, templates:
 * the largest real tokenizer.json is ~35 MB): a larger or endless source
 * (/dev/zero) is refused with CMF_ERR_BOUNDS instead of eating memory. */
#define CMF__READ_FILE_MAX ((size_t)256 << 20)
/* The same with another limit (tests). */
cmf_status cmf__read_file_max(const char *path, size_t max, char **out, size_t *len);
/* cmf__read_file opens any kind of file without blocking (a FIFO nobody
 * writes to reads as empty, /dev/zero hits the limit). A file a user names
 * (a command-line path, or a file in a folder the user names) goes through
 * these instead, which refuse anything but a regular file before it could
 * block: open with O_NONBLOCK, fstat the descriptor, refuse a FIFO, a
 * device, a socket or a directory with CMF_ERR_IO "PATH: not a regular
 * file (a FIFO)", then clear O_NONBLOCK. "-" is an ordinary name here: a
 * command that reads standard input for "-" tests for it first (standard
 * input is already open, so it cannot block an open). open_regular gives
 * the descriptor (O_CLOEXEC; the caller closes it), fopen_regular a "rb"
 * stream, read_regular the whole file as cmf__read_file does. */
cmf_status cmf__open_regular(const char *path, int *fd);
cmf_status cmf__fopen_regular(const char *path, FILE **fp);
cmf_status cmf__read_regular(const char *path, char **out, size_t *len);

/* The one check every writer makes on its output, before it creates a
 * temporary and again just before it renames into place: `path`, when it
 * exists, must be a regular file (or a symlink to one), never a directory,
 * FIFO, socket or device node, which the rename would replace; and it must
 * not be the same file (device and inode, symlinks followed) as any of the
 * `n_inputs` paths in `inputs`, the writer's own sources (NULL entries and
 * inputs that do not exist are skipped). Errors (CMF_ERR_IO, CMF_ERR_ARG)
 * name the output and the input; nothing is touched. */
cmf_status cmf__output_check(const char *path, const char *const *inputs, size_t n_inputs);

/* Temporary files removed when the process dies of SIGINT, SIGTERM or
 * SIGHUP. register copies `path` (up to PATH_MAX) into one of 16 slots
 * and returns the slot, or -1 when none is free (the file is then not
 * cleaned up on a signal). The first register installs a handler for each
 * of the three signals whose disposition is still SIG_DFL (an ignored
 * signal, or a handler of the program's own, is left alone); the handler
 * unlinks every registered path with async-signal-safe calls, restores
 * SIG_DFL and re-raises, so the exit status is the signal's. Register a
 * path before creating the file; release the slot after the file was
 * removed or renamed (release(-1) does nothing). SIGKILL cannot be caught:
 * it leaves the temporaries ("<output>.tmp.<pid>" and
 * "<output>.tmp.<pid>.blob") behind. */
int cmf__temp_register(const char *path);
void cmf__temp_release(int slot);

/* Atomic writer: open checks the output (cmf__output_check without
 * inputs) and creates "<path>.tmp.<pid>" beside `path`, registered for
 * removal on a signal; commit flushes, fsyncs, checks the output again and
 * renames over `path`; abort removes the temporary. */
typedef struct cmf__atomic_file {
    FILE *fp;
    char *path;
    char *tmp_path;
    int temp_slot; /* cmf__temp_register's slot, -1 = none */
} cmf__atomic_file;
cmf_status cmf__atomic_open(cmf__atomic_file *af, const char *path);
cmf_status cmf__atomic_commit(cmf__atomic_file *af);
void cmf__atomic_abort(cmf__atomic_file *af);
/* pwrite of all `len` bytes at `off` (retries short writes and EINTR);
 * errors name `path` and the offset. */
cmf_status cmf__pwrite_all(int fd, const void *data, uint64_t len, uint64_t off, const char *path);

/* fwrite with an error naming `what` (the file). */
cmf_status cmf__write_all(FILE *fp, const void *data, size_t len, const char *what);

#endif
