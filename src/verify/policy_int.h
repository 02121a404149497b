/* What the files of the static policy check share (policy.c: hits, byte check, token index and
 * entry points; policy_lex.c: splicing and the tokenizer; policy_names.c: rules 1-2, headers
 * and names; policy_code.c: rules 3, 4, 6 and interposition, inline assembly and definitions;
 * policy_similar.c: rule 5, similarity). Internal to src/verify: the public interface is
 * policy.h. */
#ifndef ST_POLICY_INT_H
#define ST_POLICY_INT_H

#include "verify/policy.h"

#include <string.h>

typedef enum tok_kind { T_IDENT, T_NUMBER, T_STRING, T_CHAR, T_PUNCT, T_HEADER } tok_kind;

/* Which preprocessor directive a token belongs to. */
typedef enum dir_kind { D_NONE, D_INCLUDE, D_DEFINE, D_MESSAGE, D_OTHER } dir_kind;

typedef struct tok {
	tok_kind kind;
	dir_kind dir;
	int group; /* tokens of one directive (continued lines included) share it; 0 outside */
	int line;
	size_t text; /* offset of the NUL-terminated text in the pool: string contents without the
	              * quotes, header names without the brackets, identifiers with UCNs decoded */
} tok;

typedef struct lexed {
	tok *v;
	int n, cap;
	char *pool;
	size_t used;
	int groups; /* directives seen so far */
} lexed;

/* What the innermost braces around a token are: a class body declares members, which are no
 * threat whatever they are called, and an unnamed namespace exports nothing; every other scope
 * can declare or call the C library and export symbols. */
typedef enum scope_kind { S_OTHER, S_CLASS, S_UNNAMED } scope_kind;

typedef struct checker {
	int host_c; /* a C solution for the host backend: no kernels to require */
	st_policy_report *rep;
	const st_task *task;
	lexed L;
	unsigned char *scope; /* scope_kind of each token */
	int *pair;            /* index of the matching ')' of each '(', else -1 */
	int oom;
} checker;

static inline const char *txt(const lexed *L, int i)
{
	return L->pool + L->v[i].text;
}

static inline int is(const lexed *L, int i, tok_kind k, const char *s)
{
	return i >= 0 && i < L->n && L->v[i].kind == k && !strcmp(txt(L, i), s);
}

static inline int punct(const lexed *L, int i, const char *s)
{
	return is(L, i, T_PUNCT, s);
}

/* Index of the ')' matching the '(' at i, or -1. */
static inline int close_paren(const checker *C, int i)
{
	return i >= 0 && i < C->L.n ? C->pair[i] : -1;
}

/* The identifier at i is a member (x.name, p->name) or lives in a namespace other than std. */
static inline int not_global(const lexed *L, int i)
{
	if (punct(L, i - 1, ".") || punct(L, i - 1, "->"))
		return 1;
	if (punct(L, i - 1, "::") && i >= 2 && L->v[i - 2].kind == T_IDENT)
		return strcmp(txt(L, i - 2), "std") != 0;
	return 0;
}

static inline int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A finding: kept once per distinct rule and message, up to a bound (policy.c). */
void pol_hit(checker *C, int line, const char *rule, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Splice and tokenize src; C (may be NULL) collects hits found on the way (policy_lex.c). */
int pol_tokenize(const char *src, size_t len, lexed *L, checker *C);
void pol_lexed_free(lexed *L);

/* The rules, each adding its hits to C->rep (policy_names.c, policy_code.c). */
void pol_check_include(checker *C, int line, const char *h);
void pol_check_names(checker *C);
void pol_check_pasting(checker *C);
void pol_check_sections(checker *C);
void pol_check_asm(checker *C);
void pol_check_definitions(checker *C);
/* The highest similarity to the task's reference and experts (policy_similar.c). */
st_status pol_check_similarity(checker *C, st_err *err);

#endif
