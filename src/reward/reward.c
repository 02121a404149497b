/* The RL reward: the rule part from a verdict, the rubric part from an LLM judge, and their
 * product with a breakdown that says how the number came about (a reward nobody can explain is
 * a reward nobody can debug). The judge's answer is looked for the way the Planner's is (the
 * whole answer, a ```json fence, then top-level {...} spans), because judges wrap their JSON
 * as often as planners do; the lookup is kept here rather than shared with plan.c so that the
 * two parsers can evolve apart, and it prefers an object that has "items" so that a stray {}
 * in a reasoning preamble is not mistaken for the verdict. */
#include "reward/reward.h"

#include "llm/llm_prompt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deterministic judging: the same code and verdict should get the same rubric, and a replayed
 * run the same answers from the cache. The rationale is one paragraph; the limit leaves room
 * for models that count their reasoning against it. */
#define JUDGE_TEMPERATURE 0.0
#define JUDGE_MAX_TOKENS 8192

void st_reward_opts_default(st_reward_opts *o)
{
	o->clip = 5;
	o->offset = 0.3;
	o->lambda_gen = 1.0;
	o->lambda_opt = 0.7;
	o->baseline = "reference";
}

static const st_reward_opts *opts_or_default(const st_reward_opts *o, st_reward_opts *tmp)
{
	if (o)
		return o;
	st_reward_opts_default(tmp);
	return tmp;
}

/* The baseline by name: "expert", "best" (the faster of expert and vendor), else "reference". */
static const char *base_name(const st_reward_opts *o)
{
	if (o->baseline && !strcmp(o->baseline, "expert"))
		return "expert";
	return o->baseline && !strcmp(o->baseline, "best") ? "best" : "reference";
}

/* The verdict's speedup against the baseline; "best" falls back to the expert where the verdict
 * has no bar (one from before it, or an imported task's). */
static const json_t *speedup_of(const json_t *verdict, const char *base)
{
	const json_t *sp = json_object_get(verdict, "speedup");
	if (!strcmp(base, "best") && json_object_get(sp, "vs_best"))
		return json_object_get(sp, "vs_best");
	return json_object_get(sp, strcmp(base, "reference") ? "vs_expert" : "vs_reference");
}

static int verdict_ok(const json_t *verdict)
{
	const char *s = json_string_value(json_object_get(verdict, "status"));
	return s && !strcmp(s, "ok");
}

double st_reward_rule(const json_t *verdict, const st_reward_opts *o, double *speedup)
{
	st_reward_opts tmp;
	o = opts_or_default(o, &tmp);
	const json_t *sp = speedup_of(verdict, base_name(o));
	double raw = json_is_number(sp) ? json_number_value(sp) : 0;
	/* A negative or non-finite speedup is a broken verdict, not a slow solution. */
	if (!isfinite(raw) || raw < 0)
		raw = 0;
	if (speedup)
		*speedup = raw;
	if (!verdict_ok(verdict))
		return 0;
	return fmin(raw, o->clip);
}

/* ---- the rubric ---------------------------------------------------------------------------- */

static const char *const gen_items[4] = { "anti_hacking", "bottlenecks", "engineering", "focus" };
static const char *const opt_items[4] = { "anti_hacking", "effectiveness", "alignment", "scope" };

const char *st_rubric_item_name(st_skill skill, int i)
{
	if (i < 0 || i > 3)
		return NULL;
	return skill == ST_SKILL_OPT ? opt_items[i] : gen_items[i];
}

static const char *skill_name(st_skill skill)
{
	return skill == ST_SKILL_OPT ? "opt" : "gen";
}

void st_rubric_free(st_rubric *r)
{
	if (!r)
		return;
	free(r->rationale);
	st_skill skill = r->skill;
	memset(r, 0, sizeof *r);
	r->skill = skill;
}

static st_status check(const json_t *j, st_skill skill, st_rubric *r, st_err *err)
{
	const json_t *items = json_object_get(j, "items");
	if (!items)
		return st_err_set(err, ST_E_INVALID, "rubric: items is missing");
	if (!json_is_object(items))
		return st_err_set(err, ST_E_INVALID, "rubric: items must be an object with the four "
		                  "item scores");
	int sum = 0;
	for (int i = 0; i < 4; i++) {
		const char *name = st_rubric_item_name(skill, i);
		const json_t *v = json_object_get(items, name);
		if (!v)
			return st_err_set(err, ST_E_INVALID, "rubric: items.%s is missing", name);
		if (!json_is_integer(v))
			return st_err_set(err, ST_E_INVALID, "rubric: items.%s must be an integer from 1 "
			                  "to 5", name);
		json_int_t x = json_integer_value(v);
		if (x < 1 || x > 5)
			return st_err_set(err, ST_E_INVALID, "rubric: items.%s is %" JSON_INTEGER_FORMAT
			                  "; it must be from 1 to 5", name, x);
		r->items[i] = (int)x;
		sum += (int)x;
	}
	const json_t *mh = json_object_get(j, "major_hacking");
	if (!mh)
		return st_err_set(err, ST_E_INVALID, "rubric: major_hacking is missing");
	if (!json_is_boolean(mh))
		return st_err_set(err, ST_E_INVALID, "rubric: major_hacking must be true or false");
	const json_t *why = json_object_get(j, "rationale");
	if (!why)
		return st_err_set(err, ST_E_INVALID, "rubric: rationale is missing");
	if (!json_is_string(why))
		return st_err_set(err, ST_E_INVALID, "rubric: rationale must be a string");
	r->rationale = strdup(json_string_value(why));
	if (!r->rationale)
		return st_err_set(err, ST_E_NOMEM, "rubric: out of memory");
	r->major_hacking = json_is_true(mh);
	r->score = (sum / 4.0 - 1) / 4;
	return ST_OK;
}

st_status st_rubric_parse(const char *answer, st_skill skill, st_rubric *r, st_err *err)
{
	memset(r, 0, sizeof *r);
	r->skill = skill;
	if (!answer)
		return st_err_set(err, ST_E_INVALID, "rubric: the answer contains no JSON object");
	/* the object with "items" wins over any other the judge wrote first */
	json_t *j = st_answer_object(answer, "items", "rubric", err);
	if (!j)
		return ST_E_INVALID;
	st_status s = check(j, skill, r, err);
	json_decref(j);
	if (s)
		st_rubric_free(r);
	return s;
}

/* ---- the judge ----------------------------------------------------------------------------- */

static void trace_add(json_t *trace, const char *type, json_t *rec)
{
	if (rec && json_is_array(trace)) {
		json_object_set_new(rec, "type", json_string(type));
		json_object_set_new(rec, "agent", json_string("judge"));
		json_array_append(trace, rec);
	}
	json_decref(rec);
}

/* One call, recorded in the trace. An LLM error is returned in err. */
static st_status ask(st_llm_client *c, const st_llm_msg *m, int n, st_skill skill, json_t *trace,
                     st_llm_response *r, st_err *err)
{
	if (json_is_array(trace)) {
		json_t *jm = json_array();
		for (int i = 0; jm && i < n; i++)
			json_array_append_new(jm, json_pack("{s:s,s:s}", "role", m[i].role, "content",
			                                    m[i].content));
		trace_add(trace, "request", json_pack("{s:s,s:o*}", "skill", skill_name(skill),
		                                      "messages", jm));
	}
	st_llm_request q = {.msgs = m, .n_msgs = n, .temperature = JUDGE_TEMPERATURE,
	                    .max_tokens = JUDGE_MAX_TOKENS, .json_mode = 1};
	memset(r, 0, sizeof *r);
	st_status s = st_llm_complete(c, &q, r, err);
	if (s) {
		trace_add(trace, "llm_error", json_pack("{s:s}", "error", err->msg));
		return s;
	}
	if (json_is_array(trace))
		trace_add(trace, "response",
		          json_pack("{s:s?,s:s?,s:b,s:I,s:I,s:b,s:f,s:f}", "text", r->text, "finish",
		                    r->finish, "truncated", r->truncated, "input_tokens",
		                    (json_int_t)r->input_tokens, "output_tokens",
		                    (json_int_t)r->output_tokens, "cached", r->cached, "latency_s",
		                    r->latency_s, "cost_usd", r->cost_usd));
	return ST_OK;
}

/* Parses an answer; on failure the reason (with a note when the answer was cut off) is in
 * why and recorded in the trace. */
static st_status parse_answer(const st_llm_response *a, st_skill skill, st_rubric *r,
                              json_t *trace, st_err *why)
{
	st_status s = st_rubric_parse(a->text, skill, r, why);
	if (s == ST_E_INVALID && a->truncated) {
		size_t n = strlen(why->msg);
		snprintf(why->msg + n, sizeof why->msg - n, " (the answer stopped at its token limit)");
	}
	if (s)
		trace_add(trace, "invalid", json_pack("{s:s}", "error", why->msg));
	return s;
}

/* The rubric of a judge that could not be understood: it neither helps nor hurts the reward. */
static st_status neutral(st_rubric *r, st_skill skill, const char *why, json_t *trace,
                         st_err *err)
{
	memset(r, 0, sizeof *r);
	r->skill = skill;
	r->neutral = 1;
	r->score = 0.5;
	const char *pre = "judge failed, neutral rubric: ";
	size_t n = strlen(pre) + strlen(why) + 1;
	r->rationale = malloc(n);
	if (!r->rationale)
		return st_err_set(err, ST_E_NOMEM, "rubric: out of memory");
	snprintf(r->rationale, n, "%s%s", pre, why);
	trace_add(trace, "neutral", json_pack("{s:s}", "why", r->rationale));
	return ST_OK;
}

st_status st_rubric_judge(st_llm_client *c, const char *prompts_dir, st_skill skill,
                          const json_t *vars, st_rubric *r, json_t *trace, st_err *err)
{
	memset(r, 0, sizeof *r);
	r->skill = skill;
	char *prompt = NULL;
	st_status s = st_prompt_render(prompts_dir, skill == ST_SKILL_OPT ? "judge-opt" : "judge-gen",
	                               vars, &prompt, err);
	if (s)
		return s;
	st_llm_msg m[3] = {{"user", prompt}};
	st_llm_response a1, a2;
	st_err why = {{0}};
	char text[1400];
	if (ask(c, m, 1, skill, trace, &a1, &why)) {
		snprintf(text, sizeof text, "the judge could not be asked: %s", why.msg);
		s = neutral(r, skill, text, trace, err);
		free(prompt);
		return s;
	}
	if (!parse_answer(&a1, skill, r, trace, &why)) {
		st_llm_response_free(&a1);
		free(prompt);
		return ST_OK;
	}
	/* One repair request with the reason, in the same conversation, so that the judge fixes
	 * its answer rather than judging afresh. */
	char fix[2048];
	snprintf(fix, sizeof fix, "That answer is not a valid rubric: %s. Answer again with the "
	         "corrected JSON object only, in exactly this form: {\"items\": {\"%s\": 1-5, "
	         "\"%s\": 1-5, \"%s\": 1-5, \"%s\": 1-5}, \"major_hacking\": true or false, "
	         "\"rationale\": \"one paragraph\"}", why.msg, st_rubric_item_name(skill, 0),
	         st_rubric_item_name(skill, 1), st_rubric_item_name(skill, 2),
	         st_rubric_item_name(skill, 3));
	m[1] = (st_llm_msg){"assistant", a1.text ? a1.text : ""};
	m[2] = (st_llm_msg){"user", fix};
	if (ask(c, m, 3, skill, trace, &a2, &why)) {
		snprintf(text, sizeof text, "the repair request failed: %s", why.msg);
		s = neutral(r, skill, text, trace, err);
	} else if (parse_answer(&a2, skill, r, trace, &why)) {
		snprintf(text, sizeof text, "the answer was not a valid rubric twice: %s", why.msg);
		s = neutral(r, skill, text, trace, err);
	}
	st_llm_response_free(&a2);
	st_llm_response_free(&a1);
	free(prompt);
	return s;
}

/* ---- the combined reward ------------------------------------------------------------------- */

/* %g, with a decimal point forced where `point` asks for one: the formula shows a weight as
 * 1.0, the way it is written in the options, and a cap as 5. */
static void fmt_num(char *buf, size_t n, double v, int point)
{
	snprintf(buf, n, "%g", v);
	if (point && !strpbrk(buf, ".eEn"))
		strncat(buf, ".0", n - strlen(buf) - 1);
}

json_t *st_reward_combine(const json_t *verdict, const st_rubric *rubric, st_skill skill,
                          const st_reward_opts *o)
{
	st_reward_opts tmp;
	o = opts_or_default(o, &tmp);
	double speedup;
	double rule = st_reward_rule(verdict, o, &speedup);
	int correct = verdict_ok(verdict);
	double lambda = skill == ST_SKILL_OPT ? o->lambda_opt : o->lambda_gen;
	/* A weight above 2 could make the term negative, which would rank a correct solution
	 * below a wrong one (whose reward is 0); the floor keeps correctness the first rule. */
	double term = rubric ? fmax(0, 1 + lambda * (rubric->score - 0.5)) : 1;
	const char *zeroed_by = !correct ? "incorrect"
	                        : rubric && rubric->major_hacking ? "major_hacking"
	                                                          : NULL;
	double reward = zeroed_by ? 0 : (rule + o->offset) * term;

	char c[32], off[32], l[32], formula[160];
	fmt_num(c, sizeof c, o->clip, 0);
	fmt_num(off, sizeof off, o->offset, 0);
	fmt_num(l, sizeof l, lambda, 1);
	if (rubric)
		snprintf(formula, sizeof formula, "(min(speedup, %s) + %s) * (1 + %s * (rubric - 0.5))",
		         c, off, l);
	else
		snprintf(formula, sizeof formula, "min(speedup, %s) + %s", c, off);

	json_t *jr = json_null();
	if (rubric) {
		jr = json_pack("{s:f,s:b,s:b,s:s}", "score", rubric->score, "major_hacking",
		               rubric->major_hacking, "neutral", rubric->neutral, "rationale",
		               rubric->rationale ? rubric->rationale : "");
		for (int i = 0; jr && i < 4; i++)
			if (json_object_set_new(jr, st_rubric_item_name(rubric->skill, i),
			                        json_integer(rubric->items[i]))) {
				json_decref(jr);
				jr = NULL;
			}
		if (!jr)
			return NULL;
	}
	json_t *out = json_pack("{s:b,s:f,s:s,s:f,s:o,s:f,s:f,s:s?,s:s}", "correct", correct,
	                        "speedup", speedup, "baseline", base_name(o), "rule", rule, "rubric",
	                        jr, "lambda", lambda, "reward", reward, "zeroed_by", zeroed_by,
	                        "formula", formula);
	if (out && !strcmp(base_name(o), "best")) { /* which one set the bar */
		const char *bar = json_string_value(json_object_get(json_object_get(verdict, "baselines"),
		                                                    "best"));
		json_object_set_new(out, "bar", json_string(bar ? bar : "expert"));
	}
	return out;
}
