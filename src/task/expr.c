/* The integer expression evaluator behind shapes and cost models: a recursive-descent parser
 * over int64 that evaluates as it parses. Every arithmetic step is overflow-checked, because a
 * wrapped size would silently allocate the wrong buffer. The same parser runs in a "check" mode
 * at task load time, where only names are known, so a typo fails when the task is loaded rather
 * than when a verify first evaluates the shape. */
#include "expr.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define EXPR_MAX_DEPTH 64

typedef struct parser {
	const char *text;
	const char *p;
	const st_size_set *sizes;  /* eval mode */
	char *const *names;        /* check mode (sizes == NULL) */
	int n_names;
	int depth;
	st_err *err;
} parser;

static st_status parse_sum(parser *ps, int64_t *out);

static int checking(const parser *ps)
{
	return ps->sizes == NULL;
}

static int pos_of(const parser *ps, const char *at)
{
	return (int)(at - ps->text);
}

static st_status fail_at(parser *ps, const char *at, const char *what)
{
	return st_err_set(ps->err, ST_E_INVALID, "%s at %d in \"%s\"", what, pos_of(ps, at),
	                  ps->text);
}

/* Arithmetic errors are unknowable without values, so check mode lets them pass. */
static st_status arith_fail(parser *ps, const char *at, const char *what, int64_t *out)
{
	if (checking(ps)) {
		*out = 1;
		return ST_OK;
	}
	return fail_at(ps, at, what);
}

static void skip_space(parser *ps)
{
	while (isspace((unsigned char)*ps->p))
		ps->p++;
}

static int is_name_start(char c)
{
	return isalpha((unsigned char)c) || c == '_';
}

static int is_name_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

static st_status unexpected(parser *ps)
{
	char what[64];
	if (*ps->p == '\0')
		return fail_at(ps, ps->p, "unexpected end");
	snprintf(what, sizeof what, "unexpected '%c'", *ps->p);
	return fail_at(ps, ps->p, what);
}

static st_status expect_char(parser *ps, char c)
{
	skip_space(ps);
	if (*ps->p != c) {
		char what[64];
		if (*ps->p == '\0')
			snprintf(what, sizeof what, "expected '%c' but the text ends", c);
		else
			snprintf(what, sizeof what, "expected '%c' but found '%c'", c, *ps->p);
		return fail_at(ps, ps->p, what);
	}
	ps->p++;
	return ST_OK;
}

static st_status apply_mul(parser *ps, const char *at, int64_t a, int64_t b, int64_t *out)
{
	if (__builtin_mul_overflow(a, b, out))
		return arith_fail(ps, at, "overflow", out);
	return ST_OK;
}

static st_status parse_number(parser *ps, int64_t *out)
{
	const char *start = ps->p;
	int64_t v = 0;
	while (isdigit((unsigned char)*ps->p)) {
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (int64_t)(*ps->p - '0'), &v))
			return fail_at(ps, start, "overflow in literal");
		ps->p++;
	}
	if (*ps->p == 'e' || *ps->p == 'E') {
		const char *e = ps->p++;
		if (!isdigit((unsigned char)*ps->p))
			return fail_at(ps, e, "exponent needs digits");
		int exp = 0;
		while (isdigit((unsigned char)*ps->p)) {
			exp = exp * 10 + (*ps->p - '0');
			if (exp > 18)
				return fail_at(ps, start, "overflow in literal");
			ps->p++;
		}
		for (int i = 0; i < exp; i++)
			if (__builtin_mul_overflow(v, 10, &v))
				return fail_at(ps, start, "overflow in literal");
	}
	if (is_name_char(*ps->p))
		return unexpected(ps);
	*out = v;
	return ST_OK;
}

static st_status lookup_name(parser *ps, const char *at, size_t len, int64_t *out)
{
	if (checking(ps)) {
		for (int i = 0; i < ps->n_names; i++)
			if (strlen(ps->names[i]) == len && !strncmp(ps->names[i], at, len)) {
				*out = 1;
				return ST_OK;
			}
	} else {
		for (int i = 0; i < ps->sizes->n; i++)
			if (strlen(ps->sizes->names[i]) == len && !strncmp(ps->sizes->names[i], at, len)) {
				*out = ps->sizes->values[i];
				return ST_OK;
			}
	}
	char what[160];
	snprintf(what, sizeof what, "unknown name '%.*s'", (int)(len > 100 ? 100 : len), at);
	return fail_at(ps, at, what);
}

static int64_t floor_log2(int64_t a)
{
	int64_t r = 0;
	while (a > 1) {
		a >>= 1;
		r++;
	}
	return r;
}

static st_status apply_div(parser *ps, const char *at, int64_t a, int64_t b, int ceil,
                           int64_t *out)
{
	if (b == 0)
		return arith_fail(ps, at, "division by zero", out);
	if (a == INT64_MIN && b == -1)
		return arith_fail(ps, at, "overflow", out);
	int64_t q = a / b;
	if (ceil && a % b != 0 && ((a < 0) == (b < 0)))
		q++;
	*out = q;
	return ST_OK;
}

static st_status call_function(parser *ps, const char *fn, size_t len, int64_t *out)
{
	static const struct { const char *name; int argc; } fns[] = {
		{"min", 2}, {"max", 2}, {"cdiv", 2}, {"log2", 1},
	};
	int which = -1;
	for (int i = 0; i < (int)(sizeof fns / sizeof fns[0]); i++)
		if (strlen(fns[i].name) == len && !strncmp(fns[i].name, fn, len))
			which = i;
	if (which < 0) {
		char what[160];
		snprintf(what, sizeof what, "unknown function '%.*s' (known: min max cdiv log2)",
		         (int)(len > 100 ? 100 : len), fn);
		return fail_at(ps, fn, what);
	}
	int64_t args[2] = {0, 0};
	ps->p++; /* '(' */
	for (int i = 0; i < fns[which].argc; i++) {
		if (i > 0) {
			st_status s = expect_char(ps, ',');
			if (s)
				return s;
		}
		st_status s = parse_sum(ps, &args[i]);
		if (s)
			return s;
	}
	st_status s = expect_char(ps, ')');
	if (s)
		return s;
	switch (which) {
	case 0: *out = args[0] < args[1] ? args[0] : args[1]; return ST_OK;
	case 1: *out = args[0] > args[1] ? args[0] : args[1]; return ST_OK;
	case 2: return apply_div(ps, fn, args[0], args[1], 1, out);
	default:
		if (args[0] <= 0)
			return arith_fail(ps, fn, "log2 of a value <= 0", out);
		*out = floor_log2(args[0]);
		return ST_OK;
	}
}

static st_status parse_primary(parser *ps, int64_t *out)
{
	skip_space(ps);
	const char *at = ps->p;
	if (isdigit((unsigned char)*at))
		return parse_number(ps, out);
	if (*at == '(') {
		ps->p++;
		st_status s = parse_sum(ps, out);
		return s ? s : expect_char(ps, ')');
	}
	if (!is_name_start(*at))
		return unexpected(ps);
	while (is_name_char(*ps->p))
		ps->p++;
	size_t len = (size_t)(ps->p - at);
	const char *after = ps->p;
	skip_space(ps);
	if (*ps->p == '(')
		return call_function(ps, at, len, out);
	ps->p = after;
	return lookup_name(ps, at, len, out);
}

static st_status parse_unary(parser *ps, int64_t *out)
{
	if (++ps->depth > EXPR_MAX_DEPTH)
		return fail_at(ps, ps->p, "nested too deeply");
	skip_space(ps);
	st_status s;
	const char *at = ps->p;
	if (*at == '-' || *at == '+') {
		ps->p++;
		int64_t v;
		s = parse_unary(ps, &v);
		if (!s && *at == '-') {
			if (v == INT64_MIN)
				s = arith_fail(ps, at, "overflow", out);
			else
				*out = -v;
		} else if (!s) {
			*out = v;
		}
	} else {
		s = parse_primary(ps, out);
	}
	ps->depth--;
	return s;
}

static st_status parse_product(parser *ps, int64_t *out)
{
	st_status s = parse_unary(ps, out);
	for (;;) {
		if (s)
			return s;
		skip_space(ps);
		const char *at = ps->p;
		char op = *at;
		if (op != '*' && op != '/' && op != '%')
			return ST_OK;
		ps->p++;
		int64_t rhs;
		s = parse_unary(ps, &rhs);
		if (s)
			return s;
		if (op == '*') {
			s = apply_mul(ps, at, *out, rhs, out);
		} else if (op == '/') {
			s = apply_div(ps, at, *out, rhs, 0, out);
		} else if (rhs == 0) {
			s = arith_fail(ps, at, "division by zero", out);
		} else {
			*out = (rhs == -1) ? 0 : *out % rhs;
		}
	}
}

static st_status parse_sum(parser *ps, int64_t *out)
{
	st_status s = parse_product(ps, out);
	for (;;) {
		if (s)
			return s;
		skip_space(ps);
		const char *at = ps->p;
		char op = *at;
		if (op != '+' && op != '-')
			return ST_OK;
		ps->p++;
		int64_t rhs;
		s = parse_product(ps, &rhs);
		if (s)
			return s;
		int over = (op == '+') ? __builtin_add_overflow(*out, rhs, out)
		                       : __builtin_sub_overflow(*out, rhs, out);
		if (over)
			s = arith_fail(ps, at, "overflow", out);
	}
}

static st_status parse_all(parser *ps, int64_t *out)
{
	if (!ps->text)
		return st_err_set(ps->err, ST_E_INVALID, "no expression");
	skip_space(ps);
	if (*ps->p == '\0')
		return st_err_set(ps->err, ST_E_INVALID, "empty expression");
	int64_t v = 0;
	st_status s = parse_sum(ps, &v);
	if (s)
		return s;
	skip_space(ps);
	if (*ps->p != '\0') {
		char what[64];
		snprintf(what, sizeof what, "unexpected '%c' after the expression", *ps->p);
		return fail_at(ps, ps->p, what);
	}
	*out = v;
	return ST_OK;
}

st_status st_expr_eval(const char *text, const st_size_set *sizes, int64_t *out, st_err *err)
{
	static const st_size_set empty = {0};
	parser ps = {.text = text, .p = text, .sizes = sizes ? sizes : &empty, .err = err};
	return parse_all(&ps, out);
}

st_status st_expr_check(const char *text, char *const *names, int n_names, st_err *err)
{
	parser ps = {.text = text, .p = text, .names = names, .n_names = n_names, .err = err};
	int64_t ignored;
	return parse_all(&ps, &ignored);
}
