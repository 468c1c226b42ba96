/* fuzz_engine_skillfile.c — the SKILL_FILE reader (spec 9.1) through
 * `cmf skill apply`. The input is text: line 1 the skill file's header
 * JSON (the string "BASE" anywhere in it becomes the toy backbone's real
 * base_dir_hash, so the matched path is reachable; a leading '!' applies
 * with force), then one tensor a line, "NAME ROWS [COLS]" (f32, at most
 * 4096 values, from a fixed generator). The skill file is written with a
 * valid hash chain, applied onto the toy (tests/toy_model.h), and an
 * output that is written is opened as a model and decodes two tokens. */
#include "../tests/toy_model.h"
#include "cmf.h"
#include "format/skills.h"
#include "util/hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_base[512], g_skill[512], g_out[512], g_hash[17];

static bool setup(void)
{
    if (g_hash[0]) return true;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    snprintf(g_base, sizeof g_base, "%s/cmf_fuzz_skillfile_base_%ld.cmf", tmp, (long)getpid());
    snprintf(g_skill, sizeof g_skill, "%s/cmf_fuzz_skillfile_skill_%ld.cmf", tmp, (long)getpid());
    snprintf(g_out, sizeof g_out, "%s/cmf_fuzz_skillfile_out_%ld.cmf", tmp, (long)getpid());
    json_t *arch = toy_arch();
    cmf_status st = toy_write(g_base, arch);
    json_decref(arch);
    cmf__file *f = NULL;
    uint64_t h = 0;
    if (st || cmf__file_open(g_base, NULL, &f) || cmf__file_backbone_dir_hash(f, &h)) {
        cmf__file_free(f);
        return false;
    }
    cmf__file_free(f);
    cmf__hash64_hex(h, g_hash);
    return true;
}

/* The header text with every "BASE" replaced by the hash (malloc'd). */
static char *with_hash(const char *s, size_t n, size_t *out_n)
{
    char *o = malloc(n * 4 + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        if (i + 4 <= n && !memcmp(s + i, "BASE", 4)) {
            memcpy(o + k, g_hash, 16);
            k += 16;
            i += 4;
        } else {
            o[k++] = s[i++];
        }
    }
    o[k] = 0;
    *out_n = k;
    return o;
}

static bool write_skill(const char *hdr_text, size_t hdr_len, const char *rest, size_t rest_len)
{
    json_t *hdr = json_loadb(hdr_text, hdr_len, 0, NULL);
    if (!hdr) return false;
    cmf__writer *w = NULL;
    cmf_status st = cmf__writer_open(g_skill, &w);
    if (!st) st = cmf__writer_set_header(w, hdr);
    json_decref(hdr);
    uint64_t rng = 7;
    for (const char *p = rest, *end = rest + rest_len; !st && p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char line[256], name[200];
        long rows = 0, cols = 0;
        if (len < sizeof line) {
            memcpy(line, p, len);
            line[len] = 0;
            int got = sscanf(line, "%199s %ld %ld", name, &rows, &cols);
            if (got >= 2 && rows > 0 && rows <= 4096 && cols >= 0 && cols <= 4096 / rows)
                st = toy_add(w, &rng, name, rows, got == 3 ? cols : 0, 0);
        }
        p += len + 1;
    }
    if (st) {
        if (w) cmf__writer_abort(w);
        return false;
    }
    return cmf__writer_finish(w) == CMF_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16 || !setup()) return 0;
    const char *s = (const char *)data, *nl = memchr(s, '\n', size);
    size_t l1 = nl ? (size_t)(nl - s) : size;
    bool force = l1 && s[0] == '!';
    size_t hn = 0;
    char *hdr = with_hash(s + force, l1 - force, &hn);
    if (!hdr) return 0;
    bool ok = write_skill(hdr, hn, nl ? nl + 1 : s + size, nl ? size - l1 - 1 : 0);
    free(hdr);
    if (ok) {
        uint64_t n = 0;
        bool forced = false, unverified = false;
        if (cmf__skill_apply(g_base, g_skill, g_out, force, &n, &forced, &unverified) == CMF_OK) {
            if (unverified) abort(); /* both inputs carry valid chains */
            cmf_model *m = NULL;
            if (cmf_model_open(g_out, NULL, &m) == CMF_OK) {
                cmf_session_params sp = cmf_session_params_default();
                sp.n_ctx = 8;
                sp.n_batch = 4;
                sp.n_threads = 1;
                sp.device = CMF_DEVICE_CPU;
                cmf_session *ss = NULL;
                if (cmf_session_new(m, &sp, &ss) == CMF_OK) {
                    int32_t ids[2] = {1, cmf_model_n_vocab(m) - 1};
                    (void)cmf_session_decode(ss, ids, 2, NULL, false);
                    cmf_session_free(ss);
                }
                cmf_model_free(m);
            }
        }
        unlink(g_out);
    }
    unlink(g_skill);
    return 0;
}
