/* cli.h — what every subcommand shares: the command table entry, number
 * parsing, error printing and the terminal progress bar (options are read
 * by opts.h). Subcommands live in cmd_<name>.c and return the process exit
 * status: 0 success, 1 failure at run time, 2 usage error (opts.h). */
#ifndef CMF_CLI_H
#define CMF_CLI_H

#include "cmf.h"
#include <stdbool.h>
#include <stdint.h>

typedef int (*cli_cmd_fn)(int argc, char **argv);

/* Prints "cmf <cmd>: <message>\n" to stderr; returns 1 (the exit status). */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "cmf <cmd>: <cmf_last_error()>" for a failed status; returns 1. */
int cli_fail_status(const char *cmd, cmf_status st);
/* Strict number parsing; false (and an error printed) when not a number. */
bool cli_int(const char *cmd, const char *flag, const char *s, long long *out);
bool cli_double(const char *cmd, const char *flag, const char *s, double *out);
/* True when `--help`/`-h` is among the arguments. */
bool cli_wants_help(int argc, char **argv);

/* Progress bar on stderr, drawn only when stderr is a terminal and not
 * quiet. `label` is borrowed for the bar's lifetime. */
typedef struct cli_progress {
    const char *label;
    uint64_t total;
    int last_permille;
    bool enabled;
} cli_progress;
void cli_progress_start(cli_progress *p, const char *label, uint64_t total, bool quiet);
void cli_progress_update(cli_progress *p, uint64_t done);
void cli_progress_end(cli_progress *p);
/* A library progress callback (ctx: a cli_progress) driving the bar. */
void cli_progress_cb(void *ctx, uint64_t done, uint64_t total);
/* `s` as printable text for a terminal: control bytes (C0, DEL) as \xNN,
 * C1 controls as \u00NN, a backslash doubled; a static buffer (8 rotate,
 * so up to 8 may be used in one call), cut with "..." past ~1000 bytes.
 * For ids, names and other text a file supplies. NULL reads as "". */
const char *cli_esc(const char *s);
/* "<path>.sig", malloc'd (the caller frees it); NULL when out of memory. */
char *cli_sig_path(const char *path);

#endif
