/* The front-loading bound on a candidate's time (docs/architecture.md, "front-loaded batches").
 * A runner that can predict its next calls' inputs (the generator is open, and a timing batch's
 * seed reaches the runner) can answer several calls in one of them and copy the rest: every
 * answer right, every report true, the batch's reports adding up to what it took, and the median
 * call one copy. Work cannot move between batches (the next batch's seed is not known before its
 * request), so the mean reported call of each batch is the work's; its median over batches, over
 * the same figure's ratio to the median in the baseline's batches (the skew honest timing has on
 * this machine), bounds the candidate's time from below. */
#ifndef ST_BATCH_MEAN_H
#define ST_BATCH_MEAN_H

#include "verify/clock_bound.h"

typedef struct st_batch_mean {
	int batches;        /* the candidate's batches behind it (0: no bound) */
	double cand_ms;     /* median over its batches of a batch's mean reported call */
	double base_ms;     /* the same over the baseline's batches (0: none) */
	double skew;        /* base_ms over the baseline's median, 1 to 1.5 (1 without one) */
	double bound_ms;    /* cand_ms / skew: the least the candidate's time may be */
} st_batch_mean;

/* The bound from the candidate's batches c[0..nc) and the baseline's b[0..nb) with median
 * base_median (records without event_ms are skipped). */
void st_batch_mean_compute(const st_batch_rec *c, int nc, const st_batch_rec *b, int nb,
                           double base_median, st_batch_mean *out);

/* Does the bound raise a candidate whose median is median_ms: more than 5 % and 1 us above it?
 * Below that the two agree within what honest timing varies by. */
int st_batch_mean_binds(const st_batch_mean *m, double median_ms);

#endif
