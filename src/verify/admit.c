/* Admission of a verify (see admit.h): the policy side. The byte counts come from task_bytes.c;
 * here they are multiplied out over the solutions and runners one verify starts and compared with
 * the machine. Which sets run is the verify's own rule (set_select.h: a host verify runs `small`
 * alone unless told otherwise), so a task whose eval set is too large for a laptop still verifies
 * on the host backend there. */
#include "admit.h"
#include "verify/set_select.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

/* A host runner's address space without a tighter bound (as sandbox.c caps it). */
#define RUNNER_AS_CAP ((uint64_t)32 << 30)

/* Does the verify run set `label`? */
static int runs(const st_task *t, const st_verify_opts *o, const char *label)
{
	int timed;
	return st_verify_set_runs(o, t->n_data_seeds > 0, label, &timed);
}

void st_admit_need_of(const st_task *t, const st_verify_opts *o, const st_set_bytes *b,
                      st_admit_need *n)
{
	int host = !strcmp(o->backend, "host"), stored = t->n_data_seeds > 0;
	memset(n, 0, sizeof *n);
	/* pipeline's add_sol / add_stored / add_calib */
	n->n_sols = 2 + (st_task_expert(t, host) != NULL) + (stored && o->timing &&
	                                                      !o->candidate_trusted);
	n->n_runners = n->n_sols - stored;
	int params_in_shm = o->dump_path || o->params_path || t->data_params || t->data_live ||
	                    (o->fresh_seeds && t->n_data_seeds > 0);
	n->shm = st_sat_add(b->shm, params_in_shm ? b->shm_params : 0);
	uint64_t blocks = st_sat_mul((uint64_t)n->n_sols, n->shm);
	/* the parent holds a params file mapped, and copies the inputs for a metamorphic check */
	uint64_t parent = st_sat_add(params_in_shm ? b->params : 0,
	                             t->hooks ? st_sat_mul(2, b->inputs) : 0);
	n->parent_as = st_sat_add(blocks, parent);
	n->host = n->parent_as;
	if (host) {
		n->host = st_sat_add(n->host, st_sat_mul((uint64_t)n->n_runners, b->buffers));
		n->runner_as = st_sat_add(n->shm, b->buffers);
	} else {
		n->device = st_sat_mul((uint64_t)n->n_runners, b->buffers);
	}
}

/* "size set 'small' of t1/softmax needs ... (largest tensor x: ... = N bytes; ...)": the part of
 * every refusal that says what the set is. */
static void describe(const st_task *t, const st_set_bytes *b, const st_admit_need *n,
                     uint64_t need, const char *what, char *buf, size_t len)
{
	char a[32], c[32], d[32];
	if (b->overflow) {
		snprintf(buf, len, "%s: size set '%s' needs more bytes than 64 bits count (largest "
		         "tensor %s: %s)", t->id, b->set, b->largest_name ? b->largest_name : "?",
		         st_bytes_str(b->largest, a, sizeof a));
		return;
	}
	snprintf(buf, len, "%s: size set '%s' needs %s (%" PRIu64 " bytes) of %s: largest tensor "
	         "%s is %s (%" PRIu64 " bytes); %d shared blocks of %s", t->id, b->set,
	         st_bytes_str(need, a, sizeof a), need, what,
	         b->largest_name ? b->largest_name : "-", st_bytes_str(b->largest, c, sizeof c),
	         b->largest, n->n_sols, st_bytes_str(n->shm, d, sizeof d));
}

/* Refuse set b when `need` exceeds `have` (0: unknown, nothing to compare with). */
static st_status over(const st_task *t, const st_set_bytes *b, const st_admit_need *n,
                      uint64_t need, const char *what, uint64_t have, const char *where,
                      const char *note, st_err *err)
{
	if (!b->overflow && (!have || need <= have))
		return ST_OK;
	char head[640], h[32];
	describe(t, b, n, need, what, head, sizeof head);
	return st_err_set(err, ST_E_INVALID, "%s; %s %s%s", head, where,
	                  have ? st_bytes_str(have, h, sizeof h) : "no bound", note);
}

static st_status admit_set(const st_task *t, const st_verify_opts *o, const st_host_mem *m,
                           const st_set_bytes *b, st_err *err)
{
	st_admit_need n;
	st_admit_need_of(t, o, b, &n);
	const char *from;
	uint64_t usable = st_host_mem_usable(m, &from);
	/* room for the parent's own work (comparison threads, the compiler) and page cache */
	usable -= usable / 16;
	char note[160];
	snprintf(note, sizeof note, " for a verify (%s, less a 16th)", from);
	st_status s = over(t, b, &n, n.host, "host memory", usable, "this machine has", note, err);
	if (!s && o->max_request_bytes)
		s = over(t, b, &n, n.host, "host memory", o->max_request_bytes,
		         "a request may take at most", " (--max-request-gb)", err);
	struct rlimit r;
	if (!s && getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
		s = over(t, b, &n, n.parent_as, "address space in this process", (uint64_t)r.rlim_cur,
		         "its limit is", " (RLIMIT_AS, ulimit -v)", err);
	if (!s && n.runner_as)
		s = over(t, b, &n, n.runner_as, "address space in one runner",
		         st_host_runner_as(m, RUNNER_AS_CAP), "a host runner's limit is",
		         " (RLIMIT_AS, 7/8 of the machine's memory)", err);
	return s;
}

st_status st_admit_verify(const st_task *t, const st_verify_opts *o, const st_host_mem *m,
                          st_err *err)
{
	st_host_mem own;
	if (!m) {
		st_status s = st_host_mem_read(&own, err);
		if (s)
			return s;
		m = &own;
	}
	const st_size_set *sets[64];
	int n = st_task_size_sets(t, sets, 64);
	for (int k = 0; k < n; k++) {
		if (!runs(t, o, sets[k]->label))
			continue;
		st_set_bytes b;
		st_status s = st_task_set_bytes(t, sets[k], &b, err);
		if (!s)
			s = admit_set(t, o, m, &b, err);
		if (s)
			return s;
	}
	return ST_OK;
}

st_status st_admit_device(const st_task *t, const st_verify_opts *o, const json_t *info,
                          st_err *err)
{
	json_t *mb = json_object_get(info, "mem_bytes");
	if (strcmp(o->backend, "cuda") || !json_is_integer(mb) || json_integer_value(mb) <= 0)
		return ST_OK;
	const st_size_set *sets[64];
	int n = st_task_size_sets(t, sets, 64);
	for (int k = 0; k < n; k++) {
		if (!runs(t, o, sets[k]->label))
			continue;
		st_set_bytes b;
		st_admit_need need;
		st_status s = st_task_set_bytes(t, sets[k], &b, err);
		if (s)
			return s;
		st_admit_need_of(t, o, &b, &need);
		s = over(t, &b, &need, need.device, "device memory (the runners' buffers together)",
		         (uint64_t)json_integer_value(mb), "the device has", " (its hello's mem_bytes)",
		         err);
		if (s)
			return s;
	}
	return ST_OK;
}

int st_admit_task_warning(const st_task *t, const st_host_mem *m, char *msg, size_t len)
{
	/* The least any verify of a set takes: the cuda backend's host share (the shared blocks);
	 * whether a set runs at all depends on options a listing does not know. */
	st_verify_opts o;
	st_verify_opts_default(&o);
	const st_size_set *sets[64];
	int n = st_task_size_sets(t, sets, 64);
	for (int k = 0; k < n; k++) {
		st_set_bytes b;
		st_admit_need need;
		st_err e;
		if (st_task_set_bytes(t, sets[k], &b, &e)) {
			snprintf(msg, len, "%s", e.msg);
			return 1;
		}
		st_admit_need_of(t, &o, &b, &need);
		if (over(t, &b, &need, need.host, "host memory", st_host_mem_usable(m, NULL),
		         "this machine has", " available", &e)) {
			snprintf(msg, len, "%s", e.msg);
			return 1;
		}
	}
	return 0;
}
