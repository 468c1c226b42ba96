/* fuzz_text_tokenizer.c — random bytes through a byte-level tokenizer:
 * decode(encode(x)) must equal x with invalid UTF-8 replaced by U+FFFD, and
 * the streaming detokenizer must produce the same text. Uses tiny384 from
 * the fixtures (CMF_FIXTURES) when present, else a small byte-level BPE
 * built here. Inputs starting with '{' are also tried as tokenizer.json. */
#include "text/tokenizer.h"
#include "text/unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cmf__tok *g_tok;

/* A byte-level BPE: the 256-symbol alphabet, a few merges, ByteLevel
 * pre-tokenizer (GPT-2 regex) and decoder, one special token. */
static char *builtin_json(void)
{
    size_t cap = 32768, o = 0;
    char *d = malloc(cap);
    if (!d) return NULL;
    o += (size_t)snprintf(d + o, cap - o, "{\"added_tokens\": [{\"id\": 262, \"content\": \"<|end|>\", \"special\": true,"
                                          " \"normalized\": false}], \"model\": {\"type\": \"BPE\", \"vocab\": {");
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        int cp = printable ? b : next++;
        o += (size_t)snprintf(d + o, cap - o, "%s\"\\u%04x\": %d", b ? "," : "", cp, b);
    }
    /* U+0120 is the byte-level space. */
    o += (size_t)snprintf(d + o, cap - o, ", \"\\u0120t\": 256, \"he\": 257, \"\\u0120the\": 258, \"in\": 259,"
                                          " \"\\u0120a\": 260, \"er\": 261}, \"merges\": [\"\\u0120 t\", \"h e\","
                                          " [\"\\u0120t\", \"he\"], \"i n\", \"\\u0120 a\", \"e r\"]},"
                                          " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false,"
                                          " \"use_regex\": true}, \"decoder\": {\"type\": \"ByteLevel\"}}");
    return d;
}

static void init(void)
{
    const char *fix = getenv("CMF_FIXTURES");
    if (fix) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tokenizers/tiny384/tokenizer.json", fix);
        if (cmf__tok_load_path(path, &g_tok) == CMF_OK) return;
    }
    char *j = builtin_json();
    if (!j || cmf__tok_load(j, strlen(j), "builtin", &g_tok) != CMF_OK) {
        fprintf(stderr, "fuzz_text_tokenizer: cannot load a tokenizer: %s\n", cmf_last_error());
        abort();
    }
    free(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_tok) init();
    const char *text = (const char *)data;
    cmf__tok_ids ids = {0};
    if (cmf__tok_encode(g_tok, text, size, false, &ids) != CMF_OK) abort();
    char *out = NULL;
    size_t out_len = 0;
    if (cmf__tok_decode(g_tok, ids.ids, ids.n, false, &out, &out_len) != CMF_OK) abort();
    cmf__buf want = {0};
    if (cmf__utf8_lossy(text ? text : "", size, &want) != CMF_OK) abort();
    if (out_len != want.len || (out_len && memcmp(out, want.data, out_len) != 0)) {
        fprintf(stderr, "round trip mismatch: %zu bytes in, %zu expected, %zu out\n", size, want.len, out_len);
        abort();
    }
    /* Streaming gives the same text. */
    cmf__tok_stream *s = NULL;
    cmf__buf acc = {0};
    if (cmf__tok_stream_new(g_tok, false, &s) != CMF_OK) abort();
    for (size_t i = 0; i <= ids.n; i++) {
        const char *t;
        size_t tl;
        cmf_status st = i < ids.n ? cmf__tok_stream_push(s, ids.ids[i], &t, &tl) : cmf__tok_stream_flush(s, &t, &tl);
        if (st != CMF_OK || cmf__buf_append(&acc, t, tl) != CMF_OK) abort();
    }
    if (acc.len != out_len || (out_len && memcmp(acc.data, out, out_len) != 0)) {
        fprintf(stderr, "stream mismatch\n");
        abort();
    }
    cmf__tok_stream_free(s);
    cmf__buf_free(&acc);
    cmf__buf_free(&want);
    free(out);
    cmf__tok_ids_free(&ids);
    /* The loader on arbitrary documents: must fail cleanly or work. */
    if (size && data[0] == '{') {
        cmf__tok *t = NULL;
        if (cmf__tok_load(text, size, "fuzz.json", &t) == CMF_OK) {
            cmf__tok_ids x = {0};
            (void)cmf__tok_encode(t, "Hello, world! 123", 17, true, &x);
            char *y = NULL;
            size_t yl;
            (void)cmf__tok_decode(t, x.ids, x.n, false, &y, &yl);
            free(y);
            cmf__tok_ids_free(&x);
            cmf__tok_free(t);
        }
    }
    return 0;
}
