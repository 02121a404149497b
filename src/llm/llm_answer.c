/* The JSON object in a model's answer. Models asked for "one JSON object" still wrap it in a
 * ```json fence or put a sentence before it, so the object is looked for in three places: the
 * whole answer, each fenced block marked json (or not marked), then each top-level {...} span
 * found by brace matching that respects strings. The Planner's plan and the rubric judge's
 * scores are both read this way. */
#include "llm/llm_prompt.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

/* A JSON object parsed from [s, s + n); NULL when it is not valid JSON or not an object. The
 * parse error, if any, goes to *jerr. */
static json_t *parse_object(const char *s, size_t n, json_error_t *jerr)
{
	json_t *j = json_loadb(s, n, JSON_REJECT_DUPLICATES, jerr);
	if (j && !json_is_object(j)) {
		json_decref(j);
		return NULL;
	}
	return j;
}

/* Keeps the best candidate so far in *best: the first object, replaced by the first one that
 * has `key` (with no key the first object is final). Returns 1 once the search can stop. Takes
 * j's reference. */
static int consider(json_t *j, json_t **best, const char *key)
{
	if (!j)
		return *best && (!key || json_object_get(*best, key));
	if (!*best || (key && !json_object_get(*best, key) && json_object_get(j, key))) {
		json_decref(*best);
		*best = j;
	} else {
		json_decref(j);
	}
	return !key || json_object_get(*best, key) != NULL;
}

/* Fenced blocks marked json or not marked, each parsed whole. 1 once the search can stop. */
static int from_fences(const char *a, json_t **best, const char *key)
{
	const char *body = NULL;
	int open = 0, usable = 0;
	for (const char *p = a; *p;) {
		const char *nl = strchr(p, '\n');
		const char *e = nl ? nl : p + strlen(p);
		const char *s = p;
		while (s < e && *s == ' ')
			s++;
		if (!strncmp(s, "```", 3)) {
			const char *info = s;
			while (info < e && *info == '`')
				info++;
			while (info < e && isspace((unsigned char)*info))
				info++;
			size_t il = (size_t)(e - info);
			while (il && isspace((unsigned char)info[il - 1]))
				il--;
			if (!open) {
				open = 1;
				usable = il == 0 || (il == 4 && !strncasecmp(info, "json", 4));
				body = nl ? nl + 1 : e;
			} else if (il == 0) {
				open = 0;
				json_error_t jerr;
				if (usable && consider(parse_object(body, (size_t)(s - body), &jerr), best, key))
					return 1;
			}
		}
		p = nl ? nl + 1 : e;
	}
	return 0;
}

/* One past the '}' that closes the span opened at s; NULL when it never closes. */
static const char *span_end(const char *s)
{
	int depth = 0, in_str = 0;
	for (const char *p = s; *p; p++) {
		if (in_str) {
			if (*p == '\\' && p[1])
				p++;
			else if (*p == '"')
				in_str = 0;
		} else if (*p == '"') {
			in_str = 1;
		} else if (*p == '{') {
			depth++;
		} else if (*p == '}' && --depth == 0) {
			return p + 1;
		}
	}
	return NULL;
}

json_t *st_answer_object(const char *answer, const char *key, const char *what, st_err *err)
{
	json_t *best = NULL;
	json_error_t jerr;
	if (consider(parse_object(answer, strlen(answer), &jerr), &best, key) ||
	    from_fences(answer, &best, key))
		return best;
	/* Top-level spans only: an object nested in a broken one is a part, not the answer, and
	 * returning it would hide the real syntax error behind a missing field. */
	int unclosed = 0, bad = 0;
	json_error_t bad_err = {0};
	for (const char *p = strchr(answer, '{'); p; p = strchr(p, '{')) {
		const char *e = span_end(p);
		if (!e) {
			unclosed = 1;
			break;
		}
		json_t *j = parse_object(p, (size_t)(e - p), &jerr);
		if (!j && !bad) {
			bad = 1;
			bad_err = jerr;
		}
		if (consider(j, &best, key))
			return best;
		p = e;
	}
	if (best)
		return best;
	if (bad)
		st_err_set(err, ST_E_INVALID, "%s: the JSON object is not valid JSON: %s (line %d, "
		           "column %d of the object)", what, bad_err.text, bad_err.line, bad_err.column);
	else if (unclosed)
		st_err_set(err, ST_E_INVALID, "%s: the JSON object is never closed (was the answer "
		           "cut off?)", what);
	else
		st_err_set(err, ST_E_INVALID, "%s: the answer contains no JSON object", what);
	return NULL;
}
