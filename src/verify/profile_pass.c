/* The candidate's profile: one run under CUPTI on the timed set, and with --ncu a second verify
 * under Nsight Compute whose kernels join that profile. */
#include <stdlib.h>
#include <string.h>

#include "profile/ncu.h"
#include "profile/profile_report.h"
#include "profile/timeline.h"
#include "verify/reply.h"
#include "verify/sol_floor.h"
#include "verify/verify_int.h"

/* One st_run of the candidate under CUPTI, on the timed set, turned into the verdict's "profile".
 * A profiler that cannot run here (no CUPTI, no permission) is said in the verdict; a solution
 * that crashes or hangs under it gets its verdict like anywhere else. */
st_status vx_profile_candidate(vctx *v, const st_size_set *set, const json_t *peaks,
                               st_err *err)
{
	sol *c = &v->sols[v->cand];
	vx_progress(v, "profile on set %s", set->label);
	json_t *req = json_pack("{s:s}", "op", "profile"), *rep = NULL;
	st_status s = st_runner_call(&c->runner, req, -1, &rep,
	                             vx_time_left(v, v->o->timeout_s), err);
	json_decref(req);
	const char *cls = st_reply_string(rep, "class");
	if (!s && !st_reply_ok(rep) && cls && !strcmp(cls, "profiler")) {
		json_object_set_new(v->verdict, "profile",
		                    json_pack("{s:s?}", "error", st_reply_string(rep, "reason")));
		json_decref(rep);
		return ST_OK;
	}
	if (s || !st_reply_ok(rep)) {
		s = vx_runner_failed(v, v->cand, "profile", s, rep, err);
		json_decref(rep);
		return s;
	}
	st_profile_inputs in = {.peaks = peaks, .unit = v->task->cost_unit,
	                        .trace_path = v->o->trace_path, .title = c->path};
	st_cost_at cost;
	st_err e;
	if (!st_cost_eval(v->task, set, &cost, &e)) {
		in.flops = cost.flops;
		in.bytes = cost.bytes;
	}
	if (c->n_samples) {
		st_stats st;
		st_stats_compute(c->samples, c->n_samples, &st);
		in.time_ms = st.median;
	}
	json_t *prof = NULL;
	const json_t *timeline;
	char why[128];
	/* No timeline object: NULL, which st_profile_report refuses with its own message. */
	st_reply_profile(rep, &timeline, why, sizeof why);
	s = st_profile_report(timeline, &in, &prof, err);
	json_decref(rep);
	if (s == ST_E_IO)
		return s; /* the trace file the user named cannot be written */
	if (s)
		prof = json_pack("{s:s}", "error", err->msg);
	json_object_set_new(v->verdict, "profile", prof);
	return ST_OK;
}

/* The report of a candidate runner started under ncu: the kernels of one st_run (the runner
 * marks only its first), launches of one kernel with one launch shape merged into a row with
 * their count and total duration, DRAM bytes and FLOPs (the other figures are the first
 * launch's), longest first. */
json_t *vx_ncu_collect(st_runner *r)
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
void vx_ncu_pass(vctx *v, const char *task_dir, const char *solution)
{
	st_verify_opts o = *v->o;
	o.ncu = 0;
	o.profile = 0;
	o.timing = 0;
	o.keep_samples = 0;
	o.seeds = 1;
	o.sets = json_string_value(json_object_get(json_object_get(v->verdict, "timing"), "set"));
	if (!o.sets)
		o.sets = o.time_set ? o.time_set : "eval";
	vx_progress(v, "Nsight Compute on the candidate (set %s, one seed, not sandboxed)", o.sets);
	json_t *nv = NULL;
	st_err e;
	st_status s = vx_verify(task_dir, solution, &o, v->slot, 1, &nv, &e);
	json_t *prof = json_object_get(v->verdict, "profile");
	json_t *ncu = nv ? json_object_get(nv, "ncu") : NULL;
	if (ncu)
		json_object_set(prof, "ncu", ncu);
	else
		json_object_set_new(prof, "ncu", json_pack("{s:s}", "error", s ? e.msg : "no report"));
	ncu_findings(prof);
	json_decref(nv);
}
