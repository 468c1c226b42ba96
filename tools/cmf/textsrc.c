/* textsrc.c — resolves SRC for tokenize/detokenize/template: a .cmf (vocab
 * section + header.tokenizer_config, token strings through the tokenizer),
 * a tokenizer.json file, or a Hugging Face directory (tokenizer.json,
 * tokenizer_config.json, chat_template.jinja / chat_template.json, in the
 * precedence transformers uses). Everything is copied out: nothing borrows
 * from a mapping once textsrc_open returns. Every file is opened as a
 * user-named input: a FIFO or device is refused, never waited on. */
#include "textsrc.h"
#include "format/format.h"
#include "text/template.h"
#include "text/tokenizer.h"
#include "util/error.h"
#include "util/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void textsrc_free(textsrc *s)
{
    if (!s) return;
    free(s->tokenizer_json);
    free(s->chat_template);
    free(s->bos_token);
    free(s->eos_token);
    memset(s, 0, sizeof *s);
    s->bos_token_id = -1;
    s->pad_token_id = -1;
}

/* tokenizer_config's token fields are a string or an AddedToken object. */
static cmf_status token_field(const json_t *cfg, const char *key, char **out)
{
    const json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v)) return CMF_OK;
    *out = dup_n(json_string_value(v), json_string_length(v));
    return *out ? CMF_OK : cmf__error(CMF_ERR_NOMEM, "out of memory");
}

static cmf_status load_json_file(const char *path, json_t **out)
{
    char *text;
    size_t len;
    *out = NULL;
    cmf_status st = cmf__read_regular(path, &text, &len);
    if (st) return st;
    json_error_t e;
    /* model_max_length in tokenizer_config.json can exceed 64 bits */
    *out = json_loadb(text, len, JSON_DECODE_INT_AS_REAL, &e);
    free(text);
    if (!*out) return cmf__error(CMF_ERR_PARSE, "%s: line %d column %d: %s", path, e.line, e.column, e.text);
    return CMF_OK;
}

static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static cmf_status open_dir(const char *dir, textsrc *s)
{
    cmf_status st = CMF_OK;
    json_t *cfg = NULL, *cj = NULL;
    char *p = cmf__path_join(dir, "tokenizer.json");
    if (!p) return cmf__error(CMF_ERR_NOMEM, "out of memory");
    if (!exists(p)) {
        st = cmf__error(CMF_ERR_NOT_FOUND, "%s: no tokenizer.json in this directory", dir);
        goto done;
    }
    if ((st = cmf__read_regular(p, &s->tokenizer_json, &s->tokenizer_json_len))) goto done;
    free(p);
    if (!(p = cmf__path_join(dir, "tokenizer_config.json"))) { st = cmf__error(CMF_ERR_NOMEM, "out of memory"); goto done; }
    if (exists(p)) {
        if ((st = load_json_file(p, &cfg))) goto done;
        if ((st = token_field(cfg, "bos_token", &s->bos_token))) goto done;
        if ((st = token_field(cfg, "eos_token", &s->eos_token))) goto done;
    }
    free(p);
    /* transformers' precedence: chat_template.jinja, chat_template.json, tokenizer_config.json */
    if (!(p = cmf__path_join(dir, "chat_template.jinja"))) { st = cmf__error(CMF_ERR_NOMEM, "out of memory"); goto done; }
    if (exists(p)) {
        size_t len;
        st = cmf__read_regular(p, &s->chat_template, &len);
        goto done;
    }
    free(p);
    if (!(p = cmf__path_join(dir, "chat_template.json"))) { st = cmf__error(CMF_ERR_NOMEM, "out of memory"); goto done; }
    const json_t *t = NULL;
    const char *src = "chat_template.json";
    if (exists(p)) {
        if ((st = load_json_file(p, &cj))) goto done;
        t = cmf__chat_template_pick(json_object_get(cj, "chat_template"));
    }
    if ((!t || json_is_null(t)) && cfg)
        t = cmf__chat_template_pick(json_object_get(cfg, "chat_template")), src = "tokenizer_config.json";
    if (json_is_null(t)) t = NULL;
    if (t && !json_is_string(t)) {
        st = cmf__error(CMF_ERR_PARSE, "%s/%s: field 'chat_template': expected a string", dir, src);
        goto done;
    }
    if (t && !(s->chat_template = dup_n(json_string_value(t), json_string_length(t))))
        st = cmf__error(CMF_ERR_NOMEM, "out of memory");
done:
    free(p);
    json_decref(cfg);
    json_decref(cj);
    return st;
}

/* Token string of `id` through the tokenizer; NULL when out of range. */
static cmf_status piece_of(const cmf__tok *tok, int64_t id, char **out)
{
    if (id < 0 || (uint64_t)id >= cmf__tok_vocab_size(tok)) return CMF_OK;
    const char *p = cmf__tok_piece(tok, (int32_t)id);
    if (!p) return CMF_OK;
    *out = dup_n(p, strlen(p));
    return *out ? CMF_OK : cmf__error(CMF_ERR_NOMEM, "out of memory");
}

static cmf_status open_cmf(const char *path, textsrc *s)
{
    cmf__file *f = NULL;
    cmf__open_opts o = cmf__open_opts_default();
    cmf_status st = cmf__file_open(path, &o, &f);
    if (st) return st;
    cmf__tok *tok = NULL;
    const cmf__section *v = cmf__file_vocab(f);
    if (!v || !v->data) {
        st = cmf__error(CMF_ERR_NOT_FOUND, "%s: no vocab section (tokenizer.json)", path);
        goto done;
    }
    if (v->len > SIZE_MAX - 1 || !(s->tokenizer_json = dup_n((const char *)v->data, (size_t)v->len))) {
        st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory copying the vocab section", path);
        goto done;
    }
    s->tokenizer_json_len = (size_t)v->len;
    s->is_cmf = 1;
    const json_t *tc = json_object_get(f->header, "tokenizer_config");
    if (!json_is_object(tc)) goto done; /* no chat bundle: ChatML fallback later */
    const json_t *t = json_object_get(tc, "chat_template");
    if (json_is_string(t) && !(s->chat_template = dup_n(json_string_value(t), json_string_length(t)))) {
        st = cmf__error(CMF_ERR_NOMEM, "out of memory");
        goto done;
    }
    const json_t *b = json_object_get(tc, "bos_token_id"), *pd = json_object_get(tc, "pad_token_id");
    if (json_is_integer(b)) s->bos_token_id = json_integer_value(b);
    if (json_is_integer(pd)) s->pad_token_id = json_integer_value(pd);
    const json_t *eos = json_object_get(tc, "eos_token_ids");
    if (json_is_integer(eos)) s->eos_token_ids[s->n_eos_token_ids++] = json_integer_value(eos);
    size_t i;
    const json_t *e;
    json_array_foreach(eos, i, e) {
        if (json_is_integer(e) && s->n_eos_token_ids < sizeof s->eos_token_ids / sizeof s->eos_token_ids[0])
            s->eos_token_ids[s->n_eos_token_ids++] = json_integer_value(e);
    }
    if (s->bos_token_id >= 0 || s->n_eos_token_ids) {
        if ((st = cmf__tok_load(s->tokenizer_json, s->tokenizer_json_len, path, &tok))) goto done;
        if ((st = piece_of(tok, s->bos_token_id, &s->bos_token))) goto done;
        if (s->n_eos_token_ids && (st = piece_of(tok, s->eos_token_ids[0], &s->eos_token))) goto done;
    }
done:
    cmf__tok_free(tok);
    cmf__file_free(f);
    return st;
}

cmf_status textsrc_open(const char *path, textsrc *s)
{
    memset(s, 0, sizeof *s);
    s->bos_token_id = -1;
    s->pad_token_id = -1;
    struct stat sb;
    if (stat(path, &sb) != 0) return cmf__error(CMF_ERR_IO, "%s: no such file or directory", path);
    cmf_status st;
    if (S_ISDIR(sb.st_mode)) {
        st = open_dir(path, s);
    } else {
        unsigned char magic[4] = {0};
        FILE *fp = NULL;
        if ((st = cmf__fopen_regular(path, &fp))) return st;
        size_t got = fread(magic, 1, 4, fp);
        fclose(fp);
        if (got == 4 && magic[0] == 'C' && magic[1] == 'M' && magic[2] == 'F') {
            st = open_cmf(path, s);
        } else if (got == 4 && !memcmp(magic, "GGUF", 4)) { /* not JSON: say what it is, not where JSON fails */
            return cmf__error(CMF_ERR_MAGIC,
                              "%s: a GGUF file; this command reads a .cmf, a tokenizer.json or a Hugging Face "
                              "folder (import the GGUF first: `cmf import-gguf %s --output FILE.cmf`)",
                              path, path);
        } else if (got == 4 && magic[0] != '{' && magic[0] != ' ' && magic[0] != '\n' && magic[0] != '\t' &&
                   magic[0] != '\r' && magic[0] != 0xef) { /* JSON starts with '{' (after space or a BOM) */
            return cmf__error(CMF_ERR_MAGIC,
                              "%s: neither a .cmf file nor a tokenizer.json (starts with %02x %02x %02x %02x); this "
                              "command reads a .cmf, a tokenizer.json or a Hugging Face folder",
                              path, magic[0], magic[1], magic[2], magic[3]);
        } else {
            st = cmf__read_regular(path, &s->tokenizer_json, &s->tokenizer_json_len);
        }
    }
    if (st) textsrc_free(s);
    return st;
}
