/* api_grammar.c — the public constrained-decoding API: grammars compiled
 * against a model's vocabulary (its token trie built once, under the
 * model's grammar lock, and shared), and per-output states with history
 * for rollback, a small cache of masks by state, and the logit hook. The
 * grammar engine itself is src/grammar/; this file only binds it to the
 * model. */
#include "engine/api.h"
#include "grammar/grammar.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MASK_CACHE 8 /* masks kept per state, by state key */

struct cmf_grammar {
    cmf_model *model;
    cmf__gram *g;
    const cmf__gvocab *v;
};

typedef struct mask_entry {
    cmf__buf key;
    uint32_t *bits;
    uint64_t used;
} mask_entry;

struct cmf_grammar_state {
    cmf_grammar *grammar;
    cmf__gstate cur;
    cmf__gstate *hist;   /* [n_hist] the state before each accepted token */
    size_t n_hist, cap_hist;
    cmf__gstate next;    /* scratch */
    cmf__gwalk walk;
    cmf__buf key;        /* scratch */
    mask_entry cache[MASK_CACHE];
    uint64_t clock;
};

static cmf_status vocab_of(cmf_model *model, const cmf__gvocab **out)
{
    *out = NULL;
    if (!model) return cmf__error(CMF_ERR_ARG, "grammar: model is NULL");
    if (!model->tok) return cmf__model_fail(model, cmf__error(CMF_ERR_ARG, "grammar: the model has no vocabulary"));
    cmf_status st = CMF_OK;
    pthread_mutex_lock(&model->grammar_mu);
    if (!model->gvocab)
        st = cmf__gvocab_new(model->tok, cmf_model_n_vocab(model), model->eos_ids, model->n_eos, &model->gvocab);
    *out = model->gvocab;
    pthread_mutex_unlock(&model->grammar_mu);
    return st ? cmf__model_fail(model, st) : CMF_OK;
}

static cmf_status compile(cmf_model *model, const char *text, size_t len, const char *what, cmf_grammar **out)
{
    if (!out) return cmf__error(CMF_ERR_ARG, "grammar: out is NULL");
    *out = NULL;
    const cmf__gvocab *v;
    cmf_status st = vocab_of(model, &v);
    if (st) return st;
    cmf_grammar *gr = calloc(1, sizeof *gr);
    if (!gr) return cmf__error(CMF_ERR_NOMEM, "grammar: out of memory");
    gr->model = model;
    gr->v = v;
    if ((st = cmf__gram_parse(text, len, what, &gr->g))) goto fail;
    *out = gr;
    return CMF_OK;
fail:
    cmf_grammar_free(gr);
    return cmf__model_fail(model, st);
}

cmf_status cmf_grammar_compile(cmf_model *model, const char *gbnf, size_t len, cmf_grammar **out)
{
    if (!gbnf) return cmf__error(CMF_ERR_ARG, "grammar: text is NULL");
    return compile(model, gbnf, len, "grammar", out);
}

cmf_status cmf_grammar_from_json_schema(cmf_model *model, const char *schema, size_t len, cmf_grammar **out)
{
    if (out) *out = NULL;
    if (!schema) return cmf__error(CMF_ERR_ARG, "json schema: text is NULL");
    cmf__buf b = {0};
    cmf_status st = cmf__schema_to_gbnf(schema, len, &b);
    if (!st) st = compile(model, (const char *)b.data, b.len, "json schema grammar", out);
    cmf__buf_free(&b);
    return st;
}

cmf_status cmf_grammar_json_object(cmf_model *model, cmf_grammar **out)
{
    const char *t = cmf__gbnf_json_object();
    return compile(model, t, strlen(t), "json object grammar", out);
}

void cmf_grammar_free(cmf_grammar *gr)
{
    if (!gr) return;
    cmf__gram_free(gr->g);
    free(gr);
}

cmf_status cmf_grammar_state_new(cmf_grammar *gr, cmf_grammar_state **out)
{
    if (!out) return cmf__error(CMF_ERR_ARG, "grammar state: out is NULL");
    *out = NULL;
    if (!gr) return cmf__error(CMF_ERR_ARG, "grammar state: grammar is NULL");
    cmf_grammar_state *s = calloc(1, sizeof *s);
    if (!s) return cmf__error(CMF_ERR_NOMEM, "grammar state: out of memory");
    s->grammar = gr;
    cmf_status st = cmf__gstate_init(gr->g, &s->cur);
    if (st) {
        cmf_grammar_state_free(s);
        return st;
    }
    *out = s;
    return CMF_OK;
}

void cmf_grammar_state_free(cmf_grammar_state *s)
{
    if (!s) return;
    cmf__gstate_free(&s->cur);
    cmf__gstate_free(&s->next);
    for (size_t i = 0; i < s->cap_hist; i++) cmf__gstate_free(&s->hist[i]); /* spares past n_hist too */
    free(s->hist);
    cmf__gwalk_free(&s->walk);
    cmf__buf_free(&s->key);
    for (int i = 0; i < MASK_CACHE; i++) {
        cmf__buf_free(&s->cache[i].key);
        free(s->cache[i].bits);
    }
    free(s);
}

cmf_grammar_state *cmf_grammar_state_copy(const cmf_grammar_state *src)
{
    if (!src) return NULL;
    cmf_grammar_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->grammar = src->grammar;
    bool ok = !cmf__gstate_copy(&s->cur, &src->cur);
    if (ok && src->n_hist) {
        s->hist = calloc(src->n_hist, sizeof *s->hist);
        ok = s->hist != NULL;
        if (ok) s->cap_hist = src->n_hist;
        for (size_t i = 0; ok && i < src->n_hist; i++, s->n_hist++) ok = !cmf__gstate_copy(&s->hist[i], &src->hist[i]);
    }
    if (!ok) {
        cmf_grammar_state_free(s);
        return NULL;
    }
    return s;
}

int cmf_grammar_state_allows(cmf_grammar_state *s, int32_t token)
{
    if (!s) return -1;
    return cmf__gvocab_allows(s->grammar->v, s->grammar->g, &s->cur, token, NULL);
}

/* The allowed set at the current state: a cached mask or a fresh one. */
static cmf_status current_bits(cmf_grammar_state *s, const uint32_t **bits)
{
    const cmf_grammar *gr = s->grammar;
    cmf_status st = cmf__gstate_key(&s->cur, &s->key);
    if (st) return st;
    mask_entry *victim = &s->cache[0];
    for (int i = 0; i < MASK_CACHE; i++) {
        mask_entry *e = &s->cache[i];
        if (e->bits && e->key.len == s->key.len && !memcmp(e->key.data, s->key.data, s->key.len)) {
            e->used = ++s->clock;
            *bits = e->bits;
            return CMF_OK;
        }
        if (!e->bits || e->used < victim->used) victim = e;
    }
    size_t words = ((size_t)cmf__gvocab_n_vocab(gr->v) + 31) / 32;
    if (!victim->bits && !(victim->bits = malloc(words * sizeof *victim->bits)))
        return cmf__error(CMF_ERR_NOMEM, "grammar: out of memory");
    victim->key.len = 0;
    if ((st = cmf__gmask(gr->v, gr->g, cmf__gvocab_loops(gr->v), &s->cur, &s->walk, victim->bits))) return st;
    if ((st = cmf__buf_append(&victim->key, s->key.data, s->key.len))) return st;
    victim->used = ++s->clock;
    *bits = victim->bits;
    return CMF_OK;
}

cmf_status cmf_grammar_state_mask(cmf_grammar_state *s, float *logits, int32_t n_vocab)
{
    if (!s || (!logits && n_vocab > 0)) return cmf__error(CMF_ERR_ARG, "grammar mask: NULL argument");
    const uint32_t *bits = NULL;
    cmf_status st = current_bits(s, &bits);
    if (st) return st;
    int32_t nv = cmf__gvocab_n_vocab(s->grammar->v);
    for (int32_t t = 0; t < n_vocab; t++)
        if (t >= nv || !(bits[t >> 5] >> (t & 31) & 1)) logits[t] = -INFINITY;
    return CMF_OK;
}

cmf_status cmf_grammar_state_accept(cmf_grammar_state *s, int32_t token)
{
    if (!s) return cmf__error(CMF_ERR_ARG, "grammar accept: state is NULL");
    const cmf_grammar *gr = s->grammar;
    int r = cmf__gvocab_allows(gr->v, gr->g, &s->cur, token, &s->next);
    if (r < 0) return CMF_ERR_NOMEM;
    if (!r) return cmf__error(CMF_ERR_ARG, "grammar: token %d is not allowed here", (int)token);
    if (s->n_hist == s->cap_hist) {
        size_t nc = s->cap_hist ? s->cap_hist * 2 : 64;
        cmf__gstate *h = realloc(s->hist, nc * sizeof *h);
        if (!h) return cmf__error(CMF_ERR_NOMEM, "grammar: out of memory");
        memset(h + s->cap_hist, 0, (nc - s->cap_hist) * sizeof *h);
        s->hist = h, s->cap_hist = nc;
    }
    /* the old state moves into the history, the new one becomes current */
    cmf__gstate old = s->cur;
    s->cur = s->next;
    s->next = s->hist[s->n_hist]; /* a spare from an earlier rollback, or empty */
    s->hist[s->n_hist++] = old;
    return CMF_OK;
}

cmf_status cmf_grammar_state_rollback(cmf_grammar_state *s, size_t n)
{
    if (!s) return cmf__error(CMF_ERR_ARG, "grammar rollback: state is NULL");
    if (n > s->n_hist)
        return cmf__error(CMF_ERR_ARG, "grammar rollback: %zu tokens asked, %zu accepted", n, s->n_hist);
    for (size_t i = 0; i < n; i++) {
        cmf__gstate t = s->cur;
        s->cur = s->hist[--s->n_hist];
        s->hist[s->n_hist] = t; /* kept as a spare buffer */
    }
    return CMF_OK;
}

size_t cmf_grammar_state_n_tokens(const cmf_grammar_state *s) { return s ? s->n_hist : 0; }

bool cmf_grammar_state_can_end(const cmf_grammar_state *s) { return s && cmf__gstate_can_end(&s->cur); }

static int hook_mask(void *user, float *logits, int32_t n_vocab)
{
    return cmf_grammar_state_mask(user, logits, n_vocab) ? -1 : 0;
}

static int hook_allows(void *user, int32_t token) { return cmf_grammar_state_allows(user, token); }

static int hook_accept(void *user, int32_t token) { return cmf_grammar_state_accept(user, token) ? -1 : 0; }

cmf_logit_hook cmf_grammar_state_hook(cmf_grammar_state *s)
{
    cmf_logit_hook h = {hook_mask, hook_allows, hook_accept, s};
    return h;
}
