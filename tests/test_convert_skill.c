/* test_convert_skill.c — skill files (spec §9, §9.1): `skill add` from a
 * donor checkpoint (the fixture llama with some tensors perturbed, written
 * here as safetensors), append-only growth (the old bytes keep their hash),
 * refusal of a donor of another base, remove + compact, export -> apply
 * reproducing the donor's own conversion byte for byte, the SKILL_FILE
 * refusal at model open, and the selection block's data (f16 base64,
 * recon-argmin scores, the PCA that builds it). With --write-donor SRC OUT
 * SCALE TENSOR... it only writes a donor folder (the CLI tests use it). */
#include "convert/convert.h"
#include "format/safetensors.h"
#include "convert/skill_add.h"
#include "format/format.h"
#include "format/skills.h"
#include "harness.h"
#include "model/model.h"
#include "util/error.h"
#include "util/file.h"
#include "util/arith.h"
#include "util/half.h"
#include "util/hash.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* ---- donor writer ------------------------------------------------------------- */
static bool copy_file(const char *from, const char *to)
{
    size_t len;
    char *d = harness_read_file(from, &len);
    if (!d) return true; /* optional files may be absent */
    FILE *f = fopen(to, "wb");
    bool ok = f && fwrite(d, 1, len, f) == len;
    if (f && fclose(f)) ok = false;
    free(d);
    return ok;
}

/* Deterministic noise in [-1, 1). */
static float noise(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* The shape a tensor gets in a donor whose FFN is cut to `inter` (0: as is). */
static void out_shape(const cmf__st_tensor *t, int64_t inter, uint64_t *sh, uint64_t *nbytes)
{
    for (int d = 0; d < CMF_ST_MAX_NDIM; d++) sh[d] = d < t->ndim ? t->shape[d] : 0;
    if (inter > 0 && t->ndim == 2 && strstr(t->name, ".mlp.")) {
        if (strstr(t->name, "down_proj")) sh[1] = (uint64_t)inter;
        else sh[0] = (uint64_t)inter;
    }
    *nbytes = t->ndim == 2 ? sh[0] * sh[1] * (uint64_t)cmf__st_dtype_size(t->dtype) : t->nbytes;
}

/* Copies the checkpoint in `src` to `out` (config, tokenizer files, one
 * model.safetensors), adding scale * rms * noise to each tensor named in
 * `perturb`; the dtypes stay those of the source. */
static cmf_status write_donor_opts(const char *src, const char *out, double scale, const char *const *perturb,
                                   size_t n_perturb, uint64_t seed, bool narrow_ffn);
static cmf_status write_donor(const char *src, const char *out, double scale, const char *const *perturb,
                              size_t n_perturb, uint64_t seed)
{
    return write_donor_opts(src, out, scale, perturb, n_perturb, seed, false);
}

/* narrow_ffn: intermediate_size halved in config.json and every dense
 * mlp projection cut to match (a donor of another shape). */
static cmf_status write_donor_opts(const char *src, const char *out, double scale, const char *const *perturb,
                                   size_t n_perturb, uint64_t seed, bool narrow_ffn)
{
    static const char *const META[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                       "generation_config.json"};
    mkdir(out, 0755);
    char a[1024], b[1024];
    if (strlen(src) + 32 > sizeof a || strlen(out) + 32 > sizeof b)
        return cmf__error(CMF_ERR_ARG, "%s: path too long for the test", out);
    for (size_t i = 0; i < sizeof META / sizeof *META; i++) {
        if (snprintf(a, sizeof a, "%s/%s", src, META[i]) >= (int)sizeof a ||
            snprintf(b, sizeof b, "%s/%s", out, META[i]) >= (int)sizeof b)
            return cmf__error(CMF_ERR_ARG, "%s: path too long for the test", out);
        if (!copy_file(a, b)) return cmf__error(CMF_ERR_IO, "%s: cannot write", b);
    }
    int64_t inter = 0;
    if (narrow_ffn) {
        (void)!snprintf(a, sizeof a, "%s/config.json", src);
        json_t *cfg = json_load_file(a, 0, NULL);
        inter = json_integer_value(json_object_get(cfg, "intermediate_size")) / 2;
        json_object_set_new(cfg, "intermediate_size", json_integer(inter));
        (void)!snprintf(b, sizeof b, "%s/config.json", out);
        int bad = !cfg || json_dump_file(cfg, b, JSON_INDENT(2));
        json_decref(cfg);
        if (bad) return cmf__error(CMF_ERR_IO, "%s: cannot write", b);
    }
    cmf__st_set *set = NULL;
    cmf_status st = cmf__st_open_dir(src, &set);
    if (st) return st;
    json_t *hdr = json_object();
    uint64_t off = 0;
    for (size_t i = 0; i < set->n_tensors; i++) {
        const cmf__st_tensor *t = &set->tensors[i];
        uint64_t sh[CMF_ST_MAX_NDIM], nb;
        out_shape(t, inter, sh, &nb);
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer((json_int_t)sh[d]));
        json_object_set_new(hdr, t->name,
                            json_pack("{s:s, s:o, s:[I, I]}", "dtype", cmf__st_dtype_name(t->dtype), "shape", shape,
                                      "data_offsets", (json_int_t)off, (json_int_t)(off + nb)));
        off += nb;
    }
    char *h = json_dumps(hdr, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(hdr);
    size_t hl = strlen(h), pad = (8 - hl % 8) % 8;
    snprintf(b, sizeof b, "%s/model.safetensors", out);
    FILE *f = fopen(b, "wb");
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)(hl + pad) >> (8 * i));
    bool ok = f && fwrite(len8, 1, 8, f) == 8 && fwrite(h, 1, hl, f) == hl && fwrite("        ", 1, pad, f) == pad;
    free(h);
    uint64_t rng = seed;
    for (size_t i = 0; ok && i < set->n_tensors; i++) {
        const cmf__st_tensor *t = &set->tensors[i];
        bool hit = false;
        for (size_t k = 0; k < n_perturb; k++) hit |= !strcmp(perturb[k], t->name);
        uint8_t *d = malloc(t->nbytes ? t->nbytes : 1);
        if (!d) {
            ok = false;
            break;
        }
        memcpy(d, t->data, t->nbytes);
        if (hit) {
            double ss = 0;
            for (uint64_t e = 0; e < t->numel; e++) ss += (double)cmf__st_get(t, e) * cmf__st_get(t, e);
            float amp = (float)(scale * sqrt(ss / (double)(t->numel ? t->numel : 1)));
            for (uint64_t e = 0; e < t->numel; e++) {
                float v = cmf__st_get(t, e) + amp * noise(&rng);
                if (t->dtype == CMF_ST_F32) cmf__wr32(d + 4 * e, cmf__f32_bits(v));
                else if (t->dtype == CMF_ST_BF16) cmf__wr16(d + 2 * e, cmf__f32_to_bf16(v));
                else cmf__wr16(d + 2 * e, cmf__f32_to_f16(v));
            }
        }
        uint64_t sh[CMF_ST_MAX_NDIM], nb, es = (uint64_t)cmf__st_dtype_size(t->dtype);
        out_shape(t, inter, sh, &nb);
        if (nb != t->nbytes) /* keep the first sh[0] rows and sh[1] columns */
            for (uint64_t r = 0; r < sh[0]; r++)
                memmove(d + r * sh[1] * es, d + r * t->shape[1] * es, (size_t)(sh[1] * es));
        ok = fwrite(d, 1, nb, f) == nb;
        free(d);
    }
    if (f && fclose(f)) ok = false;
    cmf__st_free(set);
    return ok ? CMF_OK : cmf__error(CMF_ERR_IO, "%s: cannot write", b);
}

/* ---- helpers ------------------------------------------------------------------ */
static const char *const PERTURB[] = {"model.layers.1.mlp.down_proj.weight", "model.layers.2.self_attn.q_proj.weight"};

static char *tmp_path(const char *name)
{
    static char buf[8][1024];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 1024, "%s/%s", harness_tmpdir(), name);
    return p;
}

static uint64_t hash_range(const char *path, uint64_t from, uint64_t to)
{
    size_t len;
    char *d = harness_read_file(path, &len);
    uint64_t h = d && to <= len ? cmf__hash64(d + from, (size_t)(to - from)) : 0;
    free(d);
    return h;
}

static uint64_t file_size(const char *path)
{
    struct stat s;
    return stat(path, &s) ? 0 : (uint64_t)s.st_size;
}

static bool fixture_llama(char *dir, size_t cap)
{
    snprintf(dir, cap, "%s", harness_fixture_path("hf-models/llama"));
    char cfg[1100];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    struct stat s;
    return stat(cfg, &s) == 0;
}

/* Converts `dir` at quant q to out. */
static cmf_status convert(const char *dir, const char *out, int q)
{
    cmf__convert_opts o = cmf__convert_opts_default();
    o.quant = q;
    return cmf__convert_hf(dir, out, &o, NULL);
}

/* ---- tests -------------------------------------------------------------------- */
TEST(add_export_apply)
{
    char src[1024];
    if (!fixture_llama(src, sizeof src)) SKIP("hf-models/llama fixture absent");
    const char *donor = tmp_path("donor"), *base = tmp_path("base.cmf"), *spec = tmp_path("specialist.cmf");
    CHECK_OK(write_donor(src, donor, 0.05, PERTURB, 2, 7));
    CHECK_OK(convert(src, base, CMF_DTYPE_Q8_ROW));
    CHECK_OK(convert(donor, spec, CMF_DTYPE_Q8_ROW));
    uint64_t old_size = file_size(base), old_body = hash_range(base, CMF_ENVELOPE_SIZE, old_size);
    cmf__file *f = NULL;
    CHECK_OK(cmf__file_open(base, NULL, &f));
    uint64_t base_dir_hash = f ? f->shards[0].dir_hash : 0;
    cmf__file_free(f);

    cmf__skill_add_opts o = cmf__skill_add_opts_default();
    o.id = "sk";
    o.name = "test skill";
    cmf__skill_add_result r;
    CHECK_OK(cmf__skill_add(base, donor, &o, &r));
    CHECK_EQ_U64(r.n_kept, 2);
    CHECK(r.n_compared > 20);
    uint64_t kept_bytes = r.bytes;
    /* append-only: every old byte but the envelope is where it was */
    CHECK(file_size(base) > old_size);
    CHECK_EQ_U64(hash_range(base, CMF_ENVELOPE_SIZE, old_size), old_body);
    /* a second add of the same id is refused, the file untouched */
    uint64_t grown = file_size(base), grown_hash = hash_range(base, 0, grown);
    CHECK_ERR(cmf__skill_add(base, donor, &o, &r), CMF_ERR_DUPLICATE, "already exists");
    CHECK_EQ_U64(hash_range(base, 0, grown), grown_hash);

    CHECK_OK(cmf__file_open(base, NULL, &f));
    if (!f) return;
    CHECK_OK(cmf__file_verify(f, NULL, NULL, NULL, NULL));
    CHECK(cmf__file_find(f, "skill.sk.model.layers.1.mlp.down_proj.weight") != NULL);
    CHECK(cmf__file_find(f, "skill.sk.model.layers.2.self_attn.q_proj.weight") != NULL);
    json_t *rec = cmf__skills_find(f->header, "sk", NULL);
    CHECK(rec != NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(rec, "name")), "test skill");
    CHECK_EQ_INT(json_array_size(json_object_get(rec, "layers")), 2);
    CHECK_EQ_INT(json_integer_value(json_array_get(json_object_get(rec, "layers"), 0)), 1);
    uint64_t bh = 0;
    CHECK_OK(cmf__file_backbone_dir_hash(f, &bh));
    CHECK_EQ_U64(bh, base_dir_hash); /* the backbone's directory hash survives the growth */
    cmf__file_free(f);

    /* export -> apply == the donor converted on its own, byte for byte */
    const char *skf = tmp_path("sk.cmf"), *applied = tmp_path("applied.cmf");
    uint64_t n = 0;
    bool forced = true;
    bool unv = false;
    CHECK_OK(cmf__skill_export(base, "sk", skf, false, &n, &unv));
    CHECK_EQ_U64(n, 2);
    CHECK_OK(cmf__skill_apply(base, skf, applied, false, &n, &forced, &unv));
    CHECK_EQ_U64(n, 2);
    CHECK(!forced);
    cmf__file *a = NULL, *s = NULL;
    CHECK_OK(cmf__file_open(applied, NULL, &a));
    CHECK_OK(cmf__file_open(spec, NULL, &s));
    if (a && s) {
        CHECK_EQ_U64(a->n_tensors, s->n_tensors);
        for (uint64_t i = 0; i < a->n_tensors && i < s->n_tensors; i++) {
            const cmf__tensor *x = &a->tensors[i], *y = cmf__file_find(s, x->name);
            CHECK(y != NULL);
            if (!y) continue;
            CHECK_EQ_INT(x->dtype, y->dtype);
            CHECK_EQ_U64(x->nbytes, y->nbytes);
            CHECK(x->nbytes == y->nbytes && !memcmp(x->data, y->data, x->nbytes));
        }
        CHECK(json_object_get(a->header, "skills") == NULL);
    }
    cmf__file_free(a);
    cmf__file_free(s);

    /* the skill file is refused as a model, naming the fix */
    cmf__model *m = NULL;
    CHECK_ERR(cmf__model_open(skf, &m), CMF_ERR_UNSUPPORTED, "cmf skill apply");
    cmf__open_opts oo = cmf__open_opts_default();
    oo.allow_skill_file = true;
    CHECK_OK(cmf__file_open(skf, &oo, &f));
    if (f) {
        CHECK(f->features & CMF_FEAT_SKILL_FILE);
        char hex[17];
        cmf__hash64_hex(base_dir_hash, hex);
        CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(json_object_get(f->header, "skills"), 0),
                                                       "base_dir_hash")),
                     hex);
    }
    cmf__file_free(f);

    /* another base is refused unless forced */
    const char *other = tmp_path("other.cmf"), *forced_out = tmp_path("forced.cmf");
    CHECK_OK(convert(src, other, CMF_DTYPE_F16));
    CHECK_ERR(cmf__skill_apply(other, skf, forced_out, false, &n, &forced, &unv), CMF_ERR_HASH, "was cut against base");
    CHECK(file_size(forced_out) == 0);
    CHECK_OK(cmf__skill_apply(other, skf, forced_out, true, &n, &forced, &unv));
    CHECK(forced);

    /* remove: registry and directory entries gone in place, compact reclaims */
    uint64_t dropped = 0, bytes = 0;
    uint64_t before = file_size(base);
    CHECK_OK(cmf__skill_remove(base, "sk", &dropped, &bytes));
    CHECK_EQ_U64(dropped, 2);
    CHECK_EQ_U64(bytes, kept_bytes);
    CHECK_ERR(cmf__skill_remove(base, "sk", &dropped, &bytes), CMF_ERR_NOT_FOUND, "not in this file");
    CHECK_OK(cmf__file_open(base, NULL, &f));
    if (f) {
        CHECK(cmf__file_find(f, "skill.sk.model.layers.1.mlp.down_proj.weight") == NULL);
        CHECK(cmf__skills_find(f->header, "sk", NULL) == NULL);
        CHECK_OK(cmf__file_verify(f, NULL, NULL, NULL, NULL));
    }
    cmf__file_free(f);
    const char *compacted = tmp_path("compacted.cmf");
    CHECK_OK(cmf__file_compact(base, compacted));
    CHECK(file_size(compacted) + bytes <= before);
    CHECK(file_size(compacted) <= old_size + 4096);
}

TEST(refusals)
{
    char src[1024];
    if (!fixture_llama(src, sizeof src)) SKIP("hf-models/llama fixture absent");
    const char *base = tmp_path("r_base.cmf");
    CHECK_OK(convert(src, base, CMF_DTYPE_Q8_ROW));
    uint64_t size = file_size(base), h = hash_range(base, 0, size);
    cmf__skill_add_opts o = cmf__skill_add_opts_default();
    o.id = "x";
    cmf__skill_add_result r;
    /* another architecture (qwen2 of the same sizes: q/k/v biases): the
     * first tensor in directory order that does not match is named */
    const char *qwen = harness_fixture_path("hf-models/qwen2");
    CHECK_ERR(cmf__skill_add(base, qwen, &o, &r), CMF_ERR_CONFIG,
              "tensor 'model.layers.0.self_attn.k_proj.bias' is not in");
    /* same tensor names and shapes, another architecture: the arch field */
    const char *gemma = harness_fixture_path("hf-models/gemma");
    CHECK_ERR(cmf__skill_add(base, gemma, &o, &r), CMF_ERR_CONFIG, "arch.arch_name is \"gemma\", in");
    /* other shapes: the FFN halved; the first FFN tensor is named */
    const char *narrow = tmp_path("r_narrow");
    CHECK_OK(write_donor_opts(src, narrow, 0, NULL, 0, 1, true));
    CHECK_ERR(cmf__skill_add(base, narrow, &o, &r), CMF_ERR_CONFIG,
              "tensor 'model.layers.0.mlp.down_proj.weight' has shape [96, 64]");
    /* a donor equal to the backbone: nothing to keep */
    CHECK_ERR(cmf__skill_add(base, src, &o, &r), CMF_ERR_NOT_FOUND, "no tensor differs");
    /* bad ids */
    o.id = "a.b";
    CHECK_ERR(cmf__skill_add(base, src, &o, &r), CMF_ERR_ARG, "skill id 'a.b'");
    o.id = "";
    CHECK_ERR(cmf__skill_add(base, src, &o, &r), CMF_ERR_ARG, "skill id ''");
    CHECK_EQ_U64(file_size(base), size);
    CHECK_EQ_U64(hash_range(base, 0, size), h);
}

/* A write that fails mid-append (the file size limit, EFBIG) leaves the
 * file byte for byte as it was. */
TEST(failed_append_leaves_file)
{
    char src[1024];
    if (!fixture_llama(src, sizeof src)) SKIP("hf-models/llama fixture absent");
    const char *base = tmp_path("f_base.cmf"), *donor = tmp_path("f_donor");
    CHECK_OK(convert(src, base, CMF_DTYPE_F32));
    CHECK_OK(write_donor(src, donor, 0.05, PERTURB, 2, 11));
    uint64_t size = file_size(base), h = hash_range(base, 0, size);
    struct rlimit old, lim;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = (rlim_t)(size + 20000); /* the two tensors need ~100 KB */
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    cmf__skill_add_opts o = cmf__skill_add_opts_default();
    o.id = "f";
    cmf__skill_add_result r;
    cmf_status st = cmf__skill_add(base, donor, &o, &r);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK_EQ_INT(st, CMF_ERR_IO);
    CHECK_EQ_U64(file_size(base), size);
    CHECK_EQ_U64(hash_range(base, 0, size), h);
    CHECK_OK(cmf__skill_add(base, donor, &o, &r)); /* and it still works */
}

/* A donor with a tensor removed is refused naming it. */
TEST(donor_missing_tensor)
{
    char src[1024];
    if (!fixture_llama(src, sizeof src)) SKIP("hf-models/llama fixture absent");
    const char *base = tmp_path("m_base.cmf"), *donor = tmp_path("m_donor");
    CHECK_OK(convert(src, base, CMF_DTYPE_F32));
    CHECK_OK(write_donor(src, donor, 0.05, PERTURB, 2, 9));
    /* the backbone gets an extra tensor the donor cannot have */
    cmf__append_tensor extra = {.name = "model.extra.weight", .dtype = CMF_DTYPE_F32, .ndim = 1, .shape = {4}};
    float zeros[4] = {0, 0, 0, 0};
    extra.data = zeros;
    extra.nbytes = sizeof zeros;
    CHECK_OK(cmf__file_append(base, &extra, 1, NULL));
    cmf__skill_add_opts o = cmf__skill_add_opts_default();
    o.id = "m";
    cmf__skill_add_result r;
    CHECK_ERR(cmf__skill_add(base, donor, &o, &r), CMF_ERR_CONFIG, "no tensor 'model.extra.weight'");
}

TEST(selection_data)
{
    /* base64 of f16 round trip, and the decoder's checks */
    float v[5] = {0.5f, -1.25f, 3.0f, 0.0f, 65504.0f}, w[5];
    char *b = cmf__f16_base64_encode(v, 5);
    CHECK(b != NULL);
    size_t nf = 0;
    CHECK_OK(cmf__f16_base64_decode(b, w, 5, &nf, "t"));
    CHECK_EQ_U64(nf, 5);
    for (int i = 0; i < 5; i++) CHECK_NEAR(w[i], v[i], 0);
    CHECK_ERR(cmf__f16_base64_decode(b, w, 4, NULL, "t"), CMF_ERR_SIZE, "5 f16 values, expected 4");
    free(b);
    CHECK_ERR(cmf__f16_base64_decode("abc", w, 1, NULL, "t"), CMF_ERR_PARSE, "multiple of 4");
    CHECK_ERR(cmf__f16_base64_decode("ab*d", w, 1, NULL, "t"), CMF_ERR_PARSE, "not base64");
    CHECK_ERR(cmf__f16_base64_decode("AA==", w, 1, NULL, "t"), CMF_ERR_PARSE, "whole number");

    /* two clusters in 8-D, each spread along its own 2-D plane around its
     * own centre: each cluster's held-out points have the smaller E under
     * its own block */
    enum { D = 8, N = 12 };
    float pa[N * D], pb[N * D];
    uint64_t rng = 3;
    for (int r = 0; r < N; r++)
        for (int i = 0; i < D; i++) {
            pa[r * D + i] = (i == 0 ? 4.0f : 0.0f) + (i == 1 || i == 2 ? 2.0f * noise(&rng) : 0.02f * noise(&rng));
            pb[r * D + i] = (i == 7 ? 4.0f : 0.0f) + (i == 5 || i == 6 ? 2.0f * noise(&rng) : 0.02f * noise(&rng));
        }
    json_t *sa = NULL, *sb = NULL;
    CHECK_OK(cmf__skill_selection_build(pa, N - 2, D, 2, 1, &sa));
    CHECK_OK(cmf__skill_selection_build(pb, N - 2, D, 2, 1, &sb));
    CHECK_EQ_INT(json_integer_value(json_object_get(sa, "rank")), 2);
    cmf__skill_selection a, s2;
    CHECK_OK(cmf__skill_selection_parse(sa, D, 4, "a", &a));
    CHECK_OK(cmf__skill_selection_parse(sb, D, 4, "b", &s2));
    for (int r = N - 2; r < N; r++) {
        double ea = cmf__skill_selection_error(&a, pa + r * D), eb = cmf__skill_selection_error(&s2, pa + r * D);
        CHECK(ea < 0.01 && eb > 0.5);
        ea = cmf__skill_selection_error(&a, pb + r * D);
        eb = cmf__skill_selection_error(&s2, pb + r * D);
        CHECK(eb < 0.01 && ea > 0.5);
    }
    /* the basis is orthonormal (to f16 precision) */
    for (uint32_t j = 0; j < a.rank; j++)
        for (uint32_t k = 0; k < a.rank; k++) {
            double d = 0;
            for (int i = 0; i < D; i++) d += (double)a.basis[j * D + i] * a.basis[k * D + i];
            CHECK_NEAR(d, j == k ? 1.0 : 0.0, 2e-3);
        }
    /* a wrong dimension and a wrong metric are refused */
    cmf__skill_selection bad;
    CHECK_ERR(cmf__skill_selection_parse(sa, D + 1, 4, "a", &bad), CMF_ERR_SIZE, "expected d x k");
    json_object_set_new(sa, "metric", json_string("cos"));
    CHECK_ERR(cmf__skill_selection_parse(sa, D, 4, "a", &bad), CMF_ERR_PARSE, "selection.metric");
    json_object_set_new(sa, "metric", json_string("mse"));
    json_object_set_new(sa, "phi_layer", json_integer(9));
    CHECK_ERR(cmf__skill_selection_parse(sa, D, 4, "a", &bad), CMF_ERR_PARSE, "selection.phi_layer");
    cmf__skill_selection_free(&a);
    cmf__skill_selection_free(&s2);
    json_decref(sa);
    json_decref(sb);
    float same[3 * D] = {0};
    json_t *none = NULL;
    CHECK_ERR(cmf__skill_selection_build(same, 3, D, 2, 0, &none), CMF_ERR_ARG, "all equal");
    /* blend weights: softmax(-E/T) over the finite scores */
    double E3[3] = {0.1, 0.3, INFINITY}, w3[3];
    CHECK_OK(cmf__skill_blend_weights(E3, 3, 0.1, w3));
    CHECK_NEAR(w3[0], 1.0 / (1.0 + exp(-2.0)), 1e-12);
    CHECK_NEAR(w3[1], exp(-2.0) / (1.0 + exp(-2.0)), 1e-12);
    CHECK_NEAR(w3[2], 0.0, 0);
    CHECK_ERR(cmf__skill_blend_weights(E3, 3, 0.0, w3), CMF_ERR_ARG, "blend temperature");
    CHECK(!cmf__skill_id_ok("a.b") && !cmf__skill_id_ok("") && cmf__skill_id_ok("sql-2_x"));
    CHECK_EQ_INT(cmf__skill_layer_of("model.layers.12.mlp.up_proj.weight"), 12);
    CHECK_EQ_INT(cmf__skill_layer_of("lm_head.weight"), -1);
}

int main(int argc, char **argv)
{
    if (argc >= 5 && !strcmp(argv[1], "--write-donor")) {
        cmf_status st = write_donor(argv[2], argv[3], atof(argv[4]), (const char *const *)argv + 5,
                                    (size_t)(argc - 5), (uint64_t)argc * 7919u);
        if (st) fprintf(stderr, "%s\n", cmf_last_error());
        return st ? 1 : 0;
    }
    RUN(add_export_apply);
    RUN(refusals);
    RUN(donor_missing_tensor);
    RUN(failed_append_leaves_file);
    RUN(selection_data);
    return harness_done();
}
