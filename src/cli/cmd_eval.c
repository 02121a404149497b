/* `stitch eval --model M --mode oneshot`: how good is a model at writing the suite's solutions
 * from the task prompt alone. K independent samples per task (the Coder's first-draft prompt,
 * exactly as `stitch export --skill gen` writes it), generated concurrently, each verified
 * (one at a time: timing needs the GPU alone), then unbiased pass@k for compiling, correctness
 * and fast_p against the reference and the expert, per task, tier and overall. Every answer is
 * cached in OUT, so an interrupted run resumes without paying for an answer twice. */
#include "cli.h"

#include <fnmatch.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/agents.h"
#include "agents/dataset.h"
#include "common/fs.h"
#include "common/paths.h"
#include "llm/llm.h"
#include "stitch/stitch.h"
#include "task/task.h"
#include "verify_opts.h"

static const double fast_p[] = {1, 1.5, 2, 5};
#define N_FAST 4

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: stitch eval --model M [--mode oneshot] [--samples K] [--tier N] [--task GLOB]\n"
	        "                   [--out DIR] [--parallel P] [verify options]\n\n"
	        "Evaluate a model on the suite (%s): K independent samples per task from the\n"
	        "task's first-draft prompt alone (the prompt `stitch export --skill gen` writes), each\n"
	        "verified like any candidate; then per task, tier and overall the unbiased pass@k\n"
	        "(k = 1 and K) of: compiling, correct, and fast_p (correct and more than p times\n"
	        "faster, p = 1, 1.5, 2, 5) against the reference and against the expert, with\n"
	        "geometric-mean speedups of the correct samples, tokens and money spent.\n\n"
	        "options:\n"
	        "  --model M        as stitch solve: openai:MODEL, anthropic:MODEL,\n"
	        "                   openai-compat:URL:MODEL (vLLM, SGLang, llama.cpp, Ollama)\n"
	        "  --mode oneshot   the only mode built yet (refine and agent are issue work to come)\n"
	        "  --samples K      samples per task (default 1)\n"
	        "  --tier N, --task GLOB   which tasks (default: all)\n"
	        "  --out DIR        answers, code, results.jsonl, scores.json and the answer cache\n"
	        "                   (default eval-out); run again to resume\n"
	        "  --parallel P     requests to the model at once (default 4)\n"
	        "  --temperature T  sampling temperature (default 0.8)\n"
	        "  --replay         answers from OUT's cache only (no endpoint needed; a missing\n"
	        "                   answer is a no_answer sample)\n"
	        ST_VERIFY_OPTS_HELP
	        "\nexit: 0 done, 2 bad input, 3 no GPU, no model endpoint\n",
	        st_cli_tasks_root());
}

typedef struct sample {
	const char *task_id;
	const char *prompt;
	int k;
	char *answer;
	char code_path[PATH_MAX + 64];
	const char *why;       /* no code: why not */
	int64_t tokens_in, tokens_out;
	double cost;
	st_status gen_status;
	char gen_error[1024];
} sample;

typedef struct gen_pool {
	sample *s;
	int n, next;
	pthread_mutex_t mu;
	st_llm_model model;
	st_llm_opts lo;
	double temperature;
	const char *out;
	int host;
} gen_pool;

static void task_folder(const char *out, const char *task_id, char *dir, size_t len)
{
	char id[256];
	snprintf(id, sizeof id, "%s", task_id);
	for (char *p = id; *p; p++)
		if (*p == '/')
			*p = '_';
	snprintf(dir, len, "%s/%s", out, id);
}

static void *gen_main(void *arg)
{
	gen_pool *g = arg;
	st_llm_client *c = NULL;
	st_err err;
	int ok = !st_llm_client_new(&g->model, &g->lo, &c, &err);
	for (;;) {
		pthread_mutex_lock(&g->mu);
		int i = g->next < g->n ? g->next++ : -1;
		pthread_mutex_unlock(&g->mu);
		if (i < 0)
			break;
		sample *s = &g->s[i];
		if (!ok) {
			s->gen_status = ST_E_SYSTEM;
			snprintf(s->gen_error, sizeof s->gen_error, "%s", err.msg);
			continue;
		}
		st_llm_msg m = {"user", s->prompt};
		st_llm_request q = {.msgs = &m, .n_msgs = 1, .temperature = g->temperature,
		                    .max_tokens = 16000, .sample = s->k};
		st_llm_response r;
		memset(&r, 0, sizeof r);
		st_err e;
		s->gen_status = st_llm_complete(c, &q, &r, &e);
		if (s->gen_status) {
			snprintf(s->gen_error, sizeof s->gen_error, "%s", e.msg);
			continue;
		}
		s->answer = strdup(r.text ? r.text : "");
		s->tokens_in = r.input_tokens;
		s->tokens_out = r.output_tokens;
		s->cost = r.cost_usd;
		char dir[PATH_MAX], path[PATH_MAX + 64];
		task_folder(g->out, s->task_id, dir, sizeof dir);
		snprintf(path, sizeof path, "%s/sample%d.answer.md", dir, s->k);
		st_write_file_atomic(path, s->answer, strlen(s->answer), &e);
		char *code = NULL;
		if (st_extract_code(s->answer, r.truncated, &code, &s->why) == ST_EXTRACT_OK) {
			snprintf(s->code_path, sizeof s->code_path, "%s/sample%d.%s", dir, s->k,
			         g->host ? "c" : "cu");
			if (st_write_file_atomic(s->code_path, code, strlen(code), &e))
				s->code_path[0] = 0;
		}
		free(code);
		st_llm_response_free(&r);
	}
	st_llm_client_free(c);
	return NULL;
}

/* Unbiased pass@k of n samples with c successes: 1 - C(n-c, k) / C(n, k). */
static double pass_at(int n, int c, int k)
{
	if (k > n)
		k = n;
	if (n - c < k)
		return 1.0;
	double p = 1.0;
	for (int i = n - c + 1; i <= n; i++)
		p *= 1.0 - (double)k / i;
	return 1.0 - p;
}

/* Per task: counts of compiled, correct and fast samples; pass@1 and pass@K of each. */
static json_t *task_scores(const json_t *rows, int n, int K)
{
	int compiled = 0, correct = 0, fr[N_FAST] = {0}, fe[N_FAST] = {0};
	double logsum = 0;
	int nsp = 0;
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r) {
		compiled += json_is_true(json_object_get(r, "compiled"));
		int ok = json_is_true(json_object_get(r, "correct"));
		correct += ok;
		double vr = json_number_value(json_object_get(r, "vs_reference"));
		double ve = json_number_value(json_object_get(r, "vs_expert"));
		for (int p = 0; p < N_FAST; p++) {
			fr[p] += ok && vr > fast_p[p];
			fe[p] += ok && ve > fast_p[p];
		}
		if (ok && vr > 0) {
			logsum += log(vr);
			nsp++;
		}
	}
	json_t *o = json_pack("{s:i,s:i,s:i}", "samples", n, "compiled", compiled, "correct", correct);
	int ks[2] = {1, K};
	for (int j = 0; j < (K > 1 ? 2 : 1); j++) {
		char key[32];
		json_t *x = json_object();
		json_object_set_new(x, "compile", json_real(pass_at(n, compiled, ks[j])));
		json_object_set_new(x, "correct", json_real(pass_at(n, correct, ks[j])));
		for (int p = 0; p < N_FAST; p++) {
			char name[48];
			snprintf(name, sizeof name, "fast_%g_vs_reference", fast_p[p]);
			json_object_set_new(x, name, json_real(pass_at(n, fr[p], ks[j])));
			snprintf(name, sizeof name, "fast_%g_vs_expert", fast_p[p]);
			json_object_set_new(x, name, json_real(pass_at(n, fe[p], ks[j])));
		}
		snprintf(key, sizeof key, "pass@%d", ks[j]);
		json_object_set_new(o, key, x);
	}
	if (nsp)
		json_object_set_new(o, "geomean_vs_reference", json_real(exp(logsum / nsp)));
	return o;
}

/* The mean of every pass@ figure over a group of tasks. */
static json_t *mean_scores(json_t *tasks, const char *prefix)
{
	json_t *sum = json_object();
	int n = 0;
	const char *id;
	json_t *t;
	json_object_foreach(tasks, id, t) {
		if (prefix && strncmp(id, prefix, strlen(prefix)))
			continue;
		n++;
		const char *pk;
		json_t *x;
		json_object_foreach(t, pk, x) {
			if (strncmp(pk, "pass@", 5))
				continue;
			json_t *acc = json_object_get(sum, pk);
			if (!acc)
				json_object_set_new(sum, pk, acc = json_object());
			const char *m;
			json_t *v;
			json_object_foreach(x, m, v)
				json_object_set_new(acc, m, json_real(json_number_value(json_object_get(acc, m)) +
				                                      json_number_value(v)));
		}
	}
	const char *pk;
	json_t *acc;
	json_object_foreach(sum, pk, acc) {
		const char *m;
		json_t *v;
		json_object_foreach(acc, m, v)
			json_object_set_new(acc, m, json_real(json_number_value(v) / n));
	}
	json_object_set_new(sum, "tasks", json_integer(n));
	return sum;
}

int cmd_eval(int argc, char **argv)
{
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	st_verify_opts o;
	st_verify_opts_default(&o);
	o.profile = 0;
	const char *model = NULL, *mode = "oneshot", *glob = NULL, *out = "eval-out";
	double samples = 1, parallel = 4, tier = 0, temperature = 0.8;
	int quiet = 0, replay = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--replay")) {
			replay = 1;
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
		else if (!strcmp(a, "--samples"))
			bad = st_cli_number(a, v, 1, 1000, &samples);
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
	if (strcmp(mode, "oneshot")) {
		st_cli_error("eval: --mode %s is not built yet; oneshot is", mode);
		return ST_EXIT_USAGE;
	}
	int host = !strcmp(o.backend, "host");
	gen_pool g = {.temperature = temperature, .out = out, .host = host};
	st_err err;
	if (st_llm_model_parse(model, &g.model, &err) ||
	    (!replay && st_llm_model_check(&g.model, 10, &err))) {
		st_cli_error("eval: %s", err.msg);
		return ST_EXIT_USAGE;
	}
	char prompts[PATH_MAX], cache[PATH_MAX + 32];
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
	st_llm_opts_default(&g.lo);
	snprintf(cache, sizeof cache, "%s/llm-cache.sqlite", out);
	g.lo.cache_path = cache;
	g.lo.replay = replay;
	int K = (int)samples, n_tasks = 0;
	g.s = calloc(json_array_size(records) * (size_t)K + 1, sizeof *g.s);
	size_t i;
	json_t *rec;
	json_array_foreach(records, i, rec) {
		const char *id = json_string_value(json_object_get(json_object_get(rec, "extra_info"),
		                                                   "task_id"));
		if (tier && (id[0] != 't' || atoi(id + 1) != (int)tier))
			continue;
		const char *prompt = json_string_value(
			json_object_get(json_array_get(json_object_get(rec, "prompt"), 0), "content"));
		char dir[PATH_MAX];
		task_folder(out, id, dir, sizeof dir);
		st_mkdirs(dir, &err);
		for (int k = 0; k < K; k++)
			g.s[g.n++] = (sample){.task_id = id, .prompt = prompt, .k = k};
		n_tasks++;
	}
	fprintf(stderr, "eval: %d tasks x %d samples from %s\n", n_tasks, K, model);
	pthread_mutex_init(&g.mu, NULL);
	pthread_t th[256];
	int nth = (int)parallel < g.n ? (int)parallel : g.n, started = 0;
	for (int t = 0; t < nth; t++)
		started += pthread_create(&th[started], NULL, gen_main, &g) == 0;
	for (int t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	if (!quiet)
		fprintf(stderr, "eval: answers in; verifying\n");

	json_t *by_task = json_object(), *tasks = json_object();
	char results[PATH_MAX + 32];
	snprintf(results, sizeof results, "%s/results.jsonl", out);
	FILE *rf = fopen(results, "w");
	int rc = ST_EXIT_OK;
	int64_t tin = 0, tout = 0;
	double cost = 0;
	for (int j = 0; j < g.n && rc == ST_EXIT_OK; j++) {
		sample *s = &g.s[j];
		tin += s->tokens_in;
		tout += s->tokens_out;
		cost += s->cost;
		json_t *row = json_pack("{s:s,s:i,s:b,s:b}", "task", s->task_id, "sample", s->k,
		                        "compiled", 0, "correct", 0);
		if (s->gen_status) {
			json_object_set_new(row, "status", json_string("no_answer"));
			json_object_set_new(row, "reason", json_string(s->gen_error));
		} else if (!s->code_path[0]) {
			json_object_set_new(row, "status", json_string("no_code"));
			json_object_set_new(row, "reason", json_string(s->why ? s->why : ""));
		} else {
			char task_dir[PATH_MAX];
			json_t *v = NULL;
			st_status st = st_task_resolve(s->task_id, st_cli_tasks_root(), task_dir,
			                               sizeof task_dir, &err);
			if (!st)
				st = st_verify(task_dir, s->code_path, &o, &v, &err);
			if (st == ST_E_NODEVICE || st == ST_E_SYSTEM) {
				st_cli_error("eval: %s", err.msg);
				rc = ST_EXIT_ENV;
			}
			const char *status = json_string_value(json_object_get(v, "status"));
			json_object_set_new(row, "status", json_string(status ? status : "error"));
			json_object_set_new(row, "compiled",
			                    json_boolean(status && strcmp(status, "compile_error")));
			json_object_set_new(row, "correct", json_boolean(status && !strcmp(status, "ok")));
			json_t *sp = json_object_get(v, "speedup");
			if (json_object_get(sp, "vs_reference"))
				json_object_set(row, "vs_reference", json_object_get(sp, "vs_reference"));
			if (json_object_get(sp, "vs_expert"))
				json_object_set(row, "vs_expert", json_object_get(sp, "vs_expert"));
			json_object_set(row, "flags", json_object_get(v, "flags"));
			json_decref(v);
		}
		if (!quiet)
			fprintf(stderr, "eval: %-24s sample %d  %s\n", s->task_id, s->k,
			        json_string_value(json_object_get(row, "status")));
		char *line = json_dumps(row, JSON_COMPACT);
		if (rf && line)
			fprintf(rf, "%s\n", line);
		free(line);
		json_t *list = json_object_get(by_task, s->task_id);
		if (!list)
			json_object_set_new(by_task, s->task_id, list = json_array());
		json_array_append_new(list, row);
	}
	if (rf)
		fclose(rf);
	const char *id;
	json_t *list;
	json_object_foreach(by_task, id, list)
		json_object_set_new(tasks, id, task_scores(list, (int)json_array_size(list), K));
	json_t *tiers = json_object();
	for (int t = 1; t <= 4; t++) {
		char prefix[8];
		snprintf(prefix, sizeof prefix, "t%d/", t);
		json_t *m = mean_scores(tasks, prefix);
		if (json_integer_value(json_object_get(m, "tasks")))
			json_object_set_new(tiers, prefix, m);
		else
			json_decref(m);
	}
	json_t *scores = json_pack("{s:s,s:s,s:i,s:o,s:o,s:o,s:{s:I,s:I,s:f}}", "model", model, "mode",
	                           mode, "samples", K, "tasks", tasks, "tiers", tiers, "overall",
	                           mean_scores(tasks, NULL), "usage", "input_tokens", (json_int_t)tin,
	                           "output_tokens", (json_int_t)tout, "cost_usd", cost);
	char spath[PATH_MAX + 32];
	snprintf(spath, sizeof spath, "%s/scores.json", out);
	char *text = json_dumps(scores, JSON_INDENT(2));
	if (text)
		st_write_file_atomic(spath, text, strlen(text), &err);
	free(text);
	json_t *all = json_object_get(scores, "overall");
	json_t *p1 = json_object_get(all, "pass@1");
	printf("%s, oneshot, %d tasks x %d samples: pass@1 compile %.2f, correct %.2f, fast_1 vs "
	       "reference %.2f, vs expert %.2f; %lld tokens in, %lld out, $%.2f\n", model, n_tasks,
	       K, json_number_value(json_object_get(p1, "compile")),
	       json_number_value(json_object_get(p1, "correct")),
	       json_number_value(json_object_get(p1, "fast_1_vs_reference")),
	       json_number_value(json_object_get(p1, "fast_1_vs_expert")), (long long)tin,
	       (long long)tout, cost);
	printf("scores: %s\n", spath);
	json_decref(scores);
	json_decref(by_task);
	for (int j = 0; j < g.n; j++)
		free(g.s[j].answer);
	free(g.s);
	json_decref(records);
	return rc;
}
