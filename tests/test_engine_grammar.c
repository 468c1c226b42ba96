/* test_engine_grammar.c — the public constrained-decoding API on a small
 * random-weight model written here (the fixtures' 384-token byte-level
 * tokenizer): compile errors, states (copy, rollback, accept of refused
 * tokens), the logit hook; and enforcement, property-style: for schemas
 * with nested objects, bounded arrays, enums, recursion, anyOf and
 * formats, outputs sampled from the model at temperature 1.5 (a token
 * drawn from the raw row and kept when allowed, else drawn again from the
 * masked row) over many seeds always parse as JSON and validate against
 * their schema (tests/cli/lib/schema_check.py: python3-jsonschema with
 * format checkers of its own, the independent checker); a fixed seed gives
 * the same output twice. Without python3-jsonschema the program reports
 * itself skipped (77), not passed. */
#include "harness.h"
#include "format/format.h"
#include "util/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

enum { H = 64, L = 2, NH = 2, NKV = 1, HD = 32, V = 384, F = 64, EOS = 383 };

static uint64_t g_rng = 7;
static double urand(void)
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}

static void add_f32(cmf__writer *w, const char *name, int64_t rows, int64_t cols, float scale)
{
    size_t n = (size_t)(rows * (cols ? cols : 1));
    float *d = malloc(n * 4);
    for (size_t i = 0; i < n; i++) d[i] = cols ? (float)(urand() * 2 - 1) * scale : 1.0f;
    uint64_t shape[2] = {(uint64_t)rows, (uint64_t)cols};
    CHECK_OK(cmf__writer_add_tensor(w, name, CMF_DTYPE_F32, cols ? 2 : 1, shape, d, n * 4));
    free(d);
}

static const char *write_model(void)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/g.cmf", harness_tmpdir());
    cmf__writer *w;
    CHECK_OK(cmf__writer_open(p, &w));
    json_t *hdr = json_pack("{s:{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:f, s:s, s:s, s:s}, s:{s:[i]}}",
                            "arch", "arch_name", "toy", "hidden_size", H, "intermediate_size", F, "num_layers", L,
                            "num_attention_heads", NH, "num_kv_heads", NKV, "head_dim", HD, "vocab_size", V,
                            "max_position_embeddings", 4096, "tie_word_embeddings", 1, "rms_norm_eps", 1e-6,
                            "norm_style", "qwen", "norm_placement", "pre", "activation", "silu", "tokenizer_config",
                            "eos_token_ids", EOS);
    CHECK_OK(cmf__writer_set_header(w, hdr));
    json_decref(hdr);
    size_t len;
    char *tj = harness_read_file(harness_fixture_path("hf-models/llama/tokenizer.json"), &len);
    if (tj) CHECK_OK(cmf__writer_set_vocab(w, tj, len));
    free(tj);
    add_f32(w, "model.embed_tokens.weight", V, H, 1.0f);
    add_f32(w, "model.norm.weight", H, 0, 0);
    const char *mats[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
    const int64_t rows[] = {NH * HD, NKV * HD, NKV * HD, H, F, F, H}, cols[] = {H, H, H, NH * HD, H, H, F};
    char nm[256];
    for (int l = 0; l < L; l++) {
        for (int k = 0; k < 7; k++) {
            snprintf(nm, sizeof nm, "model.layers.%d.%s.weight", l, mats[k]);
            add_f32(w, nm, rows[k], cols[k], 0.3f);
        }
        snprintf(nm, sizeof nm, "model.layers.%d.input_layernorm.weight", l);
        add_f32(w, nm, H, 0, 0);
        snprintf(nm, sizeof nm, "model.layers.%d.post_attention_layernorm.weight", l);
        add_f32(w, nm, H, 0, 0);
    }
    CHECK_OK(cmf__writer_finish(w));
    return p;
}

static cmf_model *g_model;
static size_t g_n_written; /* schemas whose outputs enforcement_property wrote for outputs_validate */
static bool g_validated;   /* outputs_validate ran the checker, and it passed */

TEST(compile_errors)
{
    cmf_grammar *g = (cmf_grammar *)1;
    const char *bad = "root ::= \"a\" |\n  [b-\n";
    CHECK_ERR(cmf_grammar_compile(g_model, bad, strlen(bad), &g), CMF_ERR_PARSE, "grammar: line 2, column 3");
    CHECK(g == NULL);
    CHECK_CONTAINS(cmf_model_errmsg(g_model), "line 2, column 3");
    const char *sch = "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", \"format\": \"email\"}}}";
    CHECK_ERR(cmf_grammar_from_json_schema(g_model, sch, strlen(sch), &g), CMF_ERR_UNSUPPORTED,
              "/properties/a/format: format 'email' not supported");
    CHECK_ERR(cmf_grammar_compile(NULL, "root ::= \"a\"", 12, &g), CMF_ERR_ARG, "model is NULL");
    /* boolean schemas: true is any value, false an error */
    CHECK_OK(cmf_grammar_from_json_schema(g_model, "true", 4, &g));
    cmf_grammar_free(g);
    CHECK_ERR(cmf_grammar_from_json_schema(g_model, "false", 5, &g), CMF_ERR_ARG, "json schema: /: the schema false");
    const char *one = "{\"oneOf\": [{\"type\": \"integer\"}, {\"type\": \"number\"}]}";
    CHECK_ERR(cmf_grammar_from_json_schema(g_model, one, strlen(one), &g), CMF_ERR_UNSUPPORTED,
              "json schema: /oneOf: branches 0 and 1 may both match; use anyOf");
}

/* The token id whose single piece is `s` (tiny vocabulary: look it up). */
static int32_t tok1(const char *s)
{
    int32_t ids[8];
    size_t n = 0;
    if (cmf_model_tokenize(g_model, s, strlen(s), false, ids, 8, &n) || n != 1) {
        harness_fail(__FILE__, __LINE__, "'%s' is not one token (%zu)", s, n);
        return -1;
    }
    return ids[0];
}

TEST(states_rollback_hook)
{
    cmf_grammar *g = NULL;
    const char *t = "root ::= \"ab\" [0-9]+ \"c\"\n";
    CHECK_OK(cmf_grammar_compile(g_model, t, strlen(t), &g));
    if (!g) return;
    cmf_grammar_state *s = NULL;
    CHECK_OK(cmf_grammar_state_new(g, &s));
    if (!s) goto done;
    int32_t a = tok1("a"), b = tok1("b"), one = tok1("1"), c = tok1("c");
    CHECK_EQ_INT(cmf_grammar_state_allows(s, a), 1);
    CHECK_EQ_INT(cmf_grammar_state_allows(s, b), 0);
    CHECK_EQ_INT(cmf_grammar_state_allows(s, EOS), 0);
    CHECK_ERR(cmf_grammar_state_accept(s, b), CMF_ERR_ARG, "token");
    CHECK_EQ_INT(cmf_grammar_state_n_tokens(s), 0);
    CHECK_OK(cmf_grammar_state_accept(s, a));
    CHECK_OK(cmf_grammar_state_accept(s, b));
    CHECK_OK(cmf_grammar_state_accept(s, one));
    cmf_grammar_state *cp = cmf_grammar_state_copy(s);
    CHECK(cp != NULL);
    CHECK_OK(cmf_grammar_state_accept(s, c));
    CHECK(cmf_grammar_state_can_end(s));
    CHECK_EQ_INT(cmf_grammar_state_allows(s, EOS), 1);
    CHECK(cp && !cmf_grammar_state_can_end(cp));
    CHECK(cp && cmf_grammar_state_allows(cp, one) == 1);
    /* rollback to before "1": digits required again */
    CHECK_OK(cmf_grammar_state_rollback(s, 2));
    CHECK_EQ_INT(cmf_grammar_state_n_tokens(s), 2);
    CHECK_EQ_INT(cmf_grammar_state_allows(s, c), 0);
    CHECK_EQ_INT(cmf_grammar_state_allows(s, one), 1);
    CHECK_ERR(cmf_grammar_state_rollback(s, 3), CMF_ERR_ARG, "3 tokens asked, 2 accepted");
    /* the hook: mask equals allows for every id; padded ids refused */
    cmf_logit_hook h = cmf_grammar_state_hook(s);
    float lg[V + 4];
    for (int i = 0; i < V + 4; i++) lg[i] = 1.0f;
    CHECK_EQ_INT(h.mask(h.user, lg, V + 4), 0);
    int n_ok = 0;
    for (int i = 0; i < V; i++) {
        int want = cmf_grammar_state_allows(s, i);
        if ((lg[i] == 1.0f) != (want == 1)) harness_fail(__FILE__, __LINE__, "token %d: mask %g, allows %d", i, lg[i], want);
        n_ok += want == 1;
    }
    CHECK(n_ok > 0);
    for (int i = V; i < V + 4; i++) CHECK(isinf(lg[i]) && lg[i] < 0);
    CHECK_EQ_INT(h.allows(h.user, one), 1);
    CHECK_EQ_INT(h.accept(h.user, one), 0);
    CHECK(h.accept(h.user, a) != 0);
    cmf_grammar_state_free(cp);
    cmf_grammar_state_free(s);
done:
    cmf_grammar_free(g);
}

static double softmax_draw(const float *lg, int n, float temp)
{
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++) if (lg[i] > mx) mx = lg[i];
    for (int i = 0; i < n; i++) sum += isinf(lg[i]) ? 0 : exp((lg[i] - mx) / temp);
    double u = urand() * sum;
    for (int i = 0; i < n; i++) {
        if (isinf(lg[i])) continue;
        u -= exp((lg[i] - mx) / temp);
        if (u <= 0) return i;
    }
    for (int i = n; i-- > 0;) if (!isinf(lg[i])) return i;
    return -1;
}

/* One constrained sample; returns the text (malloc'd) or NULL. */
static char *sample(cmf_session *ses, cmf_grammar *g, uint64_t seed, int max_tokens, bool *ended)
{
    cmf_grammar_state *st = NULL;
    if (cmf_grammar_state_new(g, &st)) return NULL;
    cmf_logit_hook h = cmf_grammar_state_hook(st);
    g_rng = seed * 0x9E3779B97F4A7C15ull + 1;
    cmf_session_reset(ses);
    int32_t prompt[3] = {382, tok1("a"), tok1("b")};
    float *lg = malloc(V * sizeof *lg);
    int32_t *out = malloc((size_t)max_tokens * sizeof *out);
    size_t n = 0;
    *ended = false;
    cmf_status s = cmf_session_decode(ses, prompt, 3, lg, false);
    while (!s && n < (size_t)max_tokens) {
        int t = (int)softmax_draw(lg, V, 1.5f);
        if (h.allows(h.user, t) != 1) { /* refused: draw from the masked row */
            if (h.mask(h.user, lg, V)) break;
            t = (int)softmax_draw(lg, V, 1.5f);
        }
        if (t < 0) break;
        if (t == EOS) {
            *ended = true;
            break;
        }
        if (h.accept(h.user, t)) break;
        out[n++] = t;
        int32_t id = t;
        s = cmf_session_decode(ses, &id, 1, lg, false);
    }
    char *text = malloc(65536);
    size_t len = 0;
    if (cmf_model_detokenize(g_model, out, n, true, text, 65536, &len)) {
        free(text);
        text = NULL;
    }
    cmf_grammar_state_free(st);
    free(lg);
    free(out);
    return text;
}

static const char *SCHEMAS[] = {
    /* nested objects, optional properties */
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 8}, "
    "\"pos\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"integer\", \"minimum\": -5, \"maximum\": 40}, "
    "\"y\": {\"type\": \"number\"}}, \"required\": [\"x\"]}}, \"required\": [\"name\", \"pos\"]}",
    /* arrays with bounds, enums, const */
    "{\"type\": \"array\", \"items\": {\"enum\": [\"red\", \"green\", 3, null]}, \"minItems\": 2, \"maxItems\": 4}",
    "{\"type\": \"object\", \"properties\": {\"kind\": {\"const\": \"pt\"}, \"tags\": {\"type\": \"array\", "
    "\"items\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 3}, \"maxItems\": 3}}, \"required\": [\"kind\", \"tags\"], "
    "\"additionalProperties\": false}",
    /* recursion: a short list */
    "{\"$ref\": \"#/$defs/node\", \"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"v\": "
    "{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 9}, \"next\": {\"anyOf\": [{\"$ref\": \"#/$defs/node\"}, "
    "{\"type\": \"null\"}]}}, \"required\": [\"v\", \"next\"]}}}",
    /* anyOf and formats */
    "{\"anyOf\": [{\"type\": \"string\", \"format\": \"date\"}, {\"type\": \"string\", \"format\": \"uuid\"}, "
    "{\"type\": \"object\", \"properties\": {\"at\": {\"type\": \"string\", \"format\": \"date-time\"}, "
    "\"t\": {\"type\": \"string\", \"format\": \"time\"}}, \"required\": [\"at\"], \"additionalProperties\": false}, "
    "{\"type\": \"boolean\"}]}",
    ("{\"type\": \"object\", \"properties\": {\"code\": {\"type\": \"string\", \"pattern\": \"^[A-Z]{2}-[0-9]{2,3}$\"}, "
     "\"n\": {\"type\": [\"integer\", \"null\"]}}, \"required\": [\"code\", \"n\"]}"),
};

TEST(enforcement_property)
{
    cmf_session_params sp = cmf_session_params_default();
    sp.n_ctx = 4096;
    sp.n_threads = 2;
    cmf_session *ses = NULL;
    CHECK_OK(cmf_session_new(g_model, &sp, &ses));
    if (!ses) return;
    int n_seeds = getenv("CMF_GRAMMAR_SEEDS") ? atoi(getenv("CMF_GRAMMAR_SEEDS")) : 12;
    char dir[600];
    snprintf(dir, sizeof dir, "%s", harness_tmpdir());
    int total = 0, n_ended = 0;
    for (size_t k = 0; k < sizeof SCHEMAS / sizeof *SCHEMAS; k++) {
        cmf_grammar *g = NULL;
        CHECK_OK(cmf_grammar_from_json_schema(g_model, SCHEMAS[k], strlen(SCHEMAS[k]), &g));
        if (!g) continue;
        char sp_path[700], op_path[700];
        snprintf(sp_path, sizeof sp_path, "%s/schema%zu.json", dir, k);
        snprintf(op_path, sizeof op_path, "%s/out%zu.jsonl", dir, k);
        FILE *fs = fopen(sp_path, "w"), *fo = fopen(op_path, "w");
        if (fs) fputs(SCHEMAS[k], fs), fclose(fs);
        for (int seed = 1; seed <= n_seeds && fo; seed++) {
            bool ended;
            char *txt = sample(ses, g, (uint64_t)seed * 31 + k, 4000, &ended);
            total++;
            if (!txt) {
                harness_fail(__FILE__, __LINE__, "schema %zu seed %d: sampling failed: %s", k, seed, cmf_last_error());
                continue;
            }
            n_ended += ended;
            if (!ended) harness_fail(__FILE__, __LINE__, "schema %zu seed %d: no eos within 4000 tokens: %.200s", k, seed, txt);
            json_error_t je;
            json_t *j = json_loads(txt, JSON_DECODE_ANY, &je);
            if (!j) harness_fail(__FILE__, __LINE__, "schema %zu seed %d: not JSON (%s): %s", k, seed, je.text, txt);
            json_decref(j);
            /* one JSON text per line for the checker */
            json_t *line = json_string(txt);
            char *enc = line ? json_dumps(line, JSON_ENCODE_ANY) : NULL;
            if (enc) fprintf(fo, "%s\n", enc);
            free(enc);
            json_decref(line);
            if (seed == 1) {
                bool e2;
                char *again = sample(ses, g, (uint64_t)seed * 31 + k, 4000, &e2);
                CHECK_EQ_STR(again, txt);
                if (k == 0) printf("  e.g. %s\n", txt);
                free(again);
            }
            free(txt);
        }
        if (fo) fclose(fo);
        cmf_grammar_free(g);
    }
    printf("  %d samples, %d ended by eos\n", total, n_ended);
    g_n_written = sizeof SCHEMAS / sizeof *SCHEMAS;
    cmf_session_free(ses);
}

/* The independent checker on enforcement_property's outputs. */
TEST(outputs_validate)
{
    const char *src = getenv("CMF_SOURCE_DIR");
    if (!src) SKIP("CMF_SOURCE_DIR not set (run through ctest): outputs not validated against their schemas");
    if (!g_n_written) SKIP("no outputs written");
    char cmd[8192];
    const char *dir = harness_tmpdir();
    int len = snprintf(cmd, sizeof cmd, "python3 '%s/tests/cli/lib/schema_check.py' --jsonl", src);
    for (size_t k = 0; k < g_n_written && len > 0 && (size_t)len < sizeof cmd; k++)
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " --schema '%s/schema%zu.json' '%s/out%zu.jsonl'", dir, k, dir, k);
    if (len <= 0 || (size_t)len >= sizeof cmd) {
        harness_fail(__FILE__, __LINE__, "checker command longer than %zu bytes", sizeof cmd);
        return;
    }
    int rc = system(cmd), code = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    if (code == 77 || code == 127)
        SKIP("python3 with jsonschema absent: outputs checked as JSON only, not against their schemas");
    if (code != 0) harness_fail(__FILE__, __LINE__, "schema_check.py found invalid outputs (exit %d)", code);
    else g_validated = true;
}

int main(void)
{
    if (!harness_fixtures()) {
        harness_skip("fixtures absent (tokenizer)");
        return harness_done();
    }
    CHECK_OK(cmf_model_open(write_model(), NULL, &g_model));
    if (g_model) {
        RUN(compile_errors);
        RUN(states_rollback_hook);
        RUN(enforcement_property);
        RUN(outputs_validate);
    }
    cmf_model_free(g_model);
    int rc = harness_done();
    if (rc == 0 && !g_validated) { /* the property unchecked is no pass */
        fprintf(stderr, "*** test_engine_grammar: outputs not validated against their schemas: SKIPPED ***\n");
        return 77;
    }
    return rc;
}
