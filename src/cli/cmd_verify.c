/* stitch verify: compile, check and time one solution against a task; print the verdict. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "task/task.h"
#include "verify_opts.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: stitch verify [options] TASK SOLUTION\n\n"
	        "Compile SOLUTION (.cu for the cuda backend, .c for host), run it in its own process\n"
	        "against the task's reference (and expert) over secret seeds and every size set,\n"
	        "then time it interleaved with the baselines on cold L2; a correct candidate's st_run\n"
	        "is then profiled once (CUPTI timeline, roofline, findings; cuda backend). TASK is a\n"
	        "task folder or an id such as t1/softmax under the suite (%s).\n\n"
	        "options:\n"
	        "  --json           print the verdict as one JSON object\n"
	        "  --no-profile     leave the profile out (correctness and speed only)\n"
	        ST_PROFILE_OPTS_HELP ST_VERIFY_OPTS_HELP
	        "\nexit: 0 correct, 1 not correct (compile error, crash, timeout, incorrect),\n"
	        "      2 bad input, 3 environment (no GPU, compiler, broken baseline)\n",
	        st_cli_tasks_root());
}

int cmd_verify(int argc, char **argv)
{
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	st_verify_opts o;
	st_verify_opts_default(&o);
	int json = 0, quiet = 0;
	const char *pos[2];
	int n_pos = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
			continue;
		}
		if (!strcmp(argv[i], "--no-profile")) {
			o.profile = 0;
			continue;
		}
		int r = st_profile_opt_parse(&o, argc, argv, &i);
		if (!r)
			r = st_verify_opt_parse(&o, argc, argv, &i, &quiet);
		if (r < 0)
			return ST_EXIT_USAGE;
		if (r)
			continue;
		if (argv[i][0] == '-' && argv[i][1]) {
			st_cli_error("verify: unknown option '%s'; see 'stitch verify --help'", argv[i]);
			return ST_EXIT_USAGE;
		}
		if (n_pos == 2) {
			st_cli_error("verify: too many arguments; see 'stitch verify --help'");
			return ST_EXIT_USAGE;
		}
		pos[n_pos++] = argv[i];
	}
	if (n_pos != 2) {
		usage(stderr);
		return ST_EXIT_USAGE;
	}
	if (o.trace_path && (strcmp(o.backend, "cuda") || !o.profile)) {
		st_cli_error("verify: --trace needs the cuda backend and the profile (no --no-profile)");
		return ST_EXIT_USAGE;
	}
	if (!quiet) {
		o.progress = st_verify_progress_stderr;
		o.progress_arg = "verify: ";
	}
	char dir[4096];
	st_err err;
	if (st_task_resolve(pos[0], st_cli_tasks_root(), dir, sizeof dir, &err)) {
		st_cli_error("%s", err.msg);
		return ST_EXIT_USAGE;
	}
	json_t *verdict = NULL;
	st_status s = st_verify(dir, pos[1], &o, &verdict, &err);
	if (verdict) {
		if (json)
			json_dumpf(verdict, stdout, JSON_INDENT(2)), fputc('\n', stdout);
		else if (s == ST_OK)
			st_verdict_print(verdict, stdout);
	}
	int ok = verdict && !strcmp(json_string_value(json_object_get(verdict, "status")), "ok");
	json_decref(verdict);
	if (s) {
		st_cli_error("%s", err.msg);
		return s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
	}
	return ok ? ST_EXIT_OK : ST_EXIT_NO;
}
