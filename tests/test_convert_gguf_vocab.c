/* test_convert_gguf_vocab.c — llama.cpp's vocab-only test GGUFs
 * (fixtures/gguf/vocab/ggml-vocab-*.gguf): each vocabulary converted to a
 * tokenizer.json, loaded by the project's tokenizer, and every text of the
 * .inp file encoded (no special tokens added, as llama.cpp's
 * test-tokenizer-0 does) and compared id for id with the .out file. */
#include "convert/gguf.h"
#include "harness.h"
#include "text/tokenizer.h"

#include <stdlib.h>
#include <string.h>

static const char SEP[] = "\n__ggml_vocab_test__\n";

typedef struct vocab_case {
    const char *name;
    bool must_pass; /* every text matches; the others are printed as gaps */
} vocab_case;

static const vocab_case CASES[] = {
    {"gpt-2", true},          {"llama-spm", true},  {"phi-3", true},          {"mpt", true},
    {"starcoder", true},      {"refact", true},     {"falcon", true},         {"deepseek-coder", true},
    {"deepseek-llm", true},   {"bert-bge", true},
};

/* Parses " 1 2 3" into ids; returns the count. */
static size_t parse_ids(const char *line, size_t len, int32_t *ids, size_t cap)
{
    size_t n = 0;
    const char *p = line, *end = line + len;
    while (p < end && n < cap) {
        while (p < end && *p == ' ') p++;
        if (p >= end) break;
        ids[n++] = (int32_t)strtol(p, (char **)&p, 10);
    }
    return n;
}

/* Returns texts matched; *total gets the number of texts. */
static int run_case(const char *name, int *total)
{
    char rel[160];
    *total = 0;
    snprintf(rel, sizeof rel, "gguf/vocab/ggml-vocab-%s.gguf", name);
    cmf__gguf *g = NULL;
    CHECK_OK(cmf__gguf_open(harness_fixture_path(rel), &g));
    if (!g) return 0;
    char *js = NULL;
    size_t jl = 0;
    CHECK_OK(cmf__gguf_tokenizer_json(g, &js, &jl));
    cmf__gguf_free(g);
    cmf__tok *tok = NULL;
    if (js) CHECK_OK(cmf__tok_load(js, jl, name, &tok));
    free(js);
    snprintf(rel, sizeof rel, "gguf/vocab/ggml-vocab-%s.gguf.inp", name);
    size_t il = 0, ol = 0;
    char *inp = harness_read_file(harness_fixture_path(rel), &il);
    snprintf(rel, sizeof rel, "gguf/vocab/ggml-vocab-%s.gguf.out", name);
    char *out = harness_read_file(harness_fixture_path(rel), &ol);
    int ok = 0;
    if (tok && inp && out) {
        const char *p = inp, *o = out;
        const char *s;
        while ((s = strstr(p, SEP))) {
            const char *nl = strchr(o, '\n');
            size_t line_len = nl ? (size_t)(nl - o) : strlen(o);
            int32_t want[512];
            size_t nw = parse_ids(o, line_len, want, 512);
            cmf__tok_ids got = {0};
            cmf_status st = cmf__tok_encode(tok, p, (size_t)(s - p), false, &got);
            bool same = st == CMF_OK && got.n == nw && (nw == 0 || !memcmp(got.ids, want, nw * sizeof *want));
            if (same) ok++;
            else if (getenv("CMF_VOCAB_VERBOSE")) {
                printf("    %s text %d %.*s: got", name, *total, (int)(s - p < 40 ? s - p : 40), p);
                for (size_t k = 0; k < got.n; k++) printf(" %d", got.ids[k]);
                printf("\n      want %.*s\n", (int)line_len, o);
            }
            cmf__tok_ids_free(&got);
            (*total)++;
            p = s + sizeof SEP - 1;
            o = nl ? nl + 1 : o + line_len;
        }
    }
    free(inp);
    free(out);
    cmf__tok_free(tok);
    return ok;
}

TEST(vocab_files_tokenize_like_llama_cpp)
{
    if (!harness_fixtures()) SKIP("no fixtures (CMF_FIXTURES)");
    int files_ok = 0, n_files = 0;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        int total = 0, ok = run_case(CASES[i].name, &total);
        n_files++;
        files_ok += total > 0 && ok == total;
        printf("    %-16s %d/%d texts%s\n", CASES[i].name, ok, total,
               ok == total && total > 0 ? "" : CASES[i].must_pass ? "  FAIL" : "  (known gap)");
        if (CASES[i].must_pass && (total == 0 || ok != total))
            harness_fail(__FILE__, __LINE__, "%s: %d of %d texts match", CASES[i].name, ok, total);
    }
    printf("    %d of %d vocab files match on every text\n", files_ok, n_files);
}

/* The two vocab files without test texts still convert and load. */
TEST(other_vocab_files_load)
{
    if (!harness_fixtures()) SKIP("no fixtures (CMF_FIXTURES)");
    const char *names[] = {"baichuan", "gpt-neox"};
    for (int i = 0; i < 2; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "gguf/vocab/ggml-vocab-%s.gguf", names[i]);
        cmf__gguf *g = NULL;
        CHECK_OK(cmf__gguf_open(harness_fixture_path(rel), &g));
        char *js = NULL;
        size_t jl = 0;
        if (g) CHECK_OK(cmf__gguf_tokenizer_json(g, &js, &jl));
        cmf__tok *tok = NULL;
        if (js) CHECK_OK(cmf__tok_load(js, jl, names[i], &tok));
        if (tok) {
            cmf__tok_ids ids = {0};
            CHECK_OK(cmf__tok_encode(tok, "Hello world", 11, false, &ids));
            CHECK(ids.n >= 2);
            cmf__tok_ids_free(&ids);
        }
        cmf__tok_free(tok);
        free(js);
        cmf__gguf_free(g);
    }
}

int main(void)
{
    RUN(vocab_files_tokenize_like_llama_cpp);
    RUN(other_vocab_files_load);
    return harness_done();
}
