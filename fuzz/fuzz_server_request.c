/* fuzz_server_request.c — fuzz entry point for what `cmf serve` does with
 * a request body before any model is involved: the JSON parse, the field
 * checks of a chat and a completion request (on a server with no model,
 * so they end at the model lookup), the error body, the UTF-8 repair
 * of text put into JSON, and function calling: the tools fields, the
 * calls read out of text (the body itself, as a model's answer) and the
 * history's tool calls made objects. */
#include "server/srv.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *t = cmf__srv_json_text((const char *)data, size);
    if (t && !json_is_string(t)) abort();
    json_decref(t);
    json_t *body = json_loadb((const char *)data, size, 0, NULL);
    if (!body) return 0;
    srv s;
    memset(&s, 0, sizeof s);
    cmf__server_params_default(&s.p);
    for (int kind = SRV_KIND_CHAT; kind <= SRV_KIND_COMPLETION; kind++) {
        srv_job j;
        srv_err e;
        memset(&j, 0, sizeof j);
        memset(&e, 0, sizeof e);
        if (cmf__srv_parse_generation(&s, kind, body, &j, &e)) abort(); /* no model: never accepted */
        if (e.status < 400 || !e.message[0]) abort();
        json_t *err = cmf__srv_err_json(&e);
        if (!err) abort();
        json_decref(err);
        cmf__srv_job_clear(&j);
    }
    /* function calling below the model: the body's tools, then the body's
     * own bytes read as a model's answer, and its history's tool calls */
    srv_job j;
    srv_err e;
    memset(&j, 0, sizeof j);
    j.kind = SRV_KIND_CHAT;
    strcpy(j.id, "chatcmpl-fuzz");
    if (cmf__srv_parse_tools(body, &j, &e)) {
        size_t clen = 0;
        json_t *calls = cmf__srv_tools_calls(&j, (const char *)data, size, &clen);
        if (clen > size || (calls && !json_array_size(calls))) abort();
        json_decref(calls);
        if (cmf__srv_tools_safe(&j, (const char *)data, size) > size) abort();
        json_decref(cmf__srv_tools_schema(&j));
    }
    cmf__srv_job_clear(&j);
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(body, "messages"), i, m) {
        json_t *norm = NULL, *calls = json_object_get(m, "tool_calls");
        if (calls && cmf__srv_tools_normalize_calls(calls, i, &norm, &e) && !json_is_array(norm)) abort();
        json_decref(norm);
    }
    json_decref(body);
    return 0;
}
