/* server.h — `cmf serve`: an OpenAI-compatible HTTP server over the
 * serving scheduler (cmf_sched). What the command line hands the server
 * module; the module itself uses only the public API (cmf.h),
 * libmicrohttpd, jansson and libsodium. docs/SERVING.md describes the
 * endpoints, the limits and the metrics. */
#ifndef CMF_SERVER_H
#define CMF_SERVER_H

#include "cmf.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cmf__server_params {
    const char *host;              /* bind address ("127.0.0.1", "::", "0.0.0.0", a name) */
    int port;                      /* 0 = any free port (the one taken is printed) */
    const char *const *paths;      /* .cmf files served, the first is the default model */
    const char *const *names;      /* their model ids (NULL entry: the file's base name) */
    size_t n_models;
    const char *const *api_keys;   /* accepted bearer keys (copied); none = no auth */
    size_t n_api_keys;
    bool insecure_no_auth;         /* allow a non-loopback bind without a key */
    size_t max_body;               /* request body bytes at most (413 beyond) */
    int idle_timeout_s;            /* a connection idle that long is closed */
    int request_timeout_s;         /* headers and body must arrive within (408 beyond) */
    int max_connections;           /* concurrent connections at most */
    int32_t max_tokens_cap;        /* max_tokens above is a 400; 0 = the context */
    double shutdown_timeout_s;     /* SIGINT/SIGTERM: in-flight requests get this long */
    const char *skill;             /* the server's default skill (NULL = the file's) */
    const char *task;              /* the task mask every request runs (NULL = none) */
    const char *const *loras;      /* LoRA adapters of the server: requests run all of them unless they name
                                    * some ('lora'); at most 8 */
    size_t n_loras;
    int max_variants;              /* schedulers per model for other task / LoRA sets than the server's (0: such
                                    * a request is a 400) */
    cmf_sched_params sched;        /* per model */
    const char *instance;          /* X-Cmf-Instance of every answer (NULL: host name:port) */
    bool quiet;                    /* no log line per refused request */
} cmf__server_params;

/* Fills the defaults: 127.0.0.1:8080, 1 MiB bodies, idle 60 s, request
 * 30 s, 256 connections, shutdown 10 s. */
void cmf__server_params_default(cmf__server_params *p);

/* Starts listening (health answers 503 while the models load), loads
 * every model and its scheduler, serves until *stop becomes non-zero
 * (a signal handler sets it), then stops accepting, lets in-flight
 * requests finish within shutdown_timeout_s, cancels the rest and frees
 * everything. Returns 0 after a clean shutdown, 1 when the server could
 * not start (the message printed on stderr). */
int cmf__server_run(const cmf__server_params *p, volatile sig_atomic_t *stop);

#endif
