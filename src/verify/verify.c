/* st_verify: the Verifier's pipeline for one candidate. Compile (cached) the candidate, the
 * reference and the expert; start one runner process per distinct solution; for every size set
 * and several secret seeds have each runner generate the same inputs, run, and hand back its
 * outputs through shared memory; compare the candidate's and the expert's outputs with the
 * reference's (or run the task's semantic validator); re-run one seed on other buffers to catch
 * races and stale reads; then time all of them interleaved on the timed set and build the verdict.
 * An imported task (task.json "data") has no reference solution: its place is taken by the
 * outputs its PyTorch program draws for this verify (live_ref.h) or by those stored in its files,
 * which this process loads into the reference's slot, and the inputs of each seed are handed to
 * the runners instead of generated; in the timing checks a
 * runner of the built-in null solution (the harness alone) stands in for the reference.
 * Nothing of a solution ever runs in this process. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "common/arch.h"
#include "common/clock.h"
#include "common/cpus.h"
#include "common/fs.h"
#include "task/dtype.h"
#include "verify/admit.h"
#include "verify/live_ref.h"
#include "verify/peaks.h"
#include "verify/runner_pool.h"
#include "verify/verify_int.h"

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

/* Where the params and an imported task's seeds come from: --params, an imported task's own
 * file, or (a task that stores no seeds, or --fresh-seeds) its PyTorch program, started here so
 * that torch loads while the solutions compile (live_ref.h). */
static st_status open_data(const st_task *task, const st_verify_opts *o,
                           const st_verify_slot *slot, st_safetensors *params,
                           const char **params_path, vx_live *live_ref, vx_live **live,
                           st_err *err)
{
	*params_path = o->params_path ? o->params_path : task->data_params;
	if (o->fresh_seeds && (!task->n_data_seeds || !task->data_reference)) {
		return st_err_set(err, ST_E_INVALID, "--fresh-seeds: %s %s", task->id,
		                  !task->n_data_seeds ? "is not an imported KernelBench task (stitch "
		                                        "import kernelbench makes them)"
		                                      : "names no program to draw seeds with "
		                                        "(data.reference: imported by an older "
		                                        "stitch); import it again");
	}
	if (!task->data_live && !o->fresh_seeds)
		return *params_path ? open_params(task, *params_path, params, err) : ST_OK;
	*params_path = NULL;
	if (o->params_path)
		return st_err_set(err, ST_E_INVALID, "--params: %s judges against its PyTorch program, "
		                  "whose params are the program's own", task->id);
	st_status s = vx_live_start(live_ref, task, o->seed, slot ? slot->devices : NULL, err);
	if (s)
		vx_live_free(live_ref);
	else
		*live = live_ref;
	return s;
}

/* The solutions to judge: the reference (or an imported task's stored outputs), the expert and
 * the candidate, whose source the policy reads before anything of it runs. */
static st_status add_solutions(vctx *v, const char *solution, st_err *err)
{
	const st_task *t = v->task;
	const st_verify_opts *o = v->o;
	int host = !strcmp(o->backend, "host");
	const char *ref_path = st_task_reference(t, host);
	const char *exp_path = st_task_expert(t, host);
	if (!ref_path && !v->stored)
		return st_err_set(err, ST_E_INVALID, "task %s has no %sreference", t->id,
		                  host ? "host " : "");
	st_status s = v->stored ? vx_add_stored(v) : vx_add_sol(v, "reference", ref_path, 1, &v->ref, err);
	if (!s && exp_path)
		s = vx_add_sol(v, "expert", exp_path, 1, &v->expert, err);
	if (!s)
		s = vx_add_sol(v, "candidate", solution, 0, &v->cand, err);
	if (s)
		return s;
	if (!o->no_policy) {
		s = vx_policy_check(v, solution, err);
		if (s || v->verdict_final)
			return s;
	} else {
		vx_flag(v, "unchecked_source");
	}
	/* A candidate is untrusted even when it is byte-identical to a shipped solution: it links only
	 * what the task's policy allows. The benchmark, which runs the shipped experts, says otherwise. */
	v->sols[v->cand].trusted = o->candidate_trusted;
	if (v->stored && o->timing && !o->candidate_trusted)
		vx_add_calib(v);
	return ST_OK;
}

/* The longest wait for another process's hold on the GPU's lock file: each of its holds lasts
 * seconds (a timing phase, the device's peaks), so a longer one is a process stopped (^Z) or
 * hung while it held the lock, and this verify goes on without it (flag gpu_lock_unavailable);
 * the quiet probe still keeps its figures from sharing the GPU with work that is running. */
#define GPU_LOCK_GIVE_UP_S 300.0

static void report_gpu_wait(void *arg, double waited)
{
	vx_progress((vctx *)arg, "waiting %.0f s for the GPU: a verify of another process is "
	            "measuring on it (the lock %s/<GPU UUID>.lock)", waited, st_gpu_flock_dir());
}

/* The GPU's lock shared with the verifies of other processes (gpu_flock.h), named by the UUID
 * the reference's runner reported, taken from the first hold on. */
static void attach_file_lock(vctx *v)
{
	if (strcmp(v->o->backend, "cuda"))
		return;
	const char *uuid = json_string_value(json_object_get(v->sols[v->ref].runner.info, "uuid"));
	char why[400];
	if (st_gpu_flock_open(&v->gpu_file, st_gpu_flock_dir(), uuid, why, sizeof why)) {
		vx_flag(v, "gpu_lock_unavailable");
		vx_progress(v, "no GPU lock shared with other processes (%s): a verify of another "
		            "process could measure while this one does", why);
		return;
	}
	v->gpu.file = &v->gpu_file; /* before the first hold: each is taken on both locks */
	v->gpu.file_give_up_s = GPU_LOCK_GIVE_UP_S;
	v->gpu.waiting = report_gpu_wait;
	v->gpu.waiting_arg = v;
}

/* A runner per solution, and the device they found into the verdict; *arch is the arch to
 * compile for. *compiled: the solutions were compiled first (then the verdict may be decided). */
static st_status start_runners(vctx *v, int *compiled, const char **arch, st_err *err)
{
	const st_verify_opts *o = v->o;
	int host = !strcmp(o->backend, "host");
	st_status s;
	/* With kept runners and the arch known (stitch serve), compile first: what is compiled names
	 * the loaded runners to look for, and compiling is a cache hit there anyway. Otherwise the
	 * runners start while nvcc works. */
	const char *known_arch = o->arch ? o->arch : host ? "host" : NULL;
	int compile_first = vx_pooling(v) && known_arch;
	*compiled = compile_first;
	if (compile_first) {
		json_object_set_new(v->verdict, "arch", json_string(known_arch));
		s = vx_compile_all(v, known_arch, err);
		vx_phase(v, "compile");
		if (s || v->verdict_final)
			return s;
	}
	/* Runners from the pool already hold the device: until one is started or a request goes
	 * out, this verify's work (wiping a reused block for the candidate) is the CPU's alone, and
	 * another verify may measure meanwhile. */
	if ((s = vx_acquire_runners(v, compile_first, err)))
		return s;
	vx_phase(v, "start");
	if ((s = st_admit_device(v->task, o, v->sols[v->cand].runner.info, err)))
		return s;
	json_object_set_new(v->verdict, "runners", vx_runners_json(v));
	const json_t *info = v->sols[v->ref].runner.info;
	json_object_set(v->verdict, "device", (json_t *)info);
	const json_t *sb = json_object_get(v->sols[v->cand].runner.info, "sandbox");
	if (!json_is_true(json_object_get(sb, "enabled")))
		vx_flag(v, "unsandboxed");
	else if (!json_is_true(json_object_get(sb, "fs_isolated")))
		vx_flag(v, "no_fs_isolation");
	*arch = o->arch ? o->arch : json_string_value(json_object_get(info, "arch"));
	json_object_set_new(v->verdict, "arch", json_string(*arch ? *arch : "?"));
	vx_progress(v, "device: %s (%s)", json_string_value(json_object_get(info, "device")), *arch);
	attach_file_lock(v);
	return ST_OK;
}

/* The device's peak figures, for the roofline of the timing and the profile. */
static st_status measure_peaks(vctx *v, json_t **peaks, st_err *err)
{
	*peaks = NULL;
	if (v->o->timing || vx_profiling(v)) {
		st_err pe;
		st_status ps = ST_OK;
		if (!st_peaks_cached(&v->sols[v->ref].runner, peaks)) {
			st_gpu_hold_exclusive(&v->gpu); /* measuring: nobody else on the GPU */
			ps = st_peaks_get(&v->sols[v->ref].runner, 600, peaks, &pe);
			st_gpu_hold_release(&v->gpu);
		}
		if (ps) {
			vx_flag(v, "peaks_unavailable");
			vx_progress(v, "device peaks unavailable: %s", pe.msg);
			if (!v->sols[v->ref].runner.alive)
				return st_err_set(err, ST_E_SYSTEM, "%s", pe.msg);
		}
	}
	vx_phase(v, "peaks");
	return ST_OK;
}

/* The stages, in order. A stage that decides the verdict (a failure of the candidate) ends the
 * verify there; an error of the harness ends it with that error. */
static st_status pipeline(vctx *v, const char *solution, st_err *err)
{
	int compiled;
	const char *arch = NULL;
	st_status s = add_solutions(v, solution, err);
	if (s || v->verdict_final)
		return s;
	s = start_runners(v, &compiled, &arch, err);
	if (s || v->verdict_final)
		return s;
	if (!compiled) {
		st_gpu_hold_idle(&v->gpu);
		s = vx_compile_all(v, arch, err);
		vx_phase(v, "compile");
		if (s || v->verdict_final)
			return s;
		vx_swap_in_loaded(v);
	}
	s = vx_load_solutions(v, err);
	if (s || v->verdict_final)
		return s;
	vx_phase(v, "load");
	if (v->live) { /* the params the program rebuilt: torch loaded while the above ran */
		if ((s = vx_live_params(v->live, v->deadline, err)))
			return s;
		v->params = &v->live->params;
		v->params_path = v->live->params_file;
		vx_progress(v, "reference: the PyTorch program is ready (%.1f s after the start)",
		            json_real_value(json_object_get(v->live->info, "ready_s")));
		vx_phase(v, "reference");
	}
	json_t *peaks;
	if ((s = measure_peaks(v, &peaks, err)))
		return s;
	s = vx_run_sets(v, peaks, err);
	json_decref(peaks);
	return s;
}

/* What a request may not ask for, refused before anything is loaded. */
static st_status check_request(const char *solution, const st_verify_opts *o, st_err *err)
{
	if (strcmp(o->backend, "cuda") && strcmp(o->backend, "host"))
		return st_err_set(err, ST_E_INVALID, "unknown backend '%s' (known: cuda, host)",
		                  o->backend);
	if (o->arch && st_arch_valid(o->arch) != 0)
		return st_err_set(err, ST_E_INVALID, "unknown arch '%s' (expected sm_<NN>[a|f], e.g. "
		                  "sm_90a)", o->arch);
	if (o->seeds < 1 || o->seeds > 100)
		return st_err_set(err, ST_E_INVALID, "seeds must be between 1 and 100");
	st_status s = vx_check_sets_option(o->sets, err);
	if (s)
		return s;
	if (st_dir_exists(solution)) /* a serve or queue request is not checked by the CLI */
		return st_err_set(err, ST_E_INVALID, "%s: is a directory, not a solution file", solution);
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
	return ST_OK;
}

/* The bound on the whole verify, from the task and the options alone (docs/architecture.md):
 * compiling, starting the runners, the device's peaks where they are not cached yet, and per
 * size set that runs a generous count of requests (setup, every seed's run and fetch, the
 * determinism and metamorphic re-runs, the audit, teardown) each at --timeout, plus timing, which
 * the stop rule caps on the parent's own clock. Whatever the candidate does, its runners are
 * killed and the verify answers by then. */
static void set_deadline(vctx *v)
{
	const st_verify_opts *o = v->o;
	const st_size_set *sets[64];
	int n_sets = st_task_size_sets(v->task, sets, 64), running = 0;
	for (int k = 0; k < n_sets; k++) {
		int timed;
		running += vx_set_runs(v, sets[k], &timed);
	}
	double per_set = (2.0 * (v->stored ? v->task->n_data_seeds : o->seeds) + 12) * o->timeout_s;
	/* A live reference: torch's start and the model's build, then one draw per seed. */
	double live = v->live ? 300 + (v->task->n_data_seeds + 1) * o->timeout_s : 0;
	double timing = o->timing ? MAX_SOLS * (3 * o->stop.max_wall_ms / 1e3 + 2 * o->timeout_s) : 0;
	double bound = o->compile_timeout_s + 120 + (o->timing || o->profile ? 600 : 0) +
	               running * per_set + timing + live + 30;
	v->deadline = v->t_start + bound;
	json_object_set_new(v->verdict, "deadline_s", json_real(bound));
}

static void init_ctx(vctx *v, const st_task *task, const st_verify_opts *o,
                     const st_verify_slot *slot, const char *solution,
                     const st_safetensors *params, const char *params_path, vx_live *live)
{
	static const st_verify_slot alone; /* a lone verify: nothing shared, nothing said */
	memset(v, 0, sizeof *v);
	v->slot = slot ? slot : &alone;
	v->params = params;
	v->params_path = params_path;
	v->stored = task->n_data_seeds > 0;
	v->live = live;
	v->task = task;
	v->o = o;
	v->expert = -1;
	v->calib = -1;
	v->seed_state = o->seed;
	v->t_start = v->t_mark = st_now_s();
	v->phases = json_object();
	v->gpu_waits = json_object();
	v->runner_ms = json_object();
	v->gpu.lock = v->slot->gpu_lock;
	v->gpu.alone = v->slot->gpu_alone;
	v->gpu.holds = v->slot->gpu_lock ? json_array() : NULL;
	v->gpu_file.fd = v->gpu_file.turnstile = -1;
	/* Comparing is the correctness phase's main cost on large outputs, and the runners wait. */
	v->threads = o->threads > 0 ? o->threads : st_cpus_share(1, 16);
	v->verdict = json_pack("{s:s,s:s,s:s,s:s}", "status", "ok", "reason", "", "task", task->id,
	                       "solution", solution);
	json_object_set_new(v->verdict, "backend", json_string(o->backend));
	v->correctness = json_array();
	v->flags = json_array();
	/* The import found an output no tolerance can tell from a trivial answer (scripts/kb_tol.py):
	 * every verdict of the task says so. */
	if (json_object_size(json_object_get(json_object_get(task->source, "tol_audit"),
	                                     "degenerate")) > 0)
		vx_flag(v, "degenerate_task");
	set_deadline(v);
}

st_status st_verify(const char *task_dir, const char *solution, const st_verify_opts *o,
                    const st_verify_slot *slot, json_t **verdict, st_err *err)
{
	return vx_verify(task_dir, solution, o, slot, 0, verdict, err);
}

st_status vx_verify(const char *task_dir, const char *solution, const st_verify_opts *o,
                    const st_verify_slot *slot, int under_ncu, json_t **verdict, st_err *err)
{
	*verdict = NULL;
	st_status s = check_request(solution, o, err);
	if (s)
		return s;
	st_task task;
	s = st_task_load(task_dir, &task, err);
	if (!s && (s = st_admit_verify(&task, o, NULL, err))) /* before anything is mapped */
		st_task_free(&task);
	if (s)
		return s;
	st_safetensors params;
	memset(&params, 0, sizeof params);
	vx_live live_ref, *live = NULL;
	const char *params_path = NULL;
	s = open_data(&task, o, slot, &params, &params_path, &live_ref, &live, err);
	if (s) {
		st_task_free(&task);
		return s;
	}
	vctx v;
	init_ctx(&v, &task, o, slot, solution, params_path ? &params : NULL, params_path, live);
	v.under_ncu = under_ncu;

	s = pipeline(&v, solution, err);
	if (v.under_ncu && v.cand >= 0 && v.sols[v.cand].started)
		json_object_set_new(v.verdict, "ncu", vx_ncu_collect(&v.sols[v.cand].runner));
	vx_release_runners(&v, s);
	st_gpu_flock_close(&v.gpu_file);
	if (v.gpu.file_missed)
		vx_flag(&v, "gpu_lock_unavailable");
	if (live)
		json_object_set(v.verdict, "reference_runner", live->info);
	if (v.hooks_dl)
		dlclose(v.hooks_dl);
	vx_verdict_close(&v);
	if (!s && o->ncu && vx_profiling(&v) && json_object_get(v.verdict, "profile") &&
	    !strcmp(json_string_value(json_object_get(v.verdict, "status")), "ok")) {
		vx_ncu_pass(&v, task_dir, solution);
		vx_phase(&v, "ncu");
	}
	vx_verdict_finish(&v);
	if (live)
		vx_live_free(live);
	st_safetensors_close(&params);
	st_task_free(&task);
	/* An error of the harness or the task is not a verdict: what the stages wrote so far says
	 * nothing of the candidate (its status would still be the initial "ok"), and a caller that
	 * took it for one scored a candidate that was never judged (docs/verdict.md: not verdicts).
	 * Where the candidate's own failure had already decided the verdict, that verdict stands. */
	if (s == ST_E_INVALID && v.verdict_final)
		s = ST_OK;
	if (s) {
		json_decref(v.verdict);
		return s;
	}
	*verdict = v.verdict;
	return s;
}
