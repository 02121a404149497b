/* stitch solve: the Planner, Coder and Verifier agents write a solution for one task. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents/solve.h"
#include "cli.h"
#include "task/task.h"
#include "verify_opts.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: stitch solve --model M [options] TASK\n\n"
	        "Let LLM agents write a standalone solution for TASK: the Planner designs it (a JSON\n"
	        "plan), the Coder writes whole files, every version is verified (and profiled) and the\n"
	        "Verifier's feedback picks the next stage: draft, repair-compile, repair-correctness,\n"
	        "optimise. After --replan-after failed or stagnating attempts a new plan is made.\n"
	        "Artifacts in --out: best.cu (best.c on the host backend), plan.json, report.json,\n"
	        "trajectory.jsonl (every prompt, answer, version and verdict), versions/, and the\n"
	        "response cache llm-cache.sqlite (rerun with --replay to replay offline).\n\n"
	        "models (M): openai:MODEL, anthropic:MODEL (keys in OPENAI_API_KEY / ANTHROPIC_API_KEY),\n"
	        "  vllm|sglang|ollama|llamacpp|openai-compat:URL:MODEL, anthropic-compat:URL:MODEL\n"
	        "  e.g. vllm:http://host:8000/v1:Qwen3-32B (the URL needs a path)\n\n"
	        "options:\n"
	        "  --model M            the Coder's model (required)\n"
	        "  --planner-model M    the Planner's model (default: the Coder's)\n"
	        "  --verifier-model M   also let a model turn each verdict into a short note for\n"
	        "                       the Coder (prompts/verifier-summary.md), appended to the\n"
	        "                       Verifier's facts (default: the facts alone, no model)\n"
	        "  --out DIR            artifact folder (default: solve-<task>, e.g. solve-t1-softmax)\n"
	        "  --max-attempts N     Coder rounds (default 8)\n"
	        "  --samples K          answers per round, asked for at once, compiled at once and\n"
	        "                       verified one after another (the GPU to itself); the best\n"
	        "                       one goes on (default 1, at most 16)\n"
	        "  --max-replans N      new plans after failures or stagnation (default 2)\n"
	        "  --replan-after N     failed or stagnating attempts in a row before one (default 3)\n"
	        "  --target-speedup X   speedup vs the reference that ends the run (default 2)\n"
	        "  --max-tokens N       input + output tokens over the run (default 2000000; 0: none)\n"
	        "  --max-time S         wall time of the run in seconds (default 3600)\n"
	        "  --max-cost USD       money, from --price-in/--price-out (default: no limit)\n"
	        "  --price-in P         USD per million input tokens (default 0: cost not counted)\n"
	        "  --price-out P        USD per million output tokens\n"
	        "  --temperature T      sampling temperature (default 0.2)\n"
	        "  --max-output-tokens N  per answer (default 16384)\n"
	        "  --llm-timeout S      one HTTP request (default 600)\n"
	        "  --cache FILE         response cache (default: DIR/llm-cache.sqlite)\n"
	        "  --replay             answer from the cache only; never call the model\n"
	        "  --resume DIR         go on with an interrupted run in DIR: its cached answers are\n"
	        "                       replayed (no tokens paid twice), then the model is asked again\n"
	        "  --prompts DIR        prompt templates (default: the prompts/ of this stitch)\n"
	        "  --json               print report.json on stdout\n"
	        "verify options for every version:\n");
	st_solve_opts o;
	st_solve_opts_default(&o);
	o.verify.seeds = 3; /* as cmd_solve */
	st_verify_opts_usage(f, &o.verify);
	fprintf(f,
	        "\nexit: 0 a correct version was found (best.* written), 1 none within the budget\n"
	        "      (the report says why), 2 bad input, 3 environment (no GPU, model unreachable)\n");
}

static void progress_line(void *arg, const char *line)
{
	int tty = *(int *)arg;
	if (tty)
		fprintf(stderr, "\r\033[Ksolve: %s", line);
	else
		fprintf(stderr, "solve: %s\n", line);
}

int cmd_solve(int argc, char **argv)
{
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	st_solve_opts o;
	st_solve_opts_default(&o);
	o.verify.seeds = 3;
	int json = 0, quiet = 0;
	const char *task_arg = NULL, *resume = NULL;
	static const struct {
		const char *name;
		double lo, hi;
	} nums[] = {{"--max-attempts", 1, 10000}, {"--max-replans", 0, 1000},
	            {"--replan-after", 1, 1000}, {"--target-speedup", 0, 1e6},
	            {"--max-tokens", 0, 1e12}, {"--max-time", 1, 1e7}, {"--max-cost", 0, 1e6},
	            {"--price-in", 0, 1e4}, {"--price-out", 0, 1e4}, {"--temperature", 0, 2},
	            {"--max-output-tokens", 1, 1e7}, {"--llm-timeout", 1, 86400},
	            {"--samples", 1, 16}};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--json")) {
			json = 1;
			continue;
		}
		if (!strcmp(a, "--replay")) {
			o.llm.replay = 1;
			continue;
		}
		if (!strcmp(a, "--resume")) {
			if (i + 1 >= argc || !argv[i + 1][0]) {
				st_cli_error("--resume needs the folder of an earlier run");
				return ST_EXIT_USAGE;
			}
			resume = argv[++i];
			continue;
		}
		const char **str = !strcmp(a, "--model")           ? &o.model
		                   : !strcmp(a, "--planner-model") ? &o.planner_model
		                   : !strcmp(a, "--verifier-model") ? &o.verifier_model
		                   : !strcmp(a, "--out")           ? &o.out_dir
		                   : !strcmp(a, "--cache")         ? &o.llm.cache_path
		                   : !strcmp(a, "--prompts")       ? &o.prompts_dir
		                                                   : NULL;
		if (str) {
			if (i + 1 >= argc || !argv[i + 1][0]) {
				st_cli_error("%s needs a value", a);
				return ST_EXIT_USAGE;
			}
			*str = argv[++i];
			continue;
		}
		size_t k = 0;
		while (k < sizeof nums / sizeof nums[0] && strcmp(a, nums[k].name))
			k++;
		if (k < sizeof nums / sizeof nums[0]) {
			double x;
			if (i + 1 >= argc) {
				st_cli_error("%s needs a value", a);
				return ST_EXIT_USAGE;
			}
			if (st_cli_number(a, argv[++i], nums[k].lo, nums[k].hi, &x))
				return ST_EXIT_USAGE;
			switch (k) {
			case 0: o.max_attempts = (int)x; break;
			case 1: o.max_replans = (int)x; break;
			case 2: o.replan_after = (int)x; break;
			case 3: o.target_speedup = x; break;
			case 4: o.max_tokens = (int64_t)x; break;
			case 5: o.max_time_s = x; break;
			case 6: o.max_cost_usd = x; break;
			case 7: o.llm.price_in_per_mtok = x; break;
			case 8: o.llm.price_out_per_mtok = x; break;
			case 9: o.temperature = x; break;
			case 10: o.max_output_tokens = (int)x; break;
			case 11: o.llm.timeout_s = x; break;
			case 12: o.samples = (int)x; break;
			}
			continue;
		}
		int r = st_verify_opt_parse(&o.verify, argc, argv, &i, &quiet);
		if (r < 0)
			return ST_EXIT_USAGE;
		if (r)
			continue;
		if (a[0] == '-' && a[1]) {
			st_cli_error("solve: unknown option '%s'; see 'stitch solve --help'", a);
			return ST_EXIT_USAGE;
		}
		if (task_arg) {
			st_cli_error("solve: one TASK only; see 'stitch solve --help'");
			return ST_EXIT_USAGE;
		}
		task_arg = a;
	}
	if (!task_arg || !o.model) {
		st_cli_error("solve: needs --model M and a TASK; see 'stitch solve --help'");
		return ST_EXIT_USAGE;
	}
	char dir[4096], out[4096];
	st_err err;
	if (st_task_resolve(task_arg, st_cli_tasks_root(), dir, sizeof dir, &err)) {
		st_cli_error("%s", err.msg);
		return ST_EXIT_USAGE;
	}
	o.task_dir = dir;
	if (resume) {
		char tj[4200];
		snprintf(tj, sizeof tj, "%s/trajectory.jsonl", resume);
		if (access(tj, R_OK)) {
			st_cli_error("--resume %s: no trajectory.jsonl there (%s)", resume, strerror(errno));
			return ST_EXIT_USAGE;
		}
		if (o.out_dir && strcmp(o.out_dir, resume)) {
			st_cli_error("--resume and --out name different folders");
			return ST_EXIT_USAGE;
		}
		o.out_dir = resume;
	}
	if (!o.out_dir) {
		snprintf(out, sizeof out, "solve-%s", task_arg);
		for (char *p = out; *p; p++)
			if (*p == '/')
				*p = '-';
		o.out_dir = out;
	}
	/* Model strings and keys are checked before any work, in st_solve's set-up. */
	int tty = isatty(2);
	if (!quiet) {
		o.progress = progress_line;
		o.progress_arg = &tty;
	}
	json_t *report = NULL;
	st_status s = st_solve(&o, &report, &err);
	if (tty && !quiet)
		fputc('\n', stderr);
	if (s) {
		st_cli_error("%s", err.msg);
		return s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
	}
	if (json) {
		json_dumpf(report, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
	} else {
		json_t *best = json_object_get(report, "best");
		printf("%-10s %s\n%-10s %s (%s)\n", "task", json_string_value(json_object_get(report, "task")),
		       "state", json_string_value(json_object_get(report, "state")),
		       json_string_value(json_object_get(report, "why")));
		printf("%-10s %d attempts, %d replans, %lld+%lld tokens, $%.2f, %.1f s\n", "spent",
		       (int)json_integer_value(json_object_get(report, "attempts")),
		       (int)json_integer_value(json_object_get(report, "replans")),
		       (long long)json_integer_value(json_object_get(json_object_get(report, "tokens"), "input")),
		       (long long)json_integer_value(json_object_get(json_object_get(report, "tokens"), "output")),
		       json_number_value(json_object_get(report, "cost_usd")),
		       json_number_value(json_object_get(report, "wall_s")));
		if (best)
			printf("%-10s %s (%.2fx vs reference)\n", "best",
			       json_string_value(json_object_get(best, "path")),
			       json_number_value(json_object_get(json_object_get(best, "speedup"), "vs_reference")));
		else
			printf("%-10s none correct\n", "best");
		printf("%-10s %s/report.json, %s/trajectory.jsonl\n", "artifacts", o.out_dir, o.out_dir);
	}
	int ok = json_object_get(report, "best") != NULL;
	json_decref(report);
	return ok ? ST_EXIT_OK : ST_EXIT_NO;
}
