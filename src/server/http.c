/* http.c — the HTTP side of `cmf serve` on libmicrohttpd: one thread per
 * connection (a generation blocks its connection's thread, never the
 * listener), the body gathered up to max_body, keys checked, the path
 * routed; a watchdog closes connections that dribble their request
 * (slowloris) or idle too long. Startup, model loading and the graceful
 * shutdown live in run.c. */
#include "server/srv.h"

#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

double cmf__srv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

srv_model *cmf__srv_find_model(srv *s, const char *id)
{
    if (!s->n_models) return NULL;
    if (!id) return &s->models[0];
    for (size_t i = 0; i < s->n_models; i++)
        if (!strcmp(s->models[i].id, id)) return &s->models[i];
    return NULL;
}

/* ---- connections and the watchdog ---- */
enum { CONN_IDLE, CONN_READING, CONN_BUSY };
struct srv_conn {
    int fd;
    int state;            /* CONN_* */
    double since;         /* connected, request started or last request ended */
    bool killed;
    struct srv_conn *next, *prev;
};

static int conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static struct srv_conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void conn_state(srv *s, struct MHD_Connection *c, int state)
{
    pthread_mutex_lock(&s->mu);
    struct srv_conn *k = conn_of(c);
    if (k) {
        if (k->state != state) k->since = cmf__srv_now();
        k->state = state;
    }
    pthread_mutex_unlock(&s->mu);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    srv *s = cls;
    pthread_mutex_lock(&s->mu);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        struct srv_conn *k = calloc(1, sizeof *k);
        if (k) {
            k->fd = conn_fd(c);
            k->since = cmf__srv_now();
            k->next = s->conns;
            if (s->conns) s->conns->prev = k;
            s->conns = k;
        }
        *socket_context = k;
    } else if (*socket_context) {
        struct srv_conn *k = *socket_context;
        if (k->prev) k->prev->next = k->next;
        else s->conns = k->next;
        if (k->next) k->next->prev = k->prev;
        free(k);
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&s->mu);
}

static void *watchdog(void *arg)
{
    srv *s = arg;
    static const char BODY[] = "{\"error\":{\"message\":\"The request did not arrive in time (cmf serve "
                               "--request-timeout).\",\"type\":\"invalid_request_error\",\"param\":null,"
                               "\"code\":\"timeout\"}}\n";
    char R408[512];
    int r408 = snprintf(R408, sizeof R408,
                        "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: application/json\r\n"
                        "Content-Length: %zu\r\n\r\n%s",
                        sizeof BODY - 1, BODY);
    pthread_mutex_lock(&s->mu);
    while (!s->watchdog_stop) {
        double now = cmf__srv_now();
        for (struct srv_conn *k = s->conns; k; k = k->next) {
            if (k->killed || k->fd < 0) continue;
            if (k->state == CONN_READING && now - k->since > s->p.request_timeout_s) {
                ssize_t w = send(k->fd, R408, (size_t)r408, MSG_NOSIGNAL | MSG_DONTWAIT);
                (void)w;
                shutdown(k->fd, SHUT_RDWR);
                k->killed = true;
                cmf__srv_metrics_request(&s->metrics, SRV_EP_OTHER, 408);
            } else if (k->state == CONN_IDLE && now - k->since > s->p.idle_timeout_s) {
                shutdown(k->fd, SHUT_RDWR);
                k->killed = true;
            }
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

bool cmf__srv_http_watchdog_start(srv *s);
bool cmf__srv_http_watchdog_start(srv *s)
{
    s->watchdog_started = pthread_create(&s->watchdog, NULL, watchdog, s) == 0;
    return s->watchdog_started;
}

void cmf__srv_http_watchdog_stop(srv *s);
void cmf__srv_http_watchdog_stop(srv *s)
{
    if (!s->watchdog_started) return;
    pthread_mutex_lock(&s->mu);
    s->watchdog_stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->watchdog, NULL);
    s->watchdog_started = false;
}

bool cmf__srv_client_gone(struct MHD_Connection *c)
{
    int fd = conn_fd(c);
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    char b;
    return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* ---- replies ---- */
void cmf__srv_common_headers(srv *s, struct MHD_Response *r)
{
    MHD_add_response_header(r, "X-Cmf-Instance", s->instance);
}

static int reply(srv *s, struct MHD_Connection *c, int endpoint, unsigned status, char *body, size_t len,
                 const char *ctype)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    cmf__srv_common_headers(s, r);
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    cmf__srv_metrics_request(&s->metrics, endpoint, status);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

int cmf__srv_reply_json(srv *s, struct MHD_Connection *c, int endpoint, unsigned status, json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        static const char OOM[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}";
        text = strdup(OOM);
        status = 500;
        if (!text) return MHD_NO;
    }
    size_t len = strlen(text);
    char *t = realloc(text, len + 2);
    if (t) {
        t[len++] = '\n';
        t[len] = 0;
        text = t;
    }
    return reply(s, c, endpoint, status, text, len, "application/json");
}

int cmf__srv_reply_error(srv *s, struct MHD_Connection *c, int endpoint, const srv_err *e)
{
    if (!s->p.quiet)
        fprintf(stderr, "cmf serve: %u %s%s%s%s\n", e->status, e->message, e->param ? " (param '" : "",
                e->param ? e->param : "", e->param ? "')" : "");
    return cmf__srv_reply_json(s, c, endpoint, e->status, cmf__srv_err_json(e));
}

static int reply_err(srv *s, struct MHD_Connection *c, int endpoint, unsigned status, const char *code,
                     const char *msg)
{
    srv_err e;
    cmf__srv_fail(&e, status, NULL, code, "%s", msg);
    return cmf__srv_reply_error(s, c, endpoint, &e);
}

/* ---- routing ---- */
typedef struct srv_body {
    bool started;
    char *p;
    size_t len, cap;
    bool too_big;
} srv_body;

static int endpoint_of(const char *url)
{
    if (!strcmp(url, "/v1/chat/completions")) return SRV_EP_CHAT;
    if (!strcmp(url, "/v1/completions")) return SRV_EP_COMPLETIONS;
    if (!strcmp(url, "/v1/models") || !strncmp(url, "/v1/models/", 11)) return SRV_EP_MODELS;
    if (!strcmp(url, "/tokenize")) return SRV_EP_TOKENIZE;
    if (!strcmp(url, "/detokenize")) return SRV_EP_DETOKENIZE;
    if (!strcmp(url, "/health") || !strcmp(url, "/healthz")) return SRV_EP_HEALTH;
    if (!strcmp(url, "/metrics")) return SRV_EP_METRICS;
    if (!strcmp(url, "/") || !strcmp(url, "/index.html")) return SRV_EP_PAGE;
    return SRV_EP_OTHER;
}

static int health(srv *s, struct MHD_Connection *c)
{
    int st = atomic_load(&s->state);
    const char *word = st == SRV_READY ? "ok" : st == SRV_LOADING ? "loading" : "stopping";
    return cmf__srv_reply_json(s, c, SRV_EP_HEALTH, st == SRV_READY ? 200 : 503, json_pack("{s:s}", "status", word));
}

static int post_json(srv *s, struct MHD_Connection *c, int ep, srv_body *b)
{
    json_error_t jerr;
    json_t *body = json_loadb(b->p ? b->p : "", b->len, 0, &jerr);
    if (!body) {
        srv_err e;
        cmf__srv_fail(&e, 400, NULL, "invalid_json", "We could not parse the JSON body of your request: %s (line %d, column %d, byte %d).",
                 jerr.text, jerr.line, jerr.column, jerr.position);
        return cmf__srv_reply_error(s, c, ep, &e);
    }
    int ret;
    if (ep == SRV_EP_TOKENIZE) ret = cmf__srv_oai_tokenize(s, c, body);
    else if (ep == SRV_EP_DETOKENIZE) ret = cmf__srv_oai_detokenize(s, c, body);
    else {
        srv_job *j = calloc(1, sizeof *j);
        srv_err e;
        if (!j) ret = reply_err(s, c, ep, 500, NULL, "out of memory");
        else if (!cmf__srv_parse_generation(s, ep == SRV_EP_CHAT ? SRV_KIND_CHAT : SRV_KIND_COMPLETION, body, j, &e)) {
            cmf__srv_job_clear(j);
            free(j);
            ret = cmf__srv_reply_error(s, c, ep, &e);
        } else {
            j->endpoint = ep;
            ret = cmf__srv_gen_answer(s, c, j);
        }
    }
    json_decref(body);
    return ret;
}

static int route(srv *s, struct MHD_Connection *c, const char *url, const char *method, srv_body *b)
{
    int ep = endpoint_of(url);
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (ep == SRV_EP_HEALTH && get) return health(s, c);
    if (ep == SRV_EP_PAGE && get) {
        char *page = strdup(cmf__srv_page_html);
        return page ? reply(s, c, ep, 200, page, strlen(page), "text/html; charset=utf-8") : MHD_NO;
    }
    if (!cmf__srv_auth_check(&s->auth, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization")))
        return reply_err(s, c, ep, 401, "invalid_api_key",
                         "Incorrect or missing API key: send it as 'Authorization: Bearer KEY'.");
    if (ep == SRV_EP_OTHER) return reply_err(s, c, ep, 404, "not_found", "No such endpoint.");
    bool want_post = ep == SRV_EP_CHAT || ep == SRV_EP_COMPLETIONS || ep == SRV_EP_TOKENIZE || ep == SRV_EP_DETOKENIZE;
    if (want_post ? !post : !get) return reply_err(s, c, ep, 405, "method_not_allowed", want_post ? "Use POST." : "Use GET.");
    if (ep == SRV_EP_METRICS) {
        size_t len = 0;
        char *text = cmf__srv_metrics_render(s, &len);
        return text ? reply(s, c, ep, 200, text, len, "text/plain; version=0.0.4; charset=utf-8")
                    : reply_err(s, c, ep, 500, NULL, "out of memory");
    }
    if (atomic_load(&s->state) != SRV_READY)
        return reply_err(s, c, ep, 503, atomic_load(&s->state) == SRV_LOADING ? "loading" : "server_stopping",
                         atomic_load(&s->state) == SRV_LOADING ? "The models are still loading." : "The server is shutting down.");
    if (ep == SRV_EP_MODELS) return cmf__srv_oai_models(s, c, url[10] == '/' ? url + 11 : NULL);
    return post_json(s, c, ep, b);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    srv *s = cls;
    srv_body *b = *con_cls;
    (void)version;
    if (!b->started) {
        b->started = true;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno || *end || n > s->p.max_body) b->too_big = true;
        }
        if (!b->too_big) return MHD_YES;
    }
    if (*upload_size) {
        if (!b->too_big && b->len + *upload_size > s->p.max_body) b->too_big = true;
        if (!b->too_big) {
            if (b->len + *upload_size + 1 > b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 4096;
                while (cap < b->len + *upload_size + 1) cap *= 2;
                char *p = realloc(b->p, cap);
                if (!p) return MHD_NO;
                b->p = p;
                b->cap = cap;
            }
            memcpy(b->p + b->len, upload, *upload_size);
            b->len += *upload_size;
        }
        /* past the limit the rest is read and dropped (the request
         * timeout bounds how long): the 413 goes out once it has all come */
        *upload_size = 0;
        return MHD_YES;
    }
    conn_state(s, c, CONN_BUSY);
    if (b->too_big) {
        char msg[160];
        snprintf(msg, sizeof msg, "The request body passes this server's limit of %zu bytes (cmf serve --max-body).",
                 s->p.max_body);
        return reply_err(s, c, endpoint_of(url), 413, "request_too_large", msg);
    }
    return route(s, c, url, method, b);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)uri;
    conn_state(cls, c, CONN_READING);
    return calloc(1, sizeof(srv_body));
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    srv_body *b = *con_cls;
    if (b) free(b->p);
    free(b);
    *con_cls = NULL;
    conn_state(cls, c, CONN_IDLE);
}

struct MHD_Daemon *cmf__srv_http_start(srv *s, const struct sockaddr *addr, bool ipv6);
struct MHD_Daemon *cmf__srv_http_start(srv *s, const struct sockaddr *addr, bool ipv6)
{
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_POLL |
                     MHD_USE_ERROR_LOG | (ipv6 ? MHD_USE_IPv6 : 0);
    return MHD_start_daemon(flags, (uint16_t)s->p.port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->p.idle_timeout_s, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)s->p.max_connections, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
                            MHD_OPTION_END);
}
