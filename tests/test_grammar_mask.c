/* test_grammar_mask.c — token masks over real vocabularies: the trie walk
 * equals checking every token one by one at many grammar states (a random
 * walk through JSON and other grammars) on every tokenizer in the
 * fixtures; special tokens are never allowed, eos only where the grammar
 * may end; characters split across byte tokens; a token running past the
 * end of the value is refused. */
#include "grammar/grammar.h"
#include "harness.h"

#include <stdlib.h>
#include <time.h>

static const char *TOKENIZERS[] = {"qwen3", "llama3", "llama2", "gemma3", "deepseek_v3", "gptoss", "gpt4o", "tiny384"};
static const char *EOS_NAMES[] = {"<|im_end|>", "<|eot_id|>", "<|endoftext|>", "</s>", "<eos>", "<｜end▁of▁sentence｜>", "<|return|>"};

static const char *JSON_GBNF =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)? ws\n"
    "ws     ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

static const char *OTHER_GBNF[] = {
    /* multi-byte classes: tokens must split characters correctly */
    "root ::= ([\\u00e0-\\u00ff] | [\\u4e00-\\u9fff] | [\\U0001F600-\\U0001F64F] | \" \")+ \".\"\n",
    /* a literal: tokens running past it are refused */
    "root ::= \"true\" | \"false\"\n",
    "root ::= (\"- \" [^\\n]+ \"\\n\")+\n",
    /* bounded runs: the chain of states along a class dies after the bound */
    "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]{0,12} \"\\\"\" ([a-z ]{2,5} | \"!\")\n",
    "root ::= [^x]{3} [^y]* \"x\"\n",
};

typedef struct rng { uint64_t s; } rng;
static uint32_t next_u32(rng *r)
{
    r->s ^= r->s << 13, r->s ^= r->s >> 7, r->s ^= r->s << 17;
    return (uint32_t)(r->s >> 11);
}

static cmf__tok *load_tok(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "tokenizers/%s", name);
    cmf__tok *tok = NULL;
    if (cmf__tok_load_path(harness_fixture_path(rel), &tok)) {
        harness_fail(__FILE__, __LINE__, "load %s: %s", name, cmf_last_error());
        return NULL;
    }
    return tok;
}

static int32_t find_eos(const cmf__tok *tok)
{
    for (size_t i = 0; i < sizeof EOS_NAMES / sizeof *EOS_NAMES; i++) {
        int32_t id = cmf__tok_lookup(tok, EOS_NAMES[i], strlen(EOS_NAMES[i]));
        if (id >= 0) return id;
    }
    return -1;
}

static size_t popcount_bits(const uint32_t *b, size_t n_words)
{
    size_t c = 0;
    for (size_t i = 0; i < n_words; i++) c += (size_t)__builtin_popcount(b[i]);
    return c;
}

/* A random walk of up to n_steps tokens through g; at every state the
 * trie mask must equal the brute-force one and agree with allows(). */
static void walk(const char *tname, const cmf__tok *tok, const cmf__gvocab *v, const cmf__gram *g, int32_t eos,
                 cmf__gloops *loops, int n_steps, uint64_t seed, double *ms_trie, size_t *n_masks)
{
    int32_t nv = cmf__gvocab_n_vocab(v);
    size_t nw = ((size_t)nv + 31) / 32;
    uint32_t *a = malloc(nw * 4), *b = malloc(nw * 4);
    int32_t *allowed = malloc((size_t)nv * sizeof *allowed);
    cmf__gstate s = {0}, nx = {0};
    cmf__gwalk w = {0};
    rng r = {seed};
    CHECK_OK(cmf__gstate_init(g, &s));
    for (int step = 0; step < n_steps && a && b && allowed; step++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK_OK(cmf__gmask(v, g, loops, &s, &w, a));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        *ms_trie += (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        (*n_masks)++;
        CHECK_OK(cmf__gvocab_mask_brute(v, g, &s, b));
        if (memcmp(a, b, nw * 4)) {
            for (int32_t t = 0; t < nv; t++) {
                int x = (int)(a[t >> 5] >> (t & 31) & 1), y = (int)(b[t >> 5] >> (t & 31) & 1);
                if (x != y) {
                    harness_fail(__FILE__, __LINE__, "%s step %d: token %d (%s): trie %d, brute force %d", tname, step,
                                 (int)t, cmf__tok_piece(tok, t) ? cmf__tok_piece(tok, t) : "?", x, y);
                    break;
                }
            }
            break;
        }
        size_t n_allowed = 0;
        for (int32_t t = 0; t < nv; t++) {
            bool in = a[t >> 5] >> (t & 31) & 1;
            if (in) allowed[n_allowed++] = t;
            /* special tokens other than eos: never */
            if (in && t != eos && cmf__tok_is_special(tok, t))
                harness_fail(__FILE__, __LINE__, "%s: special token %d allowed", tname, (int)t);
        }
        if (eos >= 0) CHECK_EQ_INT(a[eos >> 5] >> (eos & 31) & 1, cmf__gstate_can_end(&s));
        /* allows() agrees on a sample of tokens */
        for (int k = 0; k < 64; k++) {
            int32_t t = (int32_t)(next_u32(&r) % (uint32_t)nv);
            int want = (int)(a[t >> 5] >> (t & 31) & 1);
            CHECK_EQ_INT(cmf__gvocab_allows(v, g, &s, t, NULL), want);
        }
        if (!n_allowed) {
            harness_fail(__FILE__, __LINE__, "%s step %d: nothing allowed", tname, step);
            break;
        }
        /* prefer text over eos, so walks go deep */
        int32_t pick = allowed[next_u32(&r) % n_allowed];
        if (pick == eos && n_allowed > 1) pick = allowed[(next_u32(&r) % (n_allowed - 1) + 1) % n_allowed];
        if (pick == eos) break;
        CHECK_EQ_INT(cmf__gvocab_allows(v, g, &s, pick, &nx), 1);
        cmf__gstate t = s;
        s = nx;
        nx = t;
    }
    (void)popcount_bits;
    cmf__gwalk_free(&w);
    cmf__gstate_free(&s);
    cmf__gstate_free(&nx);
    free(a);
    free(b);
    free(allowed);
}

static cmf__gram *parse(const char *text)
{
    cmf__gram *g = NULL;
    if (cmf__gram_parse(text, strlen(text), "test.gbnf", &g))
        harness_fail(__FILE__, __LINE__, "parse: %s", cmf_last_error());
    return g;
}

TEST(trie_equals_brute_force)
{
    if (!harness_fixtures()) SKIP("no fixtures");
    cmf__gram *json = parse(JSON_GBNF);
    if (!json) return;
    for (size_t i = 0; i < sizeof TOKENIZERS / sizeof *TOKENIZERS; i++) {
        cmf__tok *tok = load_tok(TOKENIZERS[i]);
        if (!tok) continue;
        int32_t eos = find_eos(tok);
        CHECK(eos >= 0);
        int32_t nv = (int32_t)cmf__tok_vocab_size(tok) + 7; /* a padded row count, as models have */
        cmf__gvocab *v = NULL;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK_OK(cmf__gvocab_new(tok, nv, &eos, 1, &v));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (!v) {
            cmf__tok_free(tok);
            continue;
        }
        /* padded ids past the tokenizer are never allowed */
        size_t len;
        CHECK(cmf__gvocab_bytes(v, nv - 1, &len) == NULL);
        double ms = 0;
        size_t n = 0;
        cmf__gloops *loops = cmf__gvocab_loops(v);
        /* each step checks every token one by one: under harness_light, fewer steps of the same walks */
        const int light = harness_light(), json_walks = light ? 1 : 3, steps = light ? 3 : 8;
        for (uint64_t seed = 1; seed <= (uint64_t)json_walks; seed++)
            walk(TOKENIZERS[i], tok, v, json, eos, loops, light ? 6 : 14, seed * 7919 + i, &ms, &n);
        walk(TOKENIZERS[i], tok, v, json, eos, NULL, light ? 2 : 4, 5 + i, &ms, &n); /* the trie alone */
        for (size_t k = 0; k < sizeof OTHER_GBNF / sizeof *OTHER_GBNF; k++) {
            cmf__gram *g = parse(OTHER_GBNF[k]);
            cmf__gloops *gl = cmf__gvocab_loops(v);
            if (g) walk(TOKENIZERS[i], tok, v, g, eos, gl, steps, 17 + k, &ms, &n);
            cmf__gram_free(g);
        }
        printf("  %-12s %7d tokens: vocab %.0f ms, %zu masks, trie walk %.2f ms mean\n", TOKENIZERS[i], (int)nv,
               (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6, n, ms / (double)n);
        cmf__gvocab_free(v);
        cmf__tok_free(tok);
    }
    cmf__gram_free(json);
}

/* Allowed set at the state after `prefix`, by id. */
static bool allowed_after(const cmf__gvocab *v, const cmf__gram *g, const char *prefix, int32_t t)
{
    cmf__gstate s = {0}, n = {0};
    bool ok = !cmf__gstate_init(g, &s);
    for (const char *p = prefix; *p && ok; p++) {
        ok = cmf__gstate_byte(g, &s, (uint8_t)*p, &n) == 1;
        cmf__gstate t2 = s;
        s = n;
        n = t2;
    }
    int r = ok ? cmf__gvocab_allows(v, g, &s, t, NULL) : 0;
    cmf__gstate_free(&s);
    cmf__gstate_free(&n);
    return r == 1;
}

static int32_t id_of(const cmf__tok *tok, const char *piece)
{
    int32_t id = cmf__tok_lookup(tok, piece, strlen(piece));
    if (id < 0) harness_fail(__FILE__, __LINE__, "no token '%s'", piece);
    return id;
}

TEST(split_characters_and_overrun)
{
    if (!harness_fixtures()) SKIP("no fixtures");
    cmf__tok *q = load_tok("qwen3"), *l2 = load_tok("llama2");
    cmf__gram *g = parse("root ::= \"\\\"\" \"caf\\u00e9\" \"\\\"\"\n");
    cmf__gram *lit = parse("root ::= \"tru\"\n");
    if (!q || !l2 || !g || !lit) goto done;
    int32_t eq = id_of(q, "<|im_end|>"), el2 = id_of(l2, "</s>");
    cmf__gvocab *vq = NULL, *vl = NULL;
    CHECK_OK(cmf__gvocab_new(q, (int32_t)cmf__tok_vocab_size(q), &eq, 1, &vq));
    CHECK_OK(cmf__gvocab_new(l2, (int32_t)cmf__tok_vocab_size(l2), &el2, 1, &vl));
    if (vq && vl) {
        /* byte-level: "Ã" is the byte 0xC3, the first half of "é" */
        CHECK(allowed_after(vq, g, "\"caf", id_of(q, "Ã")));
        CHECK(!allowed_after(vq, g, "\"ca", id_of(q, "Ã")));
        /* byte fallback: <0xC3> then <0xA9> */
        CHECK(allowed_after(vl, g, "\"caf", id_of(l2, "<0xC3>")));
        CHECK(allowed_after(vl, g, "\"caf\xc3", id_of(l2, "<0xA9>")));
        CHECK(!allowed_after(vl, g, "\"caf\xc3", id_of(l2, "<0xA8>")));
        CHECK(!allowed_after(vl, g, "\"caf", id_of(l2, "<0xA9>")));
        /* a token completing the value and running past it */
        CHECK(allowed_after(vq, lit, "", id_of(q, "tr")));
        CHECK(!allowed_after(vq, lit, "", id_of(q, "true")));
        CHECK(!allowed_after(vq, lit, "", id_of(q, "Ġtr")));
        CHECK(allowed_after(vl, lit, "", id_of(l2, "tr")));
        CHECK(!allowed_after(vl, lit, "", id_of(l2, "true")));
        CHECK(!allowed_after(vl, lit, "", id_of(l2, "▁tr")));
        /* eos only at the end; a special token never */
        CHECK(!allowed_after(vq, lit, "tr", eq));
        CHECK(allowed_after(vq, lit, "tru", eq));
        cmf__gram *any = parse("root ::= [^x]*\n");
        if (any) CHECK(!allowed_after(vq, any, "", id_of(q, "<|im_start|>")));
        if (any) CHECK(allowed_after(vq, any, "", id_of(q, "<think>")) == !cmf__tok_is_special(q, id_of(q, "<think>")));
        cmf__gram_free(any);
    }
    cmf__gvocab_free(vq);
    cmf__gvocab_free(vl);
done:
    cmf__gram_free(g);
    cmf__gram_free(lit);
    cmf__tok_free(q);
    cmf__tok_free(l2);
}

int main(void)
{
    RUN(trie_equals_brute_force);
    RUN(split_characters_and_overrun);
    return harness_done();
}
