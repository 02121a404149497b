/* Unit tests of st_mem_fill: a fresh shared-memory block's pages allocated (resident, zero) and a
 * reused block's old contents wiped, across threads, ranges of several sizes at once (chunk
 * boundaries, a range shorter than a chunk, one not a multiple of the page size). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/mem_fill.h"

static void *shared(size_t len, int *fd)
{
	*fd = memfd_create("test-mem-fill", MFD_CLOEXEC);
	assert_true(*fd >= 0);
	assert_int_equal(ftruncate(*fd, (off_t)len), 0);
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	assert_true(m != MAP_FAILED);
	return m;
}

static size_t resident_pages(void *addr, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (len + page - 1) / page, count = 0;
	unsigned char *v = malloc(n);
	assert_non_null(v);
	assert_int_equal(mincore(addr, len, v), 0);
	for (size_t i = 0; i < n; i++)
		count += v[i] & 1;
	free(v);
	return count;
}

static void test_populate_and_wipe(void **state)
{
	(void)state;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t big = (40u << 20) + 3 * page + 100, small = 5 * page, old = (20u << 20) + 7;
	int fd[3];
	unsigned char *a = shared(big, &fd[0]), *b = shared(small, &fd[1]), *c = shared(old, &fd[2]);
	memset(c, 0xab, old);
	assert_true(resident_pages(a, big) < big / page / 4);
	st_mem_range r[3] = {{a, big, 0}, {b, small, 0}, {c, old - 7, 1}};
	assert_int_equal(st_mem_fill(r, 3, 4), 0);
	/* Linux 5.14 and later allocate the pages now; older kernels leave them to first use. */
	size_t got = resident_pages(a, big);
	assert_true(got == 0 || got == (big + page - 1) / page);
	for (size_t i = 0; i < big; i += 4093)
		assert_int_equal(a[i], 0);
	for (size_t i = 0; i < old - 7; i++)
		if (c[i]) {
			fail_msg("byte %zu of the wiped range is %d", i, c[i]);
			break;
		}
	for (size_t i = old - 7; i < old; i++)
		assert_int_equal(c[i], 0xab); /* past the range: untouched */
	munmap(a, big);
	munmap(b, small);
	munmap(c, old);
	for (int k = 0; k < 3; k++)
		close(fd[k]);
}

static void test_one_thread_and_nothing(void **state)
{
	(void)state;
	int fd;
	size_t len = 3u << 20;
	unsigned char *m = shared(len, &fd);
	memset(m, 1, len);
	st_mem_range r = {m, len, 1};
	assert_int_equal(st_mem_fill(&r, 1, 1), 0);
	assert_int_equal(m[0], 0);
	assert_int_equal(m[len - 1], 0);
	assert_int_equal(st_mem_fill(NULL, 0, 8), 0);
	munmap(m, len);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_populate_and_wipe),
		cmocka_unit_test(test_one_thread_and_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
