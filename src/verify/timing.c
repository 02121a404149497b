/* Timing on the timed set: batches of timed calls of every solution, interleaved, each batch's
 * parent-side overhead kept for the timing checks, until each meets the stop rule. */
#include <stdint.h>

#include "common/clock.h"
#include "common/cpus.h"
#include "verify/reply.h"
#include "verify/verify_int.h"

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
		json_object_set_new(req, "seed", json_integer((json_int_t)vx_next_seed(v)));
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
	if (s || !st_reply_ok(rep)) {
		s = vx_runner_failed(v, i, "timing", s, rep, err);
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

json_t *vx_raw_samples(const sol *so)
{
	json_t *a = json_array();
	for (int k = 0; k < so->n_samples; k++) {
		const st_sample *x = &so->samples[k];
		json_array_append_new(a, json_pack("[f,f,i,b]", x->ms, x->wall_ms, x->sm_mhz,
		                                   x->throttled));
	}
	return a;
}

json_t *vx_stats_json(const st_stats *s)
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
st_status vx_time_all(vctx *v, const st_size_set *set, st_err *err)
{
	int order[MAX_SOLS], n = 0;
	int cand_first[MAX_SOLS] = {v->cand, v->ref, v->expert, v->calib};
	for (int k = 0; k < MAX_SOLS; k++) {
		int i = cand_first[k], dup = 0;
		for (int m = 0; m < n; m++)
			dup |= order[m] == i;
		if (i >= 0 && !dup && vx_addressed(v, i))
			order[n++] = i;
	}
	int shown = n - (v->calib >= 0 && vx_addressed(v, v->calib));
	vx_progress(v, "timing on set %s (%d solution%s, interleaved%s)", set->label, shown,
	            shown > 1 ? "s" : "", shown < n ? ", beside the harness's null calls" : "");
	for (int m = 0; m < n; m++) /* warm-up: caches, clocks, lazy module loading */
		if (vx_addressed(v, order[m])) {
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
			if (so->timing_done || !vx_addressed(v, order[m]))
				continue;
			st_stats st;
			st_stats_compute(so->samples, so->n_samples, &st);
			const sol *c = &v->sols[v->cand];
			if (so->calib ? c->timing_done || !vx_usable(v, v->cand) || so->n_gaps >= CALIB_BATCHES
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
