/* test_engine_archs_bind.c — the extension binding rejects files whose arch
 * block and tensors disagree, naming the file, layer and tensor: converted
 * fixtures get a header edited through append-only growth (§9), then
 * cmf__model_open must fail with CMF_ERR_CONFIG and the right message;
 * the unedited files open and give the reference logits. */
#include "harness.h"

#include "engine/archs_engine.h"
#include <stdlib.h>
#include <unistd.h>

/* Converts fixture `fam` (f32) to <tmp>/<fam>.<tag>.cmf; NULL to skip. */
static const char *convert(const char *fam, const char *tag) {
    static char out[1024];
    const char *bin = getenv("CMF_BIN");
    char dir[512], cfg[600], cmd[2048];
    if (!bin || !harness_fixtures()) return NULL;
    snprintf(dir, sizeof dir, "%s", harness_fixture_path("hf-models"));
    snprintf(cfg, sizeof cfg, "%s/%s/config.json", dir, fam);
    if (access(cfg, R_OK) != 0) return NULL;
    snprintf(out, sizeof out, "%s/%s.%s.cmf", harness_tmpdir(), fam, tag);
    snprintf(cmd, sizeof cmd, "'%s' convert --quiet --quant f32 --model '%s/%s' --output '%s'", bin, dir, fam, out);
    int rc = system(cmd);
    CHECK_EQ_INT(rc, 0);
    return rc == 0 ? out : NULL;
}

/* Rewrites the header with arch[key] = value (NULL value: delete key; a
 * dotted "moe.top_k" edits the moe object). */
static void edit_arch(const char *path, const char *key, json_t *value) {
    cmf__file *f = NULL;
    CHECK_OK(cmf__file_open(path, NULL, &f));
    if (!f) { json_decref(value); return; }
    json_t *h = json_deep_copy(f->header);
    cmf__file_free(f);
    json_t *arch = json_object_get(h, "arch");
    const char *dot = strchr(key, '.');
    if (dot) {
        char obj[64];
        snprintf(obj, sizeof obj, "%.*s", (int)(dot - key), key);
        arch = json_object_get(arch, obj);
        key = dot + 1;
    }
    if (value) json_object_set_new(arch, key, value);
    else json_object_del(arch, key);
    CHECK_OK(cmf__file_append(path, NULL, 0, h));
    json_decref(h);
}

static void expect_open_error(const char *path, const char *substr) {
    cmf__model *m = NULL;
    CHECK_ERR(cmf__model_open(path, &m), CMF_ERR_CONFIG, substr);
    cmf__model_free(m);
}

TEST(moe_expert_count_mismatch) {
    const char *p = convert("qwen2_moe", "experts");
    if (!p) SKIP("CMF_BIN or the fixtures absent");
    edit_arch(p, "moe.num_experts", json_integer(7));
    expect_open_error(p, "'model.layers.0.mlp.gate.weight': 8 experts, arch.moe.num_experts says 7");
}

TEST(moe_top_k_out_of_range) {
    const char *p = convert("qwen3_moe", "topk");
    if (!p) SKIP("CMF_BIN or the fixtures absent");
    edit_arch(p, "moe.top_k", json_integer(9));
    expect_open_error(p, "layer 0: moe top_k 9 outside 1..num_experts (8)");
}

TEST(linear_attention_dims_mismatch) {
    const char *p = convert("qwen3_next", "lin");
    if (!p) SKIP("CMF_BIN or the fixtures absent");
    edit_arch(p, "linear_value_head_dim", json_integer(8));
    expect_open_error(p, "linear_attn.in_proj_qkvz.weight");
    const char *q = convert("qwen3_next", "lin2");
    if (!q) return;
    edit_arch(q, "linear_num_value_heads", json_integer(3));
    expect_open_error(q, "layer 0: linear attention dims");
}

TEST(per_layer_inputs_undeclared) {
    const char *p = convert("gemma4", "ple");
    if (!p) SKIP("CMF_BIN or the fixtures absent");
    edit_arch(p, "hidden_size_per_layer_input", NULL);
    expect_open_error(p, "per_layer_input_gate.weight' present but arch.hidden_size_per_layer_input is not set");
    const char *q = convert("gemma4", "ple2");
    if (!q) return;
    edit_arch(q, "hidden_size_per_layer_input", json_integer(8));
    expect_open_error(q, "model.embed_tokens_per_layer.weight");
}

/* A valid file opens and binds, and what it bound is the model: the layer
 * count and vocabulary of its config.json, and one prefill of ref.json's
 * input_ids gives transformers' logits (worst row max|Δ| / max|ref| at
 * most 1e-4 with f32 weights and an f32 KV cache, as
 * tests/cli/engine_archs.sh measures). */
static void check_against_reference(const char *fam, const char *path) {
    char f[1024];
    snprintf(f, sizeof f, "hf-models/%s/config.json", fam);
    json_t *cfg = json_load_file(harness_fixture_path(f), 0, NULL);
    snprintf(f, sizeof f, "hf-models/%s/ref.json", fam);
    json_t *ref = json_load_file(harness_fixture_path(f), 0, NULL);
    snprintf(f, sizeof f, "hf-models/%s/ref_logits.f32", fam);
    size_t ref_len = 0;
    float *want = (float *)harness_read_file(harness_fixture_path(f), &ref_len);
    CHECK(cfg && ref && want);
    cmf_model *m = NULL;
    cmf_session *s = NULL;
    float *got = NULL;
    if (!cfg || !ref || !want) goto done;
    CHECK_OK(cmf_model_open(path, NULL, &m));
    if (!m) goto done;
    CHECK_EQ_INT(cmf_model_n_layer(m), json_integer_value(json_object_get(cfg, "num_hidden_layers")));
    CHECK_EQ_INT(cmf_model_n_vocab(m), json_integer_value(json_object_get(cfg, "vocab_size")));
    const json_t *ids_j = json_object_get(ref, "input_ids");
    size_t n = json_array_size(ids_j), v = (size_t)cmf_model_n_vocab(m);
    CHECK(n > 0 && ref_len == n * v * sizeof(float));
    if (n == 0 || ref_len != n * v * sizeof(float)) goto done;
    int32_t ids[256];
    CHECK(n <= 256);
    if (n > 256) goto done;
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(ids_j, i));
    cmf_session_params sp = cmf_session_params_default();
    sp.kv_type = CMF_KV_F32; /* f32 throughout, as the reference */
    CHECK_OK(cmf_session_new(m, &sp, &s));
    got = malloc(n * v * sizeof(float));
    if (!s || !got) goto done;
    CHECK_OK(cmf_session_decode(s, ids, n, got, true));
    double worst = 0;
    for (size_t r = 0; r < n; r++) {
        double e = harness_max_rel_err(got + r * v, want + r * v, v);
        if (e > worst) worst = e;
    }
    if (!(worst <= 1e-4)) harness_fail(__FILE__, __LINE__, "%s: logits differ from the reference by %.3g", fam, worst);
done:
    free(got);
    cmf_session_free(s);
    cmf_model_free(m);
    free(want);
    json_decref(ref);
    json_decref(cfg);
}

TEST(valid_files_open) {
    static const char *const fams[] = {"qwen2_moe", "gpt_oss", "gemma4", "qwen3_next"};
    for (size_t i = 0; i < sizeof fams / sizeof *fams; i++) {
        const char *p = convert(fams[i], "ok");
        if (!p) SKIP("CMF_BIN or the fixtures absent");
        cmf__model *m = NULL;
        CHECK_OK(cmf__model_open(p, &m));
        cmf__engine *e = NULL;
        if (m) CHECK_OK(cmf__engine_new(m, NULL, &e));
        cmf__engine_free(e);
        cmf__model_free(m);
        check_against_reference(fams[i], p);
    }
}

int main(void) {
    RUN(moe_expert_count_mismatch);
    RUN(moe_top_k_out_of_range);
    RUN(linear_attention_dims_mismatch);
    RUN(per_layer_inputs_undeclared);
    RUN(valid_files_open);
    return harness_done();
}
