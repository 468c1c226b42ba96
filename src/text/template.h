/* template.h — Jinja chat templates with Hugging Face semantics: the subset
 * of jinja2 that chat templates use, rendered exactly as transformers'
 * apply_chat_template(..., tokenize=False) does (ImmutableSandboxedEnvironment
 * with trim_blocks, lstrip_blocks, loopcontrols, {% generation %}, HF's
 * tojson, raise_exception, strftime_now). Values are JSON-like.
 * Errors never crash: they return CMF_ERR_TEMPLATE (or CMF_ERR_NOMEM / ARG)
 * with "line L column C: ..." in cmf_last_error(). */
#ifndef CMF_TEXT_TEMPLATE_H
#define CMF_TEXT_TEMPLATE_H

#include "cmf.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* A compiled template: immutable after compile, so one may be rendered by
 * several threads at once. */
typedef struct cmf__template cmf__template;

/* Parses `len` bytes of template source (need not be NUL-terminated).
 * Syntax errors: CMF_ERR_TEMPLATE, message "line L column C: ...". */
cmf_status cmf__template_compile(const char *src, size_t len, cmf__template **out);
void cmf__template_free(cmf__template *t);

/* Renders with the entries of the JSON object `vars` as top-level variables
 * (NULL: none). *out is malloc'd, NUL-terminated, caller frees; *out_len
 * (may be NULL) gets its length. Runtime errors (raise_exception, calling an
 * undefined, attribute of undefined, type errors) -> CMF_ERR_TEMPLATE with
 * "line L column C: message"; for raise_exception the message is the
 * template's own text. Nothing is returned on error (*out = NULL). */
cmf_status cmf__template_render(const cmf__template *t, const json_t *vars,
                                char **out, size_t *out_len);

/* A `chat_template` value as tokenizer_config.json / chat_template.json hold
 * it: a string, or a list of {name, template} where the one named "default"
 * wins, else the first (transformers' rule). Returns the string node, the
 * picked entry's "template" value (whatever its type: the caller checks),
 * or `t` itself when it is neither. */
const json_t *cmf__chat_template_pick(const json_t *t);

/* What apply_chat_template passes to the template. */
typedef struct cmf__chat_params {
    const json_t *messages;     /* array of message objects; required */
    const json_t *tools;        /* array, or NULL (the variable is then none) */
    const json_t *documents;    /* array, or NULL (none) */
    bool add_generation_prompt;
    const char *bos_token;      /* NULL: the variable is left undefined, as HF */
    const char *eos_token;      /* does for special tokens that are not set */
    const json_t *kwargs;       /* object or NULL: extra variables such as
                                 * enable_thinking, date_string; an entry here
                                 * overrides any of the fields above */
} cmf__chat_params;

/* Renders a conversation: cmf__template_render with the variables above. */
cmf_status cmf__template_render_chat(const cmf__template *t, const cmf__chat_params *p,
                                     char **out, size_t *out_len);

/* One-call convenience: compile `src` (NUL-terminated; NULL = the ChatML
 * fallback), render the conversation, free the template. */
cmf_status cmf__template_apply(const char *src, const cmf__chat_params *p,
                               char **out, size_t *out_len);

/* ChatML fallback (spec §6.1) for files without a template:
 *   <|im_start|>{role}\n{content}<|im_end|>\n ... [<|im_start|>assistant\n]
 * Static storage, NUL-terminated. */
const char *cmf__template_chatml(void);

#endif
