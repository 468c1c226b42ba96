/* test_engine_skills.c — skills and LoRA at run time (spec §9) on the llama fixture
 * converted at f32, copied here into a file with two skills (`a`: two
 * tensors of layer 1; `b`: a tensor of layers 0 and 2 and lm_head, each a
 * perturbed copy of the backbone's) and into the two specialists (the
 * backbone with a's or b's tensors in place):
 * - per session: sessions on one model handle running a, b and none, from
 *   three threads at once, give bit for bit the logits of the specialist
 *   (or backbone) file run alone; switching a session's skill does too;
 * - residency: the skill's tensor pages (mincore over the pages wholly
 *   inside its tensors, with the mapping's readahead off and the file
 *   dropped from the page cache first) are not resident while no session
 *   runs it, all resident after it runs, and not faulted in again after
 *   switching away and dropping them;
 * - per sequence: one batch of sequences with skills a, b and none gives
 *   each sequence's logits run alone, within 1e-5 of the row's max |logit|
 *   (the batched matmul against the single-token dot: f32 summation order;
 *   test_engine_batch.c measures <= 1.2e-6 for the same difference;
 *   measured here: 0);
 * - soft blend: c and d differ only in lm_head, so their blend's logits
 *   are the weighted sum of theirs (bound 1e-6, measured 0); the blend of
 *   a and b against a file holding the blended matrices, made here (bound
 *   1e-5, measured 1.6e-7); weights from scores equal softmax(-E/T)
 *   computed here; a one-skill blend is that skill bit for bit; a blended
 *   sequence beside a skill-a one in a batch (bound 1e-5, measured 2.3e-7);
 *   a skill replacing a norm blends it as sum_i w_i v_i (against a file
 *   holding that norm: bound 1e-6, measured 0); bad weights, ids and a bad temperature
 *   refused;
 * - LoRA: two PEFT adapters written here (random A, B; r 4, alpha 8; one
 *   on q_proj, down_proj and lm_head, the other on the same down_proj) at
 *   user scales 0.5 and 1.5 against a file with W + s B A merged here
 *   (bound 1e-5, measured 2.0e-7); another session of the model and the
 *   cleared session run the backbone bit for bit; an unknown target, a
 *   wrong shape, a non-LoRA tensor, an embedding target and a missing
 *   adapter_config.json are refused naming the file and tensor.
 * - the serving scheduler: requests of skills a, b, the model's and the
 *   backbone's at once give the greedy tokens of a session of that skill
 *   alone; a LoRA adapter set on the scheduler those of a session with it;
 * - the GPU backend, when present, runs the batch of skills, the blend and
 *   LoRA within 1e-4 of the CPU.
 * Every comparison fails on NaN/Inf and on empty output. */
#include "harness.h"
#include "fixture_model.h"

#include "engine/api.h"
#include "format/format.h"
#include "util/json.h"
#include "vk_test.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The tensors each skill replaces. */
static const char *const SKILL_A[] = {"model.layers.1.mlp.up_proj.weight", "model.layers.1.mlp.down_proj.weight"};
static const char *const SKILL_B[] = {"model.layers.0.self_attn.q_proj.weight", "model.layers.2.mlp.gate_proj.weight",
                                      "lm_head.weight"};

/* Skills c and d replace only lm_head (the blend's one-layer check); n
 * replaces a norm (a 1-D tensor, which a blend sums as vectors). */
static const char *const SKILL_CD[] = {"lm_head.weight"};
static const char *const SKILL_N[] = {"model.layers.0.input_layernorm.weight"};

enum { NONE = 0, SPEC_A = 1, SPEC_B = 2, WITH_SKILLS = 3, BLEND_AB = 4, BLEND_N0 = 5 };
#define W_N 0.4f /* BLEND_N0: the backbone with w_n * n + (1 - w_n) * backbone for n's norm */
#define W_A 0.25f /* BLEND_AB: the backbone with w_a * a + (1 - w_a) * b where a or b replace a tensor */

static bool in_list(const char *name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, list[i])) return true;
    return false;
}

/* The perturbed copy of a backbone tensor for skill `id`: w * (1 + 0.5 sin(k i)). */
static float *perturbed(const cmf__tensor *t, char id)
{
    size_t n = (size_t)(t->nbytes / 4);
    float *d = malloc(t->nbytes);
    memcpy(d, t->data, t->nbytes);
    for (size_t i = 0; i < n; i++) d[i] *= 1.0f + 0.5f * sinf((float)i * (0.37f + 0.17f * (float)(id - 'a')));
    return d;
}

/* Writes the f32 fixture model `m` into `path`: the backbone (NONE), a
 * specialist (SPEC_A, SPEC_B) or the backbone plus skills a and b. */
static void write_variant(const cmf__model *m, const char *path, int mode)
{
    const cmf__file *f = m->file;
    cmf__writer *w = NULL;
    CHECK_OK(cmf__writer_open(path, &w));
    if (!w) return;
    json_t *h = json_deep_copy(f->header);
    json_object_del(h, "section_hashes");
    json_object_del(h, "format");
    json_object_del(h, "version");
    if (mode == WITH_SKILLS)
        json_object_set_new(h, "skills", json_pack("[{s:s, s:s}, {s:s, s:s}]", "id", "a", "name", "skill a", "id", "b",
                                                   "name", "skill b"));
    CHECK_OK(cmf__writer_set_header(w, h));
    json_decref(h);
    const cmf__section *voc = cmf__file_vocab(f);
    if (voc && voc->data) CHECK_OK(cmf__writer_set_vocab(w, voc->data, voc->len));
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const cmf__tensor *t = &f->tensors[i];
        CHECK(t->dtype == CMF_DTYPE_F32);
        bool in_a = in_list(t->name, SKILL_A, 2), in_b = in_list(t->name, SKILL_B, 3);
        float *d = NULL;
        if ((mode == SPEC_A && in_a) || (mode == SPEC_B && in_b)) d = perturbed(t, mode == SPEC_A ? 'a' : 'b');
        if (mode == BLEND_N0 && in_list(t->name, SKILL_N, 1)) { /* a blended norm: sum_i w_i v_i */
            float *dn = perturbed(t, 'n');
            const float *w0 = (const float *)t->data;
            d = malloc(t->nbytes);
            for (size_t k = 0; k < t->nbytes / 4; k++) d[k] = (float)((double)W_N * dn[k] + (double)(1 - W_N) * w0[k]);
            free(dn);
        }
        if (mode == BLEND_AB && (in_a || in_b)) { /* materialised: what a blend never builds */
            float *da = in_a ? perturbed(t, 'a') : NULL, *db = in_b ? perturbed(t, 'b') : NULL;
            const float *w0 = (const float *)t->data;
            d = malloc(t->nbytes);
            for (size_t k = 0; k < t->nbytes / 4; k++) d[k] = W_A * (da ? da[k] : w0[k]) + (1 - W_A) * (db ? db[k] : w0[k]);
            free(da);
            free(db);
        }
        CHECK_OK(cmf__writer_add_tensor(w, t->name, t->dtype, t->ndim, t->shape, d ? d : (const void *)t->data, t->nbytes));
        free(d);
    }
    for (int s = 0; mode == WITH_SKILLS && s < 5; s++) { /* skill tensors after the backbone, as append-only growth */
        const char *const *lists[] = {SKILL_A, SKILL_B, SKILL_CD, SKILL_CD, SKILL_N};
        const size_t counts[] = {2, 3, 1, 1, 1};
        const char *const *list = lists[s];
        for (size_t k = 0; k < counts[s]; k++) {
            const cmf__tensor *t = cmf__file_find(f, list[k]);
            char nm[256];
            char id = s == 4 ? 'n' : (char)('a' + s);
            snprintf(nm, sizeof nm, "skill.%c.%s", id, t->name);
            float *d = perturbed(t, id);
            CHECK_OK(cmf__writer_add_tensor(w, nm, t->dtype, t->ndim, t->shape, d, t->nbytes));
            free(d);
        }
    }
    CHECK_OK(cmf__writer_finish(w));
}

static char g_paths[6][512]; /* by mode */
static int64_t g_vocab;

static bool fixtures_ready(void)
{
    static int ready = -1;
    if (ready >= 0) return ready;
    cmf__model *m = fixture_model_f32("llama");
    ready = m != NULL;
    if (!m) return false;
    g_vocab = m->arch.vocab_size;
    static const char *const names[] = {"backbone", "spec-a", "spec-b", "skills", "blend-ab", "blend-n0"};
    for (int mode = 0; mode < 6; mode++) {
        snprintf(g_paths[mode], sizeof g_paths[mode], "%s/%s.cmf", harness_tmpdir(), names[mode]);
        write_variant(m, g_paths[mode], mode);
    }
    cmf__model_free(m);
    return true;
}

#define PROMPT 7
#define STEPS 3
#define N_TOK (PROMPT + STEPS)

static int32_t tok_of(int s, int i) { return (int32_t)((5 + 29 * s + 11 * i + s * i) % g_vocab); }

/* Every position's logits of sequence s: the prompt in one call, then one token a call. */
static void run_session(cmf_session *ss, int s, float *out)
{
    int32_t ids[N_TOK];
    for (int i = 0; i < N_TOK; i++) ids[i] = tok_of(s, i);
    cmf_session_reset(ss);
    CHECK_OK(cmf_session_decode(ss, ids, PROMPT, out, true));
    for (int i = PROMPT; i < N_TOK; i++) CHECK_OK(cmf_session_decode(ss, &ids[i], 1, out + (int64_t)i * g_vocab, false));
}

static cmf_device g_device = CMF_DEVICE_CPU; /* of the sessions new_session makes */

static cmf_session *new_session(cmf_model *m, const char *skill, int n_seq)
{
    cmf_session_params p = cmf_session_params_default();
    p.device = g_device;
    p.n_threads = 1;
    p.kv_type = CMF_KV_F32;
    p.n_seq_max = n_seq;
    p.skill = skill;
    cmf_session *s = NULL;
    CHECK_OK(cmf_session_new(m, &p, &s));
    return s;
}

/* The reference: file `mode` opened alone, sequence s. */
static float *alone(int mode, int s)
{
    float *out = calloc((size_t)(N_TOK * g_vocab), sizeof(float));
    cmf_model *m = NULL;
    CHECK_OK(cmf_model_open(g_paths[mode], NULL, &m));
    if (!m) return out;
    cmf_session *ss = new_session(m, NULL, 1);
    if (ss) run_session(ss, s, out);
    cmf_session_free(ss);
    cmf_model_free(m);
    return out;
}

/* Bitwise equality, failing on NaN/Inf and on empty output. */
static bool same_bits(const float *a, const float *b, size_t n)
{
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i]) || memcmp(&a[i], &b[i], sizeof(float))) return false;
    return true;
}

typedef struct job {
    cmf_session *s;
    int seq;
    float *out;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    run_session(j->s, j->seq, j->out);
    return NULL;
}

TEST(sessions_run_different_skills_at_once)
{
    if (!fixtures_ready()) SKIP("CMF_BIN or the llama fixture is absent");
    const size_t n = (size_t)(N_TOK * g_vocab);
    float *ref_a = alone(SPEC_A, 0), *ref_b = alone(SPEC_B, 1), *ref_0 = alone(NONE, 2);
    CHECK(!same_bits(ref_a, ref_0, n) && !same_bits(ref_b, ref_0, n)); /* the skills change the output */
    cmf_model *m = NULL;
    CHECK_OK(cmf_model_open(g_paths[WITH_SKILLS], NULL, &m));
    if (!m) return;
    cmf_session *sa = new_session(m, "a", 1), *sb = new_session(m, "b", 1), *s0 = new_session(m, NULL, 1);
    CHECK_EQ_STR(cmf_session_skill(sa), "a");
    CHECK(cmf_session_skill(s0) == NULL);
    job jobs[3] = {{sa, 0, calloc(n, 4)}, {sb, 1, calloc(n, 4)}, {s0, 2, calloc(n, 4)}};
    pthread_t th[3];
    for (int i = 0; i < 3; i++) CHECK(pthread_create(&th[i], NULL, run_job, &jobs[i]) == 0);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    CHECK(same_bits(jobs[0].out, ref_a, n));
    CHECK(same_bits(jobs[1].out, ref_b, n));
    CHECK(same_bits(jobs[2].out, ref_0, n));
    /* the two skill sessions read one shared binding per skill, views into the one mapping */
    CHECK(sa->e->model != sb->e->model && sa->e->model->file == m->m->file);
    CHECK(sa->e->model->layers[1].w_up.q.data == cmf__file_find(m->m->file, "skill.a.model.layers.1.mlp.up_proj.weight")->data);
    CHECK(sb->e->model->layers[1].w_up.q.data == m->m->layers[1].w_up.q.data);
    /* switching: a -> b -> none, each run equal to the reference */
    float *out = calloc(n, 4);
    CHECK_OK(cmf_session_set_skill(sa, "b"));
    CHECK_EQ_INT(cmf_session_n_past(sa), 0); /* a cache computed under a is not reused under b */
    run_session(sa, 1, out);
    CHECK(same_bits(out, ref_b, n));
    CHECK_OK(cmf_session_set_skill(sa, NULL));
    run_session(sa, 2, out);
    CHECK(same_bits(out, ref_0, n));
    /* setting the active skill again keeps the cache */
    int32_t past = cmf_session_n_past(sa);
    CHECK_OK(cmf_session_set_skill(sa, NULL));
    CHECK_EQ_INT(cmf_session_n_past(sa), past);
    /* an unknown id: refused, naming the file and the id; nothing changes */
    CHECK_ERR(cmf_session_set_skill(sa, "nope"), CMF_ERR_NOT_FOUND, "skill 'nope' not in this file");
    CHECK_CONTAINS(cmf_session_errmsg(sa), "skills.cmf");
    CHECK_EQ_INT(cmf_session_n_past(sa), past);
    cmf_session_params p = cmf_session_params_default();
    p.skill = "zz";
    cmf_session *bad = NULL;
    CHECK_ERR(cmf_session_new(m, &p, &bad), CMF_ERR_NOT_FOUND, "skill 'zz' not in this file");
    CHECK(bad == NULL);
    free(out);
    for (int i = 0; i < 3; i++) free(jobs[i].out);
    cmf_session_free(sa);
    cmf_session_free(sb);
    cmf_session_free(s0);
    cmf_model_free(m);
    /* the model's open-time skill: its sessions start on it, and NULL leaves it */
    cmf_model_params mp = cmf_model_params_default();
    mp.skill = "b";
    CHECK_OK(cmf_model_open(g_paths[WITH_SKILLS], &mp, &m));
    if (m) {
        cmf_session *s = new_session(m, NULL, 1);
        float *o = calloc(n, 4);
        run_session(s, 1, o);
        CHECK(same_bits(o, ref_b, n));
        CHECK_OK(cmf_session_set_skill(s, NULL));
        run_session(s, 2, o);
        CHECK(same_bits(o, ref_0, n));
        free(o);
        cmf_session_free(s);
        cmf_model_free(m);
    }
    free(ref_a);
    free(ref_b);
    free(ref_0);
}

/* Resident pages among those lying wholly inside tensor t's payload;
 * *total gets their count. */
static size_t resident(const cmf__tensor *t, size_t *total)
{
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)t->data + pg - 1) / pg * pg, hi = ((uintptr_t)t->data + t->nbytes) / pg * pg;
    *total = hi > lo ? (hi - lo) / pg : 0;
    if (!*total) return 0;
    unsigned char vec[4096];
    if (*total > sizeof vec) *total = sizeof vec;
    CHECK(mincore((void *)lo, *total * pg, vec) == 0);
    size_t n = 0;
    for (size_t i = 0; i < *total; i++) n += vec[i] & 1;
    return n;
}

/* Drops the file's pages: the process's mappings of [data, data+len)
 * first (MADV_DONTNEED: a mapped page stays in the page cache), then the
 * page cache itself (POSIX_FADV_DONTNEED evicts clean unmapped pages). */
static void drop_pages(const char *path, const void *data, size_t len)
{
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)data / pg * pg;
    if (data) CHECK(madvise((void *)lo, len + ((uintptr_t)data - lo), MADV_DONTNEED) == 0);
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(fdatasync(fd) == 0);
    CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
    close(fd);
}

TEST(unused_skill_stays_out_of_memory)
{
    if (!fixtures_ready()) SKIP("CMF_BIN or the llama fixture is absent");
    const char *path = g_paths[WITH_SKILLS];
    cmf_model *m = NULL;
    CHECK_OK(cmf_model_open(path, NULL, &m));
    if (!m) return;
    const cmf__file *f = m->m->file;
    /* readahead off for the mapping, so that a resident page is one that was
     * read (the file is small: a fault's readahead window would cover
     * tensors nothing reads); then every page dropped */
    const cmf__mapping *map = &f->shards[0].map;
    CHECK(madvise((void *)map->data, (size_t)map->size, MADV_RANDOM) == 0);
    drop_pages(path, map->data, (size_t)map->size);
    const cmf__tensor *sk[2] = {cmf__file_find(f, "skill.a.model.layers.1.mlp.up_proj.weight"),
                                cmf__file_find(f, "skill.a.model.layers.1.mlp.down_proj.weight")};
    const cmf__tensor *bb = cmf__file_find(f, "model.layers.1.mlp.up_proj.weight");
    size_t total = 0, all = 0;
    for (int i = 0; i < 2; i++) (void)resident(sk[i], &total), all += total;
    size_t bb_total = 0;
    size_t bb_in = resident(bb, &bb_total);
    if (bb_in != 0 || all == 0) {
        fprintf(stderr, "  after dropping: backbone up_proj %zu/%zu pages resident, skill a %zu pages\n", bb_in,
                bb_total, all);
        cmf_model_free(m);
        SKIP("this file system keeps the file's pages in memory after POSIX_FADV_DONTNEED (tmpfs?): nothing to measure");
    }
    /* the backbone runs: its pages come in, the skill's stay out */
    cmf_session *s = new_session(m, NULL, 1);
    float *out = calloc((size_t)(N_TOK * g_vocab), sizeof(float));
    run_session(s, 0, out);
    size_t in_skill = 0;
    for (int i = 0; i < 2; i++) in_skill += resident(sk[i], &total);
    CHECK_EQ_INT(in_skill, 0);
    CHECK_EQ_INT(resident(bb, &bb_total), bb_total);
    fprintf(stderr, "  backbone only: skill a %zu/%zu pages resident, backbone up_proj %zu/%zu\n", in_skill, all,
            resident(bb, &bb_total), bb_total);
    /* skill a runs: every page of its tensors is read */
    CHECK_OK(cmf_session_set_skill(s, "a"));
    run_session(s, 0, out);
    in_skill = 0;
    for (int i = 0; i < 2; i++) in_skill += resident(sk[i], &total);
    CHECK_EQ_INT(in_skill, all);
    fprintf(stderr, "  skill a active: %zu/%zu pages resident\n", in_skill, all);
    /* switched away, the pages dropped: running faults none back in */
    CHECK_OK(cmf_session_set_skill(s, NULL));
    for (int i = 0; i < 2; i++) drop_pages(path, sk[i]->data, (size_t)sk[i]->nbytes);
    run_session(s, 0, out);
    in_skill = 0;
    for (int i = 0; i < 2; i++) in_skill += resident(sk[i], &total);
    CHECK_EQ_INT(in_skill, 0);
    fprintf(stderr, "  switched back to the backbone: %zu/%zu pages resident\n", in_skill, all);
    free(out);
    cmf_session_free(s);
    cmf_model_free(m);
}

TEST(batch_mixes_skills_per_sequence)
{
    if (!fixtures_ready()) SKIP("CMF_BIN or the llama fixture is absent");
    const int64_t V = g_vocab;
    float *ref[3] = {alone(SPEC_A, 0), alone(SPEC_B, 1), alone(NONE, 2)};
    cmf_model *m = NULL;
    CHECK_OK(cmf_model_open(g_paths[WITH_SKILLS], NULL, &m));
    if (!m) return;
    cmf_session *s = new_session(m, NULL, 3);
    CHECK_OK(cmf_session_seq_set_skill(s, 0, "a"));
    CHECK_OK(cmf_session_seq_set_skill(s, 1, "b"));
    CHECK_OK(cmf_session_seq_set_skill(s, 2, NULL));
    CHECK_ERR(cmf_session_seq_set_skill(s, 3, "a"), CMF_ERR_ARG, "outside");
    CHECK_ERR(cmf_session_seq_set_skill(s, 1, "nope"), CMF_ERR_NOT_FOUND, "skill 'nope' not in this file");
    /* prompts interleaved (token i of each sequence in turn), then one token of each per step */
    int32_t tok[3 * PROMPT], seq[3 * PROMPT];
    bool want[3 * PROMPT];
    int n = 0;
    for (int i = 0; i < PROMPT; i++)
        for (int q = 0; q < 3; q++) tok[n] = tok_of(q, i), seq[n] = q, want[n] = true, n++;
    float *lg = calloc((size_t)(n * V), sizeof(float));
    double worst = 0;
    cmf_batch b = {n, tok, seq, want};
    CHECK_OK(cmf_session_decode_batch(s, &b, lg));
    for (int t = 0; t < n; t++) {
        double r = harness_max_rel_err(lg + (int64_t)t * V, ref[seq[t]] + (int64_t)(t / 3) * V, (size_t)V);
        worst = r > worst ? r : worst;
    }
    for (int k = 0; k < STEPS; k++) {
        for (int q = 0; q < 3; q++) tok[q] = tok_of(q, PROMPT + k), seq[q] = q;
        cmf_batch d = {3, tok, seq, want};
        CHECK_OK(cmf_session_decode_batch(s, &d, lg));
        for (int q = 0; q < 3; q++) {
            double r = harness_max_rel_err(lg + (int64_t)q * V, ref[q] + (int64_t)(PROMPT + k) * V, (size_t)V);
            worst = r > worst ? r : worst;
        }
    }
    fprintf(stderr, "  skills a, b, none in one batch: worst relative error %.3g\n", worst);
    CHECK(worst <= 1e-5);
    /* a skill change empties only that slot */
    CHECK_OK(cmf_session_seq_set_skill(s, 1, ""));
    CHECK_EQ_INT(cmf_session_seq_n_past(s, 1), 0);
    CHECK_EQ_INT(cmf_session_seq_n_past(s, 0), N_TOK);
    free(lg);
    cmf_session_free(s);
    cmf_model_free(m);
    for (int i = 0; i < 3; i++) free(ref[i]);
}

/* Logits of sequence s on a session of the skills file set up by `setup`. */
static float *on_skills_file(cmf_status (*setup)(cmf_session *), int s)
{
    float *out = calloc((size_t)(N_TOK * g_vocab), sizeof(float));
    cmf_model *m = NULL;
    CHECK_OK(cmf_model_open(g_paths[WITH_SKILLS], NULL, &m));
    if (!m) return out;
    cmf_session *ss = new_session(m, NULL, 1);
    if (ss) {
        CHECK_OK(setup(ss));
        run_session(ss, s, out);
    }
    cmf_session_free(ss);
    cmf_model_free(m);
    return out;
}

static const char *const CD0[] = {"c", "d", NULL};
static const float CD0_W[] = {3, 5, 2}; /* normalised: 0.3, 0.5, 0.2 */
static cmf_status skill_c(cmf_session *s) { return cmf_session_set_skill(s, "c"); }
static cmf_status skill_d(cmf_session *s) { return cmf_session_set_skill(s, "d"); }
static cmf_status skill_none(cmf_session *s) { return cmf_session_set_skill(s, NULL); }
static cmf_status blend_cd0(cmf_session *s) { return cmf_session_set_blend(s, 3, CD0, CD0_W); }

static const char *const AB[] = {"a", "b"};
static cmf_status blend_ab(cmf_session *s) { return cmf_session_set_blend(s, 2, AB, (const float[]){W_A, 1 - W_A}); }
static const float AB_E[] = {0.2f, 0.9f}, AB_T = 0.5f; /* scores and temperature */
static cmf_status blend_ab_scores(cmf_session *s) { return cmf_session_set_blend_scores(s, 2, AB, AB_E, AB_T); }
static cmf_status blend_ab_softmax(cmf_session *s) /* the same weights, computed here */
{
    float w[2] = {expf(-AB_E[0] / AB_T), expf(-AB_E[1] / AB_T)};
    return cmf_session_set_blend(s, 2, AB, w);
}
static cmf_status blend_n0(cmf_session *s)
{
    return cmf_session_set_blend(s, 2, (const char *const[]){"n", NULL}, (const float[]){W_N, 1 - W_N});
}
static cmf_status blend_a_only(cmf_session *s) { return cmf_session_set_blend(s, 1, AB, (const float[]){1}); }

/* Worst |got - ref| / max|ref| over the rows of one sequence; +inf on NaN/Inf. */
static double worst_rel(const float *got, const float *ref)
{
    double worst = 0;
    for (int i = 0; i < N_TOK; i++) {
        double r = harness_max_rel_err(got + (int64_t)i * g_vocab, ref + (int64_t)i * g_vocab, (size_t)g_vocab);
        worst = r > worst ? r : worst;
    }
    return worst;
}

TEST(blend_is_the_weighted_sum_of_outputs)
{
    if (!fixtures_ready()) SKIP("CMF_BIN or the llama fixture is absent");
    const size_t n = (size_t)(N_TOK * g_vocab);
    /* one layer: c and d differ only in lm_head, so the blended logits are
     * sum_i w_i (h W_i^T) over the same final hidden state h */
    float *lc = on_skills_file(skill_c, 0), *ld = on_skills_file(skill_d, 0), *l0 = on_skills_file(skill_none, 0);
    float *lb = on_skills_file(blend_cd0, 0), *sum = calloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) sum[i] = 0.3f * lc[i] + 0.5f * ld[i] + 0.2f * l0[i];
    double one = worst_rel(lb, sum);
    fprintf(stderr, "  lm_head blend of c, d, backbone against the weighted sum of their logits: %.3g\n", one);
    CHECK(one <= 1e-6); /* float rounding of three products and two sums */
    CHECK(worst_rel(lb, lc) > 1e-3); /* not one member's output */
    /* end to end: a and b (two layers and the head) against the file whose
     * tensors are the blended matrices, made here */
    float *ab = on_skills_file(blend_ab, 1), *mat = alone(BLEND_AB, 1);
    double e2e = worst_rel(ab, mat);
    fprintf(stderr, "  blend of a, b against the materialised blend: %.3g\n", e2e);
    CHECK(e2e <= 1e-5); /* (sum w_i W_i) x against sum w_i (W_i x): f32 rounding through three layers */
    /* weights from scores: softmax(-E/T) */
    float *sc = on_skills_file(blend_ab_scores, 1), *sm = on_skills_file(blend_ab_softmax, 1);
    CHECK(worst_rel(sc, sm) <= 1e-6);
    CHECK(worst_rel(sc, ab) > 1e-4); /* other weights, other output */
    /* a 1-D tensor (n's norm) blends as sum_i w_i v_i: against the file holding that vector */
    float *bn = on_skills_file(blend_n0, 1), *matn = alone(BLEND_N0, 1);
    double en = worst_rel(bn, matn);
    fprintf(stderr, "  blend of n and the backbone (a norm) against the materialised norm: %.3g\n", en);
    CHECK(en <= 1e-6); /* the same vector up to one rounding of the weighted sum */
    free(bn), free(matn);
    /* one member: the skill alone, bit for bit */
    float *one_a = on_skills_file(blend_a_only, 0), *ref_a = alone(SPEC_A, 0);
    CHECK(same_bits(one_a, ref_a, n));
    free(lc), free(ld), free(l0), free(lb), free(sum), free(ab), free(mat), free(sc), free(sm), free(one_a), free(ref_a);
}

TEST(blend_beside_a_sequence_skill)
{
    if (!fixtures_ready()) SKIP("CMF_BIN or the llama fixture is absent");
    const int64_t V = g_vocab;
    float *ref_blend = on_skills_file(blend_ab, 0), *ref_a = alone(SPEC_A, 1);
    cmf_model *m = NULL;
    CHECK_OK(cmf_model_open(g_paths[WITH_SKILLS], NULL, &m));
    if (!m) return;
    cmf_session *s = new_session(m, NULL, 2);
    CHECK_OK(blend_ab(s));
    CHECK_OK(cmf_session_seq_set_skill(s, 1, "a"));
    int32_t tok[2 * N_TOK], seq[2 * N_TOK];
    bool want[2 * N_TOK];
    int k = 0;
    for (int i = 0; i < N_TOK; i++)
        for (int q = 0; q < 2; q++) tok[k] = tok_of(q, i), seq[k] = q, want[k] = true, k++;
    float *lg = calloc((size_t)(k * V), sizeof(float));
    cmf_batch b = {k, tok, seq, want};
    CHECK_OK(cmf_session_decode_batch(s, &b, lg));
    double worst = 0;
    for (int t = 0; t < k; t++) {
        double r = harness_max_rel_err(lg + (int64_t)t * V, (seq[t] ? ref_a : ref_blend) + (int64_t)(t / 2) * V, (size_t)V);
        worst = r > worst ? r : worst;
    }
    fprintf(stderr, "  blended sequence beside a skill-a sequence in one batch: %.3g\n", worst);
    CHECK(worst <= 1e-5); /* the batch bound of batch_mixes_skills_per_sequence */
    /* errors: nothing changes */
    CHECK_ERR(cmf_session_set_blend(s, 2, AB, (const float[]){-1, 1}), CMF_ERR_ARG, "weight 0");
    CHECK_ERR(cmf_session_set_blend(s, 2, AB, (const float[]){0, 0}), CMF_ERR_ARG, "sum to 0");
    CHECK_ERR(cmf_session_set_blend(s, 2, (const char *const[]){"a", "zz"}, (const float[]){1, 1}), CMF_ERR_NOT_FOUND,
              "skill 'zz' not in this file");
    CHECK_ERR(cmf_session_set_blend_scores(s, 2, AB, AB_E, 0), CMF_ERR_ARG, "temperature");
    CHECK_EQ_INT(cmf_session_seq_n_past(s, 0), N_TOK);
    /* the same blend again keeps the cache; ending it empties the blended slot only */
    CHECK_OK(blend_ab(s));
    CHECK_EQ_INT(cmf_session_seq_n_past(s, 0), N_TOK);
    CHECK_OK(cmf_session_set_blend(s, 0, NULL, NULL));
    CHECK_EQ_INT(cmf_session_seq_n_past(s, 0), 0);
    CHECK_EQ_INT(cmf_session_seq_n_past(s, 1), N_TOK);
    free(lg);
    free(ref_blend);
    free(ref_a);
    cmf_session_free(s);
    cmf_model_free(m);
}

/* ---- LoRA ------------------------------------------------------------------ */
#define LORA_R 4
#define LORA_ALPHA 8.0f /* scale alpha / r = 2 */
typedef struct lora_pair {
    const char *target; /* model tensor */
    int64_t out, in;
    float a[LORA_R * 384], b[384 * LORA_R]; /* [r][in], [out][r] */
} lora_pair;

static uint64_t g_rng = 7;
static float frand(void)
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* `dir`/`name` opened for writing; the test program stops, saying which
 * file, when the path does not fit or the file cannot be made. */
static FILE *adapter_file(char *path, size_t cap, const char *dir, const char *name, const char *mode)
{
    FILE *fp = NULL;
    int n = snprintf(path, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap || !(fp = fopen(path, mode))) {
        fprintf(stderr, "FAIL: %s/%s: cannot write the test adapter\n", dir, name);
        exit(1);
    }
    return fp;
}

/* Writes adapter `dir`/adapter_model.safetensors (F32) holding pairs[0..n)
 * and adapter_config.json; `a_cols_off` shortens every lora_A's rows by
 * that many columns (a wrong shape), `rename` replaces the first A's name. */
static void write_adapter(const char *dir, const lora_pair *pairs, int n, int a_cols_off, const char *rename)
{
    char path[600];
    FILE *fp = adapter_file(path, sizeof path, dir, "adapter_config.json", "w");
    fprintf(fp, "{\"peft_type\": \"LORA\", \"r\": %d, \"lora_alpha\": %g, \"use_rslora\": false}\n", LORA_R,
            (double)LORA_ALPHA);
    fclose(fp);
    json_t *h = json_object();
    uint64_t off = 0;
    for (int i = 0; i < n; i++)
        for (int ab = 0; ab < 2; ab++) {
            char nm[300];
            int tl = (int)strlen(pairs[i].target) - (int)strlen(".weight");
            snprintf(nm, sizeof nm, "base_model.model.%.*s.lora_%c.weight", tl, pairs[i].target, ab ? 'B' : 'A');
            int64_t r0 = ab ? pairs[i].out : LORA_R, c0 = ab ? LORA_R : pairs[i].in - a_cols_off;
            uint64_t nb = (uint64_t)(r0 * c0) * 4;
            json_object_set_new(h, !ab && !i && rename ? rename : nm,
                                json_pack("{s:s, s:[I,I], s:[I,I]}", "dtype", "F32", "shape", (json_int_t)r0,
                                          (json_int_t)c0, "data_offsets", (json_int_t)off, (json_int_t)(off + nb)));
            off += nb;
        }
    char *txt = json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS);
    size_t hl = strlen(txt), pad = (8 - hl % 8) % 8;
    fp = adapter_file(path, sizeof path, dir, "adapter_model.safetensors", "wb");
    uint64_t L = hl + pad;
    for (int i = 0; i < 8; i++) fputc((int)((L >> (8 * i)) & 0xff), fp);
    fwrite(txt, 1, hl, fp);
    for (size_t i = 0; i < pad; i++) fputc(' ', fp);
    for (int i = 0; i < n; i++) { /* data in header order: by offset, as written above */
        fwrite(pairs[i].a, 4, (size_t)(LORA_R * (pairs[i].in - a_cols_off)), fp);
        fwrite(pairs[i].b, 4, (size_t)(pairs[i].out * LORA_R), fp);
    }
    fclose(fp);
    free(txt);
    json_decref(h);
}

/* The backbone with W + s B A for every pair of every adapter (s_k: each adapter's full scale). */
static void write_merged(const char *path, lora_pair *const *adapters, const int *counts, const float *s_k, int n_ad)
{
    cmf__model *m = NULL;
    CHECK_OK(cmf__model_open(g_paths[NONE], &m));
    if (!m) return;
    const cmf__file *f = m->file;
    cmf__writer *w = NULL;
    CHECK_OK(cmf__writer_open(path, &w));
    json_t *h = json_deep_copy(f->header);
    json_object_del(h, "section_hashes");
    json_object_del(h, "format");
    json_object_del(h, "version");
    CHECK_OK(cmf__writer_set_header(w, h));
    json_decref(h);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const cmf__tensor *t = &f->tensors[i];
        float *d = malloc(t->nbytes);
        memcpy(d, t->data, t->nbytes);
        for (int k = 0; k < n_ad; k++)
            for (int p = 0; p < counts[k]; p++) {
                const lora_pair *lp = &adapters[k][p];
                if (strcmp(lp->target, t->name)) continue;
                for (int64_t o = 0; o < lp->out; o++)
                    for (int64_t c = 0; c < lp->in; c++) {
                        double acc = 0;
                        for (int r = 0; r < LORA_R; r++) acc += (double)lp->b[o * LORA_R + r] * lp->a[r * lp->in + c];
                        d[o * lp->in + c] += (float)(s_k[k] * acc);
                    }
            }
        CHECK_OK(cmf__writer_add_tensor(w, t->name, t->dtype, t->ndim, t->shape, d, t->nbytes));
        free(d);
    }
    CHECK_OK(cmf__writer_finish(w));
    cmf__model_free(m);
}

static void fill_pair(lora_pair *p, const char *target, int64_t out, int64_t in)
{
    p->target = target, p->out = out, p->in = in;
    for (int64_t i = 0; i < LORA_R * in; i++) p->a[i] = 0.2f * frand();
    for (int64_t i = 0; i < out * LORA_R; i++) p->b[i] = 0.2f * frand();
}

TEST(lora_equals_merged_weights)
{
    if (!fixtures_ready()) SKIP("CMF_BIN or the llama fixture is absent");
    const size_t n = (size_t)(N_TOK * g_vocab);
    static lora_pair one[3], two[1];
    fill_pair(&one[0], "model.layers.0.self_attn.q_proj.weight", 96, 96);
    fill_pair(&one[1], "model.layers.1.mlp.down_proj.weight", 96, 128);
    fill_pair(&one[2], "lm_head.weight", 384, 96);
    fill_pair(&two[0], "model.layers.1.mlp.down_proj.weight", 96, 128); /* the same target as one[1]: both add */
    char d1[600], d2[600], p1[700], p2[700], merged[700];
    snprintf(d1, sizeof d1, "%s/lora-one", harness_tmpdir());
    snprintf(d2, sizeof d2, "%s/lora-two", harness_tmpdir());
    CHECK(mkdir(d1, 0755) == 0 && mkdir(d2, 0755) == 0);
    write_adapter(d1, one, 3, 0, NULL);
    write_adapter(d2, two, 1, 0, NULL);
    snprintf(p1, sizeof p1, "%s/adapter_model.safetensors", d1);
    snprintf(p2, sizeof p2, "%s/adapter_model.safetensors", d2);
    snprintf(merged, sizeof merged, "%s/lora-merged.cmf", harness_tmpdir());
    const float user[2] = {0.5f, 1.5f}, full[2] = {0.5f * LORA_ALPHA / LORA_R, 1.5f * LORA_ALPHA / LORA_R};
    lora_pair *ads[2] = {one, two};
    write_merged(merged, ads, (const int[]){3, 1}, full, 2);
    float *ref = alone(NONE, 0), *want = calloc(n, 4), *got = calloc(n, 4);
    cmf_model *mm = NULL;
    CHECK_OK(cmf_model_open(merged, NULL, &mm));
    cmf_session *ms = mm ? new_session(mm, NULL, 1) : NULL;
    if (ms) run_session(ms, 0, want);
    cmf_session_free(ms);
    cmf_model_free(mm);
    cmf_model *m = NULL;
    CHECK_OK(cmf_model_open(g_paths[NONE], NULL, &m));
    if (!m) return;
    cmf_session *s = new_session(m, NULL, 1), *plain = new_session(m, NULL, 1);
    CHECK_OK(cmf_session_add_lora(s, p1, user[0]));
    CHECK_OK(cmf_session_add_lora(s, p2, user[1]));
    run_session(s, 0, got);
    double err = worst_rel(got, want);
    fprintf(stderr, "  two adapters at run time against the merged weights: %.3g\n", err);
    CHECK(err <= 1e-5); /* s (x A^T) B^T against x (W + s B A)^T: f32 rounding through three layers */
    CHECK(worst_rel(got, ref) > 1e-3); /* the adapters change the output */
    run_session(plain, 0, got); /* the other session of the model runs without them, bit for bit */
    CHECK(same_bits(got, ref, n));
    cmf_session_clear_loras(s);
    run_session(s, 0, got);
    CHECK(same_bits(got, ref, n));
    /* errors name the file and the tensor; nothing changes */
    char d3[600], p3[700];
    snprintf(d3, sizeof d3, "%s/lora-bad", harness_tmpdir());
    snprintf(p3, sizeof p3, "%s/adapter_model.safetensors", d3);
    CHECK(mkdir(d3, 0755) == 0);
    static lora_pair ghost[1];
    fill_pair(&ghost[0], "model.layers.9.mlp.up_proj.weight", 128, 96);
    write_adapter(d3, ghost, 1, 0, NULL);
    CHECK_ERR(cmf_session_add_lora(s, p3, 1), CMF_ERR_CONFIG, "has no tensor 'model.layers.9.mlp.up_proj.weight'");
    CHECK_CONTAINS(cmf_session_errmsg(s), "lora-bad/adapter_model.safetensors");
    write_adapter(d3, one, 1, 1, NULL); /* lora_A one column short */
    CHECK_ERR(cmf_session_add_lora(s, p3, 1), CMF_ERR_CONFIG,
              "'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight': shape [4, 95] (2-D), expected [4, 96]");
    write_adapter(d3, one, 1, 0, "base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector");
    CHECK_ERR(cmf_session_add_lora(s, p3, 1), CMF_ERR_UNSUPPORTED, "not a PEFT LoRA matrix");
    static lora_pair emb[1];
    fill_pair(&emb[0], "model.embed_tokens.weight", 384, 96);
    write_adapter(d3, emb, 1, 0, NULL);
    CHECK_ERR(cmf_session_add_lora(s, p3, 1), CMF_ERR_UNSUPPORTED, "'model.embed_tokens.weight' is not a projection");
    snprintf(d3, sizeof d3, "%s/lora-bad/adapter_config.json", harness_tmpdir());
    CHECK(unlink(d3) == 0);
    CHECK_ERR(cmf_session_add_lora(s, p3, 1), CMF_ERR_IO, "adapter_config.json");
    run_session(s, 0, got);
    CHECK(same_bits(got, ref, n));
    free(ref), free(want), free(got);
    cmf_session_free(s);
    cmf_session_free(plain);
    cmf_model_free(m);
}

/* Greedy ids of prompt s (tok_of) continued for 12 tokens. */
enum { SCHED_GEN = 12 };
typedef struct ids_out {
    int32_t id[SCHED_GEN];
    int n;
} ids_out;

static int keep_id(void *user, const cmf_token_info *t)
{
    ids_out *o = user;
    if (t->id >= 0 && o->n < SCHED_GEN) o->id[o->n++] = t->id;
    return 0;
}

static cmf_generate_params greedy_params(ids_out *o)
{
    cmf_generate_params gp = cmf_generate_params_default();
    gp.sampling.temperature = 0;
    gp.max_tokens = SCHED_GEN;
    gp.ignore_eos = true;
    gp.on_token = keep_id;
    gp.user = o;
    return gp;
}

static void greedy_alone(cmf_session *ss, int s, ids_out *o)
{
    int32_t ids[PROMPT];
    for (int i = 0; i < PROMPT; i++) ids[i] = tok_of(s, i);
    memset(o, 0, sizeof *o);
    cmf_generate_params gp = greedy_params(o);
    CHECK_OK(cmf_session_generate(ss, ids, PROMPT, &gp, NULL));
    CHECK_EQ_INT(o->n, SCHED_GEN);
}

static cmf_request *greedy_submit(cmf_sched *sc, int s, const char *skill, ids_out *o, int32_t *ids)
{
    for (int i = 0; i < PROMPT; i++) ids[i] = tok_of(s, i);
    memset(o, 0, sizeof *o);
    cmf_request_params rp = cmf_request_params_default();
    rp.prompt = ids;
    rp.n_prompt = PROMPT;
    rp.gen = greedy_params(o);
    rp.skill = skill;
    cmf_request *rq = NULL;
    CHECK_OK(cmf_sched_submit(sc, &rp, &rq));
    return rq;
}

/* The scheduler runs requests of skills a, b, the model's and the
 * backbone's ("") side by side, each the tokens of a session of that skill
 * alone; the result names the skill that ran. With a LoRA adapter set on
 * the scheduler, every request gets a session-with-adapter's tokens. */
TEST(scheduler_runs_a_skill_per_request)
{
    if (!fixtures_ready()) SKIP("CMF_BIN or the llama fixture is absent");
    cmf_model *m = NULL;
    CHECK_OK(cmf_model_open(g_paths[WITH_SKILLS], NULL, &m));
    if (!m) return;
    const char *skills[4] = {"a", "b", NULL, ""};
    ids_out ref[8], got[8];
    for (int i = 0; i < 8; i++) {
        cmf_session *ss = new_session(m, skills[i % 4] && *skills[i % 4] ? skills[i % 4] : NULL, 1);
        if (ss) greedy_alone(ss, i, &ref[i]);
        cmf_session_free(ss);
    }
    CHECK(memcmp(ref[0].id, ref[2].id, sizeof ref[0].id) || memcmp(ref[1].id, ref[3].id, sizeof ref[1].id));
    cmf_sched_params sp = cmf_sched_params_default();
    sp.n_parallel = 3;
    sp.batch_tokens = 8;
    sp.kv_type = CMF_KV_F32;
    sp.device = CMF_DEVICE_CPU;
    cmf_sched *sc = NULL;
    CHECK_OK(cmf_sched_new(m, &sp, &sc));
    if (sc) {
        cmf_request *rq[8];
        int32_t ids[8][PROMPT];
        for (int i = 0; i < 8; i++) rq[i] = greedy_submit(sc, i, skills[i % 4], &got[i], ids[i]);
        for (int i = 0; i < 8; i++) {
            cmf_request_result r;
            CHECK_OK(cmf_request_wait(rq[i], &r));
            CHECK_EQ_INT(got[i].n, SCHED_GEN);
            CHECK(!memcmp(got[i].id, ref[i].id, sizeof got[i].id));
            CHECK_EQ_INT(r.skill, i % 4 == 0 ? 0 : i % 4 == 1 ? 1 : -1);
            cmf_request_free(rq[i]);
        }
        cmf_sched_free(sc);
    }
    /* a LoRA adapter on the scheduler */
    static lora_pair one[1];
    fill_pair(&one[0], "model.layers.1.mlp.down_proj.weight", 96, 128);
    char d[600], path[700];
    snprintf(d, sizeof d, "%s/lora-sched", harness_tmpdir());
    CHECK(mkdir(d, 0755) == 0);
    write_adapter(d, one, 1, 0, NULL);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", d);
    cmf_session *ls = new_session(m, NULL, 1);
    ids_out lref, lgot;
    if (ls) {
        CHECK_OK(cmf_session_add_lora(ls, path, 2.0f));
        greedy_alone(ls, 5, &lref);
    }
    cmf_session_free(ls);
    const char *lp[1] = {path};
    const float ls_scale[1] = {2.0f};
    sp.lora = lp;
    sp.lora_scale = ls_scale;
    sp.n_lora = 1;
    CHECK_OK(cmf_sched_new(m, &sp, &sc));
    if (sc) {
        int32_t ids[PROMPT];
        cmf_request *rq = greedy_submit(sc, 5, NULL, &lgot, ids);
        CHECK_OK(cmf_request_wait(rq, NULL));
        CHECK_EQ_INT(lgot.n, SCHED_GEN);
        CHECK(!memcmp(lgot.id, lref.id, sizeof lgot.id));
        cmf_request_free(rq);
        cmf_sched_free(sc);
    }
    sp.lora = (const char *const[]){"/nonexistent/adapter_model.safetensors"};
    CHECK_STATUS(cmf_sched_new(m, &sp, &sc), CMF_ERR_IO);
    CHECK(sc == NULL);
    cmf_model_free(m);
}

/* The GPU backend (when this build and machine have one) runs the same
 * graphs: a batch of skills a, b and none, a blended session and a LoRA
 * adapter, each against the CPU. Bound 1e-4 relative, as
 * test_engine_batch.c's GPU parity (f32 sums in another order; measured
 * on lavapipe: 2.3e-7, 1.9e-7, 2.3e-7). */
TEST(gpu_runs_skills_blends_and_lora)
{
    if (!fixtures_ready()) SKIP("CMF_BIN or the llama fixture is absent");
    const int64_t V = g_vocab;
    cmf_model *m = NULL;
    CHECK_OK(cmf_model_open(g_paths[WITH_SKILLS], NULL, &m));
    if (!m) return;
    g_device = CMF_DEVICE_GPU;
    /* the model's GPU backend, made here the way vk_test.h makes one: what
     * the driver keeps from compiling the pipelines is not ours to free */
#ifdef CMF_TEST_LSAN
    __lsan_disable();
#endif
    cmf__backend *gpu = cmf__model_backend(m, CMF_DEVICE_GPU, 0);
#ifdef CMF_TEST_LSAN
    __lsan_enable();
#endif
    if (!gpu) {
        printf("*** no GPU backend (%s): skills on the GPU SKIPPED ***\n", cmf_last_error());
        g_device = CMF_DEVICE_CPU;
        cmf_model_free(m);
        SKIP("no GPU backend");
    }
    /* per-sequence skills in one batch */
    cmf_session *s = new_session(m, NULL, 3);
    float *ref[3] = {NULL, NULL, NULL};
    g_device = CMF_DEVICE_CPU;
    ref[0] = alone(SPEC_A, 0), ref[1] = alone(SPEC_B, 1), ref[2] = alone(NONE, 2);
    float *ref_blend = on_skills_file(blend_ab, 0);
    g_device = CMF_DEVICE_GPU;
    CHECK_OK(cmf_session_seq_set_skill(s, 0, "a"));
    CHECK_OK(cmf_session_seq_set_skill(s, 1, "b"));
    int32_t tok[3 * N_TOK], seq[3 * N_TOK];
    bool want[3 * N_TOK];
    int n = 0;
    for (int i = 0; i < N_TOK; i++)
        for (int q = 0; q < 3; q++) tok[n] = tok_of(q, i), seq[n] = q, want[n] = true, n++;
    float *lg = calloc((size_t)(n * V), sizeof(float));
    cmf_batch b = {n, tok, seq, want};
    CHECK_OK(cmf_session_decode_batch(s, &b, lg));
    double worst = 0;
    for (int t = 0; t < n; t++) {
        double r = harness_max_rel_err(lg + (int64_t)t * V, ref[seq[t]] + (int64_t)(t / 3) * V, (size_t)V);
        worst = r > worst ? r : worst;
    }
    printf("  %s: skills a, b, none in one batch against the CPU: %.3g\n", cmf_session_device(s), worst);
    CHECK(worst <= 1e-4);
    /* a blend on the GPU */
    float *got = calloc((size_t)(N_TOK * V), sizeof(float));
    cmf_session *sb = new_session(m, NULL, 1);
    CHECK_OK(blend_ab(sb));
    run_session(sb, 0, got);
    double wb = worst_rel(got, ref_blend);
    printf("  blend of a, b against the CPU: %.3g\n", wb);
    CHECK(wb <= 1e-4);
    /* a LoRA adapter (lora_equals_merged_weights wrote it) on the GPU against the CPU */
    char ad[700];
    snprintf(ad, sizeof ad, "%s/lora-one/adapter_model.safetensors", harness_tmpdir());
    float *cpu = calloc((size_t)(N_TOK * V), sizeof(float));
    cmf_session *sl = new_session(m, NULL, 1);
    g_device = CMF_DEVICE_CPU;
    cmf_session *sc = new_session(m, NULL, 1);
    g_device = CMF_DEVICE_GPU;
    CHECK_OK(cmf_session_add_lora(sl, ad, 0.5f));
    CHECK_OK(cmf_session_add_lora(sc, ad, 0.5f));
    run_session(sl, 0, got);
    run_session(sc, 0, cpu);
    double wl = worst_rel(got, cpu);
    printf("  LoRA against the CPU: %.3g\n", wl);
    CHECK(wl <= 1e-4);
    cmf_session_free(sl);
    cmf_session_free(sc);
    free(cpu);
    free(got);
    free(lg);
    free(ref_blend);
    for (int i = 0; i < 3; i++) free(ref[i]);
    cmf_session_free(sb);
    cmf_session_free(s);
    cmf_model_free(m);
    g_device = CMF_DEVICE_CPU;
}

int main(void)
{
    RUN(sessions_run_different_skills_at_once);
    RUN(unused_skill_stays_out_of_memory);
    RUN(batch_mixes_skills_per_sequence);
    RUN(blend_is_the_weighted_sum_of_outputs);
    RUN(blend_beside_a_sequence_skill);
    RUN(lora_equals_merged_weights);
    RUN(scheduler_runs_a_skill_per_request);
    RUN(gpu_runs_skills_blends_and_lora);
    return harness_done();
}
