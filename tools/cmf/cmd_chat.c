/* cmd_chat.c — `cmf chat FILE`: the interactive chat of `cmf run -i` (same
 * options; the loop lives in cmd_run.c), plus the chat-turn helpers of
 * chat.h: an input line that is not UTF-8 is refused on its own (the chat
 * goes on), and a conversation past the context loses its oldest turns,
 * said on stderr, instead of ending the chat. Reading lines and the slash
 * commands: chat_line.c. */
#include "chat.h"
#include "cli.h"
#include "commands.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_run_main(const char *cmd, int argc, char **argv, bool force_interactive);

int cmd_chat(int argc, char **argv) { return cmd_run_main("chat", argc, argv, true); }

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlongs,
 * no surrogates, nothing past U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t left)
{
    unsigned c = s[0];
    if (c >= 0x01 && c < 0x80) return 1;
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) n = 3, lo = 0xA0;
    else if (c == 0xED) n = 3, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) n = 3;
    else if (c == 0xF0) n = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) n = 4, hi = 0x8F;
    else return 0; /* NUL, a continuation byte, C0/C1, F5..FF */
    if (left < n || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return n;
}

bool chat_text_ok(const char *cmd, const char *what, const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        size_t k = utf8_seq(s + i, len - i);
        if (!k) {
            cli_fail(cmd, "%s: not valid UTF-8 (byte 0x%02x at offset %zu%s); not sent", what, s[i], i,
                     s[i] ? "" : ", a NUL");
            return false;
        }
        i += k;
    }
    return true;
}

/* Renders and tokenizes the whole conversation. */
static int render_ids(const char *cmd, cmf_model *m, const cmf_chat_message *hist, size_t n_hist, int32_t **ids,
                      size_t *n)
{
    size_t need = 0, count = 0;
    char *text = NULL;
    *ids = NULL;
    cmf_status st = cmf_model_render_chat(m, hist, n_hist, true, NULL, 0, &need);
    if ((st && st != CMF_ERR_BOUNDS) || (text = malloc(need + 1)) == NULL ||
        (st = cmf_model_render_chat(m, hist, n_hist, true, text, need + 1, &need)))
        goto fail;
    if ((st = cmf_model_tokenize(m, text, need, false, NULL, 0, &count)) && st != CMF_ERR_BOUNDS) goto fail;
    if (!(*ids = malloc((count ? count : 1) * sizeof **ids))) goto fail;
    if (count && (st = cmf_model_tokenize(m, text, need, false, *ids, count, &count))) goto fail;
    *n = count;
    free(text);
    return 0;
fail:
    cli_fail(cmd, "%s", st && st != CMF_ERR_BOUNDS ? cmf_model_errmsg(m) : "out of memory rendering the chat");
    free(*ids);
    *ids = NULL;
    free(text);
    return CHAT_FAILED;
}

bool chat_fits(const char *cmd, int32_t n_ctx, size_t n, bool with_system)
{
    if (n < (size_t)n_ctx) return true;
    cli_fail(cmd, "this message needs %zu tokens%s, more than the context holds (%zu): not sent", n,
             with_system ? " with the system message" : "", (size_t)n_ctx);
    return false;
}

int chat_prompt(const char *cmd, cmf_model *m, int32_t ctx, long long n_predict, cmf_chat_message *hist,
                size_t *n_hist, int32_t **ids, size_t *n)
{
    size_t n_ctx = (size_t)ctx;
    size_t room = n_predict < 0 ? n_ctx / 4 : (size_t)n_predict < n_ctx / 2 ? (size_t)n_predict : n_ctx / 2;
    size_t first = *n_hist && !strcmp(hist[0].role, "system") ? 1 : 0; /* the oldest droppable turn */
    size_t dropped = 0;
    for (;;) {
        int rc = render_ids(cmd, m, hist, *n_hist, ids, n);
        if (rc) return rc;
        if (*n + room <= n_ctx || *n_hist - first < 3) break; /* fits, or only the new turn is left */
        free(*ids);
        *ids = NULL;
        /* drop the oldest user turn and its answer */
        free((char *)hist[first].content);
        free((char *)hist[first + 1].content);
        memmove(hist + first, hist + first + 2, (*n_hist - first - 2) * sizeof *hist);
        *n_hist -= 2;
        dropped++;
    }
    if (dropped) {
        char count[32] = "";
        if (dropped > 1) snprintf(count, sizeof count, "%zu ", dropped);
        fprintf(stderr, "cmf %s: the conversation passed the context (%zu tokens): dropped the %soldest turn%s\n",
                cmd, n_ctx, count, dropped == 1 ? "" : "s");
    }
    if (!chat_fits(cmd, ctx, *n, first > 0)) {
        free(*ids);
        *ids = NULL;
        free((char *)hist[*n_hist - 1].content);
        (*n_hist)--;
        return CHAT_SKIPPED;
    }
    return 0;
}
