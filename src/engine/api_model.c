/* api_model.c — the public model calls: open (container, arch, binding,
 * tokenizer, chat template, eos/bos ids), introspection (task masks
 * included), tokenize,
 * detokenize and chat rendering with caller buffers. Everything here reads
 * an immutable model; only the error buffer is written, under a mutex. */
#include "compute/gpu.h"
#include "engine/api.h"
#include "grammar/grammar.h"
#include "util/error.h"
#include "util/pool.h"

#include <stdlib.h>
#include <string.h>

cmf_status cmf__model_fail(const cmf_model *cm, cmf_status st)
{
    cmf_model *m = (cmf_model *)cm; /* the error buffer is the one mutable part */
    if (!m) return st;
    pthread_mutex_lock(&m->err_mu);
    snprintf(m->err, sizeof m->err, "%s", cmf_last_error());
    pthread_mutex_unlock(&m->err_mu);
    return st;
}

cmf_model_params cmf_model_params_default(void)
{
    cmf_model_params p = {NULL, false};
    return p;
}

static void add_eos(cmf_model *m, int64_t id)
{
    if (id < 0 || id >= m->m->arch.vocab_size || m->n_eos >= sizeof m->eos_ids / sizeof *m->eos_ids) return;
    for (size_t i = 0; i < m->n_eos; i++)
        if (m->eos_ids[i] == id) return;
    m->eos_ids[m->n_eos++] = (int32_t)id;
}

static cmf_status load_text(cmf_model *m)
{
    const cmf__file *f = m->m->file;
    const cmf__section *voc = cmf__file_vocab(f);
    cmf_status st;
    if (voc && voc->data) {
        char what[512];
        snprintf(what, sizeof what, "%s: vocab", m->m->what);
        if ((st = cmf__tok_load((const char *)voc->data, (size_t)voc->len, what, &m->tok))) return st;
        /* Every id the tokenizer can produce indexes the model's rows (the
         * embedding, a logits row as a target): checked once, here. */
        size_t tv = cmf__tok_vocab_size(m->tok);
        if (tv > (size_t)m->m->arch.vocab_size) {
            int32_t bad = (int32_t)tv - 1;
            const char *piece = cmf__tok_piece(m->tok, bad);
            return cmf__error(CMF_ERR_TOKENIZER,
                              "%s: token %d ('%.64s') is past the model's vocabulary (arch.vocab_size %lld: ids "
                              "0..%lld)",
                              what, bad, piece ? piece : "?", (long long)m->m->arch.vocab_size,
                              (long long)m->m->arch.vocab_size - 1);
        }
    }
    const json_t *tc = json_object_get(f->header, "tokenizer_config");
    m->bos_id = -1;
    const char *src = NULL;
    if (json_is_object(tc)) {
        const json_t *ids = json_object_get(tc, "eos_token_ids");
        if (json_is_array(ids))
            for (size_t i = 0; i < json_array_size(ids); i++) add_eos(m, json_integer_value(json_array_get(ids, i)));
        else if (json_is_integer(ids))
            add_eos(m, json_integer_value(ids));
        const json_t *b = json_object_get(tc, "bos_token_id");
        if (json_is_integer(b) && json_integer_value(b) >= 0 && json_integer_value(b) < m->m->arch.vocab_size)
            m->bos_id = (int32_t)json_integer_value(b);
        src = json_string_value(json_object_get(tc, "chat_template"));
    }
    if (m->tok) {
        const char *p;
        if (m->bos_id >= 0 && (p = cmf__tok_piece(m->tok, m->bos_id))) m->bos_str = strdup(p);
        if (m->n_eos && (p = cmf__tok_piece(m->tok, m->eos_ids[0]))) m->eos_str = strdup(p);
    }
    m->has_template = src && *src;
    const char *t = m->has_template ? src : cmf__template_chatml();
    if ((st = cmf__template_compile(t, strlen(t), &m->tmpl)))
        return cmf__error_prefix(st, "%s: header tokenizer_config.chat_template", m->m->what);
    return CMF_OK;
}

cmf_status cmf_model_open(const char *path, const cmf_model_params *pp, cmf_model **out)
{
    if (!out) return cmf__error(CMF_ERR_ARG, "cmf_model_open: out is NULL");
    *out = NULL;
    if (!path) return cmf__error(CMF_ERR_ARG, "cmf_model_open: path is NULL");
    cmf_model_params p = pp ? *pp : cmf_model_params_default();
    cmf_model *m = calloc(1, sizeof *m);
    if (!m) return cmf__error(CMF_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&m->err_mu, NULL);
    pthread_mutex_init(&m->be_mu, NULL);
    pthread_mutex_init(&m->skill_mu, NULL);
    pthread_mutex_init(&m->grammar_mu, NULL);
    cmf_status st = cmf__model_open(path, &m->m);
    if (st) goto fail;
    if (p.verify) {
        cmf__verify_problem *probs = NULL;
        size_t n = 0;
        st = cmf__file_verify(m->m->file, NULL, NULL, &probs, &n);
        if (st) {
            if (n) cmf__error(st, "%s: %s%s", path, probs[0].what, n > 1 ? " (and more)" : "");
            free(probs);
            goto fail;
        }
        free(probs);
    }
    if (p.skill && (st = cmf__model_bind(m->m, p.skill))) goto fail;
    if ((st = load_text(m))) goto fail;
    uint64_t by_dtype[CMF_DTYPE_COUNT_] = {0};
    for (uint64_t i = 0; i < m->m->file->n_tensors; i++) {
        const cmf__tensor *t = &m->m->file->tensors[i];
        uint64_t cnt = 1;
        for (int d = 0; d < t->ndim; d++) cnt *= t->shape[d];
        m->size_bytes += t->nbytes;
        if (strncmp(t->name, "skill.", 6)) m->n_params += cnt;
        if (t->dtype >= 0 && t->dtype < CMF_DTYPE_COUNT_) by_dtype[t->dtype] += t->nbytes;
    }
    for (int d = 1; d < CMF_DTYPE_COUNT_; d++)
        if (by_dtype[d] > by_dtype[m->quant_dtype]) m->quant_dtype = d;
    *out = m;
    return CMF_OK;
fail:
    cmf_model_free(m);
    return st;
}

void cmf_model_free(cmf_model *m)
{
    if (!m) return;
    cmf__template_free(m->tmpl);
    cmf__tok_free(m->tok);
    cmf__model_free(m->m);
    for (int i = 0; i < m->n_backends; i++) cmf__backend_free(m->backends[i].be);
    pthread_mutex_destroy(&m->be_mu);
    for (size_t i = 0; i < m->n_views; i++) {
        cmf__model_free(m->views[i].m);
        free(m->views[i].id);
    }
    free(m->views);
    pthread_mutex_destroy(&m->skill_mu);
    free(m->bos_str);
    free(m->eos_str);
    cmf__gvocab_free(m->gvocab);
    pthread_mutex_destroy(&m->grammar_mu);
    pthread_mutex_destroy(&m->err_mu);
    free(m);
}

static bool same_id(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

cmf_status cmf__model_skill_view(cmf_model *model, const char *id, const cmf__model **out)
{
    *out = NULL;
    if (same_id(id, model->m->skill)) {
        *out = model->m;
        return CMF_OK;
    }
    cmf_status st = CMF_OK;
    pthread_mutex_lock(&model->skill_mu);
    for (size_t i = 0; i < model->n_views && !*out; i++)
        if (same_id(model->views[i].id, id)) *out = model->views[i].m;
    if (!*out) {
        cmf__model *v = NULL;
        char *key = id ? strdup(id) : NULL;
        struct cmf__skill_view *grown = realloc(model->views, (model->n_views + 1) * sizeof *grown);
        if (grown) model->views = grown;
        if ((id && !key) || !grown) st = cmf__error(CMF_ERR_NOMEM, "out of memory");
        else st = cmf__model_view_new(model->m, id, &v);
        if (st) {
            free(key);
        } else {
            model->views[model->n_views++] = (struct cmf__skill_view){key, v};
            *out = v;
        }
    }
    pthread_mutex_unlock(&model->skill_mu);
    return st;
}

const char *cmf_model_errmsg(const cmf_model *m) { return m ? m->err : ""; }
const char *cmf_model_arch_name(const cmf_model *m) { return m->m->arch.arch_name; }
int32_t cmf_model_n_vocab(const cmf_model *m) { return (int32_t)m->m->arch.vocab_size; }
int32_t cmf_model_n_ctx_train(const cmf_model *m) { return (int32_t)m->m->arch.max_pos; }
int32_t cmf_model_n_layer(const cmf_model *m) { return (int32_t)m->m->arch.n_layer; }
uint64_t cmf_model_size_bytes(const cmf_model *m) { return m->size_bytes; }
uint64_t cmf_model_n_params(const cmf_model *m) { return m->n_params; }
const char *cmf_model_quant_name(const cmf_model *m)
{
    const cmf__dtype_info *d = cmf__dtype_get(m->quant_dtype);
    return d ? d->name : "?";
}
bool cmf_model_has_chat_template(const cmf_model *m) { return m->has_template; }
int32_t cmf_model_bos(const cmf_model *m) { return m->bos_id; }
bool cmf_model_is_eos(const cmf_model *m, int32_t t)
{
    for (size_t i = 0; i < m->n_eos; i++)
        if (m->eos_ids[i] == t) return true;
    return false;
}

cmf_status cmf_model_tokenize(cmf_model *m, const char *text, size_t len, bool add_special, int32_t *ids, size_t cap,
                              size_t *n_ids)
{
    if (n_ids) *n_ids = 0;
    if (!text && len) return cmf__model_fail(m, cmf__error(CMF_ERR_ARG, "tokenize: text is NULL, length %zu", len));
    if (!ids && cap) return cmf__model_fail(m, cmf__error(CMF_ERR_ARG, "tokenize: ids is NULL, capacity %zu", cap));
    if (!m->tok) return cmf__model_fail(m, cmf__error(CMF_ERR_TOKENIZER, "%s: no tokenizer (vocab section absent)", m->m->what));
    cmf__tok_ids v = {0};
    cmf_status st = cmf__tok_encode(m->tok, text, len, add_special, &v);
    if (st) {
        cmf__tok_ids_free(&v);
        return cmf__model_fail(m, st);
    }
    if (n_ids) *n_ids = v.n;
    if (v.n > cap) {
        st = cmf__error(CMF_ERR_BOUNDS, "tokenize: %zu ids do not fit in %zu", v.n, cap);
        cmf__tok_ids_free(&v);
        return cmf__model_fail(m, st);
    }
    if (v.n) memcpy(ids, v.ids, v.n * sizeof(int32_t));
    cmf__tok_ids_free(&v);
    return CMF_OK;
}

static cmf_status put_text(cmf_model *m, const char *s, size_t n, char *buf, size_t cap, size_t *len)
{
    if (len) *len = n;
    if (n >= cap || !buf)
        return cmf__model_fail(m, cmf__error(CMF_ERR_BOUNDS, "%zu bytes (and a NUL) do not fit in %zu", n, cap));
    memcpy(buf, s, n);
    buf[n] = 0;
    return CMF_OK;
}

cmf_status cmf_model_detokenize(cmf_model *m, const int32_t *ids, size_t n, bool skip_special, char *buf, size_t cap,
                                size_t *len)
{
    if (len) *len = 0;
    if (!ids && n) return cmf__model_fail(m, cmf__error(CMF_ERR_ARG, "detokenize: ids is NULL, count %zu", n));
    if (!m->tok) return cmf__model_fail(m, cmf__error(CMF_ERR_TOKENIZER, "%s: no tokenizer (vocab section absent)", m->m->what));
    size_t nv = cmf__tok_vocab_size(m->tok);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= nv)
            return cmf__model_fail(m, cmf__error(CMF_ERR_ARG, "detokenize: id %d at %zu outside the vocabulary [0, %zu)",
                                                 ids[i], i, nv));
    char *s = NULL;
    size_t sl = 0;
    cmf_status st = cmf__tok_decode(m->tok, ids, n, skip_special, &s, &sl);
    if (st) return cmf__model_fail(m, st);
    st = put_text(m, s, sl, buf, cap, len);
    free(s);
    return st;
}

/* Renders messages (and tools, or NULL) through the model's template into
 * the caller's buffer (put_text's contract). */
static cmf_status render_into(cmf_model *m, const json_t *msgs, const json_t *tools, bool add_gen, char *buf,
                              size_t cap, size_t *len)
{
    cmf__chat_params cp = {.messages = msgs, .tools = tools, .add_generation_prompt = add_gen, .bos_token = m->bos_str,
                           .eos_token = m->eos_str};
    char *s = NULL;
    size_t sl = 0;
    cmf_status st = cmf__template_render_chat(m->tmpl, &cp, &s, &sl);
    if (st) return cmf__model_fail(m, st);
    st = put_text(m, s, sl, buf, cap, len);
    free(s);
    return st;
}

cmf_status cmf_model_render_chat(cmf_model *m, const cmf_chat_message *msgs, size_t n, bool add_gen, char *buf,
                                 size_t cap, size_t *len)
{
    if (len) *len = 0;
    if (!msgs && n) return cmf__model_fail(m, cmf__error(CMF_ERR_ARG, "render_chat: messages NULL, count %zu", n));
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "role", json_string(msgs[i].role ? msgs[i].role : ""));
        json_object_set_new(o, "content", json_string(msgs[i].content ? msgs[i].content : ""));
        json_array_append_new(arr, o);
    }
    if (!arr) return cmf__model_fail(m, cmf__error(CMF_ERR_NOMEM, "out of memory"));
    cmf_status st = render_into(m, arr, NULL, add_gen, buf, cap, len);
    json_decref(arr);
    return st;
}

/* A JSON array argument of render_chat_json; NULL text gives NULL. */
static cmf_status json_array_arg(cmf_model *m, const char *what, const char *text, json_t **out)
{
    *out = NULL;
    if (!text) return CMF_OK;
    json_error_t je;
    json_t *v = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!v)
        return cmf__model_fail(m, cmf__error(CMF_ERR_ARG, "render_chat_json: %s is not JSON: line %d column %d: %s",
                                             what, je.line, je.column, je.text));
    if (!json_is_array(v)) {
        json_decref(v);
        return cmf__model_fail(m, cmf__error(CMF_ERR_ARG, "render_chat_json: %s must be a JSON array", what));
    }
    *out = v;
    return CMF_OK;
}

cmf_status cmf_model_render_chat_json(cmf_model *m, const char *messages_json, const char *tools_json, bool add_gen,
                                      char *buf, size_t cap, size_t *len)
{
    if (len) *len = 0;
    if (!messages_json) return cmf__model_fail(m, cmf__error(CMF_ERR_ARG, "render_chat_json: messages_json is NULL"));
    json_t *msgs, *tools;
    cmf_status st = json_array_arg(m, "messages_json", messages_json, &msgs);
    if (st) return st;
    if ((st = json_array_arg(m, "tools_json", tools_json, &tools))) {
        json_decref(msgs);
        return st;
    }
    st = render_into(m, msgs, tools, add_gen, buf, cap, len);
    json_decref(msgs);
    json_decref(tools);
    return st;
}

int32_t cmf_model_n_tasks(const cmf_model *m)
{
    const cmf__masks *ms = cmf__file_mask_set(m->m->file);
    return ms ? (int32_t)ms->n_masks : 0;
}

const char *cmf_model_task_name(const cmf_model *m, int32_t i)
{
    const cmf__masks *ms = cmf__file_mask_set(m->m->file);
    return ms && i >= 0 && (uint32_t)i < ms->n_masks ? ms->masks[i].name : NULL;
}

const char *cmf_model_default_task(const cmf_model *m)
{
    const cmf__masks *ms = cmf__file_mask_set(m->m->file);
    return ms ? ms->default_task : NULL;
}

cmf__backend *cmf__model_backend(cmf_model *m, cmf_device device, int n_threads)
{
    if (device == CMF_DEVICE_GPU) n_threads = -1;
    else if (n_threads <= 0) n_threads = cmf__cpu_count();
    cmf__backend *be = NULL;
    pthread_mutex_lock(&m->be_mu);
    for (int i = 0; i < m->n_backends && !be; i++)
        if (m->backends[i].n_threads == n_threads) be = m->backends[i].be;
    if (!be) {
        if (m->n_backends == (int)(sizeof m->backends / sizeof *m->backends))
            cmf__error(CMF_ERR_BACKEND, "%s: more than %d different thread counts in one process", m->m->what,
                       m->n_backends);
        else if ((be = n_threads < 0 ? cmf__gpu_backend_new() : cmf__cpu_backend_new(n_threads, false)))
            m->backends[m->n_backends++] = (struct cmf__model_backend){n_threads, be};
    }
    pthread_mutex_unlock(&m->be_mu);
    return be;
}
