/* cmf.h — the one public header of libcmf, a C11 inference runtime for
 * CMF v2 model files. Everything else under src/ is private.
 *
 * Conventions: fallible calls return cmf_status (CMF_OK == 0) or NULL from a
 * constructor; the reason is then in cmf_last_error() (thread-local) or on
 * the handle. Every _free(NULL) is a no-op. Returned const char * are
 * borrowed; each declaration says how long they live. */
#ifndef CMF_H
#define CMF_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CMF_API __attribute__((visibility("default")))
#else
#define CMF_API
#endif

#define CMF_VERSION_MAJOR 0
#define CMF_VERSION_MINOR 1
#define CMF_VERSION_PATCH 0
#define CMF_VERSION_STRING "0.1.0"

/* ---- status codes ------------------------------------------------------
 * One list: the enum, its names and its texts come from it and never drift. */
#define CMF_STATUS_LIST(X)                                                  \
    X(OK,          0,  "ok")                                                \
    X(ERR_IO,      1,  "input/output error")                                \
    X(ERR_NOMEM,   2,  "out of memory")                                     \
    X(ERR_ARG,     3,  "invalid argument")                                  \
    X(ERR_MAGIC,   4,  "bad magic")                                         \
    X(ERR_VERSION, 5,  "unsupported version")                               \
    X(ERR_FEATURE, 6,  "unsupported required feature")                      \
    X(ERR_BOUNDS,  7,  "out of bounds")                                     \
    X(ERR_ALIGN,   8,  "misaligned")                                        \
    X(ERR_PARSE,   9,  "parse error")                                       \
    X(ERR_DTYPE,   10, "unknown or unsupported dtype")                      \
    X(ERR_SIZE,    11, "payload size inconsistent with dtype and shape")    \
    X(ERR_DUPLICATE, 12, "duplicate name")                                  \
    X(ERR_HASH,    13, "hash mismatch")                                     \
    X(ERR_SIGNATURE, 14, "signature invalid")                               \
    X(ERR_SHARD,   15, "shard set error")                                   \
    X(ERR_NOT_FOUND, 16, "not found")                                       \
    X(ERR_UNSUPPORTED, 17, "unsupported")                                   \
    X(ERR_CONFIG,  18, "model configuration error")                         \
    X(ERR_TOKENIZER, 19, "tokenizer error")                                 \
    X(ERR_TEMPLATE, 20, "template error")                                   \
    X(ERR_CANCELLED, 21, "cancelled")                                       \
    X(ERR_CONTEXT, 22, "context full")                                      \
    X(ERR_BACKEND, 23, "backend error")                                     \
    X(ERR_INTERNAL, 24, "internal error")                                  \
    X(ERR_BUSY,    25, "busy")

typedef enum cmf_status {
#define CMF_X_ENUM(name, value, text) CMF_##name = value,
    CMF_STATUS_LIST(CMF_X_ENUM)
#undef CMF_X_ENUM
    CMF_STATUS_COUNT_
} cmf_status;


/* ---- dtypes (CMF v2 §3.1; ids are never reused) ----------------------- */
typedef enum cmf_dtype {
    CMF_DTYPE_F32 = 0,
    CMF_DTYPE_F16 = 1,
    CMF_DTYPE_BF16 = 2,
    CMF_DTYPE_Q8_ROW = 3,
    CMF_DTYPE_Q4_BLOCK = 4,
    CMF_DTYPE_MIX8_4 = 5,   /* reserved: reported as unsupported */
    CMF_DTYPE_U8 = 6,       /* reserved */
    CMF_DTYPE_Q4_COL = 7,   /* reserved */
    CMF_DTYPE_VBIT = 8,
    CMF_DTYPE_Q8_2F = 9,
    CMF_DTYPE_VBIT_RO = 10,
    CMF_DTYPE_Q4_TILED = 11,
    CMF_DTYPE_Q1 = 12,
    CMF_DTYPE_Q1S = 13,
    CMF_DTYPE_Q1T = 14,
    CMF_DTYPE_Q4TP = 15,
    CMF_DTYPE_Q2TP = 16,
    CMF_DTYPE_COUNT_ = 17
} cmf_dtype;

/* Name of a status ("ERR_BOUNDS"); static storage, never NULL. */
CMF_API const char *cmf_status_name(cmf_status s);
/* One-line text of a status ("out of bounds"); static storage, never NULL. */
CMF_API const char *cmf_status_text(cmf_status s);
/* Message of the last failed call on this thread, naming file, object and
 * offset where known. Valid until the next failing cmf call on this thread.
 * Never NULL ("" when nothing failed). Thread-safe (thread-local). */
CMF_API const char *cmf_last_error(void);
/* Library version string ("0.1.0"); static storage. */
CMF_API const char *cmf_version(void);


/* ---- models ------------------------------------------------------------
 * A cmf_model is an opened, validated .cmf file with its weights bound (they
 * stay in the file mapping), its tokenizer and its chat template. After
 * cmf_model_open returns, a model is immutable: every cmf_model_* call except
 * cmf_model_free may run from several threads at once. Free every session of
 * a model before the model. */
typedef struct cmf_model cmf_model;
/* One or more sequences being generated: their KV caches and scratch, on
 * a backend (device + thread pool) the model shares between its sessions.
 * A session is used by one thread at a time; only cmf_session_cancel may be
 * called from another thread, at any time while the session exists. */
typedef struct cmf_session cmf_session;

typedef struct cmf_model_params {
    const char *skill;   /* skill id to activate (spec §9), NULL = backbone only */
    bool verify;         /* check every tensor hash at open (reads the whole file) */
} cmf_model_params;
/* Defaults: no skill, no verification. */
CMF_API cmf_model_params cmf_model_params_default(void);

/* Opens `path` (params NULL = defaults). On failure *out is NULL and the
 * message (naming file, tensor or JSON path, offset) is in cmf_last_error().
 * Errors: the container's (ERR_IO, ERR_MAGIC, ERR_BOUNDS, ...), ERR_CONFIG
 * (arch block or a tensor the arch needs), ERR_UNSUPPORTED (an operator this
 * build lacks), ERR_TOKENIZER / ERR_TEMPLATE, ERR_HASH (verify). */
CMF_API cmf_status cmf_model_open(const char *path, const cmf_model_params *params, cmf_model **out);
CMF_API void cmf_model_free(cmf_model *model);
/* Message of the last failed call on this model ("" when none). Borrowed:
 * valid until the next failing call on the model or cmf_model_free. */
CMF_API const char *cmf_model_errmsg(const cmf_model *model);

/* Introspection; thread-safe. arch_name is informational (borrowed, lives
 * with the model). n_ctx_train is the header's max_position_embeddings.
 * size_bytes = tensor payload bytes; n_params = weights counted by shape. */
CMF_API const char *cmf_model_arch_name(const cmf_model *model);
CMF_API int32_t cmf_model_n_vocab(const cmf_model *model);
CMF_API int32_t cmf_model_n_ctx_train(const cmf_model *model);
CMF_API int32_t cmf_model_n_layer(const cmf_model *model);
CMF_API uint64_t cmf_model_size_bytes(const cmf_model *model);
CMF_API uint64_t cmf_model_n_params(const cmf_model *model);
/* The dominant weight dtype name ("q8_row", "f32", ...); static storage. */
CMF_API const char *cmf_model_quant_name(const cmf_model *model);
/* True when the file carries its own chat template (spec §6.1). */
CMF_API bool cmf_model_has_chat_template(const cmf_model *model);
/* True when `token` ends generation (one of header eos_token_ids). */
CMF_API bool cmf_model_is_eos(const cmf_model *model, int32_t token);
/* bos_token_id of the file, or -1 when not set. */
CMF_API int32_t cmf_model_bos(const cmf_model *model);

/* Task masks (spec §5): named subsets of FFN neurons, query heads, layers
 * and (MoE) experts that a session can activate (cmf_session_set_task).
 * n_tasks is 0 when the file has no masks section. task_name(i) is the
 * name of mask i, 0 <= i < n_tasks, NULL out of range; default_task is the
 * section's "default_task", NULL when absent. Both strings are borrowed and
 * live with the model. Thread-safe. */
CMF_API int32_t cmf_model_n_tasks(const cmf_model *model);
CMF_API const char *cmf_model_task_name(const cmf_model *model, int32_t i);
CMF_API const char *cmf_model_default_task(const cmf_model *model);

/* Encodes `len` bytes of UTF-8. add_special applies the tokenizer's
 * post-processor (BOS/EOS). Writes the ids to ids[0..cap) and the count to
 * *n_ids; when cap is too small nothing is written, *n_ids gets the count
 * needed and the call returns CMF_ERR_BOUNDS. Thread-safe. */
CMF_API cmf_status cmf_model_tokenize(cmf_model *model, const char *text, size_t len, bool add_special,
                                      int32_t *ids, size_t cap, size_t *n_ids);
/* Decodes ids to UTF-8 into buf (NUL-terminated) and the length without the
 * NUL to *len; CMF_ERR_BOUNDS with *len = bytes needed (without NUL) when
 * cap <= that. skip_special drops special added tokens. Unknown ids:
 * CMF_ERR_ARG. Thread-safe. */
CMF_API cmf_status cmf_model_detokenize(cmf_model *model, const int32_t *ids, size_t n, bool skip_special,
                                        char *buf, size_t cap, size_t *len);

/* One chat message; both strings borrowed for the call. */
typedef struct cmf_chat_message {
    const char *role;    /* "system", "user", "assistant", ... */
    const char *content;
} cmf_chat_message;
/* Renders messages through the file's own template (or the ChatML fallback
 * when it has none), as transformers' apply_chat_template(tokenize=False).
 * Buffer contract as cmf_model_detokenize. Errors: ERR_TEMPLATE (the
 * template's own raise_exception text, or line/column), ERR_BOUNDS.
 * Thread-safe. */
CMF_API cmf_status cmf_model_render_chat(cmf_model *model, const cmf_chat_message *messages, size_t n,
                                         bool add_generation_prompt, char *buf, size_t cap, size_t *len);
/* The same with the conversation as JSON text, as
 * apply_chat_template(messages, tools=tools, tokenize=False): `messages_json`
 * an array of message objects handed to the template as they are
 * (tool_calls, tool_call_id, name and the rest included), `tools_json` an
 * array of tool definitions or NULL (the template's `tools` is then none).
 * Errors: ERR_ARG (not JSON, or not an array: names the argument and the
 * line/column), ERR_TEMPLATE, ERR_BOUNDS. Thread-safe. */
CMF_API cmf_status cmf_model_render_chat_json(cmf_model *model, const char *messages_json, const char *tools_json,
                                              bool add_generation_prompt, char *buf, size_t cap, size_t *len);

/* ---- sessions ------------------------------------------------------------ */
/* Element type of the KV cache: f16 (the default: half the memory of f32,
 * logits within ~1e-3 relative of it), f32 (exact, what parity tests use)
 * or q8 (int8 with one f32 scale per head row: a quarter of f32). */
typedef enum cmf_kv_type { CMF_KV_F16 = 0, CMF_KV_F32 = 1, CMF_KV_Q8 = 2 } cmf_kv_type;
/* "f16", "f32", "q8"; NULL for an unknown value. */
CMF_API const char *cmf_kv_type_name(cmf_kv_type t);
/* Parses a cmf_kv_type name; ERR_ARG for anything else. */
CMF_API cmf_status cmf_kv_type_parse(const char *name, cmf_kv_type *out);

/* Where a session computes. AUTO takes the Vulkan device when there is a
 * hardware one (not a software implementation such as lavapipe), the
 * model's weights and KV cache fit in 90% of its memory and one warm-up
 * step runs there; else the CPU, the reason logged once per model at info
 * level (docs/GPU.md). GPU asks for the Vulkan device (CMF_VK_DEVICE=<index>
 * picks one) and fails with ERR_UNSUPPORTED, naming what is missing, when
 * this build or machine has none or it cannot run the model's graph. */
typedef enum cmf_device { CMF_DEVICE_AUTO = 0, CMF_DEVICE_CPU = 1, CMF_DEVICE_GPU = 2 } cmf_device;

typedef struct cmf_session_params {
    int32_t n_ctx;       /* context length per sequence; 0 = the model's, and never above it */
    int32_t n_batch;     /* tokens per forward chunk, all sequences together (default 256) */
    int32_t n_threads;   /* 0 = one per online core */
    int32_t n_seq_max;   /* sequence slots for cmf_session_decode_batch (0 = 1) */
    cmf_kv_type kv_type; /* KV cache element type (default CMF_KV_F16) */
    cmf_device device;   /* default CMF_DEVICE_AUTO */
    const char *skill;   /* skill id (spec §9) the session runs; NULL (default) = the model's
                          * (cmf_model_params.skill); borrowed for the call */
} cmf_session_params;
CMF_API cmf_session_params cmf_session_params_default(void);

/* Creates a session on `model` (params NULL = defaults). On failure *out is
 * NULL; the message is in cmf_model_errmsg(model) and cmf_last_error(). */
CMF_API cmf_status cmf_session_new(cmf_model *model, const cmf_session_params *params, cmf_session **out);
CMF_API void cmf_session_free(cmf_session *session);
/* Message of the last failed call on this session ("" when none); valid
 * until the next failing call on it or cmf_session_free. */
CMF_API const char *cmf_session_errmsg(const cmf_session *session);
CMF_API int32_t cmf_session_n_ctx(const cmf_session *session);
/* Tokens currently in the KV cache. */
CMF_API int32_t cmf_session_n_past(const cmf_session *session);
/* Empties the KV cache (the active task stays active). */
CMF_API void cmf_session_reset(cmf_session *session);

/* Activates the task mask named `name` (spec §5) for this session, or none
 * when name is NULL (the default: a new session runs the whole model; the
 * file's default_task is not applied by itself, pass
 * cmf_model_default_task() to select it). While a task is active, dense
 * layers' inactive FFN neurons contribute nothing (as if their down_proj
 * columns were zero), inactive query heads output zero before o_proj, a
 * layer whose gate bit is clear is skipped (the hidden state passes it
 * unchanged), and MoE layers route over the task's experts only. FFN rows
 * are not applied to MoE layers nor head rows to linear-attention layers.
 * An all-ones mask gives the same logits, bit for bit, as none.
 * Switching to a different task empties the KV cache (cmf_session_n_past
 * becomes 0, cmf_session_logits NULL): nothing computed under one mask is
 * reused under another. Setting the active task again keeps the cache.
 * A mask whose meta "quality" is null or absent (not measured) is activated
 * with a warning on stderr (CMF_LOG). Errors, leaving the active task and
 * the cache as they were: ERR_NOT_FOUND (the file has no masks section, or
 * no task of that name; the message names the file and the task),
 * ERR_CONFIG (the mask's counts disagree with the model's layers),
 * ERR_UNSUPPORTED (per-loop masks), ERR_NOMEM. One thread at a time, as
 * every session call. */
CMF_API cmf_status cmf_session_set_task(cmf_session *session, const char *name);
/* Name of the active task, NULL when none; borrowed, lives with the model. */
CMF_API const char *cmf_session_task(const cmf_session *session);

/* Runs the session with skill `id` (spec §9) active, or the backbone alone
 * when id is NULL. Sessions on one model may run different skills at the
 * same time: a skill's binding (views of its `skill.<id>.*` tensors where
 * it has them, the backbone's elsewhere) is made on first use, shared by
 * every session asking for it and kept until cmf_model_free; no weight is
 * copied, and a skill no session runs is never read (its pages stay out
 * of memory). Switching to another skill empties the caches of the
 * sequences that follow the session's skill (those given their own with
 * cmf_session_seq_set_skill keep theirs); setting the active one again
 * keeps them. Errors, changing nothing: ERR_NOT_FOUND (the file has no
 * such skill; the message names the file and the id), ERR_CONFIG (the
 * skill's tensors change a layer's shape), ERR_NOMEM. */
CMF_API cmf_status cmf_session_set_skill(cmf_session *session, const char *id);
/* Id of the session's skill, NULL when the backbone runs alone; borrowed,
 * lives with the model. */
CMF_API const char *cmf_session_skill(const cmf_session *session);
/* Runs the session as a soft blend of n skills (spec §9, claim 14): ids[i]
 * (NULL = the backbone) with weights[i] (finite, >= 0, not all 0;
 * normalised to sum 1). Where the skills bind different matrices, every
 * skill's product is computed and the outputs are summed with the
 * weights, y = sum_i w_i (x W_i^T + b); no blended weight is built and
 * everything the skills share runs once. A 1-D tensor they differ in (a
 * norm weight or a bias, whose output is linear in it) is blended as
 * sum_i w_i v_i. n 0 ends a blend (its first skill runs alone, as
 * cmf_session_skill reports), n 1 is cmf_session_set_skill(ids[0]);
 * cmf_session_set_skill ends a blend too. At most 8 skills. A different
 * blend empties the caches of the sequences that follow the session's
 * skill; the same blend again keeps them. Errors, changing nothing:
 * ERR_ARG (n, a weight), ERR_NOT_FOUND (an id), ERR_UNSUPPORTED (the
 * skills differ in attention sinks, in a norm or bias one has and another
 * lacks, or in a tensor of a MoE, DeltaNet or Gemma-4 per-layer block: the
 * message names the layer), ERR_NOMEM. */
CMF_API cmf_status cmf_session_set_blend(cmf_session *session, int32_t n, const char *const *ids,
                                         const float *weights);
/* The same with weights softmax(-scores[i] / temperature) (temperature > 0,
 * finite scores): routing scores E (lower = closer, spec §9 recon-argmin)
 * turned into blend weights. ERR_ARG on a bad temperature or score. */
CMF_API cmf_status cmf_session_set_blend_scores(cmf_session *session, int32_t n, const char *const *ids,
                                                const float *scores, float temperature);
/* Adds a LoRA adapter to the session: `path` is a PEFT adapter's
 * safetensors file (tensors base_model.model.<name>.lora_A.weight [r, in]
 * and .lora_B.weight [out, r], f32/f16/bf16), with adapter_config.json
 * (r, lora_alpha, use_rslora) in the same folder. Every projection it
 * names runs as y = x W^T + s (x A^T) B^T with s = scale * lora_alpha / r
 * (lora_alpha / sqrt(r) with use_rslora), beside the weights as mapped:
 * nothing is merged and other sessions are unaffected. Up to 8 adapters
 * add up; adding one empties every sequence of the session. With a skill
 * or blend active the adapter applies to the projection each binds.
 * Errors name the file and the tensor, changing nothing: ERR_CONFIG (a
 * target the model lacks, a wrong shape, a lone lora_A or lora_B, a bad
 * adapter_config.json), ERR_UNSUPPORTED (a tensor that is not a LoRA
 * matrix, a target read inside a MoE, DeltaNet or Gemma-4 block or the
 * embedding, per-module ranks), ERR_IO / the safetensors reader's
 * statuses, ERR_ARG (a 9th adapter, a non-finite scale). */
CMF_API cmf_status cmf_session_add_lora(cmf_session *session, const char *path, float scale);
/* Removes every adapter (the sequences are emptied when there were any). */
CMF_API void cmf_session_clear_loras(cmf_session *session);
/* Skills of the file's registry (spec §9): their count, and the id of
 * record i (NULL out of range); borrowed, lives with the model. */
CMF_API int32_t cmf_model_n_skills(const cmf_model *model);
CMF_API const char *cmf_model_skill_id(const cmf_model *model, int32_t i);
/* Routes a request (spec §9, recon-argmin): scores every skill for the
 * prompt `tokens` — E = ||r - B B^T r||^2 / ||phi||^2 of the prompt's
 * feature phi at the skill's phi_layer, computed on the backbone — and
 * runs the session with the skill of smallest E (temperature 0, as
 * cmf_session_set_skill) or with the blend softmax(-E/temperature) over
 * the (at most 8 best) skills that have a routing block (temperature > 0,
 * as cmf_session_set_blend_scores). scores: NULL or [cmf_model_n_skills]
 * doubles, E per registry record (+inf: no routing block); *best (may be
 * NULL): the record of smallest E. Costs a forward pass over the prompt
 * up to the deepest phi_layer. Errors: ERR_NOT_FOUND (no skills, or none
 * with a routing block), ERR_PARSE (a bad selection block, naming the
 * skill), ERR_ARG, and those of set_skill / set_blend. */
CMF_API cmf_status cmf_session_route(cmf_session *session, const int32_t *tokens, size_t n, float temperature,
                                     double *scores, int32_t *best);
/* Gives sequence slot `seq` its own skill for cmf_session_decode_batch:
 * id NULL = follow the session's (the default), "" = the backbone alone.
 * One batch may hold sequences of different skills: a layer two skills
 * bind differently runs once per skill over that skill's tokens, every
 * other layer once for all; each sequence gives the logits it gives alone
 * with that skill. The slot is emptied when its skill changes. Errors:
 * ERR_ARG (slot out of range), ERR_NOT_FOUND, ERR_CONFIG as above;
 * ERR_UNSUPPORTED at decode when a skill replaces tensors of a layer whose
 * operator keeps session-wide weights (a DeltaNet mixer, a Gemma-4
 * per-layer block) while the session runs another skill there. */
CMF_API cmf_status cmf_session_seq_set_skill(cmf_session *session, int32_t seq, const char *id);

/* Appends n tokens to the sequence and runs them through the model (prompt
 * chunks of n_batch). logits: NULL, or the caller's buffer of
 * [n][n_vocab] floats when all_logits, else [n_vocab] for the last token.
 * Errors: ERR_CONTEXT (would pass n_ctx; nothing fed), ERR_ARG (id out of
 * range; nothing fed). */
CMF_API cmf_status cmf_session_decode(cmf_session *session, const int32_t *ids, size_t n, float *logits,
                                      bool all_logits);
/* A batch of tokens from several sequences of one session, run in one pass
 * over the weights (what servers and benchmarks use). Token i belongs to
 * sequence slot seq[i] (0 <= slot < n_seq_max; seq NULL = all slot 0) and
 * goes at that sequence's next position, in batch order; logits[i] (NULL =
 * only the last token) asks for its logits. All arrays have n_tokens
 * entries and are borrowed for the call. */
typedef struct cmf_batch {
    int32_t n_tokens;
    const int32_t *tokens;
    const int32_t *seq;
    const bool *logits;
} cmf_batch;
/* Runs a batch. out: NULL, or [n_wanted][n_vocab] floats, the wanted
 * tokens' logits in batch order. Each sequence gives the same logits as it
 * would alone (within f32 summation order). Slot 0 is the sequence the
 * single-sequence calls (cmf_session_decode, generate) use; the others are
 * only touched here. Errors, nothing fed: ERR_ARG (slot or id out of
 * range, empty batch), ERR_CONTEXT (a sequence would pass n_ctx). */
CMF_API cmf_status cmf_session_decode_batch(cmf_session *session, const cmf_batch *batch, float *out);
/* Tokens in the cache of sequence slot `seq`; -1 when out of range. */
CMF_API int32_t cmf_session_seq_n_past(const cmf_session *session, int32_t seq);
/* Empties sequence slot `seq` (-1 = every slot). ERR_ARG out of range. */
CMF_API cmf_status cmf_session_seq_reset(cmf_session *session, int32_t seq);
/* KV cache bytes one position of one sequence takes (all layers). */
CMF_API int64_t cmf_session_kv_bytes_per_token(const cmf_session *session);
/* What the session computes on: "cpu (avx2, 2 threads)", "vulkan: <device>
 * (Vulkan x.y; driver <name> <info>; N GiB device memory)"; borrowed, lives
 * with the model. */
CMF_API const char *cmf_session_device(const cmf_session *session);

/* Logits of the last token fed [n_vocab]; borrowed until the next call on
 * the session; NULL before any decode. */
CMF_API const float *cmf_session_logits(const cmf_session *session);

/* ---- sampling and generation -------------------------------------------- */
typedef struct cmf_sampling_params {
    float temperature;       /* <= 0: greedy (argmax, lowest id on ties) */
    int32_t top_k;           /* 0 = off */
    float top_p;             /* 1 = off */
    float min_p;             /* 0 = off: drop tokens with p < min_p * p_max */
    float repeat_penalty;    /* 1 = off; HF rule: logit > 0 ? /r : *r */
    int32_t repeat_last_n;   /* window of past tokens the penalties see; -1 = all */
    float presence_penalty;  /* 0 = off: logit -= p if the token occurred */
    float frequency_penalty; /* 0 = off: logit -= f * occurrences */
    uint64_t seed;           /* 0 = from the clock */
} cmf_sampling_params;
/* Defaults: greedy off (temperature 0.8), top_k 40, top_p 0.95, min_p 0.05,
 * no penalties, repeat_last_n 64, seed 0. */
CMF_API cmf_sampling_params cmf_sampling_params_default(void);

/* What the token callback sees. text is the text this token completed
 * (UTF-8 safe, stop strings withheld; may be empty), borrowed for the
 * callback. logprob is log-softmax of the model's raw logits (before
 * penalties and temperature). id -1 marks a final flush of held-back text. */
typedef struct cmf_token_info {
    int32_t id;
    const char *text;
    size_t text_len;
    float logprob;
    int32_t n_top;                /* entries in top_ids/top_logprobs (n_logprobs) */
    const int32_t *top_ids;       /* borrowed for the callback */
    const float *top_logprobs;
} cmf_token_info;
/* Return 0 to go on, non-zero to stop (finish reason CALLBACK). Runs on the
 * generating thread. */
typedef int (*cmf_token_fn)(void *user, const cmf_token_info *token);

typedef enum cmf_finish {
    CMF_FINISH_NONE = 0,
    CMF_FINISH_LENGTH,       /* max_tokens reached */
    CMF_FINISH_EOS,          /* an eos id was sampled (not emitted) */
    CMF_FINISH_STOP,         /* a stop string matched (not emitted) */
    CMF_FINISH_CONTEXT,      /* n_ctx full */
    CMF_FINISH_CANCELLED,    /* cmf_session_cancel */
    CMF_FINISH_CALLBACK,     /* the callback returned non-zero */
} cmf_finish;
/* "length", "eos", "stop", "context", "cancelled", "callback", "none". */
CMF_API const char *cmf_finish_name(cmf_finish f);

/* A request's say over the next token (constrained decoding: a grammar,
 * a JSON schema). Called on the generating thread, once per generated
 * token, with the hook's own `user`; any member may be NULL.
 * - mask: sets logits[i] = -INFINITY for every token i that may not come
 *   next (eos ids included, where the output may not end yet); logits are
 *   the model's raw row, before penalties and temperature. Non-zero
 *   return fails the generation (CMF_ERR_ARG, "logit hook").
 * - allows: whether `token` may come next (1 yes, 0 no, < 0 error). When
 *   set, a token is first drawn from the unmasked row and kept if allowed;
 *   mask runs only when it is refused. That is the distribution of
 *   masking first whenever the sampler truncates nothing (greedy, or
 *   top_k 0, top_p 1, min_p 0); otherwise mask always runs first.
 * - accept: the token chosen (never an eos that ends the generation);
 *   the hook advances its state. Non-zero fails the generation.
 * logprobs reported for a token are those of the raw row (before the
 * mask). The hook must stay valid until the generation ends. */
typedef struct cmf_logit_hook {
    int (*mask)(void *user, float *logits, int32_t n_vocab);
    int (*allows)(void *user, int32_t token);
    int (*accept)(void *user, int32_t token);
    void *user;
} cmf_logit_hook;

typedef struct cmf_generate_params {
    cmf_sampling_params sampling;
    int32_t max_tokens;            /* < 0: until eos/stop/context */
    const char *const *stop;       /* stop strings (borrowed for the call) */
    size_t n_stop;
    bool ignore_eos;
    int32_t n_logprobs;            /* top alternatives per token, 0..20 */
    cmf_token_fn on_token;         /* may be NULL */
    void *user;
    cmf_logit_hook hook;           /* constrained decoding; all NULL = none */
} cmf_generate_params;
/* Defaults: default sampling, max_tokens 256, no stop strings. */
CMF_API cmf_generate_params cmf_generate_params_default(void);

typedef struct cmf_generate_result {
    int32_t n_prompt;        /* prompt tokens actually computed (after prefix reuse) */
    int32_t n_reused;        /* prompt tokens reused from the cache */
    int32_t n_gen;           /* tokens generated (eos not counted) */
    cmf_finish finish;
    double prompt_ms, gen_ms;
} cmf_generate_result;

/* Continues the sequence `prompt` (the whole context: the session reuses the
 * longest prefix already in its cache and feeds the rest), then samples up
 * to max_tokens, streaming through on_token. result may be NULL.
 * Errors: ERR_CONTEXT (the prompt alone does not fit), ERR_ARG. A cancel,
 * stop, eos, length or callback stop is CMF_OK with result->finish set. */
CMF_API cmf_status cmf_session_generate(cmf_session *session, const int32_t *prompt, size_t n_prompt,
                                        const cmf_generate_params *params, cmf_generate_result *result);
/* Asks a running cmf_session_generate to stop after the current token
 * (finish CANCELLED). Thread-safe, async-signal-safe; a cancel that arrives
 * while no generation runs stops the next one at its first token. */
CMF_API void cmf_session_cancel(cmf_session *session);

/* ---- serving: many requests on one model (docs/API.md, "Serving") ------
 * A cmf_sched runs many independent requests on one model at once: its
 * own thread steps a batch holding one decode token of every running
 * request plus prefill chunks of those still reading their prompts, so
 * one pass over the weights serves them all (continuous batching). Each
 * request gets the tokens it would get alone (same prompt, params and
 * seed). Requests are admitted first come, first served, up to n_parallel
 * running; a finished request's sequence keeps its cache, and a later
 * prompt that starts with the same tokens reuses them (prefix reuse).
 * All cmf_sched_* and cmf_request_* calls are thread-safe. */
typedef struct cmf_sched cmf_sched;
typedef struct cmf_request cmf_request;

typedef struct cmf_sched_params {
    int32_t n_parallel;    /* requests running at once (sequence slots; default 4) */
    int32_t n_ctx;         /* context per sequence; 0 = every position kv_budget holds, at most the model's */
    int64_t kv_budget;     /* bytes of the paged KV cache all sequences share; 0 = 2 GiB; at most what
                            * n_parallel full contexts take is allocated. Less than one n_ctx: ERR_ARG */
    int32_t batch_tokens;  /* tokens per step: decode tokens plus prefill chunks (default 256) */
    int32_t queue_max;     /* requests waiting at most (default 256); beyond, submit fails ERR_BUSY */
    int32_t n_threads;     /* CPU threads; 0 = one per online core */
    cmf_kv_type kv_type;   /* default CMF_KV_F16 */
    cmf_device device;     /* default CMF_DEVICE_AUTO */
    const char *task;      /* task mask every request runs under (cmf_session_set_task), NULL = none */
    const char *const *lora;   /* n_lora LoRA adapters every request runs with (cmf_session_add_lora) */
    const float *lora_scale;   /* [n_lora], NULL = 1 each */
    int32_t n_lora;
} cmf_sched_params;
CMF_API cmf_sched_params cmf_sched_params_default(void);

/* Creates a scheduler on `model` (params NULL = defaults) and starts its
 * thread. The model must outlive it; the params' strings are read during
 * the call only. On failure *out is NULL; the message is in
 * cmf_last_error() and cmf_model_errmsg(model): ERR_ARG (a value out of
 * range, naming it), the errors of cmf_session_new, of
 * cmf_session_set_task and of cmf_session_add_lora. */
CMF_API cmf_status cmf_sched_new(cmf_model *model, const cmf_sched_params *params, cmf_sched **out);
/* Cancels every request still queued or running (finish CANCELLED), stops
 * the thread and frees the scheduler. Requests stay valid for
 * cmf_request_wait / _poll / _free after it. */
CMF_API void cmf_sched_free(cmf_sched *sched);
/* Per-sequence context and what the scheduler computes on (as
 * cmf_session_device; borrowed, lives with the scheduler). */
CMF_API int32_t cmf_sched_n_ctx(const cmf_sched *sched);
CMF_API const char *cmf_sched_device(const cmf_sched *sched);

typedef struct cmf_request_params {
    const int32_t *prompt;         /* the whole context to continue; copied at submit */
    size_t n_prompt;
    cmf_generate_params gen;       /* sampling, max_tokens, stop (copied), n_logprobs, hook;
                                    * on_token runs on the scheduler's thread: keep it short,
                                    * non-zero ends the request (finish CALLBACK). When
                                    * on_token is NULL, tokens are queued for cmf_request_poll. */
    const char *skill;             /* skill id to run; NULL = the model's (cmf_model_params.skill),
                                    * "" = the backbone alone; copied */
    bool skill_auto;               /* route (as cmf_session_route, temperature 0): skill ignored */
    void (*on_done)(void *user, cmf_request *req); /* NULL, or called once on the scheduler's
                                    * thread when the request ends (gen.user is its user);
                                    * it may read the request (cmf_request_wait returns at once there)
                                    * but must not free it */
} cmf_request_params;
CMF_API cmf_request_params cmf_request_params_default(void);

/* Queues a request. *out is the caller's handle (free it with
 * cmf_request_free). Errors, nothing queued: ERR_ARG (empty prompt, an id
 * out of range, bad params), ERR_CONTEXT (the prompt alone passes
 * cmf_sched_n_ctx), ERR_NOT_FOUND (no such skill), ERR_BUSY (queue_max
 * requests already waiting), ERR_CANCELLED (the scheduler is stopping). */
CMF_API cmf_status cmf_sched_submit(cmf_sched *sched, const cmf_request_params *params, cmf_request **out);

/* Ends the request at its next step (finish CANCELLED), wherever it is:
 * queued, reading its prompt or generating. Any thread, any time before
 * cmf_request_free; a no-op once it has ended. */
CMF_API void cmf_request_cancel(cmf_request *req);

typedef struct cmf_request_result {
    cmf_status status;         /* CMF_OK, or why it failed (cmf_request_errmsg) */
    cmf_generate_result gen;   /* n_prompt = prompt tokens computed, n_reused = taken from the
                                * cache, n_gen, finish, prompt_ms, gen_ms */
    double queue_ms;           /* submit to admission */
    double ttft_ms;            /* submit to the first generated token (0 when none) */
    int32_t skill;             /* registry record of the skill that ran, -1 = the backbone */
} cmf_request_result;
/* True once the request has ended (and on_done has returned). */
CMF_API bool cmf_request_done(const cmf_request *req);
/* Blocks until the request has ended; res (may be NULL) gets its result.
 * Returns res->status. */
CMF_API cmf_status cmf_request_wait(cmf_request *req, cmf_request_result *res);
/* Next queued token of a request submitted without on_token: 1 = *tok
 * holds it (its strings are borrowed until the next poll or free), 0 =
 * nothing new within timeout_ms (0: do not wait, < 0: wait as long as it
 * takes), -1 = the request has ended and every token was read. */
CMF_API int cmf_request_poll(cmf_request *req, int timeout_ms, cmf_token_info *tok);
/* Routing scores of a skill_auto request (cmf_session_route's E per
 * registry record) into scores[0..cap): the count written, 0 when the
 * request was not routed (or not yet). */
CMF_API size_t cmf_request_route_scores(const cmf_request *req, double *scores, size_t cap);
/* Message of a failed request ("" when none); lives with the request. */
CMF_API const char *cmf_request_errmsg(const cmf_request *req);
/* Cancels the request if it has not ended, waits for it to end and frees
 * it. NULL is a no-op. */
CMF_API void cmf_request_free(cmf_request *req);

/* Counters for monitoring (a snapshot). */
typedef struct cmf_sched_stats {
    int32_t running, waiting;      /* requests admitted and generating / queued */
    int32_t n_parallel;
    int64_t kv_used, kv_total;     /* cache positions in blocks held by running requests / in all blocks */
    uint64_t requests_done;        /* ended, any finish, errors included */
    uint64_t prompt_tokens;        /* prompt tokens submitted */
    uint64_t prompt_computed;      /* of those, computed (the rest came from the cache) */
    uint64_t gen_tokens;           /* tokens generated */
    uint64_t prefix_queries, prefix_hits; /* admissions, and those that reused cached tokens */
    uint64_t preemptions;          /* requests put back in the queue for KV blocks (recomputed at re-admission) */
    uint64_t steps;                /* forward passes */
    uint64_t graph_hits, graph_misses; /* steps replaying a built graph / building one */
} cmf_sched_stats;
CMF_API void cmf_sched_stats_get(const cmf_sched *sched, cmf_sched_stats *out);

/* ---- constrained decoding: grammars and JSON Schema (docs/CONSTRAINED.md)
 * A cmf_grammar is compiled for one model (its vocabulary): GBNF text in
 * llama.cpp's syntax, a JSON Schema, or "any JSON object". It is
 * immutable and thread-safe: many requests share it, each with its own
 * cmf_grammar_state, which follows the tokens of one output and gives the
 * logit hook of a generation. The vocabulary's token trie is built on the
 * model's first grammar and shared by all (tens to hundreds of ms once).
 * The model must outlive its grammars, a grammar its states. */
typedef struct cmf_grammar cmf_grammar;
typedef struct cmf_grammar_state cmf_grammar_state;

/* Compiles `len` bytes of GBNF (rule "root" is the whole output). Errors:
 * ERR_PARSE naming line and column ("grammar: line 3, column 14:
 * unterminated character class"), undefined rules, left recursion;
 * ERR_ARG (no vocabulary); ERR_NOMEM. On failure *out is NULL. */
CMF_API cmf_status cmf_grammar_compile(cmf_model *model, const char *gbnf, size_t len, cmf_grammar **out);
/* Compiles a JSON Schema (`len` bytes of JSON). Keywords it cannot enforce
 * are ERR_UNSUPPORTED naming the keyword and its path ("json schema:
 * /properties/age/multipleOf: keyword 'multipleOf' not supported");
 * ERR_PARSE (bad JSON), ERR_ARG (contradictions such as minItems above
 * maxItems). */
CMF_API cmf_status cmf_grammar_from_json_schema(cmf_model *model, const char *schema, size_t len,
                                                cmf_grammar **out);
/* Any JSON object (response_format "json_object"). */
CMF_API cmf_status cmf_grammar_json_object(cmf_model *model, cmf_grammar **out);
CMF_API void cmf_grammar_free(cmf_grammar *grammar);

/* A state at the start of the output. Not thread-safe per state. */
CMF_API cmf_status cmf_grammar_state_new(cmf_grammar *grammar, cmf_grammar_state **out);
/* An independent copy (same position, same history); NULL when out of memory. */
CMF_API cmf_grammar_state *cmf_grammar_state_copy(const cmf_grammar_state *state);
CMF_API void cmf_grammar_state_free(cmf_grammar_state *state);
/* 1 when `token` may come next (eos: where the output may end), 0 when
 * not, < 0 on error (out of memory). */
CMF_API int cmf_grammar_state_allows(cmf_grammar_state *state, int32_t token);
/* Sets logits[i] = -INFINITY for every token that may not come next
 * (i < n_vocab; ids past the model's vocabulary are refused too). */
CMF_API cmf_status cmf_grammar_state_mask(cmf_grammar_state *state, float *logits, int32_t n_vocab);
/* Advances past `token`. ERR_ARG (naming the token) when it is not
 * allowed here; the state is then unchanged. An accepted eos changes
 * nothing but counts as a token for rollback. */
CMF_API cmf_status cmf_grammar_state_accept(cmf_grammar_state *state, int32_t token);
/* Undoes the last n accepted tokens (the server's stop handling);
 * ERR_ARG when fewer were accepted. */
CMF_API cmf_status cmf_grammar_state_rollback(cmf_grammar_state *state, size_t n_tokens);
/* Tokens accepted so far (after rollbacks). */
CMF_API size_t cmf_grammar_state_n_tokens(const cmf_grammar_state *state);
/* Whether the output may end here (the grammar is complete). */
CMF_API bool cmf_grammar_state_can_end(const cmf_grammar_state *state);
/* The logit hook (cmf_generate_params.hook) driving `state`: mask,
 * allows and accept as above. The state must outlive the generation. */
CMF_API cmf_logit_hook cmf_grammar_state_hook(cmf_grammar_state *state);

#ifdef __cplusplus
}
#endif
#endif /* CMF_H */
