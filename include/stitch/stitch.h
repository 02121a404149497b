/* stitch library API: verify one solution against a task and get the verdict (DESIGN.md §5).
 * The command line, the benchmark and (later) the agents and the reward service all call this. */
#ifndef STITCH_STITCH_H
#define STITCH_STITCH_H

#include <pthread.h>
#include <jansson.h>
#include <stdint.h>
#include "stitch/error.h"
#include "stitch/timing.h"

/* What a verify checks and how: the task's size sets and seeds, the timing and its stop rule,
 * the sandbox and the source policy, the profile, and the files it reads or writes. Plain data
 * only: where the verify runs and what it shares with other verifies of the process is its
 * st_verify_slot. */
typedef struct st_verify_opts {
	const char *backend;       /* "cuda" (default) or "host" */
	const char *arch;          /* NULL: the GPU's own (sm_90a on an H200) */
	const char *sets;          /* NULL: every set (cuda) or "small" (host); else a comma list of
	                              small, eval, hidden (all hidden sets) */
	const char *time_set;      /* size set that is timed; NULL: eval (cuda), small (host) */
	int seeds;                 /* correctness seeds per size set, default 3 */
	uint64_t seed;             /* 0: fresh secret seeds; otherwise reproducible ones */
	int timing;                /* 1: time candidate, reference and expert interleaved */
	double timeout_s;          /* limit for one runner request (st_init, a call, a batch) */
	double compile_timeout_s;
	st_stop_rule stop;
	int no_cache;
	int no_sandbox;            /* run solutions without the runner sandbox (flag "unsandboxed") */
	int no_policy;             /* skip the static source check (flag "unchecked_source"); for
	                              testing the sandbox on its own */
	int candidate_trusted;     /* 1 for shipped solutions: link the task's solution libraries */
	int threads;               /* comparison threads; 0: online CPUs, at most 16 */
	int profile;               /* 1: record one st_run of a correct candidate on the timed set with
	                              CUPTI and add "profile" (timeline summary, roofline, findings)
	                              to the verdict; cuda backend only */
	const char *trace_path;    /* with profile: also write that timeline as a Chrome trace here */
	int ncu;                   /* with profile: also measure the candidate's kernels with Nsight
	                              Compute (a second, unsandboxed pass on the timed set, one seed)
	                              and add them as profile.ncu: {"kernels": [...]} or {"error"} */
	const char *params_path;   /* take the params from this safetensors file (by name; dtype
	                              and shape must match the task's for every set run) instead of
	                              generating them from a seed, e.g. real model weights */
	const char *dump_path;     /* write the candidate's params, the inputs of the first seed on
	                              the timed set and the candidate's outputs for them to this
	                              safetensors file (hidden sets are never written) */
	uint64_t max_request_bytes; /* host memory one verify may take (stitch serve and stitch
	                              worker --max-request-gb); 0: what the machine has */
	int keep_samples;          /* 1: every timed sample goes into the verdict as
	                              timing.<role>.raw: [[ms, wall_ms, sm_mhz, throttled], ...] */
	int fresh_seeds;           /* 1: an imported task that stores its seeds draws new ones
	                              through its PyTorch program anyway, as a task that stores
	                              none always does (needs python3 with torch) */
} st_verify_opts;

/* Where one verify runs, beside what it checks: what belongs to the process and is shared with
 * its other verifies (the GPU, that GPU's lock, kept runners, kept shared memory), and where its
 * progress lines go. None of it changes what is checked, so none of it travels with a queued
 * job. stitch serve's workers and stitch worker's pipelines each run as one slot of their
 * st_verify_env (src/verify/verify_env.h); a lone verify passes NULL, or a zeroed slot with
 * only its progress set. */
typedef struct st_verify_slot {
	const char *devices;       /* CUDA_VISIBLE_DEVICES of the runners (e.g. "1"); NULL: ours */
	pthread_rwlock_t *gpu_lock; /* shared by verifies that run on one GPU at once (NULL: none):
	                              held shared while runners use the GPU (not while they start),
	                              exclusive while timing, profiling or measuring peaks, so no
	                              verify's figures see another's work */
	int gpu_alone;             /* with gpu_lock: hold it exclusive from the first load on, for
	                              a re-run of a fault seen while the GPU was shared */
	struct st_neighbours *neighbours; /* with gpu_lock: the untrusted candidates' runners of the
	                              verifies on that GPU (src/verify/neighbours.h), stopped while
	                              any one of them times its baselines; NULL: none */
	struct st_runner_pool *runner_pool; /* runners kept between verifies (src/verify/
	                              runner_pool.h; stitch serve), or NULL: every verify starts its
	                              own and stops them after */
	struct st_shm_cache *shm_cache; /* shared-memory blocks kept between the verifies of one
	                              thread (src/verify/shm_cache.h; stitch serve's workers and
	                              stitch worker's pipelines), or NULL: every verify makes and
	                              frees its own */
	/* Progress lines for a person watching; NULL for none. */
	void (*progress)(void *arg, const char *line);
	void *progress_arg;
} st_verify_slot;

void st_verify_opts_default(st_verify_opts *o);
/* A request's options over o (stitch serve, the queue's jobs): {"sets": "small,eval", "seeds": N,
 * "timing": bool, "profile": bool, and for the queue's sweeps and evaluations "min_time_ms",
 * "max_rse", "max_samples", "time_set"}; absent ones leave o as it is. Strings stay owned by
 * `options`, which must outlive o's use. (stitch serve accepts the first four from its
 * clients.) */
void st_verify_opts_apply(st_verify_opts *o, const json_t *options);
/* The options of o that st_verify_opts_apply reads, as JSON (a queue job's options). */
json_t *st_verify_opts_json(const st_verify_opts *o);

/* Verify `solution` against the task in `task_dir` as `o` says, in `slot` (NULL: a lone verify,
 * sharing nothing, saying nothing). Every outcome of the candidate (compile
 * error, crash, hang, wrong answer) is a verdict with ST_OK. ST_E_INVALID for bad input (the
 * task, the file, an option; a solution that does not export the ABI also gets a verdict);
 * ST_E_NODEVICE / ST_E_SYSTEM when the environment cannot do the job (no GPU, a baseline that
 * fails). *verdict is set whenever it could be built; the caller frees it. */
st_status st_verify(const char *task_dir, const char *solution, const st_verify_opts *o,
                    const st_verify_slot *slot, json_t **verdict, st_err *err);

/* Compile everything st_verify(task_dir, solution, o) would compile (task hooks, reference,
 * expert, solution) for `arch` into the compile cache, so that a later st_verify finds it there.
 * Compile failures are not errors here (st_verify reports them); ST_E_INVALID for a task or file
 * that cannot be read, ST_E_SYSTEM when no compiler runs. Safe to call from several threads. */
st_status st_verify_precompile(const char *task_dir, const char *solution, const st_verify_opts *o,
                               const char *arch, st_err *err);

/* Human-readable rendering of a verdict. */
void st_verdict_print(const json_t *verdict, FILE *f);

#endif
