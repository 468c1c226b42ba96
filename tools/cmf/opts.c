/* opts.c — the table-driven option parser and --help printer (opts.h).
 * It knows no command: every name, alias, value kind and help line comes
 * from the caller's table, so help and parsing read the same rows. */
#include "opts.h"
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int opts_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cmf %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see cmf %s --help)\n", cmd);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

/* Width of an option's left column: "  -a, --name ARG". */
static size_t left_len(const opt_spec *o)
{
    return 2 + (o->alias ? strlen(o->alias) + 2 : 0) + strlen(o->name) + (o->arg ? strlen(o->arg) + 1 : 0);
}

/* Prints `text` with every line after the first indented by `col`. */
static void put_indented(const char *text, size_t col)
{
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        fwrite(p, 1, len, stdout);
        if (!nl) break;
        p = nl + 1;
        printf("\n%*s", (int)col, "");
    }
}

void opts_help(const opts_cmd *c)
{
    if (c->intro) fputs(c->intro, stdout);
    if (c->head) fputs(c->head, stdout);
    size_t group = 0; /* first row of the current group (rows between OPT_TEXT rows align together) */
    size_t col = 0;
    for (size_t i = 0; i < c->n_spec; i++) {
        const opt_spec *o = &c->spec[i];
        if (o->kind == OPT_TEXT) {
            fputs(o->help, stdout);
            group = i + 1;
            continue;
        }
        if (i == group) {
            col = 0;
            for (size_t j = i; j < c->n_spec && c->spec[j].kind != OPT_TEXT; j++) {
                size_t l = left_len(&c->spec[j]);
                if (l > col && l <= 24) col = l;
            }
            col += 2;
        }
        size_t l = left_len(o);
        bool long_alias = o->alias && o->alias[1] == '-'; /* "--name, --alias"; a short one goes first */
        const char *first = o->alias && !long_alias ? o->alias : o->name;
        const char *second = !o->alias ? NULL : long_alias ? o->alias : o->name;
        printf("  %s%s%s%s%s", first, second ? ", " : "", second ? second : "", o->arg ? " " : "",
               o->arg ? o->arg : "");
        if (l + 1 > col) printf("\n%*s", (int)col, "");
        else printf("%*s", (int)(col - l), "");
        put_indented(o->help, col);
        if (o->def) printf("%s(default: %s)", o->help[0] && o->help[strlen(o->help) - 1] == '\n' ? "" : " ", o->def);
        fputc('\n', stdout);
    }
    if (c->tail) fputs(c->tail, stdout);
}

static const opt_spec *find(const opts_cmd *c, const char *arg)
{
    for (size_t i = 0; i < c->n_spec; i++) {
        const opt_spec *o = &c->spec[i];
        if (o->kind != OPT_TEXT && (!strcmp(arg, o->name) || (o->alias && !strcmp(arg, o->alias)))) return o;
    }
    return NULL;
}

/* Stores `v` (NULL for a flag) given as option `as`; 0 or CLI_EXIT_USAGE. */
static int store(const char *cmd, const opt_spec *o, const char *as, const char *v)
{
    long long n;
    double d;
    switch (o->kind) {
    case OPT_FLAG: *(bool *)o->dest = true; return 0;
    case OPT_STR: *(const char **)o->dest = v; return 0;
    case OPT_INT: return cli_int(cmd, as, v, (long long *)o->dest) ? 0 : CLI_EXIT_USAGE;
    case OPT_I32:
        if (!cli_int(cmd, as, v, &n)) return CLI_EXIT_USAGE;
        if (n < INT32_MIN || n > INT32_MAX) return cli_fail(cmd, "%s: '%s' is out of range", as, v), CLI_EXIT_USAGE;
        *(int32_t *)o->dest = (int32_t)n;
        return 0;
    case OPT_U64:
        if (!cli_int(cmd, as, v, &n)) return CLI_EXIT_USAGE;
        *(uint64_t *)o->dest = (uint64_t)n;
        return 0;
    case OPT_FLOAT:
        if (!cli_double(cmd, as, v, &d)) return CLI_EXIT_USAGE;
        *(float *)o->dest = (float)d;
        return 0;
    case OPT_LIST: {
        opt_list *l = o->dest;
        if (l->n == l->max) return cli_fail(cmd, "at most %zu %s values", l->max, o->name), CLI_EXIT_USAGE;
        l->v[l->n++] = v;
        return 0;
    }
    case OPT_CALL: return o->fn(cmd, o->dest, o->name, v) ? CLI_EXIT_USAGE : 0;
    case OPT_TEXT: break;
    }
    return CLI_EXIT_USAGE;
}

int opts_parse(opts_cmd *c, int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        opts_help(c);
        return CLI_EXIT_OK;
    }
    c->n_pos = 0;
    bool only_pos = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const opt_spec *o = NULL;
        if (!only_pos && !strcmp(a, "--")) {
            only_pos = true;
            continue;
        }
        if (!only_pos && a[0] == '-' && a[1] && !(o = find(c, a)) && !(c->dash_text && a[1] != '-')) {
            cli_fail(c->name, "unknown option '%s' (see cmf %s --help)", a, c->name);
            return CLI_EXIT_USAGE;
        }
        if (!o) {
            if (c->n_pos == c->max_pos) {
                cli_fail(c->name, "unexpected argument '%s' (see cmf %s --help)", a, c->name);
                return CLI_EXIT_USAGE;
            }
            c->pos[c->n_pos++] = a;
            continue;
        }
        const char *v = NULL;
        if (o->arg) {
            if (i + 1 >= argc) {
                cli_fail(c->name, "option %s needs a value (see cmf %s --help)", a, c->name);
                return CLI_EXIT_USAGE;
            }
            v = argv[++i];
        }
        int rc = store(c->name, o, a, v);
        if (rc) return rc;
    }
    return OPTS_RUN;
}
