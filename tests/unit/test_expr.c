/* Unit tests of the shape/cost expression evaluator: grammar, functions, names, literals, and
 * the errors that must say where in the text they happened. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "task/expr.h"

static char *names[] = {"rows", "cols", "big"};
static int64_t values[] = {8, 1000, INT64_MAX / 2};
static const st_size_set sizes = {"eval", 3, names, values};

static int64_t eval_ok(const char *text)
{
	int64_t v = -12345;
	st_err err = {{0}};
	st_status s = st_expr_eval(text, &sizes, &v, &err);
	if (s != ST_OK)
		fail_msg("'%s' failed: %s", text, err.msg);
	return v;
}

/* Evaluates `text`, expects failure, and checks the message holds `part`. */
static void eval_fails(const char *text, const char *part)
{
	int64_t v = 0;
	st_err err = {{0}};
	assert_int_equal(st_expr_eval(text, &sizes, &v, &err), ST_E_INVALID);
	if (!strstr(err.msg, part))
		fail_msg("'%s': message '%s' lacks '%s'", text, err.msg, part);
}

static void test_precedence(void **state)
{
	(void)state;
	assert_int_equal(eval_ok("2+3*4"), 14);
	assert_int_equal(eval_ok("2*3+4"), 10);
	assert_int_equal(eval_ok("10-4-3"), 3);
	assert_int_equal(eval_ok("100/10/5"), 2);
	assert_int_equal(eval_ok("17%5*2"), 4);
	assert_int_equal(eval_ok("  7 +  1 "), 8);
}

static void test_parentheses(void **state)
{
	(void)state;
	assert_int_equal(eval_ok("(2+3)*4"), 20);
	assert_int_equal(eval_ok("((1+2)*(3+4))"), 21);
	assert_int_equal(eval_ok("100/(10/5)"), 50);
}

static void test_unary_minus(void **state)
{
	(void)state;
	assert_int_equal(eval_ok("-5"), -5);
	assert_int_equal(eval_ok("--5"), 5);
	assert_int_equal(eval_ok("3*-2"), -6);
	assert_int_equal(eval_ok("-(rows+2)"), -10);
	assert_int_equal(eval_ok("+4"), 4);
	assert_int_equal(eval_ok("-7/2"), -3); /* C truncation */
}

static void test_functions(void **state)
{
	(void)state;
	assert_int_equal(eval_ok("min(rows, cols)"), 8);
	assert_int_equal(eval_ok("max(rows,cols)"), 1000);
	assert_int_equal(eval_ok("cdiv(cols, 128)"), 8);
	assert_int_equal(eval_ok("cdiv(1024, 128)"), 8);
	assert_int_equal(eval_ok("cdiv(1, 128)"), 1);
	assert_int_equal(eval_ok("log2(cols)"), 9);
	assert_int_equal(eval_ok("log2(1024)"), 10);
	assert_int_equal(eval_ok("log2(1)"), 0);
	assert_int_equal(eval_ok("max(min(rows, 4), log2 (16)) * 2"), 8);
	eval_fails("log2(0)", "log2");
	eval_fails("cdiv(4, 0)", "division by zero");
	eval_fails("foo(1)", "unknown function 'foo'");
	eval_fails("min(1)", "expected ','");
	eval_fails("min(1,2", "expected ')'");
}

static void test_names(void **state)
{
	(void)state;
	assert_int_equal(eval_ok("rows*cols"), 8000);
	assert_int_equal(eval_ok("4*rows*cols + cols"), 33000);
	eval_fails("rows*colz", "unknown name 'colz' at 5 in \"rows*colz\"");
	eval_fails("row", "unknown name 'row' at 0");
}

static void test_literals(void **state)
{
	(void)state;
	assert_int_equal(eval_ok("1e6"), 1000000);
	assert_int_equal(eval_ok("2E3+1"), 2001);
	assert_int_equal(eval_ok("0"), 0);
	assert_int_equal(eval_ok("9223372036854775807"), INT64_MAX);
	eval_fails("9223372036854775808", "overflow");
	eval_fails("1e19", "overflow");
	eval_fails("1e", "exponent");
	eval_fails("2x", "unexpected 'x' at 1");
}

static void test_overflow(void **state)
{
	(void)state;
	eval_fails("big*3", "overflow at 3");
	eval_fails("big+big+big", "overflow");
	eval_fails("-big-big-big", "overflow");
	eval_fails("9223372036854775807+1", "overflow");
	assert_int_equal(eval_ok("big*2"), INT64_MAX - 1);
}

static void test_division_by_zero(void **state)
{
	(void)state;
	eval_fails("rows/0", "division by zero at 4 in \"rows/0\"");
	eval_fails("rows%(cols-cols)", "division by zero");
	assert_int_equal(eval_ok("rows%3"), 2);
}

static void test_syntax_errors(void **state)
{
	(void)state;
	eval_fails("rows cols", "unexpected 'c' after the expression at 5");
	eval_fails("rows)", "unexpected ')' after the expression at 4");
	eval_fails("rows*", "unexpected end at 5");
	eval_fails("(rows", "expected ')'");
	eval_fails("", "empty expression");
	eval_fails("   ", "empty expression");
	eval_fails("rows $ 2", "unexpected '$' after the expression at 5");
	eval_fails("*3", "unexpected '*' at 0");

	/* Deep nesting is refused rather than overflowing the stack. */
	char deep[400];
	memset(deep, '(', 200);
	deep[200] = '1';
	memset(deep + 201, ')', 198);
	deep[399] = '\0';
	eval_fails(deep, "nested too deeply");
}

static void test_check_vs_eval(void **state)
{
	(void)state;
	char *known[] = {"rows", "cols"};
	st_err err = {{0}};
	assert_int_equal(st_expr_check("cdiv(rows, 128) * cols", known, 2, &err), ST_OK);
	/* Division by zero depends on the values, which check does not have. */
	assert_int_equal(st_expr_check("rows / (cols - cols)", known, 2, &err), ST_OK);
	assert_int_equal(st_expr_check("rows*colz", known, 2, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "unknown name 'colz' at 5"));
	assert_int_equal(st_expr_check("rows +", known, 2, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "unexpected end"));
	assert_int_equal(st_expr_check("big", known, 2, &err), ST_E_INVALID);
	/* The same text under eval, where the values make it fail. */
	assert_int_equal(st_expr_eval("rows / (cols - cols)", &sizes, &(int64_t){0}, &err),
	                 ST_E_INVALID);
	/* No size set at all: literals still work. */
	int64_t v = 0;
	assert_int_equal(st_expr_eval("3*4", NULL, &v, &err), ST_OK);
	assert_int_equal(v, 12);
	assert_int_equal(st_expr_eval(NULL, &sizes, &v, &err), ST_E_INVALID);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_precedence),      cmocka_unit_test(test_parentheses),
		cmocka_unit_test(test_unary_minus),     cmocka_unit_test(test_functions),
		cmocka_unit_test(test_names),           cmocka_unit_test(test_literals),
		cmocka_unit_test(test_overflow),        cmocka_unit_test(test_division_by_zero),
		cmocka_unit_test(test_syntax_errors),   cmocka_unit_test(test_check_vs_eval),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
