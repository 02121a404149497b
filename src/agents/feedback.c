/* The Verifier agent's reading of a verdict, without a model: which stage comes next and a short
 * text for the Coder. A verdict holds far more than a Coder can use (every seed, timing
 * quartiles, the raw compiler log), and a long prompt buries the one line that matters, so this
 * picks the few facts that decide the next edit: the first compile errors with the source line
 * they point at, the worst mismatch per failing size set, the speedups and the top profile
 * findings. The text depends on the verdict and the source only, so the same attempt always gives
 * the same prompt (and the same LLM cache key). A hidden size set stays hidden: that one failed
 * is said, never its sizes, the element that was off or the validator's words about it, since
 * code tuned to a size it was shown is what hidden sets are there to catch. */
#include "agents/agents.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/utf8.h"
#include "task/task.h"

#define MAX_DIAGS 5
#define MAX_QUOTE 200
#define MAX_REASON 400
#define MAX_SETS 4
#define MAX_OUTPUTS 3
#define MAX_FINDINGS 3
#define MAX_LOG_LINES 8

const char *st_stage_name(st_stage s)
{
	switch (s) {
	case ST_STAGE_PLAN:
		return "plan";
	case ST_STAGE_DRAFT:
		return "draft";
	case ST_STAGE_REPAIR_COMPILE:
		return "repair_compile";
	case ST_STAGE_REPAIR_CORRECT:
		return "repair_correct";
	case ST_STAGE_OPTIMISE:
		return "optimise";
	case ST_STAGE_DONE:
		return "done";
	}
	return "unknown";
}

static const char *str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/* Text on one line, at most `max` bytes: newlines would break the line-per-fact layout. */
static void put_flat(st_buf *out, const char *s, size_t max)
{
	size_t len = strlen(s), n = len > max ? st_utf8_cut(s, max) : len;
	for (size_t i = 0; i < n; i++)
		st_buf_putc(out, s[i] == '\n' || s[i] == '\r' || s[i] == '\t' ? ' ' : s[i]);
	if (n < len)
		st_buf_puts(out, "...");
}

/* Up to MAX_QUOTE bytes of [s, s + n) after `prefix`, on their own line. */
static void put_quoted(st_buf *out, const char *prefix, const char *s, size_t n)
{
	size_t m = n > MAX_QUOTE ? st_utf8_cut(s, MAX_QUOTE) : n;
	st_buf_printf(out, "%s%.*s%s\n", prefix, (int)m, s, m < n ? "..." : "");
}

/* Line `line` (1-based) of `source`, trimmed, quoted on its own line; nothing if out of range. */
static void quote_line(st_buf *out, const char *source, long line)
{
	if (!source || line < 1)
		return;
	const char *p = source;
	for (long i = 1; i < line; i++) {
		p = strchr(p, '\n');
		if (!p)
			return;
		p++;
	}
	const char *e = strchr(p, '\n');
	if (!e)
		e = p + strlen(p);
	while (p < e && (*p == ' ' || *p == '\t'))
		p++;
	while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		e--;
	if (p == e)
		return;
	put_quoted(out, "    > ", p, (size_t)(e - p));
}

/* The last MAX_LOG_LINES lines of `text` (trailing blank space left out) after `title`, each
 * quoted after `prefix`; nothing when the text is empty. */
static void put_last_lines(st_buf *out, const char *title, const char *prefix, const char *text)
{
	const char *end = text + strlen(text);
	while (end > text && (end[-1] == '\n' || end[-1] == ' '))
		end--;
	if (end == text)
		return;
	const char *start = end;
	for (int lines = 0; start > text && lines < MAX_LOG_LINES; start--)
		if (start[-1] == '\n' && ++lines == MAX_LOG_LINES)
			break;
	st_buf_puts(out, title);
	while (start < end) {
		const char *nl = memchr(start, '\n', (size_t)(end - start));
		const char *le = nl ? nl : end;
		put_quoted(out, prefix, start, (size_t)(le - start));
		start = nl ? nl + 1 : end;
	}
}

/* What the program printed before its runner failed (the verdict's output, never about a
 * hidden set): a st_init that says why it refused is worth reading. */
static void printed_text(st_buf *out, const json_t *verdict)
{
	const char *said = json_string_value(
		json_object_get(json_object_get(verdict, "output"), "candidate"));
	if (said)
		put_last_lines(out, "Your program printed, at its end:\n", "    | ", said);
}

/* A diagnostic in the solution itself (not in solution.h or a system header) can be quoted. */
static int in_solution(const char *file)
{
	const char *b = strrchr(file, '/');
	b = b ? b + 1 : file;
	const char *dot = strrchr(b, '.');
	if (!*b)
		return 1; /* no file named: the compiler was talking about the solution */
	return dot && (!strcmp(dot, ".cu") || !strcmp(dot, ".c") || !strcmp(dot, ".cpp") ||
	               !strcmp(dot, ".cc"));
}

static int is_error(const json_t *d)
{
	return strstr(str(d, "severity"), "error") != NULL;
}

static void compile_text(st_buf *out, const json_t *v, const char *source)
{
	const json_t *comp = json_object_get(v, "compile");
	const json_t *diags = json_object_get(comp, "diagnostics");
	size_t n = json_array_size(diags), shown = 0;
	/* Errors first: a warning listed before the error that stopped the build wastes a slot. */
	for (int pass = 0; pass < 2 && shown < MAX_DIAGS; pass++) {
		size_t i;
		json_t *d;
		json_array_foreach(diags, i, d) {
			if (shown == MAX_DIAGS)
				break;
			if (is_error(d) != (pass == 0))
				continue;
			const char *file = str(d, "file");
			long line = (long)json_integer_value(json_object_get(d, "line"));
			int ours = in_solution(file);
			const char *base = strrchr(file, '/');
			base = base ? base + 1 : file;
			if (!ours)
				st_buf_printf(out, "%s, ", base);
			if (line > 0)
				st_buf_printf(out, "line %ld: ", line);
			if (!is_error(d))
				st_buf_printf(out, "%s: ", str(d, "severity"));
			put_flat(out, str(d, "message"), MAX_QUOTE);
			st_buf_putc(out, '\n');
			if (ours)
				quote_line(out, source, line);
			shown++;
		}
	}
	if (n > shown)
		st_buf_printf(out, "(%zu more diagnostics not shown; fix these first)\n", n - shown);
	if (n)
		return;
	/* No diagnostic recognised (a timeout, a tool crash): the end of the log says most. */
	put_last_lines(out, "compiler log (last lines):\n", "    ", str(comp, "log"));
}

/* The static policy's hits ("line N: rule: message"), with the lines they point at. */
static void policy_text(st_buf *out, const json_t *v, const char *source)
{
	const json_t *hits = json_object_get(json_object_get(v, "policy"), "hits");
	size_t i;
	json_t *h;
	json_array_foreach(hits, i, h) {
		if (i == MAX_DIAGS) {
			st_buf_printf(out, "(%zu more policy hits not shown)\n", json_array_size(hits) - i);
			break;
		}
		const char *s = json_string_value(h);
		if (!s)
			continue;
		put_flat(out, s, MAX_QUOTE);
		st_buf_putc(out, '\n');
		long line;
		if (sscanf(s, "line %ld:", &line) == 1)
			quote_line(out, source, line);
	}
	st_buf_puts(out, "Remove or replace what the policy forbids; the rest of the file may stay as "
	                 "it is.\n");
}

static void sizes_text(st_buf *out, const json_t *sizes)
{
	const char *k;
	json_t *x;
	int first = 1;
	st_buf_puts(out, " (");
	json_object_foreach((json_t *)sizes, k, x) {
		st_buf_printf(out, "%s%s=%" JSON_INTEGER_FORMAT, first ? "" : ", ", k,
		              json_integer_value(x));
		first = 0;
	}
	st_buf_putc(out, ')');
}

static void output_text(st_buf *out, const json_t *o)
{
	if (json_object_get(o, "validator")) {
		st_buf_puts(out, "the task's validator says: ");
		put_flat(out, str(o, "message"), MAX_REASON);
		return;
	}
	const char *summary = str(o, "summary");
	if (*summary) {
		put_flat(out, summary, MAX_REASON);
		return;
	}
	const json_t *w = json_object_get(o, "worst");
	st_buf_printf(out, "%s: %" JSON_INTEGER_FORMAT " of %" JSON_INTEGER_FORMAT " elements off, max "
	                   "abs %g, max rel %g", str(o, "name" ), json_integer_value(json_object_get(o,
	              "mismatches" )), json_integer_value(json_object_get(o, "elements" )),
	              json_number_value(json_object_get(o, "max_abs" )),
	              json_number_value(json_object_get(o, "max_rel" )));
	if (w)
		st_buf_printf(out, ", worst at flat index %" JSON_INTEGER_FORMAT ": got %g, want %g",
		              json_integer_value(json_object_get(w, "flat")),
		              json_number_value(json_object_get(w, "got")),
		              json_number_value(json_object_get(w, "want")));
}

/* The verdict's reason, unless it is about a hidden set (verify.c names the set first). */
static int is_error(const json_t *d);

/* The verdict's reason, except for a build that failed: its first error diagnostic, since the
 * reason of a verdict made before st_diags_errors_first could be a warning printed ahead of the
 * linker's "undefined reference" that really stopped the build. */
static const char *shown_reason(const json_t *v)
{
	const char *reason = str(v, "reason");
	if (!strcmp(str(v, "status"), "compile_error")) {
		size_t i;
		json_t *d;
		json_array_foreach(json_object_get(json_object_get(v, "compile"), "diagnostics"), i, d)
			if (is_error(d))
				return str(d, "message");
	}
	return !strncmp(reason, "set hidden", 10) ? "on a hidden size set" : reason;
}

/* The first failing seed of each size set, and its failing outputs. */
static void correctness_text(st_buf *out, const json_t *v)
{
	const json_t *corr = json_object_get(v, "correctness");
	const char *done[MAX_SETS];
	int n_done = 0;
	size_t i;
	json_t *c;
	json_array_foreach(corr, i, c) {
		if (json_is_true(json_object_get(c, "ok")))
			continue;
		const char *set = str(c, "set");
		int seen = 0;
		for (int k = 0; k < n_done; k++)
			seen |= !strcmp(done[k], set);
		if (seen)
			continue;
		if (n_done == MAX_SETS)
			break;
		done[n_done++] = set;
		if (st_set_label_hidden(set)) {
			st_buf_puts(out, "a hidden size set: outputs wrong (its sizes and values are not "
			                 "shown; make the code right for every size the task allows)\n");
			continue;
		}
		st_buf_printf(out, "set %s", set);
		if (json_object_size(json_object_get(c, "sizes")))
			sizes_text(out, json_object_get(c, "sizes"));
		st_buf_puts(out, ":\n");
		size_t j, shown = 0;
		json_t *o;
		json_array_foreach(json_object_get(c, "outputs"), j, o) {
			if (json_is_true(json_object_get(o, "ok")))
				continue;
			if (shown++ == MAX_OUTPUTS)
				break;
			st_buf_puts(out, "  ");
			output_text(out, o);
			st_buf_putc(out, '\n');
		}
	}
}

/* What the statuses without structured detail usually mean, so the Coder knows where to look. */
static const char *hint(const char *status)
{
	if (!strcmp(status, "runtime_error"))
		return "The solution failed while running (a crash, an error code returned from st_init "
		       "or st_run, or a CUDA error): check every index against the shapes, every launch "
		       "configuration and every allocation.";
	if (!strcmp(status, "timeout"))
		return "The solution did not finish in time: look for a loop that never ends, a "
		       "deadlock (a __syncthreads() some threads skip) or work far too slow for the sizes.";
	if (!strcmp(status, "hacking"))
		return "The verifier saw behaviour that escapes its measurement or sandbox: do all the "
		       "work inside st_run, on the given stream, and compute the real result every call.";
	if (!strcmp(status, "incorrect"))
		return "Outputs differ from the reference beyond the tolerance; find the cause before "
		       "changing anything else.";
	return NULL;
}

/* Which roof set the floor (docs/bench.md, "Roofs"), in words an agent can act on. */
static void roof_text(st_buf *out, const char *roof)
{
	if (!*roof)
		return;
	if (!strcmp(roof, "dram"))
		st_buf_puts(out, " (the roof: DRAM bandwidth)");
	else if (!strcmp(roof, "l2"))
		st_buf_puts(out, " (the roof: L2 bandwidth, for the bytes its gathers pull through the L2)");
	else
		st_buf_printf(out, " (the roof: the %s FLOP rate)", roof);
}

static void speed_text(st_buf *out, const json_t *v, double target)
{
	const json_t *sp = json_object_get(v, "speedup");
	const json_t *vr = json_object_get(sp, "vs_reference");
	const json_t *ve = json_object_get(sp, "vs_expert");
	if (vr || ve) {
		st_buf_puts(out, "speedup:");
		if (vr)
			st_buf_printf(out, " %.2fx vs reference", json_number_value(vr));
		if (ve)
			st_buf_printf(out, "%s %.2fx vs expert", vr ? "," : "", json_number_value(ve));
		if (target > 0)
			st_buf_printf(out, " (target %.2fx vs reference)", target);
		st_buf_putc(out, '\n');
	} else {
		st_buf_puts(out, "speedup: not measured\n");
	}
	const json_t *t = json_object_get(v, "timing");
	const json_t *cand = json_object_get(t, "candidate");
	if (cand) {
		st_buf_printf(out, "median time: %.4f ms", json_number_value(json_object_get(cand,
		              "median_ms" )));
		const json_t *ref = json_object_get(t, "reference");
		if (ref)
			st_buf_printf(out, " (reference %.4f ms)",
			              json_number_value(json_object_get(ref, "median_ms")));
		st_buf_printf(out, " on set %s\n", str(t, "set"));
	}
	const json_t *sol = json_object_get(v, "sol");
	if (json_object_get(sol, "fraction")) {
		st_buf_printf(out, "speed of light: %.0f%% of the floor the task's flops and bytes allow",
		              100 * json_number_value(json_object_get(sol, "fraction")));
		roof_text(out, str(sol, "roof"));
		st_buf_putc(out, '\n');
	}
	const json_t *p = json_object_get(v, "profile");
	if (!p)
		return;
	const char *perr = json_string_value(json_object_get(p, "error"));
	if (perr) {
		st_buf_puts(out, "profile: not available (");
		put_flat(out, perr, MAX_QUOTE);
		st_buf_puts(out, ")\n");
		return;
	}
	const json_t *r = json_object_get(p, "roofline");
	if (r)
		st_buf_printf(out, "roofline: %s-bound, %.0f%% of its roof\n", str(r, "bound"),
		              100 * json_number_value(json_object_get(r, "fraction")));
	size_t i;
	json_t *k;
	json_array_foreach(json_object_get(p, "findings"), i, k) {
		if (i == MAX_FINDINGS)
			break;
		if (i == 0)
			st_buf_puts(out, "profile findings (most important first):\n");
		st_buf_printf(out, "%zu. ", i + 1);
		put_flat(out, str(k, "text"), MAX_REASON);
		st_buf_putc(out, '\n');
	}
}

/* Flags about the candidate (the baselines' own failures are no business of the Coder's). */
static void flags_text(st_buf *out, const json_t *v)
{
	const json_t *flags = json_object_get(v, "flags");
	int any = 0, nondet = 0;
	size_t i;
	json_t *x;
	json_array_foreach(flags, i, x) {
		const char *s = json_string_value(x);
		if (!s || !strncmp(s, "expert_", 7))
			continue;
		st_buf_printf(out, "%s %s", any ? "," : "flags:", s);
		any = 1;
		nondet |= !strcmp(s, "nondeterministic");
	}
	if (any)
		st_buf_putc(out, '\n');
	if (nondet)
		st_buf_puts(out, "Two runs on the same inputs gave bitwise different outputs: fine within "
		                 "the tolerance, but make sure it is not a race.\n");
}

st_stage st_verifier_feedback(const json_t *verdict, const char *source, double target_speedup,
                              char **text)
{
	*text = NULL;
	const char *status = str(verdict, "status");
	if (!*status)
		status = "unknown";
	const char *reason = shown_reason(verdict);
	st_stage next;
	if (!strcmp(status, "compile_error") || !strcmp(status, "forbidden")) {
		next = ST_STAGE_REPAIR_COMPILE;
	} else if (strcmp(status, "ok")) {
		next = ST_STAGE_REPAIR_CORRECT;
	} else {
		const json_t *vr = json_object_get(json_object_get(verdict, "speedup"), "vs_reference");
		next = target_speedup > 0 && json_is_number(vr) &&
		       json_number_value(vr) >= target_speedup ? ST_STAGE_DONE : ST_STAGE_OPTIMISE;
	}

	st_buf b = {0}, *out = &b;
	st_buf_printf(out, "status: %s", status);
	if (!verdict)
		st_buf_puts(out, " \xe2\x80\x94 no verdict was produced");
	else if (*reason) {
		st_buf_puts(out, " \xe2\x80\x94 ");
		put_flat(out, reason, MAX_REASON);
	}
	st_buf_putc(out, '\n');
	if (next == ST_STAGE_REPAIR_COMPILE) {
		if (!strcmp(status, "forbidden"))
			policy_text(out, verdict, source);
		else
			compile_text(out, verdict, source);
	} else if (next == ST_STAGE_REPAIR_CORRECT) {
		correctness_text(out, verdict);
		printed_text(out, verdict);
		const char *h = hint(status);
		if (h)
			st_buf_printf(out, "%s\n", h);
	} else {
		speed_text(out, verdict, target_speedup);
		if (next == ST_STAGE_DONE)
			st_buf_puts(out, "The target is reached.\n");
	}
	if (verdict)
		flags_text(out, verdict);
	if (b.oom || !b.p) {
		st_buf_free(&b);
		*text = strdup("status: (feedback unavailable: out of memory)");
		return next;
	}
	*text = b.p;
	return next;
}

char *st_refine_feedback(const json_t *verdict, const char *source)
{
	const char *status = str(verdict, "status");
	st_buf b = {0}, *out = &b;
	if (!strcmp(status, "ok")) {
		st_buf_puts(out, "It compiled and passed every test. Make it faster if you can while "
		                 "keeping it correct, and answer with the whole file again.\n");
	} else if (!strcmp(status, "compile_error") || !strcmp(status, "forbidden")) {
		st_buf_printf(out, "It did not build (%s):\n", status);
		if (!strcmp(status, "forbidden"))
			policy_text(out, verdict, source);
		else
			compile_text(out, verdict, source);
		st_buf_puts(out, "Fix it and answer with the whole file.\n");
	} else {
		st_buf_printf(out, "It compiled but failed the tests (%s). Find the mistake and answer "
		                   "with the whole file.\n", *status ? status : "no verdict");
	}
	if (b.oom || !b.p) {
		st_buf_free(&b);
		return NULL;
	}
	return b.p;
}
