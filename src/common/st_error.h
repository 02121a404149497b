/* Status codes and the error message buffer every library function fills on failure.
 * Library code returns an st_status and never exits; only cmd_* turn these into exit codes. */
#ifndef ST_ERROR_H
#define ST_ERROR_H

#include <stddef.h>

#include "stitch/error.h"

/* printf-style; safe with err == NULL. Returns `code` so callers can `return st_err_set(...)`. */
st_status st_err_set(st_err *err, st_status code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefix an existing message: "what: <old message>". */
st_status st_err_wrap(st_err *err, st_status code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
