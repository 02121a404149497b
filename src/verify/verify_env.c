/* The per-GPU verify environment of verify_env.h: slots from a --gpus list, their GPU locks,
 * the runner pool, and what a verify in a slot shares (its st_verify_slot). */
#include "verify/verify_env.h"

#include <stdio.h>
#include <string.h>

#include "verify/gpu_share.h"

void st_verify_env_host(st_verify_env *v, int n)
{
	if (n > ST_VERIFY_ENV_MAX)
		n = ST_VERIFY_ENV_MAX;
	for (int i = 0; i < n; i++) {
		v->devices[i][0] = 0;
		v->gpu_of[i] = -1;
	}
	v->n_slots = n;
}

st_status st_verify_env_gpus(st_verify_env *v, const char *gpus, int per_gpu, const char *what,
                             st_err *err)
{
	const char *p = gpus;
	int per = per_gpu > 0 ? per_gpu : 1;
	long g;
	int more;
	while ((more = st_gpu_list_next(&p, &g)) > 0) {
		if (v->n_slots + per > ST_VERIFY_ENV_MAX)
			return st_err_set(err, ST_E_INVALID, "--gpus, --per-gpu: at most %d %s",
			                  ST_VERIFY_ENV_MAX, what);
		int lock = -1;
		if (per > 1) {
			lock = v->n_locks;
			int rc = st_gpu_lock_init(&v->locks[lock]);
			if (rc)
				return st_err_set(err, ST_E_SYSTEM, "the lock of GPU %ld: %s", g, strerror(rc));
			if ((rc = st_neighbours_init(&v->neighbours[lock]))) {
				pthread_rwlock_destroy(&v->locks[lock]);
				return st_err_set(err, ST_E_SYSTEM, "the neighbours' list of GPU %ld: %s", g,
				                  strerror(rc));
			}
			v->n_locks++;
		}
		for (int k = 0; k < per; k++) {
			snprintf(v->devices[v->n_slots], sizeof v->devices[0], "%ld", g);
			v->gpu_of[v->n_slots] = lock;
			v->n_slots++;
		}
	}
	if (more < 0)
		return st_err_set(err, ST_E_INVALID, "--gpus %s: not a comma list of GPU indexes", gpus);
	return ST_OK;
}

void st_verify_env_slot(const st_verify_env *v, int slot, st_shm_cache *shm, st_verify_slot *s)
{
	memset(s, 0, sizeof *s);
	s->devices = v->devices[slot][0] ? v->devices[slot] : NULL;
	s->gpu_lock = v->gpu_of[slot] >= 0 ? (pthread_rwlock_t *)&v->locks[v->gpu_of[slot]] : NULL;
	s->neighbours = v->gpu_of[slot] >= 0 ? (st_neighbours *)&v->neighbours[v->gpu_of[slot]]
	                                     : NULL;
	s->runner_pool = v->pool;
	s->shm_cache = shm;
}

void st_verify_env_free(st_verify_env *v)
{
	st_runner_pool_free(v->pool);
	v->pool = NULL;
	for (int i = 0; i < v->n_locks; i++) {
		pthread_rwlock_destroy(&v->locks[i]);
		st_neighbours_free(&v->neighbours[i]);
	}
	v->n_locks = 0;
}
