/* `stitch worker --queue redis://...`: one process per host that takes verify jobs from the
 * Redis queue (src/queue) and answers them, one pipeline per GPU (or per --workers on the host
 * backend). Each pipeline is a consumer of the group: it reads its own pending jobs first (a
 * restart under the same name finds them), then new ones; it works on a job only under a lease,
 * stores the result, and only then acknowledges the job. A heartbeat thread keeps the consumers'
 * heartbeats and the leases of running jobs alive; pending jobs of consumers whose heartbeat
 * expired are claimed. SIGTERM finishes the running jobs and leaves. */
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

#include "common/clock.h"
#include "common/fs.h"
#include "queue/queue.h"
#include "stitch/stitch.h"
#include "task/task.h"
#include "verify/gpu_share.h"
#include "verify/peaks.h"
#include "verify/runner_client.h"
#include "verify/runner_pool.h"
#include "verify/shm_cache.h"
#include "verify_opts.h"

#define MAX_PIPES 64

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
		 "runs and take it alone to time), 1 to 4096", 1, 4096},
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

typedef struct pipe_ctx {
	struct worker *w;
	int index;
	char consumer[192];
	char devices[16];
	pthread_rwlock_t *gpu_lock;
	pthread_mutex_t mu;
	char current[65];     /* the job it works on ("" when idle): its lease is kept alive */
	long done, duplicates;
	st_shm_cache *shm;    /* its verifies' shared-memory blocks, kept between jobs (or NULL) */
} pipe_ctx;

typedef struct worker {
	const char *url;
	char name[160];
	char arch[32];
	st_verify_opts vo;
	int n_pipes;
	pipe_ctx pipes[MAX_PIPES];
	pthread_rwlock_t locks[MAX_PIPES];
	int n_locks;
	st_runner_pool *pool;
	char spool[PATH_MAX + 16];
	double reclaim_s, stale_s, lease_s;
	double t0;
	volatile int hb_stop;  /* the heartbeats go on until the last running job is answered */
} worker;

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

static void say(const worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const worker *w, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fprintf(stderr, "worker %s: %s\n", w->name, line);
}

/* A job may ask to run trusted (linking what the task's own solutions link: a bench of the
 * shipped experts) only for code that is one of those solutions, byte for byte. */
static int is_shipped(const char *task_dir, const char *code, int host)
{
	st_task t;
	st_err err;
	if (st_task_load(task_dir, &t, &err))
		return 0;
	const char *files[8] = {st_task_reference(&t, host), host ? t.host_expert : NULL};
	int n = 2;
	for (int i = 0; !host && i < t.n_experts && n < 8; i++)
		files[n++] = t.experts[i];
	int same = 0;
	for (int i = 0; i < n && !same; i++) {
		char *data = NULL;
		size_t len = 0;
		if (files[i] && !st_read_file(files[i], &data, &len, &err))
			same = len == strlen(code) && !memcmp(data, code, len);
		free(data);
	}
	st_task_free(&t);
	return same;
}

/* One job: its code into the spool, the verify, the result object. */
static json_t *run_job(pipe_ctx *p, const st_queue_entry *e)
{
	worker *w = p->w;
	double t0 = st_now_s();
	const json_t *job = e->job;
	const char *task = json_string_value(json_object_get(job, "task"));
	const char *code = json_string_value(json_object_get(job, "code"));
	json_t *result = json_pack("{s:s,s:s}", "id", e->id, "worker", p->consumer);
	char task_dir[PATH_MAX], path[PATH_MAX + 80];
	st_err err;
	st_status s = !task || !code ? st_err_set(&err, ST_E_INVALID, "a job needs task and code")
	                             : st_task_resolve(task, st_cli_tasks_root(), task_dir,
	                                               sizeof task_dir, &err);
	if (!s) {
		snprintf(path, sizeof path, "%s/%s.%s", w->spool, e->id,
		         strcmp(w->vo.backend, "host") ? "cu" : "c");
		s = st_file_exists(path) ? ST_OK : st_write_file_atomic(path, code, strlen(code), &err);
	}
	json_t *verdict = NULL;
	if (!s) {
		st_verify_opts o = w->vo;
		o.devices = p->devices[0] ? p->devices : NULL;
		o.gpu_lock = p->gpu_lock;
		o.runner_pool = w->pool;
		o.shm_cache = p->shm;
		if (!o.arch && strcmp(o.backend, "host"))
			o.arch = w->arch;
		st_verify_opts_apply(&o, json_object_get(job, "options"));
		if (json_is_true(json_object_get(job, "trusted"))) {
			if (is_shipped(task_dir, code, !strcmp(o.backend, "host")))
				o.candidate_trusted = 1;
			else
				s = st_err_set(&err, ST_E_INVALID, "a trusted job must be one of the task's "
				               "shipped solutions, byte for byte");
		}
		if (!s)
			s = st_verify(task_dir, path, &o, &verdict, &err);
	}
	if (s) {
		/* Bad input is the job's answer; a broken machine's too, said as such, so that no
		 * producer waits for ever on a job no worker can do. */
		json_object_set_new(result, "status", json_string("error"));
		json_object_set_new(result, "error", json_string(err.msg));
		json_object_set_new(result, "bad_input", json_boolean(s == ST_E_INVALID));
		json_decref(verdict);
	} else {
		json_object_set(result, "status", json_object_get(verdict, "status"));
		json_object_set_new(result, "verdict", verdict);
	}
	json_object_set_new(result, "seconds", json_real(st_now_s() - t0));
	return result;
}

static void *pipe_main(void *arg)
{
	pipe_ctx *p = arg;
	worker *w = p->w;
	st_queue q;
	st_err err;
	if (st_queue_open(w->url, &q, &err)) {
		say(w, "%s", err.msg);
		return NULL;
	}
	q.retry_s = 1e9; /* a worker waits for Redis to come back, however long */
	if (st_queue_group(&q, w->arch, &err))
		say(w, "%s", err.msg);
	p->shm = st_shm_cache_new();
	double last_reclaim = 0;
	while (!g_stop) {
		if (st_now_s() - last_reclaim > 2) {
			int n = 0;
			if (!st_queue_reclaim(&q, w->arch, p->consumer, w->reclaim_s, w->stale_s, &n, &err) &&
			    n)
				say(w, "%s claimed %d job%s of a consumer that stopped", p->consumer, n,
				    n == 1 ? "" : "s");
			last_reclaim = st_now_s();
		}
		st_queue_entry e[4];
		int n = 0;
		if (st_queue_take(&q, w->arch, p->consumer, 1.0, e, 4, &n, &err)) {
			say(w, "%s", err.msg);
			sleep(1);
			continue;
		}
		int worked = 0;
		for (int i = 0; i < n; i++) {
			int state = 1;
			if (!g_stop && !st_queue_begin(&q, w->arch, &e[i], p->consumer, w->lease_s, &state,
			                               &err)) {
				if (state == 2) {
					st_queue_ack(&q, w->arch, &e[i], &err);
					p->duplicates++;
				} else if (state == 0) {
					pthread_mutex_lock(&p->mu);
					snprintf(p->current, sizeof p->current, "%s", e[i].id);
					pthread_mutex_unlock(&p->mu);
					json_t *result = run_job(p, &e[i]);
					int stored = !st_queue_finish(&q, w->arch, &e[i], result, &err);
					if (!stored)
						say(w, "storing the result of %.12s: %s", e[i].id, err.msg);
					json_decref(result);
					pthread_mutex_lock(&p->mu); /* the heartbeat reads both */
					p->done += stored;
					p->current[0] = 0;
					pthread_mutex_unlock(&p->mu);
					worked = 1;
				}
			}
			st_queue_entry_free(&e[i]);
		}
		/* Only entries another consumer holds a lease on: they come back; do not spin. */
		if (n && !worked)
			usleep(200000);
	}
	st_queue_forget(&q, w->arch, p->consumer, &err);
	st_queue_close(&q);
	st_shm_cache_free(p->shm);
	p->shm = NULL;
	return NULL;
}

static void *heartbeat_main(void *arg)
{
	worker *w = arg;
	st_queue q;
	st_err err;
	int open = !st_queue_open(w->url, &q, &err);
	while (open && !w->hb_stop) {
		for (int i = 0; i < w->n_pipes; i++) {
			pipe_ctx *p = &w->pipes[i];
			char current[65];
			pthread_mutex_lock(&p->mu);
			snprintf(current, sizeof current, "%s", p->current);
			long done = p->done;
			pthread_mutex_unlock(&p->mu);
			json_t *info = json_pack("{s:s,s:s,s:s,s:s,s:I,s:s?,s:f}", "name", p->consumer,
			                         "worker", w->name, "arch", w->arch, "device",
			                         p->devices[0] ? p->devices : "host", "done",
			                         (json_int_t)done, "job", current[0] ? current : NULL,
			                         "uptime_s", st_now_s() - w->t0);
			const char *leases[1] = {current};
			st_queue_heartbeat(&q, p->consumer, info, leases, current[0] ? 1 : 0,
			                   w->lease_s, &err);
			json_decref(info);
		}
		for (int k = 0; k < 20 && !w->hb_stop; k++)
			usleep(100000);
	}
	if (open)
		st_queue_close(&q);
	return NULL;
}

/* The arch of the first GPU, from a runner's hello (the worker's jobs stream). */
static int probe_arch(worker *w, const char *devices)
{
	if (w->vo.arch) {
		snprintf(w->arch, sizeof w->arch, "%s", w->vo.arch);
		return 0;
	}
	st_err err, ignore;
	if (st_device_probe(w->vo.backend, 0, devices, 0, w->arch, sizeof w->arch, NULL, 0, &ignore,
	                    &err)) {
		st_cli_error("worker: %s", err.msg);
		return -1;
	}
	return w->arch[0] ? 0 : -1;
}

static int add_pipes(worker *w, const char *gpus, int per_gpu, int host_workers)
{
	if (!strcmp(w->vo.backend, "host")) {
		for (int i = 0; i < host_workers && w->n_pipes < MAX_PIPES; i++) {
			pipe_ctx *p = &w->pipes[w->n_pipes];
			p->devices[0] = 0;
			snprintf(p->consumer, sizeof p->consumer, "%s/%d", w->name, i);
			w->n_pipes++;
		}
		return 0;
	}
	const char *c = gpus;
	long g;
	int more;
	while ((more = st_gpu_list_next(&c, &g)) > 0) {
		pthread_rwlock_t *lock = NULL;
		if (per_gpu > 1) {
			lock = &w->locks[w->n_locks];
			int rc = st_gpu_lock_init(lock);
			if (rc) {
				st_cli_error("worker: the lock of GPU %ld: %s", g, strerror(rc));
				return -1;
			}
			w->n_locks++;
		}
		for (int k = 0; k < per_gpu; k++) {
			if (w->n_pipes == MAX_PIPES) {
				st_cli_error("worker: at most %d pipelines", MAX_PIPES);
				return -1;
			}
			pipe_ctx *p = &w->pipes[w->n_pipes++];
			snprintf(p->devices, sizeof p->devices, "%ld", g);
			snprintf(p->consumer, sizeof p->consumer, "%s/gpu%ld.%d", w->name, g, k);
			p->gpu_lock = lock;
		}
	}
	if (more < 0) {
		st_cli_error("worker: --gpus %s: not a comma list of GPU indexes", gpus);
		return -1;
	}
	return 0;
}

int cmd_worker(int argc, char **argv)
{
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	static worker w;
	memset(&w, 0, sizeof w);
	worker_verify_defaults(&w.vo);
	w.reclaim_s = 10;
	w.stale_s = 1800;
	w.lease_s = 10;
	worker_args wa = WORKER_ARGS_DEFAULTS;
	int quiet = 0, n_pos;
	double cap_gib = st_cli_request_cap_default_gib();
	st_opt own[12], ver[ST_VERIFY_OPT_N];
	own_table(&w.url, &w.reclaim_s, &cap_gib, &wa, own);
	st_verify_opt_table(&w.vo, &quiet, 0, ver);
	const st_opt *const tables[] = {own, ver, NULL};
	if (st_cli_parse("worker", tables, conflicts, argc, argv, NULL, 0, &n_pos))
		return ST_EXIT_USAGE;
	w.vo.max_request_bytes = st_cli_request_cap_bytes(cap_gib);
	const char *gpus = wa.gpus, *spool = wa.spool, *name = wa.name;
	int per_gpu = wa.per_gpu, host_workers = wa.host_workers, keep = wa.keep,
	    spares = wa.spares;
	if (!w.url) {
		st_cli_error("worker: --queue redis://HOST:PORT is required");
		return ST_EXIT_USAGE;
	}
	st_queue q;
	st_err err;
	st_status s = st_queue_open(w.url, &q, &err);
	if (s) {
		st_cli_error("worker: %s", err.msg);
		return s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
	}
	st_queue_close(&q);
	char host[128] = "host";
	gethostname(host, sizeof host);
	host[sizeof host - 1] = 0;
	if (name)
		snprintf(w.name, sizeof w.name, "%s", name);
	else
		snprintf(w.name, sizeof w.name, "%s-%ld", host, (long)getpid());
	if (strchr(w.name, '/')) {
		st_cli_error("worker: --name %s: no '/' (it separates the pipelines' names)", w.name);
		return ST_EXIT_USAGE;
	}
	if (!strcmp(w.vo.backend, "host"))
		snprintf(w.arch, sizeof w.arch, "host");
	if (add_pipes(&w, gpus, per_gpu, host_workers))
		return ST_EXIT_USAGE;
	if (strcmp(w.vo.backend, "host") && probe_arch(&w, w.pipes[0].devices))
		return ST_EXIT_ENV;
	char cache[PATH_MAX];
	if (spool)
		snprintf(w.spool, sizeof w.spool, "%s", spool);
	else if (!st_cache_dir(cache, sizeof cache, &err))
		snprintf(w.spool, sizeof w.spool, "%s/spool", cache);
	if (st_mkdirs(w.spool, &err)) {
		st_cli_error("worker: %s", err.msg);
		return ST_EXIT_ENV;
	}
	w.pool = keep > 0 ? st_runner_pool_new(spares * per_gpu, keep) : NULL;
	w.t0 = st_now_s();
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	say(&w, "%d pipeline%s on %s jobs from %s", w.n_pipes, w.n_pipes == 1 ? "" : "s", w.arch,
	    w.url);
	pthread_t threads[MAX_PIPES], hb;
	int started[MAX_PIPES] = {0};
	int hb_started = pthread_create(&hb, NULL, heartbeat_main, &w) == 0;
	for (int i = 0; i < w.n_pipes; i++) {
		w.pipes[i].w = &w;
		w.pipes[i].index = i;
		pthread_mutex_init(&w.pipes[i].mu, NULL);
		started[i] = pthread_create(&threads[i], NULL, pipe_main, &w.pipes[i]) == 0;
	}
	long done = 0, dups = 0;
	for (int i = 0; i < w.n_pipes; i++) {
		if (started[i])
			pthread_join(threads[i], NULL);
		done += w.pipes[i].done;
		dups += w.pipes[i].duplicates;
	}
	w.hb_stop = 1;
	if (hb_started)
		pthread_join(hb, NULL);
	st_runner_pool_free(w.pool);
	for (int i = 0; i < w.n_locks; i++)
		pthread_rwlock_destroy(&w.locks[i]);
	say(&w, "stopped: %ld jobs done, %ld duplicate deliveries acknowledged", done, dups);
	return ST_EXIT_OK;
}
