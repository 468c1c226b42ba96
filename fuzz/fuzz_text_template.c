/* fuzz_text_template.c — random template source compiled and rendered
 * against a fixed chat context. Must never crash, leak or hang: every
 * outcome is a render or a CMF_ERR_TEMPLATE with a message. The first byte
 * picks add_generation_prompt; the rest is the template. */
#include "text/template.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char CONTEXT[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi \\u00e9 \\ud83c\\udf89\"},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\","
    "   \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1.5, \"y\": [true, null]}}}]},"
    " {\"role\": \"tool\", \"content\": \"42\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}],"
    " \"enable_thinking\": false, \"date_string\": \"26 Jul 2024\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static json_t *ctx;
    if (!ctx) ctx = json_loads(CONTEXT, 0, NULL);
    if (!ctx || size == 0) return 0;
    cmf__chat_params p = {0};
    p.messages = json_object_get(ctx, "messages");
    p.tools = json_object_get(ctx, "tools");
    p.kwargs = ctx;
    p.add_generation_prompt = data[0] & 1;
    p.bos_token = (data[0] & 2) ? "<s>" : NULL;
    p.eos_token = "</s>";
    cmf__template *t = NULL;
    if (cmf__template_compile((const char *)data + 1, size - 1, &t) == CMF_OK) {
        char *out = NULL;
        size_t len = 0;
        cmf__template_render_chat(t, &p, &out, &len);
        free(out);
        cmf__template_free(t);
    }
    return 0;
}
