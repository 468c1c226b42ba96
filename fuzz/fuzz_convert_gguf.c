/* fuzz_convert_gguf.c — fuzz entry point for the GGUF reader and what
 * consumes its output: dequantizers over every tensor, the arch header, the
 * HF name plan (with q/k un-permutation and expert splits) and the
 * tokenizer.json builder. Work is capped so one input stays fast. */
#include "convert/gguf.h"

#include <stdlib.h>

#define MAX_ELEMS (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cmf__gguf *g = NULL;
    if (cmf__gguf_parse(data, size, "fuzz.gguf", &g) != CMF_OK) return 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const cmf__gguf_tensor *t = &g->tensors[i];
        if (t->n_elems > MAX_ELEMS || !cmf__ggml_can_dequant(t->type)) continue;
        float *v = malloc(t->n_elems * sizeof *v);
        if (v) cmf__ggml_dequant(t->type, t->data, t->n_elems, v);
        free(v);
    }
    json_t *arch = NULL;
    if (cmf__gguf_arch(g, &arch) == CMF_OK) json_decref(arch);
    cmf__gguf_plan plan;
    if (cmf__gguf_plan_make(g, &plan) == CMF_OK) {
        for (size_t i = 0; i < plan.n; i++) {
            if (plan.outs[i].src->n_elems > MAX_ELEMS) continue;
            float *v = NULL;
            uint64_t n = 0;
            if (cmf__gguf_out_f32(g, &plan.outs[i], &v, &n) == CMF_OK) free(v);
        }
        cmf__gguf_plan_free(&plan);
    }
    const cmf__gguf_kv *tok = cmf__gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (!tok || tok->arr_n <= 4096) {
        char *js = NULL;
        size_t len = 0;
        if (cmf__gguf_tokenizer_json(g, &js, &len) == CMF_OK) free(js);
        json_t *chat = NULL;
        if (cmf__gguf_chat_bundle(g, &chat) == CMF_OK) json_decref(chat);
    }
    cmf__gguf_free(g);
    return 0;
}
