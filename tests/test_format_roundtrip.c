/* test_format_roundtrip.c — write a file with the format writer, open it,
 * and check every envelope field, section, directory record and payload
 * byte against what was written; plus masks/index parsing and the
 * required_features the writer derives from content. */
#include "test_format_util.h"
#include "format/format_internal.h"

TEST(roundtrip_every_field)
{
    const char *path = tf_path("rt.cmf");
    CHECK_OK(tf_write(path, true, true));
    size_t len = 0;
    uint8_t *raw = tf_read(path, &len);
    CHECK(raw != NULL);
    if (!raw) return;
    cmf__file *f = NULL;
    CHECK_OK(cmf__file_open(path, NULL, &f));
    if (!f) {
        free(raw);
        return;
    }
    CHECK_EQ_INT(f->n_shards, 1);
    CHECK_EQ_INT(f->n_tensors, TF_N_TENSORS);
    const cmf__shard *sh = &f->shards[0];
    CHECK_EQ_INT(sh->version, 2);
    CHECK_EQ_U64(sh->features, CMF_FEAT_TENSOR_DIR | CMF_FEAT_BINARY_MASKS);
    CHECK_EQ_U64(f->features, sh->features);
    CHECK_EQ_U64(sh->header.off, 128);
    CHECK_EQ_U64(sh->dir.off, sh->header.off + sh->header.len);
    CHECK_EQ_U64(sh->data.off % 4096, 0);
    CHECK(sh->data.off >= sh->dir.off + sh->dir.len);
    CHECK_EQ_U64(cmf__rd64(raw + 0x10), sh->header.off);
    /* Envelope hashes cover header and directory bytes. */
    CHECK_EQ_U64(sh->header_hash, cmf__hash64(raw + sh->header.off, sh->header.len));
    CHECK_EQ_U64(sh->dir_hash, cmf__hash64(raw + sh->dir.off, sh->dir.len));
    CHECK(sh->header_hash != 0 && sh->dir_hash != 0);
    /* Header: format, version, the caller's keys, section_hashes. */
    CHECK_EQ_STR(json_string_value(json_object_get(f->header, "format")), "cmf");
    CHECK_EQ_INT(json_integer_value(json_object_get(f->header, "version")), 2);
    CHECK(f->arch != NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(f->arch, "arch_name")), "test");
    const json_t *shs = json_object_get(f->header, "section_hashes");
    char hex[17];
    cmf__hash64_hex(cmf__hash64(sh->masks.data, sh->masks.len), hex);
    CHECK_EQ_STR(json_string_value(json_object_get(shs, "masks")), hex);
    cmf__hash64_hex(cmf__hash64(sh->vocab.data, sh->vocab.len), hex);
    CHECK_EQ_STR(json_string_value(json_object_get(shs, "vocab")), hex);
    cmf__hash64_hex(cmf__hash64(sh->index.data, sh->index.len), hex);
    CHECK_EQ_STR(json_string_value(json_object_get(shs, "index")), hex);
    /* Sections. */
    const cmf__section *voc = cmf__file_vocab(f);
    CHECK(voc != NULL);
    if (voc) {
        CHECK_EQ_U64(voc->len, 12);
        CHECK(memcmp(voc->data, "{\"model\":{}}", 12) == 0);
    }
    cmf__buf m = {0};
    tf_masks(&m, 2);
    const cmf__section *ms = cmf__file_masks(f);
    CHECK(ms && ms->len == m.len && memcmp(ms->data, m.data, m.len) == 0);
    cmf__buf_free(&m);
    /* Records and payloads. */
    for (size_t k = 0; k < TF_N_TENSORS; k++) {
        const tf_spec *s = &TF_TENSORS[k];
        const cmf__tensor *t = cmf__file_find(f, s->name);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK(t == &f->tensors[k]); /* directory order kept */
        CHECK_EQ_STR(t->name, s->name);
        CHECK_EQ_INT(t->name_len, strlen(s->name));
        CHECK_EQ_INT(t->dtype, s->dtype);
        CHECK_EQ_INT(t->ndim, s->ndim);
        for (int d = 0; d < 6; d++) CHECK_EQ_U64(t->shape[d], d < s->ndim ? s->shape[d] : 0);
        CHECK_EQ_U64(t->off % 64, 0);
        uint64_t nb;
        void *p = tf_payload((int)k, s->dtype, s->ndim, s->shape, &nb);
        CHECK_EQ_U64(t->nbytes, nb);
        CHECK(memcmp(t->data, p, nb) == 0);
        CHECK(t->data == sh->map.data + sh->data.off + t->off);
        CHECK(memcmp(raw + sh->data.off + t->off, p, nb) == 0);
        CHECK_EQ_U64(t->hash, cmf__hash64(p, nb));
        CHECK_EQ_U64(t->shard, 0);
        CHECK_EQ_U64(t->record_off, sh->dir.off + 16 + k * 56);
        free(p);
    }
    CHECK(cmf__file_find(f, "nope") == NULL);
    CHECK(cmf__file_find(f, "model.norm") == NULL);
    /* Parsed masks. */
    const cmf__masks *mk = cmf__file_mask_set(f);
    CHECK(mk != NULL);
    if (mk) {
        CHECK_EQ_INT(mk->n_masks, 2);
        CHECK_EQ_STR(mk->default_task, "general");
        CHECK_EQ_STR(mk->masks[1].name, "task1");
        CHECK_EQ_INT(mk->masks[1].task_id, 1);
        CHECK_EQ_INT(mk->masks[1].ffn_rows, TF_LAYERS);
        CHECK(cmf__mask_ffn_bit(mk, &mk->masks[1], 1, 1));
        CHECK(!cmf__mask_ffn_bit(mk, &mk->masks[1], 1, 0));
        CHECK(cmf__mask_head_bit(mk, &mk->masks[0], 0, 1));
        CHECK(!cmf__mask_head_bit(mk, &mk->masks[0], 0, 0));
        CHECK(cmf__mask_gate_bit(mk, &mk->masks[0], 1));
        CHECK(cmf__mask_expert_bit(mk, &mk->masks[0], 0, 3)); /* no expert area: unrestricted */
        CHECK_EQ_U64(mk->masks[0].blob_off % 8, 0);
    }
    /* Sparse index. */
    cmf__index_entry *ie = NULL;
    uint32_t ne = 0;
    CHECK_OK(cmf__index_parse(sh->index.data, sh->index.len, sh->index.off, "ix", &ie, &ne));
    CHECK_EQ_INT(ne, 1);
    if (ne == 1) {
        CHECK_EQ_INT(ie[0].layer_idx, 1);
        CHECK_EQ_INT(ie[0].n_groups, 1);
        CHECK_EQ_INT(ie[0].heads[0], 1);
    }
    free(ie);
    cmf__file_free(f);
    free(raw);
}

TEST(roundtrip_no_optional_sections)
{
    const char *path = tf_path("plain.cmf");
    CHECK_OK(tf_write(path, false, false));
    cmf__file *f = NULL;
    CHECK_OK(cmf__file_open(path, NULL, &f));
    if (!f) return;
    CHECK_EQ_U64(f->features, CMF_FEAT_TENSOR_DIR);
    CHECK(cmf__file_masks(f) == NULL);
    CHECK(cmf__file_mask_set(f) == NULL);
    CHECK_EQ_U64(f->shards[0].index.off, 0);
    CHECK(json_object_get(json_object_get(f->header, "section_hashes"), "masks") == NULL);
    cmf__file_free(f);
}

TEST(open_memory_matches_file)
{
    const char *path = tf_path("mem.cmf");
    CHECK_OK(tf_write(path, true, true));
    size_t len = 0;
    uint8_t *raw = tf_read(path, &len);
    cmf__file *f = NULL;
    CHECK_OK(cmf__file_open_memory(raw, len, "mem", NULL, &f));
    if (f) {
        CHECK_EQ_INT(f->n_tensors, TF_N_TENSORS);
        CHECK(cmf__file_find(f, "lm_head.weight") != NULL);
    }
    cmf__file_free(f);
    free(raw);
}

TEST(empty_model)
{
    const char *path = tf_path("empty.cmf");
    cmf__writer *w = NULL;
    CHECK_OK(cmf__writer_open(path, &w));
    CHECK_OK(cmf__writer_finish(w));
    cmf__file *f = NULL;
    CHECK_OK(cmf__file_open(path, NULL, &f));
    if (f) CHECK_EQ_INT(f->n_tensors, 0);
    cmf__file_free(f);
}

/* The writer derives required_features from the content. */
TEST(writer_features_from_content)
{
    const char *path = tf_path("q2f.cmf");
    cmf__writer *w = NULL;
    CHECK_OK(cmf__writer_open(path, &w));
    /* q8_2f is fixed-size; take the size the dtype table wants. */
    uint64_t shape[2] = {4, 32}, nb = 0;
    CHECK_OK(cmf__dtype_nbytes(CMF_DTYPE_Q8_2F, 2, shape, &nb));
    uint8_t *p = calloc(1, nb);
    CHECK_OK(cmf__writer_add_tensor(w, "w", CMF_DTYPE_Q8_2F, 2, shape, p, nb));
    free(p);
    json_t *h = json_pack("{s:[{s:s, s:s}]}", "skills", "id", "sql", "base_dir_hash", "0123456789abcdef");
    CHECK_OK(cmf__writer_set_header(w, h));
    json_decref(h);
    CHECK_OK(cmf__writer_add_features(w, CMF_FEAT_LOOP_MASKS));
    CHECK_OK(cmf__writer_finish(w));
    cmf__file *f = NULL;
    CHECK_ERR(cmf__file_open(path, NULL, &f), CMF_ERR_UNSUPPORTED, "cmf skill apply");
    cmf__open_opts o = cmf__open_opts_default();
    o.allow_skill_file = true;
    CHECK_OK(cmf__file_open(path, &o, &f));
    if (f)
        CHECK_EQ_U64(f->features, CMF_FEAT_TENSOR_DIR | CMF_FEAT_QUANT_2F | CMF_FEAT_LOOP_MASKS | CMF_FEAT_SKILL_FILE);
    cmf__file_free(f);
}

TEST(writer_rejects_bad_tensors)
{
    const char *path = tf_path("bad.cmf");
    cmf__writer *w = NULL;
    CHECK_OK(cmf__writer_open(path, &w));
    uint64_t shape[2] = {2, 3};
    float x[6] = {0};
    CHECK_OK(cmf__writer_add_tensor(w, "a", CMF_DTYPE_F32, 2, shape, x, 24));
    CHECK_ERR(cmf__writer_add_tensor(w, "a", CMF_DTYPE_F32, 2, shape, x, 24), CMF_ERR_DUPLICATE, "'a' added twice");
    CHECK_ERR(cmf__writer_add_tensor(w, "b", CMF_DTYPE_F32, 2, shape, x, 20), CMF_ERR_SIZE, "needs 24");
    CHECK_ERR(cmf__writer_add_tensor(w, "c", 5, 2, shape, x, 24), CMF_ERR_DTYPE, "reserved");
    CHECK_ERR(cmf__writer_add_tensor(w, "d", 42, 2, shape, x, 24), CMF_ERR_DTYPE, "unknown");
    CHECK_ERR(cmf__writer_add_tensor(w, "\xff\xfe", CMF_DTYPE_F32, 2, shape, x, 24), CMF_ERR_PARSE, "UTF-8");
    CHECK_ERR(cmf__writer_add_tensor(w, "", CMF_DTYPE_F32, 2, shape, x, 24), CMF_ERR_ARG, "empty");
    cmf__writer_abort(w);
    FILE *fp = fopen(path, "rb");
    CHECK(fp == NULL); /* abort leaves nothing */
    if (fp) fclose(fp);
}

/* The in-place finish (INSERT_RANGE) and the copying finish give the same
 * bytes; where the filesystem lacks INSERT_RANGE both runs copy. */
TEST(writer_paths_identical)
{
    const char *a = tf_path("inplace.cmf"), *b = tf_path("copied.cmf");
    CHECK_OK(tf_write(a, true, true));
    cmf__fmt_no_insert_range = true;
    CHECK_OK(tf_write(b, true, true));
    cmf__fmt_no_insert_range = false;
    size_t la = 0, lb = 0;
    uint8_t *x = tf_read(a, &la), *y = tf_read(b, &lb);
    CHECK(x && y && la == lb && memcmp(x, y, la) == 0);
    free(x);
    free(y);
    /* No temporaries left beside the outputs. */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q tmp", harness_tmpdir());
    CHECK(system(cmd) != 0);
}

/* With CMF_FORMAT_CORPUS_OUT=DIR, writes the fuzz seed corpus (tiny valid
 * files) to DIR; otherwise a no-op. How fuzz/corpus/fuzz_format_open/ was made. */
TEST(write_seed_corpus)
{
    const char *dir = getenv("CMF_FORMAT_CORPUS_OUT");
    if (!dir) return;
    char p[1024];
    snprintf(p, sizeof p, "%s/sample.cmf", dir);
    CHECK_OK(tf_write(p, true, true));
    snprintf(p, sizeof p, "%s/plain.cmf", dir);
    CHECK_OK(tf_write(p, false, false));
    snprintf(p, sizeof p, "%s/empty.cmf", dir);
    cmf__writer *w = NULL;
    CHECK_OK(cmf__writer_open(p, &w));
    CHECK_OK(cmf__writer_finish(w));
    snprintf(p, sizeof p, "%s/appended.cmf", dir);
    CHECK_OK(tf_write(p, true, false));
    float x[4] = {1, 2, 3, 4};
    cmf__append_tensor t = {.name = "appended", .dtype = CMF_DTYPE_F32, .ndim = 1, .shape = {4}, .data = x, .nbytes = 16};
    CHECK_OK(cmf__file_append(p, &t, 1, NULL));
    /* A three-file shard set: {160,16} {320} {96,80,14} payload bytes at a 400-byte threshold. */
    cmf__append_tensor ts[TF_N_TENSORS];
    void *pl[TF_N_TENSORS];
    for (size_t k = 0; k < TF_N_TENSORS; k++) {
        const tf_spec *sp = &TF_TENSORS[k];
        uint64_t nb;
        pl[k] = tf_payload((int)k, sp->dtype, sp->ndim, sp->shape, &nb);
        ts[k] = (cmf__append_tensor){.name = sp->name, .dtype = sp->dtype, .ndim = sp->ndim, .data = pl[k], .nbytes = nb};
        memcpy(ts[k].shape, sp->shape, sizeof sp->shape);
    }
    json_t *h = tf_header();
    cmf__buf m = {0};
    tf_masks(&m, 1);
    snprintf(p, sizeof p, "%s/set", dir);
    uint32_t count = 0;
    CHECK_OK(cmf__write_sharded(p, h, ts, TF_N_TENSORS, "{}", 2, m.data, m.len, 400, &count));
    CHECK_EQ_INT(count, 3);
    for (size_t k = 0; k < TF_N_TENSORS; k++) free(pl[k]);
    json_decref(h);
    cmf__buf_free(&m);
}

int main(void)
{
    RUN(roundtrip_every_field);
    RUN(roundtrip_no_optional_sections);
    RUN(open_memory_matches_file);
    RUN(empty_model);
    RUN(writer_features_from_content);
    RUN(writer_rejects_bad_tensors);
    RUN(writer_paths_identical);
    RUN(write_seed_corpus);
    return harness_done();
}
