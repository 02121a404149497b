/* Timing statistics over samples: medians and quartiles, relative standard error, discarding of
 * throttled samples, the stop rule, and a robust A/B comparison. */
#ifndef ST_STATS_H
#define ST_STATS_H

#include "stitch/timing.h"

typedef struct st_stats {
	int n;                 /* samples kept */
	int discarded;         /* throttled or clock-dropped samples */
	double median, q1, q3, min, max, mean, stddev;
	double rse;            /* relative standard error of the mean: stddev / sqrt(n) / mean */
	double rse_median;     /* relative standard error of the median, from the interquartile
	                        * range: 1.2533 * (IQR / 1.349) / sqrt(n) / median; the stop rule's */
	double total_ms;       /* sum of kept sample times */
	double wall_median;    /* median wall time of the kept samples */
	int sm_mhz_median;
} st_stats;

/* A sample is discarded when throttled, or when its SM clock is below 90 % of the highest clock
 * seen in the set (clock unknown: kept). Quartiles by linear interpolation (type 7). */
void st_stats_compute(const st_sample *s, int n, st_stats *out);

void st_stop_rule_default(st_stop_rule *r);

/* 1 when enough: n >= min_samples && total >= min_time && rse_median < max_rse, or a cap was
 * reached. */
int st_stop_reached(const st_stats *s, const st_stop_rule *r, double wall_spent_ms);

/* Quantile q in [0,1] of v[0..n) (type 7), sorting v in place; NAN when n is 0. */
double st_quantile(double *v, int n, double q);

/* Quantile q in [0,1] of a sorted array (type 7). */
double st_quantile_sorted(const double *v, int n, double q);

#endif
