/* The pieces the agents are made of: the task's variables for the prompt templates (the templates
 * themselves and reading a JSON object from an answer: llm/llm_prompt.h), code taken out of a
 * model's answer, the Planner's JSON plan checked against its schema, and the Verifier agent's
 * feedback made from a verdict. The workflow (workflow.c) strings them together. */
#ifndef ST_AGENTS_H
#define ST_AGENTS_H

#include <jansson.h>

#include "common/st_error.h"
#include "llm/llm_prompt.h" /* prompt templates and the JSON object of an answer */

/* ---- task_vars.c --------------------------------------------------------------------------- */

struct st_task;
/* A new object with task_id, task_description, reference_source (host: the C reference), sizes,
 * policy, arch, abi, reference_profile, backend, code_fence and target_speedup; NULL when out of
 * memory. */
json_t *st_agent_task_vars(const struct st_task *t, int host, const char *arch,
                           double target_speedup, const char *reference_profile);
/* For the prompts: the attempts so far (history entries: attempt, stage, status, speedup) and
 * the plan's steps, as text; NULL when out of memory. */
char *st_agent_history_text(const json_t *history);
char *st_agent_steps_text(const json_t *plan);

/* ---- extract.c ----------------------------------------------------------------------------- */

typedef enum st_extract_result {
	ST_EXTRACT_OK,
	ST_EXTRACT_NONE,      /* no fenced code block */
	ST_EXTRACT_SEVERAL,   /* more than one block that is a whole solution (defines st_run) */
	ST_EXTRACT_TRUNCATED, /* a fence opened and never closed, or the answer hit its token limit */
	ST_EXTRACT_NO_ABI,    /* code, but nothing that defines st_run */
} st_extract_result;

/* Take the solution out of a model's answer: the one fenced block (```cuda, ```cu, ```cpp,
 * ```c++, ```c or bare ```) that defines st_run. Blocks that do not (snippets, shell lines) are
 * ignored. `truncated` says the answer stopped at its token limit. *code is allocated on
 * ST_EXTRACT_OK; *why is a static sentence for the model on any other result. */
st_extract_result st_extract_code(const char *answer, int truncated, char **code,
                                  const char **why);

/* ---- plan.c -------------------------------------------------------------------------------- */

/* Parse and check the Planner's answer: a JSON object, bare or in a ```json block, with
 *   summary      string, non-empty
 *   steps        array of >= 1 objects: what (string, required), kernels (array of strings),
 *                fusion (string), host_setup (string)
 *   bottlenecks  array of strings
 *   risks        array of strings
 *   constraints  array of strings
 * Missing optional arrays become empty ones; unknown fields are kept. *plan is a new reference
 * on success; on failure err says which field is wrong (the text is sent back to the model in
 * the one repair request). */
st_status st_plan_parse(const char *answer, json_t **plan, st_err *err);

/* ---- feedback.c ---------------------------------------------------------------------------- */

typedef enum st_stage {
	ST_STAGE_PLAN,
	ST_STAGE_DRAFT,
	ST_STAGE_REPAIR_COMPILE,
	ST_STAGE_REPAIR_CORRECT,
	ST_STAGE_OPTIMISE,
	ST_STAGE_DONE,
} st_stage;

const char *st_stage_name(st_stage s);

/* The Verifier agent's reading of one verdict: concise feedback text for the Coder (compile
 * diagnostics with the offending source lines, the worst mismatches, speedups, profile
 * findings) and the stage that should come next. `source` is the code that was verified (for
 * quoting lines); `target_speedup` is the goal vs the reference. *text is allocated. */
st_stage st_verifier_feedback(const json_t *verdict, const char *source, double target_speedup,
                              char **text);

/* What a self-refining model is told of its last answer (`stitch eval --mode refine`): the
 * compile errors or policy hits with their lines, else pass or fail and the status only: no
 * mismatch, no timing, no profile. Allocated; NULL when out of memory. */
char *st_refine_feedback(const json_t *verdict, const char *source);

#endif
