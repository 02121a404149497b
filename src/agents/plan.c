/* The Planner's answer to a checked plan: the object is found by st_answer_object (the whole
 * answer, a fenced block, or a top-level {...} span). The check is strict about types, because
 * the workflow reads the fields without further tests, and every error names the field in words
 * the model can fix in its one repair request. */
#include "agents/agents.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

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
	json_t *j = st_answer_object(answer, NULL, "plan", err);
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
