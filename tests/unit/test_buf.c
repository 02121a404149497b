/* Unit tests of st_buf, the one way the project builds a string: appends of bytes, strings,
 * characters and printf text land in order and stay NUL-terminated across growth; a va_list
 * append works after the caller has used its own list; an empty buffer reads as "". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/buf.h"

static void test_appends(void **state)
{
	(void)state;
	st_buf b = {0};
	assert_string_equal(st_buf_str(&b), "");
	st_buf_add(&b, "ab", 2);
	st_buf_puts(&b, "cd");
	st_buf_putc(&b, '-');
	st_buf_printf(&b, "%d|%5.2f|%s", 42, 3.14159, "x");
	assert_false(b.oom);
	assert_string_equal(b.p, "abcd-42| 3.14|x");
	assert_int_equal(b.n, strlen(b.p));
	st_buf_puts(&b, "");
	st_buf_printf(&b, "%s", "");
	assert_int_equal(b.n, strlen("abcd-42| 3.14|x"));
	st_buf_free(&b);
	assert_null(b.p);
	assert_int_equal(b.n, 0);
	assert_string_equal(st_buf_str(&b), "");
}

/* Past the first 1 KiB and several doublings: every byte where it was put, one NUL after. */
static void test_growth(void **state)
{
	(void)state;
	st_buf b = {0};
	for (int i = 0; i < 5000; i++)
		st_buf_printf(&b, "%04d,", i);
	assert_false(b.oom);
	assert_int_equal(b.n, 5000 * 5);
	assert_true(b.cap > b.n);
	assert_int_equal(b.p[b.n], '\0');
	char want[8];
	for (int i = 0; i < 5000; i += 499) {
		snprintf(want, sizeof want, "%04d,", i);
		assert_memory_equal(b.p + 5 * i, want, 5);
	}
	/* one printf longer than the buffer's whole capacity */
	size_t before = b.n;
	char *big = malloc(100000);
	assert_non_null(big);
	memset(big, 'z', 99999);
	big[99999] = '\0';
	st_buf_printf(&b, "<%s>", big);
	assert_false(b.oom);
	assert_int_equal(b.n, before + 100001);
	assert_int_equal(b.p[before], '<');
	assert_int_equal(b.p[b.n - 1], '>');
	assert_int_equal(b.p[b.n], '\0');
	free(big);
	st_buf_free(&b);
}

__attribute__((format(printf, 2, 3))) static void twice(st_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	st_buf_vprintf(b, fmt, ap);
	va_end(ap);
	va_start(ap, fmt);
	st_buf_vprintf(b, fmt, ap);
	va_end(ap);
}

static void test_vprintf(void **state)
{
	(void)state;
	st_buf b = {0};
	twice(&b, "[%s %d]", "n", 7);
	assert_string_equal(b.p, "[n 7][n 7]");
	st_buf_free(&b);
}

/* After a failed allocation the buffer keeps what it had and takes nothing more. */
static void test_oom_sticks(void **state)
{
	(void)state;
	st_buf b = {0};
	st_buf_puts(&b, "kept");
	b.oom = 1;
	st_buf_puts(&b, "lost");
	st_buf_printf(&b, "%d", 1);
	st_buf_putc(&b, 'x');
	assert_int_equal(b.n, 4);
	assert_string_equal(b.p, "kept");
	st_buf_free(&b);
	assert_false(b.oom);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_appends),
		cmocka_unit_test(test_growth),
		cmocka_unit_test(test_vprintf),
		cmocka_unit_test(test_oom_sticks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
