/* cmd_bench.c — `cmf bench FILE`: prompt processing (pp: n_prompt tokens in
 * one batch, tokens/s) and text generation (tg: n_gen tokens one at a time,
 * tokens/s), each repeated -r times after one warm-up, mean ± sd, as
 * llama-bench reports them; plus resident memory (after load, anonymous =
 * KV cache + scratch + the CPU's packed weights, peak). Timing only; results go to stdout. */
#include "bench_serve.h"
#include "cli.h"
#include "commands.h"
#include "runopts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *HELP =
    "usage: cmf bench FILE [-p N] [-n N] [-t N] [-r N] [--seqs N] [--kv-type T] [--json]\n"
    "       cmf bench FILE --requests N [--parallel P] [--batch-tokens N] [--prompt-min N] [--prompt-max N] [-n N]\n"
    "\n"
    "Measure speed like llama-bench: pp = N random prompt tokens fed in one\n"
    "batch from an empty context (tokens/s), tg = N tokens decoded one at a\n"
    "time from an empty context (tokens/s; with --seqs N, N sequences\n"
    "decode side by side, one token of each per step, and the figure is\n"
    "their aggregate tokens/s). Each test runs once to warm up,\n"
    "then -r times; the mean and the standard deviation are reported. Also\n"
    "the resident memory: after load, anonymous (KV cache + scratch + the\n"
    "CPU backend's packed copies of the weights, made when the first graph\n"
    "is built; the weights themselves are file pages of the mapping) and\n"
    "the peak.\n"
    "\n"
    "With --requests N, a serving workload instead: N requests of random\n"
    "prompts (lengths evenly in --prompt-min..--prompt-max), -n tokens each,\n"
    "all submitted at once to the scheduler with --parallel running at a\n"
    "time; prints the aggregate generated tokens/s, the time to first token,\n"
    "the inter-token latency (p50 / p99) and the share of steps that replayed\n"
    "a cached graph (CMF_GRAPH_BUCKETS=1 or 0 in the environment turns the\n"
    "padding of batches to a few shapes on or off; default: on for a GPU).\n"
    "\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct bench_rec {
    long long n_prompt, n_gen;
    double avg, sd;
    double samples[64];
    int n_samples;
} bench_rec;

/* One run: the prompt on slot 0, or n_gen steps of one token for each of
 * n_seq sequences (their logits computed, as a server would). */
static cmf_status run_test(cmf_session *s, const int32_t *toks, long long n_prompt, long long n_gen, int n_seq,
                           float *logits, double *tps)
{
    cmf_session_reset(s);
    int32_t step[256], seq[256];
    bool want[256];
    for (int j = 0; j < n_seq; j++) seq[j] = j, want[j] = true;
    double t0 = now_s();
    cmf_status st = CMF_OK;
    if (n_prompt) st = cmf_session_decode(s, toks, (size_t)n_prompt, NULL, false);
    for (long long i = 0; !st && i < n_gen; i++) {
        if (n_seq == 1) {
            st = cmf_session_decode(s, &toks[i % 7], 1, NULL, false);
            continue;
        }
        for (int j = 0; j < n_seq; j++) step[j] = toks[(i + j) % 7];
        cmf_batch b = {n_seq, step, seq, want};
        st = cmf_session_decode_batch(s, &b, logits);
    }
    double dt = now_s() - t0;
    *tps = (double)(n_prompt + n_gen * (n_prompt ? 1 : n_seq)) / (dt > 0 ? dt : 1e-9);
    return st;
}

int cmd_bench(int argc, char **argv)
{
    const char *path = NULL, *kv = "f16", *gpu = NULL, *skill = NULL;
    const char *lora_v[8];
    opt_list loras = {lora_v, 0, 8};
    long long n_prompt = 512, n_gen = 128, threads = 0, reps = 5, ctx = 0, seqs = 1;
    long long requests = 0, parallel = 4, batch_tokens = 256, pmin = 128, pmax = 1024;
    bool json = false;
    const opt_spec spec[] = {
        {"--n-prompt", "-p", OPT_INT, &n_prompt, "N", "prompt tokens, capped by the context; 0 = skip pp", "512", NULL,
         OPT_RANGE(0, INT32_MAX)},
        {"--n-gen", "-n", OPT_INT, &n_gen, "N", "generated tokens; 0 = skip tg", "128", NULL, OPT_RANGE(0, INT32_MAX)},
        {"--threads", "-t", OPT_INT, &threads, "N", "threads", "one per core", NULL, OPT_RANGE(0, 4096)},
        {"--repetitions", "-r", OPT_INT, &reps, "N", "repetitions", "5", NULL, OPT_RANGE(1, 64)},
        {"--ctx", "-c", OPT_INT, &ctx, "N", "context length per sequence", "the model's", NULL, OPT_RANGE(0, INT32_MAX)},
        {"--seqs", NULL, OPT_INT, &seqs, "N", "sequences decoded together in tg; test tgNxS", "1", NULL,
         OPT_RANGE(1, 256)},
        {"--kv-type", NULL, OPT_STR, &kv, "T", RUNOPT_KV_HELP, "f16", NULL},
        {"--gpu", NULL, OPT_STR, &gpu, "on|off|auto", RUNOPT_GPU_HELP, NULL, NULL},
        {"--skill", NULL, OPT_STR, &skill, "ID", "run a skill of the file", NULL, NULL},
        RUNOPT_LORA_SPEC(&loras),
        {"--requests", NULL, OPT_INT, &requests, "N", "serving workload: N requests, 1..100000", NULL, NULL},
        {"--parallel", NULL, OPT_INT, &parallel, "P", "with --requests: requests running at once, 1..4096", "4", NULL},
        {"--batch-tokens", NULL, OPT_INT, &batch_tokens, "N", "with --requests: tokens per step, 1..65536", "256", NULL},
        {"--prompt-min", NULL, OPT_INT, &pmin, "N", "with --requests: shortest prompt", "128", NULL},
        {"--prompt-max", NULL, OPT_INT, &pmax, "N", "with --requests: longest prompt", "1024", NULL},
        {"--json", NULL, OPT_FLAG, &json, NULL,
         "print an array of records: n_prompt, n_gen, n_seqs, n_threads,\n"
         "avg_ts, stddev_ts, model_size, model_type, kv_type,\n"
         "kv_bytes_per_token, rss_bytes, rss_anon_bytes,\n"
         "rss_load_bytes, samples_ts", NULL, NULL},
    };
    opts_cmd c = {.name = "bench", .head = HELP, .spec = spec, .n_spec = OPTS_N(spec), .pos = &path, .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!path) return opts_usage("bench", "no FILE");
    if (n_prompt < 0 || n_gen < 0 || reps < 1 || reps > 64 || seqs < 1 || seqs > 256)
        return opts_usage("bench", "-p and -n must be >= 0, -r in 1..64, --seqs in 1..256");
    cmf_session_params sp = cmf_session_params_default();
    if (cmf_kv_type_parse(kv, &sp.kv_type))
        return cli_fail("bench", "--kv-type: '%s' is not one of f16, f32, q8", kv), CLI_EXIT_USAGE;
    if (!runopt_device("bench", gpu, &sp.device)) return CLI_EXIT_USAGE;
    if (skill && !strcmp(skill, "auto"))
        return opts_usage("bench", "--skill auto routes a prompt and bench has none: name a skill");
    if (requests && (requests < 1 || requests > 100000 || parallel < 1 || parallel > 4096 || batch_tokens < 1 ||
                     batch_tokens > 65536 || pmin < 1 || pmax < pmin || pmax > 1 << 20 || n_gen < 1 || n_gen > 1 << 20))
        return opts_usage("bench", "--requests 1..100000, --parallel 1..4096, --batch-tokens 1..65536, "
                                   "1 <= --prompt-min <= --prompt-max <= 1048576, -n 1..1048576");
    cmf_model *m;
    cmf_session *s;
    cmf_status st = cmf_model_open(path, NULL, &m);
    if (st) return cli_fail_status("bench", st);
    if (requests) {
        bench_serve_opts bo = {(int)requests, (int)parallel, (int)batch_tokens, (int)threads, (int)pmin, (int)pmax,
                               (int)n_gen,     sp.kv_type,    sp.device};
        int brc = bench_serve(m, &bo);
        cmf_model_free(m);
        return brc;
    }
    uint64_t rss_load = runopt_proc_status("VmRSS:");
    sp.n_ctx = (int32_t)ctx;
    sp.n_seq_max = (int32_t)seqs;
    sp.n_threads = (int32_t)threads;
    long long n_ctx_model = ctx > 0 && ctx < cmf_model_n_ctx_train(m) ? ctx : cmf_model_n_ctx_train(m);
    if (n_prompt > n_ctx_model) n_prompt = n_ctx_model;
    if (n_gen > n_ctx_model) n_gen = n_ctx_model;
    sp.n_batch = (int32_t)(n_prompt > seqs ? n_prompt : seqs);
    sp.skill = skill;
    if ((st = cmf_session_new(m, &sp, &s))) {
        cli_fail("bench", "%s", cmf_model_errmsg(m));
        cmf_model_free(m);
        return 1;
    }
    if (!runopt_add_loras("bench", s, &loras)) {
        cmf_session_free(s);
        cmf_model_free(m);
        return 1;
    }
    int n_threads = threads > 0 ? (int)threads : 0;
    if (!n_threads) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = nc > 0 ? (int)nc : 1;
    }
    long long n_tok = n_prompt > n_gen ? n_prompt : n_gen;
    int32_t *toks = malloc((size_t)(n_tok + 8) * sizeof *toks);
    float *logits = malloc((size_t)seqs * (size_t)cmf_model_n_vocab(m) * sizeof(float));
    if (!toks || !logits) {
        free(toks);
        free(logits);
        cmf_session_free(s);
        cmf_model_free(m);
        return cli_fail("bench", "out of memory"), 1;
    }
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (long long i = 0; i < n_tok + 8; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        toks[i] = (int32_t)(x % (uint64_t)cmf_model_n_vocab(m));
    }
    bench_rec recs[2];
    int n_rec = 0;
    int rc = 0;
    for (int test = 0; test < 2 && !rc; test++) {
        long long np = test == 0 ? n_prompt : 0, ng = test == 1 ? n_gen : 0;
        if (!np && !ng) continue;
        bench_rec *r = &recs[n_rec++];
        memset(r, 0, sizeof *r);
        r->n_prompt = np;
        r->n_gen = ng;
        double tps;
        if ((st = run_test(s, toks, np, ng, (int)seqs, logits, &tps))) { /* warm-up */
            rc = cli_fail("bench", "%s", cmf_session_errmsg(s));
            break;
        }
        double sum = 0, sq = 0;
        for (long long k = 0; k < reps; k++) {
            if ((st = run_test(s, toks, np, ng, (int)seqs, logits, &tps))) {
                rc = cli_fail("bench", "%s", cmf_session_errmsg(s));
                break;
            }
            r->samples[r->n_samples++] = tps;
            sum += tps;
        }
        r->avg = sum / (double)reps;
        for (int k = 0; k < r->n_samples; k++) sq += (r->samples[k] - r->avg) * (r->samples[k] - r->avg);
        r->sd = r->n_samples > 1 ? sqrt(sq / (double)(r->n_samples - 1)) : 0;
    }
    uint64_t peak = runopt_proc_status("VmHWM:"), anon = runopt_proc_status("RssAnon:");
    char type[160];
    snprintf(type, sizeof type, "%s %s", cmf_model_arch_name(m), cmf_model_quant_name(m));
    if (!rc && json) {
        printf("[\n");
        for (int i = 0; i < n_rec; i++) {
            printf("  {\"model_type\": \"%s\", \"model_size\": %llu, \"model_n_params\": %llu, \"n_threads\": %d, "
                   "\"n_prompt\": %lld, \"n_gen\": %lld, \"n_seqs\": %lld, \"kv_type\": \"%s\", \"device\": \"%s\", "
                   "\"kv_bytes_per_token\": %lld, \"avg_ts\": %.3f, \"stddev_ts\": %.3f, \"rss_bytes\": %llu, "
                   "\"rss_anon_bytes\": %llu, \"rss_load_bytes\": %llu, \"samples_ts\": [",
                   type, (unsigned long long)cmf_model_size_bytes(m), (unsigned long long)cmf_model_n_params(m),
                   n_threads, recs[i].n_prompt, recs[i].n_gen, recs[i].n_prompt ? 1 : seqs, kv, cmf_session_device(s),
                   (long long)cmf_session_kv_bytes_per_token(s), recs[i].avg, recs[i].sd, (unsigned long long)peak,
                   (unsigned long long)anon, (unsigned long long)rss_load);
            for (int k = 0; k < recs[i].n_samples; k++) printf("%s%.3f", k ? ", " : "", recs[i].samples[k]);
            printf("]}%s\n", i + 1 < n_rec ? "," : "");
        }
        printf("]\n");
    } else if (!rc) {
        printf("| %-24s | %10s | %8s | %7s | %8s | %20s |\n", "model", "size", "params", "threads", "test", "t/s");
        printf("| %.24s | %.10s | %.8s | %.7s | %.8s | %.20s |\n", "------------------------------", "----------",
               "--------", "-------", "--------", "--------------------");
        for (int i = 0; i < n_rec; i++) {
            char test[32], ts[48];
            snprintf(test, sizeof test, "%s%lld", recs[i].n_prompt ? "pp" : "tg",
                     recs[i].n_prompt ? recs[i].n_prompt : recs[i].n_gen);
            if (!recs[i].n_prompt && seqs > 1) snprintf(test + strlen(test), sizeof test - strlen(test), "x%lld", seqs);
            snprintf(ts, sizeof ts, "%.2f ± %.2f", recs[i].avg, recs[i].sd);
            printf("| %-24s | %6.2f MiB | %6.2f M | %7d | %8s | %20s |\n", type,
                   (double)cmf_model_size_bytes(m) / 1048576.0, (double)cmf_model_n_params(m) / 1e6, n_threads, test,
                   ts);
        }
        printf("memory: RSS after load %.1f MiB, anonymous (KV cache + scratch + packed weights) %.1f MiB, peak RSS %.1f MiB\n",
               (double)rss_load / 1048576.0, (double)anon / 1048576.0, (double)peak / 1048576.0);
        printf("KV cache: %s, %lld bytes per token per sequence\n", kv, (long long)cmf_session_kv_bytes_per_token(s));
        printf("device: %s\n", cmf_session_device(s));
    }
    free(toks);
    free(logits);
    cmf_session_free(s);
    cmf_model_free(m);
    return rc;
}
