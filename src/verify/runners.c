/* Runner processes: taken from the pool (loaded or spare) or started, described in the verdict,
 * and after the verify given back to the pool or stopped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "verify/reply.h"
#include "verify/runner_pool.h"
#include "verify/verify_int.h"

/* Runners under ncu are started for one pass and read back after it: never pooled. */
int vx_pooling(const vctx *v)
{
	return v->slot->runner_pool && !v->under_ncu;
}

/* Solution i's runner goes back to the pool loaded after this verify (see keep_runner). */
int vx_poolable(const vctx *v, int i)
{
	return vx_pooling(v) && v->sols[i].trusted && v->sols[i].pool_key[0];
}

/* The key a kept runner of compiled trusted solution i has in the pool; 0 when it has none. */
static int pool_key_of(vctx *v, int i)
{
	sol *so = &v->sols[i];
	if (!vx_pooling(v) || !so->trusted || so->stored || !so->cr.ok || !so->cr.so_path[0] ||
	    (so->flags & ST_RUNNER_NCU))
		return 0;
	char key[sizeof so->pool_key];
	snprintf(key, sizeof key, "%s|%d|%s|%s|%s", v->o->backend, so->flags,
	         v->slot->devices ? v->slot->devices : "", so->cr.so_path, v->hooks_so);
	memcpy(so->pool_key, key, sizeof key);
	return 1;
}

/* Trusted solutions whose module (and task hooks) a kept runner already has loaded: that runner
 * replaces the spare or fresh one this verify started for it, which goes back to the pool. */
void vx_swap_in_loaded(vctx *v)
{
	for (int i = 0; i < v->n_sols; i++) {
		sol *so = &v->sols[i];
		st_runner kept;
		if (!pool_key_of(v, i) || !st_runner_pool_take_loaded(v->slot->runner_pool, so->pool_key,
		                                                      vx_role_of(v, i), &kept))
			continue;
		st_runner_pool_give(v->slot->runner_pool, &so->runner, v->o->backend, so->flags,
		                    v->slot->devices, NULL);
		so->runner = kept;
		so->loaded = 1;
	}
}

/* A runner per solution: a kept one with it loaded (`compiled`: the modules are known), else a
 * spare from the pool, else a fresh start; then the fresh ones' hellos, read together. */
st_status vx_acquire_runners(vctx *v, int compiled, st_err *err)
{
	const st_verify_opts *o = v->o;
	const st_verify_slot *slot = v->slot;
	for (int i = 0; i < v->n_sols; i++) {
		sol *so = &v->sols[i];
		double t0 = st_now_s();
		so->flags = (o->no_sandbox ? 0 : ST_RUNNER_SANDBOX) |
		            (i == v->cand && vx_profiling(v) ? ST_RUNNER_PROFILE : 0) |
		            (i == v->cand && v->under_ncu ? ST_RUNNER_NCU : 0);
		so->loaded = so->from_pool =
			compiled && pool_key_of(v, i) &&
			st_runner_pool_take_loaded(slot->runner_pool, so->pool_key, vx_role_of(v, i),
			                           &so->runner);
		if (!so->from_pool)
			so->from_pool = vx_pooling(v) &&
			                st_runner_pool_take_spare(slot->runner_pool, o->backend, so->flags,
			                                          slot->devices, vx_role_of(v, i),
			                                          &so->runner);
		so->got = so->loaded ? "loaded" : so->from_pool ? "spare" : "started";
		if (!so->from_pool) { /* without the GPU's lock, as the pool's spares (runner_pool.c) */
			st_status s = st_runner_start(&so->runner, o->backend, vx_role_of(v, i), so->flags,
			                              slot->devices, err);
			if (s)
				return s;
		}
		so->started = 1;
		so->got_ms = 1e3 * (st_now_s() - t0);
	}
	vx_reserve_shm(v);
	for (int i = 0; i < v->n_sols; i++) {
		if (v->sols[i].from_pool)
			continue;
		double t0 = st_now_s();
		st_status s = st_runner_hello(&v->sols[i].runner, 120, err);
		if (s)
			return s;
		v->sols[i].got_ms += 1e3 * (st_now_s() - t0);
	}
	return ST_OK;
}

/* Where each runner came from and what getting it cost (the verdict's "runners"): a service's
 * start phase is the sum of these. A started runner's own stages (device, profiler, sandbox)
 * are those its hello reported. */
json_t *vx_runners_json(vctx *v)
{
	json_t *o = json_object();
	for (int i = 0; i < v->n_sols; i++) {
		const sol *so = &v->sols[i];
		if (so->stored || !so->got)
			continue;
		json_t *x = json_pack("{s:s,s:f}", "from", so->got, "ms", so->got_ms);
		if (!strcmp(so->got, "started") && so->runner.start_ms)
			json_object_set(x, "runner_ms", so->runner.start_ms);
		json_object_set_new(o, vx_role_of(v, i), x);
	}
	return o;
}

/* After the verify: a healthy runner goes back to the pool when what it ran can be trusted: a
 * trusted solution (kept loaded), or nothing at all (a spare again, e.g. a candidate that did not
 * compile). Never after an error of the harness or a broken baseline. */
static int keep_runner(const vctx *v, int i, st_status s)
{
	const sol *so = &v->sols[i];
	if (!vx_pooling(v) || s || !so->runner.alive || so->failed || (so->flags & ST_RUNNER_NCU))
		return 0;
	if (so->loaded && vx_poolable(v, i))
		return 1;
	return !so->touched && !so->loaded;
}

/* Each runner loads its solution, unless it came from the pool with it loaded. Returns with the
 * verdict decided when the candidate's load failed. */
st_status vx_load_solutions(vctx *v, st_err *err)
{
	st_status s = ST_OK;
	st_gpu_hold_use(&v->gpu); /* loading a module allocates on the device */
	for (int i = 0; i < v->n_sols; i++) {
		if (v->sols[i].stored || v->sols[i].loaded)
			continue;
		/* Each runner loads its own private copies: the cache, which holds every other
		 * solution, stays out of its reach. The harness's loads its built-in null solution. */
		char so_path[700], hooks_path[700];
		int null = v->sols[i].calib;
		s = null ? ST_OK
		         : st_runner_copy_in(&v->sols[i].runner, v->sols[i].cr.so_path, "solution.so",
		                             so_path, sizeof so_path, err);
		if (!s && v->hooks_so[0])
			s = st_runner_copy_in(&v->sols[i].runner, v->hooks_so, "task.so", hooks_path,
			                      sizeof hooks_path, err);
		if (s)
			return st_err_wrap(err, ST_E_SYSTEM, "preparing the %s runner", vx_role_of(v, i));
		json_t *req = null ? json_pack("{s:s,s:b}", "op", "load", "null", 1)
		                   : json_pack("{s:s,s:s}", "op", "load", "solution", so_path);
		json_t *rep = NULL;
		if (v->hooks_so[0])
			json_object_set_new(req, "hooks", json_string(hooks_path));
		st_err e;
		v->sols[i].touched = 1;
		/* From its load on the candidate's code may run: the verifies it shares the GPU with
		 * stop it while they time (neighbours.h). The list holds a runner for
		 * each slot at most, so it has room. */
		if (i == v->cand && !v->sols[i].trusted && v->slot->neighbours &&
		    !(v->sols[i].flags & ST_RUNNER_NCU))
			st_runner_join(&v->sols[i].runner, v->slot->neighbours);
		s = st_runner_call(&v->sols[i].runner, req, -1, &rep,
		                   vx_time_left(v, v->o->timeout_s), &e);
		json_decref(req);
		const char *st = st_reply_string(rep, "status");
		/* A candidate that misses a function of the ABI, or cannot be loaded (a symbol its
		 * code uses and nothing defines), is a candidate's problem: a verdict with its reward,
		 * never a caller's error. */
		if (!s && i == v->cand && st && !strcmp(st, "abi")) {
			const char *why = st_reply_string(rep, "reason");
			vx_fail(v, "compile_error", "%s", why ? why : "not a solution");
			json_decref(rep);
			return ST_OK;
		}
		if (s || !st_reply_ok(rep)) {
			s = vx_runner_failed(v, i, "loading the solution", s, rep, &e);
			json_decref(rep);
			if (s) {
				*err = e;
				return s;
			}
			if (v->verdict_final)
				return ST_OK;
			continue;
		}
		json_decref(rep);
		v->sols[i].loaded = 1;
	}
	return s;
}

/* After the verify, whatever it ended with (`s`): the runners given back to the pool or stopped,
 * their shared memory and compiled modules let go. */
void vx_release_runners(vctx *v, st_status s)
{
	const st_verify_opts *o = v->o;
	const st_verify_slot *slot = v->slot;
	st_gpu_hold_use(&v->gpu); /* runners free their memory and close the device */
	for (int i = 0; i < v->n_sols; i++)
		if (v->sols[i].started && !keep_runner(v, i, s))
			st_runner_quit(&v->sols[i].runner);
	vx_phase(v, "stop");
	/* Apart from "stop" (runners told to quit), so that a slow end of a verify says which it is:
	 * the runners' folders, the shared memory unmapped, the pool given its runners back. */
	for (int i = 0; i < v->n_sols; i++) {
		if (v->sols[i].started && keep_runner(v, i, s))
			st_runner_pool_give(slot->runner_pool, &v->sols[i].runner, o->backend,
			                    v->sols[i].flags, slot->devices,
			                    v->sols[i].loaded ? v->sols[i].pool_key : NULL);
		else if (v->sols[i].started)
			st_runner_stop(&v->sols[i].runner);
		vx_close_shm(&v->sols[i], slot->shm_cache);
		st_compile_result_free(&v->sols[i].cr);
		free(v->sols[i].samples);
		st_commits_free(&v->sols[i].commits);
		free(v->sols[i].path);
	}
	st_gpu_hold_release(&v->gpu);
}
