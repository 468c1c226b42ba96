/* srv.h — what the files of the server module share: the server and its
 * models, one request's job, and the helpers each file offers (http.c:
 * plumbing and routing, auth.c: keys, parse.c: request fields, oai.c:
 * OpenAI-shaped bodies, gen.c: running a job, tools.c: function calling,
 * metrics.c: /metrics, page.c: the web page). Private to src/server/. */
#ifndef CMF_SERVER_SRV_H
#define CMF_SERVER_SRV_H

#include "server/server.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct MHD_Connection;
struct MHD_Response;

/* ---- metrics (metrics.c) ---- */
enum { SRV_EP_CHAT, SRV_EP_COMPLETIONS, SRV_EP_MODELS, SRV_EP_TOKENIZE, SRV_EP_DETOKENIZE, SRV_EP_HEALTH,
       SRV_EP_METRICS, SRV_EP_PAGE, SRV_EP_OTHER, SRV_EP_COUNT };
enum { SRV_H_TTFT, SRV_H_ITL, SRV_H_QUEUE, SRV_H_E2E, SRV_H_COUNT };
#define SRV_N_BUCKETS 16
#define SRV_N_CODES 12
typedef struct srv_hist {
    uint64_t bucket[SRV_N_BUCKETS + 1]; /* counts per upper bound, the last +Inf */
    double sum;
    uint64_t count;
} srv_hist;
typedef struct srv_metrics {
    pthread_mutex_t mu;
    uint64_t requests[SRV_EP_COUNT][SRV_N_CODES]; /* by endpoint and status (srv_code_index) */
    uint64_t prompt_tokens, gen_tokens, cached_tokens, disconnects;
    srv_hist hist[SRV_H_COUNT];
} srv_metrics;
void cmf__srv_metrics_init(srv_metrics *m);
void cmf__srv_metrics_free(srv_metrics *m);
void cmf__srv_metrics_request(srv_metrics *m, int endpoint, unsigned code);
void cmf__srv_metrics_observe(srv_metrics *m, int hist, double seconds);
void cmf__srv_metrics_tokens(srv_metrics *m, uint64_t prompt, uint64_t gen, uint64_t cached);

/* ---- auth (auth.c): keys kept as BLAKE2b digests, compared in constant time ---- */
typedef struct srv_auth {
    unsigned char (*digest)[32];
    size_t n;
} srv_auth;
bool cmf__srv_auth_init(srv_auth *a, const char *const *keys, size_t n);
void cmf__srv_auth_free(srv_auth *a);
/* True when no key is set, or `header` is "Bearer <a key>". */
bool cmf__srv_auth_check(const srv_auth *a, const char *header);

/* ---- the server ---- */
#define SRV_VARIANTS_MAX 16 /* --variants at most */
#define SRV_LORA_MAX 8      /* --lora adapters at most (a variant's set is a bit mask of them) */

/* A scheduler of a model for another task mask and LoRA set than the
 * server's (variant.c). */
typedef struct srv_variant {
    cmf_sched *sched;        /* NULL: an empty slot */
    char *task;              /* NULL: no task mask */
    uint32_t loras;          /* bit i: the server's --lora i runs */
    int jobs;                /* requests on it now (under the model's vmu) */
    uint64_t used;           /* when a request last took it (the model's clock) */
} srv_variant;

typedef struct srv_model {
    char *id;                /* the name clients pass as `model` */
    char *path;
    cmf_model *model;
    cmf_sched *sched;        /* the server's task mask and LoRA set */
    int32_t n_ctx;
    int64_t created;         /* the file's mtime (unix seconds) */
    pthread_mutex_t vmu;     /* var, n_var, clock */
    srv_variant var[SRV_VARIANTS_MAX];
    int n_var;
    uint64_t clock;
} srv_model;

enum { SRV_LOADING, SRV_READY, SRV_STOPPING };

typedef struct srv_job srv_job;
typedef struct srv srv;
struct srv {
    cmf__server_params p;
    srv_model *models;
    size_t n_models;
    atomic_int state;               /* SRV_* */
    srv_auth auth;
    srv_metrics metrics;
    struct MHD_Daemon *daemon;
    int port;                       /* bound */
    char instance[128];             /* X-Cmf-Instance: which replica answered */
    pthread_mutex_t mu;             /* jobs, conns, inflight */
    pthread_cond_t cv;              /* inflight dropped */
    srv_job *jobs;                  /* requests submitted and not yet freed (list) */
    int inflight;                   /* generation requests being answered */
    struct srv_conn *conns;         /* open connections (the request-timeout watchdog) */
    pthread_t watchdog;
    bool watchdog_started, watchdog_stop;
    atomic_uint_fast64_t next_id;
};

/* ---- a generation request (parse.c fills it, gen.c runs it) ---- */
enum { SRV_KIND_CHAT, SRV_KIND_COMPLETION };
/* tool_choice: none (calls are not read), auto, required (some call), named (that one) */
enum { SRV_TOOLS_NONE, SRV_TOOLS_AUTO, SRV_TOOLS_REQUIRED, SRV_TOOLS_NAMED };
struct srv_job {
    srv *s;
    srv_model *m;
    int kind;
    int endpoint;
    /* what was asked */
    cmf_request_params rp;
    srv_variant *var;             /* the scheduler of the request's task and LoRA set, NULL: the model's own */
    int32_t *prompt;              /* owned */
    size_t n_prompt;
    char **stop;                  /* owned copies */
    size_t n_stop;
    bool stream, include_usage;
    bool logprobs;                /* chat: logprobs true; completion: logprobs given */
    int32_t n_top;                /* top alternatives */
    bool skill_asked;             /* the request named a skill (report it) */
    char *skill;                  /* owned copy of rp.skill */
    json_t *hook_spec;            /* response_format json_object / json_schema (NULL: none) */
    cmf_grammar *grammar;         /* compiled from it for the model (owned) */
    cmf_grammar_state *gstate;    /* its state: rp.gen.hook (owned) */
    json_t *tools;                /* the request's tools (NULL: none declared) */
    int tool_choice;              /* SRV_TOOLS_* */
    char *tool_named;             /* SRV_TOOLS_NAMED: the function (owned) */
    bool tool_parallel;           /* parallel_tool_calls (default true) */
    size_t flushed;               /* streaming with tools: bytes of text already sent as content */
    /* while it runs */
    cmf_request *req;
    struct MHD_Connection *conn;
    char id[48];
    int64_t created;
    double t_start, t_last;
    int32_t n_emitted;
    bool sent_role, finished, client_gone, recorded;
    char *text;                   /* non-streaming: the whole completion (owned) */
    size_t text_len, text_cap;
    json_t *lp;                   /* logprobs gathered (non-streaming) */
    size_t text_offset;           /* completion logprobs: offset of the next token's text */
    /* SSE output not yet handed to the connection */
    char *out;
    size_t out_len, out_off, out_cap;
    int phase;                    /* stream phase (gen.c) */
    srv_job *next_job, *prev_job; /* srv.jobs */
};

/* An OpenAI-shaped error: status, message, type, param (may be NULL), code (may be NULL). */
typedef struct srv_err {
    unsigned status;
    char message[512];
    const char *type;
    const char *param;
    const char *code;
} srv_err;
/* Sets *e (status 400 unless told) and returns false, for `return cmf__srv_fail(...)`. */
bool cmf__srv_fail(srv_err *e, unsigned status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* {"error": {...}}; the caller owns it. */
json_t *cmf__srv_err_json(const srv_err *e);

/* ---- http.c helpers for the others ---- */
/* Queues `body` (taken) as JSON with `status`, counting it under endpoint. */
int cmf__srv_reply_json(srv *s, struct MHD_Connection *c, int endpoint, unsigned status, json_t *body);
int cmf__srv_reply_error(srv *s, struct MHD_Connection *c, int endpoint, const srv_err *e);
/* Headers every answer carries (X-Cmf-Instance). */
void cmf__srv_common_headers(srv *s, struct MHD_Response *r);
/* True when the client has closed its end of the connection. */
bool cmf__srv_client_gone(struct MHD_Connection *c);
double cmf__srv_now(void);
srv_model *cmf__srv_find_model(srv *s, const char *id);

/* ---- parse.c ---- */
/* Reads a chat or completion request body into *j (j->s, j->m unset yet:
 * the model is looked up here). False with *e set on any bad field. */
bool cmf__srv_parse_generation(srv *s, int kind, json_t *body, srv_job *j, srv_err *e);
void cmf__srv_job_clear(srv_job *j);
/* Renders `messages` (and `tools`, NULL: none) through the model's
 * template (add_generation_prompt) and tokenizes it into a malloc'd array. */
bool cmf__srv_render_messages(srv_model *m, json_t *messages, json_t *tools, int32_t **ids, size_t *n, srv_err *e);
bool cmf__srv_tokenize(srv_model *m, const char *text, size_t len, bool add_special, int32_t **ids, size_t *n,
                  srv_err *e);

/* Compiles `schema` (JSON text; NULL: any JSON object) for the job's
 * model into j->grammar / j->gstate and sets rp.gen.hook; errors name
 * `param` and `what`. */
bool cmf__srv_compile_hook(srv_job *j, const char *schema, const char *param, const char *what, srv_err *e);

/* ---- tools.c ---- */
/* tools, tool_choice, parallel_tool_calls into j (after response_format). */
bool cmf__srv_parse_tools(json_t *body, srv_job *j, srv_err *e);
/* The schema a forced choice (required / named) must match; NULL otherwise. */
json_t *cmf__srv_tools_schema(const srv_job *j);
/* messages[idx].tool_calls as chat templates read them (arguments an object). */
bool cmf__srv_tools_normalize_calls(json_t *calls, size_t idx, json_t **out, srv_err *e);
/* The calls in a finished answer, OpenAI-shaped (arguments a JSON string),
 * with *content_len the bytes of text before them (0: no content); NULL
 * when the text is not calls (then *content_len is len). */
json_t *cmf__srv_tools_calls(const srv_job *j, const char *text, size_t len, size_t *content_len);
/* Streaming: how many leading bytes of the text so far are content for
 * sure (the rest may be the start of a call and is held back). */
size_t cmf__srv_tools_safe(const srv_job *j, const char *text, size_t len);

/* ---- gen.c ---- */
/* Submits j and answers: a JSON body, or an SSE stream. */
int cmf__srv_gen_answer(srv *s, struct MHD_Connection *c, srv_job *j);

/* ---- oai.c ---- */
json_t *cmf__srv_oai_usage(const srv_job *j, const cmf_request_result *r);
json_t *cmf__srv_oai_skill(const srv_job *j);
const char *cmf__srv_oai_finish(cmf_finish f);
/* One token's logprobs entry (chat shape), or adds it to completion lists. */
json_t *cmf__srv_oai_chat_logprob(srv_model *m, const cmf_token_info *t);
void cmf__srv_oai_completion_logprob(srv_model *m, const cmf_token_info *t, size_t text_offset, json_t *lp);
json_t *cmf__srv_oai_completion_logprobs_new(void);
/* A JSON string of `len` bytes, invalid UTF-8 replaced by U+FFFD. */
json_t *cmf__srv_json_text(const char *s, size_t len);
/* The endpoints without generation. */
int cmf__srv_oai_models(srv *s, struct MHD_Connection *c, const char *one);
int cmf__srv_oai_tokenize(srv *s, struct MHD_Connection *c, json_t *body);
int cmf__srv_oai_detokenize(srv *s, struct MHD_Connection *c, json_t *body);

/* ---- metrics.c ---- */
char *cmf__srv_metrics_render(srv *s, size_t *len);

/* ---- page.c ---- */
extern const char cmf__srv_page_html[];

/* ---- per-request task masks and LoRA sets (variant.c) ---- */
/* j->var for (task, loras: a mask of the server's --lora): NULL when they
 * are the server's own, else a variant, made the first time (an idle one
 * freed when --variants are made); false with e set (400, or 429 when
 * every variant is in use). */
bool cmf__srv_variant_take(srv *s, srv_model *m, const char *task, uint32_t loras, srv_job *j, srv_err *e);
void cmf__srv_variant_release(srv_model *m, srv_variant *v);
void cmf__srv_variants_free(srv_model *m);
/* The scheduler a job runs on. */
cmf_sched *cmf__srv_job_sched(const srv_job *j);
/* The server's own adapter set as a mask: every --lora (at most 8). */
uint32_t cmf__srv_server_loras(const srv *s);
/* The model's schedulers' stats summed (its own and its variants'). */
void cmf__srv_model_stats(srv_model *m, cmf_sched_stats *sum);

#endif
