/* The shared option parser of `verify` and `bench`. */
#include "verify_opts.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/clock.h"
#include "common/fs.h"
#include "task/task.h"

int st_cli_output_folder_ok(const char *opt, const char *path)
{
	char dir[4096];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash)
		slash[slash == dir] = '\0';
	if (!st_dir_exists(slash ? dir : ".")) {
		st_cli_error("%s %s: folder %s does not exist", opt, path, dir);
		return 0;
	}
	return 1;
}

int st_profile_opt_parse(st_verify_opts *o, int argc, char **argv, int *i)
{
	if (!strcmp(argv[*i], "--ncu")) {
		o->ncu = 1;
		return 1;
	}
	if (strcmp(argv[*i], "--trace"))
		return 0;
	if (*i + 1 >= argc || !argv[*i + 1][0]) {
		st_cli_error("--trace needs a file name");
		return -1;
	}
	o->trace_path = argv[++*i];
	return st_cli_output_folder_ok("--trace", o->trace_path) ? 1 : -1;
}

int st_verify_opt_parse(st_verify_opts *o, int argc, char **argv, int *i, int *quiet)
{
	const char *a = argv[*i];
	static const char *const valued[] = {"--backend", "--arch", "--sets", "--time-set", "--seeds",
	                                     "--seed", "--min-time", "--max-rse", "--max-samples",
	                                     "--timeout", "--compare-threads", NULL};
	if (!strcmp(a, "--no-timing")) {
		o->timing = 0;
		return 1;
	}
	if (!strcmp(a, "--no-cache")) {
		o->no_cache = 1;
		return 1;
	}
	if (!strcmp(a, "--no-sandbox")) {
		o->no_sandbox = 1;
		return 1;
	}
	if (!strcmp(a, "--no-policy")) {
		o->no_policy = 1;
		return 1;
	}
	if (!strcmp(a, "--quiet")) {
		*quiet = 1;
		return 1;
	}
	int k = 0;
	while (valued[k] && strcmp(a, valued[k]))
		k++;
	if (!valued[k])
		return 0;
	if (*i + 1 >= argc) {
		st_cli_error("%s needs a value", a);
		return -1;
	}
	const char *v = argv[++*i];
	double x;
	if (!strcmp(a, "--backend"))
		o->backend = v;
	else if (!strcmp(a, "--arch"))
		o->arch = v;
	else if (!strcmp(a, "--sets"))
		o->sets = v;
	else if (!strcmp(a, "--time-set"))
		o->time_set = v;
	else if (!strcmp(a, "--seeds")) {
		if (st_cli_number(a, v, 1, 100, &x))
			return -1;
		o->seeds = (int)x;
	} else if (!strcmp(a, "--seed")) {
		char *end;
		errno = 0;
		unsigned long long s = strtoull(v, &end, 0);
		if (errno || end == v || *end || s == 0) {
			st_cli_error("--seed: '%s' is not a positive integer", v);
			return -1;
		}
		o->seed = s;
	} else if (!strcmp(a, "--min-time")) {
		if (st_cli_number(a, v, 0, 1e6, &o->stop.min_time_ms))
			return -1;
	} else if (!strcmp(a, "--max-rse")) {
		if (st_cli_number(a, v, 1e-6, 1, &o->stop.max_rse))
			return -1;
	} else if (!strcmp(a, "--max-samples")) {
		if (st_cli_number(a, v, 1, 1e7, &x))
			return -1;
		o->stop.max_samples = (int)x;
	} else if (!strcmp(a, "--timeout")) {
		if (st_cli_number(a, v, 0.1, 86400, &o->timeout_s))
			return -1;
	} else if (!strcmp(a, "--compare-threads")) {
		if (st_cli_number(a, v, 1, 256, &x))
			return -1;
		o->threads = (int)x;
	}
	return 1;
}

static double progress_t0;
static pthread_once_t progress_once = PTHREAD_ONCE_INIT;

static void progress_start(void)
{
	progress_t0 = st_now_s();
}

/* Each line says how long the command has run since its first line (bench's verifies may call
 * this from several threads): where a slow verify spends its time shows. */
void st_verify_progress_stderr(void *arg, const char *line)
{
	pthread_once(&progress_once, progress_start);
	fprintf(stderr, "%s[%6.2f s] %s\n", arg ? (const char *)arg : "", st_now_s() - progress_t0,
	        line);
}

int st_verify_cli_args(const char *verb, int argc, char **argv, st_verify_opts *o,
                       int (*extra)(st_verify_opts *o, int argc, char **argv, int *i),
                       int *json, int *quiet,
                       const char *pos[2])
{
	int n_pos = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			*json = 1;
			continue;
		}
		int r = extra ? extra(o, argc, argv, &i) : 0;
		if (r < 0)
			return -1;
		if (r)
			continue;
		r = st_profile_opt_parse(o, argc, argv, &i);
		if (!r)
			r = st_verify_opt_parse(o, argc, argv, &i, quiet);
		if (r < 0)
			return -1;
		if (r)
			continue;
		if (argv[i][0] == '-' && argv[i][1]) {
			st_cli_error("%s: unknown option '%s'; see 'stitch %s --help'", verb, argv[i], verb);
			return -1;
		}
		if (n_pos == 2) {
			st_cli_error("%s: too many arguments; see 'stitch %s --help'", verb, verb);
			return -1;
		}
		pos[n_pos++] = argv[i];
	}
	return n_pos == 2 ? 0 : -2;
}

int st_verify_cli_run(const char *task, const char *solution, const st_verify_opts *o, int json,
                      json_t **verdict)
{
	*verdict = NULL;
	char dir[4096];
	st_err err;
	if (st_task_resolve(task, st_cli_tasks_root(), dir, sizeof dir, &err)) {
		st_cli_error("%s", err.msg);
		return ST_EXIT_USAGE;
	}
	json_t *v = NULL;
	st_status s = st_verify(dir, solution, o, &v, &err);
	if (v) {
		if (json)
			json_dumpf(v, stdout, JSON_INDENT(2)), fputc('\n', stdout);
		else if (s == ST_OK)
			st_verdict_print(v, stdout);
	}
	if (s) {
		json_decref(v);
		st_cli_error("%s", err.msg);
		return s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
	}
	*verdict = v;
	return ST_EXIT_OK;
}
