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
	double q = 0;
	if (m) {
		q = st_quantile(v, m, 0.5);
		double iqr = st_quantile_sorted(v, m, 0.75) - st_quantile_sorted(v, m, 0.25);
		*se = 1.2533 * (iqr / 1.349) / sqrt((double)m);
	}
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
}

/* What an excess may be without being work: the standard errors, 2 us and 2 % of the call, and
 * harness_share of the harness's own work a call. */
static double allowed(const st_clock_bound *b, double median_ms, double harness_share)
{
	double noise = 0.002 + 0.02 * (median_ms > 0 ? median_ms : 0);
	noise = noise > b->noise_ms ? noise : b->noise_ms;
	if (harness_share > 0 && harness_share * b->harness_ms > noise)
		noise = harness_share * b->harness_ms;
	return noise;
}

double st_clock_bound_charge(const st_clock_bound *b, double median_ms, double harness_share)
{
	return b->batches && b->excess_ms > allowed(b, median_ms, harness_share)
	       ? b->excess_ms * (b->stretch >= 1 ? b->stretch : 1)
	       : 0;
}

int st_clock_bound_gross(const st_clock_bound *b, double median_ms, double harness_share)
{
	return b->batches && b->excess_ms > 0.05 && b->excess_ms > 4 * median_ms &&
	       b->excess_ms > 2 * allowed(b, median_ms, harness_share);
}
