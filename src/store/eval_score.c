/* The scores of a model evaluation (`stitch eval`) from its rows, one per sample and round:
 * per task the unbiased pass@1 and pass@K of compiling, correctness and fast_p against the
 * reference and the expert (over each sample's final row), geometric-mean speedups and SOL of
 * the correct ones, and per round the rates of the code the samples held then, so that a loop
 * drifting toward slow but correct code shows; per tier and overall the mean over tasks. A pure
 * function of the rows, so scores read back from results.jsonl or the store come out the same. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common/json_get.h"
#include "eval.h"

double st_eval_pass_at(int n, int c, int k)
{
	if (n <= 0)
		return 0;
	if (k > n)
		k = n;
	if (n - c < k)
		return 1.0;
	double p = 1.0; /* C(n-c, k) / C(n, k) as a product, free of overflow */
	for (int i = n - c + 1; i <= n; i++)
		p *= 1.0 - (double)k / i;
	return 1.0 - p;
}

/* fast_p and geomean against each of st_bench_bases: reference, expert, best */
#define NB ST_BENCH_NB

/* Counts over a task's final rows, and pass@k of each. */
static json_t *pass_block(int n, int compiled, int correct, const int fast[NB][ST_BENCH_NP], int k)
{
	json_t *x = json_pack("{s:f,s:f}", "compile", st_eval_pass_at(n, compiled, k), "correct",
	                      st_eval_pass_at(n, correct, k));
	for (int b = 0; b < NB; b++)
		for (int p = 0; p < ST_BENCH_NP; p++) {
			char name[48];
			snprintf(name, sizeof name, "fast_%g_vs_%s", st_bench_p[p], st_bench_bases[b]);
			json_object_set_new(x, name, json_real(st_eval_pass_at(n, fast[b][p], k)));
		}
	return x;
}

/* A correct row's speedup over base (0 when not correct or unknown). */
static double speedup(const json_t *r, int b)
{
	if (!json_is_true(json_object_get(r, "correct")))
		return 0;
	char key[32];
	snprintf(key, sizeof key, "vs_%s", st_bench_bases[b]);
	double s = st_json_num(r, key);
	return s > 0 && isfinite(s) ? s : 0;
}

/* Rates of a set of rows (one per sample): compile, correct, fast_1 vs reference, geomean. */
static json_t *round_block(int round, json_t *const *rows, int n)
{
	int compiled = 0, correct = 0, fast1 = 0, ns = 0;
	double logsum = 0;
	for (int i = 0; i < n; i++) {
		compiled += json_is_true(json_object_get(rows[i], "compiled"));
		correct += json_is_true(json_object_get(rows[i], "correct"));
		double s = speedup(rows[i], 0);
		fast1 += s > 1;
		if (s > 0) {
			logsum += log(s);
			ns++;
		}
	}
	return json_pack("{s:i,s:f,s:f,s:f,s:o}", "round", round, "compile",
	                 n ? (double)compiled / n : 0, "correct", n ? (double)correct / n : 0,
	                 "fast_1_vs_reference", n ? (double)fast1 / n : 0, "geomean_vs_reference",
	                 ns ? json_real(exp(logsum / ns)) : json_null());
}

/* One task's scores from its rows (every round of every sample). */
static json_t *task_scores(const json_t *rows, int K, int R)
{
	int n = 0, compiled = 0, correct = 0, fast[NB][ST_BENCH_NP] = {{0}}, ns[NB] = {0}, nsol = 0;
	double logsum[NB] = {0}, sol = 0;
	int max_sample = -1;
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r) {
		int s = (int)json_integer_value(json_object_get(r, "sample"));
		max_sample = s > max_sample ? s : max_sample;
		if (!json_is_true(json_object_get(r, "final")))
			continue;
		n++;
		compiled += json_is_true(json_object_get(r, "compiled"));
		correct += json_is_true(json_object_get(r, "correct"));
		for (int b = 0; b < NB; b++) {
			double x = speedup(r, b);
			for (int p = 0; p < ST_BENCH_NP; p++)
				fast[b][p] += json_is_true(json_object_get(r, "correct")) && x > st_bench_p[p];
			if (x > 0) {
				logsum[b] += log(x);
				ns[b]++;
			}
		}
		if (json_is_true(json_object_get(r, "correct")) && st_json_num(r, "sol_fraction") > 0) {
			sol += st_json_num(r, "sol_fraction");
			nsol++;
		}
	}
	json_t *o = json_pack("{s:i,s:i,s:i}", "samples", n, "compiled", compiled, "correct", correct);
	json_object_set_new(o, "pass@1", pass_block(n, compiled, correct, fast, 1));
	if (K > 1) {
		char key[32];
		snprintf(key, sizeof key, "pass@%d", K);
		json_object_set_new(o, key, pass_block(n, compiled, correct, fast, K));
	}
	for (int b = 0; b < NB; b++)
		if (ns[b]) {
			char key[48];
			snprintf(key, sizeof key, "geomean_vs_%s", st_bench_bases[b]);
			json_object_set_new(o, key, json_real(exp(logsum[b] / ns[b])));
		}
	if (nsol)
		json_object_set_new(o, "sol_fraction", json_real(sol / nsol));
	/* The row each sample holds at each round: its latest row up to that round with code (a
	 * round that brought no code leaves the sample with what it had), else its latest row up
	 * to it. The rows are placed by sample and round once, then carried forward. */
	json_t *curve = json_array();
	int samples = max_sample + 1 < ST_EVAL_MAX_SAMPLES ? max_sample + 1 : ST_EVAL_MAX_SAMPLES;
	if (R > ST_EVAL_MAX_ROUNDS)
		R = ST_EVAL_MAX_ROUNDS;
	size_t cells = (size_t)(samples > 0 ? samples : 1) * (size_t)(R > 0 ? R : 1);
	json_t **any = calloc(cells, sizeof *any), **with_code = calloc(cells, sizeof *with_code);
	json_t **held = calloc((size_t)(samples > 0 ? samples : 1), sizeof *held);
	json_t **held_code = calloc((size_t)(samples > 0 ? samples : 1), sizeof *held_code);
	json_t **at = calloc((size_t)(samples > 0 ? samples : 1), sizeof *at);
	if (any && with_code && held && held_code && at) {
		json_array_foreach(rows, i, r) {
			int s = (int)json_integer_value(json_object_get(r, "sample"));
			int rr = (int)json_integer_value(json_object_get(r, "round"));
			if (s < 0 || s >= samples || rr < 1 || rr > R)
				continue;
			size_t c = (size_t)s * (size_t)R + (size_t)(rr - 1);
			if (!any[c])
				any[c] = r;
			if (!with_code[c] && json_is_string(json_object_get(r, "code")))
				with_code[c] = r;
		}
		for (int round = 1; round <= R; round++) {
			int m = 0;
			for (int s = 0; s < samples; s++) {
				size_t c = (size_t)s * (size_t)R + (size_t)(round - 1);
				if (any[c])
					held[s] = any[c];
				if (with_code[c])
					held_code[s] = with_code[c];
				if ((at[m] = held_code[s] ? held_code[s] : held[s]))
					m++;
			}
			json_array_append_new(curve, round_block(round, at, m));
		}
	}
	free(any);
	free(with_code);
	free(held);
	free(held_code);
	free(at);
	json_object_set_new(o, "rounds", curve);
	return o;
}

/* Adds x into acc[key] (a number). */
static void add(json_t *acc, const char *key, double x)
{
	json_object_set_new(acc, key, json_real(st_json_num(acc, key) + x));
}

/* The mean over a group of tasks (id prefix; NULL: all) of every pass@ figure and of every
 * round's rates; geomeans over the tasks that have one. */
static json_t *group_scores(const json_t *tasks, const char *prefix, int R)
{
	json_t *g = json_object();
	int n = 0, ng[NB] = {0};
	double lg[NB] = {0};
	json_t *rsum = json_array();
	int rn[ST_EVAL_MAX_ROUNDS], rgn[ST_EVAL_MAX_ROUNDS];
	double rgl[ST_EVAL_MAX_ROUNDS];
	if (R > ST_EVAL_MAX_ROUNDS)
		R = ST_EVAL_MAX_ROUNDS;
	for (int i = 0; i < R; i++) {
		json_array_append_new(rsum, json_object());
		rn[i] = rgn[i] = 0;
		rgl[i] = 0;
	}
	const char *id;
	json_t *t;
	json_object_foreach((json_t *)tasks, id, t) {
		if (prefix && strncmp(id, prefix, strlen(prefix)))
			continue;
		n++;
		const char *key;
		json_t *x;
		json_object_foreach(t, key, x) {
			if (strncmp(key, "pass@", 5))
				continue;
			json_t *acc = json_object_get(g, key);
			if (!acc)
				json_object_set_new(g, key, acc = json_object());
			const char *m;
			json_t *v;
			json_object_foreach(x, m, v)
				add(acc, m, json_number_value(v));
		}
		for (int b = 0; b < NB; b++) {
			char gk[48];
			snprintf(gk, sizeof gk, "geomean_vs_%s", st_bench_bases[b]);
			double s = st_json_num(t, gk);
			if (s > 0) {
				lg[b] += log(s);
				ng[b]++;
			}
		}
		size_t i;
		json_t *c;
		json_array_foreach(json_object_get(t, "rounds"), i, c) {
			if ((int)i >= R)
				break;
			json_t *acc = json_array_get(rsum, i);
			add(acc, "compile", st_json_num(c, "compile"));
			add(acc, "correct", st_json_num(c, "correct"));
			add(acc, "fast_1_vs_reference", st_json_num(c, "fast_1_vs_reference"));
			rn[i]++;
			double s = st_json_num(c, "geomean_vs_reference");
			if (s > 0) {
				rgl[i] += log(s);
				rgn[i]++;
			}
		}
	}
	const char *key;
	json_t *acc;
	json_object_foreach(g, key, acc) {
		const char *m;
		json_t *v;
		json_object_foreach(acc, m, v)
			json_object_set_new(acc, m, json_real(json_number_value(v) / n));
	}
	json_object_set_new(g, "tasks", json_integer(n));
	for (int b = 0; b < NB; b++)
		if (ng[b]) {
			char gk[48];
			snprintf(gk, sizeof gk, "geomean_vs_%s", st_bench_bases[b]);
			json_object_set_new(g, gk, json_real(exp(lg[b] / ng[b])));
		}
	json_t *curve = json_array();
	for (int i = 0; i < R; i++) {
		json_t *a = json_array_get(rsum, i);
		int d = rn[i] ? rn[i] : 1;
		json_array_append_new(curve, json_pack("{s:i,s:f,s:f,s:f,s:o}", "round", i + 1,
		                                       "compile", st_json_num(a, "compile") / d, "correct",
		                                       st_json_num(a, "correct") / d, "fast_1_vs_reference",
		                                       st_json_num(a, "fast_1_vs_reference") / d,
		                                       "geomean_vs_reference",
		                                       rgn[i] ? json_real(exp(rgl[i] / rgn[i]))
		                                              : json_null()));
	}
	json_decref(rsum);
	json_object_set_new(g, "rounds", curve);
	return g;
}

json_t *st_eval_scores(const json_t *rows, int K, int R)
{
	json_t *by_task = json_object(), *tasks = json_object(), *sus = json_array();
	json_t *unjudged = json_array();
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r) {
		const char *id = json_string_value(json_object_get(r, "task"));
		if (!id)
			continue;
		/* A verify that ended in an error of the harness or the task judged nothing, and a
		 * round the model's endpoint never answered (no_answer) gave it nothing to judge: the
		 * model is neither blamed nor credited for either; the row is listed instead. */
		const char *status = json_string_value(json_object_get(r, "status"));
		if (status && (!strcmp(status, "error") || !strcmp(status, "no_answer"))) {
			json_array_append_new(unjudged, json_pack("{s:s,s:O?,s:O?,s:O?}", "task", id, "sample",
			                                          json_object_get(r, "sample"), "round",
			                                          json_object_get(r, "round"), "reason",
			                                          json_object_get(r, "reason")));
			continue;
		}
		json_t *list = json_object_get(by_task, id);
		if (!list)
			json_object_set_new(by_task, id, list = json_array());
		json_array_append(list, r);
		json_t *why = json_object_get(r, "suspicious");
		if (json_array_size(why))
			json_array_append_new(sus, json_pack("{s:s,s:O,s:O,s:O}", "task", id, "sample",
			                                     json_object_get(r, "sample"), "round",
			                                     json_object_get(r, "round"), "why", why));
	}
	const char *id;
	json_t *list;
	json_object_foreach(by_task, id, list)
		json_object_set_new(tasks, id, task_scores(list, K, R));
	json_decref(by_task);
	json_t *tiers = json_object();
	for (int t = 1; t <= 4; t++) {
		char prefix[8];
		snprintf(prefix, sizeof prefix, "t%d/", t);
		json_t *g = group_scores(tasks, prefix, R);
		if (json_integer_value(json_object_get(g, "tasks")))
			json_object_set_new(tiers, prefix, g);
		else
			json_decref(g);
	}
	return json_pack("{s:o,s:o,s:o,s:o,s:o}", "tasks", tasks, "tiers", tiers, "overall",
	                 group_scores(tasks, NULL, R), "suspicious", sus, "unjudged", unjudged);
}
