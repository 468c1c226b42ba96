/* fuzz_engine_model.c — a whole .cmf image through open, the arch parser,
 * the weight binding and a short forward pass (8-position context, a
 * 3-token prompt then one decode step). Whatever the bytes, the result is
 * a status with a message or finite work; never a crash or an unbounded
 * allocation (every dimension is checked against the tensors it binds). */
#include "engine/engine.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cmf__open_opts o = cmf__open_opts_default();
    cmf__file *f = NULL;
    if (cmf__file_open_memory(data, size, "fuzz.cmf", &o, &f) != CMF_OK) return 0;
    cmf__model *m = NULL;
    if (cmf__model_from_file(f, "fuzz.cmf", &m) != CMF_OK) return 0; /* f is freed either way */
    cmf__engine_params p = cmf__engine_params_default();
    p.n_ctx = 8;
    p.n_batch = 4;
    p.n_threads = 1;
    cmf__engine *e = NULL;
    if (cmf__engine_new(m, &p, &e) == CMF_OK) {
        int64_t V = m->arch.vocab_size;
        float *logits = malloc((size_t)V * 3 * sizeof(float));
        int32_t ids[3] = {0, (int32_t)(V / 2), (int32_t)(V - 1)};
        if (logits && cmf__engine_forward(e, ids, 3, logits, true) == CMF_OK)
            (void)cmf__engine_forward(e, ids, 1, logits, false);
        free(logits);
        cmf__engine_free(e);
    }
    cmf__model_free(m);
    return 0;
}
