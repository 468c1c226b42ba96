/* hf_bundle.c — the chat bundle (spec §6.1 header.tokenizer_config): chat
 * template, eos/bos/pad ids. Token strings from tokenizer_config.json are
 * resolved to ids through tokenizer.json (added tokens, then the model's
 * vocab). Missing optional files are simply absent; malformed ones are
 * errors naming the file and field. */
#include "convert/convert_internal.h"
#include "text/template.h"
#include "util/error.h"
#include "util/file.h"
#include "util/json.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Reads dir/name as JSON when the file exists; *out = NULL when absent.
 * `ints_as_real`: tokenizer_config.json carries integers past 64 bits
 * (model_max_length = 1e30 written as an integer); none of its integers is
 * used here, so they are read as doubles rather than refused. */
static cmf_status load_json_opt(const char *dir, const char *name, bool ints_as_real, json_t **out)
{
    *out = NULL;
    char *p = cmf__path_join(dir, name);
    if (!p) return cmf__error(CMF_ERR_NOMEM, "out of memory");
    struct stat sb;
    cmf_status st = CMF_OK;
    if (stat(p, &sb) == 0) {
        char *text;
        size_t len;
        st = cmf__read_file(p, &text, &len);
        if (!st) {
            json_error_t e;
            *out = json_loadb(text, len, JSON_ALLOW_NUL | (ints_as_real ? JSON_DECODE_INT_AS_REAL : 0), &e);
            if (!*out)
                st = cmf__error(CMF_ERR_PARSE, "%s: invalid JSON at line %d column %d (byte %d): %s", p, e.line,
                                e.column, e.position, e.text);
            free(text);
        }
    }
    free(p);
    return st;
}

/* Token content -> id through tokenizer.json; -1 when not found. */
static int64_t token_id(const json_t *tok, const char *content)
{
    const json_t *added = json_object_get(tok, "added_tokens");
    size_t i;
    const json_t *e;
    json_array_foreach(added, i, e) {
        const char *c = json_string_value(json_object_get(e, "content"));
        if (c && !strcmp(c, content) && json_is_integer(json_object_get(e, "id")))
            return json_integer_value(json_object_get(e, "id"));
    }
    const json_t *vocab = json_object_get(json_object_get(tok, "model"), "vocab");
    if (json_is_object(vocab)) {
        const json_t *v = json_object_get(vocab, content);
        if (json_is_integer(v)) return json_integer_value(v);
    } else if (json_is_array(vocab)) { /* Unigram: [[piece, score], ...] */
        json_array_foreach(vocab, i, e) {
            const char *c = json_string_value(json_array_get(e, 0));
            if (c && !strcmp(c, content)) return (int64_t)i;
        }
    }
    return -1;
}

/* tokenizer_config's token fields are a string or an AddedToken object. */
static const char *token_text(const json_t *v)
{
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_object(v)) return json_string_value(json_object_get(v, "content"));
    return NULL;
}

static void add_ids(json_t *arr, const json_t *v, int64_t vocab_size, const char *src)
{
    json_t *one = NULL;
    if (json_is_integer(v)) one = json_array(), json_array_append(one, (json_t *)v), v = one;
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e) {
        if (!json_is_integer(e)) continue;
        json_int_t id = json_integer_value(e);
        if (id < 0 || id >= vocab_size) {
            CMF_WARN("%s: eos id %lld is outside the vocabulary (0..%lld) and can never be generated; left out",
                     src, (long long)id, (long long)vocab_size - 1);
            continue;
        }
        bool dup = false;
        size_t j;
        const json_t *x;
        json_array_foreach(arr, j, x) if (json_integer_value(x) == id) dup = true;
        if (!dup) json_array_append_new(arr, json_integer(id));
    }
    json_decref(one);
}

static cmf_status read_template(const char *dir, const json_t *tc, json_t **out)
{
    *out = NULL;
    char *p = cmf__path_join(dir, "chat_template.jinja");
    if (!p) return cmf__error(CMF_ERR_NOMEM, "out of memory");
    struct stat sb;
    cmf_status st = CMF_OK;
    if (stat(p, &sb) == 0) {
        char *text;
        size_t len;
        st = cmf__read_file(p, &text, &len);
        if (!st) {
            *out = json_stringn(text, len);
            free(text);
            if (!*out) st = cmf__error(CMF_ERR_PARSE, "%s: not valid UTF-8", p);
        }
        free(p);
        return st;
    }
    free(p);
    json_t *cj;
    if ((st = load_json_opt(dir, "chat_template.json", false, &cj))) return st;
    const json_t *t = cj ? json_object_get(cj, "chat_template") : NULL;
    const char *src = "chat_template.json";
    if (!t || json_is_null(t)) t = json_object_get(tc, "chat_template"), src = "tokenizer_config.json";
    t = cmf__chat_template_pick(t); /* named templates: "default" */
    if (t && !json_is_null(t)) {
        if (!json_is_string(t)) {
            json_decref(cj);
            return cmf__error(CMF_ERR_PARSE, "%s/%s: field 'chat_template': expected a string", dir, src);
        }
        *out = json_incref((json_t *)t);
    }
    json_decref(cj);
    return CMF_OK;
}

/* id for a special token: tokenizer_config's string when it names the key
 * (null there means "none"), else generation_config, else config. */
static json_t *special_id(const json_t *tc, const json_t *gen, const json_t *cfg, const json_t *tok,
                          const char *tok_key, const char *id_key, int64_t vocab_size, json_t *bundle,
                          const char *text_key)
{
    const json_t *v = tc ? json_object_get(tc, tok_key) : NULL;
    if (v) {
        const char *s = token_text(v);
        if (!s) return json_null();
        json_object_set_new(bundle, text_key, json_string(s));
        int64_t id = token_id(tok, s);
        if (id >= 0) return json_integer(id);
        CMF_WARN("tokenizer_config.json: %s '%s' is not a token of tokenizer.json", tok_key, s);
        return json_null();
    }
    const json_t *g = gen ? json_object_get(gen, id_key) : NULL;
    if (!g || json_is_null(g)) g = json_object_get(cfg, id_key);
    if (json_is_array(g)) g = json_array_get(g, 0);
    if (json_is_integer(g) && json_integer_value(g) >= 0 && json_integer_value(g) < vocab_size)
        return json_integer(json_integer_value(g));
    return json_null();
}

cmf_status cmf__convert_check_template(const json_t *bundle, const char *what)
{
    const json_t *t = bundle ? json_object_get(bundle, "chat_template") : NULL;
    if (!json_is_string(t)) return CMF_OK;
    cmf__template *tmpl = NULL;
    cmf_status st = cmf__template_compile(json_string_value(t), json_string_length(t), &tmpl);
    cmf__template_free(tmpl);
    return st ? cmf__error_prefix(st, "%s: chat template", what) : CMF_OK;
}

cmf_status cmf__convert_chat_bundle(const char *dir, const json_t *config, const json_t *tok, int64_t vocab_size,
                                    json_t **out)
{
    *out = NULL;
    json_t *tc = NULL, *gen = NULL, *tmpl = NULL;
    cmf_status st;
    if ((st = load_json_opt(dir, "tokenizer_config.json", true, &tc))) return st;
    if ((st = load_json_opt(dir, "generation_config.json", false, &gen))) goto done;
    if ((st = read_template(dir, tc, &tmpl))) goto done;
    json_t *b = json_object();
    json_object_set_new(b, "chat_template", tmpl ? tmpl : json_null());
    tmpl = NULL;
    if ((st = cmf__convert_check_template(b, dir))) {
        json_decref(b);
        goto done;
    }
    json_t *eos = json_array();
    if (gen) add_ids(eos, json_object_get(gen, "eos_token_id"), vocab_size, "generation_config.json");
    add_ids(eos, json_object_get(config, "eos_token_id"), vocab_size, "config.json");
    if (tc && token_text(json_object_get(tc, "eos_token"))) {
        const char *s = token_text(json_object_get(tc, "eos_token"));
        int64_t id = token_id(tok, s);
        if (id >= 0) {
            json_t *one = json_integer(id);
            add_ids(eos, one, vocab_size, "tokenizer_config.json");
            json_decref(one);
        } else {
            CMF_WARN("tokenizer_config.json: eos_token '%s' is not a token of tokenizer.json", s);
        }
    }
    json_object_set_new(b, "eos_token_ids", eos);
    json_object_set_new(b, "bos_token_id",
                        special_id(tc, gen, config, tok, "bos_token", "bos_token_id", vocab_size, b, "bos_token"));
    json_object_set_new(b, "pad_token_id",
                        special_id(tc, gen, config, tok, "pad_token", "pad_token_id", vocab_size, b, "pad_token"));
    if (tc && token_text(json_object_get(tc, "eos_token")))
        json_object_set_new(b, "eos_token", json_string(token_text(json_object_get(tc, "eos_token"))));
    const json_t *abt = tc ? json_object_get(tc, "add_bos_token") : NULL;
    if (json_is_boolean(abt)) json_object_set(b, "add_bos_token", (json_t *)abt);
    *out = b;
done:
    json_decref(tc);
    json_decref(gen);
    json_decref(tmpl);
    return st;
}
