/* Admission, queues and workers of stitch serve. A request becomes a job: stored first (so a
 * restart finds it), then written to the spool and compiled by the CPU pool, verified by one
 * worker per GPU (whose runners see only that GPU), judged by an LLM when the reward asks for a
 * rubric, and answered: the answer is stored, then every client waiting on that id is woken.
 * Jobs are keyed by request id: a second request with the same id and the same content waits
 * for the same job or gets the stored answer; with other content it is a conflict (409). One
 * mutex guards the queues and the in-flight list; the work itself runs outside it. */
#include "service.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agents/agents.h"
#include "common/clock.h"
#include "common/cpus.h"
#include "common/fs.h"
#include "llm/llm.h"
#include "metrics.h"
#include "serve_log.h"
#include "journal.h"
#include "task/task.h"
#include "verify/peaks.h"
#include "verify/runner_client.h"
#include "verify/gpu_share.h"
#include "verify/runner_pool.h"
#include "verify/shm_cache.h"
#include "verify/verify_env.h"
#include "queue/queue.h"
#include "warm.h"

#define ID_MAX 128
#define MAX_WORKERS ST_VERIFY_ENV_MAX
#define MAX_SEEN 256        /* tasks remembered for GPU affinity */
#define AFFINITY_SCAN 32    /* queued jobs a worker looks through for one of its GPU's tasks */
#define AFFINITY_WAIT_S 5.0 /* how much longer than the job it would pass the oldest may wait */

typedef struct job {
	char id[ID_MAX + 1];
	char hash[65];
	char kind[8];            /* "verify" or "reward" */
	json_t *req;             /* the validated request */
	char task_dir[4096];
	char path[4200];         /* the spooled code */
	st_skill skill;
	json_t *verdict;         /* after the run */
	char *answer;            /* the answer's JSON text, once done */
	int http_status;
	int done;
	int refs;                /* 1 for the pipeline until done, +1 per waiting client */
	double t_in, t_start;    /* admission and start of the run (monotonic) */
	double t_queued;         /* when it entered its present queue */
	struct job *next;        /* in a queue */
	struct job *all_next;    /* in the in-flight list */
} job;

typedef struct jqueue {
	job *head, *tail;
	int n;
} jqueue;

/* A request waiting for a slot while the queue is full: first come, first admitted. */
typedef struct waiter {
	struct waiter *next;
} waiter;

typedef struct worker_arg {
	struct st_service *s;
	int index;
} worker_arg;

struct st_service {
	st_serve_opts o;
	st_serve_store *store;
	st_serve_metrics *metrics;
	char *tasks_text;                /* GET /v1/tasks, made once */
	pthread_mutex_t mu;
	pthread_cond_t cv_work, cv_done;
	pthread_cond_t cv_warm;          /* warm_left went down */
	int warm_left;                   /* GPUs whose baselines --warm is still loading */
	jqueue qc, qr, qj;               /* compile, run, judge */
	job *inflight;
	int n_inflight, waiting;
	waiter *admit_head, *admit_tail; /* requests waiting for a slot, oldest first */
	int draining, stopping;
	char arch[32];                   /* learned from the first verdict; precompiles need it */
	long spooled;                    /* jobs written to the spool (its sweep counts them) */
	st_verify_env env;               /* per worker: its GPU and the GPU's lock; the runners kept
	                                    between requests (env.pool), or NULL */
	struct { char *task; int gpu; } seen[MAX_SEEN]; /* where each task last ran (affinity) */
	int n_seen;
	const char *labels[MAX_WORKERS];
	worker_arg args[MAX_WORKERS];
	pthread_t threads[3 * MAX_WORKERS + 64];
	int n_threads;
	double t0;
};

static void push(jqueue *q, job *j)
{
	j->next = NULL;
	j->t_queued = st_now_s();
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	q->n++;
}

static job *pop(jqueue *q)
{
	job *j = q->head;
	if (j) {
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
		q->n--;
	}
	return j;
}

static void job_free(job *j)
{
	json_decref(j->req);
	json_decref(j->verdict);
	free(j->answer);
	free(j);
}

/* Under s->mu. */
static void release(job *j)
{
	if (--j->refs == 0)
		job_free(j);
}

static char *error_text(const char *id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *error_text(const char *id, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	json_t *o = json_pack("{s:s}", "error", msg);
	if (id && *id)
		json_object_set_new(o, "id", json_string(id));
	char *t = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return t;
}

/* ---- finishing a job ---------------------------------------------------------------------- */

/* The job's answer: stored (unless the environment failed: then the request stays pending in
 * the store and runs again after a restart or a repeat), then handed to the waiting clients. */
static void finish(st_service *s, job *j, int http_status, json_t *answer)
{
	char *text = answer ? json_dumps(answer, JSON_COMPACT) : NULL;
	json_decref(answer);
	if (!text) {
		http_status = 500;
		text = error_text(j->id, "out of memory while answering");
	}
	st_err e;
	if (http_status < 500 && st_serve_store_finish(s->store, j->id, http_status, text, &e)) {
		st_serve_log(&s->o, "request %s: the answer could not be stored: %s", j->id, e.msg);
		free(text);
		http_status = 500;
		text = error_text(j->id, "the answer could not be stored: %s", e.msg);
	}
	pthread_mutex_lock(&s->mu);
	j->answer = text;
	j->http_status = http_status;
	j->done = 1;
	for (job **p = &s->inflight; *p; p = &(*p)->all_next)
		if (*p == j) {
			*p = j->all_next;
			break;
		}
	s->n_inflight--;
	pthread_cond_broadcast(&s->cv_done);
	release(j);
	pthread_mutex_unlock(&s->mu);
}

static void finish_error(st_service *s, job *j, int http_status, const char *msg)
{
	json_t *o = json_pack("{s:s,s:s}", "id", j->id, "error", msg);
	finish(s, j, http_status, o);
}

static json_t *answer_object(const job *j)
{
	json_t *o = json_pack("{s:s,s:s,s:s?,s:O}", "id", j->id, "kind", j->kind, "status",
	                      json_string_value(json_object_get(j->verdict, "status")), "verdict",
	                      j->verdict);
	json_object_set_new(o, "seconds", json_pack("{s:f,s:f}", "queued", j->t_start - j->t_in,
	                                           "total", st_now_s() - j->t_in));
	return o;
}

/* ---- the compile pool --------------------------------------------------------------------- */

static job *take(st_service *s, jqueue *q)
{
	pthread_mutex_lock(&s->mu);
	while (!q->head && !s->stopping)
		pthread_cond_wait(&s->cv_work, &s->mu);
	job *j = pop(q);
	pthread_mutex_unlock(&s->mu);
	return j;
}

/* Under s->mu: the GPU a task last ran on, or -1. */
static int seen_gpu(const st_service *s, const char *task)
{
	for (int i = 0; i < s->n_seen; i++)
		if (!strcmp(s->seen[i].task, task))
			return s->seen[i].gpu;
	return -1;
}

static void seen_set(st_service *s, const char *task, int gpu)
{
	for (int i = 0; i < s->n_seen; i++)
		if (!strcmp(s->seen[i].task, task)) {
			s->seen[i].gpu = gpu;
			return;
		}
	if (s->n_seen == MAX_SEEN)
		return; /* the rest go anywhere */
	char *t = strdup(task);
	if (t) {
		s->seen[s->n_seen].task = t;
		s->seen[s->n_seen++].gpu = gpu;
	}
}

/* A run job for a worker on `gpu`: one of the first queued whose task last ran on this GPU, or
 * one no GPU has seen, else the oldest. A GPU keeps its tasks' reference and expert runners
 * loaded (the runner pool): sending a task back where they are saves starting and loading them
 * on every GPU. The oldest job goes first anyway once it has waited AFFINITY_WAIT_S longer than
 * the one that would pass it. The rule compares the two ages, not the oldest's alone: under a
 * steady load every job waits longer than any fixed limit, and one on its own would send every
 * task to every GPU (on two H200s the queue wait was about 9 s against a limit of 5 s). */
static job *take_run(st_service *s, int gpu)
{
	pthread_mutex_lock(&s->mu);
	jqueue *q = &s->qr;
	while (!q->head && !s->stopping)
		pthread_cond_wait(&s->cv_work, &s->mu);
	job *prev = NULL, *pick = NULL, *pick_prev = NULL;
	if (gpu >= 0 && q->head) {
		int i = 0;
		for (job *j = q->head; j && i < AFFINITY_SCAN && !pick; prev = j, j = j->next, i++) {
			int g = seen_gpu(s, j->task_dir);
			if ((g == gpu || g < 0) && j->t_queued - q->head->t_queued < AFFINITY_WAIT_S) {
				pick = j;
				pick_prev = prev;
			}
		}
	}
	job *j;
	if (pick && pick_prev) { /* out of the middle */
		pick_prev->next = pick->next;
		if (q->tail == pick)
			q->tail = pick_prev;
		q->n--;
		j = pick;
	} else {
		j = pop(q);
	}
	if (j && gpu >= 0)
		seen_set(s, j->task_dir, gpu);
	pthread_mutex_unlock(&s->mu);
	return j;
}

static void hand_on(st_service *s, jqueue *q, job *j)
{
	pthread_mutex_lock(&s->mu);
	push(q, j);
	pthread_cond_broadcast(&s->cv_work);
	pthread_mutex_unlock(&s->mu);
}

/* The spool keeps each code while a job may still need it: a file is rewritten (its time
 * renewed) by every job that submits it, so one untouched for longer than any job can take is
 * left over. Swept every SWEEP_EVERY jobs, so a long-running service does not fill its disk. */
#define SWEEP_EVERY 1000
static void sweep_spool(st_service *s)
{
	DIR *d = opendir(s->o.spool_dir);
	if (!d)
		return;
	time_t old = time(NULL) - (time_t)(2 * s->o.deadline_s + 3600);
	struct dirent *e;
	while ((e = readdir(d))) {
		char path[4400];
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", s->o.spool_dir, e->d_name);
		if (e->d_name[0] != '.' && !stat(path, &st) && S_ISREG(st.st_mode) && st.st_mtime < old)
			unlink(path);
	}
	closedir(d);
}

static void *compile_main(void *arg)
{
	st_service *s = arg;
	job *j;
	while ((j = take(s, &s->qc))) {
		pthread_mutex_lock(&s->mu);
		int sweep = ++s->spooled % SWEEP_EVERY == 0;
		pthread_mutex_unlock(&s->mu);
		if (sweep)
			sweep_spool(s);
		const char *code = json_string_value(json_object_get(j->req, "code"));
		int host = !strcmp(s->o.verify.backend, "host");
		/* Named by content: the same code twice is one file and one compile. */
		char sha[65];
		st_sha256_hex(code, strlen(code), sha);
		snprintf(j->path, sizeof j->path, "%s/%.32s.%s", s->o.spool_dir, sha, host ? "c" : "cu");
		st_err e;
		if (st_write_file_atomic(j->path, code, strlen(code), &e)) {
			finish_error(s, j, 500, e.msg);
			continue;
		}
		char arch[32];
		pthread_mutex_lock(&s->mu);
		snprintf(arch, sizeof arch, "%s", s->arch);
		pthread_mutex_unlock(&s->mu);
		/* Compile errors are the verdict's business; only the cache is filled here. */
		if (arch[0])
			(void)st_verify_precompile(j->task_dir, j->path, &s->o.verify, arch, &e);
		hand_on(s, &s->qr, j);
	}
	return NULL;
}

/* ---- the workers -------------------------------------------------------------------------- */

/* The request's "options" on top of the service's verify options (validated at admission). */
static void finish_reward(st_service *s, job *j, const st_rubric *rubric)
{
	json_t *r = st_reward_combine(j->verdict, rubric, j->skill, &s->o.reward);
	json_t *a = answer_object(j);
	json_object_set_new(a, "reward", r ? r : json_null());
	finish(s, j, 200, a);
}

/* With --queue: the job goes to the queue's workers, and this thread waits for its result. A
 * connection per thread; the result is the verdict a local verify would have made, or the
 * worker's error. */
static st_status verify_on_queue(st_service *s, st_queue *q, int *open, job *j, json_t **verdict,
                                 st_err *err)
{
	if (!*open) {
		st_status st = st_queue_open(s->o.queue_url, q, err);
		if (st)
			return st_err_wrap(err, ST_E_SYSTEM, "the queue");
		*open = 1;
	}
	const char *code = json_string_value(json_object_get(j->req, "code"));
	return st_queue_verify(q, json_string_value(json_object_get(j->req, "task")), s->arch, code,
	                       strlen(code), json_object_get(j->req, "options"), s->o.queue_max,
	                       s->o.deadline_s > 0 ? 2 * s->o.deadline_s : 1200, verdict, err);
}

/* A fault that a neighbour on the same GPU may have caused: a runtime error of the candidate (a
 * neighbour that takes all the GPU's memory makes an honest solution's allocations fail) or a
 * baseline that could not run. Not a timeout: a neighbour's never-ending kernel only shares the
 * GPU's time with this one, and a second try of a real hang, with the GPU held alone, would stop
 * the other worker for the whole timeout. */
static int shared_fault(st_status st, json_t *verdict)
{
	if (st == ST_E_SYSTEM)
		return 1;
	const char *status = st ? NULL : json_string_value(json_object_get(verdict, "status"));
	return status && !strcmp(status, "runtime_error");
}

/* With --per-gpu above 1, verifies run their correctness checks side by side; a fault seen
 * then is confirmed by a second verify that has the GPU to itself from its first load on, and
 * that one's answer stands. The first outcome goes into the verdict as "shared_gpu_fault". A
 * neighbour whose runners still hold memory while they wait for the CPU is not stopped by the
 * lock, but a candidate that exhausts the GPU fails at once and its runner is gone by then. */
static st_status rerun_alone(job *j, const st_verify_opts *o, st_verify_slot *slot,
                             json_t **verdict, st_status first, st_err *err)
{
	json_t *was = first ? json_pack("{s:s,s:s}", "error", err->msg, "status", "error")
	                    : json_pack("{s:O,s:O}", "status", json_object_get(*verdict, "status"),
	                                "reason", json_object_get(*verdict, "reason"));
	json_decref(*verdict);
	*verdict = NULL;
	slot->gpu_alone = 1;
	st_status st = st_verify(j->task_dir, j->path, o, slot, verdict, err);
	if (!st && was)
		json_object_set_new(*verdict, "shared_gpu_fault", was);
	else
		json_decref(was);
	return st;
}

/* Is worker w the first of its GPU (what is done once per GPU is done for it)? */
static int first_of_gpu(const st_service *s, int w)
{
	for (int u = 0; u < w; u++)
		if (!strcmp(s->env.devices[u], s->env.devices[w]))
			return 0;
	return 1;
}

/* Worker w's verify options, with the arch the compile pool built for (into known_arch): known,
 * the verify compiles before it takes runners, and finds the kept ones by what it compiled; and
 * its slot: its GPU, that GPU's lock, the pool, its shared-memory blocks. */
static void worker_opts(st_service *s, int w, st_shm_cache *shm, char known_arch[32],
                        st_verify_opts *o, st_verify_slot *slot)
{
	*o = s->o.verify;
	st_verify_env_slot(&s->env, w, shm, slot);
	pthread_mutex_lock(&s->mu);
	snprintf(known_arch, 32, "%s", s->arch);
	pthread_mutex_unlock(&s->mu);
	if (!o->arch && known_arch[0] && !strcmp(o->backend, "cuda"))
		o->arch = known_arch;
}

static void *worker_main(void *arg)
{
	worker_arg *w = arg;
	st_service *s = w->s;
	job *j;
	st_queue q;
	int q_open = 0;
	/* The worker's shared-memory blocks, kept from one verify to the next (NULL if out of
	 * memory: every verify makes its own, as before). */
	st_shm_cache *shm = s->o.queue_url ? NULL : st_shm_cache_new();
	char near[256]; /* its GPU's own CPUs, where probe_devices pinned the GPU's runners */
	if (st_runner_pinned(s->env.devices[w->index], near, sizeof near) && st_cpus_pin(near))
		st_serve_log(&s->o, "worker %d: cannot keep to CPUs %s: %s", w->index, near,
		             strerror(errno));
	char known_arch[32];
	st_verify_opts o;
	st_verify_slot slot;
	if (s->o.warm && s->env.pool && first_of_gpu(s, w->index)) {
		worker_opts(s, w->index, NULL, known_arch, &o, &slot);
		st_serve_warm_runners(&s->o, &o, &slot);
		pthread_mutex_lock(&s->mu);
		s->warm_left--;
		pthread_cond_broadcast(&s->cv_warm);
		pthread_mutex_unlock(&s->mu);
	}
	while ((j = take_run(s, s->env.gpu_of[w->index]))) {
		j->t_start = st_now_s();
		worker_opts(s, w->index, shm, known_arch, &o, &slot);
		st_verify_opts_apply(&o, json_object_get(j->req, "options"));
		json_t *verdict = NULL;
		st_err e;
		st_status st = s->o.queue_url ? verify_on_queue(s, &q, &q_open, j, &verdict, &e)
		                              : st_verify(j->task_dir, j->path, &o, &slot, &verdict, &e);
		if (!s->o.queue_url && slot.gpu_lock && s->o.per_gpu > 1 && shared_fault(st, verdict))
			st = rerun_alone(j, &o, &slot, &verdict, st, &e);
		st_serve_metrics_busy(s->metrics, w->index, st_now_s() - j->t_start);
		if (st) {
			json_decref(verdict);
			/* Bad options of the request: its answer. A broken machine or baseline: not an
			 * answer to keep, the request stays pending in the store. */
			finish_error(s, j, st == ST_E_INVALID ? 422 : 503, e.msg);
			continue;
		}
		j->verdict = verdict;
		const char *status = json_string_value(json_object_get(verdict, "status"));
		st_serve_metrics_verdict(s->metrics, status ? status : "unknown");
		const char *arch = json_string_value(json_object_get(verdict, "arch"));
		pthread_mutex_lock(&s->mu);
		if (!s->arch[0] && arch)
			snprintf(s->arch, sizeof s->arch, "%s", arch);
		pthread_mutex_unlock(&s->mu);
		if (!strcmp(j->kind, "verify"))
			finish(s, j, 200, answer_object(j));
		else if (s->o.judge_model && status && !strcmp(status, "ok"))
			hand_on(s, &s->qj, j); /* an incorrect solution gets 0 whatever a judge says */
		else
			finish_reward(s, j, NULL);
	}
	if (q_open)
		st_queue_close(&q);
	st_shm_cache_free(shm);
	return NULL;
}

/* ---- the judges --------------------------------------------------------------------------- */

static json_t *judge_vars(st_service *s, job *j, st_err *err)
{
	st_task t;
	if (st_task_load(j->task_dir, &t, err))
		return NULL;
	int host = !strcmp(s->o.verify.backend, "host");
	json_t *v = st_agent_task_vars(&t, host, s->arch[0] ? s->arch : "sm_90a", 0, NULL);
	st_task_free(&t);
	if (!v) {
		st_err_set(err, ST_E_NOMEM, "out of memory for the judge's prompt");
		return NULL;
	}
	char *summary = NULL;
	st_verifier_feedback(j->verdict, json_string_value(json_object_get(j->req, "code")), 0,
	                     &summary);
	json_object_set(v, "code", json_object_get(j->req, "code"));
	json_object_set_new(v, "verdict_summary", json_string(summary ? summary : ""));
	free(summary);
	if (j->skill == ST_SKILL_OPT) {
		json_object_set(v, "previous_code", json_object_get(j->req, "previous_code"));
		json_object_set(v, "feedback", json_object_get(j->req, "feedback"));
	}
	return v;
}

static void *judge_main(void *arg)
{
	st_service *s = arg;
	st_llm_model m;
	st_llm_opts lo;
	st_llm_opts_default(&lo);
	lo.cache_path = s->o.judge_cache;
	st_llm_client *c = NULL;
	st_err e;
	/* The model spec was checked at start; a client per thread, so calls run in parallel. */
	if (st_llm_model_parse(s->o.judge_model, &m, &e) || st_llm_client_new(&m, &lo, &c, &e)) {
		st_serve_log(&s->o, "judge: %s (rewards get a neutral rubric)", e.msg);
		c = NULL;
	}
	job *j;
	while ((j = take(s, &s->qj))) {
		st_rubric r;
		memset(&r, 0, sizeof r);
		json_t *vars = c ? judge_vars(s, j, &e) : NULL;
		if (!vars || st_rubric_judge(c, s->o.prompts_dir, j->skill, vars, &r, NULL, &e)) {
			/* As st_rubric_judge does for a judge that cannot answer: neutral, flagged. */
			st_rubric_free(&r);
			memset(&r, 0, sizeof r);
			r.skill = j->skill;
			r.score = 0.5;
			r.neutral = 1;
			r.rationale = strdup(c ? e.msg : "no judge client");
		}
		json_decref(vars);
		finish_reward(s, j, &r);
		st_rubric_free(&r);
	}
	st_llm_client_free(c);
	return NULL;
}

/* ---- admission ---------------------------------------------------------------------------- */

static int id_ok(const char *id)
{
	size_t n = strlen(id);
	if (!n || n > ID_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(id[i] >= 'a' && id[i] <= 'z') && !(id[i] >= 'A' && id[i] <= 'Z') &&
		    !(id[i] >= '0' && id[i] <= '9') && !strchr("._:-", id[i]))
			return 0;
	return 1;
}

/* The first member of `obj` whose name is not in the NULL-ended `keys`, or NULL. */
static const char *first_unknown(const json_t *obj, const char *const *keys)
{
	const char *k;
	json_t *val;
	json_object_foreach((json_t *)obj, k, val) {
		int i = 0;
		while (keys[i] && strcmp(keys[i], k))
			i++;
		if (!keys[i])
			return k;
	}
	return NULL;
}

/* 0 when the request is well-formed; otherwise the HTTP status, with the reason in msg. */
static int validate(st_service *s, const char *kind, json_t *req, char *task_dir, size_t dlen,
                    st_skill *skill, char *msg, size_t mlen)
{
	static const char *const verify_keys[] = {"id", "task", "code", "options", NULL};
	static const char *const reward_keys[] = {"id", "task", "code", "options", "skill",
	                                          "previous_code", "feedback", NULL};
	const char *const *keys = strcmp(kind, "verify") ? reward_keys : verify_keys;
	if (!json_is_object(req)) {
		snprintf(msg, mlen, "the body must be a JSON object");
		return 400;
	}
	const char *k = first_unknown(req, keys);
	if (k) {
		snprintf(msg, mlen, "unknown field '%s' (a %s request has: id, task, code, options%s)", k,
		         kind, strcmp(kind, "verify") ? ", skill, previous_code, feedback" : "");
		return 400;
	}
	const json_t *id = json_object_get(req, "id");
	if (id && (!json_is_string(id) || !id_ok(json_string_value(id)))) {
		snprintf(msg, mlen, "id must be 1 to %d characters of A-Z a-z 0-9 . _ : -", ID_MAX);
		return 400;
	}
	const char *task = json_string_value(json_object_get(req, "task"));
	const char *code = json_string_value(json_object_get(req, "code"));
	if (!task || !code || !*code) {
		snprintf(msg, mlen, "%s is missing (or not a non-empty string)", !task ? "task" : "code");
		return 400;
	}
	st_err e;
	if (strchr(task, '/') == task || strstr(task, "..") ||
	    st_suite_resolve(s->o.suite, task, s->o.tasks_root, task_dir, dlen, &e)) {
		snprintf(msg, mlen, "unknown task '%s' (GET /v1/tasks lists them)", task);
		return 404;
	}
	const json_t *opt = json_object_get(req, "options");
	if (opt) {
		static const char *const okeys[] = {"sets", "seeds", "timing", "profile", NULL};
		if (!json_is_object(opt)) {
			snprintf(msg, mlen, "options must be an object");
			return 400;
		}
		if ((k = first_unknown(opt, okeys))) {
			snprintf(msg, mlen, "unknown option '%s' (options: sets, seeds, timing, profile)", k);
			return 400;
		}
		const json_t *sets = json_object_get(opt, "sets"), *seeds = json_object_get(opt, "seeds");
		if ((sets && !json_is_string(sets)) ||
		    (seeds && (!json_is_integer(seeds) || json_integer_value(seeds) < 1 ||
		               json_integer_value(seeds) > 10)) ||
		    (json_object_get(opt, "timing") && !json_is_boolean(json_object_get(opt, "timing"))) ||
		    (json_object_get(opt, "profile") && !json_is_boolean(json_object_get(opt, "profile")))) {
			snprintf(msg, mlen, "options: sets is a string (e.g. \"small,eval\"), seeds 1 to 10, "
			         "timing and profile true or false");
			return 400;
		}
	}
	*skill = ST_SKILL_GEN;
	if (!strcmp(kind, "reward")) {
		const char *sk = json_string_value(json_object_get(req, "skill"));
		if (json_object_get(req, "skill") && (!sk || (strcmp(sk, "gen") && strcmp(sk, "opt")))) {
			snprintf(msg, mlen, "skill must be \"gen\" (task to code) or \"opt\" (optimisation)");
			return 400;
		}
		*skill = sk && !strcmp(sk, "opt") ? ST_SKILL_OPT : ST_SKILL_GEN;
		if (*skill == ST_SKILL_OPT &&
		    (!json_is_string(json_object_get(req, "previous_code")) ||
		     !json_is_string(json_object_get(req, "feedback")))) {
			snprintf(msg, mlen, "an optimisation reward needs previous_code and feedback (strings)");
			return 400;
		}
	}
	return 0;
}

/* What the request asks, without its id: the same content under the same id is one job. */
static void request_hash(const char *kind, json_t *req, char hex[65])
{
	json_t *copy = json_deep_copy(req);
	json_object_del(copy, "id");
	json_object_set_new(copy, "kind", json_string(kind));
	char *text = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS);
	st_sha256_hex(text ? text : "", text ? strlen(text) : 0, hex);
	free(text);
	json_decref(copy);
}

static void new_id(char *id, size_t len)
{
	unsigned char r[12];
	size_t got = 0;
	while (got < sizeof r) {
		ssize_t n = getrandom(r + got, sizeof r - got, 0);
		if (n > 0)
			got += (size_t)n;
	}
	int k = snprintf(id, len, "r-");
	for (size_t i = 0; i < sizeof r && (size_t)k + 2 < len; i++)
		k += snprintf(id + k, len - (size_t)k, "%02x", r[i]);
}

/* Under s->mu: a job for a stored or new request, in flight and on the compile queue. */
static job *admit(st_service *s, const char *id, const char *kind, const char *hash,
                  json_t *req, const char *task_dir, st_skill skill)
{
	job *j = calloc(1, sizeof *j);
	if (!j)
		return NULL;
	snprintf(j->id, sizeof j->id, "%s", id);
	snprintf(j->hash, sizeof j->hash, "%s", hash);
	snprintf(j->kind, sizeof j->kind, "%s", kind);
	snprintf(j->task_dir, sizeof j->task_dir, "%s", task_dir);
	j->req = json_incref(req);
	j->skill = skill;
	j->refs = 1;
	j->t_in = st_now_s();
	j->all_next = s->inflight;
	s->inflight = j;
	s->n_inflight++;
	/* With --queue nothing is compiled or spooled here: the workers do it. */
	push(s->o.queue_url ? &s->qr : &s->qc, j);
	pthread_cond_broadcast(&s->cv_work);
	return j;
}

/* The body as it came (not NUL-terminated: the HTTP front hands over its buffer and length). */
static st_status store_add(st_service *s, const char *id, const char *kind, const char *hash,
                           const char *body, size_t len, st_err *err)
{
	char *text = strndup(body, len);
	if (!text)
		return st_err_set(err, ST_E_NOMEM, "out of memory");
	st_status st = st_serve_store_add(s->store, id, kind, hash, text, err);
	free(text);
	return st;
}

static job *find_inflight(st_service *s, const char *id)
{
	for (job *j = s->inflight; j; j = j->all_next)
		if (!strcmp(j->id, id))
			return j;
	return NULL;
}

/* Out of the admission line (admitted, answered otherwise, or given up): the next may go. Under
 * s->mu. */
static void leave_line(st_service *s, waiter *me)
{
	waiter **p = &s->admit_head;
	while (*p != me)
		p = &(*p)->next;
	*p = me->next;
	if (s->admit_tail == me) {
		s->admit_tail = NULL;
		for (waiter *w = s->admit_head; w; w = w->next)
			s->admit_tail = w;
	}
	pthread_cond_broadcast(&s->cv_done);
}

/* A request waiting in the admission line looks again after 50 ms, or when a request is done.
 * Under s->mu. */
static void wait_a_little(st_service *s)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += 50 * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&s->cv_done, &s->mu, &t);
}

/* Wait under s->mu, up to the deadline, for job j's answer: a copy of it with its HTTP status in
 * *code, or a 504 that says the work goes on. NULL when out of memory. */
static char *await_answer(st_service *s, job *j, const char *id, int *code)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	double d = s->o.deadline_s;
	until.tv_sec += (time_t)d;
	until.tv_nsec += (long)((d - (double)(time_t)d) * 1e9);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (!j->done)
		if (pthread_cond_timedwait(&s->cv_done, &s->mu, &until) == ETIMEDOUT)
			break;
	if (j->done) {
		*code = j->http_status;
		return strdup(j->answer);
	}
	*code = 504;
	return error_text(id, "no answer within the %g s deadline; the work goes on: repeat "
	                  "the request with the same id for its answer", s->o.deadline_s);
}

int st_service_request(st_service *s, const char *kind, const char *body, size_t len,
                       char **answer, double *retry_after, char *id_out, size_t id_len)
{
	double t_in = st_now_s();
	*retry_after = 0;
	id_out[0] = '\0';
	json_error_t je;
	json_t *req = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	char msg[1024], task_dir[4096], hash[65], id[ID_MAX + 1];
	st_skill skill = ST_SKILL_GEN;
	int code = 0;
	if (!req) {
		snprintf(msg, sizeof msg, "the body is not JSON: %s (line %d, column %d)", je.text,
		         je.line, je.column);
		code = 400;
	} else {
		code = validate(s, kind, req, task_dir, sizeof task_dir, &skill, msg, sizeof msg);
	}
	if (code) {
		json_decref(req);
		*answer = error_text(NULL, "%s", msg);
		st_serve_metrics_answer(s->metrics, code, -1);
		return code;
	}
	const char *given = json_string_value(json_object_get(req, "id"));
	if (given)
		snprintf(id, sizeof id, "%s", given);
	else
		new_id(id, sizeof id);
	snprintf(id_out, id_len, "%s", id);
	request_hash(kind, req, hash);

	pthread_mutex_lock(&s->mu);
	job *j;
	st_serve_record rec;
	memset(&rec, 0, sizeof rec);
	st_err e;
	waiter me = {NULL};
	int queued = 0;
	double wait_until = t_in + (s->o.admit_wait_s < s->o.deadline_s ? s->o.admit_wait_s
	                                                                   : s->o.deadline_s);
again:
	j = find_inflight(s, id);
	if (j && strcmp(j->hash, hash)) {
		code = 409;
	} else if (!j) {
		int found = st_serve_store_get(s->store, id, &rec, &e);
		if (found < 0) {
			code = 500;
			snprintf(msg, sizeof msg, "%s", e.msg);
		} else if (found && strcmp(rec.hash, hash)) {
			code = 409;
		} else if (found && rec.answer) {
			code = rec.http_status;
			*answer = rec.answer;
			rec.answer = NULL;
			st_serve_metrics_stored(s->metrics);
		} else if (s->draining) {
			code = 503;
			snprintf(msg, sizeof msg, "the service is draining (shutting down): try again later");
		} else if (s->n_inflight >= s->o.queue_max ||
		           (s->admit_head && s->admit_head != &me)) {
			/* Full, or others came first: wait in line for a while before the 429, so that
			 * slots go to requests in the order they came, not to whoever retries fastest. */
			if (st_now_s() < wait_until) {
				if (!queued) {
					if (s->admit_tail)
						s->admit_tail->next = &me;
					else
						s->admit_head = &me;
					s->admit_tail = &me;
					queued = 1;
				}
				st_serve_record_free(&rec);
				wait_a_little(s);
				goto again;
			}
			code = 429;
			*retry_after = s->o.retry_after_s;
			snprintf(msg, sizeof msg, "%d requests in flight, the most this service takes: "
			         "retry after %g s", s->n_inflight, s->o.retry_after_s);
		} else if (!found && store_add(s, id, kind, hash, body, len, &e)) {
			code = 500;
			snprintf(msg, sizeof msg, "%s", e.msg);
		} else if (!(j = admit(s, id, kind, hash, req, task_dir, skill))) {
			/* (found && unanswered: an earlier attempt whose machine failed; it runs again) */
			code = 500;
			snprintf(msg, sizeof msg, "out of memory");
		}
	}
	if (queued)
		leave_line(s, &me);
	st_serve_record_free(&rec);
	json_decref(req);
	if (code) {
		pthread_mutex_unlock(&s->mu);
		if (code == 409)
			snprintf(msg, sizeof msg, "request id '%s' was used before for a different request",
			         id);
		if (!*answer)
			*answer = error_text(id, "%s", msg);
		st_serve_metrics_answer(s->metrics, code, code < 300 ? st_now_s() - t_in : -1);
		return code;
	}
	j->refs++;
	s->waiting++;
	*answer = await_answer(s, j, id, &code);
	s->waiting--;
	release(j);
	pthread_cond_broadcast(&s->cv_done); /* a drain waits for the last client */
	pthread_mutex_unlock(&s->mu);
	if (!*answer) {
		code = 500;
		*answer = error_text(id, "out of memory");
	}
	st_serve_metrics_answer(s->metrics, code, st_now_s() - t_in);
	return code;
}

/* ---- start, drain, stop ------------------------------------------------------------------- */

typedef struct requeue_arg {
	st_service *s;
	int n, bad;
} requeue_arg;

static void requeue(void *arg, const char *id, const char *kind, const char *hash,
                    const char *request)
{
	requeue_arg *r = arg;
	st_service *s = r->s;
	json_t *req = json_loads(request, 0, NULL);
	char task_dir[4096], msg[512];
	st_skill skill;
	if (!req || validate(s, kind, req, task_dir, sizeof task_dir, &skill, msg, sizeof msg) ||
	    !admit(s, id, kind, hash, req, task_dir, skill))
		r->bad++;
	else
		r->n++;
	json_decref(req);
}

static char *tasks_text(const st_serve_opts *o, st_err *err)
{
	char **dirs = NULL;
	int n = 0;
	if (st_suite_dirs(o->suite, o->tasks_root, &dirs, &n, err))
		return NULL;
	json_t *arr = json_array();
	for (int i = 0; i < n; i++) {
		st_task t;
		st_err e;
		if (st_task_load(dirs[i], &t, &e))
			continue; /* stitch tasks names a broken task; the service lists the good ones */
		json_array_append_new(arr, st_task_json(&t));
		st_task_free(&t);
	}
	st_task_list_free(dirs, n);
	json_t *top = json_pack("{s:o}", "tasks", arr);
	char *text = json_dumps(top, JSON_COMPACT);
	json_decref(top);
	return text;
}

static st_status parse_gpus(st_service *s, st_err *err)
{
	if (s->o.queue_url) { /* threads that wait on the queue's workers, not GPUs */
		st_verify_env_host(&s->env, s->o.workers > 0 ? s->o.workers : 32);
		for (int i = 0; i < s->env.n_slots; i++)
			s->labels[i] = "queue";
		const char *a = s->o.queue_arch ? s->o.queue_arch
		              : s->o.verify.arch ? s->o.verify.arch
		              : strcmp(s->o.verify.backend, "host") ? "sm_90a" : "host";
		snprintf(s->arch, sizeof s->arch, "%s", a);
		return ST_OK;
	}
	if (!strcmp(s->o.verify.backend, "host")) {
		st_verify_env_host(&s->env, s->o.workers > 0 ? s->o.workers : st_cpus_usable());
		for (int i = 0; i < s->env.n_slots; i++)
			s->labels[i] = "host";
		return ST_OK;
	}
	st_status st = st_verify_env_gpus(&s->env, s->o.gpus ? s->o.gpus : "0", s->o.per_gpu,
	                                  "workers", err);
	if (st)
		return st;
	for (int i = 0; i < s->env.n_slots; i++)
		s->labels[i] = s->env.devices[i];
	if (!s->env.n_slots)
		return st_err_set(err, ST_E_INVALID, "--gpus: no GPU named");
	return ST_OK;
}

/* The GPUs the workers use (1 on the host backend, where every worker has ""). */
static int distinct_devices(const st_service *s)
{
	int n = 0;
	for (int w = 0; w < s->env.n_slots; w++)
		n += first_of_gpu(s, w);
	return n > 0 ? n : 1;
}

/* Before the first request: each worker's GPU answers (and its peaks are measured once and
 * cached, not in some request's verify), and the arch the compiler targets is known, so the
 * compile pool can work ahead from the first request on instead of leaving every compile of a
 * cold start to the GPU workers. */
static st_status probe_devices(st_service *s, st_err *err)
{
	if (s->o.queue_url) { /* no GPU here; the queue must answer */
		st_queue q;
		st_status st = st_queue_open(s->o.queue_url, &q, err);
		if (!st)
			st_queue_close(&q);
		return st ? st_err_wrap(err, st == ST_E_INVALID ? ST_E_INVALID : ST_E_SYSTEM, "--queue")
		          : ST_OK;
	}
	if (s->o.verify.arch)
		snprintf(s->arch, sizeof s->arch, "%s", s->o.verify.arch);
	for (int w = 0; w < s->env.n_slots; w++) {
		if (!first_of_gpu(s, w)) /* a GPU of several workers is looked at once */
			continue;
		char arch[32], bus[64];
		st_err pe;
		st_status st = st_device_probe(s->o.verify.backend,
		                               s->o.verify.no_sandbox ? 0 : ST_RUNNER_SANDBOX,
		                               s->env.devices[w][0] ? s->env.devices[w] : NULL,
		                               s->o.verify.timing || s->o.verify.profile, arch,
		                               sizeof arch, bus, sizeof bus, &pe, err);
		if (st)
			return st_err_wrap(err, st, "worker %d (GPU %s)", w,
			                   s->env.devices[w][0] ? s->env.devices[w] : "host");
		if (pe.msg[0])
			st_serve_log(&s->o, "worker %d: device peaks unavailable: %s", w, pe.msg);
		if (!s->arch[0] && arch[0])
			snprintf(s->arch, sizeof s->arch, "%s", arch);
		/* On a host of several NUMA nodes, a worker, the runners it starts and the shared
		 * memory they fill stay on the GPU's own node, so that outputs are copied and compared
		 * in memory next to the GPU rather than through the other socket. (The two-GPU hosts
		 * lent to this project are one node: nothing changes there.) */
		char near[256];
		if (s->env.devices[w][0] && st_cpus_near_pci(bus, near, sizeof near) > 0) {
			st_runner_pin(s->env.devices[w], near); /* its workers too (worker_main) */
			st_serve_log(&s->o, "GPU %s (%s): its workers and runners on CPUs %s, its NUMA node",
			             s->env.devices[w], bus, near);
		}
	}
	return ST_OK;
}

static int spawn(st_service *s, void *(*fn)(void *), void *arg)
{
	if (s->n_threads == (int)(sizeof s->threads / sizeof *s->threads))
		return -1;
	if (pthread_create(&s->threads[s->n_threads], NULL, fn, arg))
		return -1;
	s->n_threads++;
	return 0;
}

st_status st_service_start(const st_serve_opts *o, st_service **out, st_err *err)
{
	*out = NULL;
	st_service *s = calloc(1, sizeof *s);
	if (!s)
		return st_err_set(err, ST_E_NOMEM, "serve: out of memory");
	s->o = *o;
	s->t0 = st_now_s();
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv_work, NULL);
	pthread_cond_init(&s->cv_done, NULL);
	pthread_cond_init(&s->cv_warm, NULL);
	st_status st = parse_gpus(s, err);
	/* The workers' verifies compare outputs at the same time: each takes its share of the
	 * cores, so that more workers (a second GPU's) never mean more comparison threads than
	 * cores, which slowed every verify of the first GPU's workers too. */
	if (!st && !o->queue_url && s->o.verify.threads <= 0)
		s->o.verify.threads = st_cpus_share(s->env.n_slots, 16);
	if (!st && o->judge_model) {
		st_llm_model m;
		st = st_llm_model_parse(o->judge_model, &m, err);
		if (st)
			st = st_err_wrap(err, ST_E_INVALID, "--judge-model");
	}
	if (!st && !(s->tasks_text = tasks_text(o, err)))
		st = st_err_wrap(err, ST_E_INVALID, "tasks");
	if (!st && !(s->metrics = st_serve_metrics_new(s->env.n_slots)))
		st = st_err_set(err, ST_E_NOMEM, "serve: out of memory");
	if (!st)
		st = st_serve_warm_check(o, err);
	if (!st)
		st = st_mkdirs(o->spool_dir, err);
	if (!st)
		st = st_serve_store_open(o->db_path, &s->store, err);
	if (!st)
		st = probe_devices(s, err);
	/* Spares per worker of a GPU (--spares, default 2): a verify takes one fresh runner for its
	 * candidate (and, for a task not seen lately, one per baseline, which go back once loaded
	 * ones turn up).
	 * --keep-runners counts per GPU: one cap over two GPUs was reached by the 8 tasks of
	 * scripts/gpu-serve, whose loaded runners then pushed each other out. */
	if (!st && o->keep_runners > 0 && !o->queue_url &&
	    !(s->env.pool = st_runner_pool_new((o->spares > 0 ? o->spares : 2) *
	                                   (o->per_gpu > 0 ? o->per_gpu : 1),
	                                   o->keep_runners * distinct_devices(s))))
		st = st_err_set(err, ST_E_NOMEM, "serve: out of memory");
	if (st) {
		st_service_stop(s);
		return st;
	}
	int cpus = st_cpus_usable();
	/* Half the cores: the workers' verifies need the rest (runners, output comparisons), and
	 * nvcc on every core slows them more than it speeds the pool. None with --queue. */
	int compilers = o->compilers > 0 ? o->compilers : cpus > 1 ? cpus / 2 : 1;
	if (o->queue_url)
		compilers = 0;
	if (compilers > MAX_WORKERS)
		compilers = MAX_WORKERS;
	/* Before any thread and any stored request: nothing waits on the GPUs meanwhile, and the
	 * service is not listening yet, so no client's clock runs. Every core is the compiler's. */
	st = st_serve_warm(o, s->arch, cpus, err);
	if (st) {
		st_service_stop(s);
		return st;
	}
	requeue_arg ra = {s, 0, 0};
	pthread_mutex_lock(&s->mu);
	st = st_serve_store_pending(s->store, requeue, &ra, err);
	pthread_mutex_unlock(&s->mu);
	if (st) {
		st_service_stop(s);
		return st;
	}
	if (ra.n || ra.bad)
		st_serve_log(&s->o, "%d unanswered request%s from before queued again%s", ra.n,
		             ra.n == 1 ? "" : "s",
		             ra.bad ? " (some could no longer be read and stay unanswered)" : "");
	int bad = 0;
	s->warm_left = o->warm && s->env.pool ? distinct_devices(s) : 0;
	for (int i = 0; i < compilers; i++)
		bad |= spawn(s, compile_main, s);
	for (int i = 0; i < s->env.n_slots; i++) {
		s->args[i] = (worker_arg){s, i};
		bad |= spawn(s, worker_main, &s->args[i]);
	}
	/* --warm: the GPUs' first workers load the baselines before the service listens. */
	pthread_mutex_lock(&s->mu);
	while (!bad && s->warm_left > 0)
		pthread_cond_wait(&s->cv_warm, &s->mu);
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; o->judge_model && i < (o->judges > 0 ? o->judges : 4); i++)
		bad |= spawn(s, judge_main, s);
	if (bad) {
		st_service_stop(s);
		return st_err_set(err, ST_E_SYSTEM, "serve: cannot start the worker threads");
	}
	*out = s;
	return ST_OK;
}

void st_service_drain(st_service *s)
{
	pthread_mutex_lock(&s->mu);
	s->draining = 1;
	double last = 0;
	while (s->n_inflight > 0 || s->waiting > 0) {
		if (st_now_s() - last > 5) {
			st_serve_log(&s->o, "draining: %d request%s in flight, %d client%s waiting", s->n_inflight,
			    s->n_inflight == 1 ? "" : "s", s->waiting, s->waiting == 1 ? "" : "s");
			last = st_now_s();
		}
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += 1;
		pthread_cond_timedwait(&s->cv_done, &s->mu, &t);
	}
	pthread_mutex_unlock(&s->mu);
}

void st_service_stop(st_service *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stopping = 1;
	pthread_cond_broadcast(&s->cv_work);
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; i < s->n_threads; i++)
		pthread_join(s->threads[i], NULL);
	/* Jobs still queued (a stop without a drain) stay pending in the store. */
	for (job *j = s->inflight, *next; j; j = next) {
		next = j->all_next;
		job_free(j);
	}
	st_verify_env_free(&s->env); /* after the workers: none of the pool's runners is out */
	for (int i = 0; i < s->n_seen; i++)
		free(s->seen[i].task);
	st_serve_store_close(s->store);
	st_serve_metrics_free(s->metrics);
	free(s->tasks_text);
	pthread_cond_destroy(&s->cv_work);
	pthread_cond_destroy(&s->cv_done);
	pthread_cond_destroy(&s->cv_warm);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/* ---- the small GETs ------------------------------------------------------------------------ */

char *st_service_tasks(st_service *s)
{
	st_serve_metrics_answer(s->metrics, 200, -1);
	return strdup(s->tasks_text);
}

char *st_service_health(st_service *s, int *http_status)
{
	pthread_mutex_lock(&s->mu);
	json_t *o = json_pack("{s:b,s:b,s:i,s:i,s:i,s:i,s:s?}", "ok", !s->draining, "draining",
	                      s->draining, "workers", s->env.n_slots, "inflight", s->n_inflight,
	                      "queue_max", s->o.queue_max, "waiting", s->waiting, "arch",
	                      s->arch[0] ? s->arch : NULL);
	*http_status = s->draining ? 503 : 200;
	pthread_mutex_unlock(&s->mu);
	char *t = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	st_serve_metrics_answer(s->metrics, *http_status, -1);
	return t;
}

char *st_service_metrics_text(st_service *s)
{
	st_serve_gauges g;
	pthread_mutex_lock(&s->mu);
	g.compile_queue = s->qc.n;
	g.run_queue = s->qr.n;
	g.judge_queue = s->qj.n;
	g.inflight = s->n_inflight;
	g.waiting = s->waiting;
	g.draining = s->draining;
	pthread_mutex_unlock(&s->mu);
	g.uptime_s = st_now_s() - s->t0;
	g.worker_labels = s->labels;
	st_runner_pool_stats_get(s->env.pool, &g.pool);
	st_serve_metrics_answer(s->metrics, 200, -1);
	return st_serve_metrics_text(s->metrics, &g);
}

void st_service_count(st_service *s, int http_status)
{
	st_serve_metrics_answer(s->metrics, http_status, -1);
}
