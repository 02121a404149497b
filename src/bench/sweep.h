/* Running a bench sweep: the jobs (one task and the solution to verify for it) and the loop
 * that verifies them in order while the next ones compile. */
#ifndef ST_BENCH_SWEEP_H
#define ST_BENCH_SWEEP_H

#include <jansson.h>

#include "common/st_error.h"
#include "stitch/stitch.h"

typedef struct st_bench_job {
	const char *task_dir;
	const char *task_id;   /* "t1/softmax" */
	int tier;
	const char *solution;  /* NULL: missing from the solutions folder (a "missing" row) */
} st_bench_job;

/* Called before a job that has a solution (verdict NULL) and after every job (verdict set, or
 * NULL for a missing solution). */
typedef void (*st_bench_progress_fn)(void *arg, int k, int n, const st_bench_job *job,
                                     const json_t *verdict);

/* Verify every job with `o` in `slot` (NULL: a lone verify each), compiling ahead with
 * `threads` workers. verdicts[k] receives job k's verdict (NULL when its solution is missing);
 * the caller frees them. A job the verifier cannot run (a bad task, a baseline that fails) gets
 * {"status": "error", "reason": ...} and the sweep goes on; only a missing GPU stops it
 * (ST_E_NODEVICE). */
st_status st_bench_sweep(const st_bench_job *jobs, int n, const st_verify_opts *o,
                         const st_verify_slot *slot, int threads, st_bench_progress_fn progress,
                         void *arg, json_t **verdicts, st_err *err);

#endif
