/* The operator's log lines of stitch serve, apart from st_serve_run (serve.c) so that the service
 * (service.c) and the warm-up (warm.c) can log without calling back into the file that starts
 * them. */
#ifndef ST_SERVE_LOG_H
#define ST_SERVE_LOG_H

#include "serve.h"

/* A line for the operator through o->log (stderr, prefixed "serve: ", when NULL). */
void st_serve_log(const st_serve_opts *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
