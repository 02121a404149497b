/* Human-readable rendering of a verdict (the JSON object of DESIGN.md §5): a few aligned lines a
 * person reads in a terminal; everything else stays in --json. */
#include <stdio.h>
#include <string.h>

#include "common/json_get.h"
#include "profile/ncu.h"
#include "stitch/stitch.h"

static void print_stats(FILE *f, const char *name, const json_t *s)
{
	if (!s)
		return;
	fprintf(f, "  %-10s %10.4f ms  [q1 %.4f  q3 %.4f  min %.4f]  n=%d  median rse %.2f%%", name,
	        st_json_num(s, "median_ms"), st_json_num(s, "q1_ms"), st_json_num(s, "q3_ms"),
	        st_json_num(s, "min_ms"), (int)json_integer_value(json_object_get(s, "samples")),
	        100 * st_json_num(s, "rse_median"));
	int disc = (int)json_integer_value(json_object_get(s, "discarded"));
	int mhz = (int)json_integer_value(json_object_get(s, "sm_mhz_median"));
	if (mhz)
		fprintf(f, "  %d MHz", mhz);
	if (disc)
		fprintf(f, "  (%d throttled discarded)", disc);
	fputc('\n', f);
}

/* Is the candidate the reference itself (the same bytes)? Then it shares the reference's runner
 * and its name in the verdict: "runners" names a candidate but no reference, and "timing" has
 * the reference as a second name of the candidate. An imported task has no reference runner
 * either, but no reference timing and never an ok verdict without correctness entries. */
static int is_reference(const json_t *v)
{
	const json_t *r = json_object_get(v, "runners"), *t = json_object_get(v, "timing");
	if (!json_object_get(r, "candidate") || json_object_get(r, "reference"))
		return 0;
	return t ? json_object_get(t, "reference") != NULL
	         : !json_array_size(json_object_get(v, "correctness"));
}

/* One line per verdict: per size set the seeds passed of those run, and the largest errors seen.
 * The JSON writes -1 for a max_abs or nmse that is not finite (an output element NaN or infinite
 * where the reference's is not, or the other way round): said here as "not finite", as the
 * reason's "max abs inf" does. The check stops at the candidate's first failure, so a failed
 * verdict lists fewer seeds (and sets) than were planned: said too. */
static void print_correctness(FILE *f, const json_t *v)
{
	const json_t *corr = json_object_get(v, "correctness");
	const char *status = json_string_value(json_object_get(v, "status"));
	int ok_verdict = status && !strcmp(status, "ok");
	char last[64] = "";
	int seeds = 0, ok = 0, failed = 0;
	double max_abs = 0, max_rel = 0;
	long long nonfinite = 0;
	int errors = 0; /* any output compared element by element */
	size_t i;
	json_t *c;
	fprintf(f, "%-10s", "correct");
	json_array_foreach(corr, i, c) {
		const char *set = json_string_value(json_object_get(c, "set"));
		if (!set)
			set = "?";
		if (strcmp(set, last)) {
			if (last[0])
				fprintf(f, " %s %d/%d,", last, ok, seeds);
			snprintf(last, sizeof last, "%s", set);
			seeds = ok = 0;
		}
		seeds++;
		if (json_is_true(json_object_get(c, "ok")))
			ok++;
		else
			failed = 1;
		size_t j;
		json_t *o;
		json_array_foreach(json_object_get(c, "outputs"), j, o) {
			if (!json_object_get(o, "max_abs"))
				continue; /* a validator's entry: a message, no errors */
			errors = 1;
			nonfinite += json_integer_value(json_object_get(o, "nonfinite"));
			if (st_json_num(o, "max_abs") < 0)
				max_abs = -1;
			else if (max_abs >= 0 && st_json_num(o, "max_abs") > max_abs)
				max_abs = st_json_num(o, "max_abs");
			if (st_json_num(o, "max_rel") > max_rel)
				max_rel = st_json_num(o, "max_rel");
		}
	}
	if (last[0]) {
		fprintf(f, " %s %d/%d", last, ok, seeds);
		if (!ok_verdict && (failed || !json_object_get(v, "timing")))
			fprintf(f, " seeds passed, then stopped at the first failure (later seeds and sets "
			        "not run)");
		else
			fprintf(f, " seeds passed%s", ok_verdict && is_reference(v)
			        ? " (the candidate is the reference: the same bytes)" : "");
	} else if (ok_verdict && is_reference(v)) {
		fprintf(f, " nothing compared: the candidate is the reference (the same bytes)");
	} else if (!ok_verdict && json_object_get(v, "runners") &&
	           json_is_true(json_object_get(json_object_get(v, "compile"), "ok"))) {
		fprintf(f, " no seed finished: stopped at the first failure (see status)");
	} else {
		fprintf(f, " not run");
	}
	if (errors && max_abs < 0)
		fprintf(f, "  (max abs err not finite: %lld element%s NaN or infinite; max rel err "
		        "%.3g over the finite ones)", nonfinite, nonfinite == 1 ? "" : "s", max_rel);
	else if (max_abs > 0 || max_rel > 0)
		fprintf(f, "  (max abs err %.3g, max rel err %.3g)", max_abs, max_rel);
	fputc('\n', f);
}

/* Under a kernel's line: how often its schedulers issue, how busy the FP32 pipe is, and the
 * three stall reasons its warps spent most cycles on (per issued instruction), where measured. */
static void print_ncu_stalls(FILE *f, const json_t *k)
{
	const st_ncu_stall *top[3];
	double v[3];
	int n = st_ncu_top_stalls(k, top, v, 3);
	if (!json_is_number(json_object_get(k, "issue_pct")) || !n)
		return;
	fprintf(f, "%-10s %16s issue %3.0f%% of cycles  FMA pipe %3.0f%%  stalls per issue:", "", "",
	        st_json_num(k, "issue_pct"), st_json_num(k, "fma_pct"));
	for (int i = 0; i < n; i++)
		fprintf(f, "%s %s %.2f", i ? "," : "", top[i]->key + strlen("stall_"), v[i]);
	fprintf(f, "\n");
}

/* Nsight Compute's figures per kernel (longest first as ncu measured them), or why there are
 * none. */
static void print_ncu(FILE *f, const json_t *n)
{
	if (!n)
		return;
	const char *e = json_string_value(json_object_get(n, "error"));
	if (e) {
		fprintf(f, "%-10s not available: %s\n", "ncu", e);
		return;
	}
	if (json_is_true(json_object_get(n, "capped")))
		fprintf(f, "%-10s the first %d launches of the run measured (the cap of a pass)\n", "ncu",
		        (int)json_integer_value(json_object_get(n, "launches_measured")));
	size_t i;
	const json_t *k;
	json_array_foreach(json_object_get(n, "kernels"), i, k) {
		if (i == 6) {
			fprintf(f, "%-10s ... %zu more kernels in the JSON\n", "",
			        json_array_size(json_object_get(n, "kernels")) - 6);
			break;
		}
		int first = !i && !json_is_true(json_object_get(n, "capped"));
		const char *bound = json_string_value(json_object_get(k, "bound"));
		char work[64] = "";
		if (json_object_get(k, "tflops"))
			snprintf(work, sizeof work, "%7.1f TFLOP/s %6.1f FLOP/B  ", st_json_num(k, "tflops"),
			         st_json_num(k, "intensity"));
		fprintf(f, "%-10s %3d x %8.1f us  %-7s DRAM %3.0f%%  SM %3.0f%%  occupancy %3.0f%%  "
		        "tensor %3.0f%%  L2 hit %3.0f%%  %3.0f regs  %s%.50s\n", first ? "ncu" : "",
		        (int)json_integer_value(json_object_get(k, "launches")),
		        st_json_num(k, "duration_us"), bound ? bound : "?", st_json_num(k, "dram_pct"),
		        st_json_num(k, "sm_pct"), st_json_num(k, "occupancy_pct"),
		        st_json_num(k, "tensor_pct"),
		        st_json_num(k, "l2_hit_pct"), st_json_num(k, "registers"), work,
		        json_string_value(json_object_get(k, "name")));
		print_ncu_stalls(f, k);
	}
}

/* The profile: the timeline in one line, the top kernels, the roofline, then the findings. */
static void print_profile(FILE *f, const json_t *p)
{
	if (!p)
		return;
	const char *e = json_string_value(json_object_get(p, "error"));
	if (e) {
		fprintf(f, "%-10s not available: %s\n", "profile", e);
		return;
	}
	const json_t *s = json_object_get(p, "summary");
	fprintf(f, "%-10s %d launches, GPU busy %.0f%% of %.1f us, %d gaps (%.1f us), first launch "
	        "after %.1f us, st_run wall %.1f us\n", "profile",
	        (int)json_integer_value(json_object_get(s, "launches")), st_json_num(s, "busy_pct"),
	        st_json_num(s, "span_us"), (int)json_integer_value(json_object_get(s, "n_gaps")),
	        st_json_num(s, "gaps_us"), st_json_num(s, "lead_us"), st_json_num(s, "host_us"));
	size_t i;
	json_t *k;
	json_array_foreach(json_object_get(s, "top_kernels"), i, k) {
		if (i == 4)
			break;
		fprintf(f, "%-10s %5.1f%%  %3d x  %.60s\n", "", 100 * st_json_num(k, "share"),
		        (int)json_integer_value(json_object_get(k, "launches")),
		        json_string_value(json_object_get(k, "name")));
	}
	json_array_foreach(json_object_get(s, "gap_pairs"), i, k) {
		if (i == 3)
			break;
		fprintf(f, "%-10s %3d x %5.1f us  after %.36s, before %.36s\n", i ? "" : "gaps",
		        (int)json_integer_value(json_object_get(k, "count")),
		        st_json_num(k, "total_us") / (double)json_integer_value(json_object_get(k, "count")),
		        json_string_value(json_object_get(k, "before")),
		        json_string_value(json_object_get(k, "after")));
	}
	const json_t *r = json_object_get(p, "roofline");
	if (r)
		fprintf(f, "%-10s %s-bound, %.0f%% of its roof (%.3g FLOP/byte, %.1f TFLOP/s, %.0f GB/s)\n",
		        "roofline", json_string_value(json_object_get(r, "bound")),
		        100 * st_json_num(r, "fraction"), st_json_num(r, "intensity"),
		        st_json_num(r, "attained_tflops"), st_json_num(r, "attained_gbs"));
	const char *w = json_string_value(json_object_get(p, "warning"));
	if (w)
		fprintf(f, "%-10s %s\n", "", w);
	json_array_foreach(json_object_get(p, "findings"), i, k)
		fprintf(f, "%-10s %zu. %s\n", i ? "" : "findings", i + 1,
		        json_string_value(json_object_get(k, "text")));
	print_ncu(f, json_object_get(p, "ncu"));
}

/* What failed solutions printed, each line marked as theirs so that none reads as stitch's. */
static void print_output(FILE *f, const json_t *out)
{
	const char *role;
	json_t *text;
	json_object_foreach((json_t *)out, role, text) {
		fprintf(f, "%-10s what the %s printed, its end:\n", "output", role);
		for (const char *p = json_string_value(text); p && *p;) {
			size_t n = strcspn(p, "\n");
			fprintf(f, "  | %.*s\n", (int)n, p);
			p += n + (p[n] == '\n');
		}
	}
}

void st_verdict_print(const json_t *v, FILE *f)
{
	const json_t *dev = json_object_get(v, "device");
	fprintf(f, "%s  %s\n", json_string_value(json_object_get(v, "task")),
	        json_string_value(json_object_get(v, "solution")));
	if (dev) {
		fprintf(f, "%-10s %s (%s), %s backend", "device",
		        json_string_value(json_object_get(dev, "device")),
		        json_string_value(json_object_get(v, "arch")),
		        json_string_value(json_object_get(v, "backend")));
		/* a solution overlapping more streams than this shares queues (docs/bench.md) */
		json_int_t queues = json_integer_value(json_object_get(dev, "hw_queues"));
		if (queues > 0)
			fprintf(f, ", %lld hardware queues", (long long)queues);
		fputc('\n', f);
	}
	const char *status = json_string_value(json_object_get(v, "status"));
	const char *reason = json_string_value(json_object_get(v, "reason"));
	fprintf(f, "%-10s %s%s%s\n", "status", status, reason && *reason ? ": " : "",
	        reason ? reason : "");
	const json_t *comp = json_object_get(v, "compile");
	if (comp) {
		fprintf(f, "%-10s %s (%.2f s)\n", "compile",
		        !json_is_true(json_object_get(comp, "ok")) ? "failed"
		        : json_is_true(json_object_get(comp, "cached")) ? "cached" : "ok",
		        st_json_num(comp, "seconds"));
		size_t i;
		json_t *d;
		json_array_foreach(json_object_get(comp, "diagnostics"), i, d) {
			if (i >= 10) {
				fprintf(f, "  ... (%zu more)\n", json_array_size(json_object_get(comp, "diagnostics")) - 10);
				break;
			}
			fprintf(f, "  %s:%d: %s: %s\n", json_string_value(json_object_get(d, "file")),
			        (int)json_integer_value(json_object_get(d, "line")),
			        json_string_value(json_object_get(d, "severity")),
			        json_string_value(json_object_get(d, "message")));
		}
	}
	print_correctness(f, v);
	const json_t *t = json_object_get(v, "timing");
	if (t) {
		fprintf(f, "%-10s set %s\n", "timing", json_string_value(json_object_get(t, "set")));
		print_stats(f, "candidate", json_object_get(t, "candidate"));
		print_stats(f, "reference", json_object_get(t, "reference"));
		print_stats(f, "expert", json_object_get(t, "expert"));
	}
	const json_t *sp = json_object_get(v, "speedup");
	if (sp && json_object_size(sp)) {
		static const char *const against[][2] = {{"vs_reference", "reference"},
		                                         {"vs_expert", "expert"},
		                                         {"vs_eager", "PyTorch eager"},
		                                         {"vs_compile", "torch.compile"},
		                                         {"vs_vendor", "vendor"},
		                                         {"vs_best", "best"}};
		fprintf(f, "%-10s", "speedup");
		for (int k = 0, n = 0; k < 6; k++)
			if (json_object_get(sp, against[k][0]))
				fprintf(f, "%s %.2fx vs %s", n++ ? "," : "", st_json_num(sp, against[k][0]),
				        against[k][1]);
		const json_t *b = json_object_get(v, "baselines");
		if (json_object_get(b, "measured_on"))
			fprintf(f, " (PyTorch timed at import on %s)",
			        json_string_value(json_object_get(b, "measured_on")));
		fputc('\n', f);
		const char *best = json_string_value(json_object_get(b, "best"));
		if (best && !strcmp(best, "vendor"))
			fprintf(f, "%-10s the vendor's %s (%s), %.4f ms, is faster than the expert\n", "best",
			        json_string_value(json_object_get(b, "vendor_op")),
			        json_string_value(json_object_get(b, "vendor_backend")),
			        st_json_num(b, "vendor_ms"));
		else if (best)
			fprintf(f, "%-10s the expert (%s)\n", "best",
			        json_string_value(json_object_get(b, "best_note")));
	}
	const json_t *sol = json_object_get(v, "sol");
	if (sol && json_object_get(sol, "fraction")) {
		const char *roof = json_string_value(json_object_get(sol, "roof"));
		fprintf(f, "%-10s %.1f%% (%s) of the %.4f ms floor (%.3g FLOP %s, %.3g bytes", "SOL",
		        100 * st_json_num(sol, "fraction"), roof ? roof : "?", st_json_num(sol, "floor_ms"),
		        st_json_num(sol, "flops"),
		        json_string_value(json_object_get(sol, "unit")), st_json_num(sol, "bytes"));
		if (json_object_get(sol, "l2_bytes"))
			fprintf(f, ", %.3g through the L2", st_json_num(sol, "l2_bytes"));
		if (json_object_get(sol, "sfu_ops"))
			fprintf(f, ", %.3g special-function ops", st_json_num(sol, "sfu_ops"));
		if (json_object_get(sol, "syncs"))
			fprintf(f, ", %.3g grid-wide synchronisations", st_json_num(sol, "syncs"));
		fprintf(f, ")\n");
	}
	print_profile(f, json_object_get(v, "profile"));
	const char *ef = json_string_value(json_object_get(v, "expert_failure"));
	if (ef)
		fprintf(f, "%-10s %s\n", "expert", ef);
	print_output(f, json_object_get(v, "output"));
	const json_t *flags = json_object_get(v, "flags");
	if (json_array_size(flags)) {
		fprintf(f, "%-10s", "flags");
		size_t i;
		json_t *x;
		json_array_foreach(flags, i, x) fprintf(f, " %s", json_string_value(x));
		fputc('\n', f);
	}
	fprintf(f, "%-10s %.2f s\n", "wall", st_json_num(v, "wall_s"));
}
