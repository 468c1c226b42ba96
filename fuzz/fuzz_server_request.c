/* fuzz_server_request.c — fuzz entry point for what `cmf serve` does with
 * a request body before any model is involved: the JSON parse, the field
 * checks of a chat and a completion request (on a server with no model,
 * so they end at the model lookup), the error body, and the UTF-8 repair
 * of text put into JSON. */
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
    json_decref(body);
    return 0;
}
