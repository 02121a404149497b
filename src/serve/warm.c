/* stitch serve --warm: the references, experts and hooks of some tasks compiled into the compile
 * cache before the service takes its first request, then loaded into kept runners on every GPU.
 * Each task's baselines are compiled once and for all, but a cold service compiles them inside
 * its first requests, one after the other and behind the candidate's own compile (identical code
 * waits for one compile of its key), so the first answers of every task wait for three nvcc runs
 * instead of one. Loading is per GPU: a cold service starts and loads each task's reference and
 * expert runners inside that task's first request on each GPU, so a service of N GPUs pays N
 * times what one GPU pays before it runs at speed. */
#include "warm.h"

#include "serve_log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "task/task.h"
#include "stitch/stitch.h"

#define WARM_THREADS_MAX 64

typedef struct warm_ctx {
	const st_serve_opts *o;
	const char *arch;
	char **dirs;
	int n, next, failed;
	pthread_mutex_t mu;
} warm_ctx;

static void *warm_main(void *arg)
{
	warm_ctx *w = arg;
	for (;;) {
		pthread_mutex_lock(&w->mu);
		int i = w->next < w->n ? w->next++ : -1;
		pthread_mutex_unlock(&w->mu);
		if (i < 0)
			return NULL;
		st_err e;
		/* A baseline that does not compile is the verdicts' business (every request of that
		 * task will say so); here it is only reported. */
		if (st_verify_precompile(w->dirs[i], NULL, &w->o->verify, w->arch, &e)) {
			st_serve_log(w->o, "warm: %s: %s", w->dirs[i], e.msg);
			pthread_mutex_lock(&w->mu);
			w->failed++;
			pthread_mutex_unlock(&w->mu);
		}
	}
}

/* The task folders `list` names: "all" (every task under the root) or a comma list of ids. */
static st_status warm_dirs(const st_serve_opts *o, const char *list, char ***dirs, int *n,
                           st_err *err)
{
	*dirs = NULL;
	*n = 0;
	if (!strcmp(list, "all"))
		return st_suite_dirs(o->suite, o->tasks_root, dirs, n, err);
	char *copy = strdup(list), *save = NULL;
	int cap = 1;
	for (const char *p = list; *p; p++)
		cap += *p == ',';
	char **d = calloc((size_t)cap, sizeof *d);
	if (!copy || !d) {
		free(copy);
		free(d);
		return st_err_set(err, ST_E_NOMEM, "--warm: out of memory");
	}
	st_status st = ST_OK;
	int k = 0;
	for (char *id = strtok_r(copy, ",", &save); id && !st; id = strtok_r(NULL, ",", &save)) {
		char dir[4096];
		if (st_suite_resolve(o->suite, id, o->tasks_root, dir, sizeof dir, err))
			st = st_err_wrap(err, ST_E_INVALID, "--warm: task '%s'", id);
		else if (!(d[k++] = strdup(dir)))
			st = st_err_set(err, ST_E_NOMEM, "--warm: out of memory");
	}
	free(copy);
	if (st || !k) {
		st_task_list_free(d, k);
		return st ? st : st_err_set(err, ST_E_INVALID, "--warm: no task named");
	}
	*dirs = d;
	*n = k;
	return ST_OK;
}

st_status st_serve_warm_check(const st_serve_opts *o, st_err *err)
{
	if (!o->warm)
		return ST_OK;
	if (o->queue_url)
		return st_err_set(err, ST_E_INVALID, "--warm compiles for this machine's workers; with "
		                                     "--queue it has none");
	char **dirs;
	int n;
	st_status st = warm_dirs(o, o->warm, &dirs, &n, err);
	if (!st)
		st_task_list_free(dirs, n);
	return st;
}

st_status st_serve_warm(const st_serve_opts *o, const char *arch, int threads, st_err *err)
{
	if (!o->warm || o->verify.no_cache)
		return ST_OK;
	warm_ctx w = {.o = o, .arch = arch};
	st_status st = warm_dirs(o, o->warm, &w.dirs, &w.n, err);
	if (st)
		return st;
	double t0 = st_now_s();
	pthread_mutex_init(&w.mu, NULL);
	if (threads > w.n)
		threads = w.n;
	if (threads > WARM_THREADS_MAX)
		threads = WARM_THREADS_MAX;
	if (threads < 1)
		threads = 1;
	pthread_t tid[WARM_THREADS_MAX];
	int started = 0;
	while (started < threads && !pthread_create(&tid[started], NULL, warm_main, &w))
		started++;
	if (!started)
		warm_main(&w); /* no thread to be had: this one does it all */
	for (int i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	pthread_mutex_destroy(&w.mu);
	st_serve_log(o, "warm: the baselines of %d task%s compiled in %.1f s%s", w.n - w.failed,
	             w.n - w.failed == 1 ? "" : "s", st_now_s() - t0,
	             w.failed ? " (some did not compile: see above)" : "");
	st_task_list_free(w.dirs, w.n);
	return ST_OK;
}

/* A small verify of each task's expert (its reference where it has none), trusted like a shipped
 * solution, so that the pool keeps its reference and its expert loaded for the requests to come.
 * Run by one of the GPU's workers: a runner dies with the thread that started it. */
void st_serve_warm_runners(const st_serve_opts *o, const st_verify_opts *worker,
                           const st_verify_slot *slot)
{
	if (!o->warm || !slot->runner_pool)
		return;
	char **dirs;
	int n, loaded = 0;
	st_err e;
	char where[64];
	snprintf(where, sizeof where, "%s%s", slot->devices ? "GPU " : "the host",
	         slot->devices ? slot->devices : "");
	if (warm_dirs(o, o->warm, &dirs, &n, &e)) { /* checked at start: out of memory */
		st_serve_log(o, "warm: %s: %s", where, e.msg);
		return;
	}
	st_verify_opts vo = *worker;
	/* Enough to load every runner: one size set, one seed, nothing measured. */
	vo.sets = "small";
	vo.time_set = "small";
	vo.seeds = 1;
	vo.timing = 0;
	vo.profile = 0;
	vo.ncu = 0;
	vo.trace_path = NULL;
	vo.dump_path = NULL;
	vo.candidate_trusted = 1;
	st_verify_slot vs = *slot;
	vs.progress = NULL;
	double t0 = st_now_s();
	int host = !strcmp(vo.backend, "host");
	for (int i = 0; i < n; i++) {
		st_task t;
		if (st_task_load(dirs[i], &t, &e)) {
			st_serve_log(o, "warm: %s: %s", dirs[i], e.msg);
			continue;
		}
		const char *path = st_task_expert(&t, host);
		if (!path)
			path = st_task_reference(&t, host);
		json_t *verdict = NULL;
		st_status st = path ? st_verify(dirs[i], path, &vo, &vs, &verdict, &e) : ST_OK;
		const char *status = json_string_value(json_object_get(verdict, "status"));
		if (st)
			st_serve_log(o, "warm: %s on %s: %s", t.id, where, e.msg);
		else if (path && status && strcmp(status, "ok"))
			st_serve_log(o, "warm: %s on %s: %s: %s", t.id, where, status,
			             json_string_value(json_object_get(verdict, "reason")));
		else if (path)
			loaded++;
		json_decref(verdict);
		st_task_free(&t);
	}
	st_serve_log(o, "warm: the baselines of %d task%s loaded on %s in %.1f s", loaded,
	             loaded == 1 ? "" : "s", where, st_now_s() - t0);
	st_task_list_free(dirs, n);
}
