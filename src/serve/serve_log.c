/* The operator's log lines of stitch serve (serve_log.h): through the options' log callback, or
 * on stderr. */
#include "serve_log.h"

#include <stdarg.h>
#include <stdio.h>

void st_serve_log(const st_serve_opts *o, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (o->log)
		o->log(line);
	else
		fprintf(stderr, "serve: %s\n", line);
}
