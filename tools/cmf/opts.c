/* opts.c — the table-driven option parser and --help printer (opts.h).
 * It knows no command: every name, alias, value kind and help line comes
 * from the caller's table, so help and parsing read the same rows. */
#include "opts.h"
#include "cli.h"

#include <math.h>
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

/* A range bound: integers without exponent, others as %g. */
static void print_bound(double v)
{
    if (v == floor(v) && fabs(v) < 1e15) printf("%.0f", v);
    else printf("%g", v);
}

static void print_range(const opt_spec *o)
{
    fputs(" (", stdout);
    print_bound(o->min);
    if (o->max >= OPT_NO_MAX) fputs(" or more)", stdout);
    else fputs("..", stdout), print_bound(o->max), fputc(')', stdout);
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
        if (o->ranged) print_range(o);
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
static int out_of_range(const char *cmd, const opt_spec *o, const char *as, const char *v)
{
    fprintf(stderr, "cmf %s: %s: '%s' is out of range (", cmd, as, v);
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, o->min == floor(o->min) && fabs(o->min) < 1e15 ? "%.0f" : "%g", o->min);
    snprintf(hi, sizeof hi, o->max == floor(o->max) && fabs(o->max) < 1e15 ? "%.0f" : "%g", o->max);
    if (o->max >= OPT_NO_MAX) fprintf(stderr, "%s or more)\n", lo);
    else fprintf(stderr, "%s..%s)\n", lo, hi);
    return CLI_EXIT_USAGE;
}

/* True when the number of a ranged row lies outside its range. */
static bool outside(const opt_spec *o, double x) { return o->ranged && (x < o->min || x > o->max); }

static int store(const char *cmd, const opt_spec *o, const char *as, const char *v)
{
    long long n;
    double d;
    if (o->kind == OPT_INT || o->kind == OPT_I32 || o->kind == OPT_U64) {
        if (!cli_int(cmd, as, v, &n)) return CLI_EXIT_USAGE;
        if (outside(o, (double)n)) return out_of_range(cmd, o, as, v);
    } else if (o->kind == OPT_FLOAT) {
        if (!cli_double(cmd, as, v, &d)) return CLI_EXIT_USAGE;
        if (outside(o, d)) return out_of_range(cmd, o, as, v);
    }
    switch (o->kind) {
    case OPT_FLAG: *(bool *)o->dest = true; return 0;
    case OPT_STR: *(const char **)o->dest = v; return 0;
    case OPT_INT: *(long long *)o->dest = n; return 0;
    case OPT_I32:
        if (n < INT32_MIN || n > INT32_MAX) return cli_fail(cmd, "%s: '%s' is out of range", as, v), CLI_EXIT_USAGE;
        *(int32_t *)o->dest = (int32_t)n;
        return 0;
    case OPT_U64:
        *(uint64_t *)o->dest = (uint64_t)n;
        return 0;
    case OPT_FLOAT:
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

/* Edit distance of a and b (both short: option names), capped at 9. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40) return 9;
    size_t row[41];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb] < 9 ? row[lb] : 9;
}

const char *opts_suggest(const opts_cmd *c, const char *arg)
{
    const char *best = NULL, *prefix = NULL;
    size_t best_d = 3, n_prefix = 0, la = strlen(arg);
    for (size_t i = 0; i < c->n_spec; i++) {
        const opt_spec *o = &c->spec[i];
        if (o->kind == OPT_TEXT) continue;
        const char *names[2] = {o->name, o->alias};
        for (int k = 0; k < 2; k++) {
            if (!names[k] || strlen(names[k]) < 3) continue; /* "-x": any typo is 1 away */
            size_t d = distance(arg, names[k]);
            if (d < best_d) best_d = d, best = names[k];
            if (la > 3 && !strncmp(names[k], arg, la) && prefix != names[k]) prefix = names[k], n_prefix++;
        }
    }
    if (best) return best;
    return n_prefix == 1 ? prefix : NULL;
}

static int unknown(const opts_cmd *c, const char *a)
{
    const char *near = opts_suggest(c, a);
    if (near) cli_fail(c->name, "unknown option '%s'; did you mean '%s'? (see cmf %s --help)", a, near, c->name);
    else cli_fail(c->name, "unknown option '%s' (see cmf %s --help)", a, c->name);
    return CLI_EXIT_USAGE;
}

int opts_parse(opts_cmd *c, int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        opts_help(c);
        return CLI_EXIT_OK;
    }
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--version")) {
            printf("cmf %s\n", cmf_version());
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
        const char *eq = !only_pos && a[0] == '-' && a[1] == '-' ? strchr(a, '=') : NULL;
        char name[64];
        if (eq) { /* --name=value */
            size_t nl = (size_t)(eq - a);
            if (nl >= sizeof name || !(memcpy(name, a, nl), name[nl] = 0, o = find(c, name))) {
                if (nl < sizeof name) return unknown(c, name);
                return unknown(c, a);
            }
            if (!o->arg) {
                cli_fail(c->name, "option %s takes no value (see cmf %s --help)", name, c->name);
                return CLI_EXIT_USAGE;
            }
            int rc = store(c->name, o, name, eq + 1);
            if (rc) return rc;
            continue;
        }
        if (!only_pos && a[0] == '-' && a[1] && !(o = find(c, a)) && !(c->dash_text && a[1] != '-'))
            return unknown(c, a);
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
