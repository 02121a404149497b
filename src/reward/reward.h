/* The reward an RL run gives one solution: a rule part read from the Verifier's verdict (zero
 * unless the outputs were correct, otherwise the speedup, capped so that one lucky timing
 * cannot dominate a batch), a rubric part from an LLM judge that reads the code (does it solve
 * the task honestly, and well), and their product. The judge is a second opinion, never a gate
 * on its own: a judge that cannot be understood yields a neutral rubric rather than an error,
 * so that one flaky call does not lose a whole rollout; only a major hack it reports zeroes the
 * reward. */
#ifndef ST_REWARD_H
#define ST_REWARD_H

#include <jansson.h>

#include "common/st_error.h"
#include "llm/llm.h"

typedef enum st_skill { ST_SKILL_GEN, ST_SKILL_OPT } st_skill; /* task-to-code, optimisation */

typedef struct st_reward_opts {
	double clip;          /* speedup cap, default 5 */
	double offset;        /* added to the capped speedup, default 0.3 */
	double lambda_gen;    /* rubric weight for task-to-code, default 1.0 */
	double lambda_opt;    /* for optimisation, default 0.7 */
	const char *baseline; /* "reference" (default), "expert" or "best" (the faster of expert and
	                       * vendor, docs/bench.md): which speedup counts */
} st_reward_opts;

void st_reward_opts_default(st_reward_opts *o);

/* Rule reward: 0 unless the verdict's status is "ok"; else min(speedup, clip). *speedup (may be
 * NULL) gets the raw speedup against o->baseline (0 when absent). o NULL: the defaults. */
double st_reward_rule(const json_t *verdict, const st_reward_opts *o, double *speedup);

typedef struct st_rubric {
	st_skill skill;
	int items[4];      /* 1..5 */
	double score;      /* normalised to [0,1]: (mean(items) - 1) / 4 */
	int major_hacking;
	int neutral;       /* the judge failed twice: score 0.5, items 0, flagged */
	char *rationale;   /* the judge's one-paragraph reason, or the failure */
} st_rubric;

/* gen: anti_hacking, bottlenecks, engineering, focus; opt: anti_hacking, effectiveness,
 * alignment, scope. NULL for i outside 0..3. */
const char *st_rubric_item_name(st_skill skill, int i);

/* Parse and validate a judge's answer (a JSON object, bare or fenced):
 * {"items": {NAME: 1..5 integer, ... all four}, "major_hacking": bool, "rationale": string}.
 * Errors name the field (the text goes back to the judge in its one repair request). On
 * failure *r is left empty (safe to free). */
st_status st_rubric_parse(const char *answer, st_skill skill, st_rubric *r, st_err *err);
void st_rubric_free(st_rubric *r);

/* Ask the judge (prompts_dir/judge-gen.md or judge-opt.md rendered with `vars`), parse; on a bad
 * answer one repair request in the same conversation (the reason included); a second failure
 * (or an LLM error) gives a neutral rubric (score 0.5, neutral = 1, rationale says why) and
 * ST_OK. Only a template that cannot be rendered is an error. `trace` (a JSON array, may be
 * NULL) gets the messages and answers appended as JSON objects. */
st_status st_rubric_judge(st_llm_client *c, const char *prompts_dir, st_skill skill,
                          const json_t *vars, st_rubric *r, json_t *trace, st_err *err);

/* Combined reward: 0 if the verdict is not ok or rubric->major_hacking; otherwise
 * (min(speedup, clip) + offset) * (1 + lambda * (rubric->score - 0.5)), lambda by skill, the
 * rubric term floored at 0. rubric may be NULL (rule only: rubric term 1). Returns a new
 * breakdown object (NULL when out of memory):
 * {"correct", "speedup", "baseline", "rule", "rubric": {items by name, "score",
 *  "major_hacking", "neutral", "rationale"} or null, "lambda", "reward",
 *  "zeroed_by" ("incorrect", "major_hacking" or null), "formula"}, and with the baseline
 *  "best" "bar": "expert" or "vendor", which one set it. */
json_t *st_reward_combine(const json_t *verdict, const st_rubric *rubric, st_skill skill,
                          const st_reward_opts *o);

#endif
