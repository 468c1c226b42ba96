/* fuzz_engine_lora.c — a PEFT LoRA adapter's safetensors image through the
 * adapter reader (cmf__lora_parse) against a toy model written once at
 * start (hidden 8, one layer, vocab 16, f32). Whatever the bytes, the
 * result is an adapter or a status with a message: names, shapes and
 * pairs are checked against the model before anything is allocated. */
#include "engine/lora.h"
#include "format/format.h"
#include "util/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static cmf__model *g_model;

static void add(cmf__writer *w, const char *name, uint64_t rows, uint64_t cols)
{
    uint64_t n = rows * (cols ? cols : 1), shape[2] = {rows, cols};
    float *d = malloc(n * sizeof *d);
    for (uint64_t i = 0; d && i < n; i++) d[i] = (float)((i * 7919) % 13) / 13.0f - 0.5f;
    if (d) (void)cmf__writer_add_tensor(w, name, CMF_DTYPE_F32, cols ? 2 : 1, shape, d, n * sizeof *d);
    free(d);
}

static void free_model(void) { cmf__model_free(g_model); }

/* The toy model: q/k/v/o and the dense MLP of layer 0 are LoRA targets. */
static cmf__model *toy_model(void)
{
    const char *tmp = getenv("TMPDIR");
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/cmf-fuzz-lora-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return NULL;
    snprintf(path, sizeof path, "%s/toy.cmf", dir);
    cmf__writer *w = NULL;
    if (cmf__writer_open(path, &w)) return NULL;
    json_t *h = json_pack("{s:{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:f, s:s, s:s, s:s}}", "arch",
                          "arch_name", "toy", "hidden_size", 8, "intermediate_size", 16, "num_layers", 1,
                          "num_attention_heads", 1, "num_kv_heads", 1, "head_dim", 8, "vocab_size", 16,
                          "max_position_embeddings", 16, "tie_word_embeddings", 0, "rms_norm_eps", 1e-6, "norm_style",
                          "qwen", "norm_placement", "pre", "activation", "silu");
    (void)cmf__writer_set_header(w, h);
    json_decref(h);
    add(w, "model.embed_tokens.weight", 16, 8);
    add(w, "lm_head.weight", 16, 8);
    add(w, "model.norm.weight", 8, 0);
    add(w, "model.layers.0.input_layernorm.weight", 8, 0);
    add(w, "model.layers.0.post_attention_layernorm.weight", 8, 0);
    const char *sq[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    char nm[128];
    for (int i = 0; i < 4; i++) {
        snprintf(nm, sizeof nm, "model.layers.0.self_attn.%s.weight", sq[i]);
        add(w, nm, 8, 8);
    }
    add(w, "model.layers.0.mlp.gate_proj.weight", 16, 8);
    add(w, "model.layers.0.mlp.up_proj.weight", 16, 8);
    add(w, "model.layers.0.mlp.down_proj.weight", 8, 16);
    cmf__model *m = NULL;
    if (!cmf__writer_finish(w)) (void)cmf__model_open(path, &m);
    unlink(path);
    rmdir(dir);
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_model) {
        if (!(g_model = toy_model())) return 0;
        atexit(free_model);
    }
    cmf__lora *lo = NULL;
    if (cmf__lora_parse(g_model, data, size, "fuzz.safetensors", 2.0, &lo) == CMF_OK) {
        /* a parsed adapter is consistent: every pair fits its target */
        for (size_t i = 0; i < lo->n; i++)
            if (lo->entries[i].rank < 1 || !lo->entries[i].a || !lo->entries[i].b) abort();
    }
    cmf__lora_free(lo);
    return 0;
}
