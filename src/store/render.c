/* Renderings of a bench run for people and tools: the terminal table, CSV, Markdown, a
 * self-contained HTML page with inline SVG charts (no scripts, no network: it opens from a file
 * anywhere), and the comparison of two runs. */
#include <math.h>
#include <string.h>

#include "bench.h"
#include "common/json_get.h"
#include "html.h"

static const char *str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

static void ms(st_buf *out, double x, int width)
{
	if (x > 0)
		st_buf_printf(out, " %*.4f", width, x);
	else
		st_buf_printf(out, " %*s", width, "-");
}

static void times(st_buf *out, double x, int width)
{
	if (x > 0)
		st_buf_printf(out, " %*.2fx", width - 1, x);
	else
		st_buf_printf(out, " %*s", width, "-");
}

static void pct(st_buf *out, const json_t *x, int width)
{
	if (json_is_number(x))
		st_buf_printf(out, " %*.0f%%", width - 1, 100 * json_number_value(x));
	else
		st_buf_printf(out, " %*s", width, "-");
}

/* A row's SOL with the roof that set its floor, "87% (l2)", right-aligned in `width`. */
static void sol_cell(st_buf *out, const json_t *r, int width)
{
	const json_t *f = r ? json_object_get(r, "sol_fraction") : NULL;
	const char *roof = r ? json_string_value(json_object_get(r, "sol_roof")) : NULL;
	char cell[48];
	if (!json_is_number(f))
		snprintf(cell, sizeof cell, "-");
	else if (roof)
		snprintf(cell, sizeof cell, "%.0f%% (%s)", 100 * json_number_value(f), roof);
	else
		snprintf(cell, sizeof cell, "%.0f%%", 100 * json_number_value(f));
	st_buf_printf(out, " %*s", width, cell);
}

static const json_t *fastp(const json_t *s, const char *base, double p)
{
	char key[16];
	snprintf(key, sizeof key, "%g", p);
	return json_object_get(json_object_get(json_object_get(s, "fast_p"), base), key);
}

static const json_t *geomean(const json_t *s, const char *base, const char *which)
{
	return json_object_get(json_object_get(json_object_get(s, "geomean"), base), which);
}

/* Which bar "best" was, in one sentence from the overall score: the expert everywhere (no
 * vendor figures for this GPU), or the faster of expert and vendor with the count of each. */
static void bar_sentence(const json_t *score, char *out, size_t len)
{
	const json_t *all = json_object_get(score, "all");
	const json_t *bar = json_object_get(all, "bar");
	int n = (int)json_integer_value(json_object_get(all, "tasks"));
	int nv = (int)json_integer_value(json_object_get(bar, "with_vendor"));
	int vb = (int)json_integer_value(json_object_get(bar, "vendor"));
	if (!nv)
		snprintf(out, len, "bar 'best' = the expert on every task: no vendor (PyTorch) figures "
		         "for this GPU (`stitch bench --vendor` times them)");
	else
		snprintf(out, len, "bar 'best' = the faster of expert and vendor (PyTorch): vendor "
		         "figures for %d of %d tasks, the vendor set the bar on %d, the expert on %d",
		         nv, n, vb, n - vb);
}

/* A row's bar: "vendor" or "expert", "-" when neither was timed. */
static const char *bar_of(const json_t *r)
{
	const char *b = json_string_value(json_object_get(r, "best"));
	return b ? b : "-";
}

/* ---- terminal table --------------------------------------------------------------------------- */

static void score_line(const char *label, const json_t *s, const char *base, st_buf *out)
{
	st_buf_printf(out, "%-8s %3d tasks  compiled", label, (int)json_integer_value(json_object_get(s,
	              "tasks" )));
	pct(out, json_object_get(s, "compile_rate"), 5);
	st_buf_printf(out, "  correct");
	pct(out, json_object_get(s, "correct_rate"), 5);
	st_buf_printf(out, "  fast_1/1.5/2/5 vs %s", base);
	for (int k = 1; k < ST_BENCH_NP; k++)
		pct(out, fastp(s, base, st_bench_p[k]), 4);
	st_buf_printf(out, "  geomean");
	const json_t *g = geomean(s, base, "correct");
	times(out, json_is_number(g) ? json_number_value(g) : 0, 7);
	if (strcmp(base, "best")) {
		st_buf_printf(out, "  vs best: fast_1");
		pct(out, fastp(s, "best", 1), 4);
		st_buf_printf(out, " geomean");
		g = geomean(s, "best", "correct");
		times(out, json_is_number(g) ? json_number_value(g) : 0, 7);
	}
	st_buf_printf(out, "  SOL mean");
	pct(out, json_object_get(json_object_get(s, "sol"), "mean"), 4);
	int sus = (int)json_integer_value(json_object_get(s, "suspicious"));
	if (sus)
		st_buf_printf(out, "  suspicious %d", sus);
	st_buf_putc(out, '\n');
}

void st_bench_print_table(const json_t *rows, const json_t *score, const char *baseline,
                          st_buf *out)
{
	st_buf_printf(out, "%-24s %-14s %12s %12s %12s %8s %9s %11s %12s %-6s %8s\n", "task", "status",
	        "reference ms", "expert ms", "solution ms", "vs ref", "vs expert", "SOL", "best ms",
	        "bar", "vs best");
	size_t i;
	const json_t *r;
	json_array_foreach(rows, i, r) {
		st_buf_printf(out, "%-24s %-14s", str(r, "task"), str(r, "status"));
		ms(out, st_json_num(r, "reference_ms"), 12);
		ms(out, st_json_num(r, "expert_ms"), 12);
		ms(out, st_json_num(r, "solution_ms"), 12);
		times(out, st_json_num(r, "vs_reference"), 8);
		times(out, st_json_num(r, "vs_expert"), 9);
		sol_cell(out, r, 11);
		ms(out, st_json_num(r, "best_ms"), 12);
		st_buf_printf(out, " %-6s", bar_of(r));
		times(out, st_json_num(r, "vs_best"), 8);
		if (json_array_size(json_object_get(r, "suspicious")))
			st_buf_printf(out, "  suspicious: %s",
			              json_string_value(json_array_get(json_object_get(r, "suspicious"), 0)));
		st_buf_putc(out, '\n');
	}
	st_buf_putc(out, '\n');
	const char *key;
	const json_t *s;
	json_object_foreach((json_t *)json_object_get(score, "tiers"), key, s) {
		char label[16];
		snprintf(label, sizeof label, "tier %s", key);
		score_line(label, s, baseline, out);
	}
	score_line("all", json_object_get(score, "all"), baseline, out);
	char bar[256];
	bar_sentence(score, bar, sizeof bar);
	st_buf_printf(out, "%s\n", bar);
}

/* ---- CSV ------------------------------------------------------------------------------------ */

static void csv_field(st_buf *out, const char *s)
{
	st_buf_putc(out, '"');
	for (; *s; s++) {
		if (*s == '"')
			st_buf_putc(out, '"');
		st_buf_putc(out, *s);
	}
	st_buf_putc(out, '"');
}

static void csv_num(st_buf *out, const json_t *r, const char *k)
{
	const json_t *x = json_object_get(r, k);
	if (json_is_number(x))
		st_buf_printf(out, ",%.6g", json_number_value(x));
	else
		st_buf_putc(out, ',');
}

void st_bench_print_csv(const json_t *rows, st_buf *out)
{
	st_buf_printf(out, "task,tier,status,compiled,correct,reference_ms,expert_ms,solution_ms,"
	           "vs_reference,vs_expert,sol_fraction,suspicious,reason,vendor_ms,best_ms,best,"
	           "vs_best,sol_roof\n");
	size_t i;
	const json_t *r;
	json_array_foreach(rows, i, r) {
		csv_field(out, str(r, "task"));
		st_buf_printf(out, ",%d,", (int)json_integer_value(json_object_get(r, "tier")));
		csv_field(out, str(r, "status"));
		st_buf_printf(out, ",%d,%d", json_is_true(json_object_get(r, "compiled")),
		              json_is_true(json_object_get(r, "correct")));
		const char *nums[] = {"reference_ms", "expert_ms", "solution_ms", "vs_reference",
		                      "vs_expert", "sol_fraction"};
		for (size_t k = 0; k < sizeof nums / sizeof *nums; k++)
			csv_num(out, r, nums[k]);
		st_buf_putc(out, ',');
		const json_t *sus = json_array_get(json_object_get(r, "suspicious"), 0);
		csv_field(out, sus ? json_string_value(sus) : "");
		st_buf_putc(out, ',');
		csv_field(out, str(r, "reason"));
		csv_num(out, r, "vendor_ms");
		csv_num(out, r, "best_ms");
		st_buf_putc(out, ',');
		csv_field(out, str(r, "best"));
		csv_num(out, r, "vs_best");
		st_buf_putc(out, ',');
		csv_field(out, str(r, "sol_roof"));
		st_buf_putc(out, '\n');
	}
}

/* A row's six figures (three medians, two speedups, SOL with its roof) as table cells: each
 * written between `before` and `after`, the one place the Markdown and HTML tables agree on
 * their order. */
static void number_cells(st_buf *out, const json_t *r, const char *before, const char *after)
{
	const char *times_ms[] = {"reference_ms", "expert_ms", "solution_ms"};
	for (int k = 0; k < 3; k++) {
		st_buf_puts(out, before);
		ms(out, st_json_num(r, times_ms[k]), 1);
		st_buf_puts(out, after);
	}
	const char *speedups[] = {"vs_reference", "vs_expert"};
	for (int k = 0; k < 2; k++) {
		st_buf_puts(out, before);
		times(out, st_json_num(r, speedups[k]), 1);
		st_buf_puts(out, after);
	}
	st_buf_puts(out, before);
	sol_cell(out, r, 1);
	st_buf_puts(out, after);
	st_buf_puts(out, before);
	ms(out, st_json_num(r, "best_ms"), 1);
	st_buf_puts(out, after);
	st_buf_printf(out, "%s %s%s", before, bar_of(r), after);
	st_buf_puts(out, before);
	times(out, st_json_num(r, "vs_best"), 1);
	st_buf_puts(out, after);
}

/* ---- Markdown -------------------------------------------------------------------------------- */

/* Markdown table cells: a pipe or a newline in a reason would break the row. */
static void md_text(st_buf *out, const char *s, size_t max)
{
	for (size_t n = 0; *s && n < max; s++, n++)
		st_buf_puts(out, *s == '|' ? "\\|" : *s == '\n' ? " " : (char[]){*s, 0});
}

static void run_facts(const json_t *run, st_buf *out, int html)
{
	const char *keys[] = {"id", "started", "device", "arch", "driver", "runtime", "commit", "host",
	                      "solutions", "backend", "baseline"};
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
		const json_t *x = json_object_get(run, keys[i]);
		if (!x || json_is_null(x))
			continue;
		char buf[512];
		if (json_is_string(x))
			snprintf(buf, sizeof buf, "%s", json_string_value(x));
		else if (json_is_integer(x))
			snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(x));
		else
			continue;
		if (html) {
			st_buf_printf(out, "<tr><th>%s</th><td>", keys[i]);
			st_html_text(out, buf, sizeof buf);
			st_buf_puts(out, "</td></tr>\n");
		} else {
			st_buf_printf(out, "| %s | ", keys[i]);
			md_text(out, buf, 400);
			st_buf_puts(out, " |\n");
		}
	}
}

static void md_score_row(st_buf *out, const char *label, const json_t *s)
{
	st_buf_printf(out, "| %s | %d |", label, (int)json_integer_value(json_object_get(s, "tasks")));
	pct(out, json_object_get(s, "compile_rate"), 1);
	st_buf_puts(out, " |");
	pct(out, json_object_get(s, "correct_rate"), 1);
	st_buf_puts(out, " |");
	for (int b = 0; b < ST_BENCH_NB; b++) {
		const char *base = st_bench_bases[b];
		for (int k = 1; k < ST_BENCH_NP; k++) {
			pct(out, fastp(s, base, st_bench_p[k]), 1);
			st_buf_puts(out, k + 1 < ST_BENCH_NP ? " /" : " |");
		}
		const json_t *g = geomean(s, base, "correct"), *g1 = geomean(s, base, "faster");
		times(out, json_is_number(g) ? json_number_value(g) : 0, 1);
		st_buf_puts(out, " /");
		times(out, json_is_number(g1) ? json_number_value(g1) : 0, 1);
		st_buf_puts(out, " |");
	}
	pct(out, json_object_get(json_object_get(s, "sol"), "mean"), 1);
	st_buf_printf(out, " | %d |\n", (int)json_integer_value(json_object_get(s, "suspicious")));
}

void st_bench_print_md(const json_t *run, const json_t *rows, const json_t *score,
                       const char *baseline, st_buf *out)
{
	st_buf_printf(out, "# stitch bench\n\n| | |\n|---|---|\n");
	run_facts(run, out, 0);
	st_buf_printf(out, "\n## Scores\n\nfast_p: share of all tasks that are correct and more than p times "
	           "faster than the baseline (p = 1 / 1.5 / 2 / 5). Geomean: over correct tasks / "
	           "over those faster than the baseline. Headline baseline: %s.\n\n", baseline);
	char bar[256];
	bar_sentence(score, bar, sizeof bar);
	st_buf_printf(out, "The %s.\n\n", bar);
	st_buf_printf(out, "| scope | tasks | compiled | correct | fast_p vs reference | geomean vs reference "
	           "| fast_p vs expert | geomean vs expert | fast_p vs best | geomean vs best "
	           "| SOL mean | suspicious |\n"
	           "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	const char *key;
	const json_t *s;
	json_object_foreach((json_t *)json_object_get(score, "tiers"), key, s) {
		char label[16];
		snprintf(label, sizeof label, "tier %s", key);
		md_score_row(out, label, s);
	}
	md_score_row(out, "all", json_object_get(score, "all"));
	json_int_t tier = -1;
	size_t i;
	const json_t *r;
	json_array_foreach(rows, i, r) {
		json_int_t t = json_integer_value(json_object_get(r, "tier"));
		if (t != tier) {
			tier = t;
			st_buf_printf(out, "\n## Tier %lld\n\n| task | status | reference ms | expert ms | solution ms "
			           "| vs reference | vs expert | SOL | best ms | bar | vs best | notes |\n"
			           "|---|---|---|---|---|---|---|---|---|---|---|---|\n", (long long)t);
		}
		st_buf_printf(out, "| %s | %s |", str(r, "task"), str(r, "status"));
		number_cells(out, r, "", " |");
		st_buf_puts(out, " ");
		const json_t *sus = json_array_get(json_object_get(r, "suspicious"), 0);
		if (sus)
			md_text(out, json_string_value(sus), 200);
		else if (!json_is_true(json_object_get(r, "correct")))
			md_text(out, str(r, "reason"), 200);
		st_buf_puts(out, " |\n");
	}
}

/* ---- HTML ------------------------------------------------------------------------------------- */

/* Horizontal bars of each task's speedup over the baseline on a log2 axis, 1x marked: a task
 * below the line is slower than its baseline. */
static void svg_speedups(const json_t *rows, const char *baseline, st_buf *out)
{
	char key[32];
	snprintf(key, sizeof key, "vs_%s", baseline);
	const int bar = 16, left = 190, width = 520, top = 28;
	int n = (int)json_array_size(rows);
	double lo = 0.25, hi = 4;
	size_t i;
	const json_t *r;
	json_array_foreach(rows, i, r) {
		double s = st_json_num(r, key);
		if (s > 0) {
			while (s < lo)
				lo /= 2;
			while (s > hi)
				hi *= 2;
		}
	}
	double span = log2(hi) - log2(lo);
	int h = top + n * bar + 24;
	st_svg_begin(out, "speedups", left + width + 70, h, left,
	             "speedup over the %s per task (log scale)", baseline);
	for (double g = lo; g <= hi * 1.0001; g *= 2) {
		double x = left + width * (log2(g) - log2(lo)) / span;
		st_buf_printf(out, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"%s\"/>"
		                   "<text x=\"%.1f\" y=\"%d\" class=\"tick\">%gx</text>\n", x, top - 4, x,
		              top + n * bar, g == 1 ? "one" : "grid", x - 8, top + n * bar + 14, g);
	}
	double x1 = left + width * (0 - log2(lo)) / span;
	json_array_foreach(rows, i, r) {
		int y = top + (int)i * bar;
		st_buf_printf(out, "<text x=\"%d\" y=\"%d\" class=\"label\">", left - 6, y + bar - 4);
		st_html_text(out, str(r, "task"), 64);
		st_buf_puts(out, "</text>");
		double s = st_json_num(r, key);
		if (s > 0) {
			double x = left + width * (log2(s) - log2(lo)) / span;
			double a = x < x1 ? x : x1, w = fabs(x - x1);
			st_buf_printf(out, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
			                   "class=\"%s\"><title>%.3gx</title></rect>"
			                   "<text x=\"%.1f\" y=\"%d\" class=\"value\">%.2fx</text>", a, y + 2,
			              w < 1 ? 1 : w, bar - 4, json_array_size(json_object_get(r, "suspicious"
			              )) ? "bar sus" : s >= 1 ? "bar" : "bar slow", s, (x > x1 ? x : x1) + 4,
			              y + bar - 4, s);
		} else {
			st_buf_printf(out, "<text x=\"%.1f\" y=\"%d\" class=\"fail\">%s</text>", x1 + 4,
			              y + bar - 4, str(r, "status" ));
		}
		st_buf_putc(out, '\n');
	}
	st_buf_puts(out, "</svg>\n");
}

/* Mean SOL fraction per tier as vertical bars against the 100 % roof. */
static void svg_sol(const json_t *score, st_buf *out)
{
	const json_t *tiers = json_object_get(score, "tiers");
	int n = (int)json_object_size(tiers);
	const int bw = 70, gap = 30, left = 50, top = 30, hgt = 200;
	st_svg_begin(out, "sol", left + n * (bw + gap) + 20, top + hgt + 40, left,
	             "mean SOL fraction per tier");
	st_svg_pct_axis(out, left, left + n * (bw + gap), top, hgt);
	int k = 0;
	const char *key;
	const json_t *s;
	json_object_foreach((json_t *)tiers, key, s) {
		const json_t *m = json_object_get(json_object_get(s, "sol"), "mean");
		double v = json_is_number(m) ? json_number_value(m) : 0;
		double hv = hgt * (v > 1.2 ? 1.2 : v);
		int x = left + gap / 2 + k * (bw + gap);
		st_buf_printf(out, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" class=\"bar\">"
		                   "<title>%.1f%%</title></rect><text x=\"%d\" y=\"%.1f\" "
		                   "class=\"value\">%.0f%%</text><text x=\"%d\" y=\"%d\" "
		                   "class=\"label2\">tier %s</text>\n", x, top + hgt - hv, bw, hv, 100 * v,
		              x + 18, top + hgt - hv - 4, 100 * v, x + 14, top + hgt + 16, key);
		k++;
	}
	st_buf_puts(out, "</svg>\n");
}

void st_bench_print_html(const json_t *run, const json_t *rows, const json_t *score,
                         const char *baseline, st_buf *out)
{
	st_html_head(out, "stitch bench", "");
	st_buf_puts(out, "<h1>stitch bench</h1>\n<table class=\"facts\">\n");
	run_facts(run, out, 1);
	st_buf_puts(out, "</table>\n<h2>Scores</h2>\n<table><tr><th>scope</th><th>tasks</th><th>compiled</th>"
	      "<th>correct</th>");
	for (int b = 0; b < ST_BENCH_NB; b++)
		for (int k = 1; k < ST_BENCH_NP; k++)
			st_buf_printf(out, "<th>fast_%g vs %s</th>", st_bench_p[k], b ? st_bench_bases[b] : "ref");
	st_buf_puts(out, "<th>geomean vs ref</th><th>geomean vs expert</th><th>geomean vs best</th>"
	      "<th>SOL mean</th><th>suspicious</th></tr>\n");
	json_t *scopes = json_deep_copy(json_object_get(score, "tiers"));
	json_object_set(scopes, "all", json_object_get(score, "all"));
	const char *key;
	json_t *s;
	json_object_foreach(scopes, key, s) {
		st_buf_printf(out, "<tr><td>%s%s</td><td>%d</td><td>", strcmp(key, "all") ? "tier " : "", key,
		        (int)json_integer_value(json_object_get(s, "tasks")));
		pct(out, json_object_get(s, "compile_rate"), 1);
		st_buf_puts(out, "</td><td>");
		pct(out, json_object_get(s, "correct_rate"), 1);
		for (int b = 0; b < ST_BENCH_NB; b++)
			for (int k = 1; k < ST_BENCH_NP; k++) {
				st_buf_puts(out, "</td><td>");
				pct(out, fastp(s, st_bench_bases[b], st_bench_p[k]), 1);
			}
		for (int b = 0; b < ST_BENCH_NB; b++) {
			st_buf_puts(out, "</td><td>");
			const json_t *g = geomean(s, st_bench_bases[b], "correct");
			times(out, json_is_number(g) ? json_number_value(g) : 0, 1);
		}
		st_buf_puts(out, "</td><td>");
		pct(out, json_object_get(json_object_get(s, "sol"), "mean"), 1);
		st_buf_printf(out, "</td><td>%d</td></tr>\n", (int)json_integer_value(json_object_get(s,
		              "suspicious" )));
	}
	json_decref(scopes);
	char bar[256];
	bar_sentence(score, bar, sizeof bar);
	st_buf_puts(out, "</table>\n<p class=\"bar\">The ");
	st_html_text(out, bar, sizeof bar);
	st_buf_puts(out, ".</p>\n");
	svg_speedups(rows, baseline, out);
	svg_sol(score, out);
	st_buf_puts(out, "<h2>Tasks</h2>\n<table><tr><th>task</th><th>status</th><th>reference ms</th>"
	      "<th>expert ms</th><th>solution ms</th><th>vs reference</th><th>vs expert</th>"
	      "<th>SOL</th><th>best ms</th><th>bar</th><th>vs best</th><th>notes</th></tr>\n");
	size_t i;
	const json_t *r;
	json_array_foreach(rows, i, r) {
		st_buf_puts(out, "<tr><td>");
		st_html_text(out, str(r, "task"), 128);
		st_buf_puts(out, "</td><td>");
		st_html_text(out, str(r, "status"), 32);
		number_cells(out, r, "</td><td>", "");
		st_buf_puts(out, "</td><td style=\"text-align:left\">");
		const json_t *sus = json_array_get(json_object_get(r, "suspicious"), 0);
		st_html_text(out, sus ? json_string_value(sus)
		                 : json_is_true(json_object_get(r, "correct")) ? "" : str(r, "reason"), 300);
		st_buf_puts(out, "</td></tr>\n");
	}
	st_buf_puts(out, "</table>\n</body></html>\n");
}

/* ---- comparison ------------------------------------------------------------------------------- */

static const json_t *row_for(const json_t *rows, const char *task)
{
	size_t i;
	const json_t *r;
	json_array_foreach(rows, i, r)
		if (!strcmp(str(r, "task"), task))
			return r;
	return NULL;
}

void st_bench_print_compare(const json_t *run_a, const json_t *rows_a, const json_t *run_b,
                            const json_t *rows_b, st_buf *out)
{
	st_buf_printf(out, "A: run %lld  %s  %s  %s\nB: run %lld  %s  %s  %s\n\n",
	              (long long)json_integer_value(json_object_get(run_a, "id" )), str(run_a, "started"
	              ), str(run_a, "solutions" ), str(run_a, "commit" ),
	              (long long)json_integer_value(json_object_get(run_b, "id" )), str(run_b, "started"
	              ), str(run_b, "solutions" ), str(run_b, "commit" ));
	st_buf_printf(out, "%-24s %-14s %-14s %12s %12s %9s %9s %11s\n", "task", "status A", "status B",
	              "solution A", "solution B", "B vs A", "ref A/B", "SOL B");
	json_t *tasks = json_array();
	size_t i;
	const json_t *r;
	json_array_foreach(rows_a, i, r)
		json_array_append_new(tasks, json_string(str(r, "task")));
	json_array_foreach(rows_b, i, r)
		if (!row_for(rows_a, str(r, "task")))
			json_array_append_new(tasks, json_string(str(r, "task")));
	const json_t *t;
	json_array_foreach(tasks, i, t) {
		const char *id = json_string_value(t);
		const json_t *a = row_for(rows_a, id), *b = row_for(rows_b, id);
		st_buf_printf(out, "%-24s %-14s %-14s", id, a ? str(a, "status") : "(absent)",
		              b ? str(b, "status") : "(absent)");
		double ma = a ? st_json_num(a, "solution_ms") : 0;
		double mb = b ? st_json_num(b, "solution_ms") : 0;
		ms(out, ma, 12);
		ms(out, mb, 12);
		/* > 1: B is faster than A */
		times(out, ma > 0 && mb > 0 ? ma / mb : 0, 9);
		/* the reference's own drift between the runs: how far the machines differ */
		double ra = a ? st_json_num(a, "reference_ms") : 0;
		double rb = b ? st_json_num(b, "reference_ms") : 0;
		times(out, ra > 0 && rb > 0 ? ra / rb : 0, 9);
		sol_cell(out, b, 11);
		st_buf_putc(out, '\n');
	}
	json_decref(tasks);
	json_t *sa = st_bench_score(rows_a), *sb = st_bench_score(rows_b);
	st_buf_putc(out, '\n');
	score_line("A", json_object_get(sa, "all"), "reference", out);
	score_line("B", json_object_get(sb, "all"), "reference", out);
	json_decref(sa);
	json_decref(sb);
}
