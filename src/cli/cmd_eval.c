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
#include "suite_opt.h"
#include "verify_opts.h"

typedef struct eval_args {
	const char *model, *mode, *glob, *out, *db, *queue, *queue_arch, *suite;
	st_suite tasks;          /* the chosen suites' tasks */
	int samples, parallel, tier, rounds, quiet, replay, no_db;
	double temperature;
	char dbpath[PATH_MAX], cache[PATH_MAX + 32], spath[PATH_MAX + 32];
} eval_args;

#define ST_STR_(x) #x
#define ST_STR(x) ST_STR_(x)

static const char *const modes[] = {"oneshot", "refine", "agent", NULL};

#define EVAL_OPT_N 17
#define EVAL_DEFAULTS                                                                           \
	{.mode = "oneshot", .out = "eval-out", .samples = 1, .parallel = 4, .temperature = 0.8}

static void own_table(eval_args *a, st_opt *t)
{
	const st_opt table[] = {
		{ST_OPT_STRING, .name = "model", 0, &a->model, "M",
		 "(required) as stitch solve: openai:MODEL, anthropic:MODEL,\n"
		 "openai-compat:URL:MODEL (vLLM, SGLang, llama.cpp, Ollama)"},
		{ST_OPT_ENUM, .name = "mode", 0, &a->mode, "MODE", "oneshot, refine or agent",
		 .values = modes},
		{ST_OPT_INT, .name = "samples", 0, &a->samples, "K", "samples per task, 1 to "
		 ST_STR(ST_EVAL_MAX_SAMPLES), 1, ST_EVAL_MAX_SAMPLES},
		{ST_OPT_INT, .name = "rounds", 0, &a->rounds, "R",
		 "refine rounds or agent attempts, 1 to " ST_STR(ST_EVAL_MAX_ROUNDS)
		 " (oneshot: 1 and no other)", 1, ST_EVAL_MAX_ROUNDS, .unset = "3 refine, 4 agent"},
		st_cli_suite_opt(&a->suite),
		{ST_OPT_INT, .name = "tier", 0, &a->tier, "N", "only tasks of tier N, 1 to 4", 1, 4,
		 .unset = "all"},
		{ST_OPT_STRING, .name = "task", 0, &a->glob, "GLOB",
		 "only tasks whose id matches GLOB", .unset = "all"},
		{ST_OPT_STRING, .name = "out", 0, &a->out, "DIR",
		 "answers, code, results.jsonl (one line per sample and round),\n"
		 "scores.json and the answer cache; run again to resume without\n"
		 "paying for an answer twice"},
		{ST_OPT_INT, .name = "parallel", 0, &a->parallel, "P",
		 "samples worked on at once, i.e. requests to the model at once\n"
		 "(1 to 256); verifies share the GPU, measurements one at a time", 1, 256},
		{ST_OPT_DOUBLE, .name = "temperature", 0, &a->temperature, "T",
		 "sampling temperature, 0 to 2", 0, 2},
		{ST_OPT_FLAG, .name = "replay", 0, &a->replay, NULL,
		 "answers from OUT's cache only (no endpoint needed; a missing\n"
		 "answer is a no_answer round, left out of the scores)"},
		{ST_OPT_STRING, .name = "db", 0, &a->db, "FILE",
		 "leaderboard store (SQLite)", .unset = "$STITCH_EVAL_DB, else\n"
		 "$XDG_DATA_HOME/stitch/eval.db or ~/.local/share/stitch/eval.db"},
		{ST_OPT_FLAG, .name = "no-db", 0, &a->no_db, NULL, "do not record the run"},
		{ST_OPT_STRING, .name = "queue", 0, &a->queue, "URL",
		 "verify on the queue's workers (`stitch worker`) instead of here;\n"
		 "the verify options travel with each job (seeds are the workers')"},
		{ST_OPT_STRING, .name = "queue-arch", 0, &a->queue_arch, "A",
		 "with --queue: the arch the jobs need",
		 .unset = "host with --backend host, else --arch or sm_90a"},
		{ST_OPT_END},
	};
	_Static_assert(sizeof table / sizeof table[0] <= EVAL_OPT_N, "EVAL_OPT_N");
	memcpy(t, table, sizeof table);
}

static const st_opt_conflict conflicts[] = {
	{"db", "no-db"}, {"no-timing", "time-set"}, {NULL, NULL},
};

static void usage(FILE *f)
{
	eval_args a = EVAL_DEFAULTS;
	st_verify_opts o;
	st_verify_opts_default(&o);
	st_opt own[EVAL_OPT_N], ver[ST_VERIFY_OPT_N];
	own_table(&a, own);
	st_verify_opt_table(&o, &a.quiet, 0, ver);
	fprintf(f,
	        "usage: stitch eval --model M [--mode oneshot|refine|agent] [--samples K] [--rounds R]\n"
	        "                   [--suite NAMES] [--tier N] [--task GLOB] [--out DIR]\n"
	        "                   [--parallel P] [--db FILE]\n"
	        "                   [--queue redis://HOST:PORT [--queue-arch A]] [verify options]\n"
	        "       stitch eval --compare RUN... [--db FILE] [--html FILE] [--json]\n"
	        "       stitch eval --list [--db FILE]\n\n"
	        "Evaluate a model on the suite (%s; --suite chooses others, e.g.\n"
	        "kb1,kb2,kb3 for KernelBench's imported levels). Every task gets K samples, each\n"
	        "starting from the task's first-draft prompt (the prompt `stitch export --skill gen`\n"
	        "writes):\n"
	        "  oneshot  that prompt alone, one answer;\n"
	        "  refine   R rounds of one conversation: after each answer the model is told only\n"
	        "           the compile errors (or policy hits), else whether the tests passed;\n"
	        "  agent    the Planner/Coder/Verifier loop of `stitch solve`, R attempts.\n"
	        "Every round is verified like any candidate (no profile). Scores per task, tier and\n"
	        "overall: the unbiased pass@1 and pass@K of compiling, correctness and fast_p (correct\n"
	        "and more than p times faster, p = 0, 1, 1.5, 2, 5) against the reference and the\n"
	        "expert (over each sample's final code: refine's last answer with code, the agent's\n"
	        "best), geometric-mean speedups, SOL fraction, the same rates round by round, results\n"
	        "flagged as suspicious, tokens and money. A round the verifier could not judge (its\n"
	        "own or the task's error) counts in no score and is listed. The run is stored in the\n"
	        "leaderboard (--db) for --compare, which prints runs side by side and writes an HTML\n"
	        "page (`stitch eval --compare --help` tells its options).\n\n"
	        "options:\n",
	        st_cli_tasks_root());
	st_opt_usage(f, own);
	st_opt_usage(f, ver);
	fprintf(f, "\nNot together: --db and --no-db; --no-timing and --time-set.\n"
	           "\nexit: 0 done, 2 bad input, 3 no GPU, no model endpoint, or an unwritable store\n");
}

/* The command line into a and o: 0, or the exit code after saying why. */
static int parse_args(int argc, char **argv, eval_args *a, st_verify_opts *o)
{
	st_opt own[EVAL_OPT_N], ver[ST_VERIFY_OPT_N];
	own_table(a, own);
	st_verify_opt_table(o, &a->quiet, 0, ver);
	const st_opt *const tables[] = {own, ver, NULL};
	const char *pos[1];
	int n_pos;
	if (st_cli_parse("eval", tables, conflicts, argc, argv, pos, 1, &n_pos))
		return ST_EXIT_USAGE;
	if (n_pos) {
		st_cli_error("eval: unexpected argument '%s'; see 'stitch eval --help'", pos[0]);
		return ST_EXIT_USAGE;
	}
	if (!a->model) {
		st_cli_error("eval: --model is required");
		return ST_EXIT_USAGE;
	}
	if (a->queue_arch && !a->queue) {
		st_cli_error("eval: --queue-arch goes with --queue");
		return ST_EXIT_USAGE;
	}
	if (!strcmp(a->mode, "oneshot") && a->rounds > 1) {
		st_cli_error("eval: --rounds goes with --mode refine or agent; oneshot has one");
		return ST_EXIT_USAGE;
	}
	/* before the model's endpoint is asked anything */
	return st_cli_suite("eval", a->suite, a->queue, &a->tasks);
}

/* Mode, rounds, queue and model into c; the endpoint is checked here, before any work. */
static int setup(const eval_args *a, const st_verify_opts *o, eval_ctx *c)
{
	c->mode = !strcmp(a->mode, "refine") ? EVAL_REFINE
	          : !strcmp(a->mode, "agent") ? EVAL_AGENT : EVAL_ONESHOT;
	c->rounds = a->rounds > 0 ? a->rounds
	            : c->mode == EVAL_REFINE ? 3 : c->mode == EVAL_AGENT ? 4 : 1;
	st_err err;
	if (a->queue) {
		st_queue q;
		if (st_queue_parse_url(a->queue, &q, &err)) {
			st_cli_error("eval: --queue: %s", err.msg);
			return ST_EXIT_USAGE;
		}
		c->queue_url = a->queue;
		c->queue_arch = a->queue_arch ? a->queue_arch : !strcmp(o->backend, "host") ? "host"
		                                              : o->arch ? o->arch : "sm_90a";
	}
	st_status s = st_llm_model_parse(a->model, &c->llm_model, &err);
	if (!s && !a->replay)
		s = st_llm_model_check(&c->llm_model, 10, &err);
	if (s) {
		/* an unreachable endpoint is the environment's fault, not the command line's */
		st_cli_error("eval: %s", err.msg);
		return s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
	}
	return 0;
}

static int has_arg(int argc, char **argv, const char *name)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], name))
			return 1;
	return 0;
}

/* The task's tier, from its task.json (an imported task's id says "level<N>", not its tier). */
static int tier_of(const char *task_dir, st_err *err)
{
	st_task t;
	if (st_task_load(task_dir, &t, err))
		return -1;
	int tier = t.tier;
	st_task_free(&t);
	return tier;
}

/* The items: K per task of the chosen ones, in the suite's order. */
static int make_items(eval_ctx *c, const st_suite *su, const json_t *records, int tier, int K,
                      st_err *err)
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
		const char *task_dir = id ? st_suite_find(su, id) : NULL;
		if (!task_dir)
			continue;
		int t = tier_of(task_dir, err);
		if (t < 0)
			return -1;
		if (tier && t != tier)
			continue;
		const char *prompt = json_string_value(
			json_object_get(json_array_get(json_object_get(rec, "prompt"), 0), "content"));
		char dir[PATH_MAX];
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
	st_buf text = {0};
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r) {
		char *line = json_dumps(r, JSON_COMPACT);
		if (line)
			st_buf_printf(&text, "%s\n", line);
		free(line);
	}
	if (!text.oom)
		(void)st_write_file_atomic(path, st_buf_str(&text), text.n, err);
	st_buf_free(&text);
}

static const char *mode_name(eval_mode m)
{
	return m == EVAL_AGENT ? "agent" : m == EVAL_REFINE ? "refine" : "oneshot";
}

/* The suite's prompts, the out folder, the answer cache and the items: the number of tasks
 * chosen (> 0), or minus the exit code after saying why. */
static int prepare(eval_args *a, const st_verify_opts *o, eval_ctx *c, json_t **records)
{
	st_err err;
	char prompts[PATH_MAX];
	if (!a->no_db && !a->db)
		a->db = st_eval_db_default_path(a->dbpath, sizeof a->dbpath);
	snprintf(prompts, sizeof prompts, "%s/prompts", st_home());
	const char **dirs = calloc((size_t)a->tasks.n, sizeof *dirs);
	if (!dirs) {
		st_cli_error("eval: out of memory");
		return -ST_EXIT_ENV;
	}
	for (int i = 0; i < a->tasks.n; i++)
		dirs[i] = a->tasks.v[i].dir;
	st_export_opts eo = {.skill = "gen", .glob = a->glob, .backend = o->backend,
	                     .prompts_dir = prompts, .tasks_root = st_cli_tasks_root(),
	                     .task_dirs = dirs, .n_task_dirs = a->tasks.n};
	st_status s = st_export_records(&eo, records, &err);
	free(dirs);
	if (s) {
		st_cli_error("eval: %s", err.msg);
		return -ST_EXIT_USAGE;
	}
	if (st_mkdirs(a->out, &err)) {
		st_cli_error("eval: %s", err.msg);
		return -ST_EXIT_ENV;
	}
	st_llm_opts_default(&c->llm);
	snprintf(a->cache, sizeof a->cache, "%s/llm-cache.sqlite", a->out);
	c->llm.cache_path = a->cache;
	c->llm.replay = a->replay;
	int n_tasks = make_items(c, &a->tasks, *records, a->tier, a->samples, &err);
	if (n_tasks < 0)
		st_cli_error("eval: %s", err.msg);
	else if (!n_tasks)
		st_cli_error("eval: no task matches%s%s", a->glob ? " --task " : "",
		             a->glob ? a->glob : "");
	return n_tasks > 0 ? n_tasks : -ST_EXIT_USAGE;
}

/* results.jsonl, scores.json and the leaderboard; the scores (caller frees), with *rc raised
 * to ST_EXIT_ENV where one could not be written. */
static json_t *record(eval_args *a, const st_verify_opts *o, eval_ctx *c, json_t *rows,
                      const char *started, double wall_s, long long *run_id, int *rc)
{
	st_err err;
	int64_t tin = 0, tout = 0;
	double cost = 0;
	for (int j = 0; j < c->n_items; j++) {
		tin += c->items[j].tokens_in;
		tout += c->items[j].tokens_out;
		cost += c->items[j].cost_usd;
	}
	write_results(a->out, rows, &err);
	json_t *scores = st_eval_scores(rows, a->samples, c->rounds);
	json_t *facts = json_pack("{s:s,s:s,s:i,s:i,s:s,s:s,s:f,s:o,s:{s:I,s:I,s:f}}",
	                          "model", a->model, "mode", mode_name(c->mode), "samples",
	                          a->samples, "rounds", c->rounds, "backend", o->backend, "started",
	                          started, "wall_s", wall_s, "commit", st_cli_commit_id(), "usage",
	                          "input_tokens", (json_int_t)tin, "output_tokens", (json_int_t)tout,
	                          "cost_usd", cost);
	json_object_update(scores, facts);
	json_decref(facts);
	json_object_set_new(scores, "device", c->device[0] ? json_string(c->device) : json_null());
	snprintf(a->spath, sizeof a->spath, "%s/scores.json", a->out);
	char *text = json_dumps(scores, JSON_INDENT(2));
	if (!text || st_write_file_atomic(a->spath, text, strlen(text), &err)) {
		st_cli_error("eval: %s", text ? err.msg : "out of memory");
		*rc = ST_EXIT_ENV;
	}
	free(text);
	if (a->db && *rc == ST_EXIT_OK) {
		st_eval_db *d = NULL;
		if (st_eval_db_open(a->db, &d, &err) || st_eval_db_save(d, scores, rows, run_id, &err)) {
			st_cli_error("eval: the leaderboard store: %s", err.msg);
			*rc = ST_EXIT_ENV;
		}
		st_eval_db_close(d);
	}
	return scores;
}

/* The summary on stdout: pass@1 rates, the round curve, suspicious results, where it went. */
static void summary(const eval_args *a, const eval_ctx *c, const json_t *scores, int n_tasks,
                    long long run_id)
{
	const json_t *usage = json_object_get(scores, "usage");
	const json_t *p1 = json_object_get(json_object_get(scores, "overall"), "pass@1");
	printf("%s, %s, %d tasks x %d samples: pass@1 compile %.2f, correct %.2f, fast_1 vs "
	       "reference %.2f, vs expert %.2f, vs best %.2f; %lld tokens in, %lld out, $%.2f\n",
	       a->model, mode_name(c->mode), n_tasks, a->samples,
	       json_number_value(json_object_get(p1, "compile")),
	       json_number_value(json_object_get(p1, "correct")),
	       json_number_value(json_object_get(p1, "fast_1_vs_reference")),
	       json_number_value(json_object_get(p1, "fast_1_vs_expert")),
	       json_number_value(json_object_get(p1, "fast_1_vs_best")),
	       (long long)json_integer_value(json_object_get(usage, "input_tokens")),
	       (long long)json_integer_value(json_object_get(usage, "output_tokens")),
	       json_number_value(json_object_get(usage, "cost_usd")));
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
	const json_t *unjudged = json_object_get(scores, "unjudged");
	if (json_array_size(unjudged)) {
		const json_t *u = json_array_get(unjudged, 0);
		printf("not judged: %zu rounds, left out of every score: the model's endpoint gave no "
		       "answer, or the verifier or the task failed (first: %s: %s; see scores.json)\n",
		       json_array_size(unjudged),
		       json_string_value(json_object_get(u, "task")),
		       json_string_value(json_object_get(u, "reason")));
	}
	printf("scores: %s\n", a->spath);
	if (run_id)
		printf("stored as eval run %lld in %s\n", run_id, a->db);
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
	eval_args a = EVAL_DEFAULTS;
	int rc = parse_args(argc, argv, &a, &o);
	if (rc)
		return rc;
	eval_ctx c = {.temperature = a.temperature, .out = a.out, .model = a.model,
	              .quiet = a.quiet, .verify = o};
	if ((rc = setup(&a, &o, &c))) {
		st_suite_free(&a.tasks);
		return rc;
	}
	json_t *records = NULL;
	int n_tasks = prepare(&a, &o, &c, &records);
	st_suite_free(&a.tasks); /* the items hold copies of what they need */
	if (n_tasks < 0) {
		free(c.items);
		json_decref(records);
		return -n_tasks;
	}
	char started[32];
	time_t now = time(NULL);
	strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	double t0 = st_now_s();
	if (c.mode == EVAL_ONESHOT)
		fprintf(stderr, "eval: %d tasks x %d samples, oneshot, from %s\n", n_tasks, a.samples,
		        a.model);
	else
		fprintf(stderr, "eval: %d tasks x %d samples, %s with %d %s, from %s\n", n_tasks,
		        a.samples, mode_name(c.mode), c.rounds,
		        c.mode == EVAL_AGENT ? "attempts" : "rounds", a.model);
	c.queue_options = a.queue ? st_verify_opts_json(&o) : NULL;
	st_err err;
	if (eval_run(&c, a.parallel, &err)) {
		st_cli_error("eval: stopped: %s", err.msg);
		rc = ST_EXIT_ENV;
	}
	double wall_s = st_now_s() - t0;
	json_t *rows = json_array();
	for (int j = 0; j < c.n_items; j++)
		if (c.items[j].rows) /* none where a stopped run never reached the sample */
			json_array_extend(rows, c.items[j].rows);
	long long run_id = 0;
	json_t *scores = record(&a, &o, &c, rows, started, wall_s, &run_id, &rc);
	summary(&a, &c, scores, n_tasks, run_id);
	json_decref(scores);
	json_decref(rows);
	json_decref(c.queue_options);
	for (int j = 0; j < c.n_items; j++)
		json_decref(c.items[j].rows);
	free(c.items);
	json_decref(records);
	return rc;
}
