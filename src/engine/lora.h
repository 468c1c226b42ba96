/* lora.h — LoRA adapters read for run time (engine/lora.c): per target
 * projection the adapter's A [r][in] and B [out][r] as f32 matrices, and
 * the PEFT scale alpha / r. The engine adds s * (x A^T) B^T beside the
 * projection (cmf__engine_set_loras); the model's weights stay as mapped. */
#ifndef CMF_ENGINE_LORA_H
#define CMF_ENGINE_LORA_H

#include "model/model.h"

#define CMF__LORA_MAX 8 /* adapters per session */

typedef struct cmf__lora_entry {
    char *target;      /* the model's tensor, "<name>.weight" (backbone name) */
    int64_t layer;     /* its layer, -1 for lm_head */
    int64_t rank;
    float *a, *b;      /* [rank][in], [out][rank], owned */
    cmf__qmat qa, qb;  /* f32 views of a and b */
    double gain_a;     /* in * max|A|: bounds |x A^T| per unit of max|x| */
    double gain;       /* rank * in * max|A| * max|B|: bounds |(x A^T) B^T| likewise */
} cmf__lora_entry;

/* What an adapter may add (lora.c, docs/SECURITY.md "Finite numbers"):
 * gain_a and gain * max(1, |s|) at most 2^62 at total scale s, so inputs
 * up to 2^63 in magnitude keep x A^T, its product with B^T and the scaled
 * sum below 2^127 (under FLT_MAX even with worst-case f32 rounding). */
#define CMF__LORA_GAIN_MAX 0x1p62

typedef struct cmf__lora {
    char *path;
    double scale;              /* lora_alpha / r (/ sqrt(r) with use_rslora) */
    cmf__lora_entry *entries;  /* [n], sorted by target */
    size_t n;
    int64_t max_rank;
    bool head;                 /* an entry targets lm_head */
} cmf__lora;

/* Reads the PEFT adapter `path` (safetensors) and adapter_config.json
 * beside it (both regular files), checking each pair against model m: the
 * target must be a 2-D projection of m the graph multiplies by on its own,
 * lora_A [r, in] and lora_B [out, r] must fit it, every value must be
 * finite and the pair's gain within CMF__LORA_GAIN_MAX at the config's
 * scale. Errors name the file and the tensor: CMF_ERR_CONFIG (no such
 * model tensor, wrong shape, a lone A or B, a value that is not finite or
 * could overflow, bad config), CMF_ERR_UNSUPPORTED (a tensor that is not
 * a LoRA matrix, a target inside a fused operator, per-module ranks), the
 * safetensors reader's statuses. */
cmf_status cmf__lora_open(const cmf__model *m, const char *path, cmf__lora **out);
/* The same over the adapter's safetensors bytes in memory (`path` names
 * them in messages; the A/B matrices are copied, the bytes may go after)
 * with the PEFT scale given: the fuzz entry point. */
cmf_status cmf__lora_parse(const cmf__model *m, const uint8_t *data, uint64_t size, const char *path, double scale,
                           cmf__lora **out);
void cmf__lora_free(cmf__lora *lo);
/* The entry for model tensor `target` (backbone name), or NULL. */
const cmf__lora_entry *cmf__lora_find(const cmf__lora *lo, const char *target);
/* Writes `out`: file `in` with adapters paths[0..n) (n 1..8, each at user
 * scale scale[i]) merged into the backbone projections they name, W + s B A,
 * each merged tensor encoded back in its dtype; header provenance.lora_merge
 * lists the adapters. Atomic (nothing is left on failure); `out` must not
 * be an input. Errors: cmf__lora_open's and the writer's, naming the file. */
/* "adapter_config.json" beside the adapter file `path` (malloc'd; NULL when
 * out of memory): an input of every writer that takes --lora. */
char *cmf__lora_config_path(const char *path);
cmf_status cmf__lora_merge(const char *in, const char *const *paths, const float *scale, int n, const char *out);
/* `name` without a leading "skill.<id>." (the backbone name a skill replaces). */
const char *cmf__skill_strip(const char *name);

#endif
