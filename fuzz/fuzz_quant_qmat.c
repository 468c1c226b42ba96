/* fuzz_quant_qmat.c — fuzz entry point for the quant payload validator:
 * byte 0 picks the dtype, bytes 1-2 the shape, the rest is the payload.
 * Whatever cmf__qmat_init accepts must decode and dot every row without
 * reading outside the payload. */
#include "quant/quant.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3) return 0;
    int dtype = data[0] % 18; /* 17 exercises the unknown-id path */
    uint64_t rows = 1 + data[1] % 8, cols = data[2] & 0x80 ? 32 * (1 + (data[2] & 3)) : 1 + (data[2] & 0x7f);
    if (data[1] & 0x80) { /* extreme shapes: huge row counts, zero columns */
        rows = 1ull << (data[1] & 63);
        cols = data[2] & 0x80 ? 0 : cols;
    }
    uint64_t shape[2] = {rows, cols};
    size_t len = size - 3;
    uint8_t *payload = malloc(len ? len : 1); /* exact-size copy: overreads trip ASan */
    if (!payload) return 0;
    memcpy(payload, data + 3, len);
    cmf__qmat m;
    if (cmf__qmat_init(&m, dtype, payload, len, 2, shape, "fuzz") == CMF_OK) {
        float *w = malloc((cols + 1) * sizeof *w), *x = calloc(cols + 1, sizeof *x);
        if (w && x)
            for (int64_t r = 0; r < m.rows && r < 64; r++) {
                cmf__qmat_decode_row(&m, r, w);
                (void)cmf__qmat_dot_row(&m, r, x);
            }
        free(w);
        free(x);
        cmf__qmat_free(&m);
    }
    free(payload);
    return 0;
}
