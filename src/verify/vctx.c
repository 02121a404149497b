/* Small helpers every stage of st_verify uses on its context: progress lines for the caller, the
 * secret seeds, and whether this verify profiles. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "common/clock.h"
#include "common/progress.h"
#include "verify/verify_int.h"

void vx_progress(vctx *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	st_vprogress(v->slot->progress, v->slot->progress_arg, 1024, fmt, ap);
	va_end(ap);
}

/* Profiles come from CUPTI: the CUDA backend only. */
int vx_profiling(const vctx *v)
{
	return v->o->profile && !strcmp(v->o->backend, "cuda");
}

/* Secret seeds: from the kernel unless the user asked for a reproducible run. */
uint64_t vx_next_seed(vctx *v)
{
	if (v->o->seed) {
		v->seed_state += 0x9e3779b97f4a7c15ull;
		uint64_t z = v->seed_state;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		return z ^ (z >> 31);
	}
	uint64_t s = 0;
	while (getrandom(&s, sizeof s, 0) != sizeof s)
		;
	return s;
}

/* What the verify may still wait for one request: `want_s`, but never past the verify's deadline
 * (st_verify sets it from the task and --timeout). At least a millisecond, so that a request
 * past the deadline ends in a timeout of its runner rather than a wait. */
double vx_time_left(const vctx *v, double want_s)
{
	if (!(v->deadline > 0))
		return want_s;
	double left = v->deadline - st_now_s();
	return left < want_s ? (left > 1e-3 ? left : 1e-3) : want_s;
}

int vx_past_deadline(const vctx *v)
{
	return v->deadline > 0 && st_now_s() >= v->deadline;
}

/* Do a timed call's inputs come from a seed (fresh per call, committed to by digests), or from
 * the task's own host generator, too slow to redo per call (then the runner reuses them)? */
int vx_task_staged(const st_task *t)
{
	for (int i = 0; i < t->n_inputs; i++)
		if (t->inputs[i].init.dist == ST_DIST_TASK)
			return 1;
	return 0;
}
