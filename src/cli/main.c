/* stitch: the command table and dispatch, git-style (`stitch <verb> [options]`). */
#include "cli.h"
#include "common/paths.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct st_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct st_cmd commands[] = {
	{"tasks", cmd_tasks, "list the benchmark suite (tier, name, sizes, policy)"},
	{"verify", cmd_verify, "compile, check and time one solution against a task; print a verdict"},
	{"profile", cmd_profile, "profile one solution's st_run: timeline, roofline, findings, ncu"},
	{"solve", cmd_solve, "let LLM agents (planner, coder, verifier) write a solution for a task"},
	{"eval", cmd_eval, "evaluate a model on the suite: K samples per task, pass@k, fast_p"},
	{"bench", cmd_bench, "run a solution per task (default: experts); scores, store, report"},
	{"redteam", cmd_redteam, "verify every red-team exploit and check it is caught"},
	{"export", cmd_export, "write RL training datasets (verl, TRL) from the suite and solve runs"},
	{"import", cmd_import, "turn a KernelBench PyTorch program into a task with stored outputs"},
	{"worker", cmd_worker, "take verify jobs from a Redis queue and answer them (one per host)"},
	{"queue", cmd_queue, "submit verify jobs to the Redis queue, or show its state"},
	{"serve", cmd_serve, "serve verify and reward over HTTP for RL trainers (queue, SQLite, metrics)"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: stitch <command> [options]\n\n"
	           "stitch turns GPU workloads into fast standalone CUDA programs and judges CUDA\n"
	           "solutions against reference and expert baselines.\n\ncommands:\n");
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'stitch <command> --help' describes one command.\n"
	           "Exit codes: 0 ok, 1 the answer is no (e.g. incorrect), 2 bad input, "
	           "3 environment (no GPU, no compiler).\n");
}

void st_cli_error(const char *fmt, ...)
{
	va_list ap;
	fputs("stitch: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int st_cli_print(st_buf *b)
{
	int rc = ST_EXIT_OK;
	if (b->oom) {
		st_cli_error("out of memory");
		rc = ST_EXIT_ENV;
	} else {
		fwrite(st_buf_str(b), 1, b->n, stdout);
	}
	st_buf_free(b);
	return rc;
}

int st_cli_number(const char *opt, const char *v, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	/* !(x >= lo) also refuses nan, which every comparison lets through */
	if (errno || end == v || *end || !(x >= lo && x <= hi)) {
		st_cli_error("%s: '%s' is not a number between %g and %g", opt, v, lo, hi);
		return -1;
	}
	*out = x;
	return 0;
}

static char g_tasks_root[4200];
static pthread_once_t g_tasks_root_once = PTHREAD_ONCE_INIT;

static void tasks_root_find(void)
{
	snprintf(g_tasks_root, sizeof g_tasks_root, "%s/tasks", st_home());
}

const char *st_cli_tasks_root(void)
{
	const char *env = getenv("STITCH_TASKS");
	if (env && *env)
		return env;
	pthread_once(&g_tasks_root_once, tasks_root_find); /* serve's threads ask at once */
	return g_tasks_root;
}

int st_cli_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return ST_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("stitch %s\n", STITCH_VERSION);
		return ST_EXIT_OK;
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	st_cli_error("'%s' is not a stitch command; see 'stitch --help'", argv[1]);
	return ST_EXIT_USAGE;
}

json_t *st_cli_commit_id(void)
{
	const char *env = getenv("STITCH_COMMIT");
	if (env && *env)
		return json_string(env);
	char cmd[PATH_MAX + 64];
	/* --dirty: a run from a tree with changes not committed is not a run of that commit */
	snprintf(cmd, sizeof cmd,
	         "git -C '%s' describe --always --dirty --abbrev=7 --exclude='*' 2>/dev/null",
	         st_home());
	FILE *p = popen(cmd, "r");
	char buf[64] = "";
	if (p) {
		if (!fgets(buf, sizeof buf, p))
			buf[0] = 0;
		pclose(p);
	}
	buf[strcspn(buf, "\r\n")] = 0;
	return buf[0] ? json_string(buf) : json_null();
}
