/* For the unit tests that stop and resume real processes (test_neighbours.c, test_gpu_lock.c): a
 * child asleep in its own process group, as a runner between two requests, that dies with the
 * test; and a process's state letter from /proc. Header-only: each unit test is one file. */
#ifndef ST_TEST_CHILD_PROC_H
#define ST_TEST_CHILD_PROC_H

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static pid_t idle_child(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed assertion must not leave it behind */
		for (;;)
			pause();
	}
	setpgid(pid, pid);
	return pid;
}

/* The state letter of pid in /proc (R, S, T, ...), or '?' */
static char state_of(pid_t pid)
{
	char path[64], line[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return '?';
	const char *p = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
	fclose(f);
	return p && p[1] == ' ' ? p[2] : '?';
}

#endif
