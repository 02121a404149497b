/* stitch profile: one solution's st_run on the GPU as a timeline (CUPTI), its roofline and the
 * findings a coder can act on. Runs the verify pipeline on one size set with one seed (a profile
 * of wrong code is no use) and without timing unless asked. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
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

static int profile_flag(st_verify_opts *o, int argc, char **argv, int *i)
{
	(void)argc;
	if (strcmp(argv[*i], "--timing"))
		return 0;
	o->timing = 1;
	return 1;
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
	int r = st_verify_cli_args("profile", argc, argv, &o, profile_flag, &json, &quiet, pos);
	if (r == -2)
		usage(stderr);
	if (r)
		return ST_EXIT_USAGE;
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
	json_t *verdict = NULL;
	int rc = st_verify_cli_run(pos[0], pos[1], &o, json, &verdict);
	if (rc)
		return rc;
	const json_t *prof = json_object_get(verdict, "profile");
	int ok = prof && !json_object_get(prof, "error") &&
	         !strcmp(json_string_value(json_object_get(verdict, "status")), "ok");
	json_decref(verdict);
	return ok ? ST_EXIT_OK : ST_EXIT_NO;
}
