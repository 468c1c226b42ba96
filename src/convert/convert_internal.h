/* convert_internal.h — what the converter's files share: the chat bundle
 * builder, the quantization policy and the tensor order. Not for use
 * outside src/convert/. */
#ifndef CMF_CONVERT_INTERNAL_H
#define CMF_CONVERT_INTERNAL_H

#include "cmf.h"
#include "convert/convert.h"
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Builds header.tokenizer_config (spec §6.1) from the folder's
 * tokenizer_config.json, chat_template.jinja / chat_template.json,
 * generation_config.json and config.json; token strings are resolved to ids
 * through tokenizer.json (`tok`). Caller decrefs *out. */
cmf_status cmf__convert_chat_bundle(const char *dir, const json_t *config, const json_t *tok, int64_t vocab_size,
                                    json_t **out);

/* The runtime refuses a file whose chat template does not compile (too
 * deep, a syntax error): the converters check it with the same compiler
 * before writing anything. bundle: header.tokenizer_config (a NULL or null
 * template passes). Errors name `what` (the source file or key): the
 * compiler's status (ERR_TEMPLATE) and message. */
cmf_status cmf__convert_check_template(const json_t *bundle, const char *what);

/* The dtype a tensor gets under `opts`: the per-role override or the
 * default, then the spec's rules (1-D and < 32 elements: f16, or the float
 * dtype itself when the default is f32/bf16; routers keep a float dtype;
 * matrix-only dtypes on non-2-D tensors: f16; cols % 32 for dtypes that need
 * it: q8_row). `cols` is the product of all dims but the first. */
int cmf__convert_pick_dtype(const cmf__convert_opts *opts, const char *name, int ndim, const uint64_t *shape);

/* Directory order: embeddings, layers in numeric order (a layer's expert
 * tensors role-contiguous: every gate_proj, then up_proj, then down_proj),
 * other model tensors, lm_head. strcmp-like. */
int cmf__convert_name_order(const char *a, const char *b);

/* CMF_ERR_ARG (message set) when a dtype of `o` is not one the converter
 * writes (f32 f16 bf16 q8_row q8_2f q4_block q4_tiled q4tp). */
cmf_status cmf__convert_check_opts(const cmf__convert_opts *o);

/* "Q8_ROW" style upper-case name of a dtype for header.quant_type. */
void cmf__convert_quant_type_name(int dtype, char out[16]);

#endif
