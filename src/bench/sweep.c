/* A bench sweep: verify a list of (task, solution) jobs one at a time on the GPU while a pool of
 * threads compiles the jobs ahead of it, so nvcc's seconds per file hide behind GPU work. Job k
 * waits until its own files are compiled (or its compile failed, which its verify reports); the
 * compile cache makes the verify's own compile step a lookup. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench/sweep.h"

typedef struct pool {
	const st_bench_job *jobs;
	int n;
	const st_verify_opts *o;
	char arch[32];
	int next;          /* next job to precompile */
	int stop;
	int *done;         /* per job: precompiled (or skipped) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
} pool;

static void *precompile_worker(void *arg)
{
	pool *p = arg;
	pthread_mutex_lock(&p->mu);
	while (!p->stop && p->next < p->n) {
		int k = p->next++;
		pthread_mutex_unlock(&p->mu);
		const st_bench_job *j = &p->jobs[k];
		if (j->solution) {
			st_err e;
			/* failures are the verify's to report */
			(void)st_verify_precompile(j->task_dir, j->solution, p->o, p->arch, &e);
		}
		pthread_mutex_lock(&p->mu);
		p->done[k] = 1;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static void wait_done(pool *p, int k)
{
	pthread_mutex_lock(&p->mu);
	while (!p->done[k])
		pthread_cond_wait(&p->cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

st_status st_bench_sweep(const st_bench_job *jobs, int n, const st_verify_opts *o,
                         const st_verify_slot *slot, int threads, st_bench_progress_fn progress,
                         void *arg, json_t **verdicts, st_err *err)
{
	pool p = {.jobs = jobs, .n = n, .o = o};
	p.done = calloc((size_t)(n ? n : 1), sizeof *p.done);
	if (!p.done)
		return st_err_set(err, ST_E_NOMEM, "bench: out of memory");
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	pthread_t tid[16];
	int started = 0;
	if (threads < 1)
		threads = 1;
	if (threads > 16)
		threads = 16;

	st_status s = ST_OK;
	if (o->arch)
		snprintf(p.arch, sizeof p.arch, "%s", o->arch);
	for (int k = 0; k < n && !s; k++) {
		/* The arch the verifier compiles for is the GPU's own unless --arch says; it is known
		 * once the first verify has asked a runner. Then the pool starts on the rest. */
		if (!started && p.arch[0]) {
			p.next = k;
			for (int t = 0; t < threads; t++)
				if (pthread_create(&tid[started], NULL, precompile_worker, &p) == 0)
					started++;
		}
		if (started)
			wait_done(&p, k);
		if (progress && jobs[k].solution)
			progress(arg, k, n, &jobs[k], NULL);
		json_t *v = NULL;
		if (jobs[k].solution) {
			/* a solution that is not one (no ABI) is a verdict; an error comes with none */
			s = st_verify(jobs[k].task_dir, jobs[k].solution, o, slot, &v, err);
			if (s == ST_E_NODEVICE) {
				json_decref(v);
				break;
			}
			if (s) {
				/* The task or a baseline is broken, not the solution: an "error" row, and the
				 * sweep goes on to the next task. */
				json_decref(v);
				v = json_pack("{s:s,s:s,s:s,s:s}", "status", "error", "reason", err->msg,
				              "task", jobs[k].task_id, "solution", jobs[k].solution);
				s = ST_OK;
			}
			if (!p.arch[0]) {
				const char *a = o->arch ? o->arch : json_string_value(json_object_get(v, "arch"));
				if (a)
					snprintf(p.arch, sizeof p.arch, "%s", a);
			}
		}
		verdicts[k] = v;
		if (progress)
			progress(arg, k, n, &jobs[k], v);
	}
	pthread_mutex_lock(&p.mu);
	p.stop = 1;
	pthread_mutex_unlock(&p.mu);
	for (int t = 0; t < started; t++)
		pthread_join(tid[t], NULL);
	pthread_mutex_destroy(&p.mu);
	pthread_cond_destroy(&p.cv);
	free(p.done);
	return s;
}
