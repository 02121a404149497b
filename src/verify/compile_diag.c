/* Compiler output to diagnostic records (file, line, column, severity, message) for verdicts and
 * for the agents' repair prompts. Compilers are not consistent, so this recognises a handful of
 * line shapes (nvcc front end, gcc/clang, ptxas/nvlink and other CUDA tools, the GNU linker) and
 * ignores everything else, such as source excerpts and caret lines; the raw log always travels
 * beside the records, so a line missed here loses nothing. */
#include "verify/compile.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/grow.h"

/* Enough for any real repair loop; a template error cascade can print thousands. */
#define ST_DIAG_MAX 256

typedef struct st_diag_list {
	st_diag *d;
	int n, cap;
} st_diag_list;

static char *st_strndup0(const char *s, size_t n)
{
	char *p = malloc(n + 1);
	if (p) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

static void st_diag_clear(st_diag *d)
{
	free(d->file);
	free(d->severity);
	free(d->message);
	memset(d, 0, sizeof *d);
}

void st_diags_free(st_diag *d, int n)
{
	if (!d)
		return;
	for (int i = 0; i < n; i++)
		st_diag_clear(&d[i]);
	free(d);
}

void st_diags_errors_first(st_diag *d, int n)
{
	/* Stable: a bubble of each error to the end of the errors before it (n <= ST_DIAG_MAX). */
	for (int i = 0, errors = 0; i < n; i++) {
		if (strcmp(d[i].severity, "error"))
			continue;
		st_diag e = d[i];
		memmove(&d[errors + 1], &d[errors], (size_t)(i - errors) * sizeof *d);
		d[errors++] = e;
	}
}

static int st_streq0(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

/* Appends one record, trimming the message; nvcc repeats a diagnostic when a function is compiled
 * for host and device, so an exact duplicate is dropped. Returns -1 on allocation failure. */
static int st_diag_add(st_diag_list *l, const char *file, size_t file_len, int line, int col,
                       const char *sev, const char *msg, size_t msg_len)
{
	while (file_len > 0 && isspace((unsigned char)file[0])) {
		file++;
		file_len--;
	}
	while (msg_len > 0 && isspace((unsigned char)msg[0])) {
		msg++;
		msg_len--;
	}
	while (msg_len > 0 && isspace((unsigned char)msg[msg_len - 1]))
		msg_len--;
	st_diag d = { 0 };
	d.file = st_strndup0(file, file_len);
	d.severity = st_strndup0(sev, strlen(sev));
	d.message = st_strndup0(msg, msg_len);
	d.line = line;
	d.col = col;
	if (!d.file || !d.severity || !d.message) {
		st_diag_clear(&d);
		return -1;
	}
	for (int i = 0; i < l->n; i++) {
		st_diag *o = &l->d[i];
		if (o->line == d.line && o->col == d.col && st_streq0(o->file, d.file) &&
		    st_streq0(o->severity, d.severity) && st_streq0(o->message, d.message)) {
			st_diag_clear(&d);
			return 0;
		}
	}
	if (l->n >= ST_DIAG_MAX) {
		st_diag_clear(&d);
		return 0;
	}
	if (ST_GROW(l->d, l->cap, l->n + 1, 8)) {
		st_diag_clear(&d);
		return -1;
	}
	l->d[l->n++] = d;
	return 0;
}

/* Appends a continuation line to the last record's message ("; " joined). */
static int st_diag_extend(st_diag_list *l, const char *s, size_t n)
{
	while (n > 0 && isspace((unsigned char)s[0])) {
		s++;
		n--;
	}
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		n--;
	st_diag *d = &l->d[l->n - 1];
	size_t old = strlen(d->message);
	char *m = realloc(d->message, old + n + 3);
	if (!m)
		return -1;
	memcpy(m + old, "; ", 2);
	memcpy(m + old + 2, s, n);
	m[old + 2 + n] = '\0';
	d->message = m;
	return 0;
}

/* Matches a severity word at s (within [s, end)); returns the canonical name and sets *after
 * to just past the word, or NULL. "fatal error" and nvcc's "catastrophic error" are errors. */
static const char *st_match_severity(const char *s, const char *end, const char **after)
{
	static const struct {
		const char *word, *sev;
	} words[] = {
		{ "catastrophic error", "error" }, { "fatal error", "error" }, { "error", "error" },
		{ "warning", "warning" },          { "remark", "note" },      { "note", "note" },
	};
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
		size_t n = strlen(words[i].word);
		if ((size_t)(end - s) >= n && strncmp(s, words[i].word, n) == 0) {
			*after = s + n;
			return words[i].sev;
		}
	}
	return NULL;
}

/* After a severity word: optional " #20" or " #177-D" (nvcc diagnostic numbers), then ':'.
 * Returns the start of the message, or NULL. */
static const char *st_after_severity(const char *p, const char *end)
{
	if (p + 2 < end && p[0] == ' ' && p[1] == '#' && isdigit((unsigned char)p[2])) {
		p += 2;
		while (p < end && (isalnum((unsigned char)*p) || *p == '-'))
			p++;
	}
	if (p < end && *p == ':')
		return p + 1;
	return NULL;
}

static int st_parse_int(const char **p, const char *end, int *v)
{
	const char *s = *p;
	long x = 0;
	while (s < end && isdigit((unsigned char)*s) && x < 100000000)
		x = x * 10 + (*s++ - '0');
	if (s == *p)
		return 0;
	*p = s;
	*v = (int)x;
	return 1;
}

/* nvcc front end: "path(LINE): error: msg", "path(LINE): warning #177-D: msg". */
static int st_try_nvcc(st_diag_list *l, const char *s, const char *end, int *matched)
{
	for (const char *q = s; q < end; q++) {
		if (*q != '(' || q == s)
			continue;
		const char *p = q + 1;
		int line;
		if (!st_parse_int(&p, end, &line) || p + 3 > end || p[0] != ')' || p[1] != ':' ||
		    p[2] != ' ')
			continue;
		const char *after;
		const char *sev = st_match_severity(p + 3, end, &after);
		const char *msg = sev ? st_after_severity(after, end) : NULL;
		if (!msg)
			continue;
		*matched = 1;
		return st_diag_add(l, s, (size_t)(q - s), line, 0, sev, msg, (size_t)(end - msg));
	}
	return 0;
}

/* gcc/clang: "path:LINE:COL: error: msg" and "path:LINE: error: msg". The first ':' that is
 * followed by a number is not necessarily the right one (a path may hold ':'), so every
 * candidate position is tried. */
static int st_try_gcc(st_diag_list *l, const char *s, const char *end, int *matched)
{
	for (const char *q = s; q < end; q++) {
		if (*q != ':' || q == s)
			continue;
		const char *p = q + 1;
		int line, col = 0;
		if (!st_parse_int(&p, end, &line) || p >= end || *p != ':')
			continue;
		p++;
		const char *c = p;
		if (st_parse_int(&c, end, &col) && c < end && *c == ':')
			p = c + 1;
		else
			col = 0;
		if (p >= end || *p != ' ')
			continue;
		const char *after;
		const char *sev = st_match_severity(p + 1, end, &after);
		const char *msg = sev ? st_after_severity(after, end) : NULL;
		if (!msg)
			continue;
		*matched = 1;
		return st_diag_add(l, s, (size_t)(q - s), line, col, sev, msg, (size_t)(end - msg));
	}
	return 0;
}

/* CUDA tools: "ptxas error   : msg", "ptxas fatal   : msg", "nvlink error   : msg",
 * "nvcc fatal   : msg". "info" lines (register counts) are not diagnostics. */
static int st_try_tool(st_diag_list *l, const char *s, const char *end, int *matched)
{
	static const char *tools[] = { "ptxas", "nvlink", "nvcc", "fatbinary", "cicc", "cudafe++" };
	for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
		size_t n = strlen(tools[i]);
		if ((size_t)(end - s) <= n || strncmp(s, tools[i], n) != 0 || s[n] != ' ')
			continue;
		const char *p = s + n;
		while (p < end && *p == ' ')
			p++;
		const char *sev = NULL;
		if ((size_t)(end - p) >= 5 && strncmp(p, "error", 5) == 0) {
			sev = "error";
			p += 5;
		} else if ((size_t)(end - p) >= 5 && strncmp(p, "fatal", 5) == 0) {
			sev = "error";
			p += 5;
		} else if ((size_t)(end - p) >= 7 && strncmp(p, "warning", 7) == 0) {
			sev = "warning";
			p += 7;
		} else {
			return 0;
		}
		while (p < end && *p == ' ')
			p++;
		if (p >= end || *p != ':')
			return 0;
		*matched = 1;
		return st_diag_add(l, tools[i], n, 0, 0, sev, p + 1, (size_t)(end - p - 1));
	}
	return 0;
}

/* GNU ld: "/usr/bin/ld: x.c:(.text+0x9): undefined reference to `g'"; the file is the part
 * before ":(" when there is one. */
static int st_try_undef(st_diag_list *l, const char *s, const char *end, int *matched)
{
	static const char key[] = "undefined reference to ";
	size_t kn = sizeof key - 1;
	const char *u = NULL;
	for (const char *q = s; q + kn <= end; q++)
		if (strncmp(q, key, kn) == 0) {
			u = q;
			break;
		}
	if (!u)
		return 0;
	const char *file = s, *fend = s;
	for (const char *q = s; q + 1 < u; q++)
		if (q[0] == ':' && q[1] == '(') {
			fend = q;
			break;
		}
	if (fend > s) {
		/* drop a leading "<linker>: " prefix */
		for (const char *q = fend; q > s; q--)
			if (q[-1] == ' ' && q - 2 >= s && q[-2] == ':') {
				file = q;
				break;
			}
	}
	*matched = 1;
	return st_diag_add(l, file, (size_t)(fend - file), 0, 0, "error", u, (size_t)(end - u));
}

/* [s, p) names the GNU linker: "ld", "/usr/bin/ld", "ld.bfd", "ld.gold". */
static int st_is_linker(const char *s, const char *p)
{
	const char *b = p;
	while (b > s && b[-1] != '/')
		b--;
	return p - b >= 2 && b[0] == 'l' && b[1] == 'd' && (p - b == 2 || b[2] == '.');
}

/* Driver messages with no position: "cc1: fatal error: ...", "nvcc: error: ...",
 * "/usr/bin/ld: cannot find -lfoo". */
static int st_try_driver(st_diag_list *l, const char *s, const char *end, int *matched)
{
	const char *p = s;
	while (p < end && *p != ':' && !isspace((unsigned char)*p))
		p++;
	if (p == s || p + 2 > end || p[0] != ':' || p[1] != ' ')
		return 0;
	static const char nolib[] = "cannot find ";
	if (p - s >= 2 && p[-2] == 'l' && p[-1] == 'd' &&
	    (size_t)(end - p - 2) > sizeof nolib - 1 && strncmp(p + 2, nolib, sizeof nolib - 1) == 0) {
		*matched = 1; /* the linker's "ld: cannot find -lfoo" carries no severity word */
		return st_diag_add(l, "", 0, 0, 0, "error", p + 2, (size_t)(end - p - 2));
	}
	const char *after;
	const char *sev = st_match_severity(p + 2, end, &after);
	if (!sev && st_is_linker(s, p) && end[-1] != ':' && strncasecmp(p + 2, "note", 4)) {
		/* The linker's own errors carry no severity word ("multiple definition of", "relocation
		 * ... recompile with -fPIC"); its "x.o: in function `f':" lines, which end in ':',
		 * only say where the next one is, and its "NOTE: ..." is no error either. */
		*matched = 1;
		return st_diag_add(l, "", 0, 0, 0, "error", p + 2, (size_t)(end - p - 2));
	}
	if (!sev || strcmp(sev, "note") == 0)
		return 0;
	const char *msg = st_after_severity(after, end);
	if (!msg)
		return 0;
	*matched = 1;
	return st_diag_add(l, "", 0, 0, 0, sev, msg, (size_t)(end - msg));
}

/* nvcc's template context ("          detected during instantiation of ...") obviously belongs
 * to the diagnostic above it, even with the source excerpt in between; nothing else is treated
 * as a continuation. */
static int st_is_continuation(const char *s, const char *end)
{
	if (s >= end || !isspace((unsigned char)*s))
		return 0;
	while (s < end && isspace((unsigned char)*s))
		s++;
	static const char key[] = "detected during";
	return (size_t)(end - s) >= sizeof key - 1 && strncmp(s, key, sizeof key - 1) == 0;
}

int st_diag_parse(const char *log, st_diag **out, int *n)
{
	*out = NULL;
	*n = 0;
	if (!log)
		return 0;
	st_diag_list l = { 0 };
	int last_matched = 0;
	for (const char *s = log; *s;) {
		const char *end = strchr(s, '\n');
		const char *next = end ? end + 1 : s + strlen(s);
		if (!end)
			end = next;
		const char *e = end;
		if (e > s && e[-1] == '\r')
			e--;
		int matched = 0, rc = 0;
		if (last_matched && l.n > 0 && st_is_continuation(s, e)) {
			rc = st_diag_extend(&l, s, (size_t)(e - s));
			matched = 1;
		} else {
			rc = st_try_tool(&l, s, e, &matched);
			if (!matched && rc == 0)
				rc = st_try_nvcc(&l, s, e, &matched);
			if (!matched && rc == 0)
				rc = st_try_gcc(&l, s, e, &matched);
			if (!matched && rc == 0)
				rc = st_try_undef(&l, s, e, &matched);
			if (!matched && rc == 0)
				rc = st_try_driver(&l, s, e, &matched);
		}
		if (rc != 0) {
			st_diags_free(l.d, l.n);
			return -1;
		}
		/* A record's block (source excerpt, caret, context) runs to the next blank line. */
		if (matched)
			last_matched = 1;
		else if (e == s)
			last_matched = 0;
		s = next;
	}
	*out = l.d;
	*n = l.n;
	return 0;
}
