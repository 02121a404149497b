/* The loop of `stitch worker` (src/cli/cmd_worker.c keeps its options and exit codes): one
 * process per host that takes verify jobs from the Redis queue and answers them, one pipeline per
 * GPU (or per --workers on the host backend). Each pipeline is a consumer of the group: it reads
 * its own pending jobs first (a restart under the same name finds them), then new ones; it works
 * on a job only under a lease, stores the result, and only then acknowledges the job. A
 * heartbeat thread keeps the consumers' heartbeats and the leases of running jobs alive; pending
 * jobs of consumers whose heartbeat expired are claimed. A stop finishes the running jobs and
 * leaves. */
#include "queue/worker.h"

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fs.h"
#include "queue/queue.h"
#include "task/task.h"
#include "verify/peaks.h"
#include "verify/shm_cache.h"
#include "verify/verify_env.h"

#define MAX_PIPES ST_VERIFY_ENV_MAX

typedef struct pipe_ctx {
	struct worker *w;
	int index;            /* its slot in the worker's verify environment */
	char consumer[192];
	pthread_mutex_t mu;
	char current[65];     /* the job it works on ("" when idle): its lease is kept alive */
	long done, duplicates;
	st_shm_cache *shm;    /* its verifies' shared-memory blocks, kept between jobs (or NULL) */
} pipe_ctx;

typedef struct worker {
	const char *url;
	const char *tasks_root;
	char name[160];
	char arch[32];
	st_verify_opts vo;
	int n_pipes;
	pipe_ctx pipes[MAX_PIPES];
	st_verify_env env;    /* per pipeline its GPU and the GPU's lock; the runner pool */
	char spool[PATH_MAX + 16];
	double reclaim_s, stale_s, lease_s;
	double t0;
	volatile sig_atomic_t *stop;
	volatile int hb_stop;  /* the heartbeats go on until the last running job is answered */
} worker;

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
	                             : st_task_resolve(task, w->tasks_root, task_dir,
	                                               sizeof task_dir, &err);
	if (!s) {
		snprintf(path, sizeof path, "%s/%s.%s", w->spool, e->id,
		         strcmp(w->vo.backend, "host") ? "cu" : "c");
		s = st_file_exists(path) ? ST_OK : st_write_file_atomic(path, code, strlen(code), &err);
	}
	json_t *verdict = NULL;
	if (!s) {
		st_verify_opts o = w->vo;
		st_verify_slot slot;
		st_verify_env_slot(&w->env, p->index, p->shm, &slot);
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
			s = st_verify(task_dir, path, &o, &slot, &verdict, &err);
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
	while (!*w->stop) {
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
			if (!*w->stop && !st_queue_begin(&q, w->arch, &e[i], p->consumer, w->lease_s, &state,
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
			                         w->env.devices[i][0] ? w->env.devices[i] : "host", "done",
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
static st_status probe_arch(worker *w, const char *devices, st_err *err)
{
	if (w->vo.arch) {
		snprintf(w->arch, sizeof w->arch, "%s", w->vo.arch);
		return ST_OK;
	}
	st_err ignore;
	if (st_device_probe(w->vo.backend, 0, devices, 0, w->arch, sizeof w->arch, NULL, 0, &ignore,
	                    err))
		return ST_E_NODEVICE;
	return w->arch[0] ? ST_OK : st_err_set(err, ST_E_NODEVICE, "no arch from the GPU's runner");
}

static st_status add_pipes(worker *w, const st_worker_opts *o, st_err *err)
{
	if (!strcmp(w->vo.backend, "host"))
		st_verify_env_host(&w->env, o->host_workers);
	else {
		st_status s = st_verify_env_gpus(&w->env, o->gpus, o->per_gpu, "pipelines", err);
		if (s)
			return s;
	}
	for (int i = 0; i < w->env.n_slots; i++) {
		pipe_ctx *p = &w->pipes[i];
		if (w->env.devices[i][0])
			snprintf(p->consumer, sizeof p->consumer, "%s/gpu%s.%d", w->name, w->env.devices[i],
			         i % (o->per_gpu > 0 ? o->per_gpu : 1));
		else
			snprintf(p->consumer, sizeof p->consumer, "%s/%d", w->name, i);
	}
	w->n_pipes = w->env.n_slots;
	return ST_OK;
}

/* Set up: the pipelines and their GPUs, the arch, the spool, the runner pool. */
static st_status worker_setup(worker *w, const st_worker_opts *o, st_err *err)
{
	w->url = o->url;
	w->tasks_root = o->tasks_root;
	snprintf(w->name, sizeof w->name, "%s", o->name);
	w->vo = o->vo;
	w->reclaim_s = o->reclaim_s;
	w->stale_s = o->stale_s;
	w->lease_s = o->lease_s;
	w->stop = o->stop;
	if (!strcmp(w->vo.backend, "host"))
		snprintf(w->arch, sizeof w->arch, "host");
	st_status s = add_pipes(w, o, err);
	if (s)
		return s;
	if (strcmp(w->vo.backend, "host") && (s = probe_arch(w, w->env.devices[0], err)))
		return s;
	snprintf(w->spool, sizeof w->spool, "%s", o->spool);
	if (st_mkdirs(w->spool, err))
		return ST_E_IO;
	w->env.pool = o->keep > 0 ? st_runner_pool_new(o->spares * o->per_gpu, o->keep) : NULL;
	return ST_OK;
}

st_status st_worker_run(const st_worker_opts *o, long *done_out, long *dups_out, st_err *err)
{
	static worker w;
	memset(&w, 0, sizeof w);
	st_status s = worker_setup(&w, o, err);
	if (s) {
		st_verify_env_free(&w.env);
		return s;
	}
	w.t0 = st_now_s();
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
	st_verify_env_free(&w.env);
	say(&w, "stopped: %ld jobs done, %ld duplicate deliveries acknowledged", done, dups);
	if (done_out)
		*done_out = done;
	if (dups_out)
		*dups_out = dups;
	return ST_OK;
}
