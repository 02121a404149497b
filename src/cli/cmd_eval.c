/* `stitch eval --model M --mode oneshot|refine|agent`: how good is a model at writing the suite's
 * solutions. K samples per task, each from the task's first-draft prompt (exactly as `stitch
 * export --skill gen` writes it) and then alone (oneshot), in R rounds of self-refinement on
 * compile errors and pass/fail (refine), or through the whole Planner/Coder/Verifier loop
 * (agent) (eval_run.c); every round verified like any candidate. Then per task, tier and
 * overall the unbiased pass@k of compiling, correctness and fast_p against the reference and the
 * expert, and per round the same rates, so that a loop drifting toward slow fallback code shows
 * (src/store/eval_score.c). The run goes into the leaderboard store, which `--compare` reads. */
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agents/agents.h"
#include "agents/dataset.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/paths.h"
#include "llm/llm.h"
#include "queue/queue.h"
#include "stitch/stitch.h"
#include "task/task.h"

#include "eval_run.h"
#include "store/eval.h"
#include "verify_opts.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: stitch eval --model M [--mode oneshot|refine|agent] [--samples K] [--rounds R]\n"
	        "                   [--tier N] [--task GLOB] [--out DIR] [--parallel P] [--db FILE]\n"
	        "                   [--queue redis://HOST:PORT [--queue-arch A]] [verify options]\n"
	        "       stitch eval --compare RUN... [--db FILE] [--html FILE] [--json]\n"
	        "       stitch eval --list [--db FILE]\n\n"
	        "Evaluate a model on the suite (%s). Every task gets K samples, each starting\n"
	        "from the task's first-draft prompt (the prompt `stitch export --skill gen` writes):\n"
	        "  oneshot  that prompt alone, one answer;\n"
	        "  refine   R rounds of one conversation: after each answer the model is told only\n"
	        "           the compile errors (or policy hits), else whether the tests passed;\n"
	        "  agent    the Planner/Coder/Verifier loop of `stitch solve`, R attempts.\n"
	        "Every round is verified like any candidate. Scores per task, tier and overall: the\n"
	        "unbiased pass@1 and pass@K of compiling, correctness and fast_p (correct and more\n"
	        "than p times faster, p = 0, 1, 1.5, 2, 5) against the reference and the expert\n"
	        "(over each sample's final code: refine's last answer with code, the agent's best),\n"
	        "geometric-mean speedups, SOL fraction, the same rates round by round, results\n"
	        "flagged as suspicious, tokens and money. The run is stored in the leaderboard\n"
	        "(--db) for --compare, which prints runs side by side and writes an HTML page\n"
	        "(`stitch eval --compare --help` tells its options).\n\n"
	        "options:\n"
	        "  --model M        as stitch solve: openai:MODEL, anthropic:MODEL,\n"
	        "                   openai-compat:URL:MODEL (vLLM, SGLang, llama.cpp, Ollama)\n"
	        "  --mode MODE      oneshot (default), refine or agent\n"
	        "  --samples K      samples per task (default 1, at most %d)\n"
	        "  --rounds R       refine rounds or agent attempts (default 3 and 4; oneshot: 1; at\n"
	        "                   most %d)\n"
	        "  --tier N, --task GLOB   which tasks (default: all)\n"
	        "  --out DIR        answers, code, results.jsonl (one line per sample and round),\n"
	        "                   scores.json and the answer cache (default eval-out); run again to\n"
	        "                   resume without paying for an answer twice\n"
	        "  --parallel P     samples worked on at once, i.e. requests to the model at once\n"
	        "                   (default 4); verifies share the GPU, measurements one at a time\n"
	        "  --temperature T  sampling temperature (default 0.8)\n"
	        "  --replay         answers from OUT's cache only (no endpoint needed; a missing\n"
	        "                   answer is a no_answer sample)\n"
	        "  --db FILE        leaderboard store (SQLite; default $STITCH_EVAL_DB, else\n"
	        "                   $XDG_DATA_HOME/stitch/eval.db or ~/.local/share/stitch/eval.db)\n"
	        "  --no-db          do not record the run\n"
	        "  --queue URL      verify on the queue's workers (`stitch worker`) instead of here;\n"
	        "                   the verify options travel with each job (seeds are the workers')\n"
	        "  --queue-arch A   the arch the jobs need (default: host with --backend host, else\n"
	        "                   --arch or sm_90a)\n"
	        ST_VERIFY_OPTS_HELP
	        "\nexit: 0 done, 2 bad input, 3 no GPU, no model endpoint, or an unwritable store\n",
	        st_cli_tasks_root(), ST_EVAL_MAX_SAMPLES, ST_EVAL_MAX_ROUNDS);
}

static int has_arg(int argc, char **argv, const char *name)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], name))
			return 1;
	return 0;
}

/* The items: K per task of the chosen ones, in the suite's order. */
static int make_items(eval_ctx *c, const json_t *records, int tier, int K, st_err *err)
{
	c->items = calloc(json_array_size(records) * (size_t)K + 1, sizeof *c->items);
	if (!c->items)
		return st_err_set(err, ST_E_NOMEM, "out of memory");
	size_t i;
	json_t *rec;
	int tasks = 0;
	json_array_foreach(records, i, rec) {
		const json_t *x = json_object_get(rec, "extra_info");
		const char *id = json_string_value(json_object_get(x, "task_id"));
		int t = id && id[0] == 't' ? atoi(id + 1) : 0;
		if (!id || (tier && t != tier))
			continue;
		const char *prompt = json_string_value(
			json_object_get(json_array_get(json_object_get(rec, "prompt"), 0), "content"));
		char dir[PATH_MAX], task_dir[PATH_MAX];
		if (st_task_resolve(id, st_cli_tasks_root(), task_dir, sizeof task_dir, err))
			return -1;
		eval_task_folder(c->out, id, dir, sizeof dir);
		if (st_mkdirs(dir, err))
			return -1;
		for (int k = 0; k < K; k++) {
			eval_item *it = &c->items[c->n_items++];
			*it = (eval_item){.task_id = id, .prompt = prompt, .tier = t, .k = k};
			snprintf(it->task_dir, sizeof it->task_dir, "%s", task_dir);
		}
		tasks++;
	}
	return tasks;
}

static void write_results(const char *out, const json_t *rows, st_err *err)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/results.jsonl", out);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return;
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r) {
		char *line = json_dumps(r, JSON_COMPACT);
		if (line)
			fprintf(f, "%s\n", line);
		free(line);
	}
	if (!fclose(f))
		(void)st_write_file_atomic(path, buf, len, err);
	free(buf);
}

static const char *mode_name(eval_mode m)
{
	return m == EVAL_AGENT ? "agent" : m == EVAL_REFINE ? "refine" : "oneshot";
}

int cmd_eval(int argc, char **argv)
{
	/* the leaderboard has its own options (and its own --help) */
	if (has_arg(argc, argv, "--compare") || has_arg(argc, argv, "--list"))
		return cmd_eval_compare(argc, argv);
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	st_verify_opts o;
	st_verify_opts_default(&o);
	o.profile = 0;
	const char *model = NULL, *mode = "oneshot", *glob = NULL, *out = "eval-out", *db = NULL;
	const char *queue = NULL, *queue_arch = NULL;
	double samples = 1, parallel = 4, tier = 0, temperature = 0.8, rounds = 0;
	int quiet = 0, replay = 0, no_db = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--replay")) {
			replay = 1;
			continue;
		}
		if (!strcmp(argv[i], "--no-db")) {
			no_db = 1;
			continue;
		}
		int r = st_verify_opt_parse(&o, argc, argv, &i, &quiet);
		if (r < 0)
			return ST_EXIT_USAGE;
		if (r > 0)
			continue;
		const char *a = argv[i];
		if (i + 1 >= argc) {
			st_cli_error("eval: unknown option '%s' or it lacks its value", a);
			return ST_EXIT_USAGE;
		}
		const char *v = argv[++i];
		int bad = 0;
		if (!strcmp(a, "--model"))
			model = v;
		else if (!strcmp(a, "--mode"))
			mode = v;
		else if (!strcmp(a, "--task"))
			glob = v;
		else if (!strcmp(a, "--out"))
			out = v;
		else if (!strcmp(a, "--db"))
			db = v;
		else if (!strcmp(a, "--queue"))
			queue = v;
		else if (!strcmp(a, "--queue-arch"))
			queue_arch = v;
		else if (!strcmp(a, "--samples"))
			bad = st_cli_number(a, v, 1, ST_EVAL_MAX_SAMPLES, &samples);
		else if (!strcmp(a, "--rounds"))
			bad = st_cli_number(a, v, 1, ST_EVAL_MAX_ROUNDS, &rounds);
		else if (!strcmp(a, "--parallel"))
			bad = st_cli_number(a, v, 1, 256, &parallel);
		else if (!strcmp(a, "--tier"))
			bad = st_cli_number(a, v, 1, 4, &tier);
		else if (!strcmp(a, "--temperature"))
			bad = st_cli_number(a, v, 0, 2, &temperature);
		else {
			st_cli_error("eval: unknown option '%s'; see stitch eval --help", a);
			return ST_EXIT_USAGE;
		}
		if (bad)
			return ST_EXIT_USAGE;
	}
	if (!model) {
		st_cli_error("eval: --model is required");
		return ST_EXIT_USAGE;
	}
	eval_ctx c = {.temperature = temperature, .out = out, .model = model, .quiet = quiet,
	              .verify = o};
	if (!strcmp(mode, "oneshot"))
		c.mode = EVAL_ONESHOT;
	else if (!strcmp(mode, "refine"))
		c.mode = EVAL_REFINE;
	else if (!strcmp(mode, "agent"))
		c.mode = EVAL_AGENT;
	else {
		st_cli_error("eval: --mode %s: not a mode (oneshot, refine or agent)", mode);
		return ST_EXIT_USAGE;
	}
	if (c.mode == EVAL_ONESHOT && rounds > 1) {
		st_cli_error("eval: --rounds goes with --mode refine or agent; oneshot has one");
		return ST_EXIT_USAGE;
	}
	c.rounds = rounds > 0 ? (int)rounds : c.mode == EVAL_REFINE ? 3 : c.mode == EVAL_AGENT ? 4 : 1;
	st_err err;
	if (queue_arch && !queue) {
		st_cli_error("eval: --queue-arch goes with --queue");
		return ST_EXIT_USAGE;
	}
	if (queue) {
		st_queue q;
		if (st_queue_parse_url(queue, &q, &err)) {
			st_cli_error("eval: --queue: %s", err.msg);
			return ST_EXIT_USAGE;
		}
		c.queue_url = queue;
		c.queue_arch = queue_arch ? queue_arch : !strcmp(o.backend, "host") ? "host"
		                                       : o.arch ? o.arch : "sm_90a";
	}
	if (st_llm_model_parse(model, &c.llm_model, &err) ||
	    (!replay && st_llm_model_check(&c.llm_model, 10, &err))) {
		st_cli_error("eval: %s", err.msg);
		return ST_EXIT_USAGE;
	}
	char prompts[PATH_MAX], cache[PATH_MAX + 32], dbpath[PATH_MAX];
	if (!no_db && !db)
		db = st_eval_db_default_path(dbpath, sizeof dbpath);
	snprintf(prompts, sizeof prompts, "%s/prompts", st_home());
	st_export_opts eo = {.skill = "gen", .glob = glob, .backend = o.backend,
	                     .prompts_dir = prompts, .tasks_root = st_cli_tasks_root()};
	json_t *records = NULL;
	if (st_export_records(&eo, &records, &err)) {
		st_cli_error("eval: %s", err.msg);
		return ST_EXIT_USAGE;
	}
	if (st_mkdirs(out, &err)) {
		st_cli_error("eval: %s", err.msg);
		json_decref(records);
		return ST_EXIT_ENV;
	}
	st_llm_opts_default(&c.llm);
	snprintf(cache, sizeof cache, "%s/llm-cache.sqlite", out);
	c.llm.cache_path = cache;
	c.llm.replay = replay;
	int K = (int)samples;
	int n_tasks = make_items(&c, records, (int)tier, K, &err);
	if (n_tasks < 0) {
		st_cli_error("eval: %s", err.msg);
		free(c.items);
		json_decref(records);
		return ST_EXIT_USAGE;
	}
	if (!n_tasks) {
		st_cli_error("eval: no task matches%s%s", glob ? " --task " : "", glob ? glob : "");
		free(c.items);
		json_decref(records);
		return ST_EXIT_USAGE;
	}
	char started[32];
	time_t now = time(NULL);
	strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	double t0 = st_now_s();
	if (c.mode == EVAL_ONESHOT)
		fprintf(stderr, "eval: %d tasks x %d samples, oneshot, from %s\n", n_tasks, K, model);
	else
		fprintf(stderr, "eval: %d tasks x %d samples, %s with %d %s, from %s\n", n_tasks, K,
		        mode_name(c.mode), c.rounds, c.mode == EVAL_AGENT ? "attempts" : "rounds", model);
	int rc = ST_EXIT_OK;
	c.queue_options = queue ? st_verify_opts_json(&o) : NULL;
	if (eval_run(&c, (int)parallel, &err)) {
		st_cli_error("eval: stopped: %s", err.msg);
		rc = ST_EXIT_ENV;
	}
	double t1 = st_now_s();

	json_t *rows = json_array();
	int64_t tin = 0, tout = 0;
	double cost = 0;
	for (int j = 0; j < c.n_items; j++) {
		eval_item *it = &c.items[j];
		tin += it->tokens_in;
		tout += it->tokens_out;
		cost += it->cost_usd;
		if (it->rows) /* none where a stopped run never reached the sample */
			json_array_extend(rows, it->rows);
	}
	write_results(out, rows, &err);
	json_t *scores = st_eval_scores(rows, K, c.rounds);
	json_t *facts = json_pack("{s:s,s:s,s:i,s:i,s:s,s:s,s:f,s:o,s:{s:I,s:I,s:f}}",
	                                     "model", model, "mode", mode_name(c.mode), "samples", K,
	                                     "rounds", c.rounds, "backend", o.backend, "started",
	                                     started, "wall_s", t1 - t0, "commit",
	                                     st_cli_commit_id(), "usage", "input_tokens",
	                                     (json_int_t)tin, "output_tokens", (json_int_t)tout,
	                                     "cost_usd", cost);
	json_object_update(scores, facts);
	json_decref(facts);
	json_object_set_new(scores, "device", c.device[0] ? json_string(c.device) : json_null());
	char spath[PATH_MAX + 32];
	snprintf(spath, sizeof spath, "%s/scores.json", out);
	char *text = json_dumps(scores, JSON_INDENT(2));
	if (!text || st_write_file_atomic(spath, text, strlen(text), &err)) {
		st_cli_error("eval: %s", text ? err.msg : "out of memory");
		rc = ST_EXIT_ENV;
	}
	free(text);
	long long run_id = 0;
	if (db && rc == ST_EXIT_OK) {
		st_eval_db *d = NULL;
		if (st_eval_db_open(db, &d, &err) || st_eval_db_save(d, scores, rows, &run_id, &err)) {
			st_cli_error("eval: the leaderboard store: %s", err.msg);
			rc = ST_EXIT_ENV;
		}
		st_eval_db_close(d);
	}
	const json_t *p1 = json_object_get(json_object_get(scores, "overall"), "pass@1");
	printf("%s, %s, %d tasks x %d samples: pass@1 compile %.2f, correct %.2f, fast_1 vs "
	       "reference %.2f, vs expert %.2f; %lld tokens in, %lld out, $%.2f\n", model,
	       mode_name(c.mode), n_tasks, K, json_number_value(json_object_get(p1, "compile")),
	       json_number_value(json_object_get(p1, "correct")),
	       json_number_value(json_object_get(p1, "fast_1_vs_reference")),
	       json_number_value(json_object_get(p1, "fast_1_vs_expert")), (long long)tin,
	       (long long)tout, cost);
	const json_t *curve = json_object_get(json_object_get(scores, "overall"), "rounds");
	if (json_array_size(curve) > 1) {
		printf("by round (correct, geomean vs reference):");
		size_t i;
		json_t *x;
		json_array_foreach(curve, i, x) {
			double g = json_number_value(json_object_get(x, "geomean_vs_reference"));
			printf(" %zu: %.2f, %s", i + 1, json_number_value(json_object_get(x, "correct")),
			       g > 0 ? "" : "-");
			if (g > 0)
				printf("%.2fx", g);
			printf(i + 1 < json_array_size(curve) ? ";" : "\n");
		}
	}
	size_t n_sus = json_array_size(json_object_get(scores, "suspicious"));
	if (n_sus)
		printf("suspicious: %zu results (see scores.json)\n", n_sus);
	printf("scores: %s\n", spath);
	if (run_id)
		printf("stored as eval run %lld in %s\n", run_id, db);
	json_decref(scores);
	json_decref(rows);
	json_decref(c.queue_options);
	for (int j = 0; j < c.n_items; j++)
		json_decref(c.items[j].rows);
	free(c.items);
	json_decref(records);
	return rc;
}
