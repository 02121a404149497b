/* The runner's sandbox, installed after the device is opened and before any solution code is
 * loaded (its constructors included): least privilege, rlimits, no new privileges and a seccomp
 * filter. The list of what is denied lives in sandbox.c, in one table. */
#ifndef ST_SANDBOX_H
#define ST_SANDBOX_H

#include <stddef.h>

typedef struct st_sandbox_opts {
	unsigned uid;         /* when started as root, become this user and group (no passwd entry
	                         needed): each runner gets its own, so runners cannot read each other */
	const char *workdir;  /* the one folder it may write (and the only one outside the system's) */
	int host_backend;     /* the host backend also gets an address-space limit, and its
	                         solutions may not start threads */
	double cpu_seconds;   /* RLIMIT_CPU; 0: 3600 */
} st_sandbox_opts;

typedef struct st_sandbox_state {
	int fs_isolated;      /* Landlock confines file access (kernel support needed) */
	int privileges_dropped;
} st_sandbox_state;

/* 0 when installed; otherwise -1 with what failed in err (the runner then refuses to work).
 * File-system confinement is best effort (Landlock): *state says whether it is in force. */
int st_sandbox_apply(const st_sandbox_opts *o, st_sandbox_state *state, char *err, size_t len);

#endif
