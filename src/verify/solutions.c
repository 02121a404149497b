/* The solutions of one verify (reference or stored outputs, expert, candidate, the harness's
 * null solution) and talking to all their runners at once: who may still be asked, and what a
 * failed request means for the verdict, which depends on whose runner failed. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "common/utf8.h"
#include "verify/reply.h"
#include "verify/verify_int.h"

st_status vx_add_sol(vctx *v, const char *role, const char *path, int trusted, int *index,
                     st_err *err)
{
	char *data;
	size_t len;
	st_status s = st_read_file(path, &data, &len, err);
	if (s)
		return st_err_wrap(err, ST_E_INVALID, "%s", role);
	char sha[65];
	st_sha256_hex(data, len, sha);
	free(data);
	for (int i = 0; i < v->n_sols; i++)
		if (!strcmp(v->sols[i].sha, sha)) {
			*index = i;
			return ST_OK;
		}
	sol *so = &v->sols[v->n_sols];
	memset(so, 0, sizeof *so);
	so->role = role;
	so->path = strdup(path);
	so->trusted = trusted;
	so->blk.fd = -1;
	memcpy(so->sha, sha, sizeof sha);
	*index = v->n_sols++;
	return ST_OK;
}

/* A trusted stand-in of the harness's own, with no file to compile; *index names it. */
static sol *add_stand_in(vctx *v, const char *role, const char *path, const char *sha, int *index)
{
	sol *so = &v->sols[v->n_sols];
	memset(so, 0, sizeof *so);
	so->role = role;
	so->path = strdup(path);
	so->trusted = 1;
	so->blk.fd = -1;
	snprintf(so->sha, sizeof so->sha, "%s", sha);
	*index = v->n_sols++;
	return so;
}

/* An imported task's stand-in for the reference: the stored outputs, or those its PyTorch
 * program draws for this verify. */
st_status vx_add_stored(vctx *v)
{
	if (v->live)
		add_stand_in(v, "PyTorch program", v->task->data_reference, "live", &v->ref)->stored = 1;
	else
		add_stand_in(v, "stored outputs", v->task->data_check, "stored", &v->ref)->stored = 1;
	return ST_OK;
}

/* What the timing checks hold a candidate to is what the reference costs beside it: time past
 * the stream's end event, and the parent's clock against the runner's. An imported task has no
 * reference, so a runner with the runner's built-in null solution stands in: its calls are the
 * harness's own work (fresh inputs, poison, flush, sync, round trips) and nothing else. Without
 * it a runner whose clock the candidate rewrote from inside went unseen on imported tasks. */
void vx_add_calib(vctx *v)
{
	add_stand_in(v, "harness", "(the runner's null solution)", "null", &v->calib)->calib = 1;
}

const char *vx_role_of(vctx *v, int i)
{
	return i == v->cand ? "candidate" : v->sols[i].role;
}

/* What solution i's process printed before its failure, kept in the verdict's "output" under
 * its role: a user whose st_init refused or whose kernel faulted sees why. It is the solution's
 * text, labelled so wherever it is shown, and left out where it could tell more than the
 * verdict may: a hidden size set's failure (a candidate can print its sizes) and a `hacking`
 * one (the exploit's own account). `status` is what the failure makes of it; a candidate whose
 * verdict was already final (failed before) keeps the words of that first failure. */
static void keep_output(vctx *v, int i, const char *status)
{
	if (v->sols[i].calib || v->sols[i].stored || (v->set && st_set_label_hidden(v->set->label)) ||
	    !strcmp(status, "hacking") || (i == v->cand && v->verdict_final))
		return;
	char *text = st_runner_output(&v->sols[i].runner, VX_OUTPUT_MAX);
	if (!text)
		return;
	json_t *o = json_object_get(v->verdict, "output");
	if (!o)
		json_object_set_new(v->verdict, "output", o = json_object());
	json_object_set_new(o, vx_role_of(v, i), json_string(text));
	free(text);
}

/* A runner request failed or was refused: what that means depends on whose runner it was. */
st_status vx_runner_failed(vctx *v, int i, const char *phase, st_status s, json_t *rep,
                           st_err *err)
{
	char reason[2048];
	const char *status = "runtime_error";
	/* Past the verify's deadline every runner's wait ends: whoever's runner it was, the verify
	 * ran as long as it may, and the candidate (the one party that can make it run long) gets
	 * the timeout. */
	if (s == ST_E_TIMEOUT && vx_past_deadline(v)) {
		keep_output(v, i, "timeout");
		vx_fail(v, "timeout", "%s: the verify reached its deadline (%.0f s after it began): %s",
		        phase, v->deadline - v->t_start, err->msg);
		if (i != v->cand)
			v->sols[i].failed = 1;
		return ST_OK;
	}
	if (s == ST_E_IO && v->sols[i].runner.protocol_fault) {
		status = "hacking";
		snprintf(reason, sizeof reason, "%s: %s", phase, err->msg);
	} else if (s == ST_E_IO && v->sols[i].runner.term_signal == SIGSYS) {
		status = "hacking";
		snprintf(reason, sizeof reason, "%s: the solution made a system call the sandbox forbids "
		         "(a new process or program, a network socket, ptrace, ...) and was killed",
		         phase);
	} else if (s == ST_E_TIMEOUT) {
		status = "timeout";
		snprintf(reason, sizeof reason, "%s: %s", phase, err->msg);
	} else if (s) {
		snprintf(reason, sizeof reason, "%s: %s", phase, err->msg);
	} else {
		const char *why = st_reply_string(rep, "reason");
		snprintf(reason, sizeof reason, "%s: %s", phase, why ? why : "failed");
	}
	keep_output(v, i, status);
	if (i == v->cand) {
		vx_fail(v, status, "%s", reason);
		return ST_OK;
	}
	if (i == v->ref) {
		/* the end of what it printed, where the cause usually is */
		const char *said = json_string_value(
			json_object_get(json_object_get(v->verdict, "output"), v->sols[i].role));
		size_t len = said ? strlen(said) : 0;
		size_t from = len > 400 ? st_utf8_cut(said, len - 400) : 0;
		return st_err_set(err, ST_E_SYSTEM, "the reference failed (%s); cannot judge%s%s",
		                  reason, said ? "; it printed: " : "", said ? said + from : "");
	}
	v->sols[i].failed = 1;
	if (i == v->calib) { /* the checks it serves are left out, and the verdict says so */
		vx_flag(v, "calibration_failed");
		json_object_set_new(v->verdict, "calibration_failure", json_string(reason));
		return ST_OK;
	}
	vx_flag(v, "expert_failed");
	json_object_set_new(v->verdict, "expert_failure", json_string(reason));
	return ST_OK;
}

int vx_usable(vctx *v, int i)
{
	if (i < 0 || v->sols[i].failed || v->sols[i].stored || v->sols[i].calib)
		return 0;
	if (i == v->cand && v->verdict_final)
		return 0;
	return v->sols[i].runner.alive;
}

/* Does solution i run seed k of a size set (0 first)? The harness's runner none. The expert,
 * where it is not the candidate itself, the first only: it is a baseline to time against,
 * checked so that a broken one is flagged rather than believed; `stitch bench`, where it is the
 * candidate, checks it on every seed. Its other runs would only cost every request device and
 * host time (their outputs copied out and compared). */
int vx_runs_seed(const vctx *v, int i, int k)
{
	if (i == v->calib)
		return 0;
	return i != v->expert || i == v->cand || k == 0;
}

/* The harness's runner takes part in setup, timing and teardown only. */
static int calib_ready(vctx *v)
{
	return v->calib >= 0 && !v->sols[v->calib].failed && v->sols[v->calib].runner.alive;
}

/* Usable, or the harness's runner when it is asked by name (a request of its own). */
int vx_addressed(vctx *v, int i)
{
	return vx_usable(v, i) || (i == v->calib && calib_ready(v));
}

typedef struct ms_into {
	vctx *v;
	const char *op;
} ms_into;

static void ms_add(void *ctx, const char *phase, double ms)
{
	const ms_into *m = ctx;
	char key[64];
	snprintf(key, sizeof key, "%s.%s", m->op, phase);
	vx_json_add(m->v->runner_ms, key, ms);
}

/* Add a runner's account of its request (its reply's "ms") to v->runner_ms. An account of
 * another shape is left out, as one that is missing: it only informs. */
static void runner_ms_add(vctx *v, const json_t *req, const json_t *rep)
{
	ms_into m = {v, json_string_value(json_object_get(req, "op"))};
	char why[128];
	if (m.op)
		st_reply_ms(rep, ms_add, &m, why, sizeof why);
}

/* A request for buffer set `set`'s outputs in the shared block's `slot`. */
json_t *vx_fetch_req(int set, int slot)
{
	return json_pack("{s:s,s:i,s:i}", "op", "fetch", "set", set, "slot", slot);
}

/* Send the same request to every usable runner, then collect the replies: runners work in
 * parallel (their own processes), and a failure is attributed to the solution that caused it.
 * The GPU is shared for it (st_gpu_hold_use) unless `on_gpu` is 0: requests that only copy results to
 * the host, on a copy engine and no SM (beside another verify's timing in stitch serve, the
 * expert's copy timed as candidate stayed within 0.5 % of the expert). */
st_status vx_broadcast_on(vctx *v, json_t *const *reqs, const int *fds, const char *phase,
                          double timeout_s, json_t **reps, int on_gpu, st_err *err)
{
	int sent[MAX_SOLS] = {0};
	st_gpu_hold_for(&v->gpu, on_gpu);
	for (int i = 0; i < v->n_sols; i++) {
		reps[i] = NULL;
		if (!reqs[i] || !vx_addressed(v, i))
			continue;
		st_err e;
		st_status s = st_runner_send(&v->sols[i].runner, reqs[i], fds ? fds[i] : -1, &e);
		if (s) {
			st_status r = vx_runner_failed(v, i, phase, s, NULL, &e);
			if (r) {
				*err = e;
				return r;
			}
			continue;
		}
		sent[i] = 1;
	}
	for (int i = 0; i < v->n_sols; i++) {
		if (!sent[i])
			continue;
		st_err e;
		st_status s = st_runner_recv(&v->sols[i].runner, &reps[i],
		                             vx_time_left(v, timeout_s), &e);
		if (s || !st_reply_ok(reps[i])) {
			st_status r = vx_runner_failed(v, i, phase, s, reps[i], &e);
			json_decref(reps[i]);
			reps[i] = NULL;
			if (r) {
				*err = e;
				return r;
			}
		} else {
			runner_ms_add(v, reqs[i], reps[i]);
		}
	}
	return ST_OK;
}

st_status vx_broadcast(vctx *v, json_t *const *reqs, const int *fds, const char *phase,
                       double timeout_s, json_t **reps, st_err *err)
{
	return vx_broadcast_on(v, reqs, fds, phase, timeout_s, reps, 1, err);
}

void vx_free_reps(json_t **reps, int n)
{
	for (int i = 0; i < n; i++) {
		json_decref(reps[i]);
		reps[i] = NULL;
	}
}
