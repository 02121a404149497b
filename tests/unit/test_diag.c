/* Unit tests for the diagnostic parser (one sample per compiler output shape it knows, plus the
 * lines it must ignore); the architecture name rule is tested in test_arch.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "verify/compile.h"

static void expect(const st_diag *d, const char *file, int line, int col, const char *sev,
                   const char *msg)
{
	assert_string_equal(d->file, file);
	assert_int_equal(d->line, line);
	assert_int_equal(d->col, col);
	assert_string_equal(d->severity, sev);
	assert_string_equal(d->message, msg);
}

static void test_nvcc_front_end(void **state)
{
	(void)state;
	const char *log =
		"/tmp/sol.cu(12): error: identifier \"foo\" is undefined\n"
		"      foo(x);\n"
		"      ^\n"
		"\n"
		"/tmp/sol.cu(7): warning #177-D: variable \"y\" was declared but never referenced\n"
		"sol.cu(30): error #20: identifier \"bar\" is undefined\n"
		"k.cu(1): catastrophic error: cannot open source file \"nope.h\"\n"
		"k.cu(9): remark: something minor\n"
		"2 errors detected in the compilation of \"/tmp/sol.cu\".\n";
	st_diag *d;
	int n;
	assert_int_equal(st_diag_parse(log, &d, &n), 0);
	assert_int_equal(n, 5);
	expect(&d[0], "/tmp/sol.cu", 12, 0, "error", "identifier \"foo\" is undefined");
	expect(&d[1], "/tmp/sol.cu", 7, 0, "warning",
	       "variable \"y\" was declared but never referenced");
	expect(&d[2], "sol.cu", 30, 0, "error", "identifier \"bar\" is undefined");
	expect(&d[3], "k.cu", 1, 0, "error", "cannot open source file \"nope.h\"");
	expect(&d[4], "k.cu", 9, 0, "note", "something minor");
	st_diags_free(d, n);
}

static void test_nvcc_continuation(void **state)
{
	(void)state;
	const char *log =
		"t.cu(5): error: no instance of function template \"f\" matches\n"
		"          detected during instantiation of \"void g<T>() [with T=int]\" at line 20\n"
		"\n"
		"t.cu(40): error: another\n"
		"    return x + T::nope;\n"
		"               ^\n"
		"          detected during instantiation of \"T h(T) [with T=float]\" at line 3\n"
		"\n"
		"          detected during nothing: after a blank line it belongs to no record\n";
	st_diag *d;
	int n;
	assert_int_equal(st_diag_parse(log, &d, &n), 0);
	assert_int_equal(n, 2);
	expect(&d[0], "t.cu", 5, 0, "error",
	       "no instance of function template \"f\" matches; detected during instantiation of "
	       "\"void g<T>() [with T=int]\" at line 20");
	expect(&d[1], "t.cu", 40, 0, "error",
	       "another; detected during instantiation of \"T h(T) [with T=float]\" at line 3");
	st_diags_free(d, n);
}

static void test_gcc_clang(void **state)
{
	(void)state;
	const char *log =
		"x.c: In function 'main':\n"
		"x.c:3:5: error: unknown type name 'foo'\n"
		"    3 |     foo x;\n"
		"      |     ^~~\n"
		"x.c:10: warning: no column here\n"
		"x.c:4:1: note: declared here\n"
		"In file included from x.c:1:\n"
		"/inc/y.h:2:10: fatal error: nope.h: No such file or directory\r\n"
		"dir:odd/z.c:5:2: error: colon in the path\n"
		"compilation terminated.\n";
	st_diag *d;
	int n;
	assert_int_equal(st_diag_parse(log, &d, &n), 0);
	assert_int_equal(n, 5);
	expect(&d[0], "x.c", 3, 5, "error", "unknown type name 'foo'");
	expect(&d[1], "x.c", 10, 0, "warning", "no column here");
	expect(&d[2], "x.c", 4, 1, "note", "declared here");
	expect(&d[3], "/inc/y.h", 2, 10, "error", "nope.h: No such file or directory");
	expect(&d[4], "dir:odd/z.c", 5, 2, "error", "colon in the path");
	st_diags_free(d, n);
}

static void test_ptxas_nvlink(void **state)
{
	(void)state;
	const char *log =
		"ptxas info    : 0 bytes gmem\n"
		"ptxas info    : Used 32 registers, 360 bytes cmem[0]\n"
		"ptxas error   : Entry function '_Z1kPf' uses too much shared data (0x10000 bytes, "
		"0xc000 max)\n"
		"ptxas fatal   : Unresolved extern function '_Z3foov'\n"
		"nvlink error   : Undefined reference to '_Z3barv' in 'a.o'\n"
		"nvcc fatal   : Unsupported gpu architecture 'compute_999'\n"
		"ptxas warning : Registers are spilled to local memory\n";
	st_diag *d;
	int n;
	assert_int_equal(st_diag_parse(log, &d, &n), 0);
	assert_int_equal(n, 5);
	expect(&d[0], "ptxas", 0, 0, "error",
	       "Entry function '_Z1kPf' uses too much shared data (0x10000 bytes, 0xc000 max)");
	expect(&d[1], "ptxas", 0, 0, "error", "Unresolved extern function '_Z3foov'");
	expect(&d[2], "nvlink", 0, 0, "error", "Undefined reference to '_Z3barv' in 'a.o'");
	expect(&d[3], "nvcc", 0, 0, "error", "Unsupported gpu architecture 'compute_999'");
	expect(&d[4], "ptxas", 0, 0, "warning", "Registers are spilled to local memory");
	st_diags_free(d, n);
}

static void test_linker(void **state)
{
	(void)state;
	const char *log =
		"/usr/bin/ld: /tmp/ccAbc.o: in function `main':\n"
		"x.c:(.text+0x9): undefined reference to `g'\n"
		"/usr/bin/ld: y.c:(.text+0x1a): undefined reference to `h'\n"
		"/usr/bin/ld: main.o: undefined reference to symbol 'sqrt@@GLIBC_2.2.5'\n"
		"/usr/bin/ld: cannot find -lnope: No such file or directory\n"
		"collect2: error: ld returned 1 exit status\n";
	st_diag *d;
	int n;
	assert_int_equal(st_diag_parse(log, &d, &n), 0);
	assert_int_equal(n, 5);
	expect(&d[0], "x.c", 0, 0, "error", "undefined reference to `g'");
	expect(&d[1], "y.c", 0, 0, "error", "undefined reference to `h'");
	expect(&d[2], "", 0, 0, "error", "undefined reference to symbol 'sqrt@@GLIBC_2.2.5'");
	expect(&d[3], "", 0, 0, "error", "cannot find -lnope: No such file or directory");
	expect(&d[4], "", 0, 0, "error", "ld returned 1 exit status");
	st_diags_free(d, n);
}

static void test_dedupe_and_empty(void **state)
{
	(void)state;
	st_diag *d = (st_diag *)1;
	int n = -1;
	assert_int_equal(st_diag_parse("", &d, &n), 0);
	assert_int_equal(n, 0);
	assert_null(d);
	assert_int_equal(st_diag_parse(NULL, &d, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(st_diag_parse("just some text\nno diagnostics (here): at all\n", &d, &n), 0);
	assert_int_equal(n, 0);
	st_diags_free(NULL, 0);

	/* nvcc repeats host+device diagnostics; the same record twice is kept once. No trailing
	 * newline on the last line. */
	const char *log = "a.cu(3): error: dup\na.cu(3): error: dup\na.cu(4): error: dup";
	assert_int_equal(st_diag_parse(log, &d, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(d[1].line, 4);
	st_diags_free(d, n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nvcc_front_end),
		cmocka_unit_test(test_nvcc_continuation),
		cmocka_unit_test(test_gcc_clang),
		cmocka_unit_test(test_ptxas_nvlink),
		cmocka_unit_test(test_linker),
		cmocka_unit_test(test_dedupe_and_empty),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
