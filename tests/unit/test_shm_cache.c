/* Unit tests for the shared-memory blocks serve's workers keep between verifies: the smallest
 * block that fits is taken, a block too small for the request is not, a full cache lets its
 * smallest block go for a larger one and refuses a smaller one, the byte bound holds, and what a
 * block held is still there when it is taken again (the verifier wipes it for untrusted runners,
 * not the cache). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "verify/shm_cache.h"

static st_shm_block make(size_t cap, unsigned char fill)
{
	st_shm_block b = {-1, NULL, cap, 0, 0};
	b.fd = memfd_create("test-shm", MFD_CLOEXEC);
	assert_true(b.fd >= 0);
	assert_int_equal(ftruncate(b.fd, (off_t)cap), 0);
	b.map = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_SHARED, b.fd, 0);
	assert_true(b.map != MAP_FAILED);
	b.map[0] = fill;
	b.dirty = 1;
	return b;
}

static void release(st_shm_block *b)
{
	munmap(b->map, b->cap);
	close(b->fd);
}

static void test_smallest_that_fits(void **state)
{
	(void)state;
	st_shm_cache *c = st_shm_cache_new();
	assert_non_null(c);
	st_shm_block a = make(1 << 20, 1), b = make(4 << 20, 2), got;
	st_shm_cache_give(c, &a);
	st_shm_cache_give(c, &b);
	assert_null(a.map); /* taken over */
	assert_int_equal(a.fd, -1);
	assert_int_equal(st_shm_cache_take(c, 8 << 20, &got), 0);
	assert_int_equal(st_shm_cache_take(c, 512 << 10, &got), 1);
	assert_int_equal(got.cap, 1 << 20);
	assert_int_equal(got.map[0], 1); /* the contents stay: wiping is the verifier's job */
	assert_int_equal(got.dirty, 1);
	release(&got);
	assert_int_equal(st_shm_cache_take(c, 2 << 20, &got), 1);
	assert_int_equal(got.cap, 4 << 20);
	release(&got);
	assert_int_equal(st_shm_cache_take(c, 1, &got), 0); /* empty now */
	st_shm_cache_free(c);
}

static void test_full_cache(void **state)
{
	(void)state;
	st_shm_cache *c = st_shm_cache_new();
	for (int i = 1; i <= 4; i++) {
		st_shm_block b = make((size_t)i << 20, (unsigned char)i);
		st_shm_cache_give(c, &b);
	}
	st_shm_block small = make(512 << 10, 9), large = make(8 << 20, 8), got;
	st_shm_cache_give(c, &small); /* smaller than every kept block: freed */
	assert_null(small.map);
	st_shm_cache_give(c, &large); /* the 1 MiB block makes way */
	assert_int_equal(st_shm_cache_take(c, 1, &got), 1);
	assert_int_equal(got.cap, 2 << 20);
	release(&got);
	assert_int_equal(st_shm_cache_take(c, 5 << 20, &got), 1);
	assert_int_equal(got.cap, 8 << 20);
	assert_int_equal(got.map[0], 8);
	release(&got);
	st_shm_cache_free(c);
}

static void test_bounds(void **state)
{
	(void)state;
	st_shm_cache *c = st_shm_cache_new();
	/* sparse memfds: the sizes count, not pages */
	st_shm_block big = make((size_t)5 << 30, 1), got;
	st_shm_cache_give(c, &big); /* over the 4 GiB a worker keeps: freed */
	assert_int_equal(st_shm_cache_take(c, 1, &got), 0);
	st_shm_block a = make((size_t)3 << 30, 1), b = make((size_t)2 << 30, 2);
	st_shm_cache_give(c, &a);
	st_shm_cache_give(c, &b); /* 5 GiB together: the 2 GiB block is the smaller, it goes */
	assert_int_equal(st_shm_cache_take(c, 1, &got), 1);
	assert_int_equal(got.cap, (size_t)3 << 30);
	release(&got);
	assert_int_equal(st_shm_cache_take(c, 1, &got), 0);
	/* a NULL cache keeps nothing and frees what it is given */
	st_shm_block d = make(4096, 1);
	st_shm_cache_give(NULL, &d);
	assert_null(d.map);
	assert_int_equal(st_shm_cache_take(NULL, 1, &got), 0);
	st_shm_cache_free(c);
	st_shm_cache_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_smallest_that_fits),
		cmocka_unit_test(test_full_cache),
		cmocka_unit_test(test_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
