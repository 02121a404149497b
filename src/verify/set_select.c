/* The size-set selection rule (set_select.h). */
#include "set_select.h"

#include "task/task.h"

#include <string.h>

int st_set_selected(const char *list, const char *label)
{
	if (!list)
		return 1;
	int hidden = st_set_label_hidden(label);
	for (const char *p = list; *p;) {
		size_t len = strcspn(p, ",");
		if ((len == strlen(label) && !strncmp(p, label, len)) ||
		    (hidden && len == 6 && !strncmp(p, "hidden", 6)))
			return 1;
		p += len + (p[len] == ',');
	}
	return 0;
}

const char *st_verify_time_set(const st_verify_opts *o, int stored)
{
	int host = !strcmp(o->backend, "host");
	return o->time_set ? o->time_set : host && !stored ? "small" : "eval";
}

int st_verify_set_runs(const st_verify_opts *o, int stored, const char *label, int *timed)
{
	int host = !strcmp(o->backend, "host");
	/* An imported task has its eval set only, on either backend. */
	const char *sel = o->sets ? o->sets : host && !stored ? "small" : NULL;
	*timed = !strcmp(label, st_verify_time_set(o, stored));
	return *timed || st_set_selected(sel, label);
}
