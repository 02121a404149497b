/* stitch profile: one solution's st_run on the GPU as a timeline (CUPTI), its roofline and the
 * findings a coder can act on. Runs the verify pipeline on one size set with one seed (a profile
 * of wrong code is no use) and without timing unless asked. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "task/task.h"
#include "verify_opts.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: stitch profile [options] TASK SOLUTION\n\n"
	        "Check SOLUTION on one size set (eval unless --time-set), then record one st_run with\n"
	        "CUPTI: every kernel, copy, memset, synchronisation and runtime call. Prints GPU busy\n"
	        "time, idle gaps, launches, the top kernels, where the run sits under the device's\n"
	        "roofline and ranked findings. Needs the cuda backend and CUPTI (CUDA toolkit).\n"
	        "TASK is a task folder or an id under the suite (%s).\n\n"
	        "options:\n"
	        "  --json           print the verdict (with its \"profile\") as one JSON object\n"
	        "  --timing         also time it against the baselines (the roofline then uses the\n"
	        "                   median instead of the one profiled run)\n"
	        ST_PROFILE_OPTS_HELP ST_VERIFY_OPTS_HELP
	        "\nexit: 0 profiled, 1 not correct or not profiled, 2 bad input, 3 environment\n",
	        st_cli_tasks_root());
}

int cmd_profile(int argc, char **argv)
{
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	st_verify_opts o;
	st_verify_opts_default(&o);
	o.timing = 0;
	o.seeds = 1;
	int json = 0, quiet = 0;
	const char *pos[2];
	int n_pos = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
			continue;
		}
		if (!strcmp(argv[i], "--timing")) {
			o.timing = 1;
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
			st_cli_error("profile: unknown option '%s'; see 'stitch profile --help'", argv[i]);
			return ST_EXIT_USAGE;
		}
		if (n_pos == 2) {
			st_cli_error("profile: too many arguments; see 'stitch profile --help'");
			return ST_EXIT_USAGE;
		}
		pos[n_pos++] = argv[i];
	}
	if (n_pos != 2) {
		usage(stderr);
		return ST_EXIT_USAGE;
	}
	if (strcmp(o.backend, "cuda")) {
		st_cli_error("profile: needs the cuda backend (CUPTI records GPU activity)");
		return ST_EXIT_USAGE;
	}
	if (!o.sets)
		o.sets = o.time_set ? o.time_set : "eval";
	if (!quiet) {
		o.progress = st_verify_progress_stderr;
		o.progress_arg = "profile: ";
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
	const json_t *prof = verdict ? json_object_get(verdict, "profile") : NULL;
	int ok = prof && !json_object_get(prof, "error") &&
	         !strcmp(json_string_value(json_object_get(verdict, "status")), "ok");
	json_decref(verdict);
	if (s) {
		st_cli_error("%s", err.msg);
		return s == ST_E_INVALID ? ST_EXIT_USAGE : ST_EXIT_ENV;
	}
	return ok ? ST_EXIT_OK : ST_EXIT_NO;
}
