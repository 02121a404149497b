/* The agents' loop: the Planner designs, the Coder writes a whole solution per attempt, the
 * Verifier (st_verify plus st_verifier_feedback) judges it and picks the next stage:
 *
 *   plan -> draft -> repair-compile / repair-correctness -> optimise -> done
 *
 * with a new plan when the last few attempts all failed to compile, were all wrong, or
 * stagnated, and limits on attempts, replans, tokens, time and money. Every prompt, answer,
 * code version, verdict and transition is appended to trajectory.jsonl as it happens, so a run
 * can be audited and turned into training data; the fastest correct version is best-so-far. */
#include "solve.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agents.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/json_get.h"
#include "common/paths.h"
#include "common/progress.h"
#include "task/task.h"

#define MAX_SAMPLES 16
#define RUN_SAMPLES 1000000 /* request samples one run may use (attempts x samples, plan calls) */

void st_solve_opts_default(st_solve_opts *o)
{
	memset(o, 0, sizeof *o);
	o->max_attempts = 8;
	o->samples = 1;
	o->max_replans = 2;
	o->replan_after = 3;
	o->target_speedup = 2;
	o->max_tokens = 2000000;
	o->max_time_s = 3600;
	o->temperature = 0.2;
	o->max_output_tokens = 16384;
	st_verify_opts_default(&o->verify);
	st_llm_opts_default(&o->llm);
}

typedef struct solve {
	const st_solve_opts *o;
	st_task task;
	int task_loaded;
	st_llm_client *coder, *planner, *verifier; /* verifier: NULL unless --verifier-model */
	st_llm_client *coders[MAX_SAMPLES]; /* coders[0] is coder; one per concurrent sample */
	char out[4096], prompts[4096];
	FILE *traj;
	double t0;
	json_t *vars;      /* what every prompt may use */
	json_t *plan;
	json_t *history;   /* one entry per attempt: stage, status, speedup */
	st_stage stage;
	int attempts, replans;
	char *last_code, *last_feedback;
	char *pending_answer, *pending_why; /* an answer without usable code, and why: asked again */
	/* best so far: the fastest correct version */
	char best_path[4400];
	double best_speedup;
	json_t *best_verdict;
	double overhead_s; /* everything but model latency and verification */
	char arch[32];     /* what versions compile for, once known ("" until then) */
	char state[64], why[1100];
} solve;

static void say(solve *S, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(solve *S, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	st_vprogress(S->o->progress, S->o->progress_arg, 512, fmt, ap);
	va_end(ap);
}

/* One trajectory record, written and flushed at once: a crash loses nothing already done. */
static void traj(solve *S, const char *type, json_t *rec)
{
	json_object_set_new(rec, "type", json_string(type));
	json_object_set_new(rec, "t", json_real(st_now_s() - S->t0));
	char *line = json_dumps(rec, JSON_COMPACT);
	if (line && S->traj) {
		fputs(line, S->traj);
		fputc('\n', S->traj);
		fflush(S->traj);
	}
	free(line);
	json_decref(rec);
}

static void transition(solve *S, st_stage to, const char *why)
{
	traj(S, "transition", json_pack("{s:s,s:s,s:s}", "from", st_stage_name(S->stage), "to",
	                                st_stage_name(to), "why", why));
	S->stage = to;
}

/* What every client of the run has spent: the Coder's (one per sample) and the Planner's. */
static st_llm_usage usage_total(const solve *S)
{
	st_llm_usage t = {0};
	const st_llm_client *all[MAX_SAMPLES + 2];
	int n = 0;
	for (int k = 0; k < MAX_SAMPLES; k++)
		if (S->coders[k])
			all[n++] = S->coders[k];
	if (S->planner && S->planner != S->coder)
		all[n++] = S->planner;
	if (S->verifier && S->verifier != S->coder && S->verifier != S->planner)
		all[n++] = S->verifier;
	for (int i = 0; i < n; i++) {
		st_llm_usage u = st_llm_client_usage(all[i]);
		t.calls += u.calls;
		t.cache_hits += u.cache_hits;
		t.retries += u.retries;
		t.input_tokens += u.input_tokens;
		t.output_tokens += u.output_tokens;
		t.cost_usd += u.cost_usd;
	}
	return t;
}

static int64_t tokens_used(const solve *S)
{
	st_llm_usage u = usage_total(S);
	return u.input_tokens + u.output_tokens;
}

static double cost_used(const solve *S)
{
	return usage_total(S).cost_usd;
}

/* A limit reached sets the final state and says why; 1 when the run must stop. */
static int over_budget(solve *S)
{
	const st_solve_opts *o = S->o;
	if (S->attempts >= o->max_attempts)
		snprintf(S->why, sizeof S->why, "%d attempts used (--max-attempts)", S->attempts);
	else if (o->max_tokens > 0 && tokens_used(S) >= o->max_tokens)
		snprintf(S->why, sizeof S->why, "%lld tokens used (--max-tokens)",
		         (long long)tokens_used(S));
	else if (o->max_time_s > 0 && st_now_s() - S->t0 >= o->max_time_s)
		snprintf(S->why, sizeof S->why, "%.0f s spent (--max-time)", st_now_s() - S->t0);
	else if (o->max_cost_usd > 0 && cost_used(S) >= o->max_cost_usd)
		snprintf(S->why, sizeof S->why, "$%.2f spent (--max-cost)", cost_used(S));
	else
		return 0;
	snprintf(S->state, sizeof S->state, "budget_exhausted");
	return 1;
}

/* One model call, request and answer both in the trajectory. */
/* `sample` tells apart requests whose text repeats (the same draft prompt on a later attempt):
 * each gets its own answer, and a replay gives each the answer it had. */
static st_status ask(solve *S, st_llm_client *c, const char *agent, const st_llm_msg *msgs,
                     int n, int json_mode, int sample, st_llm_response *r, double *latency,
                     st_err *err)
{
	st_llm_request q = {.msgs = msgs, .n_msgs = n, .temperature = S->o->temperature,
	                    .max_tokens = S->o->max_output_tokens, .json_mode = json_mode,
	                    .sample = S->o->run_index * RUN_SAMPLES + sample};
	json_t *jm = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(jm, json_pack("{s:s,s:s}", "role", msgs[i].role, "content",
		                                    msgs[i].content));
	traj(S, "request", json_pack("{s:s,s:s,s:i,s:o}", "agent", agent, "stage",
	                             st_stage_name(S->stage), "attempt", S->attempts, "messages", jm));
	st_status s = st_llm_complete(c, &q, r, err);
	if (s) {
		traj(S, "llm_error", json_pack("{s:s,s:s}", "agent", agent, "error", err->msg));
		return s;
	}
	*latency += r->cached ? 0 : r->latency_s;
	traj(S, "response", json_pack("{s:s,s:s,s:s,s:b,s:I,s:I,s:b,s:f,s:f,s:i}", "agent", agent,
	                              "text", r->text, "finish", r->finish, "truncated", r->truncated,
	                              "input_tokens", (json_int_t)r->input_tokens, "output_tokens",
	                              (json_int_t)r->output_tokens, "cached", r->cached,
	                              "latency_s", r->latency_s, "cost_usd", r->cost_usd,
	                              "attempts", r->attempts));
	return ST_OK;
}

/* ---- the Planner ---------------------------------------------------------------------------- */

static st_status do_plan(solve *S, st_err *err)
{
	double latency = 0;
	char *hist = st_agent_history_text(S->history);
	json_object_set_new(S->vars, "history", json_string(hist && *hist ? hist : "none yet"));
	free(hist);
	char *prompt = NULL;
	st_status s = st_prompt_render(S->prompts, "planner", S->vars, &prompt, err);
	if (s)
		return s;
	st_llm_client *c = S->planner;
	st_llm_msg m[3] = {{"user", prompt}};
	st_llm_response r;
	s = ask(S, c, "planner", m, 1, 1, 2 * S->replans, &r, &latency, err);
	if (s) {
		free(prompt);
		return s;
	}
	json_t *plan = NULL;
	st_err perr;
	if (st_plan_parse(r.text, &plan, &perr)) {
		/* One repair request, with the reason, then a clear failure. */
		char fix[1400];
		snprintf(fix, sizeof fix, "That plan is not valid: %s. Answer with the corrected JSON "
		         "object only.", perr.msg);
		m[1] = (st_llm_msg){"assistant", r.text};
		m[2] = (st_llm_msg){"user", fix};
		st_llm_response r2;
		s = ask(S, c, "planner", m, 3, 1, 2 * S->replans + 1, &r2, &latency, err);
		if (!s && st_plan_parse(r2.text, &plan, &perr))
			s = st_err_set(err, ST_E_INVALID, "the planner's answer was not a valid plan twice: "
			               "%s", perr.msg);
		if (!r2.text && !s)
			s = st_err_set(err, ST_E_INVALID, "the planner gave no answer");
		st_llm_response_free(&r2);
	}
	st_llm_response_free(&r);
	free(prompt);
	if (s)
		return s;
	json_decref(S->plan);
	S->plan = plan;
	char path[4200];
	snprintf(path, sizeof path, "%s/plan.json", S->out);
	char *txt = json_dumps(plan, JSON_INDENT(2));
	s = txt ? st_write_file_atomic(path, txt, strlen(txt), err)
	        : st_err_set(err, ST_E_NOMEM, "out of memory");
	free(txt);
	traj(S, "plan", json_pack("{s:O,s:i}", "plan", plan, "replans", S->replans));
	return s;
}

/* ---- the Coder and the Verifier ------------------------------------------------------------ */

/* The Verifier's facts `fb` with the Verifier model's note on them appended (what went wrong,
 * the likely cause, the one change to make next). The facts stay: compiler lines and mismatch
 * figures are what the Coder must not have paraphrased away. When the model fails, the facts
 * alone go on (the failure is in the trajectory). Takes fb, returns the text to use. */
static char *verifier_note(solve *S, char *fb, double *latency)
{
	json_t *vars = json_deep_copy(S->vars);
	char *hist = st_agent_history_text(S->history);
	json_object_set_new(vars, "feedback", json_string(fb));
	json_object_set_new(vars, "history", json_string(hist && *hist ? hist : "none yet"));
	free(hist);
	char *prompt = NULL;
	st_err err;
	st_status s = st_prompt_render(S->prompts, "verifier-summary", vars, &prompt, &err);
	json_decref(vars);
	st_llm_response r = {0};
	if (!s) {
		st_llm_msg m[1] = {{"user", prompt}};
		s = ask(S, S->verifier, "verifier", m, 1, 0, S->attempts, &r, latency, &err);
	}
	free(prompt);
	char *out = NULL;
	if (!s && r.text && *r.text) {
		size_t n = strlen(fb) + strlen(r.text) + 64;
		out = malloc(n);
		if (out)
			snprintf(out, n, "%s\n\nThe Verifier's note:\n%s", fb, r.text);
	} else {
		say(S, "the Verifier's note is missing (%s); the Coder gets the facts alone",
		    s ? err.msg : "empty answer");
	}
	st_llm_response_free(&r);
	if (!out)
		return fb;
	free(fb);
	return out;
}

static const char *coder_template(st_stage s)
{
	return s == ST_STAGE_DRAFT     ? "coder-draft"
	       : s == ST_STAGE_OPTIMISE ? "coder-optimise"
	                                : "coder-repair";
}

static int is_correct(const json_t *verdict)
{
	return !strcmp(st_json_str_or(verdict, "status", ""), "ok");
}

static double speedup_of(const json_t *verdict)
{
	return json_number_value(json_object_get(json_object_get(verdict, "speedup"),
	                                         "vs_reference"));
}

static st_status write_version(solve *S, const char *code, char *path, size_t len, char *sha,
                               st_err *err)
{
	char hex[65];
	st_sha256_hex(code, strlen(code), hex);
	memcpy(sha, hex, 12);
	sha[12] = '\0';
	snprintf(path, len, "%s/versions/%s.%s", S->out, sha,
	         strcmp(S->o->verify.backend, "host") ? "cu" : "c");
	return st_write_file_atomic(path, code, strlen(code), err);
}

static void remember(solve *S, const char *status, const json_t *verdict)
{
	json_t *h = json_pack("{s:i,s:s,s:s}", "attempt", S->attempts, "stage",
	                      st_stage_name(S->stage), "status", status);
	if (verdict && is_correct(verdict) && speedup_of(verdict) > 0)
		json_object_set_new(h, "speedup", json_real(speedup_of(verdict)));
	json_array_append_new(S->history, h);
}

/* Replan when the last `n` attempts all failed the same way, or stagnated below the target. */
static const char *needs_replan(const solve *S)
{
	int n = S->o->replan_after;
	size_t len = json_array_size(S->history), since = 0;
	for (size_t i = 0; i < len; i++)
		if (!strcmp(st_json_str_or(json_array_get(S->history, i), "status", ""), "replan"))
			since = i + 1;
	if (n <= 0 || len - since < (size_t)n)
		return NULL;
	int compile = 0, wrong = 0, ok = 0;
	double lo = 1e300, hi = 0;
	for (size_t i = len - (size_t)n; i < len; i++) {
		const json_t *h = json_array_get(S->history, i);
		const char *st = json_string_value(json_object_get(h, "status"));
		if (!strcmp(st, "compile_error") || !strcmp(st, "forbidden") || !strcmp(st, "no_code"))
			compile++;
		else if (strcmp(st, "ok"))
			wrong++;
		else {
			ok++;
			double sp = json_number_value(json_object_get(h, "speedup"));
			lo = sp < lo ? sp : lo;
			hi = sp > hi ? sp : hi;
		}
	}
	if (compile == n)
		return "the last attempts all failed to compile";
	if (wrong == n)
		return "the last attempts were all incorrect";
	if (ok == n && hi < S->o->target_speedup && hi <= lo * 1.05)
		return "the last correct attempts stagnated within 5 % of each other below the target";
	return NULL;
}

/* One sample's answer, from its own client on its own thread (clients are not shared). */
typedef struct sample_job {
	st_llm_client *client;
	st_llm_request q;
	st_llm_response r;
	st_status s;
	st_err err;
} sample_job;

static void *sample_thread(void *arg)
{
	sample_job *j = arg;
	j->s = st_llm_complete(j->client, &j->q, &j->r, &j->err);
	return NULL;
}

/* One sample's file compiled into the cache ahead of its verify. */
typedef struct precompile_job {
	solve *S;
	char path[4300];
	int ok;
} precompile_job;

static void *precompile_thread(void *arg)
{
	precompile_job *j = arg;
	st_err e;
	/* a failure is the verify's to report */
	(void)st_verify_precompile(j->S->o->task_dir, j->path, &j->S->o->verify, j->S->arch, &e);
	return NULL;
}

/* K samples compile at the same time (nvcc takes seconds a file); their verifies, which need
 * the GPU to themselves, then run one after another and find them in the cache. Needs the arch
 * the verifier compiles for: known from the reference's profile, --arch, or the host backend. */
static void precompile_samples(solve *S, const st_llm_response *r, int K, double *verify_s)
{
	if (K < 2 || !S->arch[0] || S->o->verify.no_cache)
		return;
	double t0 = st_now_s();
	precompile_job jobs[MAX_SAMPLES];
	pthread_t th[MAX_SAMPLES];
	int started[MAX_SAMPLES] = {0};
	for (int k = 0; k < K; k++) {
		jobs[k] = (precompile_job){.S = S};
		char *code = NULL, sha[13];
		const char *why;
		st_err e;
		if (!r[k].text || st_extract_code(r[k].text, r[k].truncated, &code, &why) != ST_EXTRACT_OK ||
		    write_version(S, code, jobs[k].path, sizeof jobs[k].path, sha, &e)) {
			free(code);
			continue;
		}
		free(code);
		jobs[k].ok = 1;
		started[k] = pthread_create(&th[k], NULL, precompile_thread, &jobs[k]) == 0;
		if (!started[k])
			precompile_thread(&jobs[k]);
	}
	int n = 0;
	for (int k = 0; k < K; k++) {
		if (started[k])
			pthread_join(th[k], NULL);
		n += jobs[k].ok;
	}
	*verify_s += st_now_s() - t0;
	traj(S, "precompiled", json_pack("{s:i,s:i,s:f}", "attempt", S->attempts, "versions", n,
	                                 "seconds", st_now_s() - t0));
}

/* Worse verdicts rank lower: no code < compile error < wrong < correct (then by speed). */
static double rank_of(const json_t *verdict)
{
	if (!verdict)
		return 0;
	const char *st = st_json_str_or(verdict, "status", "");
	if (!strcmp(st, "ok"))
		return 3 + speedup_of(verdict);
	if (!strcmp(st, "compile_error") || !strcmp(st, "forbidden"))
		return 1;
	return 2;
}

/* Extract, store and verify one answer; the verdict (NULL: no usable code) and the code. */
static st_status judge(solve *S, int k, const st_llm_response *r, json_t **verdict, char **code,
                       const char **why, double *verify_s, st_err *err)
{
	*verdict = NULL;
	*code = NULL;
	if (st_extract_code(r->text, r->truncated, code, why) != ST_EXTRACT_OK) {
		traj(S, "no_code", json_pack("{s:i,s:i,s:s}", "attempt", S->attempts, "sample", k, "why",
		                             *why));
		return ST_OK;
	}
	char path[4300], sha[13];
	st_status s = write_version(S, *code, path, sizeof path, sha, err);
	if (s)
		return s;
	traj(S, "code", json_pack("{s:i,s:i,s:s,s:s,s:s}", "attempt", S->attempts, "sample", k,
	                          "version", sha, "path", path, "code", *code));
	double tv = st_now_s();
	const st_solve_opts *o = S->o;
	s = o->verify_fn ? o->verify_fn(o->verify_arg, o->task_dir, path, &o->verify, &o->verify_slot,
	                                verdict, err)
	                 : st_verify(o->task_dir, path, &o->verify, &o->verify_slot, verdict, err);
	*verify_s += st_now_s() - tv;
	if (s && !*verdict)
		return s; /* the environment, not the candidate: no GPU, a broken baseline */
	/* A verdict with an error status (e.g. the file lacks the ABI) is still a verdict. */
	if (!json_object_get(*verdict, "status"))
		json_object_set_new(*verdict, "status", json_string("compile_error"));
	json_object_set_new(*verdict, "version_path", json_string(path));
	traj(S, "verdict", json_pack("{s:i,s:i,s:s,s:O}", "attempt", S->attempts, "sample", k,
	                             "version", sha, "verdict", *verdict));
	if (is_correct(*verdict) && (!S->best_verdict || speedup_of(*verdict) > S->best_speedup)) {
		snprintf(S->best_path, sizeof S->best_path, "%s", path);
		S->best_speedup = speedup_of(*verdict);
		json_decref(S->best_verdict);
		S->best_verdict = json_incref(*verdict);
		traj(S, "best", json_pack("{s:s,s:f}", "version", sha, "speedup", S->best_speedup));
	}
	return ST_OK;
}

/* K answers at once, each from its own client (K > 1); recorded in sample order afterwards.
 * *latency: the longest uncached one. The first failure is returned, the others recorded. */
static st_status ask_samples(solve *S, st_llm_msg *m, int n_msgs, int K, st_llm_response *r,
                             double *latency, st_err *err)
{
	st_status s = ST_OK;
	json_t *jm = json_array();
	for (int i = 0; i < n_msgs; i++)
		json_array_append_new(jm, json_pack("{s:s,s:s}", "role", m[i].role, "content",
		                                    m[i].content));
	traj(S, "request", json_pack("{s:s,s:s,s:i,s:i,s:o}", "agent", "coder", "stage",
	                             st_stage_name(S->stage), "attempt", S->attempts, "samples",
	                             K, "messages", jm));
	sample_job jobs[MAX_SAMPLES];
	pthread_t th[MAX_SAMPLES];
	int started[MAX_SAMPLES] = {0};
	for (int k = 0; k < K; k++) {
		jobs[k] = (sample_job){.client = S->coders[k],
		                       .q = {.msgs = m, .n_msgs = n_msgs,
		                             .temperature = S->o->temperature,
		                             .max_tokens = S->o->max_output_tokens,
		                             .sample = S->o->run_index * RUN_SAMPLES +
		                                       S->attempts * K + k}};
		started[k] = pthread_create(&th[k], NULL, sample_thread, &jobs[k]) == 0;
		if (!started[k])
			sample_thread(&jobs[k]);
	}
	for (int k = 0; k < K; k++) {
		if (started[k])
			pthread_join(th[k], NULL);
		r[k] = jobs[k].r;
		if (jobs[k].s && !s) {
			s = jobs[k].s;
			*err = jobs[k].err;
		}
		if (jobs[k].s) {
			traj(S, "llm_error", json_pack("{s:s,s:i,s:s}", "agent", "coder", "sample", k,
			                               "error", jobs[k].err.msg));
			continue;
		}
		double l = r[k].cached ? 0 : r[k].latency_s;
		*latency = l > *latency ? l : *latency;
		traj(S, "response", json_pack("{s:s,s:i,s:s,s:s,s:b,s:I,s:I,s:b,s:f,s:f}", "agent",
		                              "coder", "sample", k, "text", r[k].text, "finish",
		                              r[k].finish, "truncated", r[k].truncated,
		                              "input_tokens", (json_int_t)r[k].input_tokens,
		                              "output_tokens", (json_int_t)r[k].output_tokens,
		                              "cached", r[k].cached, "latency_s", r[k].latency_s,
		                              "cost_usd", r[k].cost_usd));
	}
	return s;
}

static st_status do_attempt(solve *S, st_err *err)
{
	double t_start = st_now_s(), latency = 0, verify_s = 0;
	const int K = S->o->samples > 1 ? S->o->samples : 1;
	S->attempts++;
	char *steps = st_agent_steps_text(S->plan);
	char *hist = st_agent_history_text(S->history);
	char *plan_txt = json_dumps(S->plan, JSON_INDENT(2));
	json_object_set_new(S->vars, "plan", json_string(plan_txt ? plan_txt : "{}"));
	free(plan_txt);
	json_object_set_new(S->vars, "step", json_string(steps ? steps : ""));
	json_object_set_new(S->vars, "history", json_string(hist && *hist ? hist : "none yet"));
	json_object_set_new(S->vars, "previous_code", json_string(S->last_code ? S->last_code : ""));
	json_object_set_new(S->vars, "feedback",
	                    json_string(S->last_feedback ? S->last_feedback : "none yet"));
	free(steps);
	free(hist);
	char *prompt = NULL;
	st_status s = st_prompt_render(S->prompts, coder_template(S->stage), S->vars, &prompt, err);
	if (s)
		return s;
	say(S, "attempt %d/%d: %s (best %.2fx, %lld tokens)", S->attempts, S->o->max_attempts,
	    st_stage_name(S->stage), S->best_speedup, (long long)tokens_used(S));
	/* After an answer without usable code the conversation goes on: that answer, then why it
	 * could not be used. */
	st_llm_msg m[3] = {{"user", prompt}, {"assistant", S->pending_answer},
	                   {"user", S->pending_why}};
	int n_msgs = S->pending_answer ? 3 : 1;
	st_llm_response r[MAX_SAMPLES];
	memset(r, 0, sizeof r);
	if (K == 1) {
		s = ask(S, S->coders[0], "coder", m, n_msgs, 0, S->attempts, &r[0], &latency, err);
	} else {
		s = ask_samples(S, m, n_msgs, K, r, &latency, err);
	}
	free(prompt);
	free(S->pending_answer);
	free(S->pending_why);
	S->pending_answer = S->pending_why = NULL;
	if (s) {
		for (int k = 0; k < K; k++)
			st_llm_response_free(&r[k]);
		return s;
	}
	/* Compiled at once, verified one after another: on one GPU, concurrent timing would measure
	 * the contention. */
	precompile_samples(S, r, K, &verify_s);
	json_t *pick = NULL;
	char *pick_code = NULL;
	const char *first_why = NULL;
	int first_no_code = -1;
	for (int k = 0; k < K && !s; k++) {
		json_t *v = NULL;
		char *code = NULL;
		const char *why = NULL;
		s = judge(S, k, &r[k], &v, &code, &why, &verify_s, err);
		if (!v && !s && first_no_code < 0) {
			first_no_code = k;
			first_why = why;
		}
		if (v && (!pick || rank_of(v) > rank_of(pick))) {
			json_decref(pick);
			free(pick_code);
			pick = v;
			pick_code = code;
		} else {
			json_decref(v);
			free(code);
		}
	}
	if (!s && !pick) {
		/* No sample held usable code: ask again, same stage, with the reason. */
		S->pending_answer = r[first_no_code].text;
		r[first_no_code].text = NULL;
		S->pending_why = strdup(first_why);
		remember(S, "no_code", NULL);
	}
	for (int k = 0; k < K; k++)
		st_llm_response_free(&r[k]);
	if (s || !pick) {
		free(pick_code);
		S->overhead_s += st_now_s() - t_start - latency - verify_s;
		return s;
	}
	char *fb = NULL;
	st_stage next = st_verifier_feedback(pick, pick_code, S->o->target_speedup, &fb);
	if (S->verifier && fb && next != ST_STAGE_DONE)
		fb = verifier_note(S, fb, &latency);
	const char *status = st_json_str_or(pick, "status", "?");
	traj(S, "feedback", json_pack("{s:i,s:s,s:s}", "attempt", S->attempts, "version",
	                              st_json_str_or(pick, "version_path", ""), "text", fb ? fb : ""));
	remember(S, status, pick);
	say(S, "attempt %d: %s%s", S->attempts, status, is_correct(pick) ? "" : " — repairing");
	/* The next prompt works from this version and what the Verifier said of it. */
	free(S->last_code);
	S->last_code = pick_code;
	free(S->last_feedback);
	S->last_feedback = fb;
	char reason[128];
	snprintf(reason, sizeof reason, "verdict %s", status);
	transition(S, next, reason);
	json_decref(pick);
	S->overhead_s += st_now_s() - t_start - latency - verify_s;
	return ST_OK;
}

/* ---- set-up and the report ----------------------------------------------------------------- */

/* The reference's own profile (timeline, roofline, findings) for the prompts, where the backend
 * can profile: the Planner sees where an eager implementation spends its time. */
static char *reference_profile(solve *S)
{
	const st_solve_opts *o = S->o;
	if (strcmp(o->verify.backend, "cuda") || !o->verify.profile)
		return strdup("none (this backend has no profiler)");
	if (!S->task.reference)
		return strdup("none (an imported task: judged against stored outputs, no reference "
		              "solution)");
	st_verify_opts vo = o->verify;
	vo.timing = 0;
	vo.seeds = 1;
	vo.sets = "eval";
	vo.candidate_trusted = 1;
	st_verify_slot slot = o->verify_slot;
	slot.progress = NULL;
	json_t *v = NULL;
	st_err e;
	if (st_verify(o->task_dir, S->task.reference, &vo, &slot, &v, &e) || !v) {
		json_decref(v);
		return strdup("none (profiling the reference failed)");
	}
	const char *arch = json_string_value(json_object_get(v, "arch"));
	if (arch && !S->arch[0])
		snprintf(S->arch, sizeof S->arch, "%s", arch);
	const json_t *p = json_object_get(v, "profile"), *sum = json_object_get(p, "summary");
	char text[4096];
	size_t n = (size_t)snprintf(text, sizeof text, "%d launches, GPU busy %.0f%% of %.1f us\n",
	                            (int)json_integer_value(json_object_get(sum, "launches")),
	                            json_number_value(json_object_get(sum, "busy_pct")),
	                            json_number_value(json_object_get(sum, "span_us")));
	size_t i;
	json_t *k;
	json_array_foreach(json_object_get(sum, "top_kernels"), i, k)
		if (n < sizeof text)
			n += (size_t)snprintf(text + n, sizeof text - n, "%.1f%% %s\n",
			                      100 * json_number_value(json_object_get(k, "share")),
			                      st_json_str_or(k, "name", "?"));
	json_array_foreach(json_object_get(p, "findings"), i, k)
		if (n < sizeof text)
			n += (size_t)snprintf(text + n, sizeof text - n, "- %s\n",
			                      st_json_str_or(k, "text", ""));
	json_decref(v);
	return strdup(p ? text : "none");
}

static st_status setup(solve *S, st_err *err)
{
	const st_solve_opts *o = S->o;
	st_status s = st_task_load(o->task_dir, &S->task, err);
	if (s)
		return s;
	S->task_loaded = 1;
	st_llm_model cm, pm, vm;
	if ((s = st_llm_model_parse(o->model, &cm, err)) ||
	    (s = st_llm_model_parse(o->planner_model ? o->planner_model : o->model, &pm, err)) ||
	    (s = st_llm_model_parse(o->verifier_model ? o->verifier_model : o->model, &vm, err)))
		return s;
	/* Keys and endpoints are checked before anything is written; a replay needs neither. */
	if (!o->llm.replay && ((s = st_llm_model_check(&cm, 10, err)) ||
	                       (s = st_llm_model_check(&pm, 10, err)) ||
	                       (o->verifier_model && (s = st_llm_model_check(&vm, 10, err)))))
		return s;
	snprintf(S->out, sizeof S->out, "%s", o->out_dir);
	char vers[4200];
	snprintf(vers, sizeof vers, "%s/versions", S->out);
	if ((s = st_mkdirs(vers, err)))
		return s;
	st_llm_opts lo = o->llm;
	char cache[4200];
	if (!lo.cache_path) {
		snprintf(cache, sizeof cache, "%s/llm-cache.sqlite", S->out);
		lo.cache_path = cache;
	}
	if ((s = st_llm_client_new(&cm, &lo, &S->coder, err)))
		return s;
	S->coders[0] = S->coder;
	for (int k = 1; k < o->samples && k < MAX_SAMPLES; k++)
		if ((s = st_llm_client_new(&cm, &lo, &S->coders[k], err)))
			return s;
	if (!o->planner_model || !strcmp(o->planner_model, o->model))
		S->planner = S->coder;
	else if ((s = st_llm_client_new(&pm, &lo, &S->planner, err)))
		return s;
	if (o->verifier_model && !strcmp(o->verifier_model, o->model))
		S->verifier = S->coder;
	else if (o->verifier_model && (s = st_llm_client_new(&vm, &lo, &S->verifier, err)))
		return s;
	if (o->prompts_dir)
		snprintf(S->prompts, sizeof S->prompts, "%s", o->prompts_dir);
	else
		snprintf(S->prompts, sizeof S->prompts, "%s/prompts", st_home());
	char tpath[4200];
	snprintf(tpath, sizeof tpath, "%s/trajectory.jsonl", S->out);
	S->traj = fopen(tpath, "a");
	if (!S->traj)
		return st_err_set(err, ST_E_IO, "%s: %s", tpath, strerror(errno));

	int host = !strcmp(o->verify.backend, "host");
	S->vars = st_agent_task_vars(&S->task, host,
	                             o->verify.arch ? o->verify.arch : (host ? "host CPU" : "sm_90a"),
	                             o->target_speedup, "none");
	S->history = json_array();
	if (!S->vars || !S->history)
		return st_err_set(err, ST_E_NOMEM, "out of memory");
	if (o->verify.arch)
		snprintf(S->arch, sizeof S->arch, "%s", o->verify.arch);
	else if (host)
		snprintf(S->arch, sizeof S->arch, "host"); /* the arch a host verify compiles for */
	say(S, "profiling the reference");
	char *rp = reference_profile(S);
	json_object_set_new(S->vars, "reference_profile", json_string(rp ? rp : "none"));
	free(rp);
	return ST_OK;
}

static st_status finish(solve *S, json_t **report, st_err *err)
{
	char best_copy[4200] = "";
	st_status s = ST_OK;
	if (S->best_verdict) {
		char *code = NULL;
		size_t n = 0;
		snprintf(best_copy, sizeof best_copy, "%s/best.%s", S->out,
		         strcmp(S->o->verify.backend, "host") ? "cu" : "c");
		s = st_read_file(S->best_path, &code, &n, err);
		if (!s)
			s = st_write_file_atomic(best_copy, code, n, err);
		free(code);
	}
	st_llm_usage cu = usage_total(S), pu = {0};
	int llm_attempts = S->attempts > 0 ? S->attempts : 1;
	json_t *r = json_pack(
		"{s:s,s:s,s:s,s:s?,s:s,s:s,s:i,s:i,s:f,s:{s:I,s:I,s:i,s:i,s:i},s:f,s:f,s:f}", "task",
		S->task.id, "model", S->o->model, "planner_model",
		S->o->planner_model ? S->o->planner_model : S->o->model, "verifier_model",
		S->o->verifier_model, "state", S->state, "why",
		S->why, "attempts", S->attempts, "replans", S->replans, "target_speedup",
		S->o->target_speedup, "tokens", "input", (json_int_t)(cu.input_tokens + pu.input_tokens),
		"output", (json_int_t)(cu.output_tokens + pu.output_tokens), "calls",
		cu.calls + pu.calls, "cache_hits", cu.cache_hits + pu.cache_hits, "retries",
		cu.retries + pu.retries, "cost_usd", cu.cost_usd + pu.cost_usd, "wall_s",
		st_now_s() - S->t0, "overhead_ms_per_attempt", 1e3 * S->overhead_s / llm_attempts);
	if (S->best_verdict) {
		json_t *sp = json_object_get(S->best_verdict, "speedup");
		json_object_set_new(r, "best", json_pack("{s:s,s:s,s:O,s:O}", "path", best_copy,
		                                         "version", S->best_path, "speedup",
		                                         sp ? sp : json_null(), "verdict",
		                                         S->best_verdict));
	}
	json_object_set(r, "history", S->history);
	char path[4200];
	snprintf(path, sizeof path, "%s/report.json", S->out);
	char *txt = json_dumps(r, JSON_INDENT(2));
	if (!s)
		s = txt ? st_write_file_atomic(path, txt, strlen(txt), err)
		        : st_err_set(err, ST_E_NOMEM, "out of memory");
	free(txt);
	traj(S, "report", json_incref(r));
	if (s) {
		json_decref(r);
		return s;
	}
	*report = r;
	return ST_OK;
}

static void teardown(solve *S)
{
	if (S->planner != S->coder)
		st_llm_client_free(S->planner);
	if (S->verifier && S->verifier != S->coder)
		st_llm_client_free(S->verifier);
	for (int k = 1; k < MAX_SAMPLES; k++)
		st_llm_client_free(S->coders[k]);
	st_llm_client_free(S->coder);
	if (S->traj)
		fclose(S->traj);
	if (S->task_loaded)
		st_task_free(&S->task);
	json_decref(S->vars);
	json_decref(S->plan);
	json_decref(S->history);
	json_decref(S->best_verdict);
	free(S->last_code);
	free(S->last_feedback);
	free(S->pending_answer);
	free(S->pending_why);
}

st_status st_solve(const st_solve_opts *o, json_t **report, st_err *err)
{
	*report = NULL;
	solve S = {.o = o, .t0 = st_now_s(), .stage = ST_STAGE_PLAN};
	st_status s = setup(&S, err);
	if (s) {
		teardown(&S);
		return s;
	}
	traj(&S, "start", json_pack("{s:s,s:s,s:s,s:i,s:f}", "task", S.task.id, "model", o->model,
	                            "backend", o->verify.backend, "max_attempts", o->max_attempts,
	                            "target_speedup", o->target_speedup));
	snprintf(S.state, sizeof S.state, "running");
	while (!s) {
		if (S.stage == ST_STAGE_DONE) {
			snprintf(S.state, sizeof S.state, "done");
			snprintf(S.why, sizeof S.why, "reached %.2fx (target %.2fx)", S.best_speedup,
			         o->target_speedup);
			break;
		}
		if (over_budget(&S))
			break;
		if (S.stage == ST_STAGE_PLAN) {
			say(&S, "planning%s", S.replans ? " again" : "");
			s = do_plan(&S, err);
			if (s)
				break;
			transition(&S, ST_STAGE_DRAFT, S.replans ? "new plan" : "plan ready");
			continue;
		}
		s = do_attempt(&S, err);
		const char *why = s ? NULL : needs_replan(&S);
		if (why && S.stage != ST_STAGE_DONE) {
			if (S.replans >= o->max_replans) {
				snprintf(S.state, sizeof S.state, "budget_exhausted");
				snprintf(S.why, sizeof S.why, "%s and %d replans are used (--max-replans)", why,
				         S.replans);
				break;
			}
			S.replans++;
			/* A new plan starts a new window: the failures that caused it are history. */
			json_t *h = json_pack("{s:i,s:s,s:s}", "attempt", S.attempts, "stage", "plan",
			                      "status", "replan");
			json_array_append_new(S.history, h);
			transition(&S, ST_STAGE_PLAN, why);
		}
	}
	if (s) {
		/* The model or the environment failed: keep what was done, say why. */
		snprintf(S.state, sizeof S.state, "failed");
		snprintf(S.why, sizeof S.why, "%s", err->msg);
		traj(&S, "error", json_pack("{s:s}", "error", err->msg));
	}
	st_err ferr;
	st_status fs = finish(&S, report, &ferr);
	teardown(&S);
	if (fs)
		return st_err_set(err, fs, "%s", ferr.msg);
	return ST_OK;
}
