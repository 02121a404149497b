/* A bench sweep through the queue (`stitch bench --queue`): every job submitted at once (held
 * back while the queue is full), the results gathered in the order of the jobs, as the local
 * sweep (src/bench/sweep.h) hands them out, so the same progress, tables and store follow. */
#ifndef ST_QUEUE_SWEEP_H
#define ST_QUEUE_SWEEP_H

#include "bench/sweep.h"

/* arch: the stream the jobs go to ("sm_90a", "host"); trusted: the solutions are the tasks' own
 * (the bundled experts), which workers check byte for byte. Options from o: sets, seeds,
 * timing, profile and the stop rule. */
st_status st_queue_sweep(const char *url, const char *arch, const st_bench_job *jobs, int n,
                         const st_verify_opts *o, int trusted, st_bench_progress_fn progress,
                         void *arg, json_t **verdicts, st_err *err);

#endif
