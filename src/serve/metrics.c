/* Prometheus exposition of the service's figures: answers by HTTP code, verdicts by status,
 * answers served from the store, queue depths, per-worker busy ratio, and the latency of
 * admitted requests as a summary (p50, p90, p99 over the last LAT_WINDOW answers, plus sum and
 * count over all). */
#include "metrics.h"

#include "common/buf.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAT_WINDOW 4096
#define N_CODES 16
#define N_STATUS 16

struct st_serve_metrics {
	pthread_mutex_t mu;
	int codes[N_CODES];
	long code_n[N_CODES];
	char status[N_STATUS][32];
	long status_n[N_STATUS];
	long stored;
	double lat[LAT_WINDOW];
	long lat_n;            /* all latencies seen; the window holds the last min(n, LAT_WINDOW) */
	double lat_sum;
	int workers;
	double *busy;
};

st_serve_metrics *st_serve_metrics_new(int workers)
{
	st_serve_metrics *m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	m->busy = calloc((size_t)(workers > 0 ? workers : 1), sizeof *m->busy);
	if (!m->busy) {
		free(m);
		return NULL;
	}
	m->workers = workers;
	pthread_mutex_init(&m->mu, NULL);
	return m;
}

void st_serve_metrics_free(st_serve_metrics *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->mu);
	free(m->busy);
	free(m);
}

void st_serve_metrics_answer(st_serve_metrics *m, int code, double seconds)
{
	pthread_mutex_lock(&m->mu);
	for (int i = 0; i < N_CODES; i++)
		if (m->codes[i] == code || !m->codes[i]) {
			m->codes[i] = code;
			m->code_n[i]++;
			break;
		}
	if (seconds >= 0) {
		m->lat[m->lat_n % LAT_WINDOW] = seconds;
		m->lat_n++;
		m->lat_sum += seconds;
	}
	pthread_mutex_unlock(&m->mu);
}

void st_serve_metrics_verdict(st_serve_metrics *m, const char *status)
{
	pthread_mutex_lock(&m->mu);
	for (int i = 0; i < N_STATUS; i++)
		if (!m->status[i][0] || !strcmp(m->status[i], status)) {
			snprintf(m->status[i], sizeof m->status[i], "%s", status);
			m->status_n[i]++;
			break;
		}
	pthread_mutex_unlock(&m->mu);
}

void st_serve_metrics_stored(st_serve_metrics *m)
{
	pthread_mutex_lock(&m->mu);
	m->stored++;
	pthread_mutex_unlock(&m->mu);
}

void st_serve_metrics_busy(st_serve_metrics *m, int w, double seconds)
{
	if (w < 0 || w >= m->workers)
		return;
	pthread_mutex_lock(&m->mu);
	m->busy[w] += seconds;
	pthread_mutex_unlock(&m->mu);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

char *st_serve_metrics_text(st_serve_metrics *m, const st_serve_gauges *g)
{
	st_buf b = {0};
	pthread_mutex_lock(&m->mu);
	st_buf_printf(&b, "# HELP stitch_serve_answers_total HTTP answers by status code.\n"
	                  "# TYPE stitch_serve_answers_total counter\n");
	for (int i = 0; i < N_CODES && m->codes[i]; i++)
		st_buf_printf(&b, "stitch_serve_answers_total{code=\"%d\"} %ld\n", m->codes[i],
		              m->code_n[i]);
	st_buf_printf(&b, "# HELP stitch_serve_verdicts_total Verdicts by status.\n"
	                  "# TYPE stitch_serve_verdicts_total counter\n");
	for (int i = 0; i < N_STATUS && m->status[i][0]; i++)
		st_buf_printf(&b, "stitch_serve_verdicts_total{status=\"%s\"} %ld\n", m->status[i],
		              m->status_n[i]);
	st_buf_printf(&b, "# HELP stitch_serve_stored_answers_total Answers served from the store "
	                  "(a request id seen before).\n"
	                  "# TYPE stitch_serve_stored_answers_total counter\n"
	                  "stitch_serve_stored_answers_total %ld\n", m->stored);
	long n = m->lat_n < LAT_WINDOW ? m->lat_n : LAT_WINDOW;
	double *sorted = n ? malloc((size_t)n * sizeof *sorted) : NULL;
	if (sorted) {
		memcpy(sorted, m->lat, (size_t)n * sizeof *sorted);
		qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
	}
	st_buf_printf(&b, "# HELP stitch_serve_latency_seconds Admission to answer of verify and "
	                  "reward requests (quantiles over the last %d).\n"
	                  "# TYPE stitch_serve_latency_seconds summary\n", LAT_WINDOW);
	static const double qs[] = {0.5, 0.9, 0.99};
	for (int i = 0; sorted && i < 3; i++)
		st_buf_printf(&b, "stitch_serve_latency_seconds{quantile=\"%g\"} %.6f\n", qs[i],
		              sorted[(long)(qs[i] * (double)(n - 1) + 0.5)]);
	st_buf_printf(&b, "stitch_serve_latency_seconds_sum %.6f\n"
	                  "stitch_serve_latency_seconds_count %ld\n", m->lat_sum, m->lat_n);
	free(sorted);
	st_buf_printf(&b, "# HELP stitch_serve_worker_busy_ratio Share of the uptime a worker spent "
	                  "verifying (its GPU's share, as far as the service keeps it busy).\n"
	                  "# TYPE stitch_serve_worker_busy_ratio gauge\n");
	for (int w = 0; w < m->workers; w++)
		st_buf_printf(&b, "stitch_serve_worker_busy_ratio{worker=\"%d\",gpu=\"%s\"} %.4f\n", w,
		              g->worker_labels ? g->worker_labels[w] : "",
		              g->uptime_s > 0 ? m->busy[w] / g->uptime_s : 0);
	pthread_mutex_unlock(&m->mu);
	st_buf_printf(&b, "# HELP stitch_serve_queue_depth Requests waiting per stage.\n"
	                  "# TYPE stitch_serve_queue_depth gauge\n"
	                  "stitch_serve_queue_depth{stage=\"compile\"} %d\n"
	                  "stitch_serve_queue_depth{stage=\"run\"} %d\n"
	                  "stitch_serve_queue_depth{stage=\"judge\"} %d\n"
	                  "# HELP stitch_serve_inflight Admitted requests not yet answered.\n"
	                  "# TYPE stitch_serve_inflight gauge\nstitch_serve_inflight %d\n"
	                  "# HELP stitch_serve_waiting_clients Clients waiting for an answer.\n"
	                  "# TYPE stitch_serve_waiting_clients gauge\n"
	                  "stitch_serve_waiting_clients %d\n"
	                  "# HELP stitch_serve_draining 1 while draining after SIGTERM.\n"
	                  "# TYPE stitch_serve_draining gauge\nstitch_serve_draining %d\n"
	                  "# HELP stitch_serve_uptime_seconds Seconds since the service started.\n"
	                  "# TYPE stitch_serve_uptime_seconds gauge\n"
	                  "stitch_serve_uptime_seconds %.1f\n",
	              g->compile_queue, g->run_queue, g->judge_queue, g->inflight, g->waiting,
	              g->draining, g->uptime_s);
	st_buf_printf(&b, "# HELP stitch_serve_runners_kept Runners kept between requests: spares "
	                  "(started ahead) and loaded (a reference or expert ready).\n"
	                  "# TYPE stitch_serve_runners_kept gauge\n"
	                  "stitch_serve_runners_kept{kind=\"spare\"} %d\n"
	                  "stitch_serve_runners_kept{kind=\"loaded\"} %d\n"
	                  "# HELP stitch_serve_runner_takes_total Verifies that asked the pool for a "
	                  "runner, by kind and whether one was there.\n"
	                  "# TYPE stitch_serve_runner_takes_total counter\n"
	                  "stitch_serve_runner_takes_total{kind=\"spare\",found=\"yes\"} %ld\n"
	                  "stitch_serve_runner_takes_total{kind=\"spare\",found=\"no\"} %ld\n"
	                  "stitch_serve_runner_takes_total{kind=\"loaded\",found=\"yes\"} %ld\n"
	                  "stitch_serve_runner_takes_total{kind=\"loaded\",found=\"no\"} %ld\n",
	              g->pool.spares, g->pool.loaded, g->pool.spare_hits, g->pool.spare_misses,
	              g->pool.loaded_hits, g->pool.loaded_misses);
	if (b.oom || !b.p) {
		st_buf_free(&b);
		return NULL;
	}
	return b.p;
}
