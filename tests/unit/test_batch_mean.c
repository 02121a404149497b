/* The front-loading bound (batch_mean.h): a candidate that answers 16 calls in one and copies the
 * rest is timed by its batches' mean call; an honest one is not moved; the baseline's own skew
 * is taken off, within 1 to 1.5. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "verify/batch_mean.h"

/* A batch of n calls whose reported times sum to n * mean_ms. */
static st_batch_rec batch(int n, double mean_ms)
{
	st_batch_rec r = {0};
	r.n = n;
	r.event_ms = n * mean_ms;
	return r;
}

static void test_honest_is_not_moved(void **state)
{
	(void)state;
	st_batch_rec c[20], b[20];
	for (int i = 0; i < 20; i++) {
		c[i] = batch(100, 0.100 + 0.001 * (i % 3));
		b[i] = batch(50, 0.200);
	}
	st_batch_mean m;
	st_batch_mean_compute(c, 20, b, 20, 0.200, &m);
	assert_int_equal(m.batches, 20);
	assert_float_equal(m.skew, 1.0, 1e-9);
	assert_float_equal(m.cand_ms, 0.101, 1e-9);
	assert_false(st_batch_mean_binds(&m, 0.100)); /* 1 % above the median: chance */
}

static void test_front_loaded_is_timed_by_its_work(void **state)
{
	(void)state;
	/* 16 calls' work (0.1 ms each) done in the first, 15 copies of 0.002 ms: median 0.002 */
	st_batch_rec c[30], b[30];
	for (int i = 0; i < 30; i++) {
		c[i] = batch(16, (16 * 0.1 + 15 * 0.002) / 16);
		b[i] = batch(40, 0.105); /* the baseline: mean 5 % above its median of 0.1 */
	}
	st_batch_mean m;
	st_batch_mean_compute(c, 30, b, 30, 0.100, &m);
	assert_float_equal(m.skew, 1.05, 1e-9);
	assert_float_equal(m.bound_ms, (1.6 + 0.03) / 16 / 1.05, 1e-9);
	assert_true(st_batch_mean_binds(&m, 0.002));
}

static void test_skew_is_clamped_and_optional(void **state)
{
	(void)state;
	st_batch_rec c[5], b[5];
	for (int i = 0; i < 5; i++) {
		c[i] = batch(10, 1.0);
		b[i] = batch(10, 3.0);
	}
	st_batch_mean m;
	st_batch_mean_compute(c, 5, b, 5, 1.0, &m); /* a baseline 3x skewed counts as 1.5 */
	assert_float_equal(m.skew, 1.5, 1e-9);
	st_batch_mean_compute(c, 5, b, 5, 6.0, &m); /* below its median: 1 */
	assert_float_equal(m.skew, 1.0, 1e-9);
	st_batch_mean_compute(c, 5, NULL, 0, 0, &m); /* no baseline: 1 */
	assert_float_equal(m.skew, 1.0, 1e-9);
	assert_float_equal(m.bound_ms, 1.0, 1e-9);
	/* one batch held up by a busy host moves the median over batches little */
	c[2] = batch(10, 9.0);
	st_batch_mean_compute(c, 5, NULL, 0, 0, &m);
	assert_float_equal(m.cand_ms, 1.0, 1e-9);
}

static void test_no_batches_no_bound(void **state)
{
	(void)state;
	st_batch_rec c[2] = {batch(0, 0), {0}};
	st_batch_mean m;
	st_batch_mean_compute(c, 2, NULL, 0, 0, &m);
	assert_int_equal(m.batches, 0);
	assert_false(st_batch_mean_binds(&m, 0.001));
	st_batch_mean_compute(NULL, 0, NULL, 0, 0, &m);
	assert_int_equal(m.batches, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_honest_is_not_moved),
		cmocka_unit_test(test_front_loaded_is_timed_by_its_work),
		cmocka_unit_test(test_skew_is_clamped_and_optional),
		cmocka_unit_test(test_no_batches_no_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
