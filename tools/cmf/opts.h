/* opts.h — the one option parser of the subcommands: each command declares
 * a table of opt_spec (name, alias, kind, where the value goes, help) and
 * opts_parse reads argv from it and prints --help from it, so the option
 * list of --help is the table and cannot drift from what is accepted.
 * Exit statuses (cmf --help): 0 success, 1 failure at run time, 2 usage. */
#ifndef CMF_TOOLS_OPTS_H
#define CMF_TOOLS_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };

typedef enum opt_kind {
    OPT_FLAG,  /* bool *: set true; takes no value */
    OPT_STR,   /* const char **: the value (borrowed from argv) */
    OPT_INT,   /* long long *: a base-10 integer */
    OPT_I32,   /* int32_t *: a base-10 integer in int32 range */
    OPT_U64,   /* uint64_t *: a base-10 integer (negative wraps, as strtoll did) */
    OPT_FLOAT, /* float *: a number */
    OPT_LIST,  /* opt_list *: repeatable; each value appended */
    OPT_CALL,  /* fn(dest, name, value): value NULL when arg is NULL */
    OPT_TEXT,  /* not an option: `help` printed as is in the list (a heading) */
} opt_kind;

/* A repeatable option's values, in order; at most `max`. */
typedef struct opt_list {
    const char **v;
    size_t n, max;
} opt_list;

/* Returns 0, or prints "cmf CMD: ..." and returns nonzero (a usage error). */
typedef int (*opt_fn)(const char *cmd, void *dest, const char *name, const char *value);

typedef struct opt_spec {
    const char *name;  /* "--key" */
    const char *alias; /* "-k", or NULL */
    opt_kind kind;
    void *dest;        /* see opt_kind */
    const char *arg;   /* the value's name in help ("N"); NULL for OPT_FLAG */
    const char *help;  /* may hold '\n': continuation lines are indented */
    const char *def;   /* printed as "(default: DEF)" after help, or NULL */
    opt_fn fn;         /* OPT_CALL only */
    bool ranged;       /* a number kind with a range: min..max, checked and shown in help */
    double min, max;   /* inclusive; max OPT_NO_MAX: no upper bound */
} opt_spec;

/* Trailing designators of a numeric row: its range, checked by opts_parse
 * (exit 2 naming the range) and printed by --help as "(MIN..MAX)". */
#define OPT_NO_MAX 1e300
#define OPT_RANGE(lo, hi) .ranged = true, .min = (lo), .max = (hi)

/* One command's command line: the prose of its --help around the table. */
typedef struct opts_cmd {
    const char *name;     /* "sign" */
    const char *intro;    /* printed before head, or NULL */
    const char *head;     /* usage line(s) and description, printed before the options */
    const char *tail;     /* notes printed after them, or NULL */
    const opt_spec *spec;
    size_t n_spec;
    const char **pos;     /* positional arguments, in order */
    size_t max_pos;       /* more is a usage error */
    size_t n_pos;         /* out: how many were given */
    bool dash_text;       /* an unknown "-x" (one dash) is a positional (TEXT) */
} opts_cmd;

#define OPTS_N(a) (sizeof(a) / sizeof((a)[0]))
/* opts_parse's result when the command should go on. */
#define OPTS_RUN (-1)

/* With --help or -h anywhere: prints the help to stdout, returns 0; with
 * --version: prints "cmf VERSION", returns 0. Otherwise stores every
 * option (a value as the next argument or as --name=value), collects
 * positionals ("-" is one; after "--" everything is), and returns
 * OPTS_RUN; on an unknown option (with the nearest known one as "did you
 * mean"), a missing, malformed or out-of-range value or one positional
 * too many prints an error naming it and returns CLI_EXIT_USAGE. */
int opts_parse(opts_cmd *c, int argc, char **argv);
/* Prints the help of `c` (intro, head, the option list from the table,
 * tail) to stdout. */
void opts_help(const opts_cmd *c);
/* The known option nearest to `arg` (edit distance at most 2, or a unique
 * prefix), or NULL. */
const char *opts_suggest(const opts_cmd *c, const char *arg);
/* Prints "cmf CMD: <message> (see cmf CMD --help)" to stderr; returns
 * CLI_EXIT_USAGE. */
int opts_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
