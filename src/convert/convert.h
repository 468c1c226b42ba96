/* convert.h — Hugging Face checkpoint folder -> CMF v2 file, in process.
 * Reads config.json (mapped onto the header `arch` block of
 * docs/ARCH_HEADER.md), safetensors (one file or a sharded index), the
 * tokenizer files (vocab section and chat bundle), and streams tensor by
 * tensor into the format writer: memory is bounded by the largest tensor.
 * Also requant (decode + re-encode every tensor of a .cmf). */
#ifndef CMF_CONVERT_H
#define CMF_CONVERT_H

#include "cmf.h"
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Quantization policy and behaviour. Defaults from cmf__convert_opts_default():
 * quant = q8_row, no overrides, write the file, no progress, no plan. */
typedef struct cmf__convert_opts {
    int quant;        /* default dtype of 2-D weights (cmf_dtype) */
    int quant_attn;   /* self_attn.* / linear_attn.* 2-D weights; -1 = quant */
    int quant_ffn;    /* mlp.* 2-D weights (dense, experts, shared expert); -1 = quant */
    int quant_embed;  /* model.embed_tokens.weight, lm_head.weight, per-layer embeds; -1 = quant */
    bool dry_run;     /* plan only: nothing is written */
    bool force;       /* requant: go on when the source fails verification */
    FILE *plan_out;   /* when non-NULL, one line per tensor (name shape dtype bytes) + total */
    /* Called after each tensor with bytes of source consumed so far. */
    void (*progress)(void *ctx, uint64_t done_bytes, uint64_t total_bytes);
    void *progress_ctx;
    /* For callers that want the encoded tensors, not a file (cmf skill add):
     * `plan` sees every planned tensor in directory order and may change
     * its dtype (a non-OK status stops the conversion before anything is
     * encoded); with `sink` set, nothing is written and out_path may be
     * NULL: each encoded payload goes to sink (data valid during the call
     * only). Both NULL by default. */
    cmf_status (*plan)(void *ctx, const char *name, int ndim, const uint64_t *shape, int *dtype);
    cmf_status (*sink)(void *ctx, const char *name, int dtype, int ndim, const uint64_t *shape, const void *data,
                       uint64_t nbytes);
    void *hook_ctx;
} cmf__convert_opts;

cmf__convert_opts cmf__convert_opts_default(void);

/* What a conversion did (or, with dry_run, would do). */
typedef struct cmf__convert_result {
    uint64_t n_tensors;     /* directory entries written */
    uint64_t payload_bytes; /* sum of tensor payload bytes */
    uint64_t file_bytes;    /* final file size (estimate within a few KiB for dry_run) */
    bool source_unverified; /* requant: the source failed verification (opts.force) */
} cmf__convert_result;

/* Converts the checkpoint folder `dir` (config.json, *.safetensors or
 * model.safetensors.index.json, tokenizer.json, optional
 * tokenizer_config.json / generation_config.json / chat_template.jinja) to
 * `out_path`. `opts` NULL = defaults; `result` may be NULL. Errors name the
 * file, tensor and offset: ERR_IO, ERR_PARSE (bad safetensors/JSON),
 * ERR_BOUNDS (offsets past the file), ERR_DTYPE (source dtype not
 * F32/F16/BF16), ERR_CONFIG (unknown model_type, unmapped config field that
 * changes the math, missing tensor, shape against config), ERR_SIZE. Nothing
 * is left at out_path on failure; an out_path that is one of the files read
 * or not a regular file is refused (cmf__output_check). */
cmf_status cmf__convert_hf(const char *dir, const char *out_path, const cmf__convert_opts *opts,
                           cmf__convert_result *result);

/* Maps a parsed config.json onto a new `arch` object (docs/ARCH_HEADER.md).
 * `what` names the source in messages. Caller decrefs *out. */
cmf_status cmf__convert_arch(const json_t *config, const char *what, json_t **out);

/* Re-encodes every tensor of `in` under the policy of `opts` (each tensor is
 * decoded to f32 row by row and quantized again), keeping header (quant_type
 * and provenance updated), vocab, masks and index sections. The source's
 * whole hash chain is verified first: CMF_ERR_HASH (naming the file and the
 * first problem) unless opts.force, which goes on, records the problem as
 * provenance.requant.unverified_source and sets result->source_unverified.
 * `out_path` must pass cmf__output_check against every shard of `in`. */
cmf_status cmf__requant(const char *in, const char *out_path, const cmf__convert_opts *opts,
                        cmf__convert_result *result);

/* Parses a --quant style name ("q8", "q4t", "bf16", ...) into a dtype the
 * converter can write; -1 when unknown or not writable by the converter. */
int cmf__convert_quant_from_name(const char *name);

/* Applies a command-line policy flag: "--quant", "--quant-attn",
 * "--quant-ffn" or "--quant-embed" with its value. Returns CMF_ERR_NOT_FOUND
 * (no message) when `flag` is none of them, CMF_ERR_ARG (message lists the
 * accepted names) when the value is unknown. */
cmf_status cmf__convert_apply_flag(cmf__convert_opts *o, const char *flag, const char *value);

#endif
