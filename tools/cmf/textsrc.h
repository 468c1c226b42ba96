/* textsrc.h — resolves the SRC argument of `cmf tokenize`, `cmf detokenize`
 * and `cmf template`: a .cmf file (vocab section + header tokenizer_config),
 * a tokenizer.json file, or a directory holding tokenizer.json and
 * tokenizer_config.json (+ optional chat_template.jinja / .json). Everything
 * in the struct is owned by it and lives until textsrc_free. */
#ifndef CMF_TOOLS_TEXTSRC_H
#define CMF_TOOLS_TEXTSRC_H

#include "cmf.h"
#include <stddef.h>
#include <stdint.h>

typedef struct textsrc {
    char *tokenizer_json;      /* tokenizer.json bytes, NUL-terminated; never NULL after open */
    size_t tokenizer_json_len;
    char *chat_template;       /* Jinja source, or NULL when the source has none */
    char *bos_token;           /* special token strings, or NULL when not set */
    char *eos_token;
    /* Token ids where the source states them (.cmf header tokenizer_config);
     * -1 / 0 entries when not stated. */
    int64_t bos_token_id;
    int64_t eos_token_ids[8];
    size_t n_eos_token_ids;
    int64_t pad_token_id;
    int is_cmf;                /* 1 when SRC was a .cmf file */
} textsrc;

/* Opens SRC. A .cmf is recognised by its magic, a directory by stat, any
 * other file is read as tokenizer.json. For a .cmf, bos/eos strings are the
 * pieces of bos_token_id / eos_token_ids[0] looked up in the tokenizer's
 * added_tokens and model vocab. Errors: ERR_IO, ERR_NOT_FOUND (no
 * tokenizer.json), ERR_PARSE, or the container's own status; message set.
 * On failure *s is left empty (textsrc_free is still safe). */
cmf_status textsrc_open(const char *path, textsrc *s);
void textsrc_free(textsrc *s);

#endif
