/* test_text_tokenizer.c — unit tests per tokenizer component on small
 * hand-written tokenizer.json documents (expected values follow HF
 * `tokenizers` semantics and its documented examples), the streaming
 * detokenizer, and corrupt-input checks (status + message substring),
 * generated tokenizer.json files whose ids would size tables past the
 * document included. */
#include "harness.h"
#include "text/tokenizer.h"

#include <stdlib.h>
#include <sys/resource.h>

static char g_out[4096];

/* Loads json or fails the test; NULL on failure. */
static cmf__tok *load(const char *json)
{
    cmf__tok *t = NULL;
    cmf_status st = cmf__tok_load(json, strlen(json), "test.json", &t);
    if (st) harness_fail(__FILE__, __LINE__, "load: %s", cmf_last_error());
    return t;
}

/* Encodes and renders the ids as "1,2,3". */
static const char *enc(const cmf__tok *t, const char *text, bool special)
{
    cmf__tok_ids ids = {0};
    g_out[0] = 0;
    if (!t) return "(no tokenizer)";
    if (cmf__tok_encode(t, text, strlen(text), special, &ids)) return cmf_last_error();
    size_t o = 0;
    for (size_t i = 0; i < ids.n && o < sizeof g_out - 16; i++)
        o += (size_t)snprintf(g_out + o, sizeof g_out - o, "%s%d", i ? "," : "", ids.ids[i]);
    cmf__tok_ids_free(&ids);
    return g_out;
}

static const char *dec(const cmf__tok *t, const int32_t *ids, size_t n, bool skip)
{
    char *s = NULL;
    size_t len;
    g_out[0] = 0;
    if (!t) return "(no tokenizer)";
    if (cmf__tok_decode(t, ids, n, skip, &s, &len)) return cmf_last_error();
    snprintf(g_out, sizeof g_out, "%s", s);
    free(s);
    return g_out;
}

/* A WordLevel model over the given pieces (ids 0..), unk "[UNK]" = 0. */
static char *wordlevel_doc(const char *pieces, const char *extra)
{
    static char buf[8192];
    char vocab[4096] = "\"[UNK]\": 0";
    size_t o = strlen(vocab);
    int id = 1;
    const char *p = pieces;
    while (*p) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        o += (size_t)snprintf(vocab + o, sizeof vocab - o, ", \"%.*s\": %d", (int)l, p, id++);
        p += l + (e ? 1 : 0);
    }
    snprintf(buf, sizeof buf, "{\"model\": {\"type\": \"WordLevel\", \"vocab\": {%s}, \"unk_token\": \"[UNK]\"}%s%s}",
             vocab, *extra ? ", " : "", extra);
    return buf;
}

TEST(bpe_merges_and_ranks)
{
    /* Merges as strings and as pairs; rank decides, not position. */
    const char *j = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\":0,\"b\":1,\"c\":2,\"ab\":3,\"bc\":4,\"abc\":5},"
                    "\"merges\": [\"b c\", [\"a\", \"bc\"], \"a b\"]}}";
    cmf__tok *t = load(j);
    CHECK_EQ_STR(enc(t, "abc", false), "5"); /* b c first (rank 0), then a bc */
    CHECK_EQ_STR(enc(t, "ab", false), "3");
    CHECK_EQ_STR(enc(t, "cab", false), "2,3");
    CHECK_EQ_INT(cmf__tok_vocab_size(t), 6);
    CHECK_EQ_STR(cmf__tok_piece(t, 4), "bc");
    CHECK_EQ_INT(cmf__tok_lookup(t, "abc", 3), 5);
    CHECK_EQ_INT(cmf__tok_lookup(t, "zz", 2), -1);
    cmf__tok_free(t);
}

TEST(bpe_prefix_suffix_unk_fallback)
{
    /* continuing_subword_prefix "##" and end_of_word_suffix "</w>". */
    const char *j = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"h\":0,\"##i</w>\":1,\"hi</w>\":2,\"[UNK]\":3,\"##i\":4},"
                    "\"merges\": [\"h ##i</w>\"], \"continuing_subword_prefix\": \"##\", \"end_of_word_suffix\": \"</w>\","
                    "\"unk_token\": \"[UNK]\"}}";
    cmf__tok *t = load(j);
    CHECK_EQ_STR(enc(t, "hi", false), "2");
    cmf__tok_free(t);
    /* Unknown chars: fused into one unk with fuse_unk, separate without. */
    const char *f = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"<unk>\":0,\"a\":1}, \"merges\": [],"
                    "\"unk_token\": \"<unk>\", \"fuse_unk\": %s}}";
    char buf[512];
    snprintf(buf, sizeof buf, f, "true");
    t = load(buf);
    CHECK_EQ_STR(enc(t, "axya", false), "1,0,1");
    cmf__tok_free(t);
    snprintf(buf, sizeof buf, f, "false");
    t = load(buf);
    CHECK_EQ_STR(enc(t, "axya", false), "1,0,0,1");
    cmf__tok_free(t);
    /* byte_fallback: a char missing from the vocab becomes <0xXX> tokens. */
    t = load("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"<unk>\":0,\"a\":1,\"<0xC3>\":2,\"<0xA9>\":3}, \"merges\": [],"
             "\"unk_token\": \"<unk>\", \"byte_fallback\": true},"
             "\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}]}}");
    CHECK_EQ_STR(enc(t, "a\xC3\xA9z", false), "1,2,3,0");
    int32_t ids[] = {1, 2, 3, 1};
    CHECK_EQ_STR(dec(t, ids, 4, false), "a\xC3\xA9" "a");
    int32_t bad[] = {2, 1};
    CHECK_EQ_STR(dec(t, bad, 2, false), "\xEF\xBF\xBD" "a"); /* lone lead byte -> U+FFFD */
    cmf__tok_free(t);
}

TEST(bpe_ignore_merges)
{
    /* With ignore_merges a word found whole in the vocab is taken as is,
     * even when the merges would not build it. */
    const char *j = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\":0,\"b\":1,\"ab\":2,\"abb\":3}, \"merges\": [\"a b\"],"
                    "\"ignore_merges\": %s}}";
    char buf[512];
    snprintf(buf, sizeof buf, j, "true");
    cmf__tok *t = load(buf);
    CHECK_EQ_STR(enc(t, "abb", false), "3");
    cmf__tok_free(t);
    snprintf(buf, sizeof buf, j, "false");
    t = load(buf);
    CHECK_EQ_STR(enc(t, "abb", false), "2,1");
    cmf__tok_free(t);
}

TEST(unigram_viterbi)
{
    /* Best total log-prob wins: "ab"+"c" (-1 + -1) over "a"+"bc" (-1.5 + -1). */
    const char *j = "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], [\"a\", -1.5],"
                    "[\"b\", -2], [\"c\", -1], [\"ab\", -1], [\"bc\", -1], [\"<0x7A>\", -5]], \"byte_fallback\": false}}";
    cmf__tok *t = load(j);
    CHECK_EQ_STR(enc(t, "abc", false), "4,3");
    CHECK_EQ_STR(enc(t, "xyc", false), "0,3"); /* unknown run fused into one unk */
    cmf__tok_free(t);
    const char *k = "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], [\"a\", -1],"
                    "[\"<0x7A>\", -5]], \"byte_fallback\": true}}";
    t = load(k);
    CHECK_EQ_STR(enc(t, "az", false), "1,2"); /* z -> <0x7A> */
    CHECK_EQ_STR(enc(t, "aq", false), "1,0"); /* no <0x71>: unk */
    cmf__tok_free(t);
}

TEST(wordpiece_bert)
{
    const char *j =
        "{\"normalizer\": {\"type\": \"BertNormalizer\", \"lowercase\": true},"
        "\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},"
        "\"post_processor\": {\"type\": \"BertProcessing\", \"sep\": [\"[SEP]\", 3], \"cls\": [\"[CLS]\", 2]},"
        "\"decoder\": {\"type\": \"WordPiece\", \"prefix\": \"##\", \"cleanup\": true},"
        "\"added_tokens\": [{\"id\": 2, \"content\": \"[CLS]\", \"special\": true}, {\"id\": 3, \"content\": \"[SEP]\", \"special\": true}],"
        "\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"continuing_subword_prefix\": \"##\","
        "\"max_input_chars_per_word\": 100, \"vocab\": {\"[UNK]\": 0, \"[PAD]\": 1, \"[CLS]\": 2, \"[SEP]\": 3,"
        "\"un\": 4, \"##aff\": 5, \"##able\": 6, \",\": 7, \"hi\": 8, \"cafe\": 9}}}";
    cmf__tok *t = load(j);
    CHECK_EQ_STR(enc(t, "UnAffable, hi", false), "4,5,6,7,8");
    CHECK_EQ_STR(enc(t, "UnAffable, hi", true), "2,4,5,6,7,8,3");
    CHECK_EQ_STR(enc(t, "Caf\xC3\xA9", false), "9"); /* accents stripped with lowercase */
    CHECK_EQ_STR(enc(t, "xyz", false), "0");
    int32_t ids[] = {2, 4, 5, 6, 7, 8, 3};
    CHECK_EQ_STR(dec(t, ids, 7, true), "unaffable, hi");
    CHECK(cmf__tok_is_special(t, 2));
    CHECK(!cmf__tok_is_special(t, 4));
    cmf__tok_free(t);
}

TEST(normalizers)
{
    /* NFKC, Lowercase, Strip, Replace (regex), Prepend, StripAccents after NFD. */
    cmf__tok *t = load(wordlevel_doc("fi|\xE2\x96\x81" "abc|x_y",
        "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFKC\"}, {\"type\": \"Lowercase\"},"
        "{\"type\": \"Strip\", \"strip_left\": true, \"strip_right\": true},"
        "{\"type\": \"Replace\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"content\": \"_\"}]}"));
    CHECK_EQ_STR(enc(t, "\xEF\xAC\x81", false), "1"); /* U+FB01 ligature -> "fi" */
    CHECK_EQ_STR(enc(t, "  X \t Y ", false), "3");
    cmf__tok_free(t);
    t = load(wordlevel_doc("\xE2\x96\x81" "abc|cafe",
        "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFD\"}, {\"type\": \"StripAccents\"},"
        "{\"type\": \"Prepend\", \"prepend\": \"\xE2\x96\x81\"}]}"));
    CHECK_EQ_STR(enc(t, "abc", false), "1");
    CHECK_EQ_STR(enc(t, "", false), ""); /* Prepend leaves "" alone */
    cmf__tok_free(t);
    t = load(wordlevel_doc("cafe|i\xCC\x87", "\"normalizer\": {\"type\": \"Lowercase\"}"));
    CHECK_EQ_STR(enc(t, "\xC4\xB0", false), "2"); /* U+0130 lowercases to i + U+0307 */
    cmf__tok_free(t);
}

static void b64(const uint8_t *in, size_t n, char *out)
{
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
        out[o++] = al[v >> 18 & 63];
        out[o++] = al[v >> 12 & 63];
        out[o++] = i + 1 < n ? al[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? al[v & 63] : '=';
    }
    out[o] = 0;
}

TEST(precompiled_charsmap)
{
    /* A hand-built Darts-clone double array with two rules, "A" -> "a" and
     * "B" -> "bb": root offset 256; "A" at 256^0x41 with a leaf whose value
     * unit sits at offset 1, "B" at 256^0x42 with its value at offset 4.
     * Value units carry the top bit so no label ever matches them. */
    uint32_t units[327] = {0};
    units[0] = 256u << 10;
    units[256 ^ 0x41] = 0x41 | 0x100 | (1u << 10);
    units[(256 ^ 0x41) ^ 1] = 0x80000000u | 0;
    units[256 ^ 0x42] = 0x42 | 0x100 | (4u << 10);
    units[(256 ^ 0x42) ^ 4] = 0x80000000u | 2;
    const char pool[] = "a\0bb"; /* 5 bytes with the final NUL */
    size_t trie = sizeof units, n = 4 + trie + sizeof pool;
    uint8_t *blob = calloc(1, n);
    blob[0] = (uint8_t)trie, blob[1] = (uint8_t)(trie >> 8);
    for (size_t i = 0; i < 327; i++)
        for (int k = 0; k < 4; k++) blob[4 + 4 * i + (size_t)k] = (uint8_t)(units[i] >> (8 * k));
    memcpy(blob + 4 + trie, pool, sizeof pool);
    char *enc64 = malloc(n * 2 + 8);
    b64(blob, n, enc64);
    char *extra = malloc(strlen(enc64) + 128);
    sprintf(extra, "\"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"%s\"}", enc64);
    cmf__tok *t = load(wordlevel_doc("abbC|a", extra));
    CHECK_EQ_STR(enc(t, "ABC", false), "1");
    /* HF quirk kept: a short grapheme whose prefix matches a rule becomes
     * that rule's replacement ("A" + U+0301 -> "a"). */
    CHECK_EQ_STR(enc(t, "A\xCC\x81", false), "2");
    cmf__tok_free(t);
    /* Corrupt: trie size larger than the blob. */
    blob[1] = 0xFF;
    b64(blob, n, enc64);
    sprintf(extra, "\"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"%s\"}", enc64);
    cmf__tok *bad = NULL;
    const char *doc = wordlevel_doc("a", extra);
    CHECK_ERR(cmf__tok_load(doc, strlen(doc), "t.json", &bad), CMF_ERR_TOKENIZER, "normalizer.precompiled_charsmap: trie size");
    doc = wordlevel_doc("a", "\"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"@@@\"}");
    CHECK_ERR(cmf__tok_load(doc, strlen(doc), "t.json", &bad), CMF_ERR_TOKENIZER, "invalid base64");
    free(blob);
    free(enc64);
    free(extra);
}

TEST(split_behaviors)
{
    /* HF's documented example: "the-final--countdown" split on "-". */
    static const struct { const char *behavior, *want; } cases[] = {
        {"Removed", "1,2,3"},
        {"Isolated", "1,4,2,4,4,3"},
        {"MergedWithPrevious", "5,6,4,3"},
        {"MergedWithNext", "1,7,4,8"},
        {"Contiguous", "1,4,2,9,3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char extra[256];
        snprintf(extra, sizeof extra,
                 "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"String\": \"-\"}, \"behavior\": \"%s\", \"invert\": false}",
                 cases[i].behavior);
        cmf__tok *t = load(wordlevel_doc("the|final|countdown|-|the-|final-|-final|-countdown|--", extra));
        CHECK_EQ_STR(enc(t, "the-final--countdown", false), cases[i].want);
        cmf__tok_free(t);
    }
    /* invert: the matches are the pieces kept with Removed. */
    cmf__tok *t = load(wordlevel_doc("ab|cd", "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"[a-z]+\"},"
                                              " \"behavior\": \"Removed\", \"invert\": true}"));
    CHECK_EQ_STR(enc(t, "ab, cd!", false), "1,2");
    cmf__tok_free(t);
}

TEST(pretokenizers)
{
    cmf__tok *t = load(wordlevel_doc("\xE2\x96\x81Hey|\xE2\x96\x81" "friend|\xE2\x96\x81",
        "\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\xE2\x96\x81\", \"prepend_scheme\": \"always\", \"split\": true},"
        "\"decoder\": {\"type\": \"Metaspace\", \"replacement\": \"\xE2\x96\x81\", \"prepend_scheme\": \"always\", \"split\": true}"));
    CHECK_EQ_STR(enc(t, "Hey friend", false), "1,2");
    CHECK_EQ_STR(enc(t, "Hey  friend", false), "1,3,2");
    int32_t ids[] = {1, 3, 2};
    CHECK_EQ_STR(dec(t, ids, 3, false), "Hey  friend");
    cmf__tok_free(t);
    t = load(wordlevel_doc("Hey|,|friend|!",
        "\"pre_tokenizer\": {\"type\": \"Whitespace\"}"));
    CHECK_EQ_STR(enc(t, "Hey, friend!", false), "1,2,3,4");
    cmf__tok_free(t);
    t = load(wordlevel_doc("a|1|2|3|123",
        "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"WhitespaceSplit\"},"
        "{\"type\": \"Digits\", \"individual_digits\": true}]}"));
    CHECK_EQ_STR(enc(t, "a123 a", false), "1,2,3,4,1");
    cmf__tok_free(t);
    t = load(wordlevel_doc("a|1|2|3|123", "\"pre_tokenizer\": {\"type\": \"Digits\", \"individual_digits\": false}"));
    CHECK_EQ_STR(enc(t, "a123", false), "1,5");
    cmf__tok_free(t);
    t = load(wordlevel_doc("Hey|!|?!", "\"pre_tokenizer\": {\"type\": \"Punctuation\", \"behavior\": \"Contiguous\"}"));
    CHECK_EQ_STR(enc(t, "Hey?!", false), "1,3");
    cmf__tok_free(t);
}

TEST(added_tokens)
{
    const char *base = "\"pre_tokenizer\": {\"type\": \"Metaspace\", \"prepend_scheme\": \"first\"},"
                       "\"decoder\": {\"type\": \"Metaspace\", \"prepend_scheme\": \"first\"},"
                       "\"added_tokens\": [{\"id\": 9, \"content\": \"<mask>\", \"special\": true, \"lstrip\": %s},"
                       "{\"id\": 10, \"content\": \"ab\", \"special\": false, \"single_word\": true, \"normalized\": false}]";
    char extra[1024];
    snprintf(extra, sizeof extra, base, "false");
    cmf__tok *t = load(wordlevel_doc("\xE2\x96\x81" "a|\xE2\x96\x81|a|\xE2\x96\x81xab", extra));
    CHECK_EQ_STR(enc(t, "a <mask>", false), "1,2,9");
    /* prepend_scheme first: the piece after <mask> is not at the start. */
    CHECK_EQ_STR(enc(t, "<mask>a", false), "9,3");
    /* single_word: "ab" inside "xab" is not the added token. */
    CHECK_EQ_STR(enc(t, "xab ab", false), "4,2,10");
    int32_t ids[] = {1, 9, 3};
    CHECK_EQ_STR(dec(t, ids, 3, true), "aa");
    CHECK_EQ_INT(cmf__tok_lookup(t, "<mask>", 6), 9);
    CHECK_EQ_STR(cmf__tok_piece(t, 9), "<mask>");
    CHECK(cmf__tok_is_added(t, 10) && !cmf__tok_is_special(t, 10));
    CHECK_EQ_INT(cmf__tok_vocab_size(t), 11);
    cmf__tok_free(t);
    snprintf(extra, sizeof extra, base, "true");
    t = load(wordlevel_doc("\xE2\x96\x81" "a|\xE2\x96\x81|a", extra));
    CHECK_EQ_STR(enc(t, "a <mask>", false), "1,9");
    cmf__tok_free(t);
}

TEST(post_processors)
{
    cmf__tok *t = load(wordlevel_doc("<s>|</s>|x",
        "\"pre_tokenizer\": {\"type\": \"WhitespaceSplit\"},"
        "\"post_processor\": {\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\", \"trim_offsets\": false},"
        "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}},"
        "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 0}}],"
        "\"pair\": [], \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]},"
        "\"</s>\": {\"id\": \"</s>\", \"ids\": [2], \"tokens\": [\"</s>\"]}}}]}"));
    CHECK_EQ_STR(enc(t, "x x", false), "3,3");
    CHECK_EQ_STR(enc(t, "x x", true), "1,3,3,2");
    CHECK_EQ_STR(enc(t, "", true), "1,2");
    cmf__tok_free(t);
    t = load(wordlevel_doc("<s>|</s>|x", "\"post_processor\": {\"type\": \"RobertaProcessing\", \"sep\": [\"</s>\", 2],"
                                         " \"cls\": [\"<s>\", 1], \"trim_offsets\": true, \"add_prefix_space\": true}"));
    CHECK_EQ_STR(enc(t, "x", true), "1,3,2");
    cmf__tok_free(t);
}

TEST(decoders)
{
    cmf__tok *t = load(wordlevel_doc("\xE2\x96\x81Hi|<0xE2>|<0x82>|<0xAC>|!!",
        "\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": \"\xE2\x96\x81\"},"
        "\"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"},"
        "{\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]}"));
    int32_t ids[] = {1, 2, 3, 4, 5};
    CHECK_EQ_STR(dec(t, ids, 5, false), "Hi\xE2\x82\xAC!!");
    int32_t cut[] = {2, 3, 5};
    CHECK_EQ_STR(dec(t, cut, 3, false), "\xEF\xBF\xBD\xEF\xBF\xBD!!"); /* one U+FFFD per byte */
    int32_t unknown[] = {1, 999};
    CHECK_EQ_STR(dec(t, unknown, 2, false), "Hi"); /* unknown ids dropped, as HF */
    cmf__tok_free(t);
    /* No decoder: tokens joined by spaces. */
    t = load(wordlevel_doc("a|b", ""));
    int32_t ab[] = {1, 2};
    CHECK_EQ_STR(dec(t, ab, 2, false), "a b");
    cmf__tok_free(t);
    /* BPEDecoder: the suffix becomes a space, except on the last token. */
    t = load(wordlevel_doc("hel|lo</w>|you</w>", "\"decoder\": {\"type\": \"BPEDecoder\", \"suffix\": \"</w>\"}"));
    int32_t h[] = {1, 2, 3};
    CHECK_EQ_STR(dec(t, h, 3, false), "hello you");
    cmf__tok_free(t);
}

TEST(bytelevel_invalid_utf8)
{
    /* A minimal byte-level BPE: the whole byte alphabet, no merges. Invalid
     * input bytes become U+FFFD before encoding (HF only sees strings). */
    char doc[16384];
    size_t o = (size_t)snprintf(doc, sizeof doc, "{\"model\": {\"type\": \"BPE\", \"merges\": [], \"vocab\": {");
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        static int next = 256;
        int cp = printable ? b : next++;
        o += (size_t)snprintf(doc + o, sizeof doc - o, "%s\"\\u%04x\": %d", b ? "," : "", cp, b);
    }
    snprintf(doc + o, sizeof doc - o, "}}, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false},"
                                      "\"decoder\": {\"type\": \"ByteLevel\"}}");
    /* Escape the JSON-special ones that \\u escapes already cover: all fine. */
    cmf__tok *t = load(doc);
    CHECK_EQ_STR(enc(t, "a b", false), "97,32,98");
    CHECK_EQ_STR(enc(t, "\xFF" "a", false), "239,191,189,97");
    int32_t ids[] = {104, 105, 32, 240, 159, 152};
    CHECK_EQ_STR(dec(t, ids, 6, false), "hi \xEF\xBF\xBD"); /* cut emoji -> U+FFFD */
    cmf__tok_free(t);
}

/* Stream-decodes ids one by one; checks each chunk is valid UTF-8 and the
 * concatenation equals the full decode. */
static void check_stream(const cmf__tok *t, const int32_t *ids, size_t n, bool skip)
{
    cmf__tok_stream *s = NULL;
    CHECK_OK(cmf__tok_stream_new(t, skip, &s));
    char acc[4096] = "";
    size_t al = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *txt;
        size_t tl;
        if (i < n) CHECK_OK(cmf__tok_stream_push(s, ids[i], &txt, &tl));
        else CHECK_OK(cmf__tok_stream_flush(s, &txt, &tl));
        /* A chunk never ends inside a UTF-8 sequence. */
        if (tl) {
            size_t k = tl - 1, back = 0;
            while (k > 0 && ((uint8_t)txt[k] & 0xC0) == 0x80) k--, back++;
            uint8_t lead = (uint8_t)txt[k];
            size_t need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
            CHECK_EQ_INT(back, need);
        }
        if (al + tl < sizeof acc) memcpy(acc + al, txt, tl), al += tl;
    }
    acc[al] = 0;
    char *full = NULL;
    size_t fl;
    CHECK_OK(cmf__tok_decode(t, ids, n, skip, &full, &fl));
    CHECK_EQ_STR(acc, full);
    free(full);
    cmf__tok_stream_free(s);
}

TEST(stream_fixtures)
{
    if (!harness_fixtures()) SKIP("fixtures absent (set CMF_FIXTURES)");
    static const char *names[] = {"qwen3", "llama2", "gemma3"};
    static const char *text = "smile \xF0\x9F\x98\x8A heart \xE2\x9D\xA4\xEF\xB8\x8F caf\xC3\xA9 <|endoftext|> \xE4\xBB\x8A\xE6\x97\xA5 end";
    for (size_t i = 0; i < 3; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "tokenizers/%s/tokenizer.json", names[i]);
        const char *path = harness_fixture_path(rel);
        cmf__tok *t = NULL;
        if (cmf__tok_load_path(path, &t)) {
            harness_fail(__FILE__, __LINE__, "%s: %s", names[i], cmf_last_error());
            continue;
        }
        cmf__tok_ids ids = {0};
        CHECK_OK(cmf__tok_encode(t, text, strlen(text), true, &ids));
        check_stream(t, ids.ids, ids.n, false);
        check_stream(t, ids.ids, ids.n, true);
        cmf__tok_ids_free(&ids);
        cmf__tok_free(t);
    }
}

TEST(corrupt_inputs)
{
    cmf__tok *t = NULL;
    static const struct { const char *doc; cmf_status st; const char *msg; } cases[] = {
        {"{\"model\": ", CMF_ERR_PARSE, "invalid JSON"},
        {"[1, 2]", CMF_ERR_TOKENIZER, "expected an object"},
        {"{\"normalizer\": null}", CMF_ERR_TOKENIZER, "model: missing"},
        {"{\"model\": {\"type\": \"Magic\", \"vocab\": {}}}", CMF_ERR_TOKENIZER, "model.type: unknown 'Magic'"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
         " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Whitespace\"}, {\"type\": \"Foo\"}]}}",
         CMF_ERR_TOKENIZER, "pre_tokenizer.pretokenizers[1].type: unknown 'Foo'"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
         " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, {\"type\": \"Bar\"}]}}",
         CMF_ERR_TOKENIZER, "normalizer.normalizers[1].type: unknown 'Bar'"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"decoder\": {\"type\": \"CTCX\"}}",
         CMF_ERR_TOKENIZER, "decoder.type: unknown 'CTCX'"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"post_processor\": {\"type\": \"Baz\"}}",
         CMF_ERR_TOKENIZER, "post_processor.type: unknown 'Baz'"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}",
         CMF_ERR_TOKENIZER, "model.merges[0]: merged token 'ab' not in vocab"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a c\"]}}",
         CMF_ERR_TOKENIZER, "model.merges[0]: token 'c' not in vocab"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"ac\"]}}",
         CMF_ERR_TOKENIZER, "has no space"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"x\"}, \"merges\": []}}",
         CMF_ERR_PARSE, "expected a number"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}, \"merges\": []}}",
         CMF_ERR_TOKENIZER, "id -3 out of range"},
        {"{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\"]]}}", CMF_ERR_PARSE, "expected [piece, score]"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
         " \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, \"behavior\": \"Isolated\"}}",
         CMF_ERR_TOKENIZER, "pre_tokenizer.pattern: regex /(/"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
         " \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, \"behavior\": \"Sideways\"}}",
         CMF_ERR_TOKENIZER, "pre_tokenizer.behavior: unknown 'Sideways'"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"added_tokens\": [{\"id\": 1}]}",
         CMF_ERR_TOKENIZER, "added_tokens[0].content"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"added_tokens\": [{\"id\": -1, \"content\": \"x\"}]}",
         CMF_ERR_TOKENIZER, "added_tokens[0].id"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
         " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\"}}], \"special_tokens\": {}}}",
         CMF_ERR_TOKENIZER, "special token '<s>' missing"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
         " \"decoder\": {\"type\": \"Strip\", \"content\": \"ab\", \"start\": 1}}",
         CMF_ERR_TOKENIZER, "decoder.content: expected exactly one character"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [], \"byte_fallback\": 3}}",
         CMF_ERR_TOKENIZER, "model.byte_fallback: expected a boolean"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        t = NULL;
        CHECK_ERR(cmf__tok_load(cases[i].doc, strlen(cases[i].doc), "t.json", &t), cases[i].st, cases[i].msg);
        CHECK(t == NULL);
    }
    CHECK_ERR(cmf__tok_load_path("/nonexistent-dir/tokenizer.json", &t), CMF_ERR_IO, "nonexistent");
}

/* A generated tokenizer.json: a BPE vocab of n pieces "t0".."t{n-1}" with
 * ids 0..n-1, then the piece "big" with id `big_id` (< 0: none), added
 * tokens as `added` (a JSON array) and `post` (a post_processor or ""). */
static char *id_doc(int n, long long big_id, const char *added, const char *post)
{
    size_t cap = (size_t)n * 24 + 1024 + strlen(added) + strlen(post);
    char *d = malloc(cap);
    if (!d) return NULL;
    size_t o = (size_t)snprintf(d, cap, "{\"model\": {\"type\": \"BPE\", \"merges\": [], \"vocab\": {");
    for (int i = 0; i < n; i++) o += (size_t)snprintf(d + o, cap - o, "%s\"t%d\": %d", i ? ", " : "", i, i);
    if (big_id >= 0) o += (size_t)snprintf(d + o, cap - o, ", \"big\": %lld", big_id);
    snprintf(d + o, cap - o, "}}, \"added_tokens\": %s%s%s}", added, *post ? ", \"post_processor\": " : "", post);
    return d;
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* One id of 2147483646 in a few kilobytes of tokenizer.json used to size
 * the per-id tables by it (gigabytes). Ids are checked against the entries
 * the document holds before any table grows: twice the entries plus 65536,
 * never 2^24 or more; the error names the field and the id. */
TEST(ids_bounded_by_the_document)
{
    const char *dir = harness_tmpdir();
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    long rss0 = peak_rss_kb();
    static const struct { long long big; const char *added, *post, *msg; } bad[] = {
        {2147483646, "[]", "", "model.vocab (byte "},
        {-1, "[{\"id\": 2147483646, \"content\": \"<x>\"}]", "", "added_tokens[0].id: id 2147483646 out of range"},
        {2 * 400 + 65536, "[]", "", "id 66336 out of range"},
        {-1, "[]", "{\"type\": \"BertProcessing\", \"cls\": [\"t0\", 0], \"sep\": [\"t1\", 5000]}",
         "post_processor: token id 5000 is outside the vocabulary (ids 0..299)"},
        {-1, "[]", "{\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\"}, "
                   "{\"type\": \"RobertaProcessing\", \"cls\": [\"t0\", 0], \"sep\": [\"x\", 300]}]}",
         "post_processor.processors[1]: token id 300 is outside"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *doc = id_doc(300, bad[i].big, bad[i].added, bad[i].post);
        CHECK(doc != NULL);
        if (!doc) return;
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL);
        if (!f) { free(doc); return; }
        fputs(doc, f);
        fclose(f);
        cmf__tok *t = NULL;
        CHECK_ERR(cmf__tok_load_path(path, &t), CMF_ERR_TOKENIZER, bad[i].msg);
        CHECK_CONTAINS(cmf_last_error(), path);
        CHECK(t == NULL);
        /* the same bytes from memory: the same verdict, named by `what` */
        CHECK_ERR(cmf__tok_load(doc, strlen(doc), "mem.json", &t), CMF_ERR_TOKENIZER, "out");
        free(doc);
    }
    CHECK_CONTAINS(cmf_last_error(), "mem.json");
    /* refusing cost no table: the peak grew by far less than one 2^31-entry one */
    long grown_mb = (peak_rss_kb() - rss0) / 1024;
    CHECK(grown_mb < 64);
    /* gaps within the bound still load: the id space is the largest id + 1 */
    char *doc = id_doc(300, 65536, "[{\"id\": 66000, \"content\": \"<x>\"}]", "");
    cmf__tok *t = load(doc);
    CHECK_EQ_INT(cmf__tok_vocab_size(t), 66001);
    CHECK_EQ_STR(cmf__tok_piece(t, 65536), "big");
    CHECK(cmf__tok_piece(t, 500) == NULL);
    CHECK_EQ_STR(enc(t, "<x>", false), "66000");
    cmf__tok_free(t);
    free(doc);
}

int main(void)
{
    RUN(bpe_merges_and_ranks);
    RUN(bpe_prefix_suffix_unk_fallback);
    RUN(bpe_ignore_merges);
    RUN(unigram_viterbi);
    RUN(wordpiece_bert);
    RUN(normalizers);
    RUN(precompiled_charsmap);
    RUN(split_behaviors);
    RUN(pretokenizers);
    RUN(added_tokens);
    RUN(post_processors);
    RUN(decoders);
    RUN(bytelevel_invalid_utf8);
    RUN(stream_fixtures);
    RUN(corrupt_inputs);
    RUN(ids_bounded_by_the_document);
    return harness_done();
}
