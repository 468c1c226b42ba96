/* chat_line.c — the input side of the interactive chat (chat.h): lines read
 * with libedit (editing, history) on a terminal and plainly from a pipe,
 * each bounded before it is tokenized (a longer one is skipped while read,
 * never held whole, and refused alone), and the slash commands of the
 * prompt. It never generates: cmd_run.c sends what it returns. */
#include "chat.h"
#include "cli.h"

#include <histedit.h>
#include <jansson.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct chat_input {
    const char *cmd;
    size_t max_bytes; /* a longer line is refused */
    long lineno;
    EditLine *el;     /* NULL: plain reading */
    History *hist;
    char *buf;        /* the plain reader's line */
    size_t cap;
};

static char *prompt_text(EditLine *el)
{
    (void)el;
    return "> ";
}

size_t chat_line_max(cmf_model *m, int32_t ctx)
{
    /* A token covers at most `longest` bytes of text (x4: normalization may
     * shrink input), so a line past n_ctx * longest * 4 bytes cannot fit. */
    size_t longest = 1, len = 0;
    char piece[1024];
    for (int32_t id = 0; id < cmf_model_n_vocab(m); id++)
        if (!cmf_model_detokenize(m, &id, 1, false, piece, sizeof piece, &len) || len >= sizeof piece)
            longest = len > longest ? len : longest;
    size_t n_ctx = (size_t)ctx;
    size_t max = n_ctx * longest * 4;
    return max < 4096 ? 4096 : max;
}

chat_input *chat_input_open(const char *cmd, bool tty, size_t max_bytes)
{
    chat_input *in = calloc(1, sizeof *in);
    if (!in) return NULL;
    in->cmd = cmd;
    in->max_bytes = max_bytes;
    if (!tty) return in;
    setlocale(LC_CTYPE, ""); /* libedit edits multibyte characters in the terminal's encoding */
    in->el = el_init("cmf", stdin, stdout, stderr);
    in->hist = history_init();
    if (!in->el || !in->hist) {
        chat_input_free(in);
        return NULL;
    }
    HistEvent ev;
    history(in->hist, &ev, H_SETSIZE, 1000);
    history(in->hist, &ev, H_SETUNIQUE, 1);
    el_set(in->el, EL_EDITOR, "emacs");
    el_set(in->el, EL_SIGNAL, 1); /* the terminal is restored when a signal ends the program */
    el_set(in->el, EL_PROMPT, prompt_text);
    el_set(in->el, EL_HIST, history, in->hist);
    el_source(in->el, NULL); /* ~/.editrc, as other libedit programs */
    return in;
}

void chat_input_free(chat_input *in)
{
    if (!in) return;
    if (in->el) el_end(in->el);
    if (in->hist) history_end(in->hist);
    free(in->buf);
    free(in);
}

static int refuse_long(chat_input *in, size_t got)
{
    cli_fail(in->cmd, "input line %ld: %zu bytes, longer than the context can hold (at most %zu bytes); not sent",
             in->lineno, got, in->max_bytes);
    return CHAT_LINE_REFUSED;
}

/* Reads up to a newline into in->buf, keeping at most max_bytes + 1 bytes
 * (the rest is read and dropped). */
static int read_plain(chat_input *in, const char **line, size_t *len)
{
    size_t n = 0, total = 0;
    int c = EOF;
    while ((c = getc(stdin)) != EOF && c != '\n') {
        total++;
        if (n > in->max_bytes) continue;
        if (n + 1 >= in->cap) {
            size_t cap = in->cap ? in->cap * 2 : 256;
            char *p = realloc(in->buf, cap);
            if (!p) return cli_fail(in->cmd, "out of memory reading input"), CHAT_LINE_END;
            in->buf = p;
            in->cap = cap;
        }
        in->buf[n++] = (char)c;
    }
    if (c == EOF && total == 0) return CHAT_LINE_END;
    in->lineno++;
    if (total > in->max_bytes) return refuse_long(in, total);
    if (!in->buf && !(in->buf = malloc(in->cap = 1))) return CHAT_LINE_END;
    in->buf[n] = 0;
    *line = in->buf;
    *len = n;
    return CHAT_LINE_OK;
}

int chat_input_read(chat_input *in, const char **line, size_t *len, char *what, size_t what_cap)
{
    int rc;
    if (!in->el) {
        rc = read_plain(in, line, len);
    } else {
        int count = 0;
        const char *l = el_gets(in->el, &count);
        if (!l || count <= 0) {
            fputc('\n', stdout); /* Ctrl-D: leave the prompt's line */
            return CHAT_LINE_END;
        }
        in->lineno++;
        size_t n = strlen(l);
        if (n && l[n - 1] == '\n') n--;
        if (n > in->max_bytes) return refuse_long(in, n);
        free(in->buf);
        if (!(in->buf = strndup(l, n))) return CHAT_LINE_END;
        in->cap = n + 1;
        if (n) {
            HistEvent ev;
            history(in->hist, &ev, H_ENTER, in->buf);
        }
        *line = in->buf;
        *len = n;
        rc = CHAT_LINE_OK;
    }
    snprintf(what, what_cap, "input line %ld", in->lineno);
    return rc;
}

/* ---- slash commands --------------------------------------------------------- */
static const char CHAT_HELP[] =
    "  /help           this list\n"
    "  /bye            leave (also /exit, /quit, Ctrl-D)\n"
    "  /reset          forget the conversation (the system message stays)\n"
    "  /system TEXT    set the system message (/system alone: remove it)\n"
    "  /skill ID       run skill ID of the file (/skill none: the backbone alone)\n"
    "  /save FILE      write the conversation as JSON messages (cmf template --messages)\n"
    "  //TEXT          send /TEXT to the model\n"
    "Ctrl-C stops an answer; Up and Down walk the history.\n";

void chat_banner(const char *cmd, const char *path)
{
    fprintf(stderr, "cmf %s: %s — type a message; /help for commands, /bye or Ctrl-D to leave, Ctrl-C stops an answer\n",
            cmd, path);
}

static void free_turns(chat_ctx *c, size_t from)
{
    for (size_t i = from; i < *c->n_hist; i++) free((char *)(*c->hist)[i].content);
    *c->n_hist = from;
}

static int set_system(const char *cmd, chat_ctx *c, const char *text)
{
    if (!c->tmpl) return cli_fail(cmd, "/system: this chat has no template (a base model, or --raw)"), CHAT_CMD_DONE;
    cmf_chat_message *h = *c->hist;
    bool has = *c->n_hist && !strcmp(h[0].role, "system");
    if (!*text) { /* remove */
        if (has) {
            free((char *)h[0].content);
            memmove(h, h + 1, (*c->n_hist - 1) * sizeof *h);
            (*c->n_hist)--;
        }
        fprintf(stderr, "cmf %s: no system message\n", cmd);
        return CHAT_CMD_DONE;
    }
    if (!chat_text_ok(cmd, "/system", text, strlen(text))) return CHAT_CMD_DONE;
    char *dup = strdup(text);
    if (!dup) return cli_fail(cmd, "out of memory"), CHAT_CMD_DONE;
    if (has) {
        free((char *)h[0].content);
    } else {
        /* two spare slots stay for answer()'s user turn and its answer */
        if (!(h = realloc(*c->hist, (*c->n_hist + 3) * sizeof *h))) return free(dup), CHAT_CMD_DONE;
        *c->hist = h;
        memmove(h + 1, h, *c->n_hist * sizeof *h);
        (*c->n_hist)++;
        h[0].role = "system";
    }
    h[0].content = dup;
    fprintf(stderr, "cmf %s: system message set\n", cmd);
    return CHAT_CMD_DONE;
}

static int save(const char *cmd, const chat_ctx *c, const char *file)
{
    struct stat sb;
    if (!*file) return cli_fail(cmd, "/save: name a FILE"), CHAT_CMD_DONE;
    if (!lstat(file, &sb)) return cli_fail(cmd, "/save: %s exists; not replacing it", file), CHAT_CMD_DONE;
    json_t *a = json_array();
    for (size_t i = 0; i < *c->n_hist; i++)
        json_array_append_new(a, json_pack("{s:s, s:s}", "role", (*c->hist)[i].role, "content", (*c->hist)[i].content));
    int bad = json_dump_file(a, file, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(a);
    if (bad) cli_fail(cmd, "/save: %s: cannot write", file);
    else fprintf(stderr, "cmf %s: saved %zu messages to %s\n", cmd, *c->n_hist, file);
    return CHAT_CMD_DONE;
}

int chat_command(const char *cmd, chat_ctx *c, const char *line, const char **send)
{
    *send = line;
    if (line[0] != '/') return CHAT_CMD_NONE;
    if (line[1] == '/') return *send = line + 1, CHAT_CMD_NONE;
    size_t wl = strcspn(line, " \t");
    const char *arg = line + wl + strspn(line + wl, " \t");
#define IS(w) (wl == sizeof(w) - 1 && !strncmp(line, w, wl))
    if (IS("/bye") || IS("/exit") || IS("/quit")) return CHAT_CMD_BYE;
    if (IS("/help") || IS("/?")) return fputs(CHAT_HELP, stderr), CHAT_CMD_DONE;
    if (IS("/reset")) {
        free_turns(c, *c->n_hist && !strcmp((*c->hist)[0].role, "system") ? 1 : 0);
        fprintf(stderr, "cmf %s: conversation cleared\n", cmd);
        return CHAT_CMD_DONE;
    }
    if (IS("/system")) return set_system(cmd, c, arg);
    if (IS("/save")) return save(cmd, c, arg);
    if (IS("/skill")) {
        const char *id = !*arg || !strcmp(arg, "none") ? NULL : arg;
        const char *why = run_gen_set_skill(c->gen, id);
        if (why) cli_fail(cmd, "/skill: %s", why);
        else {
            *c->autoroute = false;
            fprintf(stderr, "cmf %s: %s%s\n", cmd, id ? "running skill " : "running the backbone alone", id ? id : "");
        }
        return CHAT_CMD_DONE;
    }
#undef IS
    cli_fail(cmd, "unknown command '%.*s' (/help lists them; //TEXT sends /TEXT)", (int)(wl > 64 ? 64 : wl), line);
    return CHAT_CMD_DONE;
}
