/* Building the verdict: the helpers every stage uses to record into it (phases, flags, the first
 * failure) and its last fields, set once the runners are gone. The verdict's top-level keys:
 *   status, reason       "ok" or the first failure (vx_fail): compile_error, forbidden,
 *                        incorrect, runtime_error, timeout, hacking; and why
 *   task, solution, backend, arch, device (the reference runner's hello), params_file
 *   policy               the static check: hits, similarity, similar_to, has_kernel
 *   compile              the candidate's compile: ok, cached, seconds, key, diagnostics, log
 *   runners              per role, where its runner came from and what that cost
 *   correctness          per set and seed, the candidate's judged outputs
 *   timing, baselines, speedup, sol   the timed set's statistics, speedups and roofline
 *   profile, ncu         the candidate's profile; ncu also in a verify run under ncu
 *   expert_failure, calibration_failure   a baseline that broke, and why
 *   flags                names of what is worth a look that is not a failure
 *   phases_s, gpu_wait_s, gpu_wait_by_phase_s, gpu_holds, wall_s   where the time went
 *   compare_s, compare_threads, runner_stages_ms, shm_blocks         the harness's own costs */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "verify/verify_int.h"

/* obj[key] += x, a missing key counting as 0: the verdict's sums by phase and by stage. */
void vx_json_add(json_t *obj, const char *key, double x)
{
	json_object_set_new(obj, key, json_real(json_number_value(json_object_get(obj, key)) + x));
}

/* Add the time since the last mark to phase `name`. */
void vx_phase(vctx *v, const char *name)
{
	double t = st_now_s();
	vx_json_add(v->phases, name, t - v->t_mark);
	v->t_mark = t;
	/* and how much of it went to waiting for the GPU, where other verifies share it */
	if (st_gpu_hold_has_lock(&v->gpu) && v->gpu.wait_s > v->wait_mark) {
		vx_json_add(v->gpu_waits, name, v->gpu.wait_s - v->wait_mark);
		v->wait_mark = v->gpu.wait_s;
	}
}

int vx_has_flag(const vctx *v, const char *name)
{
	size_t i;
	json_t *f;
	json_array_foreach(v->flags, i, f) if (!strcmp(json_string_value(f), name)) return 1;
	return 0;
}

void vx_flag(vctx *v, const char *name)
{
	if (!vx_has_flag(v, name))
		json_array_append_new(v->flags, json_string(name));
}

void vx_fail(vctx *v, const char *status, const char *fmt, ...)
{
	if (v->verdict_final)
		return;
	char reason[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof reason, fmt, ap);
	va_end(ap);
	json_object_set_new(v->verdict, "status", json_string(status));
	json_object_set_new(v->verdict, "reason", json_string(reason));
	v->verdict_final = 1;
}

json_t *vx_sizes_json(const st_size_set *s)
{
	json_t *o = json_object();
	for (int i = 0; i < s->n; i++)
		json_object_set_new(o, s->names[i], json_integer(s->values[i]));
	return o;
}

/* The runners are gone: what the stages collected goes into the verdict. */
void vx_verdict_close(vctx *v)
{
	json_object_set_new(v->verdict, "correctness", v->correctness);
	json_object_set_new(v->verdict, "flags", v->flags);
	vx_phase(v, "release");
}

/* The harness's own account, last: every phase is over. */
void vx_verdict_finish(vctx *v)
{
	const st_verify_opts *o = v->o;
	json_object_set_new(v->verdict, "phases_s", v->phases);
	json_object_set_new(v->verdict, "compare_s", json_real(v->compare_s));
	json_object_set_new(v->verdict, "compare_threads", json_integer(v->threads));
	json_object_set_new(v->verdict, "runner_stages_ms", v->runner_ms);
	json_object_set_new(v->verdict, "shm_blocks",
	                    json_pack("{s:i,s:i}", "made", v->shm_made, "reused", v->shm_reused));
	/* inside the phases: waiting for other verifies to finish measuring */
	if (st_gpu_hold_has_lock(&v->gpu)) {
		json_object_set_new(v->verdict, "gpu_wait_s", json_real(v->gpu.wait_s));
		json_object_set_new(v->verdict, "gpu_wait_by_phase_s", v->gpu_waits);
		if (v->gpu.holds)
			json_object_set_new(v->verdict, "gpu_holds", v->gpu.holds);
	} else {
		json_decref(v->gpu_waits);
	}
	json_object_set_new(v->verdict, "wall_s", json_real(st_now_s() - v->t_start));
	if (o->params_path)
		json_object_set_new(v->verdict, "params_file", json_string(o->params_path));
}
