/* Unit tests of st_utf8_clean, which makes outside text (a compiler's log, what a solution
 * printed) storable in JSON and safe to print: valid UTF-8 passes byte for byte, every invalid
 * byte (a cut sequence, an overlong form, a surrogate, a NUL) becomes one '?' so the length
 * never changes, and with `controls` so does each control character but newline and tab,
 * C1 controls included; st_utf8_cut moves a cut back to a character's first byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/utf8.h"

static void expect(const char *in, size_t n, int controls, const char *want)
{
	char *out = st_utf8_clean(in, n, controls);
	assert_non_null(out);
	assert_int_equal(strlen(out), n);
	assert_string_equal(out, want);
	free(out);
}

static void test_valid_text_passes(void **state)
{
	(void)state;
	const char *s = "caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80\tok\n";
	expect(s, strlen(s), 0, s);
	expect(s, strlen(s), 1, s);
}

static void test_invalid_bytes_become_marks(void **state)
{
	(void)state;
	/* a NUL inside, a lone continuation byte, a sequence cut by the end */
	expect("a\0b\x80" "c\xe2\x80", 7, 0, "a?b?c??");
	/* an overlong '/' and a UTF-16 surrogate are not UTF-8 */
	expect("\xc0\xaf|\xed\xa0\x80", 6, 0, "??|???");
}

static void test_controls(void **state)
{
	(void)state;
	/* a terminal escape, a carriage return, DEL and C1's CSI (U+009B) */
	const char *s = "\x1b[2Jx\ry\x7f\xc2\x9bz\n\t";
	expect(s, strlen(s), 1, "?[2Jx?y???z\n\t");
	/* kept where the caller stores a log that must read back as it was */
	expect(s, strlen(s), 0, s);
}

static void test_cut(void **state)
{
	(void)state;
	const char *s = "a\xe2\x80\x94" "b"; /* a, an em dash (3 bytes), b */
	assert_int_equal(st_utf8_cut(s, 0), 0);
	assert_int_equal(st_utf8_cut(s, 1), 1);
	assert_int_equal(st_utf8_cut(s, 2), 1); /* inside the dash */
	assert_int_equal(st_utf8_cut(s, 3), 1);
	assert_int_equal(st_utf8_cut(s, 4), 4);
	assert_int_equal(st_utf8_cut(s, 5), 5); /* at the NUL */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_text_passes),
		cmocka_unit_test(test_invalid_bytes_become_marks),
		cmocka_unit_test(test_controls),
		cmocka_unit_test(test_cut),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
