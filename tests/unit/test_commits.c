/* The committed calls of a runner's timing batches: every call's seed is the one the runner drew
 * its inputs from (st_call_seed of the batch seed and its index), its buffer set alternates, and
 * the audit's picks are distinct calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/digest.h"
#include "verify/commits.h"

static void test_batches(void **state)
{
	(void)state;
	st_commits c = {0};
	uint64_t d[300];
	for (int i = 0; i < 300; i++)
		d[i] = 1000 + (uint64_t)i;
	assert_int_equal(st_commits_add_batch(&c, 7, 3, d), 0);
	assert_int_equal(st_commits_add_batch(&c, 99, 300, d), 0);
	assert_int_equal(c.n, 303);
	assert_true(c.v[0].seed == st_call_seed(7, 0));
	assert_true(c.v[2].seed == st_call_seed(7, 2));
	assert_int_equal(c.v[2].set, 0);
	assert_int_equal(c.v[4].set, 1);
	assert_true(c.v[4].seed == st_call_seed(99, 1));
	assert_true(c.v[302].digest == 1299);
	int idx[8];
	int m = st_commits_pick(&c, 8, idx);
	assert_int_equal(m, 8);
	for (int i = 0; i < m; i++) {
		assert_true(idx[i] >= 0 && idx[i] < 303);
		for (int j = 0; j < i; j++)
			assert_int_not_equal(idx[i], idx[j]);
	}
	st_commits small = {0};
	assert_int_equal(st_commits_add_batch(&small, 1, 2, d), 0);
	assert_int_equal(st_commits_pick(&small, 8, idx), 2);
	st_commits_free(&small);
	st_commits_free(&c);
	assert_null(c.v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(test_batches)};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
