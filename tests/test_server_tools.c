/* test_server_tools.c — the server's function calling, below HTTP: the
 * request fields and their errors; the calls read out of model text in
 * each written form (Hermes blocks, a bare object with arguments or
 * parameters, a bare array), and what is not a call (an undeclared name,
 * broken JSON, prose) left as content; what a stream may send before the
 * end; the schema a forced choice compiles; assistant turns' arguments
 * made objects for the template. */
#include "harness.h"
#include "server/srv.h"

#include <stdlib.h>
#include <string.h>

static const char *TOOLS =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"now\"}}]";

/* A chat job as parse.c leaves it, from a request body's JSON (fields
 * besides the model's). Returns false with *e on a refused field. */
static bool job_from(const char *body_text, srv_job *j, srv_err *e)
{
    memset(j, 0, sizeof *j);
    j->kind = SRV_KIND_CHAT;
    snprintf(j->id, sizeof j->id, "chatcmpl-00000000000000ab");
    json_error_t je;
    json_t *body = json_loads(body_text, 0, &je);
    if (!body) {
        harness_fail(__FILE__, __LINE__, "test body does not parse: %s", je.text);
        return false;
    }
    bool ok = cmf__srv_parse_tools(body, j, e);
    json_decref(body);
    return ok;
}

static srv_job g_auto;

/* g_auto afresh: the two tools, tool_choice auto. */
static srv_job *auto_job(void)
{
    srv_err e;
    char body[1024];
    cmf__srv_job_clear(&g_auto);
    snprintf(body, sizeof body, "{\"tools\": %s}", TOOLS);
    if (!job_from(body, &g_auto, &e)) harness_fail(__FILE__, __LINE__, "auto job: %s", e.message);
    return &g_auto;
}

/* The calls in `text` as compact JSON (NULL: none), *clen set. */
static char *calls_of(srv_job *j, const char *text, size_t *clen)
{
    json_t *calls = cmf__srv_tools_calls(j, text, strlen(text), clen);
    if (!calls) return NULL;
    char *s = json_dumps(calls, JSON_COMPACT);
    json_decref(calls);
    return s;
}

TEST(request_fields)
{
    srv_job j;
    srv_err e;
    char body[1200];
    snprintf(body, sizeof body, "{\"tools\": %s, \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"now\"}}}",
             TOOLS);
    CHECK(job_from(body, &j, &e));
    CHECK_EQ_INT(j.tool_choice, SRV_TOOLS_NAMED);
    CHECK_EQ_STR(j.tool_named, "now");
    CHECK(j.tool_parallel);
    cmf__srv_job_clear(&j);
    snprintf(body, sizeof body, "{\"tools\": %s, \"tool_choice\": \"required\", \"parallel_tool_calls\": false}", TOOLS);
    CHECK(job_from(body, &j, &e));
    CHECK_EQ_INT(j.tool_choice, SRV_TOOLS_REQUIRED);
    CHECK(!j.tool_parallel);
    cmf__srv_job_clear(&j);
    CHECK(job_from("{\"tool_choice\": \"none\"}", &j, &e));
    CHECK_EQ_INT(j.tool_choice, SRV_TOOLS_NONE);
    CHECK(job_from("{\"tools\": []}", &j, &e));
    CHECK_EQ_INT(j.tool_choice, SRV_TOOLS_NONE);
    cmf__srv_job_clear(&j);

    static const struct { const char *body, *param, *msg; } BAD[] = {
        {"{\"tools\": {}}", "tools", "must be an array"},
        {"{\"tools\": [{\"type\": \"code\"}]}", "tools", "tools[0]"},
        {"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a b\"}}]}", "tools", "tools[0].function.name"},
        {"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": 3}}]}", "tools",
         "parameters"},
        {"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, "
         "{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}",
         "tools", "repeats tools[0]"},
        {"{\"tool_choice\": \"required\"}", "tool_choice", "declares no tools"},
        {"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], \"tool_choice\": "
         "{\"type\": \"function\", \"function\": {\"name\": \"g\"}}}",
         "tool_choice", "'g'"},
        {"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], \"tool_choice\": \"sometimes\"}",
         "tool_choice", "must be"},
        {"{\"parallel_tool_calls\": 1}", "parallel_tool_calls", "boolean"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        memset(&e, 0, sizeof e);
        bool ok = job_from(BAD[i].body, &j, &e);
        if (ok) harness_fail(__FILE__, __LINE__, "accepted: %s", BAD[i].body);
        else {
            CHECK_EQ_INT(e.status, 400);
            CHECK_EQ_STR(e.param, BAD[i].param);
            CHECK_CONTAINS(e.message, BAD[i].msg);
        }
        cmf__srv_job_clear(&j);
    }
    /* tools are a chat field */
    memset(&j, 0, sizeof j);
    j.kind = SRV_KIND_COMPLETION;
    json_t *body2 = json_loads("{\"tools\": []}", 0, NULL);
    CHECK(!cmf__srv_parse_tools(body2, &j, &e));
    CHECK_EQ_STR(e.param, "tools");
    json_decref(body2);
    /* a forced call and response_format cannot both hold */
    memset(&j, 0, sizeof j);
    j.kind = SRV_KIND_CHAT;
    j.hook_spec = json_pack("{s:s}", "type", "json_object");
    snprintf(body, sizeof body, "{\"tools\": %s, \"tool_choice\": \"required\"}", TOOLS);
    json_t *body3 = json_loads(body, 0, NULL);
    CHECK(!cmf__srv_parse_tools(body3, &j, &e));
    CHECK_EQ_STR(e.param, "tool_choice");
    json_decref(body3);
    cmf__srv_job_clear(&j);
}

TEST(calls_hermes)
{
    srv_job *j = auto_job();
    size_t clen = 99;
    const char *t = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Verona\"}}\n</tool_call>"
                    "\n<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>";
    json_t *calls = cmf__srv_tools_calls(j, t, strlen(t), &clen);
    CHECK_EQ_INT(json_array_size(calls), 2);
    const char *id0 = json_string_value(json_object_get(json_array_get(calls, 0), "id"));
    const char *id1 = json_string_value(json_object_get(json_array_get(calls, 1), "id"));
    CHECK(id0 && id1 && strlen(id0) == 9 && strspn(id0, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") == 9);
    CHECK(id0 && id1 && strcmp(id0, id1));
    for (size_t i = 0; i < json_array_size(calls); i++) json_object_del(json_array_get(calls, i), "id");
    char *s = json_dumps(calls, JSON_COMPACT);
    json_decref(calls);
    CHECK_EQ_STR(s, "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                    "\"arguments\":\"{\\\"city\\\":\\\"Verona\\\"}\"}},{\"type\":"
                    "\"function\",\"function\":{\"name\":\"now\",\"arguments\":\"{}\"}}]");
    CHECK_EQ_INT(clen, strlen("Let me look.\n"));
    free(s);
    /* the end of text before the closing tag still holds the call */
    s = calls_of(j, "<tool_call>{\"name\": \"now\", \"arguments\": {}}", &clen);
    CHECK_CONTAINS(s, "\"name\":\"now\"");
    CHECK_EQ_INT(clen, 0);
    free(s);
    /* arguments written as a JSON string are read as the object they hold */
    s = calls_of(j, "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Mantua\\\"}\"}</tool_call>",
                 &clen);
    CHECK_CONTAINS(s, "{\\\"city\\\":\\\"Mantua\\\"}");
    free(s);
    /* parallel_tool_calls false keeps the first */
    j->tool_parallel = false;
    s = calls_of(j, t, &clen);
    CHECK(s && !strstr(s, "\"now\"") && strstr(s, "get_weather"));
    free(s);
    j->tool_parallel = true;
}

TEST(calls_bare)
{
    srv_job *j = auto_job();
    size_t clen = 99;
    char *s = calls_of(j, "  {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Padua\"}}", &clen);
    CHECK_CONTAINS(s, "\"arguments\":\"{\\\"city\\\":\\\"Padua\\\"}\"");
    CHECK_EQ_INT(clen, 0);
    free(s);
    s = calls_of(j, "[{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}]",
                 &clen);
    CHECK(s && strstr(s, "\"now\"") && strstr(s, "get_weather"));
    free(s);
}

TEST(not_calls)
{
    srv_job *j = auto_job();
    static const char *const TEXT[] = {
        "Wherefore art thou Romeo?",
        "{\"name\": \"launch\", \"arguments\": {}}",                         /* not declared */
        "{\"name\": \"now\", \"arguments\": [1]}",                           /* arguments not an object */
        "{\"name\": \"now\", \"arguments\": {}} and then",                   /* not only JSON */
        "[]",                                                                 /* no call */
        "{\"city\": \"Verona\"}",                                            /* JSON, no name */
        "<tool_call>{\"name\": \"now\", \"arguments\": {</tool_call>",       /* broken */
        "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call><tool_call>{}</tool_call>", /* one bad */
        "",
    };
    for (size_t i = 0; i < sizeof TEXT / sizeof TEXT[0]; i++) {
        size_t clen = 0;
        char *s = calls_of(j, TEXT[i], &clen);
        if (s) harness_fail(__FILE__, __LINE__, "read calls %s from %s", s, TEXT[i]);
        free(s);
        CHECK_EQ_INT(clen, strlen(TEXT[i]));
    }
    /* tool_choice none: nothing is read */
    j->tool_choice = SRV_TOOLS_NONE;
    size_t clen;
    CHECK(!calls_of(j, "{\"name\": \"now\", \"arguments\": {}}", &clen));
    CHECK_EQ_INT(cmf__srv_tools_safe(j, "{\"a", 3), 3);
}

TEST(stream_holdback)
{
    srv_job *j = auto_job();
    static const struct { const char *text; size_t safe; } CASES[] = {
        {"", 0},
        {"  \n", 0},                       /* whitespace may precede a bare call */
        {" {\"name\"", 0},                 /* may be a bare call: held to the end */
        {"[", 0},
        {"Good", 4},
        {"Good <tool", 5},                 /* a possible tag start is held */
        {"Good <tool_call>{\"na", 5},
        {"Good <toy", 9},                  /* not a tag after all */
        {"Good <", 5},
        {"\n<tool_call>", 0},              /* only whitespace before the tag */
        {"a<b<tool_c", 3},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        size_t got = cmf__srv_tools_safe(j, CASES[i].text, strlen(CASES[i].text));
        if (got != CASES[i].safe)
            harness_fail(__FILE__, __LINE__, "safe('%s') = %zu, want %zu", CASES[i].text, got, CASES[i].safe);
    }
}

TEST(forced_schema)
{
    srv_job j;
    srv_err e;
    char body[1200];
    snprintf(body, sizeof body, "{\"tools\": %s, \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": "
                                "\"get_weather\"}}}", TOOLS);
    CHECK(job_from(body, &j, &e));
    json_t *s = cmf__srv_tools_schema(&j);
    char *text = json_dumps(s, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK_EQ_STR(text, "{\"additionalProperties\":false,\"properties\":{\"arguments\":{\"properties\":{\"city\":{\"type\":"
                       "\"string\"}},\"required\":[\"city\"],\"type\":\"object\"},\"name\":{\"const\":\"get_weather\"}},"
                       "\"required\":[\"name\",\"arguments\"],\"type\":\"object\"}");
    free(text);
    json_decref(s);
    cmf__srv_job_clear(&j);
    snprintf(body, sizeof body, "{\"tools\": %s, \"tool_choice\": \"required\"}", TOOLS);
    CHECK(job_from(body, &j, &e));
    s = cmf__srv_tools_schema(&j);
    CHECK_EQ_STR(json_string_value(json_object_get(s, "type")), "array");
    CHECK_EQ_INT(json_integer_value(json_object_get(s, "minItems")), 1);
    json_t *any = json_object_get(json_object_get(s, "items"), "anyOf");
    CHECK_EQ_INT(json_array_size(any), 2);
    /* a tool without parameters takes any object */
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(json_object_get(json_array_get(any, 1), "properties"),
                                                                   "arguments"), "type")), "object");
    json_decref(s);
    j.tool_parallel = false;
    s = cmf__srv_tools_schema(&j);
    CHECK(json_object_get(s, "anyOf") != NULL);
    json_decref(s);
    j.tool_choice = SRV_TOOLS_AUTO;
    CHECK(cmf__srv_tools_schema(&j) == NULL);
    cmf__srv_job_clear(&j);
}

TEST(history_calls)
{
    json_t *calls = json_loads("[{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"now\", \"arguments\":"
                               " \"{\\\"tz\\\": \\\"UTC\\\"}\"}}]", 0, NULL), *out = NULL;
    srv_err e;
    CHECK(cmf__srv_tools_normalize_calls(calls, 3, &out, &e));
    char *s = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK_EQ_STR(s, "[{\"function\":{\"arguments\":{\"tz\":\"UTC\"},\"name\":\"now\"},\"id\":\"c1\",\"type\":\"function\"}]");
    free(s);
    json_decref(out);
    json_decref(calls);
    calls = json_loads("[{\"function\": {\"name\": \"now\", \"arguments\": \"{tz\"}}]", 0, NULL);
    CHECK(!cmf__srv_tools_normalize_calls(calls, 3, &out, &e));
    CHECK_EQ_STR(e.param, "messages");
    CHECK_CONTAINS(e.message, "messages[3].tool_calls[0].function.arguments is not JSON");
    json_decref(calls);
    calls = json_loads("[{\"function\": {}}]", 0, NULL);
    CHECK(!cmf__srv_tools_normalize_calls(calls, 0, &out, &e));
    CHECK_CONTAINS(e.message, "messages[0].tool_calls[0]");
    json_decref(calls);
}

int main(void)
{
    RUN(request_fields);
    RUN(calls_hermes);
    RUN(calls_bare);
    RUN(not_calls);
    RUN(stream_holdback);
    RUN(forced_schema);
    RUN(history_calls);
    cmf__srv_job_clear(&g_auto);
    return harness_done();
}
