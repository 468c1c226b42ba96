/* template.c — the chat-template API of template.h over the Jinja
 * interpreter in jinja_*.c: compile (newline normalisation as jinja2 does,
 * then parse), render with a JSON context under work and memory limits,
 * apply_chat_template's variables, and the ChatML fallback (spec §6.1). */
#include "text/template.h"
#include "text/jinja.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

#define TEMPLATE_ARENA_LIMIT (64u << 20)   /* compile: AST of any real template is far below */
#define RENDER_ARENA_LIMIT (256u << 20)    /* render: values, copies, captured text */
#define RENDER_OUT_LIMIT (64u << 20)       /* bytes of any one text a render builds */
#define RENDER_STEP_LIMIT 10000000ull      /* evaluated nodes: stops runaway loops */
#define RENDER_DEPTH_LIMIT 400             /* nested bodies and macro calls */
#define RENDER_EVAL_DEPTH_LIMIT 3000       /* nested expressions, macro calls included */

static const char CHATML[] =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const char *cmf__template_chatml(void) { return CHATML; }

cmf_status cmf__template_compile(const char *src, size_t len, cmf__template **out)
{
    *out = NULL;
    if (!src && len) return cmf__error(CMF_ERR_ARG, "template: NULL source");
    cmf__template *t = calloc(1, sizeof *t);
    if (!t) return cmf__error(CMF_ERR_NOMEM, "out of memory compiling a template");
    t->arena.limit = TEMPLATE_ARENA_LIMIT;
    t->src = malloc(len + 1);
    if (!t->src) {
        free(t);
        return cmf__error(CMF_ERR_NOMEM, "out of memory compiling a template");
    }
    /* jinja2: \r\n and \r become \n; one trailing newline is dropped
     * (keep_trailing_newline=False) */
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            t->src[k++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else t->src[k++] = src[i];
    }
    if (k && t->src[k - 1] == '\n') k--;
    t->src[k] = 0;
    t->src_len = k;
    cmf_status st = cmf__jinja_parse(t);
    if (st) {
        cmf__template_free(t);
        return st;
    }
    *out = t;
    return CMF_OK;
}

void cmf__template_free(cmf__template *t)
{
    if (!t) return;
    cmf__ja_free(&t->arena);
    free(t->src);
    free(t);
}

/* Renders with `vars` (a JSON object) and the extra string variables. */
static cmf_status render(const cmf__template *t, const json_t *vars, const cmf__chat_params *p,
                         char **out, size_t *out_len)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!t) return cmf__error(CMF_ERR_ARG, "template: NULL template");
    if (vars && !json_is_object(vars)) return cmf__error(CMF_ERR_ARG, "template: variables must be a JSON object");
    jctx *x = calloc(1, sizeof *x);
    if (!x) return cmf__error(CMF_ERR_NOMEM, "out of memory rendering a template");
    x->arena.limit = RENDER_ARENA_LIMIT;
    x->out_limit = RENDER_OUT_LIMIT;
    x->step_limit = RENDER_STEP_LIMIT;
    x->depth_limit = RENDER_DEPTH_LIMIT;
    x->eval_depth_limit = RENDER_EVAL_DEPTH_LIMIT;
    x->tpl = t;
    cmf_status st = CMF_OK;
    if (setjmp(x->jmp) == 0) {
        jframe *g = cmf__jx_frame_new(x, NULL);
        x->globals = g;
        if (p) {
            /* the order apply_chat_template passes them; kwargs override */
            cmf__jx_frame_set(x, g, "messages", 8, p->messages ? cmf__jv_from_json(x, p->messages) : cmf__jv_list_new(x, 0));
            cmf__jx_frame_set(x, g, "tools", 5, p->tools ? cmf__jv_from_json(x, p->tools) : jv_none());
            cmf__jx_frame_set(x, g, "documents", 9, p->documents ? cmf__jv_from_json(x, p->documents) : jv_none());
            cmf__jx_frame_set(x, g, "add_generation_prompt", 21, jv_bool(p->add_generation_prompt));
            if (p->bos_token) cmf__jx_frame_set(x, g, "bos_token", 9, cmf__jv_strdup(x, p->bos_token, strlen(p->bos_token)));
            if (p->eos_token) cmf__jx_frame_set(x, g, "eos_token", 9, cmf__jv_strdup(x, p->eos_token, strlen(p->eos_token)));
        }
        if (vars) {
            const char *key;
            json_t *val;
            json_object_foreach((json_t *)vars, key, val) {
                jv name = cmf__jv_strdup(x, key, strlen(key));
                cmf__jx_frame_set(x, g, name.u.s.p, name.u.s.n, cmf__jv_from_json(x, val));
            }
        }
        cmf__jx_exec_body(x, g, t->root);
        char *text = malloc(x->out.len + 1);
        if (!text) cmf__jx_fail_status(x, CMF_ERR_NOMEM, NULL, "out of memory");
        if (x->out.len) memcpy(text, x->out.data, x->out.len);
        text[x->out.len] = 0;
        *out = text;
        if (out_len) *out_len = x->out.len;
    } else {
        st = cmf__error(x->err_status ? x->err_status : CMF_ERR_TEMPLATE, "%s", x->err);
    }
    cmf__ja_free(&x->arena);
    free(x);
    return st;
}

cmf_status cmf__template_render(const cmf__template *t, const json_t *vars, char **out, size_t *out_len)
{
    return render(t, vars, NULL, out, out_len);
}

cmf_status cmf__template_render_chat(const cmf__template *t, const cmf__chat_params *p, char **out, size_t *out_len)
{
    if (!p || !p->messages || !json_is_array(p->messages)) {
        *out = NULL;
        return cmf__error(CMF_ERR_ARG, "template: messages must be a JSON array");
    }
    if (p->kwargs && !json_is_object(p->kwargs)) {
        *out = NULL;
        return cmf__error(CMF_ERR_ARG, "template: kwargs must be a JSON object");
    }
    return render(t, p->kwargs, p, out, out_len);
}

cmf_status cmf__template_apply(const char *src, const cmf__chat_params *p, char **out, size_t *out_len)
{
    *out = NULL;
    if (!src) src = CHATML;
    cmf__template *t;
    cmf_status st = cmf__template_compile(src, strlen(src), &t);
    if (st) return st;
    st = cmf__template_render_chat(t, p, out, out_len);
    cmf__template_free(t);
    return st;
}

const json_t *cmf__chat_template_pick(const json_t *t)
{
    if (!json_is_array(t)) return t;
    size_t i;
    const json_t *e, *pick = NULL;
    json_array_foreach(t, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!pick || (name && !strcmp(name, "default"))) pick = json_object_get(e, "template");
    }
    return pick;
}
