/* A benchmark, not a test: how many runners a host can start and end per second, per GPU and in
 * all, with one GPU busy doing so or several at once. A service starts a fresh runner for every
 * candidate and ends it after, so this rate bounds its verdicts per minute; when two GPUs
 * together start fewer than twice what one does alone, the driver serialises the starts across
 * GPUs and a service cannot scale past that ratio (bench/RESULTS.md).
 * Usage: stitch-bench-runner-starts [--backend cuda|host] [--gpus 0,1] [--threads N]
 *                                   [--seconds S] [--pause P] [--no-sandbox]
 * Each of N threads per GPU starts a runner there (sandboxed, as a service's are), waits for its
 * hello, tells it to quit and waits for it to end, again and again for S seconds (or until
 * SIGTERM or SIGINT), pausing P seconds between (default 0). With a pause it is a paced load:
 * the runner starts of another GPU's service, which keep the driver's host-wide lock as busy on
 * a one-GPU machine as they would on a two-GPU one (scripts/gpu-serve's BUSY_STARTS). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "verify/gpu_share.h"
#include "verify/runner_client.h"

#define MAX_GPUS 16
#define MAX_THREADS 16
#define MAX_STARTS 100000

typedef struct gpu {
	char devices[16];
	pthread_mutex_t mu;
	double start_ms[MAX_STARTS]; /* start to hello */
	double end_ms[MAX_STARTS];   /* quit to the process gone */
	int n, failed;
} gpu;

static const char *g_backend = "cuda";
static int g_flags = ST_RUNNER_SANDBOX;
static double g_until, g_pause;
static volatile sig_atomic_t g_stop;

static void on_stop(int sig)
{
	(void)sig;
	g_stop = 1;
}

static int going(void)
{
	return !g_stop && st_now_s() < g_until;
}

static void *starter(void *arg)
{
	gpu *g = arg;
	while (going()) {
		st_runner r;
		st_err err;
		double t0 = st_now_s();
		int ok = st_runner_start(&r, g_backend, "bench", g_flags, g->devices, &err) == ST_OK &&
		         st_runner_hello(&r, 120, &err) == ST_OK;
		double t1 = st_now_s();
		st_runner_stop(&r);
		double t2 = st_now_s();
		pthread_mutex_lock(&g->mu);
		if (!ok) {
			if (!g->failed++)
				fprintf(stderr, "runner on GPU %s: %s\n", g->devices, err.msg);
		} else if (g->n < MAX_STARTS) {
			g->start_ms[g->n] = (t1 - t0) * 1e3;
			g->end_ms[g->n] = (t2 - t1) * 1e3;
			g->n++;
		}
		pthread_mutex_unlock(&g->mu);
		if (!ok)
			break;
		/* in steps, so that a stop is not kept waiting */
		for (double end = st_now_s() + g_pause; going() && st_now_s() < end;)
			nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
	}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double pct(double *v, int n, double p)
{
	return n ? v[(int)(p * (n - 1))] : 0;
}

int main(int argc, char **argv)
{
	const char *gpus = "0";
	int threads = 2;
	double seconds = 20;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--backend") && i + 1 < argc)
			g_backend = argv[++i];
		else if (!strcmp(argv[i], "--gpus") && i + 1 < argc)
			gpus = argv[++i];
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--pause") && i + 1 < argc)
			g_pause = atof(argv[++i]);
		else if (!strcmp(argv[i], "--no-sandbox"))
			g_flags = 0;
		else {
			fprintf(stderr, "usage: stitch-bench-runner-starts [--backend cuda|host] "
			                "[--gpus 0,1] [--threads N] [--seconds S] [--pause P] "
			                "[--no-sandbox]\n");
			return 2;
		}
	}
	if (threads < 1 || threads > MAX_THREADS || seconds <= 0 || g_pause < 0) {
		fprintf(stderr, "stitch-bench-runner-starts: --threads 1 to %d, --seconds above 0, "
		        "--pause 0 or more\n", MAX_THREADS);
		return 2;
	}
	struct sigaction sa = {.sa_handler = on_stop};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	static gpu g[MAX_GPUS];
	int n_gpus = 0;
	const char *p = gpus;
	long id;
	int more;
	while ((more = st_gpu_list_next(&p, &id)) > 0 && n_gpus < MAX_GPUS) {
		snprintf(g[n_gpus].devices, sizeof g[n_gpus].devices, "%ld", id);
		pthread_mutex_init(&g[n_gpus].mu, NULL);
		n_gpus++;
	}
	if (more < 0 || !n_gpus) {
		fprintf(stderr, "stitch-bench-runner-starts: --gpus wants a list such as 0,1\n");
		return 2;
	}
	pthread_t t[MAX_GPUS][MAX_THREADS];
	double t0 = st_now_s();
	g_until = t0 + seconds;
	for (int k = 0; k < n_gpus; k++)
		for (int i = 0; i < threads; i++)
			if (pthread_create(&t[k][i], NULL, starter, &g[k])) {
				fprintf(stderr, "stitch-bench-runner-starts: cannot start a thread\n");
				return 3;
			}
	for (int k = 0; k < n_gpus; k++)
		for (int i = 0; i < threads; i++)
			pthread_join(t[k][i], NULL);
	double wall = st_now_s() - t0;
	int total = 0, failed = 0;
	for (int k = 0; k < n_gpus; k++) {
		qsort(g[k].start_ms, (size_t)g[k].n, sizeof(double), cmp_double);
		qsort(g[k].end_ms, (size_t)g[k].n, sizeof(double), cmp_double);
		printf("{\"backend\": \"%s\", \"gpu\": %s, \"threads\": %d, \"starts\": %d, "
		       "\"per_s\": %.2f, \"start_ms_p50\": %.0f, \"start_ms_p90\": %.0f, "
		       "\"end_ms_p50\": %.0f, \"end_ms_p90\": %.0f, \"failed\": %d}\n",
		       g_backend, g[k].devices, threads, g[k].n, g[k].n / wall,
		       pct(g[k].start_ms, g[k].n, 0.5), pct(g[k].start_ms, g[k].n, 0.9),
		       pct(g[k].end_ms, g[k].n, 0.5), pct(g[k].end_ms, g[k].n, 0.9), g[k].failed);
		total += g[k].n;
		failed += g[k].failed;
	}
	printf("{\"gpus\": \"%s\", \"threads_per_gpu\": %d, \"seconds\": %.1f, \"starts\": %d, "
	       "\"per_s\": %.2f, \"failed\": %d}\n", gpus, threads, wall, total, total / wall, failed);
	return failed ? 1 : 0;
}
