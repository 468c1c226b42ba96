/* tokshared_json.c — reading tokenizer.json fields the same way in every
 * stage: errors that name "<what>: <json path>: ...", optional string /
 * bool / count fields, {"String"|"Regex"} patterns and the one loader of
 * "Sequence" components (normalizers, pre-tokenizers, processors,
 * decoders). */
#include "text/tokenizer_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cmf_status cmf__tk_err(const char *what, const char *path, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cmf__error(CMF_ERR_TOKENIZER, "%s: %s: %s", what, path, msg);
}

char *cmf__tk_dup(const char *s, size_t len)
{
    char *d = malloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = 0;
    return d;
}

/* "path.key" into p; a path too long is cut (it only labels an error). */
static const char *key_path(char *p, size_t cap, const char *path, const char *key)
{
    int n = snprintf(p, cap, "%s.%s", path, key);
    if (n < 0) p[0] = 0;
    return p;
}

cmf_status cmf__tk_opt_str(const json_t *j, const char *key, const char *what, const char *path,
                           const char **out, size_t *len)
{
    const json_t *v = json_object_get(j, key);
    *out = NULL;
    *len = 0;
    if (!v || json_is_null(v)) return CMF_OK;
    if (!json_is_string(v)) {
        char p[TK_PATH_MAX];
        return cmf__tk_err(what, key_path(p, sizeof p, path, key), "expected a string");
    }
    *out = json_string_value(v);
    *len = json_string_length(v);
    return CMF_OK;
}

cmf_status cmf__tk_opt_bool(const json_t *j, const char *key, const char *what, const char *path, bool def,
                            bool *out)
{
    const json_t *v = json_object_get(j, key);
    *out = def;
    if (!v || json_is_null(v)) return CMF_OK;
    if (!json_is_boolean(v)) {
        char p[TK_PATH_MAX];
        return cmf__tk_err(what, key_path(p, sizeof p, path, key), "expected a boolean");
    }
    *out = json_is_true(v);
    return CMF_OK;
}

cmf_status cmf__tk_opt_uint(const json_t *j, const char *key, const char *what, const char *path,
                            size_t def, size_t *out)
{
    const json_t *v = json_object_get(j, key);
    *out = def;
    if (!v || json_is_null(v)) return CMF_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        char p[TK_PATH_MAX];
        snprintf(p, sizeof p, "%s.%s", path, key);
        return cmf__tk_err(what, p, "expected a non-negative integer");
    }
    *out = (size_t)json_integer_value(v);
    return CMF_OK;
}

cmf_status cmf__tk_pattern(const json_t *j, const char *key, const char *what, const char *path, tk_re *re,
                           char **lit, size_t *lit_len, bool *regex)
{
    char p[TK_PATH_MAX];
    snprintf(p, sizeof p, "%s.%s", path, key);
    const json_t *v = json_object_get(j, key);
    const json_t *s = json_object_get(v, "String"), *r = json_object_get(v, "Regex");
    if (!json_is_object(v) || (!json_is_string(s) && !json_is_string(r)))
        return cmf__tk_err(what, p, "expected {\"String\": ...} or {\"Regex\": ...}");
    const json_t *x = json_is_string(s) ? s : r;
    *regex = !json_is_string(s);
    *lit_len = json_string_length(x);
    if (!(*lit = cmf__tk_dup(json_string_value(x), *lit_len)))
        return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
    return cmf__tk_re_compile(re, *lit, *lit_len, !*regex, what, p);
}

cmf_status cmf__tk_load_seq(const json_t *j, const char *key, const char *what, const char *path, size_t elem,
                            tk_load_fn load, void **kids, size_t *n_kids)
{
    char q[TK_PATH_MAX];
    const json_t *arr = json_object_get(j, key);
    snprintf(q, sizeof q, "%s.%s", path, key);
    if (!json_is_array(arr)) return cmf__tk_err(what, q, "expected an array");
    size_t n = json_array_size(arr);
    /* n comes from the parsed document: one element each, not a number read from it */
    char *v = calloc(n ? n : 1, elem);
    if (!v) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
    *kids = v;
    *n_kids = n; /* set before loading: the caller's free walks every element */
    for (size_t i = 0; i < n; i++) {
        snprintf(q, sizeof q, "%s.%s[%zu]", path, key, i);
        cmf_status st = load(v + i * elem, json_array_get(arr, i), what, q);
        if (st) return st;
    }
    return CMF_OK;
}

cmf_status cmf__tk_str_field(const json_t *j, const char *key, const char *what, const char *path, char **out,
                             size_t *len)
{
    const char *s;
    cmf_status st = cmf__tk_opt_str(j, key, what, path, &s, len);
    if (st) return st;
    if (!s) {
        char p[TK_PATH_MAX];
        return cmf__tk_err(what, key_path(p, sizeof p, path, key), "expected a string");
    }
    if (!(*out = cmf__tk_dup(s, *len))) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory");
    return CMF_OK;
}

cmf_status cmf__tk_component_type(const json_t *j, const char *what, const char *path, const char **type)
{
    char p[TK_PATH_MAX];
    if (!json_is_object(j)) return cmf__tk_err(what, path, "expected an object");
    const json_t *t = json_object_get(j, "type");
    if (!json_is_string(t)) return cmf__tk_err(what, key_path(p, sizeof p, path, "type"), "expected a string");
    *type = json_string_value(t);
    return CMF_OK;
}

cmf_status cmf__tk_unknown_type(const char *what, const char *path, const char *type)
{
    char p[TK_PATH_MAX];
    return cmf__tk_err(what, key_path(p, sizeof p, path, "type"), "unknown '%s'", type);
}

size_t cmf__tk_id_limit(size_t entries)
{
    if (entries >= (CMF__TK_MAX_IDS - CMF__TK_ID_SLACK) / 2) return CMF__TK_MAX_IDS;
    return 2 * entries + CMF__TK_ID_SLACK;
}

cmf_status cmf__tk_check_id(int64_t id, size_t entries, const char *what, const char *path)
{
    size_t limit = cmf__tk_id_limit(entries);
    if (id >= 0 && (uint64_t)id < limit) return CMF_OK;
    return cmf__tk_err(what, path,
                       "id %lld out of range: %zu entries allow ids 0..%zu (twice the entries plus %zu, below %zu)",
                       (long long)id, entries, limit - 1, CMF__TK_ID_SLACK, CMF__TK_MAX_IDS);
}
