/* The option parser and usage printer of opt.h: one table per command drives both, so what
 * --help says is what is parsed. Values are checked as they are read (type, range, finiteness,
 * non-empty) and conflicts once all are read, so that a bad command line fails before any work
 * starts and its message names the option at fault. */
#include "common/opt.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The entry for a long name (len bytes of it) or a short one, and its index over all tables
 * (for the conflict check); NULL when none. */
static const st_opt *find(const st_opt *const *tables, const char *name, size_t len, char sh,
                          int *index)
{
	int k = 0;
	for (int t = 0; tables[t]; t++)
		for (const st_opt *o = tables[t]; o->kind != ST_OPT_END; o++, k++)
			if (sh ? o->short_name == sh
			       : strlen(o->name) == len && !strncmp(o->name, name, len)) {
				*index = k;
				return o;
			}
	return NULL;
}

static int count_options(const st_opt *const *tables)
{
	int k = 0;
	for (int t = 0; tables[t]; t++)
		for (const st_opt *o = tables[t]; o->kind != ST_OPT_END; o++)
			k++;
	return k;
}

static st_status bad_number(const st_opt *o, const char *v, const char *what, st_err *err)
{
	if (o->max > o->min)
		return st_err_set(err, ST_E_INVALID, "--%s: '%s' is not %s between %.15g and %.15g",
		                  o->name, v, what, o->min, o->max);
	if (o->min > 1)
		return st_err_set(err, ST_E_INVALID, "--%s: '%s' is not %s of at least %.15g", o->name,
		                  v, what, o->min);
	return st_err_set(err, ST_E_INVALID, "--%s: '%s' is not %s", o->name, v, what);
}

static st_status set_int(const st_opt *o, const char *v, st_err *err)
{
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	int ranged = o->max > o->min;
	if (errno || end == v || *end || x < INT_MIN || x > INT_MAX ||
	    (ranged && (x < o->min || x > o->max)))
		return bad_number(o, v, "an integer", err);
	*(int *)o->target = (int)x;
	return ST_OK;
}

static st_status set_uint64(const st_opt *o, const char *v, st_err *err)
{
	char *end;
	errno = 0;
	/* strtoull takes "-5" as a huge number; a sign is never meant */
	const char *p = v;
	while (*p == ' ' || *p == '\t')
		p++;
	unsigned long long x = *p == '-' || *p == '+' ? 0 : strtoull(v, &end, 0);
	if (*p == '-' || *p == '+' || errno || end == v || *end || x < o->min ||
	    (o->max > 0 && x > o->max))
		return bad_number(o, v, o->min >= 1 ? "a positive integer" : "an unsigned integer",
		                  err);
	*(uint64_t *)o->target = (uint64_t)x;
	return ST_OK;
}

static st_status set_double(const st_opt *o, const char *v, st_err *err)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	int ranged = o->max > o->min;
	if (errno || end == v || *end || !isfinite(x) || (ranged && (x < o->min || x > o->max)))
		return bad_number(o, v, "a finite number", err);
	*(double *)o->target = x;
	return ST_OK;
}

static st_status set_list(const st_opt *o, const char *v, st_err *err)
{
	/* an empty item is a typo ("small,,eval", "eval,") or an empty list: either way refused */
	for (const char *p = v;; p++) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		if (!len)
			return st_err_set(err, ST_E_INVALID, "--%s: '%s' is not a comma list (an item is "
			                  "empty)", o->name, v);
		if (!c)
			break;
		p = c;
	}
	*(const char **)o->target = v;
	return ST_OK;
}

static st_status set_enum(const st_opt *o, const char *v, st_err *err)
{
	char known[256] = "";
	size_t used = 0;
	for (int i = 0; o->values && o->values[i]; i++) {
		if (!strcmp(v, o->values[i])) {
			*(const char **)o->target = o->values[i];
			return ST_OK;
		}
		int k = snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", o->values[i]);
		if (k > 0 && (size_t)k < sizeof known - used)
			used += (size_t)k;
	}
	return st_err_set(err, ST_E_INVALID, "--%s: '%s' is not one of: %s", o->name, v, known);
}

static st_status set_value(const st_opt *o, const char *v, st_err *err)
{
	if (!*v && o->kind != ST_OPT_INT && o->kind != ST_OPT_UINT64 && o->kind != ST_OPT_DOUBLE)
		return st_err_set(err, ST_E_INVALID, "--%s needs a value (%s), not an empty string",
		                  o->name, o->arg ? o->arg : "VALUE");
	switch (o->kind) {
	case ST_OPT_INT:
		return set_int(o, v, err);
	case ST_OPT_UINT64:
		return set_uint64(o, v, err);
	case ST_OPT_DOUBLE:
		return set_double(o, v, err);
	case ST_OPT_LIST:
		return set_list(o, v, err);
	case ST_OPT_ENUM:
		return set_enum(o, v, err);
	case ST_OPT_MULTI: {
		st_opt_strings *m = o->target;
		if (m->n >= m->max)
			return st_err_set(err, ST_E_INVALID, "--%s: more than %d given", o->name, m->max);
		m->v[m->n++] = v;
		return ST_OK;
	}
	default:
		*(const char **)o->target = v;
		return ST_OK;
	}
}

static int takes_value(const st_opt *o)
{
	return o->kind != ST_OPT_FLAG && o->kind != ST_OPT_FLAG_OFF && o->kind != ST_OPT_CONST;
}

/* One option at argv[*i] (which starts with '-'), its value maybe from argv[*i + 1]. */
static st_status parse_one(const st_opt *const *tables, int argc, char **argv, int *i,
                           char *seen, st_err *err)
{
	const char *a = argv[*i], *value = NULL;
	const st_opt *o;
	int k = 0;
	if (a[1] == '-') {
		const char *eq = strchr(a + 2, '=');
		size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		o = find(tables, a + 2, len, 0, &k);
		value = eq ? eq + 1 : NULL;
	} else {
		o = a[2] ? NULL : find(tables, NULL, 0, a[1], &k);
	}
	if (!o)
		return st_err_set(err, ST_E_INVALID, "unknown option '%s'", a);
	if (seen)
		seen[k] = 1;
	if (!takes_value(o)) {
		if (value)
			return st_err_set(err, ST_E_INVALID, "--%s takes no value", o->name);
		*(int *)o->target = o->kind == ST_OPT_FLAG ? 1 : o->kind == ST_OPT_CONST ? o->value : 0;
		return ST_OK;
	}
	if (!value) {
		if (*i + 1 >= argc)
			return st_err_set(err, ST_E_INVALID, "--%s needs a value (%s)", o->name,
			                  o->arg ? o->arg : "VALUE");
		value = argv[++*i];
	}
	return set_value(o, value, err);
}

int st_opt_parse_one(const st_opt *const *tables, int argc, char **argv, int *i, st_err *err)
{
	const char *a = argv[*i];
	int k;
	if (a[0] != '-' || !a[1])
		return 0;
	if (a[1] == '-') {
		if (!find(tables, a + 2, strcspn(a + 2, "="), 0, &k))
			return 0;
	} else if (a[2] || !find(tables, NULL, 0, a[1], &k)) {
		return 0;
	}
	return parse_one(tables, argc, argv, i, NULL, err) ? -1 : 1;
}

static const st_opt *by_name(const st_opt *const *tables, const char *name, int *k)
{
	return find(tables, name, strlen(name), 0, k);
}

st_status st_opt_parse(const st_opt *const *tables, const st_opt_conflict *conflicts, int argc,
                       char **argv, const char **pos, int max_pos, int *n_pos, st_err *err)
{
	char seen[ST_OPT_MAX] = {0};
	*n_pos = 0;
	if (count_options(tables) > ST_OPT_MAX)
		return st_err_set(err, ST_E_INVALID, "too many options in the tables (at most %d)",
		                  ST_OPT_MAX);
	int options_done = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!options_done && !strcmp(a, "--")) {
			options_done = 1;
			continue;
		}
		if (!options_done && a[0] == '-' && a[1]) {
			st_status s = parse_one(tables, argc, argv, &i, seen, err);
			if (s)
				return s;
			continue;
		}
		if (*n_pos >= max_pos && !max_pos)
			return st_err_set(err, ST_E_INVALID, "unexpected argument '%s'", a);
		if (*n_pos >= max_pos)
			return st_err_set(err, ST_E_INVALID, "too many arguments at '%s' (at most %d)", a,
			                  max_pos);
		pos[(*n_pos)++] = a;
	}
	for (int c = 0; conflicts && conflicts[c].a; c++) {
		int ka = -1, kb = -1;
		if (by_name(tables, conflicts[c].a, &ka) && by_name(tables, conflicts[c].b, &kb) &&
		    seen[ka] && seen[kb])
			return st_err_set(err, ST_E_INVALID, "--%s and --%s cannot be given together",
			                  conflicts[c].a, conflicts[c].b);
	}
	return ST_OK;
}

/* " (default V)" from the target's value, " (default: UNSET)" from the table, or "". */
static void default_text(const st_opt *o, char *buf, size_t len)
{
	buf[0] = 0;
	switch (o->kind) {
	case ST_OPT_INT:
		if (*(const int *)o->target)
			snprintf(buf, len, " (default %d)", *(const int *)o->target);
		break;
	case ST_OPT_UINT64:
		if (*(const uint64_t *)o->target)
			snprintf(buf, len, " (default %llu)",
			         (unsigned long long)*(const uint64_t *)o->target);
		break;
	case ST_OPT_DOUBLE:
		if (*(const double *)o->target != 0)
			snprintf(buf, len, " (default %g)", *(const double *)o->target);
		break;
	case ST_OPT_STRING:
	case ST_OPT_LIST:
	case ST_OPT_ENUM:
		if (*(const char *const *)o->target)
			snprintf(buf, len, " (default %s)", *(const char *const *)o->target);
		break;
	case ST_OPT_MULTI:
		break;
	default:
		return;
	}
	if (!buf[0] && o->unset)
		snprintf(buf, len, " (default: %s)", o->unset);
}

/* text, its lines after the first indented by col (a default may take two lines). */
static void put_indented(FILE *f, const char *text, int col)
{
	for (; *text; text++) {
		fputc(*text, f);
		if (*text == '\n')
			fprintf(f, "%*s", col, "");
	}
}

void st_opt_usage(FILE *f, const st_opt *table)
{
	enum { COL = 19 }; /* where help text starts, as in the hand-written help it replaces */
	for (const st_opt *o = table; o->kind != ST_OPT_END; o++) {
		char left[128], sh[8] = "";
		if (o->short_name)
			snprintf(sh, sizeof sh, "-%c, ", o->short_name);
		const char *arg = takes_value(o) ? (o->arg ? o->arg : "VALUE") : NULL;
		int n = snprintf(left, sizeof left, "  %s--%s%s%s", sh, o->name, arg ? " " : "",
		                 arg ? arg : "");
		fputs(left, f);
		const char *h = o->help ? o->help : "";
		int pad = n <= COL - 2 ? COL - n : 2;
		fprintf(f, "%*s", pad, "");
		char dflt[160];
		default_text(o, dflt, sizeof dflt);
		for (;;) {
			const char *nl = strchr(h, '\n');
			int len = nl ? (int)(nl - h) : (int)strlen(h);
			int last = !nl || !nl[1];
			/* the default goes after the last line, or under it where it would not fit */
			int fits = COL + len + (int)strcspn(dflt, "\n") <= 96;
			fprintf(f, "%.*s", len, h);
			if (last && fits)
				put_indented(f, dflt, COL);
			fputc('\n', f);
			if (last && !fits && dflt[0]) {
				fprintf(f, "%*s", COL, "");
				put_indented(f, dflt + 1, COL);
				fputc('\n', f);
			}
			if (last)
				break;
			h = nl + 1;
			fprintf(f, "%*s", COL, "");
		}
	}
}
