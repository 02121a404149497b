/* Unit tests for the device memory a runner keeps between size sets (src/runner/dev_keep.c), on
 * a fake device that counts its calls: a released block is poisoned and comes back for the same
 * size only, the newest first; a block that does not fit under the limit beside blocks set up
 * lately is freed, not kept in their place, and stale blocks make room; a limit of 0 keeps
 * nothing, nor does a release not asked to keep; an allocation the device refuses frees what is kept and
 * tries again; dropping frees everything; the arena serves any set-up that fits, one at a
 * time, and is poisoned, not freed, when given back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/backend.h"
#include "runner/dev_keep.h"

/* ---- the fake device: malloc'd blocks, a byte budget, call counts ---- */

static size_t dev_free_bytes;
static int n_alloc, n_free, n_poison;
static size_t sizes[4096];
static void *ptrs[4096];
static int n_live;

static size_t size_of(void *p)
{
	for (int i = 0; i < n_live; i++)
		if (ptrs[i] == p)
			return sizes[i];
	fail_msg("unknown block %p", p);
	return 0;
}

int rb_alloc(void **p, size_t bytes, char *err, size_t len)
{
	if (bytes > dev_free_bytes) {
		snprintf(err, len, "out of memory");
		return -1;
	}
	*p = malloc(bytes);
	assert_non_null(*p);
	ptrs[n_live] = *p;
	sizes[n_live++] = bytes;
	dev_free_bytes -= bytes;
	n_alloc++;
	return 0;
}

void rb_free(void *p)
{
	for (int i = 0; i < n_live; i++)
		if (ptrs[i] == p) {
			dev_free_bytes += sizes[i];
			ptrs[i] = ptrs[--n_live];
			sizes[i] = sizes[n_live];
			free(p);
			n_free++;
			return;
		}
	fail_msg("free of unknown block %p", p);
}

int rb_poison(void *dst, size_t bytes, char *err, size_t len)
{
	(void)err;
	(void)len;
	assert_true(bytes <= size_of(dst));
	memset(dst, 0xff, bytes);
	n_poison++;
	return 0;
}

static int setup(void **state)
{
	(void)state;
	dk_set_limit(0);
	dev_free_bytes = 1 << 20;
	n_alloc = n_free = n_poison = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	dk_drop_all();
	dk_unreserve();
	assert_int_equal(dk_kept_bytes(), 0);
	assert_int_equal(dk_arena_bytes(), 0);
	while (n_live) /* what a test still held */
		rb_free(ptrs[0]);
	return 0;
}

/* A block of `bytes` (the allocation must succeed); where it came from in *from. */
static void *get_from(size_t bytes, dk_from *from)
{
	void *p;
	char err[64];
	assert_int_equal(dk_alloc(&p, bytes, from, err, sizeof err), 0);
	return p;
}

static void *get(size_t bytes, dk_from want)
{
	dk_from from;
	void *p = get_from(bytes, &from);
	assert_int_equal(from, want);
	return p;
}

static void test_same_size_comes_back_poisoned(void **state)
{
	(void)state;
	dk_set_limit(4096);
	unsigned char *a = get(1000, DK_NEW);
	memset(a, 7, 1000);
	dk_release(a, 1000, 1);
	assert_int_equal(n_poison, 1);
	assert_int_equal(n_free, 0);
	assert_int_equal(dk_kept_bytes(), 1000);
	unsigned char *b = get(999, DK_NEW); /* another size: a new block */
	assert_ptr_not_equal(b, a);
	unsigned char *c = get(1000, DK_KEPT);
	assert_ptr_equal(c, a);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(c[i], 0xff); /* no byte of the old set is left */
	assert_int_equal(dk_kept_bytes(), 0);
	assert_int_equal(n_alloc, 2);
	dk_release(b, 999, 1);
	dk_release(c, 1000, 1);
}

static void test_newest_of_a_size_first(void **state)
{
	(void)state;
	dk_set_limit(4096);
	void *a = get(100, DK_NEW), *b = get(100, DK_NEW);
	dk_release(a, 100, 1);
	dk_release(b, 100, 1);
	assert_ptr_equal(get(100, DK_KEPT), b);
	assert_ptr_equal(get(100, DK_KEPT), a);
	get(100, DK_NEW);
	assert_int_equal(n_alloc, 3);
	dk_release(a, 100, 1);
	dk_release(b, 100, 1);
}

static void test_full_keeps_what_it_has(void **state)
{
	(void)state;
	dk_set_limit(250);
	void *a = get(100, DK_NEW), *b = get(101, DK_NEW), *c = get(102, DK_NEW);
	dk_release(a, 100, 1);
	dk_release(b, 101, 1);
	assert_int_equal(n_free, 0);
	dk_release(c, 102, 1); /* 303 > 250, and a and b were set up lately: c goes */
	assert_int_equal(n_free, 1);
	assert_int_equal(n_poison, 3);
	assert_int_equal(dk_kept_bytes(), 201);
	a = get(100, DK_KEPT);
	dk_release(a, 100, 1);
	void *big = get(251, DK_NEW); /* above the limit: never kept */
	dk_release(big, 251, 1);
	assert_int_equal(n_free, 2);
	assert_int_equal(dk_kept_bytes(), 201);
	dk_set_limit(101); /* lowering the limit frees at once, oldest first: b (a came back since) */
	assert_int_equal(dk_kept_bytes(), 100);
	assert_int_equal(n_free, 3);
	assert_non_null(get(100, DK_KEPT));
	dk_set_limit(0);
}

/* A pooled runner sets up the same sizes in the same order every verify. With room for two of
 * three, two come back kept every round and only the third is allocated: freeing the oldest for
 * the newest would have freed each one just before its turn, allocating all three every round. */
static void test_a_repeating_round_that_does_not_fit(void **state)
{
	(void)state;
	dk_set_limit(310);
	const size_t round[3] = {100, 200, 101};
	for (int r = 0; r < 10; r++)
		for (int i = 0; i < 3; i++) {
			void *p = get(round[i], r == 0 || i == 2 ? DK_NEW : DK_KEPT);
			dk_release(p, round[i], 1);
		}
	assert_int_equal(n_alloc, 3 + 9);
	assert_int_equal(dk_kept_bytes(), 300);
}

/* Blocks no set-up has taken in DK_STALE_SETUPS set-ups make room when the sizes change (a
 * runner given other size sets): the new size is kept from then on. */
static void test_stale_blocks_make_room(void **state)
{
	(void)state;
	dk_set_limit(250);
	void *a = get(100, DK_NEW), *b = get(101, DK_NEW);
	dk_release(a, 100, 1);
	dk_release(b, 101, 1);
	int set_ups = 2, kept_at = -1;
	for (int k = 0; k < 2 * DK_STALE_SETUPS && kept_at < 0; k++) {
		dk_from from;
		void *p = get_from(150, &from);
		set_ups++;
		if (from == DK_KEPT)
			kept_at = set_ups;
		dk_release(p, 150, 1);
	}
	/* a and b were kept after set-ups 1 and 2; from set-up 2 + DK_STALE_SETUPS on, the 150
	 * released then replaces them, and the next set-up takes it */
	assert_int_equal(kept_at, 2 + DK_STALE_SETUPS + 1);
	assert_int_equal(dk_kept_bytes(), 150);
}

static void test_limit_zero_keeps_nothing(void **state)
{
	(void)state;
	void *a = get(64, DK_NEW);
	dk_release(a, 64, 1);
	assert_int_equal(n_poison, 1);
	assert_int_equal(n_free, 1);
	get(64, DK_NEW);
	assert_int_equal(n_alloc, 2);
	dk_drop_all();
	dk_release(NULL, 64, 1); /* nothing to give back */
	assert_int_equal(n_poison, 1);
}

/* A runner the service will not keep (a candidate's) frees what it gives back, under any limit. */
static void test_not_kept_when_not_asked(void **state)
{
	(void)state;
	dk_set_limit(4096);
	void *a = get(128, DK_NEW);
	dk_release(a, 128, 0);
	assert_int_equal(n_poison, 1);
	assert_int_equal(n_free, 1);
	assert_int_equal(dk_kept_bytes(), 0);
	get(128, DK_NEW);
	assert_int_equal(n_alloc, 2);
}

static void test_refused_allocation_frees_what_is_kept(void **state)
{
	(void)state;
	dk_set_limit(1 << 20);
	dev_free_bytes = 1000;
	void *a = get(600, DK_NEW);
	dk_release(a, 600, 1);
	/* 700 fits only once the kept 600 are given back */
	void *b = get(700, DK_NEW);
	assert_int_equal(n_free, 1);
	assert_int_equal(dk_kept_bytes(), 0);
	/* nothing kept and still too big: the device's error */
	void *c;
	dk_from from;
	char err[64] = "";
	assert_int_equal(dk_alloc(&c, 400, &from, err, sizeof err), -1);
	assert_string_equal(err, "out of memory");
	dk_release(b, 700, 1);
}

/* The arena serves one set-up at a time, any size up to its own, and is poisoned (the bytes
 * used), never freed, when given back; what does not fit, or comes while it is taken, is
 * allocated as before. */
static void test_arena_serves_sets_without_the_driver(void **state)
{
	(void)state;
	char err[64];
	assert_int_equal(dk_reserve(1000, err, sizeof err), 0);
	assert_int_equal(dk_arena_bytes(), 1000);
	assert_int_equal(n_alloc, 1);
	unsigned char *a = get(600, DK_ARENA);
	memset(a, 7, 600);
	void *b = get(300, DK_NEW); /* the arena is taken */
	dk_release(a, 600, 0);
	assert_int_equal(n_poison, 1);
	assert_int_equal(n_free, 0);
	for (int i = 0; i < 600; i++)
		assert_int_equal(a[i], 0xff);
	assert_ptr_equal(get(1000, DK_ARENA), a); /* any size up to the arena's */
	dk_release(a, 1000, 0);
	get(1001, DK_NEW);
	assert_ptr_equal(get(10, DK_ARENA), a);
	dk_release(a, 10, 0);
	dk_release(b, 300, 0);
	assert_int_equal(n_alloc, 3);
	assert_int_equal(n_free, 1); /* b only */
	assert_int_equal(dk_arena_bytes(), 1000);
	dk_drop_all(); /* kept blocks only */
	assert_int_equal(dk_arena_bytes(), 1000);
}

/* A runner kept by a service gives its arena back at a set-up (dev_keep.h), but not while a set
 * is in it; a reservation the device refuses leaves none; 0 asks for none. */
static void test_unreserve_and_refused_reserve(void **state)
{
	(void)state;
	char err[64] = "";
	assert_int_equal(dk_reserve(2000, err, sizeof err), 0);
	void *a = get(5, DK_ARENA);
	dk_unreserve();
	assert_int_equal(dk_arena_bytes(), 2000);
	dk_release(a, 5, 1);
	assert_int_equal(dk_kept_bytes(), 0); /* the arena is not a kept block */
	dk_unreserve();
	assert_int_equal(dk_arena_bytes(), 0);
	assert_int_equal(n_free, 1);
	assert_int_equal(dk_reserve(2u << 20, err, sizeof err), -1); /* more than the device has */
	assert_string_equal(err, "out of memory");
	assert_int_equal(dk_arena_bytes(), 0);
	get(5, DK_NEW);
	assert_int_equal(dk_reserve(0, err, sizeof err), 0);
	assert_int_equal(dk_arena_bytes(), 0);
}

/* A free arena is given up, like kept blocks, when the device has too little for a set-up that
 * does not fit it. */
static void test_refused_allocation_frees_a_free_arena(void **state)
{
	(void)state;
	char err[64];
	dev_free_bytes = 1000;
	assert_int_equal(dk_reserve(600, err, sizeof err), 0);
	void *b = get(700, DK_NEW);
	assert_int_equal(n_free, 1);
	assert_int_equal(dk_arena_bytes(), 0);
	dk_release(b, 700, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_same_size_comes_back_poisoned, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newest_of_a_size_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_keeps_what_it_has, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_repeating_round_that_does_not_fit, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_stale_blocks_make_room, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limit_zero_keeps_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_kept_when_not_asked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_allocation_frees_what_is_kept, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_arena_serves_sets_without_the_driver, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_unreserve_and_refused_reserve, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_allocation_frees_a_free_arena, setup,
		                                teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
