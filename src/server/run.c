/* run.c — a server's life: check the bind and the keys, listen (health
 * says 503 while loading), load each model and start its scheduler,
 * serve until told to stop, then stop accepting, give in-flight requests
 * shutdown_timeout_s, cancel what is left and free everything in order
 * (connections, schedulers, models). */
#include "server/srv.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool cmf__srv_http_watchdog_start(srv *s);
void cmf__srv_http_watchdog_stop(srv *s);
struct MHD_Daemon *cmf__srv_http_start(srv *s, const struct sockaddr *addr, bool ipv6);

void cmf__server_params_default(cmf__server_params *p)
{
    memset(p, 0, sizeof *p);
    p->host = "127.0.0.1";
    p->port = 8080;
    p->max_body = 1 << 20;
    p->idle_timeout_s = 60;
    p->request_timeout_s = 30;
    p->max_connections = 256;
    p->shutdown_timeout_s = 10;
    p->max_variants = 4;
    p->sched = cmf_sched_params_default();
}

static bool is_loopback(const struct sockaddr *a)
{
    if (a->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
    if (a->sa_family == AF_INET6) {
        const struct in6_addr *x = &((const struct sockaddr_in6 *)a)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(x)) return true;
        return IN6_IS_ADDR_V4MAPPED(x) && x->s6_addr[12] == 127;
    }
    return false;
}

/* The model id: the --name given, else the file's base name without
 * ".cmf"; characters outside [A-Za-z0-9._:-] become '-'. */
static char *model_id(const char *path, const char *name)
{
    const char *base = name;
    size_t len;
    if (!base) {
        base = strrchr(path, '/');
        base = base ? base + 1 : path;
    }
    len = strlen(base);
    if (!name && len > 4 && !strcmp(base + len - 4, ".cmf")) len -= 4;
    char *id = strndup(base, len);
    for (char *p = id; p && *p; p++)
        if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') || ('0' <= *p && *p <= '9') || strchr("._:-", *p))) *p = '-';
    return id;
}

static bool load_models(srv *s, volatile sig_atomic_t *stop)
{
    for (size_t i = 0; i < s->n_models && !*stop; i++) {
        srv_model *m = &s->models[i];
        cmf_status st = cmf_model_open(m->path, NULL, &m->model);
        if (st) {
            fprintf(stderr, "cmf serve: %s\n", cmf_last_error());
            return false;
        }
        if ((st = cmf_sched_new(m->model, &s->p.sched, &m->sched))) {
            fprintf(stderr, "cmf serve: %s: %s\n", m->path, cmf_last_error());
            return false;
        }
        m->n_ctx = cmf_sched_n_ctx(m->sched);
        fprintf(stderr, "cmf serve: model '%s' (%s, %s): context %d per request, %d in parallel, on %s\n", m->id,
                cmf_model_arch_name(m->model), cmf_model_quant_name(m->model), m->n_ctx, s->p.sched.n_parallel,
                cmf_sched_device(m->sched));
    }
    return !*stop;
}

static void wait_inflight(srv *s, double seconds)
{
    double until = cmf__srv_now() + seconds;
    pthread_mutex_lock(&s->mu);
    while (s->inflight > 0 && cmf__srv_now() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
}

static void shutdown_server(srv *s)
{
    atomic_store(&s->state, SRV_STOPPING);
    if (s->daemon) {
        MHD_socket lfd = MHD_quiesce_daemon(s->daemon);
        if (lfd != MHD_INVALID_SOCKET) close(lfd);
        fprintf(stderr, "cmf serve: stopping: no new connections; %d request(s) in flight get %.0f s\n", s->inflight,
                s->p.shutdown_timeout_s);
        wait_inflight(s, s->p.shutdown_timeout_s);
        for (int round = 0; s->inflight > 0 && round < 50; round++) {
            pthread_mutex_lock(&s->mu);
            for (srv_job *j = s->jobs; j; j = j->next_job) cmf_request_cancel(j->req);
            pthread_mutex_unlock(&s->mu);
            wait_inflight(s, 0.1);
        }
        MHD_stop_daemon(s->daemon);
        s->daemon = NULL;
    }
    cmf__srv_http_watchdog_stop(s);
    for (size_t i = 0; i < s->n_models; i++) {
        cmf__srv_variants_free(&s->models[i]);
        pthread_mutex_destroy(&s->models[i].vmu);
        cmf_sched_free(s->models[i].sched);
        cmf_model_free(s->models[i].model);
        free(s->models[i].id);
        free(s->models[i].path);
    }
    free(s->models);
    cmf__srv_auth_free(&s->auth);
    cmf__srv_metrics_free(&s->metrics);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

static bool resolve(const cmf__server_params *p, struct sockaddr_storage *out, bool *ipv6)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", p->port);
    int rc = getaddrinfo(p->host, port, &hints, &res);
    if (rc || !res) {
        fprintf(stderr, "cmf serve: --host %s: %s\n", p->host, rc ? gai_strerror(rc) : "no address");
        return false;
    }
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *ipv6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    return true;
}

static bool init(srv *s, const cmf__server_params *p)
{
    memset(s, 0, sizeof *s);
    s->p = *p;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    cmf__srv_metrics_init(&s->metrics);
    atomic_store(&s->state, SRV_LOADING);
    atomic_store(&s->next_id, (uint64_t)time(NULL) << 20);
    if (!cmf__srv_auth_init(&s->auth, p->api_keys, p->n_api_keys)) return false;
    s->models = calloc(p->n_models, sizeof *s->models);
    if (!s->models) return false;
    s->n_models = p->n_models;
    for (size_t i = 0; i < p->n_models; i++) {
        srv_model *m = &s->models[i];
        pthread_mutex_init(&m->vmu, NULL);
        m->path = strdup(p->paths[i]);
        m->id = model_id(p->paths[i], p->names ? p->names[i] : NULL);
        if (!m->path || !m->id) return false;
        struct stat sb;
        m->created = stat(m->path, &sb) ? (int64_t)time(NULL) : (int64_t)sb.st_mtime;
        for (size_t k = 0; k < i; k++)
            if (!strcmp(s->models[k].id, m->id)) {
                fprintf(stderr, "cmf serve: two models are named '%s': give one another name (--name)\n", m->id);
                return false;
            }
    }
    return true;
}

int cmf__server_run(const cmf__server_params *p, volatile sig_atomic_t *stop)
{
    srv s;
    struct sockaddr_storage addr;
    bool ipv6 = false;
    if (!init(&s, p) || !resolve(p, &addr, &ipv6)) {
        if (!s.models) fprintf(stderr, "cmf serve: out of memory\n");
        shutdown_server(&s);
        return 1;
    }
    if (!is_loopback((struct sockaddr *)&addr) && !p->n_api_keys) {
        if (!p->insecure_no_auth) {
            fprintf(stderr, "cmf serve: --host %s is reachable from other machines: set a key (--api-key, "
                            "--api-key-file, CMF_API_KEY) or pass --insecure-no-auth\n", p->host);
            shutdown_server(&s);
            return 1;
        }
        fprintf(stderr, "cmf serve: warning: serving %s without an API key (--insecure-no-auth): anyone who can "
                        "reach it can use it\n", p->host);
    }
    if (!(s.daemon = cmf__srv_http_start(&s, (struct sockaddr *)&addr, ipv6)) || !cmf__srv_http_watchdog_start(&s)) {
        fprintf(stderr, "cmf serve: cannot listen on %s port %d (in use, or no permission)\n", p->host, p->port);
        shutdown_server(&s);
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s.daemon, MHD_DAEMON_INFO_BIND_PORT);
    s.port = di ? di->port : p->port;
    if (p->instance) snprintf(s.instance, sizeof s.instance, "%s", p->instance);
    else {
        char host[64] = "localhost";
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = 0;
        snprintf(s.instance, sizeof s.instance, "%s:%d", host, s.port);
    }
    fprintf(stderr, "cmf serve: listening on http://%s%s%s:%d/ (%s)\n", ipv6 ? "[" : "", p->host, ipv6 ? "]" : "",
            s.port, p->n_api_keys ? "API key required" : "no API key");
    if (!load_models(&s, stop)) {
        shutdown_server(&s);
        return *stop ? 0 : 1;
    }
    atomic_store(&s.state, SRV_READY);
    fprintf(stderr, "cmf serve: ready\n");
    while (!*stop) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    shutdown_server(&s);
    fprintf(stderr, "cmf serve: stopped\n");
    return 0;
}
