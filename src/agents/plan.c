/* The Planner's answer to a checked plan. Models asked for "one JSON object" still wrap it in a
 * ```json fence or put a sentence before it, so the object is looked for in three places (the
 * whole answer, each fenced block, then each top-level {...} span found by brace matching that
 * respects strings). The check is strict about types, because the workflow reads the fields
 * without further tests, and every error names the field in words the model can fix in its one
 * repair request. */
#include "agents/agents.h"

#include <ctype.h>
#include <stdlib.h>
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

/* Each fenced block marked json (or not marked at all), parsed whole. */
static json_t *from_fences(const char *a)
{
	const char *p = a, *body = NULL;
	int open = 0, usable = 0;
	while (*p) {
		const char *nl = strchr(p, '\n');
		const char *e = nl ? nl : p + strlen(p);
		const char *s = p;
		while (s < e && *s == ' ')
			s++;
		if (!strncmp(s, "```", 3)) {
			const char *info = s + 3;
			while (info < e && (*info == '`' || isspace((unsigned char)*info)))
				info++;
			size_t il = (size_t)(e - info);
			while (il && isspace((unsigned char)info[il - 1]))
				il--;
			if (!open) {
				open = 1;
				usable = il == 0 || (il >= 4 && !strncasecmp(info, "json", 4));
				body = nl ? nl + 1 : e;
			} else if (il == 0) {
				open = 0;
				if (usable) {
					json_error_t jerr;
					json_t *j = parse_object(body, (size_t)(s - body), &jerr);
					if (j)
						return j;
				}
			}
		}
		p = nl ? nl + 1 : e;
	}
	return NULL;
}

/* The end of the {...} span that starts at s (one past its '}'), or NULL when it never closes. */
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

static json_t *find_object(const char *a, st_err *err)
{
	const char *s = a;
	while (isspace((unsigned char)*s))
		s++;
	json_error_t jerr;
	json_t *j = parse_object(s, strlen(s), &jerr);
	if (j)
		return j;
	j = from_fences(a);
	if (j)
		return j;
	/* Top-level spans only: an object nested in a broken one is a step, not the plan, and
	 * returning it would hide the real syntax error behind "summary is missing". */
	const char *first_bad = NULL;
	json_error_t bad_err = {0};
	for (const char *p = strchr(a, '{'); p; p = strchr(p, '{')) {
		const char *e = span_end(p);
		if (!e) {
			if (first_bad)
				break;
			st_err_set(err, ST_E_INVALID, "plan: the JSON object is never closed (was the "
			           "answer cut off?)");
			return NULL;
		}
		j = parse_object(p, (size_t)(e - p), &jerr);
		if (j)
			return j;
		if (!first_bad) {
			first_bad = p;
			bad_err = jerr;
		}
		p = e;
	}
	if (first_bad) {
		st_err_set(err, ST_E_INVALID, "plan: the JSON object is not valid JSON: %s (line %d, "
		           "column %d of the object)", bad_err.text, bad_err.line, bad_err.column);
		return NULL;
	}
	st_err_set(err, ST_E_INVALID, "plan: the answer contains no JSON object");
	return NULL;
}

static int nonempty_string(const json_t *v)
{
	const char *s = json_string_value(v);
	if (!s)
		return 0;
	while (isspace((unsigned char)*s))
		s++;
	return *s != 0;
}

/* An optional array of strings at o[key]: missing or null becomes [], anything else but an
 * array of strings is an error naming `path`. */
static st_status string_array(json_t *o, const char *key, const char *path, st_err *err)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v)) {
		if (json_object_set_new(o, key, json_array()))
			return st_err_set(err, ST_E_NOMEM, "plan: out of memory");
		return ST_OK;
	}
	if (!json_is_array(v))
		return st_err_set(err, ST_E_INVALID, "plan: %s must be an array of strings", path);
	size_t i;
	json_t *x;
	json_array_foreach(v, i, x) if (!json_is_string(x))
		return st_err_set(err, ST_E_INVALID, "plan: %s[%zu] must be a string", path, i);
	return ST_OK;
}

/* An optional string at o[key]: null is dropped (models write it for "nothing"). */
static st_status optional_string(json_t *o, const char *key, const char *path, st_err *err)
{
	json_t *v = json_object_get(o, key);
	if (v && json_is_null(v)) {
		json_object_del(o, key);
		return ST_OK;
	}
	if (v && !json_is_string(v))
		return st_err_set(err, ST_E_INVALID, "plan: %s must be a string", path);
	return ST_OK;
}

static st_status check(json_t *plan, st_err *err)
{
	json_t *summary = json_object_get(plan, "summary");
	if (!summary)
		return st_err_set(err, ST_E_INVALID, "plan: summary is missing");
	if (!nonempty_string(summary))
		return st_err_set(err, ST_E_INVALID, "plan: summary must be a non-empty string");
	json_t *steps = json_object_get(plan, "steps");
	if (!steps)
		return st_err_set(err, ST_E_INVALID, "plan: steps is missing");
	if (!json_is_array(steps))
		return st_err_set(err, ST_E_INVALID, "plan: steps must be an array of step objects");
	if (json_array_size(steps) == 0)
		return st_err_set(err, ST_E_INVALID, "plan: steps must hold at least one step");
	size_t i;
	json_t *step;
	json_array_foreach(steps, i, step) {
		char path[64];
		if (!json_is_object(step))
			return st_err_set(err, ST_E_INVALID, "plan: steps[%zu] must be an object", i);
		json_t *what = json_object_get(step, "what");
		if (!what)
			return st_err_set(err, ST_E_INVALID, "plan: steps[%zu].what is missing", i);
		if (!nonempty_string(what))
			return st_err_set(err, ST_E_INVALID, "plan: steps[%zu].what must be a non-empty "
			                  "string", i);
		snprintf(path, sizeof path, "steps[%zu].kernels", i);
		st_status s = string_array(step, "kernels", path, err);
		if (s)
			return s;
		snprintf(path, sizeof path, "steps[%zu].fusion", i);
		if ((s = optional_string(step, "fusion", path, err)))
			return s;
		snprintf(path, sizeof path, "steps[%zu].host_setup", i);
		if ((s = optional_string(step, "host_setup", path, err)))
			return s;
	}
	static const char *const lists[] = { "bottlenecks", "risks", "constraints" };
	for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++) {
		st_status s = string_array(plan, lists[k], lists[k], err);
		if (s)
			return s;
	}
	return ST_OK;
}

st_status st_plan_parse(const char *answer, json_t **plan, st_err *err)
{
	*plan = NULL;
	if (!answer)
		return st_err_set(err, ST_E_INVALID, "plan: the answer contains no JSON object");
	json_t *j = find_object(answer, err);
	if (!j)
		return ST_E_INVALID;
	st_status s = check(j, err);
	if (s) {
		json_decref(j);
		return s;
	}
	*plan = j;
	return ST_OK;
}
