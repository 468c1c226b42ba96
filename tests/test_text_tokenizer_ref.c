/* test_text_tokenizer_ref.c — every entry of the fixtures'
 * reference_encodings.json (made by HF `tokenizers`) reproduced exactly:
 * ids (add_special_tokens=False), ids_special (True) and decoded. Exact
 * equality, no tolerance: tokenization is discrete. Prints the first
 * mismatch per tokenizer with context and a pass count per tokenizer. */
#include "harness.h"
#include "text/tokenizer.h"

#include <jansson.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void print_ids(const char *label, const int32_t *ids, size_t n)
{
    fprintf(stderr, "    %s [", label);
    for (size_t i = 0; i < n; i++) fprintf(stderr, "%s%d", i ? "," : "", ids[i]);
    fprintf(stderr, "]\n");
}

static bool ids_equal(const json_t *want, const cmf__tok_ids *got)
{
    if (json_array_size(want) != got->n) return false;
    for (size_t i = 0; i < got->n; i++)
        if (json_integer_value(json_array_get(want, i)) != got->ids[i]) return false;
    return true;
}

static void json_ids(const json_t *a, int32_t **ids, size_t *n)
{
    *n = json_array_size(a);
    *ids = malloc((*n ? *n : 1) * sizeof **ids);
    for (size_t i = 0; i < *n; i++) (*ids)[i] = (int32_t)json_integer_value(json_array_get(a, i));
}

static void check_tokenizer(const char *name, const json_t *entries)
{
    char rel[256];
    snprintf(rel, sizeof rel, "tokenizers/%s/tokenizer.json", name);
    size_t len;
    char *data = harness_read_file(harness_fixture_path(rel), &len);
    if (!data) {
        harness_fail(__FILE__, __LINE__, "%s: cannot read %s", name, rel);
        return;
    }
    cmf__tok *tok = NULL;
    double t0 = now_s();
    cmf_status st = cmf__tok_load(data, len, rel, &tok);
    double t1 = now_s();
    free(data);
    if (st) {
        harness_fail(__FILE__, __LINE__, "%s: load: %s", name, cmf_last_error());
        return;
    }
    size_t n = json_array_size(entries), pass_ids = 0, pass_sp = 0, pass_dec = 0;
    bool reported = false;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(entries, i);
        const char *text = json_string_value(json_object_get(e, "text"));
        size_t tl = json_string_length(json_object_get(e, "text"));
        const json_t *want = json_object_get(e, "ids"), *want_sp = json_object_get(e, "ids_special");
        const char *want_dec = json_string_value(json_object_get(e, "decoded"));
        cmf__tok_ids a = {0}, b = {0};
        CHECK_OK(cmf__tok_encode(tok, text, tl, false, &a));
        CHECK_OK(cmf__tok_encode(tok, text, tl, true, &b));
        int32_t *wids;
        size_t wn;
        json_ids(want, &wids, &wn);
        char *dec = NULL;
        size_t dl = 0;
        CHECK_OK(cmf__tok_decode(tok, wids, wn, false, &dec, &dl));
        bool ok1 = ids_equal(want, &a), ok2 = ids_equal(want_sp, &b);
        bool ok3 = dec && want_dec && dl == strlen(want_dec) && !memcmp(dec, want_dec, dl);
        pass_ids += ok1;
        pass_sp += ok2;
        pass_dec += ok3;
        if ((!ok1 || !ok2 || !ok3) && !reported) {
            reported = true;
            fprintf(stderr, "  %s: first mismatch at entry %zu, text \"%s\"\n", name, i, text);
            if (!ok1) {
                print_ids("want ids        ", wids, wn);
                print_ids("got  ids        ", a.ids, a.n);
            }
            if (!ok2) {
                int32_t *w2;
                size_t n2;
                json_ids(want_sp, &w2, &n2);
                print_ids("want ids_special", w2, n2);
                print_ids("got  ids_special", b.ids, b.n);
                free(w2);
            }
            if (!ok3) fprintf(stderr, "    want decoded \"%s\"\n    got  decoded \"%s\"\n", want_dec, dec ? dec : "");
        }
        free(wids);
        free(dec);
        cmf__tok_ids_free(&a);
        cmf__tok_ids_free(&b);
    }
    fprintf(stderr, "  %-12s ids %zu/%zu  ids_special %zu/%zu  decoded %zu/%zu  (load %.0f ms)\n", name, pass_ids, n,
            pass_sp, n, pass_dec, n, (t1 - t0) * 1e3);
    if (pass_ids != n || pass_sp != n || pass_dec != n)
        harness_fail(__FILE__, __LINE__, "%s: %zu/%zu/%zu of %zu entries match", name, pass_ids, pass_sp, pass_dec, n);
    cmf__tok_free(tok);
}

TEST(reference_encodings)
{
    if (!harness_fixtures()) SKIP("fixtures absent (set CMF_FIXTURES)");
    size_t len;
    char *data = harness_read_file(harness_fixture_path("tokenizers/reference_encodings.json"), &len);
    if (!data) SKIP("tokenizers/reference_encodings.json absent");
    json_error_t err;
    json_t *root = json_loadb(data, len, 0, &err);
    free(data);
    CHECK(root != NULL);
    if (!root) return;
    const char *only = getenv("CMF_TOK_ONLY");
    const char *name;
    json_t *entries;
    json_object_foreach(root, name, entries) {
        if (only && strcmp(only, name)) continue;
        check_tokenizer(name, entries);
    }
    json_decref(root);
}

int main(void)
{
    RUN(reference_encodings);
    return harness_done();
}
