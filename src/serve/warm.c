/* stitch serve --warm: the references, experts and hooks of some tasks compiled into the compile
 * cache before the service takes its first request. Each task's baselines are compiled once and
 * for all, but a cold service compiles them inside its first requests, one after the other and
 * behind the candidate's own compile (identical code waits for one compile of its key), so the
 * first answers of every task wait for three nvcc runs instead of one. */
#include "warm.h"

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
		return st_task_list(o->tasks_root, dirs, n, err);
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
		if (st_task_resolve(id, o->tasks_root, dir, sizeof dir, err))
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
