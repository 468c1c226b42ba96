/* test_model_arch.c — the one parse of the header `arch` block: typed
 * fields whose wrong JSON type is an error naming the path (never a
 * default), the documented limits on every number (positions, layers,
 * heads, experts, vocab, eps, rope bases, size products), the extension
 * binding in model/ (this program links cmf_model alone: the model layer
 * cannot reach the engine), and `cmf info` / `cmf run` on files whose
 * numbers were made hostile by the generator in tests/toy_model.h. */
#include "harness.h"

#include "model/ext.h"
#include "toy_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define P62 ((json_int_t)1 << 62)

/* Parses toy_arch() with arch[path] = value; returns the status, *a freed. */
static cmf_status parse_with(const char *path, json_t *value)
{
    json_t *arch = toy_arch();
    toy_set(arch, path, value);
    cmf__arch a;
    cmf_status st = cmf__arch_parse(arch, "toy.cmf", &a);
    if (!st) cmf__arch_free(&a);
    json_decref(arch);
    return st;
}

#define CHECK_FIELD(path, value, substr) CHECK_ERR(parse_with(path, value), CMF_ERR_CONFIG, substr)

TEST(valid_block_fills_every_field)
{
    json_t *arch = toy_arch();
    toy_set(arch, "moe.router_sigmoid", json_true());
    toy_set(arch, "moe.routed_scaling_factor", json_real(2.5));
    toy_set(arch, "hidden_size_per_layer_input", json_integer(4));
    toy_set(arch, "vocab_size_per_layer_input", json_integer(16));
    toy_set(arch, "v_norm", json_true());
    cmf__arch a;
    CHECK_OK(cmf__arch_parse(arch, "toy.cmf", &a));
    CHECK_EQ_INT(a.n_layer, TOY_L);
    CHECK_EQ_INT(a.max_pos, TOY_MAX_POS);
    CHECK_EQ_INT(a.sliding_window, TOY_WINDOW);
    CHECK(a.moe.present);
    CHECK_EQ_INT(a.moe.num_experts, TOY_E);
    CHECK_EQ_INT(a.moe.top_k, 2);
    CHECK_EQ_INT(a.moe.moe_intermediate_size, TOY_EF);
    CHECK_EQ_INT(a.moe.shared_expert_intermediate_size, TOY_EF);
    CHECK(a.moe.norm_topk_prob && a.moe.router_sigmoid);
    CHECK_NEAR(a.moe.routed_scaling_factor, 2.5, 0);
    CHECK_EQ_INT(a.linear.num_key_heads, TOY_NK);
    CHECK_EQ_INT(a.linear.num_value_heads, TOY_NV);
    CHECK_EQ_INT(a.linear.key_head_dim, TOY_DK);
    CHECK_EQ_INT(a.linear.value_head_dim, TOY_DV);
    CHECK_EQ_INT(a.linear.conv_kernel_dim, TOY_CK);
    CHECK_EQ_INT(a.per_layer_input, 4);
    CHECK_EQ_INT(a.vocab_per_layer_input, 16);
    CHECK(a.v_norm);
    CHECK_EQ_INT(a.layer_kind[1], CMF__LAYER_LINEAR);
    CHECK_EQ_STR(cmf__layer_kind_name(a.layer_kind[2]), "SlidingAttention");
    cmf__arch_free(&a);
    /* defaults: no moe block, num_experts_per_tok as top_k's other name */
    json_object_del(arch, "moe");
    CHECK_OK(cmf__arch_parse(arch, "toy.cmf", &a));
    CHECK(!a.moe.present);
    CHECK_EQ_INT(a.moe.top_k, 1);
    CHECK_NEAR(a.moe.routed_scaling_factor, 1.0, 0);
    cmf__arch_free(&a);
    toy_set(arch, "moe.num_experts_per_tok", json_integer(3));
    CHECK_OK(cmf__arch_parse(arch, "toy.cmf", &a));
    CHECK_EQ_INT(a.moe.top_k, 3);
    cmf__arch_free(&a);
    json_decref(arch);
}

/* Every field the engine and `cmf info` read: a wrong JSON type is an error
 * naming the path and both types, never the default. */
TEST(wrong_types_name_the_path)
{
    CHECK_FIELD("moe.top_k", json_string("2"), "toy.cmf: header arch.moe.top_k: expected an integer, found a string");
    CHECK_FIELD("moe.num_experts", json_real(4.5), "arch.moe.num_experts: expected an integer, found a real number");
    CHECK_FIELD("moe.num_experts_per_tok", json_true(), "arch.moe.num_experts_per_tok: expected an integer, found a boolean");
    CHECK_FIELD("moe.norm_topk_prob", json_integer(1), "arch.moe.norm_topk_prob: expected true or false, found an integer");
    CHECK_FIELD("moe.router_sigmoid", json_string("yes"), "arch.moe.router_sigmoid: expected true or false, found a string");
    CHECK_FIELD("moe.routed_scaling_factor", json_string("1"), "arch.moe.routed_scaling_factor: expected a number");
    CHECK_FIELD("moe.moe_intermediate_size", json_array(), "arch.moe.moe_intermediate_size: expected an integer, found an array");
    CHECK_FIELD("moe", json_integer(4), "arch.moe: expected an object, found an integer");
    CHECK_FIELD("linear_num_key_heads", json_string("1"), "arch.linear_num_key_heads: expected an integer, found a string");
    CHECK_FIELD("linear_num_value_heads", json_real(2.5), "arch.linear_num_value_heads: expected an integer");
    CHECK_FIELD("linear_key_head_dim", json_object(), "arch.linear_key_head_dim: expected an integer, found an object");
    CHECK_FIELD("linear_value_head_dim", json_false(), "arch.linear_value_head_dim: expected an integer");
    CHECK_FIELD("linear_conv_kernel_dim", json_string("4"), "arch.linear_conv_kernel_dim: expected an integer");
    CHECK_FIELD("hidden_size_per_layer_input", json_string("8"), "arch.hidden_size_per_layer_input: expected an integer");
    CHECK_FIELD("v_norm", json_integer(1), "arch.v_norm: expected true or false, found an integer");
    CHECK_FIELD("max_position_embeddings", json_string("32"), "arch.max_position_embeddings: expected an integer");
    CHECK_FIELD("sliding_window", json_real(4.5), "arch.sliding_window: expected an integer");
    CHECK_FIELD("rms_norm_eps", json_string("1e-6"), "arch.rms_norm_eps: expected a number, found a string");
    CHECK_FIELD("tie_word_embeddings", json_integer(1), "arch.tie_word_embeddings: expected true or false");
    CHECK_FIELD("rope_scaling", json_pack("{s:s, s:s}", "rope_type", "linear", "factor", "2"),
                "arch.rope_scaling.factor: expected a number, found a string");
    CHECK_FIELD("rope_scaling", json_pack("{s:i}", "rope_type", 3), "arch.rope_scaling.rope_type: expected a string");
    CHECK_FIELD("rope_scaling", json_pack("{s:s, s:i}", "rope_type", "yarn", "truncate", 1),
                "arch.rope_scaling.truncate: expected true or false");
    CHECK_FIELD("arch_name", json_integer(3), "arch.arch_name: expected a string, found an integer");
    /* an integral real is an integer (Python's JSON writes some that way) */
    CHECK_OK(parse_with("moe.top_k", json_real(2.0)));
}

/* Issue cases 1, 7 and 9: numbers that wrapped a size product, looped or
 * gave NaN logits are refused at open, naming field and value. */
TEST(numbers_past_the_limits)
{
    CHECK_FIELD("max_position_embeddings", json_integer(P62 + 1),
                "arch.max_position_embeddings: 4611686018427387905 out of range [1, 16777216]");
    CHECK_FIELD("max_position_embeddings", json_integer(P62), "arch.max_position_embeddings: 4611686018427387904 out of range");
    CHECK_FIELD("max_position_embeddings", json_integer(0), "arch.max_position_embeddings: 0 out of range");
    CHECK_FIELD("max_position_embeddings", json_integer((json_int_t)1 << 24 | 1), "out of range [1, 16777216]");
    CHECK_OK(parse_with("max_position_embeddings", json_integer((json_int_t)1 << 24)));
    CHECK_FIELD("sliding_window", json_integer(INT64_MAX), "arch.sliding_window: 9223372036854775807 out of range");
    CHECK_FIELD("sliding_window", json_integer(-1), "arch.sliding_window: -1 out of range");
    CHECK_FIELD("num_layers", json_integer(P62), "arch.num_layers: 4611686018427387904 out of range [1, 4096]");
    CHECK_FIELD("num_layers", json_integer(4097), "arch.num_layers: 4097 out of range [1, 4096]");
    CHECK_FIELD("num_attention_heads", json_integer(P62 + 4), "arch.num_attention_heads: 4611686018427387908 out of range [1, 4096]");
    CHECK_FIELD("num_kv_heads", json_integer(4097), "arch.num_kv_heads: 4097 out of range");
    CHECK_FIELD("head_dim", json_integer(P62), "arch.head_dim: 4611686018427387904 out of range");
    CHECK_FIELD("vocab_size", json_integer(((json_int_t)1 << 24) + 1), "arch.vocab_size: 16777217 out of range [1, 16777216]");
    CHECK_FIELD("hidden_size", json_integer(INT64_MIN), "arch.hidden_size: -9223372036854775808 out of range");
    CHECK_FIELD("moe.num_experts", json_integer((json_int_t)1 << 31), "arch.moe.num_experts: 2147483648 out of range [1, 65536]");
    CHECK_FIELD("moe.num_experts", json_integer(65537), "arch.moe.num_experts: 65537 out of range");
    CHECK_FIELD("moe.top_k", json_integer(0), "arch.moe.top_k: 0 out of range [1, 65536]");
    CHECK_FIELD("moe.top_k", json_integer(P62), "arch.moe.top_k: 4611686018427387904 out of range");
    CHECK_FIELD("linear_num_value_heads", json_integer(P62), "arch.linear_num_value_heads: 4611686018427387904 out of range [0, 4096]");
    CHECK_FIELD("linear_conv_kernel_dim", json_integer(1025), "arch.linear_conv_kernel_dim: 1025 out of range");
    CHECK_FIELD("hidden_size_per_layer_input", json_integer(P62), "arch.hidden_size_per_layer_input: 4611686018427387904 out of range");
    CHECK_FIELD("head_dim_per_layer", json_pack("[i,i,I]", 4, 4, (json_int_t)P62), "arch.head_dim_per_layer[2]: expected an integer in [2, 16384]");
    CHECK_FIELD("attention_heads_per_layer", json_pack("[i,i,i]", 2, 2, 5000), "arch.attention_heads_per_layer[2]: expected an integer in [1, 4096]");
    CHECK_FIELD("rope_scaling", json_pack("{s:s, s:f, s:I}", "rope_type", "yarn", "factor", 2.0,
                                          "original_max_position_embeddings", (json_int_t)P62),
                "arch.rope_scaling.original_max_position_embeddings: 4.61169e+18 out of range");
}

/* Products of in-range numbers that would still size something huge. */
TEST(size_products)
{
    json_t *arch = toy_arch();
    cmf__arch a;
    toy_set(arch, "num_attention_heads", json_integer(4096));
    toy_set(arch, "num_kv_heads", json_integer(4096));
    toy_set(arch, "head_dim", json_integer(16384));
    CHECK_ERR(cmf__arch_parse(arch, "toy.cmf", &a), CMF_ERR_CONFIG, "4096 kv heads x head_dim 16384 exceeds 16777216");
    json_decref(arch);
    arch = toy_arch();
    toy_set(arch, "attention_heads_per_layer", json_pack("[i,i,i]", 2, 4096, 2));
    toy_set(arch, "head_dim_per_layer", json_pack("[i,i,i]", 4, 8192, 4));
    CHECK_ERR(cmf__arch_parse(arch, "toy.cmf", &a), CMF_ERR_CONFIG, "layer 1: 4096 heads x head_dim 8192 exceeds");
    json_decref(arch);
    arch = toy_arch();
    toy_set(arch, "linear_num_value_heads", json_integer(4096));
    toy_set(arch, "linear_value_head_dim", json_integer(8192));
    CHECK_ERR(cmf__arch_parse(arch, "toy.cmf", &a), CMF_ERR_CONFIG, "linear attention widths");
    toy_set(arch, "linear_value_head_dim", json_integer(2048));
    toy_set(arch, "linear_key_head_dim", json_integer(2048));
    CHECK_ERR(cmf__arch_parse(arch, "toy.cmf", &a), CMF_ERR_CONFIG, "linear attention state 4096 x 2048 x 2048");
    json_decref(arch);
    arch = toy_arch();
    toy_set(arch, "hidden_size_per_layer_input", json_integer(1 << 23));
    CHECK_ERR(cmf__arch_parse(arch, "toy.cmf", &a), CMF_ERR_CONFIG, "arch.hidden_size_per_layer_input: 8388608 x 3 layers");
    json_decref(arch);
}

/* Issue case 9: values whose math is nonsense. */
TEST(nonsense_values)
{
    CHECK_FIELD("rms_norm_eps", json_real(-1), "arch.rms_norm_eps: -1 must be > 0");
    CHECK_FIELD("rms_norm_eps", json_integer(0), "arch.rms_norm_eps: 0 must be > 0");
    CHECK_FIELD("rope_theta", json_real(-10000), "arch.rope_theta: -10000 must be > 0");
    CHECK_FIELD("rope_theta", json_integer(0), "arch.rope_theta: 0 must be > 0");
    CHECK_FIELD("rope_local_base_freq", json_real(-1), "arch.rope_local_base_freq: -1 must be > 0");
    CHECK_FIELD("partial_rotary_factor", json_real(1.5), "arch.partial_rotary_factor: 1.5 not in (0, 1]");
    CHECK_FIELD("moe.routed_scaling_factor", json_real(0), "arch.moe.routed_scaling_factor: 0 must be > 0");
    CHECK_FIELD("rope_scaling", json_pack("{s:s, s:f}", "rope_type", "linear", "factor", -2.0),
                "arch.rope_scaling.factor: -2 must be > 0");
    CHECK_FIELD("attention_scale", json_real(-0.5), "arch.attention_scale: -0.5 must be >= 0");
    CHECK_FIELD("logits_scaling", json_real(0), "arch.logits_scaling: must not be 0");
}

/* The arch of a written file: open + bind through model/ alone. */
TEST(open_and_bind_extensions)
{
    char path[600];
    snprintf(path, sizeof path, "%s/toy_ok.cmf", harness_tmpdir());
    json_t *arch = toy_arch();
    CHECK_OK(toy_write(path, arch));
    json_decref(arch);
    cmf__model *m = NULL;
    CHECK_OK(cmf__model_open(path, &m));
    if (!m) return;
    const cmf__layer_ext *A0 = cmf__model_layer_ext(m, 0), *A1 = cmf__model_layer_ext(m, 1);
    CHECK(A0 && A0->moe && !A0->gdn);
    if (A0) {
        CHECK_EQ_INT(A0->n_expert, TOY_E);
        CHECK_EQ_INT(A0->ml.route.top_k, 2);
        CHECK(A0->ml.route.norm_topk && A0->ml.shared && A0->ml.shared_gate);
    }
    CHECK(A1 && A1->gdn && !A1->moe);
    if (A1) {
        CHECK_EQ_INT(A1->gd.n_v_heads, TOY_NV);
        CHECK_EQ_INT(A1->gd.conv_k, TOY_CK);
    }
    CHECK(cmf__model_layer_ext(m, 2) == NULL);
    CHECK(cmf__model_ext_of(m) == NULL); /* no per-layer inputs, no v_norm */
    cmf__model_free(m);
}

/* Writes the toy with arch[path] = value; returns its path (static). */
static const char *hostile(const char *tag, const char *path, json_t *value)
{
    static char out[4][600];
    static int slot;
    char *p = out[slot++ % 4];
    snprintf(p, 600, "%s/toy_%s.cmf", harness_tmpdir(), tag);
    json_t *arch = toy_arch();
    toy_set(arch, path, value);
    CHECK_OK(toy_write(p, arch));
    json_decref(arch);
    return p;
}

TEST(open_refuses_hostile_files)
{
    cmf__model *m = NULL;
    CHECK_ERR(cmf__model_open(hostile("pos", "max_position_embeddings", json_integer(P62 + 1)), &m), CMF_ERR_CONFIG,
              "toy_pos.cmf: header arch.max_position_embeddings: 4611686018427387905 out of range");
    CHECK_ERR(cmf__model_open(hostile("win", "sliding_window", json_integer(INT64_MAX)), &m), CMF_ERR_CONFIG,
              "arch.sliding_window: 9223372036854775807 out of range");
    CHECK_ERR(cmf__model_open(hostile("eps", "rms_norm_eps", json_real(-1)), &m), CMF_ERR_CONFIG,
              "arch.rms_norm_eps: -1 must be > 0");
    CHECK_ERR(cmf__model_open(hostile("topk", "moe.top_k", json_string("2")), &m), CMF_ERR_CONFIG,
              "arch.moe.top_k: expected an integer, found a string");
    /* in range for the parse, checked against the router at bind */
    CHECK_ERR(cmf__model_open(hostile("topk5", "moe.top_k", json_integer(5)), &m), CMF_ERR_CONFIG,
              "layer 0: moe top_k 5 outside 1..num_experts (4)");
    CHECK_ERR(cmf__model_open(hostile("nexp", "moe.num_experts", json_integer(3)), &m), CMF_ERR_CONFIG,
              "4 experts, arch.moe.num_experts says 3");
    CHECK(m == NULL);
}

/* Runs `cmd` (through the shell, 60 s at most) and returns its exit status;
 * stdout and stderr land in *out (malloc'd). */
static int run_cli(const char *cmd, char **out)
{
    char full[2048], log[600];
    snprintf(log, sizeof log, "%s/cli.log", harness_tmpdir());
    snprintf(full, sizeof full, "timeout 60 %s >'%s' 2>&1", cmd, log);
    int rc = system(full);
    size_t n;
    *out = harness_read_file(log, &n);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Issue case 7 (`cmf info` looped on num_experts >= 2^31) and case 1/9
 * (`cmf run` crashed or emitted NaN logits): now a prompt error. */
TEST(cli_on_hostile_files)
{
    const char *bin = getenv("CMF_BIN");
    if (!bin) SKIP("CMF_BIN not set");
    char cmd[1200], *out = NULL;
    const char *f = hostile("cli_exp", "moe.num_experts", json_integer((json_int_t)1 << 31));
    snprintf(cmd, sizeof cmd, "'%s' info '%s'", bin, f);
    CHECK_EQ_INT(run_cli(cmd, &out), 0);
    CHECK_CONTAINS(out, "arch error:  ");
    CHECK_CONTAINS(out, "header arch.moe.num_experts: 2147483648 out of range [1, 65536]");
    CHECK(out && !strstr(out, "layers:"));
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' info --json '%s'", bin, f);
    CHECK_EQ_INT(run_cli(cmd, &out), 0);
    CHECK_CONTAINS(out, "\"arch_error\": ");
    CHECK_CONTAINS(out, "\"layer_schedule\": null");
    free(out);
    const char *ok = hostile("cli_ok", "arch_name", json_string("toy"));
    snprintf(cmd, sizeof cmd, "'%s' info '%s'", bin, ok);
    CHECK_EQ_INT(run_cli(cmd, &out), 0);
    CHECK_CONTAINS(out, "moe:         4 experts, top-2, expert ffn 6, router softmax, top-k renormalised, shared expert ffn 6");
    CHECK_CONTAINS(out, "  1          LinearAttention   deltanet qk 1x4, v 2x4, conv 2 | ffn 12");
    CHECK_CONTAINS(out, "  2          SlidingAttention  heads 2/1 x 4, window 4, rope 10000 | ffn 12");
    CHECK(out && !strstr(out, "arch error"));
    free(out);
    static const struct { const char *tag, *path, *want; json_int_t v; } runs[] = {
        {"cli_pos", "max_position_embeddings", "arch.max_position_embeddings: 4611686018427387905 out of range", P62 + 1},
        {"cli_pos2", "max_position_embeddings", "arch.max_position_embeddings: 4611686018427387904 out of range", P62},
        {"cli_heads", "num_attention_heads", "arch.num_attention_heads: 4611686018427387908 out of range", P62 + 4},
        {"cli_eps", "rms_norm_eps", "arch.rms_norm_eps: -1 must be > 0", -1},
    };
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        f = hostile(runs[i].tag, runs[i].path, json_integer(runs[i].v));
        snprintf(cmd, sizeof cmd, "'%s' run '%s' -p hi -n 2", bin, f);
        CHECK_EQ_INT(run_cli(cmd, &out), 1);
        CHECK_CONTAINS(out, runs[i].want);
        free(out);
    }
}

int main(void)
{
    RUN(valid_block_fills_every_field);
    RUN(wrong_types_name_the_path);
    RUN(numbers_past_the_limits);
    RUN(size_products);
    RUN(nonsense_values);
    RUN(open_and_bind_extensions);
    RUN(open_refuses_hostile_files);
    RUN(cli_on_hostile_files);
    return harness_done();
}
