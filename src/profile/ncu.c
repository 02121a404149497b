/* Parsing `ncu --csv --page raw`: find the header row (it starts with "ID"), read the units row
 * under it, then one row per kernel; keep the kernel's name, launch shape and the curated
 * metrics under stable names, with durations in microseconds whatever unit ncu chose. */
#include "ncu.h"

#include <stdlib.h>
#include <string.h>

const char st_ncu_metrics[] =
	"gpu__time_duration.sum,"
	"dram__throughput.avg.pct_of_peak_sustained_elapsed,"
	"sm__throughput.avg.pct_of_peak_sustained_elapsed,"
	"sm__warps_active.avg.pct_of_peak_sustained_active,"
	"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,"
	"l1tex__t_sector_hit_rate.pct,"
	"lts__t_sector_hit_rate.pct,"
	"launch__registers_per_thread,"
	"launch__occupancy_limit_registers,"
	"launch__waves_per_multiprocessor,"
	"smsp__issue_active.avg.pct_of_peak_sustained_active,"
	"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,"
	"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,"
	"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,"
	"smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,"
	"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,"
	"smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,"
	"smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,"
	"smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,"
	"smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,"
	"smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,"
	"smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,"
	"smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,"
	"smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,"
	"smsp__sass_inst_executed_op_local_ld.sum,"
	"smsp__sass_inst_executed_op_local_st.sum,"
	"dram__bytes.sum,"
	"sm__ops_path_tensor_src_bf16_dst_fp32.sum,"
	"sm__ops_path_tensor_src_fp16.sum,"
	"sm__ops_path_tensor_src_tf32_dst_fp32.sum,"
	"sm__ops_path_tensor_src_fp8.sum,"
	"sm__ops_path_tensor_src_fp64.sum,"
	"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum,"
	"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum,"
	"smsp__sass_thread_inst_executed_op_fmul_pred_on.sum,"
	"smsp__sass_thread_inst_executed_op_dfma_pred_on.sum,"
	"smsp__sass_thread_inst_executed_op_dadd_pred_on.sum,"
	"smsp__sass_thread_inst_executed_op_dmul_pred_on.sum";

/* ncu's column -> our key */
static const struct {
	const char *column, *key;
} wanted[] = {
	{"gpu__time_duration.sum", "duration_us"},
	{"dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram_pct"},
	{"sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm_pct"},
	{"sm__warps_active.avg.pct_of_peak_sustained_active", "occupancy_pct"},
	{"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "tensor_pct"},
	{"l1tex__t_sector_hit_rate.pct", "l1_hit_pct"},
	{"lts__t_sector_hit_rate.pct", "l2_hit_pct"},
	{"launch__registers_per_thread", "registers"},
	{"launch__occupancy_limit_registers", "occupancy_limit_registers"},
	{"launch__waves_per_multiprocessor", "waves"},
	/* how often a scheduler issues, how busy the FP32 pipe is */
	{"smsp__issue_active.avg.pct_of_peak_sustained_active", "issue_pct"},
	{"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "fma_pct"},
	/* where the warps wait: cycles stalled per issued instruction, by reason (st_ncu_stalls) */
	{"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
	 "stall_long_scoreboard"},
	{"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", "stall_barrier"},
	{"smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio",
	 "stall_short_scoreboard"},
	{"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio", "stall_wait"},
	{"smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio", "stall_dispatch"},
	{"smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
	 "stall_math_pipe"},
	{"smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio", "stall_mio_throttle"},
	{"smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio", "stall_lg_throttle"},
	{"smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio",
	 "stall_branch_resolving"},
	{"smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio",
	 "stall_no_instruction"},
	{"smsp__average_warps_issue_stalled_membar_per_issue_active.ratio", "stall_membar"},
	{"smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio",
	 "stall_not_selected"},
	/* local-memory instructions: register spills (and local arrays) */
	{"smsp__sass_inst_executed_op_local_ld.sum", "local_loads"},
	{"smsp__sass_inst_executed_op_local_st.sum", "local_stores"},
	{"dram__bytes.sum", "dram_bytes"},
	/* floating-point work, folded into "flops" and "tensor_flops" (fold_flops) */
	{"sm__ops_path_tensor_src_bf16_dst_fp32.sum", "_tensor_bf16"},
	{"sm__ops_path_tensor_src_fp16.sum", "_tensor_fp16"},
	{"sm__ops_path_tensor_src_tf32_dst_fp32.sum", "_tensor_tf32"},
	{"sm__ops_path_tensor_src_fp8.sum", "_tensor_fp8"},
	{"sm__ops_path_tensor_src_fp64.sum", "_tensor_fp64"},
	{"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "_ffma"},
	{"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", "_fadd"},
	{"smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", "_fmul"},
	{"smsp__sass_thread_inst_executed_op_dfma_pred_on.sum", "_dfma"},
	{"smsp__sass_thread_inst_executed_op_dadd_pred_on.sum", "_dadd"},
	{"smsp__sass_thread_inst_executed_op_dmul_pred_on.sum", "_dmul"},
};
#define N_WANTED (sizeof wanted / sizeof wanted[0])

const st_ncu_stall st_ncu_stalls[] = {
	{"stall_barrier", "barriers",
	 "fewer block-wide barriers, or more independent work between them (warp specialisation)"},
	{"stall_long_scoreboard", "memory (long scoreboard)",
	 "more loads in flight per thread (prefetch, cp.async or TMA) or more warps"},
	{"stall_short_scoreboard", "shared memory or special functions (short scoreboard)",
	 "fewer shared-memory bank conflicts, more independent work per warp"},
	{"stall_wait", "fixed-latency dependencies (wait)",
	 "more independent instructions between dependent ones (unroll, several accumulators)"},
	{"stall_dispatch", "dispatch",
	 "fewer register-bank and pipe conflicts; often what is left of a well-fed loop"},
	{"stall_math_pipe", "a busy math pipe (math pipe throttle)",
	 "fewer instructions on that pipe: it is the kernel's limit"},
	{"stall_mio_throttle", "the shared-memory instruction queue (MIO throttle)",
	 "fewer, wider shared-memory accesses (16 bytes) or fewer special-function calls"},
	{"stall_lg_throttle", "the global-memory instruction queue (LG throttle)",
	 "fewer, wider global accesses (16 bytes a thread)"},
	{"stall_branch_resolving", "branches", "fewer divergent branches"},
	{"stall_no_instruction", "instruction fetch", "a smaller hot loop (less unrolling)"},
	{"stall_membar", "memory barriers", "fewer fences"},
	{NULL, NULL, NULL},
};

int st_ncu_top_stalls(const json_t *kernel, const st_ncu_stall **top, double *ratio, int n)
{
	int have = 0;
	for (const st_ncu_stall *r = st_ncu_stalls; r->key; r++) {
		const json_t *x = json_object_get(kernel, r->key);
		double v = json_is_number(x) ? json_number_value(x) : 0;
		if (!(v > 0))
			continue;
		int i = have < n ? have++ : n;
		for (; i > 0 && ratio[i - 1] < v; i--)
			if (i < n) {
				top[i] = top[i - 1];
				ratio[i] = ratio[i - 1];
			}
		if (i < n) {
			top[i] = r;
			ratio[i] = v;
		}
	}
	return have;
}

/* One CSV row: fields in quotes with "" for a quote, or bare. Returns the number of fields and
 * moves *p past the line; fields point into `buf` (NUL-separated), at most max of them. */
static int split_row(const char **p, const char *end, char *buf, char **fields, int max)
{
	const char *s = *p;
	int n = 0;
	char *o = buf;
	while (s < end && *s != '\n') {
		if (n < max)
			fields[n] = o;
		n++;
		if (*s == '"') {
			s++;
			while (s < end) {
				if (*s == '"' && s + 1 < end && s[1] == '"') {
					*o++ = '"';
					s += 2;
				} else if (*s == '"') {
					s++;
					break;
				} else {
					*o++ = *s++;
				}
			}
		}
		while (s < end && *s != ',' && *s != '\n' && *s != '\r')
			*o++ = *s++;
		*o++ = 0;
		if (s < end && *s == '\r')
			s++;
		if (s < end && *s == ',') {
			s++;
			if (s >= end || *s == '\n') { /* a trailing empty field */
				if (n < max)
					fields[n] = o;
				n++;
				*o++ = 0;
			}
		}
	}
	if (s < end)
		s++;
	*p = s;
	return n;
}

/* "10,368" -> 10368; 0 when it is not a number (n/a and the like) */
static int parse_number(const char *s, double *v)
{
	char clean[64];
	size_t n = 0;
	for (; *s && n + 1 < sizeof clean; s++)
		if (*s != ',')
			clean[n++] = *s;
	clean[n] = 0;
	char *end;
	*v = strtod(clean, &end);
	return n > 0 && *end == 0;
}

static double to_microseconds(double v, const char *unit)
{
	if (!strcmp(unit, "ns") || !strcmp(unit, "nsecond"))
		return v * 1e-3;
	if (!strcmp(unit, "ms") || !strcmp(unit, "msecond"))
		return v * 1e3;
	if (!strcmp(unit, "s") || !strcmp(unit, "second"))
		return v * 1e6;
	return v; /* us, usecond */
}

static const char *line_start(const char *text, const char *end, const char *prefix)
{
	size_t k = strlen(prefix);
	for (const char *s = text; s < end;) {
		if ((size_t)(end - s) >= k && !memcmp(s, prefix, k))
			return s;
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		if (!nl)
			break;
		s = nl + 1;
	}
	return NULL;
}

/* The raw counters of one kernel into its floating-point operations: the tensor-path "math ops"
 * as ncu counts them, plus the scalar fp32 and fp64 instructions per thread, a fused
 * multiply-add counting two. tests/gpu/test_profile_cuda.sh holds a cuBLAS GEMM's sum against
 * its 2·M·N·K. Only when ncu measured them (an older ncu or another GPU may lack a counter). */
static void fold_flops(json_t *k)
{
	static const char *const tensor[] = {"_tensor_bf16", "_tensor_fp16", "_tensor_tf32",
	                                     "_tensor_fp8", "_tensor_fp64"};
	static const struct {
		const char *key;
		double weight;
	} scalar[] = {{"_ffma", 2}, {"_fadd", 1}, {"_fmul", 1}, {"_dfma", 2}, {"_dadd", 1},
	              {"_dmul", 1}};
	double t = 0, f = 0;
	int seen = 0;
	for (size_t i = 0; i < sizeof tensor / sizeof *tensor; i++) {
		const json_t *v = json_object_get(k, tensor[i]);
		seen |= v != NULL;
		t += json_number_value(v);
		json_object_del(k, tensor[i]);
	}
	for (size_t i = 0; i < sizeof scalar / sizeof *scalar; i++) {
		const json_t *v = json_object_get(k, scalar[i].key);
		seen |= v != NULL;
		f += scalar[i].weight * json_number_value(v);
		json_object_del(k, scalar[i].key);
	}
	if (!seen)
		return;
	json_object_set_new(k, "flops", json_real(t + f));
	json_object_set_new(k, "tensor_flops", json_real(t));
}

st_status st_ncu_parse(const char *text, size_t len, json_t **kernels, st_err *err)
{
	*kernels = NULL;
	const char *end = text + len, *p = line_start(text, end, "\"ID\",");
	if (!p)
		return st_err_set(err, ST_E_INVALID, "ncu printed no CSV report (no header row \"ID\",...)");
	enum { MAX_COLS = 4096 };
	char **head = calloc(MAX_COLS, sizeof *head), **units = calloc(MAX_COLS, sizeof *units),
	     **row = calloc(MAX_COLS, sizeof *row);
	/* A row's fields take at most its own bytes plus one NUL per field, and a row has at most
	 * one field more than it has bytes: 2 * len + 2 holds any row. */
	char *hbuf = malloc(2 * len + 2), *ubuf = malloc(2 * len + 2), *rbuf = malloc(2 * len + 2);
	json_t *out = json_array();
	st_status s = ST_OK;
	if (!head || !units || !row || !hbuf || !ubuf || !rbuf || !out) {
		s = st_err_set(err, ST_E_NOMEM, "ncu report: out of memory");
		goto done;
	}
	int nh = split_row(&p, end, hbuf, head, MAX_COLS);
	int nu = split_row(&p, end, ubuf, units, MAX_COLS);
	if (nh > MAX_COLS || nu != nh) {
		s = st_err_set(err, ST_E_INVALID, "ncu report: %d header columns but %d units", nh, nu);
		goto done;
	}
	int col_name = -1, col_block = -1, col_grid = -1, col[N_WANTED];
	for (size_t w = 0; w < N_WANTED; w++)
		col[w] = -1;
	for (int i = 0; i < nh; i++) {
		if (!strcmp(head[i], "Kernel Name"))
			col_name = i;
		else if (!strcmp(head[i], "Block Size"))
			col_block = i;
		else if (!strcmp(head[i], "Grid Size"))
			col_grid = i;
		for (size_t w = 0; w < N_WANTED; w++)
			if (!strcmp(head[i], wanted[w].column))
				col[w] = i;
	}
	if (col_name < 0) {
		s = st_err_set(err, ST_E_INVALID, "ncu report: no \"Kernel Name\" column");
		goto done;
	}
	while (p < end && *p == '"') {
		int n = split_row(&p, end, rbuf, row, MAX_COLS);
		if (n != nh)
			continue; /* a line of something else that happens to start with a quote */
		json_t *k = json_pack("{s:s}", "name", row[col_name]);
		if (col_block >= 0)
			json_object_set_new(k, "block", json_string(row[col_block]));
		if (col_grid >= 0)
			json_object_set_new(k, "grid", json_string(row[col_grid]));
		for (size_t w = 0; w < N_WANTED; w++) {
			double v;
			if (col[w] < 0 || !parse_number(row[col[w]], &v))
				continue;
			if (!strcmp(wanted[w].key, "duration_us"))
				v = to_microseconds(v, units[col[w]]);
			json_object_set_new(k, wanted[w].key, json_real(v));
		}
		fold_flops(k);
		json_array_append_new(out, k);
	}
done:
	free(head);
	free(units);
	free(row);
	free(hbuf);
	free(ubuf);
	free(rbuf);
	if (s) {
		json_decref(out);
		return s;
	}
	*kernels = out;
	return ST_OK;
}

void st_ncu_classify(json_t *k)
{
	const json_t *d = json_object_get(k, "dram_pct"), *m = json_object_get(k, "sm_pct");
	if (!json_is_number(d) || !json_is_number(m))
		return;
	double dram = json_number_value(d), sm = json_number_value(m);
	double roof = dram > sm ? dram : sm;
	const char *bound = roof < ST_NCU_LATENCY_PCT ? "latency" : dram >= sm ? "memory" : "compute";
	json_object_set_new(k, "roof_pct", json_real(roof));
	json_object_set_new(k, "bound", json_string(bound));
	const json_t *b = json_object_get(k, "dram_bytes"), *t = json_object_get(k, "duration_us");
	const json_t *f = json_object_get(k, "flops");
	double us = json_number_value(t);
	if (json_is_number(b) && us > 0)
		json_object_set_new(k, "dram_gbs", json_real(json_number_value(b) / (us * 1e3)));
	if (json_is_number(f) && us > 0)
		json_object_set_new(k, "tflops", json_real(json_number_value(f) / (us * 1e6)));
	/* the roofline's x: FLOP per byte of DRAM traffic */
	if (json_is_number(f) && json_number_value(b) > 0)
		json_object_set_new(k, "intensity",
		                    json_real(json_number_value(f) / json_number_value(b)));
}
