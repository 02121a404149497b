/* Rules 3, 4 and 6 of the policy check and interposition (policy.h): inline assembly that
 * reads clocks or counters or pulls in other files, and definitions: the ABI's st_run, the
 * kernel an expert-mode solution must define, and exported definitions of API names that would
 * replace the real ones. */
#include "verify/policy_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ---- rule 3: inline assembly -------------------------------------------------------------- */

static const struct { const char *needle, *what; } bad_asm[] = {
	{"%globaltimer", "read %globaltimer (the GPU's global timer)"},
	{"%clock", "read %clock or %clock64 (the SM's cycle counter)"},
	{"rdtsc", "read the CPU's time-stamp counter (rdtsc)"},
	{"rdpmc", "read the CPU's performance counters (rdpmc)"},
	{"syscall", "make system calls"},
	{"sysenter", "make system calls"},
	{"int $0x80", "make system calls"},
	{"int 0x80", "make system calls"},
	{".incbin", "pull files in at build time (.incbin)"},
	{".include", "pull files in at build time (.include)"},
};

/* Adjacent literals concatenate, so the text is checked whole: "%%global" "timer" is caught. */
static void check_asm_text(checker *C, int line, char *text)
{
	for (char *p = text; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	for (size_t k = 0; k < sizeof bad_asm / sizeof bad_asm[0]; k++)
		if (strstr(text, bad_asm[k].needle))
			pol_hit(C, line, "forbidden-asm", "inline assembly may not %s", bad_asm[k].what);
	for (char *p = strstr(text, "%pm"); p; p = strstr(p + 1, "%pm"))
		if (isdigit((unsigned char)p[3]))
			pol_hit(C, line, "forbidden-asm",
			    "inline assembly may not read the %%pm performance counters");
}

/* Concatenated string literals of tokens [from, to] into a fresh buffer. */
static char *strings_of(const lexed *L, int from, int to)
{
	size_t total = 1;
	for (int j = from; j <= to; j++)
		if (L->v[j].kind == T_STRING)
			total += strlen(txt(L, j));
	char *s = malloc(total), *p = s;
	if (!s)
		return NULL;
	for (int j = from; j <= to; j++)
		if (L->v[j].kind == T_STRING) {
			size_t n = strlen(txt(L, j));
			memcpy(p, txt(L, j), n);
			p += n;
		}
	*p = 0;
	return s;
}

void pol_check_asm(checker *C)
{
	const lexed *L = &C->L;
	for (int i = 0; i < L->n; i++) {
		int from = -1, to = -1;
		if (is(L, i, T_IDENT, "asm") || is(L, i, T_IDENT, "__asm__") ||
		    is(L, i, T_IDENT, "__asm")) {
			int j = i + 1;
			while (j < L->n && (is(L, j, T_IDENT, "volatile") ||
			                    is(L, j, T_IDENT, "__volatile__") ||
			                    is(L, j, T_IDENT, "__volatile") || is(L, j, T_IDENT, "goto") ||
			                    is(L, j, T_IDENT, "inline")))
				j++;
			if (!punct(L, j, "(") || (to = close_paren(C, j)) < 0)
				continue;
			from = j;
		} else if (L->v[i].kind == T_STRING && L->v[i].dir == D_DEFINE &&
		           (L->v[i - 1].kind != T_STRING || L->v[i - 1].group != L->v[i].group)) {
			/* a macro body may be pasted into an asm statement; check its literals too */
			from = to = i;
			while (to + 1 < L->n && L->v[to + 1].group == L->v[i].group)
				to++;
		} else {
			continue;
		}
		char *text = strings_of(L, from, to);
		if (!text) {
			C->oom = 1;
			return;
		}
		check_asm_text(C, L->v[i].line, text);
		free(text);
		i = to; /* an asm nested in the operands was part of this text */
	}
}

/* ---- rules 4, 6 and interposition: definitions -------------------------------------------- */

/* The name at i is followed by a parameter list and a body: a function definition. Qualifiers
 * and attributes between ')' and '{' (noexcept, __attribute__((...)), throw()) are skipped. */
static int defines_function(const checker *C, int i)
{
	const lexed *L = &C->L;
	if (!punct(L, i + 1, "("))
		return 0;
	int j = close_paren(C, i + 1);
	if (j < 0)
		return 0;
	/* a handful of qualifiers at most; the bound keeps st_run() st_run() ... linear */
	for (int k = 0, end = j + 1; k < 8 && end < L->n; k++, end++) {
		if (punct(L, end, "{"))
			return 1;
		if (L->v[end].kind != T_IDENT)
			return 0;
		if (punct(L, end + 1, "(") && (end = close_paren(C, end + 1)) < 0)
			return 0;
	}
	return 0;
}

/* __global__ at i is followed by a body before the next ';': a kernel definition. The scan
 * ends at the next __global__ as well, so a file of them is read once, not once per kernel. */
static int defines_kernel(const lexed *L, int i)
{
	int depth = 0;
	for (int j = i + 1; j < L->n; j++) {
		if (is(L, j, T_IDENT, "__global__") || (depth == 0 && punct(L, j, "}")))
			return 0;
		if (punct(L, j, "(") || punct(L, j, "["))
			depth++;
		else if (punct(L, j, ")") || punct(L, j, "]"))
			depth--;
		else if (depth == 0 && punct(L, j, ";"))
			return 0;
		else if (depth == 0 && punct(L, j, "{"))
			return 1;
	}
	return 0;
}

/* A name a CUDA, driver or library API uses: an exported definition of one would replace it. */
static int api_name(const char *s)
{
	static const char *const prefixes[] = {"__cuda", "cublas", "cusparse", "cufft", "curand",
	                                       "cupti", "nccl", "nvrtc", "nvml", NULL};
	if (!strncmp(s, "cuda", 4) && isupper((unsigned char)s[4]))
		return 1;
	if (!strncmp(s, "cu", 2) && isupper((unsigned char)s[2]))
		return 1;
	for (const char *const *p = prefixes; *p; p++)
		if (!strncmp(s, *p, strlen(*p)))
			return 1;
	return 0;
}

/* Whether the declaration that ends at token i exports a host symbol: static, inline and
 * device-only functions do not, so helpers such as `static void cudaCheck(...)` are fine. */
static int exported(const lexed *L, int i)
{
	int device = 0, host = 0;
	for (int j = i - 1; j >= 0; j--) {
		if (punct(L, j, ";") || punct(L, j, "{") || punct(L, j, "}") || L->v[j].dir != D_NONE)
			break;
		const char *s = txt(L, j);
		if (L->v[j].kind != T_IDENT)
			continue;
		if (!strcmp(s, "static") || !strcmp(s, "inline") || !strcmp(s, "__inline__") ||
		    !strcmp(s, "__forceinline__"))
			return 0;
		device |= !strcmp(s, "__device__") || !strcmp(s, "__global__");
		host |= !strcmp(s, "__host__");
	}
	return !device || host;
}

/* Names #define'd to __global__ (#define KERNEL __global__) count as __global__. */
#define MAX_ALIASES 16

static int kernel_word(const lexed *L, int i, const char *const *aliases, int n_aliases)
{
	if (is(L, i, T_IDENT, "__global__"))
		return 1;
	for (int k = 0; k < n_aliases; k++)
		if (is(L, i, T_IDENT, aliases[k]))
			return 1;
	return 0;
}

void pol_check_definitions(checker *C)
{
	const lexed *L = &C->L;
	const char *aliases[MAX_ALIASES];
	int n_aliases = 0, has_run = 0;
	for (int i = 0; i + 2 < L->n; i++) {
		if (!is(L, i, T_IDENT, "define") || L->v[i].dir != D_DEFINE ||
		    L->v[i + 1].kind != T_IDENT || L->v[i + 1].group != L->v[i].group)
			continue;
		for (int j = i + 2; j < L->n && L->v[j].group == L->v[i].group; j++)
			if (is(L, j, T_IDENT, "__global__") && n_aliases < MAX_ALIASES) {
				aliases[n_aliases++] = txt(L, i + 1);
				break;
			}
	}
	for (int i = 0; i < L->n; i++) {
		const tok *t = &L->v[i];
		if (t->kind != T_IDENT || t->dir != D_NONE)
			continue;
		const char *name = txt(L, i);
		if (kernel_word(L, i, aliases, n_aliases)) {
			if (!C->rep->has_kernel)
				C->rep->has_kernel = defines_kernel(L, i);
		} else if (!strcmp(name, "st_run")) {
			has_run |= !not_global(L, i) && defines_function(C, i);
		} else if (api_name(name) && C->scope[i] == S_OTHER && !not_global(L, i) &&
		           !punct(L, i - 1, "::") && defines_function(C, i) && exported(L, i)) {
			pol_hit(C, t->line, "interpose",
			    "'%s' may not be defined (it would replace the CUDA or library function of "
			    "that name; rename it or make it static)", name);
		}
	}
	if (C->task->policy == ST_POLICY_EXPERT && !C->rep->has_kernel && !C->host_c)
		pol_hit(C, 0, "required-kernel",
		    "no __global__ function is defined (expert mode: the work must be done by "
		    "hand-written kernels)");
	if (!has_run)
		pol_hit(C, 0, "abi", "no st_run definition (the ABI needs st_init, st_run and st_free)");
}
