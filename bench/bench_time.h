/* The clock, the median and the size argument of the stand-alone benchmark programs in bench/. */
#ifndef ST_BENCH_TIME_H
#define ST_BENCH_TIME_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double bench_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static inline double bench_now_ms(void)
{
	return bench_now_us() / 1e3;
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

/* The optional first argument, a size in MiB (1 to 65536, default dflt); 0 after printing the
 * usage line (--help, or anything else). */
static inline size_t bench_mib_arg(int argc, char **argv, size_t dflt, const char *usage)
{
	if (argc < 2)
		return dflt;
	char *end;
	unsigned long v = strtoul(argv[1], &end, 10);
	if (argc == 2 && *argv[1] >= '0' && *argv[1] <= '9' && !*end && v >= 1 && v <= 65536)
		return (size_t)v;
	fprintf(stderr, "%s\n", usage);
	return 0;
}

#endif
