/* features.h — what recon-argmin routing (spec §9) needs from the forward
 * pass: a prompt's feature φ at a layer, and the score E of every skill of
 * a model's file. Kept apart from the engine proper: it runs a private
 * engine over the prompt with the layers from `layer` on gated off. */
#ifndef CMF_ENGINE_FEATURES_H
#define CMF_ENGINE_FEATURES_H

#include "cmf.h"
#include "compute/backend.h"
#include "model/model.h"
#include <stddef.h>
#include <stdint.h>

/* φ[hidden] = the mean over the n prompt tokens of final_norm(h), h the
 * hidden state entering layer `layer` (0 = the embeddings, n_layer = after
 * the last layer). The final norm puts every token on one scale, so a
 * token with huge activations (often the first) does not own the mean.
 * Runs on the weights `m` is bound to: route with the backbone bound; on
 * backend `be` (NULL = a private one with all cores, whose packed copies
 * of the weights are made again each call). Errors: CMF_ERR_ARG (layer outside 0..n_layer, n < 1, a token id out of
 * range), CMF_ERR_CONTEXT (n past max_position_embeddings), engine errors. */
cmf_status cmf__engine_features(const cmf__model *m, cmf__backend *be, const int32_t *tokens, int64_t n, int64_t layer,
                                 float *phi);

/* E of every record of the file's `skills` registry, in registry order:
 * E[i] = ‖r − BBᵀr‖²/‖φ‖² with φ at the record's phi_layer (computed once
 * per distinct layer), +inf for a record without a selection block.
 * n_skills must be the registry's length (CMF_ERR_ARG otherwise); *best
 * (may be NULL) gets the index of the smallest finite E, or -1 when none
 * is finite. A bad selection block is CMF_ERR_PARSE naming the file and
 * the skill. Blend weights for `--blend T` are softmax(-E/T) over the
 * finite entries. */
cmf_status cmf__skill_route_scores(const cmf__model *m, cmf__backend *be, const int32_t *tokens, int64_t n, double *E,
                                   size_t n_skills, int *best);

#endif
