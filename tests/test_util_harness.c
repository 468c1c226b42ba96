/* test_util_harness.c — the test harness's own comparison helper:
 * harness_max_rel_err is the relative error the parity tests judge logits
 * by, so it must fail (+Inf) on NaN, Inf and empty rows, never pass them. */
#include "harness.h"

TEST(max_rel_err_measures)
{
    const float ref[4] = {1, -2, 4, 8}, near[4] = {1, -2, 4.4f, 8}, zeros[3] = {0, 0, 0}, small[3] = {0, 0.5f, 0};
    CHECK_NEAR(harness_max_rel_err(ref, ref, 4), 0, 0);
    CHECK_NEAR(harness_max_rel_err(near, ref, 4), 0.05, 1e-7);
    /* an all-zero reference: the absolute error */
    CHECK_NEAR(harness_max_rel_err(zeros, zeros, 3), 0, 0);
    CHECK_NEAR(harness_max_rel_err(small, zeros, 3), 0.5, 0);
}

TEST(max_rel_err_fails_on_nan_inf_empty)
{
    const float ref[4] = {1, -2, 4, 8};
    const float nan_all[4] = {NAN, NAN, NAN, NAN}, nan_one[4] = {1, -2, NAN, 8};
    const float inf_one[4] = {1, -INFINITY, 4, 8}, inf_ref[4] = {1, -2, 4, INFINITY};
    const float *bad[] = {nan_all, nan_one, inf_one};
    for (size_t i = 0; i < 3; i++) {
        double e = harness_max_rel_err(bad[i], ref, 4);
        CHECK(isinf(e) && e > 0);
        CHECK(!(e <= 1e30));
    }
    CHECK(isinf(harness_max_rel_err(ref, nan_one, 4)));
    CHECK(isinf(harness_max_rel_err(ref, inf_ref, 4)));
    CHECK(isinf(harness_max_rel_err(ref, ref, 0)));
    /* +Inf wins a running max, as the parity tests take it over rows */
    double worst = 0, rows[3] = {1e-6, harness_max_rel_err(nan_one, ref, 4), 1e-5};
    for (size_t r = 0; r < 3; r++)
        if (rows[r] > worst) worst = rows[r];
    CHECK(!(worst <= 1e-3));
}

int main(void)
{
    RUN(max_rel_err_measures);
    RUN(max_rel_err_fails_on_nan_inf_empty);
    return harness_done();
}
