/* Unit tests of st_vprogress, the one formatter of progress lines: the line as printf makes it,
 * cut at the caller's length (and at ST_PROGRESS_MAX), and nothing done without a callback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "common/progress.h"

typedef struct seen {
	int calls;
	char line[ST_PROGRESS_MAX + 16];
} seen;

static void record(void *arg, const char *line)
{
	seen *s = arg;
	s->calls++;
	snprintf(s->line, sizeof s->line, "%s", line);
}

__attribute__((format(printf, 4, 5))) static void say(void (*fn)(void *, const char *), void *arg,
                                                       size_t max, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	st_vprogress(fn, arg, max, fmt, ap);
	va_end(ap);
}

static void test_line(void **state)
{
	(void)state;
	seen s = {0};
	say(record, &s, 512, "compile %s (%d of %d)", "candidate", 2, 3);
	assert_int_equal(s.calls, 1);
	assert_string_equal(s.line, "compile candidate (2 of 3)");
	/* no callback: nothing happens (a NULL arg would crash a call) */
	say(NULL, NULL, 512, "%s", "unseen");
	assert_int_equal(s.calls, 1);
}

static void test_cut(void **state)
{
	(void)state;
	seen s = {0};
	char big[6000];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	say(record, &s, 8, "%s", "abcdefghij");
	assert_string_equal(s.line, "abcdefg");
	say(record, &s, 1200, "%s", big);
	assert_int_equal(strlen(s.line), 1199);
	say(record, &s, 100000, "%s", big);
	assert_int_equal(strlen(s.line), ST_PROGRESS_MAX - 1);
	say(record, &s, 0, "%s", big);
	assert_int_equal(strlen(s.line), ST_PROGRESS_MAX - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_line),
		cmocka_unit_test(test_cut),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
