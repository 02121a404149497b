/* The solution out of a model's answer. Models wrap code in Markdown fences, add shell lines or
 * JSON next to it, sometimes send two versions, and sometimes stop mid-file at their token
 * limit. Guessing which block is "the" file would hand the verifier code the model did not mean,
 * so anything but exactly one complete block that defines st_run is refused with a sentence the
 * model can act on. Fences follow CommonMark closely enough for real answers: up to three spaces
 * of indent, three or more backticks, an info string whose first word is the language, and a
 * closing line of at least as many backticks and nothing else. */
#include "agents/agents.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct fence {
	int ticks;        /* backticks in the run; 0: not a fence line */
	const char *info; /* info string (after the backticks), trimmed */
	size_t info_len;
} fence;

/* Is [s, e) a fence line? e excludes the newline; a trailing '\r' is tolerated. */
static fence fence_of(const char *s, const char *e)
{
	fence f = {0};
	int indent = 0;
	while (s < e && *s == ' ' && indent < 4) {
		s++;
		indent++;
	}
	if (indent > 3)
		return f;
	int ticks = 0;
	while (s < e && *s == '`') {
		s++;
		ticks++;
	}
	if (ticks < 3)
		return f;
	while (s < e && isspace((unsigned char)*s))
		s++;
	while (e > s && isspace((unsigned char)e[-1]))
		e--;
	/* "```x```" is inline code on one line, not a fence. */
	if (memchr(s, '`', (size_t)(e - s)))
		return f;
	f.ticks = ticks;
	f.info = s;
	f.info_len = (size_t)(e - s);
	return f;
}

/* Languages a solution may be written in; everything else (json, bash, text, ...) is ignored. */
static int code_language(const fence *f)
{
	static const char *const langs[] = { "cuda", "cu", "cpp", "c++", "c", "cxx", "cc" };
	size_t n = 0;
	while (n < f->info_len && !isspace((unsigned char)f->info[n]) && f->info[n] != '{')
		n++;
	if (n == 0)
		return 1;
	for (size_t i = 0; i < sizeof langs / sizeof langs[0]; i++)
		if (strlen(langs[i]) == n && !strncasecmp(f->info, langs[i], n))
			return 1;
	return 0;
}

static int ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* Does [s, e) define st_run: the name, '(', the matching ')', then '{'? A call or a prototype
 * ends in ';' instead, and is what a snippet or a pasted header holds. */
static int defines_st_run(const char *s, const char *e)
{
	for (const char *p = s; p + 6 <= e; p++) {
		if (memcmp(p, "st_run", 6) || (p > s && ident_char(p[-1])) ||
		    (p + 6 < e && ident_char(p[6])))
			continue;
		const char *q = p + 6;
		while (q < e && isspace((unsigned char)*q))
			q++;
		if (q >= e || *q != '(')
			continue;
		int depth = 0;
		for (; q < e; q++) {
			if (*q == '(')
				depth++;
			else if (*q == ')' && --depth == 0)
				break;
		}
		if (q >= e)
			continue;
		q++;
		while (q < e && isspace((unsigned char)*q))
			q++;
		if (q < e && *q == '{')
			return 1;
	}
	return 0;
}

st_extract_result st_extract_code(const char *answer, int truncated, char **code,
                                  const char **why)
{
	*code = NULL;
	*why = NULL;
	if (!answer)
		answer = "";
	int blocks = 0, defining = 0, foreign_defining = 0, open = 0, open_ticks = 0, open_code = 0;
	const char *body = NULL, *found = NULL, *found_end = NULL;
	const char *p = answer;
	while (*p) {
		const char *nl = strchr(p, '\n');
		const char *e = nl ? nl : p + strlen(p);
		const char *next = nl ? nl + 1 : e;
		fence f = fence_of(p, e);
		if (!open) {
			if (f.ticks) {
				open = 1;
				open_ticks = f.ticks;
				open_code = code_language(&f);
				body = next;
			}
		} else if (f.ticks >= open_ticks && f.info_len == 0) {
			open = 0;
			blocks++;
			if (defines_st_run(body, p)) {
				if (open_code) {
					if (defining++ == 0) {
						found = body;
						found_end = p;
					}
				} else {
					foreign_defining++;
				}
			}
		}
		p = next;
	}

	if (open) {
		*why = "Your answer was cut off inside a code block (the closing ``` never came); send "
		       "the whole file again, complete, in one fenced code block.";
		return ST_EXTRACT_TRUNCATED;
	}
	if (truncated && defining == 0) {
		*why = "Your answer hit its length limit before a complete solution arrived; send only "
		       "the whole file in one fenced code block, with no long explanations.";
		return ST_EXTRACT_TRUNCATED;
	}
	if (defining > 1) {
		*why = "Your answer had more than one code block defining st_run; send exactly one "
		       "complete file in a single fenced code block.";
		return ST_EXTRACT_SEVERAL;
	}
	if (defining == 1) {
		size_t n = (size_t)(found_end - found);
		int add_nl = n == 0 || found[n - 1] != '\n';
		char *c = malloc(n + 2);
		if (!c) {
			*why = "The answer could not be processed (out of memory); send it again.";
			return ST_EXTRACT_NONE;
		}
		memcpy(c, found, n);
		if (add_nl)
			c[n++] = '\n';
		c[n] = 0;
		*code = c;
		return ST_EXTRACT_OK;
	}
	if (blocks == 0) {
		*why = "Your answer had no fenced code block; send the whole file in one fenced code "
		       "block (```cuda, or ```c for the host backend).";
		return ST_EXTRACT_NONE;
	}
	if (foreign_defining) {
		*why = "Your solution was in a code block marked with another language; mark it ```cuda "
		       "(or ```c for the host backend) and send the whole file.";
		return ST_EXTRACT_NO_ABI;
	}
	*why = "None of your code blocks defines st_run; send the whole file, with st_init, st_run "
	       "and st_free defined, in one fenced code block.";
	return ST_EXTRACT_NO_ABI;
}
