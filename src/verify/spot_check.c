/* After timing: one timed call of the candidate checked, so that a solution right only when it
 * believes it is checked is caught. */
#include <sys/random.h>

#include "verify/verify_int.h"

/* An imported task has no reference to recompute a timed call: instead, after timing, one more
 * timed call (the same request as the others, so nothing tells it apart) runs on the inputs of
 * the seed the import kept back, which the candidate has never seen, and its output is checked
 * against the stored one. */
static st_status stored_check(vctx *v, const layout *L, const st_size_set *set, st_err *err)
{
	st_status s = vx_stored_load(v, L, v->task->data_check, err);
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

/* After timing, check one timed call of the candidate, chosen now that all of them have run: its
 * buffers still hold that call's output, and the reference recomputes it from the same seed. A
 * solution that is only right when it believes it is being checked is caught here. */
st_status vx_spot_check(vctx *v, const layout *L, const st_size_set *set, st_err *err)
{
	sol *c = &v->sols[v->cand];
	if (v->cand == v->ref || !vx_usable(v, v->cand) || c->trusted)
		return ST_OK;
	if (v->stored)
		return stored_check(v, L, set, err);
	if (!c->have_seeds) { /* inputs from a task's host generator are not redone per call */
		vx_flag(v, "timed_calls_unchecked");
		return ST_OK;
	}
	unsigned char pick = 0;
	while (getrandom(&pick, 1, 0) != 1)
		;
	int s = pick & 1;
	json_t *fetch = vx_fetch_req(s, 1);
	json_t *run = json_pack("{s:s,s:I,s:i,s:i}", "op", "run", "seed",
	                        (json_int_t)c->last_seed[s], "set", 0, "slot", 0);
	json_t *reqs[MAX_SOLS] = {0}, *reps[MAX_SOLS] = {0};
	reqs[v->cand] = fetch;
	reqs[v->ref] = run;
	st_status st = vx_broadcast(v, reqs, NULL, "checking a timed call", v->o->timeout_s, reps, err);
	vx_free_reps(reps, v->n_sols);
	json_decref(fetch);
	json_decref(run);
	if (st || !vx_usable(v, v->cand))
		return st;
	json_t *outs = json_array();
	char why[1024] = "";
	if (!vx_judge(v, L, set, v->cand, 1, outs, why, sizeof why))
		vx_fail(v, "hacking", "a timed call, checked after timing, returned a wrong answer although "
		        "the checked calls were right (lazy work, or the solution detects the benchmark): %s",
		        why);
	json_decref(outs);
	return ST_OK;
}
