/* The parent's clock against what a runner reports (docs/architecture.md, "the parent's clock
 * decides"). For every timed batch the parent knows how long the round trip took on its own clock;
 * the runner reports how long its calls took. What is left, less the waits for a CPU the kernel
 * counted, is the harness's own work (fresh inputs, poison, flush, digest) and one round trip;
 * the baseline's batches, timed in the same interleaving by trusted code, say what that costs per
 * call. Whatever a solution's batches take beyond it is work its reports did not show: it is added
 * to its time, so hiding work outside the timed window (in a digest step, a hook, a reply) buys
 * nothing. Only a gross and confirmed disagreement is called tampering. */
#ifndef ST_CLOCK_BOUND_H
#define ST_CLOCK_BOUND_H

/* One timed batch as the parent saw it. */
typedef struct st_batch_rec {
	int n;              /* calls in it */
	double took_ms;     /* request sent to reply read, on the parent's clock */
	double reported_ms; /* the sum of the wall times the runner reported for its calls */
	double waited_ms;   /* waits for a CPU (runner and parent) outside the reported calls */
	double cpu_ms;      /* the runner's time on a CPU over the batch as the kernel counted it
	                     * (host backend: its one thread is all it runs); 0 where not measured */
	double call_cpu_ms; /* the sum of the CPU times the runner reported for its calls, -1 where
	                     * it reported none; believed of a trusted runner only */
	double event_ms;    /* the sum of the times it reported for its calls (the samples' ms, on
	                     * the GPU its events'): batch_mean.h */
} st_batch_rec;

typedef struct st_clock_bound {
	double harness_ms; /* the harness's own work per call, from the baseline's batches */
	double rtt_ms;     /* one bare round trip to a trusted runner */
	double excess_ms;  /* per call, the median over the solution's batches of what its batches
	                    * took beyond what it reported, the harness's work and the round trip */
	int batches;       /* the solution's batches behind it */
	double noise_ms;   /* three standard errors of excess_ms, from the spread of both solutions'
	                    * per-batch figures: an excess below it may be chance */
	double stretch;    /* the solution's batches' wall time over that time less their waits for
	                    * a CPU, 1 to 4 (1 on an idle host): excess_ms is measured net of the
	                    * waits, so it is what hidden work cost in CPU time; charged at this rate
	                    * it costs what the same work inside the timed calls would have shown on
	                    * their wall clock, the waits included, as an honest solution's does */
	/* The same bound in CPU time, where the kernel counted the runners' (cpu_batches > 0): the
	 * harness's CPU time per call is a trusted baseline's batch CPU less its calls' CPU (exact,
	 * whatever the waits), and what a solution's runner spent on a CPU beyond that and its
	 * reported wall times is work its reports left out. The wall-clock bound must keep the
	 * baseline's harness work whole with its waits (its waits inside and outside its calls
	 * cannot be told apart), which on an oversubscribed host lets a runner whose clock was
	 * rewritten keep about half of what it hid; this one does not. Its excess is charged at
	 * cpu_stretch, the solution's batches' wall time over their runner's CPU time (both counted
	 * by the parent and the kernel, 1 to 4): what its CPU time cost on the wall clock. */
	double cpu_harness_ms, cpu_excess_ms, cpu_noise_ms, cpu_stretch;
	int cpu_batches;
} st_clock_bound;

/* The bound of a solution's batches sol[0..ns) against the baseline's base[0..nb), with rtt_ms one
 * round trip. Without batches of both, excess_ms is 0 and batches 0. */
void st_clock_bound_compute(const st_batch_rec *sol, int ns, const st_batch_rec *base, int nb,
                            double rtt_ms, st_clock_bound *out);

/* What to add to a solution's median time of median_ms: the excess times the stretch, where the
 * excess is more than noise (its standard errors, at least 2 us and 2 % of the call, and
 * harness_share of the harness's own work a call; twice that share for the CPU-time bound), else
 * 0; the larger of the wall-clock and the CPU-time bounds' where both are known. */
double st_clock_bound_charge(const st_clock_bound *b, double median_ms, double harness_share);

/* Do the reports leave out so much (more than four times what they show, over 50 us a call, and
 * twice what st_clock_bound_charge would let pass as noise with the same harness_share) that the
 * runner's clock or timing was tampered with? Asked twice, the second time of a confirmation
 * round, before a verdict says so. Either bound, wall clock or CPU time, may say so. A gap that
 * stays through a verify without being work (one runner's harness slower than the other's) stays
 * through the confirmation too: only the share keeps it from being called tampering. */
int st_clock_bound_gross(const st_clock_bound *b, double median_ms, double harness_share);

/* One round of a candidate's timing as the verdict weighs it: the main round, or the
 * confirmation that re-times a candidate the parent's clock charged or would accuse. */
typedef struct st_round_time {
	int samples;      /* its samples (0: the round did not happen) */
	double median_ms; /* their median, as the runner reported them */
	double floor_ms;  /* the front-loading bound where it binds (batch_mean.h), else median_ms */
	double charge_ms; /* what the parent's clock added (st_clock_bound_charge) */
	int gross;        /* its bound was gross (st_clock_bound_gross) */
} st_round_time;

/* The candidate's time from its main round and the confirmation (NULL, or one without samples:
 * none): each round's estimate is its own floor plus its own charge, and the confirmation can
 * take back the main round's charge, never go below the main round's floor. A round's samples
 * are never paired with another round's charge: a runner that hides work in the main round and
 * behaves when re-timed would keep the main round's small median and the confirmation's empty
 * charge. */
double st_round_time_combine(const st_round_time *main_round, const st_round_time *confirm);

#endif
