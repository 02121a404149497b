/* Unit tests for the timing statistics: type-7 quantiles, medians and quartiles of known sets,
 * the discard rule for throttled and clock-dropped samples, the relative standard error and
 * every branch of the stop rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "verify/stats.h"

#define EPS 1e-12

static void test_quantile_even(void **state)
{
	(void)state;
	const double v[] = { 1, 2, 3, 4 };
	assert_float_equal(st_quantile_sorted(v, 4, 0.5), 2.5, EPS);
	assert_float_equal(st_quantile_sorted(v, 4, 0.25), 1.75, EPS);
	assert_float_equal(st_quantile_sorted(v, 4, 0.75), 3.25, EPS);
	assert_float_equal(st_quantile_sorted(v, 4, 0), 1, EPS);
	assert_float_equal(st_quantile_sorted(v, 4, 1), 4, EPS);
	assert_float_equal(st_quantile_sorted(v, 4, 0.1), 1.3, EPS);
}

static void test_quantile_odd_and_edges(void **state)
{
	(void)state;
	const double v[] = { 10, 20, 30, 40, 50 };
	assert_float_equal(st_quantile_sorted(v, 5, 0.5), 30, EPS);
	assert_float_equal(st_quantile_sorted(v, 5, 0.25), 20, EPS);
	assert_float_equal(st_quantile_sorted(v, 5, 0.75), 40, EPS);
	assert_float_equal(st_quantile_sorted(v, 5, 0.9), 46, EPS);
	assert_float_equal(st_quantile_sorted(v, 1, 0.5), 10, EPS);
	assert_float_equal(st_quantile_sorted(v, 1, 0.99), 10, EPS);
	assert_true(isnan(st_quantile_sorted(v, 0, 0.5)));
	assert_true(isnan(st_quantile_sorted(NULL, 3, 0.5)));
}

static void fill(st_sample *s, const double *ms, int n)
{
	memset(s, 0, (size_t)n * sizeof *s);
	for (int i = 0; i < n; i++) {
		s[i].ms = ms[i];
		s[i].wall_ms = ms[i] + 1;
	}
}

/* The quantile the parent's clock check takes over batches: unsorted input, sorted in place,
 * one outlier of four that a mean would follow but the third quartile does not, and nothing. */
static void test_quantile_unsorted(void **state)
{
	(void)state;
	double gaps[] = { 0.16, 0.15, 40.0, 0.14, 0.15 };
	assert_float_equal(st_quantile(gaps, 5, 0.5), 0.15, EPS);
	assert_float_equal(gaps[0], 0.14, EPS); /* sorted in place */
	assert_float_equal(st_quantile(gaps, 5, 0.75), 0.16, EPS);
	double even[] = { 4, 1, 3, 2 };
	assert_float_equal(st_quantile(even, 4, 0.5), 2.5, EPS);
	assert_true(isnan(st_quantile(even, 0, 0.5)));
}

static void test_compute_odd(void **state)
{
	(void)state;
	const double ms[] = { 5, 1, 4, 2, 3 }; /* unsorted on purpose */
	st_sample s[5];
	fill(s, ms, 5);
	st_stats st;
	st_stats_compute(s, 5, &st);
	assert_int_equal(st.n, 5);
	assert_int_equal(st.discarded, 0);
	assert_float_equal(st.median, 3, EPS);
	assert_float_equal(st.q1, 2, EPS);
	assert_float_equal(st.q3, 4, EPS);
	assert_float_equal(st.min, 1, EPS);
	assert_float_equal(st.max, 5, EPS);
	assert_float_equal(st.mean, 3, EPS);
	assert_float_equal(st.stddev, sqrt(2.5), 1e-12);
	assert_float_equal(st.rse, sqrt(2.5) / sqrt(5) / 3, 1e-12);
	assert_float_equal(st.rse_median, 1.2533 * (2 / 1.349) / sqrt(5) / 3, 1e-12);
	assert_float_equal(st.total_ms, 15, EPS);
	assert_float_equal(st.wall_median, 4, EPS);
	assert_int_equal(st.sm_mhz_median, 0);
	/* the input is not reordered */
	assert_float_equal(s[0].ms, 5, EPS);
}

static void test_compute_even(void **state)
{
	(void)state;
	const double ms[] = { 8, 2, 6, 4 };
	st_sample s[4];
	fill(s, ms, 4);
	st_stats st;
	st_stats_compute(s, 4, &st);
	assert_int_equal(st.n, 4);
	assert_float_equal(st.median, 5, EPS);
	assert_float_equal(st.q1, 3.5, EPS);
	assert_float_equal(st.q3, 6.5, EPS);
	assert_float_equal(st.wall_median, 6, EPS);
}

static void test_discard_throttled(void **state)
{
	(void)state;
	const double ms[] = { 1, 1, 100, 1, 1 };
	st_sample s[5];
	fill(s, ms, 5);
	s[2].throttled = 1;
	st_stats st;
	st_stats_compute(s, 5, &st);
	assert_int_equal(st.n, 4);
	assert_int_equal(st.discarded, 1);
	assert_float_equal(st.max, 1, EPS);
	assert_float_equal(st.total_ms, 4, EPS);
	assert_float_equal(st.rse, 0, EPS);
}

/* One sample 100 times the others (a neighbour's context starting on the host) keeps the mean's
 * relative error far above 0.5 % at any n the cap allows, but not the median's: 1,000 tight
 * samples and one spike stop; 1,000 samples spread over a factor of two do not. */
static void test_rse_median_ignores_a_spike(void **state)
{
	(void)state;
	enum { N = 1001 };
	static st_sample s[N];
	static double ms[N];
	for (int i = 0; i < N; i++)
		ms[i] = 1.0 + 0.001 * (i % 10);
	ms[500] = 100;
	fill(s, ms, N);
	st_stats st;
	st_stats_compute(s, N, &st);
	st_stop_rule r;
	st_stop_rule_default(&r);
	st.total_ms = r.min_time_ms;
	assert_true(st.rse > 0.02);
	assert_true(st.rse_median < 0.001);
	assert_true(st_stop_reached(&st, &r, 0));
	for (int i = 0; i < N; i++)
		ms[i] = 1.0 + (i % 2); /* half at 1 ms, half at 2 ms */
	fill(s, ms, N);
	st_stats_compute(s, N, &st);
	st.total_ms = r.min_time_ms;
	assert_true(st.rse_median > r.max_rse);
	assert_false(st_stop_reached(&st, &r, 0));
}

static void test_discard_clock_drop(void **state)
{
	(void)state;
	const double ms[] = { 1, 2, 3, 50, 4, 5 };
	st_sample s[6];
	fill(s, ms, 6);
	s[0].sm_mhz = 1980;
	s[1].sm_mhz = 1782; /* exactly 90 %: kept */
	s[2].sm_mhz = 1980;
	s[3].sm_mhz = 1781; /* below 90 %: dropped */
	s[4].sm_mhz = 0;    /* unknown: kept */
	s[5].sm_mhz = 1900;
	st_stats st;
	st_stats_compute(s, 6, &st);
	assert_int_equal(st.n, 5);
	assert_int_equal(st.discarded, 1);
	assert_float_equal(st.max, 5, EPS);
	assert_float_equal(st.median, 3, EPS);
	/* median of the known clocks of kept samples: 1782, 1900, 1980, 1980 */
	assert_int_equal(st.sm_mhz_median, 1940);

	/* Everything discarded: n = 0 and the figures stay zero. */
	for (int i = 0; i < 6; i++)
		s[i].throttled = 1;
	st_stats_compute(s, 6, &st);
	assert_int_equal(st.n, 0);
	assert_int_equal(st.discarded, 6);
	assert_float_equal(st.median, 0, EPS);
	assert_float_equal(st.total_ms, 0, EPS);
}

static void test_empty(void **state)
{
	(void)state;
	st_stats st;
	memset(&st, 0x5a, sizeof st);
	st_stats_compute(NULL, 0, &st);
	assert_int_equal(st.n, 0);
	assert_int_equal(st.discarded, 0);
	assert_float_equal(st.median, 0, EPS);

	st_sample one = { .ms = 2.5, .wall_ms = 3 };
	st_stats_compute(&one, 1, &st);
	assert_int_equal(st.n, 1);
	assert_float_equal(st.median, 2.5, EPS);
	assert_float_equal(st.q1, 2.5, EPS);
	assert_float_equal(st.stddev, 0, EPS);
	assert_float_equal(st.rse, 0, EPS);
}

static void test_stop_rule_defaults(void **state)
{
	(void)state;
	st_stop_rule r;
	st_stop_rule_default(&r);
	assert_int_equal(r.min_samples, 10);
	assert_int_equal(r.max_samples, 20000);
	assert_float_equal(r.min_time_ms, 300, EPS);
	assert_float_equal(r.max_rse, 0.005, EPS);
	assert_float_equal(r.max_wall_ms, 4000, EPS);
}

static void test_stop_rule_branches(void **state)
{
	(void)state;
	st_stop_rule r;
	st_stop_rule_default(&r);
	st_stats s;
	memset(&s, 0, sizeof s);

	/* all three conditions met */
	s.n = 100;
	s.total_ms = 500;
	s.rse_median = 0.001;
	assert_true(st_stop_reached(&s, &r, 100));

	/* too few samples */
	s.n = 9;
	assert_false(st_stop_reached(&s, &r, 100));
	s.n = 10;
	assert_true(st_stop_reached(&s, &r, 100));

	/* not enough GPU time */
	s.total_ms = 299;
	assert_false(st_stop_reached(&s, &r, 100));
	s.total_ms = 300;
	assert_true(st_stop_reached(&s, &r, 100));

	/* too noisy (strict) */
	s.rse_median = 0.005;
	assert_false(st_stop_reached(&s, &r, 100));
	s.rse_median = 0.0049;
	assert_true(st_stop_reached(&s, &r, 100));

	/* caps: noisy and short, but out of samples or of wall time */
	s.rse_median = 0.5;
	s.total_ms = 1;
	s.n = 5;
	assert_false(st_stop_reached(&s, &r, 3999));
	assert_true(st_stop_reached(&s, &r, 4000));
	s.n = 20000;
	assert_true(st_stop_reached(&s, &r, 0));
	s.n = 19999;
	assert_false(st_stop_reached(&s, &r, 0));
	s.discarded = 1; /* discarded samples cost time too */
	assert_true(st_stop_reached(&s, &r, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quantile_even),
		cmocka_unit_test(test_quantile_odd_and_edges),
		cmocka_unit_test(test_quantile_unsorted),
		cmocka_unit_test(test_compute_odd),
		cmocka_unit_test(test_compute_even),
		cmocka_unit_test(test_discard_throttled),
		cmocka_unit_test(test_discard_clock_drop),
		cmocka_unit_test(test_rse_median_ignores_a_spike),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_stop_rule_defaults),
		cmocka_unit_test(test_stop_rule_branches),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
