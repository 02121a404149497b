/* The one rule for GPU architecture names (src/common/arch.c): task.json's "archs", `--arch`
 * and the compile step all accept exactly sm_<NN>[a|f], and the name for a compute
 * capability. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/arch.h"

static void test_from_cc(void **state)
{
	(void)state;
	char a[16];
	st_arch_from_cc(9, 0, a, sizeof a);
	assert_string_equal(a, "sm_90a");
	st_arch_from_cc(10, 0, a, sizeof a);
	assert_string_equal(a, "sm_100a");
	st_arch_from_cc(8, 9, a, sizeof a);
	assert_string_equal(a, "sm_89");
	st_arch_from_cc(8, 0, a, sizeof a);
	assert_string_equal(a, "sm_80");
	st_arch_from_cc(12, 0, a, sizeof a);
	assert_string_equal(a, "sm_120");
}

static void test_valid(void **state)
{
	(void)state;
	assert_int_equal(st_arch_valid("sm_90a"), 0);
	assert_int_equal(st_arch_valid("sm_90"), 0);
	assert_int_equal(st_arch_valid("sm_80"), 0);
	assert_int_equal(st_arch_valid("sm_100a"), 0);
	assert_int_equal(st_arch_valid("sm_100f"), 0);
	assert_int_equal(st_arch_valid("sm_120"), 0);
}

static void test_invalid(void **state)
{
	(void)state;
	/* one digit: task.json's old rule let this through while --arch refused it */
	assert_true(st_arch_valid("sm_8") != 0);
	assert_true(st_arch_valid("sm_9") != 0);
	assert_true(st_arch_valid("sm_8a") != 0);
	assert_true(st_arch_valid("sm_1000") != 0);
	assert_true(st_arch_valid("sm_90b") != 0);
	assert_true(st_arch_valid("sm_90aa") != 0);
	assert_true(st_arch_valid("sm_90af") != 0);
	assert_true(st_arch_valid("compute_90") != 0);
	assert_true(st_arch_valid("SM_90") != 0);
	assert_true(st_arch_valid("sm_") != 0);
	assert_true(st_arch_valid("sm_a") != 0);
	assert_true(st_arch_valid("") != 0);
	assert_true(st_arch_valid(NULL) != 0);
	assert_true(st_arch_valid("sm_90 -o/x") != 0);
	assert_true(st_arch_valid(" sm_90") != 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_from_cc),
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_invalid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
