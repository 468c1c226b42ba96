/* skills.h — the header `skills` registry of spec §9 / §9.1 as data: skill
 * ids and records, the layers a skill replaces, and the recon-argmin
 * `selection` block (f16 base64 mean and basis) with its score
 * E = ‖r − BBᵀr‖² / ‖φ‖² and its construction from feature vectors. No model
 * and no engine here: features come from the caller. */
#ifndef CMF_FORMAT_SKILLS_H
#define CMF_FORMAT_SKILLS_H

#include "cmf.h"
#include "util/json.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CMF_SKILL_ID_MAX 64
/* Default rank k of a selection basis built by cmf__skill_selection_build
 * (capped at n_prompts - 1). */
#define CMF_SKILL_RANK_DEFAULT 4

/* An id names tensors `skill.<id>.<name>`: 1..64 of [A-Za-z0-9_-]. */
bool cmf__skill_id_ok(const char *id);
/* The record with "id" == id in header.skills, or NULL; *index (may be
 * NULL) gets its position. */
json_t *cmf__skills_find(const json_t *header, const char *id, size_t *index);
/* The layer of a tensor name ("model.layers.12.mlp..." -> 12), or -1. */
long cmf__skill_layer_of(const char *name);

/* A decoded selection block. basis holds the k directions row by row
 * ([rank][dim]); on disk the block stores it as d x k row-major. */
typedef struct cmf__skill_selection {
    int phi_layer;
    uint32_t dim, rank;
    float *mean;  /* [dim] */
    float *basis; /* [rank][dim] */
} cmf__skill_selection;

/* Decodes `sel` (the record's "selection" object): metric must be "mse",
 * phi_layer an integer in [0, n_layers], mean exactly dim f16 values and
 * basis a non-zero multiple of dim (at most dim columns). `what` names the
 * file and skill in messages ("m.cmf: skill 'sql'"). CMF_ERR_PARSE /
 * CMF_ERR_SIZE / CMF_ERR_NOMEM. Free with cmf__skill_selection_free. */
cmf_status cmf__skill_selection_parse(const json_t *sel, uint32_t dim, int n_layers, const char *what,
                                      cmf__skill_selection *out);
void cmf__skill_selection_free(cmf__skill_selection *s);
/* E = ‖r − BBᵀr‖² / ‖φ‖², r = φ − mean (phi: [dim]); +inf when ‖φ‖ is 0. */
double cmf__skill_selection_error(const cmf__skill_selection *s, const float *phi);
/* Soft-blend weights w = softmax(−E/T) over the finite entries of E[n]
 * (an infinite E gets weight 0; all infinite: all 0). CMF_ERR_ARG when T is
 * not a finite number > 0. */
cmf_status cmf__skill_blend_weights(const double *E, size_t n, double T, double *w);
/* Builds a selection block from n feature rows phi[n][dim]: mean, and the
 * top `rank` principal directions of the centred rows (power iteration on
 * the n x n Gram matrix with deflation; rank capped at n - 1, directions
 * whose variance is nil are dropped). *out is a new object {metric,
 * phi_layer, rank, mean, basis}. CMF_ERR_ARG when n < 2. */
cmf_status cmf__skill_selection_build(const float *phi, uint32_t n, uint32_t dim, uint32_t rank, int phi_layer,
                                      json_t **out);

/* f16 little-endian values as base64 (RFC 4648, padded); NULL on no memory. */
char *cmf__f16_base64_encode(const float *v, size_t n);
/* Decodes base64 of f16 values into out[n]; CMF_ERR_PARSE when the text is
 * not base64 or does not hold exactly n values (*n_found gets the count
 * when it is base64 of whole f16 values, else 0). out may be NULL to count. */
cmf_status cmf__f16_base64_decode(const char *s, float *out, size_t n, size_t *n_found, const char *what);

/* ---- skills in files (skillfile.c) -------------------------------------- */
typedef struct cmf__file cmf__file;
/* hash64 of the directory re-encoded with only the backbone entries (every
 * name not under "skill."): for a file without skills it is the envelope's
 * directory hash ([0x78]), and adding or removing skills never changes it. */
cmf_status cmf__file_backbone_dir_hash(const cmf__file *f, uint64_t *out);
/* Drops skill `id` from the single file `path` in place: its registry
 * record and its `skill.<id>.*` directory entries go (append-only: the new
 * header and directory are written at the tail, the envelope last); their
 * payload bytes stay until cmf__file_compact. CMF_ERR_NOT_FOUND when the
 * file has neither. *n_dropped / *bytes: the entries dropped. */
cmf_status cmf__skill_remove(const char *path, const char *id, uint64_t *n_dropped, uint64_t *bytes);
/* Sets `key` of skill `id`'s registry record to `value` (a new reference
 * is taken) in place: a header-only append. */
cmf_status cmf__skill_record_set(const char *path, const char *id, const char *key, json_t *value);
/* Writes skill `id` of `path` as a standalone SKILL_FILE (§9.1) at `out`:
 * its `skill.<id>.*` tensors, the base's arch, and its registry record with
 * base_dir_hash (cmf__file_backbone_dir_hash of `path`) and base_arch.
 * `path` must verify (whole chain; CMF_ERR_HASH) unless `force`: then the
 * problem goes to the output's provenance.skill_export.unverified_source
 * and *unverified is set. */
cmf_status cmf__skill_export(const char *path, const char *id, const char *out, bool force, uint64_t *n_tensors,
                             bool *unverified);
/* Writes the specialist at `out`: `base`'s backbone tensors with the skill
 * file's tensors in their place, the base's header (without its skills
 * registry; provenance.skill_applied added), vocab, masks and index.
 * CMF_ERR_HASH when the base's backbone directory hash is not the skill's
 * base_dir_hash, unless `force` (then *forced is set). Both inputs must
 * verify (CMF_ERR_HASH) unless `force`: then the problems go to
 * provenance.skill_applied.unverified_source and *unverified is set (so
 * does a skill file whose export recorded one). */
cmf_status cmf__skill_apply(const char *base, const char *skill, const char *out, bool force, uint64_t *n_replaced,
                            bool *forced, bool *unverified);

#endif
