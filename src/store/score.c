/* From verdicts to bench rows, and from rows to the scores a suite run is judged by: compile and
 * correctness rates, fast_p against the reference and the expert, geometric-mean speedups and
 * SOL fractions, overall and per tier. Pure functions of their inputs, so a run read back from
 * the store scores exactly as it did when it ran. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common/json_get.h"

const double st_bench_p[ST_BENCH_NP] = {0, 1, 1.5, 2, 5};

static json_t *num_or_null(double x)
{
	return x > 0 && isfinite(x) ? json_real(x) : json_null();
}

void st_bench_row_best(json_t *r, const json_t *verdict)
{
	const json_t *base = json_object_get(verdict, "baselines");
	const json_t *sp = json_object_get(verdict, "speedup");
	int correct = json_is_true(json_object_get(r, "correct"));
	double best = st_json_num(base, "best_ms"), vs_best = st_json_num(sp, "vs_best");
	const char *who = json_string_value(json_object_get(base, "best"));
	if (!(best > 0) || !who) { /* a verdict from before the bar, or with no vendor look-up */
		best = st_json_num(base, "expert_ms");
		vs_best = st_json_num(sp, "vs_expert");
		who = best > 0 ? "expert" : NULL;
	}
	json_object_set_new(r, "vendor_ms", num_or_null(st_json_num(base, "vendor_ms")));
	json_object_set_new(r, "best_ms", num_or_null(best));
	json_object_set_new(r, "best", who ? json_string(who) : json_null());
	json_object_set_new(r, "vs_vendor", num_or_null(correct ? st_json_num(sp, "vs_vendor") : 0));
	json_object_set_new(r, "vs_best", num_or_null(correct ? vs_best : 0));
}

void st_bench_row_roof(json_t *r, const json_t *verdict)
{
	const json_t *sol = json_object_get(verdict, "sol");
	const char *roof = json_string_value(json_object_get(sol, "roof"));
	int shown = json_is_true(json_object_get(r, "correct")) && st_json_num(r, "sol_fraction") > 0;
	json_object_set_new(r, "sol_roof", shown && roof ? json_string(roof) : json_null());
}

json_t *st_bench_row(const char *task_id, int tier, const json_t *verdict)
{
	json_t *r = json_pack("{s:s,s:i}", "task", task_id, "tier", tier);
	if (!verdict) {
		json_object_set_new(r, "status", json_string("missing"));
		json_object_set_new(r, "reason", json_string("no solution for this task"));
		json_object_set_new(r, "compiled", json_false());
		json_object_set_new(r, "correct", json_false());
		const char *keys[] = {"reference_ms", "expert_ms", "solution_ms", "vs_reference",
		                      "vs_expert", "sol_fraction"};
		for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
			json_object_set_new(r, keys[i], json_null());
		json_object_set_new(r, "suspicious", json_array());
		json_object_set_new(r, "flags", json_array());
		st_bench_row_roof(r, NULL);
		st_bench_row_best(r, NULL);
		return r;
	}
	const char *status = json_string_value(json_object_get(verdict, "status"));
	const json_t *comp = json_object_get(verdict, "compile");
	int correct = status && !strcmp(status, "ok");
	/* a policy refusal happens before the compiler runs: it did not compile */
	int compiled = json_is_true(json_object_get(comp, "ok"));
	const json_t *base = json_object_get(verdict, "baselines");
	const json_t *cand = json_object_get(json_object_get(verdict, "timing"), "candidate");
	const json_t *sp = json_object_get(verdict, "speedup");
	const json_t *sol = json_object_get(verdict, "sol");
	json_object_set_new(r, "status", json_string(status ? status : "?"));
	const char *reason = json_string_value(json_object_get(verdict, "reason"));
	json_object_set_new(r, "reason", json_string(reason ? reason : ""));
	json_object_set_new(r, "compiled", json_boolean(compiled));
	json_object_set_new(r, "correct", json_boolean(correct));
	json_object_set_new(r, "reference_ms", num_or_null(st_json_num(base, "reference_ms")));
	json_object_set_new(r, "expert_ms", num_or_null(st_json_num(base, "expert_ms")));
	json_object_set_new(r, "solution_ms",
	                    num_or_null(correct ? st_json_num(cand, "median_ms") : 0));
	json_object_set_new(r, "vs_reference",
	                    num_or_null(correct ? st_json_num(sp, "vs_reference") : 0));
	json_object_set_new(r, "vs_expert", num_or_null(correct ? st_json_num(sp, "vs_expert") : 0));
	json_object_set_new(r, "sol_fraction",
	                    num_or_null(correct ? st_json_num(sol, "fraction") : 0));
	st_bench_row_roof(r, verdict);
	json_t *sus = json_array();
	if (correct && st_json_num(sp, "vs_expert") > ST_BENCH_SUSPICIOUS_VS_EXPERT)
		json_array_append_new(sus, json_string("faster than the expert by more than 3x"));
	if (correct && st_json_num(sol, "fraction") > ST_BENCH_SUSPICIOUS_SOL)
		json_array_append_new(sus, json_string("faster than the roofline allows (SOL > 105%)"));
	json_object_set_new(r, "suspicious", sus);
	const json_t *flags = json_object_get(verdict, "flags");
	json_object_set_new(r, "flags", json_is_array(flags) ? json_deep_copy(flags) : json_array());
	st_bench_row_best(r, verdict);
	return r;
}

/* ---- scores --------------------------------------------------------------------------------- */

typedef struct acc {
	int tasks, compiled, correct, suspicious;
	int fast[ST_BENCH_NB][ST_BENCH_NP];   /* [reference, expert, best][p] */
	double log_all[ST_BENCH_NB], log_faster[ST_BENCH_NB];
	int n_all[ST_BENCH_NB], n_faster[ST_BENCH_NB];
	int with_vendor, vendor_bar;   /* rows with a vendor figure; rows whose bar it set */
	double *sol;
	int n_sol;
} acc;

const char *const st_bench_bases[ST_BENCH_NB] = {"reference", "expert", "best"};

static void add(acc *a, const json_t *r)
{
	a->tasks++;
	a->compiled += json_is_true(json_object_get(r, "compiled"));
	int correct = json_is_true(json_object_get(r, "correct"));
	a->correct += correct;
	a->suspicious += json_array_size(json_object_get(r, "suspicious")) > 0;
	a->with_vendor += st_json_num(r, "vendor_ms") > 0;
	const char *who = json_string_value(json_object_get(r, "best"));
	a->vendor_bar += who && !strcmp(who, "vendor");
	if (!correct)
		return;
	for (int b = 0; b < ST_BENCH_NB; b++) {
		char key[32];
		snprintf(key, sizeof key, "vs_%s", st_bench_bases[b]);
		double s = st_json_num(r, key);
		/* fast_0 counts every correct solution, timed or not */
		a->fast[b][0]++;
		if (s <= 0)
			continue;
		for (int k = 1; k < ST_BENCH_NP; k++)
			a->fast[b][k] += s > st_bench_p[k];
		a->log_all[b] += log(s);
		a->n_all[b]++;
		if (s > 1) {
			a->log_faster[b] += log(s);
			a->n_faster[b]++;
		}
	}
	double f = st_json_num(r, "sol_fraction");
	if (f > 0) {
		double *grown = realloc(a->sol, (size_t)(a->n_sol + 1) * sizeof *grown);
		if (grown) {
			a->sol = grown;
			a->sol[a->n_sol++] = f;
		}
	}
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

static json_t *rate(int num_, int den)
{
	return den ? json_real((double)num_ / den) : json_null();
}

static json_t *geo(double sum_log, int n)
{
	return n ? json_real(exp(sum_log / n)) : json_null();
}

static json_t *finish(acc *a)
{
	json_t *s = json_pack("{s:i,s:i,s:i,s:o,s:o,s:i}", "tasks", a->tasks, "compiled", a->compiled,
	                      "correct", a->correct, "compile_rate", rate(a->compiled, a->tasks),
	                      "correct_rate", rate(a->correct, a->tasks), "suspicious",
	                      a->suspicious);
	json_t *fp = json_object(), *gm = json_object();
	for (int b = 0; b < ST_BENCH_NB; b++) {
		json_t *one = json_object();
		for (int k = 0; k < ST_BENCH_NP; k++) {
			char key[16];
			snprintf(key, sizeof key, "%g", st_bench_p[k]);
			json_object_set_new(one, key, rate(a->fast[b][k], a->tasks));
		}
		json_object_set_new(fp, st_bench_bases[b], one);
		json_object_set_new(gm, st_bench_bases[b],
		                    json_pack("{s:o,s:o,s:i,s:i}", "correct", geo(a->log_all[b], a->n_all[b]),
		                              "faster", geo(a->log_faster[b], a->n_faster[b]), "n_correct",
		                              a->n_all[b], "n_faster", a->n_faster[b]));
	}
	json_object_set_new(s, "fast_p", fp);
	json_object_set_new(s, "geomean", gm);
	json_object_set_new(s, "bar", json_pack("{s:i,s:i}", "with_vendor", a->with_vendor,
	                                        "vendor", a->vendor_bar));
	double mean = 0, median = 0;
	if (a->n_sol) {
		qsort(a->sol, (size_t)a->n_sol, sizeof *a->sol, cmp_double);
		for (int i = 0; i < a->n_sol; i++)
			mean += a->sol[i];
		mean /= a->n_sol;
		median = a->n_sol % 2 ? a->sol[a->n_sol / 2]
		                      : 0.5 * (a->sol[a->n_sol / 2 - 1] + a->sol[a->n_sol / 2]);
	}
	json_object_set_new(s, "sol", json_pack("{s:o,s:o,s:i}", "mean", a->n_sol ? json_real(mean) : json_null(),
	                                        "median", a->n_sol ? json_real(median) : json_null(),
	                                        "n", a->n_sol));
	free(a->sol);
	return s;
}

json_t *st_bench_score(const json_t *rows)
{
	enum { MAX_TIER = 9 };
	acc all = {0}, tier[MAX_TIER + 1];
	memset(tier, 0, sizeof tier);
	size_t i;
	const json_t *r;
	json_array_foreach(rows, i, r) {
		add(&all, r);
		json_int_t t = json_integer_value(json_object_get(r, "tier"));
		if (t >= 0 && t <= MAX_TIER)
			add(&tier[t], r);
	}
	json_t *tiers = json_object();
	for (int t = 0; t <= MAX_TIER; t++) {
		if (!tier[t].tasks)
			continue;
		char key[8];
		snprintf(key, sizeof key, "%d", t);
		json_object_set_new(tiers, key, finish(&tier[t]));
	}
	return json_pack("{s:o,s:o}", "all", finish(&all), "tiers", tiers);
}
