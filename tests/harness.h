/* harness.h — the test harness every tests/test_*.c uses. A check that
 * fails prints file:line, the expression and both values, and the test
 * goes on; main ends with "NAME: N passed, N failed, N skipped".
 *
 *   TEST(decode_q8) { CHECK_EQ_INT(x, 3); }
 *   int main(void) { RUN(decode_q8); return harness_done(); }
 *
 * A test that needs the shared fixtures calls harness_fixtures(), which
 * returns NULL (and the test should SKIP) when they are absent. */
#ifndef CMF_TESTS_HARNESS_H
#define CMF_TESTS_HARNESS_H

#include "cmf.h"
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void harness_fail(const char *file, int line, const char *fmt, ...);
void harness_skip(const char *why);
void harness_run(const char *name, void (*fn)(void));
int harness_done(void);
/* Fixture root (CMF_FIXTURES, default ../shared/fixtures) or NULL. */
const char *harness_fixtures(void);
/* True under CMF_TEST_LIGHT=1 (set by scripts/cross_aarch64.sh: the
 * programs run ~10x slower under qemu): a test whose cases repeat one
 * code path over many random draws runs fewer draws. Every case still runs. */
bool harness_light(void);
/* Joins fixture root and a relative path into a static buffer (rotating, 8 slots). */
const char *harness_fixture_path(const char *rel);
/* A fresh scratch directory for this test program (under $TMPDIR). */
const char *harness_tmpdir(void);
/* max|got - ref| / max|ref| over n floats (max|got - ref| when ref is all
 * zeros). +Inf when n is 0 or either side holds a NaN or an infinity: a
 * value no tolerance accepts and that wins every max(), so a broken output
 * can never compare as close. */
double harness_max_rel_err(const float *got, const float *ref, size_t n);
/* Reads a whole file (NUL-terminated); NULL on failure. Caller frees. */
char *harness_read_file(const char *path, size_t *len);

#define TEST(name) static void name(void)
#define RUN(name) harness_run(#name, name)
#define SKIP(why) do { harness_skip(why); return; } while (0)

#define CHECK(cond) do { if (!(cond)) harness_fail(__FILE__, __LINE__, "CHECK(%s)", #cond); } while (0)
#define CHECK_OK(expr) do { cmf_status st_ = (expr); if (st_ != CMF_OK) \
    harness_fail(__FILE__, __LINE__, "%s returned %s: %s", #expr, cmf_status_name(st_), cmf_last_error()); } while (0)
#define CHECK_STATUS(expr, want) do { cmf_status st_ = (expr); if (st_ != (want)) \
    harness_fail(__FILE__, __LINE__, "%s returned %s, expected %s (%s)", #expr, cmf_status_name(st_), \
                 cmf_status_name(want), cmf_last_error()); } while (0)
#define CHECK_EQ_INT(a, b) do { long long a_ = (long long)(a), b_ = (long long)(b); if (a_ != b_) \
    harness_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); } while (0)
#define CHECK_EQ_U64(a, b) do { unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b); \
    if (a_ != b_) harness_fail(__FILE__, __LINE__, "%s == %s: 0x%llx != 0x%llx", #a, #b, a_, b_); } while (0)
#define CHECK_EQ_STR(a, b) do { const char *a_ = (a), *b_ = (b); if (!a_ || !b_ || strcmp(a_, b_) != 0) \
    harness_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); } while (0)
#define CHECK_CONTAINS(hay, needle) do { const char *h_ = (hay), *n_ = (needle); if (!h_ || !strstr(h_, n_)) \
    harness_fail(__FILE__, __LINE__, "%s contains \"%s\": got \"%s\"", #hay, n_, h_ ? h_ : "(null)"); } while (0)
#define CHECK_NEAR(a, b, tol) do { double a_ = (double)(a), b_ = (double)(b), t_ = (double)(tol); \
    if (!(fabs(a_ - b_) <= t_)) harness_fail(__FILE__, __LINE__, "%s ~= %s: %.9g vs %.9g (tol %.3g)", #a, #b, a_, b_, t_); } while (0)
/* Status and a substring of cmf_last_error(): every corrupt-input test. */
#define CHECK_ERR(expr, want, substr) do { cmf_status st_ = (expr); if (st_ != (want)) \
    harness_fail(__FILE__, __LINE__, "%s returned %s, expected %s (%s)", #expr, cmf_status_name(st_), \
                 cmf_status_name(want), cmf_last_error()); \
    else if (!strstr(cmf_last_error(), (substr))) harness_fail(__FILE__, __LINE__, \
                 "%s message lacks \"%s\": \"%s\"", #expr, (substr), cmf_last_error()); } while (0)

#endif
