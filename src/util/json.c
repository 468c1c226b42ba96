/* json.c — jansson wrappers with path-naming errors. */
#include "util/json.h"
#include "util/error.h"

#include <math.h>

cmf_status cmf__json_parse(const char *data, size_t len, const char *what, json_t **out)
{
    json_error_t e;
    *out = json_loadb(data, len, JSON_ALLOW_NUL, &e);
    if (!*out)
        return cmf__error(CMF_ERR_PARSE, "%s: invalid JSON at line %d column %d (byte %d): %s", what,
                          e.line, e.column, e.position, e.text);
    return CMF_OK;
}

static cmf_status missing(const char *path, const char *key)
{
    return cmf__error(CMF_ERR_NOT_FOUND, "%s%s%s: missing", path ? path : "", path ? "." : "", key);
}
static cmf_status wrong(const char *path, const char *key, const char *want)
{
    return cmf__error(CMF_ERR_PARSE, "%s%s%s: expected %s", path ? path : "", path ? "." : "", key, want);
}

cmf_status cmf__json_get_int(const json_t *obj, const char *key, const char *path, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return missing(path, key);
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return CMF_OK;
    }
    if (json_is_real(v)) { /* 2.0 is an integer in Python's JSON too */
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9.0e15) {
            *out = (int64_t)d;
            return CMF_OK;
        }
    }
    return wrong(path, key, "an integer");
}

cmf_status cmf__json_get_num(const json_t *obj, const char *key, const char *path, double *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return missing(path, key);
    if (!json_is_number(v)) return wrong(path, key, "a number");
    *out = json_number_value(v);
    return CMF_OK;
}

cmf_status cmf__json_get_str(const json_t *obj, const char *key, const char *path, const char **out)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return missing(path, key);
    if (!json_is_string(v)) return wrong(path, key, "a string");
    *out = json_string_value(v);
    return CMF_OK;
}

cmf_status cmf__json_get_bool(const json_t *obj, const char *key, const char *path, bool *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return missing(path, key);
    if (!json_is_boolean(v)) return wrong(path, key, "true or false");
    *out = json_is_true(v);
    return CMF_OK;
}

#define OPT(name, type, getter)                                                                     \
    cmf_status cmf__json_opt_##name(const json_t *obj, const char *key, const char *path, type def, \
                                    type *out)                                                      \
    {                                                                                               \
        json_t *v = json_object_get(obj, key);                                                      \
        if (!v || json_is_null(v)) {                                                                \
            *out = def;                                                                             \
            return CMF_OK;                                                                          \
        }                                                                                           \
        return getter(obj, key, path, out);                                                         \
    }
OPT(int, int64_t, cmf__json_get_int)
OPT(num, double, cmf__json_get_num)
OPT(bool, bool, cmf__json_get_bool)
OPT(str, const char *, cmf__json_get_str)
#undef OPT

char *cmf__json_dump(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
}
