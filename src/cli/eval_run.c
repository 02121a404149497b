/* The samples of `stitch eval`, each run through its mode by one of a bounded pool of threads:
 *  - oneshot: the task's first-draft prompt, one answer, verified;
 *  - refine: R rounds of one conversation in which the model sees, after each answer, only what
 *    st_refine_feedback says (compile errors or policy hits, else pass or fail);
 *  - agent: the Planner/Coder/Verifier loop of `stitch solve` with R attempts.
 * Threads ask the model at the same time; verifies share the GPU through one lock (correctness
 * runs side by side, measurements alone), so a sample waiting for its answer never holds up
 * another's timing. Every answer goes through the shared answer cache (OUT/llm-cache.sqlite):
 * a run started again pays for nothing it already has. With a queue (--queue) the verifies go to
 * its workers instead, each thread on its own connection (hiredis is not thread-safe). */
#include "eval_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents/agents.h"
#include "agents/solve.h"
#include "common/fs.h"
#include "queue/queue.h"
#include "store/bench.h"

void eval_task_folder(const char *out, const char *task_id, char *dir, size_t len)
{
	char id[256];
	snprintf(id, sizeof id, "%s", task_id);
	for (char *p = id; *p; p++)
		if (*p == '/')
			*p = '_';
	snprintf(dir, len, "%s/%s", out, id);
}

/* One thread's connection to the queue, opened at its first job. */
typedef struct eval_worker {
	eval_ctx *c;
	st_queue q;
	int q_open;
	const eval_item *item; /* the sample being verified (the agent's verify_fn needs its id) */
} eval_worker;

/* A version to the queue's workers and its verdict back: the job names the task by id, so the
 * workers find it in their own suite. */
static st_status verify_on_queue(eval_worker *w, const char *task_id, const char *path,
                                 json_t **verdict, st_err *err)
{
	eval_ctx *c = w->c;
	*verdict = NULL;
	if (!w->q_open) {
		if (st_queue_open(c->queue_url, &w->q, err))
			return st_err_wrap(err, ST_E_SYSTEM, "the queue");
		w->q_open = 1;
	}
	char *code = NULL;
	size_t len = 0;
	st_status s = st_read_file(path, &code, &len, err);
	if (s)
		return s;
	s = st_queue_verify(&w->q, task_id, c->queue_arch, code, len, c->queue_options, 0, 3600,
	                    verdict, err);
	free(code);
	return s;
}

static st_status eval_verify(eval_worker *w, const eval_item *it, const char *path,
                             json_t **verdict, st_err *err)
{
	if (w->c->queue_url)
		return verify_on_queue(w, it->task_id, path, verdict, err);
	return st_verify(it->task_dir, path, &w->c->verify, &w->c->slot, verdict, err);
}

/* The agent loop's verify, when the queue does it. */
static st_status agent_verify(void *arg, const char *task_dir, const char *path,
                              const st_verify_opts *o, const st_verify_slot *slot,
                              json_t **verdict, st_err *err)
{
	(void)task_dir;
	(void)o;
	(void)slot;
	eval_worker *w = arg;
	return verify_on_queue(w, w->item->task_id, path, verdict, err);
}

/* A row for a round that has no verdict (no answer, no code). */
static json_t *row_without_verdict(const eval_item *it, const char *status, const char *why)
{
	json_t *row = st_bench_row(it->task_id, it->tier, NULL);
	json_object_set_new(row, "status", json_string(status));
	json_object_set_new(row, "reason", json_string(why ? why : ""));
	json_object_set_new(row, "code", json_null());
	return row;
}

/* The run's device, from the first verdict that names it. */
static void note_device(eval_ctx *c, const json_t *v)
{
	const char *d = json_string_value(json_object_get(json_object_get(v, "device"), "device"));
	pthread_mutex_lock(&c->mu);
	if (d && !c->device[0])
		snprintf(c->device, sizeof c->device, "%s", d);
	pthread_mutex_unlock(&c->mu);
}

static void add_row(eval_ctx *c, eval_item *it, json_t *row, int round, const char *code)
{
	json_object_set_new(row, "sample", json_integer(it->k));
	json_object_set_new(row, "round", json_integer(round));
	json_object_set_new(row, "final", json_false());
	if (code)
		json_object_set_new(row, "code", json_string(code));
	json_array_append_new(it->rows, row);
	if (!c->quiet) {
		pthread_mutex_lock(&c->mu);
		fprintf(stderr, "eval: %-24s sample %d round %d  %s\n", it->task_id, it->k, round,
		        json_string_value(json_object_get(row, "status")));
		pthread_mutex_unlock(&c->mu);
	}
}

/* Stops the whole run for a failure of the setup, not of the model: every later sample would
 * fail the same way and be scored as the model's fault. The first reason is the one reported. */
static void env_stop(eval_ctx *c, st_status s, const char *msg)
{
	pthread_mutex_lock(&c->mu);
	if (!c->stop) {
		c->stop = 1;
		c->env_status = s;
		snprintf(c->env_error, sizeof c->env_error, "%s", msg);
	}
	pthread_mutex_unlock(&c->mu);
}

/* A verify that failed for the machine (no GPU, a baseline that broke) stops the run. */
static int env_failed(eval_ctx *c, st_status s, const st_err *e)
{
	if (s != ST_E_NODEVICE && s != ST_E_SYSTEM)
		return 0;
	env_stop(c, s, e->msg);
	return 1;
}

/* A request to the model that failed. Our side's failures (memory, the answer cache) and the
 * endpoint refusing the run's setup (HTTP 401/403: the key; a request it cannot encode) stop the
 * run, as a machine failure does. Anything else (the endpoint unreachable, timing out or failing
 * after its retries, an answer missing from the cache under --replay) is a round with no answer:
 * its row is kept as `no_answer` and left out of the scores (st_eval_scores), since the model
 * never answered. Returns 1 when the run stops. */
static int llm_failed(eval_ctx *c, st_status s, const st_err *e)
{
	if (s == ST_E_NOMEM || s == ST_E_SYSTEM || (s == ST_E_INVALID && !c->llm.replay)) {
		env_stop(c, s, e->msg);
		return 1;
	}
	return 0;
}

/* The sample's final row: for a conversation, its last round with code (what the loop ends
 * with), else its last round. */
static void mark_final_last_code(eval_item *it)
{
	size_t n = json_array_size(it->rows), pick = n;
	for (size_t i = n; i-- > 0;)
		if (json_is_string(json_object_get(json_array_get(it->rows, i), "code"))) {
			pick = i;
			break;
		}
	if (pick == n)
		pick = n - 1;
	if (n)
		json_object_set_new(json_array_get(it->rows, pick), "final", json_true());
}

/* oneshot (R = 1) and refine. */
static void run_conversation(eval_worker *w, eval_item *it, st_llm_client *client)
{
	eval_ctx *c = w->c;
	char dir[PATH_MAX];
	eval_task_folder(c->out, it->task_id, dir, sizeof dir);
	int R = c->rounds, n_msgs = 1;
	st_llm_msg *msgs = calloc(2 * (size_t)R + 1, sizeof *msgs);
	char **owned = calloc(2 * (size_t)R + 1, sizeof *owned);
	if (!msgs || !owned) {
		env_stop(c, ST_E_NOMEM, "out of memory for a conversation");
		free(msgs);
		free(owned);
		return;
	}
	msgs[0] = (st_llm_msg){"user", it->prompt};
	const char *ext = strcmp(c->verify.backend, "host") ? "cu" : "c";
	for (int round = 1; round <= R && !c->stop; round++) {
		st_llm_request q = {.msgs = msgs, .n_msgs = n_msgs, .temperature = c->temperature,
		                    .max_tokens = 16000, .sample = it->k};
		st_llm_response r;
		memset(&r, 0, sizeof r);
		st_err e;
		st_status ls = st_llm_complete(client, &q, &r, &e);
		if (ls) {
			if (!llm_failed(c, ls, &e))
				add_row(c, it, row_without_verdict(it, "no_answer", e.msg), round, NULL);
			break; /* no answer to build on: the conversation cannot go on */
		}
		it->tokens_in += r.input_tokens;
		it->tokens_out += r.output_tokens;
		it->cost_usd += r.cost_usd;
		/* oneshot keeps the plain names sample<k>.*; refine numbers its rounds */
		char stem[PATH_MAX + 64], path[PATH_MAX + 96];
		if (R == 1)
			snprintf(stem, sizeof stem, "%s/sample%d", dir, it->k);
		else
			snprintf(stem, sizeof stem, "%s/sample%d.round%d", dir, it->k, round);
		snprintf(path, sizeof path, "%s.answer.md", stem);
		(void)st_write_file_atomic(path, r.text ? r.text : "", r.text ? strlen(r.text) : 0, &e);
		char *code = NULL, *feedback = NULL;
		const char *why = NULL;
		if (st_extract_code(r.text ? r.text : "", r.truncated, &code, &why) != ST_EXTRACT_OK) {
			add_row(c, it, row_without_verdict(it, "no_code", why), round, NULL);
			if (asprintf(&feedback, "Your answer held no usable code: %s Answer with the whole "
			             "file in one fenced code block.", why ? why : "") < 0)
				feedback = NULL;
		} else {
			snprintf(path, sizeof path, "%s.%s", stem, ext);
			json_t *v = NULL;
			st_status s = st_write_file_atomic(path, code, strlen(code), &e);
			if (!s)
				s = eval_verify(w, it, path, &v, &e);
			if (env_failed(c, s, &e)) {
				json_decref(v);
				free(code);
				st_llm_response_free(&r);
				break;
			}
			note_device(c, v);
			json_t *row = v ? st_bench_row(it->task_id, it->tier, v)
			                : row_without_verdict(it, "error", e.msg);
			add_row(c, it, row, round, path);
			feedback = v ? st_refine_feedback(v, code) : NULL;
			json_decref(v);
		}
		free(code);
		if (round < R) {
			owned[n_msgs] = strdup(r.text ? r.text : "");
			msgs[n_msgs] = (st_llm_msg){"assistant", owned[n_msgs]};
			n_msgs++;
			owned[n_msgs] = feedback ? feedback : strdup("It failed. Answer with the whole file.");
			msgs[n_msgs] = (st_llm_msg){"user", owned[n_msgs]};
			n_msgs++;
			feedback = NULL;
			if (!owned[n_msgs - 1] || !owned[n_msgs - 2]) {
				st_llm_response_free(&r);
				break;
			}
		}
		free(feedback);
		st_llm_response_free(&r);
	}
	mark_final_last_code(it);
	for (int i = 0; i < n_msgs; i++)
		free(owned[i]);
	free(owned);
	free(msgs);
}

/* The agent loop's rounds from its trajectory: each attempt's verdict (or its lack of code).
 * The final row is the version the loop reports as its best, else its last attempt. */
static void rows_from_trajectory(eval_ctx *c, eval_item *it, const char *tpath,
                                 const json_t *report)
{
	FILE *f = fopen(tpath, "r");
	char *line = NULL;
	size_t cap = 0;
	while (f && getline(&line, &cap, f) > 0) {
		json_t *rec = json_loads(line, 0, NULL);
		const char *type = json_string_value(json_object_get(rec, "type"));
		int attempt = (int)json_integer_value(json_object_get(rec, "attempt"));
		if (type && !strcmp(type, "verdict")) {
			const json_t *v = json_object_get(rec, "verdict");
			note_device(c, v);
			add_row(c, it, st_bench_row(it->task_id, it->tier, v), attempt,
			        json_string_value(json_object_get(v, "version_path")));
		} else if (type && !strcmp(type, "no_code")) {
			add_row(c, it,
			        row_without_verdict(it, "no_code",
			                            json_string_value(json_object_get(rec, "why"))),
			        attempt, NULL);
		}
		json_decref(rec);
	}
	free(line);
	if (f)
		fclose(f);
	const char *best = json_string_value(
		json_object_get(json_object_get(report, "best"), "version"));
	size_t n = json_array_size(it->rows), pick = n ? n - 1 : 0;
	for (size_t i = 0; best && i < n; i++) {
		const char *code = json_string_value(json_object_get(json_array_get(it->rows, i), "code"));
		if (code && !strcmp(code, best))
			pick = i;
	}
	if (n)
		json_object_set_new(json_array_get(it->rows, pick), "final", json_true());
}

static void run_agent(eval_worker *w, eval_item *it)
{
	eval_ctx *c = w->c;
	char dir[PATH_MAX], out[PATH_MAX + 64], tpath[PATH_MAX + 96];
	eval_task_folder(c->out, it->task_id, dir, sizeof dir);
	snprintf(out, sizeof out, "%s/sample%d.agent", dir, it->k);
	/* A run again starts the loop again: its answers come from the cache, and the trajectory
	 * it writes must hold this run's attempts only. */
	snprintf(tpath, sizeof tpath, "%s/trajectory.jsonl", out);
	(void)unlink(tpath);
	st_solve_opts so;
	st_solve_opts_default(&so);
	so.task_dir = it->task_dir;
	so.model = c->model;
	so.out_dir = out;
	so.max_attempts = c->rounds;
	so.samples = 1;
	so.temperature = c->temperature;
	so.run_index = it->k;
	so.verify = c->verify;
	so.verify_slot = c->slot;
	so.llm = c->llm;
	if (c->queue_url) {
		w->item = it;
		so.verify_fn = agent_verify;
		so.verify_arg = w;
	}
	json_t *report = NULL;
	st_err e;
	st_status s = st_solve(&so, &report, &e);
	if (s) {
		if (!env_failed(c, s, &e) && !llm_failed(c, s, &e))
			add_row(c, it, row_without_verdict(it, "no_answer", e.msg), 1, NULL);
		if (json_array_size(it->rows))
			json_object_set_new(json_array_get(it->rows, json_array_size(it->rows) - 1),
			                    "final", json_true());
		return;
	}
	rows_from_trajectory(c, it, tpath, report);
	if (!json_array_size(it->rows)) { /* the loop stopped before any code (e.g. no plan) */
		add_row(c, it, row_without_verdict(it, "no_code",
		                                   json_string_value(json_object_get(report, "why"))),
		        1, NULL);
		json_object_set_new(json_array_get(it->rows, 0), "final", json_true());
	}
	const json_t *tok = json_object_get(report, "tokens");
	it->tokens_in += json_integer_value(json_object_get(tok, "input"));
	it->tokens_out += json_integer_value(json_object_get(tok, "output"));
	it->cost_usd += json_number_value(json_object_get(report, "cost_usd"));
	json_decref(report);
}

static void *eval_thread(void *arg)
{
	eval_ctx *c = arg;
	eval_worker w = {.c = c};
	st_llm_client *client = NULL;
	st_err e;
	st_status cs = c->mode == EVAL_AGENT ? ST_OK
	                                     : st_llm_client_new(&c->llm_model, &c->llm, &client, &e);
	for (;;) {
		pthread_mutex_lock(&c->mu);
		int i = !c->stop && c->next < c->n_items ? c->next++ : -1;
		pthread_mutex_unlock(&c->mu);
		if (i < 0)
			break;
		eval_item *it = &c->items[i];
		it->rows = json_array();
		if (cs) { /* no client (the answer cache, memory): no sample can be asked */
			env_stop(c, cs, e.msg);
		} else if (c->mode == EVAL_AGENT) {
			run_agent(&w, it);
		} else {
			run_conversation(&w, it, client);
		}
		pthread_mutex_lock(&c->mu);
		c->finished++;
		pthread_mutex_unlock(&c->mu);
	}
	st_llm_client_free(client);
	if (w.q_open)
		st_queue_close(&w.q);
	return NULL;
}

st_status eval_run(eval_ctx *c, int parallel, st_err *err)
{
	pthread_mutex_init(&c->mu, NULL);
	pthread_rwlock_init(&c->gpu_lock, NULL);
	memset(&c->slot, 0, sizeof c->slot);
	c->slot.gpu_lock = &c->gpu_lock;
	if (!st_neighbours_init(&c->neighbours))
		c->slot.neighbours = &c->neighbours;
	c->next = c->finished = c->stop = 0;
	c->env_status = ST_OK;
	pthread_t th[256];
	int n = parallel < c->n_items ? parallel : c->n_items, started = 0;
	if (n > 256)
		n = 256;
	for (int t = 0; t < n; t++)
		started += pthread_create(&th[started], NULL, eval_thread, c) == 0;
	if (!started && c->n_items)
		eval_thread(c);
	for (int t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	pthread_rwlock_destroy(&c->gpu_lock);
	if (c->slot.neighbours)
		st_neighbours_free(&c->neighbours);
	pthread_mutex_destroy(&c->mu);
	c->slot.gpu_lock = NULL;
	c->slot.neighbours = NULL;
	if (c->env_status)
		return st_err_set(err, c->env_status, "%s", c->env_error);
	return ST_OK;
}
