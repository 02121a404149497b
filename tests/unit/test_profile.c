/* Unit tests for the profile analysis on hand-built timelines: busy time as a union of
 * overlapping and disjoint intervals, idle gaps and the pairs of activities around them,
 * top-kernel grouping and order, the agreement with event timing, the empty timeline, the
 * roofline of a GEMM, a softmax and a latency-bound run, every feedback rule with its numbers,
 * the ranking and its determinism, and the Chrome trace read back as JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/timeline.h"

#define EPS 1e-9

static void tl_make(st_timeline *t, int cap)
{
	st_timeline_init(t);
	t->acts = malloc((size_t)cap * sizeof *t->acts);
	assert_non_null(t->acts);
	t->cap = cap;
}

static st_activity *push(st_timeline *t, st_act_kind kind, const char *name, double start,
                         double end, uint32_t stream)
{
	assert_true(t->n < t->cap);
	st_activity *a = &t->acts[t->n++];
	memset(a, 0, sizeof *a);
	a->kind = kind;
	a->name = strdup(name);
	assert_non_null(a->name);
	a->start_us = start;
	a->end_us = end;
	a->stream = stream;
	a->corr = (uint32_t)t->n;
	return a;
}

static st_activity *kernel(st_timeline *t, const char *name, double start, double end, int blocks)
{
	st_activity *a = push(t, ST_ACT_KERNEL, name, start, end, 7);
	a->grid[0] = blocks;
	a->grid[1] = 1;
	a->grid[2] = 1;
	a->block[0] = 256;
	a->block[1] = 1;
	a->block[2] = 1;
	a->regs = 32;
	return a;
}

/* The finding whose text contains `needle`, or NULL. */
static const st_finding *find(const st_finding *f, int n, const char *needle)
{
	for (int i = 0; i < n; i++)
		if (strstr(f[i].text, needle))
			return &f[i];
	return NULL;
}

/* ---- summary ------------------------------------------------------------------------------ */

static void test_union_and_gaps(void **state)
{
	(void)state;
	st_timeline t;
	tl_make(&t, 8);
	/* out of time order on purpose; host records span far beyond the device work */
	kernel(&t, "c", 40, 50, 1000);
	push(&t, ST_ACT_API, "cudaLaunchKernel", -5, 100, 0);
	kernel(&t, "a", 0, 10, 1000);
	push(&t, ST_ACT_MEMCPY, "DtoD", 20, 25, 8)->bytes = 4096;
	kernel(&t, "b", 5, 15, 1000); /* overlaps a on another stream */
	push(&t, ST_ACT_MEMSET, "memset", 25.5, 26, 8)->bytes = 100;
	push(&t, ST_ACT_SYNC, "stream", 60, 70, 0);
	t.run_wall_us = 120;
	t.run_event_us = 49.5;

	st_timeline_summary s;
	st_err err;
	assert_int_equal(st_timeline_summarize(&t, &s, &err), ST_OK);
	assert_float_equal(s.span_us, 50, EPS);
	/* [0,15] + [20,25] + [25.5,26] + [40,50] */
	assert_float_equal(s.busy_us, 30.5, EPS);
	assert_float_equal(s.gaps_us, 19.5, EPS);
	assert_int_equal(s.n_gaps, 2); /* the 0.5 us stretch is not a gap */
	assert_float_equal(s.max_gap_us, 14, EPS);
	assert_float_equal(s.busy_pct, 61, EPS);
	assert_float_equal(s.kernel_us, 30, EPS); /* overlap counted twice */
	assert_int_equal(s.launches, 3);
	assert_int_equal(s.memcpys, 1);
	assert_int_equal(s.memsets, 1);
	assert_int_equal(s.syncs, 1);
	assert_int_equal(s.api_calls, 1);
	assert_int_equal(s.memcpy_bytes, 4096);
	assert_float_equal(s.host_us, 120, EPS);
	assert_float_equal(s.device_us, 30.5, EPS);
	assert_float_equal(s.lead_us, 0, EPS); /* the first kernel starts as st_run is called */
	assert_float_equal(s.agreement, (30 + 19.5) / 49.5, EPS);
	/* each gap goes to the activity that ended last (b, not a, which b overlaps) and the one
	 * after it; the 0.5 us stretch to the memset is none, but the memset ends last before c */
	assert_int_equal(s.n_gap_pairs, 2);
	assert_string_equal(s.gap_pairs[0].before, "memset");
	assert_string_equal(s.gap_pairs[0].after, "c");
	assert_float_equal(s.gap_pairs[0].total_us, 14, EPS);
	assert_string_equal(s.gap_pairs[1].before, "b");
	assert_string_equal(s.gap_pairs[1].after, "DtoD");
	assert_float_equal(s.gap_pairs[1].max_us, 5, EPS);
	st_timeline_summary_free(&s);
	assert_null(s.top);
	assert_null(s.gap_pairs);
	st_timeline_free(&t);
}

static void test_nested_and_touching(void **state)
{
	(void)state;
	st_timeline t;
	tl_make(&t, 4);
	kernel(&t, "outer", 10, 30, 1000);
	kernel(&t, "inner", 12, 20, 1000); /* inside outer */
	kernel(&t, "next", 30, 35, 1000);  /* touches outer's end: no gap */
	kernel(&t, "last", 37, 40, 1000);
	st_timeline_summary s;
	assert_int_equal(st_timeline_summarize(&t, &s, NULL), ST_OK);
	assert_float_equal(s.span_us, 30, EPS);
	assert_float_equal(s.busy_us, 28, EPS);
	assert_float_equal(s.gaps_us, 2, EPS);
	assert_int_equal(s.n_gaps, 1);
	assert_float_equal(s.max_gap_us, 2, EPS);
	assert_float_equal(s.lead_us, 10, EPS); /* st_run called at 0, first kernel at 10 */
	assert_float_equal(s.agreement, 0, EPS); /* no event time */
	t.run_event_us = 41;
	st_timeline_summary_free(&s);
	assert_int_equal(st_timeline_summarize(&t, &s, NULL), ST_OK);
	/* lead 10 + kernels 20 + 8 + 5 + 3 (inner counted again) + gaps 2 over 41 us of events */
	assert_float_equal(s.agreement, (10 + 36 + 2) / 41.0, EPS);
	st_timeline_summary_free(&s);
	st_timeline_free(&t);
}

static void test_top_kernels(void **state)
{
	(void)state;
	st_timeline t;
	tl_make(&t, 8);
	kernel(&t, "b", 0, 5, 10);
	kernel(&t, "c", 30, 40, 99)->regs = 64; /* a later launch of c listed first */
	kernel(&t, "b", 10, 15, 10);
	kernel(&t, "a", 50, 65, 3);
	kernel(&t, "c", 20, 30, 4)->regs = 40; /* c's first launch in time */
	kernel(&t, "b", 70, 75, 10);
	st_activity *c = &t.acts[4];
	c->grid[1] = 2;
	c->grid[2] = 3;

	st_timeline_summary s;
	assert_int_equal(st_timeline_summarize(&t, &s, NULL), ST_OK);
	assert_int_equal(s.n_top, 3);
	assert_float_equal(s.kernel_us, 50, EPS);
	assert_string_equal(s.top[0].name, "c");
	assert_int_equal(s.top[0].launches, 2);
	assert_float_equal(s.top[0].total_us, 20, EPS);
	assert_float_equal(s.top[0].share, 0.4, EPS);
	assert_int_equal(s.top[0].grid_blocks, 24);
	assert_int_equal(s.top[0].regs, 40);
	/* a and b tie at 15 us: by name */
	assert_string_equal(s.top[1].name, "a");
	assert_int_equal(s.top[1].launches, 1);
	assert_string_equal(s.top[2].name, "b");
	assert_int_equal(s.top[2].launches, 3);
	assert_float_equal(s.top[2].total_us, 15, EPS);
	assert_float_equal(s.top[2].share, 0.3, EPS);
	/* names point into the timeline */
	assert_ptr_equal(s.top[1].name, t.acts[3].name);

	json_t *j = st_timeline_summary_json(&s, 2);
	assert_non_null(j);
	json_t *top = json_object_get(j, "top_kernels");
	assert_int_equal(json_array_size(top), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(top, 0), "name")), "c");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(top, 0), "grid_blocks")),
	                 24);
	assert_int_equal(json_integer_value(json_object_get(j, "launches")), 6);
	assert_float_equal(json_number_value(json_object_get(j, "kernel_us")), 50, EPS);
	const char *keys[] = { "span_us", "busy_us", "busy_pct", "gaps_us", "n_gaps", "max_gap_us",
		               "memcpys", "memsets", "syncs", "api_calls", "memcpy_bytes",
		               "host_us", "device_us", "agreement" };
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
		assert_non_null(json_object_get(j, keys[i]));
	json_decref(j);
	j = st_timeline_summary_json(&s, 10);
	assert_int_equal(json_array_size(json_object_get(j, "top_kernels")), 3);
	json_decref(j);
	st_timeline_summary_free(&s);
	st_timeline_free(&t);
}

static void test_empty(void **state)
{
	(void)state;
	st_timeline t;
	st_timeline_init(&t);
	t.run_event_us = 0;
	st_timeline_summary s;
	assert_int_equal(st_timeline_summarize(&t, &s, NULL), ST_OK);
	assert_float_equal(s.span_us, 0, EPS);
	assert_float_equal(s.busy_pct, 0, EPS);
	assert_float_equal(s.agreement, 0, EPS);
	assert_int_equal(s.n_top, 0);
	assert_null(s.top);
	json_t *j = st_timeline_summary_json(&s, 5);
	assert_non_null(j);
	assert_int_equal(json_array_size(json_object_get(j, "top_kernels")), 0);
	json_decref(j);
	st_finding *f = (st_finding *)1;
	assert_int_equal(st_feedback(&t, &s, NULL, NULL, 0, 10, &f), 0);
	assert_null(f);
	st_timeline_summary_free(&s);

	/* host records only: no device span */
	tl_make(&t, 2);
	push(&t, ST_ACT_API, "cudaMalloc", 0, 30, 0);
	t.run_event_us = 10;
	assert_int_equal(st_timeline_summarize(&t, &s, NULL), ST_OK);
	assert_float_equal(s.span_us, 0, EPS);
	assert_float_equal(s.busy_us, 0, EPS);
	assert_float_equal(s.busy_pct, 0, EPS);
	assert_int_equal(s.api_calls, 1);
	assert_float_equal(s.agreement, 0, EPS);
	st_timeline_summary_free(&s);
	st_timeline_free(&t);
}

/* ---- roofline ----------------------------------------------------------------------------- */

static json_t *h200_peaks(void)
{
	json_t *p = json_pack("{s:f, s:f, s:f}", "bw_gbs", 4000.0, "bf16", 800.0, "fp32", 60.0);
	assert_non_null(p);
	return p;
}

static void test_roofline_gemm(void **state)
{
	(void)state;
	json_t *p = h200_peaks();
	double n = 8192, flops = 2 * n * n * n, bytes = 3 * n * n * 2;
	st_roofline r;
	st_roofline_compute(p, "bf16", flops, bytes, 1.4, 95, &r);
	assert_float_equal(r.peak_tflops, 800, EPS);
	assert_float_equal(r.peak_gbs, 4000, EPS);
	assert_float_equal(r.intensity, flops / bytes, 1e-6);
	assert_float_equal(r.ridge, 200, EPS);
	assert_float_equal(r.roof_tflops, 800, EPS);
	assert_float_equal(r.attained_tflops, flops / 1.4e-3 / 1e12, 1e-6);
	assert_float_equal(r.attained_gbs, bytes / 1.4e-3 / 1e9, 1e-6);
	assert_float_equal(r.fraction, 0.9817, 1e-3);
	assert_string_equal(r.bound, "compute");

	json_t *j = st_roofline_json(&r);
	assert_non_null(j);
	const char *keys[] = { "flops", "bytes", "time_ms", "intensity", "attained_tflops",
		               "attained_gbs", "peak_tflops", "peak_gbs", "ridge", "roof_tflops",
		               "fraction" };
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
		assert_true(json_is_number(json_object_get(j, keys[i])));
	assert_string_equal(json_string_value(json_object_get(j, "bound")), "compute");
	assert_float_equal(json_number_value(json_object_get(j, "ridge")), 200, EPS);
	json_decref(j);
	json_decref(p);
}

static void test_roofline_softmax(void **state)
{
	(void)state;
	json_t *p = h200_peaks();
	double n = 8192, bytes = 2 * n * n * 2, flops = 5 * n * n;
	st_roofline r;
	st_roofline_compute(p, "bf16", flops, bytes, 0.1, 95, &r);
	assert_float_equal(r.intensity, 1.25, EPS);
	assert_float_equal(r.roof_tflops, 5, EPS); /* 1.25 FLOP/B x 4 TB/s */
	assert_float_equal(r.attained_gbs, bytes / 1e-4 / 1e9, 1e-6);
	assert_float_equal(r.fraction, r.attained_gbs / 4000, 1e-9);
	assert_float_equal(r.fraction, 0.671, 1e-3);
	assert_string_equal(r.bound, "memory");

	/* no cost unit: the same run on a pure memory roofline */
	st_roofline m;
	st_roofline_compute(p, NULL, flops, bytes, 0.1, 95, &m);
	assert_float_equal(m.peak_tflops, 0, EPS);
	assert_float_equal(m.ridge, 0, EPS);
	assert_float_equal(m.fraction, r.fraction, 1e-9);
	assert_string_equal(m.bound, "memory");
	/* an unknown unit is the same as none */
	st_roofline_compute(p, "fp8", flops, bytes, 0.1, 95, &m);
	assert_float_equal(m.peak_tflops, 0, EPS);
	assert_string_equal(m.bound, "memory");
	json_decref(p);
}

static void test_roofline_latency(void **state)
{
	(void)state;
	json_t *p = h200_peaks();
	st_roofline r;
	/* 1 MB in 10 us: 100 GB/s, 2.5 % of bandwidth, too short to be anything but latency */
	st_roofline_compute(p, NULL, 0, 1e6, 0.01, -1, &r);
	assert_float_equal(r.attained_gbs, 100, 1e-9);
	assert_float_equal(r.fraction, 0.025, 1e-12);
	assert_float_equal(r.intensity, 0, EPS);
	assert_string_equal(r.bound, "latency");
	/* long enough, busy unknown: only the time test applies */
	st_roofline_compute(p, NULL, 0, 1e8, 1, -1, &r);
	assert_float_equal(r.fraction, 0.025, 1e-12);
	assert_string_equal(r.bound, "memory");
	/* long, but the GPU idles most of the run */
	st_roofline_compute(p, NULL, 0, 1e8, 1, 30, &r);
	assert_string_equal(r.bound, "latency");
	st_roofline_compute(p, NULL, 0, 1e8, 1, 60, &r);
	assert_string_equal(r.bound, "memory");
	/* a slow GEMM with a busy GPU stays compute-bound */
	st_roofline_compute(p, "bf16", 2e12, 4e8, 100, 99, &r);
	assert_true(r.fraction < 0.25);
	assert_string_equal(r.bound, "compute");
	/* no peaks at all: nothing to divide by, no roof to fall short of */
	st_roofline_compute(NULL, "bf16", 2e12, 4e8, 0.001, 10, &r);
	assert_float_equal(r.fraction, 0, EPS);
	assert_float_equal(r.ridge, 0, EPS);
	assert_string_equal(r.bound, "memory");
	/* zero time */
	st_roofline_compute(p, "bf16", 2e12, 4e8, 0, 99, &r);
	assert_float_equal(r.attained_tflops, 0, EPS);
	assert_float_equal(r.attained_gbs, 0, EPS);
	json_decref(p);
}

/* ---- feedback ----------------------------------------------------------------------------- */

static void mlp(st_timeline *t)
{
	tl_make(t, 5);
	kernel(t, "sm90_xmma_gemm_bf16", 0, 100, 264);
	kernel(t, "void bias_add<float>(float*, int)", 102, 112, 1024);
	kernel(t, "gelu_kernel(float*, int)", 113, 123, 1024);
	kernel(t, "sm90_xmma_gemm_bf16", 124, 224, 264);
	kernel(t, "void bias_add<float>(float*, int)", 225, 235, 1024);
	t->run_wall_us = 240;
	t->run_event_us = 236;
}

static int run_feedback(const st_timeline *t, const st_roofline *roof, const st_ncu_kernel *ncu,
                        int n_ncu, int max, st_finding **f)
{
	st_timeline_summary s;
	assert_int_equal(st_timeline_summarize(t, &s, NULL), ST_OK);
	int n = st_feedback(t, &s, roof, ncu, n_ncu, max, f);
	st_timeline_summary_free(&s);
	assert_true(n >= 0);
	for (int i = 1; i < n; i++) {
		assert_true((*f)[i - 1].weight >= (*f)[i].weight);
		assert_true((*f)[i].weight >= 0 && (*f)[i].weight <= 1);
	}
	return n;
}

static void test_feedback_unfused(void **state)
{
	(void)state;
	st_timeline t;
	mlp(&t);
	st_finding *f;
	int n = run_feedback(&t, NULL, NULL, 0, 10, &f);
	const st_finding *a = find(f, n, "besides the GEMMs");
	assert_non_null(a);
	assert_non_null(strstr(a->text, "3 kernel launches besides the GEMMs (bias_add, gelu_kernel)"));
	assert_non_null(strstr(a->text, "13 %")); /* 30 of 230 us */
	assert_non_null(strstr(a->text, "epilogue"));
	assert_float_equal(a->weight, 30.0 / 230, 1e-9);
	/* busy GPU, big grids, no copies: nothing else fires */
	assert_int_equal(n, 1);
	st_findings_free(f, n);
	st_timeline_free(&t);

	/* GEMMs alone, or elementwise kernels alone, are not unfused epilogues */
	tl_make(&t, 2);
	kernel(&t, "cutlass_80_tensorop_gemm", 0, 100, 264);
	kernel(&t, "ampere_sgemm_128x64", 100, 200, 264);
	n = run_feedback(&t, NULL, NULL, 0, 10, &f);
	assert_null(find(f, n, "besides the GEMMs"));
	st_findings_free(f, n);
	st_timeline_free(&t);
	tl_make(&t, 2);
	kernel(&t, "bias_add", 0, 100, 264);
	kernel(&t, "gelu_kernel", 100, 200, 264);
	n = run_feedback(&t, NULL, NULL, 0, 10, &f);
	assert_null(find(f, n, "besides the GEMMs"));
	st_findings_free(f, n);
	st_timeline_free(&t);

	/* below 10 % of kernel time */
	tl_make(&t, 2);
	kernel(&t, "MatMul_Kernel", 0, 100, 264);
	kernel(&t, "bias_add", 100, 109, 264);
	n = run_feedback(&t, NULL, NULL, 0, 10, &f);
	assert_null(find(f, n, "besides the GEMMs"));
	st_findings_free(f, n);
	st_timeline_free(&t);
}

static void tiny_kernels(st_timeline *t)
{
	tl_make(t, 20);
	for (int i = 0; i < 20; i++)
		kernel(t, i % 2 ? "add_kernel" : "scale_kernel", 20.0 * i, 20.0 * i + 2, 1024);
	t->run_wall_us = 400;
	t->run_event_us = 385;
}

static void test_feedback_gaps_and_host(void **state)
{
	(void)state;
	st_timeline t;
	tiny_kernels(&t);
	st_finding *f;
	int n = run_feedback(&t, NULL, NULL, 0, 10, &f);
	/* span 382 us, busy 40 us */
	const st_finding *b = find(f, n, "launches leave");
	assert_non_null(b);
	assert_non_null(strstr(b->text, "20 launches leave 90 % of the run idle"));
	assert_non_null(strstr(b->text, "largest gap 18.0 µs"));
	assert_non_null(strstr(b->text, "CUDA graph"));
	assert_float_equal(b->weight, 342.0 / 382, 1e-9);
	const st_finding *c = find(f, n, "the GPU is busy for only");
	assert_non_null(c);
	assert_non_null(strstr(c->text, "only 10 % of st_run's 400.0 µs"));
	assert_float_equal(c->weight, 0.9, 1e-9);
	assert_ptr_equal(c, &f[0]); /* 0.9 > 0.895 */
	assert_ptr_equal(b, &f[1]);
	st_findings_free(f, n);
	st_timeline_free(&t);

	/* 7 launches are too few for rule b, whatever the gaps */
	tl_make(&t, 7);
	for (int i = 0; i < 7; i++)
		kernel(&t, "k", 20.0 * i, 20.0 * i + 2, 1024);
	n = run_feedback(&t, NULL, NULL, 0, 10, &f);
	assert_null(find(f, n, "launches leave"));
	assert_null(find(f, n, "the GPU is busy")); /* run_wall_us 0: host time unknown */
	st_findings_free(f, n);
	st_timeline_free(&t);
}

/* A library's kernel launched behind each of the program's own (GPT-2's LayerNorm -> matmul
 * in session 48): the gaps gather behind that pair, and the finding names it with its sums. */
static void test_gap_pairs(void **state)
{
	(void)state;
	st_timeline t;
	tl_make(&t, 13);
	for (int i = 0; i < 4; i++) {
		double t0 = 100.0 * i;
		kernel(&t, "void ln_kernel<8>(float const*, int)", t0, t0 + 10, 1024);
		kernel(&t, "nvjet_hsh_128x128", t0 + 14, t0 + 60, 264);     /* 4 us after ln */
		kernel(&t, "nvjet_hsh_256x128", t0 + 60.5, t0 + 98, 264);   /* 0.5 us: no gap */
	}                                                                  /* 2 us to the next ln */
	kernel(&t, "nvjet_hsh_128x128", 405, 420, 264); /* one 7 us gap of a third pair */
	st_timeline_summary s;
	assert_int_equal(st_timeline_summarize(&t, &s, NULL), ST_OK);
	assert_int_equal(s.n_gap_pairs, 3); /* largest total first */
	assert_string_equal(s.gap_pairs[0].before, "void ln_kernel<8>(float const*, int)");
	assert_string_equal(s.gap_pairs[0].after, "nvjet_hsh_128x128");
	assert_int_equal(s.gap_pairs[0].count, 4);
	assert_float_equal(s.gap_pairs[0].total_us, 16, 1e-9);
	assert_string_equal(s.gap_pairs[1].after, "nvjet_hsh_128x128");
	assert_float_equal(s.gap_pairs[1].total_us, 7, 1e-9);
	assert_string_equal(s.gap_pairs[2].before, "nvjet_hsh_256x128");
	assert_int_equal(s.gap_pairs[2].count, 3);
	assert_float_equal(s.gap_pairs[2].max_us, 2, 1e-9);
	json_t *j = st_timeline_summary_json(&s, 1);
	assert_int_equal(json_array_size(json_object_get(j, "gap_pairs")), 1);
	json_decref(j);
	st_timeline_summary_free(&s);

	st_finding *f;
	int n = run_feedback(&t, NULL, NULL, 0, 10, &f);
	const st_finding *g = find(f, n, "on average between");
	assert_non_null(g);
	assert_non_null(strstr(g->text, "4 gaps of 4.0 µs on average between the end of ln_kernel "
	                                "and the start of nvjet_hsh_128x128 (16.0 µs, 4 % of the run)"));
	assert_float_equal(g->weight, 16.0 / 420, 1e-9);
	st_findings_free(f, n);
	st_timeline_free(&t);
}

/* Memsets between kernels (GPT-2's cuBLASLt clears part of its workspace before four kinds of
 * matmul, session 49): the gaps on either side of them are summed into one finding, and the pair
 * finding, whose advice (a programmatic launch) a memset cannot take, skips those pairs. */
static void test_memset_gaps(void **state)
{
	(void)state;
	st_timeline t;
	tl_make(&t, 20);
	for (int i = 0; i < 6; i++) {
		double t0 = 100.0 * i;
		kernel(&t, "void ln_kernel<8>(float const*, int)", t0, t0 + 10, 1024);
		push(&t, ST_ACT_MEMSET, "memset", t0 + 11.5, t0 + 12, 7)->bytes = 256; /* 1.5 us after */
		kernel(&t, "nvjet_hsh_128x128", t0 + 14, t0 + 99.5, 264);          /* 2 us after */
	}
	st_timeline_summary s;
	assert_int_equal(st_timeline_summarize(&t, &s, NULL), ST_OK);
	assert_int_equal(s.memsets, 6);
	st_finding *f;
	int n = run_feedback(&t, NULL, NULL, 0, 10, &f);
	const st_finding *m = find(f, n, "memsets inside st_run");
	assert_non_null(m);
	/* 6 x 1.5 + 6 x 2 = 21 us of the 599.5 us run */
	assert_non_null(strstr(m->text, "6 memsets inside st_run sit between kernels: 12 gaps around "
	                                "them, 21.0 µs (4 % of the run)"));
	assert_float_equal(m->weight, 21.0 / 599.5, 1e-9);
	assert_null(find(f, n, "on average between"));
	st_findings_free(f, n);
	st_timeline_summary_free(&s);
	st_timeline_free(&t);
}

static void test_feedback_determinism_and_max(void **state)
{
	(void)state;
	st_timeline t;
	tiny_kernels(&t);
	st_finding *f1, *f2;
	int n1 = run_feedback(&t, NULL, NULL, 0, 10, &f1);
	int n2 = run_feedback(&t, NULL, NULL, 0, 10, &f2);
	assert_true(n1 >= 2);
	assert_int_equal(n1, n2);
	for (int i = 0; i < n1; i++)
		assert_string_equal(f1[i].text, f2[i].text);
	st_findings_free(f2, n2);

	/* the record order does not matter */
	for (int i = 0; i < t.n / 2; i++) {
		st_activity x = t.acts[i];
		t.acts[i] = t.acts[t.n - 1 - i];
		t.acts[t.n - 1 - i] = x;
	}
	n2 = run_feedback(&t, NULL, NULL, 0, 10, &f2);
	assert_int_equal(n1, n2);
	for (int i = 0; i < n1; i++)
		assert_string_equal(f1[i].text, f2[i].text);
	st_findings_free(f2, n2);

	n2 = run_feedback(&t, NULL, NULL, 0, 1, &f2);
	assert_int_equal(n2, 1);
	assert_string_equal(f2[0].text, f1[0].text);
	st_findings_free(f2, n2);
	n2 = run_feedback(&t, NULL, NULL, 0, 0, &f2);
	assert_int_equal(n2, 0);
	assert_null(f2);
	st_findings_free(f1, n1);
	st_timeline_free(&t);
}

static void test_feedback_copies_syncs_grids(void **state)
{
	(void)state;
	st_timeline t;
	tl_make(&t, 6);
	kernel(&t, "void reduce<float>(float const*, float*)", 10, 90, 8);
	kernel(&t, "fill", 90, 100, 4096);
	push(&t, ST_ACT_MEMCPY, "HtoD", 0, 10, 7)->bytes = 2500000;
	push(&t, ST_ACT_MEMCPY, "DtoH", 100, 110, 7)->bytes = 1500000;
	push(&t, ST_ACT_MEMCPY, "DtoD", 110, 112, 7)->bytes = 999;
	push(&t, ST_ACT_SYNC, "stream", 100, 111, 0);
	t.run_wall_us = 115;
	st_finding *f;
	int n = run_feedback(&t, NULL, NULL, 0, 10, &f);

	const st_finding *d = find(f, n, "host↔device");
	assert_non_null(d);
	assert_non_null(strstr(d->text, "2 host↔device copies (4.0 MB) inside st_run take 18 %"));
	assert_float_equal(d->weight, 20.0 / 112, 1e-9);

	const st_finding *e = find(f, n, "synchronisation call");
	assert_non_null(e);
	assert_non_null(strstr(e->text, "1 synchronisation call inside st_run (stream)"));
	assert_float_equal(e->weight, 11.0 / 115, 1e-9);

	const st_finding *g = find(f, n, "launches only");
	assert_non_null(g);
	assert_non_null(strstr(g->text, "kernel reduce launches only 8 blocks (89 % of kernel time) "
	                                "on a 132-SM GPU"));
	assert_float_equal(g->weight, 0.8 * (1 - 8.0 / 132) / 0.9, 1e-9);
	assert_null(find(f, n, "kernel fill")); /* 4096 blocks */
	st_findings_free(f, n);
	st_timeline_free(&t);
}

static void test_feedback_roofline_and_ncu(void **state)
{
	(void)state;
	st_timeline t;
	tl_make(&t, 2);
	kernel(&t, "my_gemm_kernel", 0, 80, 528);
	kernel(&t, "softmax", 80, 100, 528);
	t.run_wall_us = 101;
	json_t *p = h200_peaks();
	st_finding *f;

	st_roofline r;
	st_roofline_compute(p, NULL, 0, 1.2e8, 0.1, 99, &r); /* 1200 GB/s: 30 % */
	int n = run_feedback(&t, &r, NULL, 0, 10, &f);
	const st_finding *m = find(f, n, "memory-bound");
	assert_non_null(m);
	assert_non_null(strstr(m->text, "memory-bound at 30 % of the measured 4000 GB/s"));
	assert_float_equal(m->weight, 0.7, 1e-9);
	st_findings_free(f, n);

	st_roofline_compute(p, "bf16", 8e10, 1e8, 1, 99, &r); /* 80 TFLOP/s: 10 % */
	assert_string_equal(r.bound, "compute");
	n = run_feedback(&t, &r, NULL, 0, 10, &f);
	assert_non_null(find(f, n, "compute-bound at 10 % of the 800 TFLOP/s peak"));
	st_findings_free(f, n);

	st_roofline_compute(p, "bf16", 8e10, 1e8, 0.005, 99, &r); /* good enough: no finding */
	assert_true(r.fraction > 0.5);
	n = run_feedback(&t, &r, NULL, 0, 10, &f);
	assert_null(find(f, n, "-bound"));
	st_findings_free(f, n);

	st_roofline_compute(p, NULL, 0, 1.2e6, 0.01, 99, &r); /* 120 GB/s in 10 us */
	n = run_feedback(&t, &r, NULL, 0, 10, &f);
	const st_finding *l = find(f, n, "latency- or launch-bound");
	assert_non_null(l);
	assert_non_null(strstr(l->text, "reaches 3 % of its roof"));
	st_findings_free(f, n);

	st_ncu_kernel k[2];
	memset(k, 0, sizeof k);
	k[0].name = "my_gemm_kernel";
	k[0].dram_pct = 10;
	k[0].sm_pct = 20;
	k[0].tensor_pct = 5;
	k[0].local_insts = 256;
	k[0].regs = 255;
	k[0].top_stall = "memory (long scoreboard)";
	k[0].top_stall_ratio = 3.5;
	k[1].name = "unknown_kernel";
	k[1].dram_pct = -1;
	k[1].sm_pct = 5;
	k[1].tensor_pct = 1; /* not a GEMM: no tensor finding */
	k[1].local_insts = 0;
	n = run_feedback(&t, NULL, k, 2, 10, &f);
	const st_finding *s1 = find(f, n, "executes 256 local-memory instructions (255 registers");
	assert_non_null(s1);
	assert_float_equal(s1->weight, 0.8, 1e-9);
	const st_finding *s2 = find(f, n, "uses 10 % of DRAM bandwidth and 20 % of SM throughput");
	assert_non_null(s2);
	assert_non_null(strstr(s2->text, "mostly stalled on memory (long scoreboard), 3.5 warps"));
	assert_non_null(find(f, n, "kernel my_gemm_kernel keeps the tensor pipes 5 % busy"));
	assert_null(find(f, n, "unknown_kernel"));
	k[1].local_insts = 8;
	st_findings_free(f, n);
	n = run_feedback(&t, NULL, k, 2, 10, &f);
	const st_finding *s3 = find(f, n, "kernel unknown_kernel executes 8 local-memory");
	assert_non_null(s3);
	assert_float_equal(s3->weight, 0.05, 1e-9);
	st_findings_free(f, n);

	/* the same rules alone, from Nsight Compute's JSON and a summary's top kernels */
	json_t *kj = json_pack("[{s:s,s:f,s:f,s:f,s:f,s:f,s:f},{s:s,s:f}]", "name", "my_gemm_kernel",
	                       "dram_pct", 10.0, "sm_pct", 20.0, "tensor_pct", 5.0, "registers", 255.0,
	                       "local_loads", 100.0, "stall_barrier", 2.0, "name", "other",
	                       "dram_pct", 90.0);
	int nk = 0;
	st_ncu_kernel *kk = st_ncu_kernels_from_json(kj, &nk);
	assert_int_equal(nk, 2);
	assert_int_equal(kk[0].local_insts, 100);
	assert_string_equal(kk[0].top_stall, "barriers");
	assert_float_equal(kk[1].sm_pct, -1, 0);
	st_kernel_stat top[1] = {{.name = "my_gemm_kernel", .share = 0.6}};
	st_timeline_summary sum;
	memset(&sum, 0, sizeof sum);
	sum.top = top;
	sum.n_top = 1;
	n = st_feedback_ncu(&sum, kk, nk, 10, &f);
	assert_int_equal(n, 3); /* spills, latency, tensor pipes; nothing for "other" */
	assert_float_equal(f[0].weight, 0.6, 1e-9);
	assert_non_null(find(f, n, "mostly stalled on barriers, 2.0 warps"));
	st_findings_free(f, n);
	free(kk);
	json_decref(kj);
	json_decref(p);
	st_timeline_free(&t);
}

/* ---- Chrome trace ------------------------------------------------------------------------- */

static int count_ph(const json_t *ev, const char *ph)
{
	int n = 0;
	for (size_t i = 0; i < json_array_size(ev); i++)
		n += strcmp(json_string_value(json_object_get(json_array_get(ev, i), "ph")), ph) == 0;
	return n;
}

static const json_t *event_named(const json_t *ev, const char *name)
{
	for (size_t i = 0; i < json_array_size(ev); i++) {
		const json_t *e = json_array_get(ev, i);
		if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
			return e;
	}
	return NULL;
}

static void test_chrome_trace(void **state)
{
	(void)state;
	st_timeline t;
	tl_make(&t, 5);
	kernel(&t, "gemm", 1, 11, 264);
	kernel(&t, "bias", 12, 14, 64);
	push(&t, ST_ACT_MEMCPY, "HtoD", 14, 20, 8)->bytes = 1 << 20;
	push(&t, ST_ACT_API, "cudaLaunchKernel", 0, 1, 0);
	push(&t, ST_ACT_SYNC, "stream", 20, 21, 0);
	t.dropped = 3;

	FILE *f = tmpfile();
	assert_non_null(f);
	st_err err;
	assert_int_equal(st_trace_write_chrome(&t, "mlp / v3", f, &err), ST_OK);
	rewind(f);
	json_error_t je;
	json_t *root = json_loadf(f, 0, &je);
	fclose(f);
	assert_non_null(root);
	assert_string_equal(json_string_value(json_object_get(root, "displayTimeUnit")), "ns");
	assert_string_equal(json_string_value(json_object_get(json_object_get(root, "otherData"),
	                                                      "title")), "mlp / v3");
	json_t *ev = json_object_get(root, "traceEvents");
	assert_int_equal(count_ph(ev, "X"), 5);
	assert_int_equal(count_ph(ev, "M"), 4); /* the process, host, stream 7, stream 8 */
	assert_int_equal(count_ph(ev, "i"), 1);
	assert_int_equal(json_array_size(ev), 10);

	const json_t *g = event_named(ev, "gemm");
	assert_non_null(g);
	assert_string_equal(json_string_value(json_object_get(g, "cat")), "kernel");
	assert_float_equal(json_number_value(json_object_get(g, "ts")), 1, EPS);
	assert_float_equal(json_number_value(json_object_get(g, "dur")), 10, EPS);
	assert_int_equal(json_integer_value(json_object_get(g, "tid")), 7);
	assert_int_equal(json_integer_value(json_object_get(g, "pid")), 1);
	json_t *args = json_object_get(g, "args");
	assert_int_equal(json_integer_value(json_array_get(json_object_get(args, "grid"), 0)), 264);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(args, "block"), 0)), 256);
	assert_int_equal(json_integer_value(json_object_get(args, "regs")), 32);
	assert_int_equal(json_integer_value(json_object_get(args, "corr")), 1);
	const json_t *c = event_named(ev, "HtoD");
	assert_string_equal(json_string_value(json_object_get(c, "cat")), "memcpy");
	assert_int_equal(json_integer_value(json_object_get(c, "tid")), 8);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(c, "args"), "bytes")),
	                 1 << 20);
	const json_t *a = event_named(ev, "cudaLaunchKernel");
	assert_string_equal(json_string_value(json_object_get(a, "cat")), "api");
	assert_int_equal(json_integer_value(json_object_get(a, "tid")), 0);
	const json_t *y = event_named(ev, "stream");
	assert_string_equal(json_string_value(json_object_get(y, "cat")), "sync");
	assert_int_equal(json_integer_value(json_object_get(y, "tid")), 0);
	const json_t *d = event_named(ev, "CUPTI dropped 3 records");
	assert_non_null(d);
	assert_string_equal(json_string_value(json_object_get(d, "s")), "g");

	int threads = 0, process = 0;
	for (size_t i = 0; i < json_array_size(ev); i++) {
		const json_t *e = json_array_get(ev, i);
		const char *name = json_string_value(json_object_get(e, "name"));
		const char *label = json_string_value(json_object_get(json_object_get(e, "args"),
		                                                      "name"));
		if (strcmp(name, "process_name") == 0) {
			process++;
			assert_string_equal(label, "stitch st_run");
		} else if (strcmp(name, "thread_name") == 0) {
			threads++;
			json_int_t tid = json_integer_value(json_object_get(e, "tid"));
			assert_string_equal(label, tid == 0 ? "host (CUDA API)" :
			                           tid == 7 ? "stream 7" : "stream 8");
		}
	}
	assert_int_equal(process, 1);
	assert_int_equal(threads, 3);
	json_decref(root);

	/* no dropped records: no marker */
	t.dropped = 0;
	f = tmpfile();
	assert_non_null(f);
	assert_int_equal(st_trace_write_chrome(&t, NULL, f, &err), ST_OK);
	rewind(f);
	root = json_loadf(f, 0, &je);
	fclose(f);
	assert_non_null(root);
	assert_int_equal(count_ph(json_object_get(root, "traceEvents"), "i"), 0);
	json_decref(root);

	/* a stream that cannot be written */
	f = fopen("/dev/null", "r");
	assert_non_null(f);
	assert_int_equal(st_trace_write_chrome(&t, "x", f, &err), ST_E_IO);
	assert_non_null(strstr(err.msg, "chrome trace"));
	fclose(f);
	st_timeline_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_union_and_gaps),
		cmocka_unit_test(test_nested_and_touching),
		cmocka_unit_test(test_top_kernels),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_roofline_gemm),
		cmocka_unit_test(test_roofline_softmax),
		cmocka_unit_test(test_roofline_latency),
		cmocka_unit_test(test_feedback_unfused),
		cmocka_unit_test(test_feedback_gaps_and_host),
		cmocka_unit_test(test_gap_pairs),
		cmocka_unit_test(test_memset_gaps),
		cmocka_unit_test(test_feedback_determinism_and_max),
		cmocka_unit_test(test_feedback_copies_syncs_grids),
		cmocka_unit_test(test_feedback_roofline_and_ncu),
		cmocka_unit_test(test_chrome_trace),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
