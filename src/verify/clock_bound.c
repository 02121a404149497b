/* The parent-clock bound on a solution's time (clock_bound.h): medians over batches, so that a
 * batch held up by a busy host moves the figure little, and the harness's cost taken from the
 * baseline's batches net of one round trip each, so that batches of different sizes (a slow
 * candidate's single calls beside a fast reference's hundreds) compare fairly. */
#include "clock_bound.h"

#include <math.h>
#include <stdlib.h>

#include "verify/stats.h"

#define MAX_BATCHES 4096

/* Per call, what a batch took beyond its reports, its waits for a CPU, one round trip and
 * `harness_ms` per call. */
static double per_call(const st_batch_rec *b, double rtt_ms, double harness_ms)
{
	double gap = b->took_ms - b->reported_ms - b->waited_ms - rtt_ms;
	return gap / b->n - harness_ms;
}

/* The median of v[0..m) (m > 0; v is reordered), and (*se) its standard error from the
 * interquartile range (as the stop rule's rse_median). */
static double median_se(double *v, int m, double *se)
{
	double q = st_quantile(v, m, 0.5);
	double iqr = st_quantile_sorted(v, m, 0.75) - st_quantile_sorted(v, m, 0.25);
	*se = 1.2533 * (iqr / 1.349) / sqrt((double)m);
	return q;
}

/* The per-call figures of the batches r[0..n) into v; their median, and (*se) the standard error
 * of that median from their interquartile range (as the stop rule's rse_median). */
static double median_of(const st_batch_rec *r, int n, double rtt_ms, double harness_ms, double *se)
{
	double *v = malloc((size_t)n * sizeof *v);
	*se = 0;
	if (!v)
		return 0;
	int m = 0;
	for (int i = 0; i < n; i++)
		if (r[i].n > 0)
			v[m++] = per_call(&r[i], rtt_ms, harness_ms);
	double q = m ? median_se(v, m, se) : 0;
	free(v);
	return q;
}

/* The batches' wall time over their time less the waits for a CPU, clamped to [1, 4]: the
 * parent's and the runner's waits are summed and may overlap, so a busy host's figure is capped
 * rather than believed without bound. */
static double stretch_of(const st_batch_rec *r, int n)
{
	double took = 0, waited = 0;
	for (int i = 0; i < n; i++)
		if (r[i].n > 0 && r[i].took_ms > 0) {
			took += r[i].took_ms;
			waited += r[i].waited_ms > 0 ? r[i].waited_ms : 0;
		}
	if (!(took > 0) || !(waited > 0))
		return 1;
	return took - waited > took / 4 ? took / (took - waited) : 4;
}

/* Per call, a batch's runner CPU time beyond `beyond` (the calls' reported CPU time for the
 * baseline, their reported wall time for the solution) and `harness_ms`. */
static double cpu_per_call(const st_batch_rec *b, double beyond, double harness_ms)
{
	return (b->cpu_ms - beyond) / b->n - harness_ms;
}

/* The CPU-time bound (clock_bound.h), where every batch of both carries the kernel's count and
 * every baseline batch its calls' CPU time. */
static void cpu_bound(const st_batch_rec *sol, int ns, const st_batch_rec *base, int nb,
                      st_clock_bound *out)
{
	for (int i = 0; i < nb; i++)
		if (base[i].n > 0 && !(base[i].cpu_ms > 0 && base[i].call_cpu_ms >= 0))
			return;
	for (int i = 0; i < ns; i++)
		if (sol[i].n > 0 && !(sol[i].cpu_ms > 0))
			return;
	double *v = malloc((size_t)(ns > nb ? ns : nb) * sizeof *v);
	if (!v)
		return;
	int m = 0;
	for (int i = 0; i < nb; i++)
		if (base[i].n > 0)
			v[m++] = cpu_per_call(&base[i], base[i].call_cpu_ms, 0);
	double se_b = 0, se_s = 0, h = 0, x = 0, took = 0, cpu = 0;
	if (m) {
		h = median_se(v, m, &se_b);
		h = h > 0 ? h : 0;
	}
	int k = 0;
	for (int i = 0; m && i < ns; i++)
		if (sol[i].n > 0) {
			v[k++] = cpu_per_call(&sol[i], sol[i].reported_ms, h);
			took += sol[i].took_ms;
			cpu += sol[i].cpu_ms;
		}
	if (k)
		x = median_se(v, k, &se_s);
	free(v);
	if (!m || !k)
		return;
	out->cpu_harness_ms = h;
	out->cpu_excess_ms = x > 0 ? x : 0;
	out->cpu_noise_ms = 3 * sqrt(se_b * se_b + se_s * se_s);
	out->cpu_stretch = took > cpu ? (took < 4 * cpu ? took / cpu : 4) : 1;
	out->cpu_batches = k;
}

void st_clock_bound_compute(const st_batch_rec *sol, int ns, const st_batch_rec *base, int nb,
                            double rtt_ms, st_clock_bound *out)
{
	*out = (st_clock_bound){.rtt_ms = rtt_ms > 0 ? rtt_ms : 0, .stretch = 1};
	if (ns <= 0 || nb <= 0)
		return;
	ns = ns < MAX_BATCHES ? ns : MAX_BATCHES;
	nb = nb < MAX_BATCHES ? nb : MAX_BATCHES;
	double se_b, se_s;
	double h = median_of(base, nb, out->rtt_ms, 0, &se_b);
	out->harness_ms = h > 0 ? h : 0;
	double x = median_of(sol, ns, out->rtt_ms, out->harness_ms, &se_s);
	out->excess_ms = x > 0 ? x : 0;
	out->noise_ms = 3 * sqrt(se_b * se_b + se_s * se_s);
	out->stretch = stretch_of(sol, ns);
	out->batches = ns;
	cpu_bound(sol, ns, base, nb, out);
}

/* What an excess may be without being work: the standard errors (noise_ms), 2 us and 2 % of the
 * call, and harness_share of the harness's own work a call. */
static double allowed(double noise_ms, double harness_ms, double median_ms, double harness_share)
{
	double noise = 0.002 + 0.02 * (median_ms > 0 ? median_ms : 0);
	noise = noise > noise_ms ? noise : noise_ms;
	if (harness_share > 0 && harness_share * harness_ms > noise)
		noise = harness_share * harness_ms;
	return noise;
}

/* One bound's charge: its excess times its stretch, where the excess is more than noise. */
static double charge_of(double excess, double stretch, double noise_ms, double harness_ms,
                        double median_ms, double harness_share)
{
	return excess > allowed(noise_ms, harness_ms, median_ms, harness_share)
	       ? excess * (stretch >= 1 ? stretch : 1)
	       : 0;
}

/* The CPU-time bound's share of the harness's own work: the harness's CPU time differs between
 * two runners as its wall time does, by a quarter of itself and more (an honest copy of the
 * expert's CPU excess came to 1.09 ms of a 4.3 ms harness in one of six verifies on the
 * development machine, session 30), and a second bound taken with the first at its own margin
 * would double the chances of charging an honest solution. It still catches a rewritten clock's
 * hidden work of several harness calls' worth (tests/redteam/host/patch_clock.c). */
#define CPU_SHARE_FACTOR 2

double st_clock_bound_charge(const st_clock_bound *b, double median_ms, double harness_share)
{
	if (!b->batches)
		return 0;
	double wall = charge_of(b->excess_ms, b->stretch, b->noise_ms, b->harness_ms, median_ms,
	                        harness_share);
	double cpu = b->cpu_batches ? charge_of(b->cpu_excess_ms, b->cpu_stretch, b->cpu_noise_ms,
	                                        b->cpu_harness_ms, median_ms,
	                                        CPU_SHARE_FACTOR * harness_share)
	                            : 0;
	return wall > cpu ? wall : cpu;
}

static int gross_of(double excess, double noise_ms, double harness_ms, double median_ms,
                    double harness_share)
{
	return excess > 0.05 && excess > 4 * median_ms &&
	       excess > 2 * allowed(noise_ms, harness_ms, median_ms, harness_share);
}

int st_clock_bound_gross(const st_clock_bound *b, double median_ms, double harness_share)
{
	return b->batches &&
	       (gross_of(b->excess_ms, b->noise_ms, b->harness_ms, median_ms, harness_share) ||
	        (b->cpu_batches && gross_of(b->cpu_excess_ms, b->cpu_noise_ms, b->cpu_harness_ms,
	                                    median_ms, CPU_SHARE_FACTOR * harness_share)));
}

double st_round_time_combine(const st_round_time *main_round, const st_round_time *confirm)
{
	double t = main_round->floor_ms + main_round->charge_ms;
	if (confirm && confirm->samples > 0) {
		double c = confirm->floor_ms + confirm->charge_ms;
		t = c < t ? c : t;
	}
	return t > main_round->floor_ms ? t : main_round->floor_ms;
}
