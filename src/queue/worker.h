/* The Redis queue's worker (`stitch worker`): pipelines that take verify jobs of this machine's
 * arch from the queue, verify them and store the results, until told to stop (worker.c says
 * how). */
#ifndef ST_QUEUE_WORKER_H
#define ST_QUEUE_WORKER_H

#include <signal.h>

#include "common/st_error.h"
#include "stitch/stitch.h"

typedef struct st_worker_opts {
	const char *url;          /* the Redis server */
	const char *name;         /* the worker's name in the group (no '/') */
	const char *tasks_root;   /* where the jobs' task ids resolve */
	const char *spool;        /* where job code is written (made if missing) */
	const char *gpus;         /* cuda: comma list of GPU indexes, a pipeline each */
	int per_gpu;              /* cuda: pipelines per GPU (>= 1) */
	int host_workers;         /* host backend: pipelines */
	int keep;                 /* runners kept loaded between jobs (0: no pool) */
	int spares;               /* spare runners kept started per pipeline */
	double reclaim_s, stale_s, lease_s;
	st_verify_opts vo;        /* every job's verify options, before the job's own */
	volatile sig_atomic_t *stop; /* set (by a signal handler): finish the running jobs, return */
} st_worker_opts;

/* Run the worker until *o->stop; *done and *dups (either may be NULL) count the jobs answered
 * and the duplicate deliveries acknowledged. ST_E_INVALID for a bad --gpus list, ST_E_NODEVICE
 * when the GPU's arch cannot be learned, ST_E_IO when the spool cannot be made, ST_E_SYSTEM
 * when a GPU lock cannot be made. */
st_status st_worker_run(const st_worker_opts *o, long *done, long *dups, st_err *err);

#endif
