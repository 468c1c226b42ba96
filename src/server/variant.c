/* variant.c — per-request task masks and LoRA sets. A scheduler runs one
 * task mask and one adapter set for all its requests (cmf_sched_params),
 * so a model keeps its own scheduler for the server's --task / --lora and,
 * beside it, up to --variants more, one per other (task, adapters)
 * combination that requests name: made the first time one is asked for,
 * shared by every request naming the same combination, and, when all are
 * made, the least recently used idle one is freed for a new combination.
 * A variant in use (requests on it) is never freed; when every variant is
 * in use a request for yet another combination gets a 429. Each variant
 * has the model's scheduler parameters, its own KV cache included. */
#include "server/srv.h"

#include <stdlib.h>
#include <string.h>

static bool same_task(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

cmf_sched *cmf__srv_job_sched(const srv_job *j) { return j->var ? j->var->sched : j->m->sched; }

uint32_t cmf__srv_server_loras(const srv *s) { return (uint32_t)((1ull << s->p.n_loras) - 1); }

/* A new scheduler for (task, loras): the server's parameters with them. */
static cmf_status make_sched(const srv *s, srv_model *m, const char *task, uint32_t loras, cmf_sched **out)
{
    cmf_sched_params p = s->p.sched;
    const char *path[SRV_LORA_MAX];
    float scale[SRV_LORA_MAX];
    int32_t n = 0;
    for (size_t i = 0; i < s->p.n_loras && i < SRV_LORA_MAX; i++)
        if (loras >> i & 1u) {
            path[n] = s->p.loras[i];
            scale[n++] = s->p.sched.lora_scale ? s->p.sched.lora_scale[i] : 1.0f;
        }
    p.task = task;
    p.lora = n ? path : NULL;
    p.lora_scale = n ? scale : NULL;
    p.n_lora = n;
    return cmf_sched_new(m->model, &p, out);
}

bool cmf__srv_variant_take(srv *s, srv_model *m, const char *task, uint32_t loras, srv_job *j, srv_err *e)
{
    j->var = NULL;
    if (same_task(task, s->p.task) && loras == cmf__srv_server_loras(s)) return true; /* the server's own */
    const char *param = !same_task(task, s->p.task) ? "task" : "lora";
    if (s->p.max_variants <= 0)
        return cmf__srv_fail(e, 400, param, "unsupported_value",
                             "This server runs one task mask and LoRA set for every request (cmf serve --variants 0): "
                             "'%s' asks for another.", param);
    pthread_mutex_lock(&m->vmu);
    srv_variant *v = NULL, *slot = NULL;
    for (int i = 0; i < m->n_var && !v; i++)
        if (m->var[i].sched && m->var[i].loras == loras && same_task(m->var[i].task, task)) v = &m->var[i];
    for (int i = 0; i < m->n_var && !v && !slot; i++) /* one left empty by a failed start */
        if (!m->var[i].sched) slot = &m->var[i];
    if (!v && !slot && m->n_var < s->p.max_variants && m->n_var < SRV_VARIANTS_MAX) slot = &m->var[m->n_var++];
    if (!v && !slot) { /* the least recently used idle one makes room */
        for (int i = 0; i < m->n_var; i++)
            if (!m->var[i].jobs && (!slot || m->var[i].used < slot->used)) slot = &m->var[i];
        if (!slot) {
            pthread_mutex_unlock(&m->vmu);
            return cmf__srv_fail(e, 429, param, "too_many_variants",
                                 "Every one of the %d task/LoRA combinations this server keeps for '%s' is in use "
                                 "(cmf serve --variants); try again later.",
                                 m->n_var, m->id);
        }
        cmf_sched_free(slot->sched); /* nothing runs on it */
        free(slot->task);
        memset(slot, 0, sizeof *slot);
    }
    if (!v) {
        char *t = task ? strdup(task) : NULL;
        cmf_status st = task && !t ? CMF_ERR_NOMEM : make_sched(s, m, task, loras, &slot->sched);
        if (st) { /* the slot stays empty (sched NULL) for the next combination */
            free(t);
            slot->sched = NULL;
            pthread_mutex_unlock(&m->vmu);
            return cmf__srv_fail(e, st == CMF_ERR_NOMEM ? 503 : 400, param, "variant_failed",
                                 "Cannot run '%s' with that task and LoRA set: %s", m->id, cmf_last_error());
        }
        slot->task = t;
        slot->loras = loras;
        v = slot;
    }
    v->jobs++;
    v->used = ++m->clock;
    j->var = v;
    pthread_mutex_unlock(&m->vmu);
    return true;
}

void cmf__srv_variant_release(srv_model *m, srv_variant *v)
{
    if (!v) return;
    pthread_mutex_lock(&m->vmu);
    v->jobs--;
    pthread_mutex_unlock(&m->vmu);
}

void cmf__srv_variants_free(srv_model *m)
{
    for (int i = 0; i < m->n_var; i++) {
        cmf_sched_free(m->var[i].sched);
        free(m->var[i].task);
    }
    m->n_var = 0;
}

void cmf__srv_model_stats(srv_model *m, cmf_sched_stats *sum)
{
    memset(sum, 0, sizeof *sum);
    if (!m->sched) return;
    cmf_sched_stats_get(m->sched, sum);
    pthread_mutex_lock(&m->vmu);
    for (int i = 0; i < m->n_var; i++) {
        if (!m->var[i].sched) continue;
        cmf_sched_stats st;
        cmf_sched_stats_get(m->var[i].sched, &st);
        sum->running += st.running, sum->waiting += st.waiting, sum->n_parallel += st.n_parallel;
        sum->kv_used += st.kv_used, sum->kv_total += st.kv_total;
        sum->requests_done += st.requests_done, sum->prompt_tokens += st.prompt_tokens;
        sum->prompt_computed += st.prompt_computed, sum->gen_tokens += st.gen_tokens;
        sum->prefix_queries += st.prefix_queries, sum->prefix_hits += st.prefix_hits;
        sum->preemptions += st.preemptions, sum->steps += st.steps;
        sum->graph_hits += st.graph_hits, sum->graph_misses += st.graph_misses;
    }
    pthread_mutex_unlock(&m->vmu);
}
