/* oai.c — OpenAI-shaped pieces of the answers (usage, logprobs, the skill
 * report, finish reasons) and the endpoints that generate nothing:
 * /v1/models, /tokenize, /detokenize. Every string put in JSON is valid
 * UTF-8: bytes of a token that is part of a character become U+FFFD in
 * text fields and stay exact in `bytes`. */
#include "server/srv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1..4), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || len > n) return 0;
    unsigned cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp == 0)
        return 0;
    return len;
}

json_t *cmf__srv_json_text(const char *s, size_t len)
{
    char *fixed = malloc(len * 3 + 1);
    if (!fixed) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t k = utf8_seq((const unsigned char *)s + i, len - i);
        if (k) {
            memcpy(fixed + o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(fixed + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    json_t *v = json_stringn(fixed, o);
    free(fixed);
    return v;
}

const char *cmf__srv_oai_finish(cmf_finish f)
{
    switch (f) {
    case CMF_FINISH_LENGTH:
    case CMF_FINISH_CONTEXT: return "length";
    default: return "stop";
    }
}

json_t *cmf__srv_oai_usage(const srv_job *j, const cmf_request_result *r)
{
    json_int_t gen = r ? r->gen.n_gen : 0, cached = r ? r->gen.n_reused : 0;
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)j->n_prompt, "completion_tokens", gen,
                     "total_tokens", (json_int_t)j->n_prompt + gen, "prompt_tokens_details", "cached_tokens", cached);
}

/* {"id": chosen or null, "auto": bool, "scores": {id: E or null}} */
json_t *cmf__srv_oai_skill(const srv_job *j)
{
    if (!j->skill_asked || !j->req) return NULL;
    cmf_request_result r;
    memset(&r, 0, sizeof r);
    cmf_request_wait(j->req, &r);
    cmf_model *m = j->m->model;
    const char *id = r.skill >= 0 ? cmf_model_skill_id(m, r.skill) : NULL;
    json_t *o = json_pack("{s:s?, s:b}", "id", id, "auto", j->rp.skill_auto);
    int32_t ns = cmf_model_n_skills(m);
    if (j->rp.skill_auto && ns > 0) {
        double *E = calloc((size_t)ns, sizeof *E);
        size_t n = E ? cmf_request_route_scores(j->req, E, (size_t)ns) : 0;
        json_t *sc = json_object();
        for (size_t i = 0; i < n; i++)
            json_object_set_new(sc, cmf_model_skill_id(m, (int32_t)i), isfinite(E[i]) ? json_real(E[i]) : json_null());
        json_object_set_new(o, "scores", sc);
        free(E);
    }
    return o;
}

/* The piece of one token as bytes (no special-token skipping). */
static char *token_piece(srv_model *m, int32_t id, size_t *len)
{
    char small[256];
    *len = 0;
    size_t need = 0;
    cmf_status st = cmf_model_detokenize(m->model, &id, 1, false, small, sizeof small, &need);
    if (!st) {
        *len = need;
        char *p = malloc(need + 1);
        if (p) memcpy(p, small, need + 1);
        return p;
    }
    if (st != CMF_ERR_BOUNDS) return NULL;
    char *p = malloc(need + 1);
    if (p && cmf_model_detokenize(m->model, &id, 1, false, p, need + 1, len)) {
        free(p);
        return NULL;
    }
    return p;
}

static json_t *bytes_array(const char *p, size_t len)
{
    json_t *a = json_array();
    for (size_t i = 0; i < len; i++) json_array_append_new(a, json_integer((unsigned char)p[i]));
    return a;
}

static json_t *chat_entry(srv_model *m, int32_t id, float lp)
{
    size_t len;
    char *p = token_piece(m, id, &len);
    json_t *o = json_object();
    json_object_set_new(o, "token", p ? cmf__srv_json_text(p, len) : json_string(""));
    json_object_set_new(o, "logprob", isfinite(lp) ? json_real(lp) : json_real(-9999.0));
    json_object_set_new(o, "bytes", p ? bytes_array(p, len) : json_array());
    free(p);
    return o;
}

json_t *cmf__srv_oai_chat_logprob(srv_model *m, const cmf_token_info *t)
{
    json_t *o = chat_entry(m, t->id, t->logprob);
    json_t *top = json_array();
    for (int32_t i = 0; i < t->n_top; i++) json_array_append_new(top, chat_entry(m, t->top_ids[i], t->top_logprobs[i]));
    json_object_set_new(o, "top_logprobs", top);
    return o;
}

json_t *cmf__srv_oai_completion_logprobs_new(void)
{
    return json_pack("{s:[], s:[], s:[], s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
}

void cmf__srv_oai_completion_logprob(srv_model *m, const cmf_token_info *t, size_t text_offset, json_t *lp)
{
    size_t len;
    char *p = token_piece(m, t->id, &len);
    json_array_append_new(json_object_get(lp, "tokens"), p ? cmf__srv_json_text(p, len) : json_string(""));
    free(p);
    json_array_append_new(json_object_get(lp, "token_logprobs"), json_real(isfinite(t->logprob) ? t->logprob : -9999.0));
    json_t *top = json_object();
    for (int32_t i = 0; i < t->n_top; i++) {
        char *q = token_piece(m, t->top_ids[i], &len);
        json_t *key = q ? cmf__srv_json_text(q, len) : NULL;
        free(q);
        if (!key) continue;
        float v = t->top_logprobs[i];
        json_object_set_new(top, json_string_value(key), json_real(isfinite(v) ? v : -9999.0));
        json_decref(key);
    }
    json_array_append_new(json_object_get(lp, "top_logprobs"), top);
    json_array_append_new(json_object_get(lp, "text_offset"), json_integer((json_int_t)text_offset));
}

static json_t *model_json(const srv_model *m)
{
    json_t *skills = json_array();
    int32_t ns = m->model ? cmf_model_n_skills(m->model) : 0;
    for (int32_t i = 0; i < ns; i++) json_array_append_new(skills, json_string(cmf_model_skill_id(m->model, i)));
    return json_pack("{s:s, s:s, s:I, s:s, s:i, s:o}", "id", m->id, "object", "model", "created", (json_int_t)m->created,
                     "owned_by", "cmf", "max_model_len", m->n_ctx, "skills", skills);
}

int cmf__srv_oai_models(srv *s, struct MHD_Connection *c, const char *one)
{
    if (one) {
        srv_model *m = cmf__srv_find_model(s, one);
        if (!m || !*one) {
            srv_err e;
            cmf__srv_fail(&e, 404, "model", "model_not_found", "The model '%s' does not exist.", one);
            return cmf__srv_reply_error(s, c, SRV_EP_MODELS, &e);
        }
        return cmf__srv_reply_json(s, c, SRV_EP_MODELS, 200, model_json(m));
    }
    json_t *data = json_array();
    for (size_t i = 0; i < s->n_models; i++) json_array_append_new(data, model_json(&s->models[i]));
    return cmf__srv_reply_json(s, c, SRV_EP_MODELS, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

static srv_model *body_model(srv *s, json_t *body, int ep, srv_err *e)
{
    json_t *mv = json_object_get(body, "model");
    if (!json_is_object(body)) return cmf__srv_fail(e, 400, NULL, "invalid_type", "The request body must be a JSON object."), NULL;
    if (mv && !json_is_null(mv) && !json_is_string(mv))
        return cmf__srv_fail(e, 400, "model", "invalid_type", "Invalid type for 'model': expected a string."), NULL;
    srv_model *m = cmf__srv_find_model(s, json_string_value(mv));
    if (!m) cmf__srv_fail(e, 404, "model", "model_not_found", "The model '%s' does not exist.", json_string_value(mv));
    (void)ep;
    return m;
}

int cmf__srv_oai_tokenize(srv *s, struct MHD_Connection *c, json_t *body)
{
    srv_err e;
    srv_model *m = body_model(s, body, SRV_EP_TOKENIZE, &e);
    if (!m) return cmf__srv_reply_error(s, c, SRV_EP_TOKENIZE, &e);
    json_t *msgs = json_object_get(body, "messages"), *prompt = json_object_get(body, "prompt");
    if (!prompt) prompt = json_object_get(body, "content"); /* llama.cpp's name */
    json_t *as = json_object_get(body, "add_special_tokens");
    if (as && !json_is_boolean(as)) {
        cmf__srv_fail(&e, 400, "add_special_tokens", "invalid_type", "Invalid type for 'add_special_tokens': expected a boolean.");
        return cmf__srv_reply_error(s, c, SRV_EP_TOKENIZE, &e);
    }
    int32_t *ids = NULL;
    size_t n = 0;
    bool ok;
    if (msgs) ok = cmf__srv_render_messages(m, msgs, json_object_get(body, "tools"), &ids, &n, &e);
    else if (json_is_string(prompt))
        ok = cmf__srv_tokenize(m, json_string_value(prompt), json_string_length(prompt), as ? json_is_true(as) : true, &ids,
                          &n, &e);
    else ok = cmf__srv_fail(&e, 400, "prompt", prompt ? "invalid_type" : "missing_required_parameter",
                       "expected 'prompt' (a string) or 'messages'.");
    if (!ok) return cmf__srv_reply_error(s, c, SRV_EP_TOKENIZE, &e);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(arr, json_integer(ids[i]));
    free(ids);
    return cmf__srv_reply_json(s, c, SRV_EP_TOKENIZE, 200,
                          json_pack("{s:I, s:i, s:o}", "count", (json_int_t)n, "max_model_len", m->n_ctx, "tokens", arr));
}

int cmf__srv_oai_detokenize(srv *s, struct MHD_Connection *c, json_t *body)
{
    srv_err e;
    srv_model *m = body_model(s, body, SRV_EP_DETOKENIZE, &e);
    if (!m) return cmf__srv_reply_error(s, c, SRV_EP_DETOKENIZE, &e);
    json_t *toks = json_object_get(body, "tokens");
    if (!json_is_array(toks)) {
        cmf__srv_fail(&e, 400, "tokens", toks ? "invalid_type" : "missing_required_parameter",
                 "expected 'tokens': an array of token ids.");
        return cmf__srv_reply_error(s, c, SRV_EP_DETOKENIZE, &e);
    }
    size_t n = json_array_size(toks), i;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids), n_vocab = cmf_model_n_vocab(m->model);
    json_t *v;
    if (!ids) {
        cmf__srv_fail(&e, 500, NULL, NULL, "out of memory");
        return cmf__srv_reply_error(s, c, SRV_EP_DETOKENIZE, &e);
    }
    json_array_foreach(toks, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= n_vocab) {
            free(ids);
            cmf__srv_fail(&e, 400, "tokens", "invalid_value", "tokens[%zu]: expected a token id from 0 to %d.", i, n_vocab - 1);
            return cmf__srv_reply_error(s, c, SRV_EP_DETOKENIZE, &e);
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    size_t need = 0;
    char *buf = NULL;
    cmf_status st = cmf_model_detokenize(m->model, ids, n, false, NULL, 0, &need);
    if (st == CMF_ERR_BOUNDS && (buf = malloc(need + 1))) st = cmf_model_detokenize(m->model, ids, n, false, buf, need + 1, &need);
    free(ids);
    if (st || !buf) {
        free(buf);
        cmf__srv_fail(&e, 400, "tokens", NULL, "the tokens cannot be decoded: %s", cmf_model_errmsg(m->model));
        return cmf__srv_reply_error(s, c, SRV_EP_DETOKENIZE, &e);
    }
    json_t *text = cmf__srv_json_text(buf, need);
    free(buf);
    return cmf__srv_reply_json(s, c, SRV_EP_DETOKENIZE, 200, json_pack("{s:o}", "prompt", text));
}
