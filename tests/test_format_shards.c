/* test_format_shards.c — shard sets (§10): the greedy splitter writes
 * {base}-NNNNN-of-NNNNN.cmf files that are each valid alone; opening any
 * name opens the whole set with merged directories; missing siblings,
 * count mismatches, misnamed shards and cross-shard duplicates fail. */
#include "test_format_util.h"

#include <unistd.h>

typedef struct sample {
    cmf__append_tensor t[TF_N_TENSORS];
    void *payload[TF_N_TENSORS];
} sample;

static void sample_make(sample *s)
{
    for (size_t k = 0; k < TF_N_TENSORS; k++) {
        const tf_spec *sp = &TF_TENSORS[k];
        uint64_t nb;
        s->payload[k] = tf_payload((int)k, sp->dtype, sp->ndim, sp->shape, &nb);
        s->t[k] = (cmf__append_tensor){.name = sp->name, .dtype = sp->dtype, .ndim = sp->ndim, .data = s->payload[k],
                                       .nbytes = nb};
        memcpy(s->t[k].shape, sp->shape, sizeof sp->shape);
    }
}

static void sample_free(sample *s)
{
    for (size_t k = 0; k < TF_N_TENSORS; k++) free(s->payload[k]);
}

static const char *shard_name(const char *base, int no, int count)
{
    static char buf[4][600];
    static int slot;
    char *p = buf[slot++ % 4];
    snprintf(p, 600, "%s-%05d-of-%05d.cmf", base, no, count);
    return p;
}

static void copy_file(const char *from, const char *to)
{
    size_t n = 0;
    uint8_t *b = tf_read(from, &n);
    if (b) tf_write_bytes(to, b, n);
    free(b);
}

TEST(name_parse)
{
    char *base = NULL;
    uint32_t no = 0, count = 0;
    CHECK(cmf__shard_name_parse("dir/m-00002-of-00005.cmf", &base, &no, &count));
    CHECK_EQ_STR(base, "dir/m");
    CHECK(no == 2 && count == 5);
    free(base);
    CHECK(!cmf__shard_name_parse("m-00006-of-00005.cmf", NULL, &no, &count));
    CHECK(!cmf__shard_name_parse("m-00000-of-00005.cmf", NULL, &no, &count));
    CHECK(!cmf__shard_name_parse("m-0002-of-00005.cmf", NULL, &no, &count));
    CHECK(!cmf__shard_name_parse("m.cmf", NULL, &no, &count));
    CHECK(!cmf__shard_name_parse("-00001-of-00001.cmf", NULL, &no, &count));
}

TEST(split_open_merge)
{
    sample s;
    sample_make(&s);
    char base[512];
    snprintf(base, sizeof base, "%s/model", harness_tmpdir());
    json_t *h = tf_header();
    json_object_set_new(h, "skills", json_pack("[{s:s}]", "id", "sql"));
    cmf__buf m = {0};
    tf_masks(&m, 1);
    uint32_t count = 0;
    /* 200-byte threshold: payloads are 160, 16, 320, 96, 80, 14 bytes. */
    CHECK_OK(cmf__write_sharded(base, h, s.t, TF_N_TENSORS, "{}", 2, m.data, m.len, 200, &count));
    CHECK_EQ_INT(count, 3); /* {160,16} {320} {96,80,14} */
    for (int no = 1; no <= (int)count; no++) {
        cmf__file *f = NULL;
        CHECK_OK(cmf__file_open(shard_name(base, no, (int)count), NULL, &f));
        if (!f) continue;
        /* Any name opens the whole set, normalised to shard 1. */
        CHECK_EQ_INT(f->n_shards, count);
        CHECK_EQ_INT(f->n_tensors, TF_N_TENSORS);
        CHECK_EQ_STR(f->shards[0].path, shard_name(base, 1, (int)count));
        for (size_t k = 0; k < TF_N_TENSORS; k++) {
            const cmf__tensor *t = cmf__file_find(f, TF_TENSORS[k].name);
            CHECK(t && t->nbytes == s.t[k].nbytes && memcmp(t->data, s.payload[k], t->nbytes) == 0);
        }
        CHECK_EQ_INT(cmf__file_find(f, "model.embed_tokens.weight")->shard, 0);
        CHECK_EQ_INT(cmf__file_find(f, "model.layers.0.mlp.up_proj.weight")->shard, 1);
        CHECK_EQ_INT(cmf__file_find(f, "lm_head.weight")->shard, 2);
        CHECK_EQ_INT(cmf__file_find(f, "model.norm.weight")->shard, 2);
        /* Extras only in shard 1. */
        CHECK(cmf__file_vocab(f) != NULL && cmf__file_mask_set(f) != NULL);
        CHECK(json_object_get(f->header, "skills") != NULL);
        CHECK(json_is_object(json_object_get(f->header, "tokenizer_config")));
        for (uint32_t i = 1; i < count; i++) {
            const cmf__shard *sh = &f->shards[i];
            CHECK(sh->masks.off == 0 && sh->vocab.off == 0 && sh->index.off == 0);
            CHECK(json_is_null(json_object_get(sh->header_json, "tokenizer_config")));
            CHECK(json_object_get(sh->header_json, "skills") == NULL);
            CHECK_EQ_INT(sh->shard_no, i + 1);
        }
        CHECK_EQ_U64(f->features, CMF_FEAT_TENSOR_DIR | CMF_FEAT_BINARY_MASKS);
        CHECK_OK(cmf__file_verify(f, NULL, NULL, NULL, NULL));
        cmf__file_free(f);
    }
    /* Each shard alone. */
    cmf__open_opts o = cmf__open_opts_default();
    o.single_shard = true;
    cmf__file *f = NULL;
    CHECK_OK(cmf__file_open(shard_name(base, 3, 3), &o, &f));
    if (f) {
        CHECK_EQ_INT(f->n_shards, 1);
        CHECK_EQ_INT(f->n_tensors, 3);
        CHECK(cmf__file_find(f, "lm_head.weight") != NULL);
        CHECK_OK(cmf__file_verify(f, NULL, NULL, NULL, NULL));
    }
    cmf__file_free(f);

    /* A shard renamed out of the pattern. */
    const char *plain = tf_path("plain-shard.cmf");
    copy_file(shard_name(base, 1, 3), plain);
    CHECK_ERR(cmf__file_open(plain, NULL, &f), CMF_ERR_SHARD, "shard 1 of 3");
    CHECK_OK(cmf__file_open(plain, &o, &f));
    cmf__file_free(f);

    /* Count mismatch: the set copied under an -of-00004 name. */
    char base2[512];
    snprintf(base2, sizeof base2, "%s/five", harness_tmpdir());
    for (int no = 1; no <= 3; no++) copy_file(shard_name(base, no, 3), shard_name(base2, no, 4));
    CHECK_ERR(cmf__file_open(shard_name(base2, 2, 4), NULL, &f), CMF_ERR_SHARD, "count mismatch");

    /* A missing sibling. */
    unlink(shard_name(base, 2, 3));
    CHECK_ERR(cmf__file_open(shard_name(base, 3, 3), NULL, &f), CMF_ERR_SHARD, "shard 2 of 3 is missing");
    CHECK(f == NULL);

    /* Duplicates across the set are refused by the splitter. */
    s.t[3].name = s.t[0].name;
    CHECK_ERR(cmf__write_sharded(base, h, s.t, TF_N_TENSORS, NULL, 0, NULL, 0, 200, &count), CMF_ERR_DUPLICATE,
              "given twice");
    json_decref(h);
    cmf__buf_free(&m);
    sample_free(&s);
}

TEST(duplicate_across_shards)
{
    /* Two hand-made shards carrying the same tensor name. */
    char base[512];
    snprintf(base, sizeof base, "%s/dup", harness_tmpdir());
    float x[4] = {1, 2, 3, 4};
    uint64_t shape[1] = {4};
    for (int no = 1; no <= 2; no++) {
        cmf__writer *w = NULL;
        CHECK_OK(cmf__writer_open(shard_name(base, no, 2), &w));
        json_t *h = json_pack("{s:{s:i, s:i}}", "shard", "no", no, "count", 2);
        CHECK_OK(cmf__writer_set_header(w, h));
        json_decref(h);
        CHECK_OK(cmf__writer_add_tensor(w, "same", CMF_DTYPE_F32, 1, shape, x, 16));
        CHECK_OK(cmf__writer_finish(w));
    }
    cmf__file *f = NULL;
    CHECK_ERR(cmf__file_open(shard_name(base, 1, 2), NULL, &f), CMF_ERR_DUPLICATE, "duplicate name");
    /* A malformed shard block. */
    cmf__writer *w = NULL;
    CHECK_OK(cmf__writer_open(shard_name(base, 1, 2), &w));
    json_t *h = json_pack("{s:{s:i, s:i}}", "shard", "no", 3, "count", 2);
    CHECK_OK(cmf__writer_set_header(w, h));
    json_decref(h);
    CHECK_OK(cmf__writer_finish(w));
    CHECK_ERR(cmf__file_open(shard_name(base, 1, 2), NULL, &f), CMF_ERR_PARSE, "\"shard\" must be");
}

int main(void)
{
    RUN(name_parse);
    RUN(split_open_merge);
    RUN(duplicate_across_shards);
    return harness_done();
}
