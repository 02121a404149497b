/* The timing part of the verdict: each solution's statistics, the checks that the candidate's
 * timer saw all its work (host wall time, the parent's own clock), speedups and the roofline. */
#include <string.h>

#include "task/vendor.h"
#include "verify/batch_mean.h"
#include "verify/peaks.h"
#include "verify/sol_floor.h"
#include "verify/verify_int.h"

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
		vx_flag(v, "baselines_from_other_device");
}

/* The "best" bar: the faster of the expert, timed here, and the vendor's (PyTorch's) figure for
 * this GPU and size set (task/vendor.h), timed by scripts/vendor_baselines.py in another run. Its
 * absence is no failure: the bar is then the expert and `best_note` says why. Imported tasks
 * have their own PyTorch figures (eager, compile) and no expert: no bar here. */
static void best_bar(vctx *v, const st_size_set *set, double cand_ms, double expert_ms,
                     json_t *base, json_t *speed)
{
	const st_task *t = v->task;
	if (t->n_data_seeds)
		return;
	const char *dev = json_string_value(json_object_get(json_object_get(v->verdict, "device"),
	                                                    "device"));
	st_vendor vd;
	st_err e;
	char note[768];
	if (st_vendor_lookup(NULL, dev, t->id, set->label, &vd, &e)) {
		snprintf(note, sizeof note, "vendor figures unreadable: %.600s", e.msg);
		vd.ms = 0;
	} else {
		snprintf(note, sizeof note, "%s", vd.note);
	}
	if (vd.ms > 0) {
		json_object_set_new(base, "vendor_ms", json_real(vd.ms));
		json_object_set_new(base, "vendor_op", json_string(vd.op));
		json_object_set_new(base, "vendor_backend", json_string(vd.backend));
		if (cand_ms > 0)
			json_object_set_new(speed, "vs_vendor", json_real(vd.ms / cand_ms));
	}
	int vendor = vd.ms > 0 && (expert_ms <= 0 || vd.ms < expert_ms);
	double best = vendor ? vd.ms : expert_ms;
	if (best <= 0)
		return;
	if (vd.ms > 0 && !vendor)
		snprintf(note, sizeof note, "the expert (%.4f ms) is faster than the vendor's %s %s "
		         "(%.4f ms)", expert_ms, vd.op, vd.backend, vd.ms);
	json_object_set_new(base, "best_ms", json_real(best));
	json_object_set_new(base, "best", json_string(vendor ? "vendor" : "expert"));
	if (!vendor)
		json_object_set_new(base, "best_note", json_string(note));
	if (cand_ms > 0)
		json_object_set_new(speed, "vs_best", json_real(best / cand_ms));
}

/* Is the candidate's time weighed at all: an untrusted candidate, not the reference itself. */
static int weighed(const vctx *v)
{
	return v->cand != v->ref && !v->sols[v->cand].trusted;
}

void vx_round_measure(const vctx *v, int from, double ref_median, vx_round *r)
{
	const sol *c = &v->sols[v->cand], *ref = &v->sols[v->ref];
	*r = (vx_round){0};
	if (!weighed(v) || from < 0 || from >= c->n_samples)
		return;
	st_stats st;
	st_stats_compute(c->samples + from, c->n_samples - from, &st);
	r->t = (st_round_time){.samples = c->n_samples - from, .median_ms = st.median,
	                       .floor_ms = st.median};
	/* The front-loading bound (batch_mean.h), against the reference's own skew where the
	 * reference is the baseline timed beside it. */
	double base_median = vx_held_to(v) == v->ref ? ref_median : 0;
	if (c->n_recs) {
		st_batch_mean_compute(c->recs, c->n_recs, ref->recs, base_median > 0 ? ref->n_recs : 0,
		                      base_median, &r->means);
		r->binds = r->means.batches && st_batch_mean_binds(&r->means, st.median);
		if (r->binds)
			r->t.floor_ms = r->means.bound_ms;
	}
	/* The parent's own clock (clock_bound.h) */
	vx_clock_bound(v, &r->bound);
	double share = vx_harness_share(v);
	r->t.gross = st_clock_bound_gross(&r->bound, st.median, share);
	r->t.charge_ms = st_clock_bound_charge(&r->bound, st.median, share);
}

int vx_clock_disputed(vctx *v)
{
	const sol *ref = &v->sols[v->ref];
	st_stats st;
	st_stats_compute(ref->samples, ref->n_samples, &st);
	vx_round_measure(v, 0, st.median, &v->main_round);
	return v->main_round.t.gross || v->main_round.t.charge_ms > 0;
}

/* A round's parent-clock figures for the verdict. */
static json_t *bound_json(const st_clock_bound *b, const st_round_time *t)
{
	json_t *j = json_pack("{s:f,s:f,s:f,s:f,s:i,s:f,s:f,s:i,s:f}", "excess_ms", b->excess_ms,
	                      "noise_ms", b->noise_ms, "harness_ms", b->harness_ms, "rtt_ms", b->rtt_ms,
	                      "batches", b->batches, "stretch", b->stretch, "charge_ms", t->charge_ms,
	                      "samples", t->samples, "median_ms", t->median_ms);
	if (b->cpu_batches)
		json_object_set_new(j, "cpu", json_pack("{s:f,s:f,s:f,s:f}", "excess_ms", b->cpu_excess_ms,
		                                        "noise_ms", b->cpu_noise_ms, "harness_ms",
		                                        b->cpu_harness_ms, "stretch", b->cpu_stretch));
	return j;
}

/* The front-loading bound of a round (batch_mean.h) for the verdict. */
static json_t *means_json(const vx_round *r)
{
	const st_batch_mean *m = &r->means;
	return json_pack("{s:f,s:f,s:f,s:f,s:i,s:b}", "candidate_ms", m->cand_ms, "baseline_ms",
	                 m->base_ms, "skew", m->skew, "bound_ms", m->bound_ms, "batches", m->batches,
	                 "binds", r->binds);
}

/* The main round's figures, and the confirmation's inside them where there was one. */
static void rounds_json(vctx *v, json_t *timing, const vx_round *mr, const vx_round *cr)
{
	const sol *c = &v->sols[v->cand], *h = &v->sols[vx_held_to(v)];
	if (mr->means.batches)
		json_object_set_new(timing, "batch_means", means_json(mr));
	if (!mr->bound.batches)
		return;
	json_t *pc = bound_json(&mr->bound, &mr->t);
	json_object_set_new(pc, "confirmed", json_boolean(v->clock_confirmed));
	json_object_set_new(pc, "cpu_wait_ms", json_real(c->cpu_wait_ms));
	json_object_set_new(pc, "baseline_cpu_wait_ms", json_real(h->cpu_wait_ms));
	if (v->clock_confirmed && cr->bound.batches) {
		json_t *cj = bound_json(&cr->bound, &cr->t);
		if (cr->means.batches)
			json_object_set_new(cj, "batch_means", means_json(cr));
		json_object_set_new(pc, "confirmation", cj);
	}
	json_object_set_new(timing, "parent_clock", pc);
}

/* The candidate's time (docs/architecture.md, "the parent's clock decides"): at least what its
 * batches' mean call says (front-loading), plus what the parent's clock saw beyond its reports,
 * round by round, the confirmation able to take back the main round's charge
 * (st_round_time_combine). Only reports that leave out most of the time in both rounds are
 * called tampered with: a busy host can make a verify slower, never a cheat of an honest
 * candidate. Returns the time, `reported` where nothing is weighed. */
static double candidate_time(vctx *v, json_t *timing, double reported, double ref_median)
{
	if (!weighed(v) || v->verdict_final)
		return reported;
	vx_round mr, cr = {0};
	if (v->clock_confirmed) {
		mr = v->main_round;
		vx_round_measure(v, v->confirm_from, ref_median, &cr);
	} else {
		vx_round_measure(v, 0, ref_median, &mr);
	}
	rounds_json(v, timing, &mr, &cr);
	if (mr.t.gross && cr.t.gross) {
		const st_clock_bound *b = &cr.bound;
		const sol *h = &v->sols[vx_held_to(v)];
		int by_cpu = b->cpu_batches && b->cpu_excess_ms > b->excess_ms;
		vx_fail(v, "hacking", "the parent's clock saw %.4f ms per timed call beyond what the "
		        "runner reported (%.4f ms) and the harness's own work (the %s's: %.4f ms)%s, in "
		        "the timing and again when timed alone to confirm: the runner's timing was "
		        "tampered with from inside", by_cpu ? b->cpu_excess_ms : b->excess_ms,
		        cr.t.median_ms, h->role, by_cpu ? b->cpu_harness_ms : b->harness_ms,
		        by_cpu ? " in the runner's CPU time as the kernel counted it" : "");
		return mr.t.floor_ms;
	}
	double t = st_round_time_combine(&mr.t, v->clock_confirmed ? &cr.t : NULL);
	if (mr.binds || (cr.binds && t > mr.t.floor_ms))
		vx_flag(v, "time_from_batch_means");
	if (t > mr.t.floor_ms && (mr.t.charge_ms > 0 || cr.t.charge_ms > 0))
		vx_flag(v, "time_from_parent_clock");
	return t;
}

/* The speed of light: the task's cost at this set's sizes against the device's peaks, where both
 * are known, judged by the roof that binds (sol_floor.c); `c` is the candidate's median and med[]
 * every solution's. */
static void sol_json(vctx *v, const st_size_set *set, json_t *peaks, double c, const double *med)
{
	st_cost_at cost;
	st_sol_floor f;
	st_err e;
	if (!peaks || !(c > 0) || st_cost_eval(v->task, set, &cost, &e))
		return;
	st_sol_floor_compute(peaks, &cost, &f);
	json_t *sol_j = json_pack("{s:f,s:f,s:s,s:f}", "flops", cost.flops, "bytes", cost.bytes,
	                          "unit", cost.unit ? cost.unit : "", "floor_ms", f.floor_ms);
	if (cost.l2_bytes >= 0)
		json_object_set_new(sol_j, "l2_bytes", json_real(cost.l2_bytes));
	if (cost.sfu >= 0)
		json_object_set_new(sol_j, "sfu_ops", json_real(cost.sfu));
	if (cost.syncs >= 0)
		json_object_set_new(sol_j, "syncs", json_real(cost.syncs));
	if (f.roof)
		json_object_set_new(sol_j, "roof", json_string(f.roof));
	json_object_set_new(sol_j, "floors_ms", st_sol_floors_json(&f));
	if (f.floor_ms > 0) {
		json_object_set_new(sol_j, "fraction", json_real(f.floor_ms / c));
		if (med[v->ref] > 0)
			json_object_set_new(sol_j, "reference_fraction", json_real(f.floor_ms / med[v->ref]));
		if (v->expert >= 0 && med[v->expert] > 0)
			json_object_set_new(sol_j, "expert_fraction", json_real(f.floor_ms / med[v->expert]));
	}
	json_object_set_new(sol_j, "attained_tflops", json_real(cost.flops / (c * 1e-3) / 1e12));
	json_object_set_new(sol_j, "attained_gbs", json_real(cost.bytes / (c * 1e-3) / 1e9));
	json_object_set_new(sol_j, "peaks", json_incref(peaks));
	json_object_set_new(v->verdict, "sol", sol_j);
}

static json_t *quiet_json(const vx_quiet *q)
{
	return json_pack("{s:i,s:i,s:f,s:f}", "batches", q->checks, "waited", q->waits, "wait_ms",
	                 q->wait_ms, "max_wait_ms", q->max_ms);
}

/* How the baselines were kept from the candidate: the batches timed with it stopped (and seen
 * so), the neighbouring verifies' candidates stopped for every batch, and the quiet probes
 * before the baselines' batches and, after neighbours were stopped, the candidate's; a wait of
 * 10 ms or more for the GPU is a flag (work queued before a stop, or another process on the GPU:
 * the batch was timed after it, so it cost time, not accuracy). */
static void stopped_json(vctx *v, json_t *timing)
{
	if (v->stopped_batches || v->neighbour_stops)
		json_object_set_new(timing, "candidate_stopped",
		                    json_pack("{s:i,s:i,s:i}", "batches", v->stopped_batches,
		                              "seen_stopped", v->stopped_seen, "neighbours",
		                              v->neighbour_stops));
	if (v->quiet[0].checks || v->quiet[1].checks) {
		json_t *q = quiet_json(&v->quiet[0]);
		if (v->quiet[1].checks)
			json_object_set_new(q, "candidate", quiet_json(&v->quiet[1]));
		json_object_set_new(timing, "gpu_quiet", q);
	}
	if (v->quiet[0].max_ms >= 10)
		vx_flag(v, "baselines_waited_for_gpu");
	if (v->quiet[1].max_ms >= 10)
		vx_flag(v, "candidate_waited_for_gpu");
}

void vx_timing_verdict(vctx *v, const st_size_set *set, json_t *peaks)
{
	const st_task *t = v->task;
	json_t *timing = json_object();
	json_object_set_new(timing, "set", json_string(set->label));
	json_object_set_new(timing, "sizes", vx_sizes_json(set));
	double med[MAX_SOLS] = {0};
	/* Against what the candidate's timing is held: the reference, timed beside it, or for an
	 * imported task the harness's null calls (add_calib). */
	int held_to = vx_held_to(v);
	for (int i = 0; i < v->n_sols; i++) {
		if (!v->sols[i].n_samples || v->sols[i].calib)
			continue;
		st_stats st;
		st_stats_compute(v->sols[i].samples, v->sols[i].n_samples, &st);
		med[i] = st.median;
		json_t *sj = vx_stats_json(&st);
		json_object_set_new(sj, "timing_wall_ms", json_real(v->sols[i].timing_wall_ms));
		if (v->o->keep_samples)
			json_object_set_new(sj, "raw", vx_raw_samples(&v->sols[i]));
		json_object_set_new(timing, vx_role_of(v, i), sj);
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
			vx_fail(v, "hacking", "timed calls took %.4f ms to a whole-device sync but only %.4f ms "
			        "on the solution's stream (the %s: %.4f ms past its stream's end): work "
			        "runs where the timer cannot see it", st.wall_median, st.median,
			        v->sols[held_to].role, ref_beyond);
	}
	stopped_json(v, timing);
	double reported = med[v->cand];
	if (reported > 0)
		med[v->cand] = candidate_time(v, timing, reported, med[v->ref]);
	if (med[v->cand] != reported) {
		json_t *cj = json_object_get(timing, "candidate");
		json_object_set_new(cj, "reported_median_ms", json_real(reported));
		json_object_set_new(cj, "median_ms", json_real(med[v->cand]));
	}
	/* A solution that is both (e.g. the expert verified as a candidate) reports under each name. */
	if (v->expert >= 0 && med[v->expert] > 0 && !json_object_get(timing, "expert"))
		json_object_set(timing, "expert", json_object_get(timing, vx_role_of(v, v->expert)));
	if (med[v->ref] > 0 && !json_object_get(timing, "reference"))
		json_object_set(timing, "reference", json_object_get(timing, vx_role_of(v, v->ref)));
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
	best_bar(v, set, c, v->expert >= 0 ? med[v->expert] : 0, base, speed);
	json_object_set_new(v->verdict, "baselines", base);
	json_object_set_new(v->verdict, "speedup", speed);

	sol_json(v, set, peaks, c, med);
}
