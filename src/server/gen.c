/* gen.c — running one generation request: submit it to the model's
 * scheduler, then either gather every token and answer one JSON body, or
 * stream Server-Sent Events, one `data:` chunk per token as it arrives
 * (the connection thread blocks in cmf_request_poll; libmicrohttpd sends
 * each chunk before asking for the next). A client that goes away
 * cancels its request: the socket is checked whenever no token came. */
#include "server/srv.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POLL_MS 100
#define KEEPALIVE_S 2.0

enum { PH_TOKENS, PH_FINAL, PH_END };

/* An engine message for a client: the server's path of the model file
 * becomes the model's id. */
static const char *client_msg(const srv_job *j, const char *msg, char *buf, size_t cap)
{
    size_t n = strlen(j->m->path);
    if (!strncmp(msg, j->m->path, n) && msg[n] == ':') {
        snprintf(buf, cap, "model '%s'%s", j->m->id, msg + n);
        return buf;
    }
    return msg;
}

static bool text_append(srv_job *j, const char *p, size_t n)
{
    if (j->text_len + n + 1 > j->text_cap) {
        size_t cap = j->text_cap ? j->text_cap * 2 : 1024;
        while (cap < j->text_len + n + 1) cap *= 2;
        char *t = realloc(j->text, cap);
        if (!t) return false;
        j->text = t;
        j->text_cap = cap;
    }
    memcpy(j->text + j->text_len, p, n);
    j->text_len += n;
    j->text[j->text_len] = 0;
    return true;
}

static bool out_append(srv_job *j, const char *p, size_t n)
{
    if (j->out_len + n > j->out_cap) {
        size_t cap = j->out_cap ? j->out_cap * 2 : 4096;
        while (cap < j->out_len + n) cap *= 2;
        char *t = realloc(j->out, cap);
        if (!t) return false;
        j->out = t;
        j->out_cap = cap;
    }
    memcpy(j->out + j->out_len, p, n);
    j->out_len += n;
    return true;
}

static bool out_event(srv_job *j, json_t *chunk)
{
    char *s = json_dumps(chunk, JSON_COMPACT);
    json_decref(chunk);
    if (!s) return false;
    bool ok = out_append(j, "data: ", 6) && out_append(j, s, strlen(s)) && out_append(j, "\n\n", 2);
    free(s);
    return ok;
}

/* A token arrived: the request's timing and the metrics. */
static void on_token_time(srv_job *j)
{
    double now = cmf__srv_now();
    if (j->n_emitted && j->t_last > 0) cmf__srv_metrics_observe(&j->s->metrics, SRV_H_ITL, now - j->t_last);
    j->t_last = now;
}

static void job_register(srv *s, srv_job *j)
{
    pthread_mutex_lock(&s->mu);
    j->next_job = s->jobs;
    j->prev_job = NULL;
    if (s->jobs) s->jobs->prev_job = j;
    s->jobs = j;
    pthread_mutex_unlock(&s->mu);
}

/* The request's numbers into the metrics, once: before its last bytes go
 * out (a client that reads /metrics after [DONE] sees them), or when the
 * job ends without that. */
static void record(srv_job *j)
{
    if (j->recorded || !j->req) return;
    j->recorded = true;
    srv *s = j->s;
    cmf_request_result r;
    memset(&r, 0, sizeof r);
    cmf_request_wait(j->req, &r);
    cmf__srv_metrics_tokens(&s->metrics, j->n_prompt, (uint64_t)(r.gen.n_gen > 0 ? r.gen.n_gen : 0),
                            (uint64_t)(r.gen.n_reused > 0 ? r.gen.n_reused : 0));
    if (r.ttft_ms > 0) cmf__srv_metrics_observe(&s->metrics, SRV_H_TTFT, r.ttft_ms / 1000.0);
    cmf__srv_metrics_observe(&s->metrics, SRV_H_QUEUE, r.queue_ms / 1000.0);
    cmf__srv_metrics_observe(&s->metrics, SRV_H_E2E, cmf__srv_now() - j->t_start);
}

/* The scheduler's side of a job, done with: metrics, the request's handle
 * freed, its variant released. A stream does this before its [DONE] goes
 * out, so that a client that has read the whole stream finds the variant
 * idle and its numbers counted; job_end does it for every other ending. */
static void job_detach(srv_job *j)
{
    srv *s = j->s;
    if (j->req) {
        if (!cmf_request_done(j->req)) {
            cmf_request_cancel(j->req);
            if (j->client_gone || !j->finished) {
                pthread_mutex_lock(&s->metrics.mu);
                s->metrics.disconnects++;
                pthread_mutex_unlock(&s->metrics.mu);
            }
        }
        record(j);
        pthread_mutex_lock(&s->mu);
        if (j->prev_job) j->prev_job->next_job = j->next_job;
        else s->jobs = j->next_job;
        if (j->next_job) j->next_job->prev_job = j->prev_job;
        pthread_mutex_unlock(&s->mu);
        cmf_request_free(j->req);
        j->req = NULL;
    }
    if (j->m) cmf__srv_variant_release(j->m, j->var);
    j->var = NULL;
}

/* Ends a job: job_detach, the server's count, the memory. */
static void job_end(srv_job *j)
{
    srv *s = j->s;
    job_detach(j);
    pthread_mutex_lock(&s->mu);
    s->inflight--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    cmf__srv_job_clear(j);
    free(j);
}

static json_t *chunk_new(srv_job *j)
{
    bool chat = j->kind == SRV_KIND_CHAT;
    json_t *c = json_pack("{s:s, s:s, s:I, s:s, s:[]}", "id", j->id, "object",
                          chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)j->created,
                          "model", j->m->id, "choices");
    if (j->include_usage) json_object_set_new(c, "usage", json_null());
    return c;
}

/* A chat chunk carrying `delta` (taken), the role on the first, and the
 * logprobs gathered since the last chunk. */
static bool send_delta(srv_job *j, json_t *delta)
{
    json_t *c = chunk_new(j), *choice = json_pack("{s:i, s:n, s:n}", "index", 0, "finish_reason", "logprobs");
    if (!j->sent_role) json_object_set_new(delta, "role", json_string("assistant"));
    j->sent_role = true;
    json_object_set_new(choice, "delta", delta);
    if (j->lp) json_object_set_new(choice, "logprobs", json_pack("{s:o}", "content", j->lp));
    j->lp = NULL;
    json_array_append_new(json_object_get(c, "choices"), choice);
    return out_event(j, c);
}

static bool send_content(srv_job *j, const char *p, size_t n)
{
    return send_delta(j, json_pack("{s:o}", "content", cmf__srv_json_text(p, n)));
}

/* One token's chunk (or its part of the gathered answer). With tools,
 * text that may begin a call is held back until it is known not to be
 * one (cmf__srv_tools_safe); stream_final sends the rest. */
static bool take_token(srv_job *j, const cmf_token_info *t)
{
    bool chat = j->kind == SRV_KIND_CHAT, has_lp = j->logprobs && t->id >= 0;
    if (t->id >= 0) on_token_time(j);
    if (t->id >= 0) j->n_emitted++;
    if (has_lp && (chat || !j->stream)) {
        if (!j->lp) j->lp = chat ? json_array() : cmf__srv_oai_completion_logprobs_new();
        if (chat) json_array_append_new(j->lp, cmf__srv_oai_chat_logprob(j->m, t));
        else cmf__srv_oai_completion_logprob(j->m, t, j->text_len, j->lp);
    }
    if (!j->stream) return text_append(j, t->text, t->text_len);
    if (chat && j->tool_choice != SRV_TOOLS_NONE) {
        if (!text_append(j, t->text, t->text_len)) return false;
        size_t safe = cmf__srv_tools_safe(j, j->text, j->text_len), from = j->flushed;
        if (safe <= from) return true;
        j->flushed = safe;
        return send_content(j, j->text + from, safe - from);
    }
    if (!t->text_len && !has_lp) return true;
    if (chat) return send_content(j, t->text, t->text_len);
    json_t *c = chunk_new(j), *choice = json_pack("{s:i, s:n, s:n, s:o}", "index", 0, "finish_reason", "logprobs",
                                                  "text", cmf__srv_json_text(t->text, t->text_len));
    if (has_lp) {
        json_t *lp = cmf__srv_oai_completion_logprobs_new();
        cmf__srv_oai_completion_logprob(j->m, t, j->text_offset, lp);
        json_object_set_new(choice, "logprobs", lp);
    }
    j->text_offset += t->text_len;
    json_array_append_new(json_object_get(c, "choices"), choice);
    return out_event(j, c);
}

/* Streaming with tools, at the end: the content held back, then the
 * calls as one tool_calls delta. True with *calls_sent when there were. */
static bool send_held(srv_job *j, bool *calls_sent)
{
    size_t clen;
    json_t *calls = cmf__srv_tools_calls(j, j->text, j->text_len, &clen);
    *calls_sent = calls != NULL;
    if (!calls)
        return (j->text_len <= j->flushed && !j->lp) || send_content(j, j->text + j->flushed, j->text_len - j->flushed);
    json_t *lp = j->lp;
    j->lp = NULL;
    bool ok = clen <= j->flushed || send_content(j, j->text + j->flushed, clen - j->flushed);
    j->lp = lp;
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) json_object_set_new(c, "index", json_integer((json_int_t)i));
    return ok && send_delta(j, json_pack("{s:n, s:o}", "content", "tool_calls", calls));
}

/* The stream's end: the finish chunk, the usage chunk, [DONE]. */
static bool stream_final(srv_job *j)
{
    cmf_request_result r;
    memset(&r, 0, sizeof r);
    cmf_status st = cmf_request_wait(j->req, &r);
    j->finished = true;
    record(j);
    if (st) {
        srv_err e;
        char buf[600];
        cmf__srv_fail(&e, st == CMF_ERR_CANCELLED ? 503 : 500, NULL, NULL, "the request failed: %s",
                 client_msg(j, cmf_request_errmsg(j->req), buf, sizeof buf));
        bool ok = out_event(j, cmf__srv_err_json(&e));
        job_detach(j);
        return ok && out_append(j, "data: [DONE]\n\n", 14);
    }
    bool calls = false;
    if (j->kind == SRV_KIND_CHAT && j->tool_choice != SRV_TOOLS_NONE && !send_held(j, &calls)) return false;
    json_t *c = chunk_new(j);
    json_t *choice = json_pack("{s:i, s:s, s:n}", "index", 0, "finish_reason",
                               calls ? "tool_calls" : cmf__srv_oai_finish(r.gen.finish), "logprobs");
    if (j->kind == SRV_KIND_CHAT) json_object_set_new(choice, "delta", json_object());
    else json_object_set_new(choice, "text", json_string(""));
    json_array_append_new(json_object_get(c, "choices"), choice);
    json_t *skill = cmf__srv_oai_skill(j);
    if (skill) json_object_set_new(c, "skill", skill);
    if (!out_event(j, c)) return false;
    if (j->include_usage) {
        json_t *u = chunk_new(j);
        json_object_set_new(u, "usage", cmf__srv_oai_usage(j, &r));
        if (!out_event(j, u)) return false;
    }
    job_detach(j);
    return out_append(j, "data: [DONE]\n\n", 14);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    srv_job *j = cls;
    (void)pos;
    double waited_since = cmf__srv_now();
    while (j->out_off == j->out_len) {
        j->out_off = j->out_len = 0;
        if (j->phase == PH_END) return MHD_CONTENT_READER_END_OF_STREAM;
        if (j->phase == PH_FINAL) {
            if (!stream_final(j)) return MHD_CONTENT_READER_END_WITH_ERROR;
            j->phase = PH_END;
            continue;
        }
        cmf_token_info t;
        int got = cmf_request_poll(j->req, POLL_MS, &t);
        if (got < 0) j->phase = PH_FINAL;
        else if (got > 0) {
            if (!take_token(j, &t)) return MHD_CONTENT_READER_END_WITH_ERROR;
        } else if (cmf__srv_client_gone(j->conn)) {
            j->client_gone = true;
            cmf_request_cancel(j->req);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        } else if (cmf__srv_now() - waited_since > KEEPALIVE_S) {
            /* an SSE comment: keeps proxies from timing the stream out while queued */
            if (!out_append(j, ": keep-alive\n\n", 14)) return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    size_t n = j->out_len - j->out_off;
    if (n > max) n = max;
    memcpy(buf, j->out + j->out_off, n);
    j->out_off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) { job_end(cls); }

static int answer_whole(srv *s, struct MHD_Connection *c, srv_job *j)
{
    cmf_token_info t;
    int got;
    while ((got = cmf_request_poll(j->req, POLL_MS, &t)) >= 0) {
        if (got > 0 && !take_token(j, &t)) break;
        if (!got && cmf__srv_client_gone(c)) {
            j->client_gone = true;
            cmf_request_cancel(j->req);
        }
    }
    cmf_request_result r;
    memset(&r, 0, sizeof r);
    cmf_status st = cmf_request_wait(j->req, &r);
    j->finished = true;
    record(j);
    int ret;
    if (st || got >= 0) {
        srv_err e;
        char buf[600];
        cmf__srv_fail(&e, st == CMF_ERR_CANCELLED ? 503 : 500, NULL, NULL, "the request failed: %s",
                 st ? client_msg(j, cmf_request_errmsg(j->req), buf, sizeof buf) : "out of memory");
        ret = cmf__srv_reply_error(s, c, j->endpoint, &e);
    } else {
        bool chat = j->kind == SRV_KIND_CHAT;
        size_t clen = j->text_len;
        json_t *calls = chat ? cmf__srv_tools_calls(j, j->text, j->text_len, &clen) : NULL;
        json_t *text = clen || !calls ? cmf__srv_json_text(j->text ? j->text : "", clen) : json_null();
        json_t *choice = json_pack("{s:i, s:s}", "index", 0, "finish_reason",
                                   calls ? "tool_calls" : cmf__srv_oai_finish(r.gen.finish));
        if (chat) {
            json_t *msg = json_pack("{s:s, s:o}", "role", "assistant", "content", text);
            if (calls) json_object_set_new(msg, "tool_calls", calls);
            json_object_set_new(choice, "message", msg);
        } else {
            json_object_set_new(choice, "text", text);
        }
        json_t *lp = j->lp ? json_incref(j->lp) : json_null();
        if (chat && j->lp) lp = json_pack("{s:o}", "content", lp);
        json_object_set_new(choice, "logprobs", lp);
        json_t *body = json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", j->id, "object",
                                 chat ? "chat.completion" : "text_completion", "created", (json_int_t)j->created, "model",
                                 j->m->id, "choices", choice, "usage", cmf__srv_oai_usage(j, &r));
        json_t *skill = cmf__srv_oai_skill(j);
        if (skill) json_object_set_new(body, "skill", skill);
        ret = cmf__srv_reply_json(s, c, j->endpoint, 200, body);
    }
    job_end(j);
    return ret;
}

static unsigned submit_status(cmf_status st, const char **code)
{
    switch (st) {
    case CMF_ERR_BUSY: *code = "queue_full"; return 429;
    case CMF_ERR_CONTEXT: *code = "context_length_exceeded"; return 400;
    case CMF_ERR_NOT_FOUND: *code = "skill_not_found"; return 400;
    case CMF_ERR_ARG: *code = "invalid_value"; return 400;
    case CMF_ERR_CANCELLED: *code = "server_stopping"; return 503;
    default: *code = NULL; return 500;
    }
}

int cmf__srv_gen_answer(srv *s, struct MHD_Connection *c, srv_job *j)
{
    j->s = s;
    j->conn = c;
    j->t_start = cmf__srv_now();
    j->created = (int64_t)time(NULL);
    snprintf(j->id, sizeof j->id, "%s-%016llx", j->kind == SRV_KIND_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)atomic_fetch_add(&s->next_id, 1) * 0x9e3779b97f4a7c15ull);
    j->rp.gen.on_token = NULL; /* tokens are read with cmf_request_poll */
    pthread_mutex_lock(&s->mu);
    bool open = atomic_load(&s->state) == SRV_READY;
    if (open) s->inflight++;
    pthread_mutex_unlock(&s->mu);
    srv_err e;
    if (!open) {
        cmf__srv_fail(&e, 503, NULL, "server_stopping", "The server is shutting down.");
        int ret = cmf__srv_reply_error(s, c, j->endpoint, &e);
        cmf__srv_job_clear(j);
        free(j);
        return ret;
    }
    cmf_status st = cmf_sched_submit(cmf__srv_job_sched(j), &j->rp, &j->req);
    if (st) {
        const char *code;
        unsigned status = submit_status(st, &code);
        char buf[600];
        const char *param = status == 429 ? NULL : st == CMF_ERR_NOT_FOUND ? "skill"
                            : j->kind == SRV_KIND_CHAT ? "messages" : "prompt";
        cmf__srv_fail(&e, status, param, code, "%s%s", status == 429 ? "Too many requests are waiting; try again later. " : "",
                 client_msg(j, cmf_last_error(), buf, sizeof buf));
        j->req = NULL;
        int ret = cmf__srv_reply_error(s, c, j->endpoint, &e);
        job_end(j);
        return ret;
    }
    job_register(s, j);
    if (!j->stream) return answer_whole(s, c, j);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, j, stream_free);
    if (!r) {
        job_end(j);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    cmf__srv_common_headers(s, r);
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "X-Accel-Buffering", "no"); /* nginx: pass each chunk on at once */
    cmf__srv_metrics_request(&s->metrics, j->endpoint, 200);
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}
