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

/* solve's own options over o, *json and *resume. */
#define SOLVE_OPT_N 24

static void own_table(st_solve_opts *o, int *json, const char **resume, st_opt *t)
{
	const st_opt table[] = {
		{ST_OPT_STRING, .name = "model", 0, &o->model, "M", "the Coder's model (required)"},
		{ST_OPT_STRING, .name = "planner-model", 0, &o->planner_model, "M", "the Planner's model",
		 .unset = "the Coder's"},
		{ST_OPT_STRING, .name = "verifier-model", 0, &o->verifier_model, "M",
		 "also let a model turn each verdict into a short note for\n"
		 "the Coder (prompts/verifier-summary.md), appended to the\n"
		 "Verifier's facts", .unset = "the facts alone, no model"},
		{ST_OPT_STRING, .name = "out", 0, &o->out_dir, "DIR", "artifact folder",
		 .unset = "solve-<task>, e.g. solve-t1-softmax"},
		{ST_OPT_INT, .name = "max-attempts", 0, &o->max_attempts, "N", "Coder rounds, 1 to 10000",
		 1, 10000},
		{ST_OPT_INT, .name = "samples", 0, &o->samples, "K",
		 "answers per round, asked for at once, compiled at once and\n"
		 "verified one after another (the GPU to itself); the best\n"
		 "one goes on; 1 to 16", 1, 16},
		{ST_OPT_INT, .name = "max-replans", 0, &o->max_replans, "N",
		 "new plans after failures or stagnation, 0 to 1000", 0, 1000},
		{ST_OPT_INT, .name = "replan-after", 0, &o->replan_after, "N",
		 "failed or stagnating attempts in a row before one, 1 to 1000", 1, 1000},
		{ST_OPT_DOUBLE, .name = "target-speedup", 0, &o->target_speedup, "X",
		 "speedup vs the reference that ends the run", 0, 1e6},
		{ST_OPT_UINT64, .name = "max-tokens", 0, &o->max_tokens, "N",
		 "input + output tokens over the run (0: no limit)", 0, 1e12},
		{ST_OPT_DOUBLE, .name = "max-time", 0, &o->max_time_s, "S",
		 "wall time of the run in seconds", 1, 1e7},
		{ST_OPT_DOUBLE, .name = "max-cost", 0, &o->max_cost_usd, "USD",
		 "money, from --price-in/--price-out", 0, 1e6, .unset = "no limit"},
		{ST_OPT_DOUBLE, .name = "price-in", 0, &o->llm.price_in_per_mtok, "P",
		 "USD per million input tokens", 0, 1e4, .unset = "0, cost not counted"},
		{ST_OPT_DOUBLE, .name = "price-out", 0, &o->llm.price_out_per_mtok, "P",
		 "USD per million output tokens", 0, 1e4, .unset = "0, cost not counted"},
		{ST_OPT_DOUBLE, .name = "temperature", 0, &o->temperature, "T",
		 "sampling temperature, 0 to 2", 0, 2},
		{ST_OPT_INT, .name = "max-output-tokens", 0, &o->max_output_tokens, "N", "per answer",
		 1, 1e7},
		{ST_OPT_DOUBLE, .name = "llm-timeout", 0, &o->llm.timeout_s, "S",
		 "one HTTP request, in seconds", 1, 86400},
		{ST_OPT_STRING, .name = "cache", 0, &o->llm.cache_path, "FILE", "response cache",
		 .unset = "DIR/llm-cache.sqlite"},
		{ST_OPT_FLAG, .name = "replay", 0, &o->llm.replay, NULL,
		 "answer from the cache only; never call the model"},
		{ST_OPT_STRING, .name = "resume", 0, resume, "DIR",
		 "go on with an interrupted run in DIR: its cached answers are\n"
		 "replayed (no tokens paid twice), then the model is asked again"},
		{ST_OPT_STRING, .name = "prompts", 0, &o->prompts_dir, "DIR", "prompt templates",
		 .unset = "the prompts/ of this stitch"},
		{ST_OPT_FLAG, .name = "json", 0, json, NULL, "print report.json on stdout"},
		{ST_OPT_END},
	};
	_Static_assert(sizeof table / sizeof table[0] <= SOLVE_OPT_N, "SOLVE_OPT_N");
	memcpy(t, table, sizeof table);
}

static const st_opt_conflict conflicts[] = {{"no-timing", "time-set"}, {NULL, NULL}};

static void solve_defaults(st_solve_opts *o)
{
	st_solve_opts_default(o);
	o->verify.seeds = 3;
}

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
	        "options:\n");
	st_solve_opts o;
	solve_defaults(&o);
	int json = 0;
	const char *resume = NULL;
	st_opt own[SOLVE_OPT_N];
	own_table(&o, &json, &resume, own);
	st_opt_usage(f, own);
	fprintf(f, "verify options for every version:\n");
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
	solve_defaults(&o);
	int json = 0, quiet = 0;
	const char *task_arg = NULL, *resume = NULL;
	st_opt own[SOLVE_OPT_N], ver[ST_VERIFY_OPT_N];
	own_table(&o, &json, &resume, own);
	st_verify_opt_table(&o.verify, &quiet, 0, ver);
	const st_opt *const tables[] = {own, ver, NULL};
	int n_pos;
	if (st_cli_parse("solve", tables, conflicts, argc, argv, &task_arg, 1, &n_pos))
		return ST_EXIT_USAGE;
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
