/* Status codes and the error message buffer of the public API: every library function returns an
 * st_status and fills an st_err on failure (the functions that fill one are in src/common/
 * st_error.h). */
#ifndef STITCH_ERROR_H
#define STITCH_ERROR_H

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

#endif
