/* The shared option parser of `verify` and `bench`. */
#include "verify_opts.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

static const char *const backends[] = {"cuda", "host", NULL};
static const char *const cuda_only[] = {"cuda", NULL};

void st_verify_opt_table(st_verify_opts *o, int *quiet, int profile, st_opt *t)
{
	/* Defaults are not written here: the usage printer reads them from o, which each command
	 * fills with its own (profile: one seed, no timing; redteam and serve: shorter timing). */
	const st_opt table[] = {
		{ST_OPT_ENUM, .name = "backend", 0, &o->backend, "B",
		 profile ? "cuda, the only one here: CUPTI records GPU activity"
		         : "cuda or host (C solutions on the CPU, one thread; no GPU needed)",
		 .values = profile ? cuda_only : backends},
		{ST_OPT_STRING, .name = "arch", 0, &o->arch, "A",
		 "target architecture, e.g. sm_90a", .unset = "the GPU's own"},
		{ST_OPT_LIST, .name = "sets", 0, &o->sets, "LIST",
		 "size sets checked, a comma list of small, eval, hidden (every\nhidden set) or hiddenN",
		 .unset = profile ? "the --time-set" : "all; host: small"},
		{ST_OPT_STRING, .name = "time-set", 0, &o->time_set, "S",
		 profile ? "size set profiled (and timed with --timing)" : "size set that is timed",
		 .unset = profile ? "eval" : "eval; host: small"},
		{ST_OPT_INT, .name = "seeds", 0, &o->seeds, "N",
		 "correctness seeds per size set, 1 to 100", 1, 100},
		{ST_OPT_UINT64, .name = "seed", 0, &o->seed, "N",
		 "reproducible seeds from N, a positive integer",
		 .min = 1, .unset = "fresh secret seeds"},
		{ST_OPT_FLAG_OFF, .name = "no-timing", 0, &o->timing, NULL,
		 profile ? "do not time (the default here; undoes --timing)" : "check correctness only"},
		{ST_OPT_DOUBLE, .name = "min-time", 0, &o->stop.min_time_ms, "MS",
		 "time in ms to gather per solution before stopping, 0 to 1e6", 0, 1e6},
		{ST_OPT_DOUBLE, .name = "max-rse", 0, &o->stop.max_rse, "X",
		 "stop when the median's relative standard error (from the quartiles:\n"
		 "a disturbed sample does not prolong timing) is below X, 1e-6 to 1", 1e-6, 1},
		{ST_OPT_INT, .name = "max-samples", 0, &o->stop.max_samples, "N",
		 "cap on timed samples per solution, 1 to 1e7", 1, 1e7},
		{ST_OPT_DOUBLE, .name = "timeout", 0, &o->timeout_s, "S",
		 "limit in seconds for one runner request (st_init, a call, a batch),\n0.1 to 86400",
		 0.1, 86400},
		{ST_OPT_INT, .name = "compare-threads", 0, &o->threads, "N",
		 "threads comparing outputs with the reference's, 1 to 256", 1, 256,
		 .unset = "the CPUs this process may use, at most 16"},
		{ST_OPT_FLAG, .name = "no-cache", 0, &o->no_cache, NULL,
		 "compile even when the cache has the result"},
		{ST_OPT_FLAG, .name = "no-sandbox", 0, &o->no_sandbox, NULL,
		 "run solutions without the runner sandbox (verdicts flagged unsandboxed)"},
		{ST_OPT_FLAG, .name = "no-policy", 0, &o->no_policy, NULL,
		 "skip the static source check (flagged unchecked_source); for testing"},
		{ST_OPT_FLAG, .name = "quiet", 0, quiet, NULL, "no progress lines on stderr"},
		{ST_OPT_END},
	};
	_Static_assert(sizeof table / sizeof table[0] <= ST_VERIFY_OPT_N, "ST_VERIFY_OPT_N");
	memcpy(t, table, sizeof table);
}

int st_verify_opt_parse(st_verify_opts *o, int argc, char **argv, int *i, int *quiet)
{
	st_opt ver[ST_VERIFY_OPT_N];
	st_verify_opt_table(o, quiet, 0, ver);
	const st_opt *const tables[] = {ver, NULL};
	st_err err;
	int r = st_opt_parse_one(tables, argc, argv, i, &err);
	if (r < 0)
		st_cli_error("%s", err.msg);
	return r;
}

void st_verify_opts_usage(FILE *f, st_verify_opts *o)
{
	int quiet = 0;
	st_opt ver[ST_VERIFY_OPT_N];
	st_verify_opt_table(o, &quiet, 0, ver);
	st_opt_usage(f, ver);
}

void st_profile_opt_table(st_verify_opts *o, st_opt *t)
{
	const st_opt table[] = {
		{ST_OPT_STRING, .name = "trace", 0, &o->trace_path, "FILE",
		 "write the profiled st_run as a Chrome trace (Perfetto,\n"
		 "chrome://tracing); cuda backend"},
		{ST_OPT_FLAG, .name = "ncu", 0, &o->ncu, NULL,
		 "also measure the kernels with Nsight Compute ($STITCH_NCU or ncu on\n"
		 "PATH): a second pass on the timed set, one seed, NOT sandboxed (run it\n"
		 "on code that passed a sandboxed verify); without ncu the profile says so;\n"
		 "cuda backend"},
		{ST_OPT_END},
	};
	_Static_assert(sizeof table / sizeof table[0] <= ST_PROFILE_OPT_N, "ST_PROFILE_OPT_N");
	memcpy(t, table, sizeof table);
}

int st_cli_parse(const char *verb, const st_opt *const *tables, const st_opt_conflict *conflicts,
                 int argc, char **argv, const char **pos, int max_pos, int *n_pos)
{
	st_err err;
	if (st_opt_parse(tables, conflicts, argc, argv, pos, max_pos, n_pos, &err)) {
		st_cli_error("%s: %s; see 'stitch %s --help'", verb, err.msg, verb);
		return ST_EXIT_USAGE;
	}
	return ST_EXIT_OK;
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

int st_verify_cli_args(const char *verb, const st_opt *own, const st_opt_conflict *conflicts,
                       int argc, char **argv, st_verify_opts *o, int *quiet, const char *pos[2])
{
	st_opt prof[ST_PROFILE_OPT_N], ver[ST_VERIFY_OPT_N];
	st_profile_opt_table(o, prof);
	st_verify_opt_table(o, quiet, !strcmp(verb, "profile"), ver);
	const st_opt *const tables[] = {own, prof, ver, NULL};
	int n_pos;
	if (st_cli_parse(verb, tables, conflicts, argc, argv, pos, 2, &n_pos))
		return -1;
	if (o->trace_path && !st_cli_output_folder_ok("--trace", o->trace_path))
		return -1;
	return n_pos == 2 ? 0 : -2;
}

/* A solution that is not a regular file is bad input, said as precisely as we can. */
static int solution_ok(const char *solution)
{
	struct stat sb;
	if (stat(solution, &sb)) {
		st_cli_error("%s: %s", solution, errno == ENOENT ? "no such file" : strerror(errno));
		return 0;
	}
	if (S_ISDIR(sb.st_mode)) {
		st_cli_error("%s: is a directory, not a solution file", solution);
		return 0;
	}
	if (!S_ISREG(sb.st_mode)) {
		st_cli_error("%s: not a regular file", solution);
		return 0;
	}
	return 1;
}

int st_verify_cli_run(const char *task, const char *solution, const st_verify_opts *o,
                      const st_verify_slot *slot, int json, json_t **verdict)
{
	*verdict = NULL;
	char dir[4096];
	st_err err;
	if (st_task_resolve(task, st_cli_tasks_root(), dir, sizeof dir, &err)) {
		st_cli_error("%s", err.msg);
		return ST_EXIT_USAGE;
	}
	if (!solution_ok(solution))
		return ST_EXIT_USAGE;
	json_t *v = NULL;
	st_status s = st_verify(dir, solution, o, slot, &v, &err);
	if (v) { /* only a verdict comes with one; an error comes with none */
		if (json)
			json_dumpf(v, stdout, JSON_INDENT(2)), fputc('\n', stdout);
		else
			st_verdict_print(v, stdout);
	}
	if (s) {
		json_decref(v);
		/* no GPU, or a build without the CUDA runner: the host backend still works */
		if (!strcmp(o->backend, "cuda") &&
		    (s == ST_E_NODEVICE || strstr(err.msg, "backend 'cuda' not built")))
			st_cli_error("%s; without a GPU, '--backend host' verifies a C solution (.c) on "
			             "the CPU", err.msg);
		else
			st_cli_error("%s", err.msg);
		return s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
	}
	*verdict = v;
	return ST_EXIT_OK;
}
