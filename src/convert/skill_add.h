/* skill_add.h — making a skill from a donor checkpoint (spec §9): the donor
 * (a Hugging Face folder of the same base) is converted tensor by tensor in
 * the backbone's own encoding, compared with the backbone, and the tensors
 * that changed are appended as `skill.<id>.<name>` with a `skills` registry
 * record, by append-only growth (no existing byte of the file moves). */
#ifndef CMF_CONVERT_SKILL_ADD_H
#define CMF_CONVERT_SKILL_ADD_H

#include "cmf.h"
#include <jansson.h>
#include <stdint.h>

/* Relative delta ‖Δ‖/‖W‖ a donor tensor must exceed to become part of the
 * skill, by default. Δ is measured between the donor encoded in the
 * backbone's dtype and the backbone (both decoded): a tensor the donor
 * leaves unchanged encodes to the same bytes and has Δ = 0 exactly. */
#define CMF_SKILL_MIN_DELTA_DEFAULT 1e-3

typedef struct cmf__skill_add_opts {
    const char *id;   /* [A-Za-z0-9_-]{1,64}, new in the file */
    const char *name; /* human name for the registry; NULL = id */
    double min_delta;
    const json_t *extra; /* more keys for the record (selection, quality), or NULL; borrowed */
} cmf__skill_add_opts;
cmf__skill_add_opts cmf__skill_add_opts_default(void);

typedef struct cmf__skill_add_result {
    uint64_t n_compared; /* donor tensors compared */
    uint64_t n_kept;     /* appended as skill tensors */
    uint64_t bytes;      /* their payload bytes */
    double max_delta;    /* largest relative delta seen */
    char max_name[256];  /* and where */
} cmf__skill_add_result;

/* Adds skill o->id to the single file at `path` from `donor_dir`. Refused
 * before anything is written: a shard set or SKILL_FILE, a bad or taken id,
 * a donor tensor the backbone lacks or whose shape differs (CMF_ERR_CONFIG
 * naming the first such tensor in directory order), a backbone tensor the
 * donor lacks, an arch field that differs, a donor equal to the backbone
 * within min_delta (CMF_ERR_NOT_FOUND). The kept payloads are held in
 * memory until the append; a failure during the append leaves the file as
 * it was (the envelope is rewritten last). */
cmf_status cmf__skill_add(const char *path, const char *donor_dir, const cmf__skill_add_opts *o,
                          cmf__skill_add_result *result);

#endif
