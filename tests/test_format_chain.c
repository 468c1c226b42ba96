/* test_format_chain.c — the integrity chain (§8, §8.1), the detached
 * signature (§8.2), append-only growth and compaction (§9). Includes the
 * documented blind spot of hash64: two swapped 8-byte words keep the hash
 * (verify passes) while the signature's SHA-256 catches the change. */
#include "test_format_util.h"
#include "format/format_internal.h"

static uint8_t *load(const char *path, size_t *len)
{
    CHECK_OK(tf_write(path, true, true));
    return tf_read(path, len);
}

/* Verify a byte image; returns status, problems in *out (caller frees). */
static cmf_status verify_bytes(uint8_t *b, size_t n, const char *name, cmf__verify_problem **out, size_t *n_out)
{
    const char *p = tf_path(name);
    tf_write_bytes(p, b, n);
    cmf__file *f = NULL;
    cmf__open_opts o = cmf__open_opts_default();
    o.single_shard = true;
    cmf_status st = cmf__file_open(p, &o, &f);
    if (st != CMF_OK) return st;
    st = cmf__file_verify(f, NULL, NULL, out, n_out);
    cmf__file_free(f);
    return st;
}

static bool listed(const cmf__verify_problem *v, size_t n, const char *needle)
{
    for (size_t i = 0; i < n; i++)
        if (strstr(v[i].what, needle)) return true;
    return false;
}

static void progress_count(void *ctx, uint64_t done, uint64_t total)
{
    uint64_t *last = ctx;
    CHECK(done <= total);
    CHECK(done >= *last);
    *last = done;
}

TEST(verify_intact)
{
    const char *p = tf_path("v.cmf");
    CHECK_OK(tf_write(p, true, true));
    cmf__file *f = NULL;
    CHECK_OK(cmf__file_open(p, NULL, &f));
    if (!f) return;
    cmf__verify_problem *v = NULL;
    size_t n = 99;
    uint64_t last = 0;
    CHECK_OK(cmf__file_verify(f, progress_count, &last, &v, &n));
    CHECK_EQ_INT(n, 0);
    uint64_t total = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) total += f->tensors[i].nbytes;
    CHECK_EQ_U64(last, total);
    free(v);
    cmf__file_free(f);
}

TEST(verify_names_every_break)
{
    size_t len = 0;
    uint8_t *raw = load(tf_path("v0.cmf"), &len);
    if (!raw) return;
    uint64_t data_off = cmf__rd64(raw + 0x30), dir_off = cmf__rd64(raw + 0x20), hdr_off = cmf__rd64(raw + 0x10);
    uint64_t rec2 = dir_off + 16 + 2 * 56, rec4 = dir_off + 16 + 4 * 56;
    cmf__verify_problem *v = NULL;
    size_t n = 0;

    /* One byte in a tensor payload. */
    uint8_t *b = malloc(len);
    memcpy(b, raw, len);
    b[data_off + cmf__rd64(raw + rec2 + 32) + 5] ^= 0x01;
    CHECK_ERR(verify_bytes(b, len, "t.cmf", &v, &n), CMF_ERR_HASH, "1 integrity problem");
    CHECK_EQ_INT(n, 1);
    CHECK(listed(v, n, "tensor 'model.layers.0.mlp.up_proj.weight'"));
    free(v);

    /* Two tensors at once: both listed. */
    b[data_off + cmf__rd64(raw + rec4 + 32)] ^= 0x80;
    CHECK_ERR(verify_bytes(b, len, "t2.cmf", &v, &n), CMF_ERR_HASH, "2 integrity problems");
    CHECK(listed(v, n, "'model.layers.0.mlp.up_proj.weight'") && listed(v, n, "'lm_head.weight'"));
    free(v);

    /* One byte of the header JSON that keeps it valid JSON ("test" -> "tesu"). */
    memcpy(b, raw, len);
    char *at = memmem(b + hdr_off, cmf__rd64(raw + 0x18), "\"test\"", 6);
    CHECK(at != NULL);
    if (at) at[4] = 'u';
    CHECK_ERR(verify_bytes(b, len, "h.cmf", &v, &n), CMF_ERR_HASH, "header JSON");
    CHECK(listed(v, n, "header JSON at 0x80"));
    free(v);

    /* One byte of the directory: a stored tensor hash. */
    memcpy(b, raw, len);
    b[rec2 + 48] ^= 0x10;
    CHECK_ERR(verify_bytes(b, len, "d.cmf", &v, &n), CMF_ERR_HASH, "directory");
    CHECK(listed(v, n, "directory at"));
    CHECK(listed(v, n, "'model.layers.0.mlp.up_proj.weight'"));
    free(v);

    /* The masks, vocab and index sections against section_hashes. */
    static const unsigned fields[] = {0x40, 0x50, 0x60};
    static const char *names[] = {"masks section", "vocab section", "index section"};
    for (int i = 0; i < 3; i++) {
        memcpy(b, raw, len);
        uint64_t so = cmf__rd64(raw + fields[i]), sl = cmf__rd64(raw + fields[i] + 8);
        /* A byte that keeps each section parseable: the last blob byte of
         * masks (gates, within 2 layers), a vocab char, an index head id. */
        if (i == 0) b[so + sl - 1] ^= 0x01;
        if (i == 1) b[so + 2] ^= 0x01;
        if (i == 2) b[so + 26] ^= 0x01;
        CHECK_ERR(verify_bytes(b, len, "s.cmf", &v, &n), CMF_ERR_HASH, names[i]);
        free(v);
    }
    free(b);
    free(raw);
}

TEST(hash64_blind_to_swapped_words_signature_is_not)
{
    /* The fact itself: positional salts cancel in the XOR fold. */
    uint8_t w[32];
    for (int i = 0; i < 32; i++) w[i] = (uint8_t)(i * 37 + 1);
    uint64_t h = cmf__hash64(w, 32);
    uint8_t t[8];
    memcpy(t, w + 8, 8);
    memcpy(w + 8, w + 16, 8);
    memcpy(w + 16, t, 8);
    CHECK_EQ_U64(cmf__hash64(w, 32), h);

    /* On a file: verify passes, the signature check fails. */
    const char *p = tf_path("sw.cmf");
    size_t len = 0;
    uint8_t *raw = load(p, &len);
    if (!raw) return;
    uint8_t seed[32], pk[32];
    CHECK_OK(cmf__sign_keygen(seed, pk));
    CHECK_OK(cmf__sign_file(p, seed, NULL, NULL));
    char sig[600];
    snprintf(sig, sizeof sig, "%s.sig", p);
    char pkhex[65];
    CHECK_OK(cmf__sign_verify(p, sig, pkhex, NULL, NULL));
    uint64_t data_off = cmf__rd64(raw + 0x30);
    uint64_t rec0 = cmf__rd64(raw + 0x20) + 16;
    uint8_t *x = raw + data_off + cmf__rd64(raw + rec0 + 32);
    memcpy(t, x, 8);
    memcpy(x, x + 8, 8);
    memcpy(x + 8, t, 8);
    tf_write_bytes(p, raw, len);
    cmf__file *f = NULL;
    CHECK_OK(cmf__file_open(p, NULL, &f));
    if (f) CHECK_OK(cmf__file_verify(f, NULL, NULL, NULL, NULL));
    cmf__file_free(f);
    CHECK_ERR(cmf__sign_verify(p, sig, NULL, NULL, NULL), CMF_ERR_SIGNATURE, "changed after signing");
    free(raw);
}

TEST(sign_and_keys)
{
    const char *p = tf_path("sg.cmf");
    CHECK_OK(tf_write(p, false, false));
    uint8_t seed[32], pk[32], seed2[32], pk2[32];
    CHECK_OK(cmf__sign_keygen(seed, pk));
    const char *key = tf_path("k.key");
    CHECK_OK(cmf__sign_key_write(key, seed));
    CHECK_OK(cmf__sign_key_read(key, seed2, pk2));
    CHECK(memcmp(seed, seed2, 32) == 0 && memcmp(pk, pk2, 32) == 0);
    CHECK_OK(cmf__sign_file(p, seed2, NULL, NULL));
    char sig[600];
    snprintf(sig, sizeof sig, "%s.sig", p);
    char pkhex[65] = {0}, want[65];
    for (int i = 0; i < 32; i++) snprintf(want + 2 * i, 3, "%02x", pk[i]);
    CHECK_OK(cmf__sign_verify(p, sig, pkhex, NULL, NULL));
    CHECK_EQ_STR(pkhex, want);
    /* The .sig content is the documented JSON. */
    size_t sl = 0;
    char *text = harness_read_file(sig, &sl);
    json_t *j = json_loads(text ? text : "", 0, NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(j, "alg")), "ed25519-sha256");
    CHECK_EQ_STR(json_string_value(json_object_get(j, "pubkey")), want);
    CHECK_EQ_INT(strlen(json_string_value(json_object_get(j, "sig"))), 128);
    uint8_t sha[32];
    CHECK_OK(cmf__sha256_file(p, sha, NULL, NULL));
    char shahex[65];
    for (int i = 0; i < 32; i++) snprintf(shahex + 2 * i, 3, "%02x", sha[i]);
    CHECK_EQ_STR(json_string_value(json_object_get(j, "sha256")), shahex);
    /* A forged signature over the right digest. */
    char *forged = strdup(json_string_value(json_object_get(j, "sig")));
    forged[0] = forged[0] == '0' ? '1' : '0';
    json_object_set_new(j, "sig", json_string(forged));
    free(forged);
    const char *bad = tf_path("bad.sig");
    json_dump_file(j, bad, 0);
    CHECK_ERR(cmf__sign_verify(p, bad, NULL, NULL, NULL), CMF_ERR_SIGNATURE, "does not match");
    json_object_set_new(j, "alg", json_string("rsa"));
    json_dump_file(j, bad, 0);
    CHECK_ERR(cmf__sign_verify(p, bad, NULL, NULL, NULL), CMF_ERR_PARSE, "\"alg\"");
    json_object_set_new(j, "alg", json_string("ed25519-sha256"));
    json_object_set_new(j, "pubkey", json_string("zz"));
    json_dump_file(j, bad, 0);
    CHECK_ERR(cmf__sign_verify(p, bad, NULL, NULL, NULL), CMF_ERR_PARSE, "\"pubkey\" must be 64 hex digits");
    tf_write_bytes(bad, (const uint8_t *)"{", 1);
    CHECK_ERR(cmf__sign_verify(p, bad, NULL, NULL, NULL), CMF_ERR_PARSE, "bad.sig");
    json_decref(j);
    free(text);
    /* Key files. */
    tf_write_bytes(key, (const uint8_t *)"abc\n", 4);
    CHECK_ERR(cmf__sign_key_read(key, seed2, pk2), CMF_ERR_PARSE, "64 hex digits");
    CHECK_ERR(cmf__sign_key_read(tf_path("nokey"), seed2, pk2), CMF_ERR_IO, "nokey");
}

TEST(append_keeps_old_bytes)
{
    const char *p = tf_path("ap.cmf");
    size_t len0 = 0;
    uint8_t *old = load(p, &len0);
    if (!old) return;
    float a[2 * 16];
    for (int i = 0; i < 32; i++) a[i] = (float)i * 0.5f;
    uint16_t hb[24];
    for (int i = 0; i < 24; i++) hb[i] = cmf__f32_to_f16((float)-i);
    cmf__append_tensor add[2] = {
        {.name = "skill.sql.model.layers.0.mlp.up_proj.weight", .dtype = CMF_DTYPE_F32, .ndim = 2, .shape = {2, 16},
         .data = a, .nbytes = sizeof a},
        {.name = "extra.bias", .dtype = CMF_DTYPE_F16, .ndim = 1, .shape = {24}, .data = hb, .nbytes = sizeof hb},
    };
    json_t *h = tf_header();
    json_object_set_new(h, "provenance", json_pack("{s:s}", "tool", "append-test"));
    CHECK_OK(cmf__file_append(p, add, 2, h));
    json_decref(h);
    size_t len1 = 0;
    uint8_t *now = tf_read(p, &len1);
    CHECK(len1 > len0);
    /* Every byte after the envelope is unchanged. */
    CHECK(memcmp(old + 128, now + 128, len0 - 128) == 0);
    cmf__file *f = NULL;
    CHECK_OK(cmf__file_open(p, NULL, &f));
    if (f) {
        CHECK_EQ_INT(f->n_tensors, TF_N_TENSORS + 2);
        const cmf__tensor *t = cmf__file_find(f, "extra.bias");
        CHECK(t && t->nbytes == sizeof hb && memcmp(t->data, hb, sizeof hb) == 0);
        t = cmf__file_find(f, "skill.sql.model.layers.0.mlp.up_proj.weight");
        CHECK(t && memcmp(t->data, a, sizeof a) == 0 && t->off % 64 == 0);
        t = cmf__file_find(f, "lm_head.weight");
        CHECK(t && t->off == cmf__rd64(old + cmf__rd64(old + 0x20) + 16 + 4 * 56 + 32));
        CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(f->header, "provenance"), "tool")),
                     "append-test");
        /* The data range now overlaps the masks/vocab/index sections: valid (§9). */
        const cmf__shard *sh = &f->shards[0];
        CHECK(sh->data.off + sh->data.len > sh->masks.off);
        CHECK(cmf__file_mask_set(f) != NULL);
        CHECK_OK(cmf__file_verify(f, NULL, NULL, NULL, NULL));
    }
    cmf__file_free(f);
    /* A name that exists is refused and the file stays as it was. */
    cmf__append_tensor dup = {.name = "extra.bias", .dtype = CMF_DTYPE_F16, .ndim = 1, .shape = {24}, .data = hb,
                              .nbytes = sizeof hb};
    CHECK_ERR(cmf__file_append(p, &dup, 1, NULL), CMF_ERR_DUPLICATE, "already exists");
    dup.nbytes = 10;
    dup.name = "bad.size";
    CHECK_ERR(cmf__file_append(p, &dup, 1, NULL), CMF_ERR_SIZE, "bad.size");
    size_t len2 = 0;
    uint8_t *same = tf_read(p, &len2);
    CHECK(len2 == len1 && memcmp(same, now, len1) == 0);
    /* A second append on top of the first, keeping the header. */
    cmf__append_tensor more = {.name = "more", .dtype = CMF_DTYPE_F32, .ndim = 1, .shape = {3}, .data = a, .nbytes = 12};
    CHECK_OK(cmf__file_append(p, &more, 1, NULL));
    size_t len3 = 0;
    uint8_t *third = tf_read(p, &len3);
    CHECK(memcmp(now + 128, third + 128, len1 - 128) == 0);
    CHECK_OK(cmf__file_open(p, NULL, &f));
    if (f) {
        CHECK_EQ_INT(f->n_tensors, TF_N_TENSORS + 3);
        CHECK(json_object_get(f->header, "provenance") != NULL);
        CHECK_OK(cmf__file_verify(f, NULL, NULL, NULL, NULL));
    }
    cmf__file_free(f);

    /* Compact: smaller, same content. */
    const char *c = tf_path("ap_compact.cmf");
    CHECK_OK(cmf__file_compact(p, c));
    size_t lenc = 0;
    uint8_t *comp = tf_read(c, &lenc);
    CHECK(lenc < len3);
    cmf__file *g = NULL;
    CHECK_OK(cmf__file_open(p, NULL, &f));
    CHECK_OK(cmf__file_open(c, NULL, &g));
    if (f && g) {
        CHECK_EQ_INT(g->n_tensors, f->n_tensors);
        for (uint64_t i = 0; i < f->n_tensors; i++) {
            const cmf__tensor *x = &f->tensors[i], *y = &g->tensors[i];
            CHECK_EQ_STR(x->name, y->name);
            CHECK(x->dtype == y->dtype && x->ndim == y->ndim && memcmp(x->shape, y->shape, sizeof x->shape) == 0);
            CHECK(x->nbytes == y->nbytes && memcmp(x->data, y->data, x->nbytes) == 0 && x->hash == y->hash);
        }
        const cmf__shard *s = &f->shards[0], *t = &g->shards[0];
        CHECK(s->masks.len == t->masks.len && memcmp(s->masks.data, t->masks.data, s->masks.len) == 0);
        CHECK(s->vocab.len == t->vocab.len && memcmp(s->vocab.data, t->vocab.data, s->vocab.len) == 0);
        CHECK(s->index.len == t->index.len && memcmp(s->index.data, t->index.data, s->index.len) == 0);
        CHECK(json_equal(f->header, g->header));
        CHECK_EQ_U64(f->features, g->features);
        CHECK_OK(cmf__file_verify(g, NULL, NULL, NULL, NULL));
    }
    cmf__file_free(f);
    cmf__file_free(g);
    /* Compact refuses to launder a corrupt payload. */
    uint8_t *cb = malloc(lenc);
    memcpy(cb, comp, lenc);
    cb[cmf__rd64(comp + 0x30) + 3] ^= 1;
    const char *cc = tf_path("corrupt_in.cmf");
    tf_write_bytes(cc, cb, lenc);
    CHECK_ERR(cmf__file_compact(cc, tf_path("corrupt_out.cmf")), CMF_ERR_HASH, "not compacting a corrupt file");
    free(cb);
    free(comp);
    free(third);
    /* A file without a data section (offset 0) cannot grow in place. */
    const char *e = tf_path("nodata.cmf");
    cmf__writer *w = NULL;
    CHECK_OK(cmf__writer_open(e, &w));
    CHECK_OK(cmf__writer_finish(w));
    size_t le = 0;
    uint8_t *eb = tf_read(e, &le);
    if (eb) {
        cmf__wr64(eb + 0x30, 0);
        tf_write_bytes(e, eb, le);
        CHECK_OK(cmf__file_open(e, NULL, &f));
        cmf__file_free(f);
        CHECK_ERR(cmf__file_append(e, &more, 1, NULL), CMF_ERR_UNSUPPORTED, "no data section");
    }
    free(eb);
    free(same);
    free(now);
    free(old);
}

/* Chunked, pooled hashing gives the one-shot hash64 for every chunk size
 * (word multiples, tails of 0..7 bytes) and still names a broken tensor. */
TEST(verify_chunked_matches)
{
    const char *p = tf_path("chunk.cmf");
    size_t len = 0;
    uint8_t *raw = load(p, &len);
    if (!raw) return;
    static const uint64_t sizes[] = {8, 16, 24, 64, 100, 4096};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        cmf__fmt_verify_chunk = sizes[i];
        cmf__file *f = NULL;
        CHECK_OK(cmf__file_open(p, NULL, &f));
        if (f) CHECK_OK(cmf__file_verify(f, NULL, NULL, NULL, NULL));
        cmf__file_free(f);
        cmf__verify_problem *v = NULL;
        size_t n = 0;
        uint8_t *b = malloc(len);
        memcpy(b, raw, len);
        /* Last byte of the 14-byte model.norm.weight (its 6-byte tail). */
        uint64_t rec5 = cmf__rd64(raw + 0x20) + 16 + 5 * 56;
        b[cmf__rd64(raw + 0x30) + cmf__rd64(raw + rec5 + 32) + 13] ^= 0x40;
        CHECK_ERR(verify_bytes(b, len, "chunk_bad.cmf", &v, &n), CMF_ERR_HASH, "'model.norm.weight'");
        CHECK_EQ_INT(n, 1);
        free(v);
        free(b);
    }
    cmf__fmt_verify_chunk = 64ull << 20;
    free(raw);
}

int main(void)
{
    RUN(verify_intact);
    RUN(verify_names_every_break);
    RUN(verify_chunked_matches);
    RUN(hash64_blind_to_swapped_words_signature_is_not);
    RUN(sign_and_keys);
    RUN(append_keeps_old_bytes);
    return harness_done();
}
