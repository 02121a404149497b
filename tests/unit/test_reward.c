/* Unit tests for the RL reward: the rule part read from verdicts (zero unless correct, capped,
 * the chosen baseline), the combined reward and its breakdown (zeroed for wrong or hacked
 * solutions, the rubric term by skill, rule-only and neutral rubrics), parsing of the judge's
 * answer with errors that name the field, the judge prompts rendering with the documented
 * variables, and the judge itself against the scripted fake server (tests/fake_llm): a good
 * answer, a bad one repaired with the reason in the same conversation, two bad ones and a
 * server that always fails, both of which give a neutral rubric rather than an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/agents.h"
#include "fake_llm.h"
#include "llm/llm.h"
#include "reward/reward.h"

#define EPS 1e-12
#define PROMPTS STITCH_SOURCE_DIR "/prompts"

#define assert_mentions(hay, needle)                                                            \
	do {                                                                                    \
		if (!strcasestr((hay), (needle)))                                               \
			fail_msg("\"%s\" does not mention \"%s\"", (hay), (needle));            \
	} while (0)

/* What a test started, so that teardown can stop it even when an assertion jumps out early. */
static fake_llm *g_srv;
static st_llm_client *g_cli;
static json_t *g_trace;
static st_rubric g_rub;

static int teardown(void **state)
{
	(void)state;
	st_llm_client_free(g_cli);
	g_cli = NULL;
	fake_llm_stop(g_srv);
	g_srv = NULL;
	json_decref(g_trace);
	g_trace = NULL;
	st_rubric_free(&g_rub);
	return 0;
}

static json_t *verdict(const char *status, double vs_ref, double vs_exp)
{
	json_t *v = json_pack("{s:s,s:{s:f,s:f}}", "status", status, "speedup", "vs_reference",
	                      vs_ref, "vs_expert", vs_exp);
	assert_non_null(v);
	return v;
}

/* ---- rule reward --------------------------------------------------------------------------- */

static void test_rule(void **state)
{
	(void)state;
	st_reward_opts o;
	st_reward_opts_default(&o);
	assert_float_equal(o.clip, 5, EPS);
	assert_float_equal(o.offset, 0.3, EPS);
	assert_float_equal(o.lambda_gen, 1.0, EPS);
	assert_float_equal(o.lambda_opt, 0.7, EPS);
	assert_string_equal(o.baseline, "reference");

	double sp = -1;
	json_t *v = verdict("incorrect", 3, 4);
	assert_float_equal(st_reward_rule(v, &o, &sp), 0, 0);
	assert_float_equal(sp, 3, EPS); /* still reported, it just does not count */
	json_decref(v);

	v = verdict("ok", 3, 1.5);
	assert_float_equal(st_reward_rule(v, &o, &sp), 3, EPS);
	assert_float_equal(sp, 3, EPS);
	assert_float_equal(st_reward_rule(v, NULL, NULL), 3, EPS);
	o.baseline = "expert";
	assert_float_equal(st_reward_rule(v, &o, &sp), 1.5, EPS);
	assert_float_equal(sp, 1.5, EPS);
	o.baseline = "reference";
	json_decref(v);

	v = verdict("ok", 9, 1);
	assert_float_equal(st_reward_rule(v, &o, &sp), 5, EPS);
	assert_float_equal(sp, 9, EPS);
	json_decref(v);

	/* No speedup at all (a verdict that stopped early), or no verdict. */
	v = json_pack("{s:s}", "status", "ok");
	assert_float_equal(st_reward_rule(v, &o, &sp), 0, 0);
	assert_float_equal(sp, 0, 0);
	json_decref(v);
	assert_float_equal(st_reward_rule(NULL, &o, &sp), 0, 0);
}

/* ---- combined reward ----------------------------------------------------------------------- */

static st_rubric rubric_of(st_skill skill, int item, int major, int neutral)
{
	st_rubric r;
	memset(&r, 0, sizeof r);
	r.skill = skill;
	for (int i = 0; i < 4; i++)
		r.items[i] = neutral ? 0 : item;
	r.score = neutral ? 0.5 : (item - 1) / 4.0;
	r.major_hacking = major;
	r.neutral = neutral;
	r.rationale = (char *)"because";
	return r;
}

static double reward_of(const json_t *b)
{
	assert_non_null(b);
	const json_t *x = json_object_get(b, "reward");
	assert_true(json_is_number(x));
	return json_number_value(x);
}

/* --baseline best: the verdict's vs_best and which one set the bar; the expert where the verdict
 * has no bar */
static void test_best(void **state)
{
	(void)state;
	st_reward_opts o;
	st_reward_opts_default(&o);
	o.baseline = "best";
	json_t *v = verdict("ok", 3, 1.5);
	double sp = 0;
	assert_float_equal(st_reward_rule(v, &o, &sp), 1.5, EPS); /* no bar: vs_expert */
	json_object_set_new(json_object_get(v, "speedup"), "vs_best", json_real(0.8));
	json_object_set_new(v, "baselines", json_pack("{s:s,s:f}", "best", "vendor", "best_ms", 1.0));
	assert_float_equal(st_reward_rule(v, &o, &sp), 0.8, EPS);
	json_t *b = st_reward_combine(v, NULL, ST_SKILL_GEN, &o);
	assert_string_equal(json_string_value(json_object_get(b, "baseline")), "best");
	assert_string_equal(json_string_value(json_object_get(b, "bar")), "vendor");
	assert_float_equal(json_number_value(json_object_get(b, "reward")), 0.8 + 0.3, EPS);
	json_decref(b);
	o.baseline = "expert";
	b = st_reward_combine(v, NULL, ST_SKILL_GEN, &o);
	assert_null(json_object_get(b, "bar"));
	assert_float_equal(json_number_value(json_object_get(b, "speedup")), 1.5, EPS);
	json_decref(b);
	json_decref(v);
}

static void test_combine(void **state)
{
	(void)state;
	st_reward_opts o;
	st_reward_opts_default(&o);
	st_rubric top = rubric_of(ST_SKILL_GEN, 5, 0, 0);

	json_t *v = verdict("incorrect", 2, 2);
	json_t *b = st_reward_combine(v, &top, ST_SKILL_GEN, &o);
	assert_float_equal(reward_of(b), 0, 0);
	assert_false(json_is_true(json_object_get(b, "correct")));
	assert_string_equal(json_string_value(json_object_get(b, "zeroed_by")), "incorrect");
	json_decref(b);
	json_decref(v);

	v = verdict("ok", 2, 1);
	st_rubric hack = rubric_of(ST_SKILL_GEN, 5, 1, 0);
	b = st_reward_combine(v, &hack, ST_SKILL_GEN, &o);
	assert_float_equal(reward_of(b), 0, 0);
	assert_string_equal(json_string_value(json_object_get(b, "zeroed_by")), "major_hacking");
	json_decref(b);

	b = st_reward_combine(v, &top, ST_SKILL_GEN, &o);
	assert_float_equal(reward_of(b), 2.3 * 1.5, 1e-9);
	assert_true(json_is_true(json_object_get(b, "correct")));
	assert_true(json_is_null(json_object_get(b, "zeroed_by")));
	assert_float_equal(json_number_value(json_object_get(b, "speedup")), 2, EPS);
	assert_float_equal(json_number_value(json_object_get(b, "rule")), 2, EPS);
	assert_float_equal(json_number_value(json_object_get(b, "lambda")), 1.0, EPS);
	assert_string_equal(json_string_value(json_object_get(b, "baseline")), "reference");
	assert_string_equal(json_string_value(json_object_get(b, "formula")),
	                    "(min(speedup, 5) + 0.3) * (1 + 1.0 * (rubric - 0.5))");
	const json_t *jr = json_object_get(b, "rubric");
	assert_true(json_is_object(jr));
	for (int i = 0; i < 4; i++)
		assert_int_equal(json_integer_value(json_object_get(jr, st_rubric_item_name(ST_SKILL_GEN,
		                                                                            i))), 5);
	assert_float_equal(json_number_value(json_object_get(jr, "score")), 1, EPS);
	assert_false(json_is_true(json_object_get(jr, "major_hacking")));
	assert_false(json_is_true(json_object_get(jr, "neutral")));
	assert_string_equal(json_string_value(json_object_get(jr, "rationale")), "because");
	json_decref(b);

	st_rubric top_opt = rubric_of(ST_SKILL_OPT, 5, 0, 0);
	b = st_reward_combine(v, &top_opt, ST_SKILL_OPT, &o);
	assert_float_equal(reward_of(b), 2.3 * 1.35, 1e-9);
	assert_float_equal(json_number_value(json_object_get(b, "lambda")), 0.7, EPS);
	assert_string_equal(json_string_value(json_object_get(b, "formula")),
	                    "(min(speedup, 5) + 0.3) * (1 + 0.7 * (rubric - 0.5))");
	assert_non_null(json_object_get(json_object_get(b, "rubric"), "effectiveness"));
	json_decref(b);

	b = st_reward_combine(v, NULL, ST_SKILL_GEN, &o);
	assert_float_equal(reward_of(b), 2.3, 1e-9);
	assert_true(json_is_null(json_object_get(b, "rubric")));
	assert_non_null(json_string_value(json_object_get(b, "formula")));
	json_decref(b);

	st_rubric mid = rubric_of(ST_SKILL_GEN, 0, 0, 1);
	b = st_reward_combine(v, &mid, ST_SKILL_GEN, &o);
	assert_float_equal(reward_of(b), 2.3, 1e-9);
	assert_true(json_is_true(json_object_get(json_object_get(b, "rubric"), "neutral")));
	json_decref(b);

	/* The worst rubric halves the gen reward; a huge speedup is capped. */
	st_rubric low = rubric_of(ST_SKILL_GEN, 1, 0, 0);
	b = st_reward_combine(v, &low, ST_SKILL_GEN, NULL);
	assert_float_equal(reward_of(b), 2.3 * 0.5, 1e-9);
	json_decref(b);
	json_decref(v);
	v = verdict("ok", 40, 3);
	b = st_reward_combine(v, NULL, ST_SKILL_GEN, &o);
	assert_float_equal(reward_of(b), 5.3, 1e-9);
	json_decref(b);

	/* Other options show in the formula; the expert baseline picks vs_expert. */
	o.clip = 10;
	o.offset = 0.5;
	o.lambda_gen = 2;
	o.baseline = "expert";
	b = st_reward_combine(v, &top, ST_SKILL_GEN, &o);
	assert_float_equal(reward_of(b), 3.5 * 2, 1e-9);
	assert_string_equal(json_string_value(json_object_get(b, "baseline")), "expert");
	assert_string_equal(json_string_value(json_object_get(b, "formula")),
	                    "(min(speedup, 10) + 0.5) * (1 + 2.0 * (rubric - 0.5))");
	json_decref(b);
	json_decref(v);
}

/* ---- rubric parsing ------------------------------------------------------------------------ */

#define GOOD_GEN                                                                                \
	"{\"items\": {\"anti_hacking\": 5, \"bottlenecks\": 4, \"engineering\": 3, "           \
	"\"focus\": 2}, \"major_hacking\": false, \"rationale\": \"Fused and honest.\"}"

static void test_item_names(void **state)
{
	(void)state;
	static const char *const gen[] = { "anti_hacking", "bottlenecks", "engineering", "focus" };
	static const char *const opt[] = { "anti_hacking", "effectiveness", "alignment", "scope" };
	for (int i = 0; i < 4; i++) {
		assert_string_equal(st_rubric_item_name(ST_SKILL_GEN, i), gen[i]);
		assert_string_equal(st_rubric_item_name(ST_SKILL_OPT, i), opt[i]);
	}
	assert_null(st_rubric_item_name(ST_SKILL_GEN, 4));
	assert_null(st_rubric_item_name(ST_SKILL_OPT, -1));
}

static void test_parse_good(void **state)
{
	(void)state;
	st_err err = { { 0 } };
	static const char *const answers[] = {
		GOOD_GEN,
		"  \n" GOOD_GEN "\n",
		"Here is my judgement.\n\n```json\n" GOOD_GEN "\n```\n",
		"```\n" GOOD_GEN "\n```",
		/* A stray object in a preamble is not taken for the rubric. */
		"Thinking about {} and {\"x\": 1} first.\n" GOOD_GEN " Done.",
	};
	for (size_t k = 0; k < sizeof answers / sizeof answers[0]; k++) {
		if (st_rubric_parse(answers[k], ST_SKILL_GEN, &g_rub, &err) != ST_OK)
			fail_msg("answer %zu: %s", k, err.msg);
		assert_int_equal(g_rub.skill, ST_SKILL_GEN);
		assert_int_equal(g_rub.items[0], 5);
		assert_int_equal(g_rub.items[1], 4);
		assert_int_equal(g_rub.items[2], 3);
		assert_int_equal(g_rub.items[3], 2);
		assert_float_equal(g_rub.score, (3.5 - 1) / 4, EPS);
		assert_false(g_rub.major_hacking);
		assert_false(g_rub.neutral);
		assert_string_equal(g_rub.rationale, "Fused and honest.");
		st_rubric_free(&g_rub);
	}

	const char *opt = "{\"items\": {\"anti_hacking\": 1, \"effectiveness\": 1, \"alignment\": 1,"
	                  " \"scope\": 1}, \"major_hacking\": true, \"rationale\": \"Cached.\"}";
	if (st_rubric_parse(opt, ST_SKILL_OPT, &g_rub, &err) != ST_OK)
		fail_msg("opt: %s", err.msg);
	assert_float_equal(g_rub.score, 0, EPS);
	assert_true(g_rub.major_hacking);
	assert_int_equal(g_rub.skill, ST_SKILL_OPT);
}

static void expect_bad(const char *answer, st_skill skill, const char *field)
{
	st_err err = { { 0 } };
	if (st_rubric_parse(answer, skill, &g_rub, &err) == ST_OK)
		fail_msg("parsed: %s", answer);
	assert_int_equal(st_rubric_parse(answer, skill, &g_rub, &err), ST_E_INVALID);
	assert_mentions(err.msg, field);
	assert_null(g_rub.rationale);
	st_rubric_free(&g_rub);
}

static void test_parse_bad(void **state)
{
	(void)state;
	expect_bad("{\"items\": {\"anti_hacking\": 5, \"bottlenecks\": 4, \"engineering\": 3}, "
	           "\"major_hacking\": false, \"rationale\": \"x\"}", ST_SKILL_GEN, "items.focus");
	expect_bad("{\"items\": {\"anti_hacking\": 5, \"bottlenecks\": 6, \"engineering\": 3, "
	           "\"focus\": 2}, \"major_hacking\": false, \"rationale\": \"x\"}", ST_SKILL_GEN,
	           "items.bottlenecks");
	expect_bad("{\"items\": {\"anti_hacking\": 0, \"bottlenecks\": 4, \"engineering\": 3, "
	           "\"focus\": 2}, \"major_hacking\": false, \"rationale\": \"x\"}", ST_SKILL_GEN,
	           "items.anti_hacking");
	expect_bad("{\"items\": {\"anti_hacking\": 5, \"bottlenecks\": 4, \"engineering\": 3.5, "
	           "\"focus\": 2}, \"major_hacking\": false, \"rationale\": \"x\"}", ST_SKILL_GEN,
	           "items.engineering");
	expect_bad("{\"items\": {\"anti_hacking\": 5, \"bottlenecks\": 4, \"engineering\": \"3\", "
	           "\"focus\": 2}, \"major_hacking\": false, \"rationale\": \"x\"}", ST_SKILL_GEN,
	           "integer");
	expect_bad("{\"items\": {\"anti_hacking\": 5, \"bottlenecks\": 4, \"engineering\": 3, "
	           "\"focus\": 2}, \"rationale\": \"x\"}", ST_SKILL_GEN, "major_hacking");
	expect_bad("{\"items\": {\"anti_hacking\": 5, \"bottlenecks\": 4, \"engineering\": 3, "
	           "\"focus\": 2}, \"major_hacking\": \"no\", \"rationale\": \"x\"}", ST_SKILL_GEN,
	           "major_hacking");
	expect_bad("{\"items\": {\"anti_hacking\": 5, \"bottlenecks\": 4, \"engineering\": 3, "
	           "\"focus\": 2}, \"major_hacking\": false}", ST_SKILL_GEN, "rationale");
	expect_bad("{\"major_hacking\": false, \"rationale\": \"x\"}", ST_SKILL_GEN, "items");
	expect_bad("{\"items\": [5, 4, 3, 2], \"major_hacking\": false, \"rationale\": \"x\"}",
	           ST_SKILL_GEN, "items");
	/* gen names under the opt skill: the first opt-only item is missing. */
	expect_bad(GOOD_GEN, ST_SKILL_OPT, "items.effectiveness");
	expect_bad("I think it is a 4 overall.", ST_SKILL_GEN, "no JSON object");
	expect_bad("{\"items\": {\"anti_hacking\": 5,, }", ST_SKILL_GEN, "never closed");
	expect_bad("{\"items\": {\"anti_hacking\": 5,, }}", ST_SKILL_GEN, "not valid JSON");
	expect_bad("", ST_SKILL_GEN, "no JSON object");
	expect_bad(NULL, ST_SKILL_GEN, "no JSON object");
}

/* ---- prompts ------------------------------------------------------------------------------- */

static json_t *judge_vars(void)
{
	json_t *v = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "task_description",
	                      "y = 2x + b for a float vector", "reference_source",
	                      "void st_run(void) { int a[2] = {{0}}; }", "policy",
	                      "expert mode; libraries allowed: none", "code",
	                      "__global__ void k() {}", "verdict_summary",
	                      "status ok; 2.00x vs reference, 1.10x vs expert", "previous_code",
	                      "__global__ void old() {}", "feedback", "Fuse the two passes.");
	assert_non_null(v);
	return v;
}

static void test_prompts_render(void **state)
{
	(void)state;
	json_t *vars = judge_vars();
	st_err err = { { 0 } };
	char *out = NULL;
	if (st_prompt_render(PROMPTS, "judge-gen", vars, &out, &err) != ST_OK)
		fail_msg("judge-gen: %s", err.msg);
	for (int i = 0; i < 4; i++)
		assert_non_null(strstr(out, st_rubric_item_name(ST_SKILL_GEN, i)));
	assert_non_null(strstr(out, "major_hacking"));
	assert_non_null(strstr(out, "y = 2x + b"));
	assert_non_null(strstr(out, "{{0}}")); /* values are inserted verbatim */
	assert_null(strstr(out, "Fuse the two passes."));
	free(out);
	if (st_prompt_render(PROMPTS, "judge-opt", vars, &out, &err) != ST_OK)
		fail_msg("judge-opt: %s", err.msg);
	for (int i = 0; i < 4; i++)
		assert_non_null(strstr(out, st_rubric_item_name(ST_SKILL_OPT, i)));
	assert_non_null(strstr(out, "Fuse the two passes."));
	assert_non_null(strstr(out, "__global__ void old() {}"));
	free(out);
	/* judge-gen needs no opt-only variable. */
	json_object_del(vars, "previous_code");
	json_object_del(vars, "feedback");
	if (st_prompt_render(PROMPTS, "judge-gen", vars, &out, &err) != ST_OK)
		fail_msg("judge-gen without opt variables: %s", err.msg);
	free(out);
	json_decref(vars);
}

/* ---- the judge against the fake server ----------------------------------------------------- */

static void start(const fake_step *steps, int n, int max_retries)
{
	g_srv = fake_llm_start(steps, n);
	assert_non_null(g_srv);
	char spec[128];
	snprintf(spec, sizeof spec, "openai-compat:http://127.0.0.1:%d/v1:judge",
	         fake_llm_port(g_srv));
	st_llm_model m;
	st_llm_opts o;
	st_llm_opts_default(&o);
	o.backoff_base_s = 0.01;
	o.backoff_max_s = 0.2;
	o.timeout_s = 2;
	o.max_retries = max_retries;
	st_err err = { { 0 } };
	if (st_llm_model_parse(spec, &m, &err) != ST_OK)
		fail_msg("parse %s: %s", spec, err.msg);
	if (st_llm_client_new(&m, &o, &g_cli, &err) != ST_OK)
		fail_msg("client: %s", err.msg);
	g_trace = json_array();
	assert_non_null(g_trace);
}

static void judge(st_skill skill)
{
	json_t *vars = judge_vars();
	st_err err = { { 0 } };
	st_status s = st_rubric_judge(g_cli, PROMPTS, skill, vars, &g_rub, g_trace, &err);
	json_decref(vars);
	if (s != ST_OK)
		fail_msg("judge: %s", err.msg);
}

/* How many trace records have this type. */
static int traced(const char *type)
{
	int n = 0;
	size_t i;
	json_t *x;
	json_array_foreach(g_trace, i, x) {
		const char *t = json_string_value(json_object_get(x, "type"));
		n += t && !strcmp(t, type);
	}
	return n;
}

static void test_judge_good(void **state)
{
	(void)state;
	char *body = fake_openai_body("```json\n" GOOD_GEN "\n```", "stop", 100, 40);
	assert_non_null(body);
	fake_step steps[] = { { .status = 200, .body = body } };
	start(steps, 1, 0);
	free(body);
	judge(ST_SKILL_GEN);
	assert_int_equal(fake_llm_count(g_srv), 1);
	assert_false(g_rub.neutral);
	assert_int_equal(g_rub.items[0], 5);
	assert_float_equal(g_rub.score, 0.625, EPS);
	assert_string_equal(g_rub.rationale, "Fused and honest.");
	/* The rendered prompt went out as the one user message. */
	const char *sent = fake_llm_body(g_srv, 0);
	assert_non_null(sent);
	assert_non_null(strstr(sent, "major_hacking"));
	assert_non_null(strstr(sent, "y = 2x + b"));
	assert_int_equal(traced("request"), 1);
	assert_int_equal(traced("response"), 1);
	assert_int_equal(traced("invalid"), 0);
}

static void test_judge_repair(void **state)
{
	(void)state;
	char *bad = fake_openai_body("{\"items\": {\"anti_hacking\": 5, \"effectiveness\": 4, "
	                             "\"alignment\": 9, \"scope\": 2}, \"major_hacking\": false, "
	                             "\"rationale\": \"x\"}", "stop", 100, 40);
	char *good = fake_openai_body("{\"items\": {\"anti_hacking\": 5, \"effectiveness\": 4, "
	                              "\"alignment\": 5, \"scope\": 2}, \"major_hacking\": false, "
	                              "\"rationale\": \"Better.\"}", "stop", 120, 40);
	assert_non_null(bad);
	assert_non_null(good);
	fake_step steps[] = { { .status = 200, .body = bad }, { .status = 200, .body = good } };
	start(steps, 2, 0);
	free(bad);
	free(good);
	judge(ST_SKILL_OPT);
	assert_int_equal(fake_llm_count(g_srv), 2);
	assert_false(g_rub.neutral);
	assert_int_equal(g_rub.items[2], 5);
	assert_string_equal(g_rub.rationale, "Better.");

	/* The repair request continues the conversation and says what was wrong. */
	json_error_t je;
	json_t *b = json_loads(fake_llm_body(g_srv, 1), 0, &je);
	if (!b)
		fail_msg("request 1 is not JSON: %s", je.text);
	json_t *msgs = json_object_get(b, "messages");
	assert_int_equal(json_array_size(msgs), 3);
	assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 1), "role")),
	                    "assistant");
	const char *fix = json_string_value(json_object_get(json_array_get(msgs, 2), "content"));
	assert_non_null(fix);
	assert_mentions(fix, "items.alignment is 9");
	assert_mentions(fix, "\"scope\"");
	json_decref(b);
	assert_int_equal(traced("request"), 2);
	assert_int_equal(traced("invalid"), 1);
}

static void test_judge_bad_twice(void **state)
{
	(void)state;
	char *bad = fake_openai_body("Looks fine to me, 4/5.", "stop", 100, 10);
	assert_non_null(bad);
	fake_step steps[] = { { .status = 200, .body = bad } };
	start(steps, 1, 0);
	free(bad);
	judge(ST_SKILL_GEN);
	assert_int_equal(fake_llm_count(g_srv), 2);
	assert_true(g_rub.neutral);
	assert_float_equal(g_rub.score, 0.5, EPS);
	for (int i = 0; i < 4; i++)
		assert_int_equal(g_rub.items[i], 0);
	assert_false(g_rub.major_hacking);
	assert_mentions(g_rub.rationale, "twice");
	assert_mentions(g_rub.rationale, "no JSON object");
	assert_mentions(fake_llm_body(g_srv, 1), "no JSON object");
	assert_int_equal(traced("invalid"), 2);
	assert_int_equal(traced("neutral"), 1);
}

static void test_judge_server_error(void **state)
{
	(void)state;
	fake_step steps[] = {
		{ .status = 500, .body = "{\"error\":{\"message\":\"overloaded\"}}" },
	};
	start(steps, 1, 0);
	judge(ST_SKILL_GEN);
	assert_int_equal(fake_llm_count(g_srv), 1);
	assert_true(g_rub.neutral);
	assert_float_equal(g_rub.score, 0.5, EPS);
	assert_mentions(g_rub.rationale, "500");
	assert_int_equal(traced("llm_error"), 1);
	assert_int_equal(traced("response"), 0);
}

/* A template that cannot be rendered is a setup bug, reported as an error. */
static void test_judge_missing_var(void **state)
{
	(void)state;
	fake_step steps[] = { { .status = 500, .body = "{}" } };
	start(steps, 1, 0);
	json_t *vars = judge_vars();
	json_object_del(vars, "feedback");
	st_err err = { { 0 } };
	assert_int_equal(st_rubric_judge(g_cli, PROMPTS, ST_SKILL_OPT, vars, &g_rub, NULL, &err),
	                 ST_E_INVALID);
	json_decref(vars);
	assert_mentions(err.msg, "feedback");
	assert_int_equal(fake_llm_count(g_srv), 0);
}

#define T(f) cmocka_unit_test_teardown(f, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_rule),
		T(test_best),
		T(test_combine),
		T(test_item_names),
		T(test_parse_good),
		T(test_parse_bad),
		T(test_prompts_render),
		T(test_judge_good),
		T(test_judge_repair),
		T(test_judge_bad_twice),
		T(test_judge_server_error),
		T(test_judge_missing_var),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
