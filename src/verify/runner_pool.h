/* Runners kept between verifies, for a long-running caller (stitch serve). Starting a runner
 * costs a process, a sandbox and a device context, and loading a solution costs its module
 * load: a service that verifies one candidate after another pays that for every request unless
 * it keeps them. Two kinds are kept:
 *  - spares: started and sandboxed, nothing loaded yet; started ahead by a background thread per
 *    kind (per GPU), so a verify takes one instead of waiting for a start. Any role may take one.
 *  - loaded runners of trusted solutions (references, experts) after a verify, keyed by the
 *    compiled module, its task hooks and the runner's device and flags: the next verify of the
 *    same task takes it with the solution already loaded.
 * A runner that loaded untrusted code is never kept. A kept runner answers a harmless request
 * before it is handed out, so one that died while idle is replaced, not blamed on a verify. */
#ifndef ST_RUNNER_POOL_H
#define ST_RUNNER_POOL_H

#include <pthread.h>

#include "verify/runner_client.h"

typedef struct st_runner_pool st_runner_pool;

/* spares: fresh runners to keep ready per (backend, flags, devices) once that kind has been
 * asked for; max_loaded: loaded runners kept at most (the least recently used go first). */
st_runner_pool *st_runner_pool_new(int spares, int max_loaded);
/* Stops every kept runner and the background thread. */
void st_runner_pool_free(st_runner_pool *p);

/* A spare for `label` into *r: 1, or 0 when none is ready (then start one as usual). The pool
 * remembers the kind and keeps spares of it from now on; once it does, a take that finds none
 * waits for one its starters are starting (up to 15 s, and not after a start of theirs failed). Like any runner's start, theirs does
 * not wait for the GPU's lock (st_verify_slot.gpu_lock): see runner_pool.c. */
int st_runner_pool_take_spare(st_runner_pool *p, const char *backend, int flags,
                              const char *devices, const char *label, st_runner *r);
/* A runner that has `key` loaded (see st_runner_pool_give), or 0. */
int st_runner_pool_take_loaded(st_runner_pool *p, const char *key, const char *label,
                               st_runner *r);
/* Hand a healthy runner back: key NULL for one with nothing loaded (a spare again), else the key
 * of what it has loaded. backend, flags and devices are what it was started with. *r is taken
 * over (zeroed). */
void st_runner_pool_give(st_runner_pool *p, st_runner *r, const char *backend, int flags,
                         const char *devices, const char *key);

/* Figures for /metrics and tests: spares and loaded runners kept now, and how many takes found
 * one. */
typedef struct st_runner_pool_stats {
	int spares, loaded;
	long spare_hits, spare_misses, loaded_hits, loaded_misses, started;
} st_runner_pool_stats;
void st_runner_pool_stats_get(st_runner_pool *p, st_runner_pool_stats *out);

#endif
