/* test_convert_arch_limits.c — the converters run the runtime's own arch
 * validation (cmf__arch_check) before anything is written: a config.json
 * whose numbers the runtime would refuse (past the documented limits, a
 * wrapped heads product, eps or rope base <= 0, no context length) is
 * refused naming the field and value, quickly (nothing sized by the bad
 * number), and `cmf convert` leaves no output file behind. */
#include "harness.h"
#include "convert/convert.h"
#include "model/arch.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define P62 ((json_int_t)1 << 62)

static json_t *llama_config(void)
{
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:b, s:s}", "model_type", "llama",
                     "hidden_size", 32, "intermediate_size", 64, "num_hidden_layers", 2, "num_attention_heads", 2,
                     "num_key_value_heads", 1, "head_dim", 16, "vocab_size", 64, "max_position_embeddings", 128,
                     "rms_norm_eps", 1e-5, "rope_theta", 10000.0, "tie_word_embeddings", 1, "hidden_act", "silu");
}

/* cmf__convert_arch of the llama config with cfg[key] = value (NULL deletes). */
static cmf_status convert_with(const char *model_type, const char *key, json_t *value)
{
    json_t *cfg = llama_config();
    if (model_type) json_object_set_new(cfg, "model_type", json_string(model_type));
    if (!strcmp(model_type ? model_type : "", "qwen2_moe")) {
        json_object_set_new(cfg, "num_experts", json_integer(4));
        json_object_set_new(cfg, "num_experts_per_tok", json_integer(2));
        json_object_set_new(cfg, "moe_intermediate_size", json_integer(16));
    }
    if (value) json_object_set_new(cfg, key, value);
    else if (key) json_object_del(cfg, key);
    json_t *arch = NULL;
    cmf_status st = cmf__convert_arch(cfg, "ck/config.json", &arch);
    if (!st) CHECK_OK(cmf__arch_check(arch, "written"));
    json_decref(arch);
    json_decref(cfg);
    return st;
}

#define CHECK_CFG(key, value, substr) CHECK_ERR(convert_with(NULL, key, value), CMF_ERR_CONFIG, substr)

TEST(valid_config_gives_a_valid_block)
{
    CHECK_OK(convert_with(NULL, NULL, NULL));
    CHECK_OK(convert_with("qwen2_moe", NULL, NULL));
}

/* Issue case 7: convert grew past 7.6 GB on num_hidden_layers = 2^62. */
TEST(layer_count_refused_before_use)
{
    CHECK_CFG("num_hidden_layers", json_integer(P62),
              "field 'num_hidden_layers' (model_type llama): 4611686018427387904 layers, more than the 4096 cmf supports");
    CHECK_CFG("num_hidden_layers", json_integer(4097), "4097 layers, more than the 4096");
}

/* Issue cases 1 and 9: values written unchecked that the runtime refused or
 * mis-ran. */
TEST(numbers_the_runtime_refuses)
{
    const char *pre = "ck/config.json: the arch block made from it: header ";
    char want[300];
    snprintf(want, sizeof want, "%sarch.max_position_embeddings: 4611686018427387905 out of range [1, 16777216]", pre);
    CHECK_CFG("max_position_embeddings", json_integer(P62 + 1), want);
    CHECK_CFG("max_position_embeddings", json_integer(0), "arch.max_position_embeddings: 0 out of range");
    CHECK_CFG("max_position_embeddings", NULL, "field 'max_position_embeddings' (model_type llama): missing (required)");
    CHECK_CFG("rope_theta", json_real(-1), "arch.rope_theta: -1 must be > 0");
    CHECK_CFG("rms_norm_eps", json_real(-1), "arch.rms_norm_eps: -1 must be > 0");
    CHECK_CFG("num_attention_heads", json_integer(P62 + 4), "arch.num_attention_heads: 4611686018427387908 out of range");
    CHECK_CFG("vocab_size", json_integer(((json_int_t)1 << 24) + 1), "arch.vocab_size: 16777217 out of range");
    CHECK_CFG("head_dim", json_integer(P62), "arch.head_dim: 4611686018427387904 out of range");
    CHECK_ERR(convert_with("mistral", "sliding_window", json_integer(INT64_MAX)), CMF_ERR_CONFIG,
              "arch.sliding_window: 9223372036854775807 out of range");
    CHECK_ERR(convert_with("qwen2_moe", "num_experts", json_integer((json_int_t)1 << 31)), CMF_ERR_CONFIG,
              "arch.moe.num_experts: 2147483648 out of range [1, 65536]");
}

/* The command end to end on a copy of a real checkpoint: exit 1, the field
 * named, nothing at the output path. */
TEST(cli_convert_writes_nothing)
{
    const char *bin = getenv("CMF_BIN");
    if (!bin || !harness_fixtures()) SKIP("CMF_BIN or the fixtures absent");
    char src[600], dir[600], cmd[2400], cfg_path[700], out[700], log[700];
    snprintf(src, sizeof src, "%s", harness_fixture_path("hf-models/llama"));
    snprintf(dir, sizeof dir, "%s/llama_hostile", harness_tmpdir());
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", dir, src, dir);
    if (system(cmd) != 0) SKIP("cannot copy the llama fixture");
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    json_t *cfg = json_load_file(cfg_path, 0, NULL);
    CHECK(cfg != NULL);
    if (!cfg) return;
    json_object_set_new(cfg, "max_position_embeddings", json_integer(P62 + 1));
    CHECK(json_dump_file(cfg, cfg_path, 0) == 0);
    json_decref(cfg);
    snprintf(out, sizeof out, "%s/llama_hostile.cmf", harness_tmpdir());
    snprintf(log, sizeof log, "%s/convert.log", harness_tmpdir());
    unlink(out);
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' convert --quiet --model '%s' --output '%s' >'%s' 2>&1", bin, dir, out,
             log);
    int rc = system(cmd);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
    size_t n;
    char *text = harness_read_file(log, &n);
    CHECK_CONTAINS(text, "config.json: the arch block made from it: header arch.max_position_embeddings: "
                         "4611686018427387905 out of range");
    free(text);
    struct stat sb;
    CHECK(stat(out, &sb) != 0);
}

int main(void)
{
    RUN(valid_config_gives_a_valid_block);
    RUN(layer_count_refused_before_use);
    RUN(numbers_the_runtime_refuses);
    RUN(cli_convert_writes_nothing);
    return harness_done();
}
