/* test_engine_model.c — the model binding and the public API on small files
 * written here: corrupt or incomplete arch blocks and tensor sets fail with
 * the status and a message naming the JSON path or tensor; the skill overlay
 * rebinds to `skill.<id>.<name>`; sampler rules (greedy, top-k 1, seeds,
 * penalties); generation with stop strings, max tokens, callbacks and
 * cancellation (with the fixtures' tokenizer when present). */
#include "harness.h"
#include "engine/api.h"
#include "engine/sampler.h"
#include "format/format.h"
#include "model/model.h"
#include "util/json.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { H = 64, L = 2, NH = 2, NKV = 1, HD = 32, V = 384, F = 64 };

static uint64_t g_rng = 99;
static float frand(void)
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static json_t *base_arch(void)
{
    json_t *a = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:f, s:s, s:s, s:s}", "arch_name", "toy",
                          "hidden_size", H, "intermediate_size", F, "num_layers", L, "num_attention_heads", NH,
                          "num_kv_heads", NKV, "head_dim", HD, "vocab_size", V, "max_position_embeddings", 64,
                          "tie_word_embeddings", 1, "rms_norm_eps", 1e-6, "norm_style", "qwen", "norm_placement", "pre",
                          "activation", "silu");
    return a;
}

static void add_f32(cmf__writer *w, const char *name, int64_t rows, int64_t cols, float scale)
{
    size_t n = (size_t)(rows * (cols ? cols : 1));
    float *d = malloc(n * 4);
    for (size_t i = 0; i < n; i++) d[i] = cols ? frand() * scale : 1.0f + 0.1f * frand();
    uint64_t shape[2] = {(uint64_t)rows, (uint64_t)cols};
    CHECK_OK(cmf__writer_add_tensor(w, name, CMF_DTYPE_F32, cols ? 2 : 1, shape, d, n * 4));
    free(d);
}

/* Writes a toy model; `skip` names a tensor to leave out, `bad_k` gives
 * k_proj a wrong shape, `skill` adds skill.sql.<up_proj of layer 0>. */
/* A chat template for the next write_model with a vocabulary (NULL: none). */
static const char *g_template;

static char *write_model(const char *tag, json_t *arch, const char *skip, bool bad_k, bool skill, bool vocab)
{
    static char path[8][512];
    static int slot;
    char *p = path[slot++ % 8];
    snprintf(p, 512, "%s/%s.cmf", harness_tmpdir(), tag);
    cmf__writer *w;
    CHECK_OK(cmf__writer_open(p, &w));
    json_t *hdr = json_object();
    json_object_set_new(hdr, "arch", arch);
    if (vocab) json_object_set_new(hdr, "tokenizer_config", json_pack("{s:[i]}", "eos_token_ids", 383));
    if (vocab && g_template)
        json_object_set_new(json_object_get(hdr, "tokenizer_config"), "chat_template", json_string(g_template));
    CHECK_OK(cmf__writer_set_header(w, hdr));
    json_decref(hdr);
    if (vocab) {
        size_t len;
        char *tj = harness_read_file(harness_fixture_path("hf-models/llama/tokenizer.json"), &len);
        if (tj) CHECK_OK(cmf__writer_set_vocab(w, tj, len));
        free(tj);
    }
    g_rng = 99;
    add_f32(w, "model.embed_tokens.weight", V, H, 1.0f);
    add_f32(w, "model.norm.weight", H, 0, 0);
    char nm[256];
    const char *mats[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
    const int64_t rows[] = {NH * HD, NKV * HD, NKV * HD, H, F, F, H};
    const int64_t cols[] = {H, H, H, NH * HD, H, H, F};
    for (int l = 0; l < L; l++) {
        for (int k = 0; k < 7; k++) {
            snprintf(nm, sizeof nm, "model.layers.%d.%s.weight", l, mats[k]);
            if (skip && !strcmp(nm, skip)) continue;
            add_f32(w, nm, rows[k] + (bad_k && k == 1 ? 1 : 0), cols[k], 0.3f);
        }
        snprintf(nm, sizeof nm, "model.layers.%d.input_layernorm.weight", l);
        if (!skip || strcmp(nm, skip)) add_f32(w, nm, H, 0, 0);
        snprintf(nm, sizeof nm, "model.layers.%d.post_attention_layernorm.weight", l);
        if (!skip || strcmp(nm, skip)) add_f32(w, nm, H, 0, 0);
    }
    if (skill) add_f32(w, "skill.sql.model.layers.0.mlp.up_proj.weight", F, H, 0.9f);
    CHECK_OK(cmf__writer_finish(w));
    return p;
}

TEST(arch_errors_name_the_path)
{
    json_t *a = base_arch();
    json_object_del(a, "hidden_size");
    cmf__model *m = NULL;
    CHECK_ERR(cmf__model_open(write_model("nohidden", a, NULL, false, false, false), &m), CMF_ERR_CONFIG,
              "arch.hidden_size: missing");
    a = base_arch();
    json_object_set_new(a, "layer_types", json_pack("[s,s]", "FullAttention", "Foo"));
    CHECK_ERR(cmf__model_open(write_model("badlt", a, NULL, false, false, false), &m), CMF_ERR_CONFIG,
              "arch.layer_types[1]: unknown 'Foo'");
    a = base_arch();
    json_object_set_new(a, "layer_types", json_pack("[s,s]", "SlidingAttention", "FullAttention"));
    CHECK_ERR(cmf__model_open(write_model("nowin", a, NULL, false, false, false), &m), CMF_ERR_CONFIG,
              "needs sliding_window");
    a = base_arch();
    json_object_set_new(a, "norm_style", json_string("foo"));
    CHECK_ERR(cmf__model_open(write_model("badnorm", a, NULL, false, false, false), &m), CMF_ERR_CONFIG,
              "arch.norm_style: unknown 'foo'");
    a = base_arch();
    json_object_set_new(a, "num_kv_heads", json_integer(3));
    CHECK_ERR(cmf__model_open(write_model("badkv", a, NULL, false, false, false), &m), CMF_ERR_CONFIG,
              "not a multiple of num_kv_heads");
    a = base_arch();
    json_object_set_new(a, "rope_scaling", json_pack("{s:s}", "rope_type", "banana"));
    CHECK_ERR(cmf__model_open(write_model("badrope", a, NULL, false, false, false), &m), CMF_ERR_CONFIG,
              "arch.rope_scaling.rope_type: unknown 'banana'");
    a = base_arch();
    json_object_set_new(a, "rope_layers", json_pack("[i]", 1));
    CHECK_ERR(cmf__model_open(write_model("badropel", a, NULL, false, false, false), &m), CMF_ERR_CONFIG,
              "arch.rope_layers: expected an array of 2 integers");
    CHECK(m == NULL);
}

TEST(tensor_errors_name_the_tensor)
{
    cmf__model *m = NULL;
    CHECK_ERR(cmf__model_open(write_model("nodown", base_arch(), "model.layers.1.mlp.down_proj.weight", false, false,
                                          false),
                              &m),
              CMF_ERR_CONFIG, "tensor 'model.layers.1.mlp.down_proj.weight' missing");
    CHECK_ERR(cmf__model_open(write_model("nonorm", base_arch(), "model.layers.0.input_layernorm.weight", false, false,
                                          false),
                              &m),
              CMF_ERR_CONFIG, "'model.layers.0.input_layernorm.weight' missing");
    CHECK_ERR(cmf__model_open(write_model("badk", base_arch(), NULL, true, false, false), &m), CMF_ERR_CONFIG,
              "'model.layers.0.self_attn.k_proj.weight' at 0x");
    CHECK_ERR(cmf__model_open(write_model("badk2", base_arch(), NULL, true, false, false), &m), CMF_ERR_CONFIG,
              "expected [32, 64]");
    /* untied without lm_head */
    json_t *a = base_arch();
    json_object_set_new(a, "tie_word_embeddings", json_false());
    CHECK_ERR(cmf__model_open(write_model("nohead", a, NULL, false, false, false), &m), CMF_ERR_CONFIG,
              "tensor 'lm_head.weight' missing");
    cmf_model *pm = NULL;
    CHECK_ERR(cmf_model_open(write_model("nopan", base_arch(), "model.layers.1.post_attention_layernorm.weight", false, false, false), NULL, &pm),
              CMF_ERR_CONFIG, "model.layers.1.post_attention_layernorm.weight");
    CHECK(pm == NULL);
    CHECK_ERR(cmf_model_open("/nonexistent/x.cmf", NULL, &pm), CMF_ERR_IO, "/nonexistent/x.cmf");
}

TEST(skill_overlay_rebinds)
{
    const char *p = write_model("skill", base_arch(), NULL, false, true, false);
    cmf__model *m = NULL;
    CHECK_OK(cmf__model_open(p, &m));
    if (!m) return;
    const cmf__tensor *back = m->layers[0].w_up.t;
    CHECK_EQ_STR(back->name, "model.layers.0.mlp.up_proj.weight");
    cmf__engine *e = NULL;
    CHECK_OK(cmf__engine_new(m, NULL, &e));
    int32_t ids[4] = {1, 2, 3, 4};
    float a[V], b[V];
    CHECK_OK(cmf__engine_forward(e, ids, 4, a, false));
    cmf__engine_free(e);
    CHECK_OK(cmf__model_bind(m, "sql"));
    CHECK_EQ_STR(m->layers[0].w_up.t->name, "skill.sql.model.layers.0.mlp.up_proj.weight");
    CHECK_EQ_STR(m->layers[1].w_up.t->name, "model.layers.1.mlp.up_proj.weight");
    CHECK(m->layers[0].w_up.q.data != back->data); /* a view of the skill's bytes, no copy */
    CHECK_OK(cmf__engine_new(m, NULL, &e));
    CHECK_OK(cmf__engine_forward(e, ids, 4, b, false));
    double diff = 0;
    for (int i = 0; i < V; i++) diff += fabs(a[i] - b[i]);
    CHECK(diff > 1e-3);
    cmf__engine_free(e);
    CHECK_ERR(cmf__model_bind(m, "nope"), CMF_ERR_NOT_FOUND, "skill 'nope' not in this file");
    CHECK_EQ_STR(m->skill, "sql"); /* a failed bind keeps the previous binding */
    CHECK_OK(cmf__model_bind(m, NULL));
    CHECK(m->layers[0].w_up.t == back);
    cmf__model_free(m);
}

TEST(sampler_rules)
{
    float lg[8] = {0.1f, 2.0f, 1.9f, -1, 0, 0.5f, 2.0f, -3};
    cmf_sampling_params p = cmf_sampling_params_default();
    p.temperature = 0;
    cmf__sampler s;
    CHECK_OK(cmf__sampler_init(&s, &p, 8));
    CHECK_EQ_INT(cmf__sampler_sample(&s, lg, NULL, 0), 1); /* ties: lowest id */
    int32_t hist[3] = {1, 6, 1};
    s.p.repeat_penalty = 2.0f; /* 2.0 -> 1.0 for ids 1 and 6, 1.9 wins */
    CHECK_EQ_INT(cmf__sampler_sample(&s, lg, hist, 3), 2);
    s.p.repeat_penalty = 1.0f;
    s.p.frequency_penalty = 0.1f; /* id 1 occurs twice: 1.8; id 6: 1.9 -> tie 1.9 with id 2, lower id */
    CHECK_EQ_INT(cmf__sampler_sample(&s, lg, hist, 3), 2);
    s.p.repeat_last_n = 1; /* only the last token (id 1) counts */
    CHECK_EQ_INT(cmf__sampler_sample(&s, lg, hist, 3), 6);
    cmf__sampler_free(&s);
    /* top_k 1 is greedy whatever the temperature; same seed, same draws */
    p = cmf_sampling_params_default();
    p.temperature = 5.0f;
    p.top_k = 1;
    p.seed = 7;
    CHECK_OK(cmf__sampler_init(&s, &p, 8));
    for (int i = 0; i < 20; i++) CHECK_EQ_INT(cmf__sampler_sample(&s, lg, NULL, 0), 1);
    cmf__sampler_free(&s);
    p.top_k = 0;
    p.top_p = 1;
    p.min_p = 0;
    cmf__sampler s2;
    CHECK_OK(cmf__sampler_init(&s, &p, 8));
    CHECK_OK(cmf__sampler_init(&s2, &p, 8));
    int seen[8] = {0};
    for (int i = 0; i < 200; i++) {
        int32_t a = cmf__sampler_sample(&s, lg, NULL, 0), b = cmf__sampler_sample(&s2, lg, NULL, 0);
        CHECK_EQ_INT(a, b);
        seen[a]++;
    }
    CHECK(seen[7] > 0 && seen[1] > 0); /* temperature 5 spreads the mass */
    cmf__sampler_free(&s);
    cmf__sampler_free(&s2);
    /* min_p 0.9 keeps only the near-top ids 1, 6 (and 2: 1.9 vs 2.0 at T=1 is 0.905) */
    p.temperature = 1;
    p.min_p = 0.95f;
    CHECK_OK(cmf__sampler_init(&s, &p, 8));
    for (int i = 0; i < 50; i++) {
        int32_t a = cmf__sampler_sample(&s, lg, NULL, 0);
        CHECK(a == 1 || a == 6);
    }
    cmf__sampler_free(&s);
    int32_t top[3];
    float tl[3];
    float lp = cmf__logprobs(lg, 8, 2, 3, top, tl);
    CHECK_EQ_INT(top[0], 1);
    CHECK_EQ_INT(top[1], 6);
    CHECK_EQ_INT(top[2], 2);
    CHECK_NEAR(lp, tl[2], 1e-6);
    CHECK(lp < 0);
}

typedef struct gen_ctx {
    int n_cb;
    char text[4096];
    size_t len;
    cmf_session *cancel_at_3;
} gen_ctx;

static int on_tok(void *user, const cmf_token_info *t)
{
    gen_ctx *g = user;
    g->n_cb++;
    if (g->len + t->text_len < sizeof g->text) {
        memcpy(g->text + g->len, t->text, t->text_len);
        g->len += t->text_len;
        g->text[g->len] = 0;
    }
    if (g->cancel_at_3 && g->n_cb == 3) cmf_session_cancel(g->cancel_at_3);
    return 0;
}

/* cmf_model_render_chat_json hands messages (tool_calls, tool_call_id) and
 * tools to the template as they are; the expected text is jinja2's render
 * of the same template and data (trim_blocks, lstrip_blocks, HF tojson). */
TEST(render_chat_json_tools)
{
    if (!harness_fixtures()) SKIP("fixtures absent (tokenizer)");
    g_template = "{% for m in messages %}{{ m.role }}:{{ m.content }}{% if m.tool_calls %}[{{ m.tool_calls[0].function.name "
                 "}}({{ m.tool_calls[0].function.arguments | tojson }})]{% endif %}{% if m.tool_call_id %}#{{ m.tool_call_id "
                 "}}{% endif %}\n{% endfor %}{% if tools %}tools:{% for t in tools %}{{ t.function.name }};{% endfor %}{% endif %}";
    const char *p = write_model("tools", base_arch(), NULL, false, false, true);
    g_template = NULL;
    cmf_model *m = NULL;
    CHECK_OK(cmf_model_open(p, NULL, &m));
    if (!m) return;
    CHECK(cmf_model_has_chat_template(m));
    const char *msgs = "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": "
                       "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1}}}]}, {\"role\": "
                       "\"tool\", \"content\": \"2\", \"tool_call_id\": \"c1\"}]";
    const char *tools = "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, {\"type\": \"function\", \"function\": "
                        "{\"name\": \"g\"}}]";
    char buf[256];
    size_t len = 0;
    CHECK_OK(cmf_model_render_chat_json(m, msgs, tools, true, buf, sizeof buf, &len));
    CHECK_EQ_STR(buf, "user:hiassistant:[f({\"x\": 1})]tool:2#c1tools:f;g;");
    CHECK_EQ_INT((int)len, (int)strlen(buf));
    /* no tools: the variable is none; the same text as cmf_model_render_chat */
    CHECK_OK(cmf_model_render_chat_json(m, "[{\"role\": \"user\", \"content\": \"hi\"}]", NULL, true, buf, sizeof buf, &len));
    CHECK_EQ_STR(buf, "user:hi");
    cmf_chat_message one = {"user", "hi"};
    char buf2[64];
    CHECK_OK(cmf_model_render_chat(m, &one, 1, true, buf2, sizeof buf2, &len));
    CHECK_EQ_STR(buf2, buf);
    /* bad arguments name themselves */
    CHECK_ERR(cmf_model_render_chat_json(m, "[{\"role\": ", NULL, true, buf, sizeof buf, &len), CMF_ERR_ARG,
              "messages_json is not JSON: line 1 column");
    CHECK_ERR(cmf_model_render_chat_json(m, msgs, "{\"type\": 1}", true, buf, sizeof buf, &len), CMF_ERR_ARG,
              "tools_json must be a JSON array");
    CHECK_ERR(cmf_model_render_chat_json(m, NULL, NULL, true, buf, sizeof buf, &len), CMF_ERR_ARG, "messages_json is NULL");
    CHECK_ERR(cmf_model_render_chat_json(m, msgs, tools, true, buf, 4, &len), CMF_ERR_BOUNDS, "do not fit");
    cmf_model_free(m);
}

TEST(generate_stop_cancel_and_api)
{
    if (!harness_fixtures()) SKIP("fixtures absent (tokenizer)");
    const char *p = write_model("api", base_arch(), NULL, false, false, true);
    cmf_model *m = NULL;
    cmf_session *s = NULL;
    CHECK_OK(cmf_model_open(p, NULL, &m));
    if (!m) return;
    CHECK_EQ_INT(cmf_model_n_vocab(m), V);
    CHECK(cmf_model_is_eos(m, 383));
    CHECK(!cmf_model_has_chat_template(m)); /* ChatML fallback */
    char buf[512];
    size_t len;
    cmf_chat_message msg = {"user", "hi"};
    CHECK_OK(cmf_model_render_chat(m, &msg, 1, true, buf, sizeof buf, &len));
    CHECK_EQ_STR(buf, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    CHECK_ERR(cmf_model_render_chat(m, &msg, 1, true, buf, 4, &len), CMF_ERR_BOUNDS, "do not fit");
    CHECK_CONTAINS(cmf_model_errmsg(m), "do not fit");
    int32_t ids[64];
    size_t n;
    CHECK_OK(cmf_model_tokenize(m, "hello world", 11, false, ids, 64, &n));
    CHECK(n > 0);
    CHECK_ERR(cmf_model_tokenize(m, "hello world", 11, false, ids, 1, &n), CMF_ERR_BOUNDS, "do not fit");
    CHECK_OK(cmf_model_detokenize(m, ids, n, false, buf, sizeof buf, &len));
    CHECK_EQ_STR(buf, "hello world");
    int32_t badid = 5000;
    CHECK_ERR(cmf_model_detokenize(m, &badid, 1, false, buf, sizeof buf, &len), CMF_ERR_ARG, "outside the vocabulary");
    cmf_session_params sp = cmf_session_params_default();
    sp.n_ctx = 32;
    sp.n_threads = 2;
    CHECK_OK(cmf_session_new(m, &sp, &s));
    if (!s) goto done;
    CHECK_EQ_INT(cmf_session_n_ctx(s), 32);
    /* greedy, max tokens */
    cmf_generate_params g = cmf_generate_params_default();
    g.sampling.temperature = 0;
    g.max_tokens = 6;
    g.ignore_eos = true;
    g.on_token = on_tok;
    gen_ctx gc = {0};
    g.user = &gc;
    cmf_generate_result r;
    CHECK_OK(cmf_session_generate(s, ids, n, &g, &r));
    CHECK_EQ_INT(r.finish, CMF_FINISH_LENGTH);
    CHECK_EQ_INT(r.n_gen, 6);
    CHECK_EQ_INT(cmf_session_n_past(s), (int)n + 5);
    char full[4096];
    snprintf(full, sizeof full, "%s", gc.text);
    /* same prompt again: the cached prefix is reused, same text */
    gen_ctx gc2 = {0};
    g.user = &gc2;
    CHECK_OK(cmf_session_generate(s, ids, n, &g, &r));
    CHECK_EQ_INT(r.n_reused, (int)n - 1);
    CHECK_EQ_STR(gc2.text, full);
    /* a stop string taken from the middle of that text ends it there */
    if (strlen(full) >= 4) {
        char stop[3] = {full[2], full[3], 0};
        const char *stops[1] = {stop};
        gen_ctx gc3 = {0};
        g.user = &gc3;
        g.stop = stops;
        g.n_stop = 1;
        CHECK_OK(cmf_session_generate(s, ids, n, &g, &r));
        CHECK_EQ_INT(r.finish, CMF_FINISH_STOP);
        CHECK(strstr(gc3.text, stop) == NULL);
        CHECK(!strncmp(gc3.text, full, gc3.len));
        g.stop = NULL;
        g.n_stop = 0;
    }
    /* cancel from the callback (any thread may call it) */
    gen_ctx gc4 = {.cancel_at_3 = s};
    g.user = &gc4;
    g.max_tokens = 20;
    CHECK_OK(cmf_session_generate(s, ids, n, &g, &r));
    CHECK_EQ_INT(r.finish, CMF_FINISH_CANCELLED);
    CHECK_EQ_INT(r.n_gen, 3);
    /* context: 32 positions */
    g.max_tokens = -1;
    g.user = &(gen_ctx){0};
    CHECK_OK(cmf_session_generate(s, ids, n, &g, &r));
    CHECK_EQ_INT(r.finish, CMF_FINISH_CONTEXT);
    CHECK_EQ_INT(cmf_session_n_past(s), 32);
    /* errors */
    int32_t bad = V;
    CHECK_ERR(cmf_session_decode(s, &bad, 1, NULL, false), CMF_ERR_CONTEXT, "context full");
    cmf_session_reset(s);
    CHECK_ERR(cmf_session_decode(s, &bad, 1, NULL, false), CMF_ERR_ARG, "out of range");
    CHECK_CONTAINS(cmf_session_errmsg(s), "out of range");
    int32_t many[40] = {0};
    CHECK_ERR(cmf_session_generate(s, many, 40, &g, &r), CMF_ERR_CONTEXT, "exceeds n_ctx");
done:
    cmf_session_free(s);
    cmf_model_free(m);
}

static int slow_tok(void *user, const cmf_token_info *t)
{
    (void)user;
    (void)t;
    struct timespec ts = {0, 3000000}; /* 3 ms per token: 60 tokens take ~180 ms */
    nanosleep(&ts, NULL);
    return 0;
}

static void *canceller(void *arg)
{
    struct timespec ts = {0, 30000000}; /* 30 ms */
    nanosleep(&ts, NULL);
    cmf_session_cancel(arg);
    return NULL;
}

TEST(cancel_from_another_thread)
{
    const char *p = write_model("cancel", base_arch(), NULL, false, false, false);
    cmf_model *m = NULL;
    cmf_session *s = NULL;
    CHECK_OK(cmf_model_open(p, NULL, &m));
    if (!m) return;
    CHECK_OK(cmf_session_new(m, NULL, &s));
    if (s) {
        cmf_generate_params g = cmf_generate_params_default();
        g.max_tokens = -1;
        g.ignore_eos = true;
        g.on_token = slow_tok;
        int32_t prompt[2] = {5, 6};
        pthread_t th;
        CHECK_EQ_INT(pthread_create(&th, NULL, canceller, s), 0);
        cmf_generate_result r;
        CHECK_OK(cmf_session_generate(s, prompt, 2, &g, &r));
        pthread_join(th, NULL);
        CHECK_EQ_INT(r.finish, CMF_FINISH_CANCELLED);
        CHECK(r.n_gen >= 1 && r.n_gen < 60);
        /* the flag is consumed: the next generation runs to its limit */
        g.max_tokens = 3;
        g.on_token = NULL;
        CHECK_OK(cmf_session_generate(s, prompt, 2, &g, &r));
        CHECK_EQ_INT(r.finish, CMF_FINISH_LENGTH);
    }
    cmf_session_free(s);
    cmf_model_free(m);
}

int main(void)
{
    RUN(arch_errors_name_the_path);
    RUN(tensor_errors_name_the_tensor);
    RUN(skill_overlay_rebinds);
    RUN(sampler_rules);
    RUN(render_chat_json_tools);
    RUN(generate_stop_cancel_and_api);
    RUN(cancel_from_another_thread);
    return harness_done();
}
