/* After timing: the candidate's timed calls audited. Its runner committed a digest of every timed
 * call's outputs when the call ended; now, with every call done, the parent picks some of them
 * and has them recomputed from the seeds it chose, by the reference (the answer) and by the
 * candidate (the digest), and checks what the buffers still hold. A solution right only when it
 * believes it is checked, or one that does its work anywhere but in its timed calls, is caught. */
#include <sys/random.h>

#include "common/clock.h"
#include "common/digest.h"
#include "verify/verify_int.h"

/* Random re-runs: at least AUDIT_CALLS, then more while the audit has cost less than AUDIT_SHARE
 * of the candidate's timed batches (or AUDIT_FLOOR_S), up to AUDIT_CALLS_MAX. A solution that
 * skips a fraction f of its calls escapes m re-runs with probability (1 - f)^m: 88 % for one call
 * in 25 with three, 0.5 % with 128, 0.003 % with 256 (less still where the picks are a large part
 * of few calls). Where a re-run is dear (128 MiB of outputs copied and compared: 30 ms) the
 * budget keeps it at three; where it is cheap (a fraction of a millisecond) the cap binds. */
#define AUDIT_CALLS 3
#define AUDIT_CALLS_MAX 256
#define AUDIT_SHARE 0.05
#define AUDIT_FLOOR_S 0.05 /* the budget of a candidate timed briefly (a few hundred calls) */
#define AUDIT_REPEATED 2 /* re-runs of calls whose digest another call committed to too */

/* An imported task has no reference to recompute a timed call: instead, after timing, one more
 * timed call (the same request as the others, so nothing tells it apart) runs on the inputs of
 * the seed the import kept back, which the candidate has never seen, and its output is checked
 * against the stored one. */
static st_status stored_check(vctx *v, const layout *L, const st_size_set *set, st_err *err)
{
	st_status s = vx_stored_load(v, L, v->task->n_data_seeds, err);
	if (s)
		return s;
	int ran;
	s = vx_rerun_candidate(v, json_pack("{s:s,s:i,s:b}", "op", "time", "n", 1, "given", 1), set,
	                       "checking a timed call", &ran, err);
	if (!s && ran)
		s = vx_rerun_candidate(v, vx_fetch_req(0, 1),
		                       set, "fetching the checked timed call", &ran, err);
	if (s || !ran)
		return s;
	json_t *outs = json_array();
	char why[1024] = "";
	if (!vx_judge(v, L, set, v->cand, 1, outs, why, sizeof why))
		vx_fail(v, "incorrect", "a timed call on the inputs of a seed kept back for this check "
		        "returned a wrong answer (lazy work, a benchmark detector, or wrong on unseen "
		        "inputs): %s", why);
	json_decref(outs);
	return ST_OK;
}

/* Where the audit's time goes: the runners' replays, the parent's digests, and v->compare_s when
 * the audit began (its comparisons are counted in v->compare_s with the verify's others). */
typedef struct audit_cost {
	double replays_s, digest_s, compare_s_at_start;
} audit_cost;

/* The digest of solution i's outputs in `slot` of its shared block, as a runner commits it. */
static uint64_t outputs_digest(const vctx *v, const layout *L, int i, int slot, audit_cost *ac)
{
	double t0 = st_now_s();
	st_tensor t[MAX_TENSORS];
	vx_views(v->task, L, v->sols[i].shm, slot, 0, t);
	uint64_t d = 0;
	for (int k = 0; k < v->task->n_outputs; k++)
		d = st_digest_fold(d, (uint64_t)k, L->out_bytes[k],
		                   st_digest_sum_threads(t[k].data, L->out_bytes[k], v->threads));
	ac->digest_s += st_now_s() - t0;
	return d;
}

/* The reference recomputes call `c` into its slot 0 while the candidate either re-runs it from its
 * seed on the buffer set it ran on (rerun) or copies out what that buffer set holds now, into
 * slot 1. 1 in *ok when both answered and the candidate is still usable. */
static st_status replay(vctx *v, const st_commit *c, int rerun, int *ok, audit_cost *ac,
                        st_err *err)
{
	double t0 = st_now_s();
	json_t *reqs[MAX_SOLS] = {0}, *reps[MAX_SOLS] = {0};
	reqs[v->ref] = json_pack("{s:s,s:I,s:i,s:i,s:b}", "op", "run", "seed", (json_int_t)c->seed,
	                         "set", 0, "slot", 0, "dump_inputs", v->task->validator != NULL);
	reqs[v->cand] = rerun ? json_pack("{s:s,s:I,s:i,s:i}", "op", "run", "seed",
	                                  (json_int_t)c->seed, "set", c->set, "slot", 1)
	                      : vx_fetch_req(c->set, 1);
	st_status s = vx_broadcast(v, reqs, NULL, "auditing a timed call", v->o->timeout_s, reps, err);
	vx_free_reps(reps, v->n_sols);
	json_decref(reqs[v->ref]);
	json_decref(reqs[v->cand]);
	*ok = !s && vx_usable(v, v->cand);
	ac->replays_s += st_now_s() - t0;
	return s;
}

/* The last call on one buffer set, chosen now: the bytes that set holds must be the ones its call
 * committed to (no recomputation, so this holds for a nondeterministic solution too) and right.
 * A solution that computes only when asked for its outputs committed to something else. */
static st_status audit_held(vctx *v, const layout *L, const st_size_set *set, audit_cost *ac,
                            st_err *err)
{
	const st_commits *cs = &v->sols[v->cand].commits;
	unsigned char pick = 0;
	while (getrandom(&pick, 1, 0) != 1)
		;
	int want = pick & 1, k = cs->n - 1;
	while (k > 0 && cs->v[k].set != want)
		k--;
	int ok;
	st_status s = replay(v, &cs->v[k], 0, &ok, ac, err);
	if (s || !ok)
		return s;
	char why[1024] = "";
	json_t *outs = json_array();
	if (outputs_digest(v, L, v->cand, 1, ac) != cs->v[k].digest)
		vx_fail(v, "hacking", "the outputs a timed call left in its buffers are not the ones its "
		        "runner committed to when the call ended: computed when asked for them, not in "
		        "the call");
	else if (!vx_judge(v, L, set, v->cand, 1, outs, why, sizeof why))
		vx_fail(v, "hacking", "a timed call, checked after timing, returned a wrong answer although "
		        "the checked calls were right (lazy work, or the solution detects the benchmark): %s",
		        why);
	json_decref(outs);
	return ST_OK;
}

/* Call idx of the candidate's commits re-run from its seed after timing: its answer must be right,
 * and its outputs' digest the one committed during timing. *unmatched counts the digests that
 * differ. A solution seen to be nondeterministic can legitimately give other bits on a re-run:
 * its re-runs are judged, their digests only counted. */
static st_status rerun_call(vctx *v, const layout *L, const st_size_set *set, int idx,
                            int *unmatched, audit_cost *ac, st_err *err)
{
	sol *c = &v->sols[v->cand];
	const st_commit *cm = &c->commits.v[idx];
	int ok;
	st_status s = replay(v, cm, 1, &ok, ac, err);
	if (s || !ok)
		return s;
	char why[1024] = "";
	json_t *outs = json_array();
	int right = vx_judge(v, L, set, v->cand, 1, outs, why, sizeof why);
	json_decref(outs);
	int same = outputs_digest(v, L, v->cand, 1, ac) == cm->digest;
	if (!right)
		vx_fail(v, "hacking", "timed call %d of %d, re-run from its seed after timing, returned "
		        "a wrong answer although the checked calls were right: %s", idx + 1,
		        c->commits.n, why);
	else if (!same && !vx_has_flag(v, "nondeterministic"))
		vx_fail(v, "hacking", "timed call %d of %d committed to outputs that a re-run from its "
		        "seed does not reproduce (the solution is deterministic): the timed call did "
		        "not compute its answer (work skipped, deferred, or done only when checked)",
		        idx + 1, c->commits.n);
	*unmatched += !same;
	return ST_OK;
}

/* The calls order[0..n) put in the order of their seeds: where a task's host generator makes the
 * inputs, all timed calls share their buffer set's two seeds, and a runner makes a seed's inputs
 * again only when the seed changes (runner_main.c stage_inputs). Only the re-runs that are always
 * made are reordered: the budget cuts the others short, and sorted they would always cut the same
 * buffer set's calls. */
static void by_seed(const st_commits *cs, int *order, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && cs->v[order[j - 1]].seed > cs->v[order[j]].seed; j--) {
			int t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
}

/* Timed calls picked at random now that all have run, each re-run (rerun_call): AUDIT_CALLS of
 * them, then up to AUDIT_REPEATED of the calls whose digest another call also committed to
 * (st_commits_repeated): calls that skipped their work all leave the same poisoned buffers, while
 * an honest solution repeats itself only where its outputs hardly depend on the inputs; then
 * more of the random picks while the audit stays within its share of the candidate's timing. A
 * call whose work was skipped, deferred past its digest or done only for the calls it expected
 * to be checked cannot match. */
static st_status audit_reruns(vctx *v, const layout *L, const st_size_set *set, audit_cost *ac,
                              st_err *err)
{
	sol *c = &v->sols[v->cand];
	int idx[AUDIT_CALLS_MAX + AUDIT_REPEATED];
	int n = st_commits_pick(&c->commits, AUDIT_CALLS_MAX, idx), unmatched = 0;
	int first = n < AUDIT_CALLS ? n : AUDIT_CALLS;
	/* the repeated digests' calls go right after the first picks, the other picks after them */
	int rep = st_commits_repeated(&c->commits, AUDIT_REPEATED, idx, first, idx + n);
	if (rep < 0)
		return st_err_set(err, ST_E_NOMEM, "out of memory for the audit's %d digests",
		                  c->commits.n);
	int order[AUDIT_CALLS_MAX + AUDIT_REPEATED], k = 0;
	for (int m = 0; m < first; m++)
		order[k++] = idx[m];
	for (int m = 0; m < rep; m++)
		order[k++] = idx[n + m];
	for (int m = first; m < n; m++) {
		int again = 0;
		for (int q = 0; q < rep; q++)
			again |= idx[m] == idx[n + q];
		if (!again)
			order[k++] = idx[m];
	}
	by_seed(&c->commits, order, first + rep);
	double budget_s = AUDIT_SHARE * c->timing_wall_ms / 1e3, t0 = st_now_s();
	if (budget_s < AUDIT_FLOOR_S)
		budget_s = AUDIT_FLOOR_S;
	int done = 0;
	for (; done < k && !v->verdict_final; done++) {
		if (done >= first + rep && st_now_s() - t0 >= budget_s)
			break;
		st_status s = rerun_call(v, L, set, order[done], &unmatched, ac, err);
		if (s || !vx_usable(v, v->cand))
			return s;
	}
	int nondet = vx_has_flag(v, "nondeterministic");
	json_object_set_new(v->verdict, "audit",
	                    json_pack("{s:i,s:i,s:i,s:i,s:b,s:{s:f,s:f,s:f}}", "timed_calls",
	                              c->commits.n, "rerun", done, "rerun_repeated", rep,
	                              "digest_mismatches", unmatched, "digests_binding", !nondet,
	                              "cost_s", "replays", ac->replays_s, "compare",
	                              v->compare_s - ac->compare_s_at_start, "digest", ac->digest_s));
	if (nondet)
		vx_flag(v, "timed_calls_digest_unchecked");
	return ST_OK;
}

/* After timing: the candidate's timed calls audited against what its runner committed
 * (docs/architecture.md, "commit, then audit"). Only seeds the parent chose and digests the runner
 * sent before it knew which calls would be picked reach the verdict. */
st_status vx_audit(vctx *v, const layout *L, const st_size_set *set, st_err *err)
{
	sol *c = &v->sols[v->cand];
	if (v->cand == v->ref || !vx_usable(v, v->cand) || c->trusted)
		return ST_OK;
	if (v->stored)
		return stored_check(v, L, set, err);
	if (!c->committing || !c->commits.n) { /* inputs from a task's host generator: reused */
		vx_flag(v, "timed_calls_unchecked");
		return ST_OK;
	}
	vx_progress(v, "audit of the candidate's timed calls: %d committed, the last held and at "
	            "least %d re-run from their seeds", c->commits.n,
	            c->commits.n < AUDIT_CALLS ? c->commits.n : AUDIT_CALLS);
	audit_cost ac = {0, 0, v->compare_s};
	st_status s = audit_held(v, L, set, &ac, err);
	if (!s && !v->verdict_final)
		s = audit_reruns(v, L, set, &ac, err);
	return s;
}
