/* Timing on the timed set: batches of timed calls of every solution, interleaved, each batch's
 * parent-side overhead kept for the timing checks, until each meets the stop rule. */
#include <stdint.h>
#include <string.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/cpus.h"
#include "common/digest.h"
#include "verify/neighbours.h"
#include "verify/reply.h"
#include "verify/verify_int.h"

/* A batch's reply that does not fit its request (other counts of samples or digests, impossible
 * figures): from the candidate, a broken protocol; from a trusted runner, a broken harness. */
static st_status bad_batch(vctx *v, int i, const char *why, st_err *err)
{
	if (i == v->cand) {
		vx_fail(v, "hacking", "timing: the runner's reply to a batch of timed calls broke the "
		        "runner protocol: %s", why);
		return ST_OK;
	}
	return st_err_set(err, ST_E_SYSTEM, "the %s's runner answered a timing batch wrongly: %s",
	                  v->sols[i].role, why);
}

/* The kernel's count of this batch's waits for a CPU, outside the calls the runner reported.
 * On a host with more runnable threads than CPUs the runner waits for one a scheduler slice at
 * a time (some ms), and so does this thread once the reply is in; a few such waits in a
 * candidate's batches and none in the reference's made an honest fast candidate look like one
 * that under-reports (two verifies in six under two busy loops on two cores). This thread's wait
 * is taken off whole (it sleeps while the runner works), the runner's in the share that fell
 * outside its timed calls, in proportion to the time spent there (a wait inside a call is in
 * what it reported). A solution cannot forge a wait to hide work: while its thread waits,
 * nothing of it runs. */
static double waits_outside(const double w[4], double took_ms, double reported)
{
	double waited = w[0] >= 0 && w[1] >= w[0] ? w[1] - w[0] : 0;
	double outside = took_ms > reported ? took_ms - reported : 0;
	double out = took_ms > 0 ? waited * outside / took_ms : 0;
	if (w[2] >= 0 && w[3] >= w[2])
		out += w[3] - w[2];
	return out < outside ? out : outside;
}

/* One read of the runner's schedstat at a batch's edge: its waits for a CPU (an untrusted
 * runner's only, waits_outside) and its time on one (where count_cpu; clock_bound.h). */
static void runner_cpu(const sol *so, int count_cpu, double *wait, double *on)
{
	double waited = -1, t = -1;
	if (!so->trusted || count_cpu)
		t = st_runner_cpu_on_ms(&so->runner, &waited);
	*wait = so->trusted ? -1 : waited;
	*on = count_cpu ? t : -1;
}

/* A batch's committed calls: each call's inputs from the batch's seed, or for a task whose host
 * generator makes them, the kept inputs of its buffer set (filled from v->fill). */
static int add_commits(const vctx *v, sol *so, uint64_t seed, int n, const uint64_t *digests)
{
	if (!vx_task_staged(v->task))
		return st_commits_add_batch(&so->commits, seed, n, digests);
	uint64_t kept[2] = {st_fill_seed(v->fill, 0), st_fill_seed(v->fill, 1)};
	return st_commits_add_kept(&so->commits, kept, n, digests);
}

/* Keep a batch's samples, its record for the parent-clock bound and its committed calls;
 * cpu_ms is the runner's time on a CPU over the batch (0 where not measured). */
static st_status keep_batch(vctx *v, int i, const json_t *rep, int n, uint64_t seed,
                            const uint64_t *digests, double took_ms, const double w[4],
                            double cpu_ms, st_err *err)
{
	sol *so = &v->sols[i];
	int before = so->n_samples;
	if (st_reply_add_samples(rep, &so->samples, &so->n_samples, &so->cap_samples) ||
	    (digests && add_commits(v, so, seed, n, digests)))
		return st_err_set(err, ST_E_NOMEM, "out of memory for timing samples");
	double reported = 0, call_cpu = 0, event = 0;
	for (int k = before; k < so->n_samples; k++) {
		reported += so->samples[k].wall_ms;
		event += so->samples[k].ms;
		call_cpu = call_cpu >= 0 && so->samples[k].cpu_ms >= 0 ? call_cpu + so->samples[k].cpu_ms
		                                                       : -1;
	}
	double waited = waits_outside(w, took_ms, reported);
	so->cpu_wait_ms += waited;
	if (so->n_recs < MAX_GAPS)
		so->recs[so->n_recs++] = (st_batch_rec){n, took_ms, reported, waited, cpu_ms, call_cpu,
		                                        event};
	so->timing_wall_ms += took_ms;
	so->n_batches++;
	return ST_OK;
}

/* This verify's own candidate's group on the neighbours' list, which it never stops (0: none). */
static pid_t own_group(const vctx *v)
{
	const sol *c = &v->sols[v->cand];
	return c->runner.neighbours ? c->runner.pid : 0;
}

/* Before a baseline's batch (or a round trip to it), the candidate's runner is stopped: a
 * candidate that kept a CPU busy, or the GPU, whenever it was not timed (a hook on the runner's
 * receive, a thread) would slow its baselines and so raise its own speedup and the harness cost
 * its batches are held to. Its next request thaws it. Stopped, nothing of it runs on a CPU or
 * launches; GPU work it queued before is waited out (wait_quiet). The candidates of the verifies
 * this one shares the GPU with (neighbours.h) are stopped before every batch, the candidate's
 * own too: one that kept the GPU busy would slow another's candidate, a lower reward for it (and
 * under a group-relative reward a higher one for the saboteur). 1 when anything was stopped. */
static int stop_others(vctx *v, int i)
{
	sol *c = &v->sols[v->cand];
	/* until resume_neighbours once the batch or round trip is over */
	int others = 0;
	if (v->slot->neighbours && !v->neighbours_held) {
		others = st_neighbours_stop(v->slot->neighbours, own_group(v));
		v->neighbours_held = 1;
		v->neighbour_stops += others;
	}
	if (i == v->cand || c->trusted || !vx_addressed(v, v->cand))
		return others > 0;
	int seen = st_runner_freeze(&c->runner);
	if (seen >= 0) {
		v->stopped_batches++;
		v->stopped_seen += seen;
	}
	return seen >= 0 || others > 0;
}

/* The neighbours stop_others stopped run again (a no-op when none is stopped). */
static void resume_neighbours(vctx *v)
{
	if (v->neighbours_held)
		st_neighbours_resume(v->slot->neighbours, own_group(v));
	v->neighbours_held = 0;
}

/* A probe over 200 us is another context's time slice (a millisecond or more), not a launch
 * (some us); three in a row under it: the GPU is this runner's. */
#define QUIET_BELOW_US 200.0
#define QUIET_RUNS 3
#define QUIET_CHUNK_S 5.0
/* After the candidate's runner is killed its context is torn down within a second or two: busy
 * longer than this, the work is another process's. */
#define QUIET_AFTER_KILL_MS 15000.0

/* How long a batch waits for the GPU before the wait is looked into: an honest runner leaves
 * nothing queued after its reply (it waits for the device before answering), and verifies of
 * this process and others take turns to measure (gpu_hold.h), so only work queued on purpose, a
 * runner that lies in its probe's reply, or another program gets this far. The request limit,
 * within 5 to 60 s. */
static double quiet_patience_ms(const vctx *v)
{
	double s = v->o->timeout_s < 5 ? 5 : v->o->timeout_s > 60 ? 60 : v->o->timeout_s;
	return s * 1e3;
}

/* One quiet probe by runner `r` (a chunk of up to 5 s): *quiet, and the ms it waited added to
 * *waited. A failure decides the verdict (the runner's) or is the harness's error. */
static st_status probe_quiet(vctx *v, int r, int *quiet, double *waited, st_err *err)
{
	json_t *req = json_pack("{s:s,s:f,s:f,s:i}", "op", "quiet", "within_ms",
	                        vx_time_left(v, QUIET_CHUNK_S) * 1e3, "below_us", QUIET_BELOW_US,
	                        "runs", QUIET_RUNS), *rep = NULL;
	st_status s = st_runner_call(&v->sols[r].runner, req, -1, &rep,
	                             vx_time_left(v, QUIET_CHUNK_S + 10), err);
	json_decref(req);
	double ms;
	char why[160];
	if (s || !st_reply_ok(rep)) {
		s = vx_runner_failed(v, r, "timing (the quiet probe)", s, rep, err);
		json_decref(rep);
		return s;
	}
	int bad = st_reply_quiet(rep, quiet, &ms, why, sizeof why);
	json_decref(rep);
	if (bad)
		return bad_batch(v, r, why, err);
	*waited += ms;
	return ST_OK;
}

/* A runner whose probe can be believed: a trusted solution's, started and not failed (the
 * reference's first; the harness's null solution where an imported task keeps its outputs
 * instead), or -1. */
static int trusted_prober(const vctx *v)
{
	int order[3] = {v->ref, v->calib, v->expert};
	for (int k = 0; k < 3; k++) {
		int r = order[k];
		if (r >= 0 && r != v->cand && v->sols[r].trusted && v->sols[r].started &&
		    !v->sols[r].stored && !v->sols[r].failed && v->sols[r].runner.alive)
			return r;
	}
	return -1;
}

/* Before the candidate's own batch, its runner said busy past the patience: does the trusted
 * runner `judge` see the same? The GPU may come free between two probes, so the candidate is
 * taken to lie only when it says busy again between two trusted probes that find the GPU free;
 * *quiet when its second probe found the GPU free (the wait is over). */
static st_status candidate_lies(vctx *v, int judge, int *lies, int *quiet, st_err *err)
{
	double ms = 0;
	int free_now = 0;
	*lies = *quiet = 0;
	st_status s = probe_quiet(v, judge, &free_now, &ms, err);
	if (s || v->verdict_final || !free_now)
		return s;
	if ((s = probe_quiet(v, v->cand, quiet, &ms, err)) || v->verdict_final || *quiet)
		return s;
	s = probe_quiet(v, judge, &free_now, &ms, err);
	*lies = !s && !v->verdict_final && free_now;
	return s;
}

/* Busy past the patience: whose work is it? The probes from here on are a trusted runner's
 * (trusted_prober). Where the candidate's own runner had been probing, candidate_lies decides
 * whether it said busy when the GPU was free (`hacking`), or the GPU just came free (*quiet).
 * Otherwise the candidate's runner (untrusted) is killed, its context and queued work with it,
 * and *prober becomes the trusted one: a GPU that then comes free was held by the candidate's
 * work, one still busy is another program's (wait_quiet decides). A trusted candidate queues
 * nothing: an error of the environment at once. */
static st_status quiet_overdue(vctx *v, int i, int *prober, double waited, double *killed_at,
                               int *quiet, st_err *err)
{
	sol *c = &v->sols[v->cand];
	int judge = trusted_prober(v);
	if (c->trusted || judge < 0)
		return st_err_set(err, ST_E_SYSTEM, "timing: the GPU stayed busy with another context "
		                  "for %.0f s before the %s's batch: verify again when the GPU is free",
		                  waited / 1e3, vx_role_of(v, i));
	if (*prober == v->cand) {
		int lies;
		st_status s = candidate_lies(v, judge, &lies, quiet, err);
		if (s || v->verdict_final || *quiet)
			return s;
		if (lies) {
			vx_fail(v, "hacking", "timing: the candidate's runner reported the GPU busy for "
			        "%.0f s before its batch, and again between two probes of a trusted runner "
			        "that found it free", waited / 1e3);
			return ST_OK;
		}
	}
	vx_progress(v, "the GPU stayed busy for %.0f s before the %s's batch: the candidate's "
	            "runner is killed, to see whether the work is its own", waited / 1e3,
	            vx_role_of(v, i));
	st_runner_kill(&c->runner);
	*killed_at = waited;
	*prober = judge;
	return ST_OK;
}

/* With the candidate stopped, a kernel it queued before its reply still runs, time-sliced with
 * the baseline's (a long one queued in a hook on its reply slowed t1/topk's reference from 3.8
 * to 6.3 ms a call on the H200). The baseline's runner probes the GPU until no other context
 * holds it, outside the batch's window: work queued ahead costs the candidate its time, never
 * its baselines' speed. The candidate's runner does the same before its own batch when
 * neighbours were stopped for it (their queued kernels). Past the patience the wait is looked
 * into (quiet_overdue): a GPU freed by killing the candidate's runner ends the verify in
 * `timeout`, one still busy in an error of the environment, not a verdict. */
static st_status wait_quiet(vctx *v, int i, st_err *err)
{
	vx_quiet *q = &v->quiet[i == v->cand];
	/* waited: what the probes reported (the figures); the decisions go by the parent's clock,
	 * since the candidate's runner probes before its own batch */
	double waited = 0, killed_at = -1, t0 = st_now_s();
	int prober = i, quiet = 0;
	while (!quiet) {
		st_status s = probe_quiet(v, prober, &quiet, &waited, err);
		if (s || v->verdict_final)
			return s;
		if (quiet)
			break;
		if (vx_past_deadline(v)) {
			vx_fail(v, "timeout", "timing: the GPU stayed busy with another context for %.1f s "
			        "before the %s's batch while the candidate%s stopped (work queued before "
			        "the stop, or another process): the verify reached its deadline",
			        waited / 1e3, vx_role_of(v, i),
			        i == v->cand ? "s of the verifies sharing the GPU were" : " was");
			return ST_OK;
		}
		double busy_ms = (st_now_s() - t0) * 1e3;
		if (killed_at >= 0 && busy_ms - killed_at >= QUIET_AFTER_KILL_MS)
			return st_err_set(err, ST_E_SYSTEM, "timing: the GPU stayed busy for %.0f s before "
			                  "the %s's batch, and for %.0f s more after the candidate's runner "
			                  "was killed, so with another program's work: verify again when "
			                  "the GPU is free", killed_at / 1e3, vx_role_of(v, i),
			                  (busy_ms - killed_at) / 1e3);
		if (killed_at < 0 && busy_ms >= quiet_patience_ms(v) &&
		    ((s = quiet_overdue(v, i, &prober, busy_ms, &killed_at, &quiet, err)) ||
		     v->verdict_final))
			return s;
		if (quiet)
			break;
		/* a chunk's worth of waiting (5 s) at a time: whoever waits sees why */
		vx_progress(v, "the GPU has been busy with another context for %.0f s (work queued "
		            "before a candidate was stopped, or another process): the %s's batch waits "
		            "for it", waited / 1e3, vx_role_of(v, i));
	}
	if (killed_at >= 0) {
		vx_fail(v, "timeout", "timing: the candidate's GPU work, queued before it was stopped, "
		        "kept the GPU busy for %.1f s before the %s's batch; the GPU came free once its "
		        "runner was killed", killed_at / 1e3, vx_role_of(v, i));
		return ST_OK;
	}
	q->checks++;
	q->wait_ms += waited;
	if (waited > 1.0)
		q->waits++;
	if (waited > q->max_ms)
		q->max_ms = waited;
	return ST_OK;
}

static st_status time_batch_once(vctx *v, int i, int n, st_err *err)
{
	sol *so = &v->sols[i];
	int host = !strcmp(v->o->backend, "host");
	/* a probe that failed a baseline, or the deadline, ends its batches here */
	if (stop_others(v, i) && !host) {
		st_status s = wait_quiet(v, i, err);
		if (s || v->verdict_final || !vx_addressed(v, i))
			return s;
	}
	/* the candidate's own batch: awake before its window opens, so the wake-up is not in it */
	if (i == v->cand)
		st_runner_thaw(&so->runner);
	double est = 1.0;
	if (so->n_samples) {
		st_stats st;
		st_stats_compute(so->samples, so->n_samples, &st);
		est = st.median > 0 ? st.median : 1.0;
	}
	json_t *req = json_pack("{s:s,s:i}", "op", "time", "n", n), *rep = NULL;
	/* Fresh inputs before every timed call cost device time outside the measurement; only an
	 * untrusted candidate needs them. Then every solution gets them, so that all are timed alike
	 * and the baselines' round trips measure what the candidate's should cost (timing_verdict).
	 * The parent knows every call's seed from the batch's (st_call_seed); each call commits a
	 * digest of its outputs, audited after timing (audit.c). */
	uint64_t seed = 0;
	/* Only the candidate's digests are audited; the baseline's batches commit too, so that the
	 * harness work the parent's clock takes off the candidate's batches is measured on batches
	 * that do the same (clock_bound.h). The expert's are neither: it skips the digests' read of
	 * its outputs (a sixth of a call's wall time for an output of 128 MiB). */
	so->committing = !v->sols[v->cand].trusted &&
	                 (i == v->cand || i == v->ref || i == v->calib);
	if (!v->sols[v->cand].trusted) {
		seed = vx_next_seed(v);
		json_object_set_new(req, "seed", json_integer((json_int_t)seed));
		json_object_set_new(req, "digest", json_boolean(so->committing));
		/* Inputs of a task's host generator are kept through timing, made from seeds the
		 * parent chose: every runner's the same, and a timed call re-made from them. */
		if (vx_task_staged(v->task) && !so->filled) {
			json_object_set_new(req, "fill", json_integer((json_int_t)v->fill));
			so->filled = 1;
		}
	}
	/* the waits for a CPU, counted for an untrusted runner's batches only: a long CPU-bound call
	 * is preempted mostly inside it, so the share over-corrects a slow baseline's, and the
	 * baseline's gap, kept whole, errs toward the candidate */
	double w[4] = {-1, -1, so->trusted ? -1 : st_cpu_wait_ms(0), -1};
	/* On the host backend the runner's one thread does all its work on a CPU, so the kernel's
	 * count of its CPU time over the batch bounds what it did (clock_bound.h) */
	int count_cpu = host;
	double on[2] = {-1, -1};
	runner_cpu(so, count_cpu, &w[0], &on[0]);
	double t0 = st_now_s();
	/* A batch may take longer than one request's limit, but never unboundedly so: `est` comes
	 * from figures the runner reported. */
	double extra = n * est * 4e-3;
	extra = extra < 4 * v->o->timeout_s ? extra : 4 * v->o->timeout_s;
	st_status s = st_runner_call(&so->runner, req, -1, &rep,
	                             vx_time_left(v, v->o->timeout_s + extra), err);
	json_decref(req);
	double took_ms = (st_now_s() - t0) * 1e3;
	if (s || !st_reply_ok(rep)) {
		s = vx_runner_failed(v, i, "timing", s, rep, err);
		json_decref(rep);
		return s;
	}
	runner_cpu(so, count_cpu, &w[1], &on[1]);
	w[3] = w[2] >= 0 ? st_cpu_wait_ms(0) : -1;
	uint64_t *digests = so->committing ? malloc((size_t)n * sizeof *digests) : NULL;
	char why[256];
	if (so->committing && !digests)
		s = st_err_set(err, ST_E_NOMEM, "out of memory for %d digests", n);
	else if (st_reply_check_time(rep, n, so->committing, digests, why, sizeof why))
		s = bad_batch(v, i, why, err);
	else
		s = keep_batch(v, i, rep, n, seed, digests, took_ms, w,
		               on[0] >= 0 && on[1] > on[0] ? on[1] - on[0] : 0, err);
	free(digests);
	json_decref(rep);
	return s;
}

/* One batch; the neighbours stopped for it run again, whatever became of it. */
static st_status time_batch(vctx *v, int i, int n, st_err *err)
{
	st_status s = time_batch_once(v, i, n, err);
	resume_neighbours(v);
	return s;
}

/* One bare round trip to the baseline's runner, the least of a few: what each batch's reply
 * costs besides its calls (clock_bound.h). A trusted runner: nothing of the candidate's can
 * make it look dearer. */
static void measure_rtt(vctx *v)
{
	int b = vx_held_to(v);
	if (b < 0 || !vx_addressed(v, b))
		return;
	stop_others(v, b);
	json_t *ping = json_pack("{s:s}", "op", "ping");
	double best = -1;
	for (int k = 0; k < 5; k++) {
		json_t *rep = NULL;
		st_err e;
		double t0 = st_now_s();
		if (st_runner_call(&v->sols[b].runner, ping, -1, &rep, vx_time_left(v, 10), &e) ||
		    !st_reply_ok(rep)) {
			json_decref(rep);
			break;
		}
		double ms = (st_now_s() - t0) * 1e3;
		best = best < 0 || ms < best ? ms : best;
		json_decref(rep);
	}
	json_decref(ping);
	resume_neighbours(v);
	v->rtt_ms = best > 0 ? best : 0;
}

int vx_held_to(const vctx *v)
{
	if (v->sols[v->ref].n_samples || v->sols[v->ref].n_recs)
		return v->ref;
	if (v->calib >= 0)
		return v->calib;
	return v->ref;
}

void vx_clock_bound(const vctx *v, st_clock_bound *b)
{
	const sol *c = &v->sols[v->cand], *h = &v->sols[vx_held_to(v)];
	st_clock_bound_compute(c->recs, c->n_recs, h->recs, h->n_recs, v->rtt_ms, b);
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
	measure_rtt(v);
	v->fill = vx_next_seed(v);
	for (int m = 0; m < n; m++) /* warm-up: caches, clocks, lazy module loading */
		if (vx_addressed(v, order[m])) {
			st_status s = time_batch(v, order[m], 3, err);
			if (s)
				return s;
			v->sols[order[m]].n_samples = 0;
			v->sols[order[m]].timing_wall_ms = 0;
			v->sols[order[m]].n_batches = 0;
			v->sols[order[m]].n_recs = 0;
			v->sols[order[m]].cpu_wait_ms = 0;
			s = time_batch(v, order[m], 2, err);
			if (s)
				return s;
		}
	for (int left = n; left > 0;) {
		left = 0;
		if (vx_past_deadline(v)) {
			vx_fail(v, "timeout", "timing: the verify reached its deadline (%.0f s after it "
			        "began)", v->deadline - v->t_start);
			return ST_OK;
		}
		for (int m = 0; m < n; m++) {
			sol *so = &v->sols[order[m]];
			if (so->timing_done || !vx_addressed(v, order[m]))
				continue;
			st_stats st;
			st_stats_compute(so->samples, so->n_samples, &st);
			const sol *c = &v->sols[v->cand];
			if (so->calib ? c->timing_done || !vx_usable(v, v->cand) || so->n_recs >= CALIB_BATCHES
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
			st_status s = time_batch(v, order[m], batch, err);
			if (s)
				return s;
		}
	}
	return ST_OK;
}

/* Batches of about 25 ms of wall time (8 for the harness's null calls), as the main loop sizes
 * them. */
static int plain_batch(const sol *so)
{
	st_stats st;
	st_stats_compute(so->samples, so->n_samples, &st);
	double est = st.median > 0 ? st.median : 1;
	if (so->n_samples && so->timing_wall_ms / so->n_samples > est)
		est = so->timing_wall_ms / so->n_samples;
	double want = (so->calib ? 8.0 : 25.0) / est;
	return !(want >= 1) ? 1 : want > 2000 ? 2000 : (int)want;
}

/* What the host backend's harness costs a call (fresh inputs, poison, evicting the call's data,
 * the digest: work on memory) can differ between two runner processes (the core, the pages), a
 * gap that stays through a verify and that standard errors over batches do not see: when it
 * flushed a cache-sized buffer (milliseconds), an honest C answer to a 3 us task was charged
 * 0.4-0.65 ms in 2 of 6 verifies on an idle machine, and one was called hacking beside a
 * compiler. A share of that work is neither charged nor condemned there; since the harness
 * evicts only the call's own data (backend_host.c) the share is of work in proportion to the
 * call's data, not milliseconds whatever the task. The GPU's harness work is GPU time, steady to
 * well under that, and keeps the plain rule. */
double vx_harness_share(const vctx *v)
{
	return !strcmp(v->o->backend, "host") ? 0.25 : 0;
}

st_status vx_time_confirm(vctx *v, st_err *err)
{
	int pair[2] = {v->cand, vx_held_to(v)};
	vx_progress(v, "the parent's clock saw more time than the candidate's reports: timing again "
	            "to confirm");
	measure_rtt(v);
	v->confirm_from = v->sols[v->cand].n_samples;
	for (int k = 0; k < 2; k++)
		v->sols[pair[k]].n_recs = 0;
	for (int b = 0; b < 2 * MIN_BATCHES; b++) {
		int i = pair[b % 2];
		if (!vx_addressed(v, i) || vx_past_deadline(v))
			return ST_OK;
		st_status s = time_batch(v, i, plain_batch(&v->sols[i]), err);
		if (s)
			return s;
	}
	return ST_OK;
}
