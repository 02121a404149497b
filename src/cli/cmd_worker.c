/* `stitch worker --queue redis://...`: the options and exit codes of the Redis queue's worker;
 * its loop (pipelines per GPU, leases, heartbeats, claiming) is src/queue/worker.c. SIGTERM
 * finishes the running jobs and leaves. */
#include "cli.h"
#include "request_cap.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/fs.h"
#include "queue/queue.h"
#include "queue/worker.h"
#include "stitch/stitch.h"
#include "verify_opts.h"

/* The worker's own options; the verify options come from verify_opts.c. */
typedef struct worker_args {
	const char *gpus, *spool, *name;
	int per_gpu, host_workers, keep, spares;
} worker_args;

#define WORKER_ARGS_DEFAULTS {.gpus = "0", .per_gpu = 1, .host_workers = 1, .keep = 48, .spares = 2}

static void own_table(const char **url, double *reclaim_s, double *cap_gib, worker_args *a,
                      st_opt *t)
{
	const st_opt table[] = {
		{ST_OPT_STRING, .name = "queue", 0, url, "URL",
		 "the Redis server (required); rediss:// for TLS, the server's CA\n"
		 "in $STITCH_REDIS_CA (else the system's), a client certificate in\n"
		 "$STITCH_REDIS_CERT and $STITCH_REDIS_KEY"},
		{ST_OPT_STRING, .name = "name", 0, &a->name, "N",
		 "this worker's name in the group; a restart under the same name\n"
		 "takes its unfinished jobs back", .unset = "host name and pid"},
		{ST_OPT_LIST, .name = "gpus", 0, &a->gpus, "LIST", "cuda: GPU indexes, a pipeline each"},
		{ST_OPT_INT, .name = "per-gpu", 0, &a->per_gpu, "N",
		 "cuda: pipelines per GPU (they share the GPU for correctness\n"
		 "runs and take it alone to time, stopping the others'\n"
		 "candidates while they time), 1 to 4096", 1, 4096},
		{ST_OPT_INT, .name = "workers", 0, &a->host_workers, "N",
		 "host backend: pipelines, 1 to 4096", 1, 4096},
		{ST_OPT_DOUBLE, .name = "reclaim-after", 0, reclaim_s, "S",
		 "claim pending jobs of consumers without a heartbeat after S s,\n"
		 "and any job pending longer than 30 minutes; 1 to 4096", 1, 4096},
		{ST_OPT_INT, .name = "keep-runners", 0, &a->keep, "N",
		 "runners kept loaded between jobs, as stitch serve (0: none)", 0, 4096},
		{ST_OPT_INT, .name = "spares", 0, &a->spares, "N",
		 "spare runners kept started per pipeline, 1 to 4096", 1, 4096},
		{ST_OPT_STRING, .name = "spool", 0, &a->spool, "DIR", "where job code is written",
		 .unset = "the cache's spool/"},
		ST_REQUEST_CAP_OPT(cap_gib),
		{ST_OPT_END},
	};
	memcpy(t, table, sizeof table);
}

static const st_opt_conflict conflicts[] = {{"no-timing", "time-set"}, {NULL, NULL}};

/* A queue's verdict is a trainer's or a sweep's: serve's defaults (docs/serve.md). */
static void worker_verify_defaults(st_verify_opts *vo)
{
	st_verify_opts_default(vo);
	vo->profile = 0;
	vo->stop.min_time_ms = 100;
	vo->stop.max_rse = 0.01;
}

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: stitch worker --queue redis[s]://[:PASSWORD@]HOST[:PORT][/DB] [options]\n\n"
	        "Take verify jobs from the Redis queue (`stitch queue submit`, `stitch serve --queue`)\n"
	        "and answer them: one pipeline per GPU, each a consumer of the queue's group that\n"
	        "reads only the jobs of this machine's arch. A job's result is stored before the job\n"
	        "is acknowledged; jobs of a worker that died are claimed by the living (docs/queue.md).\n\n"
	        "options:\n");
	const char *url = NULL;
	double reclaim_s = 10;
	worker_args wa = WORKER_ARGS_DEFAULTS;
	double cap_gib = st_cli_request_cap_default_gib();
	st_opt own[12];
	own_table(&url, &reclaim_s, &cap_gib, &wa, own);
	st_opt_usage(f, own);
	fprintf(f,
	        "verify options for every job (the worker's own defaults, as stitch serve's:\n"
	        "--min-time 100 --max-rse 0.01, no profile; a job's options override them):\n");
	st_verify_opts vo;
	worker_verify_defaults(&vo);
	st_verify_opts_usage(f, &vo);
	fprintf(f, "\nexit: 0 after SIGTERM/SIGINT (running jobs finished), 2 bad options,\n"
	        "      3 no Redis, no GPU\n");
}

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

int cmd_worker(int argc, char **argv)
{
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	st_worker_opts wo;
	memset(&wo, 0, sizeof wo);
	worker_verify_defaults(&wo.vo);
	double reclaim_s = 10;
	wo.stale_s = 1800;
	wo.lease_s = 10;
	worker_args wa = WORKER_ARGS_DEFAULTS;
	int quiet = 0, n_pos;
	double cap_gib = st_cli_request_cap_default_gib();
	st_opt own[12], ver[ST_VERIFY_OPT_N];
	own_table(&wo.url, &reclaim_s, &cap_gib, &wa, own);
	st_verify_opt_table(&wo.vo, &quiet, 0, ver);
	const st_opt *const tables[] = {own, ver, NULL};
	if (st_cli_parse("worker", tables, conflicts, argc, argv, NULL, 0, &n_pos))
		return ST_EXIT_USAGE;
	wo.reclaim_s = reclaim_s;
	wo.vo.max_request_bytes = st_cli_request_cap_bytes(cap_gib);
	wo.gpus = wa.gpus;
	wo.per_gpu = wa.per_gpu;
	wo.host_workers = wa.host_workers;
	wo.keep = wa.keep;
	wo.spares = wa.spares;
	if (!wo.url) {
		st_cli_error("worker: --queue redis://HOST:PORT is required");
		return ST_EXIT_USAGE;
	}
	st_queue q;
	st_err err;
	st_status s = st_queue_open(wo.url, &q, &err);
	if (s) {
		st_cli_error("worker: %s", err.msg);
		return s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
	}
	st_queue_close(&q);
	char host[128] = "host", name[160];
	gethostname(host, sizeof host);
	host[sizeof host - 1] = 0;
	if (wa.name)
		snprintf(name, sizeof name, "%s", wa.name);
	else
		snprintf(name, sizeof name, "%s-%ld", host, (long)getpid());
	if (strchr(name, '/')) {
		st_cli_error("worker: --name %s: no '/' (it separates the pipelines' names)", name);
		return ST_EXIT_USAGE;
	}
	wo.name = name;
	char cache[PATH_MAX], spool[PATH_MAX + 16] = "";
	if (wa.spool)
		snprintf(spool, sizeof spool, "%s", wa.spool);
	else if (!st_cache_dir(cache, sizeof cache, &err))
		snprintf(spool, sizeof spool, "%s/spool", cache);
	wo.spool = spool;
	wo.tasks_root = st_cli_tasks_root();
	wo.stop = &g_stop;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	s = st_worker_run(&wo, NULL, NULL, &err);
	if (s) {
		st_cli_error("worker: %s", err.msg);
		return s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
	}
	return ST_EXIT_OK;
}
