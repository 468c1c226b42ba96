/* test_text_template_refs.c — renders every conversation of the fixtures
 * through every chat template and compares byte for byte with the renders
 * transformers' apply_chat_template made (reference_chat_renders.json), and
 * with the jinja2 renders of the extra templates in
 * tests/data/template_refs.json. A render that raised there must raise here.
 * Each mismatch prints the first differing byte with context. */
#include "harness.h"
#include "text/template.h"
#include "util/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* flags: JSON_DECODE_INT_AS_REAL for tokenizer_config.json, whose
 * model_max_length does not fit 64 bits */
static json_t *load_json_flags(const char *path, size_t flags)
{
    json_error_t e;
    json_t *j = json_load_file(path, flags, &e);
    if (!j) fprintf(stderr, "cannot read %s: %s (line %d)\n", path, e.text, e.line);
    return j;
}

static json_t *load_json(const char *path) { return load_json_flags(path, 0); }

/* A special token from tokenizer_config.json: a string or {"content": ...}. */
static const char *token_str(const json_t *cfg, const char *key)
{
    const json_t *v = json_object_get(cfg, key);
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_object(v) && json_is_string(json_object_get(v, "content")))
        return json_string_value(json_object_get(v, "content"));
    return NULL;
}

static void show_diff(const char *label, const char *got, size_t got_len, const char *want, size_t want_len)
{
    size_t i = 0;
    while (i < got_len && i < want_len && got[i] == want[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr, "  %s: first difference at byte %zu (got %zu bytes, want %zu)\n", label, i, got_len, want_len);
    fprintf(stderr, "    got : ...%.*s|%.*s\n", (int)(i - from), got + from,
            (int)(got_len - i > 40 ? 40 : got_len - i), got + i);
    fprintf(stderr, "    want: ...%.*s|%.*s\n", (int)(i - from), want + from,
            (int)(want_len - i > 40 ? 40 : want_len - i), want + i);
}

static int n_pass, n_total;

/* One case; `ref` holds "render" or "error". */
static void run_case(const char *label, const char *tpl_src, const char *bos, const char *eos,
                     const json_t *conv, const json_t *ref)
{
    n_total++;
    cmf__chat_params p = {0};
    p.messages = json_object_get(conv, "messages");
    p.tools = json_object_get(conv, "tools");
    p.kwargs = json_object_get(conv, "kwargs");
    json_t *agp = p.kwargs ? json_object_get(p.kwargs, "add_generation_prompt") : NULL;
    p.add_generation_prompt = agp && json_is_true(agp);
    p.bos_token = bos;
    p.eos_token = eos;
    char *out = NULL;
    size_t out_len = 0;
    cmf_status st = cmf__template_apply(tpl_src, &p, &out, &out_len);
    const json_t *want = json_object_get(ref, "render");
    if (want) {
        if (st != CMF_OK) {
            harness_fail(__FILE__, __LINE__, "%s: render failed: %s", label, cmf_last_error());
        } else if (out_len != json_string_length(want) || memcmp(out, json_string_value(want), out_len) != 0) {
            harness_fail(__FILE__, __LINE__, "%s: render differs", label);
            show_diff(label, out, out_len, json_string_value(want), json_string_length(want));
        } else {
            n_pass++;
        }
    } else {
        if (st == CMF_OK) {
            harness_fail(__FILE__, __LINE__, "%s: rendered, but the reference raised: %s", label,
                         json_string_value(json_object_get(ref, "error")));
        } else if (st != CMF_ERR_TEMPLATE) {
            harness_fail(__FILE__, __LINE__, "%s: failed with %s, expected a template error", label, cmf_status_name(st));
        } else {
            n_pass++;
        }
    }
    free(out);
}

static const json_t *find_conv(const json_t *convs, const char *id)
{
    size_t i;
    json_t *c;
    json_array_foreach(convs, i, c) {
        if (strcmp(json_string_value(json_object_get(c, "id")), id) == 0) return c;
    }
    return NULL;
}

static char *read_text(const char *path)
{
    size_t len;
    return harness_read_file(path, &len);
}

TEST(reference_chat_renders)
{
    if (!harness_fixtures()) SKIP("fixtures absent");
    json_t *refs = load_json(harness_fixture_path("tokenizers/reference_chat_renders.json"));
    json_t *convs = load_json(harness_fixture_path("tokenizers/conversations.json"));
    json_t *llama3 = load_json_flags(harness_fixture_path("tokenizers/llama3/tokenizer_config.json"), JSON_DECODE_INT_AS_REAL);
    CHECK(refs && convs && llama3);
    if (!refs || !convs || !llama3) return;
    n_pass = n_total = 0;
    const char *key;
    json_t *cases;
    json_object_foreach(refs, key, cases) {
        char *tpl = NULL;
        const char *bos, *eos;
        json_t *cfg = NULL;
        if (strncmp(key, "jinja:", 6) == 0) {
            char rel[256];
            snprintf(rel, sizeof rel, "tokenizers/%s", key + 6);
            tpl = read_text(harness_fixture_path(rel));
            bos = token_str(llama3, "bos_token");
            eos = token_str(llama3, "eos_token");
        } else {
            char rel[256];
            snprintf(rel, sizeof rel, "tokenizers/%s/tokenizer_config.json", key);
            cfg = load_json_flags(harness_fixture_path(rel), JSON_DECODE_INT_AS_REAL);
            const json_t *ct = cfg ? json_object_get(cfg, "chat_template") : NULL;
            tpl = json_is_string(ct) ? strdup(json_string_value(ct)) : NULL;
            bos = cfg ? token_str(cfg, "bos_token") : NULL;
            eos = cfg ? token_str(cfg, "eos_token") : NULL;
        }
        CHECK(tpl != NULL);
        size_t i;
        json_t *ref;
        json_array_foreach(cases, i, ref) {
            const char *id = json_string_value(json_object_get(ref, "id"));
            const json_t *conv = find_conv(convs, id);
            CHECK(conv != NULL);
            if (!conv || !tpl) continue;
            char label[256];
            snprintf(label, sizeof label, "%s/%s", key, id);
            run_case(label, tpl, bos, eos, conv, ref);
        }
        free(tpl);
        json_decref(cfg);
    }
    fprintf(stderr, "reference_chat_renders.json: %d/%d renders identical\n", n_pass, n_total);
    CHECK(n_total > 0);
    json_decref(refs);
    json_decref(convs);
    json_decref(llama3);
}

/* tests/data/template_refs.json: {"conversations": [...], "templates":
 * {fixture path: {"bos_token", "eos_token", "cases": [{"id", "render"|"error"}]}}}
 * made by tools/gen_template_refs.py with jinja2 under transformers'
 * settings. A key naming a tokenizer_config.json means its chat_template. */
TEST(jinja2_template_renders)
{
    if (!harness_fixtures()) SKIP("fixtures absent");
    const char *srcdir = getenv("CMF_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/template_refs.json", srcdir && *srcdir ? srcdir : ".");
    json_t *refs = load_json(path);
    if (!refs) SKIP("tests/data/template_refs.json not found (set CMF_SOURCE_DIR)");
    const json_t *convs = json_object_get(refs, "conversations");
    n_pass = n_total = 0;
    const char *key;
    json_t *entry;
    json_object_foreach(json_object_get(refs, "templates"), key, entry) {
        char *tpl = NULL;
        size_t kl = strlen(key);
        if (kl > 5 && strcmp(key + kl - 5, ".json") == 0) {
            json_t *cfg = load_json_flags(harness_fixture_path(key), JSON_DECODE_INT_AS_REAL);
            const json_t *ct = cfg ? json_object_get(cfg, "chat_template") : NULL;
            tpl = json_is_string(ct) ? strdup(json_string_value(ct)) : NULL;
            json_decref(cfg);
        } else {
            tpl = read_text(harness_fixture_path(key));
        }
        CHECK(tpl != NULL);
        if (!tpl) continue;
        const char *bos = json_string_value(json_object_get(entry, "bos_token"));
        const char *eos = json_string_value(json_object_get(entry, "eos_token"));
        size_t i;
        json_t *ref;
        json_array_foreach(json_object_get(entry, "cases"), i, ref) {
            const char *id = json_string_value(json_object_get(ref, "id"));
            const json_t *conv = find_conv(convs, id);
            CHECK(conv != NULL);
            if (!conv) continue;
            char label[700];
            snprintf(label, sizeof label, "%s/%s", key, id);
            run_case(label, tpl, bos, eos, conv, ref);
        }
        free(tpl);
    }
    fprintf(stderr, "template_refs.json: %d/%d renders identical\n", n_pass, n_total);
    CHECK(n_total > 0);
    json_decref(refs);
}

int main(void)
{
    RUN(reference_chat_renders);
    RUN(jinja2_template_renders);
    return harness_done();
}
