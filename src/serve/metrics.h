/* The service's counters and latencies, rendered as Prometheus text for GET /metrics. Every
 * function is thread-safe. */
#ifndef ST_SERVE_METRICS_H
#define ST_SERVE_METRICS_H

#include <stddef.h>

#include "verify/runner_pool.h"

typedef struct st_serve_metrics st_serve_metrics;

st_serve_metrics *st_serve_metrics_new(int workers);
void st_serve_metrics_free(st_serve_metrics *m);

/* An HTTP answer with this status code, `seconds` after its request arrived (admitted POSTs
 * only count their latency; pass a negative value for the others). */
void st_serve_metrics_answer(st_serve_metrics *m, int code, double seconds);
/* A verdict with this status (ok, incorrect, ...), and one answered from the store. */
void st_serve_metrics_verdict(st_serve_metrics *m, const char *status);
void st_serve_metrics_stored(st_serve_metrics *m);
/* Worker w spent `seconds` verifying. */
void st_serve_metrics_busy(st_serve_metrics *m, int w, double seconds);

typedef struct st_serve_gauges {
	int compile_queue, run_queue, judge_queue, inflight, waiting, draining;
	double uptime_s;
	const char *const *worker_labels; /* per worker: the GPU index, or "host" */
	st_runner_pool_stats pool;        /* runners kept between requests */
} st_serve_gauges;

/* The exposition text (allocated), or NULL when out of memory. */
char *st_serve_metrics_text(st_serve_metrics *m, const st_serve_gauges *g);

#endif
