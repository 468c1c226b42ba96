/* fuzz_engine_arch_numbers.c — mutates the *numbers* of a valid header: the
 * input is lines `field=JSON` (`moe.top_k=9223372036854775807`,
 * `rms_norm_eps=-1`, `head_dim=-`: delete) applied to the arch block of the
 * toy model (tests/toy_model.h: attention, MoE, gated DeltaNet, sliding
 * layers), which is then written with a valid hash chain, opened and bound
 * (cmf_model_open) and run for a 3-token prompt and one decode step through
 * the public API. Byte mutations of a whole file (fuzz_format_open) stop at
 * the hashes; these reach every number the arch parse and binding see. */
#include "../tests/toy_model.h"
#include "cmf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One `field=JSON` line onto arch; malformed lines are skipped. */
static void apply_line(json_t *arch, const char *line, size_t len)
{
    const char *eq = memchr(line, '=', len);
    if (!eq || eq == line || eq - line >= 64) return;
    char key[64];
    memcpy(key, line, (size_t)(eq - line));
    key[eq - line] = 0;
    for (const char *k = key; *k; k++)
        if (!(*k == '_' || *k == '.' || (*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9'))) return;
    const char *val = eq + 1;
    size_t vlen = len - (size_t)(val - line);
    if (vlen == 1 && *val == '-') {
        toy_set(arch, key, NULL);
        return;
    }
    json_t *v = json_loadb(val, vlen, JSON_DECODE_ANY, NULL);
    if (v) toy_set(arch, key, v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[512];
    if (!path[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/cmf_fuzz_arch_numbers_%ld.cmf", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    }
    if (size > 4096) return 0;
    json_t *arch = toy_arch();
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        apply_line(arch, p, len);
        p += len + 1;
    }
    cmf_status st = toy_write(path, arch);
    json_decref(arch);
    if (st) return 0;
    cmf_model *m = NULL;
    if (cmf_model_open(path, NULL, &m) == CMF_OK) {
        cmf_session_params sp = cmf_session_params_default();
        sp.n_ctx = 8;
        sp.n_batch = 4;
        sp.n_threads = 1;
        sp.device = CMF_DEVICE_CPU; /* the arch numbers and the CPU engine are the target; --gpu auto would
                                     * probe a Vulkan driver whose own threads' allocations LSan reports */
        cmf_session *s = NULL;
        if (cmf_session_new(m, &sp, &s) == CMF_OK) {
            int32_t V = cmf_model_n_vocab(m); /* the embedding's rows: bound, so small here */
            int32_t ids[3] = {0, V / 2, V - 1};
            float *logits = malloc((size_t)V * sizeof *logits);
            if (logits && cmf_session_decode(s, ids, 3, logits, false) == CMF_OK)
                (void)cmf_session_decode(s, ids, 1, logits, false);
            free(logits);
            cmf_session_free(s);
        }
        cmf_model_free(m);
    }
    unlink(path);
    return 0;
}
