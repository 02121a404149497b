/* Unit tests of SOL by the binding roof: cost.roof, cost.l2_bytes, cost.sfu and cost.syncs as
 * task.json gives them (the default, "dram", "l2" and what st_task_json writes back), the cost at
 * a size set, and the floor against a set of peaks: the DRAM rule unchanged, the L2 bound where
 * it binds, the FLOPs', the special functions', the synchronisations', and what happens when a
 * peak is missing. */
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "task/task.h"
#include "verify/sol_floor.h"

/* A spmv-like task; COST is the cost object. */
#define TASK_JSON(COST)                                                                          \
	"{\"name\": \"gather\", \"tier\": 1, \"description\": \"y = A x\",\n"                        \
	" \"sizes\": {\"eval\": {\"n\": 1000000, \"deg\": 16}, \"small\": {\"n\": 100, \"deg\": 4}},\n" \
	" \"params\": [],\n"                                                                         \
	" \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"n*deg\"],\n"              \
	"             \"init\": {\"dist\": \"normal\", \"mean\": 0, \"std\": 1}}],\n"                \
	" \"outputs\": [{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"n\"],\n"                 \
	"              \"tol\": {\"atol\": 1e-6, \"rtol\": 1e-4}}],\n"                               \
	" \"cost\": " COST ",\n"                                                                     \
	" \"policy\": {\"mode\": \"expert\", \"libraries\": []}, \"archs\": [\"sm_90a\"],\n"         \
	" \"solutions\": {\"reference\": \"reference.cu\", \"experts\": [\"reference.cu\"]}}\n"

static char root[256], dir[PATH_MAX];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void write_at(const char *name, const char *text)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
	(void)state;
	const char *base = getenv("TMPDIR");
	snprintf(root, sizeof root, "%s/stitch-roof-XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(root))
		return -1;
	snprintf(dir, sizeof dir, "%s/t1", root);
	mkdir(dir, 0755);
	snprintf(dir, sizeof dir, "%s/t1/gather", root);
	mkdir(dir, 0755);
	write_at("reference.cu", "/* reference */\n");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void load(const char *json, st_task *t)
{
	st_err err = {{0}};
	write_at("task.json", json);
	if (st_task_load(dir, t, &err))
		fail_msg("load failed: %s", err.msg);
}

/* Peaks as the probe reports them: 4000 GB/s DRAM, 8000 GB/s L2 (0: none), 50 TFLOP/s fp32. */
static json_t *peaks(double l2)
{
	json_t *p = json_pack("{s:f, s:f, s:f}", "bw_gbs", 4000.0, "fp32", 50.0, "bf16", 800.0);
	if (l2 > 0)
		json_object_set_new(p, "l2_gbs", json_real(l2));
	else
		json_object_set_new(p, "l2_gbs", json_null());
	return p;
}

/* peaks(8000) with one more figure, `key`: `v` (v < 0: null, a device without it). */
static json_t *peaks_with(const char *key, double v)
{
	json_t *p = peaks(8000);
	json_object_set_new(p, key, v < 0 ? json_null() : json_real(v));
	return p;
}

/* f's floor is `ms`, set by `roof`, and st_sol_floors_json holds it under `key`. */
static void expect_floor(const st_sol_floor *f, double ms, const char *roof, const char *key)
{
	assert_float_equal(f->floor_ms, ms, 1e-12);
	assert_string_equal(f->roof, roof);
	json_t *fj = st_sol_floors_json(f);
	assert_float_equal(json_real_value(json_object_get(fj, key)), ms, 1e-12);
	json_decref(fj);
}

static void test_parse(void **state)
{
	(void)state;
	st_task t;
	load(TASK_JSON("{\"flops\": \"2*n*deg\", \"bytes\": \"8*n*deg\", \"unit\": \"fp32\"}"), &t);
	assert_int_equal(t.cost_roof, ST_ROOF_DRAM);
	assert_null(t.cost_l2_bytes);
	json_t *j = st_task_json(&t);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "cost"), "roof")),
	                    "dram");
	assert_true(json_is_null(json_object_get(json_object_get(j, "cost"), "l2_bytes")));
	json_decref(j);
	st_task_free(&t);

	load(TASK_JSON("{\"flops\": 0, \"bytes\": \"8*n*deg\", \"unit\": \"int\", \"roof\": \"dram\"}"),
	     &t);
	assert_int_equal(t.cost_roof, ST_ROOF_DRAM);
	st_task_free(&t);

	load(TASK_JSON("{\"flops\": \"2*n*deg\", \"bytes\": \"8*n*deg\", \"unit\": \"fp32\", "
	               "\"roof\": \"l2\", \"l2_bytes\": \"8*n*deg + 32*n*deg\"}"),
	     &t);
	assert_int_equal(t.cost_roof, ST_ROOF_L2);
	assert_string_equal(t.cost_l2_bytes, "8*n*deg + 32*n*deg");
	assert_string_equal(st_roof_name(t.cost_roof), "l2");
	j = st_task_json(&t);
	const json_t *cost = json_object_get(j, "cost");
	assert_string_equal(json_string_value(json_object_get(cost, "roof")), "l2");
	assert_string_equal(json_string_value(json_object_get(cost, "l2_bytes")), "8*n*deg + 32*n*deg");
	json_decref(j);

	st_cost_at c;
	st_err err;
	assert_int_equal(st_cost_eval(&t, &t.eval, &c, &err), ST_OK);
	assert_float_equal(c.flops, 32e6, 0);
	assert_float_equal(c.bytes, 128e6, 0);
	assert_float_equal(c.l2_bytes, 640e6, 0);
	assert_string_equal(c.unit, "fp32");
	assert_int_equal(st_cost_eval(&t, &t.small, &c, &err), ST_OK);
	assert_float_equal(c.l2_bytes, 40 * 400, 0);
	st_task_free(&t);
}

/* The DRAM roof: the floor is max(bytes / bandwidth, flops / peak), as it always was. */
static void test_floor_dram(void **state)
{
	(void)state;
	json_t *p = peaks(8000);
	st_sol_floor f;
	st_cost_at mem = {.flops = 1e9, .bytes = 4e9, .l2_bytes = -1, .unit = "fp32"};
	st_sol_floor_compute(p, &mem, &f);
	assert_float_equal(f.dram_ms, 1.0, 1e-12);  /* 4e9 B at 4000 GB/s */
	assert_float_equal(f.flops_ms, 0.02, 1e-12); /* 1e9 at 50 TFLOP/s */
	assert_float_equal(f.l2_ms, -1, 0);          /* not counted: no L2 bytes */
	assert_float_equal(f.floor_ms, 1.0, 1e-12);
	assert_string_equal(f.roof, "dram");
	json_t *fj = st_sol_floors_json(&f);
	assert_non_null(json_object_get(fj, "dram"));
	assert_non_null(json_object_get(fj, "flops"));
	assert_null(json_object_get(fj, "l2"));
	json_decref(fj);

	/* a GEMM: the bf16 FLOPs bind, and the roof is named by its unit */
	st_cost_at gemm = {.flops = 8e12, .bytes = 4e8, .l2_bytes = -1, .unit = "bf16"};
	st_sol_floor_compute(p, &gemm, &f);
	assert_float_equal(f.floor_ms, 10.0, 1e-9);
	assert_string_equal(f.roof, "bf16");

	/* a unit the device has no peak for: only the memory bound counts */
	st_cost_at fp8 = {.flops = 8e12, .bytes = 4e8, .l2_bytes = -1, .unit = "fp8"};
	st_sol_floor_compute(p, &fp8, &f);
	assert_float_equal(f.flops_ms, -1, 0);
	assert_float_equal(f.floor_ms, 0.1, 1e-12);
	assert_string_equal(f.roof, "dram");

	/* a tie goes to DRAM */
	st_cost_at tie = {.flops = 50e9, .bytes = 4e9, .l2_bytes = -1, .unit = "fp32"};
	st_sol_floor_compute(p, &tie, &f);
	assert_float_equal(f.floor_ms, 1.0, 1e-12);
	assert_string_equal(f.roof, "dram");
	json_decref(p);
}

/* The L2 roof: the L2 bound joins the others and names the roof where it is the largest. */
static void test_floor_l2(void **state)
{
	(void)state;
	json_t *p = peaks(8000);
	st_sol_floor f;
	/* spmv-like: 294 MB from DRAM, 830 MB through the L2 */
	st_cost_at g = {.flops = 67e6, .bytes = 294e6, .l2_bytes = 830e6, .unit = "fp32"};
	st_sol_floor_compute(p, &g, &f);
	assert_float_equal(f.dram_ms, 0.0735, 1e-12);
	assert_float_equal(f.l2_ms, 0.10375, 1e-12);
	expect_floor(&f, 0.10375, "l2", "l2");

	/* few bytes through the L2 for what DRAM moves: DRAM still binds */
	st_cost_at s = {.flops = 0, .bytes = 294e6, .l2_bytes = 300e6, .unit = "fp32"};
	st_sol_floor_compute(p, &s, &f);
	assert_float_equal(f.floor_ms, 0.0735, 1e-12);
	assert_string_equal(f.roof, "dram");
	assert_float_equal(f.flops_ms, -1, 0); /* no flops: no bound */
	json_decref(p);

	/* peaks with no L2 figure: the L2 bound is unknown and left out */
	p = peaks(0);
	st_sol_floor_compute(p, &g, &f);
	assert_float_equal(f.l2_ms, -1, 0);
	assert_float_equal(f.floor_ms, 0.0735, 1e-12);
	assert_string_equal(f.roof, "dram");
	json_decref(p);

	/* peaks with no DRAM bandwidth: no floor at all, whatever the L2 says */
	p = json_pack("{s:f, s:f}", "l2_gbs", 8000.0, "fp32", 50.0);
	st_sol_floor_compute(p, &g, &f);
	assert_float_equal(f.floor_ms, -1, 0);
	assert_null(f.roof);
	json_decref(p);
}

/* cost.sfu: parsed, written back, evaluated; its bound joins the others and names the roof "sfu"
 * where the special functions bind; left out without an "sfu" peak or without the count. */
static void test_floor_sfu(void **state)
{
	(void)state;
	st_task t;
	st_cost_at c;
	st_err err;
	load(TASK_JSON("{\"flops\": \"2*n*deg\", \"bytes\": \"8*n\", \"unit\": \"fp32\"}"), &t);
	assert_null(t.cost_sfu);
	assert_int_equal(st_cost_eval(&t, &t.eval, &c, &err), ST_OK);
	assert_float_equal(c.sfu, -1, 0);
	json_t *j = st_task_json(&t);
	assert_true(json_is_null(json_object_get(json_object_get(j, "cost"), "sfu")));
	json_decref(j);
	st_task_free(&t);

	load(TASK_JSON("{\"flops\": \"8*n*deg\", \"bytes\": \"8*n\", \"unit\": \"fp32\", "
	               "\"sfu\": \"2*n*deg\"}"),
	     &t);
	assert_string_equal(t.cost_sfu, "2*n*deg");
	j = st_task_json(&t);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "cost"), "sfu")),
	                    "2*n*deg");
	json_decref(j);
	assert_int_equal(st_cost_eval(&t, &t.eval, &c, &err), ST_OK);
	assert_float_equal(c.sfu, 32e6, 0);
	st_task_free(&t);

	/* Monte-Carlo-like: 8e9 special functions at 4 Tops/s bind over 32e9 FLOPs at 50 TFLOP/s */
	json_t *p = peaks_with("sfu", 4.0);
	st_sol_floor f;
	st_cost_at mc = {.flops = 32e9, .bytes = 4e6, .l2_bytes = -1, .sfu = 8e9, .unit = "fp32"};
	st_sol_floor_compute(p, &mc, &f);
	assert_float_equal(f.flops_ms, 0.64, 1e-12);
	assert_float_equal(f.sfu_ms, 2.0, 1e-12);
	expect_floor(&f, 2.0, "sfu", "sfu");

	/* few special functions: the FLOPs still bind */
	mc.sfu = 1e9;
	st_sol_floor_compute(p, &mc, &f);
	assert_float_equal(f.sfu_ms, 0.25, 1e-12);
	assert_string_equal(f.roof, "fp32");

	/* a task that counts none: no bound, whatever the peak */
	mc.sfu = -1;
	st_sol_floor_compute(p, &mc, &f);
	assert_float_equal(f.sfu_ms, -1, 0);
	json_t *fj = st_sol_floors_json(&f);
	assert_null(json_object_get(fj, "sfu"));
	json_decref(fj);
	json_decref(p);

	/* peaks of a device without the figure (null): left out */
	p = peaks_with("sfu", -1);
	mc.sfu = 8e9;
	st_sol_floor_compute(p, &mc, &f);
	assert_float_equal(f.sfu_ms, -1, 0);
	assert_string_equal(f.roof, "fp32");
	json_decref(p);
}

/* cost.syncs: parsed, written back, evaluated; syncs x sync_us binds a recurrence whose FLOPs
 * are few, names the roof "sync", and is left out without the peak (the host's null). */
static void test_floor_sync(void **state)
{
	(void)state;
	st_task t;
	st_cost_at c;
	st_err err;
	load(TASK_JSON("{\"flops\": \"2*n*deg\", \"bytes\": \"8*n\", \"unit\": \"fp32\", "
	               "\"syncs\": \"deg - 1\"}"),
	     &t);
	assert_string_equal(t.cost_syncs, "deg - 1");
	json_t *j = st_task_json(&t);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "cost"), "syncs")),
	                    "deg - 1");
	json_decref(j);
	assert_int_equal(st_cost_eval(&t, &t.eval, &c, &err), ST_OK);
	assert_float_equal(c.syncs, 15, 0);
	assert_float_equal(c.sfu, -1, 0);
	st_task_free(&t);

	/* an LSTM-like chain: 255 dependent steps at 1.5 us a barrier bind over 0.17 ms of FLOPs */
	json_t *p = peaks_with("sync_us", 1.5);
	st_sol_floor f;
	st_cost_at lstm = {.flops = 8.6e9, .bytes = 7.6e7, .l2_bytes = -1, .sfu = -1, .syncs = 255,
	                   .unit = "fp32"};
	st_sol_floor_compute(p, &lstm, &f);
	assert_float_equal(f.flops_ms, 0.172, 1e-12);
	assert_float_equal(f.sync_ms, 0.3825, 1e-12);
	expect_floor(&f, 0.3825, "sync", "sync");

	/* no synchronisation counted (or none needed): no bound */
	lstm.syncs = 0;
	st_sol_floor_compute(p, &lstm, &f);
	assert_float_equal(f.sync_ms, -1, 0);
	assert_string_equal(f.roof, "fp32");
	json_decref(p);

	/* the host's peaks: sync_us null, the bound left out */
	p = peaks_with("sync_us", -1);
	lstm.syncs = 255;
	st_sol_floor_compute(p, &lstm, &f);
	assert_float_equal(f.sync_ms, -1, 0);
	json_t *fj = st_sol_floors_json(&f);
	assert_null(json_object_get(fj, "sync"));
	json_decref(fj);
	json_decref(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_floor_dram),
		cmocka_unit_test(test_floor_l2),
		cmocka_unit_test(test_floor_sfu),
		cmocka_unit_test(test_floor_sync),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
