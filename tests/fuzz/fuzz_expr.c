/* libFuzzer harness for the shape and cost expression evaluator: arbitrary text through
 * st_expr_eval, under small and under huge size values so that the overflow checks are reached,
 * and through st_expr_check. The two modes must agree: check mode forgives only arithmetic it
 * cannot know without values, so text that fails the check must fail to evaluate too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "task/expr.h"
#include "task/task.h"

static char *names[] = {"a", "b", "n", "rows", "cols"};
static int64_t small_values[] = {3, 7, 1, 4096, 8192};
static int64_t huge_values[] = {INT64_MAX, INT64_MAX / 2 + 1, 1, 3037000500, 4294967296};
static const st_size_set small = {"small", 5, names, small_values};
static const st_size_set huge = {"huge", 5, names, huge_values};

static void fail(const char *what, const char *text)
{
	fprintf(stderr, "fuzz_expr: %s for \"%s\"\n", what, text);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	st_err check_err, e;
	int64_t v;
	memset(check_err.msg, 'x', sizeof check_err.msg);
	st_status checked = st_expr_check(text, names, 5, &check_err);
	if (checked && !memchr(check_err.msg, 0, sizeof check_err.msg))
		fail("unterminated message", text);
	const st_size_set *sets[] = {&small, &huge};
	for (int i = 0; i < 2; i++) {
		st_status s = st_expr_eval(text, sets[i], &v, &e);
		if (!s && checked)
			fail("evaluates but fails the check", text);
	}
	/* Fewer names known than used: the check must name the unknown one, never read past. */
	if (st_expr_check(text, names, 2, &e) == ST_OK && checked)
		fail("passes with fewer names", text);
	st_expr_eval(text, NULL, &v, &e);
	free(text);
	return 0;
}
