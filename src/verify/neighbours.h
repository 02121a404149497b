/* The untrusted candidates' runners of the verifies that share one GPU (stitch serve and stitch
 * worker with --per-gpu 2 or more, stitch eval's pipelines): a verify times its baselines with
 * its own candidate stopped (timing.c), and every batch, its candidate's too, with these stopped,
 * so that no candidate of a neighbouring verify, idle while it waits for the GPU, can keep a CPU
 * or the GPU busy under another verify's timing. A runner joins when its candidate is loaded
 * (under the GPU's shared hold, so never while a neighbour measures) and leaves before it is
 * killed and reaped, so that a process group id is never signalled after it could have been
 * reused. */
#ifndef ST_NEIGHBOURS_H
#define ST_NEIGHBOURS_H

#include <pthread.h>
#include <sys/types.h>

#define ST_NEIGHBOURS_MAX 64

typedef struct st_neighbours {
	pthread_mutex_t mu;
	pid_t group[ST_NEIGHBOURS_MAX]; /* the runners' process groups */
	int n;
} st_neighbours;

/* 0, or an errno value when the mutex cannot be made. */
int st_neighbours_init(st_neighbours *nb);
void st_neighbours_free(st_neighbours *nb);

/* Runner process group `group` joins (0), or -1 when the list is full (then it is not stopped for
 * its neighbours' timing: the caller says so). */
int st_neighbours_join(st_neighbours *nb, pid_t group);
/* It leaves; a group that never joined is ignored. */
void st_neighbours_leave(st_neighbours *nb, pid_t group);

/* Stop (SIGSTOP) every group but `own` (0: none is own); how many were asked to. */
int st_neighbours_stop(st_neighbours *nb, pid_t own);
/* Let every group but `own` run again (SIGCONT). */
void st_neighbours_resume(st_neighbours *nb, pid_t own);

#endif
