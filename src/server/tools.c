/* tools.c — OpenAI function calling on the chat endpoint: the request's
 * `tools`, `tool_choice` and `parallel_tool_calls` fields; the assistant
 * turns of a conversation that called tools, put in the shape chat
 * templates read (arguments as an object, as transformers documents);
 * `tool_choice: "required"` or a named function enforced by the grammar
 * engine; and the calls read back out of what the model wrote.
 *
 * Three ways models write a call are read, each only naming a declared
 * function: Hermes / Qwen `<tool_call>{"name": ..., "arguments": ...}
 * </tool_call>` blocks after optional text; one bare JSON object
 * `{"name": ..., "arguments"|"parameters": ...}` (Llama 3.x, whose
 * <|python_tag|> is a special token and so never reaches the text); and a
 * bare JSON array of those (Mistral, whose [TOOL_CALLS] is special too).
 * The grammar of a forced choice produces the bare form. */
#include "server/srv.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define TAG_OPEN "<tool_call>"
#define TAG_CLOSE "</tool_call>"
#define MAX_TOOLS 128

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-') return false;
    return true;
}

/* The function object of the tool named `name` in `tools`, or NULL. */
static json_t *find_tool(json_t *tools, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *f = json_object_get(t, "function");
        if (!strcmp(json_string_value(json_object_get(f, "name")), name)) return f;
    }
    return NULL;
}

static bool check_tools(json_t *tools, srv_err *e)
{
    if (!json_is_array(tools))
        return cmf__srv_fail(e, 400, "tools", "invalid_type", "'tools' must be an array of {\"type\": \"function\", ...}.");
    if (json_array_size(tools) > MAX_TOOLS)
        return cmf__srv_fail(e, 400, "tools", "invalid_value", "'tools' has %zu entries: at most %d.", json_array_size(tools),
                             MAX_TOOLS);
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *type = json_object_get(t, "type"), *f = json_object_get(t, "function");
        if (!json_is_object(t) || !json_is_string(type) || strcmp(json_string_value(type), "function"))
            return cmf__srv_fail(e, 400, "tools", "invalid_value", "tools[%zu]: expected an object with type 'function'.", i);
        if (!json_is_object(f))
            return cmf__srv_fail(e, 400, "tools", "invalid_type", "tools[%zu].function: expected an object.", i);
        json_t *name = json_object_get(f, "name"), *params = json_object_get(f, "parameters");
        json_t *desc = json_object_get(f, "description");
        if (!json_is_string(name) || !valid_name(json_string_value(name)))
            return cmf__srv_fail(e, 400, "tools", "invalid_value",
                                 "tools[%zu].function.name: expected 1 to 64 letters, digits, '_' or '-'.", i);
        if (params && !json_is_null(params) && !json_is_object(params))
            return cmf__srv_fail(e, 400, "tools", "invalid_type", "tools[%zu].function.parameters: expected an object.", i);
        if (desc && !json_is_null(desc) && !json_is_string(desc))
            return cmf__srv_fail(e, 400, "tools", "invalid_type", "tools[%zu].function.description: expected a string.", i);
        for (size_t k = 0; k < i; k++)
            if (!strcmp(json_string_value(json_object_get(json_object_get(json_array_get(tools, k), "function"), "name")),
                        json_string_value(name)))
                return cmf__srv_fail(e, 400, "tools", "invalid_value", "tools[%zu].function.name '%s' repeats tools[%zu].",
                                     i, json_string_value(name), k);
    }
    return true;
}

bool cmf__srv_parse_tools(json_t *body, srv_job *j, srv_err *e)
{
    json_t *tools = json_object_get(body, "tools"), *tc = json_object_get(body, "tool_choice");
    json_t *par = json_object_get(body, "parallel_tool_calls");
    bool has_tools = tools && !json_is_null(tools);
    if (has_tools && j->kind != SRV_KIND_CHAT)
        return cmf__srv_fail(e, 400, "tools", "unsupported_value", "'tools' belongs to /v1/chat/completions.");
    if (has_tools && !check_tools(tools, e)) return false;
    if (has_tools && !json_array_size(tools)) has_tools = false;
    if (par && !json_is_null(par) && !json_is_boolean(par))
        return cmf__srv_fail(e, 400, "parallel_tool_calls", "invalid_type", "'parallel_tool_calls' must be a boolean.");
    j->tool_parallel = !json_is_false(par);
    j->tool_choice = has_tools ? SRV_TOOLS_AUTO : SRV_TOOLS_NONE;
    if (tc && !json_is_null(tc)) {
        const char *s = json_string_value(tc);
        json_t *f = json_object_get(tc, "function"), *type = json_object_get(tc, "type");
        if (s && !strcmp(s, "none")) j->tool_choice = SRV_TOOLS_NONE;
        else if (s && (!strcmp(s, "auto") || !strcmp(s, "required"))) {
            if (!has_tools)
                return cmf__srv_fail(e, 400, "tool_choice", "invalid_value",
                                     "'tool_choice' is '%s' but the request declares no tools.", s);
            j->tool_choice = !strcmp(s, "auto") ? SRV_TOOLS_AUTO : SRV_TOOLS_REQUIRED;
        } else if (json_is_object(tc) && json_is_string(type) && !strcmp(json_string_value(type), "function") &&
                   json_is_string(json_object_get(f, "name"))) {
            const char *name = json_string_value(json_object_get(f, "name"));
            if (!has_tools || !find_tool(tools, name))
                return cmf__srv_fail(e, 400, "tool_choice", "invalid_value",
                                     "tool_choice names the function '%s', which 'tools' does not declare.", name);
            if (!(j->tool_named = strdup(name))) return cmf__srv_fail(e, 500, NULL, NULL, "out of memory");
            j->tool_choice = SRV_TOOLS_NAMED;
        } else {
            return cmf__srv_fail(e, 400, "tool_choice", "invalid_value",
                                 "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                                 "{\"type\": \"function\", \"function\": {\"name\": ...}}.");
        }
    }
    if (has_tools) j->tools = json_incref(tools);
    if (j->hook_spec && j->tool_choice >= SRV_TOOLS_REQUIRED)
        return cmf__srv_fail(e, 400, "tool_choice", "unsupported_value",
                             "'tool_choice' forcing a call and 'response_format' cannot both constrain one answer.");
    return true;
}

/* The schema one call must match: {"name": const, "arguments": parameters}. */
static json_t *call_schema(json_t *f)
{
    json_t *params = json_object_get(f, "parameters");
    json_t *args = json_is_object(params) ? json_deep_copy(params) : json_pack("{s:s}", "type", "object");
    return json_pack("{s:s, s:{s:{s:O}, s:o}, s:[s, s], s:b}", "type", "object", "properties", "name", "const",
                     json_object_get(f, "name"), "arguments", args, "required", "name", "arguments",
                     "additionalProperties", 0);
}

json_t *cmf__srv_tools_schema(const srv_job *j)
{
    if (j->tool_choice == SRV_TOOLS_NAMED) return call_schema(find_tool(j->tools, j->tool_named));
    if (j->tool_choice != SRV_TOOLS_REQUIRED) return NULL;
    json_t *any = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(j->tools, i, t) json_array_append_new(any, call_schema(json_object_get(t, "function")));
    json_t *one = json_array_size(any) == 1 ? json_incref(json_array_get(any, 0)) : json_pack("{s:O}", "anyOf", any);
    json_decref(any);
    if (!j->tool_parallel) return one;
    return json_pack("{s:s, s:o, s:i}", "type", "array", "items", one, "minItems", 1);
}

bool cmf__srv_tools_normalize_calls(json_t *calls, size_t idx, json_t **out, srv_err *e)
{
    *out = NULL;
    if (!json_is_array(calls))
        return cmf__srv_fail(e, 400, "messages", "invalid_type", "messages[%zu].tool_calls: expected an array.", idx);
    json_t *norm = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) {
        json_t *f = json_object_get(c, "function"), *id = json_object_get(c, "id");
        json_t *name = json_object_get(f, "name"), *args = json_object_get(f, "arguments");
        if (!json_is_object(c) || !json_is_object(f) || !json_is_string(name)) {
            json_decref(norm);
            return cmf__srv_fail(e, 400, "messages", "invalid_value",
                                 "messages[%zu].tool_calls[%zu]: expected {\"id\", \"type\": \"function\", "
                                 "\"function\": {\"name\", \"arguments\"}}.",
                                 idx, i);
        }
        json_t *obj;
        if (json_is_string(args)) {
            json_error_t je;
            obj = json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY, &je);
            if (!obj) {
                json_decref(norm);
                return cmf__srv_fail(e, 400, "messages", "invalid_value",
                                     "messages[%zu].tool_calls[%zu].function.arguments is not JSON: %s (column %d).", idx,
                                     i, je.text, je.column);
            }
        } else if (!args || json_is_null(args)) {
            obj = json_object();
        } else {
            obj = json_incref(args);
        }
        json_t *one = json_pack("{s:s, s:{s:O, s:o}}", "type", "function", "function", "name", name, "arguments", obj);
        if (json_is_string(id)) json_object_set(one, "id", id);
        json_array_append_new(norm, one);
    }
    *out = norm;
    return true;
}

/* ---- reading calls back ---- */

static size_t skip_ws(const char *s, size_t i, size_t n)
{
    while (i < n && isspace((unsigned char)s[i])) i++;
    return i;
}

/* The first `what` in [s, s+n), or NULL (glibc's memmem; _GNU_SOURCE is the build's). */
static const char *find(const char *s, size_t n, const char *what)
{
    return memmem(s, n, what, strlen(what));
}

/* A call's id: 9 letters and digits from the request's id and the call's
 * index (Mistral's templates refuse any other shape when the call comes
 * back as history; the others take any string). */
static void call_id(const srv_job *j, size_t index, char out[10])
{
    static const char DIGITS[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    uint64_t h = 0xcbf29ce484222325ull ^ index;
    for (const char *p = j->id; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    h ^= h >> 31, h *= 0x7fb5d329728ea185ull, h ^= h >> 27;
    for (int i = 0; i < 9; i++, h /= 62) out[i] = DIGITS[h % 62];
    out[9] = 0;
}

/* One call object {"name", "arguments"|"parameters"} naming a declared
 * tool, in OpenAI's response shape (arguments as a JSON string); NULL when
 * it is not one. */
static json_t *call_from(const srv_job *j, json_t *o, size_t index)
{
    json_t *name = json_object_get(o, "name"), *args = json_object_get(o, "arguments");
    if (!args) args = json_object_get(o, "parameters");
    if (!json_is_object(o) || !json_is_string(name) || !find_tool(j->tools, json_string_value(name))) return NULL;
    json_t *parsed = NULL;
    if (json_is_string(args)) args = parsed = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
    if (!json_is_object(args)) {
        json_decref(parsed);
        return NULL;
    }
    char *text = json_dumps(args, JSON_COMPACT);
    json_decref(parsed);
    if (!text) return NULL;
    char id[10];
    call_id(j, index, id);
    json_t *c = json_pack("{s:s, s:s, s:{s:O, s:s}}", "id", id, "type", "function", "function", "name", name,
                          "arguments", text);
    free(text);
    return c;
}

/* Appends the call(s) in JSON text [p, p+n) to `calls`; false when it is
 * not wholly calls. */
static bool calls_from_json(const srv_job *j, const char *p, size_t n, json_t *calls)
{
    json_t *v = json_loadb(p, n, 0, NULL);
    if (!v) return false;
    bool ok = json_is_array(v) ? json_array_size(v) > 0 : json_is_object(v);
    json_t *one = json_is_array(v) ? NULL : v;
    for (size_t i = 0; ok && i < (one ? 1 : json_array_size(v)); i++) {
        json_t *c = call_from(j, one ? one : json_array_get(v, i), json_array_size(calls));
        ok = c != NULL;
        if (c) json_array_append_new(calls, c);
    }
    json_decref(v);
    return ok;
}

json_t *cmf__srv_tools_calls(const srv_job *j, const char *text, size_t len, size_t *content_len)
{
    *content_len = len;
    if (j->tool_choice == SRV_TOOLS_NONE || !text) return NULL;
    json_t *calls = json_array();
    size_t start = skip_ws(text, 0, len);
    bool ok;
    const char *tag = find(text, len, TAG_OPEN);
    if (tag) {
        *content_len = (size_t)(tag - text);
        ok = true;
        for (const char *p = tag; ok && p;) {
            const char *body = p + strlen(TAG_OPEN), *end = find(body, len - (size_t)(body - text), TAG_CLOSE);
            size_t n = end ? (size_t)(end - body) : len - (size_t)(body - text);
            ok = calls_from_json(j, body, n, calls);
            p = end ? find(end, len - (size_t)(end - text), TAG_OPEN) : NULL;
        }
    } else {
        *content_len = 0;
        ok = start < len && (text[start] == '{' || text[start] == '[') && calls_from_json(j, text, len, calls);
    }
    if (!ok || !json_array_size(calls)) {
        json_decref(calls);
        *content_len = len;
        return NULL;
    }
    if (!j->tool_parallel)
        while (json_array_size(calls) > 1) json_array_remove(calls, json_array_size(calls) - 1);
    if (skip_ws(text, 0, *content_len) == *content_len) *content_len = 0; /* only whitespace before the calls */
    return calls;
}

size_t cmf__srv_tools_safe(const srv_job *j, const char *text, size_t len)
{
    if (j->tool_choice == SRV_TOOLS_NONE) return len;
    size_t start = skip_ws(text, 0, len);
    if (start == len || text[start] == '{' || text[start] == '[') return 0; /* may be a bare call: held to the end */
    const char *tag = find(text, len, TAG_OPEN);
    size_t safe = tag ? (size_t)(tag - text) : len;
    for (size_t k = strlen(TAG_OPEN) - 1; !tag && k > 0; k--)
        if (k <= len && !memcmp(text + len - k, TAG_OPEN, k)) {
            safe = len - k; /* a tag may be starting */
            break;
        }
    return skip_ws(text, 0, safe) == safe ? 0 : safe; /* only whitespace: it may precede a call */
}
