/* Unit tests of output comparison: tolerances, the worst element and its coordinates, NaN and
 * infinity handling, NMSE, bf16 data, thread-count independence, and bitwise comparison. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "task/compare.h"
#include "task/dtype.h"

static st_tensor tensor2(st_dtype t, int64_t rows, int64_t cols, void *data)
{
	st_tensor x = {.name = "y", .dtype = t, .ndim = 2, .data = data};
	x.shape[0] = rows;
	x.shape[1] = cols;
	return x;
}

static const st_tol tol_abs = {1e-5, 1e-5, -1};

static void fill(float *v, int n)
{
	for (int i = 0; i < n; i++)
		v[i] = (float)sin(i * 0.37) * 3.0f;
}

static void test_within_tolerance(void **state)
{
	(void)state;
	float want[64 * 64], got[64 * 64];
	fill(want, 64 * 64);
	for (int i = 0; i < 64 * 64; i++)
		got[i] = want[i] * (1.0f + 1e-6f);
	st_tensor g = tensor2(ST_F32, 64, 64, got), w = tensor2(ST_F32, 64, 64, want);
	st_compare_result r;
	st_compare(&g, &w, &tol_abs, 1, &r);
	assert_true(r.ok);
	assert_int_equal(r.n, 64 * 64);
	assert_int_equal(r.mismatches, 0);
	assert_int_equal(r.nonfinite, 0);
	assert_true(r.max_abs > 0 && r.max_abs < 1e-5);
	assert_true(r.max_rel < 2e-6);
	assert_true(r.worst_index >= 0);
	char line[512];
	st_compare_describe(&r, "y", &tol_abs, line, sizeof line);
	assert_non_null(strstr(line, "y: all 4096 elements within tol"));
}

static void test_one_element_off(void **state)
{
	(void)state;
	float want[64 * 64], got[64 * 64];
	fill(want, 64 * 64);
	memcpy(got, want, sizeof got);
	want[3 * 64 + 17] = 0.25f;
	got[3 * 64 + 17] = 0.5f;
	got[10] = want[10] + 1e-6f; /* within tol: must not be the worst */
	st_tensor g = tensor2(ST_F32, 64, 64, got), w = tensor2(ST_F32, 64, 64, want);
	st_compare_result r;
	st_compare(&g, &w, &tol_abs, 1, &r);
	assert_false(r.ok);
	assert_int_equal(r.mismatches, 1);
	assert_int_equal(r.worst_index, 3 * 64 + 17);
	assert_int_equal(r.worst_coord[0], 3);
	assert_int_equal(r.worst_coord[1], 17);
	assert_int_equal(r.ndim, 2);
	assert_true(r.worst_got == 0.5);
	assert_true(r.worst_want == 0.25);
	assert_true(r.max_abs == 0.25);
	assert_true(r.max_rel == 1.0);
	char line[512];
	st_compare_describe(&r, "y", &tol_abs, line, sizeof line);
	assert_string_equal(line, "y: 1 of 4096 elements off, worst y[3,17] (flat 209): got 0.5 "
	                          "want 0.25, max abs 0.25, max rel 1, tol atol 1e-05 rtol 1e-05");
}

static void test_nan_where_want_finite(void **state)
{
	(void)state;
	float want[8] = {1, 2, 3, 4, 5, NAN, INFINITY, 8};
	float got[8] = {1, 2, NAN, 4, 5, NAN, INFINITY, 100};
	st_tensor g = tensor2(ST_F32, 2, 4, got), w = tensor2(ST_F32, 2, 4, want);
	st_compare_result r;
	st_compare(&g, &w, &tol_abs, 1, &r);
	assert_false(r.ok);
	/* NaN vs NaN and inf vs inf agree; NaN vs 3 is a non-finite mismatch and the worst. */
	assert_int_equal(r.nonfinite, 1);
	assert_int_equal(r.mismatches, 2);
	assert_int_equal(r.worst_index, 2);
	assert_int_equal(r.worst_coord[0], 0);
	assert_int_equal(r.worst_coord[1], 2);
	assert_true(isnan(r.worst_got));
	char line[512];
	st_compare_describe(&r, "y", &tol_abs, line, sizeof line);
	assert_non_null(strstr(line, "(1 not finite)"));

	/* A finite got where want is infinite counts as non-finite too. */
	float want2[2] = {INFINITY, 1}, got2[2] = {1e30f, 1};
	g = tensor2(ST_F32, 1, 2, got2);
	w = tensor2(ST_F32, 1, 2, want2);
	st_compare(&g, &w, &tol_abs, 1, &r);
	assert_false(r.ok);
	assert_int_equal(r.nonfinite, 1);
	assert_int_equal(r.worst_index, 0);

	/* Opposite infinities differ. */
	float want3[1] = {INFINITY}, got3[1] = {-INFINITY};
	g = tensor2(ST_F32, 1, 1, got3);
	w = tensor2(ST_F32, 1, 1, want3);
	st_compare(&g, &w, &tol_abs, 1, &r);
	assert_false(r.ok);
}

static void test_nmse(void **state)
{
	(void)state;
	enum { N = 1000 };
	float want[N], got[N];
	fill(want, N);
	for (int i = 0; i < N; i++)
		got[i] = want[i] + 0.01f * (float)((i % 2) ? 1 : -1);
	st_tensor g = tensor2(ST_F32, 10, 100, got), w = tensor2(ST_F32, 10, 100, want);
	double num = 0, den = 0;
	for (int i = 0; i < N; i++) {
		num += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
		den += (double)want[i] * want[i];
	}
	st_tol loose = {-1, -1, 1e-3}, tight = {-1, -1, 1e-6};
	st_compare_result r;
	st_compare(&g, &w, &loose, 1, &r);
	assert_true(r.ok);
	assert_true(fabs(r.nmse - num / den) < 1e-12);
	assert_int_equal(r.mismatches, N); /* unset atol/rtol: every differing element */
	st_compare(&g, &w, &tight, 1, &r);
	assert_false(r.ok);
	char line[512];
	st_compare_describe(&r, "y", &tight, line, sizeof line);
	assert_non_null(strstr(line, "y: nmse "));
	assert_non_null(strstr(line, "(limit 1e-06)"));
	assert_non_null(strstr(line, "tol nmse 1e-06"));

	/* NaN under NMSE fails however small the rest is. */
	got[5] = NAN;
	st_compare(&g, &w, &loose, 1, &r);
	assert_false(r.ok);
	assert_true(isinf(r.nmse));
}

static void test_bf16(void **state)
{
	(void)state;
	uint16_t want[6], got[6];
	const double vals[6] = {1.0, -2.5, 3.140625, 0.0, 100.0, -0.125};
	for (int i = 0; i < 6; i++) {
		st_dtype_set(ST_BF16, want, i, vals[i]);
		st_dtype_set(ST_BF16, got, i, vals[i]);
	}
	st_tensor g = tensor2(ST_BF16, 2, 3, got), w = tensor2(ST_BF16, 2, 3, want);
	st_compare_result r;
	st_tol tol = {1e-2, 1e-2, -1};
	st_compare(&g, &w, &tol, 1, &r);
	assert_true(r.ok);
	assert_true(r.max_abs == 0);
	st_dtype_set(ST_BF16, got, 4, 101.0); /* 1 off where 1e-2 + 1e-2 * 100 = 1.01 allowed */
	st_compare(&g, &w, &tol, 1, &r);
	assert_true(r.ok);
	st_dtype_set(ST_BF16, got, 4, 102.0);
	st_compare(&g, &w, &tol, 1, &r);
	assert_false(r.ok);
	assert_int_equal(r.worst_index, 4);
	assert_int_equal(r.worst_coord[0], 1);
	assert_int_equal(r.worst_coord[1], 1);
	assert_true(r.worst_got == 102.0);
	assert_true(r.worst_want == 100.0);

	/* A type without a fast path goes through st_dtype_get. */
	uint16_t h_want[2], h_got[2];
	st_dtype_set(ST_F16, h_want, 0, 1.0);
	st_dtype_set(ST_F16, h_want, 1, 2.0);
	st_dtype_set(ST_F16, h_got, 0, 1.0);
	st_dtype_set(ST_F16, h_got, 1, 2.5);
	g = tensor2(ST_F16, 1, 2, h_got);
	w = tensor2(ST_F16, 1, 2, h_want);
	st_compare(&g, &w, &tol, 1, &r);
	assert_false(r.ok);
	assert_true(r.worst_got == 2.5);
}

static void test_mismatched_layout(void **state)
{
	(void)state;
	float a[4] = {0}, b[4] = {0};
	st_tensor g = tensor2(ST_F32, 2, 2, a), w = tensor2(ST_F32, 1, 4, b);
	st_compare_result r;
	st_compare(&g, &w, &tol_abs, 1, &r);
	assert_false(r.ok);
	assert_int_equal(r.worst_index, -1);
	int64_t at = 7;
	assert_int_equal(st_compare_bitwise(&g, &w, 1, &at), 0);
}

static void same_result(const st_compare_result *a, const st_compare_result *b)
{
	assert_int_equal(a->ok, b->ok);
	assert_int_equal(a->n, b->n);
	assert_int_equal(a->mismatches, b->mismatches);
	assert_int_equal(a->nonfinite, b->nonfinite);
	assert_memory_equal(&a->max_abs, &b->max_abs, sizeof a->max_abs);
	assert_memory_equal(&a->max_rel, &b->max_rel, sizeof a->max_rel);
	assert_memory_equal(&a->nmse, &b->nmse, sizeof a->nmse);
	assert_int_equal(a->worst_index, b->worst_index);
	assert_memory_equal(a->worst_coord, b->worst_coord, sizeof a->worst_coord);
}

/* Within one block of finite values (the fast path): of two equal worst excesses the first
 * index wins, a zero want adds no relative error, and the figures are those of the rule
 * element by element. */
static void test_block_ties_and_zero_want(void **state)
{
	(void)state;
	enum { N = 5000 };
	static float want[N], got[N];
	for (int i = 0; i < N; i++)
		want[i] = got[i] = (float)(i % 17) - 8.0f;
	want[3000] = 2.0f; /* excess 4 - (1e-5 + 1e-5 * 2) at 3000 and at 3001 */
	got[3000] = 6.0f;
	want[3001] = 2.0f;
	got[3001] = 6.0f;
	want[4000] = 0.0f; /* |w| = 0: off by 1, no relative error */
	got[4000] = 1.0f;
	want[100] = 0.5f;  /* the largest relative error: 1.5 / 0.5 */
	got[100] = 2.0f;
	st_tensor g = tensor2(ST_F32, 1, N, got), w = tensor2(ST_F32, 1, N, want);
	st_compare_result r;
	st_compare(&g, &w, &tol_abs, 1, &r);
	assert_int_equal(r.mismatches, 4);
	assert_int_equal(r.worst_index, 3000);
	assert_true(r.max_abs == 4.0);
	assert_true(r.max_rel == 3.0);
	assert_int_equal(r.nonfinite, 0);
}

static void test_threads_match_single(void **state)
{
	(void)state;
	const int64_t rows = 3000, cols = 1001; /* 3,003,000 elements, not a multiple of a chunk */
	const int64_t n = rows * cols;
	float *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
	assert_non_null(want);
	assert_non_null(got);
	uint32_t x = 12345;
	for (int64_t i = 0; i < n; i++) {
		x = x * 1664525u + 1013904223u;
		want[i] = (float)((int32_t)x) / 2147483648.0f * 10.0f;
		got[i] = want[i] + (float)(x >> 8 & 0xff) * 1e-7f;
	}
	/* Two equal worst excesses in different chunks: the lower index must win. */
	want[200000] = 1.0f;
	got[200000] = 9.0f;
	want[2900000] = 1.0f;
	got[2900000] = 9.0f;
	got[1500000] = NAN;
	st_tensor g = tensor2(ST_F32, rows, cols, got), w = tensor2(ST_F32, rows, cols, want);
	st_tol tol = {1e-6, 1e-6, -1};
	st_compare_result one, many, nm_one, nm_many;
	st_compare(&g, &w, &tol, 1, &one);
	st_compare(&g, &w, &tol, 7, &many);
	same_result(&one, &many);
	assert_int_equal(one.worst_index, 1500000); /* NaN: infinite excess */
	assert_int_equal(one.nonfinite, 1);

	got[1500000] = want[1500000];
	st_compare(&g, &w, &tol, 1, &one);
	st_compare(&g, &w, &tol, 4, &many);
	same_result(&one, &many);
	assert_int_equal(one.worst_index, 200000);
	assert_int_equal(one.worst_coord[0], 200000 / cols);
	assert_int_equal(one.worst_coord[1], 200000 % cols);

	st_tol nm = {-1, -1, 1e-3};
	st_compare(&g, &w, &nm, 1, &nm_one);
	st_compare(&g, &w, &nm, 16, &nm_many);
	same_result(&nm_one, &nm_many);
	assert_true(nm_one.nmse > 0);
	free(want);
	free(got);
}

static void test_bitwise(void **state)
{
	(void)state;
	float a[100], b[100];
	fill(a, 100);
	memcpy(b, a, sizeof a);
	st_tensor ta = tensor2(ST_F32, 10, 10, a), tb = tensor2(ST_F32, 10, 10, b);
	int64_t at = 99;
	assert_int_equal(st_compare_bitwise(&ta, &tb, 1, &at), 1);
	assert_int_equal(at, -1);
	b[37] = -0.0f;
	a[37] = 0.0f; /* equal as numbers, different bits */
	b[80] = 1.0f;
	assert_int_equal(st_compare_bitwise(&ta, &tb, 1, &at), 0);
	assert_int_equal(at, 37);
	assert_int_equal(st_compare_bitwise(&ta, &tb, 1, NULL), 0);
}

/* float32 outputs are read in place, other types through doubles: the same values as f32 and as
 * f64 give the same figures, and the largest relative error is exact (here an element with a tiny
 * want, past blocks where the maximum has already grown). */
static void test_f32_in_place_matches_f64(void **state)
{
	(void)state;
	const int n = 3 * 2048 + 77;
	float *gf = malloc((size_t)n * sizeof *gf), *wf = malloc((size_t)n * sizeof *wf);
	double *gd = malloc((size_t)n * sizeof *gd), *wd = malloc((size_t)n * sizeof *wd);
	assert_non_null(gf);
	assert_non_null(wf);
	assert_non_null(gd);
	assert_non_null(wd);
	fill(wf, n);
	for (int i = 0; i < n; i++)
		gf[i] = wf[i] + (i % 5 == 0 ? 3e-6f : -1e-6f);
	wf[5000] = 1e-3f;
	gf[5000] = 1.5e-3f; /* relative error 0.5, from the third block on */
	gf[6100] = wf[6100] + 0.25f; /* the worst excess */
	for (int i = 0; i < n; i++) {
		gd[i] = gf[i];
		wd[i] = wf[i];
	}
	st_tensor g1 = tensor2(ST_F32, 1, n, gf), w1 = tensor2(ST_F32, 1, n, wf);
	st_tensor g2 = tensor2(ST_F64, 1, n, gd), w2 = tensor2(ST_F64, 1, n, wd);
	st_compare_result a, b;
	st_compare(&g1, &w1, &tol_abs, 1, &a);
	st_compare(&g2, &w2, &tol_abs, 1, &b);
	same_result(&a, &b);
	assert_true(a.max_rel == fabs((double)gf[5000] - (double)wf[5000]) / fabs((double)wf[5000]));
	assert_int_equal(a.worst_index, 6100);
	free(gf);
	free(wf);
	free(gd);
	free(wd);
}

/* Large enough to be split across threads: the first difference is found whichever thread's
 * range holds it, and an earlier range's difference wins over a later one's. */
static void test_bitwise_threads(void **state)
{
	(void)state;
	const int64_t rows = 1024, cols = 3000; /* 3 M elements, not a multiple of 7 threads */
	float *a = malloc((size_t)(rows * cols) * sizeof *a), *b = malloc((size_t)(rows * cols) * sizeof *b);
	assert_non_null(a);
	assert_non_null(b);
	fill(a, (int)(rows * cols));
	memcpy(b, a, (size_t)(rows * cols) * sizeof *a);
	st_tensor ta = tensor2(ST_F32, rows, cols, a), tb = tensor2(ST_F32, rows, cols, b);
	int64_t at = 99;
	assert_int_equal(st_compare_bitwise(&ta, &tb, 7, &at), 1);
	assert_int_equal(at, -1);
	b[rows * cols - 1] += 1.0f;
	assert_int_equal(st_compare_bitwise(&ta, &tb, 7, &at), 0);
	assert_int_equal(at, rows * cols - 1);
	b[1234567] += 1.0f;
	for (int t = 1; t <= 9; t += 4) {
		assert_int_equal(st_compare_bitwise(&ta, &tb, t, &at), 0);
		assert_int_equal(at, 1234567);
	}
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_within_tolerance),  cmocka_unit_test(test_one_element_off),
		cmocka_unit_test(test_nan_where_want_finite), cmocka_unit_test(test_nmse),
		cmocka_unit_test(test_bf16),              cmocka_unit_test(test_mismatched_layout),
		cmocka_unit_test(test_block_ties_and_zero_want),
		cmocka_unit_test(test_threads_match_single), cmocka_unit_test(test_bitwise),
		cmocka_unit_test(test_bitwise_threads), cmocka_unit_test(test_f32_in_place_matches_f64),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
