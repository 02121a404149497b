/* stitch verify: compile, check and time one solution against a task; print the verdict. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "verify_opts.h"

/* verify's own options, over the flags cmd_verify reads. */
typedef struct verify_args {
	int json;
} verify_args;

static void own_table(verify_args *a, st_verify_opts *o, st_opt *t)
{
	const st_opt table[] = {
		{ST_OPT_FLAG, .name = "json", 0, &a->json, NULL, "print the verdict as one JSON object"},
		{ST_OPT_FLAG_OFF, .name = "no-profile", 0, &o->profile, NULL,
		 "leave the profile out (correctness and speed only)"},
		{ST_OPT_FLAG, .name = "samples", 0, &o->keep_samples, NULL,
		 "put every timed sample in the JSON verdict, as timing.ROLE.raw:\n"
		 "[event ms, wall ms, SM MHz, throttled] per sample, dropped ones too"},
		{ST_OPT_STRING, .name = "dump", 0, &o->dump_path, "FILE",
		 "write the params, the inputs of the first seed on the timed set\n"
		 "and the solution's outputs for them to FILE (safetensors; the\n"
		 "sizes, task and set as metadata), e.g. to compare with PyTorch"},
		{ST_OPT_STRING, .name = "params", 0, &o->params_path, "FILE",
		 "take the params from FILE (safetensors, by the task's names,\n"
		 "its dtypes and shapes; other tensors are ignored, so a --dump\n"
		 "file works) instead of generating them, e.g. real weights"},
		{ST_OPT_FLAG, .name = "fresh-seeds", 0, &o->fresh_seeds, NULL,
		 "an imported KernelBench task that stores its seeds: draw new\n"
		 "ones now through its PyTorch program, as a task that stores none\n"
		 "always does (needs python3 with torch, STITCH_PYTHON)"},
		{ST_OPT_END},
	};
	memcpy(t, table, sizeof table);
}

/* Timing off and a timed set named: one of the two is a mistake. */
static const st_opt_conflict conflicts[] = {
	{"no-timing", "time-set"},
	{"no-profile", "trace"},
	{"no-profile", "ncu"},
	{NULL, NULL},
};

static void usage(FILE *f)
{
	verify_args a = {0};
	st_verify_opts o;
	st_verify_opts_default(&o);
	int quiet = 0;
	st_opt own[8], prof[ST_PROFILE_OPT_N], ver[ST_VERIFY_OPT_N];
	own_table(&a, &o, own);
	st_profile_opt_table(&o, prof);
	st_verify_opt_table(&o, &quiet, 0, ver);
	fprintf(f,
	        "usage: stitch verify [options] TASK SOLUTION\n\n"
	        "Compile SOLUTION (.cu for the cuda backend, .c for host), run it in its own process\n"
	        "against the task's reference (and expert) over secret seeds and every size set,\n"
	        "then time it interleaved with the baselines on cold L2; a correct candidate's st_run\n"
	        "is then profiled once (CUPTI timeline, roofline, findings; cuda backend). TASK is a\n"
	        "task folder (holding task.json) or an id such as t1/softmax under the suite\n"
	        "(%s). An imported KernelBench task (stitch import) is judged against its\n"
	        "PyTorch program, which draws this verify's seeds under a secret seed (python3\n"
	        "with torch, STITCH_PYTHON), or against the outputs it stored (--store-seeds at\n"
	        "import), and timed against the PyTorch baselines. The first such verify starts a\n"
	        "server that keeps torch imported for the next ones (this user's only; it exits\n"
	        "after STITCH_REF_SERVER_IDLE seconds idle, default 600; STITCH_REF_SERVER=0: none).\n"
	        "Verifies of other processes on the same GPU take turns to measure through a lock\n"
	        "file per GPU in STITCH_GPU_LOCK_DIR (default /tmp/stitch-gpu-locks); a verify\n"
	        "waiting for one says so every 5 s.\n"
	        "\noptions:\n",
	        st_cli_tasks_root());
	st_opt_usage(f, own);
	st_opt_usage(f, prof);
	st_opt_usage(f, ver);
	fprintf(f, "\nNot together: --no-timing and --time-set; --no-profile and --trace or --ncu.\n"
	           "\nexit: 0 correct, 1 not correct (compile error, crash, timeout, incorrect),\n"
	           "      2 bad input, 3 environment (no GPU, compiler, broken baseline)\n");
}

int cmd_verify(int argc, char **argv)
{
	if (st_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ST_EXIT_OK;
	}
	st_verify_opts o;
	st_verify_opts_default(&o);
	verify_args a = {0};
	int quiet = 0;
	const char *pos[2];
	st_opt own[8];
	own_table(&a, &o, own);
	int r = st_verify_cli_args("verify", own, conflicts, argc, argv, &o, &quiet, pos);
	if (r == -2)
		usage(stderr);
	if (r)
		return ST_EXIT_USAGE;
	if ((o.trace_path || o.ncu) && strcmp(o.backend, "cuda")) {
		st_cli_error("verify: %s needs the cuda backend (the profile records GPU activity)",
		             o.trace_path ? "--trace" : "--ncu");
		return ST_EXIT_USAGE;
	}
	if (o.dump_path && !st_cli_output_folder_ok("--dump", o.dump_path))
		return ST_EXIT_USAGE;
	st_verify_slot slot = {0};
	if (!quiet) {
		slot.progress = st_verify_progress_stderr;
		slot.progress_arg = "verify: ";
	}
	json_t *verdict = NULL;
	int rc = st_verify_cli_run(pos[0], pos[1], &o, &slot, a.json, &verdict);
	if (rc)
		return rc;
	int ok = !strcmp(json_string_value(json_object_get(verdict, "status")), "ok");
	json_decref(verdict);
	return ok ? ST_EXIT_OK : ST_EXIT_NO;
}
