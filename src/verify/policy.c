/* The static policy check (policy.h lists the rules). Candidates are written by a model that is
 * paid for speed, so the check reads what the compiler will read: line continuations are spliced
 * first, comments and literals are skipped as the preprocessor skips them, digraphs and universal
 * character names are normalised, and identifiers are matched as whole tokens. It stays a
 * tokenizer rather than a preprocessor: macros are not expanded (their bodies are checked like
 * any other text, and token pasting is checked for the names it could build) and conditional
 * blocks are checked whether or not they are compiled. The sandbox catches what slips through.
 *
 * This file holds what the rules share: recording hits, the byte check that comes before any
 * tokenizing, the token index (scopes and matching parentheses) and the entry points; the
 * tokenizer is policy_lex.c, the rules policy_names.c and policy_code.c, similarity
 * policy_similar.c (policy_int.h says what they share). */
#include "verify/policy_int.h"

#include "common/fs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Distinct hits kept: past this a report is unreadable anyway, and the memory stays bounded. */
#define MAX_HITS 64

/* ---- hits --------------------------------------------------------------------------------- */

void pol_hit(checker *C, int line, const char *rule, const char *fmt, ...)
{
	if (!C || C->oom)
		return;
	st_policy_report *r = C->rep;
	char msg[sizeof r->hits[0].message];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* One hit per distinct finding: the first line it appears on says where to look. */
	for (int i = 0; i < r->n_hits; i++)
		if (!strcmp(r->hits[i].rule, rule) && !strcmp(r->hits[i].message, msg))
			return;
	if (r->n_hits >= MAX_HITS)
		return;
	st_policy_hit *h = realloc(r->hits, (size_t)(r->n_hits + 1) * sizeof *h);
	if (!h) {
		C->oom = 1;
		return;
	}
	r->hits = h;
	h += r->n_hits++;
	h->line = line;
	snprintf(h->rule, sizeof h->rule, "%s", rule);
	memcpy(h->message, msg, sizeof h->message);
}

/* ---- reading the text --------------------------------------------------------------------- */

/* NUL, control bytes other than whitespace, or broken UTF-8: not something a model should hand
 * in as source, and a way to make the compiler and this check read different things. */
static int check_bytes(checker *C, const char *src, size_t len)
{
	int line = 1;
	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)src[i];
		if (c == '\n') {
			line++;
			i++;
			continue;
		}
		if (c < 0x80) {
			if ((c < 0x20 && c != '\t' && c != '\r' && c != '\f' && c != '\v') || c == 0x7f) {
				pol_hit(C, line, "not-source", "control byte 0x%02x at offset %zu: not source text",
				    c, i);
				return 0;
			}
			i++;
			continue;
		}
		int n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
		uint32_t cp = n == 4 ? c & 7u : n == 3 ? c & 15u : c & 31u;
		int ok = n > 0 && c < 0xf5 && i + (size_t)n <= len;
		for (int k = 1; ok && k < n; k++) {
			unsigned char d = (unsigned char)src[i + (size_t)k];
			ok = (d & 0xc0) == 0x80;
			cp = cp << 6 | (d & 0x3fu);
		}
		if (ok) {
			static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
			ok = cp >= min_cp[n] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
		}
		if (!ok) {
			pol_hit(C, line, "not-source", "byte 0x%02x at offset %zu is not valid UTF-8", c, i);
			return 0;
		}
		i += (size_t)n;
	}
	return 1;
}

/* ---- scopes ------------------------------------------------------------------------------- */

/* The '{' at j opens a class body when a class-key comes before it in the same declaration:
 * `struct A : B {`, `template <class T> struct A {`; not `struct A f() {` or `struct A a = {`. */
static scope_kind brace_kind(const lexed *L, int j)
{
	if (is(L, j - 1, T_IDENT, "namespace"))
		return S_UNNAMED;
	for (int k = j - 1; k >= 0; k--) {
		const tok *t = &L->v[k];
		if (t->dir != D_NONE)
			break;
		if (t->kind == T_PUNCT && strchr(";{})=]", txt(L, k)[0]) && txt(L, k)[1] == 0)
			return S_OTHER;
		if (is(L, k, T_IDENT, "struct") || is(L, k, T_IDENT, "class") ||
		    is(L, k, T_IDENT, "union"))
			return S_CLASS;
	}
	return S_OTHER;
}

/* Scopes and matching parentheses, once, so that no rule rescans the file per token (a 1 MiB
 * candidate could otherwise make the check quadratic). Directive lines are paired on their own
 * and open no scope: a brace or parenthesis in a macro body matches nothing where it stands. */
static int index_tokens(checker *C)
{
	const lexed *L = &C->L;
	C->scope = calloc((size_t)L->n + 1, 1);
	C->pair = malloc(((size_t)L->n + 1) * sizeof *C->pair);
	unsigned char *braces = malloc((size_t)L->n + 1);
	int *code = malloc(((size_t)L->n + 1) * sizeof *code);
	int *directive = malloc(((size_t)L->n + 1) * sizeof *directive);
	int ok = C->scope && C->pair && braces && code && directive;
	int depth = 0, n_code = 0, n_dir = 0, group = 0;
	for (int i = 0; ok && i < L->n; i++) {
		const tok *t = &L->v[i];
		C->scope[i] = depth ? braces[depth - 1] : S_OTHER;
		C->pair[i] = -1;
		if (t->kind != T_PUNCT)
			continue;
		if (t->group != group) {
			group = t->group;
			n_dir = 0;
		}
		int *stack = t->dir == D_NONE ? code : directive;
		int *n = t->dir == D_NONE ? &n_code : &n_dir;
		if (punct(L, i, "("))
			stack[(*n)++] = i;
		else if (punct(L, i, ")") && *n > 0)
			C->pair[stack[--*n]] = i;
		if (t->dir != D_NONE)
			continue;
		if (punct(L, i, "{"))
			braces[depth++] = (unsigned char)brace_kind(L, i);
		else if (punct(L, i, "}") && depth > 0)
			depth--;
	}
	free(braces);
	free(code);
	free(directive);
	return ok ? 0 : -1;
}

/* ---- entry points ------------------------------------------------------------------------- */

/* host_c: a C solution for the host backend, which has no kernels to require. */
static st_status check_text(const char *src, size_t len, const st_task *task, int host_c,
                            st_policy_report *rep, st_err *err)
{
	memset(rep, 0, sizeof *rep);
	checker C = {.rep = rep, .task = task, .host_c = host_c};
	if (len > ST_POLICY_MAX_BYTES) {
		pol_hit(&C, 0, "too-large", "the file has %zu bytes; a solution may have at most %zu", len,
		    (size_t)ST_POLICY_MAX_BYTES);
		return C.oom ? st_err_set(err, ST_E_NOMEM, "policy check: out of memory") : ST_OK;
	}
	if (!check_bytes(&C, src, len))
		return C.oom ? st_err_set(err, ST_E_NOMEM, "policy check: out of memory") : ST_OK;
	if (pol_tokenize(src, len, &C.L, &C) || index_tokens(&C)) {
		pol_lexed_free(&C.L);
		free(C.scope);
		free(C.pair);
		st_policy_report_free(rep);
		return st_err_set(err, ST_E_NOMEM, "policy check: out of memory");
	}
	for (int i = 0; i < C.L.n; i++)
		if (C.L.v[i].kind == T_HEADER)
			pol_check_include(&C, C.L.v[i].line, txt(&C.L, i));
	pol_check_names(&C);
	pol_check_pasting(&C);
	pol_check_sections(&C);
	pol_check_asm(&C);
	pol_check_definitions(&C);
	st_status s = pol_check_similarity(&C, err);
	pol_lexed_free(&C.L);
	free(C.scope);
	free(C.pair);
	if (!s && C.oom)
		s = st_err_set(err, ST_E_NOMEM, "policy check: out of memory");
	if (s)
		st_policy_report_free(rep);
	return s;
}

st_status st_policy_check_text(const char *src, size_t len, const st_task *task,
                               st_policy_report *rep, st_err *err)
{
	return check_text(src, len, task, 0, rep, err);
}

st_status st_policy_check(const char *src_path, const st_task *task, st_policy_report *rep,
                          st_err *err)
{
	memset(rep, 0, sizeof *rep);
	struct stat st;
	if (stat(src_path, &st))
		return st_err_set(err, ST_E_IO, "cannot read '%s': %s", src_path, strerror(errno));
	/* Refused before reading: a huge file is a verdict, not a memory or time problem. */
	if (S_ISREG(st.st_mode) && (size_t)st.st_size > ST_POLICY_MAX_BYTES) {
		checker C = {.rep = rep, .task = task};
		pol_hit(&C, 0, "too-large", "the file has %lld bytes; a solution may have at most %zu",
		    (long long)st.st_size, (size_t)ST_POLICY_MAX_BYTES);
		return C.oom ? st_err_set(err, ST_E_NOMEM, "policy check: out of memory") : ST_OK;
	}
	char *src;
	size_t len;
	st_status s = st_read_file(src_path, &src, &len, err);
	if (s)
		return s;
	size_t pl = strlen(src_path);
	s = check_text(src, len, task, pl > 2 && !strcmp(src_path + pl - 2, ".c"), rep, err);
	free(src);
	return s;
}

void st_policy_report_free(st_policy_report *rep)
{
	if (!rep)
		return;
	free(rep->hits);
	rep->hits = NULL;
	rep->n_hits = 0;
}

void st_policy_describe(const st_policy_hit *h, char *buf, size_t len)
{
	if (!buf || !len)
		return;
	if (h->line > 0)
		snprintf(buf, len, "line %d: %s: %s", h->line, h->rule, h->message);
	else
		snprintf(buf, len, "%s: %s", h->rule, h->message);
}
