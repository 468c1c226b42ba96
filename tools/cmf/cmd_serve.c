/* cmd_serve.c — `cmf serve FILE...`: the OpenAI-compatible HTTP server
 * (src/server/, docs/SERVING.md). Reads the options and the keys, installs
 * the SIGINT/SIGTERM handlers of the graceful shutdown and hands over to
 * cmf__server_run. */
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "runopts.h"
#include "server/server.h"
#include "util/file.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *HELP =
    "usage: cmf serve FILE... [options]\n"
    "\n"
    "Serve .cmf models over an OpenAI-compatible HTTP API: POST\n"
    "/v1/chat/completions and /v1/completions (streamed with \"stream\": true),\n"
    "GET /v1/models, POST /tokenize and /detokenize, GET /health (and /healthz),\n"
    "GET /metrics (Prometheus) and a chat page at GET /. Each FILE is one\n"
    "model, its id the base name without .cmf (or --name); the first is the\n"
    "default. Requests run on a continuous-batching scheduler per model.\n"
    "\n";
static const char *TAIL =
    "\n"
    "Keys: requests other than /health and the page need 'Authorization:\n"
    "Bearer KEY' when a key is set (--api-key, --api-key-file, or CMF_API_KEY).\n"
    "A --host other than loopback needs a key or --insecure-no-auth.\n"
    "A request may name a task mask ('task', \"\" for none) and adapters among the\n"
    "--lora ones ('lora', [] for none); without them it runs --task and every\n"
    "--lora. Other combinations run on up to --variants more schedulers per model.\n"
    "SIGINT/SIGTERM: stop accepting, let requests finish within\n"
    "--shutdown-timeout, cancel the rest, exit 0. See docs/SERVING.md.\n"
    "\n"
    "Exit status: 0 after a clean shutdown, 1 when the server cannot start, 2 a usage error.\n";

static volatile sig_atomic_t g_stop;
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* Appends each non-empty line of `path` (trimmed) as a key. */
static bool read_key_file(const char *path, char ***keys, size_t *n)
{
    FILE *f = NULL; /* a regular file: a FIFO is refused, not waited on */
    if (cmf__fopen_regular(path, &f)) return cli_fail("serve", "--api-key-file %s", cmf_last_error()), false;
    char line[4096];
    size_t lineno = 0;
    bool ok = true;
    while (ok && fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            ok = cli_fail("serve", "--api-key-file %s: line %zu is longer than %zu bytes", path, lineno, sizeof line - 2);
            break;
        }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
            line[--len] = 0;
        char *k = line;
        while (*k == ' ' || *k == '\t') k++;
        if (!*k || *k == '#') continue;
        char **nk = realloc(*keys, (*n + 1) * sizeof *nk);
        if (!nk || !(nk[*n] = strdup(k))) {
            if (nk) *keys = nk;
            ok = cli_fail("serve", "out of memory");
            break;
        }
        *keys = nk;
        (*n)++;
    }
    fclose(f);
    return ok;
}

static bool parse_bytes(const char *s, long long *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0) return false;
    double mul = 1;
    if (*end == 'k' || *end == 'K') mul = 1024.0, end++;
    else if (*end == 'm' || *end == 'M') mul = 1024.0 * 1024, end++;
    else if (*end == 'g' || *end == 'G') mul = 1024.0 * 1024 * 1024, end++;
    if (*end == 'i' || *end == 'B') end++;
    if (*end == 'B') end++;
    if (*end || v * mul > 9e18) return false;
    *out = (long long)(v * mul);
    return true;
}

int cmd_serve(int argc, char **argv)
{
    cmf__server_params p;
    cmf__server_params_default(&p);
    const char *files[16] = {0}, *names_v[16], *keys_v[64], *lora_v[8];
    opt_list names = {names_v, 0, 16}, keys = {keys_v, 0, 64}, loras = {lora_v, 0, 8};
    const char *key_file = NULL, *gpu = NULL, *kv = "f16", *host = p.host, *kv_budget = NULL, *max_body = NULL;
    long long port = 8080, parallel = 4, ctx = 0, queue = 256, batch = 0, threads = 0, idle = 60, reqto = 30;
    long long maxconn = 256, maxtok = 0, variants = 4;
    float shut = 10;
    const opt_spec spec[] = {
        {"--host", NULL, OPT_STR, &host, "ADDR", "address to listen on", "127.0.0.1", NULL},
        {"--port", NULL, OPT_INT, &port, "N", "TCP port; 0 = any free one (printed)", "8080", NULL, OPT_RANGE(0, 65535)},
        {"--name", NULL, OPT_LIST, &names, "ID", "model id of the next FILE, in order (repeatable)", NULL, NULL},
        {"--api-key", NULL, OPT_LIST, &keys, "KEY", "accept this bearer key (repeatable)", NULL, NULL},
        {"--api-key-file", NULL, OPT_STR, &key_file, "F", "accept each line of F as a key ('#' lines skipped)", NULL, NULL},
        {"--insecure-no-auth", NULL, OPT_FLAG, &p.insecure_no_auth, NULL,
         "allow a non-loopback --host without any key (warns)", NULL, NULL},
        {"", NULL, OPT_TEXT, NULL, NULL, "\nscheduler (per model):\n", NULL, NULL},
        {"--parallel", "-np", OPT_INT, &parallel, "N", "requests generating at once", "4", NULL, OPT_RANGE(1, 1024)},
        {"--ctx", "-c", OPT_INT, &ctx, "N", "context per request", "what --kv-budget allows, at most the model's", NULL,
         OPT_RANGE(1, INT32_MAX)},
        {"--kv-budget", NULL, OPT_STR, &kv_budget, "BYTES", "KV cache for all requests together (k, M, G suffixes)",
         "2G", NULL},
        {"--queue", NULL, OPT_INT, &queue, "N", "requests waiting at most; beyond, 429", "256", NULL, OPT_RANGE(1, 1 << 20)},
        {"--batch-tokens", NULL, OPT_INT, &batch, "N", "tokens per step (decode plus prefill chunks)", "256", NULL,
         OPT_RANGE(1, 1 << 20)},
        {"--threads", "-t", OPT_INT, &threads, "N", "CPU threads", "one per core", NULL, OPT_RANGE(0, 4096)},
        {"--kv-type", NULL, OPT_STR, &kv, "T", RUNOPT_KV_HELP, "f16", NULL},
        {"--gpu", NULL, OPT_STR, &gpu, "on|off|auto", RUNOPT_GPU_HELP, NULL, NULL},
        {"--skill", NULL, OPT_STR, &p.skill, "ID|auto", "skill of requests that name none", "the file's", NULL},
        {"--task", NULL, OPT_STR, &p.task, "NAME", "task mask (spec 5) of requests that name none", "none", NULL},
        RUNOPT_LORA_SPEC(&loras),
        {"--variants", NULL, OPT_INT, &variants, "N",
         "schedulers per model for requests naming another task\n"
         "or LoRA set, each with its own KV cache; 0: refuse them",
         "4", NULL, OPT_RANGE(0, 16)},
        {"", NULL, OPT_TEXT, NULL, NULL, "\nlimits:\n", NULL, NULL},
        {"--max-body", NULL, OPT_STR, &max_body, "BYTES", "request body at most; beyond, 413", "1M", NULL},
        {"--max-tokens", NULL, OPT_INT, &maxtok, "N", "max_tokens above N is a 400; also the default", "the context",
         NULL, OPT_RANGE(1, INT32_MAX)},
        {"--max-connections", NULL, OPT_INT, &maxconn, "N", "open connections at most", "256", NULL, OPT_RANGE(1, 65536)},
        {"--request-timeout", NULL, OPT_INT, &reqto, "S", "headers and body must arrive within S seconds; else 408", "30",
         NULL, OPT_RANGE(1, 86400)},
        {"--idle-timeout", NULL, OPT_INT, &idle, "S", "close a connection idle for S seconds", "60", NULL, OPT_RANGE(1, 86400)},
        {"--shutdown-timeout", NULL, OPT_FLOAT, &shut, "S", "on SIGINT/SIGTERM, in-flight requests get S seconds", "10",
         NULL},
        {"--instance", NULL, OPT_STR, &p.instance, "NAME", "X-Cmf-Instance header of every answer (which replica)",
         "host name:port", NULL},
        {"--quiet", "-q", OPT_FLAG, &p.quiet, NULL, "no log line per refused request", NULL, NULL},
    };
    opts_cmd c = {.name = "serve", .head = HELP, .tail = TAIL, .spec = spec, .n_spec = OPTS_N(spec), .pos = files,
                  .max_pos = 16};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!c.n_pos) return opts_usage("serve", "no FILE");
    if (names.n > c.n_pos) return opts_usage("serve", "%zu --name for %zu FILE", names.n, c.n_pos);
    /* the integers' ranges are the option table's (checked by opts_parse, shown by --help) */
    if (!(shut >= 0) || shut > 86400) return opts_usage("serve", "--shutdown-timeout %g: expected 0..86400 s", (double)shut);
    long long budget = 0, body = 1 << 20;
    if (kv_budget && (!parse_bytes(kv_budget, &budget) || budget < 1))
        return opts_usage("serve", "--kv-budget '%s': expected bytes > 0", kv_budget);
    if (max_body && (!parse_bytes(max_body, &body) || body < 1))
        return opts_usage("serve", "--max-body '%s': expected bytes > 0", max_body);
    /* --lora FILE or FILE:S (S a number; a path may hold ':' itself) */
    char *lora_path[8] = {0};
    float lora_scale[8];
    for (size_t i = 0; i < loras.n; i++) {
        const char *v = loras.v[i], *colon = strrchr(v, ':');
        size_t len = strlen(v);
        lora_scale[i] = 1.0f;
        if (colon && colon[1]) {
            char *end;
            float sc = strtof(colon + 1, &end);
            if (!*end && isfinite(sc)) {
                lora_scale[i] = sc;
                len = (size_t)(colon - v);
            }
        }
        if (!(lora_path[i] = strndup(v, len))) {
            for (size_t k = 0; k < i; k++) free(lora_path[k]);
            return cli_fail("serve", "out of memory");
        }
    }
    p.sched.task = p.task;
    p.sched.lora = (const char *const *)lora_path;
    p.sched.lora_scale = lora_scale;
    p.sched.n_lora = (int32_t)loras.n;
    p.loras = (const char *const *)lora_path;
    p.n_loras = loras.n;
    if (cmf_kv_type_parse(kv, &p.sched.kv_type)) return opts_usage("serve", "--kv-type '%s': not f16, f32 or q8", kv);
    if (!runopt_device("serve", gpu, &p.sched.device)) return CLI_EXIT_USAGE;
    p.sched.n_parallel = (int32_t)parallel;
    p.sched.n_ctx = (int32_t)ctx;
    p.sched.kv_budget = budget;
    p.sched.queue_max = (int32_t)queue;
    if (batch) p.sched.batch_tokens = (int32_t)batch;
    p.sched.n_threads = (int32_t)threads;
    p.host = host;
    p.port = (int)port;
    p.max_body = (size_t)body;
    p.idle_timeout_s = (int)idle;
    p.request_timeout_s = (int)reqto;
    p.max_connections = (int)maxconn;
    p.max_tokens_cap = (int32_t)maxtok;
    p.max_variants = (int)variants;
    p.shutdown_timeout_s = shut;
    const char *name_of[16] = {0};
    for (size_t i = 0; i < names.n; i++) name_of[i] = names.v[i];
    p.paths = files;
    p.names = name_of;
    p.n_models = c.n_pos;

    char **all = NULL;
    size_t n_all = 0;
    int rc = CLI_EXIT_FAIL;
    for (size_t i = 0; i < keys.n; i++) {
        char **nk = realloc(all, (n_all + 1) * sizeof *nk);
        if (!nk || !(nk[n_all] = strdup(keys.v[i]))) goto done;
        all = nk;
        n_all++;
    }
    const char *env = getenv("CMF_API_KEY");
    if (env && *env) {
        char **nk = realloc(all, (n_all + 1) * sizeof *nk);
        if (!nk || !(nk[n_all] = strdup(env))) goto done;
        all = nk;
        n_all++;
    }
    if (key_file && !read_key_file(key_file, &all, &n_all)) goto done;
    for (size_t i = 0; i < n_all; i++)
        if (!*all[i]) {
            rc = opts_usage("serve", "an empty API key");
            goto done;
        }
    p.api_keys = (const char *const *)all;
    p.n_api_keys = n_all;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    rc = cmf__server_run(&p, &g_stop);
done:
    for (size_t i = 0; i < n_all; i++) {
        memset(all[i], 0, strlen(all[i]));
        free(all[i]);
    }
    free(all);
    for (size_t i = 0; i < loras.n; i++) free(lora_path[i]);
    return rc;
}
