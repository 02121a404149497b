/* Unit tests for stitch bench's model: rows built from verdicts (missing, failed, correct,
 * suspicious), the scores (rates over every row, fast_p at each threshold against both
 * baselines, geometric means, SOL mean/median, per tier), the SQLite store (a run saved with raw
 * samples and read back by id, 'last' and 'last~1', bad references refused) and the renderings
 * (CSV quoting, HTML escaping and its two SVG charts, the comparison of two runs), and the "best"
 * bar: the vendor file's look-up, rows and scores against the faster of expert and vendor, the
 * reports naming which set the bar or saying there were no vendor figures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/bench.h"
#include "task/vendor.h"

#define EPS 1e-9

/* A verdict as st_verify shapes it, reduced to what rows read. */
static json_t *verdict(const char *status, int compiled, double ref, double exp, double cand,
                       double sol)
{
	json_t *v = json_pack("{s:s,s:s,s:{s:b}}", "status", status, "reason",
	                      strcmp(status, "ok") ? "set small: C[3] off" : "", "compile", "ok",
	                      compiled);
	if (cand > 0) {
		json_object_set_new(v, "baselines", json_pack("{s:f,s:f}", "reference_ms", ref,
		                                              "expert_ms", exp));
		json_object_set_new(v, "timing",
		                    json_pack("{s:{s:f,s:[[f,f,i,b],[f,f,i,b]]},s:{s:f}}", "candidate",
		                              "median_ms", cand, "raw", cand, cand + 0.01, 1980, 0,
		                              cand * 1.01, cand + 0.02, 1975, 0, "reference",
		                              "median_ms", ref));
		json_object_set_new(v, "speedup", json_pack("{s:f,s:f}", "vs_reference", ref / cand,
		                                            "vs_expert", exp / cand));
		json_object_set_new(v, "sol", json_pack("{s:f}", "fraction", sol));
	}
	json_object_set_new(v, "flags", json_array());
	return v;
}

/* Five tasks in two tiers: missing, compile error, incorrect, correct 2x, correct 8x vs the
 * reference (and 4x the expert: suspicious). */
static json_t *sample_rows(json_t **verdicts_out)
{
	json_t *rows = json_array(), *vs = json_array();
	struct { const char *id; int tier; json_t *v; } t[] = {
		{"t1/a", 1, NULL},
		{"t1/b", 1, verdict("compile_error", 0, 0, 0, 0, 0)},
		{"t1/c", 1, verdict("incorrect", 1, 0, 0, 0, 0)},
		{"t2/d", 2, verdict("ok", 1, 2.0, 1.0, 1.0, 0.5)},
		{"t2/e", 2, verdict("ok", 1, 8.0, 4.0, 1.0, 0.9)},
	};
	/* t2/e's floor is the L2 roof's (a task with cost.roof "l2"); t2/d's says no roof (a verdict
	 * from before roofs were named) */
	json_object_set_new(json_object_get(t[4].v, "sol"), "roof", json_string("l2"));
	for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
		json_array_append_new(rows, st_bench_row(t[i].id, t[i].tier, t[i].v));
		json_array_append_new(vs, t[i].v ? t[i].v : json_null());
	}
	*verdicts_out = vs;
	return rows;
}

static double get(const json_t *o, const char *path)
{
	char buf[256];
	snprintf(buf, sizeof buf, "%s", path);
	const json_t *x = o;
	for (char *k = strtok(buf, "."); k; k = strtok(NULL, "."))
		x = json_object_get(x, k);
	if (!json_is_number(x))
		fail_msg("%s is not a number", path);
	return json_number_value(x);
}

/* fast_p keys contain dots ("1.5"), so they get their own lookup */
static double fp(const json_t *scope, const char *base, const char *p)
{
	const json_t *x = json_object_get(json_object_get(json_object_get(scope, "fast_p"), base), p);
	if (!json_is_number(x))
		fail_msg("fast_p.%s[%s] is not a number", base, p);
	return json_number_value(x);
}

static void test_rows(void **state)
{
	(void)state;
	json_t *vs, *rows = sample_rows(&vs);
	const json_t *miss = json_array_get(rows, 0), *ce = json_array_get(rows, 1),
	             *d = json_array_get(rows, 3), *e = json_array_get(rows, 4);
	assert_string_equal(json_string_value(json_object_get(miss, "status")), "missing");
	assert_true(json_is_false(json_object_get(miss, "compiled")));
	assert_true(json_is_null(json_object_get(miss, "solution_ms")));
	assert_true(json_is_false(json_object_get(ce, "compiled")));
	assert_true(json_is_true(json_object_get(d, "correct")));
	assert_float_equal(get(d, "vs_reference"), 2.0, EPS);
	assert_float_equal(get(d, "solution_ms"), 1.0, EPS);
	assert_int_equal(json_array_size(json_object_get(d, "suspicious")), 0);
	/* 4x the expert: suspicious */
	assert_int_equal(json_array_size(json_object_get(e, "suspicious")), 1);
	/* the roof that set the SOL floor: only where the verdict names one, for a correct row */
	assert_string_equal(json_string_value(json_object_get(e, "sol_roof")), "l2");
	assert_true(json_is_null(json_object_get(d, "sol_roof")));
	assert_true(json_is_null(json_object_get(miss, "sol_roof")));
	/* at the roof within the spread of its measurement (the probe's own kernel): not suspicious */
	json_t *v = verdict("ok", 1, 2, 1, 1, 1.03);
	json_t *r = st_bench_row("t1/x", 1, v);
	assert_int_equal(json_array_size(json_object_get(r, "suspicious")), 0);
	json_decref(r);
	json_decref(v);
	/* faster than the roof */
	v = verdict("ok", 1, 2, 1, 1, 1.3);
	r = st_bench_row("t1/x", 1, v);
	assert_int_equal(json_array_size(json_object_get(r, "suspicious")), 1);
	assert_non_null(strstr(json_string_value(json_array_get(json_object_get(r, "suspicious"), 0)),
	                       "roofline"));
	json_decref(r);
	json_decref(v);
	json_decref(rows);
	json_decref(vs);
}

static void test_score(void **state)
{
	(void)state;
	json_t *vs, *rows = sample_rows(&vs);
	json_t *s = st_bench_score(rows);
	const json_t *all = json_object_get(s, "all");
	assert_int_equal(json_integer_value(json_object_get(all, "tasks")), 5);
	assert_float_equal(get(all, "compile_rate"), 3.0 / 5, EPS);
	assert_float_equal(get(all, "correct_rate"), 2.0 / 5, EPS);
	/* vs reference: speedups 2 and 8 */
	assert_float_equal(fp(all, "reference", "0"), 2.0 / 5, EPS);
	assert_float_equal(fp(all, "reference", "1"), 2.0 / 5, EPS);
	assert_float_equal(fp(all, "reference", "1.5"), 2.0 / 5, EPS);
	assert_float_equal(fp(all, "reference", "2"), 1.0 / 5, EPS); /* 2 is not > 2 */
	assert_float_equal(fp(all, "reference", "5"), 1.0 / 5, EPS);
	/* vs expert: 1 and 4 */
	assert_float_equal(fp(all, "expert", "1"), 1.0 / 5, EPS);
	assert_float_equal(fp(all, "expert", "5"), 0, EPS);
	assert_float_equal(get(all, "geomean.reference.correct"), 4.0, 1e-9); /* sqrt(2*8) */
	assert_float_equal(get(all, "geomean.expert.correct"), 2.0, 1e-9);    /* sqrt(1*4) */
	assert_float_equal(get(all, "geomean.expert.faster"), 4.0, 1e-9);     /* only 4 > 1 */
	assert_float_equal(get(all, "sol.mean"), 0.7, 1e-9);
	assert_float_equal(get(all, "sol.median"), 0.7, 1e-9);
	assert_int_equal(json_integer_value(json_object_get(all, "suspicious")), 1);
	const json_t *t1 = json_object_get(json_object_get(s, "tiers"), "1"),
	             *t2 = json_object_get(json_object_get(s, "tiers"), "2");
	assert_float_equal(get(t1, "correct_rate"), 0, EPS);
	assert_true(json_is_null(json_object_get(json_object_get(json_object_get(t1, "geomean"),
	                                                         "reference"), "correct")));
	assert_float_equal(get(t2, "correct_rate"), 1, EPS);
	assert_float_equal(fp(t2, "reference", "5"), 0.5, EPS);
	json_decref(s);
	json_decref(rows);
	json_decref(vs);
}

static char *render(void (*fn)(st_buf *, void *), void *arg)
{
	st_buf text = {0};
	fn(&text, arg);
	assert_false(text.oom);
	assert_non_null(text.p);
	return text.p;
}

static void csv_fn(st_buf *f, void *rows) { st_bench_print_csv(rows, f); }

static void html_fn(st_buf *f, void *rows)
{
	json_t *s = st_bench_score(rows);
	json_t *run = json_pack("{s:s,s:s}", "started", "2026-11-29T00:00:00Z", "device", "GPU <x>");
	st_bench_print_html(run, rows, s, "reference", f);
	json_decref(run);
	json_decref(s);
}

static void test_render(void **state)
{
	(void)state;
	json_t *vs, *rows = sample_rows(&vs);
	json_object_set_new(json_array_get(rows, 2), "reason", json_string("got \"<nan>\", a|b"));
	char *csv = render(csv_fn, rows);
	assert_non_null(strstr(csv, "task,tier,status,"));
	assert_non_null(strstr(csv, "\"got \"\"<nan>\"\", a|b\""));
	assert_non_null(strstr(csv, "\"t2/e\",2,\"ok\",1,1,8,4,1,8,4,0.9,"));
	assert_non_null(strstr(csv, ",\"l2\"\n"));
	char *html = render(html_fn, rows);
	assert_non_null(strstr(html, "<svg class=\"chart\" id=\"speedups\""));
	assert_non_null(strstr(html, "<svg class=\"chart\" id=\"sol\""));
	assert_non_null(strstr(html, "GPU &lt;x&gt;"));
	assert_non_null(strstr(html, "got &quot;&lt;nan&gt;&quot;"));
	assert_null(strstr(html, "<nan>"));
	assert_null(strstr(html, "<script"));
	assert_non_null(strstr(html, "90% (l2)"));
	assert_non_null(strstr(html, "50%<")); /* no roof named: the figure alone */
	st_buf table = {0};
	json_t *score = st_bench_score(rows);
	st_bench_print_table(rows, score, "reference", &table);
	assert_non_null(strstr(st_buf_str(&table), " 90% (l2) "));
	st_buf_free(&table);
	json_decref(score);
	free(csv);
	free(html);
	json_decref(rows);
	json_decref(vs);
}

static void test_db(void **state)
{
	(void)state;
	char path[] = "/tmp/stitch-test-bench-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	unlink(path);
	st_bench_db *db;
	st_err err;
	assert_int_equal(st_bench_db_open(path, &db, &err), ST_OK);
	json_t *vs, *rows = sample_rows(&vs);
	json_t *run = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:s}", "started", "2026-11-29T01:02:03Z",
	                        "solutions", "/x", "backend", "cuda", "baseline", "reference",
	                        "device", "H200", "driver", 13000, "commit", "abc1234");
	long long id1, id2;
	assert_int_equal(st_bench_db_save(db, run, rows, vs, &id1, &err), ST_OK);
	json_object_set_new(json_array_get(rows, 3), "solution_ms", json_real(0.5));
	assert_int_equal(st_bench_db_save(db, run, rows, vs, &id2, &err), ST_OK);
	assert_int_equal(id2, id1 + 1);

	json_t *r, *rr;
	assert_int_equal(st_bench_db_load(db, "last~1", &r, &rr, &err), ST_OK);
	assert_int_equal(json_integer_value(json_object_get(r, "id")), id1);
	assert_string_equal(json_string_value(json_object_get(r, "commit")), "abc1234");
	assert_int_equal(json_integer_value(json_object_get(r, "driver")), 13000);
	assert_int_equal(json_array_size(rr), 5);
	/* a row reads back as it was written, order included */
	const json_t *d = json_array_get(rr, 3);
	assert_string_equal(json_string_value(json_object_get(d, "task")), "t2/d");
	assert_true(json_is_true(json_object_get(d, "correct")));
	assert_float_equal(get(d, "solution_ms"), 1.0, EPS);
	assert_true(json_is_null(json_object_get(json_array_get(rr, 0), "solution_ms")));
	assert_int_equal(json_array_size(json_object_get(json_array_get(rr, 4), "suspicious")), 1);
	/* the roof comes back from the stored verdict */
	assert_string_equal(json_string_value(json_object_get(json_array_get(rr, 4), "sol_roof")), "l2");
	json_t *s1 = st_bench_score(rows), *s2 = st_bench_score(rr);
	assert_float_equal(get(json_object_get(s1, "all"), "geomean.reference.correct"),
	                   get(json_object_get(s2, "all"), "geomean.reference.correct"), 1e-12);
	json_decref(s1);
	json_decref(s2);
	json_decref(r);
	json_decref(rr);
	assert_int_equal(st_bench_db_load(db, "last", &r, &rr, &err), ST_OK);
	assert_float_equal(get(json_array_get(rr, 3), "solution_ms"), 0.5, EPS);
	json_decref(r);
	json_decref(rr);
	char idbuf[32];
	snprintf(idbuf, sizeof idbuf, "%lld", id1);
	assert_int_equal(st_bench_db_load(db, idbuf, &r, &rr, &err), ST_OK);
	json_decref(r);
	json_decref(rr);
	assert_int_equal(st_bench_db_load(db, "99", &r, &rr, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "no run '99'"));
	assert_int_equal(st_bench_db_load(db, "first", &r, &rr, &err), ST_E_INVALID);
	assert_int_equal(st_bench_db_load(db, "last~x", &r, &rr, &err), ST_E_INVALID);
	st_bench_db_close(db);

	/* the raw samples of the candidate went into their own table: 2 per saved run */
	sqlite3 *raw;
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(raw, "SELECT count(*), sum(ms) FROM samples WHERE task = "
	                                    "'t2/d' AND role = 'candidate'", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), 4);
	assert_float_equal(sqlite3_column_double(st, 1), 2 * (1.0 + 1.01), 1e-9);
	sqlite3_finalize(st);
	/* the stored verdict leaves them out */
	assert_int_equal(sqlite3_prepare_v2(raw, "SELECT verdict FROM results WHERE task = 't2/d'", -1,
	                                    &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_null(strstr((const char *)sqlite3_column_text(st, 0), "\"raw\""));
	assert_non_null(strstr((const char *)sqlite3_column_text(st, 0), "\"median_ms\""));
	sqlite3_finalize(st);
	sqlite3_close(raw);

	/* not a database */
	FILE *f = fopen(path, "w");
	fputs("this is not sqlite, not at all, not even close to a header\n", f);
	fclose(f);
	assert_int_not_equal(st_bench_db_open(path, &db, &err), ST_OK);
	assert_non_null(strstr(err.msg, path));
	unlink(path);
	json_decref(run);
	json_decref(rows);
	json_decref(vs);
}


/* A correct verdict with the "best" bar as timing_verdict.c writes it. */
static json_t *verdict_bar(double exp, double vendor, double cand)
{
	json_t *v = verdict("ok", 1, 2 * exp, exp, cand, 0.5);
	json_t *b = json_object_get(v, "baselines"), *sp = json_object_get(v, "speedup");
	int vb = vendor > 0 && vendor < exp;
	double best = vb ? vendor : exp;
	if (vendor > 0) {
		json_object_set_new(b, "vendor_ms", json_real(vendor));
		json_object_set_new(sp, "vs_vendor", json_real(vendor / cand));
	}
	json_object_set_new(b, "best_ms", json_real(best));
	json_object_set_new(b, "best", json_string(vb ? "vendor" : "expert"));
	json_object_set_new(sp, "vs_best", json_real(best / cand));
	return v;
}

static void test_best_bar(void **state)
{
	(void)state;
	/* t1/x: the vendor (0.5 ms) beats the expert (1 ms); t1/y: the expert is faster; t1/z: an
	 * old verdict with no bar at all: the expert is the bar */
	json_t *vx = verdict_bar(1.0, 0.5, 1.0), *vy = verdict_bar(1.0, 3.0, 0.5);
	json_t *vz = verdict("ok", 1, 4.0, 2.0, 1.0, 0.5);
	json_t *rows = json_array();
	json_array_append_new(rows, st_bench_row("t1/x", 1, vx));
	json_array_append_new(rows, st_bench_row("t1/y", 1, vy));
	json_array_append_new(rows, st_bench_row("t1/z", 1, vz));
	const json_t *x = json_array_get(rows, 0), *y = json_array_get(rows, 1),
	             *z = json_array_get(rows, 2);
	assert_string_equal(json_string_value(json_object_get(x, "best")), "vendor");
	assert_true(fabs(json_number_value(json_object_get(x, "best_ms")) - 0.5) < EPS);
	assert_true(fabs(json_number_value(json_object_get(x, "vs_best")) - 0.5) < EPS);
	assert_true(fabs(json_number_value(json_object_get(x, "vs_expert")) - 1.0) < EPS);
	assert_string_equal(json_string_value(json_object_get(y, "best")), "expert");
	assert_true(fabs(json_number_value(json_object_get(y, "vs_best")) - 2.0) < EPS);
	assert_true(fabs(json_number_value(json_object_get(y, "vendor_ms")) - 3.0) < EPS);
	assert_string_equal(json_string_value(json_object_get(z, "best")), "expert");
	assert_true(json_is_null(json_object_get(z, "vendor_ms")));
	assert_true(fabs(json_number_value(json_object_get(z, "vs_best")) - 2.0) < EPS);
	json_t *score = st_bench_score(rows);
	const json_t *all = json_object_get(score, "all");
	/* vs best: x 0.5x, y 2x, z 2x; vs expert: 1x, 2x, 2x */
	const json_t *fb = json_object_get(json_object_get(all, "fast_p"), "best");
	const json_t *fe = json_object_get(json_object_get(all, "fast_p"), "expert");
	assert_true(fabs(json_number_value(json_object_get(fb, "1")) - 2.0 / 3) < EPS);
	assert_true(fabs(json_number_value(json_object_get(fe, "1")) - 2.0 / 3) < EPS);
	assert_true(fabs(json_number_value(json_object_get(fb, "1.5")) - 2.0 / 3) < EPS);
	double g = json_number_value(json_object_get(json_object_get(json_object_get(all, "geomean"),
	                                                             "best"), "correct"));
	assert_true(fabs(g - pow(0.5 * 2 * 2, 1.0 / 3)) < 1e-9);
	const json_t *bar = json_object_get(all, "bar");
	assert_int_equal(json_integer_value(json_object_get(bar, "with_vendor")), 2);
	assert_int_equal(json_integer_value(json_object_get(bar, "vendor")), 1);

	st_buf text = {0};
	st_bench_print_table(rows, score, "reference", &text);
	json_t *run = json_pack("{s:s}", "device", "NVIDIA H200");
	st_bench_print_md(run, rows, score, "best", &text);
	st_bench_print_csv(rows, &text);
	assert_false(text.oom);
	const char *buf = st_buf_str(&text);
	assert_non_null(strstr(buf, "vendor figures for 2 of 3 tasks, the vendor set the bar on 1"));
	assert_non_null(strstr(buf, "| fast_p vs best | geomean vs best |"));
	assert_non_null(strstr(buf, "| best ms | bar | vs best |"));
	assert_non_null(strstr(buf, "vs best: fast_1"));
	assert_non_null(strstr(buf, ",suspicious,reason,vendor_ms,best_ms,best,vs_best,sol_roof\n"));
	assert_non_null(strstr(buf, ",0.5,\"vendor\",0.5,\"\"\n"));
	st_buf_free(&text);
	json_decref(run);
	json_decref(score);

	/* no vendor figure anywhere: the report says the bar is the expert */
	json_t *plain = json_array();
	json_array_append_new(plain, st_bench_row("t1/z", 1, vz));
	json_t *s2 = st_bench_score(plain);
	st_buf plain_text = {0};
	st_bench_print_table(plain, s2, "reference", &plain_text);
	assert_non_null(strstr(st_buf_str(&plain_text), "bar 'best' = the expert on every task: no vendor"));
	st_buf_free(&plain_text);
	json_decref(s2);
	json_decref(plain);
	json_decref(rows);
	json_decref(vx);
	json_decref(vy);
	json_decref(vz);
}

static void test_vendor_file(void **state)
{
	(void)state;
	char slug[64];
	st_vendor_slug("NVIDIA H200", slug, sizeof slug);
	assert_string_equal(slug, "NVIDIA_H200");
	st_vendor_slug("  host CPU (AMD EPYC) ", slug, sizeof slug);
	assert_string_equal(slug, "host_CPU_AMD_EPYC");
	st_vendor_slug("((()))", slug, sizeof slug);
	assert_string_equal(slug, "unknown");

	char dir[] = "/tmp/stitch-vendor-test.XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[256];
	snprintf(path, sizeof path, "%s/NVIDIA_H200.json", dir);
	FILE *f = fopen(path, "w");
	fputs("{\"format\": \"stitch-vendor-baselines/1\", \"device\": \"NVIDIA H200\", \"tasks\": {"
	      "\"t2/attention_causal\": {\"ms\": 0.102, \"op\": \"sdpa\", \"backend\": \"cudnn\", "
	      "\"set\": \"eval\"}, \"t1/bad\": {\"ms\": -1}}}", f);
	fclose(f);
	st_vendor v;
	st_err err;
	assert_int_equal(st_vendor_lookup(dir, "NVIDIA H200", "t2/attention_causal", "eval", &v, &err),
	                 ST_OK);
	assert_true(fabs(v.ms - 0.102) < EPS);
	assert_string_equal(v.backend, "cudnn");
	/* another size set, another task, another device: no figure, and a note saying why */
	assert_int_equal(st_vendor_lookup(dir, "NVIDIA H200", "t2/attention_causal", "small", &v,
	                                  &err), ST_OK);
	assert_true(v.ms == 0 && strstr(v.note, "not the timed set small"));
	assert_int_equal(st_vendor_lookup(dir, "NVIDIA H200", "t1/conv2d", "eval", &v, &err), ST_OK);
	assert_true(v.ms == 0 && strstr(v.note, "no vendor figure for t1/conv2d"));
	assert_int_equal(st_vendor_lookup(dir, "NVIDIA B200", "t1/conv2d", "eval", &v, &err), ST_OK);
	assert_true(v.ms == 0 && strstr(v.note, "no vendor figures for NVIDIA B200"));
	/* a broken entry, and a file whose device is another one with the same slug, are errors */
	assert_int_equal(st_vendor_lookup(dir, "NVIDIA H200", "t1/bad", "eval", &v, &err),
	                 ST_E_INVALID);
	assert_int_equal(st_vendor_lookup(dir, "NVIDIA-H200", "t1/bad", "eval", &v, &err),
	                 ST_E_INVALID);
	assert_non_null(strstr(err.msg, "measured on 'NVIDIA H200'"));
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rows),
		cmocka_unit_test(test_score),
		cmocka_unit_test(test_render),
		cmocka_unit_test(test_db),
		cmocka_unit_test(test_best_bar),
		cmocka_unit_test(test_vendor_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
