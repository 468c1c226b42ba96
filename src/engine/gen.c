/* gen.c — one sequence's generation step (gen.h): sample (through the
 * request's logit hook), eos, text with stop-string hold-back, the token
 * callback, the length and context limits. The order of the checks is the
 * contract cmf_session_generate has always had: cancel and max_tokens
 * before sampling, eos before the token counts, stop strings and the
 * callback after its text, then max_tokens and the context. */
#include "engine/gen.h"
#include "engine/api.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void free_stops(char **stop, size_t n)
{
    for (size_t i = 0; stop && i < n; i++) free(stop[i]);
    free(stop);
}

static cmf_status check_sampling(const cmf_sampling_params *s)
{
    if (!isfinite(s->temperature)) return cmf__error(CMF_ERR_ARG, "sampling: temperature %g is not finite", (double)s->temperature);
    if (s->top_k < 0) return cmf__error(CMF_ERR_ARG, "sampling: top_k %d is negative", s->top_k);
    if (!(s->top_p >= 0 && s->top_p <= 1)) return cmf__error(CMF_ERR_ARG, "sampling: top_p %g outside [0, 1]", (double)s->top_p);
    if (!(s->min_p >= 0 && s->min_p <= 1)) return cmf__error(CMF_ERR_ARG, "sampling: min_p %g outside [0, 1]", (double)s->min_p);
    if (!(s->repeat_penalty > 0) || !isfinite(s->repeat_penalty))
        return cmf__error(CMF_ERR_ARG, "sampling: repeat_penalty %g (expected a finite value > 0)", (double)s->repeat_penalty);
    if (!isfinite(s->presence_penalty) || !isfinite(s->frequency_penalty))
        return cmf__error(CMF_ERR_ARG, "sampling: presence / frequency penalty not finite");
    if (s->repeat_last_n < -1) return cmf__error(CMF_ERR_ARG, "sampling: repeat_last_n %d (expected >= -1)", s->repeat_last_n);
    return CMF_OK;
}

cmf_status cmf__gen_init(cmf__gen *g, const cmf_model *model, const cmf_generate_params *p)
{
    memset(g, 0, sizeof *g);
    const int64_t V = model->m->arch.vocab_size;
    if (p->n_logprobs < 0 || p->n_logprobs > 20)
        return cmf__error(CMF_ERR_ARG, "generate: n_logprobs %d outside 0..20", p->n_logprobs);
    if (p->n_stop && !p->stop) return cmf__error(CMF_ERR_ARG, "generate: %zu stop strings but stop is NULL", p->n_stop);
    cmf_status st = check_sampling(&p->sampling);
    if (st) return st;
    g->model = model;
    g->p = *p;
    if (p->n_stop) {
        if (!(g->stop = calloc(p->n_stop, sizeof *g->stop))) return cmf__error(CMF_ERR_NOMEM, "generate: out of memory");
        for (size_t i = 0; i < p->n_stop; i++) {
            if (!p->stop[i] || !(g->stop[i] = strdup(p->stop[i]))) {
                free_stops(g->stop, p->n_stop);
                g->stop = NULL;
                return p->stop[i] ? cmf__error(CMF_ERR_NOMEM, "generate: out of memory")
                                  : cmf__error(CMF_ERR_ARG, "generate: stop string %zu is NULL", i);
            }
        }
        g->p.stop = (const char *const *)g->stop;
    }
    if ((st = cmf__sampler_init(&g->smp, &p->sampling, V))) goto fail;
    if (model->tok && (st = cmf__tok_stream_new(model->tok, true, &g->ts))) goto fail;
    if ((p->hook.mask || p->hook.allows) && !(g->masked = malloc((size_t)V * sizeof(float)))) {
        st = cmf__error(CMF_ERR_NOMEM, "generate: out of memory for the masked logits");
        goto fail;
    }
    return CMF_OK;
fail:
    cmf__gen_free(g);
    return st;
}

void cmf__gen_free(cmf__gen *g)
{
    free_stops(g->stop, g->p.n_stop);
    cmf__sampler_free(&g->smp);
    cmf__tok_stream_free(g->ts);
    free(g->pend);
    free(g->masked);
    memset(g, 0, sizeof *g);
}

static bool pend_add(cmf__gen *g, const char *s, size_t n)
{
    if (g->pend_len + n + 1 > g->pend_cap) {
        size_t c = (g->pend_len + n + 1) * 2;
        char *b = realloc(g->pend, c);
        if (!b) return false;
        g->pend = b;
        g->pend_cap = c;
    }
    memcpy(g->pend + g->pend_len, s, n);
    g->pend_len += n;
    g->pend[g->pend_len] = 0;
    return true;
}

static void pend_drop(cmf__gen *g, size_t n)
{
    memmove(g->pend, g->pend + n, g->pend_len - n);
    g->pend_len -= n;
    g->pend[g->pend_len] = 0;
}

/* Bytes of pending text safe to emit: all, minus the longest suffix that
 * could still grow into a stop string. *stop_at >= 0 when a stop matched. */
static size_t safe_len(const cmf__gen *g, long *stop_at)
{
    *stop_at = -1;
    size_t safe = g->pend_len;
    for (size_t i = 0; i < g->p.n_stop; i++) {
        const char *stop = g->p.stop[i];
        size_t sl = strlen(stop);
        if (!sl) continue;
        const char *hit = sl <= g->pend_len ? memmem(g->pend, g->pend_len, stop, sl) : NULL;
        if (hit && (*stop_at < 0 || hit - g->pend < *stop_at)) *stop_at = hit - g->pend;
        for (size_t k = sl - 1; k > 0; k--) {
            if (k > g->pend_len) continue;
            if (!memcmp(g->pend + g->pend_len - k, stop, k)) {
                if (g->pend_len - k < safe) safe = g->pend_len - k;
                break;
            }
        }
    }
    if (*stop_at >= 0) safe = (size_t)*stop_at;
    return safe;
}

static int emit(const cmf__gen *g, int32_t id, const char *text, size_t len, float lp, int n_top)
{
    if (!g->p.on_token) return 0;
    cmf_token_info ti = {id, text, len, lp, n_top, n_top ? g->top_ids : NULL, n_top ? g->top_lp : NULL};
    return g->p.on_token(g->p.user, &ti);
}

/* Whether the sampler truncates nothing, so that a token drawn from the
 * whole row and kept when allowed has the masked row's distribution. */
static bool truncates_nothing(const cmf_sampling_params *s, int64_t V)
{
    if (!(s->temperature > 0)) return true;
    return (s->top_k <= 0 || s->top_k >= V) && !(s->top_p > 0 && s->top_p < 1) && !(s->min_p > 0);
}

/* The next token, through the hook: sample-then-check where that keeps
 * the distribution, else the masked row. */
static cmf_status pick(cmf__gen *g, const float *logits, const int32_t *hist, int64_t n_hist, int32_t *id)
{
    const cmf_logit_hook *h = &g->p.hook;
    const int64_t V = g->smp.n_vocab;
    if (!h->mask && !h->allows) {
        *id = cmf__sampler_sample(&g->smp, logits, hist, n_hist);
        return CMF_OK;
    }
    if (h->allows && truncates_nothing(&g->p.sampling, V)) {
        int32_t t = cmf__sampler_sample(&g->smp, logits, hist, n_hist);
        int ok = h->allows(h->user, t);
        if (ok < 0) return cmf__error(CMF_ERR_ARG, "logit hook: allows(%d) failed", t);
        if (ok) {
            *id = t;
            return CMF_OK;
        }
    }
    memcpy(g->masked, logits, (size_t)V * sizeof(float));
    if (h->mask) {
        if (h->mask(h->user, g->masked, (int32_t)V)) return cmf__error(CMF_ERR_ARG, "logit hook: mask failed");
    } else {
        for (int64_t i = 0; i < V; i++) {
            int ok = h->allows(h->user, (int32_t)i);
            if (ok < 0) return cmf__error(CMF_ERR_ARG, "logit hook: allows(%lld) failed", (long long)i);
            if (!ok) g->masked[i] = -INFINITY;
        }
    }
    bool any = false;
    for (int64_t i = 0; i < V && !any; i++) any = !isnan(g->masked[i]) && g->masked[i] > -INFINITY;
    if (!any) return cmf__error(CMF_ERR_ARG, "logit hook: no token may come next");
    *id = cmf__sampler_sample(&g->smp, g->masked, hist, n_hist);
    return CMF_OK;
}

cmf_status cmf__gen_next(cmf__gen *g, const float *logits, const int32_t *hist, int64_t n_hist, int64_t n_past,
                         int64_t n_ctx, bool cancelled, int32_t *feed)
{
    *feed = -1;
    if (g->finish != CMF_FINISH_NONE) return CMF_OK;
    if (cancelled) {
        g->finish = CMF_FINISH_CANCELLED;
        return CMF_OK;
    }
    if (g->p.max_tokens >= 0 && g->n_gen >= g->p.max_tokens) {
        g->finish = CMF_FINISH_LENGTH;
        return CMF_OK;
    }
    const int64_t V = g->smp.n_vocab;
    int32_t id = 0;
    cmf_status st = pick(g, logits, hist, n_hist, &id);
    if (st) goto fail;
    float lp = g->p.n_logprobs || g->p.on_token ? cmf__logprobs(logits, V, id, g->p.n_logprobs, g->top_ids, g->top_lp) : 0;
    if (!g->p.ignore_eos && cmf_model_is_eos((cmf_model *)g->model, id)) {
        g->finish = CMF_FINISH_EOS;
        return CMF_OK;
    }
    if (g->p.hook.accept && g->p.hook.accept(g->p.hook.user, id)) {
        st = cmf__error(CMF_ERR_ARG, "logit hook: accept(%d) failed", id);
        goto fail;
    }
    g->n_gen++;
    size_t out_len = 0;
    long stop_at = -1;
    if (g->ts) {
        const char *piece;
        size_t pl;
        if ((st = cmf__tok_stream_push(g->ts, id, &piece, &pl))) goto fail;
        if (!pend_add(g, piece, pl)) {
            st = cmf__error(CMF_ERR_NOMEM, "generate: out of memory");
            goto fail;
        }
        out_len = safe_len(g, &stop_at);
    }
    int cb = emit(g, id, g->pend ? g->pend : "", out_len, lp, g->p.n_logprobs);
    if (out_len) pend_drop(g, out_len);
    if (stop_at >= 0) {
        g->pend_len = 0; /* the stop string and what follows are dropped */
        g->finish = CMF_FINISH_STOP;
    } else if (cb) {
        g->finish = CMF_FINISH_CALLBACK;
    } else if (g->p.max_tokens >= 0 && g->n_gen >= g->p.max_tokens) {
        g->finish = CMF_FINISH_LENGTH; /* the last token is not fed: nothing would read its logits */
    } else if (n_past >= n_ctx) {
        g->finish = CMF_FINISH_CONTEXT;
    } else {
        *feed = id;
    }
    return CMF_OK;
fail:
    g->finish = CMF_FINISH_NONE;
    return st;
}

void cmf__gen_flush(cmf__gen *g)
{
    if (!g->ts || g->finish == CMF_FINISH_STOP) return;
    const char *piece;
    size_t pl;
    if (cmf__tok_stream_flush(g->ts, &piece, &pl) == CMF_OK) (void)pend_add(g, piece, pl);
    if (!g->pend_len || g->finish == CMF_FINISH_CALLBACK) return;
    long stop_at;
    (void)safe_len(g, &stop_at);
    size_t n = stop_at >= 0 ? (size_t)stop_at : g->pend_len;
    if (stop_at >= 0) g->finish = CMF_FINISH_STOP;
    if (n) (void)emit(g, -1, g->pend, n, 0, 0);
    g->pend_len = 0;
}
