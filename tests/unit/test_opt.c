/* Unit tests of the option-table parser (src/common/opt.c): every kind fills its target, and
 * each kind of bad command line (unknown option, missing value, a number that is not whole or
 * not finite, a signed seed, an out-of-range value, an empty list, an unknown enum value, two
 * conflicting options, too many positionals) is refused with a message naming the option. The
 * usage text is checked to come from the table, with the defaults read from the targets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/opt.h"

typedef struct args {
	int flag, on, fmt, n;
	uint64_t seed;
	double t;
	const char *name, *list, *mode;
} args;

static const char *const modes[] = {"fast", "slow", NULL};

/* The table every test parses with, over a. */
static void table(args *a, st_opt *t)
{
	const st_opt x[] = {
		{ST_OPT_FLAG, .name = "flag", 'f', &a->flag, NULL, "a flag"},
		{ST_OPT_FLAG_OFF, .name = "no-on", 0, &a->on, NULL, "turn on off"},
		{ST_OPT_CONST, .name = "csv", 0, &a->fmt, NULL, "csv", .value = 2},
		{ST_OPT_CONST, .name = "md", 0, &a->fmt, NULL, "md", .value = 3},
		{ST_OPT_INT, .name = "n", 'n', &a->n, "N", "a count", 1, 100},
		{ST_OPT_UINT64, .name = "seed", 0, &a->seed, "S", "a seed", .min = 1},
		{ST_OPT_DOUBLE, .name = "time", 0, &a->t, "T", "a time", 0.5, 10},
		{ST_OPT_STRING, .name = "name", 0, &a->name, "NAME", "a name\nsecond line",
		 .unset = "nobody"},
		{ST_OPT_LIST, .name = "list", 0, &a->list, "LIST", "a list"},
		{ST_OPT_ENUM, .name = "mode", 0, &a->mode, "M", "a mode", .values = modes},
		{ST_OPT_END},
	};
	memcpy(t, x, sizeof x);
}

static const st_opt_conflict conflicts[] = {{"csv", "md"}, {"flag", "no-on"}, {NULL, NULL}};

/* Parse the words of line (space-separated; "''" is an empty word) into *a: the status, with
 * the message in err and the positionals in pos. */
static st_status parse(const char *line, args *a, st_err *err, const char **pos, int *n_pos)
{
	static char buf[512];
	static char *argv[32];
	int argc = 0;
	snprintf(buf, sizeof buf, "cmd %s", line);
	for (char *w = strtok(buf, " "); w && argc < 32; w = strtok(NULL, " "))
		argv[argc++] = strcmp(w, "''") ? w : w + 2;
	*a = (args){.on = 1};
	st_opt t[16];
	table(a, t);
	const st_opt *const tables[] = {t, NULL};
	err->msg[0] = 0;
	return st_opt_parse(tables, conflicts, argc, argv, pos, 2, n_pos, err);
}

/* line is refused, and the message has want. */
static void refused(const char *line, const char *want)
{
	args a;
	st_err err;
	const char *pos[2];
	int n;
	assert_int_equal(parse(line, &a, &err, pos, &n), ST_E_INVALID);
	if (!strstr(err.msg, want))
		fail_msg("'%s': message '%s' lacks '%s'", line, err.msg, want);
}

static void test_every_kind(void **state)
{
	(void)state;
	args a;
	st_err err;
	const char *pos[2];
	int n;
	assert_int_equal(parse("-f --md -n 7 --seed 0x10 --time=2.5 --name bob --list a,b "
	                       "--mode slow P1 -- --P2", &a, &err, pos, &n), ST_OK);
	assert_int_equal(a.flag, 1);
	assert_int_equal(a.on, 1);
	assert_int_equal(a.fmt, 3);
	assert_int_equal(a.n, 7);
	assert_int_equal(a.seed, 16);
	assert_true(a.t == 2.5);
	assert_string_equal(a.name, "bob");
	assert_string_equal(a.list, "a,b");
	assert_string_equal(a.mode, "slow");
	assert_int_equal(n, 2);
	assert_string_equal(pos[0], "P1");
	assert_string_equal(pos[1], "--P2"); /* after "--", not an option */
}

static void test_defaults_left_alone(void **state)
{
	(void)state;
	args a;
	st_err err;
	const char *pos[2];
	int n;
	assert_int_equal(parse("-", &a, &err, pos, &n), ST_OK);
	assert_int_equal(n, 1);
	assert_string_equal(pos[0], "-");
	assert_int_equal(a.on, 1);
	assert_int_equal(a.n, 0);
	assert_null(a.name);
	/* the last of a repeated option wins */
	assert_int_equal(parse("-n 3 -n 4", &a, &err, pos, &n), ST_OK);
	assert_int_equal(a.n, 4);
	assert_int_equal(parse("--no-on", &a, &err, pos, &n), ST_OK);
	assert_int_equal(a.on, 0);
}

static void test_bad_input(void **state)
{
	(void)state;
	refused("--frob", "unknown option '--frob'");
	refused("-x", "unknown option '-x'");
	refused("--n", "--n needs a value (N)");
	refused("--n 2.5", "--n: '2.5' is not an integer between 1 and 100");
	refused("--n abc", "--n: 'abc' is not an integer");
	refused("--n 101", "between 1 and 100");
	refused("--n ''", "--n: '' is not an integer");
	refused("--seed -5", "--seed: '-5' is not a positive integer");
	refused("--seed 0", "--seed: '0' is not a positive integer");
	refused("--seed 99999999999999999999999", "--seed");
	refused("--time nan", "--time: 'nan' is not a finite number");
	refused("--time inf", "--time: 'inf' is not a finite number");
	refused("--time 11", "between 0.5 and 10");
	refused("--list ''", "--list needs a value (LIST), not an empty string");
	refused("--list ,", "--list: ',' is not a comma list");
	refused("--list a,,b", "is not a comma list");
	refused("--list a,", "is not a comma list");
	refused("--name ''", "--name needs a value");
	refused("--mode medium", "--mode: 'medium' is not one of: fast, slow");
	refused("--flag=1", "--flag takes no value");
	refused("A B C", "too many arguments at 'C'");
}

static void test_conflicts(void **state)
{
	(void)state;
	refused("--csv --md", "--csv and --md cannot be given together");
	refused("--no-on P --flag", "--flag and --no-on cannot be given together");
	args a;
	st_err err;
	const char *pos[2];
	int n;
	assert_int_equal(parse("--csv --flag", &a, &err, pos, &n), ST_OK);
	assert_int_equal(a.fmt, 2);
}

static void test_parse_one(void **state)
{
	(void)state;
	args a = {0};
	st_opt t[16];
	table(&a, t);
	const st_opt *const tables[] = {t, NULL};
	char *argv[] = {"cmd", "--n", "5", "--other", "--time", "x", NULL};
	st_err err;
	int i = 1;
	assert_int_equal(st_opt_parse_one(tables, 6, argv, &i, &err), 1);
	assert_int_equal(i, 2);
	assert_int_equal(a.n, 5);
	i = 3;
	assert_int_equal(st_opt_parse_one(tables, 6, argv, &i, &err), 0);
	i = 4;
	assert_int_equal(st_opt_parse_one(tables, 6, argv, &i, &err), -1);
	assert_non_null(strstr(err.msg, "--time: 'x'"));
}

static void test_repeatable_and_no_positionals(void **state)
{
	(void)state;
	const char *v[2];
	st_opt_strings dirs = {v, 0, 2};
	const st_opt t[] = {
		{ST_OPT_MULTI, .name = "dir", 0, &dirs, "DIR", "repeatable"},
		{ST_OPT_END},
	};
	const st_opt *const tables[] = {t, NULL};
	char *ok[] = {"cmd", "--dir", "a", "--dir=b", NULL};
	st_err err;
	int n;
	assert_int_equal(st_opt_parse(tables, NULL, 4, ok, NULL, 0, &n, &err), ST_OK);
	assert_int_equal(dirs.n, 2);
	assert_string_equal(v[0], "a");
	assert_string_equal(v[1], "b");
	dirs.n = 0;
	char *three[] = {"cmd", "--dir", "a", "--dir", "b", "--dir", "c", NULL};
	assert_int_equal(st_opt_parse(tables, NULL, 7, three, NULL, 0, &n, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "--dir: more than 2 given"));
	dirs.n = 0;
	char *empty[] = {"cmd", "--dir", "", NULL};
	assert_int_equal(st_opt_parse(tables, NULL, 3, empty, NULL, 0, &n, &err), ST_E_INVALID);
	assert_int_equal(dirs.n, 0);
	char *stray[] = {"cmd", "x", NULL};
	assert_int_equal(st_opt_parse(tables, NULL, 2, stray, NULL, 0, &n, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "unexpected argument 'x'"));
}

static void test_usage_from_table(void **state)
{
	(void)state;
	args a = {.n = 42, .mode = "fast"};
	st_opt t[16];
	table(&a, t);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	st_opt_usage(f, t);
	fclose(f);
	assert_non_null(strstr(text, "  -f, --flag       a flag\n"));
	assert_non_null(strstr(text, "  -n, --n N        a count (default 42)\n"));
	assert_non_null(strstr(text, "  --mode M         a mode (default fast)\n"));
	/* a second help line is aligned under the first, the default after the last */
	assert_non_null(strstr(text, "  --name NAME      a name\n"
	                             "                   second line (default: nobody)\n"));
	/* no default where the target holds none and the table names none */
	assert_non_null(strstr(text, "  --list LIST      a list\n"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_kind),
		cmocka_unit_test(test_defaults_left_alone),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_conflicts),
		cmocka_unit_test(test_parse_one),
		cmocka_unit_test(test_repeatable_and_no_positionals),
		cmocka_unit_test(test_usage_from_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
