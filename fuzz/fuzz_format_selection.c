/* fuzz_format_selection.c — fuzz entry point for a skill's routing block
 * (format/skills.h): the input is a header `selection` object as JSON
 * text; the first byte picks the feature dimension (1..16). When it
 * decodes, its score is computed for a fixed feature vector (finite or
 * +inf, never NaN). The raw bytes also go through the base64 decoder. */
#include "format/skills.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 << 20) return 0;
    uint32_t dim = (uint32_t)(data[0] % 16) + 1;
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    size_t n = 0;
    if (cmf__f16_base64_decode(text, NULL, 0, &n, "fuzz") == CMF_OK && n <= 1 << 16) {
        float *v = malloc((n ? n : 1) * sizeof *v);
        /* counted, so only a non-finite value can stop it */
        if (v && cmf__f16_base64_decode(text, v, n, NULL, "fuzz") != CMF_OK && !strstr(cmf_last_error(), "not finite"))
            abort();
        free(v);
    }
    json_t *sel = json_loadb(text, size - 1, 0, NULL);
    cmf__skill_selection s;
    if (sel && cmf__skill_selection_parse(sel, dim, 8, "fuzz", &s) == CMF_OK) {
        float phi[16];
        for (uint32_t i = 0; i < dim; i++) phi[i] = (float)i - 3.5f;
        if (isnan(cmf__skill_selection_error(&s, phi))) abort();
        cmf__skill_selection_free(&s);
    }
    json_decref(sel);
    free(text);
    return 0;
}
