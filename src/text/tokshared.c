/* tokshared.c — the containers every tokenizer stage builds on: growable
 * arrays, the string pool (id -> string), the string -> id map (open
 * addressing, one probe touches one slot and the key bytes) and the byte
 * trie of added tokens and Unigram pieces. Sizes go through checked
 * growth; nothing here knows about tokenizer.json. */
#include "text/tokshared.h"
#include "util/error.h"
#include "util/hash.h"

#include <stdlib.h>
#include <string.h>

cmf_status cmf__tk_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return CMF_OK;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    if (c > SIZE_MAX / elem) return cmf__error(CMF_ERR_NOMEM, "tokenizer: array too large");
    void *q = realloc(*p, c * elem);
    if (!q) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory (%zu bytes)", c * elem);
    *p = q;
    *cap = c;
    return CMF_OK;
}

uint64_t cmf__tk_hash(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (len * 0x9E3779B97F4A7C15ull);
    for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

/* ---- string pool ---- */

cmf_status cmf__tk_strs_add(tk_strs *s, const char *str, size_t len, uint32_t *idx)
{
    cmf_status st;
    if (s->pool_len + len + 1 > UINT32_MAX) return cmf__error(CMF_ERR_NOMEM, "tokenizer: string pool over 4 GiB");
    if ((st = cmf__tk_grow((void **)&s->pool, &s->pool_cap, s->pool_len + len + 1, 1))) return st;
    if (s->n + 1 > s->cap) {
        size_t c1 = s->cap, c2 = s->cap;
        if ((st = cmf__tk_grow((void **)&s->off, &c1, s->n + 1, sizeof(uint32_t)))) return st;
        if ((st = cmf__tk_grow((void **)&s->len, &c2, s->n + 1, sizeof(uint32_t)))) return st;
        s->cap = c1;
    }
    if (len) memcpy(s->pool + s->pool_len, str, len);
    s->pool[s->pool_len + len] = 0;
    s->off[s->n] = (uint32_t)s->pool_len;
    s->len[s->n] = (uint32_t)len;
    s->pool_len += len + 1;
    if (idx) *idx = (uint32_t)s->n;
    s->n++;
    return CMF_OK;
}

void cmf__tk_strs_free(tk_strs *s)
{
    free(s->pool);
    free(s->off);
    free(s->len);
    memset(s, 0, sizeof *s);
}

/* ---- string -> int map ---- */

cmf_status cmf__tk_map_reserve(tk_map *m, size_t slots)
{
    tk_map_slot *ns = malloc(slots * sizeof *ns);
    if (!ns) return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory (map)");
    for (size_t i = 0; i < slots; i++) ns[i].len = UINT32_MAX;
    if (m->slot)
        for (size_t k = 0; k <= m->mask; k++) {
            tk_map_slot e = m->slot[k];
            if (e.len == UINT32_MAX) continue;
            uint64_t h = cmf__tk_hash(m->keys.pool + e.off, e.len);
            size_t i = h & (slots - 1);
            while (ns[i].len != UINT32_MAX) i = (i + 1) & (slots - 1);
            ns[i] = e;
        }
    free(m->slot);
    m->slot = ns;
    m->mask = slots - 1;
    return CMF_OK;
}

static size_t map_find(const tk_map *m, const char *s, size_t len, uint64_t h)
{
    size_t i = h & m->mask;
    uint32_t tag = (uint32_t)(h >> 32);
    for (;;) {
        const tk_map_slot *e = &m->slot[i];
        if (e->len == UINT32_MAX) return i;
        if (e->tag == tag && e->len == len && memcmp(m->keys.pool + e->off, s, len) == 0) return i;
        i = (i + 1) & m->mask;
    }
}

cmf_status cmf__tk_map_put(tk_map *m, const char *s, size_t len, int32_t v, bool overwrite)
{
    cmf_status st;
    if (!m->slot || (m->n + 1) * 2 > m->mask + 1) {
        size_t slots = m->slot ? (m->mask + 1) * 2 : 64;
        if ((st = cmf__tk_map_reserve(m, slots))) return st;
    }
    uint64_t h = cmf__tk_hash(s, len);
    size_t i = map_find(m, s, len, h);
    if (m->slot[i].len != UINT32_MAX) {
        if (overwrite) m->slot[i].val = v;
        return CMF_OK;
    }
    uint32_t k;
    if ((st = cmf__tk_strs_add(&m->keys, s, len, &k))) return st;
    m->slot[i] = (tk_map_slot){(uint32_t)(h >> 32), (uint32_t)len, m->keys.off[k], v};
    m->n++;
    return CMF_OK;
}

int32_t cmf__tk_map_get_hashed(const tk_map *m, const char *s, size_t len, uint64_t h)
{
    size_t i = map_find(m, s, len, h);
    return m->slot[i].len != UINT32_MAX ? m->slot[i].val : -1;
}

int32_t cmf__tk_map_get(const tk_map *m, const char *s, size_t len)
{
    if (!m->slot) return -1;
    size_t i = map_find(m, s, len, cmf__tk_hash(s, len));
    return m->slot[i].len != UINT32_MAX ? m->slot[i].val : -1;
}

void cmf__tk_map_free(tk_map *m)
{
    free(m->slot);
    cmf__tk_strs_free(&m->keys);
    memset(m, 0, sizeof *m);
}

/* ---- byte trie ---- */

static cmf_status trie_new_node(tk_trie *t, uint32_t *id)
{
    cmf_status st = cmf__tk_grow((void **)&t->value, &t->nodes_cap, t->n_nodes + 1, sizeof(int32_t));
    if (st) return st;
    t->value[t->n_nodes] = -1;
    *id = (uint32_t)t->n_nodes++;
    return CMF_OK;
}

static cmf_status trie_rehash(tk_trie *t, size_t slots)
{
    uint64_t *nk = calloc(slots, sizeof *nk);
    uint32_t *nc = calloc(slots, sizeof *nc);
    if (!nk || !nc) {
        free(nk);
        free(nc);
        return cmf__error(CMF_ERR_NOMEM, "tokenizer: out of memory (trie)");
    }
    if (t->key)
        for (size_t i = 0; i <= t->mask; i++) {
            if (!t->key[i]) continue;
            size_t j = cmf__fmix64(t->key[i]) & (slots - 1);
            while (nk[j]) j = (j + 1) & (slots - 1);
            nk[j] = t->key[i];
            nc[j] = t->child[i];
        }
    free(t->key);
    free(t->child);
    t->key = nk;
    t->child = nc;
    t->mask = slots - 1;
    return CMF_OK;
}

uint32_t cmf__tk_trie_step(const tk_trie *t, uint32_t node, uint8_t b)
{
    if (!t->key) return 0;
    uint64_t k = (((uint64_t)node << 8) | b) + 1;
    size_t i = cmf__fmix64(k) & t->mask;
    while (t->key[i]) {
        if (t->key[i] == k) return t->child[i];
        i = (i + 1) & t->mask;
    }
    return 0;
}

cmf_status cmf__tk_trie_add(tk_trie *t, const char *s, size_t len, int32_t value)
{
    cmf_status st;
    uint32_t node;
    if (!t->n_nodes && (st = trie_new_node(t, &node))) return st;
    node = 0;
    if (len) t->first[(uint8_t)s[0]] = true;
    for (size_t i = 0; i < len; i++) {
        uint32_t c = cmf__tk_trie_step(t, node, (uint8_t)s[i]);
        if (!c) {
            if (!t->key || (t->n_edges + 1) * 2 > t->mask + 1)
                if ((st = trie_rehash(t, t->key ? (t->mask + 1) * 2 : 256))) return st;
            if ((st = trie_new_node(t, &c))) return st;
            uint64_t k = (((uint64_t)node << 8) | (uint8_t)s[i]) + 1;
            size_t j = cmf__fmix64(k) & t->mask;
            while (t->key[j]) j = (j + 1) & t->mask;
            t->key[j] = k;
            t->child[j] = c;
            t->n_edges++;
        }
        node = c;
    }
    if (t->value[node] < 0) t->value[node] = value;
    return CMF_OK;
}

void cmf__tk_trie_free(tk_trie *t)
{
    free(t->key);
    free(t->child);
    free(t->value);
    memset(t, 0, sizeof *t);
}
