/* test_engine_taskmask.c — task masks (spec §5) end to end through the
 * public API (cmf_session_set_task). A fixture is converted to f32; from it
 * two files are written: (a) the same weights plus a masks section whose
 * task "cut" clears FFN neurons, query heads, one layer gate (and, on MoE,
 * experts) and whose task "full" is all ones; (b) the same weights with
 * what "cut" clears zeroed instead — those down_proj columns, those heads'
 * o_proj columns, and for the gated layer o_proj and every down_proj (a
 * pre-norm layer whose output projections are zero is the identity).
 * (a) under "cut" must give (b)'s logits; "full" must give the unmasked
 * bits. With `--write SRC MASKED ZEROED` the program only writes (a) and
 * (b) from SRC (tests/cli/engine_task.sh uses it). */
#include "harness.h"

#include "engine/api.h"
#include "engine/archs_engine.h"
#include "util/buf.h"
#include "util/arith.h"

#include <stdlib.h>
#include <unistd.h>

#define N_TOK 24

/* What task "cut" clears, as a function of the model's dimensions. */
static bool cut_ffn(int64_t l, int64_t i) { return (i * 7 + l * 3) % 5 == 0; }
static bool cut_head(int64_t l, int64_t h, int64_t n_head) { return h == l % n_head || (l == 0 && h == n_head - 1); }
static int64_t cut_layer(int64_t n_layer) { return n_layer / 2; }
static bool cut_expert(int64_t l, int64_t x) { return (x + l) % 3 == 0; }

static int64_t num_experts(const cmf__model *m) { return m->arch.moe.num_experts; }

static void set_bit(uint8_t *row, int64_t i) { row[i / 8] |= (uint8_t)(1u << (i % 8)); }

/* The experts row "cut" leaves routable in layer l ([expert_bytes]). */
static void cut_expert_row(int64_t l, int64_t n_exp, uint8_t *row)
{
    memset(row, 0, (size_t)cmf__div_ceil((uint64_t)n_exp, 8));
    for (int64_t x = 0; x < n_exp; x++)
        if (!cut_expert(l, x)) set_bit(row, x);
}

/* One mask blob: all ones (full) or the "cut" pattern. Tail bits stay 0. */
static void mask_blob(const cmf__model *m, bool full, cmf__buf *out)
{
    const int64_t L = m->arch.n_layer, F = m->arch.intermediate_size, NH = m->arch.n_head, E = num_experts(m);
    const uint64_t fb = cmf__div_ceil((uint64_t)F, 8), hb = cmf__div_ceil((uint64_t)NH, 8),
                   gb = cmf__div_ceil((uint64_t)L, 8), eb = cmf__div_ceil((uint64_t)E, 8);
    size_t len = (size_t)(L * fb + L * hb + gb + (E ? L * eb : 0)), at = out->len;
    cmf__buf_append_zeros(out, len);
    uint8_t *b = out->data + at, *heads = b + L * fb, *gates = heads + L * hb, *exps = gates + gb;
    for (int64_t l = 0; l < L; l++) {
        for (int64_t i = 0; i < F; i++)
            if (full || !cut_ffn(l, i)) set_bit(b + l * fb, i);
        for (int64_t h = 0; h < NH; h++)
            if (full || !cut_head(l, h, NH)) set_bit(heads + l * hb, h);
        if (full || l != cut_layer(L)) set_bit(gates, l);
        for (int64_t x = 0; x < E; x++)
            if (full || !cut_expert(l, x)) set_bit(exps + l * eb, x);
    }
}

/* The masks section: "cut" (quality measured), "full" (quality null),
 * default_task "full". Blob offsets depend on the meta's length: iterate. */
static void masks_section(const cmf__model *m, cmf__buf *out)
{
    cmf__buf blobs[2] = {{0}, {0}};
    mask_blob(m, false, &blobs[0]);
    mask_blob(m, true, &blobs[1]);
    const bool hx = num_experts(m) > 0;
    char *meta = NULL;
    size_t meta_len = 0;
    uint64_t off[2];
    for (int iter = 0; iter < 8; iter++) {
        off[0] = cmf__align_up(8 + meta_len, 8);
        off[1] = cmf__align_up(off[0] + blobs[0].len, 8);
        json_t *j = json_pack("{s:s, s:[{s:i, s:s, s:b, s:{s:s, s:f}, s:I, s:I}, {s:i, s:s, s:b, s:n, s:I, s:I}]}",
                              "default_task", "full", "masks", "task_id", 0, "name", "cut", "has_expert_fields", hx,
                              "quality", "metric", "heldout_ppl_ratio", "value", 0.9, "blob_off", (json_int_t)off[0],
                              "blob_len", (json_int_t)blobs[0].len, "task_id", 1, "name", "full", "has_expert_fields",
                              hx, "quality", "blob_off", (json_int_t)off[1], "blob_len", (json_int_t)blobs[1].len);
        free(meta);
        meta = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(j);
        if (strlen(meta) == meta_len) break;
        meta_len = strlen(meta);
    }
    uint8_t hdr[8];
    cmf__wr32(hdr, 2);
    cmf__wr32(hdr + 4, (uint32_t)meta_len);
    out->len = 0;
    cmf__buf_append(out, hdr, 8);
    cmf__buf_append(out, meta, meta_len);
    for (int k = 0; k < 2; k++) {
        cmf__buf_append_zeros(out, off[k] - out->len);
        cmf__buf_append(out, blobs[k].data, blobs[k].len);
    }
    free(meta);
    cmf__buf_free(&blobs[0]);
    cmf__buf_free(&blobs[1]);
}

/* Zeroes in an f32 [rows][cols] matrix what "cut" clears in layer l:
 * o_proj head columns, dense down_proj neuron columns, or everything. */
static void zero_cut(const cmf__model *m, int64_t l, const char *rest, float *w, uint64_t rows, uint64_t cols)
{
    const cmf__layer_weights *lw = &m->layers[l];
    bool all = l == cut_layer(m->arch.n_layer);
    if (!strcmp(rest, "self_attn.o_proj.weight")) {
        for (uint64_t c = 0; c < cols; c++)
            if (all || cut_head(l, (int64_t)c / lw->head_dim, m->arch.n_head))
                for (uint64_t r = 0; r < rows; r++) w[r * cols + c] = 0.0f;
    } else if (!strcmp(rest, "mlp.down_proj.weight")) {
        for (uint64_t c = 0; c < cols; c++)
            if (all || cut_ffn(l, (int64_t)c))
                for (uint64_t r = 0; r < rows; r++) w[r * cols + c] = 0.0f;
    } else if (all && !strncmp(rest, "mlp.", 4) && strlen(rest) > 16 &&
               !strcmp(rest + strlen(rest) - 16, "down_proj.weight")) {
        memset(w, 0, (size_t)(rows * cols) * sizeof(float)); /* experts and shared expert of the gated layer */
    }
}

/* Writes m's file again: with `masks` as its masks section, or (masks NULL)
 * with what "cut" clears zeroed in the weights. */
static cmf_status write_copy(const cmf__model *m, const char *out, const cmf__buf *masks)
{
    const cmf__shard *sh = &m->file->shards[0];
    cmf__writer *w = NULL;
    cmf_status st = cmf__writer_open(out, &w);
    if (st) return st;
    if ((st = cmf__writer_set_header(w, sh->header_json)) || (st = cmf__writer_set_vocab(w, sh->vocab.data, sh->vocab.len)) ||
        (masks && (st = cmf__writer_set_masks(w, masks->data, masks->len)))) {
        cmf__writer_abort(w);
        return st;
    }
    for (uint64_t i = 0; i < m->file->n_tensors; i++) {
        const cmf__tensor *t = &m->file->tensors[i];
        int l = -1, pos = 0;
        void *copy = NULL;
        if (!masks && sscanf(t->name, "model.layers.%d.%n", &l, &pos) == 1 && pos > 0 && t->ndim == 2 &&
            t->dtype == CMF_DTYPE_F32 && (copy = malloc((size_t)t->nbytes))) {
            memcpy(copy, t->data, (size_t)t->nbytes);
            zero_cut(m, l, t->name + pos, copy, t->shape[0], t->shape[1]);
        }
        st = cmf__writer_add_tensor(w, t->name, t->dtype, t->ndim, t->shape, copy ? copy : t->data, t->nbytes);
        free(copy);
        if (st) {
            cmf__writer_abort(w);
            return st;
        }
    }
    return cmf__writer_finish(w);
}

/* (a) and (b) from the converted file `src`. */
static cmf_status write_pair(const char *src, const char *masked, const char *zeroed)
{
    cmf__model *m = NULL;
    cmf_status st = cmf__model_open(src, &m);
    if (st) return st;
    cmf__buf sec = {0};
    masks_section(m, &sec);
    if (!(st = write_copy(m, masked, &sec))) st = write_copy(m, zeroed, NULL);
    cmf__buf_free(&sec);
    cmf__model_free(m);
    return st;
}

typedef struct pair {
    char src[512], masked[512], zeroed[512];
} pair;

/* Converts fixture `fam` to f32 and writes its pair; false = skip. */
static bool make_pair(const char *fam, pair *p)
{
    const char *bin = getenv("CMF_BIN");
    char dir[512], cfg[600], cmd[2048];
    if (!bin || !harness_fixtures()) return false;
    snprintf(dir, sizeof dir, "%s/%s", harness_fixture_path("hf-models"), fam);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    if (access(cfg, R_OK) != 0) return false;
    snprintf(p->src, sizeof p->src, "%s/%s.cmf", harness_tmpdir(), fam);
    snprintf(p->masked, sizeof p->masked, "%s/%s-masked.cmf", harness_tmpdir(), fam);
    snprintf(p->zeroed, sizeof p->zeroed, "%s/%s-zeroed.cmf", harness_tmpdir(), fam);
    if (access(p->zeroed, R_OK) == 0) return true; /* made by an earlier test */
    snprintf(cmd, sizeof cmd, "'%s' convert --quiet --quant f32 --model '%s' --output '%s' 2>/dev/null", bin, dir,
             p->src);
    int rc = system(cmd);
    CHECK_EQ_INT(rc, 0);
    if (rc) return false;
    cmf_status st = write_pair(p->src, p->masked, p->zeroed);
    CHECK_OK(st);
    return st == CMF_OK;
}

static void tokens(int32_t V, int32_t *ids)
{
    for (int i = 0; i < N_TOK; i++) ids[i] = (int32_t)((i * 37 + 11) % V);
}

/* Logits [N_TOK][V] of `path` with task `task` (NULL = none); with
 * `routable` set, MoE layers route over "cut"'s expert rows set directly
 * on the engine (cmf__archs_set_routable). Malloc'd; NULL on failure. */
static float *logits_of(const char *path, const char *task, bool routable)
{
    cmf_model *model = NULL;
    cmf_session *s = NULL;
    CHECK_OK(cmf_model_open(path, NULL, &model));
    if (!model) return NULL;
    cmf_session_params sp = cmf_session_params_default();
    sp.n_threads = 1;
    CHECK_OK(cmf_session_new(model, &sp, &s));
    int32_t V = cmf_model_n_vocab(model), ids[N_TOK];
    float *lg = malloc(sizeof(float) * (size_t)V * N_TOK);
    uint8_t rows[64][8];
    if (s && task) CHECK_OK(cmf_session_set_task(s, task));
    if (s && routable) {
        const cmf__model *m = model->m;
        int64_t E = num_experts(m);
        CHECK(E > 0 && E <= 64 && m->arch.n_layer <= 64);
        for (int64_t l = 0; l < m->arch.n_layer && l < 64 && E <= 64; l++)
            if (m->layers[l].has_router) {
                cut_expert_row(l, E, rows[l]);
                CHECK_OK(cmf__archs_set_routable(s->e, l, rows[l]));
            }
    }
    tokens(V, ids);
    if (s) CHECK_OK(cmf_session_decode(s, ids, N_TOK, lg, true));
    cmf_session_free(s);
    cmf_model_free(model);
    return lg;
}

/* max over rows of max|a - b| / max|b| (b = reference), rows of V. */
static double rel_diff(const float *a, const float *b, int64_t V)
{
    double worst = 0;
    for (int t = 0; t < N_TOK; t++) {
        double d = 0, mx = 0;
        for (int64_t i = 0; i < V; i++) {
            d = fmax(d, fabs((double)a[t * V + i] - b[t * V + i]));
            mx = fmax(mx, fabs((double)b[t * V + i]));
        }
        worst = fmax(worst, d / mx);
    }
    return worst;
}

static int32_t vocab_of(const char *path)
{
    cmf_model *model = NULL;
    CHECK_OK(cmf_model_open(path, NULL, &model));
    int32_t V = model ? cmf_model_n_vocab(model) : 0;
    cmf_model_free(model);
    return V;
}

/* (a) under "cut" == (b) without a mask; (a) under "full" == (a) without a
 * mask, bit for bit; "cut" changes the logits. Tolerance 1e-5 relative:
 * both runs are f32 with the same weights, kernels, batch and summation
 * order, and where (a) zeroes an activation (b) zeroes the weight it
 * multiplies, so every product is ±0 in both and the sums agree exactly;
 * a skipped layer adds nothing where (b) adds exact zeros. The bound is an
 * order of magnitude under what a wrong head or neuron moves these
 * sharpened fixtures (>1e-3), and above any reassociation (measured ≤ 5e-7
 * between batched and single-token kernels). */
static void masked_vs_zeroed(const char *fam)
{
    pair p;
    if (!make_pair(fam, &p)) SKIP("CMF_BIN or the fixture absent");
    int64_t V = vocab_of(p.src);
    bool moe = strstr(fam, "moe") != NULL;
    float *cut = logits_of(p.masked, "cut", false), *ref = logits_of(p.zeroed, NULL, moe),
          *none = logits_of(p.masked, NULL, false), *full = logits_of(p.masked, "full", false);
    if (cut && ref && none && full && V > 0) {
        double d = rel_diff(cut, ref, V), moved = rel_diff(none, ref, V);
        printf("  %s: masked (task cut) vs zeroed weights: max relative logit difference %.3g "
               "(unmasked vs zeroed: %.3g)\n",
               fam, d, moved);
        CHECK(d <= 1e-5);
        CHECK(moved > 1e-3); /* the mask does something */
        CHECK(memcmp(full, none, sizeof(float) * (size_t)(V * N_TOK)) == 0);
    }
    free(cut);
    free(ref);
    free(none);
    free(full);
}

TEST(llama_masked_equals_zeroed) { masked_vs_zeroed("llama"); }
TEST(phi3_masked_equals_zeroed) { masked_vs_zeroed("phi3"); } /* fused qkv and gate_up */
/* qwen3_moe: FFN rows are not applied to MoE layers (so (b) leaves every
 * expert's columns alone), expert rows route like the same rows set
 * directly with cmf__archs_set_routable, heads and the gate as dense. */
TEST(qwen3_moe_masked_equals_zeroed_and_routed) { masked_vs_zeroed("qwen3_moe"); }

/* All ones == no mask, bit for bit, on the families with other block
 * kinds: sandwich norms and per-layer inputs (gemma4), linear attention
 * and a shared expert (qwen3_next), sinks and sliding layers (gpt_oss). */
TEST(all_ones_is_no_mask)
{
    static const char *const fams[] = {"gemma4", "qwen3_next", "gpt_oss", "qwen2_moe"};
    int ran = 0;
    for (size_t k = 0; k < sizeof fams / sizeof *fams; k++) {
        pair p;
        if (!make_pair(fams[k], &p)) continue;
        ran++;
        int64_t V = vocab_of(p.src);
        float *none = logits_of(p.masked, NULL, false), *full = logits_of(p.masked, "full", false),
              *cut = logits_of(p.masked, "cut", false);
        if (none && full && cut && V > 0) {
            if (memcmp(full, none, sizeof(float) * (size_t)(V * N_TOK)))
                harness_fail(__FILE__, __LINE__, "%s: all-ones mask changed the logits", fams[k]);
            CHECK(rel_diff(cut, none, V) > 1e-3);
        }
        free(none);
        free(full);
        free(cut);
    }
    if (!ran) SKIP("CMF_BIN or the fixtures absent");
}

typedef struct gen_ids {
    int32_t ids[16];
    int n;
} gen_ids;

static int collect(void *user, const cmf_token_info *t)
{
    gen_ids *g = user;
    if (t->id >= 0 && g->n < 16) g->ids[g->n++] = t->id;
    return 0;
}

static gen_ids greedy(cmf_session *s, const int32_t *prompt, size_t n, cmf_generate_result *r)
{
    gen_ids g = {{0}, 0};
    cmf_generate_params gp = cmf_generate_params_default();
    gp.sampling.temperature = 0;
    gp.max_tokens = 10;
    gp.ignore_eos = true;
    gp.on_token = collect;
    gp.user = &g;
    CHECK_OK(cmf_session_generate(s, prompt, n, &gp, r));
    return g;
}

static bool same_ids(const gen_ids *a, const gen_ids *b) { return a->n == b->n && !memcmp(a->ids, b->ids, sizeof a->ids); }

/* Switching tasks never reuses a cache computed under another mask;
 * setting the active task again keeps it. Greedy continuations: masked ==
 * zeroed weights, back to no mask == a fresh unmasked session. */
TEST(switching_invalidates_cache)
{
    pair p;
    if (!make_pair("llama", &p)) SKIP("CMF_BIN or the llama fixture absent");
    cmf_model *ma = NULL, *mb = NULL;
    cmf_session *s = NULL, *fresh = NULL, *zs = NULL;
    CHECK_OK(cmf_model_open(p.masked, NULL, &ma));
    CHECK_OK(cmf_model_open(p.zeroed, NULL, &mb));
    if (!ma || !mb) goto done;
    CHECK_OK(cmf_session_new(ma, NULL, &s));
    CHECK_OK(cmf_session_new(ma, NULL, &fresh));
    CHECK_OK(cmf_session_new(mb, NULL, &zs));
    if (!s || !fresh || !zs) goto done;
    int32_t prompt[N_TOK];
    tokens(cmf_model_n_vocab(ma), prompt);
    cmf_generate_result r;
    gen_ids plain = greedy(fresh, prompt, 12, &r), zero = greedy(zs, prompt, 12, &r);
    CHECK(!same_ids(&plain, &zero));
    CHECK(cmf_session_task(s) == NULL);
    CHECK_OK(cmf_session_set_task(s, "cut"));
    CHECK_EQ_STR(cmf_session_task(s), "cut");
    gen_ids cut = greedy(s, prompt, 12, &r);
    CHECK(same_ids(&cut, &zero));
    CHECK(cmf_session_n_past(s) > 12);
    CHECK_OK(cmf_session_set_task(s, "cut")); /* the same task: cache kept */
    CHECK(cmf_session_n_past(s) > 12);
    CHECK(cmf_session_logits(s) != NULL);
    cut = greedy(s, prompt, 12, &r);
    CHECK_EQ_INT(r.n_reused, 11);
    CHECK(same_ids(&cut, &zero));
    CHECK_OK(cmf_session_set_task(s, NULL)); /* another mask: cache dropped */
    CHECK_EQ_INT(cmf_session_n_past(s), 0);
    CHECK(cmf_session_logits(s) == NULL);
    gen_ids back = greedy(s, prompt, 12, &r);
    CHECK_EQ_INT(r.n_reused, 0);
    CHECK(same_ids(&back, &plain));
    CHECK_OK(cmf_session_set_task(s, "full"));
    CHECK_EQ_INT(cmf_session_n_past(s), 0);
    back = greedy(s, prompt, 12, &r);
    CHECK(same_ids(&back, &plain));
    cmf_session_reset(s); /* reset keeps the task */
    CHECK_EQ_STR(cmf_session_task(s), "full");
done:
    cmf_session_free(s);
    cmf_session_free(fresh);
    cmf_session_free(zs);
    cmf_model_free(ma);
    cmf_model_free(mb);
}

/* The task list, and the errors: an unknown name and a file without a
 * masks section name the file and the task and change nothing. */
TEST(task_list_and_errors)
{
    pair p;
    if (!make_pair("llama", &p)) SKIP("CMF_BIN or the llama fixture absent");
    cmf_model *ma = NULL, *mo = NULL;
    cmf_session *s = NULL, *so = NULL;
    CHECK_OK(cmf_model_open(p.masked, NULL, &ma));
    CHECK_OK(cmf_model_open(p.src, NULL, &mo));
    if (!ma || !mo) goto done;
    CHECK_EQ_INT(cmf_model_n_tasks(ma), 2);
    CHECK_EQ_STR(cmf_model_task_name(ma, 0), "cut");
    CHECK_EQ_STR(cmf_model_task_name(ma, 1), "full");
    CHECK(cmf_model_task_name(ma, 2) == NULL && cmf_model_task_name(ma, -1) == NULL);
    CHECK_EQ_STR(cmf_model_default_task(ma), "full");
    CHECK_EQ_INT(cmf_model_n_tasks(mo), 0);
    CHECK(cmf_model_default_task(mo) == NULL && cmf_model_task_name(mo, 0) == NULL);
    CHECK_OK(cmf_session_new(ma, NULL, &s));
    CHECK_OK(cmf_session_new(mo, NULL, &so));
    if (!s || !so) goto done;
    int32_t prompt[4] = {5, 6, 7, 8};
    CHECK_OK(cmf_session_set_task(s, "cut"));
    CHECK_OK(cmf_session_decode(s, prompt, 4, NULL, false));
    CHECK_ERR(cmf_session_set_task(s, "nosuch"), CMF_ERR_NOT_FOUND, "no task 'nosuch'");
    CHECK_CONTAINS(cmf_session_errmsg(s), p.masked);
    CHECK_CONTAINS(cmf_session_errmsg(s), "'cut', 'full'");
    CHECK_EQ_STR(cmf_session_task(s), "cut"); /* unchanged, cache kept */
    CHECK_EQ_INT(cmf_session_n_past(s), 4);
    CHECK_ERR(cmf_session_set_task(so, "cut"), CMF_ERR_NOT_FOUND, "task 'cut': the file has no masks section");
    CHECK_CONTAINS(cmf_session_errmsg(so), p.src);
    CHECK_OK(cmf_session_set_task(so, NULL));
done:
    cmf_session_free(s);
    cmf_session_free(so);
    cmf_model_free(ma);
    cmf_model_free(mo);
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--write")) {
        cmf_status st = write_pair(argv[2], argv[3], argv[4]);
        if (st) fprintf(stderr, "%s\n", cmf_last_error());
        return st ? 1 : 0;
    }
    RUN(llama_masked_equals_zeroed);
    RUN(phi3_masked_equals_zeroed);
    RUN(qwen3_moe_masked_equals_zeroed_and_routed);
    RUN(all_ones_is_no_mask);
    RUN(switching_invalidates_cache);
    RUN(task_list_and_errors);
    return harness_done();
}
