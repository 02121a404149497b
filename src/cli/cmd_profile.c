/* stitch profile: one solution's st_run on the GPU as a timeline (CUPTI), its roofline and the
 * findings a coder can act on. Runs the verify pipeline on one size set with one seed (a profile
 * of wrong code is no use) and without timing unless asked. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "verify_opts.h"

static void own_table(int *json, st_verify_opts *o, st_opt *t)
{
	const st_opt table[] = {
		{ST_OPT_FLAG, .name = "json", 0, json, NULL,
		 "print the verdict (with its \"profile\") as one JSON object"},
		{ST_OPT_FLAG, .name = "timing", 0, &o->timing, NULL,
		 "also time it against the baselines (the roofline then uses the\n"
		 "median instead of the one profiled run)"},
		{ST_OPT_END},
	};
	memcpy(t, table, sizeof table);
}

static const st_opt_conflict conflicts[] = {{"timing", "no-timing"}, {NULL, NULL}};

static void usage(FILE *f)
{
	st_verify_opts o;
	st_verify_opts_default(&o);
	o.timing = 0;
	o.seeds = 1;
	int json = 0, quiet = 0;
	st_opt own[3], prof[ST_PROFILE_OPT_N], ver[ST_VERIFY_OPT_N];
	own_table(&json, &o, own);
	st_profile_opt_table(&o, prof);
	st_verify_opt_table(&o, &quiet, 1, ver);
	fprintf(f,
	        "usage: stitch profile [options] TASK SOLUTION\n\n"
	        "Check SOLUTION (.cu) on one size set (eval unless --time-set or --sets), then record\n"
	        "one st_run with CUPTI: every kernel, copy, memset, synchronisation and runtime call.\n"
	        "Prints GPU busy time, idle gaps (and what ran either side of the largest: kernels,\n"
	        "copies, memsets), launches, the top kernels, where the run sits under the device's\n"
	        "roofline and ranked findings.\n"
	        "Needs a GPU, the cuda backend and CUPTI (CUDA toolkit). TASK is a task folder or an\n"
	        "id under the suite (%s).\n\n"
	        "options:\n",
	        st_cli_tasks_root());
	st_opt_usage(f, own);
	st_opt_usage(f, prof);
	st_opt_usage(f, ver);
	fprintf(f, "\nexit: 0 profiled, 1 not correct or not profiled, 2 bad input, 3 environment\n"
	           "      (no GPU, no CUPTI)\n");
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
	st_opt own[3];
	own_table(&json, &o, own);
	int r = st_verify_cli_args("profile", own, conflicts, argc, argv, &o, &quiet, pos);
	if (r == -2)
		usage(stderr);
	if (r)
		return ST_EXIT_USAGE;
	if (!o.sets)
		o.sets = o.time_set ? o.time_set : "eval";
	st_verify_slot slot = {0};
	if (!quiet) {
		slot.progress = st_verify_progress_stderr;
		slot.progress_arg = "profile: ";
	}
	json_t *verdict = NULL;
	int rc = st_verify_cli_run(pos[0], pos[1], &o, &slot, json, &verdict);
	if (rc)
		return rc;
	const json_t *prof = json_object_get(verdict, "profile");
	int ok = prof && !json_object_get(prof, "error") &&
	         !strcmp(json_string_value(json_object_get(verdict, "status")), "ok");
	json_decref(verdict);
	return ok ? ST_EXIT_OK : ST_EXIT_NO;
}
