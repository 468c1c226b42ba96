/* cmd_detokenize.c — `cmf detokenize SRC --ids 1,2,3`: decodes token ids
 * with the tokenizer's decoder and prints the text exactly (no newline is
 * added), as HF's tokenizer.decode would return it. */
#include "cli.h"
#include "commands.h"
#include "text/tokenizer.h"
#include "opts.h"
#include "textsrc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *HELP =
    "usage: cmf detokenize SRC --ids ID[,ID...] [--skip-special]\n"
    "\n"
    "Decode token ids and print the text exactly as the tokenizer's decoder\n"
    "produces it, with no newline added.\n"
    "\n"
    "SRC is a .cmf file (its vocab section), a tokenizer.json file, or a\n"
    "directory holding tokenizer.json.\n"
    "\n";
static const char *TAIL =
    "\n"
    "Exit status: 0 on success, 1 on an error (message on stderr), 2 a usage error.\n";

static bool parse_ids(const char *cmd, const char *s, int32_t **ids, size_t *n)
{
    size_t cap = 16;
    *n = 0;
    *ids = malloc(cap * sizeof **ids);
    if (!*ids) return false;
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '[' || *p == ']' || *p == '\n' || *p == '\t') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) {
            cli_fail(cmd, "--ids: '%.20s' is not a token id", p);
            return false;
        }
        if (*n == cap) {
            int32_t *q = realloc(*ids, 2 * cap * sizeof **ids);
            if (!q) return false;
            *ids = q;
            cap *= 2;
        }
        (*ids)[(*n)++] = (int32_t)v;
        p = end;
        if (*p && *p != ',' && *p != ' ' && *p != ']' && *p != '\n' && *p != '\t') {
            cli_fail(cmd, "--ids: unexpected '%c'", *p);
            return false;
        }
    }
    return true;
}

int cmd_detokenize(int argc, char **argv)
{
    const char *cmd = "detokenize";
    const char *src = NULL, *list = NULL;
    bool skip = false;
    const opt_spec spec[] = {
        {"--ids", NULL, OPT_STR, &list, "LIST",
         "comma-separated token ids (spaces and a surrounding\n"
         "[ ] are accepted, so a JSON array works); ids the\n"
         "vocabulary does not know are dropped, as HF does", NULL, NULL},
        {"--skip-special", NULL, OPT_FLAG, &skip, NULL, "leave out special tokens (skip_special_tokens=True)", NULL,
         NULL},
    };
    opts_cmd c = {.name = cmd, .head = HELP, .tail = TAIL, .spec = spec, .n_spec = OPTS_N(spec), .pos = &src,
                  .max_pos = 1, .dash_text = true};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!src || !list) return opts_usage(cmd, "SRC and --ids are required");
    int32_t *ids = NULL;
    size_t n = 0;
    if (!parse_ids(cmd, list, &ids, &n)) {
        free(ids);
        return CLI_EXIT_USAGE;
    }
    textsrc ts;
    cmf_status st = textsrc_open(src, &ts);
    cmf__tok *tok = NULL;
    if (!st) st = cmf__tok_load(ts.tokenizer_json, ts.tokenizer_json_len, src, &tok);
    textsrc_free(&ts);
    char *text = NULL;
    size_t len = 0;
    if (!st) st = cmf__tok_decode(tok, ids, n, skip, &text, &len);
    int rc = 0;
    if (st) rc = cli_fail_status(cmd, st);
    else if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0)
        rc = cli_fail(cmd, "writing standard output failed");
    free(text);
    free(ids);
    cmf__tok_free(tok);
    return rc;
}
