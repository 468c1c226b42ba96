/* cmd_tokenize.c — `cmf tokenize SRC [TEXT | --text-file F | --jsonl F]`:
 * encodes text with the tokenizer of a .cmf file, a tokenizer.json or a
 * directory holding one, and prints the ids (or pieces) as a JSON array.
 * --jsonl loads once and encodes one JSON string per input line. */
#include "cli.h"
#include "commands.h"
#include "text/tokenizer.h"
#include "opts.h"
#include "textsrc.h"
#include "util/buf.h"
#include "util/file.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *HELP =
    "usage: cmf tokenize SRC [TEXT | --text-file F | --jsonl F] [--special] [--pieces]\n"
    "\n"
    "Encode text with a tokenizer and print the token ids as a JSON array\n"
    "on one line, e.g. [9707,11,1879,0].\n"
    "\n"
    "SRC is a .cmf file (its vocab section), a tokenizer.json file, or a\n"
    "directory holding tokenizer.json. The text is TEXT, or the bytes of\n"
    "--text-file F (exactly, no newline stripped), or standard input when\n"
    "neither is given.\n"
    "\n";
static const char *TAIL =
    "\n"
    "Exit status: 0 on success, 1 on an error (message on stderr), 2 a usage error.\n";

static void put_json_string(FILE *out, const char *s, size_t len)
{
    fputc('"', out);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c == '\n') fputs("\\n", out);
        else if (c == '\r') fputs("\\r", out);
        else if (c == '\t') fputs("\\t", out);
        else if (c < 0x20 || c == 0x7f) fprintf(out, "\\u%04x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

static void print_result(FILE *out, const cmf__tok *tok, const cmf__tok_ids *ids, bool pieces)
{
    fputc('[', out);
    for (size_t i = 0; i < ids->n; i++) {
        if (i) fputs(", ", out); /* as `cmf run --ids` prints them */
        if (pieces) {
            const char *p = cmf__tok_piece(tok, ids->ids[i]);
            put_json_string(out, p ? p : "", p ? strlen(p) : 0);
        } else fprintf(out, "%d", ids->ids[i]);
    }
    fputs("]\n", out);
}

static cmf_status read_all(FILE *fp, cmf__buf *b)
{
    char chunk[65536];
    size_t n;
    cmf_status st = CMF_OK;
    while (!st && (n = fread(chunk, 1, sizeof chunk, fp)) > 0) st = cmf__buf_append(b, chunk, n);
    if (!st && ferror(fp)) st = cmf__error(CMF_ERR_IO, "reading standard input failed");
    return st;
}

static int run_jsonl(const char *cmd, const cmf__tok *tok, const char *path, bool special, bool pieces)
{
    FILE *fp = stdin; /* "-"; a named file must be a regular one (a FIFO is refused, not waited on) */
    if (strcmp(path, "-") && cmf__fopen_regular(path, &fp)) return cli_fail(cmd, "--jsonl %s", cmf_last_error());
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    size_t lineno = 0;
    int rc = 0;
    cmf__tok_ids ids = {0};
    while ((n = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n == 0) continue;
        json_error_t e;
        json_t *v = json_loadb(line, (size_t)n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
        if (!v || !json_is_string(v)) {
            json_decref(v);
            rc = cli_fail(cmd, "%s:%zu: expected a JSON string", path, lineno);
            break;
        }
        ids.n = 0;
        cmf_status st = cmf__tok_encode(tok, json_string_value(v), json_string_length(v), special, &ids);
        json_decref(v);
        if (st) {
            rc = cli_fail_status(cmd, st);
            break;
        }
        print_result(stdout, tok, &ids, pieces);
    }
    free(line);
    cmf__tok_ids_free(&ids);
    if (fp != stdin) fclose(fp);
    return rc;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *cmd = "tokenize";
    const char *pos[2] = {NULL, NULL}, *text_file = NULL, *jsonl = NULL;
    bool special = false, pieces = false;
    const opt_spec spec[] = {
        {"--special", NULL, OPT_FLAG, &special, NULL,
         "add the special tokens of the post-processor (BOS/EOS),\n"
         "like add_special_tokens=True; off by default. Special\n"
         "tokens written in the text are always recognised.", NULL, NULL},
        {"--pieces", NULL, OPT_FLAG, &pieces, NULL, "print the token strings instead of the ids", NULL, NULL},
        {"--text-file", NULL, OPT_STR, &text_file, "F", "read the text from file F ('-' for standard input)", NULL,
         NULL},
        {"--jsonl", NULL, OPT_STR, &jsonl, "F",
         "each line of F ('-' for standard input) is one JSON\n"
         "string; print one JSON array per line, in order", NULL, NULL},
    };
    opts_cmd c = {.name = cmd, .head = HELP, .tail = TAIL, .spec = spec, .n_spec = OPTS_N(spec), .pos = pos,
                  .max_pos = 2, .dash_text = true};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    const char *src = pos[0], *text = pos[1];
    if (!src) return opts_usage(cmd, "missing SRC");
    if ((text != NULL) + (text_file != NULL) + (jsonl != NULL) > 1)
        return opts_usage(cmd, "give only one of TEXT, --text-file, --jsonl");
    textsrc ts;
    cmf_status st = textsrc_open(src, &ts);
    if (st) {
        textsrc_free(&ts);
        return cli_fail_status(cmd, st);
    }
    cmf__tok *tok = NULL;
    st = cmf__tok_load(ts.tokenizer_json, ts.tokenizer_json_len, src, &tok);
    textsrc_free(&ts);
    if (st) return cli_fail_status(cmd, st);
    int rc = 0;
    if (jsonl) rc = run_jsonl(cmd, tok, jsonl, special, pieces);
    else {
        cmf__buf in = {0};
        char *file = NULL;
        size_t len = 0;
        if (text) len = strlen(text);
        else if (text_file && strcmp(text_file, "-")) {
            if ((st = cmf__read_regular(text_file, &file, &len))) {
                cmf__tok_free(tok);
                return cli_fail(cmd, "--text-file %s", cmf_last_error());
            }
            text = file;
        } else {
            st = read_all(stdin, &in);
            text = in.data ? (const char *)in.data : "";
            len = in.len;
        }
        cmf__tok_ids ids = {0};
        if (!st) st = cmf__tok_encode(tok, text, len, special, &ids);
        if (st) rc = cli_fail_status(cmd, st);
        else print_result(stdout, tok, &ids, pieces);
        cmf__tok_ids_free(&ids);
        cmf__buf_free(&in);
        free(file);
    }
    cmf__tok_free(tok);
    if (fflush(stdout) != 0) return cli_fail(cmd, "writing standard output failed");
    return rc;
}
