/* Training datasets for RL trainers (verl, TRL) from the suite and from `stitch solve`
 * trajectories. A record is a prompt as the Coder agent would be sent it, in chat form, plus the
 * metadata a reward function needs to find the task and judge an answer. Two skills: "gen" asks
 * for a first draft of every task (nothing but the task to go on), "opt" replays every verified
 * version of recorded runs and asks to repair or speed it up, with the code and the Verifier's
 * feedback the run recorded. Prompts are rendered from the same templates and the same variables
 * as st_solve fills, so a policy trained on them sees at training time what the agents show it
 * at run time. The order is deterministic (tasks by id, trajectories by path then attempt) so
 * that a dataset can be rebuilt and diffed. */
#include "dataset.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents.h"
#include "common/fs.h"
#include "common/grow.h"
#include "common/json_get.h"
#include "common/paths.h"
#include "task/task.h"

/* What a draft prompt says where a solve run would put the Planner's plan: a gen record stands
 * for the one-shot case, with no Planner before it. */
#define NO_PLAN "no plan: design and write it in one go"

/* ---- small containers ------------------------------------------------------------------------ */

typedef struct strlist {
	char **v;
	int n, cap;
} strlist;

static int strlist_add(strlist *l, const char *s)
{
	if (ST_GROW(l->v, l->cap, l->n + 1, 8))
		return -1;
	if (!(l->v[l->n] = strdup(s)))
		return -1;
	l->n++;
	return 0;
}

static void strlist_free(strlist *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof *l);
}

static int by_string(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- options and the run's state ------------------------------------------------------------- */

typedef struct exporter {
	const char *skill, *glob, *backend, *prompts_arg, *tasks_root;
	char prompts[4200];
	strlist traj_dirs, task_dirs;
	/* Tasks loaded so far, one allocation each: a pointer stays valid while more are added. */
	st_task **tasks;
	int n_tasks, cap_tasks;
	json_t *records; /* array, in output order */
	st_err err;
	st_status status;
} exporter;

static int fail(exporter *X, st_status s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(exporter *X, st_status s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(X->err.msg, sizeof X->err.msg, fmt, ap);
	va_end(ap);
	X->status = s;
	return -1;
}

static int oom(exporter *X)
{
	return fail(X, ST_E_NOMEM, "out of memory");
}

static int task_matches(const exporter *X, const char *id)
{
	return !X->glob || !fnmatch(X->glob, id, 0);
}

/* Load a task folder unless a task of that id is loaded already; *out is the task. */
static int task_add(exporter *X, const char *dir, st_task **out)
{
	st_task *t = calloc(1, sizeof *t);
	if (!t)
		return oom(X);
	st_err e;
	st_status s = st_task_load(dir, t, &e);
	if (s) {
		free(t);
		return fail(X, s == ST_E_NOMEM ? s : ST_E_INVALID, "%s", e.msg);
	}
	for (int i = 0; i < X->n_tasks; i++)
		if (!strcmp(X->tasks[i]->id, t->id)) {
			/* The same task named twice (--task-dir given twice, or also in the suite). */
			st_task_free(t);
			free(t);
			*out = X->tasks[i];
			return 0;
		}
	if (ST_GROW(X->tasks, X->cap_tasks, X->n_tasks + 1, 16)) {
		st_task_free(t);
		free(t);
		return oom(X);
	}
	X->tasks[X->n_tasks++] = t;
	*out = t;
	return 0;
}

/* The task a trajectory names: one of the --task-dir folders, else the suite's. */
static int task_find(exporter *X, const char *id, st_task **out)
{
	for (int i = 0; i < X->n_tasks; i++)
		if (!strcmp(X->tasks[i]->id, id)) {
			*out = X->tasks[i];
			return 0;
		}
	char dir[4096];
	st_err e;
	if (st_task_resolve(id, X->tasks_root, dir, sizeof dir, &e))
		return fail(X, ST_E_INVALID, "task %s: %s; give its folder with --task-dir", id, e.msg);
	return task_add(X, dir, out);
}

/* The variables every Coder prompt draws on, made as st_solve's set-up makes them (workflow.c):
 * a change there must be mirrored here or the dataset drifts from what the agents are sent. */
static int set_str(json_t *vars, const char *key, const char *value)
{
	return json_object_set_new(vars, key, json_string(value ? value : ""));
}

/* One dataset record; `baseline` is borrowed (NULL: no timing recorded). An opt record also
 * carries the code it starts from and the Verifier's feedback on it, which an optimisation
 * reward hands to its judge (stitch serve's /v1/reward); NULL for gen. */
static int add_record(exporter *X, const char *prompt, const char *task_id, const char *tmpl,
                      const char *backend, const json_t *baseline, const char *source,
                      const char *previous_code, const char *feedback)
{
	json_t *rec = json_pack("{s:[{s:s,s:s}],s:s,s:s,s:{s:s,s:s},s:{s:s,s:s,s:s,s:s,s:s,s:O,s:s,"
	                        "s:s*,s:s*,s:I}}",
	                        "prompt", "role", "user", "content", prompt, "data_source", "stitch",
	                        "ability", "cuda", "reward_model", "style", "rule", "ground_truth", "",
	                        "extra_info", "task_id", task_id, "skill", X->skill, "template", tmpl,
	                        "size_set", "eval", "backend", backend, "baseline_ms",
	                        baseline ? baseline : json_null(), "source", source, "previous_code",
	                        previous_code, "feedback", feedback, "index",
	                        (json_int_t)json_array_size(X->records));
	if (!rec || json_array_append_new(X->records, rec))
		return oom(X);
	return 0;
}

static int render(exporter *X, const char *tmpl, const json_t *vars, char **prompt)
{
	st_err e;
	st_status s = st_prompt_render(X->prompts, tmpl, vars, prompt, &e);
	if (s)
		return fail(X, s == ST_E_NOMEM ? s : ST_E_INVALID, "%s", e.msg);
	return 0;
}

/* ---- skill gen: one first-draft prompt per task ---------------------------------------------- */

static int by_task_id(const void *a, const void *b)
{
	return strcmp((*(st_task *const *)a)->id, (*(st_task *const *)b)->id);
}

static int export_gen(exporter *X)
{
	st_task *t;
	if (!X->task_dirs.n) { /* else the --task-dir tasks, loaded already, are the suite */
		char **dirs;
		int n;
		st_err e;
		st_status s = st_task_list(X->tasks_root, &dirs, &n, &e);
		if (s)
			return fail(X, s == ST_E_NOMEM ? s : ST_E_INVALID, "%s", e.msg);
		int r = 0;
		for (int i = 0; i < n && !r; i++)
			r = task_add(X, dirs[i], &t);
		st_task_list_free(dirs, n);
		if (r)
			return -1;
	}
	qsort(X->tasks, (size_t)X->n_tasks, sizeof *X->tasks, by_task_id);
	const char *backend = X->backend ? X->backend : "cuda";
	int host = !strcmp(backend, "host");
	for (int i = 0; i < X->n_tasks; i++) {
		t = X->tasks[i];
		if (!task_matches(X, t->id))
			continue;
		if (host && !t->host_reference && !t->n_data_seeds) {
			/* Nothing to check a host answer against: a prompt no reward could score (an
			 * imported task's stored outputs check any backend's answer). */
			fprintf(stderr, "stitch: export: %s has no host reference; left out\n", t->id);
			continue;
		}
		json_t *vars = st_agent_task_vars(t, host, host ? "host CPU" : "sm_90a", 2,
		                         host ? "none (this backend has no profiler)" : "none");
		if (!vars || set_str(vars, "plan", NO_PLAN) || set_str(vars, "step", NO_PLAN) ||
		    set_str(vars, "history", "none yet") || set_str(vars, "previous_code", "") ||
		    set_str(vars, "feedback", "none yet")) {
			json_decref(vars);
			return oom(X);
		}
		char *prompt = NULL;
		int r = render(X, "coder-draft", vars, &prompt);
		json_decref(vars);
		if (!r)
			r = add_record(X, prompt, t->id, "coder-draft", backend, NULL, "suite", NULL, NULL);
		free(prompt);
		if (r)
			return -1;
	}
	return 0;
}

/* ---- skill opt: every version with feedback in the recorded runs ----------------------------- */

/* Every trajectory.jsonl that --trajectories names: DIR's own, else its subfolders'. */
static int find_trajectories(exporter *X, strlist *out)
{
	for (int i = 0; i < X->traj_dirs.n; i++) {
		char dir[4096], path[4200];
		snprintf(dir, sizeof dir, "%s", X->traj_dirs.v[i]);
		for (size_t L = strlen(dir); L > 1 && dir[L - 1] == '/'; L--)
			dir[L - 1] = '\0';
		if (!st_dir_exists(dir))
			return fail(X, ST_E_INVALID, "--trajectories %s: no such folder", dir);
		snprintf(path, sizeof path, "%s/trajectory.jsonl", dir);
		if (st_file_exists(path)) {
			if (strlist_add(out, path))
				return oom(X);
			continue;
		}
		struct dirent **ents;
		int n = scandir(dir, &ents, NULL, alphasort);
		if (n < 0)
			return fail(X, ST_E_IO, "--trajectories %s: %s", dir, strerror(errno));
		int found = 0, r = 0;
		for (int k = 0; k < n; k++) {
			if (!r && ents[k]->d_name[0] != '.') {
				snprintf(path, sizeof path, "%s/%s/trajectory.jsonl", dir, ents[k]->d_name);
				if (st_file_exists(path)) {
					found++;
					r = strlist_add(out, path) ? oom(X) : 0;
				}
			}
			free(ents[k]);
		}
		free(ents);
		if (r)
			return -1;
		if (!found)
			return fail(X, ST_E_INVALID,
			            "--trajectories %s: no trajectory.jsonl in it or in its subfolders", dir);
	}
	qsort(out->v, (size_t)out->n, sizeof *out->v, by_string);
	/* The same run named twice (a folder and its parent) would give every record twice. */
	int w = 0;
	for (int i = 0; i < out->n; i++) {
		if (w && !strcmp(out->v[w - 1], out->v[i]))
			free(out->v[i]);
		else
			out->v[w++] = out->v[i];
	}
	out->n = w;
	return 0;
}

/* Where one run (a "start" record and what follows) stands as the file is read: enough to
 * rebuild each Coder prompt's variables the way the workflow had them. */
typedef struct run_state {
	int segment;
	int skip;              /* filtered out by --tasks or --backend */
	const char *task_id;   /* borrowed from the start record */
	const char *backend;
	double target_speedup;
	json_t *vars;          /* made at the first record needing them */
	json_t *plan;          /* the plan in effect (borrowed from its record) */
	json_t *history;       /* entries {attempt, stage, status, speedup?} as remember() adds */
	json_t *codes;         /* version path -> "code" record */
	json_t *verdicts;      /* version path -> verdict */
	int attempt;
	const char *stage;
	int attempt_no_code, attempt_feedback;
} run_state;

/* One pending record of a trajectory: held until the file is read, for the baselines that a
 * later version may supply and for dropping the versions a resumed run repeated. */
typedef struct pending {
	int segment, attempt, order;
	char *path;   /* version path */
	char *prompt, *source;
	char *previous_code, *feedback; /* what the prompt shows: the version and its feedback */
	const char *tmpl;
	char task_id[256], backend[16];
	json_t *baseline;
} pending;

typedef struct pending_list {
	pending *v;
	int n, cap;
} pending_list;

static void pending_free(pending_list *l)
{
	for (int i = 0; i < l->n; i++) {
		free(l->v[i].path);
		free(l->v[i].prompt);
		free(l->v[i].source);
		free(l->v[i].previous_code);
		free(l->v[i].feedback);
		json_decref(l->v[i].baseline);
	}
	free(l->v);
	memset(l, 0, sizeof *l);
}

static int by_attempt(const void *a, const void *b)
{
	const pending *x = a, *y = b;
	if (x->attempt != y->attempt)
		return x->attempt < y->attempt ? -1 : 1;
	if (x->segment != y->segment)
		return x->segment < y->segment ? -1 : 1;
	return (x->order > y->order) - (x->order < y->order);
}

static int remember(run_state *R, const char *stage, const char *status, double speedup)
{
	json_t *h = json_pack("{s:i,s:s,s:s}", "attempt", R->attempt, "stage", stage, "status",
	                      status);
	if (h && speedup > 0 && json_object_set_new(h, "speedup", json_real(speedup))) {
		json_decref(h);
		return -1;
	}
	return h ? json_array_append_new(R->history, h) : -1;
}

/* An attempt none of whose answers held code counts in the history as "no_code". */
static int close_attempt(run_state *R)
{
	int r = 0;
	if (R->attempt_no_code && !R->attempt_feedback)
		r = remember(R, (R->stage ? R->stage : "?"), "no_code", 0);
	R->attempt_no_code = R->attempt_feedback = 0;
	return r;
}

static void run_reset(run_state *R)
{
	json_decref(R->vars);
	json_decref(R->history);
	json_decref(R->codes);
	json_decref(R->verdicts);
	int segment = R->segment;
	memset(R, 0, sizeof *R);
	R->segment = segment;
}

static json_t *baseline_of(const json_t *verdict)
{
	const json_t *b = json_object_get(verdict, "baselines");
	if (!json_is_object(b))
		return NULL;
	const json_t *r = json_object_get(b, "reference_ms"), *e = json_object_get(b, "expert_ms");
	return json_pack("{s:O,s:O}", "reference", json_is_number(r) ? r : json_null(), "expert",
	                 json_is_number(e) ? e : json_null());
}

/* The dataset record of one judged version (on_feedback). */
static int add_pending(exporter *X, run_state *R, const char *path, const json_t *verdict,
                       const json_t *code_rec, const char *code, const char *text, int ok,
                       const char *file, pending_list *out)
{
	if (!R->vars) {
		st_task *t;
		if (task_find(X, R->task_id, &t))
			return -1;
		int host = !strcmp(R->backend, "host");
		if (!(R->vars = st_agent_task_vars(t, host, "sm_90a", R->target_speedup,
		                          host ? "none (this backend has no profiler)"
		                               : "none (not recorded in the trajectory)")))
			return oom(X);
	}
	/* The arch the version was built for, which the run's prompts named too. */
	const char *arch = json_string_value(json_object_get(verdict, "arch"));
	if (!strcmp(R->backend, "host"))
		arch = "host CPU";
	char *plan_txt = R->plan ? json_dumps(R->plan, JSON_INDENT(2)) : NULL;
	char *steps = st_agent_steps_text(R->plan);
	char *hist = st_agent_history_text(R->history);
	int bad = !steps || !hist || set_str(R->vars, "arch", arch ? arch : "sm_90a") ||
	          set_str(R->vars, "plan", plan_txt ? plan_txt : "{}") ||
	          set_str(R->vars, "step", steps) ||
	          set_str(R->vars, "history", *hist ? hist : "none yet") ||
	          set_str(R->vars, "previous_code", code) || set_str(R->vars, "feedback", text);
	free(plan_txt);
	free(steps);
	free(hist);
	if (bad)
		return oom(X);
	const char *tmpl = ok ? "coder-optimise" : "coder-repair";
	char *prompt = NULL;
	if (render(X, tmpl, R->vars, &prompt))
		return -1;
	if (ST_GROW(out->v, out->cap, out->n + 1, 16)) {
		free(prompt);
		return oom(X);
	}
	pending *p = &out->v[out->n];
	memset(p, 0, sizeof *p);
	p->segment = R->segment;
	p->attempt = R->attempt;
	p->order = out->n;
	p->tmpl = tmpl;
	p->prompt = prompt;
	p->previous_code = strdup(code);
	p->feedback = strdup(text);
	snprintf(p->task_id, sizeof p->task_id, "%s", R->task_id);
	snprintf(p->backend, sizeof p->backend, "%s", R->backend);
	const char *sha = st_json_str_or(code_rec, "version", "?");
	size_t slen = strlen(file) + strlen(sha) + 2;
	p->path = strdup(path);
	p->source = malloc(slen);
	if (p->source)
		snprintf(p->source, slen, "%s#%s", file, sha);
	p->baseline = baseline_of(verdict);
	out->n++; /* counted before the checks, so that pending_free releases what was made */
	if (!p->path || !p->source || !p->previous_code || !p->feedback)
		return oom(X);
	return 0;
}


/* Did the version fail on a hidden size set? */
static int failed_hidden(const json_t *verdict)
{
	const char *reason = json_string_value(json_object_get(verdict, "reason"));
	if (reason && !strncmp(reason, "set hidden", 10))
		return 1;
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(verdict, "correctness"), i, c) {
		const char *set = json_string_value(json_object_get(c, "set"));
		if (set && st_set_label_hidden(set) && !json_is_true(json_object_get(c, "ok")))
			return 1;
	}
	return 0;
}

/* A "feedback" record: the version it judged becomes a pending dataset record. A version that
 * failed on a hidden size set gets its feedback made again from the verdict, by the Verifier
 * that now withholds what a hidden set is: a text recorded before it did (or a Verifier
 * model's note) could name the hidden sizes, and a dataset must never teach them. */
static int on_feedback(exporter *X, run_state *R, const json_t *rec, const char *file, int line,
                       pending_list *out)
{
	R->attempt_feedback = 1;
	const char *path = json_string_value(json_object_get(rec, "version"));
	const char *text = json_string_value(json_object_get(rec, "text"));
	if (!path || !text)
		return fail(X, ST_E_INVALID, "%s:%d: a feedback record without version or text", file,
		            line);
	const json_t *verdict = json_object_get(R->verdicts, path);
	const json_t *code_rec = json_object_get(R->codes, path);
	const char *status = st_json_str_or(verdict, "status", "?");
	int ok = !strcmp(status, "ok");
	double speedup = ok ? json_number_value(json_object_get(json_object_get(verdict, "speedup"),
	                                                        "vs_reference"))
	                    : 0;
	if (remember(R, (R->stage ? R->stage : "?"), status, speedup))
		return oom(X);
	const char *code = json_string_value(json_object_get(code_rec, "code"));
	if (R->skip || !code)
		return 0;
	char *remade = NULL;
	if (failed_hidden(verdict)) {
		st_verifier_feedback(verdict, code, R->target_speedup, &remade);
		if (!remade)
			return oom(X);
		text = remade;
	}
	int r = add_pending(X, R, path, verdict, code_rec, code, text, ok, file, out);
	free(remade);
	return r;
}

/* One trajectory record, in file order. */
static int on_record(exporter *X, run_state *R, json_t *rec, const char *file, int line,
                     pending_list *out, json_t **first_baseline)
{
	const char *type = json_string_value(json_object_get(rec, "type"));
	if (!type)
		return fail(X, ST_E_INVALID, "%s:%d: a record without a \"type\"", file, line);
	if (!strcmp(type, "start")) {
		if (close_attempt(R))
			return oom(X);
		run_reset(R);
		R->segment++;
		R->task_id = json_string_value(json_object_get(rec, "task"));
		R->backend = json_string_value(json_object_get(rec, "backend"));
		if (!R->task_id || !R->backend)
			return fail(X, ST_E_INVALID, "%s:%d: a start record without task or backend", file,
			            line);
		const json_t *ts = json_object_get(rec, "target_speedup");
		R->target_speedup = json_is_number(ts) ? json_number_value(ts) : 2;
		R->skip = !task_matches(X, R->task_id) || (X->backend && strcmp(X->backend, R->backend));
		R->history = json_array();
		R->codes = json_object();
		R->verdicts = json_object();
		if (!R->history || !R->codes || !R->verdicts)
			return oom(X);
		return 0;
	}
	if (!R->segment) {
		/* Records before any start: not a stitch trajectory, or one cut at its head. */
		return fail(X, ST_E_INVALID, "%s:%d: a \"%s\" record before the run's start record",
		            file, line, type);
	}
	if (!strcmp(type, "request")) {
		if (strcmp(st_json_str_or(rec, "agent", ""), "coder"))
			return 0;
		if (close_attempt(R))
			return oom(X);
		R->attempt = (int)json_integer_value(json_object_get(rec, "attempt"));
		R->stage = json_string_value(json_object_get(rec, "stage"));
		return 0;
	}
	if (!strcmp(type, "no_code")) {
		R->attempt_no_code = 1;
		return 0;
	}
	if (!strcmp(type, "code")) {
		const char *path = json_string_value(json_object_get(rec, "path"));
		if (path && json_object_set(R->codes, path, rec))
			return oom(X);
		return 0;
	}
	if (!strcmp(type, "verdict")) {
		json_t *v = json_object_get(rec, "verdict");
		const char *path = json_string_value(json_object_get(v, "version_path"));
		if (path && json_object_set(R->verdicts, path, v))
			return oom(X);
		if (!*first_baseline)
			*first_baseline = baseline_of(v);
		return 0;
	}
	if (!strcmp(type, "feedback"))
		return on_feedback(X, R, rec, file, line, out);
	if (!strcmp(type, "plan")) {
		if (close_attempt(R))
			return oom(X);
		R->plan = json_object_get(rec, "plan"); /* rec lives as long as the file's records */
		return 0;
	}
	if (!strcmp(type, "transition")) {
		const char *to = json_string_value(json_object_get(rec, "to"));
		const char *from = json_string_value(json_object_get(rec, "from"));
		/* Back to the Planner after attempts: the workflow marks the replan in the history. */
		if (to && from && !strcmp(to, "plan") && strcmp(from, "plan")) {
			if (close_attempt(R) || remember(R, "plan", "replan", 0))
				return oom(X);
		}
		return 0;
	}
	return 0;
}

static int export_trajectory(exporter *X, const char *file)
{
	char *data = NULL;
	size_t len;
	st_err e;
	st_status s = st_read_file(file, &data, &len, &e);
	if (s)
		return fail(X, s, "%s", e.msg);
	/* Every record stays alive until the file is done: the state borrows from them. */
	json_t *lines = json_array();
	run_state R = {0};
	pending_list out = {0};
	json_t *first_baseline = NULL;
	int r = lines ? 0 : oom(X), line = 0;
	for (char *p = data, *next; !r && p < data + len; p = next) {
		char *nl = memchr(p, '\n', (size_t)(data + len - p));
		next = nl ? nl + 1 : data + len;
		line++;
		size_t n = (size_t)((nl ? nl : data + len) - p);
		if (!n || (n == 1 && *p == '\r'))
			continue;
		json_error_t je;
		json_t *rec = json_loadb(p, n, 0, &je);
		if (!rec || !json_is_object(rec)) {
			json_decref(rec);
			r = fail(X, ST_E_INVALID, "%s:%d: not a JSON object (%s)", file, line,
			         rec ? "another JSON value" : je.text);
			break;
		}
		if (json_array_append_new(lines, rec)) {
			r = oom(X);
			break;
		}
		r = on_record(X, &R, rec, file, line, &out, &first_baseline);
	}
	if (!r && close_attempt(&R))
		r = oom(X);
	/* A resumed run starts over and replays its cached answers, so the versions of an earlier
	 * segment come again in a later one: keep only the later copy. */
	for (int i = 0; !r && i < out.n; i++) {
		pending *p = &out.v[i];
		int repeated = 0;
		for (int k = i + 1; k < out.n && !repeated; k++)
			repeated = out.v[k].segment > p->segment && !strcmp(out.v[k].path, p->path);
		if (repeated)
			p->attempt = -1;
	}
	qsort(out.v, (size_t)out.n, sizeof *out.v, by_attempt);
	for (int i = 0; !r && i < out.n; i++) {
		pending *p = &out.v[i];
		if (p->attempt < 0)
			continue;
		/* A version that was not timed (not correct) borrows the run's baselines: they are the
		 * task's on that machine, not the version's. */
		r = add_record(X, p->prompt, p->task_id, p->tmpl, p->backend,
		               p->baseline ? p->baseline : first_baseline, p->source, p->previous_code,
		               p->feedback);
	}
	pending_free(&out);
	json_decref(first_baseline);
	run_reset(&R);
	json_decref(lines);
	free(data);
	return r;
}

static int export_opt(exporter *X)
{
	strlist files = {0};
	int r = find_trajectories(X, &files);
	for (int i = 0; !r && i < files.n; i++)
		r = export_trajectory(X, files.v[i]);
	strlist_free(&files);
	return r;
}

st_status st_export_records(const st_export_opts *o, json_t **records, st_err *err)
{
	*records = NULL;
	exporter X = {.skill = o->skill, .glob = o->glob, .backend = o->backend,
	              .tasks_root = o->tasks_root};
	snprintf(X.prompts, sizeof X.prompts, "%s", o->prompts_dir);
	int r = 0;
	for (int i = 0; i < o->n_traj_dirs && !r; i++)
		r = strlist_add(&X.traj_dirs, o->traj_dirs[i]) ? oom(&X) : 0;
	for (int i = 0; i < o->n_task_dirs && !r; i++)
		r = strlist_add(&X.task_dirs, o->task_dirs[i]) ? oom(&X) : 0;
	if (!r && !(X.records = json_array()))
		r = oom(&X);
	st_task *t;
	for (int i = 0; i < X.task_dirs.n && !r; i++)
		r = task_add(&X, X.task_dirs.v[i], &t);
	if (!r)
		r = strcmp(X.skill, "opt") ? export_gen(&X) : export_opt(&X);
	for (int i = 0; i < X.n_tasks; i++) {
		st_task_free(X.tasks[i]);
		free(X.tasks[i]);
	}
	free(X.tasks);
	strlist_free(&X.traj_dirs);
	strlist_free(&X.task_dirs);
	if (r) {
		json_decref(X.records);
		return st_err_set(err, X.status ? X.status : ST_E_NOMEM, "%s", X.err.msg);
	}
	*records = X.records;
	return ST_OK;
}
