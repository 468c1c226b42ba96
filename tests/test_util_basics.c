/* test_util_basics.c — hash64 known answers, f16/bf16 conversions,
 * checked arithmetic, JSON getters, the thread pool. */
#include "harness.h"
#include "util/arith.h"
#include "util/half.h"
#include "util/hash.h"
#include "util/json.h"
#include "util/pool.h"

#include <stdatomic.h>
#include <stdlib.h>

/* Known answers computed independently from the spec's definition (§8):
 * fmix64 over LE words, salt i*0x9E3779B97F4A7C15 outside the mix, XOR
 * fold, xor len, final fmix64 (see tests/data/hash64_kat.py). */
TEST(hash64_known_answers)
{
    CHECK_EQ_U64(cmf__hash64("", 0), 0x0000000000000000ull);
    CHECK_EQ_U64(cmf__hash64("a", 1), 0x247f1eaecb8be39aull);
    CHECK_EQ_U64(cmf__hash64("abcdefgh", 8), 0x47da24881d1e74a9ull);
    CHECK_EQ_U64(cmf__hash64("hello, cmf world", 16), 0xe70a2421861cd034ull);
}

TEST(hash64_incremental_matches_oneshot)
{
    uint8_t data[1000];
    for (int i = 0; i < 1000; i++) data[i] = (uint8_t)(i * 7 + 3);
    for (size_t len = 0; len < 1000; len += 37) {
        uint64_t want = cmf__hash64(data, len);
        for (size_t cut = 0; cut <= len; cut += 13) {
            cmf__hash64_state s;
            cmf__hash64_init(&s);
            cmf__hash64_update(&s, data, cut);
            cmf__hash64_update(&s, data + cut, len - cut);
            CHECK_EQ_U64(cmf__hash64_final(&s), want);
        }
    }
}

TEST(hash64_swapped_words_collide)
{
    /* The documented blind spot: swapping two 8-byte words keeps hash64. */
    uint8_t a[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    uint8_t b[16];
    memcpy(b, a + 8, 8);
    memcpy(b + 8, a, 8);
    CHECK_EQ_U64(cmf__hash64(a, 16), cmf__hash64(b, 16));
}

TEST(f16_roundtrip_and_rounding)
{
    /* every f16 bit pattern survives f16 -> f32 -> f16 (NaNs stay NaN) */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = cmf__f16_to_f32((uint16_t)h);
        uint16_t back = cmf__f32_to_f16(f);
        if (isnan(f)) CHECK(isnan(cmf__f16_to_f32(back)));
        else if (back != h) { CHECK_EQ_INT(back, h); break; }
    }
    CHECK_EQ_INT(cmf__f32_to_f16(1.0f), 0x3c00);
    CHECK_EQ_INT(cmf__f32_to_f16(65504.0f), 0x7bff);
    CHECK_EQ_INT(cmf__f32_to_f16(65520.0f), 0x7c00);     /* rounds up to inf */
    CHECK_EQ_INT(cmf__f32_to_f16(65519.0f), 0x7bff);
    CHECK_EQ_INT(cmf__f32_to_f16(1.0f + 1.0f / 2048), 0x3c00); /* tie to even */
    CHECK_EQ_INT(cmf__f32_to_f16(1.0f + 3.0f / 2048), 0x3c02); /* tie to even, up */
    CHECK_EQ_INT(cmf__f32_to_f16(5.9604645e-08f), 0x0001);    /* smallest subnormal */
    CHECK_EQ_INT(cmf__f32_to_f16(2.9802322e-08f), 0x0000);    /* half of it: tie to even 0 */
    CHECK_EQ_INT(cmf__f32_to_f16(-2.0f), 0xc000);
}

TEST(bf16_rounding)
{
    CHECK_EQ_INT(cmf__f32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ_INT(cmf__f32_to_bf16(cmf__bits_f32(0x3f808000u)), 0x3f80); /* tie to even */
    CHECK_EQ_INT(cmf__f32_to_bf16(cmf__bits_f32(0x3f818000u)), 0x3f82);
    CHECK(isnan(cmf__bf16_to_f32(cmf__f32_to_bf16(NAN))));
    for (uint32_t h = 0; h < 65536; h++) {
        float f = cmf__bf16_to_f32((uint16_t)h);
        if (!isnan(f) && cmf__f32_to_bf16(f) != h) { CHECK_EQ_INT(cmf__f32_to_bf16(f), h); break; }
    }
}

TEST(checked_arithmetic)
{
    uint64_t r;
    CHECK(cmf__add_overflow(UINT64_MAX, 1, &r));
    CHECK(!cmf__add_overflow(1, 2, &r) && r == 3);
    CHECK(cmf__mul_overflow(1ull << 40, 1ull << 30, &r));
    CHECK(cmf__range_ok(10, 5, 15));
    CHECK(!cmf__range_ok(10, 6, 15));
    CHECK(!cmf__range_ok(UINT64_MAX, 2, UINT64_MAX));
}

TEST(json_getters_name_the_path)
{
    json_t *j;
    const char *text = "{\"a\": 3, \"b\": \"x\", \"c\": 2.0}";
    CHECK_OK(cmf__json_parse(text, strlen(text), "t.json", &j));
    if (!j) return;
    int64_t v;
    CHECK_OK(cmf__json_get_int(j, "a", "arch", &v));
    CHECK_EQ_INT(v, 3);
    CHECK_OK(cmf__json_get_int(j, "c", "arch", &v));
    CHECK_EQ_INT(v, 2);
    CHECK_ERR(cmf__json_get_int(j, "b", "arch", &v), CMF_ERR_PARSE, "arch.b: expected an integer");
    CHECK_ERR(cmf__json_get_int(j, "zz", "arch", &v), CMF_ERR_NOT_FOUND, "arch.zz: missing");
    CHECK_OK(cmf__json_opt_int(j, "zz", "arch", 7, &v));
    CHECK_EQ_INT(v, 7);
    json_decref(j);
    CHECK_ERR(cmf__json_parse("{\"a\":", 5, "bad.json", &j), CMF_ERR_PARSE, "bad.json: invalid JSON at line 1");
}

static atomic_int pool_sum;
static void add_task(void *ctx, int task, int thread)
{
    (void)ctx;
    (void)thread;
    atomic_fetch_add(&pool_sum, task + 1);
}

TEST(pool_runs_every_task_once)
{
    cmf__pool *p = cmf__pool_new(3);
    CHECK(p != NULL);
    for (int round = 0; round < 50; round++) {
        atomic_store(&pool_sum, 0);
        cmf__pool_run(p, 100, add_task, NULL);
        CHECK_EQ_INT(atomic_load(&pool_sum), 5050);
    }
    cmf__pool_free(p);
    cmf__pool_free(NULL);
}

int main(void)
{
    RUN(hash64_known_answers);
    RUN(hash64_incremental_matches_oneshot);
    RUN(hash64_swapped_words_collide);
    RUN(f16_roundtrip_and_rounding);
    RUN(bf16_rounding);
    RUN(checked_arithmetic);
    RUN(json_getters_name_the_path);
    RUN(pool_runs_every_task_once);
    return harness_done();
}
