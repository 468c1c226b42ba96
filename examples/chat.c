/* chat.c — a minimal chat over the public libcmf API (C11 plus POSIX's
 * strdup), built against the installed library as the README's cc line.
 * usage: chat MODEL.cmf  (one user turn per stdin line; answers stream) */
#define _POSIX_C_SOURCE 200809L
#include <cmf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char answer[1 << 14];
static size_t answer_len;
static int print_piece(void *user, const cmf_token_info *t)
{
    (void)user;
    if (answer_len + t->text_len < sizeof answer) memcpy(answer + answer_len, t->text, t->text_len), answer_len += t->text_len;
    fwrite(t->text, 1, t->text_len, stdout);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    cmf_model *model;
    cmf_session *session;
    if (argc < 2) return fprintf(stderr, "usage: %s MODEL.cmf\n", argv[0]), 2;
    if (cmf_model_open(argv[1], NULL, &model)) return fprintf(stderr, "%s\n", cmf_last_error()), 1;
    if (cmf_session_new(model, NULL, &session)) return fprintf(stderr, "%s\n", cmf_model_errmsg(model)), 1;
    cmf_chat_message msgs[64];
    char *owned[64];
    size_t n_msgs = 0, n_ids;
    static char line[4096], prompt[1 << 16];
    static int32_t ids[1 << 14];
    cmf_generate_params gp = cmf_generate_params_default(); /* sampling defaults; 48 tokens per answer */
    gp.max_tokens = 48;
    gp.on_token = print_piece;
    while (n_msgs + 2 <= 64 && fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        msgs[n_msgs].role = "user";
        msgs[n_msgs].content = owned[n_msgs] = strdup(line);
        n_msgs++;
        size_t len;
        if (cmf_model_render_chat(model, msgs, n_msgs, true, prompt, sizeof prompt, &len) ||
            cmf_model_tokenize(model, prompt, len, false, ids, sizeof ids / sizeof *ids, &n_ids))
            return fprintf(stderr, "%s\n", cmf_model_errmsg(model)), 1;
        cmf_generate_result res;
        answer_len = 0;
        if (cmf_session_generate(session, ids, n_ids, &gp, &res))
            return fprintf(stderr, "%s\n", cmf_session_errmsg(session)), 1;
        printf("\n[%d tokens, %s]\n", res.n_gen, cmf_finish_name(res.finish));
        answer[answer_len] = 0;
        msgs[n_msgs].role = "assistant"; /* the next turn's prompt reuses this prefix in the cache */
        msgs[n_msgs].content = owned[n_msgs] = strdup(answer);
        n_msgs++;
    }
    for (size_t i = 0; i < n_msgs; i++) free(owned[i]);
    cmf_session_free(session);
    cmf_model_free(model);
    return 0;
}
