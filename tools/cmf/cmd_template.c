/* cmd_template.c — `cmf template SRC --messages M.json [--tools T.json]
 * [--gen] [--kwargs K.json]`: renders a conversation through SRC's chat
 * template (ChatML when SRC has none) exactly as transformers'
 * apply_chat_template(tokenize=False) would, and prints it with no added
 * newline. Template errors exit 1 with "line L column C: ...". */
#include "cli.h"
#include "commands.h"
#include "text/template.h"
#include "opts.h"
#include "textsrc.h"
#include "util/error.h"
#include "util/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char HEAD[] =
    "usage: cmf template SRC --messages M.json [--tools T.json] [--gen] [--kwargs K.json]\n"
    "       [--template FILE.jinja]\n"
    "  SRC                    a .cmf file, a tokenizer.json, or a Hugging Face directory\n";

/* A JSON argument: "-" reads stdin, text starting with '[' or '{' is the
 * JSON itself, anything else names a file (a regular one: a FIFO is
 * refused, not waited on; stdin is the way to pipe it in). */
static json_t *load(const char *path, const char *what)
{
    json_error_t e;
    json_t *j;
    const char *p = path + strspn(path, " \t\r\n");
    const char *name = path;
    if (!strcmp(path, "-")) j = json_loadf(stdin, 0, &e), name = "(stdin)";
    else if (*p == '[' || *p == '{') j = json_loads(path, 0, &e), name = "(inline JSON)";
    else {
        char *text = NULL;
        size_t len = 0;
        cmf_status st = cmf__read_regular(path, &text, &len);
        if (st) {
            cli_fail("template", "--%s %s", what, cmf_last_error());
            return NULL;
        }
        j = json_loadb(text, len, 0, &e);
        free(text);
    }
    if (!j) fprintf(stderr, "cmf template: %s %s: line %d column %d: %s\n", what, name, e.line, e.column, e.text);
    return j;
}

int cmd_template(int argc, char **argv)
{
    const char *src = NULL, *messages_path = NULL, *tools_path = NULL, *kwargs_path = NULL, *tpl_path = NULL;
    bool gen = false;
    const opt_spec spec[] = {
        {"--messages", NULL, OPT_STR, &messages_path, "M.json",
         "JSON array of {role, content, ...} (or an object with \"messages\"):\n"
         "a file, - for stdin, or the JSON itself ('[...]' / '{...}')", NULL, NULL},
        {"--tools", NULL, OPT_STR, &tools_path, "T.json", "JSON array of tool schemas (the template's `tools`); as --messages", NULL,
         NULL},
        {"--gen", "--add-generation-prompt", OPT_FLAG, &gen, NULL, "add_generation_prompt=true", NULL, NULL},
        {"--kwargs", NULL, OPT_STR, &kwargs_path, "K.json",
         "JSON object of extra template variables (enable_thinking, ...);\nas --messages", NULL, NULL},
        {"--template", NULL, OPT_STR, &tpl_path, "FILE.jinja", "use this template file instead of SRC's", NULL, NULL},
    };
    opts_cmd c = {.name = "template", .head = HEAD, .tail = "Prints the render exactly, with no newline added.\n",
                  .spec = spec, .n_spec = OPTS_N(spec), .pos = &src, .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!src) return opts_usage("template", "missing SRC");
    if (!messages_path) return opts_usage("template", "missing --messages M.json");

    int rc = 1;
    textsrc ts;
    json_t *messages = NULL, *tools = NULL, *kwargs = NULL;
    char *tpl_text = NULL, *out = NULL;
    cmf_status st = textsrc_open(src, &ts);
    if (st) return cli_fail_status("template", st);
    if (!(messages = load(messages_path, "messages"))) goto done;
    if (json_is_object(messages)) { /* {"messages": [...], "tools": [...]} as in conversations.json */
        json_t *m = json_incref(json_object_get(messages, "messages"));
        if (!tools_path && json_object_get(messages, "tools")) tools = json_incref(json_object_get(messages, "tools"));
        if (!kwargs_path && json_object_get(messages, "kwargs")) kwargs = json_incref(json_object_get(messages, "kwargs"));
        json_decref(messages);
        messages = m;
    }
    if (!json_is_array(messages)) {
        cli_fail("template", "--messages %s: expected a JSON array of messages",
                 strcmp(messages_path, "-") ? messages_path : "(stdin)");
        goto done;
    }
    if (tools_path && !(tools = load(tools_path, "tools"))) goto done;
    if (kwargs_path && !(kwargs = load(kwargs_path, "kwargs"))) goto done;
    if (kwargs && !json_is_object(kwargs)) {
        cli_fail("template", "--kwargs: expected a JSON object");
        goto done;
    }
    const char *tpl = ts.chat_template;
    if (tpl_path) {
        size_t tpl_len = 0;
        if ((st = cmf__read_regular(tpl_path, &tpl_text, &tpl_len))) {
            cli_fail("template", "--template %s", cmf_last_error());
            goto done;
        }
        tpl = tpl_text;
    }
    cmf__chat_params p = {0};
    p.messages = messages;
    p.tools = tools;
    p.add_generation_prompt = gen;
    p.bos_token = ts.bos_token;
    p.eos_token = ts.eos_token;
    p.kwargs = kwargs;
    size_t len = 0;
    st = cmf__template_apply(tpl, &p, &out, &len);
    if (st) {
        cmf__error_prefix(st, "%s", tpl_path ? tpl_path : src);
        rc = cli_fail_status("template", st);
        goto done;
    }
    if (fwrite(out, 1, len, stdout) != len || fflush(stdout) != 0) {
        cli_fail("template", "write error");
        goto done;
    }
    rc = 0;
done:
    free(out);
    free(tpl_text);
    json_decref(messages);
    json_decref(tools);
    json_decref(kwargs);
    textsrc_free(&ts);
    return rc;
}
