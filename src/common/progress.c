/* st_vprogress: a line on the stack, cut where the caller's lines are cut. */
#include "progress.h"

#include <stdio.h>

void st_vprogress(void (*fn)(void *arg, const char *line), void *arg, size_t max,
                  const char *fmt, va_list ap)
{
	if (!fn)
		return;
	char line[ST_PROGRESS_MAX];
	if (max == 0 || max > sizeof line)
		max = sizeof line;
	vsnprintf(line, max, fmt, ap);
	fn(arg, line);
}
