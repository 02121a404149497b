/* `stitch solve`: the Planner, Coder and Verifier agents in a loop over one task (workflow.c). */
#ifndef ST_SOLVE_H
#define ST_SOLVE_H

#include <jansson.h>
#include <stdint.h>

#include "llm/llm.h"
#include "stitch/stitch.h"

typedef struct st_solve_opts {
	const char *task_dir;      /* resolved task folder */
	const char *model;         /* the Coder's model string (llm.h) */
	const char *planner_model; /* NULL: the Coder's */
	const char *verifier_model; /* NULL: the Coder sees the Verifier's facts alone (compiler
	                               lines, worst mismatches, speedups, profile findings); else
	                               this model also turns them into a short note for the Coder
	                               (prompts/verifier-summary.md) */
	const char *out_dir;       /* artifacts: best.<ext>, plan.json, report.json, trajectory.jsonl,
	                              versions/, llm-cache.sqlite */
	const char *prompts_dir;   /* NULL: <stitch home>/prompts */
	int max_attempts;          /* Coder rounds, each verified when it holds code (default 8) */
	int samples;               /* answers per round, asked for and compiled concurrently, verified
	                              one after another; the best drives the next stage (default 1,
	                              at most 16) */
	int max_replans;           /* default 2 */
	int replan_after;          /* replan when this many attempts in a row failed to compile, were
	                              all incorrect, or stagnated (default 3) */
	double target_speedup;     /* vs the reference; reaching it ends the run (default 2) */
	int64_t max_tokens;        /* input + output over all calls; 0: no limit (default 2e6) */
	double max_time_s;         /* wall time of the run (default 3600) */
	double max_cost_usd;       /* 0: no limit */
	double temperature;        /* default 0.2 */
	int run_index;             /* tells apart runs of the same task and model (stitch eval's
	                              samples): requests of run i are other samples to the model
	                              and to the answer cache (default 0) */
	int max_output_tokens;     /* per call (default 16384) */
	st_verify_opts verify;     /* backend, arch, sets, timing... for every version */
	st_verify_slot verify_slot; /* where they verify (stitch eval: its GPU lock); zeroed: alone */
	/* NULL: st_verify; else what verifies each version instead (stitch eval sends them to the
	 * queue's workers), with the same contract and verify_arg as its first argument */
	st_status (*verify_fn)(void *arg, const char *task_dir, const char *path,
	                       const st_verify_opts *o, const st_verify_slot *slot,
	                       json_t **verdict, st_err *err);
	void *verify_arg;
	st_llm_opts llm;           /* timeouts, retries, prices, cache (default: in out_dir), replay */
	void (*progress)(void *arg, const char *line);
	void *progress_arg;
} st_solve_opts;

void st_solve_opts_default(st_solve_opts *o);

/* Run the loop. ST_OK whenever a report was written (*report set, also when no version was
 * correct: report "state" says why); an error before any work (bad model string, no key, no
 * task, unwritable folder) or when the artifacts cannot be written. */
st_status st_solve(const st_solve_opts *o, json_t **report, st_err *err);

#endif
