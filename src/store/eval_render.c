/* The eval leaderboard for people: stored `stitch eval` runs side by side, as a terminal table and
 * as one HTML page with SVG charts (fast_p per tier; speedup and correctness by round, where a
 * refine or agent loop drifting toward slow but safe code shows as a falling line). Every figure
 * is read from the runs' scores as stitch eval wrote them; one a run lacks shows as "-", never
 * as 0, so a missing figure cannot pass for a bad one. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common/fs.h"
#include "eval.h"
#include "html.h"

/* ---- reading the scores ---------------------------------------------------------------------- */

/* o[k] as a number; NAN when absent or null. */
static double val(const json_t *o, const char *k)
{
	const json_t *x = json_object_get(o, k);
	return json_is_number(x) ? json_number_value(x) : NAN;
}

static const char *text(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "-";
}

static int samples_of(const json_t *s)
{
	json_int_t k = json_integer_value(json_object_get(s, "samples"));
	return k > 0 && k < INT_MAX ? (int)k : 1;
}

/* The pass@k block of a task group: k = 1 or the run's K. */
static const json_t *pass_at(const json_t *group, int k)
{
	char key[32];
	snprintf(key, sizeof key, "pass@%d", k);
	return json_object_get(group, key);
}

/* pass@K correct: only a run of more than one sample has one. */
static double correct_at_k(const json_t *s, const json_t *group)
{
	int k = samples_of(s);
	return k > 1 ? val(pass_at(group, k), "correct") : NAN;
}

static double fast(const json_t *pass, double p, const char *base)
{
	char key[48];
	snprintf(key, sizeof key, "fast_%g_vs_%s", p, base);
	return val(pass, key);
}

/* A tier's group of scores, or the overall one for tier NULL. */
static const json_t *scope(const json_t *s, const char *tier)
{
	return tier ? json_object_get(json_object_get(s, "tiers"), tier)
	            : json_object_get(s, "overall");
}

/* The overall curve by round: one entry per round the samples went through. */
static const json_t *curve(const json_t *s)
{
	return json_object_get(json_object_get(s, "overall"), "rounds");
}

static int n_rounds(const json_t *s)
{
	return (int)json_array_size(curve(s));
}

static double round_no(const json_t *c, size_t i)
{
	double r = val(c, "round");
	return isnan(r) ? (double)(i + 1) : r;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every tier any run has, sorted, as a JSON array of strings. */
static json_t *tier_names(const json_t *const *scores, int n)
{
	json_t *set = json_object();
	for (int k = 0; k < n; k++) {
		const char *key;
		json_t *g;
		json_object_foreach(json_object_get(scores[k], "tiers"), key, g)
			json_object_set_new(set, key, json_true());
	}
	size_t m = json_object_size(set), i = 0;
	const char **names = calloc(m ? m : 1, sizeof *names);
	json_t *out = json_array();
	if (names) {
		const char *key;
		json_t *x;
		json_object_foreach(set, key, x)
			names[i++] = key;
		qsort(names, m, sizeof *names, by_name);
		for (i = 0; i < m; i++)
			json_array_append_new(out, json_string(names[i]));
		free(names);
	}
	json_decref(set);
	return out;
}

/* ---- terminal -------------------------------------------------------------------------------- */

static void t_rate(st_buf *out, double x, int w)
{
	if (isnan(x))
		st_buf_printf(out, " %*s", w, "-");
	else
		st_buf_printf(out, " %*.2f", w, x);
}

static void t_times(st_buf *out, double x, int w)
{
	if (isnan(x))
		st_buf_printf(out, " %*s", w, "-");
	else
		st_buf_printf(out, " %*.2fx", w - 1, x);
}

static void t_int(st_buf *out, const json_t *x, int w)
{
	if (json_is_integer(x))
		st_buf_printf(out, " %*lld", w, (long long)json_integer_value(x));
	else
		st_buf_printf(out, " %*s", w, "-");
}

static void t_cost(st_buf *out, double x, int w)
{
	char buf[48] = "-";
	if (!isnan(x))
		snprintf(buf, sizeof buf, "$%.4f", x);
	st_buf_printf(out, " %*s", w, buf);
}

/* Model strings end in what tells them apart (openai-compat:URL:MODEL): a long one keeps its
 * tail. */
#define MODEL_W 48
static void t_model(st_buf *out, const char *m, int w)
{
	size_t len = strlen(m);
	if (len <= (size_t)w)
		st_buf_printf(out, " %-*s", w, m);
	else
		st_buf_printf(out, " ...%s", m + len - (size_t)(w - 3));
}

static void print_runs(const json_t *const *scores, const long long *ids, int n, st_buf *out)
{
	int mw = 5;
	for (int k = 0; k < n; k++) {
		int len = (int)strlen(text(scores[k], "model"));
		mw = len > mw ? len : mw;
	}
	mw = mw > MODEL_W ? MODEL_W : mw;
	st_buf_printf(out, "runs: pass@1 rates over the tasks; geomean: speedup of the correct "
	                   "samples\n");
	st_buf_printf(out, "%5s %-*s %-8s %4s %3s %5s %7s %7s %10s %10s %11s %9s %10s %10s %9s\n",
	              "run", mw, "model", "mode", "K", "R", "tasks", "compile", "correct", "fast_1/ref",
	              "fast_1/exp", "geomean/ref", "correct@K", "tokens in", "tokens out", "cost");
	for (int k = 0; k < n; k++) {
		const json_t *s = scores[k], *all = json_object_get(s, "overall"), *p1 = pass_at(all, 1),
		             *usage = json_object_get(s, "usage");
		st_buf_printf(out, "%5lld", ids[k]);
		t_model(out, text(s, "model"), mw);
		st_buf_printf(out, " %-8s", text(s, "mode"));
		t_int(out, json_object_get(s, "samples"), 4);
		t_int(out, json_object_get(s, "rounds"), 3);
		t_int(out, json_object_get(all, "tasks"), 5);
		t_rate(out, val(p1, "compile"), 7);
		t_rate(out, val(p1, "correct"), 7);
		t_rate(out, fast(p1, 1, "reference"), 10);
		t_rate(out, fast(p1, 1, "expert"), 10);
		t_times(out, val(all, "geomean_vs_reference"), 11);
		t_rate(out, correct_at_k(s, all), 9);
		t_int(out, json_object_get(usage, "input_tokens"), 10);
		t_int(out, json_object_get(usage, "output_tokens"), 10);
		t_cost(out, val(usage, "cost_usd"), 9);
		st_buf_putc(out, '\n');
	}
}

static void print_tiers(const json_t *const *scores, const long long *ids, int n,
                        const json_t *tiers, st_buf *out)
{
	st_buf_printf(out, "\nfast_p vs reference by tier: share of tasks whose sample is correct and "
	                   "more than p times faster (pass@1)\n%-8s %5s", "tier", "run");
	for (int p = 0; p < ST_BENCH_NP; p++) {
		char head[16];
		snprintf(head, sizeof head, "p=%g", st_bench_p[p]);
		st_buf_printf(out, " %6s", head);
	}
	st_buf_putc(out, '\n');
	for (size_t t = 0; t <= json_array_size(tiers); t++) {
		const char *tier = json_string_value(json_array_get(tiers, t));
		for (int k = 0; k < n; k++) {
			st_buf_printf(out, "%-8s %5lld", k ? "" : tier ? tier : "all", ids[k]);
			const json_t *p1 = pass_at(scope(scores[k], tier), 1);
			for (int p = 0; p < ST_BENCH_NP; p++)
				t_rate(out, fast(p1, st_bench_p[p], "reference"), 6);
			st_buf_putc(out, '\n');
		}
	}
}

/* A loop that trades speed for safety keeps its correct rate while its geomean sinks: say so
 * when the last round is more than 10 % below the best one. */
static void drift_note(const json_t *c, st_buf *out)
{
	double best = NAN, best_r = 0, last = NAN, last_r = 0;
	size_t i;
	const json_t *x;
	json_array_foreach(c, i, x) {
		double g = val(x, "geomean_vs_reference");
		if (isnan(g))
			continue;
		if (isnan(best) || g > best) {
			best = g;
			best_r = round_no(x, i);
		}
		last = g;
		last_r = round_no(x, i);
	}
	if (!isnan(best) && last < 0.9 * best)
		st_buf_printf(out, "      drift: geomean falls from %.2fx at round %g to %.2fx at round "
		                   "%g\n", best, best_r, last, last_r);
}

static void print_rounds(const json_t *const *scores, const long long *ids, int n, st_buf *out)
{
	int any = 0;
	for (int k = 0; k < n; k++) {
		if (n_rounds(scores[k]) < 2)
			continue;
		if (!any++)
			st_buf_printf(out, "\nby round: the code each sample held at round r (a geomean that "
			                   "falls while correctness holds is drift toward slow fallback "
			                   "code)\n");
		const json_t *c = curve(scores[k]);
		st_buf_printf(out, "%5lld %-12s", ids[k], "round");
		size_t i;
		const json_t *x;
		json_array_foreach(c, i, x)
			st_buf_printf(out, " %6g", round_no(x, i));
		st_buf_printf(out, "\n%5s %-12s", "", "correct");
		json_array_foreach(c, i, x)
			t_rate(out, val(x, "correct"), 6);
		st_buf_printf(out, "\n%5s %-12s", "", "geomean/ref");
		json_array_foreach(c, i, x)
			t_times(out, val(x, "geomean_vs_reference"), 6);
		st_buf_putc(out, '\n');
		drift_note(c, out);
	}
}

/* The reasons of one suspicious result, joined by "; ". */
static void why_list(const json_t *why, st_buf *out, int html)
{
	size_t i;
	const json_t *w;
	json_array_foreach(why, i, w) {
		if (i)
			st_buf_puts(out, "; ");
		const char *s = json_is_string(w) ? json_string_value(w) : "?";
		if (html)
			st_html_text(out, s, 500);
		else
			st_buf_puts(out, s);
	}
}

static void print_suspicious(const json_t *const *scores, const long long *ids, int n, st_buf *out)
{
	int total = 0;
	for (int k = 0; k < n; k++)
		total += (int)json_array_size(json_object_get(scores[k], "suspicious"));
	if (!total) {
		st_buf_printf(out, "\nsuspicious results: none\n");
		return;
	}
	st_buf_printf(out, "\nsuspicious results (%d; look before believing them):\n", total);
	for (int k = 0; k < n; k++) {
		size_t i;
		const json_t *x;
		json_array_foreach(json_object_get(scores[k], "suspicious"), i, x) {
			st_buf_printf(out, "%5lld %-24s sample", ids[k], text(x, "task"));
			t_int(out, json_object_get(x, "sample"), 2);
			st_buf_puts(out, " round");
			t_int(out, json_object_get(x, "round"), 2);
			st_buf_puts(out, ": ");
			why_list(json_object_get(x, "why"), out, 0);
			st_buf_putc(out, '\n');
		}
	}
}

void st_eval_print_compare(const json_t *const *scores, const long long *ids, int n, st_buf *out)
{
	json_t *tiers = tier_names(scores, n);
	print_runs(scores, ids, n, out);
	print_tiers(scores, ids, n, tiers, out);
	print_rounds(scores, ids, n, out);
	print_suspicious(scores, ids, n, out);
	json_decref(tiers);
}

/* ---- HTML ------------------------------------------------------------------------------------ */

/* One colour per run, the same in both charts and their legends; runs past the eighth reuse
 * them. A line or a hollow point takes its colour as stroke only, hence the later rules. */
#define N_COLOURS 8
static const char eval_css[] =
	".k0{fill:#4a7ebb;stroke:#4a7ebb}.k1{fill:#d08c2c;stroke:#d08c2c}"
	".k2{fill:#3a9a5b;stroke:#3a9a5b}.k3{fill:#8e5ea2;stroke:#8e5ea2}"
	".k4{fill:#c0504d;stroke:#c0504d}.k5{fill:#2ab0b8;stroke:#2ab0b8}"
	".k6{fill:#7f7f7f;stroke:#7f7f7f}.k7{fill:#b8a02a;stroke:#b8a02a}\n"
	"rect.v{stroke:none}.line{fill:none;stroke-width:2}.rate{stroke-dasharray:6 3;"
	"stroke-width:1.5}.hollow{fill:#fff;stroke-width:1.5}.mid{text-anchor:middle}"
	".legend{font-size:12px}td.l{text-align:left}\n";

static void h_rate(st_buf *out, double x)
{
	if (isnan(x))
		st_buf_puts(out, "<td>-</td>");
	else
		st_buf_printf(out, "<td>%.2f</td>", x);
}

static void h_times(st_buf *out, double x)
{
	if (isnan(x))
		st_buf_puts(out, "<td>-</td>");
	else
		st_buf_printf(out, "<td>%.2fx</td>", x);
}

static void h_int(st_buf *out, const json_t *x)
{
	if (json_is_integer(x))
		st_buf_printf(out, "<td>%lld</td>", (long long)json_integer_value(x));
	else
		st_buf_puts(out, "<td>-</td>");
}

static void h_text(st_buf *out, const char *s)
{
	st_buf_puts(out, "<td class=\"l\">");
	st_html_text(out, s, 1000);
	st_buf_puts(out, "</td>");
}

/* "#ID model · mode", escaped: how a run is named in legends, tooltips and lists. */
static void run_name(st_buf *out, const json_t *s, long long id)
{
	st_buf_printf(out, "#%lld ", id);
	st_html_text(out, text(s, "model"), 1000);
	st_buf_puts(out, " \xc2\xb7 ");
	st_html_text(out, text(s, "mode"), 100);
}

static void legend(st_buf *out, const json_t *const *scores, const long long *ids, int n, int x,
                   int y, int lines)
{
	for (int k = 0; k < n; k++) {
		int yk = y + 16 * k;
		if (lines)
			st_buf_printf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"line k%d\"/>",
			              x, yk - 4, x + 18, yk - 4, k % N_COLOURS);
		else
			st_buf_printf(out, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"10\" class=\"v "
			                   "k%d\"/>", x + 3, yk - 9, k % N_COLOURS);
		st_buf_printf(out, "<text x=\"%d\" y=\"%d\" class=\"legend\">", x + 24, yk);
		run_name(out, scores[k], ids[k]);
		st_buf_puts(out, "</text>\n");
	}
}

/* fast_p vs the reference at pass@1: for each tier (and all tasks) a group of bars, one per
 * threshold p and run. */
static void svg_fastp(const json_t *const *scores, const long long *ids, int n,
                      const json_t *tiers, st_buf *out)
{
	const int left = 50, top = 30, hgt = 200, sub_gap = 6, group_gap = 28;
	int groups = (int)json_array_size(tiers) + 1;
	int bw = 60 / n < 3 ? 3 : 60 / n > 14 ? 14 : 60 / n;
	if (n * bw < 20)
		bw = 20 / n + 1; /* room for the threshold's label under its bars */
	/* and narrower bars before the chart outgrows a page (about 900 px of plot) */
	int fit = (900 / groups - group_gap - (ST_BENCH_NP - 1) * sub_gap) / (ST_BENCH_NP * n);
	if (bw > fit)
		bw = fit < 3 ? 3 : fit;
	int sub_w = n * bw, group_w = ST_BENCH_NP * sub_w + (ST_BENCH_NP - 1) * sub_gap;
	int plot_w = groups * (group_w + group_gap), legend_y = top + hgt + 54;
	int width = left + plot_w + 20 < 600 ? 600 : left + plot_w + 20;
	st_svg_begin(out, "fastp", width, legend_y + 16 * n, left,
	             "fast_p vs reference per tier, pass@1 (correct and more than p times faster)");
	st_svg_pct_axis(out, left, left + plot_w, top, hgt);
	for (int g = 0; g < groups; g++) {
		const char *tier = json_string_value(json_array_get(tiers, (size_t)g));
		int gx = left + group_gap / 2 + g * (group_w + group_gap);
		for (int p = 0; p < ST_BENCH_NP; p++) {
			int sx = gx + p * (sub_w + sub_gap);
			for (int k = 0; k < n; k++) {
				double v = fast(pass_at(scope(scores[k], tier), 1), st_bench_p[p], "reference");
				if (isnan(v))
					continue;
				double h = hgt * (v < 0 ? 0 : v > 1 ? 1 : v);
				st_buf_printf(out, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" "
				                   "class=\"v k%d\"><title>", sx + k * bw, top + hgt - h,
				              bw > 3 ? bw - 1 : bw, h, k % N_COLOURS);
				run_name(out, scores[k], ids[k]);
				st_buf_puts(out, ", ");
				st_html_text(out, tier ? tier : "all tasks", 64);
				st_buf_printf(out, " fast_%g: %.2f</title></rect>\n", st_bench_p[p], v);
			}
			st_buf_printf(out, "<text x=\"%d\" y=\"%d\" class=\"tick mid\">%g</text>\n",
			              sx + sub_w / 2, top + hgt + 14, st_bench_p[p]);
		}
		st_buf_printf(out, "<text x=\"%d\" y=\"%d\" class=\"label2 mid\">", gx + group_w / 2,
		              top + hgt + 32);
		st_html_text(out, tier ? tier : "all", 64);
		st_buf_puts(out, " (p)</text>\n");
	}
	legend(out, scores, ids, n, left, legend_y, 0);
	st_buf_puts(out, "</svg>\n");
}

typedef struct plot {
	int left, top, width, hgt, rounds;
} plot;

static double px(const plot *p, double r)
{
	return p->rounds < 2 ? p->left + p->width / 2.0
	                     : p->left + p->width * (r - 1) / (p->rounds - 1);
}

/* frac: 0 at the bottom, 1 at the top */
static double py(const plot *p, double frac)
{
	return p->top + p->hgt - p->hgt * (frac < 0 ? 0 : frac > 1 ? 1 : frac);
}

/* One series of a run's curve (key's value / div against the plot's height): a polyline through
 * each stretch of rounds that have a value, and a point with its figure on each of them; a run
 * of one round is a single point. */
static void series(st_buf *out, const plot *p, const json_t *c, const char *key, double div,
                   const char *line_cls, const char *dot_cls, int colour, const json_t *s,
                   long long id, int is_speed)
{
	size_t m = json_array_size(c);
	for (size_t i = 0; i < m;) {
		size_t j = i;
		while (j < m && !isnan(val(json_array_get(c, j), key)))
			j++;
		if (j - i >= 2) {
			st_buf_printf(out, "<polyline class=\"%s k%d\" points=\"", line_cls, colour);
			for (size_t q = i; q < j; q++) {
				const json_t *x = json_array_get(c, q);
				st_buf_printf(out, "%s%.1f,%.1f", q > i ? " " : "", px(p, round_no(x, q)),
				              py(p, val(x, key) / div));
			}
			st_buf_puts(out, "\"/>\n");
		}
		i = j > i ? j : i + 1;
	}
	size_t i;
	const json_t *x;
	json_array_foreach(c, i, x) {
		double v = val(x, key);
		if (isnan(v))
			continue;
		st_buf_printf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" class=\"%s k%d\"><title>",
		              px(p, round_no(x, i)), py(p, v / div), dot_cls, colour);
		run_name(out, s, id);
		if (is_speed)
			st_buf_printf(out, ", round %g: geomean %.2fx vs reference</title></circle>\n",
			              round_no(x, i), v);
		else
			st_buf_printf(out, ", round %g: correct %.2f</title></circle>\n", round_no(x, i), v);
	}
}

/* Speed vs round: each run's geomean speedup over the reference (solid, left axis) and its
 * correct rate (dashed, right axis) at every round. */
static void svg_rounds(const json_t *const *scores, const long long *ids, int n, st_buf *out)
{
	plot p = {.left = 60, .top = 30, .width = 520, .hgt = 200, .rounds = 1};
	double gmax = 1;
	for (int k = 0; k < n; k++) {
		const json_t *c = curve(scores[k]);
		size_t i;
		const json_t *x;
		json_array_foreach(c, i, x) {
			double r = round_no(x, i), g = val(x, "geomean_vs_reference");
			if (r > p.rounds && r <= 10000)
				p.rounds = (int)r;
			if (g > gmax && isfinite(g))
				gmax = g;
		}
	}
	/* at most six grid steps of 1, 2 or 5 times a power of ten */
	double step = 0.25;
	for (int i = 0; gmax * 1.05 / step > 6; i++)
		step = (i > 0 && i % 3 == 0 ? 2.5 : 2) * step;
	double ymax = ceil(gmax * 1.05 / step) * step;
	int legend_y = p.top + p.hgt + 50;
	st_svg_begin(out, "rounds", p.left + p.width + 60, legend_y + 16 * n + 16, p.left,
	             "geomean speedup vs reference and correct rate by round");
	for (double y = 0; y <= ymax * 1.0001; y += step) {
		double yy = py(&p, y / ymax);
		if (fabs(y - 1) > 1e-9)
			st_buf_printf(out, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"grid\"/>",
			              p.left, yy, p.left + p.width, yy);
		st_buf_printf(out, "<text x=\"8\" y=\"%.1f\" class=\"tick\">%gx</text>\n", yy + 4, y);
	}
	st_buf_printf(out, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"one\"/>\n",
	              p.left, py(&p, 1 / ymax), p.left + p.width, py(&p, 1 / ymax));
	for (int pc = 0; pc <= 100; pc += 50)
		st_buf_printf(out, "<text x=\"%d\" y=\"%.1f\" class=\"tick\">%d%%</text>\n",
		              p.left + p.width + 8, py(&p, pc / 100.0) + 4, pc);
	int every = p.rounds <= 12 ? 1 : (p.rounds + 9) / 10;
	for (int r = 1; r <= p.rounds; r++)
		if ((r - 1) % every == 0 || r == p.rounds)
			st_buf_printf(out, "<text x=\"%.1f\" y=\"%d\" class=\"tick mid\">%d</text>\n",
			              px(&p, r), p.top + p.hgt + 16, r);
	st_buf_printf(out, "<text x=\"%d\" y=\"%d\" class=\"label2 mid\">round</text>\n",
	              p.left + p.width / 2, p.top + p.hgt + 32);
	for (int k = 0; k < n; k++) {
		const json_t *c = curve(scores[k]);
		series(out, &p, c, "correct", 1, "line rate", "hollow", k % N_COLOURS, scores[k], ids[k],
		       0);
		series(out, &p, c, "geomean_vs_reference", ymax, "line", "dot", k % N_COLOURS, scores[k],
		       ids[k], 1);
	}
	legend(out, scores, ids, n, p.left, legend_y, 1);
	st_buf_printf(out, "<text x=\"%d\" y=\"%d\" class=\"tick\">solid, filled: geomean speedup of "
	                   "the correct samples; dashed, hollow: correct rate</text>\n", p.left,
	              legend_y + 16 * n);
	st_buf_puts(out, "</svg>\n");
}

static void html_runs(const json_t *const *scores, const long long *ids, int n, st_buf *out)
{
	st_buf_puts(out, "<h2>Runs</h2>\n<table><tr><th>run</th><th>model</th><th>mode</th><th>K</th>"
	                 "<th>R</th><th>tasks</th><th>started</th><th>backend</th><th>device</th>"
	                 "<th>commit</th><th>compile</th><th>correct</th><th>fast_1 vs ref</th>"
	                 "<th>fast_1 vs expert</th><th>geomean vs ref</th><th>geomean vs expert</th>"
	                 "<th>correct@K</th><th>tokens in</th><th>tokens out</th><th>cost $</th>"
	                 "<th>wall s</th></tr>\n");
	for (int k = 0; k < n; k++) {
		const json_t *s = scores[k], *all = json_object_get(s, "overall"), *p1 = pass_at(all, 1),
		             *usage = json_object_get(s, "usage");
		st_buf_printf(out, "<tr><td>%lld</td>", ids[k]);
		h_text(out, text(s, "model"));
		h_text(out, text(s, "mode"));
		h_int(out, json_object_get(s, "samples"));
		h_int(out, json_object_get(s, "rounds"));
		h_int(out, json_object_get(all, "tasks"));
		const char *facts[] = {"started", "backend", "device", "commit"};
		for (int i = 0; i < 4; i++)
			h_text(out, text(s, facts[i]));
		h_rate(out, val(p1, "compile"));
		h_rate(out, val(p1, "correct"));
		h_rate(out, fast(p1, 1, "reference"));
		h_rate(out, fast(p1, 1, "expert"));
		h_times(out, val(all, "geomean_vs_reference"));
		h_times(out, val(all, "geomean_vs_expert"));
		h_rate(out, correct_at_k(s, all));
		h_int(out, json_object_get(usage, "input_tokens"));
		h_int(out, json_object_get(usage, "output_tokens"));
		double cost = val(usage, "cost_usd"), wall = val(s, "wall_s");
		if (isnan(cost))
			st_buf_puts(out, "<td>-</td>");
		else
			st_buf_printf(out, "<td>%.4f</td>", cost);
		if (isnan(wall))
			st_buf_puts(out, "<td>-</td>");
		else
			st_buf_printf(out, "<td>%.1f</td>", wall);
		st_buf_puts(out, "</tr>\n");
	}
	st_buf_puts(out, "</table>\n");
}

static void html_tiers(const json_t *const *scores, const long long *ids, int n,
                       const json_t *tiers, st_buf *out)
{
	st_buf_puts(out, "<h2>By tier</h2>\n");
	for (size_t t = 0; t <= json_array_size(tiers); t++) {
		const char *tier = json_string_value(json_array_get(tiers, t));
		st_buf_puts(out, "<h3>");
		st_html_text(out, tier ? tier : "all tasks", 64);
		st_buf_puts(out, "</h3>\n<table><tr><th>run</th><th>tasks</th><th>compile</th>"
		                 "<th>correct</th>");
		for (int p = 0; p < ST_BENCH_NP; p++)
			st_buf_printf(out, "<th>fast_%g vs ref</th>", st_bench_p[p]);
		st_buf_puts(out, "<th>fast_1 vs expert</th><th>geomean vs ref</th>"
		                 "<th>geomean vs expert</th><th>correct@K</th></tr>\n");
		for (int k = 0; k < n; k++) {
			const json_t *g = scope(scores[k], tier), *p1 = pass_at(g, 1);
			st_buf_puts(out, "<tr><td>");
			run_name(out, scores[k], ids[k]);
			st_buf_puts(out, "</td>");
			h_int(out, json_object_get(g, "tasks"));
			h_rate(out, val(p1, "compile"));
			h_rate(out, val(p1, "correct"));
			for (int p = 0; p < ST_BENCH_NP; p++)
				h_rate(out, fast(p1, st_bench_p[p], "reference"));
			h_rate(out, fast(p1, 1, "expert"));
			h_times(out, val(g, "geomean_vs_reference"));
			h_times(out, val(g, "geomean_vs_expert"));
			h_rate(out, correct_at_k(scores[k], g));
			st_buf_puts(out, "</tr>\n");
		}
		st_buf_puts(out, "</table>\n");
	}
}

/* The chart's figures as a table, for runs of more than one round. */
static void html_rounds(const json_t *const *scores, const long long *ids, int n, st_buf *out)
{
	int max = 0;
	for (int k = 0; k < n; k++)
		max = n_rounds(scores[k]) > max ? n_rounds(scores[k]) : max;
	if (max < 2)
		return;
	st_buf_puts(out, "<h2>By round</h2>\n<table><tr><th>run</th><th>rate</th>");
	for (int r = 1; r <= max; r++)
		st_buf_printf(out, "<th>round %d</th>", r);
	st_buf_puts(out, "</tr>\n");
	static const char *const keys[] = {"correct", "geomean_vs_reference"};
	for (int k = 0; k < n; k++) {
		const json_t *c = curve(scores[k]);
		if (json_array_size(c) < 2)
			continue;
		for (int q = 0; q < 2; q++) {
			st_buf_puts(out, "<tr><td>");
			run_name(out, scores[k], ids[k]);
			st_buf_printf(out, "</td><td class=\"l\">%s</td>", q ? "geomean vs ref" : "correct");
			for (int r = 0; r < max; r++) {
				const json_t *x = json_array_get(c, (size_t)r);
				if (!x)
					st_buf_puts(out, "<td></td>");
				else if (q)
					h_times(out, val(x, keys[q]));
				else
					h_rate(out, val(x, keys[q]));
			}
			st_buf_puts(out, "</tr>\n");
		}
	}
	st_buf_puts(out, "</table>\n");
}

static void html_suspicious(const json_t *const *scores, const long long *ids, int n, st_buf *out)
{
	st_buf_puts(out, "<h2>Suspicious results</h2>\n");
	int any = 0;
	for (int k = 0; k < n; k++) {
		size_t i;
		const json_t *x;
		json_array_foreach(json_object_get(scores[k], "suspicious"), i, x) {
			st_buf_puts(out, any++ ? "<li>" : "<ul>\n<li>");
			run_name(out, scores[k], ids[k]);
			st_buf_puts(out, ": ");
			st_html_text(out, text(x, "task"), 200);
			if (json_is_integer(json_object_get(x, "sample")))
				st_buf_printf(out, ", sample %lld",
				              (long long)json_integer_value(json_object_get(x, "sample")));
			if (json_is_integer(json_object_get(x, "round")))
				st_buf_printf(out, ", round %lld",
				              (long long)json_integer_value(json_object_get(x, "round")));
			st_buf_puts(out, ": ");
			why_list(json_object_get(x, "why"), out, 1);
			st_buf_puts(out, "</li>\n");
		}
	}
	st_buf_puts(out, any ? "</ul>\n" : "<p>none</p>\n");
}

void st_eval_print_html(const json_t *const *scores, const long long *ids, int n, st_buf *out)
{
	json_t *tiers = tier_names(scores, n);
	st_html_head(out, "stitch eval", eval_css);
	st_buf_puts(out, "<h1>stitch eval</h1>\n<p>pass@1: the chance that one sample of a task is "
	                 "compiled, correct, or correct and more than p times faster than the baseline "
	                 "(fast_p), averaged over the tasks; correct@K: that one of K samples is "
	                 "correct; geomean: the geometric-mean speedup of the correct samples.</p>\n");
	html_runs(scores, ids, n, out);
	if (n > 0) {
		svg_fastp(scores, ids, n, tiers, out);
		svg_rounds(scores, ids, n, out);
	}
	html_tiers(scores, ids, n, tiers, out);
	html_rounds(scores, ids, n, out);
	html_suspicious(scores, ids, n, out);
	st_buf_puts(out, "</body></html>\n");
	json_decref(tiers);
}

st_status st_eval_write_html(const char *path, const json_t *const *scores, const long long *ids,
                             int n, st_err *err)
{
	char dir[PATH_MAX];
	if ((size_t)snprintf(dir, sizeof dir, "%s", path) >= sizeof dir)
		return st_err_set(err, ST_E_INVALID, "%s: path too long", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		st_status s = st_mkdirs(dir, err);
		if (s)
			return st_err_wrap(err, s, "eval page %s", path);
	}
	st_buf page = {0};
	st_eval_print_html(scores, ids, n, &page);
	st_status s = page.oom ? st_err_set(err, ST_E_NOMEM, "eval page: out of memory")
	                       : st_write_file_atomic(path, st_buf_str(&page), page.n, err);
	st_buf_free(&page);
	return s;
}
