/* The queue's bench sweep (queue_sweep.h). Jobs go out with their task id, not a path: the
 * workers resolve it in their own copy of the suite. */
#include "queue/queue_sweep.h"

#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "queue.h"

/* A result as the verdict the local sweep would have made: the verdict itself, or an "error"
 * row with the worker's reason. */
static json_t *as_verdict(json_t *result, const st_bench_job *j)
{
	json_t *v = json_object_get(result, "verdict");
	if (v)
		return json_incref(v);
	const char *why = json_string_value(json_object_get(result, "error"));
	return json_pack("{s:s,s:s,s:s,s:s}", "status", "error", "reason", why ? why : "no verdict",
	                 "task", j->task_id, "solution", j->solution);
}

st_status st_queue_sweep(const char *url, const char *arch, const st_bench_job *jobs, int n,
                         const st_verify_opts *o, int trusted, st_bench_progress_fn progress,
                         void *arg, json_t **verdicts, st_err *err)
{
	st_queue q;
	st_status s = st_queue_open(url, &q, err);
	if (s)
		return s;
	char (*ids)[65] = calloc((size_t)(n ? n : 1), sizeof *ids);
	/* The options as every queued job carries them (the worker applies them with
	 * st_verify_opts_apply), so that a remote verify checks what a local one would. */
	json_t *opt = st_verify_opts_json(o);
	if (!ids || !opt) {
		free(ids);
		json_decref(opt);
		st_queue_close(&q);
		return st_err_set(err, ST_E_NOMEM, "bench: out of memory");
	}
	for (int k = 0; k < n && !s; k++) {
		if (!jobs[k].solution)
			continue;
		char *code;
		size_t len;
		if ((s = st_read_file(jobs[k].solution, &code, &len, err)))
			break;
		json_t *job = st_queue_verify_job(jobs[k].task_id, arch, code, len, opt, trusted);
		free(code);
		int state;
		s = st_queue_put(&q, job, 10000, ids[k], &state, err);
		json_decref(job);
	}
	for (int k = 0; k < n && !s; k++) {
		json_t *v = NULL;
		if (jobs[k].solution) {
			if (progress)
				progress(arg, k, n, &jobs[k], NULL);
			json_t *result = NULL;
			/* however long the sweep takes: the workers work through it in order */
			if ((s = st_queue_wait(&q, ids[k], 1e9, &result, err)))
				break;
			v = as_verdict(result, &jobs[k]);
			json_decref(result);
		}
		verdicts[k] = v;
		if (progress)
			progress(arg, k, n, &jobs[k], v);
	}
	json_decref(opt);
	free(ids);
	st_queue_close(&q);
	return s;
}
