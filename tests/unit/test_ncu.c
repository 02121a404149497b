/* Unit tests for the Nsight Compute CSV parser: a real `ncu --csv --page raw` capture from the
 * H200 (tests/data/ncu, the application's own output before the report included), durations in
 * other units, quoted fields with quotes and thousands separators inside, metrics ncu left out,
 * FLOPs folded from the work counters, text that holds no report, and the stall reasons of three
 * H100 kernels as the findings and the printed verdict read them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "profile/ncu.h"
#include "profile/timeline.h"
#include "stitch/stitch.h"

static double get(const json_t *k, const char *key)
{
	const json_t *x = json_object_get(k, key);
	if (!json_is_number(x))
		fail_msg("%s is missing", key);
	return json_number_value(x);
}

static void test_h200_capture(void **state)
{
	(void)state;
	const char *dir = getenv("STITCH_TEST_DATA");
	assert_non_null(dir);
	char path[1024];
	snprintf(path, sizeof path, "%s/ncu/h200_raw_with_app_output.csv", dir);
	char *text = NULL;
	size_t len = 0;
	st_err err;
	assert_int_equal(st_read_file(path, &text, &len, &err), ST_OK);
	json_t *k;
	assert_int_equal(st_ncu_parse(text, len, &k, &err), ST_OK);
	assert_int_equal(json_array_size(k), 3);
	const json_t *first = json_array_get(k, 0);
	assert_string_equal(json_string_value(json_object_get(first, "name")),
	                    "void fill_kernel<float>(T1 *, long long, fill_args, int)");
	assert_string_equal(json_string_value(json_object_get(first, "block")), "(256, 1, 1)");
	assert_string_equal(json_string_value(json_object_get(first, "grid")), "(4224, 1, 1)");
	/* "10,368" ns */
	assert_float_equal(get(first, "duration_us"), 10.368, 1e-9);
	assert_float_equal(get(first, "sm_pct"), 69.06, 1e-9);
	assert_float_equal(get(first, "occupancy_pct"), 86.58, 1e-9);
	assert_float_equal(get(first, "l2_hit_pct"), 100.09, 1e-9);
	assert_float_equal(get(first, "registers"), 32, 0);
	assert_float_equal(get(first, "waves"), 4, 0);
	assert_float_equal(get(first, "tensor_pct"), 0, 0);
	assert_true(json_is_number(json_object_get(first, "stall_barrier")));
	assert_float_equal(get(json_array_get(k, 2), "duration_us"), 10.4, 1e-9);
	json_decref(k);
	free(text);
}

static void test_units_and_quoting(void **state)
{
	(void)state;
	const char csv[] =
		"==PROF== Connected to process 1\n"
		"\"ID\",\"Kernel Name\",\"Block Size\",\"gpu__time_duration.sum\",\"lts__t_sector_hit_rate.pct\",\"launch__registers_per_thread\"\n"
		"\"\",\"\",\"\",\"usecond\",\"%\",\"register/thread\"\n"
		"\"0\",\"k<\"\"a,b\"\">(int)\",\"(128, 1, 1)\",\"1,234.5\",\"n/a\",\"255\"\n"
		"\"1\",\"gemm\",\"(256, 1, 1)\",\"2.5\",\"50\",\"96\"\n";
	json_t *k;
	st_err err;
	assert_int_equal(st_ncu_parse(csv, sizeof csv - 1, &k, &err), ST_OK);
	assert_int_equal(json_array_size(k), 2);
	const json_t *a = json_array_get(k, 0);
	assert_string_equal(json_string_value(json_object_get(a, "name")), "k<\"a,b\">(int)");
	assert_float_equal(get(a, "duration_us"), 1234.5, 1e-9);
	/* "n/a" is left out, not read as 0 */
	assert_null(json_object_get(a, "l2_hit_pct"));
	assert_float_equal(get(a, "registers"), 255, 0);
	/* a metric ncu did not print is absent */
	assert_null(json_object_get(a, "dram_pct"));
	json_decref(k);

	const char ms[] = "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"\",\"\",\"msecond\"\n"
	                  "\"0\",\"slow\",\"1.5\"\n";
	assert_int_equal(st_ncu_parse(ms, sizeof ms - 1, &k, &err), ST_OK);
	assert_float_equal(get(json_array_get(k, 0), "duration_us"), 1500, 1e-9);
	json_decref(k);
}

static void test_no_report(void **state)
{
	(void)state;
	json_t *k;
	st_err err;
	const char none[] = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n";
	assert_int_equal(st_ncu_parse(none, sizeof none - 1, &k, &err), ST_E_INVALID);
	assert_null(k);
	assert_non_null(strstr(err.msg, "no CSV report"));
	const char no_units[] = "\"ID\",\"Kernel Name\"\n";
	assert_int_equal(st_ncu_parse(no_units, sizeof no_units - 1, &k, &err), ST_E_INVALID);
	const char no_name[] = "\"ID\",\"Block Size\"\n\"\",\"\"\n\"0\",\"(1, 1, 1)\"\n";
	assert_int_equal(st_ncu_parse(no_name, sizeof no_name - 1, &k, &err), ST_E_INVALID);
	assert_non_null(strstr(err.msg, "Kernel Name"));
	/* rows of nothing but separators: every empty field still fits */
	char commas[4096];
	int n = snprintf(commas, sizeof commas, "\"ID\",");
	memset(commas + n, ',', sizeof commas - (size_t)n - 1);
	commas[sizeof commas - 1] = 0;
	assert_int_equal(st_ncu_parse(commas, strlen(commas), &k, &err), ST_E_INVALID);
	/* a header and units but no kernel: an empty list, not an error */
	const char empty[] = "\"ID\",\"Kernel Name\"\n\"\",\"\"\n";
	assert_int_equal(st_ncu_parse(empty, sizeof empty - 1, &k, &err), ST_OK);
	assert_int_equal(json_array_size(k), 0);
	json_decref(k);
}

static void test_classify(void **state)
{
	(void)state;
	/* the softmax expert as ncu saw it: DRAM-bound near its roof */
	json_t *k = json_pack("{s:f,s:f,s:f,s:f}", "dram_pct", 71.5, "sm_pct", 40.0, "duration_us",
	                      70.0, "dram_bytes", 268435456.0);
	st_ncu_classify(k);
	assert_string_equal(json_string_value(json_object_get(k, "bound")), "memory");
	assert_float_equal(get(k, "roof_pct"), 71.5, 1e-9);
	assert_float_equal(get(k, "dram_gbs"), 268435456.0 / 70e3, 1e-6);
	json_decref(k);
	/* a GEMM: SM-bound */
	k = json_pack("{s:f,s:f}", "dram_pct", 18.0, "sm_pct", 80.0);
	st_ncu_classify(k);
	assert_string_equal(json_string_value(json_object_get(k, "bound")), "compute");
	assert_null(json_object_get(k, "dram_gbs"));
	json_decref(k);
	/* the LSTM step: under 30 % of both roofs, waiting */
	k = json_pack("{s:f,s:f}", "dram_pct", 9.0, "sm_pct", 17.0);
	st_ncu_classify(k);
	assert_string_equal(json_string_value(json_object_get(k, "bound")), "latency");
	json_decref(k);
	/* without both figures nothing is claimed */
	k = json_pack("{s:f}", "dram_pct", 50.0);
	st_ncu_classify(k);
	assert_null(json_object_get(k, "bound"));
	json_decref(k);
}

/* FLOPs from the work counters: tensor-path ops as counted, scalar instructions per thread with
 * a fused multiply-add counting two, and the rate and intensity from them. */
static void test_flops(void **state)
{
	(void)state;
	static const char csv[] =
		"\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\",\"dram__bytes.sum\","
		"\"sm__ops_path_tensor_src_bf16_dst_fp32.sum\","
		"\"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum\","
		"\"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum\","
		"\"smsp__sass_thread_inst_executed_op_dfma_pred_on.sum\"\n"
		"\"\",\"\",\"us\",\"byte\",\"\",\"inst\",\"inst\",\"inst\"\n"
		"\"0\",\"gemm\",\"1000\",\"1000000\",\"6e11\",\"1000\",\"10\",\"5\"\n"
		"\"1\",\"copy\",\"10\",\"2000\",\"0\",\"0\",\"0\",\"0\"\n";
	json_t *k;
	st_err err;
	assert_int_equal(st_ncu_parse(csv, sizeof csv - 1, &k, &err), ST_OK);
	json_t *g = json_array_get(k, 0);
	assert_float_equal(get(g, "flops"), 6e11 + 2 * 1000 + 10 + 2 * 5, 1);
	assert_float_equal(get(g, "tensor_flops"), 6e11, 1);
	assert_null(json_object_get(g, "_ffma")); /* the raw counters are folded away */
	assert_null(json_object_get(g, "_tensor_bf16"));
	json_object_set_new(g, "dram_pct", json_real(10));
	json_object_set_new(g, "sm_pct", json_real(90));
	st_ncu_classify(g);
	assert_float_equal(get(g, "tflops"), get(g, "flops") / 1e-3 / 1e12, 1e-9);
	assert_float_equal(get(g, "intensity"), get(g, "flops") / 1e6, 1e-6);
	json_t *c = json_array_get(k, 1);
	assert_float_equal(get(c, "flops"), 0, 0);
	json_decref(k);
	/* a report without the work counters claims no FLOPs */
	static const char old[] = "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n"
	                          "\"\",\"\",\"us\"\n\"0\",\"k\",\"5\"\n";
	assert_int_equal(st_ncu_parse(old, sizeof old - 1, &k, &err), ST_OK);
	assert_null(json_object_get(json_array_get(k, 0), "flops"));
	json_decref(k);
}

static char *read_fixture(const char *name, size_t *len)
{
	const char *dir = getenv("STITCH_TEST_DATA");
	assert_non_null(dir);
	char path[1024];
	snprintf(path, sizeof path, "%s/ncu/%s", dir, name);
	char *text = NULL;
	st_err err;
	assert_int_equal(st_read_file(path, &text, len, &err), ST_OK);
	return text;
}

/* Rows of three H100 captures of session 51 (kmeans' fused kernel, topk's pipe kernel, one nbody
 * step; columns trimmed to the issue rate, the FP32 pipe and the stall reasons): the largest
 * stall reason is picked among all of them, "not selected" (a ready warp) never, and only the
 * kernel that issues on under 60 % of its cycles gets the stall finding. */
static void test_h100_stalls(void **state)
{
	(void)state;
	size_t len = 0;
	char *text = read_fixture("h100_stalls.csv", &len);
	json_t *k;
	st_err err;
	assert_int_equal(st_ncu_parse(text, len, &k, &err), ST_OK);
	free(text);
	assert_int_equal(json_array_size(k), 3);
	const json_t *topk = json_array_get(k, 1);
	assert_float_equal(get(topk, "issue_pct"), 49.76, 1e-9);
	assert_float_equal(get(topk, "fma_pct"), 9.75, 1e-9);
	assert_float_equal(get(topk, "stall_barrier"), 5.25, 1e-9);
	assert_float_equal(get(topk, "stall_wait"), 2.40, 1e-9);
	assert_float_equal(get(topk, "stall_not_selected"), 1.11, 1e-9);
	assert_float_equal(get(json_array_get(k, 2), "stall_lg_throttle"), 0, 0);

	int n = 0;
	st_ncu_kernel *kk = st_ncu_kernels_from_json(k, &n);
	assert_int_equal(n, 3);
	assert_string_equal(kk[0].top_stall, "barriers"); /* 0.55 against short scoreboard's 0.50 */
	assert_string_equal(kk[1].top_stall, "barriers");
	assert_float_equal(kk[1].top_stall_ratio, 5.25, 1e-9);
	/* nbody: 4.22 not selected is no wait; shared memory and the MUFU are (1.54) */
	assert_non_null(strstr(kk[2].top_stall, "short scoreboard"));
	assert_float_equal(kk[2].top_stall_ratio, 1.54, 1e-9);
	st_kernel_stat top[3] = {{.name = kk[0].name, .share = 0.5},
	                         {.name = kk[1].name, .share = 0.3},
	                         {.name = kk[2].name, .share = 0.2}};
	st_timeline_summary sum;
	memset(&sum, 0, sizeof sum);
	sum.top = top;
	sum.n_top = 3;
	st_finding *f = NULL;
	int nf = st_feedback_ncu(&sum, kk, n, 10, &f);
	assert_int_equal(nf, 1);
	assert_non_null(strstr(f[0].text, "kernel topk_pipe_kernel issues"));
	assert_non_null(strstr(f[0].text, "issues an instruction on 50 % of a scheduler's cycles, its "
	                                  "warps waiting mostly on barriers (5.2 cycles per issued"));
	assert_non_null(strstr(f[0].text, "warp specialisation"));
	st_findings_free(f, nf);
	free(kk);

	/* the printed verdict: the three largest stall reasons under the kernel's line */
	json_t *v = json_pack("{s:s,s:{s:{s:O}}}", "status", "ok", "profile", "ncu", "kernels", k);
	char *out = NULL;
	size_t out_len = 0;
	FILE *mf = open_memstream(&out, &out_len);
	assert_non_null(mf);
	st_verdict_print(v, mf);
	fclose(mf);
	assert_non_null(strstr(out, "issue  50% of cycles  FMA pipe  10%  stalls per issue: barrier 5.25, "
	                            "wait 2.40, short_scoreboard 1.46"));
	assert_non_null(strstr(out, "issue  82% of cycles  FMA pipe  70%  stalls per issue: "
	                            "short_scoreboard 1.54, wait 1.09, dispatch 0.89"));
	free(out);
	json_decref(v);
	json_decref(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flops),
		cmocka_unit_test(test_h200_capture),
		cmocka_unit_test(test_units_and_quoting),
		cmocka_unit_test(test_no_report),
		cmocka_unit_test(test_classify),
		cmocka_unit_test(test_h100_stalls),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
