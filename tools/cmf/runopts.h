/* runopts.h — options shared by the generation commands (run, chat,
 * logits, bench, ppl): token lists, the sampling options' table rows, and
 * opening a model plus a session with the common flags. Implemented in
 * cmd_run.c. */
#ifndef CMF_TOOLS_RUNOPTS_H
#define CMF_TOOLS_RUNOPTS_H

#include "cmf.h"
#include "opts.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parses "1,2,3" into a malloc'd array; false (message printed) on error. */
bool runopt_tokens(const char *cmd, const char *s, int32_t **ids, size_t *n);
/* --greedy (dest: a cmf_sampling_params): temperature 0. */
int runopt_greedy(const char *cmd, void *dest, const char *name, const char *value);
/* The sampling options as opt_spec rows, a heading first, storing into the
 * cmf_sampling_params *sp. */
#define RUNOPT_SAMPLING_SPEC(sp)                                                                                    \
    {"", NULL, OPT_TEXT, NULL, NULL, "\nsampling (defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05):\n",   \
     NULL, NULL},                                                                                                   \
        {"--greedy", NULL, OPT_CALL, (sp), NULL, "argmax decoding (same as --temp 0)", NULL, runopt_greedy},        \
        {"--temp", "--temperature", OPT_FLOAT, &(sp)->temperature, "T", "temperature; 0 = greedy", NULL, NULL, OPT_RANGE(0, 100)},     \
        {"--top-k", NULL, OPT_I32, &(sp)->top_k, "K", "keep the K most likely tokens (0 = off)", NULL, NULL, OPT_RANGE(0, INT32_MAX)},        \
        {"--top-p", NULL, OPT_FLOAT, &(sp)->top_p, "P", "nucleus: smallest set with probability >= P (1 = off)",     \
         NULL, NULL, OPT_RANGE(0, 1)},                                                                                               \
        {"--min-p", NULL, OPT_FLOAT, &(sp)->min_p, "P", "drop tokens below P x the top probability (0 = off)", NULL, \
         NULL, OPT_RANGE(0, 1)},                                                                                                     \
        {"--repeat-penalty", NULL, OPT_FLOAT, &(sp)->repeat_penalty, "R",                                           \
         "HF repetition penalty over the last --repeat-last-n tokens (1 = off)", NULL, NULL,      \
         OPT_RANGE(0.01, 100)},                       \
        {"--repeat-last-n", NULL, OPT_I32, &(sp)->repeat_last_n, "N", "penalty window; -1 = whole context", "64",   \
         NULL, OPT_RANGE(-1, INT32_MAX)},                                                                                                     \
        {"--presence-penalty", NULL, OPT_FLOAT, &(sp)->presence_penalty, "P",                                       \
         "subtract P from tokens already present (0 = off)", NULL, NULL, OPT_RANGE(-2, 2)},                                           \
        {"--frequency-penalty", NULL, OPT_FLOAT, &(sp)->frequency_penalty, "F", "subtract F x count (0 = off)",     \
         NULL, NULL, OPT_RANGE(-2, 2)},                                                                                               \
        {"--seed", NULL, OPT_U64, &(sp)->seed, "S", "random seed", "from the clock", NULL}
/* Session options beyond the model file. */
typedef struct runopt_session {
    long long n_ctx, n_threads, n_batch, n_seq; /* 0 = defaults */
    const char *kv_type;                        /* NULL = the library default (f16) */
    const char *gpu;                            /* "on", "off", "auto"; NULL = $CMF_GPU, else auto */
    const opt_list *lora;                       /* --lora FILE[:SCALE] values; NULL = none */
} runopt_session;
/* The --lora row (dest: an opt_list of at most 8). */
#define RUNOPT_LORA_SPEC(list)                                                                                      \
    {"--lora", NULL, OPT_LIST, (list), "FILE[:S]",                                                                  \
     "add a LoRA adapter: a PEFT adapter's safetensors file, its\n"                                                \
     "adapter_config.json beside it; S scales it (default 1).\n"                                                   \
     "Repeatable, at most 8; they add up",                                                                          \
     NULL, NULL}
/* --skill and --blend rows (dest: const char ** and float *). */
#define RUNOPT_SKILL_SPEC(skill, blend)                                                                             \
    {"--skill", NULL, OPT_STR, (skill), "ID|auto",                                                                  \
     "run a skill of the file; auto: route each request to the\n"                                                  \
     "skill of smallest recon-argmin score (spec 9; the scores go\n"                                              \
     "to stderr)",                                                                                                  \
     NULL, NULL},                                                                                                   \
        {"--blend", NULL, OPT_FLOAT, (blend), "T",                                                                  \
         "with --skill auto: run the soft blend of the routed skills,\n"                                          \
         "weights softmax(-E/T), instead of the best alone",                                                        \
         NULL, NULL, OPT_RANGE(0, 1000)}
/* Checks --skill / --blend (blend needs auto, T > 0); false (message
 * printed): a usage error. *autoroute: --skill auto was given. */
bool runopt_skill_check(const char *cmd, const char *skill, float blend, bool *autoroute);
/* --skill auto: routes session s for prompt ids[0..n) (cmf_session_route
 * at temperature blend, 0 = the best alone) and prints the scores and
 * the choice to stderr unless quiet; false (message printed) on failure. */
bool runopt_route(const char *cmd, cmf_model *m, cmf_session *s, const int32_t *ids, size_t n, float blend, bool quiet);
/* Prints --skill auto's line to stderr: the choice `best` and each
 * skill's E[0..cmf_model_n_skills) (with its blend weight when blend > 0). */
void runopt_route_say(const char *cmd, cmf_model *m, const double *E, int32_t best, float blend);
/* Splits a --lora value FILE[:S] into FILE (malloc'd; NULL when out of
 * memory) and *scale (1 without S). */
char *runopt_lora_split(const char *v, float *scale);
/* Adds each --lora value to session s; false (message printed) on a bad
 * value or a refused adapter. */
bool runopt_add_loras(const char *cmd, cmf_session *s, const opt_list *l);
/* Parses --gpu's value (NULL: $CMF_GPU, else "auto") into a device; false
 * (message printed) for anything but on, off, auto. */
bool runopt_device(const char *cmd, const char *gpu, cmf_device *out);
/* Help of --gpu. */
#define RUNOPT_GPU_HELP "on: the Vulkan device (an error if none can run the model); off: the\n" \
                        "CPU; auto (default; also $CMF_GPU): a hardware GPU when the model\n" \
                        "fits and runs there, else the CPU (CMF_LOG=info says why)"
/* Help of --kv-type (the command's default goes in the row's `def`). */
#define RUNOPT_KV_HELP "KV cache element type: f16, f32 or q8"
/* Checks the session options (ranges, --gpu and $CMF_GPU, --kv-type) and
 * fills `out` (may be NULL) from the defaults; false (message printed) on a
 * bad value: the caller exits with CLI_EXIT_USAGE. */
bool runopt_check(const char *cmd, const runopt_session *so, cmf_session_params *out);
/* The task named `task`, or for "default" the file's default_task when no
 * task is named "default"; NULL (printed) when there is none. */
const char *runopt_task(const char *cmd, const char *path, cmf_model *m, const char *task);
/* Opens the model and a session and activates task mask `task` (NULL =
 * none; "default" = the file's default_task unless a task is named so);
 * prints the error and returns false. */
bool runopt_open(const char *cmd, const char *path, const char *skill, const char *task, const runopt_session *so,
                 cmf_model **model, cmf_session **session);
/* runopt_open's second half: a session on the open model m with the
 * options of so, its --lora adapters and task mask `task`; prints the
 * error and returns false (*session NULL). */
bool runopt_session_open(const char *cmd, const char *path, cmf_model *m, const char *task, const runopt_session *so,
                         cmf_session **session);
/* A memory field of /proc/self/status ("VmHWM:", "VmRSS:", "RssAnon:")
 * in bytes; 0 if unknown. */
uint64_t runopt_proc_status(const char *key);

#endif
