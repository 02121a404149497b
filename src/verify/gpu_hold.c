/* The GPU-hold state machine of gpu_hold.h: FREE, SHARED (a read lock) or EXCLUSIVE (the write
 * lock) on a verify's st_verify_slot.gpu_lock and on the GPU's file lock, every hold given up
 * recorded for the verdict. */
#include <assert.h>
#include <jansson.h>
#include <pthread.h>

#include "common/clock.h"
#include "verify/gpu_hold.h"

int st_gpu_hold_has_lock(const st_gpu_hold *h)
{
	return h->lock || h->file;
}

static void take(st_gpu_hold *h, int exclusive)
{
	/* rwlocks do not nest: taking again while held would deadlock (write) or leak (read) */
	assert(st_gpu_hold_has_lock(h) && h->held == ST_GPU_FREE);
	double t0 = st_now_s();
	if (h->lock && exclusive)
		pthread_rwlock_wrlock(h->lock);
	else if (h->lock)
		pthread_rwlock_rdlock(h->lock);
	/* A file lock that fails (the file system), or whose holder keeps it past the limit (a
	 * process stopped with ^Z while it measured), leaves this verify with the in-process lock
	 * alone: what it was before file locks existed, not a reason to stop or to hang. */
	if (h->file &&
	    st_gpu_flock_take(h->file, exclusive, h->file_give_up_s, h->waiting, h->waiting_arg) < 0)
		h->file_missed++;
	h->since = st_now_s();
	h->wait_s += h->since - t0;
	h->held = exclusive ? ST_GPU_EXCLUSIVE : ST_GPU_SHARED;
}

/* Give the hold up, and note it: a service's verifies together tell how long each GPU was
 * measured on, shared, or left alone. */
static void unlock(st_gpu_hold *h)
{
	/* unlocking a lock not held is undefined behaviour, and would free another verify's hold */
	assert(st_gpu_hold_has_lock(h) && h->held != ST_GPU_FREE);
	if (h->file)
		st_gpu_flock_give(h->file);
	if (h->lock)
		pthread_rwlock_unlock(h->lock);
	if (h->holds)
		json_array_append_new(h->holds,
		                      json_pack("[s,f,f]", h->held == ST_GPU_EXCLUSIVE ? "x" : "s",
		                                h->since, st_now_s()));
	h->held = ST_GPU_FREE;
}

void st_gpu_hold_use(st_gpu_hold *h)
{
	if (st_gpu_hold_has_lock(h) && h->held == ST_GPU_FREE)
		take(h, h->alone);
	assert(!st_gpu_hold_has_lock(h) || h->held != ST_GPU_FREE);
}

void st_gpu_hold_idle(st_gpu_hold *h)
{
	if (st_gpu_hold_has_lock(h) && h->held == ST_GPU_SHARED)
		unlock(h);
	assert(h->held != ST_GPU_SHARED);
}

void st_gpu_hold_for(st_gpu_hold *h, int on_gpu)
{
	if (on_gpu)
		st_gpu_hold_use(h);
	else
		st_gpu_hold_idle(h);
}

void st_gpu_hold_release(st_gpu_hold *h)
{
	if (st_gpu_hold_has_lock(h) && h->held != ST_GPU_FREE)
		unlock(h);
	assert(h->held == ST_GPU_FREE);
}

/* A read lock cannot be upgraded in place: give it up, then wait for the GPU alone. */
void st_gpu_hold_exclusive(st_gpu_hold *h)
{
	if (!st_gpu_hold_has_lock(h) || h->held == ST_GPU_EXCLUSIVE)
		return;
	st_gpu_hold_release(h);
	take(h, 1);
	assert(h->held == ST_GPU_EXCLUSIVE);
}
