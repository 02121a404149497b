/* Size sets: which ones run (--sets, the timed one), and one set from setup through its seeds,
 * timing and profile to teardown. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "verify/set_select.h"
#include "verify/live_ref.h"
#include "verify/verify_int.h"

st_status vx_check_sets_option(const char *list, st_err *err)
{
	if (!list)
		return ST_OK;
	/* Every item, empty ones too: "," from an HTTP request or a queue job selects nothing. */
	for (const char *p = list;; p++) {
		size_t len = strcspn(p, ",");
		if (!len)
			return st_err_set(err, ST_E_INVALID, "empty size set name in '%s' (known: small, "
			                  "eval, hidden, hidden<N>)", list);
		if (!(len == 5 && !strncmp(p, "small", 5)) && !(len == 4 && !strncmp(p, "eval", 4)) &&
		    strncmp(p, "hidden", 6))
			return st_err_set(err, ST_E_INVALID, "unknown size set '%.*s' (known: small, eval, "
			                  "hidden, hidden<N>)", (int)len, p);
		p += len;
		if (!*p)
			return ST_OK;
	}
}

/* Does size set `set` run in this verify, and is it the timed one? */
int vx_set_runs(const vctx *v, const st_size_set *set, int *timed)
{
	return st_verify_set_runs(v->o, v->stored, set->label, timed);
}

/* The params of --params (or an imported task's) against the shapes size set `set` needs. */
static st_status check_params(vctx *v, const st_size_set *set, const layout *L, st_err *err)
{
	const st_task *t = v->task;
	for (int i = 0; v->params && i < t->n_params; i++) {
		const st_safetensor *f = st_safetensors_find(v->params, t->params[i].name);
		int same = f->ndim == t->params[i].ndim;
		for (int d = 0; same && d < f->ndim; d++)
			same = f->shape[d] == L->dims_par[i][d];
		if (!same) {
			char want[256] = "", got[256] = "";
			for (int d = 0; d < t->params[i].ndim; d++)
				snprintf(want + strlen(want), sizeof want - strlen(want), "%s%" PRId64,
				         d ? ", " : "", L->dims_par[i][d]);
			for (int d = 0; d < f->ndim; d++)
				snprintf(got + strlen(got), sizeof got - strlen(got), "%s%" PRId64, d ? ", " : "",
				         f->shape[d]);
			return st_err_set(err, ST_E_INVALID, "params %s: %s has shape [%s] in the file; "
			                  "set %s needs [%s]", v->params_path, f->name, got, set->label,
			                  want);
		}
	}
	return ST_OK;
}

/* The setup request every runner gets for size set `set` (the tensors, a fresh param seed, the
 * layout of the shared memory); takes the specs over. */
static json_t *setup_request(vctx *v, const st_size_set *set, const layout *L, json_t *params,
                             json_t *inputs, json_t *outputs)
{
	const st_task *t = v->task;
	json_t *sizes = json_array();
	for (int i = 0; i < set->n; i++)
		json_array_append_new(sizes, json_pack("[s,I]", set->names[i], (json_int_t)set->values[i]));
	json_t *req = json_pack("{s:s,s:o,s:o,s:o,s:o,s:I,s:I,s:{s:o,s:o,s:o}}", "op", "setup",
	                        "sizes", sizes, "params", params, "inputs", inputs, "outputs", outputs,
	                        "param_seed", (json_int_t)vx_next_seed(v), "shm_bytes",
	                        (json_int_t)L->total, "layout", "out0",
	                        vx_offsets_json(L->out_off[0], t->n_outputs), "out1",
	                        vx_offsets_json(L->out_off[1], t->n_outputs), "in",
	                        vx_offsets_json(L->in_off, t->n_inputs));
	if (L->dump)
		json_object_set_new(json_object_get(req, "layout"), "params",
		                    vx_offsets_json(L->par_off, t->n_params));
	if (v->params)
		json_object_set_new(json_object_get(req, "layout"), "params_in",
		                    vx_offsets_json(L->par_off, t->n_params));
	return req;
}

/* Every runner's shared memory mapped for the set (the params copied in, where they come from a
 * file) and its st_init run. */
static st_status setup_runners(vctx *v, const st_size_set *set, const layout *L, json_t *req,
                               st_err *err)
{
	const st_task *t = v->task;
	json_t *reqs[MAX_SOLS] = {0}, *reps[MAX_SOLS] = {0};
	int fds[MAX_SOLS];
	st_status s = ST_OK;
	for (int i = 0; i < v->n_sols && !s; i++) {
		fds[i] = -1;
		if (!vx_addressed(v, i) && !v->sols[i].stored)
			continue;
		s = vx_map_shm(v, &v->sols[i], L->total, err);
		if (v->sols[i].stored)
			continue; /* the stored outputs' memory: this process's alone */
		fds[i] = v->sols[i].blk.fd;
		/* what the runner maps in at once: its own share (the rest of the setup is common) */
		reqs[i] = json_copy(req);
		/* a runner the pool keeps for later verifies keeps the set's device memory too */
		if (!s && (!reqs[i] ||
		           json_object_set_new(reqs[i], "populate",
		                               json_integer((json_int_t)vx_shm_written(v, L, i))) ||
		           json_object_set_new(reqs[i], "keep", json_boolean(vx_poolable(v, i)))))
			s = st_err_set(err, ST_E_NOMEM, "out of memory for the setup request");
		for (int j = 0; !s && v->params && j < t->n_params; j++)
			memcpy(v->sols[i].shm + L->par_off[j],
			       st_safetensors_find(v->params, t->params[j].name)->data, L->par_bytes[j]);
	}
	char what[128];
	snprintf(what, sizeof what, "st_init on set %s", set->label);
	if (!s)
		s = vx_broadcast(v, reqs, fds, what, v->o->timeout_s, reps, err);
	vx_free_reps(reps, v->n_sols);
	for (int i = 0; i < v->n_sols; i++)
		json_decref(reqs[i]);
	return s;
}

/* On the timed set: timing, the audit of timed calls, the timing verdict and the profile, the
 * GPU held alone while they measure. `s`: the set's status so far, returned updated. */
static st_status measure_set(vctx *v, const st_size_set *set, const layout *L, int timed,
                             json_t *peaks, st_status s, st_err *err)
{
	int measuring = timed && (v->o->timing || vx_profiling(v));
	/* The live reference draws its last seed now: its GPU work is never beside a measurement. */
	if (!s && measuring && v->live)
		s = vx_live_settle(v->live, v->deadline, err);
	if (measuring)
		st_gpu_hold_exclusive(&v->gpu);
	if (!s && timed && v->o->timing && vx_usable(v, v->cand))
		s = vx_time_all(v, set, err);
	/* Before the parent's clock charges or condemns anything, the candidate and its baseline
	 * are timed again, alone on the GPU (clock_bound.h): a host busy through one round may
	 * not be through the next. */
	if (!s && timed && v->o->timing && vx_usable(v, v->cand) && vx_clock_disputed(v)) {
		v->clock_confirmed = 1;
		s = vx_time_confirm(v, err);
	}
	if (timed)
		vx_phase(v, "timing");
	/* The audit of timed calls (a run of the reference, then a comparison on the CPU) measures
	 * nothing: another verify measures meanwhile, unless a profile is still to be taken. */
	if (measuring && !vx_profiling(v))
		st_gpu_hold_release(&v->gpu);
	if (!s && timed && v->o->timing && vx_usable(v, v->cand)) {
		s = vx_audit(v, L, set, err);
		vx_phase(v, "audit");
	}
	if (!s && timed && v->o->timing && vx_usable(v, v->cand))
		vx_timing_verdict(v, set, peaks);
	if (timed)
		vx_phase(v, "timing");
	if (!s && timed && vx_profiling(v) && vx_usable(v, v->cand) && !v->verdict_final) {
		s = vx_profile_candidate(v, set, peaks, err);
		vx_phase(v, "profile");
	}
	if (measuring)
		st_gpu_hold_release(&v->gpu);
	return s;
}

/* The runners free the set's device memory; the shared memory stays mapped for the next set. */
static st_status teardown_set(vctx *v, st_status s, st_err *err)
{
	json_t *reqs[MAX_SOLS] = {0}, *reps[MAX_SOLS] = {0};
	json_t *td = json_pack("{s:s}", "op", "teardown");
	for (int i = 0; i < v->n_sols; i++)
		reqs[i] = vx_addressed(v, i) ? td : NULL;
	if (!s)
		s = vx_broadcast(v, reqs, NULL, "st_free", v->o->timeout_s, reps, err);
	vx_free_reps(reps, v->n_sols);
	json_decref(td);
	for (int i = 0; i < v->n_sols; i++)
		vx_unmap_shm(&v->sols[i]);
	vx_phase(v, "teardown");
	return s;
}

static st_status run_set(vctx *v, const st_size_set *set, int timed, json_t *peaks, st_err *err)
{
	const st_task *t = v->task;
	layout L;
	json_t *params, *inputs, *outputs;
	st_status s = vx_plan_set(v, set, timed, &L, &params, &inputs, &outputs, err);
	if (s)
		return s;
	if ((s = check_params(v, set, &L, err))) {
		json_decref(params);
		json_decref(inputs);
		json_decref(outputs);
		return s;
	}
	json_t *req = setup_request(v, set, &L, params, inputs, outputs);
	s = setup_runners(v, set, &L, req, err);
	json_decref(req);
	vx_phase(v, "setup");
	/* An imported task runs every seed it stored. */
	int seeds = v->stored ? t->n_data_seeds : v->o->seeds;
	for (int k = 0; k < seeds && !s && vx_usable(v, v->cand); k++) {
		s = vx_run_seed(v, &L, set, k, err);
		if (!s)
			vx_progress(v, "set %-8s seed %d/%d %s", set->label, k + 1, seeds,
			            v->verdict_final ? "FAILED" : "ok");
	}
	vx_phase(v, "correctness");
	s = measure_set(v, set, &L, timed, peaks, s, err);
	return teardown_set(v, s, err);
}

/* Every size set that runs in this verify, in the task's order, while the candidate is still
 * being judged; at least one must be the timed one where timing is asked for. */
st_status vx_run_sets(vctx *v, json_t *peaks, st_err *err)
{
	st_status s = ST_OK;
	const st_size_set *sets[64];
	int n_sets = st_task_size_sets(v->task, sets, 64);
	int timed_any = 0;
	for (int k = 0; k < n_sets && !s && vx_usable(v, v->cand); k++) {
		int timed;
		if (!vx_set_runs(v, sets[k], &timed))
			continue;
		timed_any |= timed;
		v->set = sets[k];
		s = run_set(v, sets[k], timed, peaks, err);
		v->set = NULL;
	}
	if (!s && v->o->timing && !timed_any && !v->verdict_final)
		s = st_err_set(err, ST_E_INVALID, "no size set named '%s' to time",
		               st_verify_time_set(v->o, v->stored));
	return s;
}
