/* The correctness checks of one seed: every solution's outputs judged against the reference's
 * (or the task's validator), and for the candidate the second run on other buffers, the task's
 * metamorphic check and --dump. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "task/compare.h"
#include "task/dtype.h"
#include "verify/reply.h"
#include "verify/verify_int.h"

/* Judge the outputs in `so`'s slot against the reference's slot 0; append to `outs`. 1 = pass. */
static int judge_outputs(vctx *v, const layout *L, const st_size_set *set, int i, int slot,
                         json_t *outs, char *why, size_t whylen)
{
	const st_task *t = v->task;
	st_tensor got[MAX_TENSORS], want[MAX_TENSORS], in[MAX_TENSORS];
	st_gpu_hold_idle(&v->gpu); /* comparing is the CPU's work */
	vx_views(t, L, v->sols[i].shm, slot, 0, got);
	vx_views(t, L, v->sols[v->ref].shm, 0, 0, want);
	if (t->validator && v->validate) {
		vx_views(t, L, v->sols[v->ref].shm, 0, 1, in);
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
int vx_judge(vctx *v, const layout *L, const st_size_set *set, int i, int slot, json_t *outs,
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
	st_gpu_hold_for(&v->gpu, on_gpu);
	st_status s = st_runner_call(&v->sols[v->cand].runner, req, -1, &rep,
	                             vx_time_left(v, v->o->timeout_s), &e);
	json_decref(req);
	*ran = !s && st_reply_ok(rep);
	if (!*ran) {
		char phase[160];
		snprintf(phase, sizeof phase, "set %s, %s", set->label, what);
		s = vx_runner_failed(v, v->cand, phase, s, rep, &e);
		if (s)
			*err = e;
	}
	json_decref(rep);
	return s;
}

st_status vx_rerun_candidate(vctx *v, json_t *req, const st_size_set *set, const char *what,
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
	st_status s = vx_rerun_candidate(v, run, set, what, ran, err);
	if (s || !*ran)
		return s;
	return rerun_candidate_on(v, vx_fetch_req(set_index, slot), set, what, ran, 0, err);
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
	uint64_t pseed = vx_next_seed(v);
	/* Copies of both: the candidate's runner uses its shared input area as the host copy of the
	 * changed inputs, and the candidate may be the reference. */
	vx_views(t, L, v->sols[v->ref].shm, 0, 1, in);
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
	vx_views(t, L, c->shm, 0, 0, got);
	vx_views(t, L, c->shm, 1, 0, got2);
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
		vx_fail(v, "incorrect", "set %s: the run with changed inputs (the task's metamorphic "
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
		vx_progress(v, "--dump: the candidate did not run on set %s; nothing written", set->label);
		return ST_OK;
	}
	int n = t->n_params + t->n_inputs + t->n_outputs;
	st_safetensor *all = calloc((size_t)n + 1, sizeof *all);
	if (!all)
		return st_err_set(err, ST_E_NOMEM, "out of memory for --dump");
	st_tensor in[MAX_TENSORS], out[MAX_TENSORS];
	vx_views(t, L, v->sols[v->ref].shm, 0, 1, in);
	vx_views(t, L, c->shm, 0, 0, out);
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
	vx_progress(v, "wrote params, inputs and outputs of set %s, seed 1 to %s", set->label,
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
	vx_stored_put_inputs(v, L, v->cand);
	st_status s = rerun_and_fetch(v, json_pack("{s:s,s:I,s:i,s:i,s:b}", "op", "run", "seed",
	                                           (json_int_t)seed, "set", 1, "slot", 1, "given",
	                                           v->stored),
	                              1, 1, set, "seed 1 again", &ran, err);
	if (s || !ran)
		return s;
	/* The same bits as the first run: the same judgement, which run_seed has made already. */
	st_tensor a[MAX_TENSORS], b[MAX_TENSORS];
	vx_views(v->task, L, c->shm, 0, 0, a);
	vx_views(v->task, L, c->shm, 1, 0, b);
	int same = 1;
	for (int j = 0; j < v->task->n_outputs && same; j++) {
		int64_t first;
		same = st_compare_bitwise(&a[j], &b[j], v->threads, &first);
	}
	if (same)
		return ST_OK;
	vx_flag(v, "nondeterministic");
	json_t *outs = json_array();
	char why[1024] = "";
	if (!vx_judge(v, L, set, v->cand, 1, outs, why, sizeof why))
		vx_fail(v, "incorrect", "set %s: a second run of seed 1 on other buffers gave a different "
		        "answer (race, stale or uninitialised reads?): %s", set->label, why);
	json_decref(outs);
	return ST_OK;
}

/* The ABI's st_run reads in[] and writes out[]: a candidate that wrote into an input fails here,
 * whatever its answer, with the input named. Where the inputs are made fresh for every call such
 * a candidate would pass unnoticed; where a task's host generator makes them they are kept
 * through timing, and it would compute its later timed calls on what it wrote and be judged on
 * those. */
static void inputs_read_only(vctx *v, const st_size_set *set, int k, const json_t *rep)
{
	int w = st_reply_inputs_written(rep, v->task->n_inputs);
	if (w >= 0)
		vx_fail(v, "incorrect", "set %s, seed %d: st_run wrote into its input '%s'; inputs are "
		        "read-only (stitch/solution.h: st_run reads in[] and writes out[]; use a "
		        "workspace of its own from st_init for scratch)", set->label, k + 1,
		        v->task->inputs[w].name);
}

st_status vx_run_seed(vctx *v, const layout *L, const st_size_set *set, int k, st_err *err)
{
	uint64_t seed = vx_next_seed(v);
	int need_inputs = v->task->validator != NULL || v->perturb || v->o->dump_path;
	st_status s = v->stored ? vx_stored_load(v, L, k, err) : ST_OK;
	if (s)
		return s;
	json_t *reqs[MAX_SOLS] = {0}, *reps[MAX_SOLS] = {0};
	/* The runs share the GPU; their outputs are copied to the host after, by a fetch that does
	 * not hold it: at an eval size the copies take longer than the runs, and another verify
	 * measures meanwhile. */
	for (int i = 0; i < v->n_sols; i++)
		reqs[i] = !vx_runs_seed(v, i, k) ? NULL
		        : json_pack("{s:s,s:I,s:i,s:i,s:b,s:b,s:b,s:b}", "op", "run", "seed",
		                    (json_int_t)seed, "set", k % 2, "slot", 0, "dump_inputs",
		                    need_inputs && i == v->ref, "given", v->stored, "fetch", 0,
		                    "check_inputs", i == v->cand && i != v->ref);
	char phase[128];
	snprintf(phase, sizeof phase, "set %s, seed %d", set->label, k + 1);
	s = vx_broadcast(v, reqs, NULL, phase, v->o->timeout_s, reps, err);
	if (!s && vx_usable(v, v->cand))
		inputs_read_only(v, set, k, reps[v->cand]);
	vx_free_reps(reps, v->n_sols);
	for (int i = 0; i < v->n_sols; i++) {
		json_decref(reqs[i]);
		reqs[i] = !s && vx_runs_seed(v, i, k) ? vx_fetch_req(k % 2, 0) : NULL;
	}
	if (!s)
		s = vx_broadcast_on(v, reqs, NULL, phase, v->o->timeout_s, reps, 0, err);
	vx_free_reps(reps, v->n_sols);
	for (int i = 0; i < v->n_sols; i++)
		json_decref(reqs[i]);
	if (s)
		return s;

	json_t *cand_entry = NULL; /* borrowed from v->correctness */
	/* The reference must satisfy a semantic validator too: otherwise the task is broken. */
	if (v->validate && v->task->validator) {
		json_t *outs = json_array();
		char why[1024] = "";
		int ok = vx_judge(v, L, set, v->ref, 0, outs, why, sizeof why);
		json_decref(outs);
		if (!ok)
			return st_err_set(err, ST_E_SYSTEM, "the reference fails the task's validator (%s)",
			                  why);
	}
	for (int i = 0; i < v->n_sols; i++) {
		if ((i == v->ref && i != v->cand) || !vx_usable(v, i) || !vx_runs_seed(v, i, k))
			continue;
		json_t *outs = json_array();
		char why[1024] = "";
		int ok = vx_judge(v, L, set, i, 0, outs, why, sizeof why);
		if (i == v->cand) {
			cand_entry = json_pack("{s:s,s:o,s:i,s:b,s:o}", "set", set->label, "sizes",
			                       vx_sizes_json(set), "seed_index", k, "ok", ok, "outputs", outs);
			json_array_append_new(v->correctness, cand_entry);
		} else
			json_decref(outs);
		if (ok)
			continue;
		if (i == v->cand) {
			vx_fail(v, "incorrect", "set %s, seed %d: %s", set->label, k + 1, why);
		} else {
			v->sols[i].failed = 1;
			vx_flag(v, "expert_incorrect");
			char buf[1200];
			snprintf(buf, sizeof buf, "set %s, seed %d: %s", set->label, k + 1, why);
			json_object_set_new(v->verdict, "expert_failure", json_string(buf));
		}
	}
	/* Before the metamorphic check, whose run overwrites the inputs when the candidate is the
	 * reference. */
	if (k == 0 && L->dump && (s = write_dump(v, L, set, err)))
		return s;
	if (k != 0 || !vx_usable(v, v->cand))
		return ST_OK;
	if (v->cand != v->ref) {
		s = determinism_check(v, L, set, seed, err);
		if (s)
			return s;
	}
	if (v->perturb && vx_usable(v, v->cand))
		return perturbed_check(v, L, set, seed, cand_entry, err);
	return ST_OK;
}
