/* test_engine_moe_fence.c — only routed experts are read: qwen2_moe (f32)
 * routed over experts {0,1} runs with every page wholly inside experts 2..7
 * PROT_NONE (a read would fault). Also: an all-ones row = no mask, and a
 * masks section's expert rows (cmf__archs_apply_mask) route like the same
 * rows set directly. */
#include "harness.h"
#include "fixture_model.h"

#include "engine/archs_engine.h"
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>


static void run(cmf__model *m, const uint8_t *row, float *logits) {
    cmf__engine_params p = cmf__engine_params_default();
    p.n_threads = 1;
    cmf__engine *e = NULL;
    CHECK_OK(cmf__engine_new(m, &p, &e));
    if (!e) return;
    for (int64_t l = 0; row && l < m->arch.n_layer; l++) CHECK_OK(cmf__archs_set_routable(e, l, row));
    static const int32_t toks[6] = {26, 147, 292, 286, 233, 112};
    CHECK_OK(cmf__engine_forward(e, toks, 6, logits, false));
    cmf__engine_free(e);
}

TEST(unrouted_experts_untouched) {
    cmf__model *m = fixture_model_f32("qwen2_moe");
    if (!m) SKIP("CMF_BIN or the qwen2_moe fixture absent");
    int64_t V = m->arch.vocab_size, L = m->arch.n_layer;
    float *base = malloc(sizeof(float) * (size_t)V), *all = malloc(sizeof(float) * (size_t)V),
          *two = malloc(sizeof(float) * (size_t)V);
    static const uint8_t row_all = 0xff, row_two = 0x03;
    run(m, NULL, base);
    run(m, &row_all, all);
    for (int64_t i = 0; i < V; i++) CHECK(base[i] == all[i]);
    long ps = sysconf(_SC_PAGESIZE);
    int fenced = 0;
    static const char *const roles[3] = {"gate_proj", "up_proj", "down_proj"};
    for (int64_t l = 0; l < L; l++)
        for (int x = 2; x < 8; x++)
            for (int r = 0; r < 3; r++) {
                char nm[128];
                snprintf(nm, sizeof nm, "model.layers.%lld.mlp.experts.%d.%s.weight", (long long)l, x, roles[r]);
                const cmf__tensor *t = cmf__model_tensor(m, nm);
                CHECK(t != NULL);
                if (!t) continue;
                uintptr_t lo = ((uintptr_t)t->data + ps - 1) / ps * ps, hi = ((uintptr_t)t->data + t->nbytes) / ps * ps;
                if (hi > lo && mprotect((void *)lo, hi - lo, PROT_NONE) == 0) fenced += (int)((hi - lo) / ps);
            }
    CHECK(fenced >= 3 * 6 * 2); /* f32 experts are 12 KiB: at least two whole pages each per role */
    run(m, &row_two, two); /* faults here if an unrouted expert is read */
    double diff = 0;
    for (int64_t i = 0; i < V; i++) diff = fmax(diff, fabs(two[i] - base[i]));
    CHECK(diff > 1e-3); /* the narrowed routing changed the output */
    free(base);
    free(all);
    free(two);
    cmf__model_free(m);
}

/* A masks section (spec §5) built by hand for qwen2_moe (3 layers,
 * intermediate 128, 4 heads, 8 experts): mask "two" routes experts {0,1}
 * in every layer, "open" has an all-ones expert area, "plain" none. */
static uint8_t *masks_section(uint64_t *len) {
    const char *meta = "{\"default_task\":\"plain\",\"masks\":["
                       "{\"task_id\":0,\"name\":\"two\",\"has_expert_fields\":true,\"blob_off\":512,\"blob_len\":55},"
                       "{\"task_id\":1,\"name\":\"open\",\"has_expert_fields\":true,\"blob_off\":576,\"blob_len\":55},"
                       "{\"task_id\":2,\"name\":\"plain\",\"blob_off\":640,\"blob_len\":52}]}";
    uint8_t *b = calloc(1, 704);
    uint32_t n = 3, ml = (uint32_t)strlen(meta);
    memcpy(b, &n, 4);
    memcpy(b + 4, &ml, 4);
    memcpy(b + 8, meta, ml);
    /* blob: 3 x 16 FFN bytes, 3 x 1 head byte (4 heads), 1 gate byte (3 layers), 3 x 1 expert byte */
    for (int k = 0; k < 3; k++) {
        uint8_t *blob = b + 512 + 64 * k;
        memset(blob, 0xff, 48);
        memset(blob + 48, 0x0f, 3);
        blob[51] = 0x07;
        if (k < 2) memset(blob + 52, k == 0 ? 0x03 : 0xff, 3);
    }
    *len = 704;
    return b;
}

TEST(task_mask_expert_rows) {
    cmf__model *m = fixture_model_f32("qwen2_moe");
    if (!m) SKIP("CMF_BIN or the qwen2_moe fixture absent");
    uint64_t len;
    uint8_t *sec = masks_section(&len);
    cmf__masks *ms = NULL;
    CHECK_OK(cmf__masks_parse(sec, len, 0, m->file->arch, "test masks", &ms));
    if (!ms) { free(sec); cmf__model_free(m); return; }
    CHECK_EQ_INT(ms->n_masks, 3);
    int64_t V = m->arch.vocab_size;
    float *want = malloc(sizeof(float) * (size_t)V), *got = malloc(sizeof(float) * (size_t)V),
          *base = malloc(sizeof(float) * (size_t)V);
    static const uint8_t row_two = 0x03;
    run(m, NULL, base);
    run(m, &row_two, want);
    cmf__engine_params p = cmf__engine_params_default();
    p.n_threads = 1;
    static const int32_t toks[6] = {26, 147, 292, 286, 233, 112};
    for (int k = 0; k < 3; k++) {
        cmf__engine *e = NULL;
        CHECK_OK(cmf__engine_new(m, &p, &e));
        CHECK_OK(cmf__archs_apply_mask(e, ms, &ms->masks[k]));
        CHECK_OK(cmf__engine_forward(e, toks, 6, got, false));
        const float *ref = k == 0 ? want : base; /* "two" = routable {0,1}; "open", "plain" = unrestricted */
        for (int64_t i = 0; i < V; i++) CHECK(got[i] == ref[i]);
        cmf__engine_free(e);
    }
    free(want);
    free(got);
    free(base);
    cmf__masks_free(ms);
    free(sec);
    cmf__model_free(m);
}

int main(void) {
    RUN(unrouted_experts_untouched);
    RUN(task_mask_expert_rows);
    return harness_done();
}
