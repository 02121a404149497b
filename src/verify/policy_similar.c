/* Rule 5 of the policy check (policy.h): similarity is reported, not judged. The highest
 * Jaccard similarity of normalised token 8-grams to the task's reference and experts, so that
 * renaming variables does not lower it. */
#include "verify/policy_int.h"

#include "common/fs.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NGRAM 8

/* ---- rule 5: similarity ------------------------------------------------------------------- */

static const char *const keywords[] = {
	/* sorted for bsearch */
	"__device__", "__forceinline__", "__global__", "__host__", "__launch_bounds__",
	"__restrict__", "__shared__", "alignas", "alignof", "asm", "auto", "bool", "break", "case",
	"catch", "char", "class", "const", "const_cast", "constexpr", "continue", "decltype",
	"default", "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "extern",
	"false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable",
	"namespace", "new", "noexcept", "nullptr", "operator", "private", "protected", "public",
	"register", "reinterpret_cast", "restrict", "return", "short", "signed", "sizeof", "static",
	"static_assert", "static_cast", "struct", "switch", "template", "this", "throw", "true",
	"try", "typedef", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
	"while",
};

static int is_keyword(const char *s)
{
	const char *key = s;
	return bsearch(&key, keywords, sizeof keywords / sizeof keywords[0], sizeof keywords[0],
	               cmp_str) != NULL;
}

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Sorted, distinct hashes of the normalised token 8-grams; includes are left out, every file
 * has the same ones. *n = 0 when there are fewer than 8 tokens. */
static int gram_set(const lexed *L, uint64_t **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	uint64_t *h = malloc(((size_t)L->n + 1) * sizeof *h);
	if (!h)
		return -1;
	size_t m = 0;
	for (int i = 0; i < L->n; i++) {
		const tok *t = &L->v[i];
		if (t->dir == D_INCLUDE)
			continue;
		const char *norm = t->kind == T_NUMBER ? "NUM"
		                 : t->kind == T_STRING ? "STR"
		                 : t->kind == T_CHAR   ? "CHR"
		                 : t->kind == T_IDENT && !is_keyword(txt(L, i)) ? "ID" : txt(L, i);
		h[m++] = fnv(norm);
	}
	if (m < NGRAM) {
		free(h);
		return 0;
	}
	size_t g = m - NGRAM + 1;
	uint64_t *grams = malloc(g * sizeof *grams);
	if (!grams) {
		free(h);
		return -1;
	}
	for (size_t i = 0; i < g; i++) {
		uint64_t x = 0x9e3779b97f4a7c15ull;
		for (int k = 0; k < NGRAM; k++)
			x = (x ^ h[i + (size_t)k]) * 0x100000001b3ull + (uint64_t)k;
		grams[i] = x;
	}
	free(h);
	qsort(grams, g, sizeof *grams, cmp_u64);
	size_t u = 0;
	for (size_t i = 0; i < g; i++)
		if (u == 0 || grams[u - 1] != grams[i])
			grams[u++] = grams[i];
	*out = grams;
	*n = u;
	return 0;
}

static double jaccard(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
	if (!na || !nb)
		return 0.0;
	size_t i = 0, j = 0, both = 0;
	while (i < na && j < nb) {
		if (a[i] == b[j]) {
			both++;
			i++;
			j++;
		} else if (a[i] < b[j]) {
			i++;
		} else {
			j++;
		}
	}
	return (double)both / (double)(na + nb - both);
}

static int grams_of_text(const char *src, size_t len, uint64_t **out, size_t *n)
{
	lexed L;
	if (pol_tokenize(src, len, &L, NULL))
		return -1;
	int rc = gram_set(&L, out, n);
	pol_lexed_free(&L);
	return rc;
}

double st_policy_similarity(const char *a, size_t alen, const char *b, size_t blen)
{
	uint64_t *ga = NULL, *gb = NULL;
	size_t na = 0, nb = 0;
	double s = 0.0;
	if (!grams_of_text(a, alen, &ga, &na) && !grams_of_text(b, blen, &gb, &nb))
		s = jaccard(ga, na, gb, nb);
	free(ga);
	free(gb);
	return s;
}

static st_status compare_with(checker *C, const uint64_t *g, size_t ng, const char *path,
                              const char *label, st_err *err)
{
	char *src;
	size_t len;
	if (!path)
		return ST_OK;
	st_status s = st_read_file(path, &src, &len, err);
	if (s)
		return st_err_wrap(err, s, "policy check: %s", label);
	uint64_t *other;
	size_t no;
	int rc = grams_of_text(src, len, &other, &no);
	free(src);
	if (rc)
		return st_err_set(err, ST_E_NOMEM, "policy check: out of memory");
	double sim = jaccard(g, ng, other, no);
	free(other);
	if (sim > C->rep->similarity || !C->rep->similar_to[0]) {
		C->rep->similarity = sim;
		snprintf(C->rep->similar_to, sizeof C->rep->similar_to, "%s", label);
	}
	return ST_OK;
}

st_status pol_check_similarity(checker *C, st_err *err)
{
	uint64_t *g;
	size_t ng;
	if (gram_set(&C->L, &g, &ng))
		return st_err_set(err, ST_E_NOMEM, "policy check: out of memory");
	st_status s = compare_with(C, g, ng, C->task->reference, "reference", err);
	for (int i = 0; !s && i < C->task->n_experts; i++)
		s = compare_with(C, g, ng, C->task->experts[i], "expert", err);
	/* The host backend's C solutions too: a copy of expert.c is as much a copy as one of a .cu. */
	if (!s)
		s = compare_with(C, g, ng, C->task->host_reference, "reference", err);
	if (!s)
		s = compare_with(C, g, ng, C->task->host_expert, "expert", err);
	free(g);
	return s;
}
