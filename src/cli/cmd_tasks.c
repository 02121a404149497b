/* `stitch tasks`: list the suite as a table or as JSON. It loads (and so fully validates) every
 * task, which makes it the quickest check for a suite author; a broken task is reported and the
 * listing goes on, so one typo does not hide the rest of the suite. Hidden size sets are only
 * counted, never printed: the JSON output may be shown to agents. */
#include "cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/host_mem.h"
#include "common/opt.h"
#include "task/task.h"
#include "verify/admit.h"
#include "verify/tol_audit.h"

typedef struct listing {
	st_task *tasks;
	char **too_large; /* per task: why a size set does not fit this machine, or NULL */
	int n;
	int failed;
} listing;

static const char *const backends[] = {"host", "cuda", NULL};

static void own_table(int *json, const char **root, int *audit, st_audit_opts *ao, st_opt *t)
{
	const st_opt table[] = {
		{ST_OPT_FLAG, .name = "json", 0, json, NULL, "print JSON instead of a table"},
		{ST_OPT_STRING, .name = "root", 0, root, "DIR",
		 "the suite folder; without it $STITCH_TASKS, else\nthe source tree's tasks/"},
		{ST_OPT_FLAG, .name = "audit", 0, audit, NULL,
		 "the tolerance audit of the TASKs (default:\n"
		 "every task): verify trivial answers (all zeros,\nall "
		 "NaN, the reference output's mean, the first\ninput passed through, the reference's output\nfor "
		 "other inputs) on each size set; a task whose\ncheck admits one is broken"},
		{ST_OPT_ENUM, .name = "backend", 0, &ao->backend, "B", "the audit's backend",
		 .values = backends, .unset = "host"},
		{ST_OPT_LIST, .name = "sets", 0, &ao->sets, "LIST",
		 "the audit's size sets (small, eval, hidden,\nhidden<N>); the eval sets take minutes on a\n"
		 "CPU, and t3/gpt2_forward's hidden0 is beyond a\nrunner call's 120 s there",
		 .unset = "small,hidden on host;\nevery set on cuda"},
		{ST_OPT_END},
	};
	memcpy(t, table, sizeof table);
}

static void usage(FILE *f)
{
	int json = 0, audit = 0;
	const char *root = st_cli_tasks_root(); /* $STITCH_TASKS, else the source tree's tasks/ */
	st_audit_opts ao = {0};
	st_opt opts[6];
	own_table(&json, &root, &audit, &ao, opts);
	fprintf(f, "usage: stitch tasks [--json] [--root DIR]\n"
	           "       stitch tasks --audit [--json] [--backend host|cuda] [--sets LIST] [TASK...]\n\n"
	           "List every task of the suite: id, tier, eval sizes, number of hidden size sets,\n"
	           "policy and allowed libraries. Every task.json is validated on the way; a task\n"
	           "with a size set too large for this machine's memory is marked and warned about.\n\n");
	st_opt_usage(f, opts);
	fprintf(f, "  -h, --help       this text\n\n"
	           "Exit codes: 0 all tasks loaded (audit: every trivial answer rejected), 1 the audit\n"
	           "found a task that admits a trivial answer, 2 bad usage or a task failed to load,\n"
	           "3 an answer could not be judged.\n");
}

static void listing_free(listing *l)
{
	for (int i = 0; i < l->n; i++) {
		st_task_free(&l->tasks[i]);
		free(l->too_large[i]);
	}
	free(l->tasks);
	free(l->too_large);
}

/* A task that loads but whose size set cannot fit this machine's memory (stitch verify refuses it
 * before mapping anything, src/verify/admit.c) is listed with a warning, not as broken: another
 * machine may run it. */
static void too_large(const st_task *t, char **why)
{
	static st_host_mem m;
	static int have = -1;
	char msg[1024];
	st_err e;
	if (have < 0) {
		have = st_host_mem_read(&m, &e) == ST_OK;
		if (!have)
			st_cli_error("tasks: warning: %s; sizes not checked against this machine", e.msg);
	}
	if (have && st_admit_task_warning(t, &m, msg, sizeof msg)) {
		st_cli_error("tasks: warning: %s", msg);
		*why = strdup(msg);
	}
}

/* Load every task under root; failures are reported and counted. */
static int listing_load(const char *root, listing *l)
{
	char **dirs;
	int n;
	st_err err;
	if (st_task_list(root, &dirs, &n, &err)) {
		st_cli_error("tasks: %s", err.msg);
		return -1;
	}
	l->tasks = calloc(n ? (size_t)n : 1, sizeof *l->tasks);
	l->too_large = calloc(n ? (size_t)n : 1, sizeof *l->too_large);
	if (!l->tasks || !l->too_large) {
		free(l->tasks);
		free(l->too_large);
		st_task_list_free(dirs, n);
		st_cli_error("tasks: out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (st_task_load(dirs[i], &l->tasks[l->n], &err)) {
			st_cli_error("tasks: %s", err.msg);
			l->failed++;
		} else {
			too_large(&l->tasks[l->n], &l->too_large[l->n]);
			l->n++;
		}
	}
	st_task_list_free(dirs, n);
	return 0;
}

static void format_sizes(const st_size_set *s, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; i < s->n && used < len; i++) {
		int k = snprintf(buf + used, len - used, "%s%s=%lld", i ? " " : "", s->names[i],
		                 (long long)s->values[i]);
		if (k > 0)
			used += (size_t)k;
	}
}

static void format_libraries(const st_task *t, char *buf, size_t len)
{
	size_t used = 0;
	snprintf(buf, len, "-");
	for (int i = 0; i < t->n_libraries && used < len; i++) {
		int k = snprintf(buf + used, len - used, "%s%s", i ? "," : "", t->libraries[i]);
		if (k > 0)
			used += (size_t)k;
	}
}

static int max_int(int a, int b)
{
	return a > b ? a : b;
}

static void print_table(const listing *l)
{
	char sizes[512], libs[256];
	int w_id = 2, w_sizes = 10;
	for (int i = 0; i < l->n; i++) {
		format_sizes(&l->tasks[i].eval, sizes, sizeof sizes);
		w_id = max_int(w_id, (int)strlen(l->tasks[i].id));
		w_sizes = max_int(w_sizes, (int)strlen(sizes));
	}
	printf("%-*s  %4s  %-*s  %6s  %-11s  %s\n", w_id, "ID", "TIER", w_sizes, "EVAL SIZES",
	       "HIDDEN", "POLICY", "LIBRARIES");
	for (int i = 0; i < l->n; i++) {
		const st_task *t = &l->tasks[i];
		format_sizes(&t->eval, sizes, sizeof sizes);
		format_libraries(t, libs, sizeof libs);
		printf("%-*s  %4d  %-*s  %6d  %-11s  %s%s\n", w_id, t->id, t->tier, w_sizes, sizes,
		       t->n_hidden, st_task_policy_name(t->policy), libs,
		       l->too_large[i] ? "  (TOO LARGE for this machine)" : "");
	}
}

static int print_json(const listing *l)
{
	json_t *arr = json_array();
	for (int i = 0; arr && i < l->n; i++) {
		json_t *o = st_task_json(&l->tasks[i]);
		if (o && l->too_large[i])
			json_object_set_new(o, "too_large", json_string(l->too_large[i]));
		if (!o || json_array_append_new(arr, o)) {
			json_decref(arr);
			arr = NULL;
		}
	}
	char *text = arr ? json_dumps(arr, JSON_INDENT(2)) : NULL;
	json_decref(arr);
	if (!text) {
		st_cli_error("tasks: out of memory");
		return -1;
	}
	puts(text);
	free(text);
	return 0;
}

static void audit_progress(void *arg, const char *line)
{
	(void)arg;
	fprintf(stderr, "audit: %s\n", line);
}

/* --audit: the named tasks (every task when none), one report each; the work is st_audit_task's.
 * Exit 1 when a task admits a trivial answer, 3 when an answer could not be judged. */
static int cmd_audit(const char *root, const char *const *args, int n_args, st_audit_opts *ao,
                     int json)
{
	char **dirs = NULL;
	int n = 0, admitted = 0, errors = 0, bad = 0;
	st_err err;
	if (!n_args && st_task_list(root, &dirs, &n, &err)) {
		st_cli_error("tasks: %s", err.msg);
		return ST_EXIT_USAGE;
	}
	ao->progress = json ? NULL : audit_progress;
	json_t *all = json_array();
	for (int i = 0; i < (n_args ? n_args : n); i++) {
		char dir[4096];
		json_t *rep;
		st_status s = n_args ? st_task_resolve(args[i], root, dir, sizeof dir, &err) : ST_OK;
		if (!s)
			s = st_audit_task(n_args ? dir : dirs[i], ao, &rep, &err);
		if (s) {
			st_cli_error("tasks: --audit %s: %s", n_args ? args[i] : dirs[i], err.msg);
			bad++;
			continue;
		}
		admitted += json_integer_value(json_object_get(rep, "admitted")) > 0;
		errors += json_integer_value(json_object_get(rep, "errors")) > 0;
		if (!json)
			st_audit_print(rep, stdout);
		json_array_append_new(all, rep);
	}
	st_task_list_free(dirs, n);
	if (json) {
		char *text = json_dumps(all, JSON_INDENT(2));
		if (text)
			puts(text);
		free(text);
	} else {
		printf("audit: %zu tasks, %d admit a trivial answer, %d with answers not judged\n",
		       json_array_size(all), admitted, errors);
	}
	json_decref(all);
	return bad ? ST_EXIT_USAGE : admitted ? ST_EXIT_NO : errors ? ST_EXIT_ENV : ST_EXIT_OK;
}

int cmd_tasks(int argc, char **argv)
{
	const char *root = st_cli_tasks_root();
	int json = 0, audit = 0;
	st_audit_opts ao = {0};
	st_err err;
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	st_opt opts[6];
	own_table(&json, &root, &audit, &ao, opts);
	const st_opt *const tables[] = {opts, NULL};
	const char *pos[256];
	int n_pos;
	if (st_opt_parse(tables, NULL, argc, argv, pos, 256, &n_pos, &err)) {
		st_cli_error("tasks: %s; see 'stitch tasks --help'", err.msg);
		return ST_EXIT_USAGE;
	}
	if (audit)
		return cmd_audit(root, pos, n_pos, &ao, json);
	if (n_pos || ao.backend || ao.sets) {
		st_cli_error("tasks: task names, --backend and --sets go with --audit");
		return ST_EXIT_USAGE;
	}
	listing l = {0};
	if (listing_load(root, &l))
		return ST_EXIT_USAGE;
	int rc = 0;
	if (json)
		rc = print_json(&l);
	else
		print_table(&l);
	int failed = l.failed;
	listing_free(&l);
	if (rc)
		return ST_EXIT_ENV;
	return failed ? ST_EXIT_USAGE : ST_EXIT_OK;
}
