/* grammar_opts.h — constrained decoding on the command line: --grammar
 * FILE (GBNF), --json-schema FILE and --json (any JSON object) for cmf run
 * and cmf chat, turned into the logit hook of each answer (grammar_opts.c). */
#ifndef CMF_TOOLS_GRAMMAR_OPTS_H
#define CMF_TOOLS_GRAMMAR_OPTS_H

#include "cmf.h"
#include "opts.h"
#include <stdbool.h>

typedef struct grammar_opts {
    const char *grammar, *json_schema; /* file paths */
    bool json;
    cmf_grammar *g;                    /* once loaded */
    cmf_grammar_state *state;          /* the current answer's */
} grammar_opts;

#define GRAMMAR_OPTS_SPEC(go)                                                                                       \
    {"", NULL, OPT_TEXT, NULL, NULL, "\nconstrained output (one of):\n", NULL, NULL},                              \
        {"--grammar", NULL, OPT_STR, &(go)->grammar, "FILE",                                                       \
         "every answer matches the GBNF grammar in FILE (rule root)", NULL, NULL},                                 \
        {"--json-schema", NULL, OPT_STR, &(go)->json_schema, "FILE",                                               \
         "every answer is JSON valid against the JSON Schema in FILE\n"                                           \
         "(the subset docs/CONSTRAINED.md lists; others are an error)", NULL, NULL},                               \
        {"--json", NULL, OPT_FLAG, &(go)->json, NULL, "every answer is a JSON object", NULL, NULL}

/* Usage check after parsing: at most one of the three; false (message
 * printed) is a usage error. */
bool grammar_opts_check(const char *cmd, const grammar_opts *go);
/* Reads and compiles the grammar for model m when one was asked for;
 * false (message naming the file printed) on failure. */
bool grammar_opts_load(const char *cmd, grammar_opts *go, cmf_model *m);
/* A fresh state for the next answer and its hook in *hook (left as is
 * when no grammar was asked for); false (message printed) on failure. */
bool grammar_opts_hook(const char *cmd, grammar_opts *go, cmf_logit_hook *hook);
/* After an answer: warns when it stopped before the grammar was complete
 * (finish length, stop or cancel). */
void grammar_opts_after(const char *cmd, const grammar_opts *go, cmf_finish finish);
void grammar_opts_free(grammar_opts *go);

#endif
