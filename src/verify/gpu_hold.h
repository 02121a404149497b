/* One verify's hold on the GPU it shares with other verifies (st_verify_slot.gpu_lock): shared
 * while this verify's runners work on the GPU (load, set-up, runs, teardown), exclusive for
 * whatever measures (timing, the profile, the peaks), and not held at all during work on the CPU
 * alone (compiling, comparing outputs), so that another verify can measure meanwhile. Runners
 * that sit idle between requests hold memory but run nothing, which disturbs no measurement.
 * The same holds are taken on the GPU's file lock (gpu_flock.h), for the verifies of other
 * processes; the in-process lock first, so that one process's verifies queue on it, not on the
 * file. Apart from the verify's context so that the state machine can be tested alone. */
#ifndef ST_GPU_HOLD_H
#define ST_GPU_HOLD_H

#include <jansson.h>
#include <pthread.h>

#include "verify/gpu_flock.h"

enum { ST_GPU_FREE, ST_GPU_SHARED, ST_GPU_EXCLUSIVE };

typedef struct st_gpu_hold {
	pthread_rwlock_t *lock; /* slot->gpu_lock; NULL: no verify of this process shares the GPU */
	st_gpu_flock *file;     /* the GPU's lock across processes, or NULL; with neither, every
	                         * call is a no-op */
	double file_give_up_s;  /* the longest wait for the file lock (0: no limit): past it the hold
	                         * goes on without it, counted in file_missed */
	int file_missed;        /* holds taken without the file lock (a failure, or the limit) */
	void (*waiting)(void *arg, double s); /* told every 5 s of a wait on the file lock */
	void *waiting_arg;
	int alone;              /* slot->gpu_alone: exclusive from the first use on */
	int held;               /* ST_GPU_FREE, ST_GPU_SHARED or ST_GPU_EXCLUSIVE */
	double wait_s;          /* time spent waiting for the locks */
	double since;           /* when the present hold began (st_now_s) */
	json_t *holds;          /* the holds so far: [mode "s" or "x", from, to] in st_now_s time,
	                         * which is one clock for every verify of a service; NULL: not kept */
} st_gpu_hold;

/* Is there a lock to hold (this process's, the file, or both)? Without one every call below is
 * a no-op and the verdict has no waits to report. */
int st_gpu_hold_has_lock(const st_gpu_hold *h);

/* Runners are about to use the GPU: share it, unless this verify already has it to itself or
 * must have it alone throughout (alone). */
void st_gpu_hold_use(st_gpu_hold *h);
/* Work on the CPU alone ahead: a shared hold is given up (an exclusive one is kept: the
 * measurement it protects is still going on). */
void st_gpu_hold_idle(st_gpu_hold *h);
/* Runners about to use the GPU (use), or only to copy results to the host (idle). */
void st_gpu_hold_for(st_gpu_hold *h, int on_gpu);
/* Whatever is held is given up. */
void st_gpu_hold_release(st_gpu_hold *h);
/* The GPU alone, for a measurement; a shared hold is given up first. */
void st_gpu_hold_exclusive(st_gpu_hold *h);

#endif
