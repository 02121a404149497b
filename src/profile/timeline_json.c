/* The timeline as the runner sends it: a "profile" object whose "acts" are compact arrays, one per
 * CUPTI record, with times in microseconds from the start of the profiled st_run. Kernel names
 * arrive mangled; they are demangled here, in the parent, where the C++ runtime's demangler is
 * at hand and a malformed name from a hostile runner cannot hurt the measurement. */
#include "timeline.h"

#include <stdlib.h>
#include <string.h>

/* The C++ ABI's demangler (libstdc++), declared here so that this file stays C. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

void st_timeline_init(st_timeline *t)
{
	memset(t, 0, sizeof *t);
}

void st_timeline_free(st_timeline *t)
{
	for (int i = 0; i < t->n; i++)
		free(t->acts[i].name);
	free(t->acts);
	memset(t, 0, sizeof *t);
}

static char *demangled(const char *name)
{
	int status = -1;
	char *d = strncmp(name, "_Z", 2) ? NULL : __cxa_demangle(name, NULL, NULL, &status);
	if (d && status == 0)
		return d;
	free(d);
	return strdup(name);
}

/* Element i of an activity record (an array) as a number; 0 when it is not one. */
static double at_num(const json_t *a, size_t i)
{
	return json_number_value(json_array_get(a, i));
}

static st_status parse_act(const json_t *a, st_activity *x, size_t index, st_err *err)
{
	const char *tag = json_string_value(json_array_get(a, 0));
	const char *name = json_string_value(json_array_get(a, 1));
	if (!json_is_array(a) || json_array_size(a) < 6 || !tag || !name)
		return st_err_set(err, ST_E_INVALID, "profile: record %zu is not [tag, name, start, end, "
		                  "stream, corr, ...]", index);
	memset(x, 0, sizeof *x);
	switch (tag[0]) {
	case 'k': x->kind = ST_ACT_KERNEL; break;
	case 'c': x->kind = ST_ACT_MEMCPY; break;
	case 's': x->kind = ST_ACT_MEMSET; break;
	case 'y': x->kind = ST_ACT_SYNC; break;
	case 'a': x->kind = ST_ACT_API; break;
	default:
		return st_err_set(err, ST_E_INVALID, "profile: record %zu has unknown tag '%s'", index,
		                  tag);
	}
	x->start_us = at_num(a, 2);
	x->end_us = at_num(a, 3);
	if (!(x->end_us >= x->start_us))
		return st_err_set(err, ST_E_INVALID, "profile: record %zu ends before it starts", index);
	x->stream = (uint32_t)at_num(a, 4);
	x->corr = (uint32_t)at_num(a, 5);
	if (x->kind == ST_ACT_KERNEL) {
		if (json_array_size(a) < 15)
			return st_err_set(err, ST_E_INVALID, "profile: kernel record %zu is short", index);
		for (int d = 0; d < 3; d++) {
			x->grid[d] = (int)at_num(a, 6 + (size_t)d);
			x->block[d] = (int)at_num(a, 9 + (size_t)d);
		}
		x->regs = (int)at_num(a, 12);
		x->smem_static = (int)at_num(a, 13);
		x->smem_dynamic = (int)at_num(a, 14);
	} else if (x->kind == ST_ACT_MEMCPY || x->kind == ST_ACT_MEMSET) {
		x->bytes = (int64_t)at_num(a, 6);
	}
	x->name = x->kind == ST_ACT_KERNEL ? demangled(name) : strdup(name);
	if (!x->name)
		return st_err_set(err, ST_E_NOMEM, "profile: out of memory");
	return ST_OK;
}

st_status st_timeline_from_json(const json_t *j, st_timeline *t, st_err *err)
{
	st_timeline_init(t);
	const json_t *acts = json_object_get(j, "acts");
	if (!json_is_object(j) || !json_is_array(acts))
		return st_err_set(err, ST_E_INVALID, "profile: reply has no \"acts\" array");
	t->run_wall_us = json_number_value(json_object_get(j, "run_wall_us"));
	t->run_event_us = json_number_value(json_object_get(j, "run_event_us"));
	t->dropped = (int64_t)json_integer_value(json_object_get(j, "dropped"));
	size_t n = json_array_size(acts);
	t->acts = calloc(n ? n : 1, sizeof *t->acts);
	if (!t->acts)
		return st_err_set(err, ST_E_NOMEM, "profile: out of memory for %zu records", n);
	t->cap = (int)n;
	for (size_t i = 0; i < n; i++) {
		st_status s = parse_act(json_array_get(acts, i), &t->acts[t->n], i, err);
		if (s) {
			st_timeline_free(t);
			return s;
		}
		t->n++;
	}
	return ST_OK;
}
