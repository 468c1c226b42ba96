/* api_session.c — the public session calls: create, decode (one sequence
 * or a batch of several), task masks (switching one resets the
 * sequences), skills, blends, LoRA, routing, and cmf_session_generate:
 * prefix reuse and prefill of slot 0, then gen.c's per-sequence step (the
 * scheduler's too). A session is driven by one thread at a time; cancel is
 * an atomic flag any thread sets. */
#include "engine/api.h"
#include "engine/gen.h"
#include "engine/features.h"
#include "compute/gpu.h"
#include "engine/lora.h"
#include "quant/quant.h"
#include "util/error.h"
#include "util/log.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

cmf_status cmf__session_fail(cmf_session *s, cmf_status st)
{
    if (s) snprintf(s->err, sizeof s->err, "%s", cmf_last_error());
    return st;
}

cmf_session_params cmf_session_params_default(void)
{
    cmf_session_params p = {0, 256, 0, 1, CMF_KV_F16, CMF_DEVICE_AUTO, NULL};
    return p;
}

cmf_sampling_params cmf_sampling_params_default(void)
{
    cmf_sampling_params p = {0.8f, 40, 0.95f, 0.05f, 1.0f, 64, 0.0f, 0.0f, 0};
    return p;
}

cmf_generate_params cmf_generate_params_default(void)
{
    cmf_generate_params p;
    memset(&p, 0, sizeof p);
    p.sampling = cmf_sampling_params_default();
    p.max_tokens = 256;
    return p;
}

const char *cmf_finish_name(cmf_finish f)
{
    switch (f) {
    case CMF_FINISH_LENGTH: return "length";
    case CMF_FINISH_EOS: return "eos";
    case CMF_FINISH_STOP: return "stop";
    case CMF_FINISH_CONTEXT: return "context";
    case CMF_FINISH_CANCELLED: return "cancelled";
    case CMF_FINISH_CALLBACK: return "callback";
    default: return "none";
    }
}

/* --gpu auto logs why it chose what it chose, once per model (CMF_LOG=info). */
static void auto_say(cmf_model *model, const char *fmt, ...) CMF_PRINTF(2, 3);
static void auto_say(cmf_model *model, const char *fmt, ...)
{
    if (atomic_exchange(&model->gpu_auto_said, true)) return;
    char msg[1400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    CMF_INFO("%s: --gpu auto: %s", model->m->what, msg);
}

/* Bytes the model's tensors take on the GPU (the backend's rule, compute/gpu.h). */
static double gpu_weight_bytes(const cmf__model *m)
{
    double sum = 0;
    for (uint64_t i = 0; i < m->file->n_tensors; i++) {
        const cmf__tensor *t = &m->file->tensors[i];
        uint64_t n = 1; /* shapes are checked against nbytes when the file opens */
        for (int d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
        sum += (double)cmf__gpu_weight_bytes(t->dtype, t->nbytes, n);
    }
    return sum;
}

/* --gpu auto: an engine on the GPU when there is a hardware device (a
 * software one, Mesa's lavapipe, is slower than the CPU backend), the
 * weights and the KV cache fit in 90% of its memory and one warm-up step
 * runs (every op of the model's graph has a shader); false (the caller
 * takes the CPU) otherwise, the reason logged once. CMF_VK_SOFTWARE=1
 * lets it take a software device (the tests' lavapipe). */
static bool gpu_auto(cmf_model *model, const cmf__model *bound, const cmf__engine_params *pp, cmf__engine **out)
{
    *out = NULL;
    cmf__gpu_info dev;
    if (cmf__gpu_probe(&dev)) {
        auto_say(model, "the CPU: no GPU (%s)", cmf_last_error());
        return false;
    }
    const char *sw = getenv("CMF_VK_SOFTWARE"); /* tests: take a software device as a GPU */
    if (dev.software && !(sw && !strcmp(sw, "1"))) {
        auto_say(model, "the CPU: %s is a software device", dev.name);
        return false;
    }
    const double mem = (double)dev.memory, weights = gpu_weight_bytes(bound), gib = 1u << 30;
    if (weights > 0.9 * mem) {
        auto_say(model, "the CPU: the weights (%.1f GiB on the device) pass 90%% of its %.1f GiB (%s)", weights / gib,
                 mem / gib, dev.name);
        return false;
    }
    cmf__backend *be = cmf__model_backend(model, CMF_DEVICE_GPU, 0);
    if (!be) {
        auto_say(model, "the CPU: %s", cmf_last_error());
        return false;
    }
    cmf__engine_params ep = *pp;
    ep.backend = be;
    cmf__engine *e = NULL;
    cmf_status st = cmf__engine_new(bound, &ep, &e);
    double kv = st ? 0 : (double)cmf__engine_kv_bytes(e);
    if (!st && weights + kv > 0.9 * mem) {
        cmf__engine_free(e);
        auto_say(model, "the CPU: weights and KV cache (%.1f GiB) pass 90%% of the device's %.1f GiB (%s)",
                 (weights + kv) / gib, mem / gib, be->ops->device(be));
        return false;
    }
    float *logits = st ? NULL : malloc(sizeof(float) * (size_t)model->m->arch.vocab_size);
    int32_t tok = 0;
    if (!st && !logits) st = cmf__error(CMF_ERR_NOMEM, "out of memory");
    if (!st) st = cmf__engine_forward(e, &tok, 1, logits, false); /* builds, checks and uploads the decode graph */
    free(logits);
    if (st) {
        cmf__engine_free(e);
        auto_say(model, "the CPU: the GPU cannot run this model (%s)", cmf_last_error());
        return false;
    }
    cmf__engine_reset(e);
    auto_say(model, "the GPU, %s", be->ops->device(be));
    *out = e;
    return true;
}

cmf_status cmf_session_new(cmf_model *model, const cmf_session_params *pp, cmf_session **out)
{
    return cmf__session_new(model, pp, 0, 0, 0, out);
}

cmf_status cmf__session_new(cmf_model *model, const cmf_session_params *pp, int64_t kv_budget, int64_t kv_block,
                            int buckets, cmf_session **out)
{
    if (!out) return cmf__error(CMF_ERR_ARG, "cmf_session_new: out is NULL");
    *out = NULL;
    if (!model) return cmf__error(CMF_ERR_ARG, "cmf_session_new: model is NULL");
    cmf_session_params p = pp ? *pp : cmf_session_params_default();
    if (p.n_ctx < 0 || p.n_batch < 0 || p.n_seq_max < 0 || p.n_threads < 0)
        return cmf__model_fail(model, cmf__error(CMF_ERR_ARG, "cmf_session_new: negative n_ctx, n_batch, n_seq_max or n_threads"));
    static const cmf__etype kv_types[] = {CMF__E_F16, CMF__E_F32, CMF__E_Q8}; /* indexed by cmf_kv_type */
    if ((unsigned)p.kv_type >= sizeof kv_types / sizeof *kv_types)
        return cmf__model_fail(model, cmf__error(CMF_ERR_ARG, "cmf_session_new: kv_type %d is not a cmf_kv_type",
                                                 (int)p.kv_type));
    if (p.device != CMF_DEVICE_AUTO && p.device != CMF_DEVICE_CPU && p.device != CMF_DEVICE_GPU)
        return cmf__model_fail(model, cmf__error(CMF_ERR_ARG, "cmf_session_new: device %d is not a cmf_device",
                                                 (int)p.device));
    cmf_session *s = calloc(1, sizeof *s);
    if (!s) return cmf__model_fail(model, cmf__error(CMF_ERR_NOMEM, "out of memory"));
    s->model = model;
    cmf__engine_params ep = cmf__engine_params_default();
    ep.n_ctx = p.n_ctx;
    ep.n_batch = p.n_batch ? p.n_batch : 256;
    ep.n_seq = p.n_seq_max ? p.n_seq_max : 1;
    ep.kv_type = kv_types[p.kv_type];
    ep.kv_budget = kv_budget;
    ep.kv_block = kv_block;
    ep.buckets = buckets;
    const cmf__model *bound = model->m;
    cmf_status st = p.skill ? cmf__model_skill_view(model, p.skill, &bound) : CMF_OK;
    if (!st && (p.device != CMF_DEVICE_AUTO || !gpu_auto(model, bound, &ep, &s->e))) {
        ep.backend = cmf__model_backend(model, p.device == CMF_DEVICE_GPU ? CMF_DEVICE_GPU : CMF_DEVICE_CPU, p.n_threads);
        if (!ep.backend) {
            free(s);
            return cmf__model_fail(model, p.device == CMF_DEVICE_GPU ? CMF_ERR_UNSUPPORTED : CMF_ERR_BACKEND);
        }
        st = cmf__engine_new(bound, &ep, &s->e);
    }
    if (st) {
        free(s);
        return cmf__model_fail(model, st);
    }
    s->hist = malloc((size_t)s->e->n_ctx * sizeof(int32_t));
    s->logits = malloc((size_t)model->m->arch.vocab_size * sizeof(float));
    if (!s->hist || !s->logits) {
        cmf_session_free(s);
        return cmf__model_fail(model, cmf__error(CMF_ERR_NOMEM, "out of memory"));
    }
    *out = s;
    return CMF_OK;
}

void cmf_session_free(cmf_session *s)
{
    if (!s) return;
    cmf__engine_free(s->e);
    for (int i = 0; i < s->n_lora; i++) cmf__lora_free(s->lora[i]);
    free(s->hist);
    free(s->logits);
    free(s);
}

const char *cmf_session_errmsg(const cmf_session *s) { return s ? s->err : ""; }
int32_t cmf_session_n_ctx(const cmf_session *s) { return (int32_t)s->e->n_ctx; }
int32_t cmf_session_n_past(const cmf_session *s) { return (int32_t)s->e->n_past[0]; }
void cmf_session_reset(cmf_session *s)
{
    cmf__engine_reset(s->e);
    s->have_logits = false;
}

const char *cmf_kv_type_name(cmf_kv_type t)
{
    static const char *const names[] = {"f16", "f32", "q8"};
    return (unsigned)t < sizeof names / sizeof *names ? names[t] : NULL;
}

cmf_status cmf_kv_type_parse(const char *name, cmf_kv_type *out)
{
    for (int t = CMF_KV_F16; t <= CMF_KV_Q8; t++)
        if (name && !strcmp(name, cmf_kv_type_name((cmf_kv_type)t))) {
            *out = (cmf_kv_type)t;
            return CMF_OK;
        }
    return cmf__error(CMF_ERR_ARG, "KV cache type '%s' is not one of f16, f32, q8", name ? name : "(null)");
}

int32_t cmf_session_seq_n_past(const cmf_session *s, int32_t seq)
{
    return seq >= 0 && seq < s->e->n_seq ? (int32_t)s->e->n_past[seq] : -1;
}

cmf_status cmf_session_seq_reset(cmf_session *s, int32_t seq)
{
    cmf_status st = cmf__engine_reset_seq(s->e, seq);
    if (st) return cmf__session_fail(s, st);
    if (seq <= 0) s->have_logits = false;
    return CMF_OK;
}

int64_t cmf_session_kv_bytes_per_token(const cmf_session *s) { return cmf__engine_kv_bytes_per_token(s->e); }
const char *cmf_session_device(const cmf_session *s) { return s->e->be->ops->device(s->e->be); }

cmf_status cmf_session_decode_batch(cmf_session *s, const cmf_batch *b, float *out)
{
    if (!b || b->n_tokens <= 0 || !b->tokens)
        return cmf__session_fail(s, cmf__error(CMF_ERR_ARG, "decode_batch: no tokens"));
    int64_t past0 = s->e->n_past[0];
    cmf__batch eb = {b->n_tokens, b->tokens, b->seq, b->logits};
    cmf_status st = cmf__engine_decode(s->e, &eb, out);
    /* slot 0's history follows what went into its cache (also a partial run) */
    for (int32_t i = 0, k = 0; i < b->n_tokens && past0 + k < s->e->n_past[0]; i++)
        if (!b->seq || b->seq[i] == 0) s->hist[past0 + k++] = b->tokens[i];
    if (s->e->n_past[0] != past0) s->have_logits = false; /* slot 0's last logits are not kept here */
    return st ? cmf__session_fail(s, st) : CMF_OK;
}
const float *cmf_session_logits(const cmf_session *s) { return s->have_logits ? s->logits : NULL; }

/* "a, b, c" of the file's task names into buf (cut with "..." when long). */
static void task_list(const cmf__masks *ms, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (uint32_t i = 0; i < ms->n_masks && len + 4 < cap; i++) {
        int k = snprintf(buf + len, cap - len, "%s'%s'", i ? ", " : "", ms->masks[i].name);
        if (k < 0 || (size_t)k >= cap - len) {
            snprintf(buf + (cap > 4 ? cap - 4 : 0), 4, "...");
            return;
        }
        len += (size_t)k;
    }
}

cmf_status cmf_session_set_task(cmf_session *s, const char *name)
{
    const cmf__model *m = s->model->m;
    const cmf__masks *ms = cmf__file_mask_set(m->file);
    const cmf__mask *mask = NULL;
    if (name) {
        if (!ms)
            return cmf__session_fail(s, cmf__error(CMF_ERR_NOT_FOUND, "%s: task '%s': the file has no masks section",
                                                   m->what, name));
        for (uint32_t i = 0; i < ms->n_masks && !mask; i++)
            if (!strcmp(ms->masks[i].name, name)) mask = &ms->masks[i];
        if (!mask) {
            char names[512];
            task_list(ms, names, sizeof names);
            return cmf__session_fail(s, cmf__error(CMF_ERR_NOT_FOUND, "%s: no task '%s' in the masks section (tasks: %s)",
                                                   m->what, name, names));
        }
    }
    if (mask == s->task) return CMF_OK; /* same task: the cache stays valid */
    cmf_status st = cmf__engine_set_mask(s->e, ms, mask);
    if (st) return cmf__session_fail(s, st);
    s->task = mask;
    s->have_logits = false;
    const json_t *q = mask ? json_object_get(mask->meta, "quality") : NULL;
    if (mask && (!q || json_is_null(q)))
        CMF_WARN("%s: task '%s' is not measured (masks meta quality is null): its effect on output quality is unknown",
                 m->what, mask->name);
    return CMF_OK;
}

cmf_status cmf_session_set_skill(cmf_session *s, const char *id)
{
    const cmf__model *v;
    cmf_status st = cmf__model_skill_view(s->model, id, &v);
    if (st) return cmf__session_fail(s, st);
    if (v == s->e->model) return CMF_OK; /* same skill: the cache stays valid */
    if ((st = cmf__engine_set_model(s->e, v))) return cmf__session_fail(s, st);
    if (!s->e->seq_model[0]) s->have_logits = false;
    return CMF_OK;
}

const char *cmf_session_skill(const cmf_session *s) { return s->e->model->skill; }

cmf_status cmf_session_seq_set_skill(cmf_session *s, int32_t seq, const char *id)
{
    const cmf__model *v = NULL;
    cmf_status st = id ? cmf__model_skill_view(s->model, *id ? id : NULL, &v) : CMF_OK;
    if (!st) st = cmf__engine_set_seq_model(s->e, seq, v);
    if (st) return cmf__session_fail(s, st);
    if (seq == 0 && s->e->n_past[0] == 0) s->have_logits = false;
    return CMF_OK;
}

cmf_status cmf_session_set_blend(cmf_session *s, int32_t n, const char *const *ids, const float *weights)
{
    if (n < 0 || n > CMF__BLEND_MAX || (n && (!ids || !weights)))
        return cmf__session_fail(s, cmf__error(CMF_ERR_ARG, "blend: %d skills (0..%d, with ids and weights)", (int)n,
                                               CMF__BLEND_MAX));
    const cmf__model *v[CMF__BLEND_MAX];
    cmf_status st = CMF_OK;
    for (int32_t i = 0; i < n && !st; i++) st = cmf__model_skill_view(s->model, ids[i], &v[i]);
    if (!st) st = cmf__engine_set_blend(s->e, n, v, weights);
    if (st) return cmf__session_fail(s, st);
    if (!s->e->seq_model[0] && s->e->n_past[0] == 0) s->have_logits = false;
    return CMF_OK;
}

cmf_status cmf_session_set_blend_scores(cmf_session *s, int32_t n, const char *const *ids, const float *scores,
                                        float temperature)
{
    if (n < 1 || n > CMF__BLEND_MAX || !ids || !scores)
        return cmf__session_fail(s, cmf__error(CMF_ERR_ARG, "blend: %d skills (1..%d, with ids and scores)", (int)n,
                                               CMF__BLEND_MAX));
    if (!isfinite(temperature) || !(temperature > 0))
        return cmf__session_fail(s, cmf__error(CMF_ERR_ARG, "blend: temperature %g (expected > 0)", (double)temperature));
    double lo = INFINITY;
    for (int32_t i = 0; i < n; i++) {
        if (!isfinite(scores[i]))
            return cmf__session_fail(s, cmf__error(CMF_ERR_ARG, "blend: score %d is %g", (int)i, (double)scores[i]));
        lo = scores[i] < lo ? scores[i] : lo;
    }
    float w[CMF__BLEND_MAX];
    for (int32_t i = 0; i < n; i++) w[i] = (float)exp(-((double)scores[i] - lo) / temperature); /* softmax(-E/T), shifted */
    return cmf_session_set_blend(s, n, ids, w);
}

cmf_status cmf_session_add_lora(cmf_session *s, const char *path, float scale)
{
    if (!path) return cmf__session_fail(s, cmf__error(CMF_ERR_ARG, "LoRA: path is NULL"));
    if (s->n_lora == CMF__LORA_MAX)
        return cmf__session_fail(s, cmf__error(CMF_ERR_ARG, "%s: LoRA: at most %d adapters per session", path,
                                               CMF__LORA_MAX));
    if (!isfinite(scale))
        return cmf__session_fail(s, cmf__error(CMF_ERR_ARG, "%s: LoRA: scale %g is not finite", path, (double)scale));
    cmf__lora *lo = NULL;
    cmf_status st = cmf__lora_open(s->model->m, path, &lo);
    if (st) return cmf__session_fail(s, st);
    s->lora[s->n_lora] = lo;
    s->lora_scale[s->n_lora] = scale;
    if ((st = cmf__engine_set_loras(s->e, s->n_lora + 1, (const cmf__lora *const *)s->lora, s->lora_scale))) {
        cmf__lora_free(lo);
        return cmf__session_fail(s, st);
    }
    s->n_lora++;
    s->have_logits = false;
    return CMF_OK;
}

void cmf_session_clear_loras(cmf_session *s)
{
    if (!s->n_lora) return;
    (void)cmf__engine_set_loras(s->e, 0, NULL, NULL); /* removing allocates nothing: cannot fail */
    for (int i = 0; i < s->n_lora; i++) cmf__lora_free(s->lora[i]);
    s->n_lora = 0;
    s->have_logits = false;
}

int32_t cmf_model_n_skills(const cmf_model *m)
{
    return (int32_t)json_array_size(json_object_get(m->m->file->header, "skills"));
}

const char *cmf_model_skill_id(const cmf_model *m, int32_t i)
{
    const json_t *skills = json_object_get(m->m->file->header, "skills");
    return i >= 0 ? json_string_value(json_object_get(json_array_get(skills, (size_t)i), "id")) : NULL;
}

cmf_status cmf_session_route(cmf_session *s, const int32_t *tokens, size_t n, float temperature, double *scores,
                             int32_t *best)
{
    cmf_model *model = s->model;
    const int32_t ns = cmf_model_n_skills(model);
    if (best) *best = -1;
    if (!tokens || n == 0) return cmf__session_fail(s, cmf__error(CMF_ERR_ARG, "route: no tokens"));
    if (!isfinite(temperature) || temperature < 0)
        return cmf__session_fail(s, cmf__error(CMF_ERR_ARG, "route: temperature %g (expected >= 0)", (double)temperature));
    if (ns == 0)
        return cmf__session_fail(s, cmf__error(CMF_ERR_NOT_FOUND, "%s: no skills to route to", model->m->what));
    double *E = malloc((size_t)ns * sizeof *E);
    if (!E) return cmf__session_fail(s, cmf__error(CMF_ERR_NOMEM, "out of memory"));
    const cmf__model *backbone = NULL;
    int pick = -1;
    cmf_status st = cmf__model_skill_view(model, NULL, &backbone); /* features are the backbone's (spec §9) */
    if (!st) st = cmf__skill_route_scores(backbone, s->e->be, tokens, (int64_t)n, E, (size_t)ns, &pick);
    if (!st && pick < 0)
        st = cmf__error(CMF_ERR_NOT_FOUND, "%s: no skill has a routing block (cmf skill add --prompts)", model->m->what);
    if (!st && temperature == 0) {
        st = cmf_session_set_skill(s, cmf_model_skill_id(model, pick));
    } else if (!st) {
        /* the blend: the (at most CMF__BLEND_MAX) skills of smallest E that have a routing block */
        const char *ids[CMF__BLEND_MAX];
        float e[CMF__BLEND_MAX];
        int k = 0;
        for (int32_t i = 0; i < ns; i++) {
            if (!isfinite(E[i])) continue;
            int at = k < CMF__BLEND_MAX ? k++ : CMF__BLEND_MAX; /* insertion by E; a full list drops its worst */
            while (at > 0 && E[i] < e[at - 1]) {
                if (at < CMF__BLEND_MAX) ids[at] = ids[at - 1], e[at] = e[at - 1];
                at--;
            }
            if (at < CMF__BLEND_MAX) ids[at] = cmf_model_skill_id(model, i), e[at] = (float)E[i];
        }
        st = cmf_session_set_blend_scores(s, k, ids, e, temperature);
    }
    if (!st && scores) memcpy(scores, E, (size_t)ns * sizeof *E);
    free(E);
    if (st) return cmf__session_fail(s, st);
    if (best) *best = pick;
    return CMF_OK;
}

const char *cmf_session_task(const cmf_session *s) { return s->task ? s->task->name : NULL; }
void cmf_session_cancel(cmf_session *s) { atomic_store(&s->cancel, 1); }

cmf_status cmf_session_decode(cmf_session *s, const int32_t *ids, size_t n, float *logits, bool all_logits)
{
    if (n == 0 || !ids) return cmf__session_fail(s, cmf__error(CMF_ERR_ARG, "decode: no tokens"));
    const int64_t V = s->model->m->arch.vocab_size;
    int64_t past = s->e->n_past[0];
    float *out = logits ? logits : s->logits;
    bool all = logits ? all_logits : false;
    cmf_status st = cmf__engine_forward(s->e, ids, (int64_t)n, out, all);
    if (st) {
        if (s->e->n_past[0] != past) s->have_logits = false; /* a chunk ran, the rest failed */
        return cmf__session_fail(s, st);
    }
    memcpy(s->hist + past, ids, n * sizeof(int32_t));
    if (logits) memcpy(s->logits, all ? logits + (int64_t)(n - 1) * V : logits, (size_t)V * sizeof(float));
    s->have_logits = true;
    return CMF_OK;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

cmf_status cmf_session_generate(cmf_session *s, const int32_t *prompt, size_t n_prompt, const cmf_generate_params *pp,
                                cmf_generate_result *res)
{
    cmf_generate_params gp = pp ? *pp : cmf_generate_params_default();
    cmf_generate_result r;
    memset(&r, 0, sizeof r);
    if (res) *res = r;
    cmf__engine *e = s->e;
    const int64_t V = s->model->m->arch.vocab_size;
    if (n_prompt == 0 || !prompt) return cmf__session_fail(s, cmf__error(CMF_ERR_ARG, "generate: empty prompt"));
    for (size_t i = 0; i < gp.n_stop; i++)
        if (!gp.stop || !gp.stop[i]) return cmf__session_fail(s, cmf__error(CMF_ERR_ARG, "generate: stop string %zu is NULL", i));
    if ((int64_t)n_prompt > e->n_ctx)
        return cmf__session_fail(s, cmf__error(CMF_ERR_CONTEXT, "generate: prompt of %zu tokens exceeds n_ctx %lld",
                                               n_prompt, (long long)e->n_ctx));
    for (size_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= V)
            return cmf__session_fail(s, cmf__error(CMF_ERR_ARG, "generate: prompt token %zu: id %d out of range [0, %lld)",
                                                   i, prompt[i], (long long)V));
    cmf__gen g;
    cmf_status st = cmf__gen_init(&g, s->model, &gp);
    if (st) return cmf__session_fail(s, st);
    /* reuse the longest cached prefix, keeping at least one token to feed */
    int64_t keep = 0;
    while (keep < e->n_past[0] && keep < (int64_t)n_prompt - 1 && s->hist[keep] == prompt[keep]) keep++;
    if (cmf__engine_truncate(e, keep) != CMF_OK) cmf__engine_reset(e);
    keep = e->n_past[0]; /* a shared paged block would end the kept prefix earlier */
    r.n_reused = (int32_t)keep;
    double t0 = now_ms();
    st = cmf_session_decode(s, prompt + keep, n_prompt - (size_t)keep, NULL, false);
    r.n_prompt = (int32_t)(n_prompt - (size_t)keep);
    r.prompt_ms = now_ms() - t0;
    double t1 = now_ms();
    while (st == CMF_OK) {
        int32_t id;
        st = cmf__gen_next(&g, s->logits, s->hist, e->n_past[0], e->n_past[0], e->n_ctx, atomic_exchange(&s->cancel, 0),
                           &id);
        if (st || id < 0) break;
        st = cmf_session_decode(s, &id, 1, NULL, false);
    }
    r.gen_ms = now_ms() - t1;
    if (st == CMF_OK) cmf__gen_flush(&g);
    r.n_gen = g.n_gen;
    r.finish = g.finish;
    cmf__gen_free(&g);
    atomic_store(&s->cancel, 0);
    if (res) *res = r;
    if (st) return cmf__session_fail(s, st);
    return CMF_OK;
}
