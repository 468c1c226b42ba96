/* masks.c — the masks section (§5: count, meta JSON, 8-aligned bit-packed
 * blobs of FFN rows, head rows, layer gates and optional expert rows) and
 * the read-only sparse index (§7). Every size comes from the arch block and
 * is checked against the section before a pointer is formed; tail bits past
 * a dimension must be zero. */
#include "format/format_internal.h"
#include "util/arith.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

static cmf_status arch_dim(const json_t *obj, const char *key, const char *path, const char *what, bool required,
                           uint32_t *out)
{
    const json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v || json_is_null(v)) {
        if (!required) return CMF_OK;
        return cmf__error(CMF_ERR_PARSE, "%s: needs header %s.%s (an integer 1..2^31), which is missing", what, path,
                          key);
    }
    int64_t x = 0;
    if (cmf__json_get_int(obj, key, path, &x) != CMF_OK || x < 1 || x > INT32_MAX)
        return cmf__error(CMF_ERR_PARSE, "%s: header %s.%s must be an integer 1..2^31", what, path, key);
    *out = (uint32_t)x;
    return CMF_OK;
}

/* First set bit index >= n in a row of `bytes` bytes, or -1. */
static int64_t tail_bit(const uint8_t *row, uint64_t bytes, uint64_t n)
{
    for (uint64_t b = n / 8; b < bytes; b++) {
        uint8_t keep = b == n / 8 ? (uint8_t)((1u << (n % 8)) - 1) : 0;
        if (row[b] & ~keep)
            for (int k = 0; k < 8; k++)
                if ((row[b] & ~keep) >> k & 1) return (int64_t)(b * 8 + (uint64_t)k);
    }
    return -1;
}

static cmf_status check_rows(const char *what, const char *mask, const char *area, const uint8_t *base,
                             uint64_t abs_off, uint64_t rows, uint64_t bytes, uint64_t n)
{
    for (uint64_t r = 0; r < rows; r++) {
        int64_t bit = tail_bit(base + r * bytes, bytes, n);
        if (bit >= 0)
            return cmf__error(CMF_ERR_PARSE,
                              "%s: mask '%s' %s row %llu at 0x%llx: bit %lld is set past the dimension %llu (tail bits must be zero)",
                              what, mask, area, (unsigned long long)r, (unsigned long long)(abs_off + r * bytes),
                              (long long)bit, (unsigned long long)n);
    }
    return CMF_OK;
}

cmf_status cmf__masks_parse(const uint8_t *data, uint64_t len, uint64_t sec_off, const json_t *arch,
                            const char *what, cmf__masks **out)
{
    *out = NULL;
    if (len < 8)
        return cmf__error(CMF_ERR_BOUNDS, "%s at 0x%llx: %llu bytes, the count and meta length need 8", what,
                          (unsigned long long)sec_off, (unsigned long long)len);
    uint32_t n_masks = cmf__rd32(data), meta_len = cmf__rd32(data + 4);
    if ((uint64_t)meta_len + 8 > len)
        return cmf__error(CMF_ERR_BOUNDS, "%s at 0x%llx: meta JSON of %u bytes passes the section end (%llu bytes)",
                          what, (unsigned long long)(sec_off + 4), meta_len, (unsigned long long)len);
    cmf__masks *ms = calloc(1, sizeof *ms);
    if (!ms) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", what);
    cmf_status st;
    char jwhat[600];
    snprintf(jwhat, sizeof jwhat, "%s: meta JSON at 0x%llx", what, (unsigned long long)(sec_off + 8));
    if ((st = cmf__json_parse((const char *)data + 8, meta_len, jwhat, &ms->meta)) != CMF_OK) {
        st = CMF_ERR_PARSE;
        goto fail;
    }
    const json_t *list = json_object_get(ms->meta, "masks");
    if (!json_is_object(ms->meta) || !json_is_array(list)) {
        st = cmf__error(CMF_ERR_PARSE, "%s: expected an object with a \"masks\" array", jwhat);
        goto fail;
    }
    if (json_array_size(list) != n_masks) {
        st = cmf__error(CMF_ERR_PARSE, "%s at 0x%llx: n_masks %u but the meta lists %zu masks", what,
                        (unsigned long long)sec_off, n_masks, json_array_size(list));
        goto fail;
    }
    const json_t *dt = json_object_get(ms->meta, "default_task");
    ms->default_task = json_is_string(dt) ? json_string_value(dt) : NULL;
    ms->num_loops = 1;
    const json_t *moe = arch ? json_object_get(arch, "moe") : NULL;
    if ((st = arch_dim(arch, "num_layers", "arch", what, true, &ms->num_layers)) ||
        (st = arch_dim(arch, "intermediate_size", "arch", what, true, &ms->intermediate_size)) ||
        (st = arch_dim(arch, "num_attention_heads", "arch", what, true, &ms->num_heads)) ||
        (st = arch_dim(arch, "num_loops", "arch", what, false, &ms->num_loops)) ||
        (json_is_object(moe) && (st = arch_dim(moe, "num_experts", "arch.moe", what, false, &ms->num_experts))))
        goto fail;
    uint64_t L = ms->num_layers;
    ms->ffn_bytes = cmf__div_ceil(ms->intermediate_size, 8);
    ms->head_bytes = cmf__div_ceil(ms->num_heads, 8);
    ms->gates_bytes = cmf__div_ceil(L, 8);
    ms->expert_bytes = cmf__div_ceil(ms->num_experts, 8);
    /* All products fit: each factor is < 2^31 and at most three multiply to < 2^64 below. */
    uint64_t vrows = L * ms->num_loops;
    uint64_t legacy = L * ms->ffn_bytes + L * ms->head_bytes + ms->gates_bytes;
    uint64_t looped = vrows * ms->ffn_bytes + L * ms->head_bytes + ms->gates_bytes;
    uint64_t experts = L * ms->expert_bytes;
    ms->masks = calloc(n_masks ? n_masks : 1, sizeof *ms->masks);
    if (!ms->masks) {
        st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory", what);
        goto fail;
    }
    ms->n_masks = n_masks;
    for (uint32_t i = 0; i < n_masks; i++) {
        cmf__mask *m = &ms->masks[i];
        const json_t *mj = json_array_get(list, i);
        char path[64];
        snprintf(path, sizeof path, "masks[%u]", i);
        int64_t task_id = 0, boff = 0, blen = 0;
        bool hx = false;
        if (!json_is_object(mj)) {
            st = cmf__error(CMF_ERR_PARSE, "%s: %s is not an object", jwhat, path);
            goto fail;
        }
        if (cmf__json_get_str(mj, "name", path, &m->name) || cmf__json_get_int(mj, "task_id", path, &task_id) ||
            cmf__json_get_int(mj, "blob_off", path, &boff) || cmf__json_get_int(mj, "blob_len", path, &blen) ||
            cmf__json_opt_bool(mj, "has_expert_fields", path, false, &hx)) {
            st = cmf__error_prefix(CMF_ERR_PARSE, "%s", jwhat);
            goto fail;
        }
        if (task_id < 0 || task_id > UINT32_MAX || boff < 0 || blen < 0) {
            st = cmf__error(CMF_ERR_PARSE, "%s: %s: task_id, blob_off, blob_len must be non-negative", jwhat, path);
            goto fail;
        }
        m->task_id = (uint32_t)task_id;
        m->has_expert_fields = hx;
        m->meta = mj;
        m->blob_off = (uint64_t)boff;
        m->blob_len = (uint64_t)blen;
        if (m->blob_off % 8) {
            st = cmf__error(CMF_ERR_ALIGN, "%s: mask '%s' blob at section offset %llu is not 8-aligned", what,
                            m->name, (unsigned long long)m->blob_off);
            goto fail;
        }
        if (m->blob_off < 8 + (uint64_t)meta_len || !cmf__range_ok(m->blob_off, m->blob_len, len)) {
            st = cmf__error(CMF_ERR_BOUNDS,
                            "%s: mask '%s' blob [%llu, +%llu) is outside the blob area [%llu, %llu) of the section at 0x%llx",
                            what, m->name, (unsigned long long)m->blob_off, (unsigned long long)m->blob_len,
                            (unsigned long long)(8 + meta_len), (unsigned long long)len, (unsigned long long)sec_off);
            goto fail;
        }
        if (hx && ms->num_experts == 0) {
            st = cmf__error(CMF_ERR_PARSE, "%s: mask '%s' has expert fields but the arch has no moe.num_experts", what,
                            m->name);
            goto fail;
        }
        uint64_t add = hx ? experts : 0;
        if (m->blob_len == looped + add) m->ffn_rows = (uint32_t)vrows;
        else if (m->blob_len == legacy + add) m->ffn_rows = (uint32_t)L;
        else {
            st = cmf__error(CMF_ERR_SIZE,
                            "%s: mask '%s' blob_len %llu, the arch needs %llu (%llu layers x %llu FFN bytes + heads + gates%s)",
                            what, m->name, (unsigned long long)m->blob_len, (unsigned long long)(looped + add),
                            (unsigned long long)vrows, (unsigned long long)ms->ffn_bytes, hx ? " + experts" : "");
            goto fail;
        }
        m->blob = data + m->blob_off;
        m->ffn = m->blob;
        m->heads = m->ffn + (uint64_t)m->ffn_rows * ms->ffn_bytes;
        m->gates = m->heads + L * ms->head_bytes;
        m->experts = hx ? m->gates + ms->gates_bytes : NULL;
        uint64_t a = sec_off + m->blob_off;
        if ((st = check_rows(what, m->name, "FFN", m->ffn, a, m->ffn_rows, ms->ffn_bytes, ms->intermediate_size)) ||
            (st = check_rows(what, m->name, "head", m->heads, a + (uint64_t)(m->heads - m->ffn), L, ms->head_bytes,
                             ms->num_heads)) ||
            (st = check_rows(what, m->name, "gates", m->gates, a + (uint64_t)(m->gates - m->ffn), 1, ms->gates_bytes,
                             L)) ||
            (hx && (st = check_rows(what, m->name, "expert", m->experts, a + (uint64_t)(m->experts - m->ffn), L,
                                    ms->expert_bytes, ms->num_experts))))
            goto fail;
    }
    *out = ms;
    return CMF_OK;
fail:
    cmf__masks_free(ms);
    return st;
}

void cmf__masks_free(cmf__masks *m)
{
    if (!m) return;
    json_decref(m->meta);
    free(m->masks);
    free(m);
}

static bool bit(const uint8_t *row, uint32_t i) { return row[i / 8] >> (i % 8) & 1; }

bool cmf__mask_ffn_bit(const cmf__masks *ms, const cmf__mask *m, uint32_t row, uint32_t neuron)
{
    if (row >= m->ffn_rows || neuron >= ms->intermediate_size) return false;
    return bit(m->ffn + (uint64_t)row * ms->ffn_bytes, neuron);
}

bool cmf__mask_head_bit(const cmf__masks *ms, const cmf__mask *m, uint32_t layer, uint32_t head)
{
    if (layer >= ms->num_layers || head >= ms->num_heads) return false;
    return bit(m->heads + (uint64_t)layer * ms->head_bytes, head);
}

bool cmf__mask_gate_bit(const cmf__masks *ms, const cmf__mask *m, uint32_t layer)
{
    return layer < ms->num_layers && bit(m->gates, layer);
}

bool cmf__mask_expert_bit(const cmf__masks *ms, const cmf__mask *m, uint32_t layer, uint32_t expert)
{
    if (!m->experts) return true;
    if (layer >= ms->num_layers || expert >= ms->num_experts) return false;
    return bit(m->experts + (uint64_t)layer * ms->expert_bytes, expert);
}

/* ---- sparse index ------------------------------------------------------ */

cmf_status cmf__index_parse(const uint8_t *data, uint64_t len, uint64_t sec_off, const char *what,
                            cmf__index_entry **out, uint32_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (len < 8)
        return cmf__error(CMF_ERR_BOUNDS, "%s at 0x%llx: %llu bytes, the header needs 8", what,
                          (unsigned long long)sec_off, (unsigned long long)len);
    uint32_t n = cmf__rd32(data);
    if ((uint64_t)n * 16 > len - 8)
        return cmf__error(CMF_ERR_BOUNDS, "%s at 0x%llx: %u entries cannot fit in %llu bytes", what,
                          (unsigned long long)sec_off, n, (unsigned long long)len);
    cmf__index_entry *e = calloc(n ? n : 1, sizeof *e);
    if (!e) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", what);
    uint64_t pos = 8;
    for (uint32_t i = 0; i < n; i++) {
        if (len - pos < 16) goto bounds;
        const uint8_t *p = data + pos;
        e[i].task_id = cmf__rd32(p);
        e[i].layer_idx = cmf__rd32(p + 4);
        e[i].n_groups = cmf__rd32(p + 8);
        e[i].n_heads = cmf__rd32(p + 12);
        uint64_t body = cmf__align_up((uint64_t)e[i].n_groups * 2 + e[i].n_heads, 4);
        if (len - pos - 16 < body) goto bounds;
        e[i].groups = p + 16;
        e[i].heads = p + 16 + (uint64_t)e[i].n_groups * 2;
        pos += 16 + body;
        continue;
    bounds:
        free(e);
        return cmf__error(CMF_ERR_BOUNDS, "%s: entry %u at 0x%llx passes the section end (%llu bytes)", what, i,
                          (unsigned long long)(sec_off + pos), (unsigned long long)len);
    }
    *out = e;
    *n_out = n;
    return CMF_OK;
}
