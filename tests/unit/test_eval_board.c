/* Unit tests for the eval leaderboard: runs saved into the eval store come back equal by id,
 * 'last' and 'last~1', are listed newest first, and unknown references are refused by name; the
 * store shares a file with bench's; the text comparison shows the figures of each run (pass@1,
 * fast_p per tier, the geomean falling by round of a refine run, suspicious results); the HTML
 * page has both charts, escapes model names and carries no scripts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fs.h"
#include "store/bench.h"
#include "store/eval.h"

static const double ps[] = {0, 1, 1.5, 2, 5};

/* A pass@k block: fast_p vs the reference falls from `correct` by `step` per threshold, vs the
 * expert by twice that. */
static json_t *pass_block(double compile, double correct, double step)
{
	json_t *p = json_pack("{s:f,s:f}", "compile", compile, "correct", correct);
	for (int b = 0; b < 2; b++)
		for (int i = 0; i < 5; i++) {
			char key[48];
			snprintf(key, sizeof key, "fast_%g_vs_%s", ps[i], b ? "expert" : "reference");
			double v = correct - (b + 1) * step * i;
			json_object_set_new(p, key, json_real(v < 0 ? 0 : v));
		}
	return p;
}

/* The curve by round: correct rates and geomeans (0: null, no correct sample). */
static json_t *curve(int n, const double *correct, const double *geomean)
{
	json_t *a = json_array();
	for (int r = 0; r < n; r++)
		json_array_append_new(a, json_pack("{s:i,s:f,s:f,s:f,s:o}", "round", r + 1, "compile",
		                                   0.9, "correct", correct[r], "fast_1_vs_reference",
		                                   correct[r] / 2, "geomean_vs_reference",
		                                   geomean[r] > 0 ? json_real(geomean[r]) : json_null()));
	return a;
}

static json_t *group(int tasks, int K, double compile, double correct, double step, double geo,
                     json_t *rounds)
{
	json_t *g = json_pack("{s:i,s:o,s:f,s:f,s:o}", "tasks", tasks, "pass@1",
	                      pass_block(compile, correct, step), "geomean_vs_reference", geo,
	                      "geomean_vs_expert", geo / 2, "rounds", rounds);
	if (K > 1) {
		char key[16];
		snprintf(key, sizeof key, "pass@%d", K);
		json_object_set_new(g, key, pass_block(1, correct + 0.2, step));
	}
	return g;
}

/* A oneshot run of one round: pass@1 correct 0.67 overall, 1.52x. */
static json_t *oneshot_scores(void)
{
	double c[] = {0.67}, g[] = {1.52};
	json_t *s = json_pack("{s:s,s:s,s:i,s:i,s:s,s:s,s:f,s:s,s:n,s:{s:i,s:i,s:f}}", "model",
	                      "openai-compat:http://127.0.0.1:1234/v1:fake<1>", "mode", "oneshot",
	                      "samples", 1, "rounds", 1, "backend", "host", "started",
	                      "2026-11-30T06:50:00Z", "wall_s", 12.5, "device", "NVIDIA H200",
	                      "commit", "usage", "input_tokens", 1234, "output_tokens", 5678,
	                      "cost_usd", 0.0125);
	json_object_set_new(s, "tasks", json_pack("{s:{s:i,s:i,s:i,s:o,s:o}}", "t1/scale", "samples",
	                                          1, "compiled", 1, "correct", 1, "pass@1",
	                                          pass_block(1, 1, 0.25), "rounds", curve(1, c, g)));
	/* out of order on purpose: tiers are shown sorted */
	json_t *t2 = group(2, 1, 0.5, 0.5, 0.25, 1.2, curve(1, c, g)),
	       *t1 = group(4, 1, 1, 0.75, 0.25, 1.7, curve(1, c, g));
	json_object_set_new(s, "tiers", json_pack("{s:o,s:o}", "t2/", t2, "t1/", t1));
	json_object_set_new(s, "overall", group(6, 1, 0.83, 0.67, 0.125, 1.52, curve(1, c, g)));
	json_object_set_new(s, "suspicious", json_array());
	return s;
}

/* A refine run of K = 2 samples and 3 rounds whose geomean falls by round while correctness
 * holds: 2.40x, 1.60x, 1.10x. */
static json_t *refine_scores(void)
{
	double c[] = {0.5, 0.67, 0.67}, g[] = {2.4, 1.6, 1.1};
	json_t *s = json_pack("{s:s,s:s,s:i,s:i,s:s,s:s,s:f,s:n,s:s,s:{s:i,s:i,s:f}}", "model",
	                      "anthropic:claude-x", "mode", "refine", "samples", 2, "rounds", 3,
	                      "backend", "host", "started", "2026-11-30T07:00:00Z", "wall_s", 30.0,
	                      "device", "commit", "d0a4652", "usage", "input_tokens", 4321,
	                      "output_tokens", 8765, "cost_usd", 1.5);
	json_object_set_new(s, "tasks", json_object());
	json_object_set_new(s, "tiers", json_pack("{s:o}", "t1/",
	                                          group(4, 2, 1, 0.42, 0.1, 1.1, curve(3, c, g))));
	json_object_set_new(s, "overall", group(6, 2, 0.9, 0.58, 0.1, 1.1, curve(3, c, g)));
	json_object_set_new(s, "suspicious",
	                    json_pack("[{s:s,s:i,s:i,s:[s,s]}]", "task", "t1/scale", "sample", 1,
	                              "round", 2, "why", "9.0x the expert", "faster than the roof"));
	return s;
}

static json_t *rows_for(int samples, int rounds)
{
	json_t *a = json_array();
	for (int k = 0; k < samples; k++)
		for (int r = 1; r <= rounds; r++)
			json_array_append_new(
				a, json_pack("{s:s,s:i,s:i,s:i,s:b,s:s,s:s,s:b,s:b,s:f,s:n,s:n,s:[],s:[],s:s}",
				             "task", "t1/scale", "tier", 1, "sample", k, "round", r, "final",
				             r == rounds, "status", r == 1 ? "incorrect" : "ok", "reason",
				             r == 1 ? "C[3] off" : "", "compiled", 1, "correct", r > 1,
				             "vs_reference", 3.0 / r, "vs_expert", "sol_fraction", "suspicious",
				             "flags", "code", "eval-out/t1_scale/sample0.c"));
	return a;
}

static char tmpdir[] = "/tmp/stitch-test-eval-XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	st_rm_tree(tmpdir);
	return 0;
}

/* A round whose verify failed for the verifier or the task (status "error"), and one the model's
 * endpoint never answered (status "no_answer"), counts in no score: not against the model (it
 * was never judged) and not for it; it is listed as unjudged. An answer without code (no_code)
 * is the model's and counts. */
static void test_unjudged_rows(void **state)
{
	(void)state;
	json_error_t je;
	json_t *rows = json_loads(
	    "[{\"task\":\"t1/a\",\"tier\":1,\"sample\":0,\"round\":1,\"final\":true,"
	    "\"status\":\"ok\",\"compiled\":true,\"correct\":true,\"vs_reference\":2.0},"
	    "{\"task\":\"t1/a\",\"tier\":1,\"sample\":1,\"round\":1,\"final\":true,"
	    "\"status\":\"error\",\"reason\":\"more than 64 tensors\",\"compiled\":false,"
	    "\"correct\":false},"
	    "{\"task\":\"t1/b\",\"tier\":1,\"sample\":0,\"round\":1,\"final\":true,"
	    "\"status\":\"error\",\"compiled\":false,\"correct\":false},"
	    "{\"task\":\"t1/b\",\"tier\":1,\"sample\":1,\"round\":1,\"final\":true,"
	    "\"status\":\"error\",\"compiled\":false,\"correct\":false},"
	    "{\"task\":\"t1/a\",\"tier\":1,\"sample\":2,\"round\":1,\"final\":true,"
	    "\"status\":\"no_answer\",\"reason\":\"HTTP 503\",\"compiled\":false,"
	    "\"correct\":false},"
	    "{\"task\":\"t1/a\",\"tier\":1,\"sample\":3,\"round\":1,\"final\":true,"
	    "\"status\":\"no_code\",\"compiled\":false,\"correct\":false}]",
	    0, &je);
	assert_non_null(rows);
	json_t *s = st_eval_scores(rows, 2, 1);
	assert_non_null(s);
	json_t *tasks = json_object_get(s, "tasks");
	assert_int_equal(json_object_size(tasks), 1); /* t1/b was never judged */
	json_t *a = json_object_get(tasks, "t1/a");
	assert_int_equal(json_integer_value(json_object_get(a, "samples")), 2); /* ok, no_code */
	assert_float_equal(json_number_value(json_object_get(json_object_get(a, "pass@1"), "correct")),
	                   0.5, 1e-12);
	json_t *u = json_object_get(s, "unjudged");
	assert_int_equal(json_array_size(u), 4);
	assert_string_equal(json_string_value(json_object_get(json_array_get(u, 0), "reason")),
	                    "more than 64 tensors");
	assert_true(json_is_null(json_object_get(json_array_get(u, 1), "reason")));
	assert_int_equal(json_integer_value(json_object_get(json_array_get(u, 3), "sample")), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(u, 3), "reason")),
	                    "HTTP 503");
	json_decref(s);
	json_decref(rows);
}

static void test_store(void **state)
{
	(void)state;
	char path[256];
	/* a folder that does not exist yet: the store makes it */
	snprintf(path, sizeof path, "%s/a/b/runs.db", tmpdir);
	st_eval_db *db;
	st_err err;
	assert_int_equal(st_eval_db_open(path, &db, &err), ST_OK);
	json_t *s1 = oneshot_scores(), *s2 = refine_scores();
	json_t *r1 = rows_for(1, 1), *r2 = rows_for(2, 3);
	long long id1, id2;
	assert_int_equal(st_eval_db_save(db, s1, r1, &id1, &err), ST_OK);
	assert_int_equal(st_eval_db_save(db, s2, r2, &id2, &err), ST_OK);
	assert_int_equal(id2, id1 + 1);

	json_t *s, *r;
	char ref[32];
	snprintf(ref, sizeof ref, "%lld", id1);
	assert_int_equal(st_eval_db_load(db, ref, &s, &r, &err), ST_OK);
	assert_true(json_equal(s, s1));
	assert_true(json_equal(r, r1));
	json_decref(s);
	json_decref(r);
	assert_int_equal(st_eval_db_load(db, "last", &s, &r, &err), ST_OK);
	assert_true(json_equal(s, s2));
	assert_true(json_equal(r, r2));
	assert_int_equal(json_array_size(r), 6);
	json_decref(s);
	json_decref(r);
	assert_int_equal(st_eval_db_load(db, "last~1", &s, &r, &err), ST_OK);
	assert_true(json_equal(s, s1));
	json_decref(s);
	json_decref(r);
	long long id;
	assert_int_equal(st_eval_db_resolve(db, "last~1", &id, &err), ST_OK);
	assert_int_equal(id, id1);

	/* unknown and malformed references are named, with the store */
	char want[400];
	assert_int_equal(st_eval_db_load(db, "99", &s, &r, &err), ST_E_INVALID);
	snprintf(want, sizeof want, "no eval run '99' in %s", path);
	assert_non_null(strstr(err.msg, want));
	assert_null(s);
	assert_int_equal(st_eval_db_load(db, "last~2", &s, &r, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "no eval run 'last~2'"));
	assert_int_equal(st_eval_db_load(db, "best", &s, &r, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "no eval run 'best'"));
	assert_int_equal(st_eval_db_load(db, "last~x", &s, &r, &err), ST_E_INVALID);

	/* a run without a model is refused, and nothing of it is stored */
	json_t *bad = json_pack("{s:s}", "mode", "oneshot");
	assert_int_equal(st_eval_db_save(db, bad, NULL, &id, &err), ST_E_INVALID);
	json_decref(bad);

	json_t *list;
	assert_int_equal(st_eval_db_list(db, &list, &err), ST_OK);
	assert_int_equal(json_array_size(list), 2);
	const json_t *newest = json_array_get(list, 0), *oldest = json_array_get(list, 1);
	assert_int_equal(json_integer_value(json_object_get(newest, "id")), id2);
	assert_string_equal(json_string_value(json_object_get(newest, "mode")), "refine");
	assert_int_equal(json_integer_value(json_object_get(newest, "samples")), 2);
	assert_int_equal(json_integer_value(json_object_get(newest, "rounds")), 3);
	assert_string_equal(json_string_value(json_object_get(newest, "backend")), "host");
	assert_int_equal(json_integer_value(json_object_get(oldest, "id")), id1);
	assert_string_equal(json_string_value(json_object_get(oldest, "model")),
	                    "openai-compat:http://127.0.0.1:1234/v1:fake<1>");
	assert_string_equal(json_string_value(json_object_get(oldest, "started")),
	                    "2026-11-30T06:50:00Z");
	json_decref(list);
	st_eval_db_close(db);

	/* the columns for queries by hand: final rows of run 2, correct and with a speedup */
	sqlite3 *raw;
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(raw, "SELECT count(*), sum(correct), sum(vs_reference) "
	                                    "FROM eval_results WHERE run = ? AND final = 1", -1, &st,
	                                    NULL), SQLITE_OK);
	sqlite3_bind_int64(st, 1, id2);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), 2);
	assert_int_equal(sqlite3_column_int(st, 1), 2);
	assert_float_equal(sqlite3_column_double(st, 2), 2.0, 1e-9);
	sqlite3_finalize(st);
	assert_int_equal(sqlite3_prepare_v2(raw, "SELECT model, commit_id, device FROM eval_runs "
	                                    "WHERE id = ?", -1, &st, NULL), SQLITE_OK);
	sqlite3_bind_int64(st, 1, id2);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "anthropic:claude-x");
	assert_string_equal((const char *)sqlite3_column_text(st, 1), "d0a4652");
	assert_int_equal(sqlite3_column_type(st, 2), SQLITE_NULL);
	sqlite3_finalize(st);
	sqlite3_close(raw);

	/* bench's store can live in the same file; the eval runs stay */
	st_bench_db *bdb;
	assert_int_equal(st_bench_db_open(path, &bdb, &err), ST_OK);
	st_bench_db_close(bdb);
	assert_int_equal(st_eval_db_open(path, &db, &err), ST_OK);
	assert_int_equal(st_eval_db_load(db, "last", &s, NULL, &err), ST_OK);
	assert_true(json_equal(s, s2));
	json_decref(s);
	st_eval_db_close(db);

	/* not a database; a place no file can be made */
	char junk[256];
	snprintf(junk, sizeof junk, "%s/junk.db", tmpdir);
	FILE *f = fopen(junk, "w");
	fputs("this is not sqlite, not at all, not even close to a header\n", f);
	fclose(f);
	assert_int_equal(st_eval_db_open(junk, &db, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, junk));
	snprintf(junk, sizeof junk, "%s/junk.db/x/eval.db", tmpdir);
	assert_int_equal(st_eval_db_open(junk, &db, &err), ST_E_IO);

	json_decref(s1);
	json_decref(s2);
	json_decref(r1);
	json_decref(r2);
}

static void test_default_path(void **state)
{
	(void)state;
	char buf[512], want[512];
	setenv("STITCH_EVAL_DB", "/somewhere/else.db", 1);
	assert_string_equal(st_eval_db_default_path(buf, sizeof buf), "/somewhere/else.db");
	unsetenv("STITCH_EVAL_DB");
	setenv("XDG_DATA_HOME", tmpdir, 1);
	snprintf(want, sizeof want, "%s/stitch/eval.db", tmpdir);
	assert_string_equal(st_eval_db_default_path(buf, sizeof buf), want);
	snprintf(want, sizeof want, "%s/stitch/bench.db", tmpdir);
	assert_string_equal(st_bench_db_default_path(buf, sizeof buf), want);
	unsetenv("XDG_DATA_HOME");
}

typedef struct page {
	const json_t *const *scores;
	const long long *ids;
	int n;
} page;

static char *render(const page *p, int html)
{
	st_buf text = {0};
	if (html)
		st_eval_print_html(p->scores, p->ids, p->n, &text);
	else
		st_eval_print_compare(p->scores, p->ids, p->n, &text);
	assert_false(text.oom);
	assert_non_null(text.p);
	return text.p;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void test_compare_text(void **state)
{
	(void)state;
	json_t *s1 = oneshot_scores(), *s2 = refine_scores();
	const json_t *scores[] = {s1, s2};
	long long ids[] = {3, 4};
	page p = {scores, ids, 2};
	char *t = render(&p, 0);
	/* one line per run */
	const char *l3 = strstr(t, "\n    3 openai-compat:http://127.0.0.1:1234/v1:fake<1> oneshot");
	assert_non_null(l3);
	const char *end = strchr(l3 + 1, '\n');
	char line[512];
	snprintf(line, sizeof line, "%.*s", (int)(end - l3), l3);
	assert_non_null(strstr(line, " 0.83    0.67"));   /* compile, correct */
	assert_non_null(strstr(line, "1.52x"));           /* geomean vs reference */
	assert_non_null(strstr(line, "1234"));
	assert_non_null(strstr(line, "5678"));
	assert_non_null(strstr(line, "$0.0125"));
	const char *l4 = strstr(t, "\n    4 anthropic:claude-x");
	assert_non_null(l4);
	end = strchr(l4 + 1, '\n');
	snprintf(line, sizeof line, "%.*s", (int)(end - l4), l4);
	assert_non_null(strstr(line, "refine"));
	assert_non_null(strstr(line, "0.78")); /* correct@2 = 0.58 + 0.2 */
	assert_non_null(strstr(line, "$1.5000"));

	/* fast_p by tier, both tiers and all; run 4 has no t2/: its figures show as "-" */
	const char *tiers = strstr(t, "fast_p vs reference by tier");
	assert_non_null(tiers);
	assert_non_null(strstr(tiers, "t1/          3   0.75   0.50   0.25   0.00   0.00"));
	assert_non_null(strstr(tiers, "t2/          3   0.50   0.25   0.00   0.00   0.00\n"
	                              "             4      -      -      -      -      -"));
	assert_non_null(strstr(tiers, "all          3   0.67"));

	/* by round: only the refine run, with its falling geomean */
	const char *rounds = strstr(t, "by round:");
	assert_non_null(rounds);
	const char *sus = strstr(t, "suspicious results");
	assert_non_null(sus);
	assert_true(rounds < sus);
	assert_non_null(strstr(rounds, "    4 round             1      2      3"));
	assert_non_null(strstr(rounds, "correct        0.50   0.67   0.67"));
	assert_non_null(strstr(rounds, "geomean/ref   2.40x  1.60x  1.10x"));
	assert_non_null(strstr(rounds, "drift: geomean falls from 2.40x at round 1 to 1.10x at "
	                               "round 3"));
	assert_null(strstr(rounds, "    3 round"));
	assert_non_null(strstr(sus, "suspicious results (1;"));
	assert_non_null(strstr(sus, "t1/scale"));
	assert_non_null(strstr(sus, "9.0x the expert; faster than the roof"));
	free(t);

	/* one run of one round: no by-round section, no suspicious results */
	page one = {scores, ids, 1};
	t = render(&one, 0);
	assert_null(strstr(t, "by round:"));
	assert_non_null(strstr(t, "suspicious results: none"));
	free(t);

	/* scores that lack nearly everything still render, as "-" */
	json_t *bare = json_pack("{s:s,s:s}", "model", "m", "mode", "agent");
	const json_t *bs[] = {bare};
	page pb = {bs, ids, 1};
	t = render(&pb, 0);
	assert_non_null(strstr(t, "    3 m     agent       -   -     -       -       -"));
	free(t);
	t = render(&pb, 1);
	assert_non_null(strstr(t, "id=\"rounds\""));
	free(t);
	json_decref(bare);
	json_decref(s1);
	json_decref(s2);
}

static void test_html(void **state)
{
	(void)state;
	json_t *s1 = oneshot_scores(), *s2 = refine_scores();
	const json_t *scores[] = {s1, s2};
	long long ids[] = {3, 4};
	page p = {scores, ids, 2};
	char *h = render(&p, 1);
	assert_non_null(strstr(h, "<svg class=\"chart\" id=\"fastp\""));
	assert_non_null(strstr(h, "<svg class=\"chart\" id=\"rounds\""));
	assert_int_equal(count(h, "<svg"), 2);
	assert_int_equal(count(h, "</svg>"), 2);
	assert_null(strstr(h, "<script"));
	assert_null(strstr(h, "<1>"));
	assert_non_null(strstr(h, "openai-compat:http://127.0.0.1:1234/v1:fake&lt;1&gt;"));
	/* the legend names each run as "model · mode" */
	assert_non_null(strstr(h, "#3 openai-compat:http://127.0.0.1:1234/v1:fake&lt;1&gt; \xc2\xb7 "
	                          "oneshot</text>"));
	assert_non_null(strstr(h, "#4 anthropic:claude-x \xc2\xb7 refine</text>"));
	/* fast_p bars: 5 thresholds of run 3 in t1/, t2/ and all, of run 4 in t1/ and all */
	assert_int_equal(count(h, "class=\"v k0\"><title>"), 15);
	assert_int_equal(count(h, "class=\"v k1\"><title>"), 10);
	/* speed by round: run 4 a solid and a dashed line over 3 rounds, run 3 single points */
	assert_int_equal(count(h, "<polyline class=\"line k1\""), 1);
	assert_int_equal(count(h, "<polyline class=\"line rate k1\""), 1);
	assert_int_equal(count(h, "<polyline class=\"line k0\""), 0);
	assert_int_equal(count(h, "class=\"dot k0\""), 1);
	assert_int_equal(count(h, "class=\"hollow k0\""), 1);
	assert_int_equal(count(h, "class=\"dot k1\""), 3);
	assert_non_null(strstr(h, "round 3: geomean 1.10x vs reference"));
	/* tables: per tier, by round, suspicious */
	assert_non_null(strstr(h, "<h3>t2/</h3>"));
	assert_non_null(strstr(h, "<td>0.67</td>"));
	assert_non_null(strstr(h, "<td>2.40x</td><td>1.60x</td><td>1.10x</td>"));
	assert_non_null(strstr(h, "9.0x the expert; faster than the roof</li>"));

	/* written whole, into a folder made for it */
	char path[256];
	snprintf(path, sizeof path, "%s/pages/board.html", tmpdir);
	st_err err;
	assert_int_equal(st_eval_write_html(path, scores, ids, 2, &err), ST_OK);
	char *data;
	size_t len;
	assert_int_equal(st_read_file(path, &data, &len, &err), ST_OK);
	assert_int_equal(len, strlen(h));
	assert_memory_equal(data, h, len);
	free(data);
	snprintf(path, sizeof path, "%s/pages/board.html/x.html", tmpdir);
	assert_int_not_equal(st_eval_write_html(path, scores, ids, 2, &err), ST_OK);
	free(h);
	json_decref(s1);
	json_decref(s2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unjudged_rows),
		cmocka_unit_test(test_store),
		cmocka_unit_test(test_default_path),
		cmocka_unit_test(test_compare_text),
		cmocka_unit_test(test_html),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
