/* cmd_run.c — `cmf run`: one-shot or interactive generation through the
 * file's own chat template (raw completion for files without one, or with
 * --raw), text streamed to stdout and a one-line stats footer on stderr;
 * `--tokens ... --ids` generates from ids and prints the ids as JSON. The
 * answers themselves come from run_gen.c (the serving scheduler). Also
 * the option helpers shared by chat/logits/bench/ppl (runopts.h). */
#include "chat.h"
#include "cli.h"
#include "commands.h"
#include "grammar_opts.h"
#include "run_gen.h"
#include "runopts.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- shared helpers (runopts.h) ------------------------------------------ */
bool runopt_tokens(const char *cmd, const char *s, int32_t **ids, size_t *n)
{
    size_t cap = 16, k = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return false;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX || (*end && *end != ',')) {
            cli_fail(cmd, "--tokens: '%s' is not a comma-separated list of token ids", s);
            free(v);
            return false;
        }
        if (k == cap) {
            int32_t *nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) {
                free(v);
                return false;
            }
            v = nv;
        }
        v[k++] = (int32_t)x;
        p = *end ? end + 1 : end;
    }
    if (!k) {
        cli_fail(cmd, "--tokens: empty list");
        free(v);
        return false;
    }
    *ids = v;
    *n = k;
    return true;
}

int runopt_greedy(const char *cmd, void *dest, const char *name, const char *value)
{
    (void)cmd, (void)name, (void)value;
    ((cmf_sampling_params *)dest)->temperature = 0;
    return 0;
}

const char *runopt_task(const char *cmd, const char *path, cmf_model *m, const char *task)
{
    if (strcmp(task, "default")) return task;
    for (int32_t i = 0; i < cmf_model_n_tasks(m); i++)
        if (!strcmp(cmf_model_task_name(m, i), task)) return task;
    const char *d = cmf_model_default_task(m);
    if (!d)
        cli_fail(cmd, "%s: --task default: %s", path,
                 cmf_model_n_tasks(m) ? "the masks section names no default_task" : "the file has no masks section");
    return d;
}

bool runopt_device(const char *cmd, const char *gpu, cmf_device *out)
{
    const char *v = gpu ? gpu : getenv("CMF_GPU");
    if (!v || !*v || !strcmp(v, "auto")) *out = CMF_DEVICE_AUTO;
    else if (!strcmp(v, "on")) *out = CMF_DEVICE_GPU;
    else if (!strcmp(v, "off")) *out = CMF_DEVICE_CPU;
    else return cli_fail(cmd, "%s: '%s' is not on, off or auto", gpu ? "--gpu" : "CMF_GPU", v), false;
    return true;
}

bool runopt_check(const char *cmd, const runopt_session *so, cmf_session_params *out)
{
    cmf_session_params local;
    cmf_session_params *sp = out ? out : &local;
    *sp = cmf_session_params_default();
    if (so->n_ctx < 0 || so->n_threads < 0 || so->n_batch < 0 || so->n_ctx > INT32_MAX || so->n_batch > INT32_MAX ||
        so->n_threads > 4096 || so->n_seq < 0 || so->n_seq > 4096) {
        cli_fail(cmd, "--ctx and --batch must be 0..%d, --threads 0..4096", INT32_MAX);
        return false;
    }
    if (!runopt_device(cmd, so->gpu, &sp->device)) return false;
    if (so->kv_type && cmf_kv_type_parse(so->kv_type, &sp->kv_type)) {
        cli_fail(cmd, "--kv-type: '%s' is not one of f16, f32, q8", so->kv_type);
        return false;
    }
    return true;
}

bool runopt_session_open(const char *cmd, const char *path, cmf_model *m, const char *task, const runopt_session *so,
                         cmf_session **session)
{
    *session = NULL;
    cmf_session_params sp;
    if (!runopt_check(cmd, so, &sp)) return false;
    sp.n_ctx = (int32_t)so->n_ctx;
    sp.n_threads = (int32_t)so->n_threads;
    if (so->n_batch) sp.n_batch = (int32_t)so->n_batch;
    if (so->n_seq) sp.n_seq_max = (int32_t)so->n_seq;
    if (cmf_session_new(m, &sp, session)) {
        cli_fail(cmd, "%s", cmf_model_errmsg(m));
        return false;
    }
    bool ok = !so->lora || runopt_add_loras(cmd, *session, so->lora);
    if (ok && task) {
        const char *name = runopt_task(cmd, path, m, task);
        ok = name && !cmf_session_set_task(*session, name);
        if (name && !ok) cli_fail(cmd, "%s", cmf_session_errmsg(*session));
    }
    if (!ok) {
        cmf_session_free(*session);
        *session = NULL;
    }
    return ok;
}

bool runopt_open(const char *cmd, const char *path, const char *skill, const char *task, const runopt_session *so,
                 cmf_model **model, cmf_session **session)
{
    *model = NULL;
    *session = NULL;
    if (!runopt_check(cmd, so, NULL)) return false;
    cmf_model_params mp = cmf_model_params_default();
    mp.skill = skill;
    cmf_status st = cmf_model_open(path, &mp, model);
    if (st) {
        cli_fail_status(cmd, st);
        return false;
    }
    if (!runopt_session_open(cmd, path, *model, task, so, session)) {
        cmf_model_free(*model);
        *model = NULL;
        return false;
    }
    return true;
}

bool runopt_skill_check(const char *cmd, const char *skill, float blend, bool *autoroute)
{
    *autoroute = skill && !strcmp(skill, "auto");
    if (!isfinite(blend) || blend < 0) return opts_usage(cmd, "--blend %g: expected a number > 0", (double)blend), false;
    if (blend > 0 && !*autoroute) return opts_usage(cmd, "--blend needs --skill auto (it blends the routed skills)"), false;
    return true;
}

void runopt_route_say(const char *cmd, cmf_model *m, const double *E, int32_t best, float blend)
{
    /* the blend's weights as the session computed them: softmax(-E/T) over the finite scores */
    int32_t ns = cmf_model_n_skills(m);
    double lo = INFINITY, sum = 0;
    for (int32_t i = 0; i < ns; i++) lo = isfinite(E[i]) && E[i] < lo ? E[i] : lo;
    for (int32_t i = 0; blend > 0 && i < ns; i++) sum += isfinite(E[i]) ? exp(-(E[i] - lo) / blend) : 0;
    fprintf(stderr, "cmf %s: skill auto: %s%s (", cmd, blend > 0 ? "blend led by " : "", cmf_model_skill_id(m, best));
    for (int32_t i = 0; i < ns; i++) {
        fprintf(stderr, "%s%s E=", i ? ", " : "", cmf_model_skill_id(m, i));
        if (isfinite(E[i])) fprintf(stderr, "%.6f", E[i]);
        else fputc('-', stderr);
        if (blend > 0 && isfinite(E[i])) fprintf(stderr, " w=%.4f", exp(-(E[i] - lo) / blend) / sum);
    }
    fprintf(stderr, ")\n");
}

bool runopt_route(const char *cmd, cmf_model *m, cmf_session *s, const int32_t *ids, size_t n, float blend, bool quiet)
{
    int32_t ns = cmf_model_n_skills(m), best = -1;
    double *E = malloc(((size_t)ns + 1) * sizeof *E);
    if (!E) return cli_fail(cmd, "out of memory"), false;
    if (cmf_session_route(s, ids, n, blend, E, &best)) {
        free(E);
        return cli_fail(cmd, "--skill auto: %s", cmf_session_errmsg(s)), false;
    }
    if (!quiet) runopt_route_say(cmd, m, E, best, blend);
    free(E);
    return true;
}

char *runopt_lora_split(const char *v, float *scale)
{
    /* FILE or FILE:S, S a number (a path may hold ':' itself) */
    const char *colon = strrchr(v, ':');
    char *end = NULL;
    size_t len = strlen(v);
    *scale = 1.0f;
    if (colon && colon[1]) {
        *scale = strtof(colon + 1, &end);
        if (*end == 0 && isfinite(*scale)) len = (size_t)(colon - v);
        else *scale = 1.0f;
    }
    return strndup(v, len);
}

bool runopt_add_loras(const char *cmd, cmf_session *s, const opt_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        float scale;
        char *path = runopt_lora_split(l->v[i], &scale);
        if (!path) return cli_fail(cmd, "out of memory"), false;
        cmf_status st = cmf_session_add_lora(s, path, scale);
        free(path);
        if (st) return cli_fail(cmd, "--lora %s: %s", l->v[i], cmf_session_errmsg(s)), false;
    }
    return true;
}

uint64_t runopt_proc_status(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    uint64_t v = 0;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl)) {
            v = strtoull(line + kl, NULL, 10) * 1024;
            break;
        }
    fclose(f);
    return v;
}

/* ---- the run command ------------------------------------------------------ */
static const char *HELP_HEAD =
    "usage: cmf run FILE [PROMPT | --prompt P | -i] [options]\n"
    "       cmf run -m FILE [PROMPT] [options]\n"
    "       cmf run FILE --tokens ID,ID,... [--ids] [options]\n"
    "\n"
    "Generate text. With --prompt: one shot. With -i (or no prompt): an\n"
    "interactive chat, one user turn per line (Ctrl-D or /bye ends, Ctrl-C\n"
    "stops the current answer; a line that is not UTF-8 or longer than the\n"
    "context is refused alone, and when the conversation outgrows the context\n"
    "its oldest turns are dropped, said on stderr). On a terminal the line is\n"
    "edited with a history (Up, Down); slash commands, also from a pipe:\n"
    "/help /bye /reset /system TEXT /skill ID /save FILE (//TEXT sends /TEXT).\n"
    "Files with a chat template are prompted through it; files without one\n"
    "(base models), or --raw, get raw completion, and the prompt is echoed\n"
    "before the continuation. Text streams to stdout; a stats line (tokens,\n"
    "tok/s, finish reason) goes to stderr.\n"
    "\n"
    "Each answer is one request to the library's serving scheduler (the path\n"
    "of `cmf serve`) on one sequence whose cache the chat keeps: a turn\n"
    "computes only the tokens the turns before it did not (the stats line's\n"
    "\"reused\"). --skill auto --blend T runs on a single session instead:\n"
    "a scheduler request runs one skill, not a blend.\n"
    "\n";

typedef struct run_opts {
    const char *path, *prompt, *system, *toks, *skill, *task, *kv_type, *gpu;
    bool interactive, raw, ids, ignore_eos, quiet;
    long long n_predict, ctx, threads, batch, logprobs; /* logprobs < 0: off */
    const char *stop[16];
    opt_list stops; /* into stop[] */
    const char *lora[8];
    opt_list loras; /* into lora[] */
    float blend;    /* --blend T (0: off) */
    bool autoroute; /* --skill auto */
    cmf_model *model; /* once open */
    cmf_sampling_params sp;
    grammar_opts *gram; /* --grammar / --json-schema / --json */
} run_opts;

typedef struct out_ctx {
    bool print_text, print_logprobs;
    int32_t *ids;
    size_t n, cap;
    char *text; /* collected answer (chat history) */
    size_t tlen, tcap;
} out_ctx;

/* One JSON line per token (--logprobs); a final flush of held-back text
 * (id -1) is a line with its text only. */
static void print_logprob_line(const cmf_token_info *t)
{
    json_t *o = json_object();
    if (t->id >= 0) json_object_set_new(o, "id", json_integer(t->id));
    json_t *text = json_stringn(t->text ? t->text : "", t->text_len); /* NULL if not UTF-8 */
    json_object_set_new(o, "text", text ? text : json_null());
    if (t->id >= 0) {
        json_object_set_new(o, "logprob", json_real(t->logprob));
        json_t *top = json_array();
        for (int32_t k = 0; k < t->n_top; k++)
            json_array_append_new(top, json_pack("[i, f]", (int)t->top_ids[k], (double)t->top_logprobs[k]));
        json_object_set_new(o, "top", top);
    }
    char *line = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
    if (line) puts(line);
    fflush(stdout);
    free(line);
    json_decref(o);
}

static int on_token(void *user, const cmf_token_info *t)
{
    out_ctx *o = user;
    if (o->print_logprobs && (t->id >= 0 || t->text_len)) print_logprob_line(t);
    if (t->id >= 0) {
        if (o->n == o->cap) {
            size_t c = o->cap ? o->cap * 2 : 64;
            int32_t *p = realloc(o->ids, c * sizeof *p);
            if (!p) return 1;
            o->ids = p;
            o->cap = c;
        }
        o->ids[o->n++] = t->id;
    }
    if (t->text_len) {
        if (o->print_text) {
            fwrite(t->text, 1, t->text_len, stdout);
            fflush(stdout);
        }
        if (o->tlen + t->text_len + 1 > o->tcap) {
            size_t c = (o->tlen + t->text_len + 1) * 2;
            char *p = realloc(o->text, c);
            if (!p) return 1;
            o->text = p;
            o->tcap = c;
        }
        memcpy(o->text + o->tlen, t->text, t->text_len);
        o->tlen += t->text_len;
        o->text[o->tlen] = 0;
    }
    return 0;
}

static void footer(const run_opts *o, const cmf_generate_result *r)
{
    if (o->quiet) return;
    double tps = r->gen_ms > 0 ? r->n_gen * 1000.0 / r->gen_ms : 0;
    double pps = r->prompt_ms > 0 ? r->n_prompt * 1000.0 / r->prompt_ms : 0;
    fprintf(stderr, "\n[prompt %d tokens (%d reused) %.1f tok/s | generated %d tokens %.1f tok/s | finish: %s]\n",
            r->n_prompt, r->n_reused, pps, r->n_gen, tps, cmf_finish_name(r->finish));
}

static int generate(const char *cmd, const run_opts *o, run_gen *g, const int32_t *prompt, size_t n, out_ctx *oc)
{
    cmf_generate_params gp = cmf_generate_params_default();
    gp.sampling = o->sp;
    gp.max_tokens = (int32_t)o->n_predict;
    gp.stop = o->stop;
    gp.n_stop = o->stops.n;
    gp.ignore_eos = o->ignore_eos;
    gp.n_logprobs = o->logprobs > 0 ? (int32_t)o->logprobs : 0;
    gp.on_token = on_token;
    gp.user = oc;
    if (!grammar_opts_hook(cmd, o->gram, &gp.hook)) return 1;
    cmf_generate_result r;
    if (run_gen_answer(g, prompt, n, &gp, o->autoroute, &r)) return 1;
    grammar_opts_after(cmd, o->gram, r.finish);
    footer(o, &r);
    return 0;
}

/* After an answer: the ids as a JSON array (--ids), or the closing newline
 * of streamed text when `newline`. */
static void print_after(const run_opts *o, const out_ctx *oc, bool newline)
{
    if (o->logprobs >= 0) return;
    if (o->ids) {
        printf("[");
        for (size_t i = 0; i < oc->n; i++) printf("%s%d", i ? ", " : "", oc->ids[i]);
        printf("]\n");
    } else if (newline) {
        printf("\n");
    }
}

static bool tokenize(const char *cmd, cmf_model *m, const char *text, bool add_special, int32_t **ids, size_t *n)
{
    size_t need = 0;
    cmf_status st = cmf_model_tokenize(m, text, strlen(text), add_special, NULL, 0, &need);
    if (st && st != CMF_ERR_BOUNDS) {
        cli_fail(cmd, "%s", cmf_model_errmsg(m));
        return false;
    }
    *ids = malloc((need ? need : 1) * sizeof(int32_t));
    if (!*ids) return false;
    if (need && (st = cmf_model_tokenize(m, text, strlen(text), add_special, *ids, need, n))) {
        cli_fail(cmd, "%s", cmf_model_errmsg(m));
        free(*ids);
        return false;
    }
    *n = need;
    return true;
}

/* One answer in template or raw mode; `history` holds the chat so far. */
static int answer(const char *cmd, const run_opts *o, cmf_model *m, run_gen *g, cmf_chat_message **hist,
                  size_t *n_hist, const char *user_text)
{
    bool tmpl = !o->raw && cmf_model_has_chat_template(m);
    int32_t *ids;
    size_t n;
    out_ctx oc = {.print_text = !o->ids && o->logprobs < 0, .print_logprobs = o->logprobs >= 0};
    if (tmpl) {
        cmf_chat_message *h = realloc(*hist, (*n_hist + 2) * sizeof **hist);
        if (!h) return 1;
        *hist = h;
        h[*n_hist].role = "user";
        h[*n_hist].content = strdup(user_text);
        (*n_hist)++;
        int fit = chat_prompt(cmd, m, run_gen_n_ctx(g), o->n_predict, h, n_hist, &ids, &n); /* drops old turns */
        if (fit) return fit == CHAT_SKIPPED && o->interactive ? 0 : 1;
    } else {
        if (!tokenize(cmd, m, user_text, true, &ids, &n)) return 1;
        if (!chat_fits(cmd, run_gen_n_ctx(g), n, false)) { /* in a chat, refused alone */
            free(ids);
            return o->interactive ? 0 : 1;
        }
        if (!o->ids && o->logprobs < 0) {
            fputs(user_text, stdout);
            fflush(stdout);
        }
    }
    if (!n) {
        free(ids);
        return cli_fail(cmd, "the prompt encodes to no tokens");
    }
    int rc = generate(cmd, o, g, ids, n, &oc);
    free(ids);
    print_after(o, &oc, !tmpl || !o->interactive);
    if (tmpl && !rc) {
        cmf_chat_message *h = *hist;
        h[*n_hist].role = "assistant";
        h[*n_hist].content = oc.text ? oc.text : strdup("");
        oc.text = NULL;
        (*n_hist)++;
    }
    free(oc.text);
    free(oc.ids);
    return rc;
}

int cmd_run_main(const char *cmd, int argc, char **argv, bool force_interactive);
int cmd_run_main(const char *cmd, int argc, char **argv, bool force_interactive)
{
    run_opts o = {.n_predict = 256, .logprobs = -1, .sp = cmf_sampling_params_default(),
                  .interactive = force_interactive};
    o.stops = (opt_list){o.stop, 0, 16};
    o.loras = (opt_list){o.lora, 0, 8};
    long long logprobs = LLONG_MIN; /* LLONG_MIN: not given */
    const char *model = NULL;       /* --model FILE */
    grammar_opts gram = {0};
    o.gram = &gram;
    const opt_spec spec[] = {
        {"--model", "-m", OPT_STR, &model, "FILE", "the model file (instead of the positional FILE)", NULL, NULL},
        {"--prompt", "-p", OPT_STR, &o.prompt, "P",
         "the prompt (user message, or raw text with --raw); also\n"
         "the positional PROMPT after FILE", NULL, NULL},
        {"--interactive", "-i", OPT_FLAG, &o.interactive, NULL, "chat loop on stdin", NULL, NULL},
        {"--system", NULL, OPT_STR, &o.system, "S", "system message (template mode)", NULL, NULL},
        {"--raw", NULL, OPT_FLAG, &o.raw, NULL, "no template: complete the prompt text as is", NULL, NULL},
        {"--tokens", NULL, OPT_STR, &o.toks, "LIST", "prompt as comma-separated token ids (no template)", NULL, NULL},
        {"--ids", NULL, OPT_FLAG, &o.ids, NULL, "print the generated ids as a JSON array instead of text", NULL, NULL},
        {"--logprobs", NULL, OPT_INT, &logprobs, "N",
         "instead of text, one JSON line per generated token:\n"
         "{\"id\", \"text\", \"logprob\", \"top\": [[id, logprob] x N]}\n"
         "(log-softmax of the raw logits)", NULL, NULL, OPT_RANGE(0, 20)},
        {"--max-tokens", "-n", OPT_INT, &o.n_predict, "N", "tokens to generate per answer; -1 = until eos", "256",
         NULL, OPT_RANGE(-1, INT32_MAX)},
        {"--stop", NULL, OPT_LIST, &o.stops, "S", "stop string (repeatable, at most 16); not printed", NULL, NULL},
        {"--ignore-eos", NULL, OPT_FLAG, &o.ignore_eos, NULL, "do not stop at the end-of-sequence token", NULL, NULL},
        {"--ctx", "-c", OPT_INT, &o.ctx, "N", "context length", "the model's, never above it", NULL,
         OPT_RANGE(0, INT32_MAX)},
        {"--batch", "-b", OPT_INT, &o.batch, "N", "prompt tokens per forward chunk", "256", NULL,
         OPT_RANGE(0, INT32_MAX)},
        {"--threads", "-t", OPT_INT, &o.threads, "N", "threads", "one per core", NULL, OPT_RANGE(0, 4096)},
        {"--kv-type", NULL, OPT_STR, &o.kv_type, "T", RUNOPT_KV_HELP, "f16", NULL},
        {"--gpu", NULL, OPT_STR, &o.gpu, "on|off|auto", RUNOPT_GPU_HELP, NULL, NULL},
        RUNOPT_SKILL_SPEC(&o.skill, &o.blend),
        RUNOPT_LORA_SPEC(&o.loras),
        {"--task", NULL, OPT_STR, &o.task, "NAME",
         "activate the file's task mask NAME; 'default' = the\n"
         "masks section's default_task (none without --task)", NULL, NULL},
        {"--quiet", "-q", OPT_FLAG, &o.quiet, NULL, "no stats line", NULL, NULL},
        RUNOPT_SAMPLING_SPEC(&o.sp),
        GRAMMAR_OPTS_SPEC(&gram),
    };
    const char *pos[2] = {NULL, NULL}; /* FILE [PROMPT] */
    opts_cmd c = {.name = cmd, .head = HELP_HEAD, .spec = spec, .n_spec = OPTS_N(spec), .pos = pos, .max_pos = 2};
    if (force_interactive)
        c.intro = "usage: cmf chat FILE [options]\n\nInteractive chat: the same as `cmf run FILE -i`; every option of\n"
                  "`cmf run` applies. Help of cmf run follows.\n\n";
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (logprobs != LLONG_MIN) o.logprobs = logprobs;
    /* FILE [PROMPT], or -m FILE [PROMPT] */
    const char *pos_prompt = model ? pos[0] : pos[1];
    if (model && c.n_pos == 2) return opts_usage(cmd, "unexpected argument '%s' (FILE given by --model)", pos[1]);
    o.path = model ? model : pos[0];
    if (pos_prompt && o.prompt) return opts_usage(cmd, "a positional PROMPT and --prompt: give one");
    if (pos_prompt) o.prompt = pos_prompt;
    if (!o.path) return opts_usage(cmd, "no FILE");
    if (!grammar_opts_check(cmd, &gram)) return CLI_EXIT_USAGE;
    if (o.toks && (o.prompt || o.interactive)) return opts_usage(cmd, "--tokens excludes --prompt and -i");
    if (o.ids && !o.toks && !o.prompt) return opts_usage(cmd, "--ids needs --tokens or --prompt");
    if (o.ids && o.logprobs >= 0) return opts_usage(cmd, "--ids and --logprobs exclude each other");
    if ((o.prompt && !chat_text_ok(cmd, "--prompt", o.prompt, strlen(o.prompt))) ||
        (o.system && !chat_text_ok(cmd, "--system", o.system, strlen(o.system))))
        return CLI_EXIT_USAGE;
    cmf_model *m;
    run_gen *g;
    if (!runopt_skill_check(cmd, o.skill, o.blend, &o.autoroute)) return CLI_EXIT_USAGE;
    runopt_session so = {o.ctx, o.threads, o.batch, 0, o.kv_type, o.gpu, &o.loras};
    if (!runopt_check(cmd, &so, NULL)) return CLI_EXIT_USAGE;
    run_gen_opts go = {o.path, o.autoroute ? NULL : o.skill, o.task, o.blend, o.quiet, &so};
    if (!run_gen_open(cmd, &go, &m, &g)) return 1;
    o.model = m;
    if (!grammar_opts_load(cmd, &gram, m)) {
        run_gen_free(g);
        return 1;
    }
    int rc = 0;
    cmf_chat_message *hist = NULL;
    size_t n_hist = 0;
    if (o.system && !o.raw && cmf_model_has_chat_template(m)) {
        hist = malloc(sizeof *hist);
        hist[0].role = "system";
        hist[0].content = strdup(o.system);
        n_hist = 1;
    }
    if (o.toks) {
        int32_t *ids;
        size_t n;
        if (!runopt_tokens(cmd, o.toks, &ids, &n)) {
            rc = CLI_EXIT_USAGE;
        } else {
            out_ctx oc = {.print_text = !o.ids && o.logprobs < 0, .print_logprobs = o.logprobs >= 0};
            rc = generate(cmd, &o, g, ids, n, &oc);
            if (!rc) print_after(&o, &oc, true);
            free(oc.ids);
            free(oc.text);
            free(ids);
        }
    } else if (o.prompt && !o.interactive) {
        rc = answer(cmd, &o, m, g, &hist, &n_hist, o.prompt);
    } else {
        bool tty = isatty(0) && isatty(1); /* the prompt (libedit) only on a terminal; a pipe reads plain lines */
        bool tmpl = cmf_model_has_chat_template(m) && !o.raw;
        chat_input *in = chat_input_open(cmd, tty, chat_line_max(m, run_gen_n_ctx(g)));
        chat_ctx cc = {g, &hist, &n_hist, &o.autoroute, tmpl};
        const char *line, *text;
        char what[48];
        size_t l;
        if (!in) rc = cli_fail(cmd, "out of memory");
        if (in && tty) chat_banner(cmd, o.path);
        if (in && o.prompt) rc = answer(cmd, &o, m, g, &hist, &n_hist, o.prompt);
        while (in && !rc) {
            if (tty) fputc('\n', stdout);
            int got = chat_input_read(in, &line, &l, what, sizeof what);
            if (got == CHAT_LINE_END) break;
            if (got == CHAT_LINE_REFUSED || !l || !chat_text_ok(cmd, what, line, l)) continue; /* refused alone */
            int sc = chat_command(cmd, &cc, line, &text);
            if (sc == CHAT_CMD_BYE) break;
            if (sc == CHAT_CMD_DONE) continue;
            rc = answer(cmd, &o, m, g, &hist, &n_hist, text);
            if (tmpl) printf("\n");
        }
        chat_input_free(in);
    }
    for (size_t i = 0; i < n_hist; i++) free((char *)hist[i].content);
    free(hist);
    grammar_opts_free(&gram);
    run_gen_free(g);
    return rc;
}

int cmd_run(int argc, char **argv) { return cmd_run_main("run", argc, argv, false); }
