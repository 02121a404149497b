/* What the stage files of st_verify (the files of src/verify that once were verify.c) share:
 * the verify's context (its solutions, the size set's layout in shared memory, the verdict being
 * built) and the functions one stage calls in another. Internal to the library: every function
 * here is prefixed vx_ so that none clashes with another module's. */
#ifndef ST_VERIFY_INT_H
#define ST_VERIFY_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "stitch/stitch.h"
#include "stitch/task_hooks.h"
#include "task/safetensors.h"
#include "task/task.h"
#include "verify/batch_mean.h"
#include "verify/commits.h"
#include "verify/compile.h"
#include "verify/gpu_hold.h"
#include "verify/runner_client.h"
#include "verify/shm_cache.h"
#include "verify/stats.h"

#define MAX_SOLS 4 /* reference (or stored outputs), expert, candidate, harness */
#define VX_OUTPUT_MAX 2048 /* bytes of what a failed solution printed, in the verdict */
#define MAX_TENSORS ST_MAX_TENSORS
/* KernelBench's level-3 models hold up to 626 params (ResNet101: weights, biases and batch-norm
 * buffers): the imports take them all, so the verify does too. */
#define MAX_PARAMS 1024
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
	int from_pool;        /* the runner came from slot->runner_pool, its hello already read */
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
	/* the kept batches as the parent's clock saw them (the first MAX_GAPS): clock_bound.h */
	st_batch_rec recs[MAX_GAPS];
	int n_recs;
	double cpu_wait_ms;   /* the waits for a CPU taken off those, over all kept batches */
	int timing_done;
	st_commits commits;   /* every timed call with its seed and committed digest (commits.h) */
	int committing;       /* its timed calls commit digests (fresh inputs every call, or the
	                       * kept inputs of a task's host generator) */
	int filled;           /* its buffer sets were filled from v->fill for timing (kept inputs) */
} sol;

typedef struct layout {
	int64_t dims_in[MAX_TENSORS][ST_MAX_DIMS], dims_out[MAX_TENSORS][ST_MAX_DIMS];
	int64_t dims_par[MAX_PARAMS][ST_MAX_DIMS];
	size_t in_bytes[MAX_TENSORS], out_bytes[MAX_TENSORS], par_bytes[MAX_PARAMS];
	size_t out_off[2][MAX_TENSORS], in_off[MAX_TENSORS];
	size_t par_off[MAX_PARAMS]; /* the params come first when n_par > 0 (--dump only) */
	int n_par;
	int dump;                    /* this set's first seed goes to --dump */
	size_t total;
} layout;

/* One round of the candidate's timing, weighed (timing_verdict.c): the parent's clock against
 * its reports, the front-loading bound, and what they make of its time. */
typedef struct vx_round {
	st_round_time t;
	st_clock_bound bound;
	st_batch_mean means;
	int binds;             /* the front-loading bound raised its time */
} vx_round;

/* The batches begun after a quiet probe (timing.c), those that waited over 1 ms for the GPU,
 * their waits in all and the longest. */
typedef struct vx_quiet {
	int checks, waits;
	double wait_ms, max_ms;
} vx_quiet;

typedef struct vctx {
	const st_task *task;
	const st_verify_opts *o;
	const st_size_set *set; /* the size set being run (sets.c), NULL outside one */
	const st_verify_slot *slot; /* never NULL: a zeroed one for a lone verify */
	int under_ncu;         /* the profile pass's second verify (profile_pass.c): the candidate
	                        * runs under ncu, and its report goes into the verdict as "ncu" */
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
	int shm_made, shm_reused; /* shared-memory blocks made, and taken from slot->shm_cache */
	json_t *phases;        /* seconds spent per phase, for people who wonder where time goes */
	const st_safetensors *params; /* --params (or an imported task's): where the params come
	                               * from, or NULL */
	const char *params_path; /* that file's name */
	int stored;            /* an imported task: inputs and expected outputs from its files */
	struct vx_live *live;  /* or from its PyTorch program, drawn for this verify (live_ref.h),
	                        * NULL otherwise */
	st_gpu_hold gpu;       /* this verify's hold on slot->gpu_lock and gpu_file (gpu_hold.h) */
	st_gpu_flock gpu_file; /* the GPU's lock across processes (gpu_flock.h); fd -1: none */
	double wait_mark;      /* gpu.wait_s at the last phase mark */
	json_t *gpu_waits;     /* per phase, the part of it spent waiting for the GPU */
	json_t *runner_ms;     /* the runners' own account of set-up and teardown ("setup.alloc":
	                        * ms, summed over runners and sets) */
	double deadline;       /* st_now_s() by which the verify ends, whatever the candidate does */
	double rtt_ms;         /* one bare round trip to the baseline's runner (clock_bound.h) */
	int clock_confirmed;   /* the candidate was timed again: the parent's clock charged it or
	                        * would accuse it (sets.c) */
	int confirm_from;      /* its first sample of that confirmation round */
	vx_round main_round;   /* the main round as it stood then (timing_verdict.c) */
	uint64_t fill;         /* a task whose host generator makes its inputs keeps them through
	                        * timing: every runner's buffer set s is filled from
	                        * st_fill_seed(fill, s) first, the seeds its commits carry */
	int stopped_batches;   /* the baselines' batches and round trips timed with the candidate's
	                        * runner asked to stop (timing.c, stop_others) */
	int stopped_seen;      /* of those, the ones where it was seen stopped */
	int neighbour_stops;   /* the neighbouring verifies' candidates stopped for every batch
	                        * (the candidate's own too) and round trip, summed (neighbours.h) */
	int neighbours_held;   /* they are stopped now, until the batch is over (timing.c) */
	vx_quiet quiet[2];     /* the quiet probes before the baselines' batches [0] and before the
	                        * candidate's [1], those after neighbours were stopped (timing.c) */
} vctx;

/* verify.c: st_verify, and for the ncu pass (under_ncu = 1) the same verify with the
 * candidate run under ncu. */
st_status vx_verify(const char *task_dir, const char *solution, const st_verify_opts *o,
                    const st_verify_slot *slot, int under_ncu, json_t **verdict, st_err *err);

/* vctx.c */
void vx_progress(vctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int vx_profiling(const vctx *v);
uint64_t vx_next_seed(vctx *v);
double vx_time_left(const vctx *v, double want_s);
int vx_past_deadline(const vctx *v);
int vx_task_staged(const st_task *t);

/* verdict_build.c */
void vx_json_add(json_t *obj, const char *key, double x);
void vx_phase(vctx *v, const char *name);
void vx_flag(vctx *v, const char *name);
int vx_has_flag(const vctx *v, const char *name);
/* Decide the candidate's verdict as a failure; the first failure wins. */
void vx_fail(vctx *v, const char *status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
json_t *vx_sizes_json(const st_size_set *s);
void vx_verdict_close(vctx *v);
void vx_verdict_finish(vctx *v);

/* solutions.c */
st_status vx_add_sol(vctx *v, const char *role, const char *path, int trusted, int *index,
                     st_err *err);
st_status vx_add_stored(vctx *v);
void vx_add_calib(vctx *v);
const char *vx_role_of(vctx *v, int i);
st_status vx_runner_failed(vctx *v, int i, const char *phase, st_status s, json_t *rep,
                           st_err *err);
int vx_usable(vctx *v, int i);
int vx_runs_seed(const vctx *v, int i, int k);
int vx_addressed(vctx *v, int i);
json_t *vx_fetch_req(int set, int slot);
st_status vx_broadcast_on(vctx *v, json_t *const *reqs, const int *fds, const char *phase,
                          double timeout_s, json_t **reps, int on_gpu, st_err *err);
st_status vx_broadcast(vctx *v, json_t *const *reqs, const int *fds, const char *phase,
                       double timeout_s, json_t **reps, st_err *err);
void vx_free_reps(json_t **reps, int n);

/* compile_sols.c */
st_status vx_policy_check(vctx *v, const char *solution, st_err *err);
st_status vx_compile_all(vctx *v, const char *arch, st_err *err);

/* layout.c */
json_t *vx_offsets_json(const size_t *off, int n);
void vx_unmap_shm(sol *so);
void vx_close_shm(sol *so, st_shm_cache *cache);
st_status vx_map_shm(vctx *v, sol *so, size_t len, st_err *err);
void vx_views(const st_task *t, const layout *L, unsigned char *base, int slot, int inputs,
              st_tensor *out);
size_t vx_shm_written(const vctx *v, const layout *L, int i);
st_status vx_plan_set(vctx *v, const st_size_set *set, int timed, layout *L, json_t **params,
                      json_t **inputs, json_t **outputs, st_err *err);
void vx_reserve_shm(vctx *v);

/* stored.c */
/* Seed k of an imported task (k == n_data_seeds: the kept-back check seed), from its file or
 * its live reference. */
st_status vx_stored_load(vctx *v, const layout *L, int k, st_err *err);
void vx_stored_put_inputs(vctx *v, const layout *L, int i);

/* correctness.c */
int vx_judge(vctx *v, const layout *L, const st_size_set *set, int i, int slot, json_t *outs,
             char *why, size_t whylen);
st_status vx_rerun_candidate(vctx *v, json_t *req, const st_size_set *set, const char *what,
                             int *ran, st_err *err);
st_status vx_run_seed(vctx *v, const layout *L, const st_size_set *set, int k, st_err *err);

/* timing.c */
json_t *vx_raw_samples(const sol *so);
json_t *vx_stats_json(const st_stats *s);
st_status vx_time_all(vctx *v, const st_size_set *set, st_err *err);
/* Where the parent's clock charged the candidate or would accuse it (vx_clock_disputed): time
 * the candidate and its baseline again, alone on the GPU, as a round of its own. */
st_status vx_time_confirm(vctx *v, st_err *err);
/* The share of the harness's own work a call that the parent's clock lets pass as noise
 * (clock_bound.h): a quarter on the host backend, none on the GPU. */
double vx_harness_share(const vctx *v);
/* The baseline the candidate's timing is held to: the reference timed beside it, or for an
 * imported task the harness's null calls; -1 when neither was timed. */
int vx_held_to(const vctx *v);
/* The parent-clock bound of the candidate against that baseline (clock_bound.h). */
void vx_clock_bound(const vctx *v, st_clock_bound *b);

/* timing_verdict.c */
/* The candidate's timing round that began at its sample `from` (its batches kept since then),
 * weighed against its baseline's; ref_median: the reference's median. */
void vx_round_measure(const vctx *v, int from, double ref_median, vx_round *r);
/* After the main round: does the parent's clock charge the candidate, or would it accuse it?
 * Then the round is kept in v->main_round and the candidate is timed again (sets.c). */
int vx_clock_disputed(vctx *v);
void vx_timing_verdict(vctx *v, const st_size_set *set, json_t *peaks);

/* audit.c */
st_status vx_audit(vctx *v, const layout *L, const st_size_set *set, st_err *err);

/* sets.c */
st_status vx_check_sets_option(const char *list, st_err *err);
int vx_set_runs(const vctx *v, const st_size_set *set, int *timed);
st_status vx_run_sets(vctx *v, json_t *peaks, st_err *err);

/* runners.c */
int vx_pooling(const vctx *v);
int vx_poolable(const vctx *v, int i);
void vx_swap_in_loaded(vctx *v);
st_status vx_acquire_runners(vctx *v, int compiled, st_err *err);
json_t *vx_runners_json(vctx *v);
st_status vx_load_solutions(vctx *v, st_err *err);
void vx_release_runners(vctx *v, st_status s);

/* profile_pass.c */
st_status vx_profile_candidate(vctx *v, const st_size_set *set, const json_t *peaks,
                               st_err *err);
json_t *vx_ncu_collect(st_runner *r);
void vx_ncu_pass(vctx *v, const char *task_dir, const char *solution);

#endif
