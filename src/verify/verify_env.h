/* The verify environment of a program that runs several verifies at once on its GPUs (stitch
 * serve's workers, stitch worker's pipelines): one slot per verifying thread with its GPU
 * (CUDA_VISIBLE_DEVICES), the GPU's lock when several slots share one GPU, one runner pool for
 * all slots, and each slot's st_verify_slot built from those and its shared-memory cache. Built
 * the same way by both, so that a verify sees the same neighbours whichever program runs it. */
#ifndef ST_VERIFY_ENV_H
#define ST_VERIFY_ENV_H

#include <pthread.h>

#include "common/st_error.h"
#include "stitch/stitch.h"
#include "verify/neighbours.h"
#include "verify/runner_pool.h"
#include "verify/shm_cache.h"

#define ST_VERIFY_ENV_MAX 64

typedef struct st_verify_env {
	int n_slots;
	char devices[ST_VERIFY_ENV_MAX][16]; /* per slot: its CUDA_VISIBLE_DEVICES, "" on host */
	int gpu_of[ST_VERIFY_ENV_MAX];       /* per slot: its GPU's index into locks, or -1 */
	pthread_rwlock_t locks[ST_VERIFY_ENV_MAX];
	st_neighbours neighbours[ST_VERIFY_ENV_MAX]; /* per lock: its verifies' candidates */
	int n_locks;
	st_runner_pool *pool;                /* NULL: every verify starts its own runners */
} st_verify_env;

/* n slots without a GPU (the host backend), at most ST_VERIFY_ENV_MAX. */
void st_verify_env_host(st_verify_env *v, int n);

/* per_gpu slots for each GPU of the comma list `gpus`, with a lock per GPU when per_gpu > 1.
 * ST_E_INVALID for a list that is not GPU indexes or more than ST_VERIFY_ENV_MAX slots (the
 * message counts them as `what`: "workers", "pipelines"), ST_E_SYSTEM when a lock cannot be
 * made. v must be zeroed first. */
st_status st_verify_env_gpus(st_verify_env *v, const char *gpus, int per_gpu, const char *what,
                             st_err *err);

/* Slot `slot` as its verifies run in it: its GPU, that GPU's lock and neighbours, the pool and
 * the slot's shared-memory blocks (shm, or NULL); no progress lines. */
void st_verify_env_slot(const st_verify_env *v, int slot, st_shm_cache *shm, st_verify_slot *s);

/* The pool and the locks; after every slot's thread has ended. */
void st_verify_env_free(st_verify_env *v);

#endif
