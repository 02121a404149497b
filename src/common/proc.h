/* Run a program to completion with a wall-clock timeout, capturing stdout and stderr together.
 * The child gets its own process group, so a timeout kills everything it started. */
#ifndef ST_PROC_H
#define ST_PROC_H

#include <stddef.h>
#include "st_error.h"

typedef struct st_proc_result {
	int exit_code;   /* valid when signal == 0 and !timed_out */
	int signal;      /* terminating signal, or 0 */
	int timed_out;
	char *out;       /* NUL-terminated combined output (truncated to max_output) */
	size_t out_len;
	double wall_s;
} st_proc_result;

/* argv[0] is looked up on PATH. cwd may be NULL. Returns ST_OK whenever the program ran (whatever
 * its exit status); an error only when it could not be started (then err says why). */
st_status st_proc_run(char *const argv[], const char *cwd, double timeout_s, size_t max_output,
                      st_proc_result *res, st_err *err);
void st_proc_result_free(st_proc_result *res);

#endif
