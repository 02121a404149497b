/* The timing types of the public API: one timed sample as a runner reports it, and the rule
 * that says when enough samples were taken (st_verify_opts.stop). The statistics over samples
 * are in src/verify/stats.h. */
#ifndef STITCH_TIMING_H
#define STITCH_TIMING_H

typedef struct st_sample {
	double ms;      /* CUDA event time on the solution's stream (host backend: wall time) */
	double wall_ms; /* host wall time from launch to whole-device sync */
	int sm_mhz;     /* SM clock read right after the sample; 0 when unknown */
	int throttled;  /* the driver reported a throttle reason other than idle during the sample */
	double cpu_ms;  /* the runner thread's CPU time during the call (host backend), -1 where not
	                 * measured; the parent believes it only from a trusted runner */
} st_sample;

typedef struct st_stop_rule {
	int min_samples;      /* default 10 */
	int max_samples;      /* cap, default 20000 */
	double min_time_ms;   /* GPU time that must be gathered, default 300 */
	double max_rse;       /* on the median's relative standard error, default 0.005 */
	double max_wall_ms;   /* cap on wall time spent timing one solution, default 4000 */
} st_stop_rule;

#endif
