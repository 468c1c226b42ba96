/* api.h — the structs behind the public cmf_model / cmf_session handles,
 * shared by the API files and the scheduler (sched.c). A cmf_model owns
 * the bound model, the tokenizer, the compiled chat template and the
 * backends its sessions share; a cmf_session owns one engine (one or more
 * sequences on a shared backend) and the token history of slot 0; the
 * sampler and the rest of a generation's state live in gen.h, one per
 * sequence being generated. */
#ifndef CMF_ENGINE_API_H
#define CMF_ENGINE_API_H

#include "cmf.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "text/template.h"
#include "text/tokenizer.h"
#include <pthread.h>
#include <stdatomic.h>

struct cmf_model {
    cmf__model *m;
    cmf__tok *tok;            /* NULL when the file has no vocab section */
    cmf__template *tmpl;      /* the file's template or the ChatML fallback */
    bool has_template;        /* the file carries its own */
    char *bos_str, *eos_str;  /* token strings for the template, or NULL */
    int32_t bos_id;           /* -1 = none */
    int32_t eos_ids[16];
    size_t n_eos;
    uint64_t size_bytes, n_params;
    int quant_dtype;          /* dtype holding most payload bytes */
    pthread_mutex_t err_mu;
    char err[1024];
    /* backends shared by the model's sessions: the GPU (n_threads -1) and
     * one CPU backend per thread count */
    pthread_mutex_t be_mu;
    struct cmf__model_backend { int n_threads; cmf__backend *be; } backends[8];
    int n_backends;
    /* skill views (cmf__model_view_new) sessions bind to, made on first
     * use and kept until cmf_model_free; key NULL = the backbone */
    pthread_mutex_t skill_mu;
    struct cmf__skill_view { char *id; cmf__model *m; } *views;
    size_t n_views;
    atomic_bool gpu_auto_said; /* --gpu auto has logged its choice for this model */
    /* constrained decoding: the vocabulary's token trie, built on the
     * first grammar (api_grammar.c) and shared until cmf_model_free */
    pthread_mutex_t grammar_mu;
    struct cmf__gvocab *gvocab;
};

/* The binding of skill `id` (NULL = backbone only): the model's own when
 * its open-time skill is id, else a view made on first use and shared.
 * CMF_ERR_NOT_FOUND names the file and the id. Thread-safe. */
cmf_status cmf__model_skill_view(cmf_model *model, const char *id, const cmf__model **out);

/* The model's backend for `device` (CMF_DEVICE_GPU: the Vulkan device;
 * otherwise the CPU with n_threads, <= 0: all cores), created on first use
 * and shared by every session asking for the same; lives until
 * cmf_model_free. NULL (message set) on failure: ERR_UNSUPPORTED when the
 * build or the machine has no GPU. Thread-safe. */
cmf__backend *cmf__model_backend(cmf_model *model, cmf_device device, int n_threads);

struct cmf_session {
    cmf_model *model;
    cmf__engine *e;
    int32_t *hist;            /* [n_ctx] tokens in the cache */
    float *logits;            /* [n_vocab] of the last token fed */
    bool have_logits;
    const cmf__mask *task;    /* active task mask (into the file's masks section), NULL = none */
    atomic_int cancel;
    char err[1024];
    struct cmf__lora *lora[CMF__LORA_MAX]; /* adapters added, owned */
    float lora_scale[CMF__LORA_MAX];
    int n_lora;
};

/* cmf_session_new with a paged KV cache of kv_budget bytes for all
 * sequences (0: every sequence can fill n_ctx; n_ctx 0 with a budget: as
 * many positions as it holds) in blocks of kv_block positions (0: the
 * default); buckets as cmf__engine_params has it (0: the backend's way). */
cmf_status cmf__session_new(cmf_model *model, const cmf_session_params *p, int64_t kv_budget, int64_t kv_block,
                            int buckets, cmf_session **out);

/* Copies cmf_last_error() into the handle's buffer; returns st. */
cmf_status cmf__model_fail(const cmf_model *model, cmf_status st);
cmf_status cmf__session_fail(cmf_session *s, cmf_status st);

#endif
