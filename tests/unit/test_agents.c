/* Unit tests for the agents' building blocks (src/agents): template rendering (every kind of
 * value, a missing variable named in the error, literal braces, values never re-scanned) and
 * every real template under prompts/ with the workflow's full variable set; code extraction
 * from model answers (one block, unrelated blocks beside it, two solutions, none, a mere call,
 * an unclosed fence, the token-limit flag); the Planner's JSON (bare, fenced, wrapped in prose,
 * each validation error); and the Verifier's feedback for compile errors, wrong outputs and
 * speedups below and at the target, which must come out the same every time. */
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

/* ---- prompt rendering ----------------------------------------------------------------------- */

static void test_render_all_kinds(void **state)
{
	(void)state;
	json_t *vars = json_pack("{s:s,s:i,s:f,s:[s,s],s:{s:i},s:b,s:n}", "name", "softmax", "count",
	                         42, "ratio", 2.0, "list", "a", "b", "obj", "k", 1, "yes", 1,
	                         "nothing");
	assert_non_null(vars);
	char *out = NULL;
	st_err err = {{0}};
	assert_int_equal(st_prompt_render_text("task {{name}}: {{ count }} x{{ratio}} {{list}} "
	                                       "{{obj}} {{yes}} [{{nothing}}]",
	                                       "t", vars, &out, &err),
	                 ST_OK);
	assert_string_equal(out, "task softmax: 42 x2 [\"a\", \"b\"] {\"k\": 1} true []");
	free(out);

	json_object_set_new(vars, "ratio", json_real(1.5));
	assert_int_equal(st_prompt_render_text("{{ratio}}", "t", vars, &out, &err), ST_OK);
	assert_string_equal(out, "1.5");
	free(out);

	assert_int_equal(st_prompt_render_text("", "t", vars, &out, &err), ST_OK);
	assert_string_equal(out, "");
	free(out);
	json_decref(vars);
}

static void test_render_missing_variable(void **state)
{
	(void)state;
	json_t *vars = json_pack("{s:s}", "task_id", "t1/softmax");
	char *out = (char *)1;
	st_err err = {{0}};
	assert_int_equal(st_prompt_render_text("id {{task_id}}\nfix:\n{{feedback}}\n", "coder-repair",
	                                       vars, &out, &err),
	                 ST_E_INVALID);
	assert_null(out);
	assert_non_null(strstr(err.msg, "feedback"));
	assert_non_null(strstr(err.msg, "coder-repair"));
	assert_non_null(strstr(err.msg, "line 3"));

	/* no variables at all: the first placeholder is named */
	assert_int_equal(st_prompt_render_text("{{abi}}", "x", NULL, &out, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "abi"));
	json_decref(vars);
}

static void test_render_braces(void **state)
{
	(void)state;
	/* Values are inserted verbatim, never scanned again: C initialisers full of braces survive. */
	json_t *vars = json_pack("{s:s}", "code", "float m[2][2] = {{1, 2}, {3, 4}}; /* {{x}} */");
	char *out = NULL;
	st_err err = {{0}};
	assert_int_equal(st_prompt_render_text("{{{{literal}} { single } }} {{code}}", "t", vars, &out,
	                                       &err),
	                 ST_OK);
	assert_string_equal(out, "{{literal}} { single } }} float m[2][2] = {{1, 2}, {3, 4}}; /* {{x}} */");
	free(out);

	/* A "{{" that opens nothing is a template bug, reported rather than passed through. */
	assert_int_equal(st_prompt_render_text("a {{ not a name }} b", "t", vars, &out, &err),
	                 ST_E_INVALID);
	assert_non_null(strstr(err.msg, "{{{{"));
	assert_int_equal(st_prompt_render_text("unclosed {{code", "t", vars, &out, &err),
	                 ST_E_INVALID);
	json_decref(vars);
}

static void prompts_dir(char *buf, size_t len)
{
	const char *data = getenv("STITCH_TEST_DATA");
	if (data)
		snprintf(buf, len, "%s/../../prompts", data);
	else
		snprintf(buf, len, "%s/prompts", STITCH_SOURCE_DIR);
}

/* Every variable the workflow fills; a template may use any subset. */
static json_t *full_vars(const char *backend)
{
	int host = !strcmp(backend, "host");
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:f,s:s,s:s,s:s}",
	                 "task_id", "t1/softmax", "task_description", "Row-wise softmax DESC_MARK",
	                 "reference_source", "int st_run(void) { return 0; } /* REF_MARK */", "sizes",
	                 "small: rows=37 cols=1000\neval: rows=8192 cols=8192\n", "policy",
	                 "expert mode; libraries allowed: none", "arch", host ? "host CPU" : "sm_90a",
	                 "abi", "int st_run(...); /* ABI_MARK */", "reference_profile", "none", "plan",
	                 "{\"summary\": \"PLAN_MARK\", \"steps\": [{\"what\": \"fuse\"}]}", "step",
	                 "1. fuse", "previous_code", "__global__ void k() {} /* PREV_MARK */",
	                 "feedback", "status: incorrect — FEEDBACK_MARK", "history",
	                 "attempt 1 (draft): incorrect", "target_speedup", 2.0, "backend", backend,
	                 "code_fence", host ? "c" : "cuda", "reference_fence", host ? "c" : "cuda");
}

static char *render_file(const char *name, const json_t *vars)
{
	char dir[4096];
	prompts_dir(dir, sizeof dir);
	char *out = NULL;
	st_err err = {{0}};
	st_status s = st_prompt_render(dir, name, vars, &out, &err);
	if (s)
		fprintf(stderr, "%s: %s\n", name, err.msg);
	assert_int_equal(s, ST_OK);
	assert_non_null(out);
	assert_null(strstr(out, "{{"));
	return out;
}

static void test_real_templates(void **state)
{
	(void)state;
	static const char *const names[] = { "planner", "coder-draft", "coder-repair",
		                             "coder-optimise", "verifier-summary" };
	static const char *const backends[] = { "cuda", "host" };
	for (size_t b = 0; b < 2; b++) {
		json_t *vars = full_vars(backends[b]);
		assert_non_null(vars);
		for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
			char *out = render_file(names[i], vars);
			assert_non_null(strstr(out, "t1/softmax"));
			if (!strncmp(names[i], "coder-", 6)) {
				assert_non_null(strstr(out, b ? "```c)" : "```cuda)"));
				assert_non_null(strstr(out, "ABI_MARK"));
			}
			if (!strcmp(names[i], "coder-repair") || !strcmp(names[i], "coder-optimise")) {
				assert_non_null(strstr(out, "PREV_MARK"));
				assert_non_null(strstr(out, "FEEDBACK_MARK"));
			}
			if (!strcmp(names[i], "verifier-summary"))
				assert_non_null(strstr(out, "FEEDBACK_MARK"));
			free(out);
		}
		json_decref(vars);
	}

	/* The first plan is asked for before any attempt: the Planner may not need plan, step,
	 * previous_code or feedback. It must name every field of the plan schema. */
	json_t *vars = full_vars("cuda");
	static const char *const later[] = { "plan", "step", "previous_code", "feedback" };
	for (size_t i = 0; i < 4; i++)
		json_object_del(vars, later[i]);
	char *out = render_file("planner.md", vars);
	static const char *const fields[] = { "ONE JSON object", "\"summary\"", "\"steps\"",
		                              "\"what\"", "\"kernels\"", "\"fusion\"", "\"host_setup\"",
		                              "\"bottlenecks\"", "\"risks\"", "\"constraints\"",
		                              "REF_MARK", "DESC_MARK" };
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
		assert_non_null(strstr(out, fields[i]));
	free(out);
	json_decref(vars);

	char dir[4096];
	prompts_dir(dir, sizeof dir);
	st_err err = {{0}};
	assert_int_equal(st_prompt_render(dir, "no-such-template", NULL, &out, &err), ST_E_IO);
	assert_non_null(strstr(err.msg, "no-such-template"));
}

/* ---- code extraction ------------------------------------------------------------------------ */

#define SOLUTION "#include \"stitch/solution.h\"\n" \
	"int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,\n" \
	"           int32_t n_out, cudaStream_t stream)\n{\n\treturn 0;\n}\n"

static st_extract_result extract(const char *answer, int truncated, char **code)
{
	const char *why = NULL;
	st_extract_result r = st_extract_code(answer, truncated, code, &why);
	if (r == ST_EXTRACT_OK) {
		assert_non_null(*code);
		assert_null(why);
	} else {
		assert_null(*code);
		assert_non_null(why);
		assert_true(strlen(why) > 20);
	}
	return r;
}

static void test_extract_one_block(void **state)
{
	(void)state;
	char *code = NULL;
	assert_int_equal(extract("Here it is:\n\n```cuda\n" SOLUTION "```\nDone.\n", 0, &code),
	                 ST_EXTRACT_OK);
	assert_string_equal(code, SOLUTION);
	free(code);

	/* Info string case, indent, a trailing space on the closing fence, no final newline. */
	assert_int_equal(extract("  ```CUDA\n" SOLUTION "```   \nthanks", 0, &code), ST_EXTRACT_OK);
	assert_string_equal(code, SOLUTION);
	free(code);
	assert_int_equal(extract("```\nint st_run(void){return 0;}```no\n```", 0, &code),
	                 ST_EXTRACT_OK);
	assert_string_equal(code, "int st_run(void){return 0;}```no\n");
	free(code);
	assert_int_equal(extract("```c++\nextern \"C\" int st_run (int x) { return x; }\n```", 1,
	                         &code),
	                 ST_EXTRACT_OK); /* cut off after the block: the block is whole */
	free(code);
}

static void test_extract_with_other_blocks(void **state)
{
	(void)state;
	char *code = NULL;
	const char *answer = "Build with:\n```bash\nnvcc -c x.cu\n```\nThe plan:\n```json\n"
	                     "{\"a\": 1}\n```\n```cuda\n" SOLUTION "```\nUsage: `st_run(ctx, ...)`\n"
	                     "```c\nst_run(ctx, in, 1, out, 1, s);\n```\n";
	assert_int_equal(extract(answer, 0, &code), ST_EXTRACT_OK);
	assert_string_equal(code, SOLUTION);
	free(code);

	/* A longer fence (````markdown) holding a whole ```cuda block is skipped as a whole. */
	assert_int_equal(extract("````markdown\n```cuda\nint st_run(){}\n```\n````\n```cu\n" SOLUTION
	                         "```\n",
	                         0, &code),
	                 ST_EXTRACT_OK);
	assert_string_equal(code, SOLUTION);
	free(code);
}

static void test_extract_failures(void **state)
{
	(void)state;
	char *code = NULL;
	/* two whole solutions */
	assert_int_equal(extract("```cuda\n" SOLUTION "```\nor faster:\n```cuda\n" SOLUTION "```\n", 0,
	                         &code),
	                 ST_EXTRACT_SEVERAL);
	/* no block at all, even with code in the prose */
	assert_int_equal(extract("int st_run(void) { return 0; }", 0, &code), ST_EXTRACT_NONE);
	assert_int_equal(extract("", 0, &code), ST_EXTRACT_NONE);
	assert_int_equal(extract(NULL, 0, &code), ST_EXTRACT_NONE);
	/* blocks with only a call or a prototype: not a definition */
	assert_int_equal(extract("```cuda\nint rc = st_run(ctx, in, 1, out, 1, stream);\n"
	                         "if (rc) { return rc; }\n```\n",
	                         0, &code),
	                 ST_EXTRACT_NO_ABI);
	assert_int_equal(extract("```c\nint st_run(void *ctx);\n```\n", 0, &code),
	                 ST_EXTRACT_NO_ABI);
	assert_int_equal(extract("```cuda\nint my_st_run(void) { return 0; }\n```\n", 0, &code),
	                 ST_EXTRACT_NO_ABI);
	/* a definition in a block of another language is not taken */
	assert_int_equal(extract("```python\nint st_run(void) { return 0; }\n```\n", 0, &code),
	                 ST_EXTRACT_NO_ABI);
	/* an unclosed fence, flagged or not */
	assert_int_equal(extract("```cuda\n" SOLUTION, 0, &code), ST_EXTRACT_TRUNCATED);
	assert_int_equal(extract("```cuda\n" SOLUTION "```\n```bash\nnvcc", 0, &code),
	                 ST_EXTRACT_TRUNCATED);
	assert_int_equal(extract("```cuda\nint st_run(void) {\n", 1, &code), ST_EXTRACT_TRUNCATED);
	/* the token limit hit before any complete solution */
	assert_int_equal(extract("Let me think about this at length...", 1, &code),
	                 ST_EXTRACT_TRUNCATED);
	assert_int_equal(extract("```json\n{}\n```\nNow the code", 1, &code), ST_EXTRACT_TRUNCATED);
}

/* ---- the plan ------------------------------------------------------------------------------- */

#define PLAN "{\"summary\": \"one fused kernel\", \"steps\": [{\"what\": \"fuse max, exp and sum " \
	"into one pass {online}\", \"kernels\": [\"softmax_row\"], \"fusion\": \"all three\"}], " \
	"\"risks\": [\"cols not a multiple of 4\"], \"extra\": 7}"

static json_t *plan_ok(const char *answer)
{
	json_t *plan = NULL;
	st_err err = {{0}};
	st_status s = st_plan_parse(answer, &plan, &err);
	if (s)
		fprintf(stderr, "%s\n", err.msg);
	assert_int_equal(s, ST_OK);
	assert_non_null(plan);
	return plan;
}

static void plan_bad(const char *answer, const char *msg)
{
	json_t *plan = (json_t *)1;
	st_err err = {{0}};
	assert_int_equal(st_plan_parse(answer, &plan, &err), ST_E_INVALID);
	assert_null(plan);
	if (!strstr(err.msg, msg))
		fprintf(stderr, "got \"%s\", want \"%s\"\n", err.msg, msg);
	assert_non_null(strstr(err.msg, msg));
}

static void check_plan(json_t *plan)
{
	assert_string_equal(json_string_value(json_object_get(plan, "summary")), "one fused kernel");
	json_t *step = json_array_get(json_object_get(plan, "steps"), 0);
	assert_string_equal(json_string_value(json_object_get(step, "fusion")), "all three");
	assert_int_equal(json_array_size(json_object_get(step, "kernels")), 1);
	/* missing optional arrays become empty ones; unknown fields stay */
	assert_true(json_is_array(json_object_get(plan, "bottlenecks")));
	assert_int_equal(json_array_size(json_object_get(plan, "bottlenecks")), 0);
	assert_int_equal(json_array_size(json_object_get(plan, "constraints")), 0);
	assert_int_equal(json_array_size(json_object_get(plan, "risks")), 1);
	assert_int_equal(json_integer_value(json_object_get(plan, "extra")), 7);
	json_decref(plan);
}

static void test_plan_good(void **state)
{
	(void)state;
	check_plan(plan_ok(PLAN));
	check_plan(plan_ok("  \n" PLAN "\n"));
	check_plan(plan_ok("Here is the plan:\n```json\n" PLAN "\n```\nGood luck."));
	check_plan(plan_ok("```\n" PLAN "\n```"));
	check_plan(plan_ok("I think {this} matters. The plan is " PLAN " and that is {all}."));
	check_plan(plan_ok("Plan: " PLAN "\nA brace in a string: \"}\" after it."));

	json_t *p = plan_ok("{\"summary\": \"s\", \"steps\": [{\"what\": \"w \\\"}\\\" x\", "
	                    "\"kernels\": null, \"host_setup\": null}], \"risks\": null}");
	json_t *step = json_array_get(json_object_get(p, "steps"), 0);
	assert_string_equal(json_string_value(json_object_get(step, "what")), "w \"}\" x");
	assert_int_equal(json_array_size(json_object_get(step, "kernels")), 0);
	assert_null(json_object_get(step, "host_setup"));
	assert_int_equal(json_array_size(json_object_get(p, "risks")), 0);
	json_decref(p);
}

static void test_plan_bad(void **state)
{
	(void)state;
	plan_bad("{\"steps\": [{\"what\": \"x\"}]}", "plan: summary is missing");
	plan_bad("{\"summary\": \"  \", \"steps\": [{\"what\": \"x\"}]}",
	         "plan: summary must be a non-empty string");
	plan_bad("{\"summary\": 3, \"steps\": [{\"what\": \"x\"}]}",
	         "plan: summary must be a non-empty string");
	plan_bad("{\"summary\": \"s\"}", "plan: steps is missing");
	plan_bad("{\"summary\": \"s\", \"steps\": []}", "plan: steps must hold at least one step");
	plan_bad("{\"summary\": \"s\", \"steps\": {}}", "plan: steps must be an array");
	plan_bad("{\"summary\": \"s\", \"steps\": [{\"what\": \"a\"}, {\"what\": \"b\"}, "
	         "{\"kernels\": []}]}",
	         "plan: steps[2].what is missing");
	plan_bad("{\"summary\": \"s\", \"steps\": [\"do it\"]}", "plan: steps[0] must be an object");
	plan_bad("{\"summary\": \"s\", \"steps\": [{\"what\": \"a\", \"kernels\": [\"k\", 1]}]}",
	         "plan: steps[0].kernels[1] must be a string");
	plan_bad("{\"summary\": \"s\", \"steps\": [{\"what\": \"a\", \"fusion\": []}]}",
	         "plan: steps[0].fusion must be a string");
	plan_bad("{\"summary\": \"s\", \"steps\": [{\"what\": \"a\"}], \"risks\": \"none\"}",
	         "plan: risks must be an array of strings");
	plan_bad("I could not come up with a plan.", "plan: the answer contains no JSON object");
	plan_bad("", "plan: the answer contains no JSON object");
	plan_bad(NULL, "plan: the answer contains no JSON object");
	plan_bad("[1, 2]", "plan: the answer contains no JSON object");
	plan_bad("{\"summary\": \"s\", \"steps\": [{\"what\": \"a\"},]}", "not valid JSON");
	plan_bad("{\"summary\": \"s\", \"steps\": [{\"what\": ", "never closed");
}

/* ---- the Verifier's feedback ---------------------------------------------------------------- */

static const char *const SRC = "#include \"stitch/solution.h\"\n"
                               "__global__ void k(float *y) {\n"
                               "    y[threadIdx.x] = undefined_thing;   \n"
                               "}\n"
                               "int st_run(void *c) { return k<<<1, 32>>>(0) }\n";

static json_t *compile_error_verdict(void)
{
	return json_pack(
	        "{s:s,s:s,s:{s:b,s:[{s:s,s:i,s:i,s:s,s:s},{s:s,s:i,s:i,s:s,s:s},"
	        "{s:s,s:i,s:i,s:s,s:s}],s:s}}",
	        "status", "compile_error", "reason", "identifier \"undefined_thing\" is undefined",
	        "compile", "ok", 0, "diagnostics", "file", "/tmp/x/cand.cu", "line", 2, "col", 1,
	        "severity", "warning", "message", "unused parameter", "file", "/tmp/x/cand.cu", "line",
	        3, "col", 20, "severity", "error", "message",
	        "identifier \"undefined_thing\" is undefined", "file", "/tmp/x/cand.cu", "line", 5,
	        "col", 40, "severity", "error", "message", "expected a \";\"", "log", "raw log");
}

static void test_feedback_compile_error(void **state)
{
	(void)state;
	json_t *v = compile_error_verdict();
	char *text = NULL;
	assert_int_equal(st_verifier_feedback(v, SRC, 2.0, &text), ST_STAGE_REPAIR_COMPILE);
	assert_non_null(text);
	assert_true(!strncmp(text, "status: compile_error \xe2\x80\x94 identifier", 36));
	assert_non_null(strstr(text, "line 3: identifier \"undefined_thing\" is undefined\n"
	                             "    > y[threadIdx.x] = undefined_thing;\n"));
	assert_non_null(strstr(text, "line 5: expected a \";\"\n"
	                             "    > int st_run(void *c) { return k<<<1, 32>>>(0) }\n"));
	/* errors before warnings */
	assert_true(strstr(text, "line 5:") < strstr(text, "line 2: warning: unused parameter"));

	/* determinism: the same verdict and source give the same text */
	char *again = NULL;
	st_verifier_feedback(v, SRC, 2.0, &again);
	assert_string_equal(text, again);
	free(again);
	free(text);

	/* Issue 31: a verdict whose reason is a warning printed before the linker's error (made
	 * before the errors-first order): the status line quotes the first error, not the warning. */
	json_t *link = json_pack(
	        "{s:s,s:s,s:{s:b,s:[{s:s,s:i,s:i,s:s,s:s},{s:s,s:i,s:i,s:s,s:s}],s:s}}", "status",
	        "compile_error", "reason", "function \"ho_garbage\" was declared but never referenced",
	        "compile", "ok", 0, "diagnostics", "file", "/tmp/x/cand.cu", "line", 12, "col", 0,
	        "severity", "warning", "message",
	        "function \"ho_garbage\" was declared but never referenced", "file",
	        "tmpxft_2b1e-6_cand.cudafe1.cpp", "line", 0, "col", 0, "severity", "error", "message",
	        "undefined reference to `ho_missing_helper'", "log", "raw log");
	char *ltext = NULL;
	assert_int_equal(st_verifier_feedback(link, SRC, 2.0, &ltext), ST_STAGE_REPAIR_COMPILE);
	assert_true(!strncmp(ltext, "status: compile_error \xe2\x80\x94 undefined reference to", 48));
	assert_true(strstr(ltext, "undefined reference") < strstr(ltext, "warning: function"));
	free(ltext);
	json_decref(link);

	/* without the source nothing is quoted, and nothing breaks */
	assert_int_equal(st_verifier_feedback(v, NULL, 2.0, &text), ST_STAGE_REPAIR_COMPILE);
	assert_null(strstr(text, "    > "));
	free(text);
	json_decref(v);

	/* Long texts are cut on a character boundary: the feedback goes into a JSON request. */
	char dashes[3 * 150 + 1] = "";
	for (int i = 0; i < 150; i++)
		strcat(dashes, "\xe2\x80\x94");
	v = json_pack("{s:s,s:s,s:{s:[{s:s,s:i,s:i,s:s,s:s}],s:s}}", "status", "compile_error",
	              "reason", dashes, "compile", "diagnostics", "file", "a.cu", "line", 1, "col", 1,
	              "severity", "error", "message", dashes, "log", "");
	assert_int_equal(st_verifier_feedback(v, dashes, 2.0, &text), ST_STAGE_REPAIR_COMPILE);
	json_t *j = json_string(text);
	assert_non_null(j);
	json_decref(j);
	assert_non_null(strstr(text, "\xe2\x80\x94..."));
	free(text);
	json_decref(v);

	/* forbidden: the policy's hits, with the lines they name */
	v = json_pack("{s:s,s:s,s:{s:[s]}}", "status", "forbidden", "reason",
	              "line 3: forbidden-symbol: printf", "policy", "hits",
	              "line 3: forbidden-symbol: printf");
	assert_int_equal(st_verifier_feedback(v, SRC, 2.0, &text), ST_STAGE_REPAIR_COMPILE);
	assert_non_null(strstr(text, "forbidden-symbol: printf"));
	assert_non_null(strstr(text, "    > y[threadIdx.x]"));
	free(text);
	json_decref(v);
}

static void test_feedback_incorrect(void **state)
{
	(void)state;
	json_t *v = json_pack(
	        "{s:s,s:s,s:[{s:s,s:{s:i,s:i},s:i,s:b,s:[{s:s,s:b,s:s}]},"
	        "{s:s,s:{s:i,s:i},s:i,s:b,s:[{s:s,s:b,s:s}]},"
	        "{s:s,s:{s:i,s:i},s:i,s:b,s:[{s:s,s:b,s:I,s:I,s:f,s:f,s:{s:[i,i],s:I,s:f,s:f}}]}],"
	        "s:[s]}",
	        "status", "incorrect", "reason", "set small, seed 1: y: 12 of 37000 elements off",
	        "correctness", "set", "small", "sizes", "rows", 37, "cols", 1000, "seed_index", 0, "ok",
	        0, "outputs", "name", "y", "ok", 0, "summary",
	        "y: 12 of 37000 elements off, worst y[3, 17] got 0.1 want 0.6", "set", "small",
	        "sizes", "rows", 37, "cols", 1000, "seed_index", 1, "ok", 0, "outputs", "name", "y",
	        "ok", 0, "summary", "SECOND SEED", "set", "eval", "sizes", "rows", 8, "cols", 8,
	        "seed_index", 0, "ok", 0, "outputs", "name", "y", "ok", 0, "elements", (json_int_t)64,
	        "mismatches", (json_int_t)2, "max_abs", 0.5, "max_rel", 1.0, "worst", "index", 1, 2,
	        "flat", (json_int_t)10, "got", 0.25, "want", 0.75, "flags", "expert_failed");
	char *text = NULL;
	assert_int_equal(st_verifier_feedback(v, SRC, 2.0, &text), ST_STAGE_REPAIR_CORRECT);
	assert_non_null(strstr(text, "status: incorrect \xe2\x80\x94 set small"));
	assert_non_null(strstr(text, "set small (rows=37, cols=1000):\n  y: 12 of 37000 elements off, "
	                             "worst y[3, 17] got 0.1 want 0.6\n"));
	assert_null(strstr(text, "SECOND SEED")); /* one failing seed per set */
	assert_non_null(strstr(text, "set eval (rows=8, cols=8):\n  y: 2 of 64 elements off"));
	assert_non_null(strstr(text, "got 0.25, want 0.75"));
	assert_null(strstr(text, "expert_failed"));
	free(text);
	json_decref(v);

	v = json_pack("{s:s,s:s}", "status", "timeout", "reason", "set small, seed 1: timed out");
	assert_int_equal(st_verifier_feedback(v, SRC, 2.0, &text), ST_STAGE_REPAIR_CORRECT);
	assert_non_null(strstr(text, "deadlock"));
	free(text);
	json_decref(v);
	v = json_pack("{s:s,s:s}", "status", "hacking", "reason", "x");
	assert_int_equal(st_verifier_feedback(v, SRC, 2.0, &text), ST_STAGE_REPAIR_CORRECT);
	free(text);
	json_decref(v);
	/* What a failed st_init printed: its last eight lines, quoted as the program's own. */
	v = json_pack("{s:s,s:s,s:{s:s}}", "status", "runtime_error", "reason",
	              "st_init on set small: st_init returned 3", "output", "candidate",
	              "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nno table for n=1000\n\n");
	assert_int_equal(st_verifier_feedback(v, SRC, 2.0, &text), ST_STAGE_REPAIR_CORRECT);
	assert_non_null(strstr(text, "Your program printed, at its end:\n    | l2\n"));
	assert_non_null(strstr(text, "    | l8\n    | no table for n=1000\n"));
	assert_null(strstr(text, "l1"));
	free(text);
	json_decref(v);
	assert_int_equal(st_verifier_feedback(NULL, SRC, 2.0, &text), ST_STAGE_REPAIR_CORRECT);
	assert_non_null(strstr(text, "status: unknown"));
	free(text);
}

static json_t *ok_verdict(double vs_ref)
{
	return json_pack("{s:s,s:s,s:{s:f,s:f},s:{s:[{s:f,s:s},{s:f,s:s},{s:f,s:s},{s:f,s:s}],"
	                 "s:{s:s,s:f}},s:[s]}",
	                 "status", "ok", "reason", "", "speedup", "vs_reference", vs_ref, "vs_expert",
	                 0.8, "profile", "findings", "weight", 0.5, "text", "FINDING ONE", "weight",
	                 0.3, "text", "FINDING TWO", "weight", 0.1, "text", "FINDING THREE", "weight",
	                 0.05, "text", "FINDING FOUR", "roofline", "bound", "memory", "fraction", 0.4,
	                 "flags", "nondeterministic");
}

static void test_feedback_ok(void **state)
{
	(void)state;
	json_t *v = ok_verdict(1.5);
	char *text = NULL;
	assert_int_equal(st_verifier_feedback(v, SRC, 2.0, &text), ST_STAGE_OPTIMISE);
	assert_true(!strncmp(text, "status: ok\n", 11));
	assert_non_null(strstr(text, "1.50x vs reference, 0.80x vs expert (target 2.00x"));
	assert_non_null(strstr(text, "memory-bound, 40%"));
	assert_non_null(strstr(text, "1. FINDING ONE\n2. FINDING TWO\n3. FINDING THREE\n"));
	assert_null(strstr(text, "FINDING FOUR"));
	assert_non_null(strstr(text, "flags: nondeterministic"));
	char *again = NULL;
	st_verifier_feedback(v, SRC, 2.0, &again);
	assert_string_equal(text, again);
	free(again);
	free(text);
	/* no target: never done */
	assert_int_equal(st_verifier_feedback(v, SRC, 0, &text), ST_STAGE_OPTIMISE);
	free(text);
	json_decref(v);

	v = ok_verdict(2.0);
	assert_int_equal(st_verifier_feedback(v, SRC, 2.0, &text), ST_STAGE_DONE);
	assert_non_null(strstr(text, "2.00x vs reference"));
	free(text);
	assert_int_equal(st_verifier_feedback(v, SRC, 2.5, &text), ST_STAGE_OPTIMISE);
	free(text);
	json_decref(v);

	/* ok without timing (not measured): optimise, never done */
	v = json_pack("{s:s,s:s}", "status", "ok", "reason", "");
	assert_int_equal(st_verifier_feedback(v, SRC, 2.0, &text), ST_STAGE_OPTIMISE);
	assert_non_null(strstr(text, "not measured"));
	free(text);
	json_decref(v);

	assert_string_equal(st_stage_name(ST_STAGE_REPAIR_COMPILE), "repair_compile");
	assert_string_equal(st_stage_name(ST_STAGE_DONE), "done");
	assert_string_equal(st_stage_name(ST_STAGE_PLAN), "plan");
}


/* A hidden set's failure is said, never its sizes, values or the reason that names it; refine's
 * feedback says the compile errors or pass/fail, nothing about data or speed. */
static void test_feedback_hidden_and_refine(void **state)
{
	(void)state;
	json_t *v = json_pack("{s:s,s:s,s:[{s:s,s:{s:i},s:i,s:b,s:[{s:s,s:b,s:s}]}]}", "status",
	                      "incorrect", "reason", "set hidden1, seed 2: y: 3 of 4097 elements off",
	                      "correctness", "set", "hidden1", "sizes", "n", 4097, "seed_index", 1,
	                      "ok", 0, "outputs", "name", "y", "ok", 0, "summary",
	                      "y: 3 of 4097 elements off, worst y[4096] got 1 want 2");
	char *text = NULL;
	assert_int_equal(st_verifier_feedback(v, SRC, 2.0, &text), ST_STAGE_REPAIR_CORRECT);
	assert_non_null(strstr(text, "a hidden size set: outputs wrong"));
	assert_null(strstr(text, "4097"));
	assert_null(strstr(text, "4096"));
	free(text);

	text = st_refine_feedback(v, SRC);
	assert_non_null(strstr(text, "failed the tests (incorrect)"));
	assert_null(strstr(text, "4097"));
	assert_null(strstr(text, "elements off"));
	free(text);
	json_decref(v);

	v = json_pack("{s:s,s:s,s:{s:b,s:[{s:s,s:i,s:s,s:s}]}}", "status", "compile_error", "reason",
	              "nvcc failed", "compile", "ok", 0, "diagnostics", "file", "candidate.cu", "line", 2,
	              "severity", "error", "message", "expected a ';'");
	text = st_refine_feedback(v, SRC);
	assert_non_null(strstr(text, "did not build (compile_error)"));
	assert_non_null(strstr(text, "line 2: expected a ';'"));
	free(text);
	json_decref(v);

	v = json_pack("{s:s,s:{s:f}}", "status", "ok", "speedup", "vs_reference", 3.5);
	text = st_refine_feedback(v, SRC);
	assert_non_null(strstr(text, "passed every test"));
	assert_null(strstr(text, "3.5")); /* no timings */
	free(text);
	json_decref(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_render_all_kinds),
		cmocka_unit_test(test_render_missing_variable),
		cmocka_unit_test(test_render_braces),
		cmocka_unit_test(test_real_templates),
		cmocka_unit_test(test_extract_one_block),
		cmocka_unit_test(test_extract_with_other_blocks),
		cmocka_unit_test(test_extract_failures),
		cmocka_unit_test(test_plan_good),
		cmocka_unit_test(test_plan_bad),
		cmocka_unit_test(test_feedback_compile_error),
		cmocka_unit_test(test_feedback_incorrect),
		cmocka_unit_test(test_feedback_hidden_and_refine),
		cmocka_unit_test(test_feedback_ok),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
