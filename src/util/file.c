/* file.c — mmap, whole-file reads, atomic temp+rename writes. */
#include "util/file.h"
#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
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

cmf_status cmf__atomic_open(cmf__atomic_file *af, const char *path)
{
    memset(af, 0, sizeof *af);
    size_t n = strlen(path) + 32;
    af->path = strdup(path);
    af->tmp_path = malloc(n);
    if (!af->path || !af->tmp_path) {
        free(af->path);
        free(af->tmp_path);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(af->tmp_path, n, "%s.tmp.%ld", path, (long)getpid());
    af->fp = fopen(af->tmp_path, "wb");
    if (!af->fp) {
        cmf_status st = cmf__error(CMF_ERR_IO, "%s: cannot create: %s", af->tmp_path, strerror(errno));
        free(af->path);
        free(af->tmp_path);
        memset(af, 0, sizeof *af);
        return st;
    }
    return CMF_OK;
}

cmf_status cmf__atomic_commit(cmf__atomic_file *af)
{
    cmf_status st = CMF_OK;
    if (fflush(af->fp) != 0 || fsync(fileno(af->fp)) != 0)
        st = cmf__error(CMF_ERR_IO, "%s: write failed: %s", af->tmp_path, strerror(errno));
    if (fclose(af->fp) != 0 && st == CMF_OK)
        st = cmf__error(CMF_ERR_IO, "%s: close failed: %s", af->tmp_path, strerror(errno));
    af->fp = NULL;
    if (st == CMF_OK && rename(af->tmp_path, af->path) != 0)
        st = cmf__error(CMF_ERR_IO, "%s: cannot rename into place: %s", af->path, strerror(errno));
    if (st != CMF_OK) remove(af->tmp_path);
    free(af->path);
    free(af->tmp_path);
    memset(af, 0, sizeof *af);
    return st;
}

void cmf__atomic_abort(cmf__atomic_file *af)
{
    if (!af || !af->tmp_path) return;
    if (af->fp) fclose(af->fp);
    remove(af->tmp_path);
    free(af->path);
    free(af->tmp_path);
    memset(af, 0, sizeof *af);
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
