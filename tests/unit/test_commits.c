/* The committed calls of a runner's timing batches: every call's seed is the one the runner drew
 * its inputs from (st_call_seed of the batch seed and its index), its buffer set alternates, the
 * audit's picks are distinct calls, and the calls whose digest another call committed to are
 * found across batches; kept inputs carry their buffer set's fill seed. */
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

static int has(const int *idx, int n, int want)
{
	for (int i = 0; i < n; i++)
		if (idx[i] == want)
			return 1;
	return 0;
}

/* Kept inputs (a task's host generator): call i's seed is its buffer set's fill seed, whatever
 * the batch; the seeds differ between the sets and from a batch seed's calls. */
static void test_kept(void **state)
{
	(void)state;
	st_commits c = {0};
	uint64_t d[5] = {1, 2, 3, 4, 5}, fill = 42;
	uint64_t set_seed[2] = {st_fill_seed(fill, 0), st_fill_seed(fill, 1)};
	assert_true(set_seed[0] != set_seed[1]);
	assert_true(set_seed[0] != st_call_seed(fill, 0));
	assert_int_equal(st_commits_add_kept(&c, set_seed, 5, d), 0);
	assert_int_equal(st_commits_add_kept(&c, set_seed, 2, d), 0);
	assert_int_equal(c.n, 7);
	for (int i = 0; i < 7; i++) {
		int k = i < 5 ? i : i - 5;
		assert_int_equal(c.v[i].set, k % 2);
		assert_true(c.v[i].seed == set_seed[k % 2]);
		assert_true(c.v[i].digest == d[k]);
	}
	st_commits_free(&c);
}

static void test_repeated(void **state)
{
	(void)state;
	st_commits c = {0};
	/* 1 and 3 come back, also across a batch's end: calls 0, 2 (1), 3, 5, 6 (3); the rest are
	 * once each */
	uint64_t a[6] = {1, 2, 1, 3, 5, 3}, b[3] = {3, 9, 11};
	assert_int_equal(st_commits_add_batch(&c, 1, 6, a), 0);
	assert_int_equal(st_commits_add_batch(&c, 2, 3, b), 0);
	int idx[8];
	int m = st_commits_repeated(&c, 8, NULL, 0, idx);
	assert_int_equal(m, 5);
	assert_true(has(idx, m, 0) && has(idx, m, 2) && has(idx, m, 3) && has(idx, m, 5) &&
	            has(idx, m, 6));
	int skip[2] = {5, 0};
	m = st_commits_repeated(&c, 8, skip, 2, idx);
	assert_int_equal(m, 3);
	assert_true(has(idx, m, 2) && has(idx, m, 3) && has(idx, m, 6));
	/* at most k, each one of the repeated calls, and over many draws every one of them */
	int seen[9] = {0};
	for (int r = 0; r < 300; r++) {
		assert_int_equal(st_commits_repeated(&c, 1, NULL, 0, idx), 1);
		assert_true(idx[0] >= 0 && idx[0] < 9);
		seen[idx[0]] = 1;
	}
	assert_true(seen[0] && seen[2] && seen[3] && seen[5] && seen[6]);
	assert_false(seen[1] || seen[4] || seen[7] || seen[8]);
	/* every digest once: nothing */
	st_commits d = {0};
	uint64_t e[4] = {7, 8, 9, 10};
	assert_int_equal(st_commits_add_batch(&d, 3, 4, e), 0);
	assert_int_equal(st_commits_repeated(&d, 8, NULL, 0, idx), 0);
	st_commits_free(&d);
	st_commits_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batches),
		cmocka_unit_test(test_kept),
		cmocka_unit_test(test_repeated),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
