/* Timing statistics for the verifier. Medians and quartiles rather than means carry the verdict
 * because GPU timings have a long right tail (preemption, clock ramps, another process starting
 * or ending a CUDA context on any GPU of the host); so the stop rule asks for a precise median,
 * its standard error estimated from the quartiles. The mean's, which one sample 100 times the
 * median keeps above 0.5 % until some 20,000 samples, is reported beside it. Samples taken while
 * the GPU throttled, or at a clock well below the best seen, are dropped: they measure the
 * machine, not the solution. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int st_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double st_quantile_sorted(const double *v, int n, double q)
{
	if (!v || n <= 0)
		return NAN;
	if (q <= 0)
		return v[0];
	if (q >= 1)
		return v[n - 1];
	double h = (double)(n - 1) * q;
	int lo = (int)floor(h);
	if (lo >= n - 1)
		return v[n - 1];
	return v[lo] + (h - (double)lo) * (v[lo + 1] - v[lo]);
}

double st_quantile(double *v, int n, double q)
{
	if (!v || n <= 0)
		return NAN;
	qsort(v, (size_t)n, sizeof *v, st_cmp_double);
	return st_quantile_sorted(v, n, q);
}

void st_stats_compute(const st_sample *s, int n, st_stats *out)
{
	memset(out, 0, sizeof *out);
	if (!s || n <= 0)
		return;
	int max_mhz = 0;
	for (int i = 0; i < n; i++)
		if (s[i].sm_mhz > max_mhz)
			max_mhz = s[i].sm_mhz;

	double *ms = malloc((size_t)n * sizeof *ms);
	double *wall = malloc((size_t)n * sizeof *wall);
	double *mhz = malloc((size_t)n * sizeof *mhz);
	if (!ms || !wall || !mhz) {
		/* No way to report it from here: an empty result keeps the stop rule going to its cap. */
		free(ms);
		free(wall);
		free(mhz);
		out->discarded = n;
		return;
	}
	int k = 0, n_mhz = 0;
	double sum = 0;
	for (int i = 0; i < n; i++) {
		/* Integer form of sm_mhz < 0.9 * max_mhz, free of rounding at the boundary. */
		int slow = s[i].sm_mhz > 0 && (long)s[i].sm_mhz * 10 < (long)max_mhz * 9;
		if (s[i].throttled || slow) {
			out->discarded++;
			continue;
		}
		ms[k] = s[i].ms;
		wall[k] = s[i].wall_ms;
		sum += s[i].ms;
		k++;
		if (s[i].sm_mhz > 0)
			mhz[n_mhz++] = s[i].sm_mhz;
	}
	out->n = k;
	if (k > 0) {
		double mean = sum / k, ss = 0;
		for (int i = 0; i < k; i++)
			ss += (ms[i] - mean) * (ms[i] - mean);
		qsort(ms, (size_t)k, sizeof *ms, st_cmp_double);
		qsort(wall, (size_t)k, sizeof *wall, st_cmp_double);
		out->median = st_quantile_sorted(ms, k, 0.5);
		out->q1 = st_quantile_sorted(ms, k, 0.25);
		out->q3 = st_quantile_sorted(ms, k, 0.75);
		out->min = ms[0];
		out->max = ms[k - 1];
		out->mean = mean;
		out->stddev = k > 1 ? sqrt(ss / (k - 1)) : 0;
		/* A zero-spread set has zero error even at mean 0 (a coarse host clock); spread around
		 * a zero mean is unbounded error. */
		if (out->stddev == 0)
			out->rse = 0;
		else if (mean > 0)
			out->rse = out->stddev / sqrt((double)k) / mean;
		else
			out->rse = INFINITY;
		/* Normal-theory standard error of a median, 1.2533 sigma / sqrt(n), with sigma
		 * estimated robustly as IQR / 1.349. */
		double iqr = out->q3 - out->q1;
		if (iqr <= 0)
			out->rse_median = 0;
		else if (out->median > 0)
			out->rse_median = 1.2533 * (iqr / 1.349) / sqrt((double)k) / out->median;
		else
			out->rse_median = INFINITY;
		out->total_ms = sum;
		out->wall_median = st_quantile_sorted(wall, k, 0.5);
	}
	if (n_mhz > 0) {
		qsort(mhz, (size_t)n_mhz, sizeof *mhz, st_cmp_double);
		out->sm_mhz_median = (int)lround(st_quantile_sorted(mhz, n_mhz, 0.5));
	}
	free(ms);
	free(wall);
	free(mhz);
}

void st_stop_rule_default(st_stop_rule *r)
{
	r->min_samples = 10;
	r->max_samples = 20000;
	r->min_time_ms = 300;
	r->max_rse = 0.005;
	r->max_wall_ms = 4000;
}

int st_stop_reached(const st_stats *s, const st_stop_rule *r, double wall_spent_ms)
{
	/* The sample cap counts discarded samples too: they cost as much time to take. */
	if (s->n + s->discarded >= r->max_samples)
		return 1;
	if (wall_spent_ms >= r->max_wall_ms)
		return 1;
	return s->n >= r->min_samples && s->total_ms >= r->min_time_ms && s->rse_median < r->max_rse;
}
