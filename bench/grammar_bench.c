/* grammar_bench.c — constrained-decoding cost on real vocabularies (not a
 * test): per generated token, the time to compute the allowed-token mask
 * (mean and p99), for the any-JSON-object grammar and a 20-property JSON
 * Schema, on a tokenizer.json padded to a model's row count; and the
 * compile time of the 20-property schema. The token stream is what a
 * model writing a fixed 20-property document would emit: at each step the
 * longest allowed token that continues the document.
 *
 *   cmf-grammar-bench TOKENIZER.json N_VOCAB [REPEATS]
 */
#include "grammar/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const char *SCHEMA20 =
    "{\"type\": \"object\", \"properties\": {"
    "\"id\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 1000000},"
    "\"name\": {\"type\": \"string\", \"maxLength\": 40},"
    "\"email\": {\"type\": \"string\"},"
    "\"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 150},"
    "\"active\": {\"type\": \"boolean\"},"
    "\"score\": {\"type\": \"number\"},"
    "\"role\": {\"enum\": [\"admin\", \"user\", \"guest\"]},"
    "\"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"maxItems\": 8},"
    "\"created\": {\"type\": \"string\", \"format\": \"date-time\"},"
    "\"birthday\": {\"type\": \"string\", \"format\": \"date\"},"
    "\"uuid\": {\"type\": \"string\", \"format\": \"uuid\"},"
    "\"address\": {\"type\": \"object\", \"properties\": {\"street\": {\"type\": \"string\"}, "
    "\"city\": {\"type\": \"string\"}, \"zip\": {\"type\": \"string\", \"pattern\": \"^[0-9]{5}$\"}}, "
    "\"required\": [\"street\", \"city\"]},"
    "\"phone\": {\"type\": [\"string\", \"null\"]},"
    "\"notes\": {\"type\": \"string\"},"
    "\"level\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 10},"
    "\"ratio\": {\"type\": \"number\"},"
    "\"parent\": {\"anyOf\": [{\"type\": \"integer\"}, {\"type\": \"null\"}]},"
    "\"country\": {\"type\": \"string\", \"minLength\": 2, \"maxLength\": 2},"
    "\"verified\": {\"type\": \"boolean\"},"
    "\"meta\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}}"
    "}, \"required\": [\"id\", \"name\", \"email\", \"age\", \"active\", \"role\", \"created\", \"address\"]}";

static const char *DOC20 =
    "{\"id\": 48213, \"name\": \"Ada Lovelace\", \"email\": \"ada@example.org\", \"age\": 36, "
    "\"active\": true, \"score\": 97.25, \"role\": \"admin\", \"tags\": [\"math\", \"engines\", \"poetry\"], "
    "\"created\": \"2024-05-17T09:30:00Z\", \"birthday\": \"1815-12-10\", "
    "\"uuid\": \"123e4567-e89b-12d3-a456-426614174000\", "
    "\"address\": {\"street\": \"12 St James's Square\", \"city\": \"London\", \"zip\": \"10001\"}, "
    "\"phone\": null, \"notes\": \"Wrote the first published algorithm for a machine; \\\"notes\\\" run long.\", "
    "\"level\": 7, \"ratio\": 0.618, \"parent\": null, \"country\": \"GB\", \"verified\": false, "
    "\"meta\": {\"source\": \"archive\", \"lang\": \"en\"}}";

typedef struct run_stats { double mean, p99, max, first; size_t n; } run_stats;

/* Walks DOC20 through g; times every mask. cache: the per-state mask cache
 * a request keeps (as the public API does), by state key. */
static int walk(const cmf__gvocab *v, const cmf__gram *g, bool use_loops, run_stats *rs)
{
    cmf__gloops *loops = use_loops ? cmf__gvocab_loops(v) : NULL;
    cmf__gstate s = {0}, nx = {0};
    cmf__gwalk w = {0};
    int32_t nv = cmf__gvocab_n_vocab(v);
    uint32_t *bits = malloc(((size_t)nv + 31) / 32 * 4);
    double *t = malloc(4096 * sizeof *t);
    size_t n = 0, at = 0, len = strlen(DOC20);
    if (cmf__gstate_init(g, &s)) return -1;
    while (at < len && n < 4096) {
        double t0 = now_ms();
        if (cmf__gmask(v, g, loops, &s, &w, bits)) return -1;
        t[n++] = now_ms() - t0;
        /* the longest allowed token continuing the document */
        int32_t best = -1;
        size_t best_len = 0;
        for (int32_t id = 0; id < nv; id++) {
            if (!(bits[id >> 5] >> (id & 31) & 1)) continue;
            size_t l;
            const uint8_t *p = cmf__gvocab_bytes(v, id, &l);
            if (p && l > best_len && l <= len - at && !memcmp(p, DOC20 + at, l)) best = id, best_len = l;
        }
        if (best < 0) {
            fprintf(stderr, "no allowed token continues the document at offset %zu\n", at);
            return -1;
        }
        if (cmf__gvocab_allows(v, g, &s, best, &nx) != 1) return -1;
        cmf__gstate tmp = s;
        s = nx;
        nx = tmp;
        at += best_len;
    }
    rs->first = t[0];
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += t[i];
    rs->mean = sum / (double)n;
    qsort(t, n, sizeof *t, cmp_d);
    rs->p99 = t[(size_t)((double)(n - 1) * 0.99)];
    rs->max = t[n - 1];
    rs->n = n;
    free(t);
    free(bits);
    cmf__gwalk_free(&w);
    cmf__gstate_free(&s);
    cmf__gstate_free(&nx);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s TOKENIZER.json N_VOCAB [REPEATS]\n", argv[0]);
        return 2;
    }
    int32_t nv = atoi(argv[2]);
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    cmf__tok *tok = NULL;
    if (cmf__tok_load_path(argv[1], &tok)) {
        fprintf(stderr, "%s\n", cmf_last_error());
        return 1;
    }
    const char *eos_names[] = {"<|im_end|>", "<|eot_id|>", "<|endoftext|>", "</s>"};
    int32_t eos = -1;
    for (int i = 0; i < 4 && eos < 0; i++) eos = cmf__tok_lookup(tok, eos_names[i], strlen(eos_names[i]));
    double t0 = now_ms();
    cmf__gvocab *v = NULL;
    if (cmf__gvocab_new(tok, nv, &eos, eos >= 0, &v)) {
        fprintf(stderr, "%s\n", cmf_last_error());
        return 1;
    }
    printf("vocabulary %d ids: token table and trie %.1f ms (once per model)\n", nv, now_ms() - t0);
    /* compile time of the 20-property schema: schema -> GBNF -> rules */
    double best = 1e9;
    cmf__gram *g20 = NULL;
    for (int r = 0; r < 20; r++) {
        double c0 = now_ms();
        cmf__buf b = {0};
        cmf__gram *g = NULL;
        if (cmf__schema_to_gbnf(SCHEMA20, strlen(SCHEMA20), &b) || cmf__gram_parse((const char *)b.data, b.len, "s", &g)) {
            fprintf(stderr, "%s\n", cmf_last_error());
            return 1;
        }
        double c = now_ms() - c0;
        if (c < best) best = c;
        cmf__buf_free(&b);
        if (!g20) g20 = g;
        else cmf__gram_free(g);
    }
    printf("20-property schema: compile %.3f ms (best of 20; %zu rules)\n", best, g20->n_rules);
    const char *jo = cmf__gbnf_json_object();
    cmf__gram *gj = NULL;
    if (cmf__gram_parse(jo, strlen(jo), "json_object", &gj)) return 1;
    struct { const char *name; cmf__gram *g; } gs[2] = {{"json object", gj}, {"20-property schema", g20}};
    for (int k = 0; k < 2; k++) {
        for (int mode = 0; mode < 2; mode++) {
            run_stats acc = {0}, rs;
            if (mode == 1 && k == 0) {
                /* the vocabulary's class cache is filled on first use, once
                 * per model for every grammar: timed apart */
                if (walk(v, gs[k].g, true, &rs)) return 1;
                printf("first walk (fills the per-vocabulary class cache): its slowest mask %.1f ms\n", rs.max);
            }
            for (int r = 0; r < reps; r++) {
                if (walk(v, gs[k].g, mode == 1, &rs)) {
                    fprintf(stderr, "walk failed: %s\n", cmf_last_error());
                    return 1;
                }
                acc.mean += rs.mean / reps, acc.p99 += rs.p99 / reps, acc.first += rs.first / reps;
                if (rs.max > acc.max) acc.max = rs.max;
                acc.n = rs.n;
            }
            printf("%-20s %-10s %zu tokens: mask mean %.3f ms, p99 %.3f ms, max %.3f ms, first %.3f ms\n", gs[k].name,
                   mode ? "fast path" : "trie only", acc.n, acc.mean, acc.p99, acc.max, acc.first);
        }
    }
    cmf__gram_free(gj);
    cmf__gram_free(g20);
    cmf__gvocab_free(v);
    cmf__tok_free(tok);
    return 0;
}
