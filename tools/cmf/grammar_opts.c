/* grammar_opts.c — --grammar, --json-schema, --json: compiles the grammar
 * once per model and gives each answer a fresh matcher state whose logit
 * hook the generation calls. */
#include "grammar_opts.h"
#include "cli.h"
#include "util/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool grammar_opts_check(const char *cmd, const grammar_opts *go)
{
    int n = (go->grammar != NULL) + (go->json_schema != NULL) + go->json;
    if (n > 1) {
        fprintf(stderr, "cmf %s: --grammar, --json-schema and --json exclude each other\n", cmd);
        return false;
    }
    return true;
}

/* The grammar or schema file, a regular file only (a FIFO is refused, not
 * waited on), at most 64 MiB. */
static char *read_all(const char *cmd, const char *opt, const char *path, size_t *len)
{
    FILE *f = NULL;
    if (cmf__fopen_regular(path, &f)) {
        cli_fail(cmd, "%s %s", opt, cmf_last_error());
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        if (cap >= (size_t)64 << 20) {
            cli_fail(cmd, "%s: larger than 64 MiB", path);
            free(b);
            b = NULL;
            break;
        }
        char *nb = realloc(b, cap * 2);
        if (!nb) free(b);
        b = nb;
        cap *= 2;
    }
    if (b && ferror(f)) {
        cli_fail(cmd, "%s: read error", path);
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = n;
    return b;
}

bool grammar_opts_load(const char *cmd, grammar_opts *go, cmf_model *m)
{
    if (!go->grammar && !go->json_schema && !go->json) return true;
    cmf_status st;
    if (go->json) {
        st = cmf_grammar_json_object(m, &go->g);
        if (st) return cli_fail_status(cmd, st), false;
        return true;
    }
    const char *path = go->grammar ? go->grammar : go->json_schema;
    size_t len;
    char *text = read_all(cmd, go->grammar ? "--grammar" : "--json-schema", path, &len);
    if (!text) return false;
    st = go->grammar ? cmf_grammar_compile(m, text, len, &go->g) : cmf_grammar_from_json_schema(m, text, len, &go->g);
    free(text);
    if (st) {
        cli_fail(cmd, "%s: %s", path, cmf_last_error());
        return false;
    }
    return true;
}

bool grammar_opts_hook(const char *cmd, grammar_opts *go, cmf_logit_hook *hook)
{
    if (!go->g) return true;
    cmf_grammar_state_free(go->state);
    go->state = NULL;
    cmf_status st = cmf_grammar_state_new(go->g, &go->state);
    if (st) return cli_fail_status(cmd, st), false;
    *hook = cmf_grammar_state_hook(go->state);
    return true;
}

void grammar_opts_after(const char *cmd, const grammar_opts *go, cmf_finish finish)
{
    if (!go->state || cmf_grammar_state_can_end(go->state)) return;
    fprintf(stderr, "cmf %s: warning: the answer stopped (%s) before the grammar was complete\n", cmd,
            cmf_finish_name(finish));
}

void grammar_opts_free(grammar_opts *go)
{
    cmf_grammar_state_free(go->state);
    cmf_grammar_free(go->g);
    go->state = NULL;
    go->g = NULL;
}
