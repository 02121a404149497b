/* Status codes and the error message buffer every library function fills on failure.
 * Library code returns an st_status and never exits; only cmd_* turn these into exit codes. */
#ifndef ST_ERROR_H
#define ST_ERROR_H

#include <stddef.h>

typedef enum st_status {
	ST_OK = 0,
	ST_E_INVALID,  /* bad input from the user: task file, solution file, option */
	ST_E_IO,       /* a file or pipe operation failed */
	ST_E_NOMEM,
	ST_E_SYSTEM,   /* a system call failed for a reason that is not the user's */
	ST_E_TIMEOUT,
	ST_E_NODEVICE, /* no usable GPU */
	ST_E_BUSY,     /* a bounded queue is full: wait and try again */
} st_status;

typedef struct st_err {
	char msg[1024];
} st_err;

/* printf-style; safe with err == NULL. Returns `code` so callers can `return st_err_set(...)`. */
st_status st_err_set(st_err *err, st_status code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefix an existing message: "what: <old message>". */
st_status st_err_wrap(st_err *err, st_status code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
