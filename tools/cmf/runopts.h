/* runopts.h — options shared by the generation commands (run, chat,
 * logits, bench, ppl): token lists, sampling flags, and opening a model
 * plus a session with the common flags. Implemented in cmd_run.c. */
#ifndef CMF_TOOLS_RUNOPTS_H
#define CMF_TOOLS_RUNOPTS_H

#include "cmf.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parses "1,2,3" into a malloc'd array; false (message printed) on error. */
bool runopt_tokens(const char *cmd, const char *s, int32_t **ids, size_t *n);
/* If argv[*i] is a sampling flag, consumes it (and its value) into sp and
 * returns 1; 0 when not a sampling flag; -1 on a bad value (printed). */
int runopt_sampling(const char *cmd, int argc, char **argv, int *i, cmf_sampling_params *sp);
/* Help text of the sampling flags. */
extern const char *RUNOPT_SAMPLING_HELP;
/* Session options beyond the model file. */
typedef struct runopt_session {
    long long n_ctx, n_threads, n_batch, n_seq; /* 0 = defaults */
    const char *kv_type;                        /* NULL = the library default (f16) */
    const char *gpu;                            /* "on", "off", "auto"; NULL = $CMF_GPU, else auto */
} runopt_session;
/* Parses --gpu's value (NULL: $CMF_GPU, else "auto") into a device; false
 * (message printed) for anything but on, off, auto. */
bool runopt_device(const char *cmd, const char *gpu, cmf_device *out);
/* Help line of --gpu. */
#define RUNOPT_GPU_HELP "  --gpu on|off|auto  on: the Vulkan device (an error if none can run the model); off and\n" \
                        "                     auto (default; also $CMF_GPU): the CPU, for now (docs/GPU.md)\n"
/* Help line of --kv-type, with the command's default. */
#define RUNOPT_KV_HELP(def) "  --kv-type T        KV cache element type: f16, f32 or q8 (default " def ")\n"
/* Opens the model and a session and activates task mask `task` (NULL =
 * none; "default" = the file's default_task unless a task is named so);
 * prints the error and returns false. */
bool runopt_open(const char *cmd, const char *path, const char *skill, const char *task, const runopt_session *so,
                 cmf_model **model, cmf_session **session);
/* A memory field of /proc/self/status ("VmHWM:", "VmRSS:", "RssAnon:")
 * in bytes; 0 if unknown. */
uint64_t runopt_proc_status(const char *key);

#endif
