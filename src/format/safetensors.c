/* safetensors.c — bounds-checked safetensors reader (single file and
 * index.json shard sets). Layout: u64 LE header length N, N bytes of JSON
 * {name: {dtype, shape, data_offsets:[begin,end]}}, then the data section;
 * offsets are relative to byte 8+N. Every number is checked before it
 * addresses memory; data are never copied. */
#include "format/safetensors.h"
#include "util/file.h"
#include "util/arith.h"
#include "util/error.h"
#include "util/half.h"
#include "util/json.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int cmf__st_dtype_size(cmf__st_dtype d) { return d == CMF_ST_F32 ? 4 : 2; }

const char *cmf__st_dtype_name(cmf__st_dtype d)
{
    return d == CMF_ST_F32 ? "F32" : d == CMF_ST_F16 ? "F16" : "BF16";
}

void cmf__st_tensors_free(cmf__st_tensor *t, size_t n)
{
    if (!t) return;
    for (size_t i = 0; i < n; i++) free(t[i].name);
    free(t);
}

static const char *KNOWN_UNSUPPORTED[] = {"F64", "I64", "I32", "I16", "I8", "U64", "U32", "U16",
                                          "U8", "BOOL", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4",
                                          "F6_E2M3", "F6_E3M2", "C64"};

static cmf_status parse_dtype(const char *s, const char *what, const char *name, cmf__st_dtype *out)
{
    if (!strcmp(s, "F32")) *out = CMF_ST_F32;
    else if (!strcmp(s, "F16")) *out = CMF_ST_F16;
    else if (!strcmp(s, "BF16")) *out = CMF_ST_BF16;
    else {
        bool known = false;
        for (size_t i = 0; i < sizeof KNOWN_UNSUPPORTED / sizeof *KNOWN_UNSUPPORTED; i++)
            if (!strcmp(s, KNOWN_UNSUPPORTED[i])) known = true;
        return cmf__error(CMF_ERR_DTYPE, "%s: tensor '%s': %s dtype '%.32s' (the converter reads F32, F16, BF16)",
                          what, name, known ? "unsupported" : "unknown", s);
    }
    return CMF_OK;
}

static cmf_status parse_entry(const char *what, const char *name, const json_t *v, uint64_t data_start,
                              uint64_t size, cmf__st_tensor *t)
{
    if (!json_is_object(v))
        return cmf__error(CMF_ERR_PARSE, "%s: tensor '%s': header entry is not an object", what, name);
    const json_t *jd = json_object_get(v, "dtype");
    const json_t *js = json_object_get(v, "shape");
    const json_t *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd))
        return cmf__error(CMF_ERR_PARSE, "%s: tensor '%s': \"dtype\" missing or not a string", what, name);
    cmf_status st = parse_dtype(json_string_value(jd), what, name, &t->dtype);
    if (st) return st;
    if (!json_is_array(js))
        return cmf__error(CMF_ERR_PARSE, "%s: tensor '%s': \"shape\" missing or not an array", what, name);
    size_t nd = json_array_size(js);
    if (nd > CMF_ST_MAX_NDIM)
        return cmf__error(CMF_ERR_PARSE, "%s: tensor '%s': %zu dimensions (at most %d)", what, name, nd,
                          CMF_ST_MAX_NDIM);
    t->ndim = (int)nd;
    uint64_t numel = 1;
    for (size_t i = 0; i < nd; i++) {
        const json_t *d = json_array_get(js, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > 0xffffffffLL)
            return cmf__error(CMF_ERR_PARSE, "%s: tensor '%s': shape[%zu] is not an integer in 0..2^32-1",
                              what, name, i);
        t->shape[i] = (uint64_t)json_integer_value(d);
        if (cmf__mul_overflow(numel, t->shape[i], &numel))
            return cmf__error(CMF_ERR_BOUNDS, "%s: tensor '%s': element count overflows", what, name);
    }
    t->numel = numel;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
        !json_is_integer(json_array_get(jo, 1)))
        return cmf__error(CMF_ERR_PARSE, "%s: tensor '%s': \"data_offsets\" is not [begin, end]", what, name);
    json_int_t b = json_integer_value(json_array_get(jo, 0)), e = json_integer_value(json_array_get(jo, 1));
    if (b < 0 || e < b)
        return cmf__error(CMF_ERR_BOUNDS, "%s: tensor '%s': data_offsets [%lld, %lld] are not 0 <= begin <= end",
                          what, name, (long long)b, (long long)e);
    uint64_t want;
    if (cmf__mul_overflow(numel, (uint64_t)cmf__st_dtype_size(t->dtype), &want))
        return cmf__error(CMF_ERR_BOUNDS, "%s: tensor '%s': byte size overflows", what, name);
    if ((uint64_t)(e - b) != want)
        return cmf__error(CMF_ERR_SIZE, "%s: tensor '%s': data_offsets [%lld, %lld] span %llu bytes, but %s of %llu elements needs %llu",
                          what, name, (long long)b, (long long)e, (unsigned long long)(e - b),
                          cmf__st_dtype_name(t->dtype), (unsigned long long)numel, (unsigned long long)want);
    uint64_t abs;
    if (cmf__add_overflow(data_start, (uint64_t)b, &abs) || !cmf__range_ok(abs, want, size))
        return cmf__error(CMF_ERR_BOUNDS, "%s: tensor '%s': data_offsets [%lld, %lld] (file bytes %llu..%llu) run past the end of the file (%llu bytes)",
                          what, name, (long long)b, (long long)e, (unsigned long long)(data_start + (uint64_t)b),
                          (unsigned long long)(data_start + (uint64_t)e), (unsigned long long)size);
    t->off = abs;
    t->nbytes = want;
    return CMF_OK;
}

cmf_status cmf__st_parse(const uint8_t *data, uint64_t size, const char *what, uint32_t file,
                         cmf__st_tensor **tensors, size_t *n)
{
    if (size < 8)
        return cmf__error(CMF_ERR_PARSE, "%s: %llu bytes: too short for the 8-byte header length", what,
                          (unsigned long long)size);
    uint64_t hlen = cmf__rd64(data);
    if (hlen > size - 8)
        return cmf__error(CMF_ERR_BOUNDS, "%s: header length %llu at byte 0 runs past the end of the file (%llu bytes)",
                          what, (unsigned long long)hlen, (unsigned long long)size);
    if (hlen > CMF_ST_MAX_HEADER)
        return cmf__error(CMF_ERR_BOUNDS, "%s: header length %llu at byte 0 exceeds the %u-byte limit", what,
                          (unsigned long long)hlen, CMF_ST_MAX_HEADER);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)data + 8, (size_t)hlen, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!root)
        return cmf__error(CMF_ERR_PARSE, "%s: header JSON (bytes 8..%llu): %s at byte %llu", what,
                          (unsigned long long)(8 + hlen), jerr.text, (unsigned long long)(8 + (uint64_t)jerr.position));
    if (!json_is_object(root)) {
        json_decref(root);
        return cmf__error(CMF_ERR_PARSE, "%s: header JSON is not an object", what);
    }
    size_t count = json_object_size(root);
    cmf__st_tensor *arr = realloc(*tensors, (*n + count + 1) * sizeof *arr);
    if (!arr) {
        json_decref(root);
        return cmf__error(CMF_ERR_NOMEM, "%s: out of memory for %zu tensors", what, count);
    }
    *tensors = arr;
    const char *key;
    json_t *v;
    cmf_status st = CMF_OK;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) continue;
        cmf__st_tensor *t = &arr[*n];
        memset(t, 0, sizeof *t);
        st = parse_entry(what, key, v, 8 + hlen, size, t);
        if (st) break;
        t->name = strdup(key);
        if (!t->name) {
            st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", what);
            break;
        }
        t->file = file;
        (*n)++;
    }
    json_decref(root);
    return st;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const cmf__st_tensor *)a)->name, ((const cmf__st_tensor *)b)->name);
}

void cmf__st_free(cmf__st_set *s)
{
    if (!s) return;
    for (uint32_t i = 0; i < s->n_files; i++) {
        cmf__unmap(&s->maps[i]);
        free(s->paths[i]);
    }
    free(s->paths);
    free(s->maps);
    cmf__st_tensors_free(s->tensors, s->n_tensors);
    free(s);
}

/* Adds file `path` (taken) to the set and parses it. */
static cmf_status add_file(cmf__st_set *s, char *path)
{
    char **np = realloc(s->paths, (s->n_files + 1) * sizeof *np);
    if (!np) {
        free(path);
        return cmf__error(CMF_ERR_NOMEM, "out of memory");
    }
    s->paths = np;
    cmf__mapping *nm = realloc(s->maps, (s->n_files + 1) * sizeof *nm);
    if (!nm) {
        free(path);
        return cmf__error(CMF_ERR_NOMEM, "out of memory");
    }
    s->maps = nm;
    uint32_t idx = s->n_files;
    s->paths[idx] = path;
    memset(&s->maps[idx], 0, sizeof s->maps[idx]);
    s->n_files++;
    cmf_status st = cmf__map_file(path, &s->maps[idx]);
    if (st) return st;
    size_t first = s->n_tensors;
    st = cmf__st_parse(s->maps[idx].data, s->maps[idx].size, path, idx, &s->tensors, &s->n_tensors);
    if (st) return st;
    for (size_t i = first; i < s->n_tensors; i++) s->tensors[i].data = s->maps[idx].data + s->tensors[i].off;
    return CMF_OK;
}

static cmf_status finish_set(cmf__st_set *s)
{
    if (s->n_tensors == 0)
        return cmf__error(CMF_ERR_NOT_FOUND, "%s: no tensors", s->n_files ? s->paths[0] : "checkpoint");
    qsort(s->tensors, s->n_tensors, sizeof *s->tensors, cmp_name);
    for (size_t i = 1; i < s->n_tensors; i++)
        if (!strcmp(s->tensors[i].name, s->tensors[i - 1].name))
            return cmf__error(CMF_ERR_DUPLICATE, "tensor '%s' appears in both %s and %s", s->tensors[i].name,
                              s->paths[s->tensors[i - 1].file], s->paths[s->tensors[i].file]);
    return CMF_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static cmf_status open_index(cmf__st_set *s, const char *dir, const char *index_path)
{
    char *text;
    size_t len;
    cmf_status st = cmf__read_file(index_path, &text, &len);
    if (st) return st;
    json_t *root;
    st = cmf__json_parse(text, len, index_path, &root);
    free(text);
    if (st) return st;
    const json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm) || json_object_size(wm) == 0) {
        json_decref(root);
        return cmf__error(CMF_ERR_PARSE, "%s: \"weight_map\" missing, empty or not an object", index_path);
    }
    /* Unique shard names, sorted. */
    size_t n = 0;
    char **names = calloc(json_object_size(wm), sizeof *names);
    if (!names) {
        json_decref(root);
        return cmf__error(CMF_ERR_NOMEM, "out of memory");
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)wm, key, v) {
        if (!json_is_string(v)) {
            st = cmf__error(CMF_ERR_PARSE, "%s: weight_map['%s'] is not a file name", index_path, key);
            break;
        }
        const char *f = json_string_value(v);
        if (!*f || strchr(f, '/') || !strcmp(f, "..") || !strcmp(f, ".")) {
            st = cmf__error(CMF_ERR_PARSE, "%s: weight_map['%s'] = '%s' is not a plain file name in the folder",
                            index_path, key, f);
            break;
        }
        names[n++] = (char *)f;
    }
    if (!st) {
        qsort(names, n, sizeof *names, cmp_str);
        for (size_t i = 0; i < n && !st; i++) {
            if (i && !strcmp(names[i], names[i - 1])) continue;
            char *p = cmf__path_join(dir, names[i]);
            st = p ? add_file(s, p) : cmf__error(CMF_ERR_NOMEM, "out of memory");
        }
    }
    free(names);
    if (!st) st = finish_set(s);
    /* Every name the index lists must be in the shard it names. */
    if (!st) {
        json_object_foreach((json_t *)wm, key, v) {
            const cmf__st_tensor *t = cmf__st_find(s, key);
            const char *f = json_string_value(v);
            const char *base = t ? strrchr(s->paths[t->file], '/') : NULL;
            if (!t || strcmp(base ? base + 1 : s->paths[t->file], f)) {
                st = cmf__error(CMF_ERR_NOT_FOUND, "%s: weight_map names tensor '%s' in %s, which lacks it",
                                index_path, key, f);
                break;
            }
        }
    }
    json_decref(root);
    return st;
}

static bool file_exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

cmf_status cmf__st_open_dir(const char *dir, cmf__st_set **out)
{
    *out = NULL;
    cmf__st_set *s = calloc(1, sizeof *s);
    if (!s) return cmf__error(CMF_ERR_NOMEM, "out of memory");
    cmf_status st = CMF_OK;
    char *index = cmf__path_join(dir, "model.safetensors.index.json");
    char *single = cmf__path_join(dir, "model.safetensors");
    if (!index || !single) st = cmf__error(CMF_ERR_NOMEM, "out of memory");
    else if (file_exists(index)) st = open_index(s, dir, index);
    else if (file_exists(single)) {
        st = add_file(s, single);
        single = NULL;
        if (!st) st = finish_set(s);
    } else {
        DIR *d = opendir(dir);
        if (!d) st = cmf__error(CMF_ERR_IO, "%s: cannot open the folder", dir);
        else {
            char **names = NULL;
            size_t n = 0;
            struct dirent *e;
            while (!st && (e = readdir(d))) {
                size_t l = strlen(e->d_name);
                if (l <= 12 || strcmp(e->d_name + l - 12, ".safetensors") || e->d_name[0] == '.') continue;
                char **nn = realloc(names, (n + 1) * sizeof *nn);
                char *c = strdup(e->d_name);
                if (!nn || !c) {
                    free(c);
                    if (nn) names = nn;
                    st = cmf__error(CMF_ERR_NOMEM, "out of memory");
                    break;
                }
                names = nn;
                names[n++] = c;
            }
            closedir(d);
            if (!st && n == 0)
                st = cmf__error(CMF_ERR_NOT_FOUND, "%s: no model.safetensors, model.safetensors.index.json or *.safetensors file", dir);
            if (!st) qsort(names, n, sizeof *names, cmp_str);
            for (size_t i = 0; i < n; i++) {
                if (!st) {
                    char *p = cmf__path_join(dir, names[i]);
                    st = p ? add_file(s, p) : cmf__error(CMF_ERR_NOMEM, "out of memory");
                }
                free(names[i]);
            }
            free(names);
            if (!st) st = finish_set(s);
        }
    }
    free(index);
    free(single);
    if (st) {
        cmf__st_free(s);
        return st;
    }
    *out = s;
    return CMF_OK;
}

const cmf__st_tensor *cmf__st_find(const cmf__st_set *s, const char *name)
{
    size_t lo = 0, hi = s->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->tensors[mid].name, name);
        if (c == 0) return &s->tensors[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

void cmf__st_release(const cmf__st_set *s, const cmf__st_tensor *t)
{
    if (!t->data || t->nbytes == 0) return;
    const cmf__mapping *m = &s->maps[t->file];
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t beg = t->off / page * page, end = cmf__align_up(t->off + t->nbytes, page);
    if (end > m->size) end = cmf__align_up(m->size, page);
    madvise((void *)(m->data + beg), (size_t)(end - beg), MADV_DONTNEED);
}

float cmf__st_get(const cmf__st_tensor *t, uint64_t i)
{
    switch (t->dtype) {
    case CMF_ST_F32: return cmf__bits_f32(cmf__rd32(t->data + 4 * i));
    case CMF_ST_F16: return cmf__f16_to_f32(cmf__rd16(t->data + 2 * i));
    default: return cmf__bf16_to_f32(cmf__rd16(t->data + 2 * i));
    }
}
