/* Compare one output of a solution against the reference's: elementwise atol/rtol or NMSE,
 * with the worst element (flat index, coordinates, got, want), max abs/rel error and the
 * mismatch count; and a bitwise comparison for determinism re-runs. Host memory only. */
#ifndef ST_COMPARE_H
#define ST_COMPARE_H

#include <stddef.h>
#include <stdint.h>
#include "task.h"

typedef struct st_compare_result {
	int ok;
	int64_t n;            /* elements compared */
	int64_t mismatches;   /* elements outside atol + rtol*|want| (also counted under NMSE) */
	int64_t nonfinite;    /* got is NaN/Inf where want is finite (or the other way round) */
	double max_abs, max_rel, nmse; /* max_rel over elements whose want is not 0 */
	int64_t worst_index;  /* flat index of the element with the largest excess over tolerance */
	int64_t worst_coord[ST_MAX_DIMS];
	double worst_got, worst_want;
	int ndim;             /* rank of the compared tensors: how many worst_coord entries count */
} st_compare_result;

/* got and want must have the same dtype and shape. `threads` <= 1 runs single-threaded; large
 * outputs are split across threads (results identical to one thread). */
void st_compare(const st_tensor *got, const st_tensor *want, const st_tol *tol, int threads,
                st_compare_result *r);

/* One line: "y: 12 of 4096 elements off, worst y[3,17] (flat 401): got 0.5 want 0.25, max abs 0.25,
 * max rel 1, tol atol 1e-05 rtol 1e-05". */
void st_compare_describe(const st_compare_result *r, const char *name, const st_tol *tol,
                         char *buf, size_t len);

/* Bitwise equality, on up to `threads` threads: 1 when equal. On difference, *first_diff gets
 * the first differing element index (0 when type or shape differ). */
int st_compare_bitwise(const st_tensor *a, const st_tensor *b, int threads, int64_t *first_diff);

#endif
