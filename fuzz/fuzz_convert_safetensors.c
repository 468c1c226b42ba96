/* fuzz_convert_safetensors.c — the safetensors header parser on arbitrary
 * bytes: it must either refuse with a status or return entries whose data
 * ranges lie inside the input; it never reads past the buffer. */
#include "format/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy so that reads past `size` are caught by ASan */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    cmf__st_tensor *t = NULL;
    size_t n = 0;
    if (cmf__st_parse(buf, size, "fuzz", 0, &t, &n) == CMF_OK) {
        for (size_t i = 0; i < n; i++) {
            if (t[i].off > size || t[i].nbytes > size - t[i].off) abort();
            volatile uint8_t sink = 0;
            if (t[i].nbytes) sink ^= buf[t[i].off] ^ buf[t[i].off + t[i].nbytes - 1];
            (void)sink;
        }
    }
    cmf__st_tensors_free(t, n);
    free(buf);
    return 0;
}
