/* cmd_lora.c — `cmf lora merge IN.cmf --lora ADAPTER[:S] ... --output OUT.cmf`:
 * writes a .cmf with PEFT LoRA adapters merged into the projections they
 * name (engine/lora.h, cmf__lora_merge), for running without the adapter's
 * run-time cost. The run-time form is `--lora` of run, chat, logits,
 * bench and ppl. */
#include "cli.h"
#include "commands.h"
#include "engine/lora.h"
#include "opts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_lora(int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL}, *output = NULL;
    const char *lora_v[8];
    opt_list loras = {lora_v, 0, 8};
    bool quiet = false;
    const opt_spec spec[] = {
        {"--lora", NULL, OPT_LIST, &loras, "FILE[:S]",
         "a PEFT adapter's safetensors file (adapter_config.json beside\n"
         "it), merged at scale S (default 1); repeatable, at most 8", NULL, NULL},
        {"--output", "-o", OPT_STR, &output, "OUT.cmf", "the file to write (required)", NULL, NULL},
        {"--quiet", "-q", OPT_FLAG, &quiet, NULL, "no summary", NULL, NULL},
    };
    opts_cmd c = {.name = "lora",
                  .head = "usage: cmf lora merge IN.cmf --lora ADAPTER[:S] [--lora ...] --output OUT.cmf\n"
                          "Writes IN with the adapters merged into the backbone projections they\n"
                          "name: W + s B A, s = S x lora_alpha / r (adapter_config.json). A merged\n"
                          "tensor keeps its dtype (a quantized one is requantized); everything else\n"
                          "is copied, and header provenance.lora_merge lists the adapters. OUT is\n"
                          "written atomically and must not be an input. To apply adapters without\n"
                          "rewriting the model, pass --lora to run, chat, logits, bench or ppl.\n",
                  .spec = spec, .n_spec = OPTS_N(spec), .pos = pos, .max_pos = 2};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!pos[0] || strcmp(pos[0], "merge")) return opts_usage("lora", "the only action is merge: cmf lora merge IN.cmf ...");
    if (!pos[1] || !output || !loras.n)
        return opts_usage("lora", "usage: cmf lora merge IN.cmf --lora ADAPTER[:S] --output OUT.cmf");
    char *paths[8] = {0};
    float scale[8];
    int rc = 0;
    for (size_t i = 0; i < loras.n && !rc; i++) {
        const char *v = loras.v[i], *colon = strrchr(v, ':');
        size_t len = strlen(v);
        char *end = NULL;
        scale[i] = 1.0f;
        if (colon && colon[1]) {
            float s = strtof(colon + 1, &end);
            if (*end == 0 && isfinite(s)) scale[i] = s, len = (size_t)(colon - v);
        }
        if (!(paths[i] = strndup(v, len))) rc = cli_fail("lora", "out of memory");
    }
    cmf_status st = rc ? CMF_OK : cmf__lora_merge(pos[1], (const char *const *)paths, scale, (int)loras.n, output);
    for (size_t i = 0; i < loras.n; i++) free(paths[i]);
    if (rc) return rc;
    if (st) return cli_fail_status("lora", st);
    if (!quiet) fprintf(stderr, "cmf lora: %s: %zu adapter%s merged\n", output, loras.n, loras.n == 1 ? "" : "s");
    return 0;
}
