/* The trivial-answer tolerance audit (`stitch tasks --audit`): a task whose check admits an
 * answer that knows nothing of the inputs (all zeros, all NaN, the reference output's mean, the
 * first input passed through, the reference's answer to other inputs) is broken, however well its
 * reference and experts do. Each trivial answer is a generated solution run through the real
 * st_verify, so the audit judges with exactly the task's tolerances, validators and metamorphic
 * checks. */
#ifndef ST_TOL_AUDIT_H
#define ST_TOL_AUDIT_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include "common/st_error.h"

enum { ST_AUDIT_ZEROS, ST_AUDIT_NAN, ST_AUDIT_MEAN, ST_AUDIT_PASSTHROUGH, ST_AUDIT_OTHER_SEED,
       ST_AUDIT_N };

/* What a generated answer's st_run returns when the answer is the reference's own on these
 * inputs (a constant output for mean, one that does not depend on the inputs for other_seed,
 * one that is the input for passthrough, all zeros for zeros):
 * the verdict then says "st_run returned 7717" and the answer counts as skipped. */
#define ST_AUDIT_SAME 7717
/* ... and when other_seed cannot be given: a later seed drew the very inputs of the last one. */
#define ST_AUDIT_REPEAT 7718

/* "zeros", "nan", "mean", "passthrough", "other_seed". */
const char *st_audit_answer_name(int answer);

typedef struct st_audit_opts {
	const char *backend; /* "host" (default) or "cuda" */
	const char *sets;    /* comma list as st_verify_opts.sets; NULL: small and every hidden set
	                        on the host (the eval sets take minutes on a CPU), every set on cuda */
	int seeds;           /* correctness seeds per set and answer; 0: 3, as st_verify (other_seed
	                        needs two) */
	uint64_t seed;       /* 0: a fixed seed, so an audit is reproducible */
	double timeout_s;    /* one runner request; 0: 120 */
	void (*progress)(void *arg, const char *line);
	void *progress_arg;
} st_audit_opts;

/* Audit the task in task_dir: *report = {"task": id, "backend", "sets": [{"set": label,
 * "answers": {name: {"outcome": "rejected" | "admitted" | "skipped" | "error", "why": text}}}],
 * "admitted": n, "errors": n}. "rejected": the task's check failed the answer, as it must;
 * "admitted": it passed it (the task is broken); "skipped": the answer does not apply (the
 * first input does not fit the first output, no float output for NaN); "error": the answer
 * could not be judged (it failed to compile or run, or the verifier failed). ST_OK whenever
 * the report was built; ST_E_INVALID for a task that cannot be loaded. */
st_status st_audit_task(const char *task_dir, const st_audit_opts *o, json_t **report,
                        st_err *err);

/* A report as a table: one row per set, one column per answer, then the reason of every answer
 * that was not rejected. */
void st_audit_print(const json_t *report, FILE *f);

#endif
