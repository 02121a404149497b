/* Unit tests of st_grow / ST_GROW, the one array-growth step of every list: nothing when there
 * is room, doubling from the first capacity, elements kept across a realloc, the int capacity
 * clipped at INT_MAX, and every overflow refused with the array as it was. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "common/grow.h"

typedef struct pair {
	int a;
	double b;
} pair;

static void test_doubling(void **state)
{
	(void)state;
	pair *v = NULL;
	int n = 0, cap = 0;
	int caps[64], n_caps = 0, last = -1;
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(ST_GROW(v, cap, n + 1, 16), ST_OK);
		if (cap != last)
			caps[n_caps++] = last = cap;
		v[n++] = (pair){i, i / 2.0};
	}
	/* 16, 32, ..., 1024: one realloc per doubling, never one per element */
	assert_int_equal(n_caps, 7);
	for (int k = 0; k < n_caps; k++)
		assert_int_equal(caps[k], 16 << k);
	for (int i = 0; i < n; i++) {
		assert_int_equal(v[i].a, i);
		assert_true(v[i].b == i / 2.0);
	}
	free(v);
}

/* Room already there: no realloc, the pointer stays. A jump past several doublings lands on
 * the first doubling that holds it. */
static void test_room_and_jumps(void **state)
{
	(void)state;
	int *v = NULL, cap = 0;
	assert_int_equal(ST_GROW(v, cap, 0, 8), ST_OK);
	assert_null(v);
	assert_int_equal(cap, 0);
	assert_int_equal(ST_GROW(v, cap, 5, 8), ST_OK);
	assert_int_equal(cap, 8);
	int *before = v;
	assert_int_equal(ST_GROW(v, cap, 8, 8), ST_OK);
	assert_ptr_equal(v, before);
	assert_int_equal(cap, 8);
	assert_int_equal(ST_GROW(v, cap, 100, 8), ST_OK);
	assert_int_equal(cap, 128);
	v[99] = 7;
	free(v);
	/* a first capacity of 0 still grows */
	v = NULL;
	cap = 0;
	assert_int_equal(ST_GROW(v, cap, 3, 0), ST_OK);
	assert_int_equal(cap, 4);
	free(v);
}

/* Overflow: need past INT_MAX, and a byte count past SIZE_MAX, are refused and leave the array
 * and its capacity as they were (the caller still owns and frees it). */
static void test_overflow(void **state)
{
	(void)state;
	char *v = NULL;
	int cap = 0;
	assert_int_equal(ST_GROW(v, cap, 4, 4), ST_OK);
	v[0] = 'x';
	char *keep = v;
	assert_int_equal(ST_GROW(v, cap, (long long)INT_MAX + 1, 4), ST_E_NOMEM);
	assert_ptr_equal(v, keep);
	assert_int_equal(cap, 4);
	assert_int_equal(st_grow(&v, &cap, 1LL << 30, SIZE_MAX / 4, 4), ST_E_NOMEM);
	assert_ptr_equal(v, keep);
	assert_int_equal(cap, 4);
	assert_int_equal(v[0], 'x');
	free(v);
}

/* The capacities picked, without allocating them: doubling past INT_MAX / 2 clips to INT_MAX
 * rather than wrapping negative. */
static void test_caps(void **state)
{
	(void)state;
	assert_int_equal(st_grow_cap(0, 1, 16), 16);
	assert_int_equal(st_grow_cap(16, 17, 16), 32);
	assert_int_equal(st_grow_cap(16, 16, 16), 16);
	assert_int_equal(st_grow_cap(3, 4, 16), 6);
	assert_int_equal(st_grow_cap(0, 1000, 256), 1024);
	assert_int_equal(st_grow_cap(INT_MAX / 2, INT_MAX / 2 + 1, 1), INT_MAX - 1);
	assert_int_equal(st_grow_cap(INT_MAX / 2 + 1, INT_MAX / 2 + 2, 1), INT_MAX);
	assert_int_equal(st_grow_cap(INT_MAX / 2 + 1, INT_MAX, 1), INT_MAX);
	assert_int_equal(st_grow_cap(1 << 20, (long long)INT_MAX + 1, 1), -1);
	/* a large cap with an element size whose bytes cannot be counted: refused, as it was */
	char *v = NULL;
	int cap = INT_MAX / 2 + 1;
	assert_int_equal(st_grow(&v, &cap, INT_MAX, SIZE_MAX / INT_MAX + 1, 1), ST_E_NOMEM);
	assert_int_equal(cap, INT_MAX / 2 + 1);
	assert_null(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_doubling),
		cmocka_unit_test(test_room_and_jumps),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_caps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
