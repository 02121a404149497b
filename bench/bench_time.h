/* The clock and the median of the stand-alone benchmark programs in bench/. */
#ifndef ST_BENCH_TIME_H
#define ST_BENCH_TIME_H

#include <stdlib.h>
#include <time.h>

static inline double bench_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static inline int bench_by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The upper median of v[0..n) (v is sorted in place). */
static inline double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, bench_by_value);
	return v[n / 2];
}

#endif
