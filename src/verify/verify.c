/* st_verify: the Verifier's pipeline for one candidate. Compile (cached) the candidate, the
 * reference and the expert; start one runner process per distinct solution; for every size set
 * and several secret seeds have each runner generate the same inputs, run, and hand back its
 * outputs through shared memory; compare the candidate's and the expert's outputs with the
 * reference's (or run the task's semantic validator); re-run one seed on other buffers to catch
 * races and stale reads; then time all of them interleaved on the timed set and build the verdict.
 * An imported task (task.json "data") has no reference: its place is taken by the stored
 * outputs, which this process loads from the task's files into the reference's slot, and the
 * inputs of each seed are handed to the runners instead of generated; in the timing checks a
 * runner of the built-in null solution (the harness alone) stands in for the reference.
 * Nothing of a solution ever runs in this process. */
#include "common/paths.h"
#include "stitch/stitch.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/cpus.h"
#include "common/fs.h"
#include "common/mem_fill.h"
#include "profile/ncu.h"
#include "profile/profile_report.h"
#include "profile/timeline.h"
#include "stitch/task_hooks.h"
#include "task/compare.h"
#include "task/dtype.h"
#include "task/expr.h"
#include "task/safetensors.h"
#include "task/task.h"
#include "verify/admit.h"
#include "verify/compile.h"
#include "verify/peaks.h"
#include "verify/policy.h"
#include "verify/reply.h"
#include "verify/runner.h"
#include "verify/runner_pool.h"
#include "verify/shm_cache.h"

#define MAX_SOLS 4 /* reference (or stored outputs), expert, candidate, harness */
#define MAX_TENSORS 64
#define MAX_GAPS 256 /* timed batches whose parent-side overhead is kept, per solution */
#define CALIB_BATCHES 32 /* the harness's null batches beside a candidate's, at most */
#define MIN_BATCHES 8    /* batches a solution's timing is split into, where its samples allow */

typedef int (*validate_fn)(const st_config *, const st_tensor *, int32_t, const st_tensor *,
                           const st_tensor *, int32_t, char *, size_t);
typedef int (*perturb_fn)(const st_config *, uint64_t, st_tensor *, int32_t, char *, size_t);
typedef int (*validate_perturbed_fn)(const st_config *, const st_tensor *, const st_tensor *,
                                     int32_t, const st_tensor *, const st_tensor *, int32_t,
                                     char *, size_t);

typedef struct sol {
	const char *role;     /* the first role that named this file */
	char *path;
	char sha[65];
	int trusted;
	int stored;           /* the stored outputs of an imported task: a runner for the device's
	                         figures, never a solution, never asked to run */
	int calib;            /* the harness: the runner's null solution, timed beside the candidate
	                         of an imported task (see add_calib), never checked */
	st_compile_result cr;
	st_runner runner;
	int started;
	int flags;            /* ST_RUNNER_* it was started with */
	int from_pool;        /* the runner came from o->runner_pool, its hello already read */
	const char *got;      /* how: "loaded" (kept with its solution), "spare" or "started" */
	double got_ms;        /* taking or starting it, and for a started one waiting for its hello */
	int touched;          /* a load was sent: its code may have run in the runner */
	int loaded;           /* its solution is loaded (by this verify, or before, from the pool) */
	char pool_key[8600];  /* a loaded trusted runner's key in the pool */
	int failed;           /* a trusted solution that broke: no longer compared or timed */
	/* the current size set's tensors, shared with the runner; the block behind them (blk.cap
	 * bytes, mapped here at blk.map) serves every size set that fits in it */
	st_shm_block blk;
	unsigned char *shm;   /* the current set's view of blk.map */
	size_t shm_len;
	/* timing */
	st_sample *samples;
	int n_samples, cap_samples;
	double timing_wall_ms;
	int n_batches;        /* timed batches behind timing_wall_ms (each one round trip) */
	/* per kept batch, the parent's time per call beyond what the runner reported, less the
	 * waits for a CPU time_batch takes off (the first MAX_GAPS batches) */
	double gap_ms[MAX_GAPS];
	int n_gaps;
	double cpu_wait_ms;   /* the waits for a CPU taken off those, over all kept batches */
	int timing_done;
	uint64_t last_seed[2]; /* inputs each buffer set holds after the last timed batch */
	int have_seeds;
} sol;

typedef struct layout {
	int64_t dims_in[MAX_TENSORS][ST_MAX_DIMS], dims_out[MAX_TENSORS][ST_MAX_DIMS];
	int64_t dims_par[MAX_TENSORS][ST_MAX_DIMS];
	size_t in_bytes[MAX_TENSORS], out_bytes[MAX_TENSORS], par_bytes[MAX_TENSORS];
	size_t out_off[2][MAX_TENSORS], in_off[MAX_TENSORS];
	size_t par_off[MAX_TENSORS]; /* the params come first when n_par > 0 (--dump only) */
	int n_par;
	int dump;                    /* this set's first seed goes to --dump */
	size_t total;
} layout;

typedef struct vctx {
	const st_task *task;
	const st_verify_opts *o;
	sol sols[MAX_SOLS];
	int n_sols;
	int ref, cand, expert; /* indexes into sols; expert -1 when there is none */
	int calib;             /* the harness's null solution, or -1 */
	json_t *verdict;
	json_t *correctness;
	json_t *flags;
	void *hooks_dl;
	validate_fn validate;
	perturb_fn perturb;    /* with validate_perturbed: the task's metamorphic check */
	validate_perturbed_fn validate_perturbed;
	char hooks_so[4096];
	int threads;
	uint64_t seed_state;
	int verdict_final;     /* the candidate's status is decided (a failure) */
	double t_start, t_mark;
	double compare_s;      /* spent comparing outputs (in the correctness and timing phases) */
	int shm_made, shm_reused; /* shared-memory blocks made, and taken from o->shm_cache */
	json_t *phases;        /* seconds spent per phase, for people who wonder where time goes */
	const st_safetensors *params; /* --params (or an imported task's): where the params come
	                               * from, or NULL */
	const char *params_path; /* that file's name */
	int stored;            /* an imported task: inputs and expected outputs from its files */
	int gpu_held;          /* GPU_FREE, GPU_SHARED or GPU_EXCLUSIVE: this verify's hold on
	                        * o->gpu_lock */
	double gpu_wait_s;     /* time spent waiting for it */
	double gpu_since;      /* when the present hold began (st_now_s) */
	json_t *gpu_holds;     /* the holds so far: [mode "s" or "x", from, to] in st_now_s time,
	                        * which is one clock for every verify of a service */
	double wait_mark;      /* gpu_wait_s at the last phase mark */
	json_t *gpu_waits;     /* per phase, the part of it spent waiting for the GPU */
	json_t *runner_ms;     /* the runners' own account of set-up and teardown ("setup.alloc":
	                        * ms, summed over runners and sets) */
} vctx;

/* Sharing one GPU with other verifies (st_verify_opts.gpu_lock): shared while this verify's
 * runners work on the GPU (load, set-up, runs, teardown), exclusive for whatever
 * measures (timing, the profile, the peaks), and not held at all during work on the CPU alone
 * (compiling, comparing outputs), so that another verify can measure meanwhile. Runners that
 * sit idle between requests hold memory but run nothing, which disturbs no measurement. */
enum { GPU_FREE, GPU_SHARED, GPU_EXCLUSIVE };

static void gpu_take(vctx *v, int exclusive)
{
	double t0 = st_now_s();
	if (exclusive)
		pthread_rwlock_wrlock(v->o->gpu_lock);
	else
		pthread_rwlock_rdlock(v->o->gpu_lock);
	v->gpu_since = st_now_s();
	v->gpu_wait_s += v->gpu_since - t0;
	v->gpu_held = exclusive ? GPU_EXCLUSIVE : GPU_SHARED;
}

/* Give the hold up, and note it: a service's verifies together tell how long each GPU was
 * measured on, shared, or left alone. */
static void gpu_unlock(vctx *v)
{
	pthread_rwlock_unlock(v->o->gpu_lock);
	if (v->gpu_holds)
		json_array_append_new(v->gpu_holds,
		                      json_pack("[s,f,f]", v->gpu_held == GPU_EXCLUSIVE ? "x" : "s",
		                                v->gpu_since, st_now_s()));
	v->gpu_held = GPU_FREE;
}

/* Runners are about to use the GPU: share it, unless this verify already has it to itself or
 * must have it alone throughout (gpu_alone). */
static void gpu_use(vctx *v)
{
	if (v->o->gpu_lock && v->gpu_held == GPU_FREE)
		gpu_take(v, v->o->gpu_alone);
}

/* Work on the CPU alone ahead: a shared hold is given up (an exclusive one is kept: the
 * measurement it protects is still going on). */
static void gpu_idle(vctx *v)
{
	if (v->o->gpu_lock && v->gpu_held == GPU_SHARED)
		gpu_unlock(v);
}

/* Runners about to use the GPU (gpu_use), or only to copy results to the host (gpu_idle). */
static void gpu_for(vctx *v, int on_gpu)
{
	if (on_gpu)
		gpu_use(v);
	else
		gpu_idle(v);
}

static void gpu_release(vctx *v)
{
	if (v->o->gpu_lock && v->gpu_held != GPU_FREE)
		gpu_unlock(v);
}

/* A read lock cannot be upgraded in place: give it up, then wait for the GPU alone. */
static void gpu_exclusive(vctx *v)
{
	if (!v->o->gpu_lock || v->gpu_held == GPU_EXCLUSIVE)
		return;
	gpu_release(v);
	gpu_take(v, 1);
}

static void progress(vctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(vctx *v, const char *fmt, ...)
{
	if (!v->o->progress)
		return;
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	v->o->progress(v->o->progress_arg, line);
}

void st_verify_opts_default(st_verify_opts *o)
{
	memset(o, 0, sizeof *o);
	o->backend = "cuda";
	o->seeds = 3;
	o->timing = 1;
	o->profile = 1;
	o->timeout_s = 120;
	o->compile_timeout_s = 300;
	st_stop_rule_default(&o->stop);
}

void st_verify_opts_apply(st_verify_opts *o, const json_t *opt)
{
	const char *sets = json_string_value(json_object_get(opt, "sets"));
	if (sets)
		o->sets = sets;
	if (json_is_integer(json_object_get(opt, "seeds")))
		o->seeds = (int)json_integer_value(json_object_get(opt, "seeds"));
	if (json_is_boolean(json_object_get(opt, "timing")))
		o->timing = json_is_true(json_object_get(opt, "timing"));
	if (json_is_boolean(json_object_get(opt, "profile")))
		o->profile = json_is_true(json_object_get(opt, "profile"));
	if (json_is_number(json_object_get(opt, "min_time_ms")))
		o->stop.min_time_ms = json_number_value(json_object_get(opt, "min_time_ms"));
	if (json_is_number(json_object_get(opt, "max_rse")))
		o->stop.max_rse = json_number_value(json_object_get(opt, "max_rse"));
	if (json_is_integer(json_object_get(opt, "max_samples")))
		o->stop.max_samples = (int)json_integer_value(json_object_get(opt, "max_samples"));
	const char *time_set = json_string_value(json_object_get(opt, "time_set"));
	if (time_set)
		o->time_set = time_set;
}

json_t *st_verify_opts_json(const st_verify_opts *o)
{
	json_t *j = json_pack("{s:i,s:b,s:b,s:f,s:f,s:i}", "seeds", o->seeds, "timing", o->timing,
	                      "profile", o->profile, "min_time_ms", o->stop.min_time_ms, "max_rse",
	                      o->stop.max_rse, "max_samples", o->stop.max_samples);
	if (j && o->sets)
		json_object_set_new(j, "sets", json_string(o->sets));
	if (j && o->time_set)
		json_object_set_new(j, "time_set", json_string(o->time_set));
	return j;
}

/* Profiles come from CUPTI: the CUDA backend only. */
static int profiling(const vctx *v)
{
	return v->o->profile && !strcmp(v->o->backend, "cuda");
}

/* Secret seeds: from the kernel unless the user asked for a reproducible run. */
static uint64_t next_seed(vctx *v)
{
	if (v->o->seed) {
		v->seed_state += 0x9e3779b97f4a7c15ull;
		uint64_t z = v->seed_state;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		return z ^ (z >> 31);
	}
	uint64_t s = 0;
	while (getrandom(&s, sizeof s, 0) != sizeof s)
		;
	return s;
}

/* ---- verdict helpers ------------------------------------------------------------------------ */

/* obj[key] += x, a missing key counting as 0: the verdict's sums by phase and by stage. */
static void json_add(json_t *obj, const char *key, double x)
{
	json_object_set_new(obj, key, json_real(json_number_value(json_object_get(obj, key)) + x));
}

/* Add the time since the last mark to phase `name`. */
static void phase(vctx *v, const char *name)
{
	double t = st_now_s();
	json_add(v->phases, name, t - v->t_mark);
	v->t_mark = t;
	/* and how much of it went to waiting for the GPU, where other verifies share it */
	if (v->o->gpu_lock && v->gpu_wait_s > v->wait_mark) {
		json_add(v->gpu_waits, name, v->gpu_wait_s - v->wait_mark);
		v->wait_mark = v->gpu_wait_s;
	}
}

static void flag(vctx *v, const char *name)
{
	size_t i;
	json_t *f;
	json_array_foreach(v->flags, i, f) if (!strcmp(json_string_value(f), name)) return;
	json_array_append_new(v->flags, json_string(name));
}

/* Decide the candidate's verdict as a failure; the first failure wins. */
static void fail(vctx *v, const char *status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void fail(vctx *v, const char *status, const char *fmt, ...)
{
	if (v->verdict_final)
		return;
	char reason[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof reason, fmt, ap);
	va_end(ap);
	json_object_set_new(v->verdict, "status", json_string(status));
	json_object_set_new(v->verdict, "reason", json_string(reason));
	v->verdict_final = 1;
}

static json_t *sizes_json(const st_size_set *s)
{
	json_t *o = json_object();
	for (int i = 0; i < s->n; i++)
		json_object_set_new(o, s->names[i], json_integer(s->values[i]));
	return o;
}

/* ---- solutions ------------------------------------------------------------------------------ */

static st_status add_sol(vctx *v, const char *role, const char *path, int trusted, int *index,
                         st_err *err)
{
	char *data;
	size_t len;
	st_status s = st_read_file(path, &data, &len, err);
	if (s)
		return st_err_wrap(err, ST_E_INVALID, "%s", role);
	char sha[65];
	st_sha256_hex(data, len, sha);
	free(data);
	for (int i = 0; i < v->n_sols; i++)
		if (!strcmp(v->sols[i].sha, sha)) {
			*index = i;
			return ST_OK;
		}
	sol *so = &v->sols[v->n_sols];
	memset(so, 0, sizeof *so);
	so->role = role;
	so->path = strdup(path);
	so->trusted = trusted;
	so->blk.fd = -1;
	memcpy(so->sha, sha, sizeof sha);
	*index = v->n_sols++;
	return ST_OK;
}

/* A trusted stand-in of the harness's own, with no file to compile; *index names it. */
static sol *add_stand_in(vctx *v, const char *role, const char *path, const char *sha, int *index)
{
	sol *so = &v->sols[v->n_sols];
	memset(so, 0, sizeof *so);
	so->role = role;
	so->path = strdup(path);
	so->trusted = 1;
	so->blk.fd = -1;
	snprintf(so->sha, sizeof so->sha, "%s", sha);
	*index = v->n_sols++;
	return so;
}

/* An imported task's stand-in for the reference: the stored outputs. */
static st_status add_stored(vctx *v)
{
	add_stand_in(v, "stored outputs", v->task->data_check, "stored", &v->ref)->stored = 1;
	return ST_OK;
}

/* What the timing checks hold a candidate to is what the reference costs beside it: time past
 * the stream's end event, and the parent's clock against the runner's. An imported task has no
 * reference, so a runner with the runner's built-in null solution stands in: its calls are the
 * harness's own work (fresh inputs, poison, flush, sync, round trips) and nothing else. Without
 * it a runner whose clock the candidate rewrote from inside went unseen on imported tasks. */
static void add_calib(vctx *v)
{
	add_stand_in(v, "harness", "(the runner's null solution)", "null", &v->calib)->calib = 1;
}

static const char *role_of(vctx *v, int i)
{
	return i == v->cand ? "candidate" : v->sols[i].role;
}

/* A runner request failed or was refused: what that means depends on whose runner it was. */
static st_status runner_failed(vctx *v, int i, const char *phase, st_status s, json_t *rep,
                               st_err *err)
{
	char reason[2048];
	const char *status = "runtime_error";
	if (s == ST_E_IO && v->sols[i].runner.term_signal == SIGSYS) {
		status = "hacking";
		snprintf(reason, sizeof reason, "%s: the solution made a system call the sandbox forbids "
		         "(a new process or program, a network socket, ptrace, ...) and was killed",
		         phase);
	} else if (s == ST_E_TIMEOUT) {
		status = "timeout";
		snprintf(reason, sizeof reason, "%s: %s", phase, err->msg);
	} else if (s) {
		snprintf(reason, sizeof reason, "%s: %s", phase, err->msg);
	} else {
		const char *why = json_string_value(json_object_get(rep, "reason"));
		snprintf(reason, sizeof reason, "%s: %s", phase, why ? why : "failed");
	}
	if (i == v->cand) {
		fail(v, status, "%s", reason);
		return ST_OK;
	}
	if (i == v->ref)
		return st_err_set(err, ST_E_SYSTEM, "the reference failed (%s); cannot judge", reason);
	v->sols[i].failed = 1;
	if (i == v->calib) { /* the checks it serves are left out, and the verdict says so */
		flag(v, "calibration_failed");
		json_object_set_new(v->verdict, "calibration_failure", json_string(reason));
		return ST_OK;
	}
	flag(v, "expert_failed");
	json_object_set_new(v->verdict, "expert_failure", json_string(reason));
	return ST_OK;
}

static int usable(vctx *v, int i)
{
	if (i < 0 || v->sols[i].failed || v->sols[i].stored || v->sols[i].calib)
		return 0;
	if (i == v->cand && v->verdict_final)
		return 0;
	return v->sols[i].runner.alive;
}

/* Does solution i run seed k of a size set (0 first)? The harness's runner none. The expert,
 * where it is not the candidate itself, the first only: it is a baseline to time against,
 * checked so that a broken one is flagged rather than believed; `stitch bench`, where it is the
 * candidate, checks it on every seed. Its other runs would only cost every request device and
 * host time (their outputs copied out and compared). */
static int runs_seed(const vctx *v, int i, int k)
{
	if (i == v->calib)
		return 0;
	return i != v->expert || i == v->cand || k == 0;
}

/* The harness's runner takes part in setup, timing and teardown only. */
static int calib_ready(vctx *v)
{
	return v->calib >= 0 && !v->sols[v->calib].failed && v->sols[v->calib].runner.alive;
}

/* Usable, or the harness's runner when it is asked by name (a request of its own). */
static int addressed(vctx *v, int i)
{
	return usable(v, i) || (i == v->calib && calib_ready(v));
}

/* Add a runner's account of its request (its reply's "ms") to v->runner_ms. */
static void runner_ms_add(vctx *v, const json_t *req, const json_t *rep)
{
	const char *op = json_string_value(json_object_get(req, "op")), *k;
	json_t *ms = json_object_get(rep, "ms"), *x;
	if (!op || !json_is_object(ms))
		return;
	json_object_foreach(ms, k, x) {
		char key[64];
		snprintf(key, sizeof key, "%s.%s", op, k);
		json_add(v->runner_ms, key, json_number_value(x));
	}
}

/* A request for buffer set `set`'s outputs in the shared block's `slot`. */
static json_t *fetch_req(int set, int slot)
{
	return json_pack("{s:s,s:i,s:i}", "op", "fetch", "set", set, "slot", slot);
}

/* Send the same request to every usable runner, then collect the replies: runners work in
 * parallel (their own processes), and a failure is attributed to the solution that caused it.
 * The GPU is shared for it (gpu_use) unless `on_gpu` is 0: requests that only copy results to
 * the host, on a copy engine and no SM (beside another verify's timing in stitch serve, the
 * expert's copy timed as candidate stayed within 0.5 % of the expert). */
static st_status broadcast_on(vctx *v, json_t *const *reqs, const int *fds, const char *phase,
                              double timeout_s, json_t **reps, int on_gpu, st_err *err)
{
	int sent[MAX_SOLS] = {0};
	gpu_for(v, on_gpu);
	for (int i = 0; i < v->n_sols; i++) {
		reps[i] = NULL;
		if (!reqs[i] || !addressed(v, i))
			continue;
		st_err e;
		st_status s = st_runner_send(&v->sols[i].runner, reqs[i], fds ? fds[i] : -1, &e);
		if (s) {
			st_status r = runner_failed(v, i, phase, s, NULL, &e);
			if (r) {
				*err = e;
				return r;
			}
			continue;
		}
		sent[i] = 1;
	}
	for (int i = 0; i < v->n_sols; i++) {
		if (!sent[i])
			continue;
		st_err e;
		st_status s = st_runner_recv(&v->sols[i].runner, &reps[i], timeout_s, &e);
		if (s || !json_is_true(json_object_get(reps[i], "ok"))) {
			st_status r = runner_failed(v, i, phase, s, reps[i], &e);
			json_decref(reps[i]);
			reps[i] = NULL;
			if (r) {
				*err = e;
				return r;
			}
		} else {
			runner_ms_add(v, reqs[i], reps[i]);
		}
	}
	return ST_OK;
}

static st_status broadcast(vctx *v, json_t *const *reqs, const int *fds, const char *phase,
                           double timeout_s, json_t **reps, st_err *err)
{
	return broadcast_on(v, reqs, fds, phase, timeout_s, reps, 1, err);
}

static void free_reps(json_t **reps, int n)
{
	for (int i = 0; i < n; i++) {
		json_decref(reps[i]);
		reps[i] = NULL;
	}
}

/* ---- static policy ----------------------------------------------------------------------------- */

/* The source is read before anything runs: forbidden headers, calls and timer asm make the
 * verdict `forbidden`; a near copy of the reference or an expert is flagged. */
static st_status policy_check(vctx *v, const char *solution, st_err *err)
{
	st_policy_report rep;
	st_status s = st_policy_check(solution, v->task, &rep, err);
	if (s)
		return st_err_wrap(err, s, "policy check");
	json_t *hits = json_array();
	for (int i = 0; i < rep.n_hits; i++) {
		char line[512];
		st_policy_describe(&rep.hits[i], line, sizeof line);
		json_array_append_new(hits, json_string(line));
	}
	json_object_set_new(v->verdict, "policy",
	                    json_pack("{s:o,s:f,s:s,s:b}", "hits", hits, "similarity", rep.similarity,
	                              "similar_to", rep.similar_to, "has_kernel", rep.has_kernel));
	if (rep.similarity >= ST_POLICY_NEAR_COPY && !v->o->candidate_trusted) {
		char f[80];
		snprintf(f, sizeof f, "near_copy_of_%s", rep.similar_to[0] ? rep.similar_to : "reference");
		flag(v, f);
	}
	if (rep.n_hits) {
		char line[512];
		st_policy_describe(&rep.hits[0], line, sizeof line);
		fail(v, "forbidden", "%s%s", line, rep.n_hits > 1 ? " (and more, see policy.hits)" : "");
	}
	st_policy_report_free(&rep);
	return ST_OK;
}

/* ---- compile -------------------------------------------------------------------------------- */

static json_t *compile_json(const st_compile_result *cr)
{
	json_t *d = json_array();
	for (int i = 0; i < cr->n_diags; i++)
		json_array_append_new(d, json_pack("{s:s,s:i,s:i,s:s,s:s}", "file", cr->diags[i].file,
		                                   "line", cr->diags[i].line, "col", cr->diags[i].col,
		                                   "severity", cr->diags[i].severity, "message",
		                                   cr->diags[i].message));
	return json_pack("{s:b,s:b,s:f,s:s,s:o,s:s}", "ok", cr->ok, "cached", cr->cached, "seconds",
	                 cr->seconds, "key", cr->key, "diagnostics", d, "log",
	                 cr->log ? cr->log : "");
}

struct compile_job {
	sol *so;
	st_compile_opts opts;
	st_status status;
	st_err err;
};

static void *compile_thread(void *arg)
{
	struct compile_job *j = arg;
	j->status = st_compile(j->so->path, &j->opts, &j->so->cr, &j->err);
	return NULL;
}

/* What every compile of this task shares; include_dir must outlive the options. */
static st_compile_opts base_compile_opts(const st_verify_opts *o, const char *arch,
                                         char *include_dir, size_t len)
{
	snprintf(include_dir, len, "%s/include", st_home());
	return (st_compile_opts){.arch = arch, .include_dir = include_dir,
	                         .timeout_s = o->compile_timeout_s, .no_cache = o->no_cache};
}

/* Shipped (trusted) solutions link what the task ships; a candidate only what its policy allows. */
static st_compile_opts solution_compile_opts(const st_task *t, st_compile_opts co, int trusted)
{
	co.libraries = (const char *const *)(trusted ? t->solution_libraries : t->libraries);
	co.n_libraries = trusted ? t->n_solution_libraries : t->n_libraries;
	return co;
}

st_status st_verify_precompile(const char *task_dir, const char *solution, const st_verify_opts *o,
                               const char *arch, st_err *err)
{
	if (o->no_cache)
		return ST_OK; /* st_verify compiles anyway */
	st_task t;
	st_status s = st_task_load(task_dir, &t, err);
	if (s)
		return s;
	int host = !strcmp(o->backend, "host");
	char include_dir[4096];
	st_compile_opts co = base_compile_opts(o, arch, include_dir, sizeof include_dir);
	const char *paths[4] = {t.hooks, st_task_reference(&t, host), st_task_expert(&t, host),
	                        solution};
	for (int i = 0; i < 4 && !s; i++) {
		if (!paths[i])
			continue;
		st_compile_opts one = i == 0 ? co : solution_compile_opts(&t, co, i < 3 || o->candidate_trusted);
		st_compile_result r;
		s = st_compile(paths[i], &one, &r, err);
		if (!s)
			st_compile_result_free(&r);
	}
	st_task_free(&t);
	return s;
}

static st_status compile_all(vctx *v, const char *arch, st_err *err)
{
	const st_task *t = v->task;
	char include_dir[4096];
	st_compile_opts co = base_compile_opts(v->o, arch, include_dir, sizeof include_dir);
	if (t->hooks) {
		st_compile_result hr;
		st_status s = st_compile(t->hooks, &co, &hr, err);
		if (s)
			return st_err_wrap(err, s, "task hooks");
		if (!hr.ok) {
			s = st_err_set(err, ST_E_SYSTEM, "task hooks %s do not compile: %s", t->hooks,
			               hr.log ? hr.log : "");
			st_compile_result_free(&hr);
			return s;
		}
		snprintf(v->hooks_so, sizeof v->hooks_so, "%s", hr.so_path);
		st_compile_result_free(&hr);
		v->hooks_dl = dlopen(v->hooks_so, RTLD_NOW | RTLD_LOCAL);
		if (!v->hooks_dl)
			return st_err_set(err, ST_E_SYSTEM, "cannot load task hooks: %s", dlerror());
		v->validate = (validate_fn)(uintptr_t)dlsym(v->hooks_dl, "st_task_validate");
		if (t->validator && !v->validate)
			return st_err_set(err, ST_E_INVALID, "%s: validator is \"task\" but task.c does "
			                  "not export st_task_validate", t->hooks);
		v->perturb = (perturb_fn)(uintptr_t)dlsym(v->hooks_dl, "st_task_perturb");
		v->validate_perturbed = (validate_perturbed_fn)(uintptr_t)dlsym(
			v->hooks_dl, "st_task_validate_perturbed");
		if (!v->perturb != !v->validate_perturbed)
			return st_err_set(err, ST_E_INVALID, "%s exports only one of st_task_perturb and "
			                  "st_task_validate_perturbed: both or neither", t->hooks);
	}
	/* nvcc takes seconds per file: the solutions compile at the same time. */
	struct compile_job jobs[MAX_SOLS];
	pthread_t threads[MAX_SOLS];
	int started[MAX_SOLS] = {0};
	for (int i = 0; i < v->n_sols; i++) {
		jobs[i].so = &v->sols[i];
		jobs[i].status = ST_OK;
		if (v->sols[i].stored || v->sols[i].calib)
			continue;
		jobs[i].opts = solution_compile_opts(t, co, v->sols[i].trusted);
		started[i] = pthread_create(&threads[i], NULL, compile_thread, &jobs[i]) == 0;
		if (!started[i])
			compile_thread(&jobs[i]);
	}
	for (int i = 0; i < v->n_sols; i++)
		if (started[i])
			pthread_join(threads[i], NULL);
	for (int i = 0; i < v->n_sols; i++) {
		sol *so = &v->sols[i];
		if (so->stored || so->calib)
			continue;
		if (jobs[i].status) {
			*err = jobs[i].err;
			return st_err_wrap(err, jobs[i].status, "%s", role_of(v, i));
		}
		progress(v, "compile %-9s %s (%.2f s)", role_of(v, i),
		         so->cr.ok ? (so->cr.cached ? "cached" : "ok") : "FAILED", so->cr.seconds);
		if (i == v->cand)
			json_object_set_new(v->verdict, "compile", compile_json(&so->cr));
		if (!so->cr.ok) {
			if (i == v->cand) {
				const char *first = so->cr.n_diags ? so->cr.diags[0].message
				                  : so->cr.timed_out ? "the compiler timed out" : "see log";
				fail(v, "compile_error", "%s", first);
				continue;
			}
			return st_err_set(err, ST_E_SYSTEM, "the %s %s does not compile: %.400s",
			                  so->role, so->path, so->cr.log ? so->cr.log : "");
		}
	}
	return ST_OK;
}

/* ---- size sets ------------------------------------------------------------------------------ */

static json_t *tensor_specs(const st_tensor_spec *specs, int n, const st_size_set *sizes,
                            int with_init, int64_t dims[][ST_MAX_DIMS], size_t *bytes,
                            st_err *err)
{
	json_t *arr = json_array();
	for (int i = 0; i < n; i++) {
		const st_tensor_spec *t = &specs[i];
		if (st_task_shape(t, sizes, dims[i], err)) {
			json_decref(arr);
			return NULL;
		}
		json_t *shape = json_array();
		size_t count = 1;
		for (int d = 0; d < t->ndim; d++) {
			json_array_append_new(shape, json_integer(dims[i][d]));
			count *= (size_t)dims[i][d];
		}
		bytes[i] = count * st_dtype_size(t->dtype);
		json_t *o = json_pack("{s:s,s:s,s:o}", "name", t->name, "dtype",
		                      st_dtype_name(t->dtype), "shape", shape);
		if (with_init) {
			static const char *dists[] = {"normal", "uniform", "randint", "const", "task"};
			json_t *init = json_pack("{s:s,s:f,s:f}", "dist", dists[t->init.dist], "a",
			                         t->init.a, "b", t->init.b);
			if (t->init.dist == ST_DIST_RANDINT) {
				int64_t lo = 0, hi = 0;
				if (st_expr_eval(t->init.lo_expr, sizes, &lo, err) ||
				    st_expr_eval(t->init.hi_expr, sizes, &hi, err)) {
					json_decref(init);
					json_decref(o);
					json_decref(arr);
					return NULL;
				}
				json_object_set_new(init, "lo", json_integer(lo));
				json_object_set_new(init, "hi", json_integer(hi));
			}
			json_object_set_new(o, "init", init);
		}
		json_array_append_new(arr, o);
	}
	return arr;
}

static size_t align_up(size_t x)
{
	return (x + 4095) & ~(size_t)4095;
}

static void make_layout(layout *L, int n_in, int n_out)
{
	size_t off = 0;
	for (int i = 0; i < L->n_par; i++) {
		L->par_off[i] = off;
		off += align_up(L->par_bytes[i] ? L->par_bytes[i] : 1);
	}
	for (int slot = 0; slot < 2; slot++)
		for (int i = 0; i < n_out; i++) {
			L->out_off[slot][i] = off;
			off += align_up(L->out_bytes[i] ? L->out_bytes[i] : 1);
		}
	for (int i = 0; i < n_in; i++) {
		L->in_off[i] = off;
		off += align_up(L->in_bytes[i] ? L->in_bytes[i] : 1);
	}
	L->total = off ? off : 4096;
}

static json_t *offsets_json(const size_t *off, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_integer((json_int_t)off[i]));
	return a;
}

/* The current size set is done with the shared memory; the memory and its mapping stay for the
 * next set. */
static void unmap_shm(sol *so)
{
	so->shm = NULL;
}

/* The block goes back to the caller's cache (stitch serve's worker); without one, or when the
 * cache does not keep it, it is freed. */
static void close_shm(sol *so, st_shm_cache *cache)
{
	unmap_shm(so);
	st_shm_cache_give(cache, &so->blk); /* leaves so->blk empty */
}

/* Shared memory of len bytes for solution so, mapped here, its first `alloc` bytes to be allocated
 * and mapped in: a runner that maps them populated (MADV_POPULATE_WRITE) copies its outputs in,
 * and this process reads them, without a page fault per 4 KiB or 64 KiB, which on the H200
 * machines cost more than the copies themselves. What the block needs (those pages, and zeros
 * over a reused block's old tensors) is added to `todo`, for reserve_shm to do on several
 * threads, or done here when todo is NULL. */
static st_status new_shm(vctx *v, sol *so, size_t len, size_t alloc, st_mem_range *todo,
                         int *n_todo, st_err *err)
{
	st_shm_cache *cache = v->o->shm_cache;
	close_shm(so, cache);
	st_shm_block *b = &so->blk;
	st_mem_range mine[2];
	int n_mine = 0;
	if (!todo) {
		todo = mine;
		n_todo = &n_mine;
	}
	if (st_shm_cache_take(cache, len, b)) {
		v->shm_reused++;
		/* An earlier request's tensors are none of an untrusted runner's business. */
		if (!so->trusted && b->dirty) {
			todo[(*n_todo)++] = (st_mem_range){b->map, b->dirty, 1};
			b->dirty = 0;
		}
	} else {
		v->shm_made++;
		b->fd = memfd_create("stitch-tensors", MFD_CLOEXEC);
		if (b->fd < 0)
			return st_err_set(err, ST_E_SYSTEM, "memfd_create: %s", strerror(errno));
		if (ftruncate(b->fd, (off_t)len))
			return st_err_set(err, ST_E_SYSTEM, "ftruncate shared memory to %zu bytes: %s", len,
			                  strerror(errno));
		void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
		if (m == MAP_FAILED)
			return st_err_set(err, ST_E_SYSTEM, "mmap %zu shared bytes: %s", len, strerror(errno));
		b->map = m;
		b->cap = len;
	}
	alloc = alloc < b->cap ? alloc : b->cap;
	if (alloc > b->ready) {
		todo[(*n_todo)++] = (st_mem_range){b->map, alloc, 0};
		b->ready = alloc;
	}
	if (todo == mine && n_mine && st_mem_fill(mine, n_mine, v->threads))
		return st_err_set(err, ST_E_SYSTEM, "allocating %zu bytes of shared memory: %s", alloc,
		                  strerror(errno));
	return ST_OK;
}

static st_status map_shm(vctx *v, sol *so, size_t len, st_err *err)
{
	unmap_shm(so);
	if (so->blk.fd < 0 || so->blk.cap < len) {
		st_status s = new_shm(v, so, len, 0, NULL, NULL, err);
		if (s)
			return s;
	}
	so->shm = so->blk.map;
	so->shm_len = len;
	so->blk.dirty = len > so->blk.dirty ? len : so->blk.dirty;
	return ST_OK;
}

static void views(const st_task *t, const layout *L, unsigned char *base, int slot, int inputs,
                  st_tensor *out)
{
	int n = inputs ? t->n_inputs : t->n_outputs;
	for (int i = 0; i < n; i++) {
		const st_tensor_spec *sp = inputs ? &t->inputs[i] : &t->outputs[i];
		out[i].name = sp->name;
		out[i].dtype = sp->dtype;
		out[i].ndim = sp->ndim;
		for (int d = 0; d < sp->ndim; d++)
			out[i].shape[d] = inputs ? L->dims_in[i][d] : L->dims_out[i][d];
		out[i].data = base + (inputs ? L->in_off[i] : L->out_off[slot][i]);
	}
}

/* ---- an imported task's stored seeds ------------------------------------------------------- */

/* One tensor of a stored seed file into `dst`, checked against what the task says. */
static st_status stored_tensor(const st_safetensors *f, const char *file, const st_tensor_spec *sp,
                               const int64_t *dims, size_t bytes, unsigned char *dst, st_err *err)
{
	const st_safetensor *x = st_safetensors_find(f, sp->name);
	if (!x)
		return st_err_set(err, ST_E_INVALID, "%s: no tensor '%s'", file, sp->name);
	int same = x->dtype == sp->dtype && x->ndim == sp->ndim && x->bytes == bytes;
	for (int d = 0; same && d < x->ndim; d++)
		same = x->shape[d] == dims[d];
	if (!same)
		return st_err_set(err, ST_E_INVALID, "%s: tensor '%s' (%s, %d dims, %zu bytes) is not "
		                  "what task.json says (%s, %d dims, %zu bytes)", file, sp->name,
		                  st_dtype_name(x->dtype), x->ndim, x->bytes, st_dtype_name(sp->dtype),
		                  sp->ndim, bytes);
	memcpy(dst, x->data, bytes);
	return ST_OK;
}

/* Load a stored seed of an imported task: its inputs and expected outputs into the reference's
 * slot 0 (this process's own memory: no runner maps it) and its inputs into every runner's input
 * area, from where the runner uploads them ("given"). */
static st_status stored_load(vctx *v, const layout *L, const char *file, st_err *err)
{
	const st_task *t = v->task;
	sol *ref = &v->sols[v->ref];
	st_safetensors f;
	st_status s = st_safetensors_open(file, &f, err);
	for (int j = 0; !s && j < t->n_inputs; j++)
		s = stored_tensor(&f, file, &t->inputs[j], L->dims_in[j], L->in_bytes[j],
		                  ref->shm + L->in_off[j], err);
	for (int j = 0; !s && j < t->n_outputs; j++)
		s = stored_tensor(&f, file, &t->outputs[j], L->dims_out[j], L->out_bytes[j],
		                  ref->shm + L->out_off[0][j], err);
	st_safetensors_close(&f);
	if (s)
		return st_err_wrap(err, ST_E_INVALID, "%s: stored seed", t->id);
	for (int i = 0; i < v->n_sols; i++)
		if (usable(v, i))
			for (int j = 0; j < t->n_inputs; j++)
				memcpy(v->sols[i].shm + L->in_off[j], ref->shm + L->in_off[j], L->in_bytes[j]);
	return ST_OK;
}

/* The inputs of the stored seed loaded last, again into solution i's input area: the solution
 * shares that memory and may have changed it. */
static void stored_put_inputs(vctx *v, const layout *L, int i)
{
	for (int j = 0; v->stored && j < v->task->n_inputs; j++)
		memcpy(v->sols[i].shm + L->in_off[j], v->sols[v->ref].shm + L->in_off[j],
		       L->in_bytes[j]);
}

/* Judge the outputs in `so`'s slot against the reference's slot 0; append to `outs`. 1 = pass. */
static int judge_outputs(vctx *v, const layout *L, const st_size_set *set, int i, int slot,
                         json_t *outs, char *why, size_t whylen)
{
	const st_task *t = v->task;
	st_tensor got[MAX_TENSORS], want[MAX_TENSORS], in[MAX_TENSORS];
	gpu_idle(v); /* comparing is the CPU's work */
	views(t, L, v->sols[i].shm, slot, 0, got);
	views(t, L, v->sols[v->ref].shm, 0, 0, want);
	if (t->validator && v->validate) {
		views(t, L, v->sols[v->ref].shm, 0, 1, in);
		st_config cfg = {set->n, (const char *const *)set->names, set->values};
		char msg[1024] = "";
		int rc = v->validate(&cfg, in, t->n_inputs, got, want, t->n_outputs, msg, sizeof msg);
		json_array_append_new(outs, json_pack("{s:s,s:b,s:s}", "validator", "task", "ok", rc == 0,
		                                      "message", msg));
		if (rc)
			snprintf(why, whylen, "task validator: %s", msg);
		return rc == 0;
	}
	int ok = 1;
	for (int j = 0; j < t->n_outputs; j++) {
		st_compare_result r;
		st_compare(&got[j], &want[j], &t->outputs[j].tol, v->threads, &r);
		char line[1024];
		st_compare_describe(&r, t->outputs[j].name, &t->outputs[j].tol, line, sizeof line);
		json_t *coord = json_array();
		for (int d = 0; d < got[j].ndim; d++)
			json_array_append_new(coord, json_integer(r.worst_coord[d]));
		json_t *o = json_pack("{s:s,s:b,s:I,s:I,s:I,s:f,s:f,s:f,s:{s:o,s:I,s:f,s:f},s:s}", "name",
		                      t->outputs[j].name, "ok", r.ok, "elements", (json_int_t)r.n,
		                      "mismatches", (json_int_t)r.mismatches, "nonfinite",
		                      (json_int_t)r.nonfinite, "max_abs", isfinite(r.max_abs) ? r.max_abs : -1,
		                      "max_rel", isfinite(r.max_rel) ? r.max_rel : -1, "nmse",
		                      isfinite(r.nmse) ? r.nmse : -1, "worst", "index", coord, "flat",
		                      (json_int_t)r.worst_index, "got",
		                      isfinite(r.worst_got) ? r.worst_got : 0.0, "want",
		                      isfinite(r.worst_want) ? r.worst_want : 0.0, "summary", line);
		json_array_append_new(outs, o);
		if (!r.ok && ok) {
			snprintf(why, whylen, "%s", line);
			ok = 0;
		}
	}
	return ok;
}

/* Solution i's outputs in `slot` against the reference's (or the task's validator): the parent's
 * own work, timed apart (the verdict's compare_s) from the runners' in the phases. */
static int judge(vctx *v, const layout *L, const st_size_set *set, int i, int slot, json_t *outs,
                 char *why, size_t whylen)
{
	double t0 = st_now_s();
	int ok = judge_outputs(v, L, set, i, slot, outs, why, whylen);
	v->compare_s += st_now_s() - t0;
	return ok;
}

/* One more request to the candidate alone (`req`: a run, a timed call, a fetch; taken over).
 * *ran = 1 when it answered; otherwise the verdict says how it failed, and an error of the
 * harness is returned. The GPU is shared for it unless `on_gpu` is 0 (a fetch, as in
 * broadcast_on). */
static st_status rerun_candidate_on(vctx *v, json_t *req, const st_size_set *set,
                                    const char *what, int *ran, int on_gpu, st_err *err)
{
	json_t *rep = NULL;
	st_err e;
	gpu_for(v, on_gpu);
	st_status s = st_runner_call(&v->sols[v->cand].runner, req, -1, &rep, v->o->timeout_s, &e);
	json_decref(req);
	*ran = !s && json_is_true(json_object_get(rep, "ok"));
	if (!*ran) {
		char phase[160];
		snprintf(phase, sizeof phase, "set %s, %s", set->label, what);
		s = runner_failed(v, v->cand, phase, s, rep, &e);
		if (s)
			*err = e;
	}
	json_decref(rep);
	return s;
}

static st_status rerun_candidate(vctx *v, json_t *req, const st_size_set *set, const char *what,
                                 int *ran, st_err *err)
{
	return rerun_candidate_on(v, req, set, what, ran, 1, err);
}

/* A run of the candidate into `slot` of buffer set `set_index`, then its outputs copied to the
 * host without the GPU (as run_seed's): 1 in *ran when both answered. */
static st_status rerun_and_fetch(vctx *v, json_t *run, int set_index, int slot,
                                 const st_size_set *set, const char *what, int *ran, st_err *err)
{
	json_object_set_new(run, "fetch", json_false());
	st_status s = rerun_candidate(v, run, set, what, ran, err);
	if (s || !*ran)
		return s;
	return rerun_candidate_on(v, fetch_req(set_index, slot), set, what, ran, 0, err);
}

/* The task's metamorphic check on the candidate: the inputs of `seed` changed by st_task_perturb
 * (computed here from the reference's copy of them, and by the candidate's runner on its own),
 * one more run into slot 1, and the task's judgement of the two outputs side by side. The
 * candidate's slot 0 still holds its outputs of `seed`. */
static st_status perturbed_check(vctx *v, const layout *L, const st_size_set *set, uint64_t seed,
                                 json_t *entry, st_err *err)
{
	const st_task *t = v->task;
	st_tensor in[MAX_TENSORS], in2[MAX_TENSORS], got[MAX_TENSORS], got2[MAX_TENSORS];
	st_config cfg = {set->n, (const char *const *)set->names, set->values};
	uint64_t pseed = next_seed(v);
	/* Copies of both: the candidate's runner uses its shared input area as the host copy of the
	 * changed inputs, and the candidate may be the reference. */
	views(t, L, v->sols[v->ref].shm, 0, 1, in);
	size_t bytes = 0;
	for (int j = 0; j < t->n_inputs; j++)
		bytes += L->in_bytes[j];
	unsigned char *copy = malloc(2 * bytes + 1);
	if (!copy)
		return st_err_set(err, ST_E_NOMEM, "out of memory for perturbed inputs (%zu bytes)", bytes);
	for (size_t j = 0, off = 0; j < (size_t)t->n_inputs; off += L->in_bytes[j], j++) {
		in2[j] = in[j];
		in2[j].data = copy + bytes + off;
		memcpy(in2[j].data, in[j].data, L->in_bytes[j]);
		in[j].data = copy + off;
		memcpy(in[j].data, in2[j].data, L->in_bytes[j]);
	}
	char msg[1024] = "";
	if (v->perturb(&cfg, pseed, in2, t->n_inputs, msg, sizeof msg)) {
		free(copy);
		return st_err_set(err, ST_E_SYSTEM, "%s: st_task_perturb failed: %s", t->id, msg);
	}
	sol *c = &v->sols[v->cand];
	int ran;
	st_status s = rerun_and_fetch(v, json_pack("{s:s,s:I,s:i,s:i,s:I}", "op", "run", "seed",
	                                           (json_int_t)seed, "set", 0, "slot", 1, "perturb",
	                                           (json_int_t)pseed),
	                              0, 1, set, "seed 1 with changed inputs", &ran, err);
	if (s || !ran) {
		free(copy);
		return s;
	}
	views(t, L, c->shm, 0, 0, got);
	views(t, L, c->shm, 1, 0, got2);
	msg[0] = 0;
	int rc = v->validate_perturbed(&cfg, in, in2, t->n_inputs, got, got2, t->n_outputs, msg,
	                               sizeof msg);
	free(copy);
	if (entry) {
		json_array_append_new(json_object_get(entry, "outputs"),
		                      json_pack("{s:s,s:s,s:b,s:s}", "validator", "task", "check",
		                                "perturbed", "ok", rc == 0, "message", msg));
		if (rc)
			json_object_set_new(entry, "ok", json_false());
	}
	if (rc)
		fail(v, "incorrect", "set %s: the run with changed inputs (the task's metamorphic "
		     "check): %s", set->label, msg);
	return ST_OK;
}

/* --dump: the candidate's params (as the harness made them), the inputs of seed 1 (the
 * reference's copy: the candidate's may have been overwritten by a later run) and the candidate's
 * outputs of that seed, in one safetensors file with the task, set, solution and sizes as
 * metadata. Wider elements first, so every tensor stays aligned to its element size. */
static st_status write_dump(vctx *v, const layout *L, const st_size_set *set, st_err *err)
{
	const st_task *t = v->task;
	sol *c = &v->sols[v->cand];
	if (!c->shm || !c->runner.alive) {
		progress(v, "--dump: the candidate did not run on set %s; nothing written", set->label);
		return ST_OK;
	}
	int n = t->n_params + t->n_inputs + t->n_outputs;
	st_safetensor *all = calloc((size_t)n + 1, sizeof *all);
	if (!all)
		return st_err_set(err, ST_E_NOMEM, "out of memory for --dump");
	st_tensor in[MAX_TENSORS], out[MAX_TENSORS];
	views(t, L, v->sols[v->ref].shm, 0, 1, in);
	views(t, L, c->shm, 0, 0, out);
	int k = 0;
	for (int i = 0; i < t->n_params; i++, k++) {
		all[k].name = t->params[i].name;
		all[k].dtype = t->params[i].dtype;
		all[k].ndim = t->params[i].ndim;
		memcpy(all[k].shape, L->dims_par[i], sizeof all[k].shape);
		all[k].data = c->shm + L->par_off[i];
		all[k].bytes = L->par_bytes[i];
	}
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < (pass ? t->n_outputs : t->n_inputs); i++, k++) {
			const st_tensor *x = pass ? &out[i] : &in[i];
			all[k].name = x->name;
			all[k].dtype = x->dtype;
			all[k].ndim = x->ndim;
			memcpy(all[k].shape, x->shape, sizeof all[k].shape);
			all[k].data = x->data;
			all[k].bytes = pass ? L->out_bytes[i] : L->in_bytes[i];
		}
	st_safetensor *sorted = calloc((size_t)n + 1, sizeof *sorted);
	if (!sorted) {
		free(all);
		return st_err_set(err, ST_E_NOMEM, "out of memory for --dump");
	}
	int m = 0;
	for (size_t width = 8; width >= 1; width /= 2)
		for (int i = 0; i < n; i++)
			if (st_dtype_size(all[i].dtype) == width)
				sorted[m++] = all[i];
	json_t *meta = json_pack("{s:s,s:s,s:s}", "task", t->id, "set", set->label, "solution",
	                         c->path);
	for (int i = 0; i < set->n; i++) {
		char num[32];
		snprintf(num, sizeof num, "%" PRId64, set->values[i]);
		json_object_set_new(meta, set->names[i], json_string(num));
	}
	st_status s = st_safetensors_write(v->o->dump_path, sorted, m, meta, err);
	json_decref(meta);
	free(sorted);
	free(all);
	if (s)
		return st_err_wrap(err, s, "--dump %s", v->o->dump_path);
	progress(v, "wrote params, inputs and outputs of set %s, seed 1 to %s", set->label,
	         v->o->dump_path);
	return ST_OK;
}

/* The same seed again on the other buffer set (other pointers): a different answer is a race or
 * a stale read; different bits within the tolerance are flagged as nondeterminism. */
static st_status determinism_check(vctx *v, const layout *L, const st_size_set *set,
                                   uint64_t seed, st_err *err)
{
	/* Seed 1 ran on buffer set 0. */
	sol *c = &v->sols[v->cand];
	int ran;
	stored_put_inputs(v, L, v->cand);
	st_status s = rerun_and_fetch(v, json_pack("{s:s,s:I,s:i,s:i,s:b}", "op", "run", "seed",
	                                           (json_int_t)seed, "set", 1, "slot", 1, "given",
	                                           v->stored),
	                              1, 1, set, "seed 1 again", &ran, err);
	if (s || !ran)
		return s;
	/* The same bits as the first run: the same judgement, which run_seed has made already. */
	st_tensor a[MAX_TENSORS], b[MAX_TENSORS];
	views(v->task, L, c->shm, 0, 0, a);
	views(v->task, L, c->shm, 1, 0, b);
	int same = 1;
	for (int j = 0; j < v->task->n_outputs && same; j++) {
		int64_t first;
		same = st_compare_bitwise(&a[j], &b[j], v->threads, &first);
	}
	if (same)
		return ST_OK;
	flag(v, "nondeterministic");
	json_t *outs = json_array();
	char why[1024] = "";
	if (!judge(v, L, set, v->cand, 1, outs, why, sizeof why))
		fail(v, "incorrect", "set %s: a second run of seed 1 on other buffers gave a different "
		     "answer (race, stale or uninitialised reads?): %s", set->label, why);
	json_decref(outs);
	return ST_OK;
}

static st_status run_seed(vctx *v, const layout *L, const st_size_set *set, int k, st_err *err)
{
	uint64_t seed = next_seed(v);
	int need_inputs = v->task->validator != NULL || v->perturb || v->o->dump_path;
	st_status s = v->stored ? stored_load(v, L, v->task->data_seeds[k], err) : ST_OK;
	if (s)
		return s;
	json_t *reqs[MAX_SOLS] = {0}, *reps[MAX_SOLS] = {0};
	/* The runs share the GPU; their outputs are copied to the host after, by a fetch that does
	 * not hold it: at an eval size the copies take longer than the runs, and another verify
	 * measures meanwhile. */
	for (int i = 0; i < v->n_sols; i++)
		reqs[i] = !runs_seed(v, i, k) ? NULL
		        : json_pack("{s:s,s:I,s:i,s:i,s:b,s:b,s:b}", "op", "run", "seed",
		                    (json_int_t)seed, "set", k % 2, "slot", 0, "dump_inputs",
		                    need_inputs && i == v->ref, "given", v->stored, "fetch", 0);
	char phase[128];
	snprintf(phase, sizeof phase, "set %s, seed %d", set->label, k + 1);
	s = broadcast(v, reqs, NULL, phase, v->o->timeout_s, reps, err);
	free_reps(reps, v->n_sols);
	for (int i = 0; i < v->n_sols; i++) {
		json_decref(reqs[i]);
		reqs[i] = !s && runs_seed(v, i, k) ? fetch_req(k % 2, 0) : NULL;
	}
	if (!s)
		s = broadcast_on(v, reqs, NULL, phase, v->o->timeout_s, reps, 0, err);
	free_reps(reps, v->n_sols);
	for (int i = 0; i < v->n_sols; i++)
		json_decref(reqs[i]);
	if (s)
		return s;

	json_t *cand_entry = NULL; /* borrowed from v->correctness */
	/* The reference must satisfy a semantic validator too: otherwise the task is broken. */
	if (v->validate && v->task->validator) {
		json_t *outs = json_array();
		char why[1024] = "";
		int ok = judge(v, L, set, v->ref, 0, outs, why, sizeof why);
		json_decref(outs);
		if (!ok)
			return st_err_set(err, ST_E_SYSTEM, "the reference fails the task's validator (%s)",
			                  why);
	}
	for (int i = 0; i < v->n_sols; i++) {
		if (i == v->ref || !usable(v, i) || !runs_seed(v, i, k))
			continue;
		json_t *outs = json_array();
		char why[1024] = "";
		int ok = judge(v, L, set, i, 0, outs, why, sizeof why);
		if (i == v->cand) {
			cand_entry = json_pack("{s:s,s:o,s:i,s:b,s:o}", "set", set->label, "sizes",
			                       sizes_json(set), "seed_index", k, "ok", ok, "outputs", outs);
			json_array_append_new(v->correctness, cand_entry);
		} else
			json_decref(outs);
		if (ok)
			continue;
		if (i == v->cand) {
			fail(v, "incorrect", "set %s, seed %d: %s", set->label, k + 1, why);
		} else {
			v->sols[i].failed = 1;
			flag(v, "expert_incorrect");
			char buf[1200];
			snprintf(buf, sizeof buf, "set %s, seed %d: %s", set->label, k + 1, why);
			json_object_set_new(v->verdict, "expert_failure", json_string(buf));
		}
	}
	/* Before the metamorphic check, whose run overwrites the inputs when the candidate is the
	 * reference. */
	if (k == 0 && L->dump && (s = write_dump(v, L, set, err)))
		return s;
	if (k != 0 || !usable(v, v->cand))
		return ST_OK;
	if (v->cand != v->ref) {
		s = determinism_check(v, L, set, seed, err);
		if (s)
			return s;
	}
	if (v->perturb && usable(v, v->cand))
		return perturbed_check(v, L, set, seed, cand_entry, err);
	return ST_OK;
}

/* ---- timing ---------------------------------------------------------------------------------- */

static st_status time_batch(vctx *v, int i, int n, int keep, st_err *err)
{
	sol *so = &v->sols[i];
	double est = 1.0;
	if (so->n_samples) {
		st_stats st;
		st_stats_compute(so->samples, so->n_samples, &st);
		est = st.median > 0 ? st.median : 1.0;
	}
	json_t *req = json_pack("{s:s,s:i}", "op", "time", "n", n), *rep = NULL;
	/* Fresh inputs before every timed call cost device time outside the measurement; only an
	 * untrusted candidate needs them. Then every solution gets them, so that all are timed alike
	 * and the baselines' round trips measure what the candidate's should cost (timing_verdict). */
	if (!v->sols[v->cand].trusted)
		json_object_set_new(req, "seed", json_integer((json_int_t)next_seed(v)));
	/* the waits for a CPU, counted for an untrusted runner's batches only (see below) */
	double wait0 = so->trusted ? -1 : st_runner_cpu_wait_ms(&so->runner);
	double self0 = so->trusted ? -1 : st_cpu_wait_ms(0);
	double t0 = st_now_s();
	/* A batch may take longer than one request's limit, but never unboundedly so: `est` comes
	 * from figures the runner reported. */
	double extra = n * est * 4e-3;
	extra = extra < 4 * v->o->timeout_s ? extra : 4 * v->o->timeout_s;
	st_status s = st_runner_call(&so->runner, req, -1, &rep, v->o->timeout_s + extra,
	                             err);
	json_decref(req);
	if (s || !json_is_true(json_object_get(rep, "ok"))) {
		s = runner_failed(v, i, "timing", s, rep, err);
		json_decref(rep);
		return s;
	}
	if (keep) {
		int before = so->n_samples;
		if (st_reply_add_samples(json_object_get(rep, "samples"), &so->samples, &so->n_samples,
		                         &so->cap_samples)) {
			json_decref(rep);
			return st_err_set(err, ST_E_NOMEM, "out of memory for timing samples");
		}
		double took_ms = (st_now_s() - t0) * 1e3, reported = 0;
		for (int k = before; k < so->n_samples; k++)
			reported += so->samples[k].wall_ms;
		/* On a host with more runnable threads than CPUs the runner waits for one a scheduler
		 * slice at a time (some ms), and so does this thread once the reply is in; a few such
		 * waits in a candidate's batches and none in the reference's made an honest fast
		 * candidate look like one that under-reports (two verifies in six under two busy loops
		 * on two cores). The kernel counts those waits. This thread's is taken off whole (it
		 * sleeps while the runner works), the runner's in the share that fell outside its
		 * timed calls, in proportion to the time spent there (a wait inside a call is in what
		 * it reported). Only from an untrusted runner's: a long CPU-bound call is preempted
		 * mostly inside it, so the share over-corrects a slow baseline's, and the baseline's
		 * gap, kept whole, errs toward the candidate. A solution cannot forge a wait to hide
		 * work: while its thread waits, nothing of it runs. */
		double wait1 = wait0 >= 0 ? st_runner_cpu_wait_ms(&so->runner) : -1;
		double self1 = self0 >= 0 ? st_cpu_wait_ms(0) : -1;
		double waited = wait0 >= 0 && wait1 >= wait0 ? wait1 - wait0 : 0;
		double outside = took_ms > reported ? took_ms - reported : 0;
		double waited_outside = took_ms > 0 ? waited * outside / took_ms : 0;
		if (self0 >= 0 && self1 >= self0)
			waited_outside += self1 - self0;
		if (waited_outside > outside)
			waited_outside = outside;
		so->cpu_wait_ms += waited_outside;
		if (so->n_gaps < MAX_GAPS && so->n_samples > before)
			so->gap_ms[so->n_gaps++] = (outside - waited_outside) / (so->n_samples - before);
		so->timing_wall_ms += took_ms;
		so->n_batches++;
	}
	json_t *ls = json_object_get(rep, "last_seeds");
	so->have_seeds = json_array_size(ls) == 2;
	for (int k = 0; k < 2 && so->have_seeds; k++)
		so->last_seed[k] = (uint64_t)json_integer_value(json_array_get(ls, (size_t)k));
	json_decref(rep);
	return ST_OK;
}

static json_t *raw_samples(const sol *so)
{
	json_t *a = json_array();
	for (int k = 0; k < so->n_samples; k++) {
		const st_sample *x = &so->samples[k];
		json_array_append_new(a, json_pack("[f,f,i,b]", x->ms, x->wall_ms, x->sm_mhz,
		                                   x->throttled));
	}
	return a;
}

static json_t *stats_json(const st_stats *s)
{
	return json_pack("{s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:i}", "samples", s->n,
	                 "discarded", s->discarded, "median_ms", s->median, "q1_ms", s->q1, "q3_ms",
	                 s->q3, "min_ms", s->min, "max_ms", s->max, "mean_ms", s->mean, "rse", s->rse,
	                 "rse_median", s->rse_median, "total_ms", s->total_ms, "wall_median_ms",
	                 s->wall_median, "sm_mhz_median", s->sm_mhz_median);
}

/* Interleave batches of samples of every usable solution until each meets the stop rule, so that
 * slow drift (clocks, temperature, neighbours) affects all of them alike. The harness's null
 * solution, where there is one, takes a short batch beside each of the candidate's while the
 * candidate is timed, CALIB_BATCHES at most: enough for its per-call overhead, no stop rule of
 * its own (its calls take no time, so 0.3 s of them would be thousands of flushes). */
static st_status time_all(vctx *v, const st_size_set *set, st_err *err)
{
	int order[MAX_SOLS], n = 0;
	int cand_first[MAX_SOLS] = {v->cand, v->ref, v->expert, v->calib};
	for (int k = 0; k < MAX_SOLS; k++) {
		int i = cand_first[k], dup = 0;
		for (int m = 0; m < n; m++)
			dup |= order[m] == i;
		if (i >= 0 && !dup && addressed(v, i))
			order[n++] = i;
	}
	int shown = n - (v->calib >= 0 && addressed(v, v->calib));
	progress(v, "timing on set %s (%d solution%s, interleaved%s)", set->label, shown,
	         shown > 1 ? "s" : "", shown < n ? ", beside the harness's null calls" : "");
	for (int m = 0; m < n; m++) /* warm-up: caches, clocks, lazy module loading */
		if (addressed(v, order[m])) {
			st_status s = time_batch(v, order[m], 3, 1, err);
			if (s)
				return s;
			v->sols[order[m]].n_samples = 0;
			v->sols[order[m]].timing_wall_ms = 0;
			v->sols[order[m]].n_batches = 0;
			v->sols[order[m]].n_gaps = 0;
			v->sols[order[m]].cpu_wait_ms = 0;
			s = time_batch(v, order[m], 2, 1, err);
			if (s)
				return s;
		}
	for (int left = n; left > 0;) {
		left = 0;
		for (int m = 0; m < n; m++) {
			sol *so = &v->sols[order[m]];
			if (so->timing_done || !addressed(v, order[m]))
				continue;
			st_stats st;
			st_stats_compute(so->samples, so->n_samples, &st);
			const sol *c = &v->sols[v->cand];
			if (so->calib ? c->timing_done || !usable(v, v->cand) || so->n_gaps >= CALIB_BATCHES
			              : st_stop_reached(&st, &v->o->stop, so->timing_wall_ms)) {
				so->timing_done = 1;
				continue;
			}
			left++;
			/* Batches of about 25 ms of wall time keep the interleaving fine and the round trips
			 * cheap. A sample's wall time (flush, fresh inputs, sync) can far exceed a tiny
			 * solution's own time, so the larger of the two sizes the batch; and no batch goes
			 * past the sample cap. The median is what the runner reported: clamp before any
			 * conversion. */
			double est = st.median > 0 ? st.median : 1;
			if (so->n_samples && so->timing_wall_ms / so->n_samples > est)
				est = so->timing_wall_ms / so->n_samples;
			double want = (so->calib ? 8.0 : 25.0) / est;
			int room = v->o->stop.max_samples - so->n_samples;
			int cap = room < 1 ? 1 : room < 2000 ? room : 2000;
			/* And at least MIN_BATCHES batches where the stop rule asks for that many samples:
			 * the parent-clock check compares quantiles over batches, and over two a quantile
			 * is their maximum, so one batch held up on a busy host decided it (a short stop
			 * rule, 13 samples of a fast call in two batches, was called hacking twice in six
			 * verifies under a load of two busy loops on two cores). */
			double need = st.median > 0 ? v->o->stop.min_time_ms / st.median : 0;
			if (need < v->o->stop.min_samples)
				need = v->o->stop.min_samples;
			int per = (int)(need / MIN_BATCHES);
			if (per >= 1 && per < cap)
				cap = per;
			/* And no more than the GPU time still missing asks for (2 % over, against the
			 * median moving): batches of need / MIN_BATCHES overshot the minimum by up to one
			 * batch, 4 % of the reference's time in a softmax verify, and timing holds the GPU
			 * alone. */
			if (st.median > 0 && st.total_ms < v->o->stop.min_time_ms) {
				double left = 1.02 * (v->o->stop.min_time_ms - st.total_ms) / st.median + 1;
				if (left < cap)
					cap = (int)left;
			}
			int batch = !(want >= 1) ? 1 : want > cap ? cap : (int)want;
			st_status s = time_batch(v, order[m], batch, 1, err);
			if (s)
				return s;
		}
	}
	return ST_OK;
}

/* The PyTorch times an import measured (eager, torch.compile): speedups against them. They were
 * measured once, at import, perhaps on another GPU: the verdict says where. */
static void imported_baselines(vctx *v, const json_t *b, double cand_ms, json_t *base,
                               json_t *speed)
{
	static const char *const names[][2] = {{"eager_ms", "vs_eager"}, {"compile_ms", "vs_compile"}};
	for (int k = 0; k < 2; k++) {
		double ms = json_number_value(json_object_get(b, names[k][0]));
		if (ms > 0) {
			json_object_set_new(base, names[k][0], json_real(ms));
			json_object_set_new(speed, names[k][1], json_real(ms / cand_ms));
		}
	}
	const char *dev = json_string_value(json_object_get(b, "device"));
	const char *here = json_string_value(json_object_get(json_object_get(v->verdict, "device"),
	                                                     "device"));
	if (dev)
		json_object_set_new(base, "measured_on", json_string(dev));
	if (dev && here && !strstr(here, dev))
		flag(v, "baselines_from_other_device");
}

static void timing_verdict(vctx *v, const st_size_set *set, json_t *peaks)
{
	const st_task *t = v->task;
	json_t *timing = json_object();
	json_object_set_new(timing, "set", json_string(set->label));
	json_object_set_new(timing, "sizes", sizes_json(set));
	double med[MAX_SOLS] = {0};
	/* Against what the candidate's timing is held: the reference, timed beside it, or for an
	 * imported task the harness's null calls (add_calib). */
	int held_to = v->sols[v->ref].n_samples ? v->ref
	            : v->calib >= 0 && v->sols[v->calib].n_samples ? v->calib : v->ref;
	for (int i = 0; i < v->n_sols; i++) {
		if (!v->sols[i].n_samples || v->sols[i].calib)
			continue;
		st_stats st;
		st_stats_compute(v->sols[i].samples, v->sols[i].n_samples, &st);
		med[i] = st.median;
		json_t *sj = stats_json(&st);
		json_object_set_new(sj, "timing_wall_ms", json_real(v->sols[i].timing_wall_ms));
		if (v->o->keep_samples)
			json_object_set_new(sj, "raw", raw_samples(&v->sols[i]));
		json_object_set_new(timing, role_of(v, i), sj);
		/* Work the solution's stream does not see (a side stream, another thread, the legacy
		 * default stream) shows as host wall time to the whole-device sync beyond event time.
		 * The reference, timed in the same interleaved batches, shows what the machine itself
		 * adds (a loaded host preempts the host backend's runners): the candidate may stretch
		 * as much as the reference does, never more. */
		double stretch = 1.0, ref_beyond = 0;
		if (i == v->cand && v->cand != v->ref && v->sols[held_to].n_samples) {
			st_stats rs;
			st_stats_compute(v->sols[held_to].samples, v->sols[held_to].n_samples, &rs);
			if (rs.median > 0 && rs.wall_median > rs.median) {
				/* a null call's ratio says nothing of how a real one stretches */
				stretch = held_to == v->calib ? 1.0 : rs.wall_median / rs.median;
				ref_beyond = rs.wall_median - rs.median;
			}
		}
		/* Beyond the stretch, the time past the stream's end event itself: on the GPU it is the
		 * sync's wake-up alone, some us, the same for every solution; work hidden there adds to
		 * it. Half the reference's again, 10 us and 5 % of the call leave room for noise and
		 * let no more than that much work hide. */
		double beyond = st.wall_median - st.median;
		if (i == v->cand && v->cand != v->ref &&
		    (st.wall_median > 1.5 * st.median * stretch + 0.1 ||
		     beyond > 1.5 * ref_beyond + 0.01 + 0.05 * st.median))
			fail(v, "hacking", "timed calls took %.4f ms to a whole-device sync but only %.4f ms "
			     "on the solution's stream (the %s: %.4f ms past its stream's end): work "
			     "runs where the timer cannot see it", st.wall_median, st.median,
			     v->sols[held_to].role, ref_beyond);
	}
	/* The parent's own clock. Per timed call, the time a batch took beyond the wall times the
	 * runner reported is the harness's own work (fresh inputs, poison, flush, round trips), the
	 * same for every solution of this task. A runner whose clock or CUDA calls were patched from
	 * inside (the solution shares its process) reports less than passed; the parent sees it.
	 * What is held to the reference's is the third quartile over batches, not the total: on a
	 * busy host (a service compiling on every core) one batch held up for 0.3 s made an honest
	 * expert's mean 0.35 ms a call against the reference's 0.15. A quarter of the batches may
	 * be held up so; a runner that under-reports in no more than a quarter of them moves its
	 * median time by little (within the lower half of its honest spread). */
	if (v->cand != v->ref && !v->verdict_final) {
		double gap[2] = {0, 0};
		const sol *two[2] = {&v->sols[v->cand], &v->sols[held_to]};
		for (int k = 0; k < 2; k++)
			if (two[k]->n_gaps) {
				double g[MAX_GAPS];
				memcpy(g, two[k]->gap_ms, (size_t)two[k]->n_gaps * sizeof *g);
				gap[k] = st_quantile(g, two[k]->n_gaps, 0.75);
			}
		if (two[0]->n_gaps && two[1]->n_gaps) {
			json_object_set_new(timing, "parent_overhead_ms",
			                    json_pack("{s:f,s:f}", "candidate", gap[0], two[1]->role, gap[1]));
			json_object_set_new(timing, "cpu_wait_ms",
			                    json_pack("{s:f,s:f}", "candidate", two[0]->cpu_wait_ms,
			                              two[1]->role, two[1]->cpu_wait_ms));
			/* Slack: half the reference's overhead again, 50 us of scheduling noise, and 2 ms
			 * per round trip (a slow candidate's batches are single calls). */
			double allowed = 1.5 * gap[1] + 0.05 + 2.0 * two[0]->n_batches / two[0]->n_samples;
			if (!two[0]->trusted && gap[0] > allowed)
				fail(v, "hacking", "the parent's clock saw %.4f ms per timed call beyond what the "
				     "runner reported (the %s: %.4f ms; allowed %.4f): the runner's "
				     "timing was tampered with from inside", gap[0], two[1]->role, gap[1],
				     allowed);
		}
	}
	/* A solution that is both (e.g. the expert verified as a candidate) reports under each name. */
	if (v->expert >= 0 && med[v->expert] > 0 && !json_object_get(timing, "expert"))
		json_object_set(timing, "expert", json_object_get(timing, role_of(v, v->expert)));
	if (med[v->ref] > 0 && !json_object_get(timing, "reference"))
		json_object_set(timing, "reference", json_object_get(timing, role_of(v, v->ref)));
	json_object_set_new(v->verdict, "timing", timing);

	json_t *base = json_object(), *speed = json_object();
	double c = med[v->cand];
	if (med[v->ref] > 0)
		json_object_set_new(base, "reference_ms", json_real(med[v->ref]));
	if (v->expert >= 0 && med[v->expert] > 0)
		json_object_set_new(base, "expert_ms", json_real(med[v->expert]));
	if (c > 0 && med[v->ref] > 0)
		json_object_set_new(speed, "vs_reference", json_real(med[v->ref] / c));
	if (c > 0 && v->expert >= 0 && med[v->expert] > 0)
		json_object_set_new(speed, "vs_expert", json_real(med[v->expert] / c));
	if (t->baselines && c > 0)
		imported_baselines(v, t->baselines, c, base, speed);
	json_object_set_new(v->verdict, "baselines", base);
	json_object_set_new(v->verdict, "speedup", speed);

	int64_t flops = 0, bytes = 0;
	st_err e;
	if (peaks && c > 0 && t->cost_bytes && !st_expr_eval(t->cost_bytes, set, &bytes, &e) &&
	    (!t->cost_flops || !st_expr_eval(t->cost_flops, set, &flops, &e))) {
		double floor_ms = st_peaks_floor_ms(peaks, (double)flops, (double)bytes, t->cost_unit);
		json_t *sol_j = json_pack("{s:f,s:f,s:s,s:f}", "flops", (double)flops, "bytes",
		                          (double)bytes, "unit", t->cost_unit ? t->cost_unit : "",
		                          "floor_ms", floor_ms);
		if (floor_ms > 0) {
			json_object_set_new(sol_j, "fraction", json_real(floor_ms / c));
			if (med[v->ref] > 0)
				json_object_set_new(sol_j, "reference_fraction", json_real(floor_ms / med[v->ref]));
			if (v->expert >= 0 && med[v->expert] > 0)
				json_object_set_new(sol_j, "expert_fraction",
				                    json_real(floor_ms / med[v->expert]));
		}
		json_object_set_new(sol_j, "attained_tflops", json_real(flops / (c * 1e-3) / 1e12));
		json_object_set_new(sol_j, "attained_gbs", json_real(bytes / (c * 1e-3) / 1e9));
		json_object_set_new(sol_j, "peaks", json_incref(peaks));
		json_object_set_new(v->verdict, "sol", sol_j);
	}
}

/* One st_run of the candidate under CUPTI, on the timed set, turned into the verdict's "profile".
 * A profiler that cannot run here (no CUPTI, no permission) is said in the verdict; a solution
 * that crashes or hangs under it gets its verdict like anywhere else. */
static st_status profile_candidate(vctx *v, const st_size_set *set, const json_t *peaks,
                                   st_err *err)
{
	sol *c = &v->sols[v->cand];
	progress(v, "profile on set %s", set->label);
	json_t *req = json_pack("{s:s}", "op", "profile"), *rep = NULL;
	st_status s = st_runner_call(&c->runner, req, -1, &rep, v->o->timeout_s, err);
	json_decref(req);
	const char *cls = json_string_value(json_object_get(rep, "class"));
	if (!s && !json_is_true(json_object_get(rep, "ok")) && cls && !strcmp(cls, "profiler")) {
		json_object_set_new(v->verdict, "profile",
		                    json_pack("{s:s?}", "error", json_string_value(json_object_get(
		                                                     rep, "reason"))));
		json_decref(rep);
		return ST_OK;
	}
	if (s || !json_is_true(json_object_get(rep, "ok"))) {
		s = runner_failed(v, v->cand, "profile", s, rep, err);
		json_decref(rep);
		return s;
	}
	st_profile_inputs in = {.peaks = peaks, .unit = v->task->cost_unit,
	                        .trace_path = v->o->trace_path, .title = c->path};
	int64_t flops = 0, bytes = 0;
	st_err e;
	if (v->task->cost_bytes && !st_expr_eval(v->task->cost_bytes, set, &bytes, &e) &&
	    (!v->task->cost_flops || !st_expr_eval(v->task->cost_flops, set, &flops, &e))) {
		in.flops = (double)flops;
		in.bytes = (double)bytes;
	}
	if (c->n_samples) {
		st_stats st;
		st_stats_compute(c->samples, c->n_samples, &st);
		in.time_ms = st.median;
	}
	json_t *prof = NULL;
	s = st_profile_report(json_object_get(rep, "profile"), &in, &prof, err);
	json_decref(rep);
	if (s == ST_E_IO)
		return s; /* the trace file the user named cannot be written */
	if (s)
		prof = json_pack("{s:s}", "error", err->msg);
	json_object_set_new(v->verdict, "profile", prof);
	return ST_OK;
}

/* An imported task has no reference to recompute a timed call: instead, after timing, one more
 * timed call (the same request as the others, so nothing tells it apart) runs on the inputs of
 * the seed the import kept back, which the candidate has never seen, and its output is checked
 * against the stored one. */
static st_status stored_check(vctx *v, const layout *L, const st_size_set *set, st_err *err)
{
	st_status s = stored_load(v, L, v->task->data_check, err);
	if (s)
		return s;
	int ran;
	s = rerun_candidate(v, json_pack("{s:s,s:i,s:b}", "op", "time", "n", 1, "given", 1), set,
	                    "checking a timed call", &ran, err);
	if (!s && ran)
		s = rerun_candidate(v, fetch_req(0, 1),
		                    set, "fetching the checked timed call", &ran, err);
	if (s || !ran)
		return s;
	json_t *outs = json_array();
	char why[1024] = "";
	if (!judge(v, L, set, v->cand, 1, outs, why, sizeof why))
		fail(v, "incorrect", "a timed call on the inputs of a seed kept back for this check "
		     "returned a wrong answer (lazy work, a benchmark detector, or wrong on unseen "
		     "inputs): %s", why);
	json_decref(outs);
	return ST_OK;
}

/* After timing, check one timed call of the candidate, chosen now that all of them have run: its
 * buffers still hold that call's output, and the reference recomputes it from the same seed. A
 * solution that is only right when it believes it is being checked is caught here. */
static st_status spot_check(vctx *v, const layout *L, const st_size_set *set, st_err *err)
{
	sol *c = &v->sols[v->cand];
	if (v->cand == v->ref || !usable(v, v->cand) || c->trusted)
		return ST_OK;
	if (v->stored)
		return stored_check(v, L, set, err);
	if (!c->have_seeds) { /* inputs from a task's host generator are not redone per call */
		flag(v, "timed_calls_unchecked");
		return ST_OK;
	}
	unsigned char pick = 0;
	while (getrandom(&pick, 1, 0) != 1)
		;
	int s = pick & 1;
	json_t *fetch = fetch_req(s, 1);
	json_t *run = json_pack("{s:s,s:I,s:i,s:i}", "op", "run", "seed",
	                        (json_int_t)c->last_seed[s], "set", 0, "slot", 0);
	json_t *reqs[MAX_SOLS] = {0}, *reps[MAX_SOLS] = {0};
	reqs[v->cand] = fetch;
	reqs[v->ref] = run;
	st_status st = broadcast(v, reqs, NULL, "checking a timed call", v->o->timeout_s, reps, err);
	free_reps(reps, v->n_sols);
	json_decref(fetch);
	json_decref(run);
	if (st || !usable(v, v->cand))
		return st;
	json_t *outs = json_array();
	char why[1024] = "";
	if (!judge(v, L, set, v->cand, 1, outs, why, sizeof why))
		fail(v, "hacking", "a timed call, checked after timing, returned a wrong answer although "
		     "the checked calls were right (lazy work, or the solution detects the benchmark): %s",
		     why);
	json_decref(outs);
	return ST_OK;
}

/* ---- one size set ------------------------------------------------------------------------------ */

/* Runners under ncu are started for one pass and read back after it: never pooled. */
static int pooling(const vctx *v)
{
	return v->o->runner_pool && !v->o->under_ncu;
}

/* Solution i's runner goes back to the pool loaded after this verify (see keep_runner). */
static int poolable(const vctx *v, int i)
{
	return pooling(v) && v->sols[i].trusted && v->sols[i].pool_key[0];
}

/* The bytes from the start of solution i's shared memory that its runner writes: the params
 * (--dump) and the outputs of slot 0, and of slot 1 for the candidate (its second runs); the
 * inputs, last, only where the reference hands them over (validators, metamorphic checks,
 * --dump, as run_seed asks). */
static size_t shm_written(const vctx *v, const layout *L, int i)
{
	const st_task *t = v->task;
	if (i == v->ref && (t->validator || t->hooks || v->o->dump_path)) /* hooks: may perturb */
		return L->total;
	if (i != v->cand && t->n_outputs)
		return L->out_off[1][0];
	return t->n_inputs ? L->in_off[0] : L->total;
}

/* Size set `set`'s tensors (the specs of the setup request: params, inputs, outputs) and their
 * places in shared memory. */
static st_status plan_set(vctx *v, const st_size_set *set, int timed, layout *L, json_t **params,
                          json_t **inputs, json_t **outputs, st_err *err)
{
	const st_task *t = v->task;
	memset(L, 0, sizeof *L);
	*params = *inputs = *outputs = NULL;
	if (t->n_inputs > MAX_TENSORS || t->n_outputs > MAX_TENSORS || t->n_params > MAX_TENSORS)
		return st_err_set(err, ST_E_INVALID, "%s: more than %d tensors", t->id, MAX_TENSORS);
	*params = tensor_specs(t->params, t->n_params, set, 1, L->dims_par, L->par_bytes, err);
	*inputs = *params ? tensor_specs(t->inputs, t->n_inputs, set, 1, L->dims_in, L->in_bytes, err) : NULL;
	*outputs = *inputs ? tensor_specs(t->outputs, t->n_outputs, set, 0, L->dims_out, L->out_bytes, err) : NULL;
	if (!*outputs) {
		json_decref(*params);
		json_decref(*inputs);
		*params = *inputs = NULL;
		return st_err_wrap(err, ST_E_INVALID, "%s: size set %s", t->id, set->label);
	}
	L->dump = timed && v->o->dump_path;
	L->n_par = L->dump || v->params ? t->n_params : 0;
	make_layout(L, t->n_inputs, t->n_outputs);
	return ST_OK;
}

static st_status run_set(vctx *v, const st_size_set *set, int timed, json_t *peaks, st_err *err)
{
	const st_task *t = v->task;
	layout L;
	json_t *params, *inputs, *outputs;
	st_status ps = plan_set(v, set, timed, &L, &params, &inputs, &outputs, err);
	if (ps)
		return ps;
	int dumping = L.dump;
	for (int i = 0; v->params && i < t->n_params; i++) {
		const st_safetensor *f = st_safetensors_find(v->params, t->params[i].name);
		int same = f->ndim == t->params[i].ndim;
		for (int d = 0; same && d < f->ndim; d++)
			same = f->shape[d] == L.dims_par[i][d];
		if (!same) {
			json_decref(params);
			json_decref(inputs);
			json_decref(outputs);
			char want[256] = "", got[256] = "";
			for (int d = 0; d < t->params[i].ndim; d++)
				snprintf(want + strlen(want), sizeof want - strlen(want), "%s%" PRId64,
				         d ? ", " : "", L.dims_par[i][d]);
			for (int d = 0; d < f->ndim; d++)
				snprintf(got + strlen(got), sizeof got - strlen(got), "%s%" PRId64, d ? ", " : "",
				         f->shape[d]);
			return st_err_set(err, ST_E_INVALID, "params %s: %s has shape [%s] in the file; "
			                  "set %s needs [%s]", v->params_path, f->name, got, set->label,
			                  want);
		}
	}
	json_t *sizes = json_array();
	for (int i = 0; i < set->n; i++)
		json_array_append_new(sizes, json_pack("[s,I]", set->names[i], (json_int_t)set->values[i]));
	json_t *req = json_pack("{s:s,s:o,s:o,s:o,s:o,s:I,s:I,s:{s:o,s:o,s:o}}", "op", "setup",
	                        "sizes", sizes, "params", params, "inputs", inputs, "outputs", outputs,
	                        "param_seed", (json_int_t)next_seed(v), "shm_bytes",
	                        (json_int_t)L.total, "layout", "out0",
	                        offsets_json(L.out_off[0], t->n_outputs), "out1",
	                        offsets_json(L.out_off[1], t->n_outputs), "in",
	                        offsets_json(L.in_off, t->n_inputs));
	if (dumping)
		json_object_set_new(json_object_get(req, "layout"), "params",
		                    offsets_json(L.par_off, t->n_params));
	if (v->params)
		json_object_set_new(json_object_get(req, "layout"), "params_in",
		                    offsets_json(L.par_off, t->n_params));
	json_t *reqs[MAX_SOLS] = {0}, *reps[MAX_SOLS] = {0};
	int fds[MAX_SOLS];
	st_status s = ST_OK;
	for (int i = 0; i < v->n_sols && !s; i++) {
		fds[i] = -1;
		if (!addressed(v, i) && !v->sols[i].stored)
			continue;
		s = map_shm(v, &v->sols[i], L.total, err);
		if (v->sols[i].stored)
			continue; /* the stored outputs' memory: this process's alone */
		fds[i] = v->sols[i].blk.fd;
		/* what the runner maps in at once: its own share (the rest of the setup is common) */
		reqs[i] = json_copy(req);
		/* a runner the pool keeps for later verifies keeps the set's device memory too */
		if (!s && (!reqs[i] ||
		           json_object_set_new(reqs[i], "populate",
		                               json_integer((json_int_t)shm_written(v, &L, i))) ||
		           json_object_set_new(reqs[i], "keep", json_boolean(poolable(v, i)))))
			s = st_err_set(err, ST_E_NOMEM, "out of memory for the setup request");
		for (int j = 0; !s && v->params && j < t->n_params; j++)
			memcpy(v->sols[i].shm + L.par_off[j],
			       st_safetensors_find(v->params, t->params[j].name)->data, L.par_bytes[j]);
	}
	char what[128];
	snprintf(what, sizeof what, "st_init on set %s", set->label);
	if (!s)
		s = broadcast(v, reqs, fds, what, v->o->timeout_s, reps, err);
	free_reps(reps, v->n_sols);
	for (int i = 0; i < v->n_sols; i++)
		json_decref(reqs[i]);
	json_decref(req);
	phase(v, "setup");
	/* An imported task runs every seed it stored. */
	int seeds = v->stored ? t->n_data_seeds : v->o->seeds;
	for (int k = 0; k < seeds && !s && usable(v, v->cand); k++) {
		s = run_seed(v, &L, set, k, err);
		if (!s)
			progress(v, "set %-8s seed %d/%d %s", set->label, k + 1, seeds,
			         v->verdict_final ? "FAILED" : "ok");
	}
	phase(v, "correctness");
	int measuring = timed && (v->o->timing || profiling(v));
	if (measuring)
		gpu_exclusive(v);
	if (!s && timed && v->o->timing && usable(v, v->cand))
		s = time_all(v, set, err);
	/* The check of a timed call (a run of the reference, then a comparison on the CPU) measures
	 * nothing: another verify measures meanwhile, unless a profile is still to be taken. */
	if (measuring && !profiling(v))
		gpu_release(v);
	if (!s && timed && v->o->timing && usable(v, v->cand))
		s = spot_check(v, &L, set, err);
	if (!s && timed && v->o->timing && usable(v, v->cand))
		timing_verdict(v, set, peaks);
	if (timed)
		phase(v, "timing");
	if (!s && timed && profiling(v) && usable(v, v->cand) && !v->verdict_final) {
		s = profile_candidate(v, set, peaks, err);
		phase(v, "profile");
	}
	if (measuring)
		gpu_release(v);
	json_t *td = json_pack("{s:s}", "op", "teardown");
	for (int i = 0; i < v->n_sols; i++)
		reqs[i] = addressed(v, i) ? td : NULL;
	if (!s)
		s = broadcast(v, reqs, NULL, "st_free", v->o->timeout_s, reps, err);
	free_reps(reps, v->n_sols);
	json_decref(td);
	for (int i = 0; i < v->n_sols; i++)
		unmap_shm(&v->sols[i]);
	phase(v, "teardown");
	return s;
}

/* ---- the pipeline ------------------------------------------------------------------------------ */

/* Is size set `label` named in the comma list? "hidden" names every hidden set, "hidden1" one. */
static int set_selected(const char *list, const char *label)
{
	if (!list)
		return 1;
	int hidden = !strncmp(label, "hidden", 6);
	for (const char *p = list; *p;) {
		size_t len = strcspn(p, ",");
		if ((len == strlen(label) && !strncmp(p, label, len)) ||
		    (hidden && len == 6 && !strncmp(p, "hidden", 6)))
			return 1;
		p += len + (p[len] == ',');
	}
	return 0;
}

static st_status check_sets_option(const char *list, st_err *err)
{
	if (!list)
		return ST_OK;
	char buf[256];
	snprintf(buf, sizeof buf, "%s", list);
	for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ","))
		if (strcmp(tok, "small") && strcmp(tok, "eval") && strncmp(tok, "hidden", 6))
			return st_err_set(err, ST_E_INVALID, "unknown size set '%s' (known: small, eval, "
			                  "hidden, hidden<N>)", tok);
	return ST_OK;
}

/* ---- the runner pool ---------------------------------------------------------------------- */

/* The key a kept runner of compiled trusted solution i has in the pool; 0 when it has none. */
static int pool_key_of(vctx *v, int i)
{
	sol *so = &v->sols[i];
	if (!pooling(v) || !so->trusted || so->stored || !so->cr.ok || !so->cr.so_path[0] ||
	    (so->flags & ST_RUNNER_NCU))
		return 0;
	char key[sizeof so->pool_key];
	snprintf(key, sizeof key, "%s|%d|%s|%s|%s", v->o->backend, so->flags,
	         v->o->devices ? v->o->devices : "", so->cr.so_path, v->hooks_so);
	memcpy(so->pool_key, key, sizeof key);
	return 1;
}

/* Trusted solutions whose module (and task hooks) a kept runner already has loaded: that runner
 * replaces the spare or fresh one this verify started for it, which goes back to the pool. */
static void swap_in_loaded(vctx *v)
{
	for (int i = 0; i < v->n_sols; i++) {
		sol *so = &v->sols[i];
		st_runner kept;
		if (!pool_key_of(v, i) ||
		    !st_runner_pool_take_loaded(v->o->runner_pool, so->pool_key, role_of(v, i), &kept))
			continue;
		st_runner_pool_give(v->o->runner_pool, &so->runner, v->o->backend, so->flags,
		                    v->o->devices, NULL);
		so->runner = kept;
		so->loaded = 1;
	}
}

static const char *time_set(const vctx *v)
{
	int host = !strcmp(v->o->backend, "host");
	return v->o->time_set ? v->o->time_set : host && !v->stored ? "small" : "eval";
}

/* Does size set `set` run in this verify, and is it the timed one? */
static int set_runs(const vctx *v, const st_size_set *set, int *timed)
{
	int host = !strcmp(v->o->backend, "host");
	/* An imported task has its eval set only, on either backend. */
	const char *sel = v->o->sets ? v->o->sets : host && !v->stored ? "small" : NULL;
	*timed = !strcmp(set->label, time_set(v));
	return *timed || set_selected(sel, set->label);
}

/* Shared memory for every solution, as much as the largest size set needs, the part its runner
 * writes (shm_written) allocated: done while the runners start, when the parent would only wait.
 * Only a speed-up: whatever fails here is left to map_shm. */
static void reserve_shm(vctx *v)
{
	const st_size_set *sets[64];
	int n_sets = st_task_size_sets(v->task, sets, 64);
	size_t len = 0, alloc[MAX_SOLS] = {0};
	for (int k = 0; k < n_sets; k++) {
		int timed;
		layout L;
		json_t *specs[3];
		st_err e;
		if (!set_runs(v, sets[k], &timed) ||
		    plan_set(v, sets[k], timed, &L, &specs[0], &specs[1], &specs[2], &e))
			continue;
		for (int j = 0; j < 3; j++)
			json_decref(specs[j]);
		len = L.total > len ? L.total : len;
		for (int i = 0; i < v->n_sols; i++) {
			size_t w = shm_written(v, &L, i);
			alloc[i] = w > alloc[i] ? w : alloc[i];
		}
	}
	st_mem_range todo[2 * MAX_SOLS];
	int n_todo = 0, owner[2 * MAX_SOLS];
	for (int i = 0; i < v->n_sols && len; i++) {
		st_err e;
		int before = n_todo;
		if (new_shm(v, &v->sols[i], len, alloc[i], todo, &n_todo, &e))
			close_shm(&v->sols[i], NULL);
		for (int k = before; k < n_todo; k++)
			owner[k] = i;
	}
	/* Blocks the kernel could not fill are dropped, not handed out half-allocated. */
	if (n_todo && st_mem_fill(todo, n_todo, v->threads))
		for (int k = 0; k < n_todo; k++)
			close_shm(&v->sols[owner[k]], NULL);
}

/* A runner per solution: a kept one with it loaded (`compiled`: the modules are known), else a
 * spare from the pool, else a fresh start; then the fresh ones' hellos, read together. */
static st_status acquire_runners(vctx *v, int compiled, st_err *err)
{
	const st_verify_opts *o = v->o;
	for (int i = 0; i < v->n_sols; i++) {
		sol *so = &v->sols[i];
		double t0 = st_now_s();
		so->flags = (o->no_sandbox ? 0 : ST_RUNNER_SANDBOX) |
		            (i == v->cand && profiling(v) ? ST_RUNNER_PROFILE : 0) |
		            (i == v->cand && o->under_ncu ? ST_RUNNER_NCU : 0);
		so->loaded = so->from_pool =
			compiled && pool_key_of(v, i) &&
			st_runner_pool_take_loaded(o->runner_pool, so->pool_key, role_of(v, i),
			                           &so->runner);
		if (!so->from_pool)
			so->from_pool = pooling(v) &&
			                st_runner_pool_take_spare(o->runner_pool, o->backend, so->flags,
			                                          o->devices, role_of(v, i), &so->runner);
		so->got = so->loaded ? "loaded" : so->from_pool ? "spare" : "started";
		if (!so->from_pool) { /* without the GPU's lock, as the pool's spares (runner_pool.c) */
			st_status s = st_runner_start(&so->runner, o->backend, role_of(v, i), so->flags,
			                              o->devices, err);
			if (s)
				return s;
		}
		so->started = 1;
		so->got_ms = 1e3 * (st_now_s() - t0);
	}
	reserve_shm(v);
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
static json_t *runners_json(vctx *v)
{
	json_t *o = json_object();
	for (int i = 0; i < v->n_sols; i++) {
		const sol *so = &v->sols[i];
		if (so->stored || !so->got)
			continue;
		json_t *x = json_pack("{s:s,s:f}", "from", so->got, "ms", so->got_ms);
		if (!strcmp(so->got, "started") && so->runner.start_ms)
			json_object_set(x, "runner_ms", so->runner.start_ms);
		json_object_set_new(o, role_of(v, i), x);
	}
	return o;
}

/* After the verify: a healthy runner goes back to the pool when what it ran can be trusted: a
 * trusted solution (kept loaded), or nothing at all (a spare again, e.g. a candidate that did not
 * compile). Never after an error of the harness or a broken baseline. */
static int keep_runner(const vctx *v, int i, st_status s)
{
	const sol *so = &v->sols[i];
	if (!pooling(v) || s || !so->runner.alive || so->failed || (so->flags & ST_RUNNER_NCU))
		return 0;
	if (so->loaded && poolable(v, i))
		return 1;
	return !so->touched && !so->loaded;
}

static st_status pipeline(vctx *v, const char *solution, st_err *err)
{
	const st_task *t = v->task;
	const st_verify_opts *o = v->o;
	int host = !strcmp(o->backend, "host");
	const char *ref_path = st_task_reference(t, host);
	const char *exp_path = st_task_expert(t, host);
	if (!ref_path && !v->stored)
		return st_err_set(err, ST_E_INVALID, "task %s has no %sreference", t->id,
		                  host ? "host " : "");
	st_status s = v->stored ? add_stored(v) : add_sol(v, "reference", ref_path, 1, &v->ref, err);
	if (!s && exp_path)
		s = add_sol(v, "expert", exp_path, 1, &v->expert, err);
	if (!s)
		s = add_sol(v, "candidate", solution, 0, &v->cand, err);
	if (s)
		return s;
	if (!o->no_policy) {
		s = policy_check(v, solution, err);
		if (s || v->verdict_final)
			return s;
	} else {
		flag(v, "unchecked_source");
	}
	/* A candidate is untrusted even when it is byte-identical to a shipped solution: it links only
	 * what the task's policy allows. The benchmark, which runs the shipped experts, says otherwise. */
	v->sols[v->cand].trusted = o->candidate_trusted;
	if (v->stored && o->timing && !o->candidate_trusted)
		add_calib(v);

	/* With kept runners and the arch known (stitch serve), compile first: what is compiled names
	 * the loaded runners to look for, and compiling is a cache hit there anyway. Otherwise the
	 * runners start while nvcc works. */
	const char *known_arch = o->arch ? o->arch : host ? "host" : NULL;
	int compile_first = pooling(v) && known_arch;
	if (compile_first) {
		json_object_set_new(v->verdict, "arch", json_string(known_arch));
		s = compile_all(v, known_arch, err);
		phase(v, "compile");
		if (s || v->verdict_final)
			return s;
	}
	/* Runners from the pool already hold the device: until one is started or a request goes
	 * out, this verify's work (wiping a reused block for the candidate) is the CPU's alone, and
	 * another verify may measure meanwhile. */
	if ((s = acquire_runners(v, compile_first, err)))
		return s;
	phase(v, "start");
	if ((s = st_admit_device(t, o, v->sols[v->cand].runner.info, err)))
		return s;
	json_object_set_new(v->verdict, "runners", runners_json(v));
	const json_t *info = v->sols[v->ref].runner.info;
	json_object_set(v->verdict, "device", (json_t *)info);
	const json_t *sb = json_object_get(v->sols[v->cand].runner.info, "sandbox");
	if (!json_is_true(json_object_get(sb, "enabled")))
		flag(v, "unsandboxed");
	else if (!json_is_true(json_object_get(sb, "fs_isolated")))
		flag(v, "no_fs_isolation");
	const char *arch = o->arch ? o->arch : json_string_value(json_object_get(info, "arch"));
	json_object_set_new(v->verdict, "arch", json_string(arch ? arch : "?"));
	progress(v, "device: %s (%s)", json_string_value(json_object_get(info, "device")), arch);

	if (!compile_first) {
		gpu_idle(v);
		s = compile_all(v, arch, err);
		phase(v, "compile");
		if (s || v->verdict_final)
			return s;
		swap_in_loaded(v);
	}
	gpu_use(v); /* loading a module allocates on the device */

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
			return st_err_wrap(err, ST_E_SYSTEM, "preparing the %s runner", role_of(v, i));
		json_t *req = null ? json_pack("{s:s,s:b}", "op", "load", "null", 1)
		                   : json_pack("{s:s,s:s}", "op", "load", "solution", so_path);
		json_t *rep = NULL;
		if (v->hooks_so[0])
			json_object_set_new(req, "hooks", json_string(hooks_path));
		st_err e;
		v->sols[i].touched = 1;
		s = st_runner_call(&v->sols[i].runner, req, -1, &rep, o->timeout_s, &e);
		json_decref(req);
		const char *st = json_string_value(json_object_get(rep, "status"));
		if (!s && i == v->cand && st && !strcmp(st, "abi")) {
			const char *why = json_string_value(json_object_get(rep, "reason"));
			fail(v, "compile_error", "%s", why ? why : "not a solution");
			s = st_err_set(err, ST_E_INVALID, "%s: %s", solution, why ? why : "not a solution");
			json_decref(rep);
			return s;
		}
		if (s || !json_is_true(json_object_get(rep, "ok"))) {
			s = runner_failed(v, i, "loading the solution", s, rep, &e);
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

	phase(v, "load");
	json_t *peaks = NULL;
	if (o->timing || profiling(v)) {
		st_err pe;
		st_status ps = ST_OK;
		if (!st_peaks_cached(&v->sols[v->ref].runner, &peaks)) {
			gpu_exclusive(v); /* measuring: nobody else on the GPU */
			ps = st_peaks_get(&v->sols[v->ref].runner, 600, &peaks, &pe);
			gpu_release(v);
		}
		if (ps) {
			flag(v, "peaks_unavailable");
			progress(v, "device peaks unavailable: %s", pe.msg);
			if (!v->sols[v->ref].runner.alive)
				return st_err_set(err, ST_E_SYSTEM, "%s", pe.msg);
		}
	}
	phase(v, "peaks");
	const st_size_set *sets[64];
	int n_sets = st_task_size_sets(t, sets, 64);
	int timed_any = 0;
	for (int k = 0; k < n_sets && !s && usable(v, v->cand); k++) {
		int timed;
		if (!set_runs(v, sets[k], &timed))
			continue;
		timed_any |= timed;
		s = run_set(v, sets[k], timed, peaks, err);
	}
	if (!s && o->timing && !timed_any && !v->verdict_final)
		s = st_err_set(err, ST_E_INVALID, "no size set named '%s' to time", time_set(v));
	json_decref(peaks);
	return s;
}

/* ---- Nsight Compute -------------------------------------------------------------------------- */

/* The report of a candidate runner started under ncu: the kernels of one st_run (the runner
 * marks only its first), launches of one kernel with one launch shape merged into a row with
 * their count and total duration, DRAM bytes and FLOPs (the other figures are the first
 * launch's), longest first. */
static json_t *ncu_collect(st_runner *r)
{
	char *text = NULL;
	size_t len = 0;
	st_err e;
	json_t *all = NULL;
	if (st_runner_ncu_report(r, 600, &text, &len, &e) || st_ncu_parse(text, len, &all, &e)) {
		free(text);
		return json_pack("{s:s}", "error", e.msg);
	}
	free(text);
	json_t *kernels = json_array();
	size_t i;
	json_t *k;
	json_array_foreach(all, i, k) {
		json_t *same = NULL;
		size_t j;
		json_t *q;
		json_array_foreach(kernels, j, q)
			if (json_equal(json_object_get(q, "name"), json_object_get(k, "name")) &&
			    json_equal(json_object_get(q, "grid"), json_object_get(k, "grid")) &&
			    json_equal(json_object_get(q, "block"), json_object_get(k, "block")))
				same = q;
		if (same) {
			json_object_set_new(same, "launches", json_integer(json_integer_value(
			                                          json_object_get(same, "launches")) + 1));
			/* the totals of all its launches: time, traffic and work alike */
			static const char *const sums[] = {"duration_us", "dram_bytes", "flops",
			                                   "tensor_flops"};
			for (size_t m = 0; m < sizeof sums / sizeof *sums; m++)
				if (json_object_get(k, sums[m]))
					json_object_set_new(same, sums[m], json_real(
						json_number_value(json_object_get(same, sums[m])) +
						json_number_value(json_object_get(k, sums[m]))));
			continue;
		}
		json_object_set_new(k, "launches", json_integer(1));
		json_array_append(kernels, k);
	}
	size_t measured = json_array_size(all);
	json_decref(all);
	json_array_foreach(kernels, i, k)
		st_ncu_classify(k);
	/* longest first: the kernels worth a coder's attention lead */
	size_t n = json_array_size(kernels);
	for (size_t a = 1; a < n; a++)
		for (size_t b = a; b > 0; b--) {
			json_t *x = json_array_get(kernels, b - 1), *y = json_array_get(kernels, b);
			if (json_number_value(json_object_get(x, "duration_us")) >=
			    json_number_value(json_object_get(y, "duration_us")))
				break;
			json_incref(x);
			json_array_set(kernels, b - 1, y);
			json_array_set_new(kernels, b, x);
		}
	return json_pack("{s:o,s:I,s:b}", "kernels", kernels, "launches_measured",
	                 (json_int_t)measured, "capped", measured >= ST_NCU_MAX_LAUNCHES);
}

/* Add what Nsight Compute's counters show (spills, kernels waiting on latency, idle tensor
 * pipes) to the profile's findings, weighted by each kernel's share of the timeline, and keep
 * the list ranked. */
static void ncu_findings(json_t *prof)
{
	const json_t *top = json_object_get(json_object_get(prof, "summary"), "top_kernels");
	int n_k = 0;
	st_ncu_kernel *k = st_ncu_kernels_from_json(json_object_get(json_object_get(prof, "ncu"),
	                                                            "kernels"), &n_k);
	if (!k)
		return;
	st_timeline_summary sum;
	memset(&sum, 0, sizeof sum);
	st_kernel_stat *stats = calloc(json_array_size(top) + 1, sizeof *stats);
	size_t i;
	const json_t *t;
	json_array_foreach(top, i, t) {
		if (!stats)
			break;
		stats[i].name = json_string_value(json_object_get(t, "name"));
		stats[i].share = json_number_value(json_object_get(t, "share"));
		sum.n_top++;
	}
	sum.top = stats;
	st_finding *f = NULL;
	int nf = stats ? st_feedback_ncu(&sum, k, n_k, 8, &f) : 0;
	json_t *all = json_object_get(prof, "findings");
	for (int j = 0; all && j < nf; j++) {
		/* insert ranked: after every finding that weighs at least as much */
		size_t at = 0;
		json_t *x;
		json_array_foreach(all, at, x)
			if (json_number_value(json_object_get(x, "weight")) < f[j].weight)
				break;
		json_array_insert_new(all, at, json_pack("{s:f,s:s,s:s}", "weight", f[j].weight, "text",
		                                         f[j].text, "source", "ncu"));
	}
	st_findings_free(f, nf);
	free(stats);
	free(k);
}

/* A second verify of the candidate, on the timed set with one seed, its runner under ncu and
 * nothing timed; its kernels go into the profile. A missing or refused ncu is said there and
 * the profile stands without it. */
static void ncu_pass(vctx *v, const char *task_dir, const char *solution)
{
	st_verify_opts o = *v->o;
	o.ncu = 0;
	o.under_ncu = 1;
	o.profile = 0;
	o.timing = 0;
	o.keep_samples = 0;
	o.seeds = 1;
	o.sets = json_string_value(json_object_get(json_object_get(v->verdict, "timing"), "set"));
	if (!o.sets)
		o.sets = o.time_set ? o.time_set : "eval";
	progress(v, "Nsight Compute on the candidate (set %s, one seed, not sandboxed)", o.sets);
	json_t *nv = NULL;
	st_err e;
	st_status s = st_verify(task_dir, solution, &o, &nv, &e);
	json_t *prof = json_object_get(v->verdict, "profile");
	json_t *ncu = nv ? json_object_get(nv, "ncu") : NULL;
	if (ncu)
		json_object_set(prof, "ncu", ncu);
	else
		json_object_set_new(prof, "ncu", json_pack("{s:s}", "error", s ? e.msg : "no report"));
	ncu_findings(prof);
	json_decref(nv);
}

/* --params: the file holds every param of the task by name with the task's dtype (shapes are
 * checked per size set); other tensors in it, such as a --dump's inputs and outputs, are ignored. */
static st_status open_params(const st_task *t, const char *path, st_safetensors *f, st_err *err)
{
	st_status s = st_safetensors_open(path, f, err);
	if (s) /* a file the user named that cannot be read is bad input, not a broken machine */
		return st_err_wrap(err, s == ST_E_IO ? ST_E_INVALID : s, "params");
	for (int i = 0; i < t->n_params; i++) {
		const st_safetensor *x = st_safetensors_find(f, t->params[i].name);
		if (!x)
			s = st_err_set(err, ST_E_INVALID, "params %s: no tensor '%s' (%s needs %d params: "
			               "%s%s)", path, t->params[i].name, t->id, t->n_params,
			               t->params[0].name, t->n_params > 1 ? ", ..." : "");
		else if (x->dtype != t->params[i].dtype)
			s = st_err_set(err, ST_E_INVALID, "params %s: %s is %s in the file; the task "
			               "needs %s", path, x->name, st_dtype_name(x->dtype),
			               st_dtype_name(t->params[i].dtype));
		if (s) {
			st_safetensors_close(f);
			return s;
		}
	}
	return ST_OK;
}

st_status st_verify(const char *task_dir, const char *solution, const st_verify_opts *o,
                    json_t **verdict, st_err *err)
{
	*verdict = NULL;
	if (strcmp(o->backend, "cuda") && strcmp(o->backend, "host"))
		return st_err_set(err, ST_E_INVALID, "unknown backend '%s' (known: cuda, host)",
		                  o->backend);
	if (o->arch && st_arch_valid(o->arch) != 0)
		return st_err_set(err, ST_E_INVALID, "unknown arch '%s' (expected sm_<NN>[a|f], e.g. "
		                  "sm_90a)", o->arch);
	if (o->seeds < 1 || o->seeds > 100)
		return st_err_set(err, ST_E_INVALID, "seeds must be between 1 and 100");
	st_status s = check_sets_option(o->sets, err);
	if (s)
		return s;
	if (!st_file_exists(solution))
		return st_err_set(err, ST_E_INVALID, "%s: no such file", solution);
	const char *ext = strrchr(solution, '.');
	int host = !strcmp(o->backend, "host");
	if (!ext || (strcmp(ext, ".cu") && strcmp(ext, ".c")))
		return st_err_set(err, ST_E_INVALID, "%s: not a C or CUDA source (expected .cu or .c)",
		                  solution);
	if (host != !strcmp(ext, ".c"))
		return st_err_set(err, ST_E_INVALID, "%s: the %s backend runs %s solutions", solution,
		                  o->backend, host ? ".c" : ".cu");

	st_task task;
	s = st_task_load(task_dir, &task, err);
	if (!s && (s = st_admit_verify(&task, o, NULL, err))) /* before anything is mapped */
		st_task_free(&task);
	if (s)
		return s;
	st_safetensors params;
	memset(&params, 0, sizeof params);
	/* An imported task's params are its own file's, unless --params names others. */
	const char *params_path = o->params_path ? o->params_path : task.data_params;
	if (params_path && (s = open_params(&task, params_path, &params, err))) {
		st_task_free(&task);
		return s;
	}
	vctx v;
	memset(&v, 0, sizeof v);
	v.params = params_path ? &params : NULL;
	v.params_path = params_path;
	v.stored = task.n_data_seeds > 0;
	v.task = &task;
	v.o = o;
	v.expert = -1;
	v.calib = -1;
	v.seed_state = o->seed;
	v.t_start = v.t_mark = st_now_s();
	v.phases = json_object();
	v.gpu_waits = json_object();
	v.runner_ms = json_object();
	v.gpu_holds = o->gpu_lock ? json_array() : NULL;
	/* Comparing is the correctness phase's main cost on large outputs, and the runners wait. */
	v.threads = o->threads > 0 ? o->threads : st_cpus_share(1, 16);
	v.verdict = json_pack("{s:s,s:s,s:s,s:s}", "status", "ok", "reason", "", "task", task.id,
	                      "solution", solution);
	json_object_set_new(v.verdict, "backend", json_string(o->backend));
	v.correctness = json_array();
	v.flags = json_array();

	s = pipeline(&v, solution, err);
	if (o->under_ncu && v.cand >= 0 && v.sols[v.cand].started)
		json_object_set_new(v.verdict, "ncu", ncu_collect(&v.sols[v.cand].runner));

	gpu_use(&v); /* runners free their memory and close the device */
	for (int i = 0; i < v.n_sols; i++)
		if (v.sols[i].started && !keep_runner(&v, i, s))
			st_runner_quit(&v.sols[i].runner);
	phase(&v, "stop");
	/* Apart from "stop" (runners told to quit), so that a slow end of a verify says which it is:
	 * the runners' folders, the shared memory unmapped, the pool given its runners back. */
	for (int i = 0; i < v.n_sols; i++) {
		if (v.sols[i].started && keep_runner(&v, i, s))
			st_runner_pool_give(o->runner_pool, &v.sols[i].runner, o->backend, v.sols[i].flags,
			                    o->devices, v.sols[i].loaded ? v.sols[i].pool_key : NULL);
		else if (v.sols[i].started)
			st_runner_stop(&v.sols[i].runner);
		close_shm(&v.sols[i], o->shm_cache);
		st_compile_result_free(&v.sols[i].cr);
		free(v.sols[i].samples);
		free(v.sols[i].path);
	}
	gpu_release(&v);
	if (v.hooks_dl)
		dlclose(v.hooks_dl);
	json_object_set_new(v.verdict, "correctness", v.correctness);
	json_object_set_new(v.verdict, "flags", v.flags);
	phase(&v, "release");
	if (!s && o->ncu && profiling(&v) && json_object_get(v.verdict, "profile") &&
	    !strcmp(json_string_value(json_object_get(v.verdict, "status")), "ok")) {
		ncu_pass(&v, task_dir, solution);
		phase(&v, "ncu");
	}
	json_object_set_new(v.verdict, "phases_s", v.phases);
	json_object_set_new(v.verdict, "compare_s", json_real(v.compare_s));
	json_object_set_new(v.verdict, "compare_threads", json_integer(v.threads));
	json_object_set_new(v.verdict, "runner_stages_ms", v.runner_ms);
	json_object_set_new(v.verdict, "shm_blocks",
	                    json_pack("{s:i,s:i}", "made", v.shm_made, "reused", v.shm_reused));
	if (o->gpu_lock) { /* inside the phases: waiting for other verifies to finish measuring */
		json_object_set_new(v.verdict, "gpu_wait_s", json_real(v.gpu_wait_s));
		json_object_set_new(v.verdict, "gpu_wait_by_phase_s", v.gpu_waits);
		json_object_set_new(v.verdict, "gpu_holds", v.gpu_holds);
	} else {
		json_decref(v.gpu_waits);
	}
	json_object_set_new(v.verdict, "wall_s", json_real(st_now_s() - v.t_start));
	if (o->params_path)
		json_object_set_new(v.verdict, "params_file", json_string(o->params_path));
	st_safetensors_close(&params);
	st_task_free(&task);
	if (s && s != ST_E_INVALID) {
		json_decref(v.verdict);
		return s;
	}
	*verdict = v.verdict;
	return s;
}
