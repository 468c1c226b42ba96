/* parse.c — a chat or completion request body into a srv_job: every
 * field the server honours is type- and range-checked and a bad one is a
 * 400 naming it (OpenAI's error shape); unknown fields are ignored, as
 * OpenAI does. Prompts: messages go through the file's chat template,
 * then the tokenizer; a completion prompt is a string or token ids. */
#include "server/srv.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cmf__srv_fail(srv_err *e, unsigned status, const char *param, const char *code, const char *fmt, ...)
{
    e->status = status ? status : 400;
    e->param = param;
    e->code = code;
    e->type = status == 401 ? "authentication_error"
              : status == 404 ? "not_found_error"
              : status == 429 ? "rate_limit_error"
              : status >= 500 ? "server_error"
                              : "invalid_request_error";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return false;
}

json_t *cmf__srv_err_json(const srv_err *e)
{
    return json_pack("{s:{s:s, s:s, s:s?, s:s?}}", "error", "message", e->message, "type", e->type, "param",
                     e->param, "code", e->code);
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static bool bad_type(srv_err *e, const char *name, const char *want, const json_t *v)
{
    return cmf__srv_fail(e, 400, name, "invalid_type", "Invalid type for '%s': expected %s, but got %s.", name, want,
                    type_name(v));
}

/* A number field in [lo, hi]: absent or null leaves *out. */
static bool get_num(json_t *body, const char *name, double lo, double hi, float *out, srv_err *e)
{
    json_t *v = json_object_get(body, name);
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v)) return bad_type(e, name, "a number", v);
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi)
        return cmf__srv_fail(e, 400, name, "invalid_value", "'%s' is %g: expected a number from %g to %g.", name, d, lo, hi);
    *out = (float)d;
    return true;
}

static bool get_int(json_t *body, const char *name, long long lo, long long hi, long long *out, bool *given,
                    srv_err *e)
{
    json_t *v = json_object_get(body, name);
    if (given) *given = false;
    if (!v || json_is_null(v)) return true;
    long long x;
    if (json_is_integer(v)) x = json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) && fabs(json_real_value(v)) < 9e15)
        x = (long long)json_real_value(v);
    else return bad_type(e, name, "an integer", v);
    if (x < lo || x > hi)
        return cmf__srv_fail(e, 400, name, "invalid_value", "'%s' is %lld: expected an integer from %lld to %lld.", name, x,
                        lo, hi);
    *out = x;
    if (given) *given = true;
    return true;
}

static bool get_bool(json_t *body, const char *name, bool *out, srv_err *e)
{
    json_t *v = json_object_get(body, name);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) return bad_type(e, name, "a boolean", v);
    *out = json_is_true(v);
    return true;
}

/* A string field; absent or null gives NULL. */
static bool get_str(json_t *body, const char *name, const char **out, srv_err *e)
{
    json_t *v = json_object_get(body, name);
    *out = NULL;
    if (!v || json_is_null(v)) return true;
    if (!json_is_string(v)) return bad_type(e, name, "a string", v);
    *out = json_string_value(v);
    return true;
}

bool cmf__srv_tokenize(srv_model *m, const char *text, size_t len, bool add_special, int32_t **ids, size_t *n, srv_err *e)
{
    size_t need = 0;
    *ids = NULL;
    *n = 0;
    cmf_status st = cmf_model_tokenize(m->model, text, len, add_special, NULL, 0, &need);
    if (st && st != CMF_ERR_BOUNDS)
        return cmf__srv_fail(e, 400, "prompt", NULL, "the prompt cannot be tokenized: %s", cmf_model_errmsg(m->model));
    *ids = malloc((need ? need : 1) * sizeof **ids);
    if (!*ids) return cmf__srv_fail(e, 500, NULL, NULL, "out of memory");
    if (need && (st = cmf_model_tokenize(m->model, text, len, add_special, *ids, need, n))) {
        free(*ids);
        *ids = NULL;
        return cmf__srv_fail(e, 400, "prompt", NULL, "the prompt cannot be tokenized: %s", cmf_model_errmsg(m->model));
    }
    *n = need;
    return true;
}

/* The text of a message's content: a string, or an array of text parts
 * joined; NULL content is "" (an assistant turn that only called tools). */
static bool content_text(json_t *content, size_t idx, char **out, srv_err *e)
{
    *out = NULL;
    if (!content || json_is_null(content)) return (*out = strdup("")) != NULL || cmf__srv_fail(e, 500, NULL, NULL, "out of memory");
    if (json_is_string(content)) return (*out = strdup(json_string_value(content))) != NULL ||
                                        cmf__srv_fail(e, 500, NULL, NULL, "out of memory");
    if (!json_is_array(content))
        return cmf__srv_fail(e, 400, "messages", "invalid_type",
                        "messages[%zu].content: expected a string or an array of content parts, but got %s.", idx,
                        type_name(content));
    size_t total = 0, i;
    json_t *part;
    json_array_foreach(content, i, part) {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type))
            return cmf__srv_fail(e, 400, "messages", "invalid_type",
                            "messages[%zu].content[%zu]: expected an object with a string 'type'.", idx, i);
        if (strcmp(json_string_value(type), "text"))
            return cmf__srv_fail(e, 400, "messages", "unsupported_content",
                            "messages[%zu].content[%zu]: content parts of type '%s' are not supported (text only).",
                            idx, i, json_string_value(type));
        if (!json_is_string(text))
            return cmf__srv_fail(e, 400, "messages", "invalid_type", "messages[%zu].content[%zu].text: expected a string.",
                            idx, i);
        total += json_string_length(text);
    }
    char *s = malloc(total + 1);
    if (!s) return cmf__srv_fail(e, 500, NULL, NULL, "out of memory");
    size_t at = 0;
    json_array_foreach(content, i, part) {
        json_t *text = json_object_get(part, "text");
        memcpy(s + at, json_string_value(text), json_string_length(text));
        at += json_string_length(text);
    }
    s[at] = 0;
    *out = s;
    return true;
}

/* One message as chat templates read it: developer is OpenAI's newer
 * name for system, content a string, tool calls' arguments objects. */
static json_t *message_norm(json_t *mj, size_t i, srv_err *e)
{
    static const char *const ROLES[] = {"system", "developer", "user", "assistant", "tool"};
    json_t *role = json_object_get(mj, "role");
    if (!json_is_object(mj))
        return cmf__srv_fail(e, 400, "messages", "invalid_type", "messages[%zu]: expected an object, but got %s.", i,
                             type_name(mj)), NULL;
    if (!json_is_string(role))
        return cmf__srv_fail(e, 400, "messages", "invalid_type", "messages[%zu].role: expected a string.", i), NULL;
    const char *r = json_string_value(role);
    size_t k = 0;
    while (k < sizeof ROLES / sizeof ROLES[0] && strcmp(r, ROLES[k])) k++;
    if (k == sizeof ROLES / sizeof ROLES[0])
        return cmf__srv_fail(e, 400, "messages", "invalid_value",
                             "messages[%zu].role '%s': expected system, developer, user, assistant or tool.", i, r), NULL;
    char *text;
    if (!content_text(json_object_get(mj, "content"), i, &text, e)) return NULL;
    json_t *out = json_pack("{s:s, s:s}", "role", k == 1 ? "system" : r, "content", text);
    free(text);
    if (!out) return cmf__srv_fail(e, 500, NULL, NULL, "out of memory"), NULL;
    json_t *calls = json_object_get(mj, "tool_calls"), *norm;
    if (calls && !json_is_null(calls)) {
        if (!cmf__srv_tools_normalize_calls(calls, i, &norm, e)) {
            json_decref(out);
            return NULL;
        }
        json_object_set_new(out, "tool_calls", norm);
    }
    static const char *const KEPT[] = {"name", "tool_call_id"};
    for (size_t f = 0; f < 2; f++) {
        json_t *v = json_object_get(mj, KEPT[f]);
        if (json_is_string(v)) json_object_set(out, KEPT[f], v);
        else if (v && !json_is_null(v)) {
            json_decref(out);
            return cmf__srv_fail(e, 400, "messages", "invalid_type", "messages[%zu].%s: expected a string.", i, KEPT[f]),
                   NULL;
        }
    }
    return out;
}

bool cmf__srv_render_messages(srv_model *m, json_t *messages, json_t *tools, int32_t **ids, size_t *n, srv_err *e)
{
    if (!json_is_array(messages)) return messages ? bad_type(e, "messages", "an array", messages)
                                                  : cmf__srv_fail(e, 400, "messages", "missing_required_parameter",
                                                             "Missing required parameter: 'messages'.");
    size_t count = json_array_size(messages);
    if (!count) return cmf__srv_fail(e, 400, "messages", "empty_array", "'messages' is empty: expected at least one message.");
    json_t *norm = json_array();
    char *msgs_text = NULL, *tools_text = NULL, *buf = NULL;
    bool ok = false;
    for (size_t i = 0; i < count; i++) {
        json_t *one = message_norm(json_array_get(messages, i), i, e);
        if (!one) goto done;
        json_array_append_new(norm, one);
    }
    msgs_text = json_dumps(norm, JSON_COMPACT);
    if (tools && json_array_size(tools)) tools_text = json_dumps(tools, JSON_COMPACT);
    if (!msgs_text || (tools && json_array_size(tools) && !tools_text)) {
        cmf__srv_fail(e, 500, NULL, NULL, "out of memory");
        goto done;
    }
    size_t need = 0;
    cmf_status st = cmf_model_render_chat_json(m->model, msgs_text, tools_text, true, NULL, 0, &need);
    if (st == CMF_ERR_BOUNDS) {
        if (!(buf = malloc(need + 1))) {
            cmf__srv_fail(e, 500, NULL, NULL, "out of memory");
            goto done;
        }
        st = cmf_model_render_chat_json(m->model, msgs_text, tools_text, true, buf, need + 1, &need);
    }
    if (st) {
        cmf__srv_fail(e, 400, "messages", "template_error", "the chat template refused the messages: %s",
                 cmf_model_errmsg(m->model));
        goto done;
    }
    ok = cmf__srv_tokenize(m, buf ? buf : "", need, false, ids, n, e);
done:
    json_decref(norm);
    free(msgs_text);
    free(tools_text);
    free(buf);
    return ok;
}

/* A completion prompt: a string, token ids, or an array of one of those. */
static bool completion_prompt(srv_model *m, json_t *p, int32_t **ids, size_t *n, srv_err *e)
{
    if (!p) return cmf__srv_fail(e, 400, "prompt", "missing_required_parameter", "Missing required parameter: 'prompt'.");
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0);
    if (json_is_string(p)) return cmf__srv_tokenize(m, json_string_value(p), json_string_length(p), true, ids, n, e);
    if (!json_is_array(p)) return bad_type(e, "prompt", "a string or an array of token ids", p);
    size_t count = json_array_size(p), i;
    if (count && !json_is_integer(json_array_get(p, 0)))
        return cmf__srv_fail(e, 400, "prompt", "unsupported_value",
                        "'prompt' holds several prompts: this server answers one prompt per request.");
    if (!count) return cmf__srv_fail(e, 400, "prompt", "empty_array", "'prompt' is an empty array of token ids.");
    *ids = malloc(count * sizeof **ids);
    if (!*ids) return cmf__srv_fail(e, 500, NULL, NULL, "out of memory");
    int32_t n_vocab = cmf_model_n_vocab(m->model);
    json_t *v;
    json_array_foreach(p, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= n_vocab) {
            free(*ids);
            *ids = NULL;
            return cmf__srv_fail(e, 400, "prompt", "invalid_value", "prompt[%zu]: expected a token id from 0 to %d.", i,
                            n_vocab - 1);
        }
        (*ids)[i] = (int32_t)json_integer_value(v);
    }
    *n = count;
    return true;
}

static bool parse_stop(json_t *body, srv_job *j, srv_err *e)
{
    json_t *v = json_object_get(body, "stop");
    if (!v || json_is_null(v)) return true;
    size_t count = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_string(v) && !json_is_array(v)) return bad_type(e, "stop", "a string or an array of strings", v);
    if (count > 16) return cmf__srv_fail(e, 400, "stop", "invalid_value", "'stop' has %zu strings: at most 16.", count);
    j->stop = calloc(count ? count : 1, sizeof *j->stop);
    if (!j->stop) return cmf__srv_fail(e, 500, NULL, NULL, "out of memory");
    for (size_t i = 0; i < count; i++) {
        json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(s)) return cmf__srv_fail(e, 400, "stop", "invalid_type", "stop[%zu]: expected a string.", i);
        if (!json_string_length(s)) return cmf__srv_fail(e, 400, "stop", "invalid_value", "stop[%zu] is empty.", i);
        if (!(j->stop[j->n_stop] = strdup(json_string_value(s)))) return cmf__srv_fail(e, 500, NULL, NULL, "out of memory");
        j->n_stop++;
    }
    return true;
}

/* OpenAI defaults (temperature 1, top_p 1, nothing else truncated) and
 * the fields that set them. */
static bool parse_sampling(json_t *body, srv_job *j, srv_err *e)
{
    cmf_sampling_params *sp = &j->rp.gen.sampling;
    sp->temperature = 1.0f;
    sp->top_p = 1.0f;
    sp->top_k = 0;
    sp->min_p = 0.0f;
    long long top_k = 0, seed = 0;
    bool has_seed = false, has_k = false;
    if (!get_num(body, "temperature", 0, 2, &sp->temperature, e) || !get_num(body, "top_p", 0, 1, &sp->top_p, e) ||
        !get_num(body, "min_p", 0, 1, &sp->min_p, e) ||
        !get_num(body, "presence_penalty", -2, 2, &sp->presence_penalty, e) ||
        !get_num(body, "frequency_penalty", -2, 2, &sp->frequency_penalty, e) ||
        !get_num(body, "repetition_penalty", 0.01, 10, &sp->repeat_penalty, e) ||
        !get_int(body, "top_k", -1, 1 << 20, &top_k, &has_k, e) ||
        !get_int(body, "seed", INT64_MIN, INT64_MAX, &seed, &has_seed, e) ||
        !get_bool(body, "ignore_eos", &j->rp.gen.ignore_eos, e)) /* vLLM's and llama.cpp's extension */
        return false;
    if (has_k) sp->top_k = top_k < 0 ? 0 : (int32_t)top_k;
    if (sp->top_p <= 0) return cmf__srv_fail(e, 400, "top_p", "invalid_value", "'top_p' must be greater than 0.");
    /* seed 0 means "from the clock" to the sampler; a client's 0 is a seed like any other */
    if (has_seed) sp->seed = seed ? (uint64_t)seed : 0x9e3779b97f4a7c15ull;
    return true;
}

static bool parse_limits(json_t *body, srv *s, srv_job *j, srv_err *e)
{
    long long mt = -1, mct = -1, n = 1;
    bool has_mt = false, has_mct = false;
    if (!get_int(body, "max_tokens", 1, INT32_MAX, &mt, &has_mt, e) ||
        !get_int(body, "max_completion_tokens", 1, INT32_MAX, &mct, &has_mct, e) ||
        !get_int(body, "n", 1, 1 << 20, &n, NULL, e))
        return false;
    if (n != 1) return cmf__srv_fail(e, 400, "n", "unsupported_value", "'n' is %lld: this server generates one choice (n = 1).", n);
    const char *which = has_mct ? "max_completion_tokens" : "max_tokens";
    long long want = has_mct ? mct : has_mt ? mt : -1;
    int32_t cap = s->p.max_tokens_cap > 0 ? s->p.max_tokens_cap : j->m->n_ctx;
    if (want > cap)
        return cmf__srv_fail(e, 400, which, "invalid_value", "'%s' is %lld: this server allows at most %d.", which, want, cap);
    j->rp.gen.max_tokens = want > 0 ? (int32_t)want : cap;
    if ((int64_t)j->n_prompt >= j->m->n_ctx)
        return cmf__srv_fail(e, 400, j->kind == SRV_KIND_CHAT ? "messages" : "prompt", "context_length_exceeded",
                        "This model's context is %d tokens per request; the prompt has %zu tokens.", j->m->n_ctx,
                        j->n_prompt);
    return true;
}

static bool parse_logprobs(json_t *body, srv_job *j, srv_err *e)
{
    json_t *lp = json_object_get(body, "logprobs");
    long long top = 0;
    if (j->kind == SRV_KIND_CHAT) {
        bool want = false;
        bool given = false;
        if (!get_bool(body, "logprobs", &want, e) || !get_int(body, "top_logprobs", 0, 20, &top, &given, e)) return false;
        if (given && !want)
            return cmf__srv_fail(e, 400, "top_logprobs", "invalid_value", "'top_logprobs' needs 'logprobs' set to true.");
        j->logprobs = want;
    } else if (lp && !json_is_null(lp)) {
        if (json_is_boolean(lp)) return bad_type(e, "logprobs", "an integer", lp);
        if (!get_int(body, "logprobs", 0, 20, &top, NULL, e)) return false;
        j->logprobs = true;
    }
    j->n_top = (int32_t)top;
    j->rp.gen.n_logprobs = (int32_t)top;
    return true;
}

static bool parse_stream(json_t *body, srv_job *j, srv_err *e)
{
    if (!get_bool(body, "stream", &j->stream, e)) return false;
    json_t *so = json_object_get(body, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) return bad_type(e, "stream_options", "an object", so);
        if (!j->stream)
            return cmf__srv_fail(e, 400, "stream_options", "invalid_value", "'stream_options' needs 'stream' set to true.");
        if (!get_bool(so, "include_usage", &j->include_usage, e)) return false;
    }
    return true;
}

/* A request names an adapter of the server by its --lora path or that
 * path's file name. */
static bool same_lora(const char *asked, const char *served)
{
    const char *base = strrchr(served, '/');
    return !strcmp(asked, served) || (base && !strcmp(asked, base + 1));
}

/* The adapters a request names ('lora': a string or an array of them, each
 * a --lora path or its file name) as a mask of the server's --lora. */
static bool parse_loras(json_t *lora, const srv *s, uint32_t *mask, srv_err *e)
{
    if (!json_is_string(lora) && !json_is_array(lora)) return bad_type(e, "lora", "a string or an array", lora);
    size_t n = json_is_string(lora) ? 1 : json_array_size(lora);
    *mask = 0;
    for (size_t k = 0; k < n; k++) {
        json_t *v = json_is_string(lora) ? lora : json_array_get(lora, k);
        if (!json_is_string(v)) return bad_type(e, "lora", "a string or an array of strings", lora);
        size_t i = 0;
        while (i < s->p.n_loras && !same_lora(json_string_value(v), s->p.loras[i])) i++;
        if (i == s->p.n_loras)
            return cmf__srv_fail(e, 400, "lora", "lora_not_found",
                                 "'lora' names '%s', which is not one of the %zu adapter(s) this server was started "
                                 "with (cmf serve --lora).",
                                 json_string_value(v), s->p.n_loras);
        *mask |= 1u << i;
    }
    return true;
}

/* Skill, task, LoRA. A request without 'task' or 'lora' runs the server's
 * (--task, every --lora); one that names others runs on the model's
 * scheduler for that combination (variant.c). 'task': a mask of the file,
 * "" for none; 'lora': adapters among the server's, [] for none. */
static bool parse_routing(json_t *body, srv *s, srv_job *j, srv_err *e)
{
    const char *skill, *task;
    if (!get_str(body, "skill", &skill, e) || !get_str(body, "task", &task, e)) return false;
    if (!skill) skill = s->p.skill;
    if (skill) {
        j->skill_asked = true;
        if (!strcmp(skill, "auto")) {
            if (!cmf_model_n_skills(j->m->model))
                return cmf__srv_fail(e, 400, "skill", "skill_not_found", "the model '%s' has no skills to route to",
                                j->m->id);
            j->rp.skill_auto = true;
        }
        else {
            int32_t k = 0, ns = cmf_model_n_skills(j->m->model);
            while (*skill && k < ns && strcmp(cmf_model_skill_id(j->m->model, k), skill)) k++;
            if (*skill && k == ns)
                return cmf__srv_fail(e, 400, "skill", "skill_not_found", "the model '%s' has no skill '%s' (%d skills)",
                                j->m->id, skill, ns);
            if (!(j->skill = strdup(skill))) return cmf__srv_fail(e, 500, NULL, NULL, "out of memory");
            j->rp.skill = j->skill;
        }
    }
    if (!task) task = s->p.task;
    else if (!*task) task = NULL;
    else {
        int32_t k = 0, nt = cmf_model_n_tasks(j->m->model);
        while (k < nt && strcmp(cmf_model_task_name(j->m->model, k), task)) k++;
        if (k == nt)
            return cmf__srv_fail(e, 400, "task", "task_not_found", "the model '%s' has no task mask '%s' (%d masks)",
                                 j->m->id, task, nt);
    }
    uint32_t loras = cmf__srv_server_loras(s);
    json_t *lora = json_object_get(body, "lora");
    if (lora && !json_is_null(lora) && !parse_loras(lora, s, &loras, e)) return false;
    return cmf__srv_variant_take(s, j->m, task, loras, j, e);
}

/* Fields this server refuses rather than ignores: honouring them wrongly
 * would be a silent 200 with the wrong answer. */
static bool parse_refused(json_t *body, srv_job *j, srv_err *e)
{
    json_t *rf = json_object_get(body, "response_format");
    if (rf && !json_is_null(rf)) {
        json_t *type = json_object_get(rf, "type");
        if (!json_is_object(rf) || !json_is_string(type))
            return cmf__srv_fail(e, 400, "response_format", "invalid_type",
                            "'response_format' must be an object with a string 'type'.");
        const char *t = json_string_value(type);
        if (!strcmp(t, "json_schema")) {
            json_t *js = json_object_get(rf, "json_schema");
            if (!json_is_object(js) || !json_is_object(json_object_get(js, "schema")))
                return cmf__srv_fail(e, 400, "response_format.json_schema.schema", "invalid_type",
                                     "response_format json_schema needs 'json_schema': {\"name\": ..., \"schema\": {...}}.");
        }
        if (!strcmp(t, "json_object") || !strcmp(t, "json_schema")) j->hook_spec = json_incref(rf); /* parse_format */
        else if (strcmp(t, "text"))
            return cmf__srv_fail(e, 400, "response_format", "invalid_value",
                            "response_format.type '%s': expected text, json_object or json_schema.", t);
    }
    json_t *bias = json_object_get(body, "logit_bias");
    if (bias && !json_is_null(bias) && (!json_is_object(bias) || json_object_size(bias)))
        return cmf__srv_fail(e, 400, "logit_bias", "unsupported_value", "'logit_bias' is not supported by this server.");
    if (j->kind == SRV_KIND_COMPLETION) {
        json_t *echo = json_object_get(body, "echo"), *suffix = json_object_get(body, "suffix");
        json_t *best = json_object_get(body, "best_of");
        if (json_is_true(echo)) return cmf__srv_fail(e, 400, "echo", "unsupported_value", "'echo' is not supported by this server.");
        if (suffix && !json_is_null(suffix) && !(json_is_string(suffix) && !json_string_length(suffix)))
            return cmf__srv_fail(e, 400, "suffix", "unsupported_value", "'suffix' is not supported by this server.");
        if (best && !json_is_null(best) && !(json_is_integer(best) && json_integer_value(best) == 1))
            return cmf__srv_fail(e, 400, "best_of", "unsupported_value", "'best_of' must be 1 on this server.");
    }
    const char *user;
    return get_str(body, "user", &user, e);
}

bool cmf__srv_compile_hook(srv_job *j, const char *schema, const char *param, const char *what, srv_err *e)
{
    if (j->rp.gen.ignore_eos)
        return cmf__srv_fail(e, 400, "ignore_eos", "invalid_value",
                             "'ignore_eos' cannot be combined with %s: a constrained answer ends where its grammar does.", what);
    cmf_status st = schema ? cmf_grammar_from_json_schema(j->m->model, schema, strlen(schema), &j->grammar)
                           : cmf_grammar_json_object(j->m->model, &j->grammar);
    if (!st) st = cmf_grammar_state_new(j->grammar, &j->gstate);
    if (st == CMF_ERR_NOMEM) return cmf__srv_fail(e, 500, NULL, "server_error", "Out of memory compiling %s.", what);
    if (st)
        return cmf__srv_fail(e, 400, param, st == CMF_ERR_UNSUPPORTED ? "unsupported_value" : "invalid_value",
                             "%s cannot be enforced: %s", what, cmf_last_error());
    j->rp.gen.hook = cmf_grammar_state_hook(j->gstate);
    return true;
}

/* response_format json_object / json_schema, or a tool_choice that forces
 * a call: the grammar compiled for the request's model and a state whose
 * logit hook constrains the request, so the output parses (and matches
 * the schema) whenever it ends with the model's end of text. A schema
 * keyword the grammar engine cannot enforce is a 400, never a silently
 * unconstrained answer. */
static bool parse_format(srv_job *j, srv_err *e)
{
    json_t *forced = cmf__srv_tools_schema(j);
    if (forced) {
        char *schema = json_dumps(forced, JSON_COMPACT);
        json_decref(forced);
        if (!schema) return cmf__srv_fail(e, 500, NULL, "server_error", "Out of memory reading the tools.");
        bool ok = cmf__srv_compile_hook(j, schema, "tools", "tool_choice (a call of the declared parameters)", e);
        free(schema);
        return ok;
    }
    if (!j->hook_spec) return true;
    const char *type = json_string_value(json_object_get(j->hook_spec, "type"));
    if (!strcmp(type, "json_object")) return cmf__srv_compile_hook(j, NULL, "response_format", "response_format json_object", e);
    char *schema = json_dumps(json_object_get(json_object_get(j->hook_spec, "json_schema"), "schema"), JSON_COMPACT);
    if (!schema) return cmf__srv_fail(e, 500, NULL, "server_error", "Out of memory reading the schema.");
    bool ok = cmf__srv_compile_hook(j, schema, "response_format.json_schema.schema", "response_format json_schema", e);
    free(schema);
    return ok;
}

bool cmf__srv_parse_generation(srv *s, int kind, json_t *body, srv_job *j, srv_err *e)
{
    j->kind = kind;
    j->rp = cmf_request_params_default();
    j->rp.gen = cmf_generate_params_default();
    if (!json_is_object(body)) return cmf__srv_fail(e, 400, NULL, "invalid_type", "The request body must be a JSON object.");
    const char *model;
    /* the fields that need no model first (what the fuzz target reaches) */
    if (!get_str(body, "model", &model, e) || !parse_refused(body, j, e) || !cmf__srv_parse_tools(body, j, e) ||
        !parse_stream(body, j, e) ||
        !parse_logprobs(body, j, e) || !parse_sampling(body, j, e) || !parse_stop(body, j, e))
        return false;
    if (!(j->m = cmf__srv_find_model(s, model)))
        return cmf__srv_fail(e, 404, "model", "model_not_found", "The model '%s' does not exist.", model);
    if (!parse_routing(body, s, j, e) || !parse_format(j, e)) return false;
    bool ok = kind == SRV_KIND_CHAT ? cmf__srv_render_messages(j->m, json_object_get(body, "messages"), j->tools,
                                                               &j->prompt, &j->n_prompt, e)
                                    : completion_prompt(j->m, json_object_get(body, "prompt"), &j->prompt,
                                                        &j->n_prompt, e);
    if (!ok) return false;
    if (!j->n_prompt)
        return cmf__srv_fail(e, 400, kind == SRV_KIND_CHAT ? "messages" : "prompt", "empty_prompt",
                        "The prompt is empty after tokenization.");
    if (!parse_limits(body, s, j, e)) return false;
    j->rp.prompt = j->prompt;
    j->rp.n_prompt = j->n_prompt;
    j->rp.gen.stop = (const char *const *)j->stop;
    j->rp.gen.n_stop = j->n_stop;
    return true;
}

void cmf__srv_job_clear(srv_job *j)
{
    if (j->m) cmf__srv_variant_release(j->m, j->var);
    free(j->prompt);
    for (size_t i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->stop);
    free(j->skill);
    json_decref(j->hook_spec);
    json_decref(j->tools);
    free(j->tool_named);
    cmf_grammar_state_free(j->gstate); /* after the request: cmf_request_free has waited for it */
    cmf_grammar_free(j->grammar);
    json_decref(j->lp);
    free(j->text);
    free(j->out);
    memset(j, 0, sizeof *j);
}
