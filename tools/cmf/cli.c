/* cli.c — shared helpers for the subcommands: errors, numbers, the
 * progress bar and the detached-signature path. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_fail(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cmf %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int cli_fail_status(const char *cmd, cmf_status st)
{
    const char *msg = cmf_last_error();
    return cli_fail(cmd, "%s", msg && *msg ? msg : cmf_status_text(st));
}

bool cli_int(const char *cmd, const char *flag, const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) {
        cli_fail(cmd, "%s: '%s' is not an integer", flag, s);
        return false;
    }
    *out = v;
    return true;
}

bool cli_double(const char *cmd, const char *flag, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) { /* nan and inf are no sampling parameter */
        cli_fail(cmd, "%s: '%s' is not a finite number", flag, s);
        return false;
    }
    *out = v;
    return true;
}

bool cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return true;
    return false;
}

void cli_progress_start(cli_progress *p, const char *label, uint64_t total, bool quiet)
{
    p->label = label;
    p->total = total ? total : 1;
    p->last_permille = -1;
    p->enabled = !quiet && isatty(2);
}

void cli_progress_update(cli_progress *p, uint64_t done)
{
    if (!p->enabled) return;
    int pm = (int)(done * 1000 / p->total);
    if (pm > 1000) pm = 1000;
    if (pm == p->last_permille) return;
    p->last_permille = pm;
    int width = 30, fill = pm * width / 1000;
    fprintf(stderr, "\r%s [", p->label);
    for (int i = 0; i < width; i++) fputc(i < fill ? '#' : '.', stderr);
    fprintf(stderr, "] %5.1f%%", pm / 10.0);
    fflush(stderr);
}

void cli_progress_end(cli_progress *p)
{
    if (!p->enabled) return;
    cli_progress_update(p, p->total);
    fputc('\n', stderr);
}

void cli_progress_cb(void *ctx, uint64_t done, uint64_t total)
{
    cli_progress *p = ctx;
    p->total = total ? total : 1;
    cli_progress_update(p, done);
}

char *cli_sig_path(const char *path)
{
    size_t n = strlen(path) + 5;
    char *sig = malloc(n);
    if (sig) snprintf(sig, n, "%s.sig", path);
    return sig;
}

/* Rotating buffers: a few escaped strings may be live in one printf. */
const char *cli_esc(const char *s)
{
    static char buf[8][1024];
    static unsigned next;
    char *o = buf[next++ % 8];
    size_t k = 0, cap = sizeof buf[0];
    if (!s) s = "";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (k + 16 > cap) {
            memcpy(o + k, "...", 4);
            return o;
        }
        /* C0 controls, DEL, C1 controls (U+0080..U+009F: C2 80..C2 9F) */
        if (*p < 0x20 || *p == 0x7f) {
            k += (size_t)snprintf(o + k, cap - k, "\\x%02x", *p);
        } else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
            k += (size_t)snprintf(o + k, cap - k, "\\u%04x", p[1]);
            p++;
        } else if (*p == '\\') {
            o[k++] = '\\';
            o[k++] = '\\';
        } else {
            o[k++] = (char)*p;
        }
    }
    o[k] = 0;
    return o;
}
