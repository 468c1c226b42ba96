/* chat.h — what the interactive loop of cmd_run.c (`cmf chat`, `cmf run
 * -i`) takes from cmd_chat.c: checking each input line, refusing a line
 * longer than the context, and fitting the conversation into the context
 * by dropping its oldest turns. */
#ifndef CMF_TOOLS_CHAT_H
#define CMF_TOOLS_CHAT_H

#include "cmf.h"
#include "run_gen.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True when `text` (`len` bytes) is valid UTF-8 without NUL bytes; else
 * prints "cmf <cmd>: <what>: not valid UTF-8 (byte 0xNN at offset K); not sent" and
 * returns false. `what` names the input: "--prompt", "input line 3". */
bool chat_text_ok(const char *cmd, const char *what, const char *text, size_t len);

/* True when a prompt of n tokens leaves room in a context of n_ctx for
 * at least one generated token; else prints "this message needs N tokens
 * (with the system message), more than the context holds (M): not sent". */
bool chat_fits(const char *cmd, int32_t n_ctx, size_t n, bool with_system);

/* chat_prompt's results besides 0 (ids ready). */
enum { CHAT_FAILED = 1, CHAT_SKIPPED = 2 };

/* Renders hist[0..*n_hist) (an optional leading "system" message, then
 * user/assistant turns ending with the new user message; every content
 * malloc'd) through the file's template and tokenizes it into *ids
 * (malloc'd, *n tokens). When the prompt plus room for the answer
 * (n_predict tokens, at most half the context; a quarter when n_predict
 * < 0) passes n_ctx, the oldest user/assistant pairs are
 * dropped from hist (contents freed; the system message and the new turn
 * stay) and a note goes to stderr. A new turn that cannot fit even alone
 * is removed from hist with a message: CHAT_SKIPPED. CHAT_FAILED when
 * rendering or tokenizing fails (message printed). */
int chat_prompt(const char *cmd, cmf_model *m, int32_t n_ctx, long long n_predict, cmf_chat_message *hist,
                size_t *n_hist, int32_t **ids, size_t *n);

/* ---- reading lines (chat_line.c) ---- */
typedef struct chat_input chat_input;
/* The longest input line (bytes) that could fit a context of n_ctx: any
 * longer one is refused before it is tokenized. */
size_t chat_line_max(cmf_model *m, int32_t n_ctx);
/* A reader of stdin: with tty, libedit (line editing, history, "> "
 * prompt); else plain lines. NULL when out of memory. */
chat_input *chat_input_open(const char *cmd, bool tty, size_t max_bytes);
void chat_input_free(chat_input *in);
/* chat_input_read's results. */
enum { CHAT_LINE_OK = 0, CHAT_LINE_END = 1, CHAT_LINE_REFUSED = 2 };
/* The next line without its newline: OK (*line borrowed until the next
 * call, *len bytes, `what` = "input line N"), END (end of input), REFUSED
 * (longer than max_bytes: skipped without being held, message printed). */
int chat_input_read(chat_input *in, const char **line, size_t *len, char *what, size_t what_cap);

/* ---- slash commands (chat_line.c) ---- */
typedef struct chat_ctx {
    run_gen *gen;            /* /skill goes there */
    cmf_chat_message **hist; /* as chat_prompt's; capacity *n_hist + 2 at least */
    size_t *n_hist;
    bool *autoroute;         /* --skill auto; /skill turns it off */
    bool tmpl;               /* the chat goes through a template */
} chat_ctx;
enum { CHAT_CMD_NONE = 0, CHAT_CMD_DONE = 1, CHAT_CMD_BYE = 2 };
/* A line starting with '/': /help /bye /reset /system TEXT /skill ID
 * /save FILE run here (CHAT_CMD_DONE, or CHAT_CMD_BYE to leave); an
 * unknown one is refused with a message. Else CHAT_CMD_NONE and *send is
 * the text to send ("//x" sends "/x"). */
int chat_command(const char *cmd, chat_ctx *c, const char *line, const char **send);
/* The one-line banner of a chat on a terminal (stderr). */
void chat_banner(const char *cmd, const char *path);

#endif
